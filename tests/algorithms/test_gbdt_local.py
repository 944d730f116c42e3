"""The single-process reference booster: determinism, planted structure, bad input, and
quality on real data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, load_svmlight_files
from sklearn.metrics import roc_auc_score
from test_gbdt_kernels import _bits, _mixed_data

from dask_ps.algorithms._gbdt_local import boost_local
from dask_ps.algorithms._gbdt_objectives import get_objective

# ----------------------------------------------------------------------------- booster


@pytest.mark.parametrize("objective, share", [("binary", 1.0), ("binary", 0.3),
                                              ("multiclass", 1.0), ("regression", 0.5)])
def test_same_trees_with_1_and_4_partitions_and_any_shards(objective, share):
    X, y = _mixed_data(1000, 10)
    if objective == "multiclass":
        y = y + (X[:, 0] > 0.5)  # three classes
    elif objective == "regression":
        y = X[:, 0] * 3 + y
    kw = dict(objective=objective, n_classes=3, n_estimators=10, max_leaf_nodes=12,
              min_samples_leaf=5, categorical_features=[4], min_data_per_group=10, cat_smooth=5,
              sample_count=700, split_share=share)  # bins from a sample of the rows
    one = boost_local(X, y, **kw)
    many = boost_local(X, y, n_partitions=4, n_shards=3, **kw)
    np.testing.assert_array_equal(one.predict_raw(X), many.predict_raw(X))
    assert one.ensemble.n_trees == 10 * (3 if objective == "multiclass" else 1)
    if objective != "binary" or share != 1.0:
        return
    empty = boost_local(X[:50], y[:50], n_partitions=60, n_estimators=3, min_samples_leaf=3)
    np.testing.assert_array_equal(  # 50 rows in 60 partitions: most have no rows
        empty.predict_raw(X), boost_local(X[:50], y[:50], n_estimators=3,
                                          min_samples_leaf=3).predict_raw(X))


@pytest.mark.parametrize("missing_goes", ["right", "left", "alone"])
def test_missing_values_learn_their_direction(missing_goes):
    rng = np.random.default_rng(11)
    x = rng.random(2000)
    nan = rng.random(2000) < 0.3
    if missing_goes == "right":
        y = (x > 0.5) | nan
    elif missing_goes == "left":
        y = (x > 0.5) & ~nan
    else:
        y = nan
    X = np.where(nan, np.nan, x)[:, None]
    r = boost_local(X, y.astype(float), n_estimators=1, max_leaf_nodes=2, learning_rate=1.0)
    f = r.ensemble.flat()
    assert f["default_left"][0] == (missing_goes == "left")
    if missing_goes == "alone":
        assert f["threshold"][0] == np.inf  # all values left, missing right
    else:
        assert abs(f["threshold"][0] - 0.5) < 0.01
    pred = r.predict(np.array([[np.nan], [0.1], [0.9]]))
    assert (pred[0] == pred[2]) == (missing_goes == "right")


def test_categorical_split_finds_the_planted_categories():
    rng = np.random.default_rng(12)
    c = rng.integers(0, 20, 4000).astype(float)
    planted = [1, 4, 6, 9, 13, 17, 18]
    y = np.isin(c, planted).astype(float)
    X = np.column_stack([c, rng.normal(size=4000)])
    r = boost_local(X, y, n_estimators=1, max_leaf_nodes=2, categorical_features=[0])
    f = r.ensemble.flat()
    assert f["is_cat"][0] == 1 and f["feature"][0] == 0
    assert _bits(f["cat_words"], 32) == set(planted)
    pred = r.predict(np.column_stack([np.arange(20.0), np.zeros(20)]))
    np.testing.assert_array_equal(pred > r.predict(np.array([[np.nan, 0.0]]))[0],
                                  np.isin(np.arange(20), planted))


def test_multiclass_and_early_stopping():
    X, y = load_digits(return_X_y=True)
    r = boost_local(X[:1000], y[:1000], objective="multiclass", n_classes=10, n_estimators=40,
                    max_leaf_nodes=8, learning_rate=0.3, eval_set=(X[1000:], y[1000:]),
                    early_stopping_rounds=3)
    proba = r.predict(X[1000:])
    assert proba.shape == (797, 10) and np.allclose(proba.sum(axis=1), 1)
    assert np.mean(proba.argmax(axis=1) == y[1000:]) > 0.88
    losses = [h["eval_loss"] for h in r.history]
    assert r.best_round == int(np.argmin(losses))
    assert r.ensemble.n_rounds == r.best_round + 1
    assert r.ensemble.n_trees == 10 * r.ensemble.n_rounds
    if len(r.history) < 40:  # it stopped: three rounds without improvement
        assert len(r.history) == r.best_round + 4


# ----------------------------------------------------------------------------- bad input


def test_constant_and_all_nan_columns_are_ignored():
    rng = np.random.default_rng(13)
    X = np.column_stack([np.full(500, np.nan), np.full(500, 3.0), rng.normal(size=500)])
    y = (X[:, 2] > 0).astype(float)
    r = boost_local(X, y, n_estimators=5)
    np.testing.assert_array_equal(r.mapper.column_of, [-1, -1, 0])
    assert np.isfinite(r.predict(X)).all() and roc_auc_score(y, r.predict(X)) > 0.99
    r = boost_local(X[:, :2], y, n_estimators=3)  # nothing usable: a model of the base rate
    np.testing.assert_allclose(r.predict(X[:, :2]), y.mean(), rtol=1e-5)  # quantized sums


def _read_only(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("objective", ["binary", "multiclass", "regression"])
def test_read_only_labels_weights_and_rows_reach_the_kernels(objective):
    """Read-only inputs (a memmap, a pandas copy-on-write column) are copied where a numba
    kernel takes them: labels from check_y, weights, and boost_local's rows (numba's "No
    matching definition ... readonly array" before)."""
    X, y = _mixed_data(300, 4)
    obj = get_objective(objective, 2)
    w = np.random.default_rng(3).uniform(0.5, 2.0, 300)
    raw = np.random.default_rng(4).normal(size=(obj.n_outputs, 300))
    out = []
    for labels, weights in ((y, w), (_read_only(y[:, None]), _read_only(w))):
        checked = obj.check_y(labels)  # a read-only (n, 1) column too
        assert checked.flags.writeable and checked.flags.c_contiguous
        grad, hess = np.zeros_like(raw), np.zeros_like(raw)
        obj.gradients(checked, raw, 1e6, 1e6, grad, hess, weights)
        out.append((grad, hess))
    np.testing.assert_array_equal(out[0], out[1])
    kw = dict(objective=objective, n_classes=2, n_estimators=3, min_samples_leaf=5)
    ro = boost_local(_read_only(X), _read_only(y), eval_set=(_read_only(X), _read_only(y)),
                     **kw)
    np.testing.assert_array_equal(ro.predict_raw(X), boost_local(X, y, **kw).predict_raw(X))


