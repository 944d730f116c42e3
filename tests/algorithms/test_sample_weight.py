"""``sample_weight`` of LogisticRegression (every solver) and FactorizationMachineClassifier:
weights against repeated and dropped rows, the exact equivalences of the stochastic solvers,
validation, and weights on a cluster travelling with their rows."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.metrics import log_loss

from dask_ps import FactorizationMachineClassifier, LogisticRegression

KW = dict(client="local", checkpoint=None, random_state=0)
STOCHASTIC = [dict(solver="ftrl"), dict(solver="ftrl", penalty="l1"),
              dict(solver="sgd", step_on="server"), dict(solver="adagrad", batch_size=8),
              dict(solver="ftrl", early_stopping=True, validation_fraction=0.2)]


def small(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X @ rng.normal(size=5) + rng.normal(size=n) > 0).astype(int)
    return X, y, rng.integers(0, 4, n)


def imbalanced(n=2000):
    """About a quarter positives, weighted 4: the weighted fit is far from the unweighted."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 6))
    y = (X @ rng.normal(size=6) + 2.0 * rng.normal(size=n) > 2.0).astype(int)
    return X, y, np.where(y == 1, 4, 1)


def fits_equal(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert [h["loss"] for h in a.history_] == [h["loss"] for h in b.history_]


@pytest.mark.parametrize("penalty", ["l2", "l1"])
def test_lbfgs_integer_weights_equal_repeated_rows_and_scikit_learn(penalty):
    """The weighted objective, normalised by the total weight, is the repeated rows' own:
    L-BFGS-B (OWL-QN with l1) lands on the same coefficients, and on scikit-learn's."""
    X, y, w = small()
    est = dict(solver="lbfgs", penalty=penalty, C=0.5, tol=1e-10, max_iter=1000, **KW)
    weighted = LogisticRegression(**est).fit(X, y, sample_weight=w)
    repeated = LogisticRegression(**est).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, atol=1e-8)
    np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, atol=1e-8)
    sk = SkLogisticRegression(C=0.5, l1_ratio=1.0 if penalty == "l1" else 0.0,
                              solver="saga" if penalty == "l1" else "lbfgs", tol=1e-12,
                              max_iter=100_000).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(weighted.coef_, sk.coef_, atol=1e-4 if penalty == "l1"
                               else 1e-6)
    unweighted = LogisticRegression(**est).fit(X, y)
    assert np.abs(unweighted.coef_ - weighted.coef_).max() > 1e-2  # the weights mattered


def test_lbfgs_zero_weights_drop_rows():
    X, y, w = small()
    keep = w > 0
    assert not keep.all()
    est = dict(solver="lbfgs", tol=1e-10, max_iter=1000, **KW)
    weighted = LogisticRegression(**est).fit(X, y, sample_weight=keep.astype(float))
    dropped = LogisticRegression(**est).fit(X[keep], y[keep])
    np.testing.assert_allclose(weighted.coef_, dropped.coef_, atol=1e-8)
    np.testing.assert_allclose(weighted.intercept_, dropped.intercept_, atol=1e-8)


@pytest.mark.parametrize("params", STOCHASTIC, ids=lambda p: "-".join(map(str, p.values())))
def test_stochastic_unit_weights_are_no_weights_bit_for_bit(params):
    X, y, _ = small()
    y3 = np.arange(y.shape[0]) % 3
    for labels in (y, y3):
        a = LogisticRegression(max_iter=3, **params, **KW).fit(X, labels)
        b = LogisticRegression(max_iter=3, **params, **KW).fit(X, labels,
                                                              sample_weight=np.ones(300))
        fits_equal(a, b)
        a.partial_fit(X, labels)
        b.partial_fit(X, labels, sample_weight=[1.0] * 300)
        np.testing.assert_array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize("params", STOCHASTIC, ids=lambda p: "-".join(map(str, p.values())))
