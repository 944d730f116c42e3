"""What the scheduler knows about the cluster's workers, asked at the moment of the call."""

from __future__ import annotations

__all__ = ["worker_info"]


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
