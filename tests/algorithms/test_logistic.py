"""LogisticRegression on real data, against scikit-learn, and under its estimator checks."""

import contextlib
import re

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import compute_without_large_graph
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.utils.estimator_checks import parametrize_with_checks

import dask_ps
from dask_ps.algorithms import FactorizationMachineClassifier, LogisticRegression
from dask_ps.algorithms._weights import expected_failed_checks

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def a9a(data):
    X, y = load_svmlight_file(str(data / "lr_a9a" / "a9a"), n_features=123)
    Xt, yt = load_svmlight_file(str(data / "lr_a9a" / "a9a.t"), n_features=123)
    return X, y, Xt, yt


@pytest.mark.parametrize("solver, kwargs", [
    ("ftrl", dict(max_iter=5)),
    ("adagrad", dict(max_iter=5)),
    ("sgd", dict(max_iter=5)),
    ("lbfgs", dict(max_iter=500)),
])
def test_a9a_quality_each_solver(a9a, solver, kwargs):
    X, y, Xt, yt = a9a
    model = LogisticRegression(solver=solver, client="local", random_state=0, **kwargs)
    model.fit(X, y)
    auc = roc_auc_score(yt, model.predict_proba(Xt)[:, 1])
    acc = accuracy_score(yt, model.predict(Xt))
    assert auc >= 0.900 and acc >= 0.848, (auc, acc)
    assert len(model.history_) > 0 and np.isfinite([h["loss"] for h in model.history_]).all()


def l2_logistic_objective(X, y, w, b, C):
    """scikit-learn's binary objective ``||w||^2 / 2 + C sum log(1 + exp(-y (x w + b)))``
    (intercept not penalised), its gradient in ``(w, b)`` and the smallest eigenvalue of its
    Hessian, in float64."""
    import scipy.sparse as sp

    s = np.where(y > 0, 1.0, -1.0)
    Xb = sp.hstack([sp.csr_matrix(X), np.ones((X.shape[0], 1))]).tocsr()
    theta = np.r_[np.ravel(w), np.ravel(b)]
    z = s * (Xb @ theta)
    f = 0.5 * theta[:-1] @ theta[:-1] + C * np.logaddexp(0.0, -z).sum()
    g = Xb.T @ (-s * C / (1.0 + np.exp(z)))
    g[:-1] += theta[:-1]
    p = 1.0 / (1.0 + np.exp(-z))
    H = C * (Xb.T @ sp.diags(p * (1 - p)) @ Xb).toarray()
    H[np.arange(theta.size - 1), np.arange(theta.size - 1)] += 1.0
    return f, g, np.linalg.eigvalsh(H)[0]


def check_lbfgs_equals_scikit_learn(X, y, client):
    """Compared by objective, then by coefficients within what the conditioning allows.

    Two solvers stopped by gradient tolerances agree on the objective to ~1e-12 relative but
    on the coefficients only to ``|grad| / mu`` (mu: the smallest Hessian eigenvalue, the
    objective's strong convexity near the optimum): on a9a mu ~0.25 (one-hot groups nearly
    collinear with the intercept) against a largest eigenvalue ~2.7e4, so a gradient norm of
    2e-3 where scikit-learn stops allows coefficients ~1e-2 apart (1.35e-4 was seen).
    """
    sk = SkLogisticRegression(C=1.0, max_iter=10000, tol=1e-12).fit(X, y)
    ours = LogisticRegression(solver="lbfgs", C=1.0, max_iter=2000, tol=1e-10,
                              client=client).fit(X, y)
    f_sk, g_sk, mu = l2_logistic_objective(X, y, sk.coef_, sk.intercept_, 1.0)
    f_ours, g_ours, _ = l2_logistic_objective(X, y, ours.coef_, ours.intercept_, 1.0)
    # at least as low as scikit-learn's optimum (measured: 4.7e-8 lower of 10528.57)
    assert f_ours <= f_sk * (1 + 1e-10), (f_ours, f_sk)
    # strong convexity: |theta - theta*| <= |grad| / mu for each, so they are at most the sum
    # apart (x2 for the change of curvature between the two points)
    bound = 2.0 * (np.linalg.norm(g_sk) + np.linalg.norm(g_ours)) / mu
    assert bound < 0.05, bound  # both really are near the optimum
    gap = np.linalg.norm(np.r_[ours.coef_.ravel() - sk.coef_.ravel(),
                               ours.intercept_ - sk.intercept_])
    assert gap <= bound, (gap, bound)


def test_lbfgs_equals_scikit_learn(a9a):
    check_lbfgs_equals_scikit_learn(*a9a[:2], "local")


@pytest.mark.slow
def test_lbfgs_equals_scikit_learn_on_two_workers(a9a, client2):
    """Two partitions, gradients summed by two shards: the same optimum (~1 min here)."""
    check_lbfgs_equals_scikit_learn(*a9a[:2], client2)


@pytest.mark.slow
def test_lbfgs_is_reproducible_bit_for_bit_on_threads_of_one_worker(client1x4):
    """4 partitions on 1 worker x 4 threads: the partitions' gradients are summed in task
    order, not in the order the threads finish, so three fits give the same model (before,
    the same fit took 377, 421 or 461 iterations on a9a)."""
    import warnings

    import dask.array as da

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20)) * 10.0 ** rng.uniform(-1, 1, 20)
    y = (X @ rng.normal(size=20) + 3 * rng.normal(size=2000) > 0).astype(int)
    Xd, yd = da.from_array(X, chunks=(500, 20)), da.from_array(y, chunks=500)
    fits = []
    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m = LogisticRegression(solver="lbfgs", C=10.0, max_iter=40, tol=1e-10,
                                   client=client1x4).fit(Xd, yd)
        fits.append((int(np.ravel(m.n_iter_)[0]), m.coef_.tobytes(), m.intercept_.tobytes()))
    assert fits[1] == fits[0] and fits[2] == fits[0]


