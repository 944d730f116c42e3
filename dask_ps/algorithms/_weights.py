"""Sample weights: the ``sample_weight`` argument of ``fit`` checked on the driver, and the
weights of each partition checked where it lives.

The weights travel with the data: the estimators partition ``(X, y, sample_weight)`` as one
tuple (:func:`dask_ps.partitions.partition`), so each partition's weights are placed, cached,
spilled and recovered with its rows, read once per fit and never sent again per epoch. In-memory
weights are checked whole here (scikit-learn's ``_check_sample_weight``); a dask array's values
are checked per partition, on its worker (:func:`check_part`), and their sum (all zero is
refused) comes back with one small reduction (:func:`total_weight`).
"""

from __future__ import annotations

import numpy as np

from ..exceptions import DataError
from ..partitions.inputs import is_dask

__all__ = ["check_part", "check_sample_weight", "total_weight"]

ALL_ZERO = ("sample_weight: every weight is zero; sample weights must contain at least one "
            "non-zero number")


def check_sample_weight(sample_weight, X, estimator: str):
    """``sample_weight`` for ``X``, checked: None stays None.

    Parameters
    ----------
    sample_weight : array-like (n_samples,), number, dask array or series, or None
        A number weighs every row alike. With a dask array ``X``: a dask array (its chunks
        are cut to ``X``'s rows, as ``y``'s are) or an in-memory array; with a dask
        dataframe ``X``: a dask series with ``X``'s partitions.
    X : array-like or dask collection
        The data, after the estimator's own checks.
    estimator : str
        Its name, for the messages.

    Returns
    -------
    ndarray float64 (n_samples,), a dask array or series, or None

    Raises
    ------
    ValueError
        Naming ``sample_weight``: not 1-D, another length than ``X``'s rows, negative, NaN
        or infinite values (in memory; a dask array's are checked per partition by
        :func:`check_part`), all zero (in memory), a dask array of unknown chunk sizes, or
        with a dask dataframe ``X`` anything but a dask series of its partitions.
    """
    if sample_weight is None:
        return None
    if not is_dask(X):
        from sklearn.utils.validation import _check_sample_weight

        return _check_sample_weight(sample_weight, X, dtype=np.float64,
                                    ensure_non_negative=True)
    if hasattr(X, "divisions"):  # a dask dataframe: its partitions have no known lengths
        if not (is_dask(sample_weight) and hasattr(sample_weight, "divisions")
                and sample_weight.npartitions == X.npartitions):
            got = (f"{sample_weight.npartitions} partitions" if hasattr(sample_weight,
                   "npartitions") else type(sample_weight).__name__)
            raise ValueError(f"sample_weight: X is a dask dataframe of {X.npartitions} "
                             f"partitions, so sample_weight must be a dask series with the "
                             f"same partitions (e.g. a column of X's dataframe), got {got}")
        return sample_weight
    if hasattr(sample_weight, "to_dask_array"):
        sample_weight = sample_weight.to_dask_array(lengths=True)
    if not is_dask(sample_weight):
        from sklearn.utils import check_array
        from sklearn.utils.validation import check_non_negative

        sample_weight = check_array(np.asarray(sample_weight) if np.ndim(sample_weight)
                                    else np.full(X.shape[0], sample_weight), ensure_2d=False,
                                    dtype=np.float64, input_name="sample_weight")
        check_non_negative(sample_weight, "`sample_weight`")
        if sample_weight.ndim == 1 and not sample_weight.any():
            raise ValueError(ALL_ZERO)
    if sample_weight.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D, of shape (n_samples,), got shape "
                         f"{tuple(sample_weight.shape)}")
    if is_dask(sample_weight) and any(np.isnan(c) for c in sample_weight.chunks[0]):
        raise ValueError("sample_weight is a dask array of unknown chunk sizes; call "
                         "compute_chunk_sizes() on it first")
    if sample_weight.shape[0] != X.shape[0]:
        raise ValueError(f"sample_weight has {sample_weight.shape[0]} values, but X has "
                         f"{X.shape[0]} rows ({estimator}): one weight per row")
    return sample_weight


def check_part(sw, start: int = 0) -> np.ndarray:
    """A partition's weights as float64 (n,), checked where they live; ``start``: the
    partition's first row in the whole data (errors name rows from it).

    Raises
    ------
    DataError
        A weight that is negative, NaN or infinite, naming its row.
    """
    sw = np.asarray(sw.to_numpy() if hasattr(sw, "to_numpy") else sw, np.float64).ravel()
    bad = ~(np.isfinite(sw) & (sw >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(f"sample_weight: {sw[i]} at row {start + i} is "
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
        Every weight is zero.
    """
    total = float(sum(data.reduce(_part_sum)))
    if not total > 0:
        raise ValueError(ALL_ZERO)
    return total


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
