"""Pieces of :mod:`dask_ps.cluster`: the check that an existing scheduler's address (modes
"address" and "file") is a Dask scheduler's, before a ``distributed.Client`` waits on it
(first that anything listens there at all, :func:`_check_listening`), and a new
scheduler's dashboard address: its check (:func:`check_dashboard_address`) and its keywords
(:func:`dashboard_options`)."""

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


#: Seconds a plain TCP connection to an existing scheduler's address may take before the
#: address is said not to answer (:func:`_check_listening`; the spec's timeout if shorter).
LISTEN_TIMEOUT = 5.0


def _check_listening(spec, address: str, timeout: float) -> None:
    """Refuse an existing scheduler's ``tcp://`` address (mode "address", or the address a
    scheduler file gives) where nothing listens, with one plain TCP connection, closed at
    once, before Dask's connect: Dask retries a refused connection until its timeout (30 s
    by default), so a scheduler that is not running was reported only then. The one check
    of :func:`_probe_scheduler` (the CLI's ``--scheduler-address`` and ``--scheduler-file``
    and :func:`~dask_ps.cluster.connect`).

    Parameters
    ----------
    spec : ClusterSpec
        Mode "address" or "file" (the option the message names).
    address : str
        ``tcp://host:port``.
    timeout : float
        Seconds for the connection, at most :data:`LISTEN_TIMEOUT`.

    Raises
    ------
    ConnectionRefusedError
        Nothing listens at the address: naming the option and the address, and what to do
        (start the scheduler, or leave the option out for a local cluster).
    TimeoutError
        No answer to the connection within ``min(timeout, LISTEN_TIMEOUT)`` seconds (a
        host that is down, a firewall dropping it).
    OSError
        Another reason the system gives (an unknown host name, no route to the host),
        naming it.
    """
    import socket

    from distributed.comm import get_address_host_port

    host, port = get_address_host_port(address)
    wait = min(float(timeout), LISTEN_TIMEOUT)
    if spec.mode == "file":
        where = f"--scheduler-file {spec.scheduler_file}: the address it gives, {address}"
        todo = ("is its scheduler still running? (the file may be left over from an "
                "earlier job) Start it again, or leave out --scheduler-file to use a local "
                "cluster")
    else:
        where = f"--scheduler-address {address}"
        todo = (f"start the Dask scheduler there first (dask scheduler --port {port}), or "
                f"leave out --scheduler-address to use a local cluster")
    try:
        socket.create_connection((host, port), timeout=wait).close()
    except ConnectionRefusedError:
        raise ConnectionRefusedError(f"{where}: nothing is listening there (connection "
                                     f"refused): {todo}") from None
    except TimeoutError:  # (socket.timeout)
        raise TimeoutError(f"{where}: did not answer within {wait:g} s (no TCP connection: "
                           f"is the host up, and the port open to this machine?)") from None
    except socket.gaierror as err:
        raise OSError(f"{where}: its host {host!r} is not a known host name here "
                      f"({err.strerror or err})") from None
    except OSError as err:  # no route to the host, ...
        raise OSError(f"{where}: cannot connect ({err.strerror or err})") from None


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
    ConnectionRefusedError, TimeoutError, OSError
        Nothing listens there, or nothing answers (:func:`_check_listening`, then
        :func:`_unreachable`).
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
    _check_listening(spec, address, timeout)
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


def dashboard_options(address) -> dict:
    """The keywords of a new scheduler (``distributed.Scheduler``'s, as a LocalCluster's
    ``scheduler_kwargs``, dask-jobqueue's ``scheduler_options``, SLURMRunner's) for the
    dashboard address ``address`` of :class:`~dask_ps.cluster.ClusterSpec`: the one place
    :func:`~dask_ps.cluster.connect` says them, in every mode that starts a scheduler.

    Parameters
    ----------
    address : str, int, list or None
        As checked by :func:`check_dashboard_address`; None: no dashboard.

    Returns
    -------
    dict
        ``{"dashboard_address": address}``; for None, no dashboard (``dashboard=False``)
        and Dask's HTTP server (health, metrics: a scheduler serves it without a dashboard)
        on a free port, ``":0"``: Dask's ``dashboard_address=None`` serves it on port 8787,
        and warns "Port 8787 is already in use" (a UserWarning) when another cluster has it.
    """
    if address is None:
        return {"dashboard": False, "dashboard_address": ":0"}
    return {"dashboard_address": address}


