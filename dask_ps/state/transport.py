"""How a process reaches the shards: one coroutine per shard call, on one event loop.

In a Dask worker, calls run on the worker's event loop: a shard living on the same worker is
called directly (no pickling, no socket), the others through the worker's RPC pool
(``actor_execute``, the handler Dask's own actor proxies use). On the client, calls go
through the client's loop. Without any Dask client the shards live in this process, on a
private event-loop thread, and are called the same way as a same-worker shard.

Every call has a timeout, so a dead shard raises :class:`ShardUnavailableError` instead of
hanging.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import NamedTuple

from distributed.comm.core import CommClosedError
from distributed.protocol import Serialized, serialize

from ..exceptions import ShardUnavailableError

__all__ = ["ShardRef", "Transport", "local_loop", "packed"]


def packed(obj) -> Serialized:
    """``obj`` as one pickle (protocol 5: NumPy buffers travel as their own frames, not
    copied), ready for Dask's comms.

    Dask's own ``to_serialize`` walks tuples, lists and dicts and serialises each element on
    its own: ~250 us for a pull's or a push's arguments where this takes ~45 us, and ~100 us
    to load them again where this takes ~40 us.
    """
    return Serialized(*serialize(obj, serializers=("pickle",), iterate_collection=False))


class ShardRef(NamedTuple):
    """Where a shard lives: its index, its worker's address and its actor key (Dask mode)."""

    index: int
    address: str
    key: str


_local_loop: asyncio.AbstractEventLoop | None = None
_local_lock = threading.Lock()


def local_loop() -> asyncio.AbstractEventLoop:
    """The event loop that hosts in-process shards (started on first use, daemon thread)."""
    global _local_loop
    with _local_lock:
        if _local_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="dask-ps-local-shards",
                             daemon=True).start()
            _local_loop = loop
        return _local_loop


class Transport:
    """Runs shard calls for one process.

    Parameters
    ----------
    shards : list of ShardRef
    loop : asyncio.AbstractEventLoop
        The loop the calls run on.
    local : dict of int to Shard
        Shards callable directly (same worker, or in-process mode).
    rpc : callable or None
        ``rpc(address)`` gives an object with an ``actor_execute`` coroutine method.
    timeout : float
        Seconds before a call is declared failed.
    """

    def __init__(self, shards, loop, local, rpc, timeout: float) -> None:
        self.shards = list(shards)
        self.loop = loop
        self.local = dict(local)
        self._rpc = rpc
        self.timeout = timeout

    async def call(self, s: int, method: str, *args, _timeout: float | None = None, **kwargs):
        """Call ``method`` of shard ``s``; raises what the shard raised, or
        :class:`ShardUnavailableError` when it cannot be reached within ``_timeout`` seconds
        (default: the transport's)."""
        ref = self.shards[s]
        timeout = self.timeout if _timeout is None else _timeout
        if s in self.local:
            # In-process: nothing can be lost on the way, and a pull that waits for clocks
            # times out inside the shard (with a message naming the slow participants).
            return await getattr(self.local[s], method)(*args, **kwargs)
        try:
            async with asyncio.timeout(timeout):  # cheaper than wait_for: no extra task
                resp = await self._rpc(ref.address).actor_execute(
                    actor=ref.key, function="dispatch", args=[packed((method, args, kwargs))],
                    kwargs={})
        except TimeoutError:  # before OSError, its base class
            raise ShardUnavailableError(
                s, ref.address, f"{method} got no answer within {timeout:g} s") from None
        except (OSError, CommClosedError) as exc:
            raise ShardUnavailableError(s, ref.address, f"{method} failed: {exc!r}") from exc
        if resp["status"] == "OK":
            return resp["result"]
        raise resp["exception"]

    async def call_all(self, method: str, *args, **kwargs) -> list:
        """The same call on every shard, concurrently; results in shard order."""
        return list(await asyncio.gather(*(self.call(s, method, *args, **kwargs)
                                           for s in range(len(self.shards)))))

    def submit(self, coro) -> Future:
        """Start ``coro`` on the transport's loop from another thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro):
        """Run ``coro`` on the transport's loop and wait for its result.

        Raises
        ------
        RuntimeError
            When called from the loop's own thread, where waiting would deadlock.
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("dask_ps blocking calls cannot run on the event loop that serves "
                               "them; use the *_async methods from coroutines")
        return self.submit(coro).result()