def test_lbfgs_on_one_and_four_partitions_agrees_within_the_documented_tolerance():
    """LogisticRegression's Notes: the same partitioning gives the same model bit for bit;
    1 and 4 partitions sum the gradients in another order, stop where both scaled projected
    gradients are below ``tol``, and differ by at most ``4 sqrt(d + 1) tol C n / mu``. In
    one process, 4 partitions through the functional core (the estimator makes one
    partition without a cluster)."""
    from dask_ps import PSModel, partition
    from dask_ps.algorithms._logistic_data import encode_part
    from dask_ps.algorithms.logistic import train

    rng = np.random.default_rng(0)
    n, d, C, tol = 2000, 20, 10.0, 1e-8
    X = rng.normal(size=(n, d)) * 10.0 ** rng.uniform(-1, 1, d)
    y = np.where(X @ rng.normal(size=d) + 3 * rng.normal(size=n) > 0, 1.0, -1.0)

    def fit(k):
        parts = partition((X, y), client="local", n_partitions=k).map(
            encode_part, np.array([-1.0, 1.0]), 1)
        assert len(parts) == k
        with PSModel("local") as model:
            W, _, nit, _ = train(model, parts, n_features=d, n_outputs=1, solver="lbfgs",
                                 C=C, max_iter=1000, tol=tol)
        return W[:-1, 0], W[-1:, 0], nit

    one, four, again = fit(1), fit(4), fit(4)
    assert all(np.array_equal(a, b) for a, b in zip(four, again))  # bit for bit
    assert not np.array_equal(one[0], four[0])  # another summation order: not bit for bit
    gradients, mus = [], []
    for w, b, _ in (one, four):
        _, g, mu = l2_logistic_objective(X, y, w, b, C)
        # L-BFGS-B's stop on the objective divided by C n (float32 rounding below tol / 100)
        assert np.abs(g).max() / (C * n) <= tol * 1.01, np.abs(g).max() / (C * n)
        gradients.append(np.linalg.norm(g))
        mus.append(mu)
    gap = np.linalg.norm(np.r_[one[0] - four[0], one[1] - four[1]])
    bound = 4 * np.sqrt(d + 1) * tol * C * n / min(mus)
    assert gap <= 2 * sum(gradients) / min(mus) <= bound, (gap, gradients, mus, bound)


def test_ftrl_on_a_cluster(a9a, client2):
    X, y, Xt, yt = a9a
    model = LogisticRegression(solver="ftrl", max_iter=5, client=client2, random_state=0)
    model.fit(X, y)
    assert roc_auc_score(yt, model.predict_proba(Xt)[:, 1]) >= 0.900


@pytest.mark.parametrize("kwargs", [
    dict(solver="ftrl", max_iter=10),
    dict(solver="adagrad", max_iter=10, C=100.0),
    dict(solver="sgd", max_iter=20, C=100.0),
    dict(solver="lbfgs", max_iter=200),
])
def test_agaricus_is_separated(data, kwargs):
    X, y = load_svmlight_file(str(data / "lr_agaricus" / "agaricus.txt.train"), n_features=127)
    Xt, yt = load_svmlight_file(str(data / "lr_agaricus" / "agaricus.txt.test"), n_features=127)
    model = LogisticRegression(client="local", random_state=0, **kwargs).fit(X, y)
    assert accuracy_score(yt, model.predict(Xt)) == 1.0


def test_single_class_and_bad_parameters():
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="only one class"):
        LogisticRegression(client="local").fit(X, np.ones(20))
    with pytest.raises(ValueError, match="'solver' parameter of LogisticRegression must be"):
        LogisticRegression(solver="newton", client="local").fit(X, np.arange(20) % 2)
    with pytest.raises(ValueError, match="penalty='l1' needs solver='ftrl' or 'lbfgs'"):
        LogisticRegression(solver="sgd", penalty="l1", client="local").fit(X, np.arange(20) % 2)


def test_continuous_labels_are_a_data_error_naming_one():
    """Labels 0/0.7 (a click probability) gave scikit-learn's bare "Unknown label type:
    continuous", which the command line took for a bug; now a DataError names a value (still
    a ValueError whose message says 'continuous', as scikit-learn's checks expect) and the
    first row holding it, in the whole y (was none: a dask y's rows could not be found)."""
    import dask.array as da

    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(dask_ps.DataError, match=r"^y holds 0\.7 \(first at y\[1\]\), not a "
                                                r"class: .* continuous"):
        LogisticRegression(client="local").fit(X, np.tile([0.0, 0.7], 10))
    soft = np.tile([0.0, 1.0], 10)
    soft[[13, 17]] = 0.5
    for est in (LogisticRegression(client="local"),
                dask_ps.FactorizationMachineClassifier(client="local")):
        with pytest.raises(dask_ps.DataError, match=r"^y holds 0\.5 \(first at y\[13\]\), "
                                                    r"not a class"):
            est.fit(da.from_array(X, chunks=(5, 3)), da.from_array(soft, chunks=5))
    model = LogisticRegression(client="local", max_iter=2).fit(X, np.tile([0.0, 1.0], 10))
    assert model.classes_.tolist() == [0.0, 1.0]  # whole numbers written as floats are classes


