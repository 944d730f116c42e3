"""GBDT's view of the data: partition values as feature matrices, categorical columns,
labels, and the survey of the partitions the bins are made from.

A partition value is ``(X, y)`` with ``X`` a NumPy array, a scipy.sparse matrix or a pandas
DataFrame (the chunks of a dask array or dataframe are these). :func:`to_matrix` makes the
float matrix the kernels take: a DataFrame's categorical columns become their category
codes under the categories of the training data (LightGBM's convention for pandas
categoricals: NaN and unseen categories are missing), other columns numbers.
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp

from ..exceptions import DataError
from ._base import check_numeric_columns
from ._gbdt_objectives import exact_sum, exact_total
from ._gbdt_sketch import hash_rows, kernel_array, sketch
from ._logistic_data import classes_of
from ._weights import all_zero, check_part

__all__ = ["categorical_indices", "checksums", "eval_survey", "frame_categories",
           "set_checksums", "survey", "to_matrix"]


def frame_categories(frame, estimator: str | None = None) -> dict:
    """``{column: categories}`` of the categorical columns of a pandas or dask DataFrame
    (categories as a list, in their order: category ``i`` is the value ``i``); with
    ``estimator`` (its name), the other columns are checked first
    (:func:`~dask_ps.algorithms._base.check_numeric_columns`).

    Raises
    ------
    ValueError
        A dask categorical column whose categories are unknown (``cat.as_known()`` first);
        with ``estimator``, columns that hold no numbers, named.
    """
    if estimator is not None:
        check_numeric_columns(frame, estimator, categories=True)
    out = {}
    for name, dtype in frame.dtypes.items():
        if str(dtype) != "category":
            continue
        cats = frame[name].cat.categories if not hasattr(frame, "dask") else \
            frame._meta[name].cat.categories
        if hasattr(frame, "dask") and not frame[name].cat.known:
            raise ValueError(f"categorical column {name!r} has unknown categories; call "
                             f"X[{name!r}] = X[{name!r}].cat.as_known() first")
        out[str(name)] = list(cats)
    return out


def categorical_indices(spec, names: list, d: int, cats: dict) -> list | None:
    """The categorical columns' indices (sorted; None: no categorical column).

    Parameters
    ----------
    spec : "from_dtype", None, or array-like of int, bool or str
        The estimator's ``categorical_features``.
    names : list of str
        Column names of a DataFrame (else empty).
    d : int
        Number of features.
    cats : dict
        :func:`frame_categories` of the training DataFrame (always categorical).

    Raises
    ------
    ValueError
        A name that is not a column, an index out of range, a mask of the wrong shape, or
        ``spec=None`` with categorical columns.
    """
    if isinstance(spec, str):  # "from_dtype"
        return [names.index(c) for c in cats] if cats else None
    if spec is None:
        if cats:
            raise ValueError(f"categorical_features=None, but the columns {list(cats)} "
                             f"are categorical")
        return None
    spec = np.asarray(spec)
    if spec.dtype.kind in "OUS":
        missing = [c for c in spec.tolist() if c not in names]
        if missing:
            raise ValueError(f"categorical_features names {missing[0]!r}, not a column of X")
        idx = [names.index(c) for c in spec.tolist()]
    elif spec.dtype == bool:
        if spec.shape != (d,):
            raise ValueError(f"categorical_features mask has shape {spec.shape}, X has "
                             f"{d} features")
        idx = np.flatnonzero(spec).tolist()
    else:
        idx = spec.astype(np.int64).ravel().tolist()
        bad = [i for i in idx if not 0 <= i < d]
        if bad:
            raise ValueError(f"categorical_features index {bad[0]} is not a feature of X "
                             f"({d} features)")
    return sorted(set(idx) | {names.index(c) for c in cats})


def _frame_matrix(df, categories: dict, row0: int = 0) -> np.ndarray:
    import pandas as pd

    out = np.empty((df.shape[0], df.shape[1]), np.float64)
    for j, name in enumerate(df.columns):
        col = df[name]
        key = str(name)
        if key in categories:
            # -1: NaN or a category unseen at fit (missing)
            codes = pd.Index(categories[key]).get_indexer(
                np.asarray(col, dtype=object)).astype(np.float64)
            codes[codes < 0] = np.nan
            out[:, j] = codes
            continue
        if str(col.dtype) == "category":
            raise DataError(f"column {name!r} is categorical here but was not at fit")
        try:
            out[:, j] = pd.to_numeric(col, errors="raise").to_numpy(dtype=np.float64,
                                                                     na_value=np.nan)
        except (ValueError, TypeError) as exc:
            # the row in the whole X (pandas names a position in this partition)
            bad = np.flatnonzero((pd.to_numeric(col, errors="coerce").isna()
                                  & col.notna()).to_numpy())
            where = (f"row {row0 + int(bad[0])} holds {col.iloc[int(bad[0])]!r}"
                     if bad.shape[0] else str(exc))
            raise DataError(f"column {name!r} is neither numeric nor categorical "
                            f"({col.dtype}): {where}") from None
    return out


def to_matrix(X, categories: dict | None = None, row0: int = 0, name: str = "X"):
    """A partition's features as the kernels take them.

    Parameters
    ----------
    X : ndarray (n, d), scipy.sparse matrix, pandas DataFrame or Series
    categories : dict, optional
        ``{column: categories}`` of a DataFrame's categorical columns (from
        :func:`frame_categories` at fit).
    row0 : int
        Row number in the whole ``X`` of this partition's first row (named by errors).
    name : str, default "X"
        What errors call the matrix (e.g. ``"eval_set X"``).

    Returns
    -------
    float32/float64 C-ordered ndarray (n, d), or float64 CSR matrix with sorted indices

    Raises
    ------
    ValueError
        Infinite values (naming the row and column, and a DataFrame's column name), or a
        column that is neither numeric nor categorical.
    """
    columns = None
    if hasattr(X, "iloc"):
        X = X.to_frame() if X.ndim == 1 else X
        columns = list(X.columns)
        X = _frame_matrix(X, categories or {}, row0)
    elif sp.issparse(X) or hasattr(X, "to_scipy_sparse"):
        X = X.to_scipy_sparse() if hasattr(X, "to_scipy_sparse") else X
        X = sp.csr_matrix(X, dtype=np.float64)
        if not X.data.flags.writeable:  # the kernels take writable arrays (kernel_array)
            X = X.copy()
        X.sum_duplicates()
        bad = np.flatnonzero(np.isinf(X.data))
        if bad.size:
            row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
            raise DataError(f"{name}[{row0 + row}, {int(X.indices[bad[0]])}] = "
                            f"{X.data[bad[0]]} is infinite")
        return X
    else:
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        X = kernel_array(X)
        if X.ndim == 1:
            X = X[:, None]
    inf = np.isinf(X)
    if inf.any():
        r, c = np.argwhere(inf)[0]
        column = "" if columns is None else f" (column {columns[c]!r})"
        raise DataError(f"{name}[{row0 + r}, {c}]{column} = {X[r, c]} is infinite")
    return X


def labels(y) -> np.ndarray:
    """A partition's labels as a 1-d array."""
    y = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    return y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y


#: Labels of a regression partition sent to the driver by :func:`survey` (every k-th), for
#: :func:`~._gbdt_fit.check_quantization`.
LABEL_SAMPLE = 1000


def survey(value, start: int, rate: float, seed: int, categories: dict, classify: bool,
           checksum: bool = False):
    """What the driver needs from one training partition before the first tree.

    Parameters
    ----------
    value : (X, y) or (X, y, sample_weight)
    start : int
        Global id of its first row (the bin sample hashes row ids).
    rate, seed : float, int
        Of the bin sample (:func:`._gbdt_sketch.sample_rate`).
    categories : dict
    classify : bool
        Labels are classes (their distinct values and counts are returned) or numbers
        (sum, min and max).
    checksum : bool, default False
        Also return the partition's :func:`checksums` (a fit that writes checkpoints: a
        resume knows its training data by them).

    Returns
    -------
    dict
        ``sketch`` (:class:`BinSketch`), ``n_rows``, and ``classes`` / ``counts`` or
        ``y_sum`` (:func:`exact_sum`) / ``y_min`` / ``y_max`` / ``y_sample`` (every k-th
        label, at most about :data:`LABEL_SAMPLE`); with ``checksum``, ``checksums``. With
        sample weights, ``weights``: :func:`weight_survey`; the sketch, ``y_min``,
        ``y_max`` and ``y_sample`` are then of the rows of positive weight, ``y_sum`` the
        weighted sum.

    Raises
    ------
    ValueError
        What :func:`to_matrix`, :func:`checked_labels` and :func:`~._weights.check_part`
        raise; a classifier's label that is not a class
        (:func:`~._logistic_data.classes_of`), naming its first row.
    """
    X = to_matrix(value[0], categories, start)
    y = checked_labels(value[1], start, classify)
    w = check_part(value[2], start, X.shape[0]) if len(value) > 2 else None
    pos = None if w is None or (w > 0).all() else w > 0
    out = dict(n_rows=int(X.shape[0]),
               sketch=sketch(X, np.arange(start, start + X.shape[0], dtype=np.int64), rate,
                             seed, pos))
    if checksum:
        out["checksums"] = checksums(X, y, start, w)
    if w is not None:
        out["weights"] = weight_survey(w, y, classify)
    if classify:
        out["classes"], out["counts"] = classes_of(y, start)
    else:
        y = np.asarray(y, np.float64)
        out.update(y_sum=exact_sum(y if w is None else y * w))
        y = y if pos is None else y[pos]
        out.update(y_min=float(y.min(initial=np.inf)), y_max=float(y.max(initial=-np.inf)),
                   y_sample=y[:: max(1, y.shape[0] // LABEL_SAMPLE)].copy())
    return out


def weight_survey(w: np.ndarray, y, classify: bool) -> dict:
    """What the driver needs of a partition's sample weights ``w`` (checked) and labels
    ``y``: ``n_pos`` (rows of positive weight), ``w_max``, ``w_sum`` (:func:`exact_sum`)
    and, for a classifier, ``class_sums``: per distinct label (in the order of
    ``np.unique``) the :func:`exact_sum` of its rows' weights."""
    out = dict(n_pos=int(np.count_nonzero(w)), w_max=float(w.max(initial=0.0)),
               w_sum=exact_sum(w))
    if classify:
        _, codes = np.unique(y, return_inverse=True)
        order = np.argsort(codes.ravel(), kind="stable")
        cuts = np.flatnonzero(np.diff(codes.ravel()[order])) + 1
        out["class_sums"] = [exact_sum(part) for part in np.split(w[order], cuts)]
    return out


def checked_labels(y, start: int, classify: bool, name: str = "y") -> np.ndarray:
    """A partition's labels (:func:`labels`), checked: one per row, no NaN for a classifier,
    finite for a regressor; errors name the row in the whole data (``start`` the
    partition's first) as ``name[row]``."""
    y = labels(y)
    if y.ndim != 1:
        raise DataError(f"{name} must hold one label per row: got shape {y.shape} in rows "
                        f"{start}..{start + y.shape[0] - 1}")
    if classify and y.dtype.kind == "f" and np.isnan(y).any():
        raise DataError(f"{name}[{start + int(np.flatnonzero(np.isnan(y))[0])}] is NaN: a "
                        f"classifier's labels must be classes")
    if not classify:
        bad = np.flatnonzero(~np.isfinite(np.asarray(y, np.float64)))
        if bad.size:
            raise DataError(f"{name}[{start + bad[0]}] = {y[bad[0]]} is not finite")
    return y


def eval_survey(value, start: int, categories: dict, classify: bool) -> dict:
    """What the driver needs from an eval partition: its features and labels checked
    (errors name ``eval_set`` and the row in the whole set, ``start`` the partition's
    first), its distinct labels (none for a regressor) and their :func:`checksums` (with its
    weights, ``value[2]``, checked as ``eval_sample_weight``).

    Returns
    -------
    dict
        ``classes`` (array) and ``checksums``; with weights, ``weights``
        (:func:`weight_survey`, for :func:`weight_totals`).
    """
    X = to_matrix(value[0], categories, start, "eval_set X")
    y = checked_labels(value[1], start, classify, "eval_set y")
    out = dict(classes=classes_of(y, start, "eval_set y")[0] if classify else y[:0])
    w = None
    if len(value) > 2:
        w = check_part(value[2], start, X.shape[0], "eval_sample_weight")
        out["weights"] = weight_survey(w, y, classify)
    out["checksums"] = checksums(X, y, start, w)
    return out


def weight_totals(parts: list, name: str = "sample_weight") -> dict | None:
    """The sample weights of a whole training set from its partitions' :func:`survey`
    (None: unweighted): ``n_pos``, ``w_max``, ``total`` (a Fraction, exact); of an eval
    set's from its :func:`eval_survey` (``name`` "eval_sample_weight").

    Raises
    ------
    ValueError
        Every weight is 0 (:func:`~._weights.all_zero`, naming ``name``).
    """
    if not parts or "weights" not in parts[0]:
        return None
    found = [p["weights"] for p in parts]
    total = exact_total(f["w_sum"] for f in found)
    if total <= 0:
        raise ValueError(all_zero(name))
    return dict(n_pos=sum(f["n_pos"] for f in found), w_max=max(f["w_max"] for f in found),
                total=total)


def class_shares(parts: list, classes: np.ndarray, total) -> np.ndarray:
    """Each class's share of the sample weight (float64 (n_classes,)), from the partitions'
    :func:`survey` (their ``classes`` and ``weights["class_sums"]``) and the ``total``
    weight (:func:`weight_totals`)."""
    sums = [[] for _ in range(classes.shape[0])]
    for p in parts:
        for k, found in zip(np.searchsorted(classes, p["classes"]).tolist(),
                            p["weights"]["class_sums"]):
            sums[k].append(found)
    return np.array([float(exact_total(s) / total) for s in sums])


#: Seeds of :func:`checksums`' weights: of the rows' features, of the columns, of the labels,
#: of the sample weights.
_ROW_SEED, _COLUMN_SEED, _LABEL_SEED, _SAMPLE_SEED = 0x6576616C, 0x636F6C73, 0x6C61626C, \
    0x77676874


def _weights(first: int, n: int, seed: int) -> np.ndarray:
    """Odd pseudo-random uint64 weights of ids ``first .. first + n - 1``: the row hash of
    the bin sample (:func:`~._gbdt_sketch.hash_rows`), so they depend on the id alone."""
    out = np.empty(n, np.uint64)
    hash_rows(np.arange(first, first + n, dtype=np.int64), np.uint64(seed), out)
    return out | np.uint64(1)


def _words(values) -> np.ndarray:
    """A well-spread uint64 word per value, 0 for a zero: the row hash
    (:func:`~._gbdt_sketch.hash_rows`) of the bits of its float64 (the same for float32
    and for integers below 2**53; the bits alone of 0/1 labels differ in their top 12 bits
    only), or of the hash of its text (text labels). Same shape as ``values``."""
    values = np.asarray(values)
    if values.dtype.kind in "biuf":
        bits = kernel_array(values, np.float64).view(np.int64)
    else:
        distinct, codes = np.unique(values.astype(str), return_inverse=True)
        bits = np.array([int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(),
                                        "little", signed=True) for v in distinct.tolist()],
                        np.int64)[codes].reshape(values.shape)
    out = np.empty(bits.shape, np.uint64)
    hash_rows(bits.reshape(-1), np.uint64(0), out.reshape(-1))
    out[bits == 0] = 0  # zeros add nothing: dense and sparse X agree
    return out


def checksums(X, y, start: int, w=None) -> tuple:
    """``(features, labels)`` checksums of a partition whose first row is row ``start`` of
    its set, and a third of its sample weights ``w`` if given: sums modulo 2**64 of each
    value's word (:func:`_words`) times odd weights of its row's global id (and of its
    column, for features; :func:`_weights`).

    Sums of independent terms, so the checksums of a whole set are the sums of its
    partitions' whatever its partitioning; any change of one value, or of where a value is,
    changes them; zeros add nothing, so dense and sparse ``X`` agree. Cheap: a hash, a
    multiply and a sum per value (per stored value of a sparse ``X``), in the task that
    checks them, with no pass of their own.

    Parameters
    ----------
    X : float ndarray (n, d) or CSR matrix
        As :func:`to_matrix` returns it.
    y : ndarray (n,) or None
        None: no labels (e.g. LDA's documents); their checksum is 0.
    start : int
    w : ndarray (n,), optional
        Sample weights.

    Returns
    -------
    features, labels[, weights] : int
        In [0, 2**64).
    """
    n, d = X.shape
    rows, cols = _weights(start, n, _ROW_SEED), _weights(0, d, _COLUMN_SEED)
    if sp.issparse(X):
        per_row = np.repeat(rows, np.diff(X.indptr))
        features = (_words(X.data) * per_row * cols[X.indices]).sum(dtype=np.uint64)
    else:
        by_column = np.zeros(d, np.uint64)
        step = max(1, 2**20 // max(d, 1))  # bounded temporaries
        for a in range(0, n, step):
            by_column += (_words(X[a:a + step]) * rows[a:a + step, None]).sum(
                axis=0, dtype=np.uint64)
        features = (by_column * cols).sum(dtype=np.uint64)
    labels_sum = 0 if y is None else (_words(y) * _weights(start, n, _LABEL_SEED)).sum(
        dtype=np.uint64)
    if w is None:
        return int(features), int(labels_sum)
    weights_sum = (_words(w) * _weights(start, n, _SAMPLE_SEED)).sum(dtype=np.uint64)
    return int(features), int(labels_sum), int(weights_sum)


def set_checksums(found: list, prefix: str) -> dict:
    """The checksums of a whole set from its partitions' (the ``checksums`` of their
    :func:`survey` or :func:`eval_survey`): ``{prefix + "_features": hex, prefix +
    "_labels": hex}`` (and ``prefix + "_weights"`` with sample weights), 16 hex digits
    each, as a fit id keeps them."""
    keys = ("features", "labels", "weights")[:len(found[0]["checksums"]) if found else 2]
    return {f"{prefix}_{k}": f"{sum(int(f['checksums'][i]) for f in found) % 2**64:016x}"
            for i, k in enumerate(keys)}
