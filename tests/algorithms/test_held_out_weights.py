"""The rows an early-stopping fit is judged on must weigh something: LogisticRegression's
held-out rows (``early_stopping``, ``validation_fraction``) and the GBDT estimators'
``eval_set`` (``eval_sample_weight``, ``early_stopping_rounds``). Held-out rows that all
weigh zero (or none at all) read a validation loss of 0 and stopped the fit without a word;
they are refused before the first epoch or round, naming the parameter, NumPy and dask input
alike, the estimator left as it was. Bad eval weights are refused as ``sample_weight`` is
(:mod:`dask_ps.algorithms._weights`), in the same words."""

from __future__ import annotations

import re

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps import GBDTClassifier, GBDTRegressor, LogisticRegression, OptionError

pytestmark = pytest.mark.timeout(300)

N = 300


def data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(np.int64)


def _inputs(where, X, y, w, client2):
    if where == "dask":
        return (da.from_array(X, chunks=(70, 4)), da.from_array(y, chunks=70),
                da.from_array(w, chunks=70), client2)
    return X, y, w, "local"


def _lr_state(model) -> list:
    return [model.coef_.copy(), model.intercept_.copy(), len(model.history_)]


# -- LogisticRegression: early_stopping's held-out rows ------------------------------------
@pytest.mark.parametrize("solver", ["ftrl", "sgd"])
@pytest.mark.parametrize("where", ["memory", "dask"])
def test_held_out_rows_that_all_weigh_zero_are_refused_before_training(where, solver,
                                                                        client2):
    """Only the first 10 rows weigh anything; 1% of the rows are held out, none of those
    10 (random_state 0): the validation loss read 0 every epoch and the fit stopped after
    n_iter_no_change epochs as if converged."""
    X, y = data()
    w = np.r_[np.ones(10), np.zeros(N - 10)]
    X, y, w, client = _inputs(where, X, y, w, client2)
    model = LogisticRegression(solver=solver, max_iter=20, random_state=0, checkpoint=None,
                               client=client).fit(X, y)
    before = _lr_state(model)
    model.set_params(early_stopping=True, validation_fraction=0.01, n_iter_no_change=2)
    with pytest.raises(ValueError, match=r"^sample_weight: the \d+ rows held out for early "
                                         r"stopping \(validation_fraction=0\.01\) all weigh "
                                         r"zero: .*random_state.*validation_fraction.*"
                                         r"early_stopping=False$"):
        model.fit(X, y, sample_weight=w)
    after = _lr_state(model)  # the fitted model is left as it was
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    fresh = LogisticRegression(solver=solver, early_stopping=True, validation_fraction=0.01,
                               random_state=0, checkpoint=None, client=client)
    with pytest.raises(ValueError, match="all weigh zero"):
        fresh.fit(X, y, sample_weight=w)
    assert not hasattr(fresh, "coef_")
    # weight on every row: the same split is taken, and its validation loss is not 0
    fitted = fresh.set_params(max_iter=3).fit(X, y, sample_weight=w + 1)
    assert all(h["validation_loss"] > 0 for h in fitted.history_ if "loss" in h)


@pytest.mark.parametrize("where", ["memory", "dask"])
def test_an_empty_held_out_set_is_refused_naming_validation_fraction(where, client2):
    X, y = data()
    X, y, _, client = _inputs(where, X, y, np.ones(N), client2)
    model = LogisticRegression(early_stopping=True, validation_fraction=1e-6, random_state=0,
                               checkpoint=None, client=client)
    with pytest.raises(OptionError, match=r"^the fraction 1e-06 of rows held out for early "
                                          r"stopping \(validation_fraction\) drew none of "
                                          r"the 300 rows: "):
        model.fit(X, y)
    assert not hasattr(model, "coef_")


def test_the_held_out_rows_do_not_depend_on_the_blocks():
    """The check draws a partition's held-out rows at once (held_out), the epochs block by
    block (make_blocks): the same rows, however many blocks."""
    from dask_ps.algorithms._stochastic import held_out, make_blocks

    X = sp.random(200, 8, density=0.3, format="csr", random_state=0)
    want = held_out(200, 0.3, [5, 2])
    assert 30 < want.sum() < 90
    for n_blocks in (1, 3, 7, 200, 250):
        blocks = make_blocks(X, np.zeros((200, 1)), n_blocks, 8, 0.3, [5, 2])
        starts = np.cumsum([0] + [b.Y.shape[0] for b in blocks])
        got = np.concatenate([s + b.held_out for s, b in zip(starts, blocks)])
        np.testing.assert_array_equal(got, np.flatnonzero(want))


