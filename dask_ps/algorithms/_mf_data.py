"""Matrix factorisation's view of the data: ratings as dense codes, partitioned by user.

Ids of any kind map to dense codes through the package's one id mapping,
:class:`dask_ps.io.IdMapping` (what :func:`dask_ps.io.read_ratings` returns): in memory from
the distinct ids, for dask dataframes with :func:`dask_ps.io.encode_ratings`. The coded
ratings are then partitioned by user (:func:`dask_ps.partitions.partition` with ``by=``), so
that every user's ratings are in one partition and its factors stay next to it.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import DataError
from ..io.ids import IdMapping, id_values

__all__ = ["as_ids", "as_ratings", "coded_frame", "evaluate_sums", "index_dtype", "item_counts",
           "narrow_ratings", "rating_values", "strings_refused", "to_part", "triples"]

COLUMNS = ("user", "item", "rating")


def as_ids(col, name: str) -> np.ndarray:
    """Ids as int64 (integers, or integral floats) or as strings, by
    :func:`dask_ps.io.ids.id_values` (the rule of dask dataframes too).

    Raises
    ------
    ValueError
        Non-integral or non-finite float ids, missing ids, or numbers and strings mixed in
        one column, naming the column and row (counted from 0).
    TypeError
        Ids that are neither numbers nor strings.
    """
    try:
        ids, bad = id_values(col)
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from None
    if bad is not None:
        raise bad_row(name, bad)
    return ids


def as_ratings(col, name: str) -> np.ndarray:
    """Ratings as float64; ValueError naming the first non-number or non-finite one."""
    a, bad = rating_values(col)
    if bad is not None:
        raise bad_row(name, bad)
    return a


def bad_row(label: str, bad: tuple, k: int | None = None) -> DataError:
    """The DataError of a bad value ``bad = (row, why)`` (``why`` naming it, ``{row}`` its
    row) of the column ``label``: ``"<label>: <why>"``; with ``k``, a row of partition ``k``
    of a dask input, said so. Its attribute ``where``, ``(k, row, label, why)``, lets
    :func:`in_partition` name the partition and :func:`whole_row` the row in the input."""
    row, why = bad
    where = "" if k is None else f" (row counted within partition {k} of X)"
    err = DataError(f"{label}: {why.format(row=row)}{where}")
    err.where = (k, row, label, why)
    return err


#: The NumPy dtype kinds of ratings refused whatever they hold: strings, bytes, raw data, as
#: scikit-learn's ``check_array(..., dtype="numeric")`` refuses them (and the estimators'
#: X, :func:`~._base.check_numeric_columns`).
NOT_NUMERIC_KINDS = ("U", "S", "V")


def strings_refused(dtype) -> str:
    """Why ratings of the NumPy dtype ``dtype`` (of a kind in :data:`NOT_NUMERIC_KINDS`) are
    refused, in scikit-learn's words."""
    return (f"ratings have dtype {dtype}: dtype='numeric' is not compatible with arrays of "
            f"bytes/strings. Convert your data to numeric values explicitly instead, e.g. "
            f"with .astype(np.float64)")


def rating_values(col) -> tuple:
    """``(ratings float64, None)``, or ``(None, (row, why))`` of the first rating that is not
    a finite number, ``why`` naming it and ``{row}`` its row (the form of
    :func:`~dask_ps.io.ids.id_values`). A NumPy array (or list) of strings or bytes is
    refused in scikit-learn's words, numbers in it or not, as ``check_array(...,
    dtype="numeric")`` refuses it; numbers written as strings in an object array or a
    pandas column are converted, as it converts them."""
    a = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
    if a.dtype.kind in NOT_NUMERIC_KINDS:
        return None, (0, strings_refused(a.dtype))
    try:
        a = a.astype(np.float64)
    except (TypeError, ValueError) as err:
        return None, (0, f"ratings must be numbers, got dtype {a.dtype} ({err})")
    bad = ~np.isfinite(a)
    if bad.any():
        return None, (int(np.argmax(bad)), f"rating {a[np.argmax(bad)].item()!r} at row {{row}}"
                                           f" is not finite")
    return a, None


