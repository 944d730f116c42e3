"""What a table is (:class:`TableSpec`): its shape, dtype, partitioner, optimizer and the
initial value of its rows (:class:`Init`); the bytes a shard of it takes. Shards hold the rows
(:class:`~.table.TableShard`)."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from . import _kernels
from .optimizers import Optimizer
from .partition import make_partitioner

__all__ = ["DTYPES", "FIRST_ROWS", "Init", "TableSpec", "dense_table_bytes"]

#: Rows of a sparse table's arrays on each shard from its creation, whatever the keys it
#: will hold: ``FIRST_ROWS x ncols`` values per shard before any push.
FIRST_ROWS = 1024

DTYPES = tuple(np.dtype(d) for d in ("float32", "float64", "int32", "int64"))
#: Most rows of a dense table: its keys ``0 .. n_rows - 1`` and its shards' bounds are int64.
MAX_DENSE_ROWS = 2**63 - 1
_KINDS = {"constant": _kernels.INIT_CONSTANT, "uniform": _kernels.INIT_UNIFORM,
          "normal": _kernels.INIT_NORMAL}


@dataclass(frozen=True)
class Init:
    """How new rows are filled: a constant, ``uniform(low, high)`` or ``normal(mean, std)``.

    Values are a pure function of (key, column, seed).
    """

    kind: str = "constant"
    a: float = 0.0
    b: float = 0.0
    seed: int = 0

    @classmethod
    def parse(cls, init, seed: int = 0) -> "Init":
        """Read ``"zeros"``, ``"ones"``, a number, ``("uniform", low, high)``,
        ``("normal", mean, std)`` or an :class:`Init`.

        Raises
        ------
        ValueError
            For anything else, listing the accepted forms.
        """
        if not isinstance(seed, Integral) or not 0 <= seed < 2**63:
            raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
        if isinstance(init, Init):
            return init
        if isinstance(init, str) and init in ("zeros", "ones"):
            return cls("constant", float(init == "ones"), 0.0, int(seed))
        if isinstance(init, Real) and not isinstance(init, bool) and np.isfinite(init):
            return cls("constant", float(init), 0.0, int(seed))
        if (isinstance(init, tuple) and len(init) == 3 and init[0] in ("uniform", "normal")
                and all(isinstance(v, Real) and np.isfinite(v) for v in init[1:])):
            kind, a, b = init[0], float(init[1]), float(init[2])
            if kind == "uniform" and a > b:
                raise ValueError(f"init {init!r}: low must not exceed high")
            if kind == "normal" and b < 0:
                raise ValueError(f"init {init!r}: the standard deviation must be >= 0")
            return cls(kind, a, b, int(seed))
        raise ValueError(
            f"init must be 'zeros', 'ones', a finite number, ('uniform', low, high) or "
            f"('normal', mean, std); got {init!r}"
        )

    def fill(self, values: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> None:
        """Initialise ``values[rows]`` (values 2-D) from the global ``keys`` of those rows."""
        if self.kind == "constant":
            values[rows] = self.a
            return
        _kernels.init_rows(values, rows, keys, _KINDS[self.kind], self.a, self.b, self.seed)


def dense_table_bytes(n_rows: int, ncols: int, dtype, optimizer) -> int:
    """Bytes of a dense table of ``n_rows`` x ``ncols`` ``dtype`` and of ``optimizer``'s
    state beside it."""
    itemsize = np.dtype(dtype).itemsize
    state = sum(w * dt.itemsize for w, dt in optimizer.slot_layout(ncols, np.dtype(dtype))
                .values())
    return n_rows * (ncols * itemsize + state)


@dataclass(frozen=True)
class TableSpec:
    """Description of a table, shared by the model, its shards and its workers.

    Attributes
    ----------
    name : str
    n_rows : int or None
        Rows of a dense table; None for a sparse (hash) table, whose keys are any int64.
    ncols : int
        Columns per row; 1 for a vector.
    vector : bool
        Whether pulls return shape (n,) rather than (n, ncols).
    dtype : numpy.dtype
        float32, float64, int32 or int64.
    partitioner : RangePartitioner or HashPartitioner
    optimizer : Optimizer
    init : Init
    """

    name: str
    n_rows: int | None
    ncols: int
    vector: bool
    dtype: np.dtype
    partitioner: object
    optimizer: Optimizer
    init: Init

    @classmethod
    def build(cls, name, shape, dtype, partitioner, optimizer, init, n_shards) -> "TableSpec":
        """Validate the arguments of :meth:`PSModel.add_table` into a spec.

        Raises
        ------
        ValueError
            Bad shape (a dense table of more than ``2**63 - 1`` rows: its keys are int64),
            dtype, partitioner, or an optimizer that needs floats on an int table.
        """
        if isinstance(shape, Integral):
            shape = (shape,)
        ok = isinstance(shape, tuple) and len(shape) in (1, 2) and all(
            isinstance(s, Integral) and not isinstance(s, bool) and s >= 1
            for s in shape[1:] + ((shape[0],) if shape[0] is not None else ()))
        if not ok:
            raise ValueError(f"table {name!r}: shape must be (n_rows,) or (n_rows, ncols) with "
                             f"positive integer sizes (n_rows may be None for a sparse table), "
                             f"got {shape!r}")
        if shape[0] is None and partitioner == "range":
            raise ValueError(f"table {name!r}: a range-partitioned (dense) table needs a number "
                             f"of rows; use partitioner='hash' for a sparse table")
        try:
            known = np.dtype(dtype) in DTYPES
        except TypeError:
            known = False
        if not known:
            raise ValueError(f"table {name!r}: dtype must be one of "
                             f"{[str(d) for d in DTYPES]}, got {dtype!r}")
        dtype = np.dtype(dtype)
        if optimizer.needs_float and dtype.kind != "f":
            raise ValueError(f"table {name!r}: optimizer {optimizer.name!r} needs a float "
                             f"dtype, got {dtype}")
        if dtype.kind != "f" and (init.kind != "constant" or init.a != int(init.a)):
            raise ValueError(f"table {name!r} holds {dtype}: init must be an integer constant, "
                             f"got {init}")
        n_rows = int(shape[0]) if partitioner == "range" else None
        if n_rows is not None and n_rows > MAX_DENSE_ROWS:
            raise ValueError(f"table {name!r}: a dense table's rows are numbered by int64 "
                             f"keys, so its row count must fit in int64 keys (at most "
                             f"2**63 - 1 = {MAX_DENSE_ROWS}), got {n_rows}")
        part = make_partitioner(partitioner, n_shards, n_rows)
        ncols = 1 if len(shape) == 1 else int(shape[1])
        if optimizer.name == "average" and ncols < 2:
            raise ValueError(f"table {name!r}: optimizer 'average' needs a count column besides "
                             f"the values (at least 2 columns), got shape {tuple(shape)}")
        return cls(name, n_rows, ncols, len(shape) == 1, dtype, part, optimizer, init)

    @property
    def sparse(self) -> bool:
        return self.partitioner.hashed

    @property
    def checked_sums(self) -> bool:
        """Whether the shard checks each update's sums as it applies it (an integer table
        with plain addition: a sum past the dtype is refused, see :meth:`TableShard.apply`),
        and can take an applied update back exactly (:meth:`TableShard.undo`)."""
        return self.optimizer.name == "add" and self.dtype.kind in "iu"

    @property
    def row_shape(self) -> tuple[int, ...]:
        return () if self.vector else (self.ncols,)

    def shard_bytes(self, shard: int) -> int:
        """Bytes of shard ``shard``'s part of the table when created (what
        :class:`TableShard` allocates): its rows' values and optimizer state, for a dense
        table its share of the rows, for a sparse one its first :data:`FIRST_ROWS` rows
        (it grows with the keys pushed), their keys and its index."""
        if self.sparse:
            return (dense_table_bytes(FIRST_ROWS, self.ncols, self.dtype, self.optimizer)
                    + FIRST_ROWS * 8 + 2 * FIRST_ROWS * 8)
        return dense_table_bytes(self.partitioner.shard_size(shard), self.ncols, self.dtype,
                                 self.optimizer)
