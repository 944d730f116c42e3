"""glibc allocator settings for the worker processes that serve and call shards.

Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``. Setting that threshold also
turns off glibc's adaptive mmap threshold, so every allocation of 128 KiB or more becomes a
fresh ``mmap``, page-faulted (and zeroed) on first touch and unmapped when freed. A pull or push
allocates a few such arrays per call (keys, values, their plans, the comm's receive buffers):
on this machine an 800 kB temporary cost 0.35 ms instead of 0.015 ms, an 8 MB one 1.5-6 ms
instead of 0.15 ms (benchmarks/ps_core.py --tuned-malloc). :func:`tune_malloc` keeps blocks
below 32 MiB on the heap and trims it only beyond 32 MiB of free space at its top, so a worker
keeps at most that much freed memory per allocator arena.

Opt out with the Dask config key ``dask-ps.tune-malloc: false`` (environment variable
``DASK_DASK_PS__TUNE_MALLOC=False``).

Freed memory kept by the allocators counts as the worker's *unmanaged* memory, which Dask cannot
spill: :func:`release_memory` hands it back to the system between the steps of a training
task when the worker's memory is short (measured on a 2 GiB worker reading 250,000-row Parquet
row groups: pyarrow's mimalloc pool kept ~140 MB after the reads, glibc's heap ~20 MB more).
"""

from __future__ import annotations

import ctypes
import sys
import threading

__all__ = ["MALLOC_THRESHOLD", "RELEASE_FRACTION", "release_memory", "tune_malloc"]

#: Bytes: the mmap and trim thresholds set in worker processes.
MALLOC_THRESHOLD = 32 * 2**20

#: Share of the worker's memory limit above which :func:`release_memory` acts.
RELEASE_FRACTION = 0.4

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_done = False
_lock = threading.Lock()


def tune_malloc() -> bool:
    """Set this process's glibc mmap and trim thresholds to :data:`MALLOC_THRESHOLD`, once.

    Only inside a Dask worker process on Linux with glibc, and unless the Dask config key
    ``dask-ps.tune-malloc`` is false. Returns whether the thresholds are (now) set.
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
        try:
            get_worker()
        except ValueError:  # not in a worker: leave the user's process alone
            return False
        try:
            libc = ctypes.CDLL("libc.so.6")
        except OSError:  # not glibc (e.g. musl)
            return False
        _done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MALLOC_THRESHOLD)
                     and libc.mallopt(_M_TRIM_THRESHOLD, MALLOC_THRESHOLD))
        return _done


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