def triples(X, y, cols: tuple, need_ratings: bool, as_array: bool = False) -> tuple:
    """``(user ids, item ids, ratings or None)`` of an in-memory input (NumPy or pandas;
    ``as_array``: a frame read as the array of its values, its columns named by position).

    Raises
    ------
    ValueError
        A missing column (named), an array of the wrong shape, ``y`` of another length or
        not 1-D (a column ``(n, 1)`` is raveled with scikit-learn's
        ``DataConversionWarning``).
    """
    if hasattr(X, "columns") and not as_array:  # pandas
        names = list(cols[:2]) + ([cols[2]] if need_ratings and y is None else [])
        for what, name in zip(("user_col", "item_col", "rating_col"), names):
            if name not in X.columns:
                raise ValueError(f"X has no column {name!r} ({what}); its columns are "
                                 f"{list(X.columns)}")
        values = [X[n] for n in names]
        labels = [f"X column {n!r}" for n in names]
    else:
        a = np.asarray(X)
        width = 3 if need_ratings and y is None else 2
        if a.ndim != 2 or a.shape[1] not in (width, 3):
            raise ValueError(f"X must be an array of shape (n, {width}) (user, item"
                             f"{', rating' if width == 3 else ''}), got shape {a.shape}")
        values = [a[:, j] for j in range(width)]
        labels = [f"X column {j} ({w})" for j, w in zip(range(width), COLUMNS)]
    if y is not None and need_ratings:
        from sklearn.utils.validation import column_or_1d

        # scikit-learn's rule: a column is raveled with a warning, a 2-D y refused (it failed
        # with pandas' "Per-column arrays must each be 1-dimensional")
        y = column_or_1d(y, warn=True)
        values, labels = values[:2] + [y], labels[:2] + ["y"]
    users, items = as_ids(values[0], labels[0]), as_ids(values[1], labels[1])
    ratings = as_ratings(values[2], labels[2]) if need_ratings else None
    if ratings is not None and ratings.shape[0] != users.shape[0]:
        raise ValueError(f"y has {ratings.shape[0]} ratings for {users.shape[0]} rows of X")
    return users, items, ratings


def index_dtype(n: int) -> np.dtype:
    """The narrowest index dtype of this module for values ``0 .. n - 1``: int32, or int64 from
    2^31 on (the kernels take either)."""
    return np.dtype(np.int32 if n <= 2**31 else np.int64)


def narrow_ratings(r: np.ndarray) -> np.ndarray:
    """float64 ratings as float32 when every one is a float32 exactly (1-5 stars, halves),
    else as they are: widened back they are the same float64 values, so float64 math on
    them (ALS, the global mean) is unchanged."""
    if r.dtype == np.float64:
        with np.errstate(over="ignore"):  # beyond float32's range: not exact, kept
            r32 = r.astype(np.float32)
        if np.array_equal(r32, r):
            return r32
    return r


def coded_frame(users: np.ndarray, items: np.ndarray, ratings: np.ndarray,
                user_map: IdMapping, item_map: IdMapping):
    """A pandas frame of dense ``user``, ``item`` codes (int32 below 2^31 ids, else int64)
    and float64 ``rating``."""
    import pandas as pd

    return pd.DataFrame({
        "user": user_map.codes(users).astype(index_dtype(len(user_map)), copy=False),
        "item": item_map.codes(items).astype(index_dtype(len(item_map)), copy=False),
        "rating": ratings})


