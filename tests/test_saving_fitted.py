"""Model files whose fitted arrays were edited so that they no longer fit together (their
checksums and metadata recomputed): refused when loaded, with a DataError naming the file
and the attribute, before a numba kernel or a sparse product indexes them (which read other
memory: a segmentation fault, garbage margins, NaN ratings) or a prediction answers for
another model. LogisticRegression, FactorizationMachineClassifier, MatrixFactorization
(GBDT and LDA: tests/test_saving.py)."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from dask_ps import FactorizationMachineClassifier, LogisticRegression, MatrixFactorization
from dask_ps.cli import main
from dask_ps.exceptions import DataError
from dask_ps.saving import load_estimator, save_estimator

RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 5))
Y = (X[:, 0] > 0).astype(int)
Y3 = np.digitize(X[:, 1], [-0.5, 0.5])
RATINGS = pd.DataFrame({"user": RNG.integers(0, 20, 300), "item": RNG.integers(0, 15, 300),
                        "rating": RNG.integers(1, 6, 300).astype(float)})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    fits = {
        "ftrl": LogisticRegression(client="local", max_iter=2, progress=False).fit(X, Y),
        "adagrad3": LogisticRegression(client="local", solver="adagrad", max_iter=2,
                                       progress=False).fit(X, Y3),
        "lbfgs3": LogisticRegression(client="local", solver="lbfgs", max_iter=200,
                                     progress=False).fit(X, Y3),
        "fm": FactorizationMachineClassifier(client="local", n_components=3, max_iter=2,
                                             progress=False).fit(X, Y),
        "mf": MatrixFactorization(client="local", n_components=4, max_iter=2, random_state=0,
                                  progress=False).fit(RATINGS),
        "mfs": MatrixFactorization(client="local", n_components=4, max_iter=2, random_state=0,
                                   progress=False).fit(RATINGS.assign(
                                       user="u" + RATINGS.user.astype(str))),
    }
    out = {}
    for name, est in fits.items():
        out[name] = str(d / f"{name}.npz")
        save_estimator(est, out[name], extra={"algorithm": name})
    return out


def _spec(meta, key):
    """The metadata entry of the array stored under ``key``."""
    stack = [meta["attributes"]]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            if s.get("key") == key:
                return s
            stack.extend(s.values())
    return None


def _edited(src, dst, arrays=None, values=None) -> str:
    """``src`` with ``arrays`` (key: new array, dtype and shape written into the metadata
    too) and ``values`` (attribute: new JSON value) replaced; the zip's CRCs are new."""
    a = dict(np.load(src, allow_pickle=False))
    meta = json.loads(str(a["__meta__"][()]))
    for key, value in (arrays or {}).items():
        a[key] = value = np.asarray(value)
        spec = _spec(meta, key)
        spec.update(dtype=value.dtype.str, shape=list(value.shape))
    for attr, value in (values or {}).items():
        meta["attributes"][attr]["value"] = value
    np.savez(dst, **{**a, "__meta__": np.array(json.dumps(meta))})
    return str(dst)


def _set(key, row, col, value):
    """An edit of array ``key``: its value at ``[row, col]`` replaced by ``value``."""
    def edit(a):
        out = a[key].copy()
        out[row, col] = value
        return out
    return edit


def _cut(key, rows=None, cols=None):
    """An edit of array ``key``: its first ``rows`` rows, or first ``cols`` columns."""
    def edit(a):
        return a[key][:rows].copy() if cols is None else a[key][:, :cols].copy()
    return edit


