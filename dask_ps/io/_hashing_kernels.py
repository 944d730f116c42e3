"""Numba kernels of feature hashing: stable 64-bit hashes of strings and integer codes.

The hash of a byte string is FNV-1a (Fowler, Noll, Vo) over its bytes, seeded and finished with
SplitMix64's mixer (the PS's own ``mix64``), so that it is the same on every machine, process and
Python version (unlike ``hash()``), and close strings land far apart.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.hashing import mix64

__all__ = ["hash_bytes", "hash_codes", "hash_strings"]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_JIT = dict(cache=True, nogil=True)


@numba.njit(**_JIT)
def hash_bytes(buf, start, end, seed):
    """Hash of ``buf[start:end]`` (uint8) under ``seed`` (uint64)."""
    h = _FNV_OFFSET ^ seed
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
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
        out[i] = mix64(mix64(np.uint64(codes[i])) ^ seed) if valid[i] else missing
