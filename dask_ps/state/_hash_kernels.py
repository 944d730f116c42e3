"""Numba kernels of hashed (sparse) tables: key planning by hash order, and the shards' index.

Every key ``k`` of a hashed table has a 64-bit *hash code* ``g = rotl(splitmix64(k), 32)``, a
bijection of the key. Its low 32 bits pick the shard (``(splitmix64(k) >> 32) % n_shards``,
the hash partitioner's rule); its high bits pick the key's home slot in the shard's index.

* The client groups the distinct keys of a call by shard and by ranges of ``g``
  (:func:`plan_hashed`): one radix pass over the keys, then repeats found bucket by bucket in
  a small table that stays in cache, instead of one random probe of a large table per key.
* The shard's index is open addressing with linear probing, addressed by the high bits of
  ``g``, one 8-byte word per slot: ``(fingerprint << 32) | (row + 1)``, 0 when empty, where
  the fingerprint is the low 32 bits of ``g``. So keys that arrive grouped by ranges of ``g``
  visit the index range by range, in cache, for any table size, and a probe compares
  fingerprints, looking at the key itself only when they match.
* When the index grows, the shard renumbers its rows in the order of the index's slots
  (:func:`index_renumber`): nearly hash-code order, so that rows, too, are read range by
  range by planned calls.

Kernels take arrays and scalars only and have pure-Python twins in
``tests/state/test_hash_kernels.py``.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.sorting import sort_pairs
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


#: Keys per bucket that :func:`plan_hashed` aims at: the radix pass writes to a few hundred
#: places (in cache), and a bucket's dedup table (twice as many slots of 16 bytes) stays in
#: the L2 cache.
BUCKET = 4096
#: Generations a dedup table's tags can tell apart before it must be cleared.
MAX_GEN = 2**32 - 1


@numba.njit(**_JIT)
def plan_hashed(keys, n_shards, magic, scratch_codes, codes, order, count, table, gen,
                inverse, defer_inverse):
    """Deduplicate the keys of a hashed table and group them by shard, in hash-code order.

    One radix pass puts the keys in buckets: by shard, then by the top bits of their hash
    code (about :data:`BUCKET` keys each, so buckets run in ascending code ranges). Inside a
    bucket (in cache), its codes are sorted and equal neighbours merged
    (:func:`_sort_dedup_bucket`); a bucket of many repeats instead finds them in a small
    open-addressing table — its slots tagged with a generation number instead of being
    cleared, so a bucket costs its keys only — and sorts the distinct codes. One pass over
    memory instead of three for a radix sort, and the same order.

    Parameters
    ----------
    keys : int64 array, shape (n,)
        Any order, repeats allowed; ``n < 2^32``.
    n_shards : int
    magic : uint64
        :func:`fastmod_magic` of ``n_shards`` (unused for 1 shard).
    scratch_codes, codes : uint64 arrays, shape (>= n,)
    order : uint32 array, shape (>= n,)
    count : int64 array, shape (>= n_shards * 2**16 + 1,)
        Scratch; nothing is expected of their content.
    table : uint64 array, shape (2 * slots,), slots a power of two
        The dedup table, kept by the caller between calls: per slot a code and a tag
        ``(generation << 32) | position``; the tags hold generations below ``gen`` (zeros at
        first). A bucket that needs more slots (more than half) gets a table of its own.
    gen : int
        The generation the first bucket uses (each bucket takes the next one); the caller
        clears the table before ``gen`` passes :data:`MAX_GEN`.
    inverse : int64 array, shape (n,)
        Filled with the position in ``local`` of each input key, unless ``defer_inverse``.
    defer_inverse : bool
        Leave ``inverse`` alone; the caller fills it with :func:`fill_inverse` from
        ``order`` and ``uid`` (while the shards answer a pull).

    Returns
    -------
    local : int64 array, shape (n_unique,)
        Distinct keys, grouped by shard, in ascending hash-code order inside each (each
        bucket's distinct codes sorted in cache: the shards read their index and rows in
        memory order). Strictly ascending ``keys`` (distinct by construction) skip the
        dedup and the sort: grouped by shard and by hash-code range (buckets of about
        :data:`BUCKET` keys, in ascending ranges), in input order inside a bucket — still
        read range by range by the shards, at less than half the planning time.
    offsets : int64 array, shape (n_shards + 1,)
        ``local[offsets[s]:offsets[s + 1]]`` go to shard ``s``.
    order : uint32 array, shape (n,)
        Input position of each key in bucket order (a view of ``order``).
    uid : int64 array, shape (n,) or (0,)
        Position in ``local`` of each key in bucket order; empty when the keys were
        distinct (then it is ``arange(n)``).
    identity : bool
        Whether the keys were distinct and in that order already (``inverse`` = arange).
    gen : int
        The next unused generation.
    """
    n = keys.shape[0]
    b = 0
    while b < 16 and (n_shards << b) * BUCKET < n:
        b += 1
    nb = n_shards << b
    shift = np.uint64(64 - b) if b else np.uint64(0)
    count[: nb + 1] = 0
    ascending = True  # strictly: then the keys are distinct (np.unique's output, CSR columns)
    prev = keys[0] if n else 0
    for i in range(n):
        k = keys[i]
        ascending &= (i == 0) | (k > prev)
        prev = k
        g = hash_code(k)
        scratch_codes[i] = g
        top = np.int64(g >> shift) if b else 0
        count[(_shard_of(g, n_shards, magic) << b) + top + 1] += 1
    biggest = 0
    for d in range(nb):
        biggest = max(biggest, count[d + 1])
        count[d + 1] += count[d]
    for i in range(n):
        g = scratch_codes[i]
        top = np.int64(g >> shift) if b else 0
        d = (_shard_of(g, n_shards, magic) << b) + top
        j = count[d]
        count[d] = j + 1
        codes[j] = g
        order[j] = i
    # count[d] is now the end of bucket d
    if ascending:  # distinct: no dedup; a bucket's keys stay in input order
        return _plan_distinct(codes[:n], order[:n], count, n_shards, b, inverse,
                              defer_inverse) + (gen,)
    tbits = 1
    while (1 << tbits) < 2 * biggest:
        tbits += 1
    if (2 << tbits) > table.shape[0]:  # a bucket of many repeats: a table of its own
        table = np.zeros(2 << tbits, np.uint64)
    tmask = (1 << tbits) - 1
    tshift = np.uint64(64 - tbits)
    low = np.uint64(0xFFFFFFFF)
    offsets = np.zeros(n_shards + 1, np.int64)
    local = np.empty(n, np.int64)
    uid = np.empty(n, np.int64)
    ucodes = scratch_codes  # free since the scatter: the distinct codes of a bucket
    # sorting a bucket's distinct codes: scratch for up to its size
    sub_codes = np.empty(biggest, np.uint64)
    sub_pos = np.empty(biggest, np.int64)
    new_pos = np.empty(biggest, np.int64)
    sub_count = np.empty(2 * biggest + 2, np.int64)
    u = 0
    start = 0
    for d in range(nb):
        end = count[d]
        if end == start:
            continue
        first = u
        if _sort_dedup_bucket(codes[start:end], 64 - b, sub_codes, sub_pos, sub_count,
                              local, uid[start:end], u):
            u += np.int64(sub_count[0])  # the bucket's distinct keys, now in local
            offsets[(d >> b) + 1] += u - first
            start = end
            continue
        # a bucket of many repeats: find them in the generation-tagged table first
        tag = np.uint64(gen) << np.uint64(32)
        for j in range(start, end):
            g = codes[j]
            t = np.int64(((g ^ (g >> np.uint64(29))) * _GOLDEN) >> tshift)
            while (table[2 * t + 1] & ~low) == tag and table[2 * t] != g:
                t = (t + 1) & tmask
            w = table[2 * t + 1]
            if (w & ~low) != tag:
                w = tag | np.uint64(u - first)
                table[2 * t] = g
                table[2 * t + 1] = w
                ucodes[u] = g
                u += 1
            uid[j] = np.int64(w & low)  # first appearance in the bucket, for now
        m = u - first
        _sort_bucket(ucodes[first:u], 64 - b, sub_codes[:m], sub_pos[:m], new_pos[:m],
                     sub_count)
        for r in range(m):
            local[first + r] = key_of(sub_codes[r])
        for j in range(start, end):
            uid[j] = first + new_pos[uid[j]]
        offsets[(d >> b) + 1] += m
        gen += 1
        start = end
    for s in range(n_shards):
        offsets[s + 1] += offsets[s]
    identity = False
    if u == n:
        plain = True
        for j in range(n):
            if uid[j] != j:
                plain = False
                break
        if plain:
            uid = uid[:0]
            identity = True
            for j in range(n):
                if order[j] != j:
                    identity = False
                    break
    if not defer_inverse:
        fill_inverse(order[:n], uid, inverse)
    return local[:u], offsets, order[:n], uid, identity, gen


#: Most keys of a bucket that may share a group of :func:`_sort_dedup_bucket`'s counting
#: pass; beyond, the bucket has many repeats and goes through the dedup table instead.
GROUP_MAX = 48


@numba.njit(inline="always", **_JIT)
def _group_sort(codes, key_bits, out, pos, count, group_max):
    """Sort one bucket's ``codes`` (m,), equal above their low ``key_bits`` bits: a counting
    pass on the next bits into about ``m`` groups (they are uniform), then insertion sort of
    (code, position) pairs, in cache. ``out[:m]`` gets the codes ascending and ``pos[r]``
    the index in ``codes`` of ``out[r]``; ``count`` (>= 2 m + 2) is scratch.

    Returns False, having done nothing but the counting, when a group holds more than
    ``group_max`` codes (many repeats: insertion sort could go quadratic)."""
    m = codes.shape[0]
    sb = 0
    while (1 << sb) < m:
        sb += 1
    shift = np.uint64(max(key_bits - sb, 0))
    mask = np.uint64((1 << sb) - 1)
    count[: (1 << sb) + 1] = 0
    for q in range(m):
        count[np.int64((codes[q] >> shift) & mask) + 1] += 1
    for k in range(1 << sb):
        if count[k + 1] > group_max:
            return False
        count[k + 1] += count[k]
    for q in range(m):
        k = np.int64((codes[q] >> shift) & mask)
        r = count[k]
        count[k] = r + 1
        out[r] = codes[q]
        pos[r] = q
    sort_pairs(out, pos, m)
    return True


@numba.njit(inline="always", **_JIT)
def _sort_dedup_bucket(codes, key_bits, sub_codes, sub_pos, count, local, uid, u):
    """Sort-first dedup of one bucket (the usual case: few repeats). ``codes`` (m,) are the
    bucket's codes, equal above their low ``key_bits`` bits. :func:`_group_sort`, then equal
    neighbours are one key: ``local[u:]`` gets the distinct keys ascending, ``uid[j]`` the
    position in ``local`` of ``codes[j]``, and ``count[0]`` their number.

    Returns False, doing nothing but the counting, when a group holds more than
    :data:`GROUP_MAX` codes; the caller then dedups the bucket with its hash table. One pass
    fewer than dedup-then-sort and no random probes: about 40 % less time for distinct
    keys."""
    if not _group_sort(codes, key_bits, sub_codes, sub_pos, count, GROUP_MAX):
        return False
    v = u - 1
    prev = np.uint64(0)
    for r in range(codes.shape[0]):
        g = sub_codes[r]
        if r == 0 or g != prev:
            v += 1
            local[v] = key_of(g)
            prev = g
        uid[sub_pos[r]] = v
    count[0] = v + 1 - u
    return True


@numba.njit(inline="always", **_JIT)
def _plan_distinct(codes, order, count, n_shards, b, inverse, defer_inverse):
    """The rest of :func:`plan_hashed` for keys known distinct (strictly ascending): the
    buckets as the radix pass left them (by shard and code range, input order inside)."""
    n = codes.shape[0]
    local = np.empty(n, np.int64)
    identity = True
    for j in range(n):
        local[j] = key_of(codes[j])
        identity &= order[j] == j
    offsets = np.zeros(n_shards + 1, np.int64)
    for s in range(n_shards):
        offsets[s + 1] = count[((s + 1) << b) - 1]
    uid = local[:0]
    if not defer_inverse:
        fill_inverse(order, uid, inverse)
    return local, offsets, order, uid, identity


@numba.njit(inline="always", **_JIT)
def _sort_bucket(codes, key_bits, out, pos, new_pos, count):
    """Sort a bucket's distinct ``codes`` (equal above their low ``key_bits`` bits) with
    :func:`_group_sort`: ``out`` gets them ascending, ``pos[r]`` the index in ``codes`` of
    ``out[r]`` and ``new_pos[q]`` where ``codes[q]`` went."""
    m = codes.shape[0]
    _group_sort(codes, key_bits, out, pos, count, m)
    for r in range(m):
        new_pos[pos[r]] = r


def table_size(n: int) -> int:
    """Slots of a dedup table for buckets of up to ``n`` keys (a power of two >= 2 n)."""
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@numba.njit(**_JIT)
def fill_inverse(order, uid, inverse):
    """``inverse[order[j]] = uid[j]`` (``j`` when ``uid`` is empty): the position in
    ``local`` of each input key (see :func:`plan_hashed`)."""
    if uid.shape[0] == 0:
        for j in range(order.shape[0]):
            inverse[order[j]] = j
        return
    for j in range(order.shape[0]):
        inverse[order[j]] = uid[j]


# -- the shard's index -------------------------------------------------------------------------
@numba.njit(inline="always", **_JIT)
def _home(g, shift):
    return np.int64(g >> np.uint64(shift))


@numba.njit(**_JIT)
def index_find(index, shift, row_keys, keys, rows):
    """Look ``keys`` up: ``rows[i]`` is the row of ``keys[i]``, or -1. Returns the count of
    absent keys.

    ``index`` has ``2 ** (64 - shift)`` slots; ``row_keys[r]`` is the key of row ``r``.
    """
    mask = index.shape[0] - 1
    missing = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        g = hash_code(k)
        fp = g & _LOW32
        p = _home(g, shift)
        r = -1
        while True:
            w = index[p]
            if w == 0:
                missing += 1
                break
            if (w >> _U32) == fp:
                c = np.int64(w & _LOW32) - 1
                if row_keys[c] == k:
                    r = c
                    break
            p = (p + 1) & mask
        rows[i] = r
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
    order: records it in ``row_keys`` and the index. Keys are distinct; the caller keeps the
    load at most :data:`MAX_LOAD`. Returns the new row count."""
    for i in range(keys.shape[0]):
        if rows[i] >= 0:
            continue
        k = keys[i]
        _place(index, shift, hash_code(k), n_rows)
        row_keys[n_rows] = k
        rows[i] = n_rows
        n_rows += 1
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
