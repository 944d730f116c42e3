"""How the pushes of one clock to a shard become one: rows of the same key summed in a fixed
order, so that a job's updates add up to the same bits from run to run (used by
:class:`~dask_ps.state.shard.Shard`)."""

from __future__ import annotations

import numpy as np

from . import _kernels
from .partition import plan_hashed

__all__ = ["merge_duplicates", "merge_pushes"]


def merge_pushes(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """Sum several pushes ``[(keys (n_i,) int64, values (n_i, ncols)), ...]`` into one, in
    list order: each row's sum adds the pushes' rows in that order, so the result is
    deterministic. Pushes whose keys are each strictly ascending (a block's distinct keys,
    as the estimators push them) are merged in one linear pass per push
    (:func:`~._kernels.merge_sorted_sum`), the others through :func:`merge_duplicates`'s
    hash (on a FTRL epoch's two pushes of ~150,000 sorted keys per shard and clock, the
    hash cost about as much of the shard's CPU as applying the merged push)."""
    keys, values = parts[0]
    sorted_runs = all(k.ndim == 1 and k.dtype == keys.dtype and v.ndim == 2
                      and v.dtype == values.dtype and v.shape[1] == values.shape[1]
                      and (k.shape[0] < 2 or bool(np.all(k[1:] > k[:-1]))) for k, v in parts)
    if not sorted_runs:
        return merge_duplicates(np.concatenate([k for k, _ in parts]),
                                np.concatenate([v for _, v in parts]))
    for k, v in parts[1:]:
        keys, values = _kernels.merge_sorted_sum(keys, values, k, v)
    return keys, values


def merge_duplicates(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the rows of ``values`` (n, ncols) whose ``keys`` (n,) repeat.

    Returns the distinct keys in the order of :func:`plan_hashed` and their sums
    (n_unique, ncols); rows are added in input order, so the result is deterministic.
    """
    plan = plan_hashed(keys, 1)
    if plan.n_unique == keys.shape[0]:
        return plan.local, plan.in_plan_order(values)
    return plan.local, _kernels.segment_sum(values, plan.inverse, plan.n_unique)
