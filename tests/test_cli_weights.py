"""``--weight COLUMN`` of ``dask-ps train lr|fm|gbdt|gbdt-regression`` (csv/parquet): the
column is ``fit``'s ``sample_weight`` and no feature; the model file says so, and ``dask-ps
evaluate`` reads a test file's weights (weighted metrics) or goes without them."""

import json

import numpy as np
import pandas as pd
import pytest

import dask_ps
from dask_ps.cli import main

pytestmark = pytest.mark.timeout(300)


def _scheduler_file(client, tmp_path):
    path = tmp_path / "scheduler.json"
    path.write_text(json.dumps({"type": "Scheduler", "address": client.scheduler.address}))
    return str(path)


def _table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """A click table whose weights change the fit: clicks of shop 'a' weigh much more."""
    rng = np.random.default_rng(seed)
    price = np.round(rng.normal(size=n), 3)
    shop = rng.choice(["a", "b", "c"], size=n)
    click = (rng.random(n) < 1 / (1 + np.exp(-price))).astype(int)
    w = np.round(rng.uniform(0, 3, size=n), 2) * np.where(shop == "a", 4.0, 1.0)
    w[::17] = 0.0  # rows of weight 0 count for nothing
    return pd.DataFrame({"click": click, "price": price, "w": w, "shop": shop})


def _np(a) -> np.ndarray:
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


