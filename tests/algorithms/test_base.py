"""What every estimator shares (algorithms/_base.py): pickling, parameters, divergence, epochs,
callbacks, eval_set, warm starts that refuse other data."""

import pickle
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import dask_ps
from dask_ps import (
    DivergenceError,
    LogisticRegression,
    MatrixFactorization,
    NoCheckpointToResumeError,
    OptionError,
)

ESTIMATORS = [LogisticRegression(max_iter=2, random_state=0),
              MatrixFactorization(max_iter=2, n_components=4, random_state=0)]


def _data(est):
    rng = np.random.default_rng(0)
    if isinstance(est, LogisticRegression):
        X = sp.random(400, 20, density=0.3, format="csr", random_state=1)
        return (X, (np.asarray(X.sum(axis=1)).ravel() > 1.5).astype(int))
    users, items = rng.integers(0, 30, 600), rng.integers(0, 20, 600)
    return (np.column_stack([users, items, rng.integers(1, 6, 600)]).astype(float),)


def test_clones_share_the_client_and_a_grid_search_runs_on_it(client2):
    # clone deep-copies parameters, and a Dask client cannot be deep-copied: the estimators
    # share it instead (it failed with "cannot pickle '_asyncio.Task' object")
    from sklearn.model_selection import GridSearchCV

    for cls in (dask_ps.LogisticRegression, dask_ps.FactorizationMachineClassifier,
                dask_ps.MatrixFactorization, dask_ps.LatentDirichletAllocation,
                dask_ps.GBDTClassifier, dask_ps.GBDTRegressor):
        est = cls(client=client2)
        copy = clone(est)
        assert copy is not est and copy.get_params()["client"] is client2
        assert est.get_params()["client"] is client2
    X, y = _data(ESTIMATORS[0])
    search = GridSearchCV(LogisticRegression(max_iter=2, random_state=0, client=client2),
                          {"C": [0.1, 10.0]}, cv=2).fit(X, y)
    assert search.best_estimator_.client is client2 and len(search.cv_results_["params"]) == 2


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("where", ["local", "cluster"])
def test_pickle_round_trip_fitted_and_unfitted_with_and_without_a_client(est, where, client2):
    client = "local" if where == "local" else client2
    est = clone(est).set_params(client=client)
    again = pickle.loads(pickle.dumps(est))  # a Dask client does not pickle: it is left out
    assert again.get_params()["client"] == ("local" if where == "local" else None)
    data = _data(est)
    est.fit(*data)
    fitted = pickle.loads(pickle.dumps(est))
    X = data[0]
    np.testing.assert_array_equal(fitted.predict(X[:, :2] if X.shape[1] == 3 else X),
                                  est.predict(X[:, :2] if X.shape[1] == 3 else X))


def test_parameters_are_keyword_only_and_checked_in_one_place():
    with pytest.raises(TypeError):
        LogisticRegression("sgd")
    for est, bad in [(LogisticRegression(), dict(C=-1.0)),
                     (LogisticRegression(), dict(consistency="sometimes")),
                     (MatrixFactorization(), dict(n_shards=0)),
                     (MatrixFactorization(), dict(checkpoint_every=0))]:
        name = next(iter(bad))
        with pytest.raises(ValueError, match=f"'{name}' parameter of {type(est).__name__}"):
            est.set_params(client="local", **bad).fit(*_data(est))
    with pytest.raises(ValueError, match="staleness=2 needs consistency='ssp'"):
        LogisticRegression(client="local", staleness=2).fit(*_data(LogisticRegression()))


def test_a_bool_is_not_a_number_for_any_estimator():
    """True is an int in Python (and scikit-learn's Interval takes it as 1): every numeric
    parameter of every estimator refuses it, e.g. GBDTClassifier(max_workers=True)."""
    from dask_ps.algorithms._base import Interval, PSEstimator

    with pytest.raises(ValueError, match="'max_workers' parameter of GBDTClassifier .* Got "
                                         "True"):
        dask_ps.GBDTClassifier(max_workers=True, client="local").fit(
            np.eye(4), [0, 1, 0, 1])
    checked = 0
    estimators = [c for c in (getattr(dask_ps, n) for n in dask_ps.__all__)
                  if isinstance(c, type) and issubclass(c, PSEstimator)]
    assert len(estimators) == 6
    for cls in estimators:
        for name, rules in cls._parameter_constraints.items():
            if rules == "no_validation" or not any(isinstance(r, Interval) for r in rules):
                continue
            for bad in (True, np.True_, False):
                with pytest.raises(ValueError, match=f"'{name}' parameter"):
                    cls(**{name: bad})._validate_params()
            checked += 1
    assert checked >= 100


@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(max_iter=1, client="local"),
    lambda: dask_ps.FactorizationMachineClassifier(max_iter=1, client="local"),
    lambda: dask_ps.GBDTClassifier(n_estimators=1, client="local"),
    lambda: dask_ps.GBDTRegressor(n_estimators=1, client="local"),
    lambda: dask_ps.LatentDirichletAllocation(n_components=2, max_iter=1, client="local")],
    ids=["lr", "fm", "gbdt", "gbdt-regression", "lda"])
def test_an_array_of_strings_is_refused_as_scikit_learn_refuses_it(make):
    """New-user pass: the estimators trained on (and predicted from) arrays of numeric
    strings, which scikit-learn's ``check_array(..., dtype="numeric")`` refuses: now refused
    in its words, after the estimator's name and the dtype, at fit and predict, NumPy
    (strings, bytes, a list of string rows) or dask. An object array of numeric strings is
    converted, as scikit-learn's check_array converts it."""
    import re

    import dask.array as da
    from sklearn.utils import check_array

    X = np.random.default_rng(0).integers(0, 4, size=(40, 3)).astype(np.float64)
    y = np.arange(40) % 2
    text = X.astype(str)
    with pytest.raises(ValueError) as theirs:
        check_array(text, dtype="numeric")
    said = "dtype='numeric' is not compatible with arrays of bytes/strings"
    assert said in str(theirs.value)
    est = make()
    name = type(est).__name__
    lda = name == "LatentDirichletAllocation"

    def fit(A):
        return est.fit(A) if lda else est.fit(A, y)

    def predict(A):
        out = est.transform(A) if lda else est.predict(A)
        return np.asarray(out.compute() if hasattr(out, "compute") else out)

    for bad in (text, text.astype(bytes), text.tolist(), da.from_array(text, chunks=20)):
        dtype = np.asarray(bad).dtype
        with pytest.raises(ValueError, match=f"^{name}: X has dtype {re.escape(str(dtype))}: "
                                             f"{said}. Convert your data to numeric values "
                                             f"explicitly instead"):
            fit(bad)
    assert not hasattr(est, "n_features_in_")  # refused before anything was fitted
    fit(X)
    expected = predict(X)
    for bad in (text, da.from_array(text, chunks=20)):
        with pytest.raises(ValueError, match=f"^{name}: X has dtype <U"):
            predict(bad)
    if not lda:  # (LDA's transform samples)
        np.testing.assert_array_equal(predict(text.astype(object)), expected)
    fit(text.astype(object))
    assert est.n_features_in_ == 3


