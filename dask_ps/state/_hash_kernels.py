"""Numba kernels of hashed (sparse) tables: the hash code of keys, and the shards' index.

Every key ``k`` of a hashed table has a 64-bit *hash code* ``g = rotl(splitmix64(k), 32)``, a
bijection of the key. Its low 32 bits pick the shard (``(splitmix64(k) >> 32) % n_shards``,
the hash partitioner's rule); its high bits pick the key's home slot in the shard's index.

* The client groups the distinct keys of a call by shard and by ranges of ``g``
  (:mod:`~dask_ps.state._plan_kernels`); a pull may send them before their dedup (the
  shard's :func:`index_insert` gives a repeated key one row).
* The shard's index is open addressing with linear probing, addressed by the high bits of
  ``g``, one 8-byte word per slot: ``(fingerprint << 32) | (row + 1)``, 0 when empty, where
  the fingerprint is the low 32 bits of ``g``. So keys that arrive grouped by ranges of ``g``
  visit the index range by range, in cache, for any table size, and a probe compares
  fingerprints, looking at the key itself only when they match (4-byte slots of rows
  alone, each candidate's key compared, halve the index but were slower: 10^6 planned keys
  in 8 pieces, cache cold, rows not in slot order, 13.2 ms against 10.4). Lookups compare
  the fingerprints of the 4 slots from home at once and prefetch the slots and row keys of
  the keys a few places ahead (:func:`index_find`): the order inside a range costs nothing,
  and keys in any order overlap their misses.
* When the index grows, the shard renumbers its rows in the order of the index's slots
  (:func:`index_renumber`): nearly hash-code order, so that rows, too, are read range by
  range by planned calls.

Kernels take arrays and scalars only and have pure-Python twins in
``tests/state/test_hash_kernels.py``.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.memory import prefetch
from ._kernels import mix64

_JIT = dict(cache=True, nogil=True)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# modular inverses of splitmix64's multipliers (mod 2^64), to undo the hash
_M1_INV = np.uint64(pow(0xBF58476D1CE4E5B9, -1, 2**64))
_M2_INV = np.uint64(pow(0x94D049BB133111EB, -1, 2**64))
_LOW32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)

#: Most rows one shard of a hashed table can hold: an index word keeps ``row + 1`` in 32 bits.
MAX_ROWS = 2**32 - 2
#: The index grows (doubles) when more than this fraction of its slots would be in use.
MAX_LOAD = 0.75


@numba.njit(inline="always", **_JIT)
def hash_code(k):
    """``rotl(splitmix64(k), 32)``: the 64-bit code that orders and places a hashed key."""
    h = mix64(k)
    return (h << _U32) | (h >> _U32)


@numba.njit(inline="always", **_JIT)
def key_of(g):
    """The key whose :func:`hash_code` is ``g`` (as int64)."""
    z = (g << _U32) | (g >> _U32)
    z = z ^ (z >> np.uint64(31)) ^ (z >> np.uint64(62))
    z = z * _M2_INV
    z = z ^ (z >> np.uint64(27)) ^ (z >> np.uint64(54))
    z = z * _M1_INV
    z = z ^ (z >> np.uint64(30)) ^ (z >> np.uint64(60))
    return np.int64(z - _GOLDEN)


def fastmod_magic(d: int) -> np.uint64:
    """Lemire's constant for :func:`_shard_of` with ``d`` shards (``d >= 2``)."""
    return np.uint64((2**64 - 1) // d + 1)


@numba.njit(inline="always", **_JIT)
def _shard_of(g, n_shards, magic):
    """``(g & 0xFFFFFFFF) % n_shards`` without a division (Lemire, Kaser & Kurz, "Faster
    remainder by direct computation", 2019): exact for 32-bit numerators."""
    if n_shards == 1:
        return 0
    low = magic * (g & _LOW32)
    d = np.uint64(n_shards)
    return np.int64(((low >> _U32) * d + (((low & _LOW32) * d) >> _U32)) >> _U32)


@numba.njit(inline="always", **_JIT)
def _home(g, shift):
    return np.int64(g >> np.uint64(shift))


#: Keys ahead of the current one whose home slot :func:`index_find` asks the cache for (and
#: half as far, the row key that slot names): enough misses in flight to hide the memory's
#: latency when the keys are not in slot order.
PREFETCH = 32
#: Keys whose hash codes :func:`index_find` computes in one loop of their own before probing
#: them (a loop the compiler vectorizes: 0.2 ms for 10^6 keys); 32 KiB of codes, in cache.
CODE_CHUNK = 4096


@numba.njit(inline="always", **_JIT)
def _in_window(index, mask, p, fp):
    """``row + 1`` of the first of the 4 slots from ``p`` whose fingerprint is ``fp``, else 0.

    Four loads (one or two cache lines, both prefetched) and selects, no branch: 96 % of the
    keys of an index at load 0.52 are in their home slot or within 3 of it, and one
    predictable test then replaces the probe loop's mispredicted exits."""
    one = np.uint64(1)
    w0 = index[p]
    w1 = index[(p + one) & mask]
    w2 = index[(p + np.uint64(2)) & mask]
    w3 = index[(p + np.uint64(3)) & mask]
    c = w3 & _LOW32 if (w3 >> _U32) == fp else np.uint64(0)
    c = w2 & _LOW32 if (w2 >> _U32) == fp else c
    c = w1 & _LOW32 if (w1 >> _U32) == fp else c
    return w0 & _LOW32 if (w0 >> _U32) == fp else c


@numba.njit(**_JIT)
def _codes(keys, g):
    """``g[i] = hash_code(keys[i])`` for the first ``len(keys)`` entries of ``g``; returns
    the lowest and highest code."""
    lo = np.uint64(0xFFFFFFFFFFFFFFFF)
    hi = np.uint64(0)
    for i in range(keys.shape[0]):
        c = hash_code(keys[i])
        g[i] = c
        lo = min(lo, c)
        hi = max(hi, c)
    return lo, hi


_NO_ROWS = np.zeros((0, 1), np.float64)  # no array to fetch ahead
#: Slots of the index, and rows, ahead of the furthest ones a grouped lookup has reached
#: that :func:`index_find` prefetches in ascending order (128 KiB and 64 KiB).
SWEEP_SLOTS = 16384
SWEEP_ROWS = 8192
#: :func:`index_find` sweeps when a chunk's keys have homes in at most this many slots per
#: key (a plan's pieces: about 2; keys in random order: the whole index).
SWEEP_SPAN = 8


def index_find(index, shift, row_keys, keys, rows, also=None):
    """Look ``keys`` up: ``rows[i]`` is the row of ``keys[i]``, or -1. Returns the count of
    absent keys.

    ``index`` has ``2 ** (64 - shift)`` slots; ``row_keys[r]`` is the key of row ``r``;
    ``also``, optional, a 2-D array indexed by row (a table's values) whose rows are fetched
    ahead with the row keys when the keys are grouped (see :func:`_find_codes`): the gather
    that follows then finds them in the cache (10^6-key remote pulls in 8 pieces, 3 runs of
    50-70 alternated pull + push pairs: 0.24-0.75 ms shorter).
    The hash codes of :data:`CODE_CHUNK` keys at a time are computed first, in a loop of
    their own (:func:`_codes`), then probed (:func:`_find_codes`). Hashing inside the probe
    loop cost more: 10^6 planned keys of a shard of 1.1 10^6, in pieces of 125,000, took
    5.4-5.6 ms that way and 4.2 ms this way with the cache warm; in the caller's random
    order, 16.7 against 15.6 ms.
    One thread: each half of a piece on a thread of its own made 8 pieces 1.7 times faster
    in one process with the other CPU idle (10.6 -> 6.1 ms, rows not in slot order), but a
    10^6-key remote pull slower in a 2-CPU cluster, where the pulling process uses that CPU
    (16.9 -> 17.8 ms, 60 alternated pulls; 15.7 -> 17.2 ms with the puller's dedup check
    off).
    """
    return _index_find(index, shift, row_keys, keys, rows, _NO_ROWS if also is None else also)


@numba.njit(**_JIT)
def _index_find(index, shift, row_keys, keys, rows, also):
    """:func:`index_find` (a kernel without a default argument: numba caches it)."""
    n = keys.shape[0]
    g = np.empty(min(n, CODE_CHUNK), np.uint64)
    missing = 0
    for start in range(0, n, CODE_CHUNK):
        stop = min(n, start + CODE_CHUNK)
        lo, hi = _codes(keys[start:stop], g)
        span = (hi >> np.uint64(shift)) - (lo >> np.uint64(shift))
        sweep = span <= np.uint64(SWEEP_SPAN * (stop - start))
        missing += _find_codes(index, shift, row_keys, keys[start:stop], g,
                               rows[start:stop], sweep, also)
    return missing


@numba.njit(**_JIT)
def _find_codes(index, shift, row_keys, keys, g, rows, sweep, also):
    """:func:`index_find` of ``keys`` whose hash codes are ``g[:len(keys)]``.

    Software-pipelined: the home slot of the key :data:`PREFETCH` places ahead is
    prefetched, and the row key named there half as far ahead, so that keys grouped by code
    range but unsorted inside a range (a plan's buckets) or in any order cost overlapping
    misses rather than one stall each. With ``sweep`` (keys grouped in ascending code
    ranges), the index's slots and the row keys up to :data:`SWEEP_SLOTS` and
    :data:`SWEEP_ROWS` beyond the furthest reached are prefetched too, in ascending order,
    a cache line per key (and the rows of ``also`` with the row keys, unless it is
    empty): the next ranges then stream in while this one is looked up (10^6
    planned keys in pieces of 125,000, index and rows not in the cache: 8.2-8.3 ms without,
    6.8-6.9 ms with). The first 4 slots from home are compared at once
    (:func:`_in_window`); the probe loop runs only beyond them or for absent keys (10^6
    planned keys of a shard of 1.1 10^6: 7.0-7.4 ms instead of 9.1-9.4 with the loop alone
    and the cache warm, 8.5 instead of 9.8 with the index cold). Slots and rows are indexed
    with unsigned integers: numba then leaves out the test for negative indices.
    """
    mask = np.uint64(index.shape[0] - 1)
    n = keys.shape[0]
    half = PREFETCH // 2
    ushift = np.uint64(shift)
    one = np.uint64(1)
    line = np.uint64(8)  # slots, or row keys, per cache line
    n_slots = np.uint64(index.shape[0])
    n_keys = np.uint64(row_keys.shape[0])
    far = np.uint64(0)  # the furthest home slot reached
    q = (g[0] >> ushift) if n else far  # the next slot to sweep
    far_row = np.uint64(0)
    q_row = n_keys  # the next row key to sweep; none until a row is seen
    missing = 0
    for i in range(n):
        ui = np.uint64(i)
        if i + PREFETCH < n:
            h = g[ui + np.uint64(PREFETCH)] >> ushift
            prefetch(index, h)
            prefetch(index, (h + np.uint64(3)) & mask)  # the window's end
            if sweep:
                far = max(far, h)
                if q < min(far + np.uint64(SWEEP_SLOTS), n_slots):
                    prefetch(index, q)
                    q += line
        if i + half < n:
            w = index[g[ui + np.uint64(half)] >> ushift]
            if w != 0:
                ahead = (w & _LOW32) - one  # a row key of that home slot (a uint64)
                prefetch(row_keys, ahead)
                if sweep:
                    if q_row == n_keys:
                        q_row = ahead
                        far_row = ahead
                    elif ahead > far_row and ahead - far_row < np.uint64(8 * SWEEP_ROWS):
                        far_row = ahead  # (a row created out of order does not jump it)
                    if q_row < min(far_row + np.uint64(SWEEP_ROWS), n_keys):
                        prefetch(row_keys, q_row)
                        if also.shape[0] > q_row:
                            prefetch(also, q_row)
                        q_row += line
        k = keys[ui]
        gi = g[ui]
        fp = gi & _LOW32
        p = gi >> ushift
        c = _in_window(index, mask, p, fp)
        if c != 0 and row_keys[c - one] == k:
            r = np.int64(c - one)
        else:
            r = -1
            while True:
                w = index[p]
                if w == 0:
                    missing += 1
                    break
                if (w >> _U32) == fp:
                    c = (w & _LOW32) - one
                    if row_keys[c] == k:
                        r = np.int64(c)
                        break
                p = (p + one) & mask
        rows[ui] = r
    return missing


@numba.njit(inline="always", **_JIT)
def _place(index, shift, g, row):
    """Put ``row`` (of hash code ``g``, not in the index) in the first free slot from home."""
    mask = index.shape[0] - 1
    p = _home(g, shift)
    while index[p] != 0:
        p = (p + 1) & mask
    index[p] = ((g & _LOW32) << _U32) | np.uint64(row + 1)


@numba.njit(**_JIT)
def index_insert(index, shift, row_keys, keys, rows, n_rows):
    """Give each absent key (``rows[i] == -1``) the next row, from ``n_rows`` on, in input
    order: records it in ``row_keys`` and the index. A key repeated among them gets the row
    of its first place (the walk to the first free slot from home passes it). The caller
    keeps the load at most :data:`MAX_LOAD`. Returns the new row count."""
    mask = index.shape[0] - 1
    for i in range(keys.shape[0]):
        if rows[i] >= 0:
            continue
        k = keys[i]
        g = hash_code(k)
        fp = g & _LOW32
        p = _home(g, shift)
        r = -1
        while True:
            w = index[p]
            if w == 0:
                break
            if (w >> _U32) == fp and row_keys[np.int64(w & _LOW32) - 1] == k:
                r = np.int64(w & _LOW32) - 1  # placed by an earlier place of this call
                break
            p = (p + 1) & mask
        if r < 0:
            index[p] = (fp << _U32) | np.uint64(n_rows + 1)
            row_keys[n_rows] = k
            r = n_rows
            n_rows += 1
        rows[i] = r
    return n_rows


@numba.njit(**_JIT)
def index_build(index, shift, row_keys, n_rows):
    """Fill an empty (all-zero) ``index`` with rows ``0 .. n_rows - 1``."""
    for r in range(n_rows):
        _place(index, shift, hash_code(row_keys[r]), r)


@numba.njit(**_JIT)
def index_renumber(index, perm):
    """Number the rows in the order of the index's slots: ``perm[new] = old``, and the index
    updated to the new rows. ``perm`` has one entry per row held."""
    r = 0
    for p in range(index.shape[0]):
        w = index[p]
        if w != 0:
            perm[r] = np.uint32((w & _LOW32) - np.uint64(1))
            r += 1
            index[p] = (w & ~_LOW32) | np.uint64(r)
