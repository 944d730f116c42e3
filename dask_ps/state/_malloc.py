"""Memory settings for the worker processes that serve and call shards: glibc's allocator,
Python's cyclic garbage collector.

Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``. Setting that threshold also
turns off glibc's adaptive mmap threshold, so every allocation of 128 KiB or more becomes a
fresh ``mmap``, page-faulted (and zeroed) on first touch and unmapped when freed. A pull or push
allocates a few such arrays per call (keys, values, their plans, the comm's receive buffers):
on this machine an 800 kB temporary cost 0.35 ms instead of 0.015 ms, an 8 MB one 1.5-6 ms
instead of 0.15 ms (benchmarks/ps_core.py --tuned-malloc). :func:`tune_malloc` keeps blocks
below a threshold on the heap and trims it only beyond that much free space at its top, so a
worker keeps at most that much freed memory per allocator arena (one per thread that
allocates: the task's, the shard's, the event loop's...). The threshold is 32 MiB, or 1/128 of
the worker's memory limit when smaller (:func:`malloc_threshold`): on a 1 GiB worker training a
2^24-feature model, 32 MiB kept 0.19-0.22 GiB of freed step buffers in the arenas during a
step (glibc's ``mallinfo2``; the process peaked at 0.87-0.90 GiB, past Dask's pause
threshold), 8 MiB kept 0.04-0.08 GiB (step times alike within this shared machine's noise;
the allocations from 8 to 32 MiB are fresh mmaps again, a few per step of seconds).

Opt out with the Dask config key ``dask-ps.tune-malloc: false`` (environment variable
``DASK_DASK_PS__TUNE_MALLOC=False``).

A large table filled with zeros comes from ``calloc``: its pages take memory only when first
written, typically all at once in the first training step (a 2^24-row FTRL table's keys touch
every page). :func:`untouched_bytes` measures the part not yet in memory, so that a worker's
memory budget counts the whole table before the step commits it.

Python's collector: a full (generation 2) collection walks every object the process holds,
and a Dask worker holds a few hundred thousand (its modules, its state) before training starts.
In the first fit of a fresh cluster, each worker ran one such collection during the fit, 0.11-0.13
s with the GIL held (Python's ``gc.callbacks``; a 10^6-row CTR set, 2 workers: 0.25-0.3 s of a
1.5-1.65 s fit). :func:`freeze_gc` moves what a worker holds when it first serves dask_ps to
the permanent generation (:func:`gc.freeze`), once: later collections walk only what came
after. Objects frozen then are not examined again: one that later ends in a reference cycle
is not freed (plain reference counting still frees the rest, e.g. arrays); hence the shard and
the process client call it in ``__new__`` (:class:`FreezeGCFirst`), before they exist. Opt out
with ``dask-ps.freeze-gc: false``.

Both settings apply only to a worker in a process of its own, started by a nanny
(:func:`dask_ps._compat.in_own_process`): the workers of a ``LocalCluster(processes=False)``
are threads of the user's process, whose allocator and objects stay the user's (frozen there,
the user's objects that later end in cycles would never be freed). The nanny is also what sets
``MALLOC_TRIM_THRESHOLD_``.

Freed memory kept by the allocators counts as the worker's *unmanaged* memory, which Dask cannot
spill: :func:`release_memory` hands it back to the system between the steps of a training
task when the worker's memory is short (measured on a 2 GiB worker reading 250,000-row Parquet
row groups: pyarrow's mimalloc pool kept ~140 MB after the reads, glibc's heap ~20 MB more).
"""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

__all__ = ["MALLOC_THRESHOLD", "RELEASE_FRACTION", "FreezeGCFirst", "freeze_gc", "highest_rss",
           "malloc_threshold", "peak_rss", "release_memory", "reset_peak_rss", "tune_malloc",
           "untouched_bytes"]

#: Bytes: the mmap and trim thresholds set in worker processes (at most; see
#: :func:`malloc_threshold`).
MALLOC_THRESHOLD = 32 * 2**20
#: A worker's thresholds are at most its memory limit divided by this.
LIMIT_DIVISOR = 128

#: Share of the worker's memory limit above which :func:`release_memory` acts.
RELEASE_FRACTION = 0.4

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_done = False
_frozen = False
_lock = threading.Lock()


