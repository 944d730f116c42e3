"""Sample weights of every estimator that takes them (LogisticRegression,
FactorizationMachineClassifier, GBDTClassifier, GBDTRegressor): the ``sample_weight`` (and
GBDT's ``eval_sample_weight``) argument of ``fit`` checked on the driver, the weights of each
partition checked where they live, and the all-zero rule, one behaviour and one wording for
all of them.

The weights travel with the data: the estimators partition ``(X, y, sample_weight)`` as one
tuple (:func:`dask_ps.partitions.partition`), so each partition's weights are placed, cached,
spilled and recovered with its rows, read once per fit and never sent again per epoch.

- On the driver (:func:`check_sample_weight`): a one-column 2-D collection is taken as its
  column (as ``y`` is); the shape is checked against ``X``'s rows; in-memory weights are
  checked whole (values as :func:`check_part`, then all zero); a dask array of weights is cut
  to ``X``'s row chunks when partitioned, as ``y`` is; dask weights of in-memory ``X`` are
  computed (as dask ``y`` of in-memory ``X`` is); a dask dataframe ``X`` needs a dask series
  of its partitions.
- Where a partition lives (:func:`check_part`, in LogisticRegression's
  :func:`~._logistic_data.encode_part` and GBDT's :func:`~._gbdt_data.survey`): one weight
  per row, finite and non-negative, an error naming the row in the whole data.
- The sum: all zero is refused with :func:`all_zero`'s message, by :func:`total_weight` for
  LogisticRegression's encoded partitions and by :func:`~._gbdt_data.weight_totals` for
  GBDT's surveys (each sums as its fit needs: float64 or exactly).
"""

from __future__ import annotations

import numbers

import numpy as np

from ..exceptions import DataError
from ..partitions.inputs import is_dask

__all__ = ["all_zero", "check_part", "check_sample_weight", "eval_weights", "total_weight"]


def all_zero(name: str = "sample_weight") -> str:
    """The message refusing weights ``name`` that are all zero (in memory or summed over the
    partitions)."""
    return (f"{name}: every weight is zero; sample weights must contain at least one "
            f"non-zero number")


def _not_1d(name: str, shape) -> ValueError:
    return ValueError(f"{name} must be 1-D, of shape (n_samples,), got shape {tuple(shape)}")


def _column(w, name: str):
    """``w`` 1-D: a 2-D array or frame (in memory or dask) of one column as that column;
    a number, None or anything 1-D as it is.

    Raises
    ------
    ValueError
        More than one column, or more than 2 dimensions.
    """
    if not (is_dask(w) or hasattr(w, "iloc") or isinstance(w, numbers.Number)):
        w = np.asarray(w)  # not np.ndim: an array-like may refuse __array_function__
    ndim = getattr(w, "ndim", 0)
    if ndim == 2 and w.shape[1] == 1:
        return w.iloc[:, 0] if hasattr(w, "iloc") else w[:, 0]
    if ndim > 1:
        raise _not_1d(name, w.shape)
    return w


def check_sample_weight(sample_weight, X, name: str = "sample_weight"):
    """``sample_weight`` for ``X``, checked, ready to partition with it: None stays None.

    Parameters
    ----------
    sample_weight : None, number, array-like (n_samples,) or (n_samples, 1), dask array, \
dask series or one-column dask dataframe
        A number weighs every row alike; one column of a 2-D collection is taken as it. With
        a dask array ``X``: a dask array (its chunks are cut to ``X``'s rows when
        partitioned, as ``y``'s are) or in-memory weights; with a dask dataframe ``X``: a
        dask series of ``X``'s partitions; with in-memory ``X``: in-memory weights or a
        dask collection (computed).
    X : array-like, scipy.sparse matrix, DataFrame or dask collection
        The data, after the estimator's own checks.
    name : str, default "sample_weight"
        What errors call the weights (GBDT's ``eval_sample_weight``).

    Returns
    -------
    None, ndarray float64 (n_samples,) (C-contiguous), dask array (n_samples,) or dask series

    Raises
    ------
    ValueError
        Naming ``name``: more than one column, another length than ``X``'s rows, all zero
        (in memory: :func:`all_zero`), a dask array of unknown chunk sizes, with a dask
        dataframe ``X`` anything but a dask series of its partitions; in-memory values
        that are not numbers, or (:class:`~dask_ps.DataError`, :func:`check_part`) negative,
        NaN or infinite, naming the first such row. A dask collection's values are checked
        per partition (:func:`check_part`) and their sum when the fit adds them.
    """
    if sample_weight is None:
        return None
    if is_dask(sample_weight) and not is_dask(X):
        sample_weight = sample_weight.compute()
    w = _column(sample_weight, name)
    if hasattr(X, "divisions"):  # a dask dataframe: its partitions have no known lengths
        if not (is_dask(w) and hasattr(w, "divisions") and w.npartitions == X.npartitions):
            got = (f"{w.npartitions} partitions" if hasattr(w, "npartitions")
                   else type(w).__name__)
            raise ValueError(f"{name}: X is a dask dataframe of {X.npartitions} partitions, "
                             f"so {name} must be a dask series with the same partitions "
                             f"(e.g. a column of X's dataframe), got {got}")
        return w
    n = int(X.shape[0])
    if is_dask(w):
        if hasattr(w, "to_dask_array"):
            w = w.to_dask_array(lengths=True)
        if any(np.isnan(c) for c in w.chunks[0]):
            raise ValueError(f"{name} is a dask array of unknown chunk sizes; call "
                             f"compute_chunk_sizes() on it first")
    else:
        from sklearn.utils import check_array

        w = np.full(n, w) if getattr(w, "ndim", 0) == 0 else w
        try:
            w = check_array(w.to_numpy() if hasattr(w, "to_numpy") else w, ensure_2d=False,
                            dtype=np.float64, ensure_all_finite=False, input_name=name)
        except ValueError as exc:  # "could not convert string to float" names nothing
            if name in str(exc):
                raise
            raise ValueError(f"{name}: {exc}") from exc
    if w.shape[0] != n:
        raise ValueError(f"{name} has {w.shape[0]} values, but X has {n} rows: one weight "
                         f"per row")
    if is_dask(w):
        return w
    w = np.ascontiguousarray(check_part(w, 0, n, name))
    if not w.any():
        raise ValueError(all_zero(name))
    return w