def test_stochastic_weights_scale_the_loss_not_the_penalty(params):
    """scikit-learn's objective ``sum_i w_i loss_i + penalty / C``: weights all 4 with C / 4
    is the unweighted objective with C, times 4. The solvers follow it exactly: the same
    steps, bit for bit (4 is a power of two: no rounding apart)."""
    X, y, _ = small()
    a = LogisticRegression(max_iter=3, C=0.5, **params, **KW).fit(X, y)
    b = LogisticRegression(max_iter=3, C=0.125, **params, **KW).fit(
        X, y, sample_weight=np.full(300, 4.0))
    fits_equal(a, b)
    c = LogisticRegression(max_iter=3, C=0.5, **params, **KW).fit(
        X, y, sample_weight=np.full(300, 4.0))  # the penalty relatively 4 times weaker
    assert not np.array_equal(a.coef_, c.coef_)


@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(solver="ftrl", max_iter=10, **KW),
    lambda: LogisticRegression(solver="sgd", max_iter=10, **KW),
    lambda: LogisticRegression(solver="adagrad", step_on="server", max_iter=10, **KW),
    lambda: FactorizationMachineClassifier(n_components=2, max_iter=10, **KW)],
    ids=["ftrl", "sgd", "adagrad-server", "fm"])
def test_stochastic_weights_fit_as_repeated_rows(make):
    """Stochastic solvers: integer weights and repeated rows take different steps (one
    scaled step against several), so their models agree in their loss, not their bits: the
    weighted log-loss of the weighted fit is within a fifth of the unweighted fit's gap of
    the repeated fit's (measured: ftrl 0.3868 / 0.3866 / 0.5118; FM 0.3855 / 0.3846 /
    0.5099)."""
    X, y, w = imbalanced()
    weighted = make().fit(X, y, sample_weight=w)
    repeated = make().fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    plain = make().fit(X, y)

    def loss(m):
        return log_loss(y, m.predict_proba(X), sample_weight=w)

    gap = loss(plain) - loss(repeated)
    assert gap > 0.05
    assert abs(loss(weighted) - loss(repeated)) < 0.2 * gap
    assert weighted.history_[-1]["loss"] == pytest.approx(repeated.history_[-1]["loss"],
                                                          abs=0.03)


def test_fm_unit_weights_are_no_weights_and_zero_weights_matter():
    X, y, w = small()
    Xs = sp.csr_matrix(X)
    kw = dict(n_components=3, max_iter=3, **KW)
    a = FactorizationMachineClassifier(**kw).fit(Xs, y)
    b = FactorizationMachineClassifier(**kw).fit(Xs, y, sample_weight=np.ones(300))
    fits_equal(a, b)
    np.testing.assert_array_equal(a.factors_, b.factors_)
    a.partial_fit(Xs, y)
    b.partial_fit(Xs, y, sample_weight=np.ones(300))
    np.testing.assert_array_equal(a.factors_, b.factors_)
    c = FactorizationMachineClassifier(**kw).fit(Xs, y, sample_weight=w)
    assert not np.array_equal(a.coef_, c.coef_)


@pytest.mark.parametrize("sample_weight, match", [
    (np.ones(299), "sample_weight has 299 values, but X has 300 rows"),
    (np.ones((300, 2)), r"sample_weight must be 1-D, of shape \(n_samples,\), got shape "
                        r"\(300, 2\)"),
    (np.r_[np.ones(299), -1.0], "sample_weight: -1.0 at row 299 is negative"),
    (np.r_[np.ones(299), np.nan], "sample_weight: nan at row 299 is not finite"),
    (np.r_[np.ones(299), np.inf], "sample_weight: inf at row 299 is not finite"),
    (np.zeros(300), "sample_weight: every weight is zero"),
])
@pytest.mark.parametrize("solver", ["ftrl", "lbfgs"])
def test_bad_weights_are_refused_naming_sample_weight(sample_weight, match, solver):
    X, y, _ = small()
    model = LogisticRegression(solver=solver, **KW)
    with pytest.raises(ValueError, match=match):
        model.fit(X, y, sample_weight=sample_weight)
    assert not hasattr(model, "coef_")
    with pytest.raises(ValueError, match=match):
        FactorizationMachineClassifier(**KW).fit(X, y, sample_weight=sample_weight)


