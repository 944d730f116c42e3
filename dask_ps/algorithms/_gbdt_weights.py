"""Sample weights of a GBDT fit, checked before the data are partitioned.

The weights travel with the rows: a partition is ``(X, y, sample_weight)`` (see
:mod:`._gbdt_data`), placed and cached with ``X`` and ``y``. In-memory weights are checked
here whole (:func:`sklearn.utils.validation._check_sample_weight`: length, NaN, infinite,
negative, all zero); a dask collection's shape and chunks here, its values where its
partitions are (:func:`._gbdt_data.checked_weights`, naming the row), its sum by the driver
from the survey (:func:`._gbdt_data.weight_totals`).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import _check_sample_weight

from ..partitions.inputs import is_dask

__all__ = ["checked_sample_weight", "eval_weights"]


def checked_sample_weight(sample_weight, X, name: str = "sample_weight"):
    """``sample_weight`` ready to partition with ``X`` (as the estimator's ``_inputs``
    returns it): None stays None; float64 ndarray (n_samples,) for in-memory ``X`` (and
    in-memory weights of a dask array ``X``), a dask array (of ``X``'s row chunks) or
    dask series (of ``X``'s partitions) as it is for dask ``X``.

    Parameters
    ----------
    sample_weight : None, number, array-like (n_samples,), dask array or dask series
    X : array-like, scipy.sparse matrix, DataFrame, dask array or dask DataFrame
    name : str, default "sample_weight"
        What errors call the weights.

    Raises
    ------
    ValueError
        Naming ``name``: another length or shape than ``X``'s rows, NaN, infinite or
        negative weights, all weights 0 (in memory), a dask array of other row chunks
        than ``X``'s or of unknown chunks, a dask collection with in-memory ``X``, weights
        of a dask DataFrame ``X`` that are not a dask series of its partitions.
    """
    if sample_weight is None:
        return None
    if not is_dask(X):
        if is_dask(sample_weight):
            raise ValueError(f"{name} is a dask collection but X is in memory: pass both "
                             f"in memory or both as dask collections")
        return _sklearn_checked(sample_weight, X, name)
    if hasattr(X, "divisions"):  # a dask DataFrame: weights of the same partitions
        if not (is_dask(sample_weight) and hasattr(sample_weight, "divisions")
                and sample_weight.npartitions == X.npartitions):
            raise ValueError(f"{name} of a dask DataFrame X must be a dask Series with X's "
                             f"{X.npartitions} partitions (e.g. a column of X's frame), got "
                             f"{type(sample_weight).__name__}")
        return sample_weight
    n, rows = X.shape[0], X.chunks[0]
    if not is_dask(sample_weight):
        return _sklearn_checked(sample_weight, np.empty((n, 0)), name)
    w = sample_weight
    if hasattr(w, "to_dask_array"):
        w = w.to_dask_array(lengths=True)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1:
        raise ValueError(f"{name} must be 1-d (one weight per row of X), got shape {w.shape}")
    if any(np.isnan(c) for c in w.chunks[0]):
        raise ValueError(f"{name} has unknown chunk sizes; call compute_chunk_sizes() on it "
                         f"first")
    if w.shape[0] != n:
        raise ValueError(f"{name} has {w.shape[0]} rows but X has {n}")
    if tuple(w.chunks[0]) != tuple(rows):
        raise ValueError(f"{name} has other row chunks than X ({_chunks(w.chunks[0])} vs "
                         f"{_chunks(rows)}): its partitions must be X's; use "
                         f"{name}.rechunk(X.chunks[0])")
    return w


def _column(w, name: str):
    """A one-column frame or array as its column (as y is taken); anything else as it is."""
    if hasattr(w, "iloc") and getattr(w, "ndim", 1) == 2:
        if w.shape[1] != 1:
            raise ValueError(f"{name} must be 1-d (one weight per row of X), got shape "
                             f"{w.shape}")
        return w.iloc[:, 0]
    return w


def _sklearn_checked(w, X, name: str) -> np.ndarray:
    """In-memory weights checked by scikit-learn, its errors prefixed by ``name`` where
    they do not say it ("Sample weights must contain at least one non-zero number")."""
    try:
        w = _check_sample_weight(_column(w, name), X, dtype=np.float64,
                                 ensure_non_negative=True)
    except ValueError as exc:
        if name in str(exc) and name == "sample_weight":
            raise
        raise ValueError(f"{name}: {exc}") from None
    return np.ascontiguousarray(w, np.float64)


def _chunks(c) -> str:
    c = [int(x) for x in c]
    return str(c) if len(c) <= 6 else f"[{', '.join(map(str, c[:3]))}, ..., {c[-1]}] " \
        f"({len(c)} chunks)"


def eval_weights(eval_sample_weight):
    """The weights of ``eval_set``'s one pair from an estimator's ``eval_sample_weight``:
    a list (or tuple) of one array-like, or the array-like itself.

    Raises
    ------
    ValueError
        A list of another number of items.
    """
    if isinstance(eval_sample_weight, (list, tuple)) and len(eval_sample_weight) and \
            not np.isscalar(eval_sample_weight[0]):
        if len(eval_sample_weight) != 1:
            raise ValueError(f"eval_sample_weight must hold one array (the weights of "
                             f"eval_set's one pair), got {len(eval_sample_weight)}")
        return eval_sample_weight[0]
    return eval_sample_weight