@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(max_iter=1),
    lambda: dask_ps.FactorizationMachineClassifier(max_iter=1),
    lambda: dask_ps.GBDTClassifier(n_estimators=1),
    lambda: dask_ps.LatentDirichletAllocation(n_components=2, max_iter=1)],
    ids=["lr", "fm", "gbdt", "lda"])
def test_a_frame_column_without_numbers_is_named(make):
    """scikit-learn's own error names only a value ("could not convert string to float:
    'u'"); ours names the columns, their dtype and a value, and leaves number-like
    columns (nullable integers, booleans, categories of numbers) alone."""
    import pandas as pd

    y = np.arange(40) % 2
    X = pd.DataFrame({"a": np.arange(40.0), "site": ["u", "v"] * 20,
                      "day": pd.date_range("2020-01-01", periods=40)})
    with pytest.raises(ValueError, match=r"columns that hold no numbers: 'site' \(.*e\.g\. "
                                         r"'u'\), 'day' \(datetime64"):
        make().fit(X, y)
    fine = pd.DataFrame({"n": pd.array([1, 2] * 20, dtype="Int64"), "b": [True, False] * 20,
                         "c": pd.Categorical([1, 2] * 20),
                         "o": pd.Series([1.5, 2] * 20, dtype=object)})
    from dask_ps.algorithms._base import check_numeric_columns
    check_numeric_columns(fine, "x")  # nothing raised
    with pytest.raises(ValueError, match=r"'c' \(category"):
        check_numeric_columns(fine.assign(c=pd.Categorical(["p", "q"] * 20)), "x")
    # a dask frame (objects become strings there): judged by its first partition's values;
    # a repeated column name names its own column's value
    import dask.dataframe as dd

    check_numeric_columns(dd.from_pandas(fine, npartitions=2), "x")
    with pytest.raises(ValueError, match=r"'s' \(.*e\.g\. 'u'\)"):
        check_numeric_columns(dd.from_pandas(X[["a", "site"]].rename(columns={"site": "s"}),
                                             npartitions=2), "x")
    twice = pd.DataFrame({"a": np.arange(3.0), "b": ["q", "r", "s"]})
    twice.columns = ["a", "a"]
    with pytest.raises(ValueError, match=r"'a' \(\w+, e\.g\. 'q'\)"):
        check_numeric_columns(twice, "x")
    # pd.NA among the numbers of a pandas string or object column: named (scikit-learn's
    # conversion raised a bare TypeError: "... not 'NAType'"); NaN and None pass, and so
    # does a dask frame's pd.NA (read as NaN there)
    holed = pd.DataFrame({"a": np.arange(40.0), "s": pd.array(["1.5", pd.NA] * 20,
                                                                dtype="string"),
                          "o": pd.Series([2.0, pd.NA] * 20, dtype=object)})
    with pytest.raises(ValueError, match=r"pd\.NA.*'s' \(string, row 1\), 'o' \(object, "
                                         r"row 1\).*Float64"):
        make().fit(holed, y)
    check_numeric_columns(holed.assign(o=pd.Series([2.0, None] * 20, dtype=object),
                                       s=pd.array(["1.5", "2"] * 20, dtype="string")), "x")
    check_numeric_columns(dd.from_pandas(holed, npartitions=2), "x")


def test_divergence_names_the_epoch_and_the_fix():
    X, y = _data(LogisticRegression())
    X = X * 1e4  # huge features and steps
    with pytest.raises(DivergenceError, match=r"diverged at epoch \d+.*smaller learning_rate"):
        LogisticRegression(solver="sgd", learning_rate=50.0, client="local",
                           random_state=0).fit(X, y)
    assert issubclass(DivergenceError, FloatingPointError)
    assert issubclass(DivergenceError, ValueError)


def test_warm_start_with_another_feature_count_leaves_the_model_as_it_was():
    X, y = _data(LogisticRegression())
    model = LogisticRegression(warm_start=True, client="local", max_iter=2,
                               random_state=0).fit(X, y)
    coef, history = model.coef_.copy(), list(model.history_)
    with pytest.raises(ValueError, match="X has 5 features, but LogisticRegression .*20"):
        model.fit(X[:, :5], y)
    with pytest.raises(ValueError, match="5 features"):
        model.partial_fit(X[:, :5], y)
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.history_ == history and model.n_features_in_ == 20


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_warm_start_with_another_feature_count_on_a_cluster_leaves_the_model_as_it_was(
        client2, kind):
    """Issue 18: on a cluster a raw NumPy concatenation error, and n_features_in_ 5 with coef_
    3 wide. The refusal names both counts before anything is sent to the workers."""
    import dask.array as da

    X, y = _data(LogisticRegression())
    X = X.toarray()
    if kind == "dask":
        X, y = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    model = LogisticRegression(warm_start=True, client=client2, max_iter=2,
                               random_state=0).fit(X, y)
    test = X[:50].compute() if kind == "dask" else X[:50]
    coef, history, pred = model.coef_.copy(), list(model.history_), model.predict_proba(test)
    for call in (model.fit, model.partial_fit):
        with pytest.raises(ValueError, match="X has 5 features, but LogisticRegression .*20"):
            call(X[:, :5], y)
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.coef_.shape == (1, 20) and model.n_features_in_ == 20
    assert model.history_ == history
    np.testing.assert_array_equal(model.predict_proba(test), pred)
    model.partial_fit(X, y)  # and it still trains
    assert model.coef_.shape == (1, 20) and len(model.history_) > len(history)