def test_classes_keep_the_dtype_of_y():
    """scikit-learn's classifiers keep the labels' dtype in ``classes_`` and ``predict``;
    LR and FM made every numeric label a float: y of bools gave classes_ [0., 1.] and
    predictions 0./1. that no longer compared equal to y's labels by dtype."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.tile([True, False], 20)
    for est in (LogisticRegression(client="local", max_iter=2),
                dask_ps.FactorizationMachineClassifier(client="local", max_iter=2)):
        for labels in (y, y.astype(np.int8), y.astype(np.int64), y.astype(np.float32)):
            model = est.fit(X, labels)
            assert model.classes_.dtype == labels.dtype, (est, labels.dtype)
            assert model.predict(X[:3]).dtype == labels.dtype, (est, labels.dtype)


def test_pydata_sparse_that_is_not_a_2d_matrix_of_zeros_is_refused_naming_x():
    """A 3-D or NaN-filled pydata ``sparse`` array failed in the sparse library's words
    ("CSR must be 1D or 2D", "x.fill_value=np.float64(nan) but should be in [0]")."""
    import sparse

    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 10)
    cube = sparse.COO.from_numpy(rng.random((20, 3, 2)))
    nan_filled = sparse.COO.from_numpy(rng.random((20, 3)), fill_value=np.nan)
    for est in (LogisticRegression(client="local", max_iter=2),
                dask_ps.FactorizationMachineClassifier(client="local", max_iter=2),
                dask_ps.GBDTClassifier(client="local", n_estimators=2)):
        with pytest.raises(ValueError, match=r"^X is a 3-D sparse array of shape \(20, 3, 2\)"):
            est.fit(cube, y)
        with pytest.raises(ValueError, match=r"^X is a sparse array whose fill value is nan"):
            est.fit(nan_filled, y)
        est.fit(cube[:, :, 0], y)
        with pytest.raises(ValueError, match=r"^X is a sparse array whose fill value is nan"):
            est.predict(nan_filled)


def test_labels_of_kinds_that_do_not_compare_are_refused_naming_y():
    """An object y mixing numbers and strings failed with numpy's "'<' not supported
    between instances of 'int' and 'str'", naming nothing."""
    X = np.random.default_rng(0).normal(size=(6, 2))
    y = np.array([1, "a", 1, "a", 1, "a"], dtype=object)
    said = r"^y mixes labels that do not compare \(1 and 'a'\): labels must be all numbers"
    for est in (LogisticRegression(client="local"), dask_ps.GBDTClassifier(client="local")):
        with pytest.raises(dask_ps.DataError, match=said):
            est.fit(X, y)
    import dask.array as da

    halves = np.array([1, 1, 1, "a", "a", "a"], dtype=object)  # each chunk of one kind
    with pytest.raises(dask_ps.DataError, match=said):
        LogisticRegression(client="local").fit(da.from_array(X, chunks=(3, 2)),
                                                da.from_array(halves, chunks=3))


def test_many_classes_fit_without_a_warning_that_y_may_be_numbers():
    """The labels check ran scikit-learn's on the distinct labels, which are all unique:
    more than 20 classes warned "The number of unique classes is greater than 50% of the
    number of samples" whatever the rows (an error under warnings as errors)."""
    X = np.random.default_rng(0).normal(size=(1000, 3))
    model = LogisticRegression(client="local", max_iter=1).fit(X, np.arange(1000) % 25)
    assert model.classes_.shape == (25,)


@parametrize_with_checks([LogisticRegression(client="local", max_iter=20, random_state=0),
                          LogisticRegression(client="local", solver="lbfgs", random_state=0,
                                             max_iter=1000, tol=1e-4)],
                         expected_failed_checks=expected_failed_checks)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_reuters_money_fx(data):
    X, y = load_svmlight_file(str(data / "lr_reuters_moneyfx" / "reuters.trn.bz2"),
                              n_features=8315)
    Xt, yt = load_svmlight_file(str(data / "lr_reuters_moneyfx" / "reuters.tst.bz2"),
                                n_features=8315)
    for solver in ("adagrad", "lbfgs"):
        model = LogisticRegression(solver=solver, client="local", random_state=0,
                                   max_iter=10 if solver != "lbfgs" else 300).fit(X, y)
        assert roc_auc_score(yt, model.predict_proba(Xt)[:, 1]) >= 0.985, solver


def test_dask_array_partitions_train_where_they_live(data, client2):
    from dask_ps.io import read_libsvm

    X, y = read_libsvm(str(data / "lr_a9a" / "a9a"), n_features=123, blocksize="512KiB")
    Xt, yt = read_libsvm(str(data / "lr_a9a" / "a9a.t"), n_features=123)
    assert X.numblocks[0] > 2  # several chunks per worker: threads share a snapshot
    model = LogisticRegression(solver="ftrl", max_iter=5, client=client2, random_state=0)
    model.fit(X, y)
    proba, pred = model.predict_proba(Xt), model.predict(Xt)
    assert hasattr(proba, "dask") and hasattr(pred, "dask")
    proba, pred, yt = client2.compute([proba, pred, yt], sync=True)
    assert roc_auc_score(yt, proba[:, 1]) >= 0.900
    assert accuracy_score(yt, pred) >= 0.848
    assert model.n_features_in_ == 123 and model.classes_.tolist() == [-1.0, 1.0]


def test_dask_dataframe_multiclass(client2):
    import dask.dataframe as dd
    import pandas as pd

    rng = np.random.default_rng(0)
    centers = np.array([[3, 0], [0, 3], [-3, -3]])
    labels = rng.integers(0, 3, 600)
    pdf = pd.DataFrame(centers[labels] + rng.normal(size=(600, 2)), columns=["a", "b"])
    ddf = dd.from_pandas(pdf, npartitions=3)
    y = dd.from_pandas(pd.Series(np.array(["x", "y", "z"])[labels]), npartitions=3)
    model = LogisticRegression(solver="adagrad", max_iter=10, client=client2, random_state=0)
    model.fit(ddf, y)
    pred = model.predict(pdf.to_numpy())
    assert model.classes_.tolist() == ["x", "y", "z"]
    assert (pred == np.array(["x", "y", "z"])[labels]).mean() > 0.95


