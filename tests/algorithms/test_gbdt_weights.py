"""GBDTClassifier and GBDTRegressor with ``sample_weight``: integer weights fit as repeated
rows, weight 0 as a dropped row, weights that balance classes help where the metric is
weighted, bad weights are refused naming ``sample_weight``, and weights of dask arrays travel
with their partitions on a LocalCluster."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.metrics import balanced_accuracy_score, log_loss

from dask_ps import GBDTClassifier, GBDTRegressor
from dask_ps.exceptions import DataError

pytestmark = pytest.mark.timeout(900)

# min_split_gain > 0: a pure node's splits all gain 0 up to rounding, which the quantized
# sums of w-weighted and w-times-repeated rows round differently (the tie then breaks apart)
KW = dict(n_estimators=12, max_leaf_nodes=8, min_samples_leaf=1, min_split_gain=1e-3,
          client="local", random_state=0, progress=False)


def _flat(model):
    return {k: np.asarray(v) for k, v in model.booster_._asdict().items()}


def _small_values(n=600, seed=0):
    """Features of 5 values each (every value its own bin, however often rows repeat), a
    noisy binary, 3-class and real label, and integer weights 0..3."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(n, 4)).astype(np.float64)
    X[rng.random(n) < 0.1, 3] = np.nan
    score = X[:, 0] + X[:, 1] * rng.random(n)
    labels = {"binary": (score > 3).astype(np.int64),
              "multiclass": np.digitize(score + rng.normal(0, 0.5, n), [2.5, 4.0]),
              "regression": 2 * X[:, 0] + X[:, 1] - X[:, 2] + rng.normal(size=n)}
    return X, labels, rng.integers(0, 4, size=n).astype(np.float64)


def _out(model, X):
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_integer_weights_fit_as_repeated_rows(task):
    X, labels, w = _small_values()
    y = labels[task]
    Est = GBDTRegressor if task == "regression" else GBDTClassifier
    reps = w.astype(np.int64)
    weighted = Est(**KW).fit(X, y, sample_weight=w)
    repeated = Est(**KW).fit(np.repeat(X, reps, axis=0), np.repeat(y, reps))
    np.testing.assert_allclose(weighted.booster_.base_score, repeated.booster_.base_score,
                               rtol=1e-12)
    a, b = _flat(weighted), _flat(repeated)
    for key in ("feature", "threshold_bin", "left", "right"):  # the same trees
        np.testing.assert_array_equal(a[key], b[key])
    # the quantization steps differ (the largest weight's gradients set them): ~1e-6 apart
    np.testing.assert_allclose(_out(weighted, X), _out(repeated, X), atol=1e-4)
    # the training loss of history_ is the weighted mean
    assert weighted.history_[-1]["loss"] == pytest.approx(repeated.history_[-1]["loss"],
                                                          rel=1e-4)
    unweighted = Est(**KW).fit(X, y)
    assert np.abs(_out(unweighted, X) - _out(weighted, X)).max() > 1e-2


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
@pytest.mark.parametrize("sparse", [False, True])
def test_zero_weights_are_dropped_rows(task, sparse):
    """The same trees, bit for bit, as without the rows (every row in the bin sample); a
    zero-weight row of an extreme label does not coarsen the others' gradients."""
    X, labels, w = _small_values()
    y = labels[task].astype(np.float64)
    Est = GBDTRegressor if task == "regression" else GBDTClassifier
    w = np.where(w > 0, 1.0 + (w == 3), 0.0)  # 0, 1 and 2
    if task == "regression":
        y[np.flatnonzero(w == 0)[:3]] = 1e6
    keep = w > 0
    M = sp.csr_matrix(np.nan_to_num(X)) if sparse else X
    weighted = Est(**KW).fit(M, y, sample_weight=w)
    dropped = Est(**KW).fit(M[keep], y[keep], sample_weight=w[keep])
    a, b = _flat(weighted), _flat(dropped)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    np.testing.assert_array_equal(_out(weighted, M), _out(dropped, M))


