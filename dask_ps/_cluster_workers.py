"""What the scheduler knows about its workers, asked now (:func:`worker_info`), and the watch
that turns a computation stuck behind workers paused at their memory limit into an error
(:class:`PauseWatch`); what a ``client=`` may be (:func:`check_client`). Public from
:mod:`dask_ps.cluster`."""

from __future__ import annotations

import time


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
        MemoryError
            Every needed worker has been paused for ``timeout`` s and no result arrived,
            naming the workers' memory limits and use, and what to change.
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
        raise MemoryError(
            f"{self.what}: every worker it needs ({len(needed)}) has been paused at its memory "
            f"limit for {now - self.since:.0f} s, with {pending} of {total} results still to "
            f"come; the workers use {used:.2f} GiB of {limit:.2f} GiB. The data does not fit "
            f"in the cluster's memory: turn Dask's spilling on (distributed.worker.memory."
            f"spill), add workers or memory, or read the data in smaller chunks")
