"""Numba kernels of feature hashing: stable 64-bit hashes of strings and integer codes.

The hash of a byte string is FNV-1a (Fowler, Noll, Vo) over its bytes, seeded and finished with
SplitMix64's mixer (the PS's own ``mix64``), so that it is the same on every machine, process and
Python version (unlike ``hash()``), and close strings land far apart.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.hashing import mix64
from ..kernels.sorting import sort_pairs

__all__ = ["LOWEST_BUCKET", "bucket_code", "cross_token", "hash_bytes", "hash_codes",
           "hash_crosses", "hash_strings", "number_token", "rows_to_csr", "sort_small",
           "sort_distinct", "emit_row", "load_word", "pack_bits", "sort_pairs", "RANK_WIDTH"]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_JIT = dict(cache=True, nogil=True)
#: Rows up to this wide sort their keys by rank (:func:`sort_distinct`), wider ones by
#: buckets and insertion (:func:`sort_small`).
RANK_WIDTH = 64


#: The lowest bucket (log_bucket mode): every number at or below it (``-1e308``) shares it,
#: the lowest int64, so that no code is cast from a float that int64 cannot hold.
LOWEST_BUCKET = -2.0**63


@numba.njit(inline="always", **_JIT)
def bucket_code(v):
    """The log-squared bucket of a finite number: ``floor(v)`` for ``v <= 2`` (at least
    :data:`LOWEST_BUCKET`), else ``3 + floor(ln(v)^2)`` (the binning of the Criteo winners,
    Juan et al. 2014)."""
    if v > 2.0:
        return np.int64(3.0 + np.floor(np.log(v) ** 2))
    return np.int64(np.floor(max(v, LOWEST_BUCKET)))


@numba.njit(inline="always", **_JIT)
def number_token(code, seed):
    """Token of a numeric column's bucket ``code`` (int64) under the column's ``seed``."""
    return mix64(mix64(np.uint64(code)) ^ seed)


@numba.njit(inline="always", **_JIT)
def cross_token(ha, hb, seed):
    """Token of a cross of two columns from their tokens ``ha``, ``hb`` (order matters) under
    the cross's ``seed``."""
    return mix64(mix64(ha ^ seed) ^ hb)


@numba.njit(inline="always", **_JIT)
def sort_small(a, m, key_bits, tmp, count):
    """Sort ``a[:m]`` (uint64 keys below ``2**key_bits``) in place.

    A counting pass on the keys' top bits into about ``m`` buckets, then insertion, which
    then moves almost nothing: a row's hashed features are spread evenly over the key
    range, so this avoids most of insertion's mispredicted branches (~3x faster for 32
    keys). ``tmp`` holds ``m`` keys, ``count`` at least ``2 * m + 1`` counts.
    """
    if m >= 12:
        b = 1
        while (1 << b) < m:  # m to 2 m buckets
            b += 1
        shift = np.uint64(max(key_bits - b, 0))
        nb = 1 << b
        count[: nb + 1] = 0
        for i in range(m):
            count[np.int64(a[i] >> shift) + 1] += 1
        for d in range(nb):
            count[d + 1] += count[d]
        for i in range(m):
            d = np.int64(a[i] >> shift)
            tmp[count[d]] = a[i]
            count[d] += 1
        for i in range(m):
            a[i] = tmp[i]
    for i in range(1, m):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@numba.njit(inline="always", **_JIT)
def sort_distinct(a, m, out):
    """``out[:m]`` = ``a[:m]`` sorted, for distinct keys: each key goes to its rank, the
    count of smaller keys. ``m * m`` comparisons without a branch, which the compiler
    vectorises: rows of 32 keys go through :func:`rows_to_csr` in ~25% less time than with
    :func:`sort_small`, whose insertion step mispredicts a branch for every pair of keys in
    one bucket."""
    for j in range(m):
        x = a[j]
        r = 0
        for t in range(m):
            r += a[t] < x
        out[r] = x


@numba.njit(inline="always", **_JIT)
def pack_bits(width, n_features):
    """``(bits, key_bits)``: bits for a feature's column in a packed ``(index << bits) |
    column`` sort key and the bits of the largest key; ``(0, 0)`` when ``n_features``
    leaves no room (then rows sort by :func:`sort_pairs`)."""
    bits = 1
    while (1 << bits) < width:
        bits += 1
    index_bits = 1
    while index_bits < 64 and (np.uint64(1) << np.uint64(index_bits)) < n_features:
        index_bits += 1
    if bits + index_bits > 64:
        return 0, 0
    return bits, bits + index_bits