def check_dashboard_address(address, name: str | None = "dashboard_address",
                            none: str = "None") -> None:
    """Refuse a dashboard address Dask cannot read, as Dask reads it
    (``distributed.utils.clean_dashboard_address``, not imported here): a string of
    addresses joined by commas, each ``PORT``, ``HOST:PORT``, ``:PORT`` or ``HOST`` (port
    0), a port (int), or a list of those; a port an integer from 0 to 65535 (0: a free
    one). The one check of :class:`~dask_ps.cluster.ClusterSpec`'s ``dashboard_address``
    (at construction) and of ``--dashboard-address``. An address Dask cannot read failed
    as "unexpected ValueError" once the cluster started; a port out of range was replaced
    by a free one, with a warning; the string ``"none"`` was a host of that name.

    Parameters
    ----------
    address : str, int or list
        Not None (no dashboard: the caller's to allow).
    name : str or None, default "dashboard_address"
        What the error names first (None: nothing, as argparse names the option itself).
    none : str, default "None"
        How the caller says "no dashboard" (``--dashboard-address none``).

    Raises
    ------
    OptionError
        A ValueError naming ``name``, the address (and the list or string it is part of)
        and what is wrong: more than one ':', a port that is not an integer or not in 0 to
        65535, or the word "none" as a host.
    TypeError
        An address of another type, naming it.
    """
    head = f"{name} " if name else ""
    if isinstance(address, (list, tuple)):
        parts = list(address)
    elif isinstance(address, str):
        parts = address.split(",")
    else:
        parts = [address]
    single = len(parts) == 1 and not isinstance(address, (list, tuple))
    for part in parts:
        where = head + (repr(part) if single else f"{part!r} (of {address!r})")
        if isinstance(part, bool) or not isinstance(part, (int, str)):
            raise TypeError(f"{where}: a dashboard address is a str (HOST:PORT, :PORT, "
                            f"PORT or HOST), a port (int) or a list of them, or {none} for "
                            f"no dashboard; got {type(part).__name__}")
        if isinstance(part, str) and part.strip().lower() == "none":
            raise OptionError(f"{where} would be a host named {part!r}: for no dashboard "
                              f"give {none}")
        if isinstance(part, str) and not part.strip().lstrip("+-").isdigit():
            host_port = part.split(":")
            if len(host_port) > 2:
                raise OptionError(f"{where} is not HOST:PORT (more than one ':'; Dask takes "
                                  f"no IPv6 host here), nor {none}")
            if len(host_port) == 1:
                continue  # a host alone: Dask takes a free port
            try:
                port = int(host_port[1])
            except ValueError:
                raise OptionError(f"{where}: its port {host_port[1]!r} is not an integer "
                                  f"(give HOST:PORT, :PORT, PORT, or {none} for no "
                                  f"dashboard)") from None
        else:
            port = int(part)
        if not 0 <= port <= 65535:
            raise OptionError(f"{where}: its port {port} is not in 0 to 65535 (0: a free "
                              f"port)")


def check_dashboard_host(address, name: str = "--dashboard-address") -> None:
    """Refuse a new scheduler's dashboard address whose host this machine cannot listen on:
    a name that does not resolve, or an address of another machine. Dask's scheduler
    failed to start on it ("unexpected RuntimeError: Cluster failed to start: [Errno -2]
    Name or service not known", a traceback asking for a bug report). Called by
    :meth:`~dask_ps.cluster.ClusterSpec.check` where the scheduler starts in this process
    (modes "local" and the batch systems'), after :func:`check_dashboard_address`.

    Raises
    ------
    OptionError
        Naming ``name``, the address, the host and what the system said.
    """
    import socket

    parts = list(address) if isinstance(address, (list, tuple)) else str(address).split(",")
    for part in parts:
        host = part.split(":")[0].strip() if isinstance(part, str) else ""
        if not host or host.lstrip("+-").isdigit():
            continue  # a port alone: Dask's own host
        where = f"{name} {address!r}" + (f": its host {host!r}" if host != address else "")
        try:
            family, kind, proto, _, sockaddr = socket.getaddrinfo(
                host, 0, type=socket.SOCK_STREAM)[0]
        except (socket.gaierror, UnicodeError) as err:
            why = getattr(err, "strerror", None) or err
            raise OptionError(f"{where} is not a known host name here ({why}); give a host "
                              f"or address of this machine, or only :PORT") from None
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(sockaddr)  # (port 0: any free one; nothing listens)
        except OSError as err:
            raise OptionError(f"{where} ({sockaddr[0]}) is not an address of this machine, "
                              f"where the scheduler serves its dashboard "
                              f"({err.strerror or err}); give one of its own, or only "
                              f":PORT") from None