CASES = [  # (file, arrays: key -> edit of the arrays, JSON values, message)
    # the kernel read past coef_.T's rows: garbage margins
    ("ftrl", {"a/coef_": _cut("a/coef_", cols=3)}, None,
     r"coef_ has shape \(1, 3\), not \(1, 5\) \(2 classes_, n_features_in_=5\)"),
    # two rows for two classes: predictions from an argmax over the wrong model (score 0.05)
    ("ftrl", {"a/coef_": lambda a: np.vstack([a["a/coef_"], -a["a/coef_"]])}, None,
     r"coef_ has shape \(2, 5\), not \(1, 5\)"),
    # bias[0] read past an empty intercept_
    ("ftrl", {"a/intercept_": lambda a: np.zeros(0)}, None,
     r"intercept_ has shape \(0,\), not \(1,\)"),
    ("ftrl", {"a/coef_": lambda a: a["a/coef_"].astype(np.complex128)}, None,
     r"coef_ is ndarray of dtype complex128, not a float array or a csr matrix"),
    # binary weights answering for 3 classes; one class: IndexError at predict
    ("ftrl", {"a/classes_": lambda a: np.array([0, 1, 2])}, None,
     r"coef_ has shape \(1, 5\), not \(3, 5\) \(3 classes_"),
    ("ftrl", {"a/classes_": lambda a: np.array([1])}, None,
     r"classes_ holds 1 classes: a fitted LogisticRegression has two or more"),
    # columns hashed into 100 buckets of a 5-row coef_: margins of 1e243
    ("ftrl", None, {"_n_hashed_features_": 100},
     r"coef_ has shape \(1, 5\), not \(1, 100\) \(2 classes_, _n_hashed_features_=100\)"),
    ("ftrl", None, {"_n_hashed_features_": -4}, r"_n_hashed_features_ is -4, not a width"),
    ("ftrl", None, {"n_features_in_": 9}, r"coef_ has shape \(1, 5\), not \(1, 9\)"),
    ("ftrl", {"a/_ps_state_/W": _cut("a/_ps_state_/W", rows=3)}, None,
     r"_ps_state_.W has shape \(3, 1\), not \(6, 1\)"),
    ("ftrl", {"a/_ps_state_/state": _cut("a/_ps_state_/state", rows=3)}, None,
     r"_ps_state_.state has shape \(3, 2\), not one row for each of the 6 rows"),
    # optimizer state a fit never leaves: a negative FTRL n or AdaGrad accumulator made
    # the next partial_fit's weights NaN (a DivergenceError blaming the learning rate)
    ("ftrl", {"a/_ps_state_/state": _set("a/_ps_state_/state", 2, 1, -5.0)}, None,
     r"_ps_state_.state holds 1 negative value\(s\) in its FTRL n columns \(the first in "
     r"row 2, column 1: -5.0\); a fit's are sums of squared gradients, never negative"),
    ("adagrad3", {"a/_ps_state_/state": _set("a/_ps_state_/state", 4, 5, -1e-3)}, None,
     r"_ps_state_.state holds 1 negative value\(s\) in its AdaGrad accumulator columns "
     r"\(the first in row 4, column 5: -0.001\)"),
    ("adagrad3", {"a/_ps_state_/state": _cut("a/_ps_state_/state", cols=3)}, None,
     r"_ps_state_.state has 3 columns, not 6 \(solver 'adagrad', 3 output\(s\)\)"),
    ("fm", {"a/_ps_state_/w_state": _set("a/_ps_state_/w_state", 1, 1, -2.0)}, None,
     r"_ps_state_.w_state holds 1 negative value\(s\) in its FTRL n columns"),
    ("fm", {"a/_ps_state_/v_state": _set("a/_ps_state_/v_state", 1, 4, -2.0)}, None,
     r"_ps_state_.v_state holds 1 negative value\(s\) in its factor accumulator columns "
     r"\(the first in row 1, column 4: -2.0\)"),
    # 3 classes: an intercept of 2 (bias[2] read past it); 2 classes for 3 rows of weights
    ("lbfgs3", {"a/intercept_": lambda a: np.zeros(2)}, None,
     r"intercept_ has shape \(2,\), not \(3,\)"),
    ("lbfgs3", {"a/classes_": lambda a: np.array([0, 1])}, None,
     r"coef_ has shape \(3, 5\), not \(1, 5\)"),
    # FM: coef_ and factors_ narrower than n_features_in_ (a sparse product read past them)
    ("fm", {"a/coef_": _cut("a/coef_", cols=3), "a/factors_": _cut("a/factors_", rows=3)},
     None, r"coef_ has shape \(1, 3\), not \(1, 5\)"),
    ("fm", {"a/factors_": _cut("a/factors_", rows=3)}, None,
     r"factors_ has shape \(3, 3\), not \(5, 3\) \(a row per column of coef_\)"),
    ("fm", {"a/factors_": lambda a: a["a/factors_"][:, 0].copy()}, None,
     r"factors_ has shape \(5,\), not \(5, 1\)"),
    ("fm", {"a/factors_": lambda a: np.hstack([a["a/factors_"]] * 2)}, None,
     r"_ps_state_.v_state has shape \(5, 6\), not \(5, 12\)"),
    ("fm", {"a/intercept_": lambda a: np.ones(3)}, None,
     r"intercept_ has shape \(3,\), not \(1,\)"),
    ("fm", {"a/classes_": lambda a: np.array([0, 1, 2])}, None,
     r"classes_ holds 3 classes: a fitted FactorizationMachineClassifier has two"),
    ("fm", None, {"_n_hashed_features_": 100}, r"coef_ has shape \(1, 5\), not \(1, 100\)"),
    ("fm", {"a/_ps_state_/w_keys": lambda a: a["a/_ps_state_/w_keys"] - 3}, None,
     r"_ps_state_.w_keys are not distinct ascending keys in \[0, 5\] \(from -3 to 2\)"),
    # MF: factors and biases fewer than the ids (NaN or garbage ratings read past them)
    ("mf", {"a/user_factors_": _cut("a/user_factors_", rows=5)}, None,
     r"user_factors_ has shape \(5, 4\), not \(20, 4\) \(a row per id of user_ids_\)"),
    ("mf", {"a/item_factors_": _cut("a/item_factors_", cols=2)}, None,
     r"item_factors_ has shape \(15, 2\), not \(15, 4\) \(a row per id of item_ids_, of "
     r"the n_components of user_factors_\)"),
    ("mf", {"a/user_bias_": _cut("a/user_bias_", rows=3)}, None,
     r"user_bias_ has shape \(3,\), not \(20,\)"),
    ("mf", {"a/item_bias_": lambda a: a["a/item_bias_"][:, None].copy()}, None,
     r"item_bias_ has shape \(15, 1\), not \(15,\)"),
    ("mf", {"a/user_ids_": _cut("a/user_ids_", rows=10)}, None,
     r"user_factors_ has shape \(20, 4\), not \(10, 4\)"),
    ("mf", {"a/user_ids_": lambda a: a["a/user_ids_"][::-1].copy()}, None,
     r"user_ids_\[1\] = 18 is smaller than user_ids_\[0\] = 19"),
    ("mf", {"a/item_ids_": lambda a: a["a/item_ids_"].astype(float)}, None,
     r"item_ids_ is not an array of int64 or string ids \(dtype float64\)"),
    ("mf", {"a/user_factors_": lambda a: (a["a/user_factors_"] * 100).astype(np.int64)},
     None, r"user_factors_ is ndarray of dtype int64, not a float array"),
    # every prediction clipped to 1.0
    ("mf", None, {"rating_range_": [5.0, 1.0]},
     r"rating_range_ is \(5.0, 1.0\), not \(low, high\) with low <= high"),
    ("mf", None, {"global_mean_": "x"}, r"global_mean_ is 'x', not a finite number"),
    ("mfs", {"a/item_factors_": _cut("a/item_factors_", rows=5)}, None,
     r"item_factors_ has shape \(5, 4\), not \(15, 4\)"),
]