def test_predicting_a_dask_array_sends_large_weights_once_not_in_the_graph(client2):
    """A model of 2^21 features (16 MiB of weights) predicts a dask array without Dask's
    "Sending large graph" warning: the weights go to the workers once, as a future, and the
    result equals the in-memory prediction."""
    import dask.array as da
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    cols = np.sort(rng.choice(2**21, size=(400, 40)), axis=1)  # ~40 distinct per row
    X = sp.csr_matrix((np.ones(cols.size), cols.ravel(), np.arange(0, cols.size + 1, 40)),
                      shape=(400, 2**21))
    X.sum_duplicates()
    y = rng.integers(0, 2, 400)
    model = LogisticRegression(max_iter=2, client=client2, random_state=0).fit(X, y)
    dX = da.from_array(X, chunks=(100, X.shape[1]), asarray=False)
    got = compute_without_large_graph(model.decision_function(dX))
    np.testing.assert_allclose(got, model.decision_function(X), rtol=1e-12)


def test_owlqn_reaches_the_difacto_l1_optimum(data):
    """rcv1 sample, sum of log-losses + 0.1 ||w||_1, no bias: loss 15.884923 with 47 weights."""
    X, y = load_svmlight_file(str(data / "lr_rcv1_sample100" / "rcv1_train.binary.head100"))
    model = LogisticRegression(solver="lbfgs", penalty="l1", C=1 / 0.1, fit_intercept=False,
                               max_iter=2000, tol=1e-10, client="local").fit(X, y)
    assert model.intercept_.tolist() == [0.0]
    margins = X @ model.coef_.ravel()
    loss = np.logaddexp(0, -np.where(y > 0, 1, -1) * margins).sum()
    assert abs(loss - 15.884923) <= 1e-3 * 15.884923
    assert abs(int((model.coef_ != 0).sum()) - 47) <= 1


@pytest.mark.parametrize("penalty", ["l2", "l1"])
def test_convergence_warning_points_at_the_callers_line(a9a, penalty):
    """L-BFGS-B's and OWL-QN's ConvergenceWarning names the line that called ``fit`` (it
    named a line inside dask_ps, logistic.py, whatever the caller)."""
    X, y, _, _ = a9a
    est = LogisticRegression(solver="lbfgs", penalty=penalty, max_iter=1, client="local")
    with pytest.warns(ConvergenceWarning, match="max_iter=1") as record:
        est.fit(X[:2000], y[:2000])
    assert {w.filename for w in record if w.category is ConvergenceWarning} == {__file__}


@pytest.mark.filterwarnings("ignore:L-BFGS-B stopped at max_iter=200")  # near enough here
@pytest.mark.parametrize("solver", ["ftrl", "adagrad", "lbfgs"])
def test_warm_start_continues_from_the_previous_state(a9a, solver):
    X, y, Xt, yt = a9a
    kw = dict(solver=solver, client="local", random_state=0)
    first = LogisticRegression(max_iter=200 if solver == "lbfgs" else 5, **kw).fit(X, y)
    before = first.coef_.copy()
    first.set_params(warm_start=True, max_iter=1)

    def one_step():  # one L-BFGS iteration is meant to stop short of tol
        return (pytest.warns(ConvergenceWarning, match="max_iter=1") if solver == "lbfgs"
                else contextlib.nullcontext())

    with one_step():
        first.fit(X, y)
    with one_step():
        cold = LogisticRegression(max_iter=1, **kw).fit(X, y)
    moved = np.abs(first.coef_ - before).max()
    assert moved < 0.5 * np.abs(cold.coef_ - before).max()
    assert roc_auc_score(yt, first.predict_proba(Xt)[:, 1]) >= 0.895


@pytest.mark.parametrize("solver", ["ftrl", "adagrad", "sgd"])
def test_a_warm_start_may_move_the_step_from_the_server_to_the_workers(a9a, solver):
    """A server-step fit keeps the update rule's state on the shards and hands over only
    its weights; a warm start back on the workers starts the rule from those weights.
    FTRL and AdaGrad took the weights for their worker state ("updates for 124 keys must
    have shape (124, 3), got (124, 2)")."""
    X, y, Xt, yt = a9a
    model = LogisticRegression(solver=solver, client="local", random_state=0, max_iter=3,
                               warm_start=True).fit(X, y)
    model.set_params(step_on="server").fit(X, y)
    model.set_params(step_on="worker", max_iter=1).fit(X, y)
    assert len(model.history_) == 7 and np.isfinite(model.coef_).all()
    assert roc_auc_score(yt, model.predict_proba(Xt)[:, 1]) >= 0.88


@pytest.mark.parametrize("solver", ["ftrl", "adagrad", "sgd"])
def test_a_warm_start_of_a_server_step_goes_on_from_its_weights_and_rule_state(a9a, solver):
    """A server-step fit hands over its weights and its rule's state (AdaGrad's
    accumulators, FTRL's z and n); a warm start sets them on the new shards. It pushed the
    weights instead, which the rule took for a gradient: the model restarted near zero
    (SGD's third epoch: loss 0.5999, straight on 0.4981), and so did every partial_fit."""
    X, y, Xt, yt = a9a
    kw = dict(solver=solver, step_on="server", client="local", random_state=0)
    model = LogisticRegression(max_iter=2, **kw).fit(X, y)
    model.set_params(warm_start=True, max_iter=1).fit(X, y)
    straight = LogisticRegression(max_iter=3, **kw).fit(X, y)
    warm_loss, straight_loss = model.history_[-1]["loss"], straight.history_[-1]["loss"]
    assert len(model.history_) == 3
    assert abs(warm_loss - straight_loss) <= 2e-3 * straight_loss, (warm_loss, straight_loss)
    assert warm_loss < model.history_[1]["loss"]
    auc = roc_auc_score(yt, model.decision_function(Xt))
    assert auc >= roc_auc_score(yt, straight.decision_function(Xt)) - 2e-3
    streamed = LogisticRegression(**kw)
    for _ in range(3):
        streamed.partial_fit(X, y, classes=[-1.0, 1.0])
    losses = [h["loss"] for h in streamed.history_]
    assert losses[2] < losses[1] < losses[0], losses


