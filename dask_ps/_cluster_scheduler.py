"""Pieces of :mod:`dask_ps.cluster`: the check that an existing scheduler's address (modes
"address" and "file") is a Dask scheduler's, before a ``distributed.Client`` waits on it."""

from __future__ import annotations

from ._cluster_parts import _unreachable
from .exceptions import OptionError


def _scheduler_address(spec) -> str:
    """The address of ``spec``'s existing scheduler: ``address``, or the scheduler file's
    (checked by :func:`_check_scheduler_file`)."""
    if spec.mode != "file":
        return spec.address
    import json

    with open(spec.scheduler_file, "rb") as f:
        return json.loads(f.read(1 << 20))["address"]


def _probe_scheduler(spec, timeout: float) -> None:
    """Refuse an existing scheduler's address (mode "address" or "file") where something
    listens that is not a Dask scheduler, before ``distributed.Client`` is made: Dask's
    connect bounds the TCP connection by its timeout but not its handshake (dask/distributed
    #7698), so a Client of a dashboard's HTTP port, or of a port whose server never answers,
    waited for ever whatever ``--timeout`` said. One connection, Dask's handshake and an
    ``identity`` call, all within ``timeout`` seconds (plus the connect's own retries), in a
    thread of its own (the caller may run an event loop). Addresses of schemes other than
    ``tcp://`` (TLS: the Client's own security settings) are left to the Client.

    Raises
    ------
    OSError, TimeoutError
        Nothing answers (:func:`_unreachable`).
    OptionError
        What answers does not speak Dask's protocol, or is a Dask worker or nanny, naming
        the option.
    """
    import asyncio
    import threading

    from distributed.comm import connect, parse_address
    from distributed.security import Security

    address = _scheduler_address(spec)
    if parse_address(address, strict=False)[0] != "tcp":  # (TLS: Client's own security)
        return
    where = (f"--scheduler-file {spec.scheduler_file}: the address it gives, {address}"
             if spec.mode == "file" else f"--scheduler-address {address}")
    out: dict = {}

    async def identity():
        comm = await connect(address, timeout=timeout,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def probe():
        try:  # the connect's own timeout ends first when nothing listens
            out["reply"] = await asyncio.wait_for(identity(), 2 * timeout)
        except BaseException as exc:  # handed to the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=asyncio.run, args=(probe(),), daemon=True,
                              name="dask-ps-probe-scheduler")
    thread.start()
    thread.join(3 * timeout + 5)
    error = out.get("error")
    if error is None and "reply" not in out:
        error = TimeoutError()
    if isinstance(error, OSError) and str(error).startswith("Timed out trying to connect"):
        raise _unreachable(spec, error) from None  # (a refused connection is retried to it)
    if error is not None:  # connected, then no handshake, garbage, or the connection closed
        why = (f"no reply to Dask's protocol within {2 * timeout:g} s"
               if isinstance(error, TimeoutError) and not str(error) else
               f"what it sent is not Dask's protocol ({type(error).__name__})")
        raise OptionError(f"{where}: a server listens there but does not answer as a Dask "
                          f"scheduler ({why}): is it the scheduler's address (tcp://host:8786 "
                          f"by default), not its dashboard's or another service's?") from None
    reply = out["reply"]
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        raise OptionError(f"{where}: a Dask {kind or 'server'} answers there, not a "
                          f"scheduler: give the scheduler's address (its workers and "
                          f"clients connect to it, tcp://host:8786 by default)")
