"""The model of :class:`~dask_ps.FactorizationMachineClassifier` outside training: the FM
margins of rows from its arrays (dense, or keyed: sparse ``coef_`` and ``factors_``), the
table of ``[w_j, v_j]`` rows prediction reads, and the checks of those arrays: fitted ones
that make one model, and, before a fit, arrays and a factor table that fit in memory.
Training is in :mod:`.fm`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from . import _logistic_data as D
from ._fm_kernels import fm_margins_scaled

if TYPE_CHECKING:
    from ..model import PSModel

__all__ = ["block_margins", "check_fitted_arrays", "check_room", "fm_margins", "fm_table"]


def fm_margins(X, coef: np.ndarray, intercept: float, factors: np.ndarray,
               first_row: int = 0) -> np.ndarray:
    """FM margins of the rows of ``X`` (n, n_features), dense or sparse: ``intercept + X
    coef + 1/2 sum_f [(X V)_f^2 - (X^2 V^2)_f]``, float64 (n,), by sparse products.

    Rows where that overflows (a finite value such as 1e300 squared: ``inf - inf`` gave
    NaN) are computed again scaled by their largest ``|x|``
    (:func:`~._fm_kernels.fm_margins_scaled`): ``±inf`` when the margin is beyond float64
    (probabilities 0 or 1, as logistic regression's), finite when only the squares
    overflowed (one non-zero: no pair, the linear part alone).

    Raises
    ------
    ValueError
        A row whose linear part and pairwise part overflow with opposite signs (an
        undefined margin), naming it (``first_row`` plus its index: a dask chunk's
        first row in the whole ``X``) and its largest ``|x|``.
    """
    X = sp.csr_matrix(X, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # such rows are computed again
        XV = X @ factors
        X2V2 = X.multiply(X) @ (factors * factors)
        out = intercept + X @ coef + 0.5 * ((XV * XV).sum(axis=1) - X2V2.sum(axis=1))
    if not np.isfinite(out).all():
        rows = np.flatnonzero(~np.isfinite(out))
        redo = np.empty(rows.shape[0])
        fm_margins_scaled(X.indptr, X.indices, X.data, rows,
                          np.ascontiguousarray(coef, dtype=np.float64).ravel(),
                          float(intercept), np.ascontiguousarray(factors, dtype=np.float64),
                          redo)
        if np.isnan(redo).any():
            i = int(rows[np.flatnonzero(np.isnan(redo))[0]])
            big = float(np.abs(X.data[X.indptr[i]:X.indptr[i + 1]]).max())
            raise ValueError(f"the factorization machine's margin of row {first_row + i} of "
                             f"X is undefined: its linear part and its pairwise part "
                             f"overflow float64 with opposite signs (+inf - inf; largest "
                             f"|x| {big:g}); scale the features")
        out[rows] = redo
    return out


def fm_table(coef, intercept: np.ndarray, factors):
    """The model of :func:`block_margins`: rows ``[w_j, v_j]`` (n_features, 1 + k) of a dense
    ``coef_`` (1, n_features) and ``factors_`` (n_features, k); of sparse ones, the
    :class:`~._logistic_data.KeyedWeights` of the keys either holds (rows ``[w_j, v_j]``,
    the intercept's row ``[b, 0...]`` last)."""
    if not sp.issparse(coef):
        return np.column_stack([coef[0], factors])
    stacked = sp.vstack([coef, factors.T], format="csr")  # (1 + k, n_features), no dense row
    return D.KeyedWeights.from_coef(stacked, np.r_[intercept, np.zeros(factors.shape[1])])


def check_fitted_arrays(estimator: str, coef, factors) -> None:
    """Raise ValueError unless ``coef_`` (1, n) and ``factors_`` (n, k) are both dense or
    both sparse, of matching widths (e.g. after one of them was assigned by hand)."""
    kinds = [("sparse" if sp.issparse(a) else "dense") for a in (coef, factors)]
    shapes = [getattr(a, "shape", None) for a in (coef, factors)]
    if (kinds[0] != kinds[1] or any(s is None or len(s) != 2 for s in shapes)
            or shapes[0][0] != 1 or shapes[0][1] != shapes[1][0]):
        raise ValueError(f"{estimator}: coef_ ({kinds[0]}, shape {shapes[0]}) and factors_ "
                         f"({kinds[1]}, shape {shapes[1]}) do not make one model: coef_ must "
                         f"be (1, n_features) and factors_ (n_features, k), both dense "
                         f"arrays or both scipy.sparse matrices")


def block_margins(X, table, intercept: float, n_buckets, block_info=None) -> np.ndarray:
    """FM margins (n,) of a block ``X`` (columns hashed into ``n_buckets`` first, when
    given) by a :func:`fm_table`: its columns become rows of the table
    (:func:`~._logistic_data.table_rows`; a keyed model's unheld keys a row of zeros), then
    :func:`fm_margins` of the sparse products (raising its ValueError with the row in the
    whole ``X``: ``block_info`` of a dask chunk, given by ``map_blocks``)."""
    first = block_info[0]["array-location"][0][0] if block_info else 0
    X = sp.csr_matrix(X, dtype=np.float64)
    if n_buckets is not None:
        X = D.hash_columns(X, n_buckets)
    indices, table = D.table_rows(X.indices, table)
    X = sp.csr_matrix((X.data, indices, X.indptr), shape=(X.shape[0], table.shape[0]))
    return fm_margins(X, table[:, 0], intercept, table[:, 1:], first_row=first)


def check_room(estimator: str, model: PSModel, width: int, k: int, keyed: bool) -> None:
    """Refuse, before training, a model whose arrays cannot be made (``k``: the
    estimator's ``n_components``):

    * a dense model's ``coef_`` and ``factors_`` (fewer than
      :data:`~._logistic_data.KEYED_FEATURES` columns; float64, ``width * (k + 1)`` values,
      made in this process after training), against half of the memory available now (or
      of this process's limit:
      :func:`~dask_ps.partitions.worker.process_memory`): a ``k`` of thousands. (Dense at 2^28
      features and k=8, a fit trained, then failed making a 16 GiB array; such a model is
      keyed now.)
    * the factor table's first block on every shard: a hashed table starts at
      :data:`~dask_ps.state.table.FIRST_ROWS` rows whatever the width, here of ``2k + 1``
      float64 columns (factors, their accumulators, a count). ``k=10**7`` on 20 features
      asked 153 GiB per shard and failed with numpy's allocation error. Against half of the
      memory available here for the shards of this process (with the dense arrays), or of
      the smallest worker memory limit for a shard on a worker.

    Raises
    ------
    MemoryLimitError
        A :class:`MemoryError` naming the width or the table's rows, ``n_components``, the
        bytes and the memory they exceed.
    """
    from ..exceptions import MemoryLimitError
    from ..partitions.worker import process_memory, smallest_limit
    from ..state.table import FIRST_ROWS

    gib = 2.0**30
    available = process_memory(available=True)
    dense = 0 if keyed else 8 * width * (k + 1)
    if dense > available // 2:
        raise MemoryLimitError(
                          f"{estimator}: coef_ and factors_ of {width} features x "
                          f"(n_components={k} + 1) take {dense / gib:.1f} GiB as dense "
                          f"float64 arrays, more than half of the {available / gib:.1f} GiB "
                          f"available here; use a smaller n_components")
    block = 8 * FIRST_ROWS * (2 * k + 1)  # bytes per shard before any key arrives
    if model.client is None:  # every shard in this process, and the dense arrays
        need, room = dense + block * model.n_shards, available // 2
        where = (f"{need / gib:.1f} GiB here with {model.n_shards} shard(s), more than half "
                 f"of the {available / gib:.1f} GiB available")
    else:
        need, room = block, smallest_limit(model.client) // 2
        where = f"more than half of a worker's {2 * room / gib:.1f} GiB memory limit"
    if room > 0 and need > room:
        raise MemoryLimitError(
                          f"{estimator}: n_components={k} makes the factor table "
                          f"{block / gib:.1f} GiB per shard from its start ({FIRST_ROWS} rows "
                          f"of 2 n_components + 1 float64: factors, accumulators, a count), "
                          f"{where}; use a smaller n_components")