@pytest.mark.parametrize("name, arrays, values, message", CASES)
def test_fitted_arrays_that_do_not_fit_together_are_refused(files, tmp_path, name, arrays,
                                                             values, message):
    src = files[name]
    a = dict(np.load(src, allow_pickle=False))
    path = _edited(src, tmp_path / "e.npz", {k: f(a) for k, f in (arrays or {}).items()},
                   values)
    with pytest.raises(DataError, match=rf"^{path}: attributes: {message}"):
        load_estimator(path)


def test_unedited_files_load_and_predict_as_fitted(files):
    est, _ = load_estimator(files["lbfgs3"])
    assert est.predict_proba(X).shape == (80, 3)
    for name, y in (("ftrl", Y), ("adagrad3", Y3)):  # their state passes its checks
        est, _ = load_estimator(files[name])
        est.partial_fit(X, y)
        assert np.isfinite(est.coef_).all() and est.score(X, y) > 0.4
    est, _ = load_estimator(files["fm"])
    assert est.score(X, Y) > 0.8
    for name in ("mf", "mfs"):
        est, _ = load_estimator(files[name])
        ratings = RATINGS if name == "mf" else RATINGS.assign(
            user="u" + RATINGS.user.astype(str))
        assert np.isfinite(est.predict(ratings)).all()


