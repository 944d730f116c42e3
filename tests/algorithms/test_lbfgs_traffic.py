"""What an L-BFGS loss+gradient evaluation moves: the weights of the features each task's rows
touch and a gradient over the same keys, float32 while the tolerance allows it."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from dask_ps import LogisticRegression


def _wide(seed=0, n=2000, n_features=2**16, nnz=5):
    rng = np.random.default_rng(seed)
    cols = (rng.zipf(1.3, size=(n, nnz)) - 1) % n_features
    X = sp.csr_matrix((np.ones(n * nnz), cols.ravel(), np.arange(0, n * nnz + 1, nnz)),
                      shape=(n, n_features))
    X.sum_duplicates()
    y = (rng.random(n) < 0.3).astype(int)
    return X, y


def test_an_evaluation_moves_float32_weights_and_gradients_of_the_touched_features_only():
    X, y = _wide()
    chunks = 1000  # two partitions: two tasks without a cluster
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = LogisticRegression(solver="lbfgs", max_iter=5, tol=1e-4, client="local").fit(
            da.from_array(X, chunks=(chunks, X.shape[1]), asarray=False),
            da.from_array(y, chunks=chunks))
    moved = [h["bytes"] for h in m.history_]
    assert len(moved) >= 5
    assert all(b == moved[1] for b in moved[1:]), moved  # the same every evaluation
    # the first evaluation also brings each task's keys, once, as a bitmap of 2^16 + 1 bits
    # (smaller than its keys as int64 here): T tasks
    bitmap = -(-(X.shape[1] + 1) // 8)
    T, rest = divmod(moved[0] - moved[1], bitmap)
    assert rest == 0 and 1 <= T <= 8, (moved[:2], bitmap)
    # later ones: 4 B (float32) per key each way, plus 24 B (loss, rounding) per task: S keys
    S = (moved[1] - 24 * T) / 8
    distinct = np.unique(X.indices).size + 1  # and the intercept
    assert S == int(S) and distinct <= S <= T * distinct, (S, T, distinct)
    assert moved[0] - moved[1] < 8 * S  # the bitmaps moved fewer bytes than the keys
    # the dense table of every feature would be 8 B x 2^16 one way
    assert moved[1] < 0.25 * 8 * X.shape[1]


@pytest.mark.parametrize("n_keys", [0, 3, 500, 5000])
def test_keys_travel_as_the_smaller_of_a_bitmap_and_int64(n_keys):
    from dask_ps.algorithms._lbfgs import pack_keys, unpack_keys

    n = 10_001
    keys = np.sort(np.random.default_rng(n_keys).choice(n, n_keys, replace=False))
    packed = pack_keys(keys, n)
    assert packed.nbytes == min(-(-n // 8), 8 * n_keys) or (n_keys == 0 and packed.size == 0)
    got = unpack_keys(packed, n)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, keys)


def test_a_tight_tolerance_switches_to_float64_and_still_converges():
    X, y = _wide(seed=1, n_features=2**10)
    m = LogisticRegression(solver="lbfgs", max_iter=500, tol=1e-10, client="local").fit(X, y)
    loose = LogisticRegression(solver="lbfgs", max_iter=500, tol=1e-4, client="local").fit(X, y)
    # float64 changes and gradients at 1e-10 (and it converged: no ConvergenceWarning here)
    assert m.history_[-1]["bytes"] > 1.9 * loose.history_[-1]["bytes"]
    Xb = sp.hstack([X, np.ones((X.shape[0], 1))]).tocsr()

    def objective(est):
        z = Xb @ np.r_[est.coef_.ravel(), est.intercept_]
        return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * np.sum(est.coef_ ** 2)

    assert objective(m) <= objective(loose) * (1 + 1e-9)