def to_part(df) -> tuple:
    """A user-grouped partition as ``(uids, users, items, ratings)`` in the narrowest dtypes
    that hold it exactly: ``uids`` int64, the partition's distinct user codes; ``users``
    (n,) indices into ``uids`` and ``items`` (n,) item codes, int32 (int64 from 2^31 on,
    :func:`index_dtype`); ``ratings`` (n,) float32 when exact, else float64
    (:func:`narrow_ratings`).

    Raises
    ------
    ValueError
        A negative code (an id the mapping does not know) or a non-finite rating.
    """
    import pandas as pd

    u, i = (df[c].to_numpy() for c in ("user", "item"))
    u, i = (c if c.dtype.kind in "iu" else c.astype(np.int64) for c in (u, i))
    r = narrow_ratings(as_ratings(df["rating"], "column 'rating'"))
    for name, codes in (("user", u), ("item", i)):
        if codes.size and codes.min() < 0:
            raise DataError(f"column {name!r}: code {codes.min()} at row "
                            f"{int(np.argmin(codes))} is not a valid id code")
    users, uids = pd.factorize(u, sort=True)
    items = i.astype(index_dtype(int(i.max()) + 1 if i.size else 0))
    return (np.asarray(uids, np.int64), users.astype(index_dtype(uids.shape[0])), items, r)


def part_stats(part) -> np.ndarray:
    """``[sum, count, min, max]`` of a partition's ratings (summed in float64)."""
    r = part[3]
    if r.shape[0] == 0:
        return np.array([0.0, 0.0, np.inf, -np.inf])
    r = r.astype(np.float64, copy=False)  # the same values and sum as the float64 input's
    return np.array([r.sum(), r.shape[0], r.min(), r.max()])


def item_counts(part, n_items: int) -> np.ndarray:
    """Ratings of each item in a partition, int64 (n_items,)."""
    return np.bincount(part[2], minlength=n_items)


def evaluate_sums(est, X, y) -> np.ndarray:
    """SSE, SAE, count and cold-start counts of one in-memory block (rows the cold-start
    rule ``"drop"`` leaves out are not counted)."""
    _, _, ratings = triples(X, y, est._cols, True)
    u, i = est._indices(X, warn=False)
    keep = (u >= 0) & (i >= 0) if est.cold_start == "drop" else np.ones(u.shape[0], bool)
    err = est._predict_indices(u[keep], i[keep]) - ratings[keep]
    return np.array([err @ err, np.abs(err).sum(), err.shape[0], (u < 0).sum(),
                     (i < 0).sum()], dtype=np.float64)


def code_values(ids: np.ndarray, n: int, param: str) -> tuple:
    """``(ids, None)`` when ``ids`` (as :func:`as_ids` reads them) are codes ``0 .. n - 1``
    of the mapping given as ``param`` (``"users"`` or ``"items"``), else ``(None, (row,
    why))`` of the first that is not (a string, a negative code, one ``>= n``)."""
    bad = np.ones(ids.shape[0], bool) if ids.dtype.kind not in "iu" else (ids < 0) | (ids >= n)
    if not bad.any():
        return ids, None
    j = int(np.argmax(bad))
    codes = f"0..{n - 1}" if n else "it has no ids"
    return None, (j, f"{ids[j].item()!r} at row {{row}} is not a code of {param}= ({codes}): "
                     f"with users= and items=, X holds the codes that read_ratings gives "
                     f"(IdMapping.codes of the ids), not the ids")