def _fitted_state(est) -> dict:
    """The estimator's fitted attributes (and private ones), arrays copied."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()
            if k.endswith("_") or k.startswith("_")}


def _assert_same_state(est, before: dict):
    after = _fitted_state(est)
    assert sorted(after) == sorted(before)
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(after[k], v, err_msg=k)
        else:
            assert after[k] is v or after[k] == v, k


@pytest.mark.parametrize("kind", ["lr", "fm", "gbdt", "lda", "mf"])
def test_a_failed_fit_leaves_a_fitted_model_as_it_was(kind):
    """Issue r02: fit(X[:, :5], zeros) failed ("only one class") after scikit-learn's
    validate_data had set n_features_in_ to 5 (and feature_names_in_ to the new columns)
    beside an 8-column coef_: predict on the model's own data then raised. Every fit and
    partial_fit of every estimator now restores its attributes on failure."""
    import pandas as pd

    rng = np.random.default_rng(0)
    names = [f"f{j}" for j in range(8)]
    X = pd.DataFrame(rng.integers(0, 4, (120, 8)).astype(float), columns=names)
    y = (X["f0"] + X["f1"] > 3).astype(int).to_numpy()
    other = X.iloc[:, :5].set_axis([f"g{j}" for j in range(5)], axis=1)
    kw = dict(client="local", random_state=0)
    if kind == "mf":
        est = MatrixFactorization(max_iter=2, n_components=2, **kw)
        data = (np.column_stack([rng.integers(0, 10, 200), rng.integers(0, 8, 200),
                                 rng.integers(1, 6, 200)]).astype(float),)
        bad = [(np.array([[0, 1, np.inf], [1, 2, 3.0]]),)]
        test = data[0][:, :2]
    elif kind == "lda":
        est = dask_ps.LatentDirichletAllocation(n_components=2, max_iter=2, **kw)
        data, test = (X,), X
        bad = [(other - 1,)]  # negative counts, 5 other columns
    else:
        est = {"lr": lambda: LogisticRegression(max_iter=2, **kw),
               "fm": lambda: dask_ps.FactorizationMachineClassifier(n_components=2, max_iter=2,
                                                                    **kw),
               "gbdt": lambda: dask_ps.GBDTClassifier(n_estimators=2, **kw)}[kind]()
        data, test = (X, y), X
        bad = [(other, np.zeros(120))]  # one class, 5 other columns
    est.fit(*data)
    out = est.transform(test) if kind == "lda" else est.predict(test)
    before = _fitted_state(est)
    if hasattr(est, "feature_names_in_"):
        assert list(before["feature_names_in_"]) == names
    if kind in ("lr", "fm", "lda"):
        bad.append(bad[0])  # partial_fit too
    for call, args in zip([est.fit, getattr(est, "partial_fit", None)], bad):
        with pytest.raises((ValueError, TypeError)):
            call(*args)
        _assert_same_state(est, before)
        np.testing.assert_array_equal(est.transform(test) if kind == "lda"
                                      else est.predict(test), out)
    # an unfitted estimator whose first fit (or partial_fit: LogisticRegression's, an
    # available_if, inherited by FM, set n_features_in_ and feature_names_in_ then failed)
    # fails stays unfitted
    for name in ("fit", "partial_fit") if kind in ("lr", "fm", "lda") else ("fit",):
        fresh = clone(est)
        with pytest.raises((ValueError, TypeError)):
            getattr(fresh, name)(*bad[0])
        assert vars(fresh) == vars(clone(est)), name


def test_a_failed_fit_restores_even_on_keyboard_interrupt():
    from dask_ps.algorithms._base import keeps_state_on_failure

    class Stub:
        @keeps_state_on_failure
        def fit(self, stop):
            self.n_features_in_, self.extra_ = 5, 1
            raise stop

    s = Stub()
    s.n_features_in_ = 8
    for stop in (KeyboardInterrupt(), RuntimeError("x")):
        with pytest.raises(type(stop)):
            s.fit(stop)
        assert vars(s) == {"n_features_in_": 8}
    assert keeps_state_on_failure(Stub.fit) is Stub.fit  # not wrapped twice
    import inspect
    assert "eval_set" in inspect.signature(LogisticRegression.fit).parameters
    assert LogisticRegression.fit.__doc__.startswith("Fit on")


def test_callbacks_see_each_epoch_and_may_stop_the_fit():
    X, y = _data(LogisticRegression())
    seen = []

    def cb(record):
        seen.append(record["epoch"])
        return record["epoch"] == 3

    model = LogisticRegression(max_iter=8, callbacks=[cb], client="local", random_state=0,
                               tol=1e-12).fit(X, y)
    assert seen == [1, 2, 3] and model.n_iter_[0] == 3


def test_history_fields_mean_the_same_everywhere():
    for est in ESTIMATORS:
        est = clone(est).set_params(client="local")
        est.fit(*_data(est))
        records = [h for h in est.history_ if "event" not in h]
        assert [h["epoch"] for h in records] == list(range(1, len(records) + 1))
        for h in records:
            assert {"epoch", "loss", "time", "epoch_time", "bytes"} <= set(h), h
        times = [h["time"] for h in records]
        assert times == sorted(times)  # since the start of the fit
        # an epoch ends its epoch_time after the one before (epochs of one job were all
        # stamped with the job's end)
        for before, h in zip(records, records[1:]):
            assert h["time"] - before["time"] >= h["epoch_time"] * (1 - 1e-9) > 0, h


def test_eval_set_is_scored_every_epoch(client2):
    X, y = _data(LogisticRegression())
    model = LogisticRegression(max_iter=3, client=client2, random_state=0, tol=1e-12)
    model.fit(X[:300], y[:300], eval_set=[(X[300:], y[300:])])
    for h in model.history_:
        assert 0.5 <= h["eval_auc"] <= 1 and h["eval_log_loss"] > 0
        assert 0 <= h["eval_accuracy"] <= 1
    with pytest.raises(ValueError, match=r"eval_set\[0\]: X has 5 features"):
        model.fit(X, y, eval_set=[(X[:, :5], y)])
    # an eval set of no rows is named, in memory and as dask data (partition's "data has no
    # rows" named no eval set)
    import dask.array as da

    coef = model.coef_.copy()
    for empty in ((X[:0], y[:0]), (da.from_array(X[:0].toarray(), chunks=(0, X.shape[1])),
                                   da.from_array(y[:0]))):
        with pytest.raises(ValueError, match=r"^eval_set\[1\]: X has no rows \(0 samples\)"):
            model.fit(X, y, eval_set=[(X[300:], y[300:]), empty])
        np.testing.assert_array_equal(model.coef_, coef)


def test_an_eval_set_of_unknown_chunk_sizes_is_taken_as_the_training_data_is(client2):
    """A dask eval set takes what the training data takes: a dask dataframe (partitions of
    unknown lengths, learnt once partitioned) is scored as the same rows in memory, and named
    when found empty; a dask array of unknown chunk sizes, which a fit on a cluster refuses
    for X too, is refused naming the eval set, its X or y, and what to call (it said "the
    dask arrays need known chunk sizes", naming no eval set); after that call it is scored."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    X, y = _data(LogisticRegression())
    X = X.toarray()
    kw = dict(max_iter=2, client=client2, random_state=0, tol=1e-12)
    Xv, yv = X[300:], y[300:]
    ref = LogisticRegression(**kw).fit(X[:300], y[:300], eval_set=[(Xv, yv)]).history_
    frame = dd.from_pandas(pd.DataFrame(Xv, columns=[f"x{j}" for j in range(20)]).assign(
        label=yv), npartitions=3)
    features = frame.drop(columns="label")
    got = LogisticRegression(**kw).fit(X[:300], y[:300],
                                       eval_set=[(features, frame.label)]).history_
    for key in ("eval_log_loss", "eval_accuracy", "eval_auc"):
        assert [h[key] for h in got] == pytest.approx([h[key] for h in ref], rel=1e-9), key
    none = frame[frame.x0 > 100]  # no row, known only once computed
    model = LogisticRegression(**kw)
    with pytest.raises(ValueError, match=r"^eval_set\[1\]: X has no rows \(0 samples\)"):
        model.fit(X[:300], y[:300], eval_set=[(Xv, yv), (none.drop(columns="label"),
                                                         none.label)])
    assert not hasattr(model, "coef_")
    dX, dy = da.from_array(Xv, chunks=(40, 20)), da.from_array(yv, chunks=40)
    keep = dX[:, 0] >= 0  # boolean indexing leaves the row counts unknown
    unknown = {"X": (dX[keep], dy[keep]), "y": (Xv, dy[keep]),
               "X ": (features.to_dask_array(), frame.label.to_dask_array())}
    for name, pair in unknown.items():
        with pytest.raises(ValueError, match=rf"^eval_set\[1\]: {name.strip()} is a dask "
                                             rf"array of unknown chunk sizes .* call "
                                             rf"{name.strip()}\.compute_chunk_sizes\(\) first, "
                                             rf"or to_dask_array\(lengths=True\)"):
            model.fit(X[:300], y[:300], eval_set=[(Xv, yv), pair])
        assert not hasattr(model, "coef_"), name
    with pytest.raises(ValueError, match=r"known chunk sizes; call compute_chunk_sizes\(\)"):
        model.fit(dX[keep], dy[keep])  # the training X alike
    known = LogisticRegression(**kw).fit(X[:300], y[:300], eval_set=[(
        dX[keep].compute_chunk_sizes(), dy[keep].compute_chunk_sizes())]).history_
    ref = LogisticRegression(**kw).fit(X[:300], y[:300], eval_set=[(
        Xv[Xv[:, 0] >= 0], yv[Xv[:, 0] >= 0])]).history_
    assert [h["eval_log_loss"] for h in known] == pytest.approx(
        [h["eval_log_loss"] for h in ref], rel=1e-9)


def test_default_checkpoint_snapshots_and_cleans_up(tmp_path, monkeypatch):
    """checkpoint="auto": a temporary snapshot folder, gone after the fit."""
    import dask

    X, y = _data(LogisticRegression())
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        LogisticRegression(max_iter=2, client="local", random_state=0).fit(X, y)
    assert list(tmp_path.iterdir()) == []


def test_resume_continues_from_the_checkpoint(tmp_path):
    X, y = _data(LogisticRegression())
    url = str(tmp_path / "ck")
    kw = dict(solver="adagrad", client="local", random_state=0, tol=1e-12, checkpoint=url)
    full = LogisticRegression(max_iter=4, **kw).fit(X, y)
    LogisticRegression(max_iter=2, **dict(kw, checkpoint=str(tmp_path / "ck2"))).fit(X, y)
    resumed = LogisticRegression(max_iter=4, resume=True,
                                 **dict(kw, checkpoint=str(tmp_path / "ck2"))).fit(X, y)
    np.testing.assert_allclose(resumed.coef_, full.coef_, rtol=1e-12)
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3, 4]


