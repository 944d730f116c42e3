"""Integer tables refuse sums past their dtype instead of wrapping.

A push of integers is checked once, client side, against the table's dtype
(:func:`~dask_ps.state.table.checked_update`); what adds them up afterwards is checked here,
in the kernels that do it: the merge of a clock's pushes in a process
(:func:`segment_sum_checked`, used by :func:`~dask_ps.state.merging.split_updates`) and the
addition to the table's rows on the shard (:func:`~dask_ps.kernels.optim.add_step_checked`;
rows sent as a bitmap are decoded for it). Each flags a wrap without a branch in its loop
(:func:`~dask_ps.kernels.optim.add_flagged`); only then does it take back what it added
(wrapping additions undo exactly) and find the key. :func:`overflow_error` names the table,
the shard and the key.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.optim import add_flagged

__all__ = ["overflow_error", "segment_sum_checked"]

_JIT = dict(cache=True, nogil=True)


@numba.njit(**_JIT)
def segment_sum_checked(updates, inverse, n_unique):
    """:func:`~dask_ps.state._kernels.segment_sum` of integer ``updates`` that stops at a sum
    past their dtype: ``(sums, -1)``, or ``(partial sums, i)`` for the first row ``i`` whose
    addition wraps."""
    out = np.zeros((n_unique, updates.shape[1]), updates.dtype)
    for i in range(updates.shape[0]):
        u = inverse[i]
        flag = 0
        row = out[u]
        for j in range(updates.shape[1]):
            flag |= add_flagged(row, j, updates[i, j])
        if flag < 0:
            return out, i
    return out, -1


def overflow_error(spec, shard: int, key: int, current, update, what: str) -> ValueError:
    """The error of a sum past an integer table's dtype: ``current`` (a row, or what a
    clock's updates summed so far) plus ``update`` (a row) for ``key`` of ``spec``'s table on
    ``shard``, where ``what`` says which sum (a push to the shard, a clock's merge)."""
    info = np.iinfo(spec.dtype)
    a, b = np.asarray(current).ravel().tolist(), np.asarray(update).ravel().tolist()
    j = next((j for j in range(len(a)) if not info.min <= a[j] + b[j] <= info.max), 0)
    col = f", column {j}" if len(a) > 1 else ""
    return ValueError(f"table {spec.name!r}, shard {shard}, key {key}{col}: {what} would "
                      f"take it past {spec.dtype} ({a[j]} + {b[j]}, range [{info.min}, "
                      f"{info.max}]); refused, the table is unchanged by it")