@pytest.mark.parametrize("penalty", ["l2", "l1"])
@pytest.mark.parametrize("step_on", ["worker", "server"])
def test_an_ftrl_warm_start_with_another_learning_rate_keeps_the_weights(a9a, step_on,
                                                                        penalty):
    """FTRL's weights are a function of its z, n and alpha (the learning rate): a warm
    start with another learning rate kept z, so the weights came back rescaled (0.1 -> 0.01:
    every weight times 0.1, the loss from 0.33 to 0.44). Now z is rebased to keep them: an
    epoch at a learning rate of 1e-9 leaves them where they were."""
    X, y, _, _ = a9a
    model = LogisticRegression(solver="ftrl", step_on=step_on, penalty=penalty,
                               C=0.01 if penalty == "l1" else 1.0, max_iter=2,
                               random_state=0, client="local").fit(X, y)
    before = model.coef_.copy()
    model.set_params(warm_start=True, max_iter=1, learning_rate=1e-9).fit(X, y)
    assert np.abs(model.coef_ - before).max() <= 1e-6 * np.abs(before).max()
    assert model.history_[2]["loss"] <= model.history_[1]["loss"] * 1.001


@pytest.mark.parametrize("step_on", ["worker", "server"])
def test_a_narrow_model_in_a_hashed_table_equals_the_dense_one(monkeypatch, step_on):
    """Below KEYED_FEATURES columns a stochastic fit whose dense table would pass
    DENSE_TABLE_BYTES (many classes) holds a hashed one: the same coef_ (dense, over every
    column), intercept, predictions and warm start. Its touched rows were taken for the
    whole table: coef_ of shape (K, touched columns), the last one as intercept_, and a
    segfault in predict_proba."""
    from dask_ps.algorithms import _stochastic_fit

    rng = np.random.default_rng(4)
    n, d, width, k = 900, 30, 5000, 4
    W = rng.normal(size=(d, k))
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.3)
    y = np.argmax(X @ W + rng.gumbel(size=(n, k)), axis=1)
    cols = np.sort(rng.choice(width, d, replace=False))
    Xw = sp.csr_matrix(X)
    Xw = sp.csr_matrix((Xw.data, cols[Xw.indices], Xw.indptr), shape=(n, width))
    kw = dict(solver="ftrl", step_on=step_on, max_iter=2, random_state=0, checkpoint=None,
              client="local")
    dense = LogisticRegression(**kw).fit(Xw, y)
    monkeypatch.setattr(_stochastic_fit, "DENSE_TABLE_BYTES", 1024)  # every table hashed
    hashed = LogisticRegression(**kw).fit(Xw, y)
    assert hashed.coef_.shape == dense.coef_.shape == (k, width)
    np.testing.assert_allclose(hashed.coef_, dense.coef_, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hashed.intercept_, dense.intercept_, rtol=1e-12)
    np.testing.assert_allclose(hashed.predict_proba(Xw), dense.predict_proba(Xw), rtol=1e-12)
    for m in (dense, hashed):
        m.set_params(warm_start=True, max_iter=1).fit(Xw, y)
    np.testing.assert_allclose(hashed.coef_, dense.coef_, rtol=1e-12, atol=1e-15)


def test_partial_fit_epochs_accumulate(a9a):
    X, y, Xt, yt = a9a
    model = LogisticRegression(solver="ftrl", client="local", random_state=0)
    for _ in range(5):  # as many epochs as fit's default
        model.partial_fit(X, y, classes=[-1.0, 1.0])
    assert len(model.history_) == 5
    losses = [h["loss"] for h in model.history_]
    assert losses[4] < losses[0]
    assert roc_auc_score(yt, model.predict_proba(Xt)[:, 1]) >= 0.900
    with pytest.raises(ValueError, match="differ from the first call"):
        model.partial_fit(X, y, classes=[0, 1])
    assert not hasattr(LogisticRegression(solver="lbfgs"), "partial_fit")  # available_if
    with pytest.raises(AttributeError, match="partial_fit"):
        LogisticRegression(solver="lbfgs").partial_fit(X, y)


def test_partial_fit_of_lbfgs_names_the_stochastic_solvers():
    """solver="lbfgs" has no partial_fit (hasattr False, scikit-learn's available_if way);
    the AttributeError said only "This 'LogisticRegression' has no attribute
    'partial_fit'", not why: it names the solver and the stochastic ones now."""
    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2
    for est in (LogisticRegression(solver="lbfgs"), LogisticRegression(solver="lbfgs",
                                                                       penalty="l1")):
        assert not hasattr(est, "partial_fit")
        with pytest.raises(AttributeError, match=r"^LogisticRegression with solver='lbfgs' "
                                                 r"has no attribute 'partial_fit': partial_fit "
                                                 r"is one more epoch of a stochastic solver "
                                                 r"\('ftrl', 'adagrad', 'sgd'\); 'lbfgs' .*"
                                                 r"full-batch"):
            est.partial_fit(X, y, classes=[0, 1])
        with pytest.raises(AttributeError, match="solver='lbfgs'"):  # from the class too
            LogisticRegression.partial_fit(est, X, y, classes=[0, 1])
    assert LogisticRegression.partial_fit.__doc__.startswith("One more epoch")
    assert hasattr(LogisticRegression(solver="sgd"), "partial_fit")
    assert hasattr(FactorizationMachineClassifier(), "partial_fit")


