"""Tables: one shard's part of a table (:class:`TableShard`); what a model holds,
:class:`TableSpec`, is defined in :mod:`.table_spec` (and exported here too).

Dense tables store their block of rows as one array. Sparse (hashed) tables store the keys
touched so far in growing arrays of rows — the keys (int64), the values, the optimizer's
slots — found through an open-addressing index (numba, :mod:`~._hash_kernels`), so memory
follows the keys used, not the key space. Every row is initialised from its own key, so a
table's content does not depend on how many shards hold it.

Memory of a sparse table, per key held: 8 bytes of key, the row's values and slots (e.g.
float32 weights with FTRL's ``z`` and ``n``: 12 bytes, 20 with the key), times the spare
room of the row arrays (they grow by half: 1 to 1.5 times), plus the index: 8 bytes per
slot at a load between :data:`~._hash_kernels.MAX_LOAD` / 2 and
:data:`~._hash_kernels.MAX_LOAD` (10.7 to 21.3 bytes per key). :attr:`TableShard.nbytes`
counts it all; ``benchmarks/hashed_memory.py`` measures it.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..exceptions import KeysNeededError
from ..kernels.optim import add_step
from . import _hash_kernels, _kernels
from ._overflow import overflow_error
from .partition import RangePartitioner
from .table_spec import FIRST_ROWS, Init, TableSpec, dense_table_bytes
from .wire_forms import RowBits, as_rows

__all__ = ["Init", "TableShard", "TableSpec", "as_keys", "bad_key_error", "checked_update",
           "dense_table_bytes"]


def _resized(arr: np.ndarray, n: int, keep: int) -> np.ndarray:
    out = np.empty((n,) + arr.shape[1:], arr.dtype)
    out[:keep] = arr[:keep]
    return out


#: A sparse shard remembers the rows of its last lookups of ``RECALL_MIN`` to
#: ``RECALL_MAX`` keys (see :meth:`TableShard._recall`), at most ``RECALL_CALLS`` of them
#: holding at most ``RECALL_KEYS`` keys: 64 MiB of keys and rows kept alive, ~16 bytes per
#: key. Each piece of a pull (:func:`~.wire_forms.piece_bounds`) is a lookup of its own.
RECALL_CALLS = 16
RECALL_MIN = 1024
RECALL_MAX = 2**20
RECALL_KEYS = 4 * RECALL_MAX
#: Bytes of keys a sparse shard keeps under the names of the pulls that sent them (see
#: :meth:`TableShard.named_keys`), oldest forgotten first.
NAMED_BYTES = 64 * 2**20
#: Row arrays of a sparse table grow by this factor (at least) when full.
ROW_GROWTH = 1.5


class TableShard:
    """One shard's rows of a table, with the optimizer state beside them.

    Parameters
    ----------
    spec : TableSpec
    shard : int
        Index of the shard holding it.
    recall : bool, default True
        Whether a sparse table remembers the rows of its recent lookups (see
        :meth:`_recall`); off for the processes' snapshots of pulled values.
    """

    def __init__(self, spec: TableSpec, shard: int, recall: bool = True) -> None:
        self.spec = spec
        self.shard = shard
        self._layout = spec.optimizer.slot_layout(spec.ncols, spec.dtype)
        # sparse keys whose rows were found by probing the index, and in the lookup memo
        self.keys_probed = self.keys_recalled = 0
        if spec.sparse:
            self.n_rows = 0
            self._keys = np.empty(FIRST_ROWS, np.int64)
            self._index = np.zeros(2 * FIRST_ROWS, np.uint64)
            self._shift = 64 - int(np.log2(self._index.shape[0]))
            self._recent: list = []  # (keys, rows) of recent lookups, see rows()
            self._named: OrderedDict = OrderedDict()  # keys_id -> keys, see named_keys()
            self._named_bytes = 0
            self._recall_max = RECALL_MAX if recall else 0
            self._mark: int | None = None  # see mark_rows()
            self._marked_keys: list = []
            capacity = FIRST_ROWS
        else:
            part: RangePartitioner = spec.partitioner
            self.n_rows = capacity = part.shard_size(shard)
            self.start = int(part.starts[shard])
        # zeros from calloc: pages of a large dense table are only written when first touched
        zero = not spec.sparse and spec.init.kind == "constant" and spec.init.a == 0.0
        self.values = (np.zeros if zero else np.empty)((capacity, spec.ncols), spec.dtype)
        self.slots = {k: np.empty((capacity, w), dt) for k, (w, dt) in self._layout.items()}
        if zero:
            spec.optimizer.init_slots(self.slots, slice(None))
        elif not spec.sparse:
            rows = np.arange(self.n_rows, dtype=np.int64)
            # a slice when the values need no keys: fancy-indexing every row of a large
            # table cost ten times more
            self._init_rows(slice(None) if spec.init.kind == "constant" else rows,
                            rows + self.start)

    def _init_rows(self, rows: np.ndarray, keys: np.ndarray) -> None:
        self.spec.init.fill(self.values, rows, keys)
        self.spec.optimizer.init_slots(self.slots, rows)

    def _grow(self, need: int) -> bool:
        """Make room for ``need`` rows in the row arrays and keep the index's load at most
        :data:`~._hash_kernels.MAX_LOAD`. Returns whether the rows were renumbered: when the
        index grows, the rows are put in the order of its slots (about the hash-code ranges
        of planned keys), so that calls read them in memory order.

        Raises
        ------
        ValueError
            Beyond :data:`~._hash_kernels.MAX_ROWS` rows in one shard, naming the table.
        """
        self._check_room(need)
        cap = self.values.shape[0]
        n = self.n_rows
        if need > cap:
            new = min(max(need, int(ROW_GROWTH * cap)), _hash_kernels.MAX_ROWS)
            self._keys = _resized(self._keys, new, n)
            self.values = _resized(self.values, new, n)
            self.slots = {k: _resized(v, new, n) for k, v in self.slots.items()}
        size = self._index.shape[0]
        if need <= _hash_kernels.MAX_LOAD * size:
            return False
        while need > _hash_kernels.MAX_LOAD * size:
            size *= 2
        self._recent.clear()  # rows renumbered below
        if self._mark is not None:  # the rows created since the mark: known by their keys
            self._marked_keys.append(self._keys[self._mark:n].copy())
            self._mark = n
        self._index = None  # freed before the new one is allocated
        self._index = np.zeros(size, np.uint64)
        self._shift = 64 - int(np.log2(size))
        _hash_kernels.index_build(self._index, self._shift, self._keys, n)
        perm = np.empty(n, np.uint32)
        _hash_kernels.index_renumber(self._index, perm)
        for arr in (self._keys, self.values, *self.slots.values()):
            arr[:n] = arr[perm]
        return True

    def _check_room(self, need: int) -> None:
        if need > _hash_kernels.MAX_ROWS:
            raise ValueError(f"table {self.spec.name!r}: shard {self.shard} would hold {need} "
                             f"keys, more than {_hash_kernels.MAX_ROWS}; use more shards")

    def check_room(self, keys: list) -> None:
        """Raise now the error that :meth:`_grow` would raise while applying updates of the
        ``keys`` arrays (a sparse table past :data:`~._hash_kernels.MAX_ROWS` rows), changing
        nothing. No lookup unless the shard holds within their count of that limit.

        Raises
        ------
        ValueError
            As :meth:`_grow`, naming the table and the shard.
        """
        n = sum(k.shape[0] for k in keys)
        if not self.spec.sparse or self.n_rows + n <= _hash_kernels.MAX_ROWS:
            return
        distinct = np.unique(np.concatenate(keys))
        rows = np.empty(distinct.shape[0], np.int64)
        self._check_room(self.n_rows + _hash_kernels.index_find(
            self._index, self._shift, self._keys, distinct, rows))

    def mark_rows(self, on: bool = True) -> None:
        """Remember (``on``) the rows a sparse table holds, so that :meth:`drop_new_rows` can
        forget those created after; or forget the mark (the updates were accepted)."""
        if self.spec.sparse:
            self._mark, self._marked_keys = (self.n_rows if on else None), []

    def drop_new_rows(self) -> None:
        """Forget the rows a sparse table created since :meth:`mark_rows` (the new keys of a
        refused push), as if never created; clears the mark. The row arrays keep their size;
        the index is rebuilt (a pass over the rows held, on this refusal path only) and the
        memo of lookups forgotten."""
        n, dropped = self._mark, self._marked_keys
        self.mark_rows(False)
        if n is None or (n == self.n_rows and not dropped):
            return
        if dropped:  # the index grew since the mark, renumbering rows: drop them by key
            keep = np.flatnonzero(~np.isin(self._keys[:n], np.concatenate(dropped)))
            for arr in (self._keys, self.values, *self.slots.values()):
                arr[:keep.shape[0]] = arr[keep]
            n = keep.shape[0]
        self.n_rows = n
        self._recent.clear()
        self._index[:] = 0
        _hash_kernels.index_build(self._index, self._shift, self._keys, n)

    def rows(self, keys: np.ndarray, create: bool = True, keys_id=None,
             also=None) -> np.ndarray:
        """Rows of ``keys`` (offsets for dense tables, keys for sparse ones; sparse keys may
        repeat, each place gets the key's row: a pull's keys whose dedup waited, see
        :func:`~dask_ps.state.partition.plan_hashed`).

        Sparse keys seen for the first time get new rows, initialised, when ``create``;
        otherwise their row is -1. Creating rows may renumber the others (see
        :meth:`_grow`): rows are valid until the next call that creates some. With
        ``keys_id`` (a pull's name for its keys, which then arrived in a buffer of their own
        and are kept as they are), the keys are also kept under that name (see
        :meth:`named_keys`). ``also``: an array indexed by row (the values, for a gather that
        follows) whose rows a sparse lookup fetches ahead with the row keys (see
        :func:`~dask_ps.state._hash_kernels.index_find`).
        """
        if not self.spec.sparse:
            return as_rows(keys)  # offsets, int32 or int64: the kernels take either
        if keys_id is not None and RECALL_MIN <= keys.shape[0] <= self._recall_max:
            self._name(keys_id, keys)
        else:
            keys_id = None
        rows = self._recall(keys)
        if rows is not None:
            self.keys_recalled += keys.shape[0]
            return rows
        self.keys_probed += keys.shape[0]
        rows = np.empty(keys.shape[0], np.int64)
        missing = _hash_kernels.index_find(self._index, self._shift, self._keys, keys, rows,
                                           also)
        if missing and create:
            first = self.n_rows
            if self._grow(self.n_rows + missing):
                _hash_kernels.index_find(self._index, self._shift, self._keys, keys, rows)
            self.n_rows = _hash_kernels.index_insert(self._index, self._shift, self._keys,
                                                     keys, rows, self.n_rows)
            new = np.arange(first, self.n_rows, dtype=np.int64)
            # index_insert numbers new keys in order of first place
            self._init_rows(new, self._keys[first: self.n_rows])
        if (missing == 0 or create) and RECALL_MIN <= keys.shape[0] <= self._recall_max:
            # a copy (callers reuse buffers), unless the keys arrived in their own
            self._recent.insert(0, (keys if keys_id is not None else keys.copy(), rows))
            kept = 0
            for i, (old, _) in enumerate(self._recent):
                kept += old.shape[0]
                if kept > RECALL_KEYS or i == RECALL_CALLS:
                    del self._recent[i:]
                    break
        return rows

    def _name(self, keys_id, keys: np.ndarray) -> None:
        """Keep ``keys`` under ``keys_id``, forgetting the oldest beyond :data:`NAMED_BYTES`."""
        old = self._named.pop(keys_id, None)
        if old is not None:
            self._named_bytes -= old.nbytes
        self._named[keys_id] = keys
        self._named_bytes += keys.nbytes
        while self._named_bytes > NAMED_BYTES and len(self._named) > 1:
            self._named_bytes -= self._named.popitem(last=False)[1].nbytes

    def named_keys(self, ref) -> np.ndarray:
        """The keys a pull sent under the name of ``ref`` (a
        :class:`~dask_ps.state.wire_forms.KeyRef`), for the push that follows it; forgotten
        once given.

        Raises
        ------
        KeysNeededError
            When they are not held (never sent, forgotten, or of another count).
        """
        keys = self._named.pop(ref.id, None) if self.spec.sparse else None
        if keys is not None:
            self._named_bytes -= keys.nbytes
        if keys is None or keys.shape[0] != ref.count:
            raise KeysNeededError(f"table {self.spec.name!r}, shard {self.shard}: the keys of "
                                  f"pull {ref.id} are not held; send them")
        return keys

    def _recall(self, keys: np.ndarray) -> np.ndarray | None:
        """The rows of ``keys`` if a recent call looked the same keys up (the push of a
        pull-compute-push step sends the keys its pull sent): a compare of the keys
        (memory speed) instead of a probe of the index per key. Rows stay valid until the
        index grows (:meth:`_grow` forgets them)."""
        n = keys.shape[0]
        for i, (old, rows) in enumerate(self._recent):
            if old is keys or (old.shape[0] == n and old[0] == keys[0] and old[-1] == keys[-1]
                               and _kernels.equal_1d(old, keys)):
                if i:
                    self._recent.insert(0, self._recent.pop(i))
                return rows
        return None

    def gather(self, keys: np.ndarray, keys_id=None) -> np.ndarray:
        """Values of ``keys`` (or of a :class:`~dask_ps.state.wire_forms.RowBits`), shape
        (len(keys), ncols). ``keys_id``: see :meth:`rows`."""
        out = np.empty((keys.shape[0], self.spec.ncols), self.spec.dtype)
        if isinstance(keys, RowBits):
            return _kernels.gather_bits(self.values, keys.words, out)
        # first: creating rows may replace values; the lookup fetches their rows ahead
        rows = self.rows(keys, keys_id=keys_id, also=self.values)
        _kernels.gather_rows(self.values, rows, out)
        return out

    def apply(self, keys: np.ndarray, updates: np.ndarray) -> None:
        """One optimizer step on the rows of ``keys`` (distinct; or a
        :class:`~dask_ps.state.wire_forms.RowBits`) with ``updates`` (n, ncols).

        Raises
        ------
        ValueError
            An integer table's sum past its dtype, naming the table, the shard and the key;
            nothing of the step is applied.
        """
        if isinstance(keys, RowBits):
            bad = self.spec.optimizer.step_bits(self.values, self.slots, keys, updates)
        else:
            rows = self.rows(keys)  # first: new keys of a sparse table may grow its arrays
            bad = self.spec.optimizer.step(self.values, self.slots, rows, updates)
        if bad is not None and bad >= 0:
            offsets = keys.rows() if isinstance(keys, RowBits) else keys
            row = self.rows(offsets[bad:bad + 1])[0]
            key = int(offsets[bad]) + (0 if self.spec.sparse else self.start)
            raise overflow_error(self.spec, self.shard, key, self.values[row], updates[bad],
                                 "a push")

    def undo(self, keys: np.ndarray, updates: np.ndarray) -> None:
        """Take back :meth:`apply` of ``updates`` to an integer table with the "add" rule
        (wrapping arithmetic undoes it exactly)."""
        rows = as_rows(keys) if isinstance(keys, RowBits) else self.rows(keys)
        add_step(self.values, rows, -updates)  # unchecked: -updates may wrap, the sum not

    def set_rows(self, keys: np.ndarray, values: np.ndarray,
                 slots: dict[str, np.ndarray] | None = None) -> None:
        """Overwrite the rows of ``keys`` (distinct; offsets for dense tables, keys for sparse
        ones, created if new) with ``values`` (n, ncols) and the given optimizer ``slots``
        (n, width each), bypassing the update rule: restores from checkpoints."""
        rows = self.rows(keys)
        self.values[rows] = values
        for name, arr in (slots or {}).items():
            self.slots[name][rows] = arr

    def keys(self) -> np.ndarray:
        """Global keys held, shape (n_rows,), int64 (ascending for dense tables)."""
        if self.spec.sparse:
            return self._keys[: self.n_rows]
        return np.arange(self.start, self.start + self.n_rows, dtype=np.int64)

    def view(self, key_range: bool = False) -> tuple[np.ndarray | tuple[int, int], np.ndarray,
                                                      dict[str, np.ndarray]]:
        """(keys, values, slots) of the rows held; arrays are views, valid until the next call.

        With ``key_range``, a dense table gives its keys as ``(start, stop)``, the range of
        global keys it holds, instead of an array of them (building that array costs more
        than scanning the values: ~37 ms for a shard of 5.2 10^6 rows); a sparse one gives
        its keys array (a view) either way."""
        n = self.n_rows
        keys = (self.start, self.start + n) if key_range and not self.spec.sparse else \
            self.keys()
        return keys, self.values[:n], {k: v[:n] for k, v in self.slots.items()}

    @property
    def nbytes(self) -> int:
        """Bytes held: values and slots, and for a sparse table its keys and index (not the
        memo of recent lookups, at most 64 MiB: see :data:`RECALL_MAX`, nor the keys kept
        for pushes, at most :data:`NAMED_BYTES`, mostly the same arrays)."""
        extra = 0 if not self.spec.sparse else self._index.nbytes + self._keys.nbytes
        return self.values.nbytes + sum(a.nbytes for a in self.slots.values()) + extra


def as_keys(keys, spec: TableSpec) -> np.ndarray:
    """Keys as a 1-D int64 array (uint64 keys keep their bits).

    Raises
    ------
    TypeError
        Non-integer keys, naming the table.
    ValueError
        Keys that are not 1-D, naming the table and the shape.
    """
    keys = np.asarray(keys)
    if keys.dtype == np.uint64:
        if not spec.sparse and keys.size and keys.max() >= np.uint64(spec.n_rows):
            i = int(np.argmax(keys >= np.uint64(spec.n_rows)))
            raise bad_key_error(spec, keys, i)
        keys = keys.view(np.int64)
    elif keys.dtype.kind not in "iu" and not (keys.size == 0 and keys.dtype.kind == "f"):
        raise TypeError(f"table {spec.name!r}: keys must be integers, got dtype {keys.dtype}")
    if keys.ndim != 1:
        raise ValueError(f"table {spec.name!r}: keys must be 1-D, got shape {keys.shape}")
    return np.ascontiguousarray(keys, dtype=np.int64)


def bad_key_error(spec: TableSpec, keys: np.ndarray, i: int) -> IndexError:
    """The error for ``keys[i]``, a key outside dense table ``spec``'s rows."""
    return IndexError(f"table {spec.name!r}: key {int(keys[i])} at position {i} is outside "
                      f"the table's rows [0, {spec.n_rows})")


