"""Numba kernels of the CTR table generator (:mod:`dask_ps.io.generate_table`): planted
parameters as pure functions of (seed, column, value), the planted logit of each row, and CSV
formatting."""

from __future__ import annotations

import numba
import numpy as np

from ..state._kernels import mix64
from ._generate_kernels import _put_int

__all__ = ["format_csv", "hex_strings", "planted_logits", "planted_tables", "token32", "tokens",
           "unit_normal"]

_JIT = dict(cache=True, nogil=True)
_TWO_PI = 2.0 * np.pi
_INV_2_53 = 1.0 / 9007199254740992.0
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


@numba.njit(inline="always", **_JIT)
def unit_normal(seed, a, b, c):
    """A standard normal draw that depends only on ``(seed, a, b, c)`` (all uint64-able):
    Box-Muller on two uniforms hashed from them."""
    h1 = mix64(mix64(mix64(np.uint64(seed) ^ np.uint64(a)) ^ np.uint64(b)) ^ np.uint64(c))
    h2 = mix64(h1)
    u1 = (np.float64(h1 >> np.uint64(11)) + 1.0) * _INV_2_53  # (0, 1]
    u2 = np.float64(h2 >> np.uint64(11)) * _INV_2_53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(_TWO_PI * u2)


@numba.njit(inline="always", **_JIT)
def token32(rank, salt):
    """A bijection of 32-bit ``rank`` (for a fixed ``salt``): distinct values of a column get
    distinct tokens. (Murmur3's 32-bit finaliser on ``rank ^ salt``.)"""
    m = np.uint64(0xFFFFFFFF)  # numba widens uint32 products: wrap them by hand
    x = (np.uint64(rank) ^ np.uint64(salt)) & m
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x85EBCA6B)) & m
    x ^= x >> np.uint64(13)
    x = (x * np.uint64(0xC2B2AE35)) & m
    x ^= x >> np.uint64(16)
    return np.uint32(x)


@numba.njit(**_JIT)
def tokens(ranks, salt, out):
    """``out[i] = token32(ranks[i], salt)``."""
    for i in range(ranks.shape[0]):
        out[i] = token32(ranks[i], salt)
    return out


@numba.njit(inline="always", **_JIT)
def _put_hex8(buf, pos, t):
    for k in range(8):
        buf[pos + 7 - k] = _HEX[(t >> np.uint32(4 * k)) & np.uint32(15)]


@numba.njit(**_JIT)
def hex_strings(tokens, missing, offsets, data):
    """An Arrow string column of ``tokens`` as 8 lowercase hex digits, empty where
    ``missing``: fills ``offsets`` (int32, n + 1) and ``data`` (uint8, 8 n); returns the bytes
    used."""
    pos = 0
    offsets[0] = 0
    for i in range(tokens.shape[0]):
        if not missing[i]:
            _put_hex8(data, pos, tokens[i])
            pos += 8
        offsets[i + 1] = pos
    return pos


@numba.njit(**_JIT)
def planted_tables(seed, cards, lin_scale, int_scale, rank_k):
    """The planted parameters of every value of every categorical column, as tables:
    ``w[starts[c] + r]`` and ``v[starts[c] + r, :]`` for column ``c`` and rank ``r`` in
    ``0 .. cards[c]`` (0 = missing). ``w ~ N(0, lin_scale^2)``, ``v ~ N(0, int_scale^2 / rank_k
    I)``, each from a hash of ``(seed, column, rank, dimension)``."""
    n_cat = cards.shape[0]
    starts = np.zeros(n_cat + 1, np.int64)
    for c in range(n_cat):
        starts[c + 1] = starts[c] + cards[c] + 1
    w = np.empty(starts[n_cat])
    v = np.empty((starts[n_cat], rank_k))
    vs = int_scale / np.sqrt(rank_k)
    for c in range(n_cat):
        for r in range(cards[c] + 1):
            w[starts[c] + r] = lin_scale * unit_normal(seed, 2 + c, r, 0xFFFF)
            for d in range(rank_k):
                v[starts[c] + r, d] = vs * unit_normal(seed, 2 + c, r, d)
    return starts, w, v


@numba.njit(**_JIT)
def planted_logits(ranks, t, num_missing, beta, starts, w, v, pair_a, pair_b, intercept,
                   out):
    """The planted logit of each row: ``out[i] = intercept + sum_c w[c, r_c] +
    sum_j beta_j t_j + sum_(a, b) <v[a, r_a], v[b, r_b]>``.

    ``ranks`` (n, C) int64: the value of each categorical column as its popularity rank
    (1-based; 0 = missing, a value of its own). ``t`` (n, N) float64: the transformed count
    of each numeric column; ``num_missing`` (n, N) bool (a missing count adds 0). ``starts``,
    ``w``, ``v``: from :func:`planted_tables`. ``pair_a``, ``pair_b``: the column pairs with
    planted interactions.
    """
    n, n_cat = ranks.shape
    for i in range(n):
        s = intercept
        for c in range(n_cat):
            s += w[starts[c] + ranks[i, c]]
        for j in range(t.shape[1]):
            if not num_missing[i, j]:
                s += beta[j] * t[i, j]
        for p in range(pair_a.shape[0]):
            ra = starts[pair_a[p]] + ranks[i, pair_a[p]]
            rb = starts[pair_b[p]] + ranks[i, pair_b[p]]
            for d in range(v.shape[1]):
                s += v[ra, d] * v[rb, d]
        out[i] = s


@numba.njit(**_JIT)
def format_csv(labels, counts, count_missing, tokens, cat_missing, buf):
    """Rows as CSV text ``label,count,...,token,...\\n``: integer labels and counts
    (non-negative; empty when missing), categorical tokens as 8 lowercase hex digits (empty
    when missing). ``buf`` must hold the output (~ 21 bytes per field are enough). Returns
    the number of bytes written."""
    pos = 0
    for i in range(labels.shape[0]):
        pos = _put_int(buf, pos, labels[i])
        for j in range(counts.shape[1]):
            buf[pos] = 44
            pos += 1
            if not count_missing[i, j]:
                pos = _put_int(buf, pos, counts[i, j])
        for c in range(tokens.shape[1]):
            buf[pos] = 44
            pos += 1
            if not cat_missing[i, c]:
                _put_hex8(buf, pos, tokens[i, c])
                pos += 8
        buf[pos] = 10
        pos += 1
    return pos