def test_balancing_weights_beat_unweighted_on_an_imbalanced_problem():
    X, y = make_classification(6000, n_features=10, n_informative=4, weights=[0.95, 0.05],
                               flip_y=0.02, random_state=3)
    X_tr, y_tr, X_te, y_te = X[:4000], y[:4000], X[4000:], y[4000:]

    def balanced(t):
        return (t.shape[0] / (2.0 * np.bincount(t)))[t]

    kw = dict(n_estimators=30, max_leaf_nodes=15, client="local", random_state=0,
              progress=False)
    plain = GBDTClassifier(**kw).fit(X_tr, y_tr)
    weighted = GBDTClassifier(**kw).fit(X_tr, y_tr, sample_weight=balanced(y_tr))
    # the initial score: the log-odds of the classes' shares of the weight (even)
    assert abs(weighted.booster_.base_score[0]) < 1e-12
    scores = [balanced_accuracy_score(y_te, m.predict(X_te)) for m in (plain, weighted)]
    assert scores[1] > scores[0] + 0.05, scores
    losses = [log_loss(y_te, m.predict_proba(X_te), sample_weight=balanced(y_te))
              for m in (plain, weighted)]
    assert losses[1] < losses[0], losses


def test_eval_sample_weight_weights_the_eval_loss_and_early_stopping():
    X, labels, w = _small_values(900, seed=1)
    y = labels["binary"]
    wv = np.where(y[600:] == 1, 5.0, 0.5)
    model = GBDTClassifier(**KW).fit(X[:600], y[:600], sample_weight=w[:600],
                                     eval_set=[(X[600:], y[600:])],
                                     eval_sample_weight=[wv])
    want = log_loss(y[600:], model.predict_proba(X[600:]), sample_weight=wv)
    assert model.history_[-1]["eval_log_loss"] == pytest.approx(want, rel=1e-9)
    plain = GBDTClassifier(**KW).fit(X[:600], y[:600], sample_weight=w[:600],
                                     eval_set=[(X[600:], y[600:])])
    assert plain.history_[-1]["eval_log_loss"] != pytest.approx(want, rel=1e-3)


@pytest.mark.parametrize("weights, match", [
    (np.ones(99), "sample_weight has 99 values, but X has 100 rows"),
    (np.r_[np.ones(99), -1.0], "sample_weight: -1.0 at row 99 is negative"),
    (np.r_[np.ones(99), np.nan], "sample_weight: nan at row 99 is not finite"),
    (np.r_[np.ones(99), np.inf], "sample_weight: inf at row 99 is not finite"),
    (np.zeros(100), "sample_weight: every weight is zero"),
    (np.ones((100, 2)), r"sample_weight must be 1-D, of shape \(n_samples,\)"),
])
def test_bad_sample_weight_is_refused_naming_it(weights, match):
    X, labels, _ = _small_values(100)
    fitted = GBDTRegressor(**KW).fit(X, labels["regression"])
    before = _flat(fitted)
    with pytest.raises(ValueError, match=match):
        fitted.fit(X, labels["regression"], sample_weight=weights)
    after = _flat(fitted)  # the model is left as it was
    assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)


def test_bad_eval_sample_weight_and_dask_weights_refused_naming_them():
    X, labels, _ = _small_values(100)
    y = labels["binary"]
    est = GBDTClassifier(**KW)
    with pytest.raises(ValueError, match="eval_sample_weight needs an eval_set"):
        est.fit(X, y, eval_sample_weight=[np.ones(100)])
    with pytest.raises(ValueError, match="eval_sample_weight has 3 values, but X has 100 rows"):
        est.fit(X, y, eval_set=[(X, y)], eval_sample_weight=[np.ones(3)])
    Xd, yd = da.from_array(X, chunks=25), da.from_array(y, chunks=25)
    with pytest.raises(ValueError, match="sample_weight has 99 values, but X has 100 rows"):
        est.fit(Xd, yd, sample_weight=da.ones(99, chunks=25))
    bad = np.ones(100)
    bad[57] = -2.0
    with pytest.raises(DataError, match="sample_weight: -2.0 at row 57 is negative"):
        est.fit(Xd, yd, sample_weight=da.from_array(bad, chunks=25))
    with pytest.raises(ValueError, match="sample_weight: every weight is zero"):
        est.fit(Xd, yd, sample_weight=da.zeros(100, chunks=25))


def test_dask_weights_on_a_cluster_give_the_in_memory_trees(client2):
    """Weights of a dask array travel with X's partitions (4 chunks over 2 workers) and give
    the trees of the in-memory fit in one process; the eval set's weights too."""
    X, labels, w = _small_values(800, seed=2)
    y = labels["multiclass"]
    kw = dict(KW, n_estimators=6)
    local = GBDTClassifier(**kw).fit(X[:600], y[:600], sample_weight=w[:600],
                                     eval_set=[(X[600:], y[600:])],
                                     eval_sample_weight=[w[600:] + 1])
    Xd, yd, wd = (da.from_array(a[:600], chunks=150) for a in (X, y, w))
    ev = [(da.from_array(X[600:], chunks=100), da.from_array(y[600:], chunks=100))]
    dist = GBDTClassifier(**dict(kw, client=client2, max_workers=None)).fit(
        Xd, yd, sample_weight=wd, eval_set=ev,
        eval_sample_weight=[da.from_array(w[600:] + 1, chunks=100)])
    a, b = _flat(local), _flat(dist)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert [h["eval_log_loss"] for h in local.history_] == pytest.approx(
        [h["eval_log_loss"] for h in dist.history_], rel=1e-12)
    bad = w.copy()
    bad[321] = np.nan
    with pytest.raises(DataError, match="sample_weight: nan at row 321 is not finite"):
        GBDTRegressor(**dict(kw, client=client2, max_workers=None)).fit(
            da.from_array(X, chunks=200), da.from_array(labels["regression"], chunks=200),
            sample_weight=da.from_array(bad, chunks=200))