@pytest.mark.parametrize("name", ["lr", "fm"])
def test_partial_fit_refuses_labels_of_y_outside_classes(name):
    """scikit-learn's partial_fit rule: ``classes`` lists every label y can hold. A 0/1
    batch given classes=[-1, 1] became a 3-class model (classes_ [-1 0 1], or for FM a
    "3 classes" error naming labels never given); a label outside the fitted classes was
    not named ("y has classes outside [0.0, 1.0]")."""
    from dask_ps.algorithms import FactorizationMachineClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 5))
    y = (X[:, 0] > 0).astype(int)
    make = LogisticRegression if name == "lr" else FactorizationMachineClassifier
    kw = dict(client="local", checkpoint=None, random_state=0)
    for classes, said in [([-1, 1], r"\[0\] that are not in classes=\[-1, 1\]"),
                          (["0", "1"], r"\[0, 1\] that are not in classes=\['0', '1'\]")]:
        model = make(**kw)
        with pytest.raises(ValueError, match=rf"^y has labels {said}: classes must include"):
            model.partial_fit(X, y, classes=classes)
        assert not hasattr(model, "classes_")
    model = make(**kw).partial_fit(X[y == 0], y[y == 0], classes=[1, 0])
    np.testing.assert_array_equal(model.classes_, [0, 1])
    assert model.coef_.shape == (1, 5)
    with pytest.raises(ValueError, match=r"^y has labels \[2\] outside the fitted classes "
                                         r"\[0, 1\]"):
        model.partial_fit(X, y + 1)


@pytest.mark.parametrize("name", ["lr", "fm"])
def test_partial_fit_needs_classes_on_its_first_call(name):
    """scikit-learn's rule (``SGDClassifier.partial_fit``): an unfitted model's first
    ``partial_fit`` without ``classes`` took the batch's labels as the classes; now refused
    in scikit-learn's words, the model left unfitted. A fitted model (by ``fit``
    or an earlier ``partial_fit``) goes on without ``classes``."""
    from sklearn.linear_model import SGDClassifier

    from dask_ps.algorithms import FactorizationMachineClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 5))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError) as theirs:
        SGDClassifier().partial_fit(X, y)
    said = "classes must be passed on the first call to partial_fit."
    assert str(theirs.value) == said
    make = LogisticRegression if name == "lr" else FactorizationMachineClassifier
    kw = dict(client="local", checkpoint=None, random_state=0)
    model = make(**kw)
    with pytest.raises(ValueError, match="^" + re.escape(said) + rf" \({make.__name__}: "):
        model.partial_fit(X, y)
    assert not hasattr(model, "classes_")
    model.partial_fit(X, y, classes=[0, 1]).partial_fit(X, y)  # then classes may go
    assert len(model.history_) == 2
    fitted = make(max_iter=1, **kw).fit(X, y).partial_fit(X, y)  # fit gave the classes
    np.testing.assert_array_equal(fitted.classes_, [0, 1])


def test_a_label_outside_the_classes_is_said_to_be_of_y():
    """An eval_set label outside the training classes said "eval_set[0]: label np.int64(5)
    ..."; the data path's own error said "X: label ..." of a label of y."""
    from dask_ps.algorithms import _logistic_data as D
    from dask_ps.exceptions import DataError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(DataError, match=r"^y: label 1 at row 5 is not among the classes "
                                        r"\[0, 2\]$"):
        D.encode_part((X, y), np.array([0, 2]), 1, start=5)
    model = LogisticRegression(client="local", checkpoint=None, random_state=0, max_iter=1)
    with pytest.raises(DataError, match=r"^eval_set\[0\]: y: label 5 at row 0 is not among "
                                        r"the classes \[0, 1\]$"):
        model.fit(X, y, eval_set=[(X[:4], np.array([5, 0, 1, 0]))])


def _small_fit(name, n_hashed_features, k=2):
    """300 rows x 40 sparse columns, random binary labels, and a LogisticRegression
    (``name`` "lr") or FactorizationMachineClassifier ("fm", ``k`` factors) fitted on them
    for one epoch."""
    import scipy.sparse as sp

    from dask_ps.algorithms import FactorizationMachineClassifier

    X = sp.random(300, 40, density=0.2, random_state=0, format="csr")
    y = np.random.default_rng(0).integers(0, 2, 300)
    kw = dict(n_hashed_features=n_hashed_features, max_iter=1, client="local",
              checkpoint=None, random_state=0)
    model = (LogisticRegression(**kw) if name == "lr"
             else FactorizationMachineClassifier(n_components=k, **kw)).fit(X, y)
    return X, y, model


def _warm(monkeypatch, model, how, **params):
    """``model.set_params(**params)`` for a warm start ``how`` ("warm_start" or
    "partial_fit"); returns its method, the attributes before, and a list to which any PS
    model made (none must be, until ``monkeypatch.undo()``) appends."""
    from dask_ps.algorithms._base import PSEstimator

    model.set_params(**params, warm_start=how == "warm_start")
    made = []
    monkeypatch.setattr(PSEstimator, "_model", lambda self: made.append(1) / 0)
    return (model.fit if how == "warm_start" else model.partial_fit), dict(model.__dict__), made


@pytest.mark.parametrize("name", ["lr", "fm"])
@pytest.mark.parametrize("how", ["warm_start", "partial_fit"])
@pytest.mark.parametrize("old, new", [(64, 128), (None, 64), (64, None), (None, 40),
                                      (2**20, 2**21)])
