"""Partitioners: which shard holds a key, and where inside it.

A range partitioner cuts the rows of a dense table into contiguous, near-equal blocks; a hash
partitioner scatters the keys of a sparse table by a 64-bit hash, so that any key space (up to
2^64 keys) spreads evenly whatever the keys' pattern. Both plan a batch of keys in numba:
deduplicate, group by shard, remember where each caller's key went
(:func:`~dask_ps.state._kernels.plan_keys` for range tables,
:func:`~dask_ps.state._plan_kernels.plan_hashed` for hashed ones). A range shard's keys leave
as offsets (int32 below 2^31 rows), or, when they are dense, as a bitmap of the shard's rows
(:class:`~dask_ps.state.wire_forms.RowBits`); a hashed shard's keys leave grouped by ranges
of their hash code, the order in which the shard's index and rows are laid out (see
:mod:`~dask_ps.state._hash_kernels`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _hash_kernels, _kernels, _plan_kernels
from .wire_forms import RowBits, move_rows

__all__ = ["HashPartitioner", "KeyPlan", "RangePartitioner", "distinct_ranks",
           "make_partitioner"]


_NO_WORDS = np.zeros(0, np.uint64)
_NO_INT = np.zeros(0, np.int64)


class KeyPlan(NamedTuple):
    """Keys of one call, deduplicated and grouped by shard (see :func:`plan_keys`)."""

    local: np.ndarray  # int64 (n_unique,): offsets (range) or keys (hash), grouped by shard
    offsets: np.ndarray  # int64 (n_shards + 1,)
    # int64 (n,): position in ``local`` of each caller key; (0,) in a pull's hashed plan
    # whose keys were distinct, where ``order`` tells the same
    inverse: np.ndarray
    identity: bool = False  # inverse is arange(n): values need no reordering
    ascending: bool = False  # each shard's ``local`` keys are in ascending order
    words: np.ndarray = _NO_WORDS  # uint64: bitmap of the distinct keys (range), or empty
    deferred: bool = False  # ``inverse`` not filled yet: see _Partitioner.complete
    # deferred hashed plans: the position in ``local`` of each place in the buckets, where
    # ``inverse`` holds the place of each caller key (see _plan_kernels.plan_hashed)
    runs: np.ndarray = _NO_INT  # int64 (n,) or (0,)
    # hashed plans whose dedup waits (deferred): ``local`` holds every place (repeats
    # included, each shard's keys by bucket) and these are the buckets' ends in it; the
    # pull's values come per place, and complete() makes the deduplicated plan for the push
    buckets: np.ndarray = _NO_INT  # int64 (n_shards << b,) or (0,)
    # the caller's position of each distinct key (each place, while ``buckets`` is set), in
    # a pull's hashed plan whose dedup waited: its values are put in order as they come
    # (process_job._Spread), and a push reorders piece by piece
    order: np.ndarray = _NO_INT  # int64 (n_unique,) or (0,)

    def expand(self, values: np.ndarray) -> np.ndarray:
        """Values per caller key from values per distinct key."""
        if self.identity:
            return values
        if not self.inverse.shape[0] and self.order.shape[0]:  # out[order] = values
            return move_rows(values, self.order, np.empty_like(values), False)
        out = np.empty((self.inverse.shape[0],) + values.shape[1:], values.dtype)
        return move_rows(values, self.inverse, out, True)

    def in_plan_order(self, values: np.ndarray) -> np.ndarray:
        """Values per distinct key from values per caller key, the keys being distinct
        (``expand``'s inverse); ``values`` (n, ncols) itself when no reordering is needed."""
        if self.identity:
            return values
        if self.order.shape[0]:  # values[order]
            return move_rows(values, self.order, np.empty_like(values), True)
        return move_rows(values, self.inverse, np.empty_like(values), False)

    def shard_slice(self, s: int) -> slice:
        """Where shard ``s``'s keys are in ``local``."""
        return slice(int(self.offsets[s]), int(self.offsets[s + 1]))

    @property
    def n_unique(self) -> int:
        """Number of distinct keys."""
        return self.local.shape[0]


def _shard_words(words: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows ``[start, stop)`` of a bitmap of a whole table, as a bitmap of offsets from
    ``start``: the table's words shifted by ``start % 64``, bits from ``stop`` on cleared."""
    n_words = (stop - start + 63) // 64
    w0, r = start >> 6, np.uint64(start & 63)
    src = words[w0: w0 + n_words + 1]
    out = src[:n_words] >> r
    if r:
        out[: src.shape[0] - 1] |= src[1: n_words + 1] << (np.uint64(64) - r)
    tail = (stop - start) & 63
    if tail:
        out[-1] &= (np.uint64(1) << np.uint64(tail)) - np.uint64(1)
    return out


_local = threading.local()


def _hash_scratch(n_shards: int, n: int) -> tuple:
    """This thread's scratch for :func:`~dask_ps.state._plan_kernels.plan_hashed` of ``n``
    keys over ``n_shards`` shards: ``(count, ids, table)``, kept between calls, grown as
    needed (``ids``: 4 bytes per key of the largest call)."""
    scratch = getattr(_local, "hash_scratch", None)
    n_count = n_shards * 2**16
    if scratch is None or scratch[0].shape[1] < n_count or scratch[1].shape[0] < n:
        slots = _plan_kernels.table_size(2 * _plan_kernels.BUCKET)
        old_ids = scratch[1].shape[0] if scratch is not None else 0
        scratch = _local.hash_scratch = (np.empty((2, n_count), np.int64),
                                         np.empty(max(n, old_ids), np.uint32),
                                         np.empty(slots, np.uint32))
    return scratch


def distinct_ranks(keys: np.ndarray, n_rows: int, out: np.ndarray) -> np.ndarray:
    """The distinct values of ``keys`` in ascending order, and each key's rank among them, as
    a range table's keys are planned: through a bitmap of ``n_rows`` bits (``n_rows / 8``
    bytes), not a hash table or a table of ``n_rows`` positions (64 MiB of int32 at 2^24
    rows, most of its pages touched by a block's random columns).

    Parameters
    ----------
    keys : ndarray of int32 or int64, shape (n,)
        Values in ``[0, n_rows)``; repeats allowed. Every word of the bitmap is read once,
        so this suits ``n_rows`` up to a few times ``64 * n``.
    n_rows : int
    out : ndarray of int32 or int64, shape (n,)
        Receives the ranks: ``distinct[out[i]] == keys[i]``.

    Returns
    -------
    ndarray of int64, shape (n_distinct,)

    Raises
    ------
    ValueError
        A key outside ``[0, n_rows)``, naming its position and value.
    """
    bits = np.zeros(n_rows // 64 + 1, np.uint64)
    starts = np.array([0, n_rows], np.int64)
    distinct, _, _, bad, _ = _kernels._plan_bitmap_range(keys, starts, out,
                                                        np.zeros(2, np.int64), bits, False)
    if bad >= 0:
        raise ValueError(f"key {int(keys[bad])} at position {int(bad)} is outside "
                         f"[0, {n_rows})")
    return distinct


def plan_hashed(keys: np.ndarray, n_shards: int, defer_inverse: bool = False,
                defer_dedup: bool = False) -> KeyPlan:
    """The :class:`KeyPlan` of ``keys`` (int64) of a table hashed over ``n_shards`` shards:
    distinct keys grouped by shard, and inside a shard by ranges of their hash code (see
    :func:`~dask_ps.state._plan_kernels.plan_hashed`).

    With ``defer_inverse`` the plan comes back ``deferred`` (its ``inverse`` finished by
    :meth:`_Partitioner.complete`) when the keys had repeats. With ``defer_dedup`` too, a
    plan whose first buckets had no repeat comes back ``deferred`` with its
    :attr:`~KeyPlan.buckets`: every place is kept (a pull sends them all, and a shard gives
    a repeat the row of its first place), and :meth:`_Partitioner.complete` deduplicates
    while the shards answer; the plan of a pull-compute-push step is then ~4 ms shorter
    before 10^6 random keys leave.
    """
    n = keys.shape[0]
    magic = _hash_kernels.fastmod_magic(n_shards) if n_shards > 1 else np.uint64(0)
    local = np.empty(n, np.int64)
    inverse = np.empty(n, np.int64)
    defer_dedup = defer_inverse and defer_dedup
    order = np.empty(n, np.int64) if defer_dedup else _NO_INT  # (pages untouched if unused)
    count, ids, table = _hash_scratch(n_shards, n)
    u, offsets, runs, identity, ends = _plan_kernels.plan_hashed(
        keys, n_shards, magic, count, ids, table, local, inverse, order, defer_inverse,
        defer_dedup)
    local = local[:u]
    if ends.shape[0]:
        return KeyPlan(local, offsets, _NO_INT, identity, deferred=True, buckets=ends,
                       order=order)
    if runs.shape[0]:
        return KeyPlan(local, offsets, inverse, False, deferred=True, runs=runs)
    return KeyPlan(local, offsets, inverse, identity)


#: Buckets of a waiting dedup checked per step of :meth:`_Partitioner.completion` (~0.5 ms
#: for 10^6 keys in 256 buckets): a pull reads the shards' answers between the steps.
CHECK_BUCKETS = 32


def _dedup_later(plan: KeyPlan):
    """The deduplicated plan of a plan whose dedup waited (see :func:`plan_hashed`), made
    in steps (a generator: it yields between slices of the check for repeats and returns
    the plan)."""
    _, _, table = _hash_scratch(plan.offsets.shape[0] - 1, 0)
    ends = plan.buckets
    repeat = False
    for d in range(0, ends.shape[0], CHECK_BUCKETS):
        last = min(d + CHECK_BUCKETS, ends.shape[0]) - 1
        repeat = _plan_kernels.dedup_buckets(plan.local, ends, table, plan.offsets, True,
                                             ends[last], d)[0]
        if repeat:
            break
        yield
    if not repeat:
        return plan._replace(deferred=False, buckets=_NO_INT)
    local, offsets = plan.local.copy(), plan.offsets.copy()
    _, u, runs = _plan_kernels.dedup_buckets(local, ends, table, offsets, False,
                                             local.shape[0], 0)
    inverse = _kernels.invert_permutation(plan.order, np.empty_like(plan.order))
    _plan_kernels.fill_inverse(runs, inverse)
    return KeyPlan(local[:u], offsets, inverse)


def _scratch(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's scratch hash table (cap >= 2 n, ids all -1) and work space (>= 3 n).

    Kept between calls: allocating and clearing them per call cost more than the planning
    itself (fresh pages are faulted in one by one, see benchmarks/ps_core.py).
    """
    cap = 16
    while cap < 2 * n:
        cap *= 2
    scratch = getattr(_local, "scratch", None)
    if scratch is None or scratch[0].shape[0] < cap:
        scratch = (np.empty(cap, np.int64), np.full(cap, -1, np.int64),
                   np.empty(3 * cap // 2, np.int64))
        _local.scratch = scratch
    # a smaller table than allocated keeps the probes in fewer cache lines
    return scratch[0][:cap], scratch[1][:cap], scratch[2]


#: Largest range table whose keys are planned with a bitmap of its rows (2^27 rows: 16 MiB
#: of scratch per thread); larger ones use the hash table only.
BITMAP_ROWS = 2**27
#: Keys of a range table come out sorted (the bitmap read in order) when the table has fewer
#: than ``64 * BITMAP_SORT * n`` rows for ``n`` keys (about 20 n): below that density the
#: caller's order, grouped by shard, is cheaper to plan than the sorted one is to expand
#: (measured for 10^4..10^6 keys of 2 10^6..10^7 rows, benchmarks/ps_core.py).
BITMAP_SORT = 0.3
_NO_BITS = np.zeros(0, np.uint64)
_NO_SCRATCH = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


def _bitmap(n_rows: int) -> np.ndarray:
    """This thread's scratch for :func:`~dask_ps.state._kernels.plan_keys`: a zeroed bitmap of
    at least ``n_rows`` bits (kept between calls; pages never touched are never allocated)."""
    if n_rows > BITMAP_ROWS:
        return _NO_BITS
    words = n_rows // 64 + 1
    bits = getattr(_local, "bits", None)
    if bits is None or bits.shape[0] < words:
        bits = _local.bits = np.zeros(words, np.uint64)
    return bits[:words]


@dataclass(frozen=True)
class _Partitioner:
    n_shards: int
    hashed: bool = field(init=False)
    starts: np.ndarray = field(init=False, repr=False, compare=False)

    def caller_keys(self, plan: KeyPlan) -> np.ndarray:
        """The keys a plan was made from, shape (n,) int64, in the caller's order."""
        keys = plan.local.copy()
        if not self.hashed:
            for s in range(self.n_shards):
                keys[plan.shard_slice(s)] += self.starts[s]
        return plan.expand(keys.reshape(-1, 1)).reshape(-1)

    def plan(self, keys: np.ndarray, defer_inverse: bool = False,
             defer_dedup: bool = False) -> tuple[KeyPlan, int]:
        """Plan ``keys`` (int64); returns the plan and the index of the first bad key or -1.

        With ``defer_inverse``, the plan may come back with ``deferred`` set: its ``inverse``
        is filled by :meth:`complete`, which the caller runs while the shards answer. With
        ``defer_dedup`` too, a hashed plan may also leave its dedup to :meth:`complete`
        (see :func:`plan_hashed`): a pull then sends, and expands, the plan as it is.
        """
        if self.hashed:
            return plan_hashed(keys, self.n_shards, defer_inverse, defer_dedup), -1
        n_rows = int(self.starts[-1])
        bits = _bitmap(n_rows)
        sort_bits = n_rows // 64 < BITMAP_SORT * keys.shape[0]
        # the bitmap path needs no hash table: none is made (2 x 16 MB for 10^6 keys)
        scratch = _NO_SCRATCH if bits.shape[0] and sort_bits else _scratch(keys.shape[0])
        local, offsets, inverse, bad, words = _kernels.plan_keys(
            keys, self.starts, *scratch, bits, sort_bits, defer_inverse)
        # sorted keys and keys read off the sorting bitmap both come out ascending
        ascending = bits.shape[0] > 0 and sort_bits
        deferred = defer_inverse and words.shape[0] > 0 and bad < 0
        return (KeyPlan(local, offsets, inverse, bad == -2, ascending, words, deferred),
                max(int(bad), -1))

    def plan_ascending(self, keys: np.ndarray) -> KeyPlan:
        """The plan of ``keys`` the caller vouches for: int64, distinct, ascending, in
        range (not checked). A range table's plan is then a split of ``keys`` at the
        shards' first rows (no dedup, no reordering: ``identity``); a hashed table's is
        :meth:`plan`'s."""
        if self.hashed:
            return self.plan(keys)[0]
        n = keys.shape[0]
        if self.n_shards == 1:  # the keys are the offsets (the caller keeps them unchanged)
            return KeyPlan(keys, np.array([0, n], np.int64), _NO_INT, True, True)
        offsets = np.searchsorted(keys, self.starts)
        offsets[-1] = n
        local = keys.copy()
        for s in range(1, self.n_shards):
            local[offsets[s]: offsets[s + 1]] -= self.starts[s]
        return KeyPlan(local, offsets, _NO_INT, True, True)  # identity: no inverse needed

    @classmethod
    def complete(cls, plan: KeyPlan, keys: np.ndarray) -> KeyPlan:
        """``plan`` with its ``inverse`` filled, if :meth:`plan` deferred it; ``keys`` are the
        keys it was made from. A plan whose dedup waits comes back deduplicated: ``plan``
        itself (its arrays, not copies) when its keys were distinct, else a new plan
        (``plan``'s arrays are left as they are: a shard's call may still read them)."""
        steps = cls.completion(plan, keys)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    @staticmethod
    def completion(plan: KeyPlan, keys: np.ndarray):
        """:meth:`complete` in steps: a generator that yields between slices of the work
        (each well under a millisecond for 10^6 keys) and returns the completed plan."""
        if not plan.deferred:
            return plan
        if plan.buckets.shape[0]:
            return (yield from _dedup_later(plan))
        if plan.words.shape[0]:
            _kernels.bitmap_ranks(keys, plan.words, plan.inverse)
        else:
            _plan_kernels.fill_inverse(plan.runs, plan.inverse)
        return plan._replace(deferred=False, runs=_NO_INT)

    def wire_keys(self, plan: KeyPlan, s: int,
                  local: np.ndarray | None = None) -> np.ndarray | RowBits:
        """The form in which shard ``s``'s keys of ``plan`` (or ``local``, a subset of them)
        travel.

        Offsets of a range shard as a :class:`~.wire_forms.RowBits` bitmap when they are
        ascending and the bitmap is smaller (more than 1 row in 32), else as
        :attr:`wire_dtype`; hashed keys as they are.

        Parameters
        ----------
        plan : KeyPlan
        s : int
            Shard index.
        local : numpy.ndarray of int64, shape (m,), optional
            A subset of ``plan``'s keys of shard ``s``, in plan order (the ones a snapshot
            could not serve); default all of them.

        Returns
        -------
        numpy.ndarray (m,) of :attr:`wire_dtype`, or RowBits
        """
        full = local is None
        if full:
            local = plan.local[plan.shard_slice(s)]
        if plan.ascending and not self.hashed:
            start, stop = int(self.starts[s]), int(self.starts[s + 1])
            n_words = (stop - start + 63) // 64
            if 8 * n_words < local.shape[0] * self.wire_dtype.itemsize:
                if full and plan.words.shape[0]:
                    words = _shard_words(plan.words, start, stop)
                else:
                    words = _kernels.rows_to_bits(local, n_words)
                return RowBits(words, local.shape[0])
        return local.astype(self.wire_dtype, copy=False)


@dataclass(frozen=True)
class RangePartitioner(_Partitioner):
    """Rows ``[starts[s], starts[s + 1])`` on shard ``s``; blocks differ by at most one row.

    Parameters
    ----------
    n_shards : int
    n_rows : int
        Number of rows of the table.
    """

    n_rows: int = 0
    #: Offsets inside a shard travel as int32 when every shard is small enough, else int64.
    wire_dtype: np.dtype = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "hashed", False)
        n, s = self.n_rows, self.n_shards
        if n <= 2**53:  # exact in float64 (every layout so far)
            bounds = np.linspace(0, n, s + 1).round().astype(np.int64)
        else:  # the same bounds (i * n / s rounded half to even) in Python's integers
            bounds = np.array([q + (2 * r > s or (2 * r == s and q % 2 == 1))
                               for q, r in (divmod(i * n, s) for i in range(s + 1))],
                              np.int64)
        object.__setattr__(self, "starts", bounds)
        small = int(np.diff(bounds).max(initial=0)) < 2**31
        object.__setattr__(self, "wire_dtype", np.dtype(np.int32 if small else np.int64))

    def shard_keys(self, s: int) -> np.ndarray:
        """Global keys held by shard ``s``, shape (n,), int64."""
        return np.arange(self.starts[s], self.starts[s + 1], dtype=np.int64)

    def shard_size(self, s: int) -> int:
        """Rows held by shard ``s``."""
        return int(self.starts[s + 1] - self.starts[s])


@dataclass(frozen=True)
class HashPartitioner(_Partitioner):
    """Key ``k`` on shard ``(splitmix64(k) >> 32) % n_shards``; keys are int64 or uint64 bits.

    A plan's distinct keys come out grouped by ranges of their hash code inside each shard
    (see :mod:`~dask_ps.state._hash_kernels`), whatever the caller's order.

    Parameters
    ----------
    n_shards : int
    """

    wire_dtype = np.dtype(np.int64)

    def __post_init__(self):
        object.__setattr__(self, "hashed", True)
        object.__setattr__(self, "starts", np.zeros(self.n_shards + 1, np.int64))


PARTITIONERS = ("range", "hash")


def make_partitioner(kind: str, n_shards: int, n_rows: int | None) -> _Partitioner:
    """A partitioner by name: "range" (dense tables, needs ``n_rows``) or "hash" (sparse).

    Raises
    ------
    ValueError
        For an unknown name (listing the valid ones) or a range table without a row count.
    """
    if kind == "range":
        if n_rows is None:
            raise ValueError("a range-partitioned table needs a number of rows")
        return RangePartitioner(n_shards, n_rows=int(n_rows))
    if kind == "hash":
        return HashPartitioner(n_shards)
    raise ValueError(f"unknown partitioner {kind!r}; valid names are {list(PARTITIONERS)}")