@numba.njit(inline="always", **_JIT)
def emit_row(tokens, vals, nf, bits, key_bits, order, cols, indices, values, nnz):
    """Write one row's features — ``tokens % nf`` (uint64, its width) with ``vals`` — to
    ``indices``/``values`` from ``nnz``, sorted, repeats summed in the dtype of ``values``;
    ``order`` (5 times the width, plus 1) and ``cols`` (the width) are scratch; ``bits`` and
    ``key_bits`` from :func:`pack_bits`. Returns the entries written."""
    k = tokens.shape[0]
    pow2 = (nf & (nf - np.uint64(1))) == 0
    if bits:
        # (index << bits) | column: distinct keys, sorted by index then column
        for j in range(k):
            c = tokens[j] & (nf - np.uint64(1)) if pow2 else tokens[j] % nf
            order[k + j] = (c << np.uint64(bits)) | np.uint64(j)
        if k <= RANK_WIDTH:
            sort_distinct(order[k: 2 * k], k, order)
        else:
            order[:k] = order[k: 2 * k]
            sort_small(order, k, key_bits, order[k: 2 * k], order[2 * k:].view(np.int64))
    else:
        for j in range(k):
            order[j] = tokens[j] % nf
            cols[j] = j
        sort_pairs(order, cols, k)
    low = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    m = 0
    last = np.uint64(0)
    for t in range(k):
        if bits:  # the same in every round: the compiler takes it out of the loop
            index = order[t] >> np.uint64(bits)
            v = vals[np.int64(order[t] & low)]
        else:
            index = order[t]
            v = vals[cols[t]]
        if t > 0 and index == last:
            values[nnz + m - 1] += v  # a collision: summed
            continue
        indices[nnz + m] = index
        values[nnz + m] = v
        last = index
        m += 1
    return m


@numba.njit(**_JIT)
def rows_to_csr(tokens, vals, n_features, indptr, indices, values):
    """CSR rows (sorted, repeats summed in the dtype of ``values``) of the features
    ``tokens % n_features`` with values ``vals`` (both (n, k)); fills ``indptr`` (n + 1),
    ``indices``, ``values`` (n k) and returns the number of entries."""
    n, k = tokens.shape
    nf = np.uint64(n_features)
    bits, key_bits = pack_bits(k, n_features)
    order = np.empty(5 * k + 1, np.uint64)
    cols = np.empty(k, np.int64)
    nnz = 0
    indptr[0] = 0
    for i in range(n):
        nnz += emit_row(tokens[i], vals[i], nf, bits, key_bits, order, cols, indices, values,
                        nnz)
        indptr[i + 1] = nnz
    return nnz


@numba.njit(**_JIT)
def hash_crosses(tokens, cross_a, cross_b, cross_seed, first):
    """``tokens[:, first + p] = cross_token(tokens[:, a_p], tokens[:, b_p], seed_p)`` for each
    cross ``p`` of columns ``(cross_a[p], cross_b[p])``; ``tokens`` is (n, columns)."""
    for i in range(tokens.shape[0]):
        for p in range(cross_a.shape[0]):
            tokens[i, first + p] = cross_token(tokens[i, cross_a[p]], tokens[i, cross_b[p]],
                                               cross_seed[p])


@numba.njit(inline="always", **_JIT)
def load_word(buf, i):
    """The 8 bytes ``buf[i:i + 8]`` (uint8) as a little-endian uint64 (unsigned indices,
    which need no wraparound: the compiler then makes the 8 loads one)."""
    u = np.uint64(i)
    w = np.uint64(0)
    for k in range(8):
        w |= np.uint64(buf[u + np.uint64(k)]) << np.uint64(8 * k)
    return w


@numba.njit(inline="always", **_JIT)
def hash_bytes(buf, start, end, seed):
    """Hash of ``buf[start:end]`` (uint8) under ``seed`` (uint64).

    Byte by byte, the bytes read 8 at a time (one load, no loop test per byte: 5-10% of the
    time of encoding a CSV block of 8-character categories)."""
    h = _FNV_OFFSET ^ seed
    i = start
    while i + 8 <= end:
        w = load_word(buf, i)
        for k in range(8):
            h = (h ^ ((w >> np.uint64(8 * k)) & np.uint64(255))) * _FNV_PRIME
        i += 8
    while i < end:
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
        i += 1
    return mix64(h)


@numba.njit(**_JIT)
def hash_strings(buf, offsets, valid, seed, missing, out):
    """``out[i]`` = hash of string ``i`` (bytes ``buf[offsets[i]:offsets[i + 1]]``) under
    ``seed``, or ``missing`` where ``valid[i]`` is False."""
    for i in range(out.shape[0]):
        out[i] = hash_bytes(buf, offsets[i], offsets[i + 1], seed) if valid[i] else missing


@numba.njit(**_JIT)
def hash_codes(codes, valid, seed, missing, out):
    """``out[i]`` = hash of int64 ``codes[i]`` under ``seed``, or ``missing`` where invalid."""
    for i in range(out.shape[0]):
        out[i] = number_token(codes[i], seed) if valid[i] else missing