def test_a_warm_start_refuses_another_hashing_before_training(monkeypatch, name, how, old,
                                                               new):
    """A warm start with another n_hashed_features (hashing turned on or off included, and
    40 buckets for 40 columns: the same width, other columns under each weight) is refused
    with both values named before a PS model is made; the fitted model is left as it was
    and, the value set back, continues."""
    import dask.array as da

    X, y, model = _small_fit(name, old)
    proba = model.predict_proba(X)
    go, attributes, made = _warm(monkeypatch, model, how, n_hashed_features=new)
    with pytest.raises(ValueError, match=rf"n_hashed_features={new}, but \w+ was fitted "
                                         rf"with n_hashed_features={old}: a warm start"):
        go(X, y)
    dX = da.from_array(X.toarray(), chunks=(100, -1))
    with pytest.raises(ValueError, match=rf"n_hashed_features={new}, but"):
        go(dX, da.from_array(y, chunks=100))
    assert not made and model.__dict__.keys() == attributes.keys()
    assert all(model.__dict__[k] is v for k, v in attributes.items())
    with pytest.raises(ValueError, match="X has 30 features, but"):  # another n_features
        go(X[:, :30], y)
    with pytest.raises(ValueError, match="X has 30 features, but .* fitted with 40"):
        go(dX[:, :30], da.from_array(y, chunks=100))
    monkeypatch.undo()
    model.set_params(n_hashed_features=old)
    np.testing.assert_array_equal(model.predict_proba(X), proba)
    go(X, y)
    assert len(model.history_) == 2
    # a model saved before the fitted value was kept: its coef_'s width is checked
    del model._n_hashed_features_
    model.set_params(n_hashed_features=new)
    if (new or 40) != (old or 40):
        with pytest.raises(ValueError, match=rf"makes {new or 40} columns of weights, but "
                                             rf"\w+ was fitted with {old or 40}"):
            go(X, y)


@pytest.mark.parametrize("name", ["lr", "fm"])
@pytest.mark.parametrize("old, new", [(64, 32), (64, None), (None, 64), (2**20, 2**21)])
def test_a_fitted_model_predicts_with_the_hashing_it_was_fitted_with(name, old, new):
    """set_params(n_hashed_features=...) after a fit is for the next fit: predictions (NumPy
    and dask X) stay those of the fitted weights, not of the columns hashed another way."""
    import dask.array as da


    X, y, model = _small_fit(name, old)
    margins, proba = model.decision_function(X), model.predict_proba(X)
    model.set_params(n_hashed_features=new)
    np.testing.assert_array_equal(model.decision_function(X), margins)
    np.testing.assert_array_equal(model.predict_proba(X), proba)
    dX = da.from_array(X.toarray(), chunks=(100, -1))
    np.testing.assert_allclose(model.predict_proba(dX).compute(), proba, rtol=1e-12)


@pytest.mark.parametrize("how", ["warm_start", "partial_fit"])
@pytest.mark.parametrize("hashed", [None, 2**20])
def test_a_warm_start_of_a_factorization_machine_refuses_another_k(monkeypatch, how, hashed):
    """A warm start with another n_components (factors per feature) is refused before
    training, naming both values, not deep in the shards ("updates for 40 keys must have
    shape ..."); the fitted model is left as it was and continues once it is set back."""
    X, y, model = _small_fit("fm", hashed, k=3)
    proba = model.predict_proba(X)
    go, attributes, made = _warm(monkeypatch, model, how, n_components=5)
    with pytest.raises(ValueError, match=r"n_components=5, but FactorizationMachineClassifier "
                                         r"was fitted with n_components=3: a warm start"):
        go(X, y)
    assert not made and all(model.__dict__[k] is v for k, v in attributes.items())
    monkeypatch.undo()
    model.set_params(n_components=3)
    np.testing.assert_array_equal(model.predict_proba(X), proba)
    go(X, y)
    assert len(model.history_) == 2


def test_divergence_names_the_epoch():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5)) * 1e150
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(FloatingPointError, match=r"epoch 1: .*try a smaller learning_rate "
                                                 r"\(now 1e\+?10\) or scale the features"):
        LogisticRegression(solver="sgd", learning_rate=1e10, client="local").fit(X, y)


@pytest.mark.parametrize("solver", ["sgd", "adagrad", "ftrl"])
def test_stochastic_fit_on_huge_features_says_to_scale_them(solver):
    """Rows of 1e300 diverge at any learning rate: the advice named the learning rate only
    (lbfgs's names the scale); AdaGrad's squared gradients overflowing were refused by the
    table as a bare "update ... is not finite"."""
    X = np.random.default_rng(0).normal(size=(200, 3))
    X[5, 0] = 1e300
    y = (X[:, 1] > 0).astype(int)
    with pytest.raises(dask_ps.DivergenceError, match=r"or scale the features \(e\.g\. "
                                                      r"MaxAbsScaler\)"):
        LogisticRegression(solver=solver, client="local", random_state=0).fit(X, y)


def test_pydata_sparse_input():
    import scipy.sparse as sp
    import sparse

    X = sp.random(300, 10, density=0.3, format="csr", random_state=0)
    y = (np.asarray(X.sum(axis=1)).ravel() > 0.7).astype(int)
    model = LogisticRegression(solver="lbfgs", client="local", max_iter=200)
    model.fit(sparse.COO.from_scipy_sparse(X), y)
    assert model.score(sparse.COO.from_scipy_sparse(X), y) == model.score(X, y) > 0.8