def test_resume_takes_the_same_labels_in_another_dtype(tmp_path):
    """Classes keep y's dtype; the fit id records numeric classes as floats, so a fit on
    0/1 ints resumes one on 0./1. floats (and checkpoints of earlier versions, whose
    classes were all floats, stay resumable)."""
    X, y = _data(LogisticRegression())
    url = str(tmp_path / "ck")
    kw = dict(solver="adagrad", client="local", random_state=0, tol=1e-12, checkpoint=url)
    LogisticRegression(max_iter=2, **kw).fit(X, y.astype(np.float64))
    resumed = LogisticRegression(max_iter=3, resume=True, **kw).fit(X, y.astype(np.int64))
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3]
    assert resumed.classes_.dtype == np.int64


def test_resume_refuses_a_checkpoint_of_another_fit_before_restoring(tmp_path):
    """Another feature count, number of classes, rank or number of topics: the checkpoint's
    tables are not this fit's. Refused, naming the table and how it differs, before anything
    is restored or saved (MatrixFactorization at another rank had its kernels write past
    the restored table's rows: a double free; LogisticRegression an IndexError; LDA a key
    outside its table)."""
    from dask_ps import LatentDirichletAllocation, MatrixFactorization
    from dask_ps.model import format as ck

    X, y = _data(LogisticRegression())
    url = str(tmp_path / "lr")
    kw = dict(client="local", random_state=0, checkpoint=url, resume=True)
    LogisticRegression(max_iter=2, **kw).fit(X, y)
    versions = ck.list_versions(url)
    with pytest.raises(ValueError, match=r"holds another fit: n_features 20 \(this fit's: "
                                         r"10\); table 'w': rows 21 \(this fit's: 11\)"):
        LogisticRegression(max_iter=4, **kw).fit(X[:, :10], y)
    with pytest.raises(ValueError, match=r"table 'w': columns"):
        LogisticRegression(max_iter=4, **kw).fit(X, np.arange(len(y)) % 3)
    # AdaGrad's worker step keeps a table of FTRL's layout: only the fit's record tells
    # (the checkpoint's z and n were restored as AdaGrad's weights and accumulators)
    with pytest.raises(ValueError, match=r"holds another fit: solver 'ftrl' \(this fit's: "
                                         r"'adagrad'\)"):
        LogisticRegression(max_iter=4, solver="adagrad", **kw).fit(X, y)
    assert ck.list_versions(url) == versions  # nothing saved
    resumed = LogisticRegression(max_iter=4, **kw).fit(X, y)  # the same fit still resumes
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3, 4]

    # hashed tables hold any key: another feature count is seen by the fit's description
    fkw = dict(client="local", random_state=0, checkpoint=str(tmp_path / "fm"), resume=True,
               max_iter=2)
    dask_ps.FactorizationMachineClassifier(**fkw).fit(X, y)
    with pytest.raises(ValueError, match=r"holds another fit: n_features 20 \(this fit's: "
                                         r"10\)"):
        dask_ps.FactorizationMachineClassifier(**fkw).fit(X[:, :10], y)
    with pytest.raises(ValueError, match=r"estimator 'FactorizationMachineClassifier' \(this "
                                         r"fit's: 'LogisticRegression'\)"):
        LogisticRegression(**fkw).fit(X, y)

    rng = np.random.default_rng(0)
    triples = np.column_stack([rng.integers(0, 30, 400), rng.integers(0, 20, 400),
                               rng.uniform(1, 5, 400)])
    mkw = dict(client="local", random_state=0, checkpoint=str(tmp_path / "mf"), resume=True,
               max_iter=2)
    MatrixFactorization(n_components=4, **mkw).fit(triples)
    with pytest.raises(ValueError, match=r"table '(user|item)': columns 5 \(this fit's: 9\)"):
        MatrixFactorization(n_components=8, **mkw).fit(triples)

    counts = sp.random(40, 30, density=0.2, random_state=0, format="csr")
    counts.data = np.ceil(counts.data * 5)
    lkw = dict(client="local", random_state=0, checkpoint=str(tmp_path / "lda"), resume=True,
               max_iter=2)
    LatentDirichletAllocation(n_components=3, **lkw).fit(counts)
    with pytest.raises(ValueError, match=r"table 'nwk': rows"):
        LatentDirichletAllocation(n_components=5, **lkw).fit(counts)


