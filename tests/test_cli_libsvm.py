"""LIBSVM ``--train`` and ``--test`` of ``dask-ps train lr`` read together (one width, the
training data's index base, recorded in the model file), ``dask-ps evaluate`` reading with
them, or with ``--zero-based``; and evaluate's ``--format`` / ``--header`` /
``--zero-based`` overrides."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import NO_DASHBOARD, READ_TOOK

from dask_ps.cli import main

pytestmark = pytest.mark.timeout(300)


def _scheduler_file(client, tmp_path):
    path = tmp_path / "scheduler.json"
    path.write_text(json.dumps({"type": "Scheduler", "address": client.scheduler.address}))
    return str(path)


def _svm(path, n: int, seed: int, top: int) -> str:
    """One-based LIBSVM rows whose class shows in feature 1 (+1) or 2 (-1), with noise in
    features 3..``top``; ``top`` appears in the last row."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        label = 1 if i % 2 else -1
        noise = sorted(set(rng.integers(3, top + 1, 3).tolist()) | ({top} if i == n - 1
                                                                     else set()))
        lines.append(f"{label} {1 if label > 0 else 2}:{1 + rng.random():.3f} "
                     + " ".join(f"{j}:{rng.random():.3f}" for j in noise))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _test_line(out: str) -> str:
    return next(x for x in out.splitlines() if x.startswith("test: AUC"))


def test_lr_reads_test_data_with_the_training_base_and_the_widest_index(client1, tmp_path,
                                                                        capsys):
    """A test file reaching beyond the training file's largest index ended the run after
    the fit ("feature index beyond n_features=..."); a test line with index 0 silently
    read the whole test file zero-based (every feature shifted: AUC 0.44 on a9a, status
    0), and so did evaluate."""
    from dask_ps.saving import load_estimator, save_estimator

    sf = _scheduler_file(client1, tmp_path)
    train = _svm(tmp_path / "tr.svm", 200, 0, 10)
    test = _svm(tmp_path / "te.svm", 100, 1, 14)
    model = str(tmp_path / "m.npz")
    assert main(["train", "lr", "--train", train, "--test", test, "--max-iter", "3",
                 "--save", model, "--scheduler-file", sf]) == 0
    out = capsys.readouterr().out
    assert "200 rows x 14 features" in out
    # how long reading took, said before training starts (it was silent)
    assert re.search(rf"^read {re.escape(train)} onto the workers in {READ_TOOK}: 200 rows x 14 "
                     rf"features \(\d+ partitions?\)\n(.*\n)*training LogisticRegression ",
                     out, re.M), out
    line = _test_line(out)
    assert float(line.split()[2]) > 0.9
    extra = load_estimator(model)[1]
    assert extra["data"] == {"format": "libsvm", "n_features": 14, "zero_based": False}
    assert main(["evaluate", model, "--test", test]) == 0
    assert capsys.readouterr().out.strip() == line

    # index 0 in the test file: refused before training, naming file and line
    zero = tmp_path / "tz.svm"
    zero.write_text("-1 0:1 5:1\n" + (tmp_path / "te.svm").read_text())
    assert main(["train", "lr", "--train", train, "--test", str(zero), "--max-iter", "3",
                 "--scheduler-file", sf]) == 2
    out, err = capsys.readouterr()
    assert "history:" not in out and "training LogisticRegression" not in out
    assert (f"error: {zero}, line 1: feature index 0 in one-based input (zero_based=False): "
            f"'0:1' (--train has no feature index 0, so it is read one-based, and --test "
            f"with it; --zero-based true reads both zero-based)") in err
    assert main(["evaluate", model, "--test", str(zero)]) == 2
    assert (f"error: {zero}, line 1: feature index 0 in one-based input (zero_based=False): "
            f"'0:1' (the model was trained on one-based data)") in capsys.readouterr().err

    # beyond the model's width in evaluate: refused before scoring, naming the width
    wide = tmp_path / "wide.svm"
    wide.write_text((tmp_path / "te.svm").read_text() + "1 1:1 15:0.5\n")
    assert main(["evaluate", model, "--test", str(wide)]) == 2
    assert (f"error: {wide}, line 101: feature index beyond n_features=14 (one-based): "
            f"'15:0.5' (the model's width: it was trained on 14 features)"
            in capsys.readouterr().err)

    # a model file saved before the base was recorded: read as before ("auto")
    est, extra = load_estimator(model)
    old = str(tmp_path / "old.npz")
    save_estimator(est, old, extra={**extra, "data": {"format": "libsvm", "n_features": 14}})
    assert main(["evaluate", old, "--test", test]) == 0
    assert capsys.readouterr().out.strip() == line
    shifted = tmp_path / "tz_train.svm"  # indices up to 10: 11 zero-based features
    shifted.write_text("-1 0:1 5:1\n" + (tmp_path / "tr.svm").read_text())
    assert main(["evaluate", model, "--test", str(shifted)]) == 2
    assert "line 1: feature index 0 in one-based input" in capsys.readouterr().err
    assert main(["evaluate", old, "--test", str(shifted)]) == 0  # zero-based: shifted
    assert float(_test_line(capsys.readouterr().out).split()[2]) < 0.8