def test_feature_hashing(a9a, client2):
    from dask_ps.algorithms._logistic_data import hash_columns

    X, y, Xt, yt = a9a
    hashed = hash_columns(X.tocsr(), 4096)
    assert hashed.shape == (X.shape[0], 4096)
    np.testing.assert_allclose(np.asarray(hashed.sum(axis=1)), np.asarray(X.sum(axis=1)))
    for client in ("local", client2):
        model = LogisticRegression(solver="adagrad", n_hashed_features=4096, client=client,
                                   random_state=0).fit(X, y)
        assert model.coef_.shape == (1, 4096) and model.n_features_in_ == 123
        assert roc_auc_score(yt, model.predict_proba(Xt)[:, 1]) >= 0.895
    with pytest.raises(ValueError, match="n_hashed_features"):
        LogisticRegression(n_hashed_features=0, client="local").fit(X, y)


def test_bad_line_found_by_the_one_parse_stops_the_fit_before_training(tmp_path):
    from dask_ps.io import read_libsvm

    good = b"1 1:0.5 3:1\n-1 2:1\n" * 200
    (tmp_path / "a.svm").write_bytes(good)
    (tmp_path / "b.svm").write_bytes(good[:57] + b"1 2:x\n" + good)
    X, y = read_libsvm(str(tmp_path / "*.svm"), n_features=3, zero_based=False,
                       blocksize=512)  # only counts rows: the lines are checked when parsed
    model = LogisticRegression(client="local", max_iter=2, random_state=0)
    with pytest.raises(ValueError, match=r"b\.svm, line 7: .*not a finite number: '2:x'"):
        model.fit(X, y)
    assert not hasattr(model, "coef_")


def test_empty_and_unknown_size_dask_input_on_a_cluster(tmp_path, client2):
    import dask.array as da

    from dask_ps.io import read_libsvm

    (tmp_path / "empty.svm").write_bytes(b"")
    X, y = read_libsvm(tmp_path / "empty.svm")
    with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\)"):
        LogisticRegression(client=client2).fit(X, y)
    rng = np.random.default_rng(0)
    X = da.from_array(rng.random((40, 3)), chunks=10)
    y = da.from_array((rng.random(40) > 0.5).astype(float), chunks=10)
    keep = X[:, 0] > 0.3  # boolean indexing leaves the row counts unknown
    with pytest.raises(ValueError, match=r"known chunk sizes.*compute_chunk_sizes\(\)"):
        LogisticRegression(client=client2, max_iter=1).fit(X[keep], y[keep])
    model = LogisticRegression(client=client2, max_iter=1, random_state=0)
    model.fit(X[keep].compute_chunk_sizes(), y[keep].compute_chunk_sizes())
    assert model.coef_.shape == (1, 3)


def test_probabilities_stay_finite_when_every_class_scores_very_low():
    """One-vs-rest sigmoids of margins near -800 underflow to 0; normalised in log space the
    probabilities stay finite, in [0, 1], and sum to 1 (they were NaN)."""
    from dask_ps.algorithms._logistic_data import proba_from_margins

    z = np.array([[-800.0, -801.0, -805.0], [-1e4, 0.0, 3.0], [50.0, 49.0, -2.0]])
    p = proba_from_margins(z)
    assert np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert p[0].argmax() == 0 and p[0, 0] > p[0, 1] > p[0, 2]
    X = np.random.default_rng(0).normal(size=(300, 4))
    y = np.arange(300) % 3
    model = LogisticRegression(solver="sgd", learning_rate=1.0, client="local", max_iter=3,
                               random_state=0).fit(X, y)
    proba = model.predict_proba(X * 1e3)  # margins of thousands
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_lbfgs_on_huge_features_says_to_scale_them():
    X = np.random.default_rng(0).normal(size=(200, 3)) * 1e200
    y = np.arange(200) % 2
    with pytest.raises(dask_ps.DivergenceError, match="scale the features"):
        LogisticRegression(solver="lbfgs", client="local").fit(X, y)


def test_encoding_keeps_a_csr_partition_whose_arrays_view_a_larger_buffer():
    """A partition moved between workers arrives with its arrays viewing the received
    message; scipy's CSR constructor would copy such views (its ``prune``). Encoding keeps
    them: the encoded X shares the input's arrays."""
    import scipy.sparse as sp

    from dask_ps.algorithms._logistic_data import encode_part

    rng = np.random.default_rng(0)
    X = sp.random(200, 50, density=0.1, format="csr", random_state=1)
    X.sort_indices()
    buffer = np.zeros(10 * X.nnz + X.shape[0] + 1)  # one message holding several arrays
    data = buffer[:X.nnz]
    data[:] = X.data
    message = np.zeros(10 * X.nnz, np.int32)
    indices, indptr = message[:X.nnz], message[X.nnz:X.nnz + X.shape[0] + 1]
    indices[:], indptr[:] = X.indices, X.indptr
    moved = sp.csr_matrix((data, indices, indptr), shape=X.shape)
    moved.data, moved.indices, moved.indptr = data, indices, indptr  # views, as received
    y = (rng.random(200) < 0.5).astype(float)
    Xe, Y = encode_part((moved, y), np.array([0.0, 1.0]), 1)
    assert np.shares_memory(Xe.data, buffer) and np.shares_memory(Xe.indices, message)
    assert (Xe != X).nnz == 0 and Y.shape == (200, 1)


def test_a_huge_max_iter_is_a_bound_not_a_reservation():
    """The run keeps its epochs' results as they finish: a list of ``max_iter`` slots was
    allocated first (8 TB here: MemoryError; ``dask-ps train gbdt --n-estimators
    1000000000`` took 8 GB before its first round)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
    model = LogisticRegression(client="local", max_iter=10**12, random_state=0).fit(X, y)
    assert 1 < len(model.history_) < 10**4
    assert roc_auc_score(y, model.predict_proba(X)[:, 1]) > 0.9