@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
def test_resume_takes_the_newest_version_of_this_fit_in_a_shared_folder(tmp_path):
    """A fit saved into a folder where another fit saved since: resume=True refused it
    ("version 6 holds another fit") though the folder held its own versions. It resumes
    from the newest version of this fit now, warning which versions it skipped and what
    they hold; a fit none of whose versions is there is refused naming the folder and
    what each version holds, nothing saved."""
    from dask_ps.model import format as ck

    X, y = _data(LogisticRegression())
    url = str(tmp_path / "ck")
    kw = dict(client="local", random_state=0, checkpoint=url, solver="adagrad")
    mine = LogisticRegression(max_iter=2, **kw).fit(X, y)
    own = ck.list_versions(url)[0]
    LogisticRegression(max_iter=2, **kw).fit(X[:, :10], y)  # another fit, saved since
    versions = ck.list_versions(url)[0]
    others = [v for v in versions if v not in own][::-1]
    said = f"{', '.join(map(str, others[:-1]))} and {others[-1]}: each"
    with pytest.warns(UserWarning, match=rf"versions {said} holds another fit: n_features "
                                         rf"10 \(this fit's: 20\); table 'w': rows 11 "
                                         rf"\(this fit's: 21\); skipped, using version "
                                         rf"{own[-1]}, the newest of this fit") as seen:
        resumed = LogisticRegression(max_iter=3, resume=True, **kw).fit(X, y)
    assert __file__ in [w.filename for w in seen]
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3]
    assert resumed.history_[:2] == mine.history_[:2]  # its first two epochs: restored
    versions = ck.list_versions(url)[0]
    with pytest.raises(ValueError, match=rf"resume: checkpoint {re.escape(repr(url))} holds no "
                                         rf"version of this fit: versions "
                                         rf"{', '.join(map(str, versions[-1:] + own[:0:-1]))} "
                                         rf"and {own[0]}: each holds another fit: "
                                         rf"n_features 20 \(this fit's: 7\).*; versions "
                                         rf"{said} holds another fit: n_features 10"):
        LogisticRegression(max_iter=3, resume=True, **kw).fit(X[:, :7], y)
    assert ck.list_versions(url)[0] == versions  # nothing saved


@pytest.mark.parametrize("make", [LogisticRegression, dask_ps.FactorizationMachineClassifier],
                         ids=["lr", "fm"])