def test_resume_knows_the_weights(tmp_path):
    """A checkpoint of a weighted fit resumes with the same weights only: other weights, or
    none, are refused naming ``train_weights``; the same weights give the whole fit's trees
    (and an unweighted checkpoint refuses weights)."""
    X, labels, w = _small_values()
    y = labels["binary"]
    kw = dict(KW, n_estimators=3)
    ck, ck2 = str(tmp_path / "ck"), str(tmp_path / "ck2")
    GBDTClassifier(checkpoint=ck, **kw).fit(X, y, sample_weight=w)
    more = dict(kw, n_estimators=5, checkpoint=ck, resume=True)
    for other in (w[::-1].copy(), None):
        with pytest.raises(ValueError, match=r"another fit.*train_weights '[0-9a-f]{16}' \(this "
                                             r"fit's: "
                                             + ("None" if other is None else "'[0-9a-f]{16}'")):
            GBDTClassifier(**more).fit(X, y, sample_weight=other)
    resumed = GBDTClassifier(**more).fit(X, y, sample_weight=w)
    whole = GBDTClassifier(**dict(kw, n_estimators=5)).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))
    GBDTClassifier(checkpoint=ck2, **kw).fit(X, y)
    with pytest.raises(ValueError, match=r"train_weights None \(this fit's: '[0-9a-f]{16}'\)"):
        GBDTClassifier(**dict(more, checkpoint=ck2)).fit(X, y, sample_weight=w)


def test_dask_dataframe_with_a_dask_series_of_weights():
    import dask.dataframe as dd
    import pandas as pd

    X, labels, w = _small_values(400)
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame["w"], frame["y"] = w, labels["regression"]
    ddf = dd.from_pandas(frame, npartitions=3)
    got = GBDTRegressor(**KW).fit(ddf[list("abcd")], ddf["y"], sample_weight=ddf["w"])
    want = GBDTRegressor(**KW).fit(frame[list("abcd")], frame["y"], sample_weight=frame["w"])
    np.testing.assert_array_equal(got.predict(frame[list("abcd")]),
                                  want.predict(frame[list("abcd")]))
    with pytest.raises(ValueError, match="sample_weight: X is a dask dataframe of 3 "
                                         "partitions, so sample_weight must be a dask series"):
        GBDTRegressor(**KW).fit(ddf[list("abcd")], ddf["y"], sample_weight=w)


def test_weight_on_one_class_only_is_refused():
    X, labels, _ = _small_values(200)
    y = labels["binary"]
    with pytest.raises(ValueError, match="sample_weight puts all the weight on one of the "
                                         "two classes"):
        GBDTClassifier(**KW).fit(X, y, sample_weight=(y == 0).astype(float))


def _read_only(a):
    a = np.array(a)
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_read_only_labels_and_weights_fit_as_writable_ones(task):
    # pandas 3 hands out read-only arrays (copy-on-write Series, to_numpy()): labels, weights
    # (positive: no row dropped, so no copy made on the way) and the eval set's of them
    X, labels, w = _small_values(500, seed=2)
    y, w = labels[task], w + 1.0
    Est = GBDTRegressor if task == "regression" else GBDTClassifier

    def fit(conv):
        return Est(**KW).fit(X[:400], conv(y[:400]), sample_weight=conv(w[:400]),
                             eval_set=[(X[400:], conv(y[400:]))],
                             eval_sample_weight=[conv(w[400:])])

    got, want = fit(_read_only), fit(np.array)
    assert not _read_only(y).flags.writeable
    np.testing.assert_array_equal(_out(got, X), _out(want, X))
    losses = [[{k: v for k, v in h.items() if "loss" in k or "l2" in k} for h in m.history_]
              for m in (got, want)]
    assert losses[0] == losses[1] and "eval_" in str(losses[0][-1])
