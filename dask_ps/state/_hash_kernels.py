"""Numba kernels of hashed (sparse) tables: key planning by hash order, and the shards' index.

Every key ``k`` of a hashed table has a 64-bit *hash code* ``g = rotl(splitmix64(k), 32)``, a
bijection of the key. Its low 32 bits pick the shard (``(splitmix64(k) >> 32) % n_shards``,
the hash partitioner's rule); its high bits pick the key's home slot in the shard's index.

* The client sorts the distinct keys of a call by ``(shard, g)`` with a radix sort
  (:func:`plan_hashed`): sequential passes over the keys instead of one random probe of a
  hash table per key.
* The shard's index is open addressing with linear probing, addressed by the high bits of
  ``g``, one 8-byte word per slot: ``(fingerprint << 32) | (row + 1)``, 0 when empty, where
  the fingerprint is the low 32 bits of ``g``. So keys that arrive sorted by ``g`` visit the
  index in memory order for any table size (the prefetcher streams it), and a probe compares
  fingerprints, looking at the key itself only when they match.
* When the index grows, the shard renumbers its rows in the order of the index's slots
  (:func:`index_renumber`): nearly hash-code order, so that rows, too, are read in memory
  order by sorted calls.

Kernels take arrays and scalars only and have pure-Python twins in
``tests/state/test_hash_kernels.py``.
"""

from __future__ import annotations

import numba
import numpy as np

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
#: Keys per call below which :func:`plan_hashed` sorts by insertion, without radix passes.
_SMALL = 48


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


@numba.njit(**_JIT)
def sort_by_hash(keys, n_shards, magic, g0, g1, p0, p1, count):
    """Sort ``keys`` by ``(shard, hash code)``, stably (equal keys keep their input order).

    Parameters
    ----------
    keys : int64 array, shape (n,)
    n_shards : int
    magic : uint64
        :func:`fastmod_magic` of ``n_shards`` (unused for 1 shard).
    g0, g1 : uint64 arrays, shape (>= n,)
    p0, p1 : uint32 arrays, shape (>= n,)
        Scratch; nothing is expected of their content. ``n < 2^32``.
    count : int64 array, shape (>= 256 * (n_shards + 2),)
        Scratch.

    Returns
    -------
    codes : uint64 array, shape (n,)
        The hash codes, sorted by ``(shard, code)`` (a view of ``g0`` or ``g1``).
    order : uint32 array, shape (n,)
        ``order[j]``: the input position of the ``j``-th key in that order (a view of ``p0``
        or ``p1``).

    Notes
    -----
    Least-significant-digit radix passes of 8 bits over the top ``8 * passes`` bits of the
    codes (1 to 3 passes, so that about 4 keys of a shard share those bits), the last pass
    with the shard as its most significant part, then an insertion pass that orders the
    keys sharing them. Each pass reads its input in order and writes to 256 (times the
    shards) places at once, which stay in cache: for 10^6 keys, ~4 ms per pass on this
    project's 2-core VM, where probing a hash table of 2 10^6 slots at random took ~50 ms.
    """
    n = keys.shape[0]
    if n <= _SMALL:
        for i in range(n):
            g0[i] = hash_code(keys[i])
            p0[i] = i
    else:
        per_shard = n // n_shards
        passes = 1 if per_shard < 4 * 256 else (2 if per_shard < 4 * 65536 else 3)
        low = 64 - 8 * passes
        last = 256 * (passes - 1)
        count[: last + 256 * n_shards] = 0
        # the codes, and the histograms of all passes, in one read of the keys
        for i in range(n):
            g = hash_code(keys[i])
            g0[i] = g
            for q in range(passes - 1):
                count[256 * q + np.int64((g >> np.uint64(low + 8 * q)) & np.uint64(255))] += 1
            count[last + 256 * _shard_of(g, n_shards, magic) + np.int64(g >> np.uint64(56))] += 1
        for q in range(passes):
            t = 0
            for d in range(256 * q, 256 * q + 256 * (n_shards if q == passes - 1 else 1)):
                c = count[d]
                count[d] = t
                t += c
        _radix_pass(g0, p0, g1, p1, count, 0, np.uint64(low), passes == 1, True, n_shards,
                    magic, n)
        if passes == 2:
            _radix_pass(g1, p1, g0, p0, count, 256, np.uint64(low + 8), True, False,
                        n_shards, magic, n)
        elif passes == 3:
            _radix_pass(g1, p1, g0, p0, count, 256, np.uint64(low + 8), False, False,
                        n_shards, magic, n)
            _radix_pass(g0, p0, g1, p1, count, 512, np.uint64(low + 16), True, False,
                        n_shards, magic, n)
        if passes != 2:
            g0, p0 = g1, p1
    # insertion pass: exact order by (shard, code); short moves only after the radix passes
    for j in range(1, n):
        g = g0[j]
        if g0[j - 1] <= g and n > _SMALL:
            continue  # the common case: in order (an earlier shard's code would not move it)
        s = _shard_of(g, n_shards, magic)
        p = p0[j]
        m = j - 1
        while m >= 0:
            h = g0[m]
            t = _shard_of(h, n_shards, magic)
            if t < s or (t == s and h <= g):
                break
            g0[m + 1] = h
            p0[m + 1] = p0[m]
            m -= 1
        g0[m + 1] = g
        p0[m + 1] = p
    return g0[:n], p0[:n]