def test_resume_refuses_a_checkpoint_of_another_intercept_or_hashing(tmp_path, monkeypatch,
                                                                    make):
    """fit_intercept and hashing change what the tables hold, not their shape: a
    fit_intercept=False fit resumed a fit_intercept=True checkpoint and kept its intercept
    (intercept_ 1.42, predictions shifted by it), and a hashed fit (n_hashed_features the
    feature count) took an unhashed checkpoint's weights as its buckets'. Refused before
    anything is restored; a checkpoint that does not record them still resumes."""
    from dask_ps.algorithms import _base
    from dask_ps.model import format as ck

    X, y = _data(LogisticRegression())
    url = str(tmp_path / "ck")
    kw = dict(client="local", random_state=0, checkpoint=url, resume=True, max_iter=2)
    make(**kw).fit(X, y)
    versions = ck.list_versions(url)
    with pytest.raises(ValueError, match=r"holds another fit: fit_intercept 'True' \(this "
                                         r"fit's: 'False'\)"):
        make(**dict(kw, fit_intercept=False)).fit(X, y)
    with pytest.raises(ValueError, match=r"holds another fit: n_hashed_features 'None' "
                                         r"\(this fit's: '20'\)"):
        make(**dict(kw, n_hashed_features=20)).fit(X, y)
    assert ck.list_versions(url) == versions  # nothing saved
    fresh = make(**dict(kw, fit_intercept=False, resume=False, checkpoint=None)).fit(X, y)
    np.testing.assert_array_equal(fresh.intercept_, 0.0)

    old = dict(kw, checkpoint=str(tmp_path / "old"))
    monkeypatch.setattr(_base, "TABLE_PARAMS", ())  # written before they were recorded
    make(**old).fit(X, y)
    monkeypatch.undo()
    resumed = make(**dict(old, max_iter=3)).fit(X, y)
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3]


@pytest.mark.parametrize("name", ["lr", "mf", "lda"])
def test_resume_refuses_a_checkpoint_past_max_iter(tmp_path, name):
    """A checkpoint at epoch 4 resumed with max_iter=2 returned the 4-epoch model, while
    history_ and n_iter_ said 2 epochs. Refused before anything is restored or saved, naming
    the checkpoint's epoch and max_iter; GBDT keeps the first trees instead (its own test)."""
    from dask_ps import LatentDirichletAllocation
    from dask_ps.exceptions import OptionError
    from dask_ps.model import format as ck

    url = str(tmp_path / "ck")
    kw = dict(client="local", random_state=0, checkpoint=url, resume=True)
    if name == "lr":
        make, data, unit = LogisticRegression, _data(LogisticRegression()), "epoch"
        kw.update(solver="sgd", tol=1e-12)
    elif name == "mf":
        make, data, unit = MatrixFactorization, _data(MatrixFactorization()), "epoch"
    else:
        counts = sp.random(40, 30, density=0.2, random_state=0, format="csr")
        counts.data = np.ceil(counts.data * 5)
        make, data, unit = LatentDirichletAllocation, (counts,), "iteration"
        kw.update(n_components=3, checkpoint_every=1)
    make(max_iter=4, **kw).fit(*data)
    versions = ck.list_versions(url)
    model = make(max_iter=2, **kw)
    with pytest.raises(OptionError, match=rf"^resume: checkpoint '.*' version \d+ is at {unit} "
                                          rf"4, past the 2 {unit}s of this fit \(max_iter\)"
                                          rf".*max_iter=4 or more.*resume=False"):
        model.fit(*data)
    assert not hasattr(model, "history_")
    assert ck.list_versions(url) == versions  # nothing saved
    same = make(max_iter=4, **kw).fit(*data)  # at the checkpoint's epoch: nothing left to run
    assert [h["epoch"] for h in same.history_ if "epoch" in h] == [1, 2, 3, 4]


@pytest.mark.parametrize("name", ["LogisticRegression", "FactorizationMachineClassifier",
                                  "MatrixFactorization", "LatentDirichletAllocation",
                                  "GBDTClassifier", "GBDTRegressor"])
@pytest.mark.parametrize("checkpoint", [None, "auto"])
def test_resume_without_a_checkpoint_url_is_refused(name, checkpoint, tmp_path):
    """resume=True with checkpoint=None (or "auto", a temporary folder deleted after each
    fit) was ignored without a word: the fit started afresh. Refused before any data is
    read, as the command line refused --resume auto without --checkpoint."""
    model = getattr(dask_ps, name)(client="local", checkpoint=checkpoint, resume=True)
    with pytest.raises(NoCheckpointToResumeError,  # a ValueError
                       match=rf"^resume=True needs a checkpoint URL to resume "
                             rf"from, but checkpoint={checkpoint!r} "):
        model.fit(object(), object())
    model.set_params(checkpoint=str(tmp_path / "ck"))
    model._validate()  # a URL: resume=True is fine