def test_export_numbers_features_as_the_libsvm_data_does(client1, tmp_path, capsys):
    """dask-ps export of a model trained on one-based LIBSVM data listed its features from 0
    (the columns of X: feature 1 of the file as 0), said only in model.json; the tables now
    hold the file's own indices (lr, fm, gbdt), the output and model.json say so, and a
    zero-based file's, or a model saved before the base was recorded, keep the columns."""
    from dask_ps.saving import load_estimator, save_estimator

    sf = _scheduler_file(client1, tmp_path)
    train = _svm(tmp_path / "tr.svm", 200, 0, 10)  # class in feature 1 (+1) or 2 (-1)
    one = "feature: the LIBSVM feature index, one-based as the training data numbers it " \
          "(column j of X is feature j + 1)"

    def export(model, name):
        assert main(["export", model, str(tmp_path / name), "--format", "csv"]) == 0
        said = capsys.readouterr().out.splitlines()[-1]
        meta = json.loads((tmp_path / name / "model.json").read_text())
        return said, meta, {t.stem: pd.read_csv(t) for t in (tmp_path / name).glob("*.csv")}

    for algorithm, flags in (("lr", ["--max-iter", "5"]),
                             ("fm", ["--max-iter", "3", "--n-components", "2"])):
        model = str(tmp_path / f"{algorithm}.npz")
        assert main(["train", algorithm, "--train", train, *flags, "--save", model,
                     "--scheduler-file", sf]) == 0
        capsys.readouterr()
        said, meta, tables = export(model, algorithm)
        coef = tables["coef"].set_index("feature").coef
        assert said == f"feature: {meta['feature']}" == one
        assert (coef.idxmax(), coef.idxmin()) == (1, 2), coef  # the file's features 1 and 2
        assert coef.index.min() >= 1 and coef.index.max() == 10
        if algorithm == "fm":
            assert 1 <= tables["factors"].feature.min() and tables["factors"].feature.max() == 10
    # a model file saved before the base was recorded: the columns, said as such
    est, extra = load_estimator(str(tmp_path / "lr.npz"))
    old = str(tmp_path / "old.npz")
    save_estimator(est, old, extra={**extra, "data": {"format": "libsvm", "n_features": 10}})
    said, meta, tables = export(old, "old")
    coef = tables["coef"].set_index("feature").coef
    assert (coef.idxmax(), coef.idxmin()) == (0, 1) and said == f"feature: {meta['feature']}"
    assert said.startswith("feature: the column of X, from 0; the model file does not record "
                           "the index base of its LIBSVM training data")
    # a model fitted from Python (e.g. a learn_online version) records no training file: it
    # was said to be "the hashed column of the click table (data.encoder)"
    save_estimator(est, str(tmp_path / "py.npz"))
    said, meta, tables = export(str(tmp_path / "py.npz"), "py")
    assert said == f"feature: {meta['feature']}" == "feature: the column of X, from 0 (the " \
        "model records no training file: it was fitted from Python)", said
    assert (tables["coef"].set_index("feature").coef.idxmax(), meta["data"]) == (0, {})
    # gbdt's split features alike (-1 at leaves)
    model = str(tmp_path / "gbdt.npz")
    assert main(["train", "gbdt", "--train", train, "--n-estimators", "2", "--save", model,
                 "--scheduler-file", sf]) == 0
    capsys.readouterr()
    said, meta, tables = export(model, "gbdt")
    nodes = tables["nodes"]
    assert said == f"{one}; -1 at leaves"
    assert nodes.feature[0] in (1, 2)  # the first tree's root splits on the class features
    assert set(nodes.feature) - {-1} <= set(range(1, 11))
    # zero-based data: its own indices are the columns
    zero = _zero_based(tmp_path / "z.svm", 200, 0, zero=True)
    model = str(tmp_path / "z.npz")
    assert main(["train", "lr", "--train", zero, "--max-iter", "5", "--save", model,
                 "--scheduler-file", sf]) == 0
    capsys.readouterr()
    said, meta, tables = export(model, "z")
    assert said == ("feature: the LIBSVM feature index, zero-based as the training data "
                    "numbers it (= the column of X)")
    assert set(tables["coef"].feature) <= {0, 1, 2, 3}
    assert set(tables["coef"].set_index("feature").coef.abs().nlargest(2).index) == {1, 2}


