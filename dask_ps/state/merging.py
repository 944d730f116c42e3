"""How the pushes of one clock become one: a process's, split by shard before they leave
(:func:`split_updates`, used by :class:`~dask_ps.state.client.ProcessClient`), and a
shard's, rows of the same key summed in a fixed order, so that a job's updates add up to the
same bits from run to run (:func:`merge_pushes`, used by :class:`~dask_ps.state.shard.Shard`),
then applied to the shard's tables all or none (:func:`apply_all`)."""

from __future__ import annotations

import numpy as np

from . import _kernels
from ._overflow import overflow_error, segment_sum_checked
from .partition import plan_hashed
from .wire_forms import KeyRef, Reordered

__all__ = ["apply_all", "merge_duplicates", "merge_pushes", "split_updates"]


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


def split_updates(specs: dict, n_shards: int, by_table: dict) -> list[list]:
    """Merge each table's buffered updates and split them by shard: what a process's clock
    sends.

    Parameters
    ----------
    specs : dict of str to TableSpec
        The model's tables.
    n_shards : int
    by_table : dict of str to list
        For each table, its updates of the clock in the order they are summed, each
        ``(keys, values, plan, named)``: ``keys`` int64 (n,) or None when ``plan`` (the
        :class:`~dask_ps.state.partition.KeyPlan` of the pull with the same keys) holds
        them; ``values`` (n, ncols) in the table's dtype; ``named``, from that pull, the
        ``(keys_id, start, stop)`` of each piece a shard kept under a name, or None.

    Returns
    -------
    list of list
        For each shard, ``(table, keys, values)`` of each call's share: ``keys`` the
        distinct keys in the form they travel
        (:meth:`~dask_ps.state.partition._Partitioner.wire_keys`), or a
        :class:`~dask_ps.state.wire_forms.KeyRef` naming a pull's piece; ``values`` their
        summed updates, or a :class:`~dask_ps.state.wire_forms.Reordered` that puts them in
        the piece's order as it is sent (one update with a pull's plan, which knew each
        key's place).
    """
    per_shard = [[] for _ in range(n_shards)]
    for name, parts in by_table.items():
        spec = specs[name]
        named = None
        if len(parts) == 1 and parts[0][2] is not None:
            _, values, plan, named = parts[0]
            keys = None  # the plan's: see caller_keys
        else:
            keys = [k if k is not None else spec.partitioner.caller_keys(p)
                    for k, _, p, _ in parts]
            keys = np.concatenate(keys) if len(keys) > 1 else keys[0]
            values = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
            plan, _ = spec.partitioner.plan(keys)
        ordered = bool(named) and plan.order.shape[0] == values.shape[0]
        if ordered:  # as each piece leaves, see Reordered
            merged = None
        elif plan.n_unique == values.shape[0]:
            merged = plan.in_plan_order(values)
        elif values.dtype.kind == "i":  # a sum past the dtype is refused, naming the key
            merged, bad = segment_sum_checked(values, plan.inverse, plan.n_unique)
            if bad >= 0:
                u = int(plan.inverse[bad])
                key = int((keys if keys is not None else
                           spec.partitioner.caller_keys(plan))[bad])
                raise overflow_error(spec, int(np.searchsorted(plan.offsets, u, "right")) - 1,
                                     key, merged[u] - values[bad], values[bad],
                                     "the sum of a clock's updates (merged in this process)")
        else:
            merged = _kernels.segment_sum(values, plan.inverse, plan.n_unique)
        for s in range(n_shards):
            sl = plan.shard_slice(s)
            if sl.start < sl.stop:
                keys = spec.partitioner.wire_keys(plan, s)
                if named and s in named:  # the names of the pull's pieces
                    per_shard[s].extend((name, KeyRef(i, b - a, keys[a:b]), Reordered(
                        values, plan.order[sl][a:b]) if ordered else merged[sl][a:b])
                        for i, a, b in named[s])
                else:
                    per_shard[s].append((name, keys, Reordered(values, plan.order[sl])
                                         .array() if ordered else merged[sl]))
    return per_shard


def apply_all(pieces: list, shard: int, what: str) -> None:
    """Apply the ``(table, keys, values)`` pieces of one push, or of one clock's held
    updates (``what``: which, for the error), to the :class:`~.table.TableShard` s of shard
    ``shard``: all of them or none.

    The checks made while applying come first: a sparse table's room for the new keys
    (:meth:`~.table.TableShard.check_room`, no lookup in the common case), then the tables
    that check their sums (:attr:`~.table.TableSpec.checked_sums`: integers), applied
    first, each taken back exactly (:meth:`~.table.TableShard.undo`) when a later one is
    refused; the rows they created for new keys (hashed tables) are then dropped
    (:meth:`~.table.TableShard.drop_new_rows`). Only then are the other tables' updates
    applied (their rules refuse nothing). No pass over the data is added: the integer check
    is the one applying them. The pieces of a table keep their order; tables are
    independent, so the order across them changes no bit.

    Guarantees: within one shard, a refused piece leaves every table of the call as it
    was: values, and the keys a hashed table holds (their rows may be renumbered). Across
    shards, none: each shard applies its share of a clock on its own, so shards that
    accepted theirs keep them when another refuses its share (the note on the error says
    so).

    Raises
    ------
    ValueError
        The error of the refused piece (naming table, shard and key), with a note saying
        that none of the call's updates was applied on this shard.
    """
    sparse: dict = {}
    for table, keys, _ in pieces:
        if table.spec.sparse:
            sparse.setdefault(id(table), (table, []))[1].append(keys)
    done = []
    marked = [t for t, _ in sparse.values() if t.spec.checked_sums]
    try:
        for table, keys in sparse.values():
            table.check_room(keys)
        for table in marked:
            table.mark_rows()
        for table, keys, values in pieces:
            if table.spec.checked_sums:
                table.apply(keys, values)
                done.append((table, keys, values))
    except ValueError as exc:
        for table, keys, values in reversed(done):
            table.undo(keys, values)
        for table in marked:
            table.drop_new_rows()
        names = sorted({t.spec.name for t, _, _ in pieces})
        exc.add_note(f"none of the updates of {what} (tables {names}) is applied on shard "
                     f"{shard}; the other shards apply their shares on their own")
        raise
    for table in marked:
        table.mark_rows(False)
    for table, keys, values in pieces:
        if not table.spec.checked_sums:
            table.apply(keys, values)