def malloc_threshold(limit: int | None) -> int:
    """The mmap and trim thresholds for a worker with memory ``limit`` (bytes; None or 0:
    none): :data:`MALLOC_THRESHOLD`, or ``limit / LIMIT_DIVISOR`` when smaller (not below
    1 MiB)."""
    if not limit:
        return MALLOC_THRESHOLD
    return int(min(MALLOC_THRESHOLD, max(2**20, limit // LIMIT_DIVISOR)))


def tune_malloc() -> bool:
    """Set this process's glibc mmap and trim thresholds to :func:`malloc_threshold` of its
    worker's memory limit, once.

    Only inside a Dask worker's own process (started by a nanny) on Linux with glibc, and
    unless the Dask config key ``dask-ps.tune-malloc`` is false. Returns whether the
    thresholds are (now) set.
    """
    global _done
    with _lock:
        if _done:
            return True
        if not sys.platform.startswith("linux"):
            return False
        import dask
        from distributed import get_worker

        if not dask.config.get("dask-ps.tune-malloc", True):
            return False
        from .. import _compat

        try:
            worker = get_worker()
        except ValueError:  # not in a worker: leave the user's process alone
            return False
        if not _compat.in_own_process(worker):  # a thread of the user's process: the same
            return False
        try:
            libc = ctypes.CDLL("libc.so.6")
        except OSError:  # not glibc (e.g. musl)
            return False
        threshold = malloc_threshold(_compat.memory_limit(worker))
        _done = bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)
                     and libc.mallopt(_M_TRIM_THRESHOLD, threshold))
        return _done


def freeze_gc(worker=None) -> bool:
    """Move every object this worker process holds now to the collector's permanent
    generation (:func:`gc.freeze`), once per process (see the module's notes).

    Only inside a Dask worker's own process (started by a nanny; not a thread of the user's
    process), and unless the Dask config key ``dask-ps.freeze-gc`` is false.

    Parameters
    ----------
    worker : distributed.Worker, optional
        The worker running this code, when the caller has it (a function of ``Client.run``,
        where :func:`distributed.get_worker` does not answer). Default: that answer.

    Returns
    -------
    bool
        Whether the process's objects were (now or before) frozen.
    """
    global _frozen
    with _lock:
        if _frozen:
            return True
        import gc

        import dask

        from .. import _compat

        if not dask.config.get("dask-ps.freeze-gc", True):
            return False
        worker = worker if worker is not None else _compat.current_worker()
        if worker is None or not _compat.in_own_process(worker):
            return False
        gc.freeze()
        _frozen = True
        return True


class FreezeGCFirst:
    """Base of the objects a worker makes for dask_ps (the shard, the process's PS client):
    :func:`freeze_gc` runs before such an object exists, in ``__new__``, never after; frozen, it
    would not be collected if it ended in a reference cycle, nor be seen by
    :func:`gc.get_objects`."""

    def __new__(cls, *args, **kwargs):
        freeze_gc()
        return super().__new__(cls)


def release_memory(force: bool = False) -> bool:
    """Give freed memory held by the allocators back to the system: pyarrow's pool (when
    pyarrow is loaded) and glibc's heaps (``malloc_trim``).

    Acts in a Dask worker with a memory limit whose process uses more than
    :data:`RELEASE_FRACTION` of it (or always, with ``force``); costs ~1-10 ms, so it is
    meant between steps that each take much longer (e.g. after each partition of an epoch).
    Returns whether it acted.
    """
    if not force:
        from .. import _compat

        worker = _compat.current_worker()
        limit = _compat.memory_limit(worker) if worker is not None else None
        if not limit:
            return False
        import psutil

        if psutil.Process().memory_info().rss < RELEASE_FRACTION * limit:
            return False
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
    return True


def untouched_bytes(arrays) -> int:
    """Bytes of the pages of ``arrays`` not written yet: what they will add to the process's
    resident memory when written. 0 outside Linux, for arrays of less than a page, and for
    views (their base is counted).

    A page counts as written when ``/proc/self/pagemap`` shows it present and mapped by this
    process alone (bit 56, Linux >= 4.2), or swapped out. Reading a zeroed page maps the
    kernel's shared zero page, which takes no memory: ``mincore`` calls it resident, and a
    shard answering pulls of a 2^24-row table it never wrote made it look all in memory
    while 0.19 GiB were still to come, at the first pushes. Where pagemap cannot be read,
    ``mincore`` stands in.
    """
    if not sys.platform.startswith("linux"):
        return 0
    page = _page_size()
    out = 0
    for a in arrays:
        if a.base is not None or a.nbytes < page:
            continue
        start = a.ctypes.data - a.ctypes.data % page
        n = (a.ctypes.data + a.nbytes - start + page - 1) // page
        written = _written_pages(start, n, page)
        out += (n - written) * page
    return out


_PRESENT, _SWAPPED, _EXCLUSIVE = np.uint64(1 << 63), np.uint64(1 << 62), np.uint64(1 << 56)


def _written_pages(start: int, n: int, page: int) -> int:
    """Pages of ``[start, start + n * page)`` this process wrote (see :func:`untouched_bytes`)."""
    try:
        with open("/proc/self/pagemap", "rb", buffering=0) as f:
            f.seek(start // page * 8)
            entries = np.frombuffer(f.read(n * 8), np.uint64)
        if entries.shape[0] == n:
            mine = (entries & (_PRESENT | _EXCLUSIVE)) == (_PRESENT | _EXCLUSIVE)
            return int(np.count_nonzero(mine | ((entries & _SWAPPED) != 0)))
    except OSError:
        pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return n
    vec = (ctypes.c_ubyte * n)()
    if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(n * page), vec) != 0:
        return n
    return int(np.count_nonzero(np.frombuffer(vec, np.uint8) & 1))


def reset_peak_rss(forget: bool = False) -> int | None:
    """Start a new window for :func:`peak_rss`: the kernel's high-water mark of this process's
    resident memory (``VmHWM``) is set back to its resident memory now (Linux >= 4.0: ``5``
    written to ``/proc/self/clear_refs``). Returns the resident bytes now, or None where the
    mark cannot be reset (then :func:`peak_rss` is not a window's peak).

    The mark is the process's: threads measuring windows at once shorten each other's (a
    thread that resets it drops the peaks the others saw so far). :func:`highest_rss` keeps
    the highest mark across resets, unless ``forget``.
    """
    if not sys.platform.startswith("linux"):
        return None
    before = peak_rss()
    if before is not None:
        with _lock:
            _HIGHEST[0] = 0 if forget else max(_HIGHEST[0], before)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    import psutil

    return psutil.Process().memory_info().rss


def peak_rss() -> int | None:
    """Bytes: the highest resident memory of this process since :func:`reset_peak_rss` (or
    since it started); None outside Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def highest_rss() -> int | None:
    """Bytes: the highest resident memory of this process since it started, across the
    windows of :func:`reset_peak_rss`; None outside Linux."""
    now = peak_rss()
    return None if now is None else max(now, _HIGHEST[0])


_HIGHEST = [0]  # the highest peak_rss() seen before a reset


def _page_size() -> int:
    import os

    return os.sysconf("SC_PAGE_SIZE")