def test_n_features_below_a_test_index_is_named(client1, tmp_path, capsys):
    """--n-features narrower than the test data: refused before training, naming the
    option (it said only 'feature index beyond n_features=12', after the fit)."""
    train = _svm(tmp_path / "tr.svm", 60, 0, 10)
    test = _svm(tmp_path / "te.svm", 20, 1, 11)
    with open(test, "a") as f:
        f.write("1 1:1 13:0.5\n")
    assert main(["train", "lr", "--train", train, "--test", test, "--n-features", "12",
                 "--max-iter", "1", "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "training LogisticRegression" not in out
    assert (f"error: {test}, line 21: feature index beyond n_features=12: '13:0.5' (from "
            f"--n-features 12; without it the width is the largest index of --train and "
            f"--test)") in err


def _zero_based(path, n: int, seed: int, zero: bool) -> str:
    """Zero-based LIBSVM rows of 4 features whose class is the sign of features 1 + 2;
    feature 0 (noise) written only when ``zero``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    path.write_text("".join(f"{int(r[1] + r[2] > 0)} " + " ".join(
        f"{j}:{r[j]:.3f}" for j in range(0 if zero else 1, 4)) + "\n" for r in x))
    return str(path)


def test_zero_based_reads_a_zero_based_set_whose_training_file_has_no_index_0(
        client1, tmp_path, capsys):
    """New-user pass: a zero-based dataset whose training file never uses index 0 could not
    be read (its test file's index 0 refused, the training file taken as one-based); --zero-
    based true reads both zero-based, is saved with the model, and evaluate's --zero-based
    overrides the saved base only when given."""
    from dask_ps.saving import load_estimator

    sf = _scheduler_file(client1, tmp_path)
    train = _zero_based(tmp_path / "tr.svm", 200, 0, zero=False)
    test = _zero_based(tmp_path / "te.svm", 100, 1, zero=True)
    first = (tmp_path / "te.svm").read_text().split()[1]  # '0:...' of line 1
    argv = ["train", "lr", "--train", train, "--test", test, "--max-iter", "3",
            "--scheduler-file", sf]
    assert main(argv) == 2
    assert (f"error: {test}, line 1: feature index 0 in one-based input (zero_based=False): "
            f"{first!r} (--train has no feature index 0, so it is read one-based, and --test "
            f"with it; --zero-based true reads both zero-based)") in capsys.readouterr().err
    model = str(tmp_path / "m.npz")
    assert main([*argv, "--zero-based", "true", "--save", model]) == 0
    out = capsys.readouterr().out
    assert "200 rows x 4 features" in out  # indices 1..3 of 0..3
    line = _test_line(out)
    assert float(line.split()[2]) > 0.9
    assert load_estimator(model)[1]["data"] == {"format": "libsvm", "n_features": 4,
                                                "zero_based": True}
    assert main(["evaluate", model, "--test", test]) == 0  # with the saved base
    assert capsys.readouterr().out.strip() == line
    assert main(["evaluate", model, "--test", test, "--zero-based", "auto"]) == 0
    assert capsys.readouterr().out.strip() == line  # index 0 in the test file: zero-based
    assert main(["evaluate", model, "--test", test, "--zero-based", "false"]) == 2
    assert (f"error: {test}, line 1: feature index 0 in one-based input (zero_based=False): "
            f"{first!r} (--zero-based false)") in capsys.readouterr().err
    # a base other than the model's, given: followed, and noted (one column off)
    one = str(tmp_path / "one.npz")
    assert main(["train", "lr", "--train", train, "--max-iter", "3", "--save", one,
                 "--scheduler-file", sf]) == 0
    capsys.readouterr()
    low = tmp_path / "low.svm"  # indices 1 and 2 only: read zero-based, nothing refuses it
    low.write_text("1 1:0.5 2:0.25\n-1 1:0.125\n")
    assert main(["evaluate", one, "--test", str(low), "--zero-based", "true"]) == 0
    assert (f"note: the model was trained on one-based LIBSVM data; --zero-based true reads "
            f"{low} zero-based: each feature index is read one column off the training "
            f"data's") in capsys.readouterr().out
    assert main(["evaluate", one, "--test", str(low), "--zero-based", "false"]) == 0
    assert "note:" not in capsys.readouterr().out  # the model's own base
    # false given, index 0 in the training file: refused naming the option (before the fit)
    assert main(["train", "lr", "--train", test, "--zero-based", "false",
                 "--scheduler-file", sf]) == 2
    out, err = capsys.readouterr()
    assert "training LogisticRegression" not in out
    assert f"{test}, line 1: feature index 0 in one-based input (zero_based=False): " \
           f"{first!r} (--zero-based false)" in err
    # gbdt reads LIBSVM alike
    assert main(["train", "gbdt", "--train", train, "--test", test, "--zero-based", "true",
                 "--n-estimators", "3", "--scheduler-file", sf]) == 0
    assert "200 rows x 4 features" in capsys.readouterr().out


def test_zero_based_applies_to_libsvm_only_and_takes_a_toml_boolean(tmp_path, capsys):
    """Refused with table input, before a cluster starts; ``zero-based = true`` in a --config
    file gives --zero-based=true (a choice of auto, true, false)."""
    from dask_ps.cli import _parser
    from dask_ps.cli._options import config_argv

    table = _ctr(tmp_path / "t.csv", 20, 0)
    for algorithm in ("lr", "fm", "gbdt", "gbdt-regression"):
        assert main(["train", algorithm, "--train", table, "--format", "csv", "--label",
                     "click", "--zero-based", "true"]) == 2
        out = capsys.readouterr()
        assert out.err == "dask-ps: error: --zero-based applies to --format libsvm\n"
        assert "cluster:" not in out.out
    cfg = tmp_path / "c.toml"
    cfg.write_text("zero-based = true\n[data]\nzero_based = false\n")
    assert main(["train", "lr", "--config", str(cfg), "--train", "x"]) == 2
    assert f"{cfg}: 'zero-based' is set twice" in capsys.readouterr().err
    _, parsers = _parser()
    for value, token in [("true", "true"), ("false", "false"), ('"auto"', "auto")]:
        cfg.write_text(f"zero-based = {value}\n")
        assert config_argv(str(cfg), parsers["fm"], [], "train fm") == [f"--zero-based={token}"]
    cfg.write_text('zero-based = "yes"\n')
    assert main(["train", "lr", "--config", str(cfg), "--train", "x"]) == 2
    assert f"{cfg}: zero-based: 'yes' is not one of ['auto', 'true', 'false']" in \
        capsys.readouterr().err


def _ctr(path, n: int, seed: int):
    rng = np.random.default_rng(seed)
    shop = rng.choice(["a", "b", "c", "d"], n)
    price = rng.gamma(2.0, 2.0, n).round(2)
    click = ((shop == "a") | (shop == "b") & (price < 3)).astype(int)
    pd.DataFrame({"click": click, "price": price, "shop": shop}).to_csv(path, index=False)
    return str(path)


def test_evaluate_format_and_header_override_the_training_data(client1, tmp_path, capsys):
    """The hints of evaluate's errors named options it did not have: a CSV-trained model
    scores a Parquet copy of its test file with --format parquet (the same line), a copy
    separated by ';' with --sep ';', an MF model a headed ratings file with --header, a
    comma-separated one with --sep ,; overrides that cannot apply are refused."""
    sf = _scheduler_file(client1, tmp_path)
    train, test = _ctr(tmp_path / "tr.csv", 400, 0), _ctr(tmp_path / "te.csv", 200, 1)
    model = str(tmp_path / "ctr.npz")
    assert main(["train", "lr", "--format", "csv", "--label", "click", "--train", train,
                 "--test", test, "--hash-features", "64", "--max-iter", "5", "--save", model,
                 "--scheduler-file", sf]) == 0
    line = _test_line(capsys.readouterr().out)
    parquet = tmp_path / "te.parquet"
    pd.read_csv(test).to_parquet(parquet)
    assert main(["evaluate", model, "--test", str(parquet)]) == 2  # read as CSV
    assert "--format parquet" in capsys.readouterr().err
    assert main(["evaluate", model, "--test", str(parquet), "--format", "parquet"]) == 0
    assert capsys.readouterr().out.strip() == line
    for argv, message in [
        (["--format", "libsvm"], "--format libsvm: the model (lr) was trained on csv data: "
                                 "its features are a table's columns, not LIBSVM column "
                                 "indices"),
        (["--no-header"], "--no-header: applies to ratings (mf) and to gbdt's csv tables; "
                          "the model (lr) reads csv test data with its header always"),
        (["--zero-based", "true"], "--zero-based true: applies to LIBSVM test data; the "
                                   "model (lr) reads csv test data"),
        (["--format", "parquet", "--sep", ";"], "--sep ';': applies to csv and ratings test "
                                                "data; the model (lr) reads parquet test data")]:
        assert main(["evaluate", model, "--test", test, *argv]) == 2
        assert message in capsys.readouterr().err
    # a test file of another delimiter than the training data's (saved with the model):
    # evaluate's hint named --sep, which it did not have; now it has it
    semi = tmp_path / "te-semi.csv"
    pd.read_csv(test).to_csv(semi, index=False, sep=";")
    assert main(["evaluate", model, "--test", str(semi)]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"{semi}: one column, 'click;price;shop', read with the delimiter ',': "
                        f"no feature column beside a label; its header holds ';': is that the "
                        f"delimiter? (use --sep ';')\n"), err
    assert main(["evaluate", model, "--test", str(semi), "--sep", ";"]) == 0
    assert capsys.readouterr().out.strip() == line

    rng = np.random.default_rng(0)
    users, items = rng.integers(0, 20, 600), rng.integers(0, 10, 600)
    r = np.clip(np.round(3 + (users % 3 - 1) + (items % 2) + rng.normal(0, 0.3, 600)), 1, 5)
    rows = [f"u{u}\ti{i}\t{x:g}" for u, i, x in zip(users, items, r)]
    (tmp_path / "r.tsv").write_text("\n".join(rows[:500]) + "\n")
    (tmp_path / "rh.tsv").write_text("user\titem\trating\n" + "\n".join(rows[500:]) + "\n")
    (tmp_path / "rt.tsv").write_text("\n".join(rows[500:]) + "\n")
    mf = str(tmp_path / "mf.npz")
    assert main(["train", "mf", "--train", str(tmp_path / "r.tsv"), "--names",
                 "user,item,rating", "--n-components", "2", "--max-iter", "3", "--save", mf,
                 "--scheduler-file", sf]) == 0
    capsys.readouterr()
    assert main(["evaluate", mf, "--test", str(tmp_path / "rt.tsv")]) == 0
    rmse = capsys.readouterr().out.strip()
    assert rmse.startswith("test: RMSE") and "(100 ratings;" in rmse
    assert main(["evaluate", mf, "--test", str(tmp_path / "rh.tsv")]) == 2
    assert "--header" in capsys.readouterr().err
    assert main(["evaluate", mf, "--test", str(tmp_path / "rh.tsv"), "--header"]) == 0
    assert capsys.readouterr().out.strip() == rmse
    (tmp_path / "rt.txt").write_text("\n".join(r.replace("\t", ",") for r in rows[500:]))
    assert main(["evaluate", mf, "--test", str(tmp_path / "rt.txt")]) == 2
    assert capsys.readouterr().err.rstrip().endswith("is that the delimiter? (use --sep ,)")
    assert main(["evaluate", mf, "--test", str(tmp_path / "rt.txt"), "--sep", ","]) == 0
    assert capsys.readouterr().out.strip() == rmse
    assert main(["evaluate", mf, "--test", str(tmp_path / "rt.tsv"), "--format", "csv"]) == 2
    assert ("--format csv: the model (mf) was trained on ratings data: --format applies to "
            "lr, fm and gbdt models") in capsys.readouterr().err


def test_the_read_line_says_when_the_read_compiled_numba_kernels():
    """A cold numba cache (a fresh clone, a changed source) made reading a9a take 37.9 s
    against 1.2-2.8 s warm, and the read line did not say why: it now says that the time
    includes compiling, when (and only when) some process compiled a dask_ps kernel during
    the read; unknown (a worker could not say), nothing is claimed."""
    from dask_ps.cli._report import read_line
    from dask_ps.cli._run import _compiled_since

    assert read_line("a.svm", 37.94, "3 rows (1 partition)", True) == (
        "read a.svm onto the workers in 37.9 s (includes compiling numba kernels: their cache "
        "was cold): 3 rows (1 partition)")
    for compiled in (False, None):
        assert read_line("a.svm", 1.24, "3 rows", compiled) == (
            "read a.svm onto the workers in 1.2 s: 3 rows")
    before = {"": {"dask_ps.k.a": 1}, "tcp://w1": {"dask_ps.k.a": 2}}
    assert _compiled_since(before, before) is False
    assert _compiled_since(before, {"": {"dask_ps.k.a": 1},  # another signature, on w1
                                    "tcp://w1": {"dask_ps.k.a": 3}}) is True
    assert _compiled_since(before, {**before, "tcp://w2": {"dask_ps.k.a": 1}}) is True  # joined
    assert _compiled_since(before, {**before, "tcp://w2": {}}) is False
    assert _compiled_since(None, before) is None and _compiled_since(before, None) is None


@pytest.mark.timeout(180)
def test_a_worker_compiling_a_kernel_is_seen_and_a_cached_call_is_not(tmp_path):
    """The check the read line makes (:func:`dask_ps.cli._run._compiled`, snapshots of the
    worker processes' numba cache misses) on a worker whose numba cache is empty
    (``NUMBA_CACHE_DIR``, a new folder): a kernel's first call compiles and is seen; its
    second, and a new process loading it from the cache it wrote, are not."""
    from distributed import Client, LocalCluster

    from dask_ps.cli._run import _compiled, _compiled_since

    def call():
        import numpy as np

        from dask_ps.kernels.hashing import hash_shard
        return hash_shard(np.arange(10, dtype=np.int64), 3).tolist()

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      **NO_DASHBOARD, worker_dashboard_address=None,
                      env={"NUMBA_CACHE_DIR": str(tmp_path / "numba")}) as cluster, \
            Client(cluster) as client:
        before = _compiled(client)
        assert before is not None and set(before) == {"", *client.nthreads()}
        expected = client.submit(call, pure=False).result()
        after = _compiled(client)
        assert _compiled_since(before, after) is True, (before, after)
        assert [w["dask_ps.kernels.hashing.hash_shard"] for a, w in after.items() if a] == [1]
        assert client.submit(call, pure=False).result() == expected
        assert _compiled_since(after, _compiled(client)) is False  # in memory now
        client.restart()  # a new worker process: it loads the kernel from the cache
        before = _compiled(client)
        assert client.submit(call, pure=False).result() == expected
        assert _compiled_since(before, _compiled(client)) is False


def test_a_second_read_on_the_same_workers_says_nothing_of_compiling(client1, tmp_path,
                                                                     capsys):
    """The warm path: the workers hold the reader's kernels from the first read, so the
    second read's line never claims compiling, whatever the disk cache held."""
    sf = _scheduler_file(client1, tmp_path)
    train = _svm(tmp_path / "tr.svm", 60, 0, 6)
    argv = ["train", "lr", "--train", train, "--max-iter", "1", "--scheduler-file", sf]
    assert main(argv) == 0
    first = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("read "))
    assert re.fullmatch(rf"read {re.escape(train)} onto the workers in {READ_TOOK}: 60 rows x "
                        rf"6 features \(1 partition\)", first), first
    assert main(argv) == 0
    second = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("read "))
    assert re.fullmatch(rf"read {re.escape(train)} onto the workers in \d+\.\d s: 60 rows x "
                        rf"6 features \(1 partition\)", second), second


def test_a_repeated_index_is_refused_and_a_zero_based_reading_names_its_index_0(
        client1, tmp_path, capsys):
    """``1 3:1 3:2`` trained as 3.0 (scikit-learn refuses it); one stray index 0 in a
    one-based --train read it all zero-based (documented, as scikit-learn) without saying
    where the 0 was."""
    sf = _scheduler_file(client1, tmp_path)
    rows = _svm(tmp_path / "tr.svm", 40, 0, 9)
    lines = open(rows).read().splitlines()
    dup = tmp_path / "dup.svm"
    dup.write_text("\n".join(lines[:10] + ["1 1:1 3:1 3:2 9:1"] + lines[10:]) + "\n")
    assert main(["train", "lr", "--train", str(dup), "--max-iter", "2",
                 "--scheduler-file", sf]) == 2
    out, err = capsys.readouterr()
    assert "training LogisticRegression" not in out
    assert f"error: {dup}, line 11: feature index 3 repeated on the line: '3:2'" in err

    zero = tmp_path / "zero.svm"
    zero.write_text("\n".join(lines[:10] + ["1 0:1 3:1"] + lines[10:]) + "\n")
    assert main(["train", "lr", "--train", str(zero), "--max-iter", "2",
                 "--scheduler-file", sf]) == 0
    out = capsys.readouterr().out
    assert (f"note: --train read as zero-based: feature index 0 at {zero}, line 11 "
            f"(--zero-based auto; --zero-based false refuses it)\n") in out
    assert "41 rows x 10 features" in out
    assert main(["train", "lr", "--train", rows, "--max-iter", "2",
                 "--scheduler-file", sf]) == 0
    assert "zero-based" not in capsys.readouterr().out
