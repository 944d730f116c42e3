"""The worker side of data partitions: what a task holds, loads and keeps next to its data.

A task of :meth:`~dask_ps.PSModel.fit_partitions` (or of :meth:`~dask_ps.PSModel.run` over
:class:`~dask_ps.partitions.Partitions`) gets :class:`Partition` handles, not the data: it
loads one partition at a time (:meth:`Partition.load`) from its worker's store — memory, or
Dask's spill on local disk — and lets it go before the next, so a worker never needs all its
partitions in memory at once. Worker-local state that must live across epochs and jobs (topic
assignments, per-user factors, binned rows, built blocks) lives in :attr:`Partition.state`,
in the worker process, next to the partition: it survives as long as the
:class:`~dask_ps.partitions.Partitions` object on the driver (``release()`` drops it) and is
lost with the worker, so a step must be able to rebuild it from the partition.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

from .. import _compat
from ..state._malloc import freeze_gc, peak_rss, release_memory, reset_peak_rss

__all__ = ["HEADROOM_FRACTION", "Partition", "cache_budget", "drop_state", "fit_spill_target",
           "io_counters", "measure_step", "process_memory", "shed_cache", "smallest_limit",
           "step_growth"]

# Worker-local state of the partitions of this process, by (data uid, partition index).
_STATE: dict[tuple[str, int], dict] = {}
# Bytes held by Partition.cached entries of this process, by (data uid, partition index) and
# name.
_CACHED: dict[tuple[str, int], dict[str, int]] = {}
_LOCK = threading.Lock()
# Partitions a task fetched from another worker (after a loss moved its task elsewhere).
_FETCHED = {"count": 0, "bytes": 0}
# Bytes: the most this process's resident memory rose during one training step (measure_step).
_STEP = {"growth": 0}

#: Default share of a worker's memory limit that :meth:`Partition.cached` values may take
#: (config key ``dask-ps.block-cache``). They are a second copy of (part of) their partition,
#: outside Dask's memory accounting: bounded, they speed up data that fits while huge data
#: streams.
CACHE_FRACTION = 0.1
#: A value is cached only while the worker process, with it, stays below this share of its
#: memory limit: a worker short of memory streams (builds anew) rather than keep a second
#: copy that Dask cannot spill and that would push it towards its pause threshold.
CACHE_RSS_FRACTION = 0.5


#: Share of a worker's memory limit that :func:`fit_spill_target` keeps free for a task's
#: working memory (the partition it trains on, the blocks built from it, a reader's buffers),
#: or more once a step has been measured to need more (:func:`step_growth`).
HEADROOM_FRACTION = 0.15


def process_memory(available: bool = False) -> int:
    """Bytes this process may use: its Dask worker's memory limit, in a worker that has one;
    else the machine's memory as Dask sizes a worker by default
    (:func:`~dask_ps._compat.machine_memory`: the RAM, capped by a cgroup limit, a
    container's or a Slurm job's, and by ``RLIMIT_RSS``). Either way capped by what ``RLIMIT_AS``
    (``ulimit -v``) leaves of this process's address space.

    Parameters
    ----------
    available : bool, default False
        Also no more than the memory free now (psutil's ``available``): for arrays made at
        once in this process, rather than a limit to plan tables by.

    Returns
    -------
    int
        Bytes.
    """
    import resource

    import psutil

    worker = _compat.current_worker()
    room = ((_compat.memory_limit(worker) if worker is not None else None)
            or _compat.machine_memory())
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        room = min(room, max(0, soft - psutil.Process().memory_info().vms))
    if available:
        room = min(room, psutil.virtual_memory().available)
    return int(room)


def smallest_limit(client, workers=None) -> int:
    """The smallest memory limit of ``client``'s workers (only those of the addresses
    ``workers``, if given), in bytes; 0 when one has none, or there is no worker (nothing to
    check against)."""
    from ..cluster import worker_info

    limits = [w.get("memory_limit") or 0 for a, w in worker_info(client).items()
              if workers is None or a in workers]
    return int(min(limits, default=0))


@contextlib.contextmanager
def measure_step(dask_worker=None):
    """Measure how far this process's resident memory rises above where it was while the
    block runs (the kernel's high-water mark, :func:`~dask_ps.state._malloc.peak_rss`), and
    keep the largest rise seen: :func:`step_growth`. Only in a worker with a memory limit.

    What the block allocates counts, and so does what other threads of the process do
    meanwhile (a shard answering pulls, Dask loading or spilling data); pages of the shards'
    tables written for the first time do not (:func:`fit_spill_target` counts the tables
    whole already). On a 1 GiB worker training a 2^24-feature FTRL model on 250,000-row
    partitions, a step rose 0.12-0.15 GiB (loading its partition, building its blocks, the
    pull), about the default headroom there. A step running in another thread at the same
    time shortens the window (the mark is the process's): a measure can fall short, not
    exceed.
    """
    worker = dask_worker if dask_worker is not None else _compat.current_worker()
    if worker is None or not _compat.memory_limit(worker):  # nothing to size: no measure
        yield
        return
    untouched = _untouched_shards(worker)
    start = reset_peak_rss()
    try:
        yield
    finally:
        peak = peak_rss() if start is not None else None
        if peak is not None:
            if untouched:
                peak -= untouched - _untouched_shards(worker)
            with _LOCK:
                _STEP["growth"] = max(_STEP["growth"], peak - start)


def step_growth() -> int:
    """Bytes: the largest rise of this process's resident memory during one step measured by
    :func:`measure_step` (0 before the first)."""
    return _STEP["growth"]


def fit_spill_target(dask_worker=None, release: bool = True) -> int | None:
    """Make Dask spill this worker's data early enough that the data it keeps in memory, plus
    everything else the process holds (shards, caches, libraries: Dask's "unmanaged" memory)
    plus a headroom for a step's working memory (:data:`HEADROOM_FRACTION` of the limit, or
    the largest rise a step was measured to make, :func:`step_growth`, when larger) stays
    below Dask's spill threshold.

    Dask spills data above its ``target`` share of the limit by the data's own size, whatever
    else the process holds: on a 1 GiB worker, 0.45 GiB of partitions beside a 0.3 GiB
    interpreter and 0.2 GiB of shards reach the pause threshold and the worker stops. Here the
    worker's ``SpillBuffer`` counts the rest of the process too (zict's ``offset``), measured
    now (after :func:`~dask_ps.state._malloc.release_memory` when ``release`` and the process
    holds more than ``RELEASE_FRACTION`` of the limit), with the shards' tables at their whole
    size (their zero-filled pages take memory only when the first steps write them: a 1 GiB
    worker's 0.19 GiB shard of a 2^24-row FTRL table, at its first step); Dask's target
    stays the upper bound.
    Run at the start of every training task and, when memory is short, after each of its
    steps, and on every worker before partitions are read.

    Returns
    -------
    int or None
        Bytes of data the worker may now keep in memory before spilling; None outside a
        worker, without a memory limit or with spilling off.
    """
    worker = dask_worker if dask_worker is not None else _compat.current_worker()
    if worker is None:
        return None
    freeze_gc(worker)  # the first time dask_ps reads data here (state._malloc)
    limit = _compat.memory_limit(worker)
    target, spill, pause = _compat.memory_fractions(worker)
    managed = _compat.managed_in_memory(worker)
    if not limit or managed is None or not (target or spill):
        return None
    if release:
        release_memory()  # acts only past RELEASE_FRACTION of the limit: ~ms otherwise
    import psutil

    # the shards' tables count whole: their zero pages join the process at the first steps
    other = psutil.Process().memory_info().rss - managed + _untouched_shards(worker)
    upper = (target or spill) * limit
    ceiling = (spill or pause or 1.0) * limit
    headroom = max(HEADROOM_FRACTION * limit, step_growth())
    allowed = max(0.0, min(upper, ceiling - other - headroom))
    _compat.set_spill_offset(worker, upper - allowed)
    return int(allowed)


def _untouched_shards(worker) -> int:
    """Bytes of the tables of the shards living in ``worker`` not in memory yet."""
    from ..state.shard import Shard

    return sum(a.untouched_bytes() for a in list(_compat.worker_actors(worker).values())
               if isinstance(a, Shard))


def _room_for(size: int) -> bool:
    """Whether this process stays under :data:`CACHE_RSS_FRACTION` of its worker's memory
    limit with ``size`` more bytes, at the peak of a step (:func:`step_growth`): always,
    outside a worker or without a limit."""
    worker = _compat.current_worker()
    limit = _compat.memory_limit(worker) if worker is not None else None
    if not limit:
        return True
    import psutil

    rss = psutil.Process().memory_info().rss
    return rss + size + step_growth() <= CACHE_RSS_FRACTION * limit


def cache_budget() -> float:
    """Bytes of :meth:`Partition.cached` values this process may keep: ``dask-ps.block-cache``
    (default :data:`CACHE_FRACTION`) times the worker's memory limit; unbounded outside a
    worker or without a limit."""
    import dask

    worker = _compat.current_worker()
    limit = _compat.memory_limit(worker) if worker is not None else None
    if not limit:
        return float("inf")
    return float(dask.config.get("dask-ps.block-cache", CACHE_FRACTION)) * limit


class Partition:
    """One data partition as a task sees it.

    Attributes
    ----------
    index : int
        Position of the partition in its :class:`~dask_ps.partitions.Partitions`.
    n_rows : int
        Rows (first-axis length) of the partition's value.
    epoch : int
        The epoch being run (set by :meth:`~dask_ps.PSModel.fit_partitions`, 0 otherwise).
    """

    __slots__ = ("uid", "index", "key", "n_rows", "epoch", "_value")

    def __init__(self, uid: str, index: int, key, n_rows: int, value: Any = None) -> None:
        self.uid = uid
        self.index = index
        self.key = key
        self.n_rows = n_rows
        self.epoch = 0
        self._value = value

    def __reduce__(self):  # travels as a reference: the value stays in the worker's store
        return Partition, (self.uid, self.index, self.key, self.n_rows, self._value)

    def __repr__(self) -> str:
        return f"<Partition {self.index} of {self.uid}: {self.n_rows} rows>"

    def load(self):
        """The partition's value (e.g. a CSR block, an ``(X, y)`` tuple, a DataFrame).

        Read from this worker's store: memory, or Dask's spill on local disk (read back and
        counted by Dask like any key). A partition that is not on this worker (Dask
        recomputed it elsewhere after a worker was lost) is fetched from its holder and
        counted as an incoming transfer (see :meth:`Partitions.report`). Without a
        cluster, the value itself.
        """
        if self.key is None:
            return self._value
        worker = _compat.current_worker()
        try:
            return _compat.worker_store(worker)[self.key]
        except (KeyError, TypeError):
            pass
        return _fetch(self.key)

    @property
    def state(self) -> dict:
        """A dict kept in this worker process for this partition across epochs and jobs
        (e.g. LDA's topic assignments). Empty at first use, and again after a loss moved the
        partition to another worker: a step must be able to rebuild what it keeps here."""
        k = (self.uid, self.index)
        with _LOCK:
            found = _STATE.get(k)
            if found is None:
                found = _STATE[k] = {}
            return found

    def cached(self, name: str, build: Callable[[], Any], nbytes: Callable[[Any], int] | None
               = None):
        """``build()``'s result, kept in :attr:`state` under ``name`` while the values kept
        this way in this process stay within :func:`cache_budget` and the process within
        :data:`CACHE_RSS_FRACTION` of its memory limit; beyond them, built anew at every
        call (huge data streams instead of filling the memory).

        Parameters
        ----------
        name : str
        build : callable
            ``build() -> value``, a function of the partition only.
        nbytes : callable, optional
            Size of a value in bytes; default :func:`dask.sizeof.sizeof`.
        """
        state = self.state
        if name in state:
            return state[name]
        value = build()
        if nbytes is None:
            from dask.sizeof import sizeof as nbytes
        size = int(nbytes(value))
        k = (self.uid, self.index)
        with _LOCK:
            if _cached_bytes() + size <= cache_budget() and _room_for(size):
                state[name] = value
                _CACHED.setdefault(k, {})[name] = size
        return value


def _cached_bytes() -> int:
    return sum(sum(v.values()) for v in _CACHED.values())


def shed_cache() -> int:
    """Drop this process's :meth:`Partition.cached` values when it holds more than
    :data:`CACHE_RSS_FRACTION` of its worker's memory limit (the rule they were kept under;
    the memory has since gone to shards, steps, data); returns the bytes dropped. A step
    builds them anew when it needs them.

    Measured on a 1 GiB worker training a 2^24-feature FTRL model on data 1.5x the memory:
    one partition's blocks (0.05 GiB), kept at the first step, stayed through every later
    step, near the pause threshold."""
    worker = _compat.current_worker()
    limit = _compat.memory_limit(worker) if worker is not None else None
    if not limit or not _CACHED:
        return 0
    import psutil

    if psutil.Process().memory_info().rss <= CACHE_RSS_FRACTION * limit:
        return 0
    with _LOCK:
        dropped = 0
        for k, names in _CACHED.items():
            state = _STATE.get(k, {})
            for name, size in names.items():
                state.pop(name, None)
                dropped += size
        _CACHED.clear()
    return dropped


def _fetch(key):
    from dask.sizeof import sizeof
    from distributed import Future, get_client

    client = get_client()
    future = Future(key, client)
    _compat.desire_keys(client, [key])
    value = future.result()
    with _LOCK:
        _FETCHED["count"] += 1
        _FETCHED["bytes"] += int(sizeof(value))
    return value


def drop_state(uid: str) -> int:
    """Forget the worker-local state of the partitions of ``uid`` in this process (run on
    every worker when a :class:`~dask_ps.partitions.Partitions` is released); returns how
    many partitions had some."""
    with _LOCK:
        keys = [k for k in _STATE if k[0] == uid]
        for k in keys:
            del _STATE[k]
            _CACHED.pop(k, None)
    return len(keys)


def placing_counters(dask_worker=None) -> dict:
    """:func:`fit_spill_target`, then :func:`io_counters`: what a placement of computed
    partitions runs on every worker before they land, in one round trip."""
    fit_spill_target(dask_worker)
    return io_counters(dask_worker)


def io_counters(dask_worker=None, keys=()) -> dict:
    """This worker's source reads and incoming transfers so far, and where ``keys`` are now:
    bytes in memory (``sizeof``) and on Dask's local disk (pickled)."""
    from dask.sizeof import sizeof

    from ..io._blocks import source_reads

    out = {"reads": source_reads(), "incoming_count": 0, "incoming_bytes": 0,
           "in_memory": 0, "on_disk": 0}
    if dask_worker is None:
        return out
    count, nbytes = _compat.transfer_counters(dask_worker)
    with _LOCK:
        out["incoming_count"] = count + _FETCHED["count"]
        out["incoming_bytes"] = nbytes + _FETCHED["bytes"]
    memory = _compat.in_memory(dask_worker)
    on_disk = _compat.spilled_bytes(dask_worker)
    for k in keys:
        if k in memory:
            out["in_memory"] += sizeof(memory[k])
        elif k in on_disk:
            out["on_disk"] += on_disk[k]
    return out