def test_bad_dask_weights_are_refused_naming_sample_weight_and_row():
    X, y, _ = small()
    dX, dy = da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)
    model = LogisticRegression(**KW)

    def fails(sw, match):
        with pytest.raises(ValueError, match=match):
            model.fit(dX, dy, sample_weight=sw)
        assert not hasattr(model, "coef_")

    fails(da.ones(299, chunks=100), "sample_weight has 299 values, but X has 300 rows")
    fails(da.ones((300, 2), chunks=100), r"sample_weight must be 1-D.*\(300, 2\)")
    bad = np.ones(300)
    bad[234] = -2.0
    fails(da.from_array(bad, chunks=70), "sample_weight: -2.0 at row 234 is negative")
    bad[234] = np.inf
    fails(da.from_array(bad, chunks=70), "sample_weight: inf at row 234 is not finite")
    fails(da.zeros(300, chunks=100), "sample_weight: every weight is zero")
    unknown = da.from_array(np.ones(300), chunks=100)
    fails(unknown[unknown > 0], "sample_weight is a dask array of unknown chunk sizes")
    fails(np.ones(7), "sample_weight has 7 values, but X has 300 rows")
    fails(np.r_[np.ones(299), -1], "sample_weight: -1.0 at row 299 is negative")

    import dask.dataframe as dd
    import pandas as pd

    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abcde")), npartitions=3)
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    with pytest.raises(ValueError, match="sample_weight: X is a dask dataframe of 3 "
                                         "partitions, so sample_weight must be a dask series"):
        model.fit(frame, labels, sample_weight=da.ones(300, chunks=100))
    weights = dd.from_pandas(pd.Series(np.ones(300)), npartitions=3)
    model.fit(frame, labels, sample_weight=weights)  # a series of its partitions is taken
    assert np.isfinite(model.coef_).all()


def test_weighted_dask_fit_on_a_cluster_keeps_each_weight_with_its_row(client2):
    """Dask X, y and weights in chunks of other sizes (the weights are cut to X's rows, as
    y is) on two workers: "lbfgs" reaches the in-memory weighted fit and the repeated rows'
    fit (a weight beside another row would move it); a stochastic fit of them scores as the
    in-memory one (a dask fit's partitions go where Dask computed them: not bit for bit),
    and in-memory unit weights scattered to the workers are no weights, bit for bit."""
    X, y, w = small(600, seed=3)
    w = w.astype(float)
    dX, dy = da.from_array(X, chunks=(150, 5)), da.from_array(y, chunks=200)
    dw = da.from_array(w, chunks=97)
    est = dict(solver="lbfgs", tol=1e-10, max_iter=1000, client=client2, checkpoint=None)
    on_cluster = LogisticRegression(**est).fit(dX, dy, sample_weight=dw)
    local = LogisticRegression(**dict(est, client="local")).fit(X, y, sample_weight=w)
    repeated = LogisticRegression(**est).fit(np.repeat(X, w.astype(int), axis=0),
                                             np.repeat(y, w.astype(int)))
    np.testing.assert_allclose(on_cluster.coef_, local.coef_, atol=1e-7)
    np.testing.assert_allclose(on_cluster.coef_, repeated.coef_, atol=1e-7)
    X, y, w = imbalanced()  # stochastic: weights that move the model far
    dX, dy = da.from_array(X, chunks=(500, 6)), da.from_array(y, chunks=400)
    est = dict(solver="ftrl", max_iter=5, random_state=0, client=client2, checkpoint=None)
    weighted = LogisticRegression(**est).fit(dX, dy, sample_weight=da.from_array(w, chunks=300))
    local = LogisticRegression(**dict(est, client="local")).fit(X, y, sample_weight=w)
    plain = LogisticRegression(**est).fit(X, y)

    def loss(m):
        return log_loss(y, m.predict_proba(X), sample_weight=w)

    gap = loss(plain) - loss(local)
    assert gap > 0.05
    assert abs(loss(weighted) - loss(local)) < 0.2 * gap
    fits_equal(plain, LogisticRegression(**est).fit(X, y, sample_weight=np.ones(2000)))
