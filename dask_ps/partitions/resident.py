"""Objects resident next to the data: one per worker holding partitions, called directly.

A job of :meth:`~dask_ps.PSModel.run` costs a scheduler round trip per task, the job's
start and end on every shard and the driver's watch of the workers: tens of milliseconds on
an idle machine (118 ms measured for an empty job of two tasks under load 11, where a pair
of direct calls to two actors took 12-26 ms). A full-batch solver evaluates its objective
dozens of times per fit, each evaluation a few milliseconds of work on a9a-sized data, so it
keeps, on each worker holding partitions, an object built from that worker's
:class:`~dask_ps.partitions.Partition` handles (a Dask actor: see the distributed docs on
actors) and calls its methods: one round trip per worker, no scheduler task, no shard.

The calls themselves skip Dask's actor RPC where the worker's comms allow it: the actor
opens a direct channel (:mod:`~dask_ps.state.channel`: an authenticated TCP connection, TLS
when the cluster's comms are) and each call is one request on it, answered by the object in
the connection's thread, without the worker's event loop or the client's. A Dask actor call
costs two event loops and Dask's RPC on each side (12-26 ms for a pair of calls under load
11, ~94 ms per L-BFGS evaluation of a9a at load 14 where the evaluation's work was 3.5 ms);
the channel's round trip is a bare socket's. Where no channel can be opened (UCX, inproc
comms, ``dask-ps.channel`` false, a TLS cluster whose client has no TLS context), the calls
go through the actor.

A method may use threads of its own (numba kernels release the GIL) for the tasks of a
worker with several threads. Without a cluster, the objects live in this process and are
called in threads.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import dask

from .. import _compat
from ..exceptions import WorkerLostError
from ..state.channel import ChannelServer, SyncChannel
from ..state.channel_security import channel_endpoint
from .core import Partitions

__all__ = ["Residents"]

#: Seconds between checks, while a call waits, that the objects' workers are alive.
WATCH_INTERVAL = 0.5
#: Seconds given to the scheduler to see a worker gone, once a call's connection broke.
LOST_GRACE = 5.0
#: Seconds a channel call may take to send its request, or to read the rest of a reply
#: once its first bytes came (the wait for those is unbounded, watched as above).
TRANSFER_TIMEOUT = 300.0


class _Host:
    """The actor on a worker: the resident object, and the channel that serves its calls.

    ``cls(handles, *args)`` is built here, on the actor's thread; its methods then run on
    the channel's connection thread (or, without a channel, on the actor's thread through
    :meth:`call`), one call at a time.
    """

    def __init__(self, cls: type, handles: list, *args) -> None:
        self.obj = cls(handles, *args)
        self._channel: ChannelServer | None = None

    def call(self, method: str, args: tuple):
        return self.call_in_thread(method, args, {})

    def call_in_thread(self, method: str, args: tuple, kwargs: dict):
        if method.startswith("_"):
            raise AttributeError(f"{type(self.obj).__name__}.{method} is private")
        return getattr(self.obj, method)(*args, **kwargs)

    async def open_channel(self):
        """Start this object's channel; its :class:`ChannelAddress`, or None where the
        worker's comms allow none."""
        endpoint = channel_endpoint()
        if self._channel is None and endpoint is not None:
            self._channel = ChannelServer(endpoint[0], self, endpoint[1])
        return None if self._channel is None else self._channel.address

    async def close_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


def _client_ssl_context(client):
    """The client's TLS context for connecting to workers, or None."""
    args = client.security.get_connection_args("client")
    return args.get("ssl_context")