def test_bad_labels_and_shapes_raise_clear_errors():
    X = np.random.default_rng(14).normal(size=(20, 3))
    with pytest.raises(ValueError, match="single class"):
        boost_local(X, np.ones(20))
    with pytest.raises(ValueError, match=r"binary labels must be 0 or 1; y\[3\] = 2.0"):
        boost_local(X, np.r_[0, 1, 0, 2, np.zeros(16)])
    with pytest.raises(ValueError, match=r"integers in \[0, 3\); y\[0\] = 3.0"):
        boost_local(X, np.r_[3, np.zeros(19)], objective="multiclass", n_classes=3)
    with pytest.raises(ValueError, match=r"y\[1\] = nan is not finite"):
        boost_local(X, np.r_[0, np.nan, np.zeros(18)], objective="regression")
    with pytest.raises(ValueError, match="X has 20 rows but y has 19"):
        boost_local(X, np.zeros(19), objective="regression")
    with pytest.raises(ValueError, match="early_stopping_rounds needs an eval_set"):
        boost_local(X, np.zeros(20), objective="regression", early_stopping_rounds=3)
    with pytest.raises(ValueError, match="unknown objective 'poisson'"):
        boost_local(X, np.zeros(20), objective="poisson")
    r = boost_local(X, (X[:, 0] > 0).astype(float), n_estimators=2, min_samples_leaf=2)
    with pytest.raises(ValueError, match="X has 4 features; the model was fit on 3"):
        r.predict(np.zeros((2, 4)))