def test_the_held_out_rows_checked_are_the_ones_the_fit_holds_out():
    """Over seeds, a fit is refused or its validation loss is positive: had the check drawn
    other rows than the fit, some fit taken would hold out only rows of weight zero (a loss
    of 0) - of 10 weighted rows in 300, 2% held out, most seeds hold out none of them."""
    X, y = data()
    w = np.r_[np.ones(10), np.zeros(N - 10)]
    taken = []
    for seed in range(30):
        model = LogisticRegression(early_stopping=True, validation_fraction=0.02,
                                   max_iter=2, random_state=seed, checkpoint=None,
                                   client="local")
        try:
            model.fit(X, y, sample_weight=w)
        except ValueError as exc:
            assert "all weigh zero" in str(exc)
            continue
        taken.append(seed)
        assert all(h["validation_loss"] > 0 for h in model.history_ if "loss" in h)
    assert 0 < len(taken) < 15, taken


# -- GBDT: eval_set's weights --------------------------------------------------------------
GBDT = {"GBDTClassifier": GBDTClassifier, "GBDTRegressor": GBDTRegressor}


def _gbdt(name, client):
    return GBDT[name](n_estimators=4, early_stopping_rounds=2, random_state=0,
                      progress=False, client=client)


def _eval(where, X, y, w, client2):
    """The eval set and its weights: in memory, dask (its weights per partition), or in
    memory with dask weights (computed on the driver)."""
    if where == "dask weights":
        return X, y, da.from_array(w, chunks=40), "local"
    Xv, yv, wv, client = _inputs(where, X, y, w, client2)
    return Xv, yv, wv, client


def _with(i, value, n=100):
    w = np.ones(n)
    w[i] = value
    return w


EVAL_BAD = {
    "all zero": (lambda: np.zeros(100), "eval_sample_weight: every weight is zero; sample "
                 "weights must contain at least one non-zero number"),
    "negative": (lambda: _with(77, -2.0), "eval_sample_weight: -2.0 at row 77 is negative: "
                 "weights must be finite and non-negative"),
    "NaN": (lambda: _with(3, np.nan), "eval_sample_weight: nan at row 3 is not finite: "
            "weights must be finite and non-negative"),
    "infinite": (lambda: _with(99, np.inf), "eval_sample_weight: inf at row 99 is not "
                 "finite: weights must be finite and non-negative"),
}


@pytest.mark.parametrize("case", list(EVAL_BAD))
@pytest.mark.parametrize("where", ["memory", "dask", "dask weights"])
@pytest.mark.parametrize("name", list(GBDT))
def test_bad_eval_sample_weight_is_refused_as_sample_weight_is(name, where, case, client2):
    """The same words as sample_weight's (test_weights_shared), named eval_sample_weight,
    the row counted in the whole eval set; dask eval weights that are all zero were taken
    (every round's eval loss read 0, and early stopping stopped the fit after
    early_stopping_rounds rounds)."""
    weights, message = EVAL_BAD[case]
    X, y = data(400)
    yt = y if name == "GBDTClassifier" else X[:, 0] + 0.1 * X[:, 1]
    Xv, yv, wv, client = _eval(where, X[300:], yt[300:], weights(), client2)
    model = _gbdt(name, client).fit(X[:300], yt[:300], eval_set=[(X[300:], yt[300:])])
    before = (model.booster_, model.history_, model.n_estimators_)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        model.fit(X[:300], yt[:300], eval_set=[(Xv, yv)], eval_sample_weight=[wv])
    assert (model.booster_, model.history_, model.n_estimators_) == before  # left as it was
    sw = message.replace("eval_sample_weight", "sample_weight")
    with pytest.raises(ValueError, match=f"^{re.escape(sw)}$"):  # the same as sample_weight's
        GBDT[name](n_estimators=2, progress=False, client=client).fit(
            *_inputs(where if where == "dask" else "memory", X[300:], yt[300:],
                     weights(), client2)[:2], sample_weight=wv)


def test_the_validation_loss_is_a_weighted_mean_however_light_the_held_out_rows():
    """Held-out rows of weight 1e-4, the others 1: the validation loss is still their mean
    loss (as with every weight 1, within the training's change), not that mean times their
    scaled total weight (about 0.004: the mean was divided by max(1, weight))."""
    from dask_ps.algorithms._stochastic import held_out

    X, y = data()
    held = held_out(N, 0.1, [0, 0])  # without a cluster the rows are one partition
    kw = dict(early_stopping=True, validation_fraction=0.1, max_iter=3, random_state=0,
              checkpoint=None, client="local")
    with pytest.raises(ValueError, match="all weigh zero"):  # they are the rows held out
        LogisticRegression(**kw).fit(X, y, sample_weight=np.where(held, 0.0, 1.0))
    plain = LogisticRegression(**kw).fit(X, y, sample_weight=np.ones(N))
    light = LogisticRegression(**kw).fit(X, y, sample_weight=np.where(held, 1e-4, 1.0))
    pairs = [(a["validation_loss"], b["validation_loss"])
             for a, b in zip(plain.history_, light.history_) if "loss" in a]
    assert len(pairs) == 3 and all(0.5 < b / a < 2 for a, b in pairs), pairs