class Residents:
    """One ``cls(tasks, *args)`` per worker holding partitions of ``data``, where ``tasks``
    is that worker's list of tasks, each a list of :class:`Partition` handles (one task per
    worker thread, as in :meth:`Partitions.tasks`).

    Parameters
    ----------
    data : Partitions
    cls : type
        Built on each worker (a Dask actor) or, without a cluster, here. Its constructor
        should not load data (the first method call may, and keep what it builds).
    *args
        More arguments of ``cls``.

    Attributes
    ----------
    workers : list of str
        The workers, in the order of :meth:`call`'s arguments and results.
    tasks : list of list of list of int
        Per worker, its tasks' partition indices.

    Notes
    -----
    Release with :meth:`close` (or a ``with`` block): a worker holding an actor cannot be
    retired.
    """

    def __init__(self, data: Partitions, cls: type, *args) -> None:
        refs = data.refs()
        groups: dict[str, list[list[int]]] = {}
        for worker, idx in data.tasks():
            groups.setdefault(worker, []).append(list(idx))
        self.workers = list(groups)
        self.tasks = [groups[w] for w in self.workers]
        handles = [[[refs[i] for i in t] for t in ts] for ts in self.tasks]
        self.client = data.client
        self._futures: list = []
        self._channels: list[SyncChannel] | None = None
        if self.client is None:
            self._objects = [_Host(cls, h, *args) for h in handles]
            self._actors = None
            return
        self._futures = [self.client.submit(_Host, cls, h, *args, workers=[w], actor=True,
                                            allow_other_workers=False, pure=False)
                         for w, h in zip(self.workers, handles)]
        self._actors = [self._wait(f, lambda f, t: f.result(timeout=t), w)
                        for f, w in zip(self._futures, self.workers)]
        if not dask.config.get("dask-ps.channel", True):  # as the caller's config says
            return
        addresses = [self._wait(a.open_channel(), lambda f, t: f.result(timeout=t), w)
                     for a, w in zip(self._actors, self.workers)]
        if all(a is not None for a in addresses):
            context = (_client_ssl_context(self.client) if any(a.tls for a in addresses)
                       else None)
            if context is not None or not any(a.tls for a in addresses):
                self._channels = [SyncChannel(a, context) for a in addresses]

    def call(self, method: str, args: list[tuple]) -> list:
        """``obj.method(*args[i])`` on every worker's object ``i``, concurrently; the results
        in worker order.

        Raises
        ------
        WorkerLostError
            A worker holding an object left the cluster.
        Exception
            The first error of a method.
        """
        if len(args) != len(self.workers):
            raise ValueError(f"{len(args)} argument tuples for {len(self.workers)} workers")
        if self._actors is None:
            if len(args) == 1:
                return [self._objects[0].call(method, args[0])]
            with ThreadPoolExecutor(len(args)) as ex:
                futs = [ex.submit(o.call, method, a) for o, a in zip(self._objects, args)]
                return [f.result() for f in futs]
        if self._channels is not None:
            return self._call_channels(method, args)
        futs = [a.call(method, arg) for a, arg in zip(self._actors, args)]
        return [self._wait(f, lambda f, t: f.result(timeout=t)) for f in futs]

    def _call_channels(self, method: str, args: list[tuple]) -> list:
        """One request per worker on its channel, then the replies in worker order; the
        first error raised once every reply is in (the connections stay in step)."""
        out: list = [None] * len(args)
        errors: dict[int, BaseException] = {}
        try:
            pending = {i: c.start(method, a, {}, TRANSFER_TIMEOUT)
                       for i, (c, a) in enumerate(zip(self._channels, args))}
            while pending:
                order = list(pending)
                ready = SyncChannel.ready([self._channels[i] for i in order], WATCH_INTERVAL)
                if not ready:
                    self._check_alive()
                for j in ready:
                    i = order[j]
                    status, out[i] = self._channels[i].finish(pending.pop(i))
                    if status != "OK":
                        errors[i] = out[i]
        except BaseException as exc:
            for c in self._channels:
                c.abort()  # a request still out spoils its connection: the next call reconnects
            if isinstance(exc, OSError):  # a connection broke: a worker died, or its object
                self._find_lost()  # was released
            raise
        if errors:
            raise errors[min(errors)]
        return out

    def _wait(self, fut, result: Callable[[Any, float], Any], worker: str | None = None):
        """``fut``'s result; a lost ``worker`` (default: any of the objects' workers)
        raises WorkerLostError instead of a hang."""
        while True:
            try:
                return result(fut, WATCH_INTERVAL)
            except TimeoutError:  # still running (or a worker is gone): look
                self._check_alive(worker)
            except (OSError, RuntimeError):  # "Worker holding Actor was lost", ...
                time.sleep(WATCH_INTERVAL)  # the scheduler's view catches up
                self._check_alive(worker)
                raise

    def _find_lost(self) -> None:
        """Raise WorkerLostError if a worker leaves the cluster within a few watch
        intervals (the scheduler learns of a dead worker after its connection did)."""
        deadline = time.monotonic() + LOST_GRACE
        while True:
            self._check_alive()
            if time.monotonic() > deadline:
                return
            time.sleep(WATCH_INTERVAL)

    def _check_alive(self, worker: str | None = None) -> None:
        """Raise WorkerLostError if ``worker`` (default: any of the objects' workers) has
        left the cluster."""
        alive = _compat.scheduler_workers(self.client)
        lost = [w for w in ([worker] if worker else self.workers) if w not in alive]
        if lost:
            raise WorkerLostError(lost, [])

    def close(self) -> None:
        """Release the objects (their actors go with the last reference). Idempotent."""
        for c in self._channels or ():
            c.close()
        for f in self._futures:
            f.release()
        self._futures, self._actors, self._objects, self._channels = [], None, [], None

    def __enter__(self) -> "Residents":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