@numba.njit(**_JIT)
def _radix_pass(src_g, src_p, dst_g, dst_p, count, base, shift, by_shard, first, n_shards,
                magic, n):
    """One stable counting-sort pass of :func:`sort_by_hash` on the digit
    ``(code >> shift) & 255`` (with ``by_shard``: plus 256 times the shard), placing at
    ``count[base + digit]``; ``first``: the positions are the input's own."""
    for i in range(n):
        g = src_g[i]
        if by_shard:
            d = base + 256 * _shard_of(g, n_shards, magic) + np.int64(g >> shift)
        else:
            d = base + np.int64((g >> shift) & np.uint64(255))
        j = count[d]
        count[d] = j + 1
        dst_g[j] = g
        dst_p[j] = i if first else src_p[i]


@numba.njit(**_JIT)
def plan_hashed(keys, n_shards, magic, g0, g1, p0, p1, count, inverse, defer_inverse):
    """Deduplicate the keys of a hashed table and group them by shard, in hash order.

    Parameters
    ----------
    keys : int64 array, shape (n,)
        Any order, repeats allowed.
    n_shards, magic, g0, g1, p0, p1, count
        As for :func:`sort_by_hash`.
    inverse : int64 array, shape (n,)
        Filled with the position in ``local`` of each input key, unless ``defer_inverse``.
    defer_inverse : bool
        Leave ``inverse`` alone; the caller fills it with :func:`fill_inverse` from
        ``order`` and ``runs`` (while the shards answer a pull).

    Returns
    -------
    local : int64 array, shape (n_unique,)
        Distinct keys, grouped by shard, in hash-code order inside each shard.
    offsets : int64 array, shape (n_shards + 1,)
        ``local[offsets[s]:offsets[s + 1]]`` go to shard ``s``.
    order : uint32 array, shape (n,)
        Input position of each key in sorted order (a view of scratch ``p0`` or ``p1``).
    runs : int64 array, shape (n_unique + 1,)
        ``order[runs[u]:runs[u + 1]]`` are the input positions of ``local[u]`` (ascending);
        shape (0,) when the keys were distinct (then ``runs[u] = u``).
    identity : bool
        Whether the keys were distinct and in that order already (``inverse`` = arange).
    """
    n = keys.shape[0]
    n_shards_ = max(n_shards, 1)
    codes, order = sort_by_hash(keys, n_shards_, magic, g0, g1, p0, p1, count)
    offsets = np.zeros(n_shards_ + 1, np.int64)
    local = np.empty(n, np.int64)
    u = 0
    identity = True
    for j in range(n):
        g = codes[j]
        if j > 0 and g == codes[j - 1]:
            identity = False
            continue
        local[u] = key_of(g)
        offsets[_shard_of(g, n_shards_, magic) + 1] += 1
        identity = identity and order[j] == j
        u += 1
    for s in range(n_shards_):
        offsets[s + 1] += offsets[s]
    if u == n:
        runs = np.empty(0, np.int64)
    else:
        runs = np.empty(u + 1, np.int64)
        v = 0
        for j in range(n):
            if j == 0 or codes[j] != codes[j - 1]:
                runs[v] = j
                v += 1
        runs[u] = n
    if not defer_inverse:
        fill_inverse(order, runs, inverse)
    return local[:u], offsets, order, runs, identity


@numba.njit(**_JIT)
def fill_inverse(order, runs, inverse):
    """``inverse[order[j]] = u`` for every position ``j`` of run ``u`` (see
    :func:`plan_hashed`): the position in ``local`` of each input key."""
    if runs.shape[0] == 0:
        for j in range(order.shape[0]):
            inverse[order[j]] = j
        return
    for u in range(runs.shape[0] - 1):
        for j in range(runs[u], runs[u + 1]):
            inverse[order[j]] = u


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
