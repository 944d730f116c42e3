"""Sorting kernels for short runs: insertion sort of keys with a companion array.

Used by the readers for a row's hashed columns, runs that are short and already in cache.
"""

from __future__ import annotations

import numba

__all__ = ["sort_pairs"]

_JIT = dict(cache=True, nogil=True)


@numba.njit(inline="always", **_JIT)
def sort_pairs(keys, cols, m):
    """Sort ``keys[:m]`` ascending (stable) in place, moving ``cols[:m]`` alike; insertion
    sort, for short or nearly sorted runs."""
    for i in range(1, m):
        x, c = keys[i], cols[i]
        j = i - 1
        while j >= 0 and keys[j] > x:
            keys[j + 1] = keys[j]
            cols[j + 1] = cols[j]
            j -= 1
        keys[j + 1] = x
        cols[j + 1] = c
