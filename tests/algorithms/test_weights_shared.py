"""``sample_weight`` is checked by one implementation for every estimator that takes it
(:mod:`dask_ps.algorithms._weights`): the same bad weights give the same error, word for
word, from LogisticRegression, FactorizationMachineClassifier and the GBDT estimators, and
the same good weights are taken by all of them (a dask array of other row chunks than X's,
cut to X's as y is; dask weights of in-memory X; one column of a 2-D collection)."""

from __future__ import annotations

import re

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dask_ps import (
    FactorizationMachineClassifier,
    GBDTClassifier,
    GBDTRegressor,
    LogisticRegression,
)

KW = dict(client="local", random_state=0)
ESTIMATORS = {
    "LogisticRegression": lambda: LogisticRegression(max_iter=3, checkpoint=None, **KW),
    "FactorizationMachineClassifier": lambda: FactorizationMachineClassifier(
        max_iter=2, checkpoint=None, **KW),
    "GBDTClassifier": lambda: GBDTClassifier(n_estimators=2, progress=False, **KW),
    "GBDTRegressor": lambda: GBDTRegressor(n_estimators=2, progress=False, **KW),
}


def data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(np.int64)


def _with(i, value, n=120):
    w = np.ones(n)
    w[i] = value
    return w


#: (where X lives, bad weights, the whole message every estimator gives)
BAD = {
    "length": ("memory", lambda: np.ones(119),
               "sample_weight has 119 values, but X has 120 rows: one weight per row"),
    "dask length": ("dask", lambda: da.ones(119, chunks=50),
                    "sample_weight has 119 values, but X has 120 rows: one weight per row"),
    "two columns": ("memory", lambda: np.ones((120, 2)),
                    "sample_weight must be 1-D, of shape (n_samples,), got shape (120, 2)"),
    "dask two columns": ("dask", lambda: da.ones((120, 2), chunks=50),
                         "sample_weight must be 1-D, of shape (n_samples,), got shape "
                         "(120, 2)"),
    "negative": ("memory", lambda: _with(77, -2.0), "sample_weight: -2.0 at row 77 is "
                 "negative: weights must be finite and non-negative"),
    "dask negative": ("dask", lambda: da.from_array(_with(77, -2.0), chunks=50),
                      "sample_weight: -2.0 at row 77 is negative: weights must be finite and "
                      "non-negative"),
    "NaN of in-memory weights, dask X": ("dask", lambda: _with(101, np.nan),
                                         "sample_weight: nan at row 101 is not finite: "
                                         "weights must be finite and non-negative"),
    "dask infinite, in-memory X": ("memory", lambda: da.from_array(_with(5, np.inf), chunks=50),
                                   "sample_weight: inf at row 5 is not finite: weights must "
                                   "be finite and non-negative"),
    "all zero": ("memory", lambda: np.zeros(120), "sample_weight: every weight is zero; "
                 "sample weights must contain at least one non-zero number"),
    "dask all zero": ("dask", lambda: da.zeros(120, chunks=50), "sample_weight: every weight "
                      "is zero; sample weights must contain at least one non-zero number"),
    "text": ("memory", lambda: np.array(["a"] * 120),
             "sample_weight: could not convert string to float: np.str_('a')"),
    "dask frame X, array weights": ("frame", lambda: np.ones(120),
                                    "sample_weight: X is a dask dataframe of 3 partitions, so "
                                    "sample_weight must be a dask series with the same "
                                    "partitions (e.g. a column of X's dataframe), got ndarray"),
}


def _X(where, X, y):
    if where == "dask":
        return da.from_array(X, chunks=(40, 4)), da.from_array(y, chunks=40)
    if where == "frame":
        return (dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=3),
                dd.from_pandas(pd.Series(y), npartitions=3))
    return X, y


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_the_same_bad_weights_give_the_same_error(estimator, case):
    where, weights, message = BAD[case]
    X, y = _X(where, *data())
    model = ESTIMATORS[estimator]()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        model.fit(X, y, sample_weight=weights())
    assert not hasattr(model, "coef_") and not hasattr(model, "booster_")


@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_the_same_good_weights_are_taken_by_every_estimator(estimator):
    """Weights in another form give the fit of the plain weights of the same layout of X,
    bit for bit: a dask array of other row chunks than X's (cut to X's rows, as y is), a
    dask array of one column; dask weights of in-memory X (computed), one column of an
    array or frame."""
    X, y = data()
    w = np.random.default_rng(1).integers(0, 4, 120).astype(np.float64)
    dX, dy = _X("dask", X, y)

    def fit(X, y, weights):
        model = ESTIMATORS[estimator]().fit(X, y, sample_weight=weights)
        return model.predict(data()[0]) if hasattr(model, "booster_") else \
            np.r_[model.coef_.ravel(), model.intercept_]

    want = fit(X, y, w)
    for weights in [da.from_array(w, chunks=70), w[:, None], pd.DataFrame({"w": w})]:
        np.testing.assert_array_equal(fit(X, y, weights), want)
    want = fit(dX, dy, da.from_array(w, chunks=40))
    for weights in [da.from_array(w, chunks=70), da.from_array(w[:, None], chunks=50), w]:
        np.testing.assert_array_equal(fit(dX, dy, weights), want)