@pytest.mark.parametrize("name, key", [("ftrl", "a/_ps_state_/state"),
                                       ("adagrad3", "a/_ps_state_/state"),
                                       ("fm", "a/_ps_state_/v_state")])
def test_non_finite_optimizer_state_is_refused_naming_file_and_attribute(files, tmp_path,
                                                                         name, key):
    """NaN in saved optimizer state (the next partial_fit's weights NaN) is refused with
    the other float arrays of a file, naming the file, the attribute and the array."""
    a = dict(np.load(files[name], allow_pickle=False))
    path = _edited(files[name], tmp_path / "e.npz", {key: _set(key, 1, 1, np.nan)(a)})
    attr = key[2:].replace("/", ".")
    with pytest.raises(DataError, match=rf"^{path}: attribute {attr}: array '{key}' holds 1 "
                                        rf"NaN or infinite value"):
        load_estimator(path)


_PREDICT = """
import sys, numpy as np, scipy.sparse as sp
from dask_ps.exceptions import DataError
from dask_ps.saving import load_estimator
try:
    est, _ = load_estimator(sys.argv[1])
except DataError as exc:
    print("refused:", exc)
    sys.exit(0)
n = est.n_features_in_
X = sp.csr_matrix((np.ones(4), np.full(4, n - 1), np.arange(5)), shape=(4, n))
print("predicted", est.decision_function(X))
"""


@pytest.mark.parametrize("name, arrays, values, message", [
    # the column hashed into one of 2**31 buckets: a row 2**31 - 1 of a 5-row coef_
    ("ftrl", {}, {"_n_hashed_features_": 2**31}, r"coef_ has shape \(1, 5\), not "
                                                 r"\(1, 2147483648\)"),
    ("fm", {}, {"_n_hashed_features_": 2**31}, r"coef_ has shape \(1, 5\), not "
                                               r"\(1, 2147483648\)"),
    # a model of one column read at column 2**40 - 1 (scipy's product, unchecked indices)
    ("fm", {"a/coef_": _cut("a/coef_", cols=1), "a/factors_": _cut("a/factors_", rows=1)},
     {"n_features_in_": 2**40}, r"coef_ has shape \(1, 1\), not \(1, 1099511627776\)"),
    ("ftrl", {"a/coef_": _cut("a/coef_", cols=1)}, {"n_features_in_": 2**40},
     r"coef_ has shape \(1, 1\), not \(1, 1099511627776\)"),
])
def test_weights_read_far_past_their_end_crashed_the_process(files, tmp_path, name, arrays,
                                                             values, message):
    """These made decision_function die of a segmentation fault (status -11); run in a
    process of its own so that the suite survives it."""
    import re

    src = files[name]
    a = dict(np.load(src, allow_pickle=False))
    path = _edited(src, tmp_path / "e.npz", {k: f(a) for k, f in arrays.items()}, values)
    p = subprocess.run([sys.executable, "-c", _PREDICT, path], capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert re.match(rf"refused: {path}: attributes: {message}", p.stdout), p.stdout


def test_evaluate_refuses_an_edited_ratings_model_naming_the_attribute(files, tmp_path,
                                                                       capsys):
    """``dask-ps evaluate`` of an MF file whose user factors are fewer than its users (the
    kernel read past them: NaN RMSE): status 2 and the file and attribute named, before a
    cluster starts."""
    test = tmp_path / "t.tsv"
    test.write_text("".join(f"{u}\t{i}\t{r:g}\n" for u, i, r in RATINGS.to_numpy()[:50]))
    src = files["mf"]
    a = dict(np.load(src, allow_pickle=False))
    meta = json.loads(str(a["__meta__"][()]))
    meta["extra"] = {"algorithm": "mf", "data": {"format": "ratings"}}
    np.savez(tmp_path / "m.npz", **{**a, "__meta__": np.array(json.dumps(meta))})
    path = _edited(tmp_path / "m.npz", tmp_path / "e.npz",
                   {"a/user_factors_": a["a/user_factors_"][:5].copy()})
    capsys.readouterr()
    assert main(["evaluate", path, "--test", str(test)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dask-ps: error: {path}: attributes: user_factors_ has shape "
                          f"(5, 4), not (20, 4)"), err
    assert "Traceback" not in err
