"""Table: the driver's handle on one named table of a :class:`~dask_ps.PSModel`."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..state.table import TableSpec
from . import connection

if TYPE_CHECKING:  # the model imports this module: no import at run time
    from .core import PSModel

__all__ = ["Table"]


class Table:
    """Handle on one table of a :class:`PSModel`.

    Attributes
    ----------
    name : str
    spec : TableSpec
    """

    def __init__(self, model: PSModel, spec: TableSpec) -> None:
        self.model = model
        self.spec = spec
        self.name = spec.name

    @property
    def shape(self) -> tuple:
        """``(n_rows,)`` or ``(n_rows, ncols)``; ``n_rows`` is None for a sparse table."""
        rows = self.spec.n_rows
        return (rows,) if self.spec.vector else (rows, self.spec.ncols)

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype."""
        return self.spec.dtype

    def pull(self, keys=None) -> np.ndarray:
        """See :meth:`PSModel.pull`."""
        return self.model.pull(self.name, keys)

    def push(self, keys, updates) -> None:
        """See :meth:`PSModel.push`."""
        self.model.push(self.name, keys, updates)

    def set_rows(self, keys, values, slots: dict | None = None) -> None:
        """Overwrite the rows of ``keys`` (and their optimizer state), bypassing the update
        rule: a warm start's weights and state, where :meth:`push` would apply the rule.
        Everything is checked before any shard is written.

        Parameters
        ----------
        keys : array-like of int, shape (m,)
            Distinct keys: offsets of a dense table, any int64 key of a hashed one (a new
            key gets a row).
        values : array-like (m, ncols), or (m,) for a vector table
            Finite values, cast to the table's dtype.
        slots : dict of str to array-like (m, width), optional
            State of those rows by the names :meth:`state` returns (e.g. FTRL's ``z`` and
            ``n``); a slot not given keeps the rows' state (a new row's initial one).

        Raises
        ------
        IndexError, TypeError, ValueError
            A key out of the table's range, repeated keys, values or a slot of another
            shape or not finite, a slot name the update rule does not keep; a bad value is
            named by its key and its position in ``keys`` ("slot 'n' at key 12345
            (position 3 of keys), column 0 is -1.0: ...").
        RuntimeError
            A job is running (see :meth:`PSModel.push`).
        """
        self.model._refuse_in_job(f"set rows of table {self.name!r}", "set rows between jobs")
        spec, keys, values = connection.process_client(self.model).check_update(
            self.name, keys, values)
        slots = self._checked_slots(slots, keys.shape[0], keys)
        plan, _ = spec.partitioner.plan(keys)
        if plan.n_unique != keys.shape[0]:
            _, first, count = np.unique(keys, return_index=True, return_counts=True)
            i = int(np.sort(first[count > 1])[0])  # the first key given twice
            j = i + 1 + int(np.argmax(keys[i + 1:] == keys[i]))
            raise ValueError(f"table {self.name!r}: set_rows got repeated keys "
                             f"({keys.shape[0]} keys, {plan.n_unique} distinct): key "
                             f"{int(keys[i])} at positions {i} and {j} of keys")
        connection.set_rows(self.model, self.name, plan, values, slots)

    def map(self, fn: Callable, *args) -> list:
        """See :meth:`PSModel.map_shards`."""
        return self.model.map_shards(self.name, fn, *args)

    def reduce(self, fn: Callable, combine: Callable, *args):
        """``combine`` the results of ``fn`` on every shard (e.g. a norm, a sum, a top-k).

        Examples
        --------
        >>> sq = table.reduce(lambda k, v, s: float((v.astype("f8") ** 2).sum()),
        ...                   operator.add)                      # doctest: +SKIP
        """
        return functools.reduce(combine, self.map(fn, *args))

    def to_numpy(self) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        """The whole table: values (dense), or ``(keys, values)`` sorted by key (sparse)."""
        if not self.spec.sparse:
            return self.pull()
        parts = self.map(_copy_rows)
        keys = np.concatenate([k for k, _ in parts])
        values = np.concatenate([v for _, v in parts])
        order = np.argsort(keys, kind="stable")
        values = values[order]
        return keys[order], (values[:, 0] if self.spec.vector else values)

    def state(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Values and optimizer state of a dense table, gathered from its shards.

        Returns
        -------
        values : ndarray (n_rows, ncols)
        slots : dict of str to ndarray (n_rows, width)
            The update rule's state (e.g. FTRL's ``z`` and ``n``).

        Raises
        ------
        ValueError
            For a sparse table.
        """
        if self.spec.sparse:
            raise ValueError(f"table {self.name!r} is sparse: state() covers dense tables")
        parts = self.map(_copy_state)  # shards hold consecutive row ranges, in shard order
        values = np.concatenate([v for v, _ in parts])
        slots = {k: np.concatenate([sl[k] for _, sl in parts]) for k in parts[0][1]}
        return values, slots

    def set_state(self, values: np.ndarray, slots: dict[str, np.ndarray] | None = None) -> None:
        """Overwrite a dense table's values (and optimizer state) with arrays of
        :meth:`state`'s shapes, bypassing the update rule (warm starts, restores).

        Everything is checked before any shard is written: a refused call leaves the table
        as it was.

        Parameters
        ----------
        values : array-like (n_rows, ncols), or (n_rows,) for a vector table
            Finite values.
        slots : dict of str to array-like (n_rows, width), optional
            State arrays of the table's update rule, by the names :meth:`state` returns
            (those not given are left as they are).

        Raises
        ------
        ValueError
            For a sparse table; values or a slot of another shape, or not finite; a slot
            name the update rule does not keep (naming the ones it does).
        """
        if self.spec.sparse:
            raise ValueError(f"table {self.name!r} is sparse: set_state() covers dense tables")
        ncols = self.spec.ncols
        values = self._state_array("values", values, ncols, self.spec.dtype)
        self.map(_assign_state, values, self._checked_slots(slots, self.spec.n_rows))

    def _checked_slots(self, slots: dict | None, n: int, keys: np.ndarray | None = None
                       ) -> dict[str, np.ndarray]:
        """``slots`` of ``n`` rows as the update rule keeps them, or ValueError (naming a
        row by its key and position in ``keys`` when given, see :func:`_row_name`)."""
        layout = self.spec.optimizer.slot_layout(self.spec.ncols, self.spec.dtype)
        unknown = sorted(set(slots or {}) - set(layout))
        if unknown:
            raise ValueError(f"table {self.name!r}: the {self.spec.optimizer.name!r} update "
                             f"rule keeps no slot {unknown}; its slots: {sorted(layout)}")
        out = {k: self._state_array(f"slot {k!r}", v, layout[k][0], layout[k][1], n, keys)
               for k, v in (slots or {}).items()}
        for k in set(out) & set(self.spec.optimizer.nonnegative):
            bad = out[k] < 0
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise ValueError(f"table {self.name!r}: slot {k!r} at {_row_name(r, keys)}, "
                                 f"column {c} is {out[k][r, c]}: the "
                                 f"{self.spec.optimizer.name!r} rule keeps it non-negative "
                                 f"(a sum of squares or a count)")
        return out

    def _state_array(self, what: str, arr, width: int, dtype, n: int | None = None,
                     keys: np.ndarray | None = None) -> np.ndarray:
        """``arr`` as (n, width) of ``dtype`` (``n``: the table's rows by default), or
        ValueError (naming a row by its key and position in ``keys`` when given)."""
        arr = np.asarray(arr)
        n = self.spec.n_rows if n is None else n
        if not (arr.shape == (n, width) or (width == 1 and arr.shape == (n,))):
            want = f"({n}, {width})" + (f" or ({n},)" if width == 1 else "")
            raise ValueError(f"table {self.name!r}: {what} must have shape {want}, got "
                             f"{arr.shape}")
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"table {self.name!r}: {what} must be numbers, got {arr.dtype}")
        if np.dtype(dtype).kind in "iu" and arr.dtype.kind in "fiu":  # a cast would wrap
            info = np.iinfo(dtype)
            if arr.dtype.kind == "f":  # the bounds as floats, exactly (max + 1: a power of 2)
                with np.errstate(invalid="ignore"):
                    bad = (~np.isfinite(arr) | (arr != np.trunc(arr)) | (arr < float(info.min))
                           | (arr >= 2.0 ** (info.bits - (info.min < 0))))
            else:
                bad = ((arr < info.min) if arr.dtype.kind == "i" else
                       np.zeros(arr.shape, bool)) | (arr > info.max)
            bad = bad.reshape(n, width)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise ValueError(f"table {self.name!r}: {what} at {_row_name(r, keys)}, "
                                 f"column {c} is {arr.reshape(n, width)[r, c]}, not an "
                                 f"integer of {np.dtype(dtype)}")
        out = arr.astype(dtype, copy=False).reshape(n, width)
        if out.dtype.kind == "f":
            bad = ~np.isfinite(out)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise ValueError(f"table {self.name!r}: {what} at {_row_name(r, keys)}, "
                                 f"column {c} is {out[r, c]} (not finite, or beyond "
                                 f"{out.dtype})")
        return out

    @property
    def n_keys(self) -> int:
        """Rows held over all shards (all rows for dense tables, touched keys for sparse)."""
        return sum(self.map(_count_rows))

    def __repr__(self) -> str:
        kind = "sparse" if self.spec.sparse else "dense"
        return (f"<Table {self.name!r}: {kind} {self.shape} {self.dtype}, "
                f"optimizer {self.spec.optimizer.name!r}>")


def _copy_rows(keys, values, slots):
    return keys.copy(), values.copy()


def _copy_state(keys, values, slots):
    return values.copy(), {k: v.copy() for k, v in slots.items()}


def _assign_state(keys, values, slots, new_values, new_slots):
    values[:] = new_values[keys]
    for k, v in new_slots.items():
        slots[k][:] = v[keys]


def _count_rows(keys, values, slots):
    return int(keys.shape[0])


def _row_name(r: int, keys: np.ndarray | None) -> str:
    """Row ``r`` of arrays given by key (``keys``: ``"key 12345 (position 3 of keys)"``), or
    of the whole table (``"row 3"``)."""
    return f"row {r}" if keys is None else f"key {int(keys[r])} (position {r} of keys)"
