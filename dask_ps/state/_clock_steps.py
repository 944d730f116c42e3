"""A shard's updates of a clock under a buffered consistency model (BSP): which of a push's
updates wait for the clock's barrier (:func:`split_push`), and the steps that then apply a
clock's held updates, per table one summed step in participant order
(:func:`clock_steps`), applied by :class:`~dask_ps.state.shard.Shard` each clock's all
or none (:func:`apply_held`)."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

from .merging import apply_all, merge_pushes
from .table import TableShard, TableSpec
from .wire_forms import as_rows

__all__ = ["apply_held", "clock_steps", "exact_sums", "split_push"]


def exact_sums(spec: TableSpec) -> bool:
    """Whether the pushes of a clock may be applied one by one instead of merged first: a
    table whose sums are exact in any order — integers with plain addition (e.g. LDA's
    counts; sparse ones too, so that each push's sum is checked against the dtype, see
    :meth:`~dask_ps.state.table.TableShard.apply`), or a dense one whose rule says so
    (``exact_sums``, e.g. GBDT's quantized histograms) — so skipping the merge (a hash of
    every key) changes no bit."""
    if spec.checked_sums:
        return True  # sparse too: each push's sum checked (see TableShard.apply)
    return not spec.sparse and spec.optimizer.exact_sums


def split_push(tables: dict[str, TableShard], updates: list, buffered: bool
               ) -> tuple[list, list]:
    """A push's ``(table name, keys, values)`` updates as ``(now, held)``: ``now`` the
    ``(TableShard, keys, values)`` to apply at once (all of them unless ``buffered``; else
    those of tables whose rule applies on arrival with exact sums), ``held`` the
    ``(name, rows, values)`` that wait for the clock's barrier (merged as arrays: rows sent
    as bitmaps decoded)."""
    now, held = [], []
    for name, keys, values in updates:
        spec = tables[name].spec
        if not buffered or (spec.optimizer.on_arrival and exact_sums(spec)):
            now.append((tables[name], keys, values))
        else:
            held.append((name, as_rows(keys), values))
    return now, held


def clock_steps(tables: dict[str, TableShard], pending: list) -> list:
    """The ``(TableShard, keys, values)`` steps of one clock's held updates ``pending``,
    ``[(participant, held), ...]`` (``held`` of :func:`split_push`, in any participant
    order): per table, the participants' pushes summed in participant order into one step,
    or, when no merge can change a bit, each push a step of its own."""
    by_table: dict[str, list] = defaultdict(list)  # table -> each participant's pieces
    for _, updates in sorted(pending, key=lambda item: item[0]):
        mine: dict[str, list] = defaultdict(list)
        for name, keys, values in updates:
            mine[name].append((keys, values))
        for name, pieces in mine.items():
            by_table[name].append(pieces)
    steps = []
    for name, per_participant in by_table.items():
        table = tables[name]
        if len(per_participant) == 1 or exact_sums(table.spec):
            # no merge: one participant's pieces have distinct keys (those of the pieces of
            # one pull: each finds its rows in the lookup memo, where a joined array would
            # be looked up again), or any order gives the same bits
            steps.extend((table, k, v)
                         for k, v in itertools.chain.from_iterable(per_participant))
            continue
        parts = [_joined(pieces) for pieces in per_participant]
        if _same_keys(parts):
            # every participant pushed the same keys (e.g. one histogram layout): row-wise
            # sums in participant order, the merge's arithmetic without its hash
            keys = parts[0][0]
            first = parts[0][1]
            values = first + first.dtype.type(0)  # 0 + v as the merge; a new array
            for _, v in parts[1:]:
                values += v
        else:
            keys, values = merge_pushes(parts)
        steps.append((table, keys, values))
    return steps


def apply_held(pending: dict[int, list], upto: int, tables: dict[str, TableShard],
               shard: int) -> None:
    """Apply (and take out of ``pending``, clock -> held updates as :func:`clock_steps`
    takes them) the held updates of clocks ``< upto`` to ``tables`` of shard ``shard``: per
    clock, per table, one summed step; each clock's all or none
    (:func:`~dask_ps.state.merging.apply_all`).

    Raises
    ------
    ValueError
        The error of the first refused clock; it is dropped, the later ones are applied.
    """
    error = None
    for c in sorted(k for k in pending if k < upto):
        try:
            apply_all(clock_steps(tables, pending.pop(c)), shard, f"clock {c}")
        except ValueError as exc:
            error = error or exc
    if error is not None:
        raise error


def _same_keys(parts: list) -> bool:
    """Whether the ``(keys, values)`` parts of a clock's pushes to a table have equal keys."""
    k0 = parts[0][0]
    return all(k.shape == k0.shape and np.array_equal(k, k0) for k, _ in parts[1:])


def _joined(pieces: list) -> tuple:
    """One participant's ``(keys, values)`` pushes of a table at a clock as one: the pieces
    of a large push, each naming the keys of a piece of the pull before it (keys distinct),
    joined to be merged with the other participants'."""
    if len(pieces) == 1:
        return pieces[0]
    return (np.concatenate([k for k, _ in pieces]), np.concatenate([v for _, v in pieces]))