def test_hundred_thousand_sparse_columns():
    rng = np.random.default_rng(16)
    rows, cols = rng.integers(0, 1000, 30_000), rng.integers(6, 100_000, 30_000)
    signal = rng.random(1000)
    X = sp.csr_matrix((np.r_[rng.random(30_000), signal],
                       (np.r_[rows, np.arange(1000)], np.r_[cols, np.full(1000, 5)])),
                      shape=(1000, 100_000))
    y = (signal > 0.5).astype(float)
    r = boost_local(X, y, n_estimators=3, max_leaf_nodes=4)
    assert r.mapper.n_features == 100_000 and 0 < r.mapper.n_columns < 20_000
    assert roc_auc_score(y, r.predict(X)) > 0.99


# ----------------------------------------------------------------------------- real data


def _lightgbm_example(data):
    folder = data / "gbdt_lightgbm"
    tr = pd.read_csv(folder / "binary.train", sep="\t", header=None).to_numpy()
    te = pd.read_csv(folder / "binary.test", sep="\t", header=None).to_numpy()
    return tr[:, 1:], tr[:, 0], te[:, 1:], te[:, 0]


def test_lightgbm_binary_example_auc(data):
    """LightGBM's example, its settings (100 trees, rate 0.1, 63 leaves, 255 bins, no
    bagging): LightGBM reaches test AUC 0.816 (measured), the issue's target."""
    X, y, Xt, yt = _lightgbm_example(data)
    r = boost_local(X, y, n_estimators=100, learning_rate=0.1, max_leaf_nodes=63, max_bins=255)
    assert roc_auc_score(yt, r.predict(Xt)) >= 0.816


def test_lightgbm_regression_example_l2(data):
    """LightGBM's regression notebook (same files, the label as target; 5 leaves, 100
    rounds, feature 21 categorical — LightGBM casts its values to int): published valid l2
    0.175321. Within 2 %."""
    X, y, Xt, yt = _lightgbm_example(data)
    X[:, 21], Xt[:, 21] = np.trunc(X[:, 21]), np.trunc(Xt[:, 21])
    r = boost_local(X, y, objective="regression", n_estimators=100, max_leaf_nodes=5,
                    categorical_features=[21])
    l2 = np.mean((r.predict(Xt) - yt) ** 2)
    assert l2 <= 1.02 * 0.175321


def test_agaricus_accuracy(data):
    folder = data / "lr_agaricus"
    X, y, Xt, yt = load_svmlight_files([str(folder / "agaricus.txt.train"),
                                        str(folder / "agaricus.txt.test")], n_features=126)
    r = boost_local(X, y, n_estimators=100, learning_rate=0.1, max_leaf_nodes=63)
    assert np.mean((r.predict(Xt) > 0.5) == yt) == 1.0
    np.testing.assert_array_equal(r.predict_raw(Xt), r.predict_raw(Xt.toarray()))


def test_leaf_budget_and_depth_are_respected(data):
    X, y = _lightgbm_example(data)[:2]
    for leaves, depth, most in ((63, None, 63), (63, 3, 8), (10, None, 10)):
        r = boost_local(X, y, n_estimators=2, max_leaf_nodes=leaves, max_depth=depth)
        f = r.ensemble.flat()
        for t in range(r.ensemble.n_trees):
            a, b = f["tree_start"][t], f["tree_start"][t + 1]
            n_leaves = int((f["left"][a:b] < 0).sum())
            assert n_leaves == most
            assert _depth(f["left"][a:b] - a, f["right"][a:b] - a) <= (depth or 99)


def _depth(left, right, node=0):
    if left[node] < 0:
        return 0
    return 1 + max(_depth(left, right, left[node]), _depth(left, right, right[node]))
