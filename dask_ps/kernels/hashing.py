"""Hashing kernels: SplitMix64 and the shard of a hashed key.

Shared by the parameter state (hashed tables, shard of a key), the readers (feature hashing)
and the data generator, so that one hash serves them all.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["hash_shard", "mix64"]

_JIT = dict(cache=True, nogil=True)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(inline="always", **_JIT)
def mix64(x):
    """SplitMix64 finaliser (Steele et al., 2014): a bijective, well-spread 64-bit hash."""
    z = np.uint64(x) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(**_JIT)
def hash_shard(keys, n_shards):
    """Shard of each key of a hash-partitioned table.

    The high 32 bits of the hash pick the shard, so that the low bits, which the shards' own
    hash maps use, stay uniform inside each shard.
    """
    out = np.empty(keys.shape[0], np.int64)
    s = np.uint64(n_shards)
    for i in range(keys.shape[0]):
        out[i] = np.int64((mix64(keys[i]) >> np.uint64(32)) % s)
    return out
