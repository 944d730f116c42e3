"""What the scheduler knows about its workers, asked now (:func:`worker_info`), and the watch
that turns a computation stuck behind workers paused at their memory limit into an error
(:class:`PauseWatch`, :func:`compute_watched`); what a ``client=`` may be
(:func:`check_client`); the least memory a worker may be given (:data:`MIN_WORKER_MEMORY`).
Public from :mod:`dask_ps.cluster`."""

from __future__ import annotations

import time

from .exceptions import MemoryLimitError

#: Memory (RSS) of a Dask worker process of dask_ps before any data, measured on Linux x86-64
#: (Python 3.12, distributed 2026.8, numba): a bare worker 62 MiB; after importing dask_ps with
#: its kernels and readers, as a worker of ``dask-ps train`` does, 338 MiB; at its peak in
#: ``dask-ps train lr`` on a 4-line file, 405 MiB. This is the last figure.
WORKER_BASE_MEMORY = 405 * 2**20

#: Least ``memory`` (and ``ps_memory``) a worker is given: :data:`WORKER_BASE_MEMORY` must stay
#: below Dask's default pause fraction (80%) of the limit, with a fifth of it to spare for data
#: and steps (640 MiB). ``--memory 400MiB`` left the workers paused from the start and the
#: command waiting forever; 500 MiB paused them too (a MemoryError after 60 s, on 45 bytes).
MIN_WORKER_MEMORY = -(-int(WORKER_BASE_MEMORY * 1.2 / 0.8) // 2**26) * 2**26


def check_client(client) -> None:
    """Refuse what cannot serve as the cluster of a model or of data partitions: the one
    check of the ``client=`` of :class:`~dask_ps.PSModel` and
    :func:`~dask_ps.partitions.partition` (and so of every estimator).

    Parameters
    ----------
    client : distributed.Client, "local" or None

    Raises
    ------
    ValueError
        A string other than "local", or a client that is closing or closed (naming its
        status).
    TypeError
        Anything else that is no ``distributed.Client``, naming its type.
    """
    if isinstance(client, str):
        if client != "local":
            raise ValueError(f"client must be a distributed.Client, 'local' or None, "
                             f"got {client!r}")
        return
    if client is None:
        return
    if not hasattr(client, "scheduler_info"):
        raise TypeError(f"client must be a distributed.Client, 'local' or None, "
                        f"got {type(client).__name__}")
    if client.status in ("closing", "closed"):
        raise ValueError(f"client is {client.status}: pass an open distributed.Client, "
                         f"'local' (shards in this process) or None")


def worker_info(client) -> dict[str, dict]:
    """The scheduler's workers, asked now.

    ``Client.scheduler_info()`` returns the client's cached identity, and the client's periodic
    refresh (which asks for no workers) can replace it between the fetch and the return, so
    its ``"workers"`` is sometimes empty on a live cluster (distributed 2026.8). This asks the
    scheduler directly.

    Parameters
    ----------
    client : distributed.Client
        A synchronous client.

    Returns
    -------
    dict
        Worker address (``str``) to the scheduler's record of that worker (``"name"``,
        ``"nthreads"``, ``"resources"``, ``"memory_limit"``, ...).

    Raises
    ------
    OSError
        The scheduler cannot be reached.
    """
    from ._compat import scheduler_workers

    return scheduler_workers(client)


#: Seconds every worker a computation waits for may stay paused at its memory limit, with
#: nothing finishing, before the computation gives up (config key ``dask-ps.pause-timeout``).
PAUSE_TIMEOUT = 60.0


class PauseWatch:
    """Turns a computation stuck behind paused workers into a clear :class:`MemoryError`.

    A Dask worker past its memory ``pause`` fraction starts no task until its memory falls;
    with spilling off (or nothing left to spill) it never does, and a computation waiting for
    it hangs (seen: a fit on data 3x the cluster's memory, killed after 900 s). Call
    :meth:`check` whenever a wait for ``pending`` results times out: after ``timeout``
    seconds (default ``dask-ps.pause-timeout``, :data:`PAUSE_TIMEOUT`) in which every
    worker in ``workers`` (default: all) was paused and no result arrived, it raises.

    Parameters
    ----------
    client : distributed.Client
    what : str
        What is waiting, for the message (e.g. "reading the partitions").
    workers : collection of str, optional
        The workers the computation needs.
    timeout : float, optional
    """

    def __init__(self, client, what: str, workers=None, timeout: float | None = None) -> None:
        import dask

        self.client, self.what, self.workers = client, what, workers
        self.timeout = float(dask.config.get("dask-ps.pause-timeout", PAUSE_TIMEOUT)
                             if timeout is None else timeout)
        self.since: float | None = None
        self.pending: int | None = None

    def check(self, pending: int, total: int) -> None:
        """Note that ``pending`` of ``total`` results are still awaited.

        Raises
        ------
        MemoryLimitError
            A :class:`MemoryError`: every needed worker has been paused for ``timeout`` s and
            no result arrived, naming the workers' memory limits and use, and what to change
            (:data:`MIN_WORKER_MEMORY`, when their limit is near it).
        """
        info = worker_info(self.client)
        needed = {a: w for a, w in info.items() if self.workers is None or a in self.workers}
        paused = bool(needed) and all(w.get("status") == "paused" for w in needed.values())
        now = time.monotonic()
        if not paused or pending != self.pending or self.since is None:
            self.since, self.pending = (now if paused else None), pending
            return
        if now - self.since < self.timeout:
            return
        gib = 2.0 ** 30
        used = sum(w.get("metrics", {}).get("memory", 0) for w in needed.values()) / gib
        limit = sum(w.get("memory_limit") or 0 for w in needed.values()) / gib
        least = min((w.get("memory_limit") or 0 for w in needed.values()), default=0)
        small = (f" A worker of dask_ps alone takes about {WORKER_BASE_MEMORY >> 20} MiB "
                 f"before any data: a limit of {least / 2**20:.0f} MiB (dask-ps --memory) "
                 f"leaves it little room; give at least {MIN_WORKER_MEMORY >> 20} MiB, "
                 f"more for data." if 0 < least < 2 * MIN_WORKER_MEMORY else "")
        raise MemoryLimitError(
            f"{self.what}: every worker it needs ({len(needed)}) has been paused at its memory "
            f"limit for {now - self.since:.0f} s, with {pending} of {total} results still to "
            f"come; the workers use {used:.2f} GiB of {limit:.2f} GiB. The data does not fit "
            f"in the cluster's memory: turn Dask's spilling on (distributed.worker.memory."
            f"spill), add workers or memory (dask-ps --memory), or read the data in smaller "
            f"chunks.{small}")


def compute_watched(client, what: str, *collections, interval: float = 1.0) -> tuple:
    """``dask.compute(*collections)`` on ``client``, waited for under a :class:`PauseWatch`:
    a computation whose workers all stay paused at their memory limit fails instead of
    waiting forever (a plain ``dask.compute`` on workers given ``--memory 400MiB`` waited
    until killed).

    Parameters
    ----------
    client : distributed.Client
        A synchronous client.
    what : str
        What is computed, for the message (e.g. "counting the non-zeros of train.svm").
    *collections : dask collections
        Arrays, frames or delayed objects (a list of delayed: ``dask.delayed(list)``);
        anything else (None) is returned as it is, as ``dask.compute`` does.
    interval : float, default 1.0
        Seconds between checks of the workers.

    Returns
    -------
    tuple
        The computed values, one per collection, as ``dask.compute`` returns them.

    Raises
    ------
    MemoryLimitError
        Every worker stayed paused for ``dask-ps.pause-timeout`` seconds
        (:meth:`PauseWatch.check`).
    Exception
        The first error a task raised.
    """
    from dask.base import is_dask_collection

    out = list(collections)  # what is no collection (None) is returned as it is
    lazy = [i for i, c in enumerate(out) if is_dask_collection(c)]
    futures = client.compute([out[i] for i in lazy])
    try:
        wait_watched(client, what, futures, interval)
        for i, value in zip(lazy, client.gather(futures)):
            out[i] = value
        return tuple(out)
    finally:  # released, not cancelled: a caller's futures of the same keys stay
        for f in futures:
            f.release()


def wait_watched(client, what: str, futures: list, interval: float = 1.0) -> None:
    """Wait until every one of ``futures`` is done (finished or failed), under a
    :class:`PauseWatch` (see :func:`compute_watched`).

    Parameters
    ----------
    client : distributed.Client
    what : str
        What is awaited, for the message.
    futures : list of distributed.Future
    interval : float, default 1.0
        Seconds between checks of the workers.

    Raises
    ------
    MemoryLimitError
        Every worker stayed paused for ``dask-ps.pause-timeout`` seconds.
    """
    from distributed import wait

    watch = PauseWatch(client, what)
    while True:
        try:
            wait(futures, timeout=interval)
            return
        except TimeoutError:
            watch.check(sum(not f.done() for f in futures), len(futures))


def compute(*collections, what: str) -> tuple:
    """``dask.compute(*collections)``, through :func:`compute_watched` when it runs on a
    distributed client (the current scheduler, as ``dask.compute`` would pick it): the first
    pass of a reader never waits forever on workers paused at their memory limit.

    Parameters
    ----------
    *collections : dask collections
    what : str
        What is computed, for the message.

    Returns
    -------
    tuple
        As ``dask.compute`` returns it.

    Raises
    ------
    MemoryLimitError
        On a distributed client: every worker stayed paused (:class:`PauseWatch`).
    """
    import dask
    from dask.base import get_scheduler

    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):  # no client: dask's local schedulers
        return dask.compute(*collections)
    if get_scheduler(collections=list(collections)) != client.get or client.asynchronous:
        return dask.compute(*collections)
    return compute_watched(client, what, *collections)
