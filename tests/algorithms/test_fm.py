"""Factorization machines: the kernel against a slow twin, the margins against the pairwise
sum, scikit-learn's checks, planted interactions that logistic regression cannot see, a
LocalCluster, bad input."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from dask_ps import DivergenceError, FactorizationMachineClassifier, LogisticRegression
from dask_ps.algorithms._fm_kernels import fm_steps
from dask_ps.algorithms._weights import expected_failed_checks
from dask_ps.algorithms.fm import fm_margins
from dask_ps.io import HashingEncoder, PlantedCTR
from dask_ps.kernels.optim import ADAGRAD_RULE, SGD_RULE


def _ftrl_twin(w, z, n, j, g, alpha, beta, l1, l2):
    sigma = (np.sqrt(n[j] + g * g) - np.sqrt(n[j])) / alpha
    z[j] += g - sigma * w[j]
    n[j] += g * g
    w[j] = 0.0 if abs(z[j]) <= l1 else -(z[j] - np.sign(z[j]) * l1) / (
        (beta + np.sqrt(n[j])) / alpha + l2)


def fm_steps_twin(X, y, order, hyper, fit_intercept, w, z, n, adagrad, lr, reg, V, A):
    """Slow twin of fm_steps: the margin as the explicit sum over pairs."""
    m = w.shape[0] - 1
    loss = 0.0
    for i in order:
        cols, vals = X.indices[X.indptr[i]:X.indptr[i + 1]], X.data[X.indptr[i]:X.indptr[i + 1]]
        t = w[m] + sum(w[j] * x for j, x in zip(cols, vals))
        t += sum(V[cols[a]] @ V[cols[b]] * vals[a] * vals[b]
                 for a in range(len(cols)) for b in range(a + 1, len(cols)))
        loss += np.log1p(np.exp(t)) - y[i] * t
        r = 1 / (1 + np.exp(-t)) - y[i]
        s = V[cols].T @ vals
        for j, x in zip(cols, vals):
            _ftrl_twin(w, z, n, j, r * x, *hyper)
            g = r * x * (s - V[j] * x) + reg * V[j]
            if adagrad:
                A[j] += g * g
                V[j] -= lr * g / (np.sqrt(A[j]) + 1e-10)
            else:
                V[j] -= lr * g
        if fit_intercept:
            _ftrl_twin(w, z, n, m, r, *hyper)
    return loss


@pytest.mark.parametrize("adagrad, fit_intercept", [(True, True), (False, False)])
def test_steps_match_the_twin(adagrad, fit_intercept):
    rng = np.random.default_rng(3)
    X = sp.random(40, 12, density=0.3, random_state=4, format="csr")
    X.sort_indices()
    y = rng.integers(0, 2, 40).astype(float)
    hyper = np.array([0.1, 1.0, 0.01, 0.1])
    V0 = rng.normal(0, 0.1, (12, 3))
    order = rng.permutation(40)
    out = []
    for kernel in (True, False):
        w, z, n = np.zeros((13, 1)), np.zeros((13, 1)), np.zeros((13, 1))
        V, A = V0.copy(), np.zeros((12, 3))
        if kernel:
            loss = fm_steps(X.indptr, X.indices, X.data, y[:, None], np.zeros(0), order, hyper,
                            fit_intercept, w, z, n, ADAGRAD_RULE if adagrad else SGD_RULE,
                            np.array([0.05, 1e-10]) if adagrad else np.array([0.05]), 1e-3,
                            V, A, np.empty(3))
        else:
            loss = fm_steps_twin(X, y, order, hyper, fit_intercept, w[:, 0], z[:, 0], n[:, 0],
                                 adagrad, 0.05, 1e-3, V, A)
        out.append((loss, w, z, n, V, A))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert not np.allclose(out[0][4], V0)  # the factors moved


def test_margins_are_the_pairwise_sum():
    rng = np.random.default_rng(0)
    X = sp.random(30, 9, density=0.4, random_state=1, format="csr")
    w, V, b = rng.normal(size=9), rng.normal(size=(9, 4)), 0.3
    Xd = X.toarray()
    want = b + Xd @ w + np.array([sum(V[j] @ V[q] * x[j] * x[q] for j in range(9)
                                      for q in range(j + 1, 9)) for x in Xd])
    np.testing.assert_allclose(fm_margins(X, w, b, V), want, rtol=1e-12)
    np.testing.assert_allclose(fm_margins(Xd, w, b, V), want, rtol=1e-12)


@parametrize_with_checks([FactorizationMachineClassifier(client="local", max_iter=20,
                                                         n_components=2, random_state=0)],
                         expected_failed_checks=expected_failed_checks)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def planted_data(n_train=30_000, n_test=10_000, seed=1):
    """Click logs whose labels come from planted pairwise interactions (an FM's model)."""
    planted = PlantedCTR(n_categorical=8, n_numeric=2, max_cardinality=200, n_pairs=6,
                         interaction_scale=2.0, linear_scale=0.2, seed=seed)
    enc = HashingEncoder(numeric=tuple(planted.numeric_columns),
                         categorical=tuple(planted.categorical_columns), n_features=2**14)
    tr, te = planted.chunk(0, n_train), planted.chunk(1, n_test)
    return (enc.transform(tr), tr["click"].to_numpy(), enc.transform(te),
            te["click"].to_numpy())


@pytest.fixture(scope="module")
def planted():
    return planted_data()


def _scores(est, X, y):
    p = est.predict_proba(X)[:, 1]
    return log_loss(y, p), roc_auc_score(y, p)


@pytest.mark.timeout(300)
def test_fm_beats_logistic_regression_on_planted_interactions(planted):
    Xtr, ytr, Xte, yte = planted
    lr = LogisticRegression(max_iter=5, random_state=0, checkpoint=None).fit(Xtr, ytr)
    fm = FactorizationMachineClassifier(n_components=4, max_iter=5, random_state=0,
                                        checkpoint=None).fit(Xtr, ytr)
    (lr_loss, lr_auc), (fm_loss, fm_auc) = _scores(lr, Xte, yte), _scores(fm, Xte, yte)
    assert fm_loss < 0.9 * lr_loss and fm_auc > lr_auc + 0.1
    assert fm.factors_.shape == (2**14, 4) and np.isfinite(fm.factors_).all()
    assert fm.coef_.shape == (1, 2**14) and len(fm.history_) == 5
    assert fm.history_[-1]["loss"] < fm.history_[0]["loss"]
    # the same seed gives the same model
    again = FactorizationMachineClassifier(n_components=4, max_iter=5, random_state=0,
                                           checkpoint=None).fit(Xtr, ytr)
    np.testing.assert_array_equal(again.factors_, fm.factors_)


@pytest.mark.timeout(300)
def test_on_a_local_cluster_with_dask_input(planted, client2):
    import dask.array as da

    Xtr, ytr, Xte, yte = planted
    X = da.from_array(Xtr, chunks=(10_000, -1), asarray=False)
    y = da.from_array(ytr, chunks=10_000)
    # few values per column: larger factor steps than the default pay off here
    fm = FactorizationMachineClassifier(n_components=4, max_iter=4, factor_learning_rate=0.05,
                                        random_state=0).fit(X, y)
    loss, auc = _scores(fm, Xte, yte)
    assert auc > 0.85 and loss < 0.5
    lazy = fm.predict_proba(da.from_array(Xte, chunks=(5_000, -1), asarray=False))
    np.testing.assert_allclose(lazy.compute(), fm.predict_proba(Xte), rtol=1e-12)


def test_bad_input_is_refused():
    X = sp.random(60, 5, density=0.5, random_state=0, format="csr")
    with pytest.raises(ValueError, match="Only binary classification is supported.*3 classes"):
        FactorizationMachineClassifier(client="local").fit(X, np.arange(60) % 3)
    # the estimator's own name (was "LogisticRegression needs samples ...")
    with pytest.raises(ValueError, match="^FactorizationMachineClassifier needs samples of "
                                         "at least 2 classes.*only one class"):
        FactorizationMachineClassifier(client="local").fit(X, np.zeros(60))
    bad = X.copy()
    bad.data[3] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        FactorizationMachineClassifier(client="local").fit(bad, np.arange(60) % 2)
    with pytest.raises(ValueError, match="'n_components' parameter"):
        FactorizationMachineClassifier(n_components=0).fit(X, np.arange(60) % 2)
    with pytest.raises(ValueError, match="factor_solver"):
        FactorizationMachineClassifier(factor_solver="adam").fit(X, np.arange(60) % 2)
    fm = FactorizationMachineClassifier(client="local", max_iter=1).fit(X, np.arange(60) % 2)
    with pytest.raises(ValueError, match="features"):
        fm.predict(X[:, :4])
    # fitted arrays assigned by hand that do not make one model: named, not a NumPy error
    want = fm.decision_function(X)
    dense = fm.factors_
    for factors, what in [(sp.csc_matrix(dense), r"coef_ \(dense, shape \(1, 5\)\) and "
                                                 r"factors_ \(sparse, shape \(5, 8\)\)"),
                          (dense[:4], r"coef_ \(dense, shape \(1, 5\)\) and "
                                      r"factors_ \(dense, shape \(4, 8\)\)")]:
        fm.factors_ = factors
        with pytest.raises(ValueError, match="^FactorizationMachineClassifier: " + what):
            fm.predict(X)
    fm.factors_ = dense
    np.testing.assert_array_equal(fm.decision_function(X), want)


def test_a_dense_model_that_cannot_fit_is_refused_and_a_wide_one_is_keyed():
    """Dense coef_ and factors_ too large for half the memory free (below KEYED_FEATURES
    columns, an n_components in the hundreds of thousands) are refused before training,
    naming the sizes and the fix. Wide keys (2^40 columns), once refused for asking 8 TiB, give a
    keyed model: sparse coef_ and factors_ of the keys touched."""
    from sklearn.exceptions import NotFittedError

    rng = np.random.default_rng(0)
    X = sp.csr_matrix((np.ones(400), (np.repeat(np.arange(200), 2),
                                      rng.integers(0, 2**20 - 1, 400))), shape=(200, 2**20 - 1))
    est = FactorizationMachineClassifier(n_components=200_000, max_iter=1, client="local")
    with pytest.raises(MemoryError, match=r"1048575 features x \(n_components=200000 \+ 1\) "
                                          r"take 1562\.5 GiB .*smaller n_components"):
        est.fit(X, np.arange(200) % 2)
    with pytest.raises(NotFittedError):
        est.predict(X[:2])
    keys = rng.integers(0, 2**40, 400)
    wide = sp.csr_matrix((np.ones(400), (np.repeat(np.arange(200), 2), keys)),
                         shape=(200, 2**40))
    fm = FactorizationMachineClassifier(max_iter=1, client="local", checkpoint=None).fit(
        wide, np.arange(200) % 2)
    assert sp.isspmatrix_csr(fm.coef_) and fm.coef_.shape == (1, 2**40)
    assert sp.isspmatrix_csc(fm.factors_) and fm.factors_.shape == (2**40, 8)
    assert np.isin(fm.factors_.indices, keys).all() and fm.factors_.nnz == 8 * 400


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_a_k_whose_factor_table_cannot_start_is_refused(where, request):
    """A hashed table starts at 1024 rows per shard whatever the width: n_components=10**7 on 20
    features asked 153 GiB of factor rows and failed with numpy's own error. Refused before
    training, naming k, the table and the memory it exceeds, here and on a worker."""
    from sklearn.exceptions import NotFittedError

    client = "local" if where == "local" else request.getfixturevalue("client2")
    X = sp.random(60, 20, density=0.3, format="csr", random_state=0)
    est = FactorizationMachineClassifier(n_components=10**7, max_iter=1, client=client,
                                         checkpoint=None)
    memory = "the .* GiB available" if where == "local" else "a worker's .* memory limit"
    with pytest.raises(MemoryError, match=rf"n_components=10000000 makes the factor table "
                                          rf"152\.6 GiB per shard .*more than half of "
                                          rf"{memory}; use a smaller n_components"):
        est.fit(X, np.arange(60) % 2)
    with pytest.raises(NotFittedError):
        est.predict(X[:2])


def test_divergence_from_a_large_init_std_says_to_lower_it():
    X = sp.random(300, 20, density=0.3, format="csr", random_state=0)
    est = FactorizationMachineClassifier(init_std=1e20, max_iter=3, client="local",
                                         checkpoint=None)
    with pytest.raises(DivergenceError, match=r"; try a smaller init_std \(now 1e\+20\), "
                                              r"learning_rate \(now 0\.1\) or "
                                              r"factor_learning_rate \(now 0\.02\)$"):
        est.fit(X, np.arange(300) % 2)


def test_margins_of_huge_finite_values_are_never_nan():
    """Rendle's identity 1/2 sum_f [(sum v x)^2 - sum v^2 x^2] squared 1e300 into inf - inf:
    NaN margins. Such rows are computed again scaled by their largest |x|: one non-zero has
    no pair (the linear part alone), a margin beyond float64 is ±inf, an undefined one (the
    linear part +inf, the pairwise -inf) an error naming the row; other rows unchanged."""
    rng = np.random.default_rng(5)
    w, V, b = rng.normal(size=6), rng.normal(size=(6, 3)), 0.3
    X = rng.normal(size=(6, 6))
    want = fm_margins(X, w, b, V)
    X[1] = 0.0
    X[1, 2] = -1e300                      # one non-zero: no pair
    X[2] = 0.0
    X[2, [1, 3]] = 1e300, 1e-5            # a finite pairwise term, beyond the squares
    X[3] = 0.0
    X[3, [0, 4]] = 1e200, -1e200          # the pairwise term beyond float64
    got = fm_margins(sp.csr_matrix(X), w, b, V)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got[[0, 4, 5]], want[[0, 4, 5]], rtol=1e-12)
    assert got[1] == b - 1e300 * w[2]
    np.testing.assert_allclose(got[2], 1e300 * w[1] + 1e295 * (V[1] @ V[3]), rtol=1e-9)
    assert got[3] == -np.inf * np.sign(V[0] @ V[4])
    np.testing.assert_array_equal(fm_margins(X, w, b, V), got)  # dense X alike
    Vu, wu = V.copy(), w.copy()
    Vu[4], wu[[0, 4]] = V[0], (2.0, -1.0)  # <v_0, v_4> > 0
    X[3, [0, 4]] = 1.5e308, -1e308        # linear 3e308 + 1e308: +inf; pairwise -inf
    with pytest.raises(ValueError, match=r"margin of row 3 of X is undefined: its linear "
                                         r"part and its pairwise part overflow .*1\.5e\+308"):
        fm_margins(X, wu, b, Vu)


