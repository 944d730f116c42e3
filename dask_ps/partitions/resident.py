"""Objects resident next to the data: one per worker holding partitions, called directly.

A job of :meth:`~dask_ps.PSModel.run` costs a scheduler round trip per task, the job's
start and end on every shard and the driver's watch of the workers: tens of milliseconds on
an idle machine (118 ms measured for an empty job of two tasks under load 11, where a pair
of direct calls to two actors took 12-26 ms). A full-batch solver evaluates its objective
dozens of times per fit, each evaluation a few milliseconds of work on a9a-sized data, so it
keeps, on each worker holding partitions, an object built from that worker's
:class:`~dask_ps.partitions.Partition` handles (a Dask actor: see the distributed docs on
actors) and calls its methods: one round trip per worker, no scheduler task, no shard.

The object's sync methods run on the worker's actor thread; a method may use threads of its
own (numba kernels release the GIL) for the tasks of a worker with several threads. Without
a cluster, the objects live in this process and are called in threads.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .. import _compat
from ..exceptions import WorkerLostError
from .core import Partitions

__all__ = ["Residents"]

#: Seconds between checks, while a call waits, that the objects' workers are alive.
WATCH_INTERVAL = 0.5


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
        if self.client is None:
            self._objects = [cls(h, *args) for h in handles]
            self._actors = None
            return
        self._futures = [self.client.submit(cls, h, *args, workers=[w], actor=True,
                                            allow_other_workers=False, pure=False)
                         for w, h in zip(self.workers, handles)]
        self._actors = [self._wait(f, lambda f, t: f.result(timeout=t), w)
                        for f, w in zip(self._futures, self.workers)]

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
                return [getattr(self._objects[0], method)(*args[0])]
            with ThreadPoolExecutor(len(args)) as ex:
                futs = [ex.submit(getattr(o, method), *a) for o, a in zip(self._objects, args)]
                return [f.result() for f in futs]
        futs = [getattr(a, method)(*arg) for a, arg in zip(self._actors, args)]
        return [self._wait(f, lambda f, t: f.result(timeout=t), w)
                for f, w in zip(futs, self.workers)]

    def _wait(self, fut, result: Callable[[Any, float], Any], worker: str):
        """``fut``'s result; a lost ``worker`` raises WorkerLostError instead of a hang."""
        while True:
            try:
                return result(fut, WATCH_INTERVAL)
            except TimeoutError:  # still running (or its worker is gone): look
                self._check_alive(worker)
            except (OSError, RuntimeError):  # "Worker holding Actor was lost", ...
                time.sleep(WATCH_INTERVAL)  # the scheduler's view catches up
                self._check_alive(worker)
                raise

    def _check_alive(self, worker: str) -> None:
        if worker not in _compat.scheduler_workers(self.client):
            raise WorkerLostError([worker], [])

    def close(self) -> None:
        """Release the objects (their actors go with the last reference). Idempotent."""
        for f in self._futures:
            f.release()
        self._futures, self._actors, self._objects = [], None, []

    def __enter__(self) -> "Residents":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