def checked_part(df, cols: tuple, n_users: int | None = None, n_items: int | None = None,
                 partition_info=None):
    """A partition of a dask input before its shuffle by user, as a frame of ``user``,
    ``item`` (int64 codes) and ``rating`` (float64): ``df`` has these columns (the codes of
    :func:`~dask_ps.io.encode_ratings`) or, with ``n_users`` and ``n_items`` (the lengths
    of the mappings ``users=``, ``items=``), the columns ``cols`` holding codes.

    Raises
    ------
    DataError
        A bad id or code (with the mappings) or rating, naming the column of ``cols`` and
        the row in the partition; its attribute ``where`` is ``(partition, row, label,
        why)`` (``why`` with ``{row}``), for :func:`whole_row` to name the row in the input.
    """
    import pandas as pd

    k = partition_info["number"] if partition_info else 0
    labels = [f"X column {c!r}" for c in cols]
    if n_users is None:  # encode_ratings' frame: its ratings to check
        out, (r, bad) = None, rating_values(df["rating"])
        found = [] if bad is None else [(labels[2], bad)]
    else:
        out, found = {}, []
        for key, c, label, n, param in zip(("user", "item"), cols, labels, (n_users, n_items),
                                           ("users", "items")):
            ids, bad = _ids(df[c], label)
            if bad is None:
                ids, bad = code_values(ids, n, param)
            out[key] = ids
            found += [] if bad is None else [(label, bad)]
        r, bad = rating_values(df[cols[2]])
        found += [] if bad is None else [(labels[2], bad)]
    if found:
        label, bad = min(found, key=lambda f: f[1][0])  # the first bad row
        raise bad_row(label, bad, k)
    return df if out is None else pd.DataFrame({**out, "rating": r}, index=df.index)


def _ids(col, label: str) -> tuple:
    try:
        return id_values(col)
    except TypeError as err:
        raise TypeError(f"{label}: {err}") from None


def in_partition(fn, k, *args):
    """``fn(*args)`` on partition ``k`` of a dask input; a DataError of a bad row
    (:func:`bad_row`) names the partition (other DataErrors too, in words)."""
    try:
        return fn(*args)
    except DataError as err:
        where = getattr(err, "where", None)
        if where is not None and where[0] is None:
            raise bad_row(where[2], (where[1], where[3]), k) from None
        raise DataError(f"{err} (row counted within partition {k} of X)") from None


def _rows(df, check=None, partition_info=None) -> int:
    if check is not None:  # the checks of the partition's task, to find an earlier bad row
        in_partition(check, partition_info["number"] if partition_info else 0, df)
    return len(df)


def rows_counter(frame, check=None, compute=None):
    """``rows_before`` for :func:`whole_row`: ``rows_before(k)``, the rows of the partitions
    of the dask dataframe ``frame`` before partition ``k``, counted when called (the error
    path only), each partition checked by ``check(partition)`` first (``frame`` itself
    checked: None); ``compute`` computes a dask collection (default its ``compute()``)."""
    def rows_before(k: int) -> int:
        lengths = frame.partitions[:k].map_partitions(_rows, check, meta=(None, "i8"))
        return int(sum(lengths.compute() if compute is None else compute(lengths)))

    return rows_before


class RowsFromTask:
    """:func:`rows_counter` of a dask dataframe for a task of a lazy result (``predict``)
    that finds a bad row: picklable, it counts from within the task, on the cluster through
    :func:`distributed.worker_client`, else with the synchronous scheduler."""

    def __init__(self, frame, check=None) -> None:
        self.frame, self.check = frame, check

    def __call__(self, k: int) -> int:
        try:
            from distributed import get_worker
            get_worker()  # ValueError: not in a worker's task
        except (ImportError, ValueError):
            return rows_counter(self.frame, self.check,
                                lambda c: c.compute(scheduler="sync"))(k)
        from distributed import worker_client

        with worker_client() as client:  # secedes: the task waits without its thread
            return rows_counter(self.frame, self.check,
                                lambda c: client.compute(c).result())(k)


def whole_row(err: DataError, rows_before) -> DataError:
    """A :func:`checked_part` error ``err`` naming its row in the whole input:
    ``rows_before(k)`` gives the rows of the input's partitions before partition ``k``, or
    raises the error of one of them (then named instead: it comes first). Other errors are
    returned as they are."""
    where = getattr(err, "where", None)
    while where is not None:
        k, row, label, why = where
        try:
            start = rows_before(k) if k else 0
        except DataError as earlier:
            if getattr(earlier, "where", None) is None or earlier.where[0] >= k:
                return earlier
            err, where = earlier, earlier.where
            continue
        except Exception:  # not counted (a lost worker): the row within its partition
            return err
        return DataError(f"{label}: " + why.format(row=start + row))
    return err