def test_partial_fit_refuses_resume(tmp_path):
    """partial_fit with resume=True restored the checkpoint's finished one-epoch fit at
    every call and trained nothing on the batch (LR's coefficients after 4 batches: 1.20
    against 1.93 for the last one); a fitted LDA's resume was refused as another fit, or
    trained nothing. Refused, the model left as it was; resume=False goes on."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X @ np.arange(1, 6) > 0).astype(int)
    for est in (LogisticRegression(client="local", checkpoint=str(tmp_path / "lr"),
                                   resume=True, random_state=0),
                dask_ps.FactorizationMachineClassifier(
                    client="local", checkpoint=str(tmp_path / "fm"), resume=True, n_components=2,
                    random_state=0)):
        with pytest.raises(ValueError, match="partial_fit trains on its batch from the model "
                                             "in memory and does not resume"):
            est.partial_fit(X, y, classes=[0, 1])
        assert not hasattr(est, "coef_")
        est.set_params(resume=False).partial_fit(X[:200], y[:200], classes=[0, 1])
        first = est.coef_.copy()
        est.partial_fit(X[200:], y[200:])
        assert not np.array_equal(first, est.coef_) and len(est.history_) == 2
    docs = rng.poisson(1.0, size=(30, 20))
    lda = dask_ps.LatentDirichletAllocation(n_components=2, max_iter=2, client="local",
                                            checkpoint=str(tmp_path / "lda"), resume=True,
                                            random_state=0).fit(docs)  # a fit resumes
    before = lda.components_.copy()
    with pytest.raises(ValueError, match="does not resume"):
        lda.partial_fit(docs)
    np.testing.assert_array_equal(before, lda.components_)
    assert lda.set_params(resume=False).partial_fit(docs).n_iter_ == 4


@pytest.mark.parametrize("make", [lambda: LogisticRegression(max_iter=2, client="local"),
                                  lambda: dask_ps.FactorizationMachineClassifier(
                                      max_iter=2, client="local")], ids=["lr", "fm"])
def test_dask_input_holding_nan_is_refused_at_predict_naming_its_row(make):
    """NumPy input is refused by scikit-learn ("Input X contains NaN"); dask input gave NaN
    probabilities silently. Its chunks are checked too, naming the row in the whole X."""
    import dask.array as da

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8))
    model = make().fit(X, (X[:, 0] > 0).astype(int))
    np.testing.assert_allclose(model.predict_proba(da.from_array(X, chunks=50)).compute(),
                               model.predict_proba(X))
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[137, 3] = bad
        with pytest.raises(ValueError, match=rf"holds {bad} at row 137, column 3"):
            model.predict_proba(da.from_array(Xb, chunks=50)).compute()
        with pytest.raises(ValueError, match="row 137"):
            model.predict(da.from_array(Xb, chunks=50)).compute()


def test_every_public_name_is_documented():
    for name in dask_ps.__all__:
        obj = getattr(dask_ps, name)
        if callable(obj) or isinstance(obj, type):
            assert (obj.__doc__ or "").strip(), name


@pytest.mark.parametrize("est", [LogisticRegression(max_iter=50, checkpoint_every=40),
                                 MatrixFactorization(max_iter=50, checkpoint_every=40)])
@pytest.mark.parametrize("where, message", [
    ("notes.txt", r"checkpoint '.*notes\.txt' is a file"),
    ("notes.txt/ck/sub", r"checkpoint '.*sub': '.*notes\.txt' is a file, so no folder"),
    ("link", r"checkpoint '.*link' is a link to '.*nowhere', which does not exist")])
def test_a_checkpoint_url_where_no_folder_can_be_is_refused_before_training(tmp_path, est,
                                                                            where, message):
    """Not at the first save, 40 epochs later: the fit stops before its first epoch, naming
    the URL and what is in the way, and the file is left as it was."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    records = []
    est.set_params(client="local", checkpoint=str(tmp_path / where),
                   callbacks=[records.append])
    with pytest.raises(ValueError, match=message):
        est.fit(*_data(est))
    assert records == [] and (tmp_path / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("url, error, message", [
    ("/proc/dask-ps-ck", OSError, r"checkpoint '/proc/dask-ps-ck': no folder can be made in "
                                  r"'/proc' \("),
    ("nosuch://ck", OptionError, r"^checkpoint nosuch://ck: unknown protocol 'nosuch://' "
                                 r"\(fsspec knows ")])
def test_a_checkpoint_folder_that_cannot_be_made_is_named_before_training(url, error,
                                                                          message):
    """A bare "[Errno 2] No such file or directory: '/proc/dask-ps-ck'" at the first save,
    or "Protocol not known: nosuch", named neither the checkpoint nor its URL."""
    records = []
    est = LogisticRegression(client="local", max_iter=3, checkpoint=url,
                             callbacks=[records.append])
    with pytest.raises(error, match=message):
        est.fit(*_data(est))
    assert records == []


@pytest.mark.parametrize("name", ["LogisticRegression", "FactorizationMachineClassifier",
                                  "GBDTClassifier", "LatentDirichletAllocation"])
def test_every_estimator_refuses_column_indices_out_of_the_matrix(name):
    """scipy builds a CSR of any column indices without checking them. A fitted GBDT's
    prediction read past its bins on one of 10^8 (a segfault), LDA's transform too, and
    -1 changed LDA's perplexity silently (28.06 against 10.44); a linear model's fit dropped
    them. Each is refused, naming the row (of the whole array for a dask chunk: GBDT's
    prediction named the row in the chunk, 3 for 23), in fit and in what follows it."""
    import dask
    import dask.array as da

    rng = np.random.default_rng(0)
    n, d = 40, 12
    X = sp.csr_matrix(rng.integers(0, 3, size=(n, d)).astype(float))
    y = np.arange(n) % 2
    est = getattr(dask_ps, name)(**({"n_components": 2} if "Latent" in name else
                                    {"n_estimators": 2} if "GBDT" in name else {"max_iter": 1}),
                                 client="local")
    lda = "Latent" in name
    est.fit(X) if lda else est.fit(X, y)
    after = ([est.transform, est.perplexity, est.score] if lda else
             [est.predict, est.predict_proba])
    for bad_index, message in [(d, rf"column key {d} at row 3 is not below n_features"),
                               (-1, r"column key -1 at row 3 is negative"),
                               (10**8, r"column key 100000000 at row 3")]:
        bad = X.copy()
        bad.indices[bad.indptr[3]] = bad_index
        with pytest.raises(ValueError, match=message):
            est.fit(bad) if lda else est.fit(bad, y)
        for method in after:
            with pytest.raises(ValueError, match=message):
                method(bad)
        if lda:
            continue
        # a dask array whose second chunk (rows 20..39) holds the bad row 23
        late = X.copy()
        late.indices[late.indptr[23]] = bad_index
        blocks = [da.from_delayed(dask.delayed(_rows(late, a, a + 20)), shape=(20, d),
                                  dtype=float, meta=sp.csr_matrix((0, d))) for a in (0, 20)]
        for method in (est.predict_proba, est.predict):
            with pytest.raises(ValueError, match=message.replace("row 3", "row 23")):
                method(da.concatenate(blocks)).compute()
        with pytest.raises(ValueError, match=message.replace("row 3", "row 23")):
            est.score(da.concatenate(blocks), y)


def _rows(M, a: int, b: int) -> sp.csr_matrix:
    """Rows ``a:b`` of a CSR ``M`` as they are (scipy's row slice drops bad indices)."""
    lo, hi = M.indptr[a], M.indptr[b]
    return sp.csr_matrix((M.data[lo:hi], M.indices[lo:hi], M.indptr[a:b + 1] - lo),
                         shape=(b - a, M.shape[1]))


def test_lbfgs_says_it_neither_checkpoints_nor_resumes(tmp_path):
    """"lbfgs" keeps its state on the driver: a checkpoint URL or resume=True were ignored
    without a word (resume=True on another solver's checkpoint ran a fresh fit)."""
    X, y = _data(LogisticRegression())
    url = str(tmp_path / "ck")
    LogisticRegression(max_iter=2, client="local", checkpoint=url).fit(X, y)  # ftrl's
    for kw in (dict(checkpoint=url), dict(checkpoint=url, resume=True)):
        with pytest.warns(UserWarning, match="lbfgs.*writes no checkpoint and resumes from "
                                             "none") as said:
            LogisticRegression(solver="lbfgs", max_iter=500, client="local", **kw).fit(X, y)
        assert said[0].filename == __file__  # the caller's line, not the library's
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the default "auto" says nothing
        LogisticRegression(solver="lbfgs", max_iter=500, client="local").fit(X, y)


def test_a_csr_whose_row_pointer_decreases_is_refused():
    """scipy builds ``csr_matrix((data, indices, [0, 3, 1, 2]))`` without a word: its row 0
    then reads past the others' entries. LogisticRegression's fit aborted with "double free
    or corruption", predict_proba segfaulted. Refused, naming the row."""
    X = sp.csr_matrix((np.ones(3), np.array([0, 1, 5]), np.array([0, 3, 1, 2])), shape=(3, 6))
    good = sp.csr_matrix(np.eye(4, 6))
    y = np.array([0, 1, 0, 1])
    for est in (LogisticRegression(max_iter=1, client="local"),
                dask_ps.GBDTClassifier(n_estimators=2, client="local")):
        with pytest.raises(ValueError, match=r"not a valid CSR matrix: its row pointer "
                                             r"\(indptr\) decreases.*at row 1"):
            est.fit(X, y[:3])
        est.fit(good, y)
        with pytest.raises(ValueError, match=r"row pointer \(indptr\) decreases"):
            est.predict_proba(X)


def test_dask_csr_partitions_are_checked_where_they_land(client2):
    """On a cluster a dask array's chunks become partitions as they are: GBDT's fit trained
    on a key of -1 silently, and GBDT's and LDA's fits failed on a key of n_features with an
    IndexError from their tables. Each partition is checked where it lands, naming the row
    in the whole array (47, not 7, its row in the third chunk), as are the values that are
    not finite of LogisticRegression's and the factorization machine's partitions."""
    import dask
    import dask.array as da

    rng = np.random.default_rng(0)
    n, d = 60, 6
    X = sp.csr_matrix(rng.integers(0, 3, size=(n, d)).astype(float))
    y = np.arange(n) % 2
    dy = da.from_array(y, chunks=20)
    linear = (LogisticRegression(max_iter=1, client=client2),
              dask_ps.FactorizationMachineClassifier(max_iter=1, client=client2))
    for bad_index in (-1, d):
        bad = X.copy()
        bad.indices[bad.indptr[47]] = bad_index
        dX = da.concatenate([da.from_delayed(dask.delayed(_rows(bad, a, a + 20)), shape=(20, d),
                                             dtype=float, meta=sp.csr_matrix((0, d)))
                             for a in (0, 20, 40)])
        for est in (dask_ps.GBDTClassifier(n_estimators=2, client=client2),
                    dask_ps.LatentDirichletAllocation(n_components=2, client=client2),
                    *linear):
            with pytest.raises(ValueError, match=rf"column key {bad_index} at row 47 "):
                est.fit(dX) if isinstance(est, dask_ps.LatentDirichletAllocation) else \
                    est.fit(dX, dy)
    for value in (np.nan, np.inf):
        dense = rng.normal(size=(n, d))
        dense[47, 2] = value
        for dX in (da.from_array(dense, chunks=(20, d)),
                   da.from_array(sp.csr_matrix(dense), chunks=(20, d), asarray=False)):
            for est in linear:
                with pytest.raises(ValueError, match=rf"value {value} at row 47, column 2 is "
                                                     r"not finite"):
                    est.fit(dX, dy)


def test_a_dask_chunk_wider_than_its_array_is_refused_in_predict():
    """A dask array declaring 6 columns whose chunk holds 10^6 + 1: a linear model's
    prediction read past its weights (a segfault)."""
    import dask
    import dask.array as da

    X = sp.csr_matrix(np.eye(4, 6))
    model = LogisticRegression(max_iter=1, client="local").fit(X, [0, 1, 0, 1])
    wide = sp.csr_matrix((np.ones(1), np.array([10**6]), np.array([0, 1])), shape=(1, 10**6 + 1))
    dX = da.from_delayed(dask.delayed(wide), shape=(1, 6), dtype=float,
                         meta=sp.csr_matrix((0, 6)))
    with pytest.raises(ValueError, match=r"a chunk of X from row 0 has 1000001 columns, the "
                                         r"model 6"):
        model.predict_proba(dX).compute()


def test_gbdt_adds_up_repeated_entries_of_a_csr_in_predict_as_in_fit():
    """A CSR may store one cell twice (scipy adds them up when densified): GBDT's fit did,
    its predict took one of them (a classifier's probabilities off by up to 1)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0.5).astype(int)  # half of a value crosses the split
    model = dask_ps.GBDTClassifier(n_estimators=5, client="local").fit(X, y)
    cols = np.tile([0, 1, 2, 0], 200)  # the cell (i, 0) twice, apart
    vals = np.column_stack([X[:, 0] / 2, X[:, 1], X[:, 2], X[:, 0] / 2]).ravel()
    dup = sp.csr_matrix((vals, cols, np.arange(0, 801, 4)), shape=(200, 3))
    assert not dup.has_canonical_format
    np.testing.assert_allclose(model.predict_proba(dup), model.predict_proba(X), atol=1e-12)


def test_a_partial_fit_draws_one_seed_from_a_random_state_as_fit_does():
    # FM's training asks _seed() twice (orders, init); LogisticRegression.partial_fit, an
    # available_if that FM inherits, was not one_seed_per_call: 2 draws (2 seeds) per call
    X, y = _data(LogisticRegression())
    for name in ("fit", "partial_fit"):
        rs = np.random.RandomState(0)
        est = dask_ps.FactorizationMachineClassifier(n_components=2, max_iter=1, client="local",
                                                     random_state=rs)
        getattr(est, name)(X, y, **({"classes": np.unique(y)} if name == "partial_fit"
                                    else {}))
        expected = np.random.RandomState(0)
        expected.randint(np.iinfo(np.int32).max)  # one draw
        assert rs.randint(2**30) == expected.randint(2**30), name