def check_part(sw, start: int = 0, n_rows: int | None = None,
               name: str = "sample_weight") -> np.ndarray:
    """A partition's weights as float64 (n,), checked where they live.

    Parameters
    ----------
    sw : array-like (n,) or (n, 1), pandas series or frame
    start : int, default 0
        The partition's first row in the whole data (errors name rows from it).
    n_rows : int, optional
        The partition's rows: the weights must be as many.
    name : str, default "sample_weight"
        What errors call the weights.

    Raises
    ------
    DataError
        Another number of weights than ``n_rows``, or a weight that is negative, NaN or
        infinite, naming its row.
    """
    sw = np.asarray(sw.to_numpy() if hasattr(sw, "to_numpy") else sw, np.float64)
    if sw.ndim == 2 and sw.shape[1] == 1:
        sw = sw.reshape(-1)
    if sw.ndim != 1 or (n_rows is not None and sw.shape[0] != n_rows):
        rows = f"rows {start}..{start + n_rows - 1}" if n_rows else f"rows from {start}"
        raise DataError(f"{name} must hold one weight per row of X: got shape {sw.shape} for "
                        f"{rows}")
    bad = ~(np.isfinite(sw) & (sw >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(f"{name}: {sw[i]} at row {start + i} is "
                        f"{'negative' if sw[i] < 0 else 'not finite'}: weights must be "
                        f"finite and non-negative")
    return sw


def _part_sum(part) -> float:
    return float(np.sum(part[2]))


def total_weight(data) -> float:
    """The sum of the sample weights of encoded partitions ``(X, Y, sample_weight)``, each
    partition's summed where it lives, added in partition order (the same data and
    partitioning give the same bits).

    Raises
    ------
    ValueError
        Every weight is zero (:func:`all_zero`).
    """
    total = float(sum(data.reduce(_part_sum)))
    if not total > 0:
        raise ValueError(all_zero())
    return total


def eval_weights(eval_sample_weight):
    """The weights of ``eval_set``'s one pair from an estimator's ``eval_sample_weight``
    (GBDT's): a list (or tuple) of one array-like, or the array-like itself.

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


#: scikit-learn's estimator checks a stochastic solver cannot pass, and why (scikit-learn marks
#: its own ``SGDClassifier`` the same way).
NOT_REPEAT_EQUIVALENT = {
    name: ("a stochastic solver steps once on a weighted row, its gradient scaled by the "
           "weight, but once per copy on repeated rows (more steps, in another order): the two "
           "agree in expectation, not exactly; 'lbfgs' passes")
    for name in ("check_sample_weight_equivalence_on_dense_data",
                 "check_sample_weight_equivalence_on_sparse_data")}


def expected_failed_checks(estimator) -> dict[str, str]:
    """scikit-learn's ``expected_failed_checks`` for ``estimator``
    (:func:`sklearn.utils.estimator_checks.check_estimator`): :data:`NOT_REPEAT_EQUIVALENT`
    for a stochastic solver, nothing for "lbfgs"."""
    return {} if getattr(estimator, "solver", None) == "lbfgs" else dict(NOT_REPEAT_EQUIVALENT)