def checked_update(spec: TableSpec, keys, updates, keys_checked: bool = False,
                   copy: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(keys int64 (n,), updates (n, ncols) in the table's dtype)`` of a push
    to table ``spec``.

    ``keys_checked``: the keys are int64 and in range already (not checked). The updates
    are a new array (the caller may reuse its buffer), unless ``copy`` is false (a push sent
    before the caller gets control back).

    Raises
    ------
    IndexError, TypeError, ValueError
        Key out of range, non-integer keys or updates of an integer table that are not
        integers or past its dtype, updates of the wrong shape or not finite; each names
        the table (and the first offending key).
    """
    name = spec.name
    if not keys_checked:
        keys = as_keys(keys, spec)
        if not spec.sparse and keys.size:
            bad = (keys < 0) | (keys >= spec.n_rows)
            if bad.any():
                raise bad_key_error(spec, keys, int(np.argmax(bad)))
    updates = np.asarray(updates)
    want = (keys.shape[0],) + spec.row_shape
    if updates.shape != want and not (spec.vector and updates.shape == want + (1,)):
        raise ValueError(f"table {name!r}: updates for {keys.shape[0]} keys must have shape "
                         f"{want}, got {updates.shape}")
    if spec.dtype.kind in "iu" and updates.dtype.kind not in "iub":
        raise TypeError(f"table {name!r} holds {spec.dtype}: updates must be integers, "
                        f"got {updates.dtype}")
    if updates.dtype.kind not in "iubf":
        raise TypeError(f"table {name!r}: updates must be real numbers, got {updates.dtype}")
    with np.errstate(over="ignore"):  # an overflow is refused below, naming the key
        values = (np.array(updates, dtype=spec.dtype, copy=True) if copy else
                  np.asarray(updates, dtype=spec.dtype)).reshape(keys.shape[0], spec.ncols)
    if spec.dtype.kind == "f":
        finite = np.isfinite(values)
        if not finite.all():
            i = int(np.argmax(~finite.all(axis=1)))
            given = np.asarray(updates).reshape(keys.shape[0], -1)[i]
            what = (f"overflows {spec.dtype}: {given.tolist()}" if np.isfinite(given).all()
                    else f"is not finite: {values[i].tolist()}")
            raise ValueError(f"table {name!r}: update for key {int(keys[i])} (position {i}) "
                             f"{what}")
    elif updates.dtype != spec.dtype and updates.size:
        info = np.iinfo(spec.dtype)
        low, high = updates.min(), updates.max()
        if low < info.min or high > info.max:
            rows = updates.reshape(keys.shape[0], -1)
            i = int(np.argmax(((rows < info.min) | (rows > info.max)).any(axis=1)))
            raise ValueError(f"table {name!r}: update for key {int(keys[i])} (position {i}) "
                             f"overflows {spec.dtype}: {rows[i].tolist()} (the updates' range "
                             f"[{low}, {high}], {spec.dtype}'s range [{info.min}, "
                             f"{info.max}])")
    return keys, values
