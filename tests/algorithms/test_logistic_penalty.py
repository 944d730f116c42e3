"""LogisticRegression without regularisation: ``C=np.inf`` and ``penalty=None``, as
scikit-learn takes them."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression as SkLogisticRegression

from dask_ps import LogisticRegression

KW = dict(client="local", checkpoint=None, random_state=0)


def noisy(n=400, seed=0):
    """Overlapping classes: the unpenalised optimum is finite."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X @ np.array([1.0, -2.0, 0.5, 0.0]) + 1.5 * rng.normal(size=n) > 0.3).astype(int)
    return X, y


def test_lbfgs_without_penalty_equals_scikit_learn():
    X, y = noisy()
    w = np.random.default_rng(1).integers(0, 3, X.shape[0])
    for sw in (None, w):
        sk = SkLogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(
            X, y, sample_weight=sw)
        ours = LogisticRegression(solver="lbfgs", C=np.inf, tol=1e-10, max_iter=1000,
                                  **KW).fit(X, y, sample_weight=sw)
        np.testing.assert_allclose(ours.coef_, sk.coef_, atol=1e-6)
        np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-6)
        none = LogisticRegression(solver="lbfgs", penalty=None, tol=1e-10, max_iter=1000,
                                  **KW).fit(X, y, sample_weight=sw)
        np.testing.assert_array_equal(none.coef_, ours.coef_)
    penalised = LogisticRegression(solver="lbfgs", C=0.01, **KW).fit(X, y)
    assert np.abs(penalised.coef_).sum() < 0.5 * np.abs(ours.coef_).sum()


@pytest.mark.parametrize("params", [dict(solver="ftrl"), dict(solver="sgd"),
                                    dict(solver="adagrad", step_on="server"),
                                    dict(solver="ftrl", penalty="l1"),
                                    dict(solver="lbfgs", penalty="l1", max_iter=300)],
                         ids=["ftrl", "sgd", "adagrad-server", "ftrl-l1", "owlqn"])
def test_infinite_C_is_no_penalty(params):
    """``C=np.inf`` with either penalty is ``penalty=None``, bit for bit; a finite C
    differs."""
    X, y = noisy()
    params = dict(dict(max_iter=5), **params)
    inf = LogisticRegression(C=np.inf, **params, **KW).fit(X, y)
    none = LogisticRegression(**dict(params, penalty=None), **KW).fit(X, y)
    np.testing.assert_array_equal(inf.coef_, none.coef_)
    assert np.isfinite(inf.coef_).all()
    some = LogisticRegression(C=0.001, **params, **KW).fit(X, y)
    assert not np.array_equal(some.coef_, inf.coef_)


@pytest.mark.parametrize("C", [0.0, -1.0, np.nan])
def test_C_must_be_positive(C):
    with pytest.raises(ValueError, match="C"):
        LogisticRegression(C=C, **KW).fit(*noisy(50))
