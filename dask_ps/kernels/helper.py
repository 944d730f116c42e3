"""A helper thread for a process's large kernels: :func:`run` runs one in two parts.

The numba kernels release the GIL, so a kernel over many keys can run in two threads of one
process: the calling thread and this module's helper (one per process, started at first
use). It is used where the other processes wait for this one, so that the second CPU is
otherwise idle: the plan of a pull of many hashed keys, before any shard has keys to look
up (:func:`~dask_ps.state._plan_kernels.plan_hashed`), and the hash by which a push
recognises the keys of its pull (:func:`~dask_ps.state._kernels.fingerprint`). Where the
other process works at the same time, a split competes with it for the CPUs: the remote
shard's lookup of a 10^6-key pull in two halves, or the pieces of a push put in order ahead
on the helper while the earlier ones are sent, made a pull + push no shorter, or longer, in
alternated runs on 2 CPUs (not kept).

Opt out with the Dask config key ``dask-ps.helper-thread: false`` (environment variable
``DASK_DASK_PS__HELPER_THREAD=false``); a process that may run on one CPU only never uses it.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import dask

__all__ = ["SPLIT_MIN", "halves", "helper_enabled", "run"]

#: Items below which :func:`halves` leaves a kernel to the calling thread alone: waking the
#: helper costs 60-80 us on the 2-CPU machines we measure on, about 10^4 hashed lookups.
SPLIT_MIN = 2**15
#: The calling thread's share of a split (the helper starts a wake-up later): 9/16.
_HEAD = 9 / 16

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()
_idle = threading.Lock()  # held from a part's submission to its end on the helper


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def helper_enabled() -> bool:
    """Whether :func:`halves` may give the helper thread a part: the config allows it
    (``dask-ps.helper-thread``, default true) and the process may run on 2 CPUs or more."""
    return bool(dask.config.get("dask-ps.helper-thread", True)) and _cpus() > 1


def _helper() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="dask-ps-helper")
        return _pool


def _forget_pool() -> None:  # a forked child has no helper thread
    global _pool, _idle
    _pool, _idle = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def halves(n: int, min_n: int = SPLIT_MIN) -> list[tuple[int, int]]:
    """The parts of ``[0, n)`` for :func:`run`: ``[(0, m), (m, n)]`` (``m`` about 9/16 of
    ``n``: the helper starts a little later) when ``n >= min_n`` and the helper is enabled
    (:func:`helper_enabled`), else ``[(0, n)]``."""
    if n < min_n or not helper_enabled():
        return [(0, n)]
    m = int(n * _HEAD)
    return [(0, m), (m, n)]


def run(fn, parts: list[tuple[int, int]]) -> list:
    """``[fn(a, b) for (a, b) in parts]`` (at most 2 parts, from :func:`halves`), the
    second on the helper thread while the calling thread runs the first.

    ``fn`` must release the GIL for most of its time (a numba ``nogil`` kernel) and write
    only to the part ``[a, b)`` of its outputs (or to outputs of its own part). If either
    part raises, the error is raised once both have ended. While the helper runs another
    thread's part (several task threads planning at once, or a part that splits again),
    the calling thread runs both parts itself, one after the other, rather than wait.
    """
    if len(parts) == 1 or not _idle.acquire(blocking=False):
        return [fn(a, b) for a, b in parts]

    def second():
        try:
            return fn(*parts[1])
        finally:
            _idle.release()

    try:
        other = _helper().submit(second)
    except BaseException as exc:
        _idle.release()
        if not isinstance(exc, RuntimeError):
            raise
        return [fn(a, b) for a, b in parts]  # the interpreter is shutting down
    try:
        first = fn(*parts[0])
    finally:
        result = other.result()  # (waits for the helper's part even when ours failed)
    return [first, result]
