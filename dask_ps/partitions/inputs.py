"""What :func:`~dask_ps.partitions.partition` accepts, and how a value is cut by rows.

A partition's value is one in-memory object with rows on its first axis — a NumPy array, a
scipy.sparse matrix, a ``sparse.COO``, a pandas DataFrame or Series — or a tuple of such
objects with the same rows (``(X, y)``). These functions take such values apart and measure
them; they run on the driver and on the workers alike.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NoRows", "UnknownChunks", "as_dask_chunks", "check_columns", "check_dims",
           "check_some_rows", "first_rows", "is_dask", "n_rows_of", "describe", "slice_rows",
           "split_bounds"]


def is_dask(x) -> bool:
    """Whether ``x`` is a dask collection (array, dataframe, series, delayed)."""
    return hasattr(x, "__dask_graph__") and x.__dask_graph__() is not None


def n_rows_of(value, where: str = "a partition") -> int:
    """Rows of a partition value: the first axis of its ``shape`` (of its first element for
    a tuple).

    A partition value is an object with a ``shape`` of one dimension or more — a NumPy
    array, a scipy.sparse matrix, a ``sparse.COO``, a pandas DataFrame or Series — or a
    non-empty tuple of such objects. It may have 0 rows (a dask dataframe's partition left
    empty by a filter); a string, a list, None or a 0-d array has no rows and is refused.

    Parameters
    ----------
    value : object
    where : str, default "a partition"
        What the value is, for the error (e.g. "partition 3").

    Raises
    ------
    TypeError
        A value, or an element of a tuple, without rows, naming ``where``, the element and
        its type.
    """
    check_dims(value, where, most=None)
    return int((value[0] if isinstance(value, tuple) else value).shape[0])


def check_dims(value, where: str = "data", most: int | None = 2) -> None:
    """The one check of the dimensions of data given to :func:`~.placing.partition` (in
    memory or dask, before anything is cut or computed) and of a partition value
    (:func:`n_rows_of`, with ``most=None``): every element has a ``shape`` of 1 to ``most``
    dimensions.

    Parameters
    ----------
    value : object or tuple of objects
    where : str, default "data"
        What the value is, for the error (e.g. "partition 3").
    most : int or None, default 2
        The most dimensions allowed (None: any number).

    Raises
    ------
    TypeError
        A value, or an element of a tuple, without rows (no ``shape``, or 0 dimensions: a
        string, a list, None, a scalar, a 0-d array), naming ``where``, the element and its
        type.
    ValueError
        One of more than ``most`` dimensions (a 3-D array, in memory or dask), naming
        ``where``, the element and its shape.
    """
    items = value if isinstance(value, tuple) else (value,)
    if not items:
        raise TypeError(f"{where} is an empty tuple: a partition has rows")
    for j, v in enumerate(items):
        shape = getattr(v, "shape", None)
        part = f" (element {j} of its tuple)" if isinstance(value, tuple) else ""
        if not hasattr(shape, "__len__") or len(shape) == 0:
            raise TypeError(f"{where}{part} has no rows: got {type(v).__name__}; a partition "
                            f"is an array, a sparse matrix, a DataFrame or Series (rows on "
                            f"the first axis, 0 rows allowed), or a tuple of those")
        if most is not None and len(shape) > most:
            raise ValueError(f"{where}{part} has {len(shape)} dimensions (shape "
                             f"{tuple(shape)}): an array of a partition has 1 or {most} (rows "
                             f"on the first axis, then columns); reshape it, e.g. "
                             f"X.reshape(len(X), -1)")


def describe(value, first_row: int = 0, index: int | None = None,
             most: int | None = None) -> tuple[int, int]:
    """``(rows, bytes)`` of a partition value (``dask.sizeof``), where it lands, after
    :func:`check_columns` of a scipy.sparse one (a dask array's chunk: the algorithms' own
    checks come after its rows were cut, or not at all), its rows named from ``first_row``
    (the partition's first row in the whole data), the partition by ``index`` (its position
    among the partitions) when given; ``most``: the most dimensions of its arrays
    (:func:`check_dims`; None: any, as the steps' own partitions may have).

    Raises
    ------
    TypeError
        A value without rows (see :func:`n_rows_of`).
    ValueError
        An array of more than ``most`` dimensions, naming the partition and its shape.
    DataError
        See :func:`check_columns`.
    """
    from dask.sizeof import sizeof

    where = "a partition" if index is None else f"partition {index}"
    if most is not None:
        check_dims(value, where, most)
    n = n_rows_of(value, where)
    for v in value if isinstance(value, tuple) else (value,):
        if hasattr(v, "tocsr") and not hasattr(v, "to_scipy_sparse"):  # scipy.sparse
            check_columns(v.tocsr(), "sparse input (a partition)", first_row=first_row)
    return n, int(sizeof(value))


def slice_rows(value, a: int, b: int):
    """Rows ``[a, b)`` of a partition value, every element of a tuple alike.

    Raises
    ------
    DataError
        A scipy.sparse matrix whose column indices in those rows are out of its shape (its
        row slice would drop them silently; see :func:`check_columns`).
    """
    if isinstance(value, tuple):
        return tuple(slice_rows(v, a, b) for v in value)
    if hasattr(value, "iloc"):  # pandas
        return value.iloc[a:b]
    if hasattr(value, "tocsr") and not hasattr(value, "to_scipy_sparse"):  # scipy.sparse
        value = value.tocsr()
        check_columns(value, "sparse input", a, b)
        return value[a:b]
    return value[a:b]


def check_columns(X, where: str, a: int = 0, b: int | None = None,
                  first_row: int = 0) -> None:
    """Column indices (keys) of rows ``[a, b)`` (default: all) of a CSR ``X`` in
    ``[0, X.shape[1])``, and its row pointer (``indptr``) a valid one: scipy builds a matrix
    of any indices and row pointer without checking them (and its row slices drop indices
    out of range), and kernels index weights and rows by them. Two passes (min, max) over
    the indices, one over the row pointer, when they are good.

    Raises
    ------
    DataError
        A negative key (as a uint64 key >= 2**63 reads in int64) or one not below the
        number of columns, naming the key and its row: of ``X``, plus ``first_row`` (a
        chunk's first row in the whole array); a row pointer that decreases or points
        past the stored entries, naming the row.
    """
    from ..exceptions import DataError

    b = X.shape[0] if b is None else b
    ptr = X.indptr[a:b + 1]
    steps = np.diff(ptr)
    if (ptr.shape[0] != b - a + 1 or (steps < 0).any() or ptr[0] < 0
            or ptr[-1] > min(X.indices.shape[0], X.data.shape[0])):
        row = a + (int(np.argmax(steps < 0)) if (steps < 0).any() else 0)
        raise DataError(f"{where}: not a valid CSR matrix: its row pointer (indptr) "
                        f"decreases, or points past its {X.indices.shape[0]} stored entries, "
                        f"at row {first_row + row}")
    lo, hi = int(ptr[0]), int(ptr[-1])
    idx = X.indices[lo:hi]
    if hi == lo or (0 <= idx.min() and idx.max() < X.shape[1]):
        return
    for bad, what in ((idx < 0, "is negative: keys must be in [0, 2**63 - 1) (a uint64 key "
                                "of 2**63 or more reads as negative in int64)"),
                      (idx >= X.shape[1], f"is not below n_features = {X.shape[1]}")):
        if bad.any():
            p = lo + int(np.argmax(bad))
            row = int(np.searchsorted(X.indptr, p, side="right") - 1)
            raise DataError(f"{where}: column key {int(X.indices[p])} at row "
                            f"{first_row + row} {what}")


def first_rows(lengths) -> list[int]:
    """The first row, in the whole data, of each of consecutive parts of ``lengths`` rows."""
    lengths = np.asarray(lengths, np.int64)
    return (np.cumsum(lengths) - lengths).tolist()


def split_bounds(n: int, k: int) -> np.ndarray:
    """``k + 1`` row bounds cutting ``n`` rows into ``k`` near-equal parts."""
    return np.linspace(0, n, k + 1).round().astype(np.int64)


class NoRows(ValueError):
    """:func:`check_some_rows`' error: a caller partitioning data of its own (an estimator's
    ``eval_set``) can name it instead."""


class UnknownChunks(ValueError):
    """:func:`as_dask_chunks`' refusal of a dask array of unknown chunk sizes (boolean
    indexing, a dask dataframe's ``to_dask_array()`` without lengths): a caller partitioning
    data of its own (an estimator's ``eval_set``) names it with :meth:`named`.

    Parameters
    ----------
    message : str, optional
        Default: what to call. One message, as a ValueError's (a caller may prefix it).
    element : int, default 0
        Position of the array in the data's tuple (0 for data that is no tuple), kept as
        the attribute ``element``.
    """

    def __init__(self, message: str | None = None, element: int = 0) -> None:
        super().__init__(message or "the dask arrays need known chunk sizes; call "
                         "compute_chunk_sizes() on them first (or to_dask_array(lengths=True) "
                         "on a dask dataframe)")
        self.element = element

    def named(self, where: str, names: tuple[str, ...] = ("X", "y")) -> ValueError:
        """A ValueError saying that ``where``'s element (by ``names``) has unknown chunk
        sizes and what to call (raise it ``from None``)."""
        name = names[self.element] if self.element < len(names) else f"element {self.element}"
        return ValueError(f"{where}: {name} is a dask array of unknown chunk sizes (as boolean "
                          f"indexing or a dask dataframe's to_dask_array() leave them), which "
                          f"a cluster needs known, as for the training data: call "
                          f"{name}.compute_chunk_sizes() first, or to_dask_array(lengths=True) "
                          f"on a dask dataframe (or give the dask dataframe itself)")


def check_some_rows(rows: list[int], what: str = "") -> None:
    """The one rule for data given to :func:`~.placing.partition`: some partition has a
    row (one of 0 rows among others is fine). :class:`NoRows` (a ValueError) ``"data has no
    rows"``, followed by `` (what)`` when given (e.g. "2 futures of 0 rows")."""
    if not any(rows):
        raise NoRows("data has no rows" + (f" ({what})" if what else ""))


def check_rows(value, where: str = "data") -> None:
    """Raise ValueError when the elements of a tuple value have different row counts."""
    if isinstance(value, tuple) and len(value) > 1:
        rows = [n_rows_of(v) for v in value]
        if len(set(rows)) > 1:
            raise ValueError(f"{where}: the elements of the tuple have different numbers of "
                             f"rows {rows}; they must be aligned by rows (e.g. X and y)")


#: :func:`broadcast_large` sends an argument once to every worker from this many bytes.
BROADCAST_BYTES = 1 << 20


def broadcast_large(*args) -> tuple:
    """``args`` for a lazy ``map_blocks`` over a dask collection, each NumPy array of
    :data:`BROADCAST_BYTES` or more replaced by a future of it held by every worker
    (``Client.scatter(..., broadcast=True)``) when a distributed client is active: the task
    graph then names it instead of carrying it (a 72 MiB factor table made Dask warn
    "Sending large graph" at every FM prediction on a dask array). A named tuple of arrays
    (a keyed model's keys and weights) goes the same way, whole, from the same size. Without
    a client the arrays stay in the graph, as the threaded scheduler needs them there."""
    big = [i for i, a in enumerate(args) if _array_bytes(a) >= BROADCAST_BYTES]
    if not big:
        return args
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return args
    out = list(args)
    for i in big:
        # in a list: a tuple given alone would be scattered field by field
        out[i] = client.scatter([args[i]], broadcast=True, hash=False)[0]
    return tuple(out)


def _array_bytes(a) -> int:
    """Bytes of a NumPy array, or of the arrays of a named tuple; 0 for anything else."""
    if isinstance(a, np.ndarray):
        return a.nbytes
    if isinstance(a, tuple) and hasattr(a, "_fields"):
        return sum(v.nbytes for v in a if isinstance(v, np.ndarray))
    return 0


def as_dask_chunks(data) -> tuple[list, list[int] | None]:
    """Delayed objects, one per partition, of dask ``data`` (a collection or a tuple of
    collections aligned by rows; an in-memory element of a tuple is cut to the first one's
    row chunks), and the first row of each in the whole data (None for a dask dataframe's,
    whose lengths are not known before they are computed).

    Raises
    ------
    UnknownChunks
        A dask array of unknown chunk sizes (a ValueError naming the element of the data).
    TypeError
        An element without rows (a 0-d array, a delayed object; :func:`check_dims`).
    ValueError
        Collections not aligned by rows, or an array of more than two dimensions
        (:func:`check_dims`, before anything is computed).
    """
    import dask

    items = tuple(np.asarray(x) if isinstance(x, list) else x
                  for x in (data if isinstance(data, tuple) else (data,)))
    check_dims(items if isinstance(data, tuple) else items[0], "data")
    first = next(x for x in items if is_dask(x))
    if hasattr(first, "divisions"):  # dask dataframe or series
        cols = []
        for x in items:
            if not is_dask(x) or not hasattr(x, "divisions") or \
                    x.npartitions != first.npartitions:
                raise ValueError("with a dask dataframe, every element of the data must be a "
                                 "dask dataframe or series with the same partitions")
            cols.append(list(x.to_delayed(optimize_graph=False)))
        starts = None
    else:
        arrays = []
        for x in items:
            if hasattr(x, "to_dask_array"):
                x = x.to_dask_array(lengths=True)
            if not is_dask(x):
                import dask.array as da

                if any(np.isnan(c) for c in first.chunks[0]):  # nothing to cut x to
                    raise UnknownChunks(element=next(j for j, v in enumerate(items)
                                                 if v is first))
                x = np.asarray(x)
                if x.shape[0] != first.shape[0]:  # (dask said only "Chunks do not add up to
                    # shape"); a 0-d x was refused by check_dims
                    raise ValueError(f"the elements of the data have {first.shape[0]} and "
                                     f"{x.shape[0]} rows; they must be aligned by rows")
                x = da.from_array(x, chunks=(first.chunks[0],)
                                  + tuple(-1 for _ in np.shape(x)[1:]))
            if any(np.isnan(c) for c in x.chunks[0]):
                raise UnknownChunks(element=len(arrays))
            arrays.append(x)
        rows = arrays[0].chunks[0]
        starts = first_rows(rows)
        cols = []
        for x in arrays:
            if x.shape[0] != arrays[0].shape[0]:
                raise ValueError(f"the elements of the data have {x.shape[0]} and "
                                 f"{arrays[0].shape[0]} rows; they must be aligned by rows")
            x = x.rechunk((rows,) + ((-1,) if x.ndim == 2 else ()))
            cols.append(list(x.to_delayed(optimize_graph=False).ravel()))
    if not isinstance(data, tuple):
        return cols[0], starts
    pack = dask.delayed(_pack, pure=True)
    return [pack(*parts) for parts in zip(*cols)], starts


def _pack(*parts) -> tuple:
    return tuple(parts)