def test_predictions_on_huge_finite_values_are_probabilities(client2):
    """A fitted FM gave predict_proba [nan, nan] (and predict class 0) for rows holding 1e300,
    where LogisticRegression gives 0 or 1: now every method gives finite probabilities,
    with dense, sparse and dask input (on a LocalCluster, an undefined row named by its row
    in the whole X), and a fit on such rows says to scale the features."""
    import dask.array as da

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    fm = FactorizationMachineClassifier(n_components=3, max_iter=3, random_state=0,
                                        checkpoint=None).fit(X, y)
    X2 = X[:40].copy()
    X2[:10, 0] = 1e300
    X2[10:20] = 0.0
    X2[10:20, 2] = -1e300
    for Xin in (X2, sp.csr_matrix(X2)):
        p = fm.predict_proba(Xin)
        assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1.0)
        assert set(np.unique(p[:20])) <= {0.0, 1.0}
        np.testing.assert_array_equal(fm.predict(Xin), fm.classes_[p.argmax(axis=1)])
        assert 0.0 <= fm.score(Xin, y[:40]) <= 1.0
    np.testing.assert_array_equal(p[20:], fm.predict_proba(X[20:40]))
    lazy = fm.predict_proba(da.from_array(X2, chunks=(15, -1)))
    np.testing.assert_array_equal(lazy.compute(), p)
    # an undefined margin: the linear part +inf, the pairwise one -inf
    fm.coef_ = np.array([[2.0, 2.0, 0.0, 0.0, 0.0]])
    fm.factors_ = fm.factors_.copy()
    fm.factors_[1] = -fm.factors_[0]
    X2[33, [0, 1]] = 1e308
    with pytest.raises(ValueError, match="row 33 of X is undefined"):
        fm.predict_proba(da.from_array(X2, chunks=(15, -1))).compute()
    Xb = X.copy()
    Xb[:5, 0] = 1e300
    with pytest.raises(DivergenceError, match=r"the rows hold \|x\| up to 1e\+300.*scale the "
                                              r"features"):
        FactorizationMachineClassifier(n_components=3, max_iter=3, random_state=0,
                                       checkpoint=None).fit(Xb, y)