def _write(df: pd.DataFrame, path) -> str:
    if str(path).endswith(".parquet"):
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("algorithm", ["lr", "fm"])
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_a_weighted_lr_or_fm_fit_is_the_python_apis(client1, tmp_path, capsys, algorithm,
                                                     ext):
    """dask-ps train lr|fm had no way to pass sample weights; --weight w fits as
    ``fit(X, y, sample_weight=w)`` on read_ctr(..., weight="w") does (same coefficients),
    not as the unweighted fit, and the weight column is no feature."""
    from dask_ps.io import read_ctr
    from dask_ps.saving import load_estimator

    train = _write(_table(), tmp_path / f"train.{ext}")
    model = str(tmp_path / "m.npz")
    params = (["--solver", "lbfgs", "--max-iter", "500"] if algorithm == "lr" else
              ["--max-iter", "3", "--n-components", "2", "--seed", "0"])
    assert main(["train", algorithm, "--train", train, "--format", ext, "--label", "click",
                 "--weight", "w", "--hash-features", "256", *params, "--save", model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "weighted by column 'w'" in out
    est, extra = load_estimator(model)
    assert extra["data"]["weight"] == "w"
    encoder = dask_ps.io.HashingEncoder.from_json(extra["data"]["encoder"])
    assert "w" not in encoder.columns and set(encoder.columns) == {"price", "shop"}

    X, y, w = read_ctr(train, label="click", weight="w", n_features=256)
    assert w.chunks == (X.chunks[0],)
    kw = (dict(solver="lbfgs", max_iter=500) if algorithm == "lr" else
          dict(max_iter=3, n_components=2, random_state=0))
    cls = dask_ps.LogisticRegression if algorithm == "lr" else \
        dask_ps.FactorizationMachineClassifier
    ref = cls(client=client1, progress=False, **kw).fit(X, y, sample_weight=w)
    unweighted = cls(client=client1, progress=False, **kw).fit(X, y)
    Xc = X.compute()
    np.testing.assert_allclose(est.predict_proba(Xc), ref.predict_proba(Xc), rtol=1e-6,
                               atol=1e-9)
    assert not np.allclose(est.predict_proba(Xc), unweighted.predict_proba(Xc), atol=1e-4)
    if algorithm == "lr":
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-9)


def test_evaluate_weighs_a_test_file_holding_the_column(client1, tmp_path, capsys):
    """dask-ps evaluate reads the weight column of a test file as the training file's (not a
    feature) and reports sklearn's weighted AUC, accuracy and log-loss; a test file without
    it is scored unweighted; export keeps the column's name in model.json."""
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    from dask_ps.io import read_ctr
    from dask_ps.saving import load_estimator

    train = _write(_table(), tmp_path / "train.csv")
    test_df = _table(200, seed=1)
    test = _write(test_df, tmp_path / "test.csv")
    bare = _write(test_df.drop(columns=["w"]), tmp_path / "bare.csv")
    model = str(tmp_path / "m.npz")
    assert main(["train", "lr", "--train", train, "--format", "csv", "--label", "click",
                 "--weight", "w", "--solver", "lbfgs", "--max-iter", "500", "--save", model,
                 "--test", test, "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    trained = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["evaluate", model, "--test", test]) == 0
    line = capsys.readouterr().out.strip()
    assert line == trained and line.endswith("(weighted)")

    est, _ = load_estimator(model)
    X, y, w = read_ctr(test, est_encoder(model), label="click", weight="w")
    proba = est.predict_proba(X.compute())
    y, w = y.compute(), w.compute()
    np.testing.assert_array_equal(w, test_df["w"].to_numpy())
    assert f"AUC {roc_auc_score(y, proba[:, 1], sample_weight=w):.4f}" in line
    assert f"accuracy {accuracy_score(y, proba.argmax(1), sample_weight=w):.4f}" in line
    assert f"log-loss {log_loss(y, proba, sample_weight=w):.4f}" in line
    assert f"log-loss {log_loss(y, proba):.4f}" not in line  # the weights matter here

    assert main(["evaluate", model, "--test", bare]) == 0
    line = capsys.readouterr().out.strip()
    assert not line.endswith("(weighted)")
    assert f"AUC {roc_auc_score(y, proba[:, 1]):.4f}" in line
    assert f"log-loss {log_loss(y, proba):.4f}" in line

    assert main(["export", model, str(tmp_path / "out")]) == 0
    desc = json.loads((tmp_path / "out" / "model.json").read_text())
    assert desc["data"]["weight"] == "w"


def est_encoder(model):
    from dask_ps.saving import load_estimator

    return dask_ps.io.HashingEncoder.from_json(load_estimator(model)[1]["data"]["encoder"])


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_a_weighted_gbdt_fit_is_the_python_apis(client1, tmp_path, capsys, ext):
    """--weight w of dask-ps train gbdt: GBDTClassifier.fit(X, y, sample_weight=w) on the
    reader's frame without the column (the same predictions); evaluate drops the column of
    a test file (it was read as a feature, or refused as one the model lacks) and weighs."""
    from dask_ps.io._frame import read_frame
    from dask_ps.io.parquet import read_table_parquet
    from dask_ps.saving import load_estimator

    df = _table().drop(columns=["shop"])
    train = _write(df, tmp_path / f"train.{ext}")
    model = str(tmp_path / "m.npz")
    assert main(["train", "gbdt", "--train", train, "--format", ext, "--label", "click",
                 "--weight", "w", "--n-estimators", "3", "--save", model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    capsys.readouterr()
    est, extra = load_estimator(model)
    assert extra["data"]["weight"] == "w" and extra["data"]["features"] == ["price"]

    read = read_frame if ext == "csv" else read_table_parquet
    frame, label, w = read(train, "click", classes=True, weight="w")
    X = frame.drop(columns=["click", "w"])
    ref = dask_ps.GBDTClassifier(client=client1, n_estimators=3).fit(
        X, frame["click"], sample_weight=w)
    unweighted = dask_ps.GBDTClassifier(client=client1, n_estimators=3).fit(X, frame["click"])
    Xc = X.compute()
    np.testing.assert_allclose(_np(est.predict_proba(Xc)), _np(ref.predict_proba(Xc)),
                               rtol=1e-9)
    assert not np.allclose(_np(est.predict_proba(Xc)), _np(unweighted.predict_proba(Xc)))
    assert main(["evaluate", model, "--test", train]) == 0
    assert capsys.readouterr().out.strip().endswith("(weighted)")


def test_weighted_gbdt_regression_scores_weighted_errors(client1, tmp_path, capsys):
    from dask_ps.saving import load_estimator

    df = _table().drop(columns=["shop"])
    df["click"] = df["price"] * 2 + df["w"] * 0  # a number to regress
    train = _write(df, tmp_path / "train.csv")
    model = str(tmp_path / "m.npz")
    assert main(["train", "gbdt-regression", "--train", train, "--format", "csv", "--label",
                 "click", "--weight", "w", "--n-estimators", "2", "--save", model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    capsys.readouterr()
    assert main(["evaluate", model, "--test", train]) == 0
    line = capsys.readouterr().out.strip()
    est, _ = load_estimator(model)
    err = _np(est.predict(df[["price"]])) - df["click"].to_numpy()
    assert line == (f"test: l2 {np.average(err ** 2, weights=df['w']):.6f}  l1 "
                    f"{np.average(np.abs(err), weights=df['w']):.6f}  ({len(df):,} rows)  "
                    f"(weighted)")


@pytest.mark.parametrize("argv, message", [
    (["lr", "--format", "libsvm"], "--weight applies to --format csv|parquet"),
    (["gbdt"], "--weight applies to --format csv|parquet"),
    (["mf"], "--weight w: dask-ps train mf takes no sample weights"),
    (["lda"], "--weight w: dask-ps train lda takes no sample weights"),
    (["lr", "--format", "csv", "--label", "w"],
     "--weight w: the --label column cannot be the weights"),
    (["gbdt", "--format", "csv", "--categorical", "w"],
     "--weight w: also named by --categorical; the weight column is not a feature"),
])
def test_weight_where_it_does_not_apply_is_refused_up_front(tmp_path, capsys, argv, message):
    """No cluster starts (none is given): the option is refused first, naming it; a
    --config file's ``weight`` key as the flag."""
    path = tmp_path / "x.svm"
    path.write_text("1 1:1\n0 2:1\n")
    assert main(["train", argv[0], "--train", str(path), *argv[1:], "--weight", "w"]) == 2
    assert capsys.readouterr().err.strip().startswith(f"dask-ps: error: {message}")
    config = tmp_path / "run.toml"
    config.write_text('weight = "w"\n')
    assert main(["train", argv[0], "--train", str(path), *argv[1:], "--config",
                 str(config)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"dask-ps: error: {message}")


@pytest.mark.parametrize("algorithm", ["lr", "gbdt"])
@pytest.mark.parametrize("value, reason", [
    ("", "column 'w' (the sample weight) is empty: sample weights must be finite, "
         "non-negative numbers"),
    ("-1", "column 'w' (the sample weight) holds -1.0, a negative number"),
    ("heavy", "column 'w' (field 3): 'heavy' is not a finite number"),
])
def test_a_bad_weight_is_named_by_file_line_and_column(client1, tmp_path, capsys, algorithm,
                                                       value, reason):
    df = _table(40).drop(columns=["shop"])
    train = tmp_path / "train.csv"
    lines = df.to_csv(index=False).splitlines()
    fields = lines[7].split(",")
    fields[2] = value
    lines[7] = ",".join(fields)
    train.write_text("\n".join(lines) + "\n")
    extra = ["--n-estimators", "2"] if algorithm == "gbdt" else []
    assert main(["train", algorithm, "--train", str(train), "--format", "csv", "--label",
                 "click", "--weight", "w", *extra,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"dask-ps: error: {train}, line 8: {reason}")


def test_a_weight_column_the_training_file_lacks_is_named_before_a_cluster(tmp_path, capsys):
    train = _write(_table(20), tmp_path / "train.csv")
    for algorithm in ("lr", "gbdt"):
        assert main(["train", algorithm, "--train", train, "--format", "csv", "--label",
                     "click", "--weight", "weight"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"dask-ps: error: {train}") and "'weight'" in err
