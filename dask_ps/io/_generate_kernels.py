"""Numba kernels of the CTR-like generator: scrambled feature ids, planted weights, and LIBSVM
text formatting."""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.hashing import mix64

__all__ = ["format_libsvm", "planted_weights", "scramble"]

_JIT = dict(cache=True, nogil=True)
_TWO_PI = 2.0 * np.pi
_INV_2_53 = 1.0 / 9007199254740992.0


@numba.njit(**_JIT)
def scramble(ranks, seed, n_features, out):
    """Feature id of each popularity rank: ``mix64(rank ^ seed) mod n_features``, so that the
    frequent features lie anywhere in the index space (a hash, not a permutation: ranks may
    collide, as hashed features do)."""
    s = np.uint64(seed)
    m = np.uint64(n_features)
    for i in range(ranks.shape[0]):
        out[i] = np.int64(mix64(np.uint64(ranks[i]) ^ s) % m)


@numba.njit(**_JIT)
def planted_weights(keys, seed, scale, out):
    """A N(0, scale**2) weight per feature id, a pure function of (id, seed): Box-Muller on two
    uniforms hashed from the id, so any worker draws the same weight for the same feature
    without a global array."""
    s = np.uint64(seed)
    for i in range(keys.shape[0]):
        h1 = mix64(np.uint64(keys[i]) ^ s)
        h2 = mix64(h1)
        u1 = (np.float64(h1 >> np.uint64(11)) + 1.0) * _INV_2_53  # (0, 1]
        u2 = np.float64(h2 >> np.uint64(11)) * _INV_2_53
        out[i] = scale * np.sqrt(-2.0 * np.log(u1)) * np.cos(_TWO_PI * u2)


@numba.njit(inline="always", **_JIT)
def _put_int(buf, pos, v):
    if v < 0:
        buf[pos] = 45
        pos += 1
        v = -v
    start = pos
    while True:
        buf[pos] = 48 + v % 10
        pos += 1
        v //= 10
        if v == 0:
            break
    end = pos - 1
    while start < end:  # the digits came out backwards
        buf[start], buf[end] = buf[end], buf[start]
        start += 1
        end -= 1
    return pos


@numba.njit(**_JIT)
def format_libsvm(indptr, indices, values, labels, shift, buf):
    """Write rows as LIBSVM text ``label idx:value ...\\n`` with integer labels and values and
    ``idx = index + shift``; ``buf`` must hold the output (24 bytes per pair and per row are
    always enough). Returns the number of bytes written."""
    pos = 0
    for r in range(indptr.shape[0] - 1):
        pos = _put_int(buf, pos, labels[r])
        for p in range(indptr[r], indptr[r + 1]):
            buf[pos] = 32
            pos = _put_int(buf, pos + 1, indices[p] + shift)
            buf[pos] = 58
            pos = _put_int(buf, pos + 1, values[p])
        buf[pos] = 10
        pos += 1
    return pos
