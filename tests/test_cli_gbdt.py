"""``dask-ps train gbdt`` / ``gbdt-regression``: LIBSVM and CSV/Parquet tables, saved,
evaluated and exported; defaults are the estimators'."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import READ_TOOK

import dask_ps
from dask_ps.cli import main

pytestmark = pytest.mark.timeout(300)


def _scheduler_file(client, tmp_path):
    path = tmp_path / "scheduler.json"
    path.write_text(json.dumps({"type": "Scheduler", "address": client.scheduler.address}))
    return str(path)


@pytest.mark.parametrize("algorithm, cls", [("gbdt", "GBDTClassifier"),
                                            ("gbdt-regression", "GBDTRegressor")])
def test_defaults_are_the_estimators(algorithm, cls):
    from dask_ps.cli import _parser
    from dask_ps.cli._registry import ALGORITHMS
    from dask_ps.cli._run import build_estimator

    def estimator(argv):
        args = _parser()[0].parse_args(argv)
        return build_estimator(args, ALGORITHMS[args.algorithm], shard_workers=False)

    got = estimator(["train", algorithm, "--train", "x"]).get_params()
    expected = getattr(dask_ps, cls)().get_params()
    assert got.pop("progress") is False and expected.pop("progress") is None
    assert got == expected
    est = estimator(["train", algorithm, "--train", "x", "--n-estimators", "3",
                     "--max-leaf-nodes", "7"])
    assert (est.n_estimators, est.max_leaf_nodes) == (3, 7)
    # shares in (0, 1], "auto" for the growth policy
    for share in ("1", "auto", "0.1"):
        est = estimator(["train", algorithm, "--train", "x", "--split-share", share,
                         "--subsample", "1", "--colsample-bytree", "1"])
        assert est.split_share == (share if share == "auto" else float(share))
        assert est.subsample == est.colsample_bytree == 1.0
    for n in ("auto", "3"):
        est = estimator(["train", algorithm, "--train", "x", "--max-workers", n])
        assert est.max_workers == (n if n == "auto" else int(n))


@pytest.mark.parametrize("option, value", [("--split-share", "0"), ("--split-share", "1.5"),
                                           ("--split-share", "best"), ("--subsample", "2")])
def test_shares_outside_zero_to_one_are_refused(option, value, capsys):
    with pytest.raises(SystemExit):
        main(["train", "gbdt", "--train", "x.svm", option, value])
    err = capsys.readouterr().err
    assert option in err
    if option == "--split-share":  # what it takes, "auto" too
        assert "(want a number in (0, 1] or auto)" in err


def _table(path, n, seed):
    """Rows whose class shows in a numeric column and a categorical one."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    shop = rng.choice(["a", "b", "c", "d"], size=n)
    y = ((x > 0.3) | (shop == "b")).astype(int)
    pd.DataFrame({"x": x, "noise": rng.normal(size=n), "shop": shop, "y": y}).to_csv(
        path, index=False)
    return str(path)


def test_csv_table_with_a_categorical_column_saves_evaluates_exports(client1, tmp_path,
                                                                     capsys):
    import pandas as pd

    train, test = _table(tmp_path / "tr.csv", 1200, 0), _table(tmp_path / "te.csv", 400, 1)
    model = str(tmp_path / "m.npz")
    sf = _scheduler_file(client1, tmp_path)
    common = ["--format", "csv", "--label", "y", "--categorical", "shop", "--n-estimators",
              "10", "--max-leaf-nodes", "7", "--scheduler-file", sf]
    assert main(["train", "gbdt", "--train", train, "--test", test, "--save", model,
                 *common]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("test: AUC"))
    assert float(line.split()[2]) > 0.97 and f"saved: {model}" in out
    # how long reading took, said before training starts (it was silent)
    assert re.search(rf"^read {re.escape(train)} onto the workers in {READ_TOOK}: 1,200 rows x "
                     rf"3 features \(\d+ partitions?\)\n(.*\n)*training GBDTClassifier ", out,
                     re.M), out
    assert main(["evaluate", model, "--test", test]) == 0
    assert capsys.readouterr().out.strip() == line
    est, extra = dask_ps.saving.load_estimator(model)
    assert est.categories_ == {"shop": ["a", "b", "c", "d"]}
    assert extra["data"]["label"] == "y"
    assert main(["export", model, str(tmp_path / "out"), "--format", "csv"]) == 0
    nodes = pd.read_csv(tmp_path / "out" / "nodes.csv")
    assert nodes["tree"].nunique() == 10 and (nodes["is_cat"] == 1).any()
    # a table's features are positions in data.features (no LIBSVM numbering to follow)
    assert set(nodes.feature) <= {-1, 0, 1, 2}
    assert capsys.readouterr().out.splitlines()[-1] == ("feature: the position in "
                                                        "data.features, from 0; -1 at leaves")
    # the same table as Parquet, regression
    for name in ("tr", "te"):
        pd.read_csv(tmp_path / f"{name}.csv").to_parquet(tmp_path / f"{name}.parquet")
    common[1] = "parquet"
    assert main(["train", "gbdt-regression", "--train", str(tmp_path / "tr.parquet"),
                 "--test", str(tmp_path / "te.parquet"), *common]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("test: l2"))
    assert float(line.split()[2]) < 0.05


def test_a_csv_column_of_whole_numbers_first_and_decimals_later_is_read(client1, tmp_path,
                                                                       capsys):
    """Dask guesses a CSV column's type from the file's first rows: whole numbers there
    and decimals past them (or a blank) made the read fail ("Mismatched dtypes")."""
    import pandas as pd

    rng = np.random.default_rng(5)
    n = 30_000  # well past the rows dask samples for the types
    a = rng.integers(0, 100, n).astype(float)
    a[n // 2:] += 0.5
    y = (a > 50).astype(int)
    path = tmp_path / "late.csv"
    pd.DataFrame({"a": a, "y": y}).to_csv(path, index=False, float_format="%g")
    assert path.read_text().splitlines()[1].split(",")[0].isdigit()  # whole at the start
    assert main(["train", "gbdt", "--train", str(path), "--format", "csv", "--label", "y",
                 "--n-estimators", "3", "--blocksize", "64KiB", "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 0
    assert "Mismatched dtypes" not in capsys.readouterr().err


def test_libsvm_agaricus(client1, data, tmp_path, capsys):
    sf = _scheduler_file(client1, tmp_path)
    folder = data / "lr_agaricus"
    assert main(["train", "gbdt", "--train", str(folder / "agaricus.txt.train"), "--test",
                 str(folder / "agaricus.txt.test"), "--n-estimators", "20",
                 "--scheduler-file", sf]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith("test: AUC"))
    assert line.split()[4] == "1.0000"  # accuracy
    # each round's line once, in order (shown as it ends, not again at the job's end)
    rounds = [re.search(r"GBDTClassifier (\d+)/20: loss", x) for x in out]
    assert [int(m.group(1)) for m in rounds if m] == list(range(1, 21)), out
    rate = next(x for x in out if x.startswith("train wall"))
    assert re.match(r"train wall [\d.]+ s \(20 rounds [\d.]+ s; the other [\d.]+ s: ", rate)
    assert "(19 rounds over 6,513 rows)" in rate and "pass" not in rate, rate
    # the last round's task_seconds: each phase's seconds over the tasks, not a Python list
    last = next(x for x in out if x.startswith("  round 20 "))
    assert re.search(r"  task_seconds \[\d+ tasks?(, min\.\.max)?: hist [\d.e-]+(\.\.[\d.e-]+)?, "
                     r"push ", last), last
    assert "[{" not in last and "'" not in last, last


def test_table_options_apply_to_tables_only(capsys):
    assert main(["train", "gbdt", "--train", "x.svm", "--label", "y"]) == 2
    assert "--label applies to --format csv|parquet" in capsys.readouterr().err


def _lines(path, n, seed, bad=None):
    """``a,b,y`` with ``n`` rows of whole-number labels; ``bad``: {file line: text}."""
    rng = np.random.default_rng(seed)
    lines = ["a,b,y"] + [f"{a:.6f},{b:.6f},{int(a > 0)}"
                         for a, b in rng.normal(size=(n, 2))]
    for lineno, text in (bad or {}).items():
        lines[lineno - 1] = text
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("text, reason", [
    ("abc,0.5,1", "column 'a' (field 1): 'abc' is not a finite number"),
    ("0.1,0.5,1,7", "expected 3 fields, got 4"),
    ("0.1,inf,1", "column 'b' (field 2): 'inf' is not a finite number"),
    ("0.1,0.5,", "column 'y' is empty"),
])
def test_a_bad_csv_line_is_named_by_file_line_and_column(client1, tmp_path, capsys, text,
                                                         reason):
    """The line is the file's (the header is line 1), past the first block; one line of
    error, no traceback."""
    path = _lines(tmp_path / "bad.csv", 3000, 0, {2501: text})
    assert main(["train", "gbdt", "--train", path, "--format", "csv", "--label", "y",
                 "--n-estimators", "2", "--blocksize", "16KiB", "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"dask-ps: error: {path}, line 2501: {reason}"
    assert not any(line.startswith("Traceback") for line in err)


def test_a_text_feature_column_is_asked_about_as_categorical(tmp_path):
    """A CSV whose feature column holds words (a categorical column not named so) was
    refused as "'red' is not a finite number"; now the column is asked about, in the
    reader's words (``dask-ps`` says ``--categorical color,shop``). A stray word among
    numbers is still a bad line."""
    from dask_ps.io._frame import read_frame

    path = tmp_path / "t.csv"
    path.write_text("y,a,color,shop\n1,0.5,1,x\n\n0,0.1,blue,y\n1,0.2,red,x\n")
    with pytest.raises(ValueError, match=re.escape(
            f"{path}, line 2: column 'shop' (field 4): 'x' is not a number: are these "
            f"categorical? use categorical=['color', 'shop']")):
        read_frame(str(path), "y")
    frame, _ = read_frame(str(path), "y", categorical=["color", "shop"])
    assert frame.compute(scheduler="sync")["color"].tolist() == ["1", "blue", "red"]
    path.write_text("y,a\n" + "1,0.5\n" * 5 + "0,abc\n")  # one word among numbers
    frame, _ = read_frame(str(path), "y")
    with pytest.raises(ValueError, match=r"line 7: column 'a' \(field 2\): 'abc' is not a "
                                         r"finite number$"):
        frame.compute(scheduler="sync")


def test_csv_labels_written_as_integers_give_integer_classes(client1, tmp_path, capsys):
    """Only the features are read as floats: a classifier's classes are the file's ints."""
    train, model = _lines(tmp_path / "tr.csv", 400, 1), str(tmp_path / "m.npz")
    assert main(["train", "gbdt", "--train", train, "--test", train, "--format", "csv",
                 "--n-estimators", "2", "--label", "y", "--save", model, "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 0
    est, _ = dask_ps.saving.load_estimator(model)
    assert est.classes_.tolist() == [0, 1] and est.classes_.dtype.kind == "i"
    # labels with a point stay floats
    floats = tmp_path / "f.csv"
    floats.write_text(open(train).read().replace(",0\n", ",0.0\n").replace(",1\n", ",1.0\n"))
    assert main(["train", "gbdt", "--train", str(floats), "--format", "csv", "--n-estimators",
                 "2", "--label", "y", "--save", model, "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 0
    assert dask_ps.saving.load_estimator(model)[0].classes_.dtype.kind == "f"


def test_a_decimal_label_past_the_sample_of_whole_ones_is_named(client1, tmp_path):
    """A classifier's label type comes from the first MiB: past it, ``1.0`` is class 1 and
    ``0.5`` a bad line; a regression's labels are numbers wherever they are."""
    from dask_ps.io._csv import SAMPLE_BYTES
    from dask_ps.io._frame import read_frame

    n = 2 * SAMPLE_BYTES // 30
    path = _lines(tmp_path / "big.csv", n, 2, {n - 1: "0.1,0.5,1.0", n: "0.1,0.5,0.5"})
    frame, label = read_frame(path, "y", classes=True, blocksize="256KiB")
    assert label == "y" and frame.npartitions > 4 and frame.dtypes["y"].kind == "i"
    with pytest.raises(ValueError, match=f"^{path}, line {n}: column 'y': 0.5 is not a "
                                         "whole number, as the classes in the file's first "
                                         "lines are$"):
        client1.compute(frame, sync=True)
    ok = _lines(tmp_path / "ok.csv", n, 2, {n - 1: "0.1,0.5,1.0"})
    y = client1.compute(read_frame(ok, "y", classes=True, blocksize="256KiB")[0]["y"],
                        sync=True)
    assert y.dtype.kind == "i" and y.iloc[n - 3] == 1
    frame, _ = read_frame(path, "y", blocksize="256KiB")  # a regression's
    y = client1.compute(frame["y"], sync=True)
    assert y.dtype.kind == "f" and y.iloc[n - 2] == 0.5


def test_csv_text_labels_a_byte_order_mark_and_a_binary_file(client1, tmp_path, capsys):
    """Text labels are a classifier's classes as written; a spreadsheet's UTF-8 byte order
    mark is not part of the first column's name; a Parquet file read as CSV is named."""
    rng = np.random.default_rng(3)
    path = tmp_path / "t.csv"
    rows = [f"{['cat', 'dog'][k]},{k + rng.normal() * 0.3:.4f}" for k in rng.integers(0, 2, 300)]
    path.write_text("label,a\n" + "\n".join(rows) + "\n", encoding="utf-8-sig")
    model = str(tmp_path / "m.npz")
    assert main(["train", "gbdt", "--train", str(path), "--format", "csv", "--label", "label",
                 "--n-estimators", "2", "--save", model, "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 0
    assert dask_ps.saving.load_estimator(model)[0].classes_.tolist() == ["cat", "dog"]
    import pandas as pd

    pq = tmp_path / "t.parquet"
    pd.DataFrame({"y": [0, 1] * 50, "a": np.arange(100.0)}).to_parquet(pq)
    assert main(["train", "gbdt", "--train", str(pq), "--format", "csv", "--n-estimators",
                 "2", "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"dask-ps: error: {pq}") and "Traceback" not in "".join(err)
    from dask_ps.io._frame import read_frame

    cr = tmp_path / "cr.csv"
    cr.write_bytes(b"y,a\r0,1\r1,2\r")  # lone CR line ends: csv's own error before
    with pytest.raises(ValueError, match=f"^{cr}: its first line is not delimited text"):
        read_frame(str(cr))



def test_test_labels_of_another_type_than_the_training_classes_are_scored(client1, tmp_path,
                                                                          capsys):
    """Text classes (no/yes) scored on test labels 0/1, or the reverse, by train and by
    evaluate: "unexpected ValueError: Mix of label input types (string and number)" (a
    bug's traceback, status 1). Said as for test labels 3/5 against classes 0/1: a warning
    naming both, accuracy 0, the model saved and scored."""
    rng = np.random.default_rng(4)
    k = rng.integers(0, 2, 200)
    a = [f"{v + rng.normal() * 0.3:.4f}" for v in k]
    for name, labels in [("text", ["no", "yes"]), ("numbers", ["0", "1"])]:
        (tmp_path / f"{name}.csv").write_text(
            "y,a\n" + "".join(f"{labels[v]},{x}\n" for v, x in zip(k, a)))
    sf = _scheduler_file(client1, tmp_path)
    for train, test, kinds in [("text", "numbers", "numbers, the classes text"),
                               ("numbers", "text", "text, the classes numbers")]:
        model = str(tmp_path / f"{train}.npz")
        capsys.readouterr()
        assert main(["train", "gbdt", "--train", str(tmp_path / f"{train}.csv"), "--test",
                     str(tmp_path / f"{test}.csv"), "--format", "csv", "--label", "y",
                     "--n-estimators", "2", "--save", model, "--scheduler-file", sf]) == 0
        trained = capsys.readouterr()
        assert main(["evaluate", model, "--test", str(tmp_path / f"{test}.csv")]) == 0
        for out in (trained, capsys.readouterr()):
            assert f"(the test labels are {kinds}: write the test labels as the training " \
                   f"data does)" in out.err, out.err
            assert "test: AUC n/a (no test label is a training class)  accuracy 0.0000" \
                in out.out, out.out


def test_a_regression_test_label_of_text_is_named_before_the_fit(client1, tmp_path, capsys):
    """gbdt-regression's --test label 'yes' was named only when the test rows were scored,
    after the whole fit; the first rows of the file, read anyway when its reader is made,
    name it before."""
    rng = np.random.default_rng(5)
    rows = "".join(f"{v:.3f},{v + rng.normal():.3f}\n" for v in rng.normal(size=100))
    (tmp_path / "train.csv").write_text("y,a\n" + rows)
    (tmp_path / "test.csv").write_text("y,a\n0.5,1\nyes,2\n")
    assert main(["train", "gbdt-regression", "--train", str(tmp_path / "train.csv"), "--test",
                 str(tmp_path / "test.csv"), "--format", "csv", "--label", "y",
                 "--n-estimators", "2", "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 2
    out = capsys.readouterr()
    assert "train wall" not in out.out and "round" not in out.out, out.out
    assert out.err.strip().splitlines()[-1] == (
        f"dask-ps: error: {tmp_path / 'test.csv'}, line 3: column 'y' (field 1): the label "
        f"'yes' is not a number: labels read here must be numbers, such as 0 and 1; map text "
        f"classes to numbers first (e.g. yes -> 1, no -> 0)")

@pytest.mark.parametrize("content, extra, message", [
    ("", (), "no rows"),
    ("a,b,y\n", (), "no rows"),
    ("a,b,y\n1,2,0\n", ("--label", "z"),
     "no column 'z', named by --label (columns: ['a', 'b', 'y'])"),
    ("a,b,y\n1,2,0\n", ("--categorical", "c"),
     "no column 'c', named by --categorical (columns: ['a', 'b', 'y'])"),
])
def test_csv_without_rows_or_columns_is_named(client1, tmp_path, capsys, content, extra,
                                              message):
    path = tmp_path / "t.csv"
    path.write_text(content)
    assert main(["train", "gbdt", "--train", str(path), "--format", "csv", *extra,
                 "--n-estimators", "2", "--scheduler-file",
                 _scheduler_file(client1, tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"dask-ps: error: {path}: {message}"


def test_table_columns_the_model_cannot_take_are_named(client1, tmp_path, capsys):
    """A text column of a Parquet file that is not --categorical, a test file with other
    feature columns than training's, an infinite value (named with its column)."""
    import pandas as pd

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": rng.normal(size=300), "shop": rng.choice(list("abc"), 300),
                       "y": rng.integers(0, 2, 300)})
    df.to_parquet(tmp_path / "s.parquet")
    df.assign(extra=1.0).to_csv(tmp_path / "extra.csv", index=False)
    df.to_csv(tmp_path / "s.csv", index=False)
    df.loc[120, "a"] = np.inf
    df.to_parquet(tmp_path / "inf.parquet")
    sf = _scheduler_file(client1, tmp_path)

    def error(*argv):
        assert main(["train", "gbdt", *argv, "--label", "y", "--n-estimators", "2",
                     "--scheduler-file", sf]) == 2
        return capsys.readouterr().err.strip().splitlines()[-1]

    train = str(tmp_path / "s.parquet")
    assert error("--train", train, "--format", "parquet") == \
        f"dask-ps: error: {train}: column 'shop' is not numeric (string); use --categorical shop"
    test = str(tmp_path / "extra.csv")
    assert error("--train", str(tmp_path / "s.csv"), "--test", test, "--format", "csv",
                 "--categorical", "shop") == \
        (f"dask-ps: error: {test}: feature columns ['a', 'shop', 'extra'] differ from the "
         f"training data's ['a', 'shop']")
    assert error("--train", str(tmp_path / "inf.parquet"), "--format", "parquet",
                 "--categorical", "shop") == \
        f"dask-ps: error: {tmp_path / 'inf.parquet'}, row group 1: column 'a', row 121: inf " \
        f"is not a finite number"
    # the same columns in another order are taken by name
    pd.read_csv(tmp_path / "s.csv")[["y", "shop", "a"]].to_csv(tmp_path / "r.csv", index=False)
    scores = []
    for name in ("s.csv", "r.csv"):
        assert main(["train", "gbdt", "--train", str(tmp_path / "s.csv"), "--test",
                     str(tmp_path / name), "--format", "csv", "--categorical", "shop",
                     "--label", "y", "--n-estimators", "2", "--scheduler-file", sf]) == 0
        scores.append([line for line in capsys.readouterr().out.splitlines()
                       if line.startswith("test")])
    assert scores[0] and scores[0] == scores[1]


def test_evaluate_with_another_header_setting_takes_the_columns_by_position(client1, tmp_path,
                                                                            capsys):
    """``dask-ps evaluate --no-header`` of a model trained on a CSV table with a header
    (``--header`` of one trained without) matched the columns by name, so it never worked:
    "no column 'y' (columns: ['0', ...])". The test file's columns are the training data's
    in their order now (the label where the training's was, here last; a categorical
    column too): the scores of the same rows in the training layout. Another number of
    columns is refused, naming the file and both counts."""
    train, test = _table(tmp_path / "tr.csv", 600, 0), _table(tmp_path / "te.csv", 300, 1)
    bare = {}  # the same rows without the header line
    for path in (train, test):
        bare[path] = str(tmp_path / f"bare-{os.path.basename(path)}")
        with open(path) as f, open(bare[path], "w") as out:
            out.write(f.read().split("\n", 1)[1])
    sf = _scheduler_file(client1, tmp_path)
    runs = [("--header", train, test, "y", "shop"),
            ("--no-header", bare[train], bare[test], "3", "2")]
    for header, train_file, test_file, label, categorical in runs:
        model = str(tmp_path / f"m{header}.npz")
        assert main(["train", "gbdt", "--train", train_file, "--format", "csv", header,
                     "--label", label, "--categorical", categorical, "--n-estimators", "5",
                     "--max-leaf-nodes", "7", "--save", model, "--scheduler-file", sf]) == 0
        capsys.readouterr()
        assert main(["evaluate", model, "--test", test_file]) == 0
        line = capsys.readouterr().out.strip()
        assert line.startswith("test: AUC")
        other = bare[test] if header == "--header" else test
        flip = "--no-header" if header == "--header" else "--header"
        assert main(["evaluate", model, "--test", other, flip]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out.strip() == line
        # a model saved before the columns' order was: a headerless one's is their numbers
        est, extra = dask_ps.saving.load_estimator(model)
        assert extra["data"].pop("columns") == (["x", "noise", "shop", "y"] if label == "y"
                                                else ["0", "1", "2", "3"])
        model = str(tmp_path / f"old{header}.npz")
        dask_ps.saving.save_estimator(est, model, extra=extra)
        assert main(["evaluate", model, "--test", other, flip]) == (2 if label == "y" else 0)
        out = capsys.readouterr()
        assert out.out.strip() == ("" if label == "y" else line)
        assert out.err == ("" if label != "y" else
                           f"dask-ps: error: {other}: its columns cannot be matched by position "
                           f"to the training data's (the model does not record where its "
                           f"label column was: saved by an older dask-ps); give the test file "
                           f"the training data's header line\n")
    # a column fewer (noise left out), without the header: refused, naming both counts
    fewer = tmp_path / "fewer.csv"
    with open(bare[test]) as f:
        fewer.write_text("".join(",".join(v for k, v in enumerate(row.split(",")) if k != 1)
                                 for row in f))
    assert main(["evaluate", str(tmp_path / "m--header.npz"), "--test", str(fewer),
                 "--no-header"]) == 2
    assert capsys.readouterr().err == (
        f"dask-ps: error: {fewer}: 3 columns, while the training data had 4 (x, noise, "
        f"shop, y): read without a header, unlike the training data, its columns are taken "
        f"by position, so it must have the training data's columns in their order\n")


def test_bad_parquet_values_are_named_by_file_row_group_and_row(client1, tmp_path, capsys):
    """Infinite features, missing or infinite labels, text labels of a regression: named by
    file, row group and row (1-based, the row in the row group), as the LR reader names them, for
    --train and --test (was ``X[500, 0] ...`` / ``y[700] is NaN``, rows of the whole set)."""
    import pandas as pd

    rng = np.random.default_rng(4)
    n = 1000
    df = pd.DataFrame({"click": rng.integers(0, 2, n).astype(float), "a": rng.random(n),
                       "c": rng.choice(["x", "y"], n)})
    good = tmp_path / "good.parquet"
    df.to_parquet(good, row_group_size=300)
    files = {"inf": ("a", 800, np.inf), "nan": ("click", 700, np.nan),
             "yinf": ("click", 100, -np.inf)}
    for name, (column, row, value) in files.items():
        bad = df.copy()
        bad.loc[row, column] = value
        bad.to_parquet(tmp_path / f"{name}.parquet", row_group_size=300)
    df.assign(click=np.where(df.click > 0, "yes", "no")).to_parquet(tmp_path / "text.parquet")
    sf = _scheduler_file(client1, tmp_path)

    def error(algorithm, *argv):
        assert main(["train", algorithm, "--format", "parquet", "--label", "click",
                     "--categorical", "c", "--n-estimators", "2", *argv,
                     "--scheduler-file", sf]) == 2
        return capsys.readouterr().err.strip().splitlines()[-1]

    path = {name: str(tmp_path / f"{name}.parquet") for name in [*files, "text"]}
    assert error("gbdt", "--train", path["inf"]) == (
        f"dask-ps: error: {path['inf']}, row group 3: column 'a', row 201: inf is not a finite "
        f"number")
    nan = (f"dask-ps: error: {path['nan']}, row group 3: label column 'click' is empty or not "
           f"a finite number in row 101 (nan)")
    assert error("gbdt", "--train", path["nan"]) == nan
    assert error("gbdt", "--train", str(good), "--test", path["nan"]) == nan
    for algorithm in ("gbdt", "gbdt-regression"):
        assert error(algorithm, "--train", path["yinf"]) == (
            f"dask-ps: error: {path['yinf']}, row group 1: label column 'click' is empty or "
            f"not a finite number in row 101 (-inf)")
    assert error("gbdt-regression", "--train", path["text"]) == (
        f"dask-ps: error: {path['text']}: label column 'click' is not numeric (string)")


def test_only_dask_ps_data_errors_are_left_out_of_the_workers_log():
    import dask_ps.io._csv
    from dask_ps.cli._quiet import is_data_error

    ours = f'  File "{dask_ps.io._csv.__file__}", line 9, in read_table\n'
    theirs = '  File "/usr/lib/python3/site-packages/pandas/core/frame.py", line 9, in f\n'
    assert is_data_error("DataError('y[3] = inf is not finite')", theirs + ours)
    assert is_data_error("LineError('a.csv, line 2: bad')", ours)
    assert not is_data_error("ValueError('a bug')", ours)
    assert not is_data_error("DataError('not ours')", ours + theirs)
    assert not is_data_error("DataError('no traceback')", "")


@pytest.mark.timeout(240)
def test_bad_input_is_one_line_without_the_workers_failed_task_log(tmp_path):
    """A cluster the command starts does not log the failed task of bad input ("Compute
    Failed", key, task, traceback) above the error line; --debug shows it."""
    import pandas as pd

    rng = np.random.default_rng(6)
    df = pd.DataFrame({"y": rng.integers(0, 2, 200), "a": rng.random(200)})
    df.loc[150, "a"] = -np.inf
    path = tmp_path / "inf.parquet"
    df.to_parquet(path)

    def run(*extra):
        return subprocess.run(
            [sys.executable, "-m", "dask_ps.cli", "train", "gbdt", "--format", "parquet",
             "--train", str(path), "--label", "y", "--n-estimators", "2", "--workers", "1",
             *extra], capture_output=True, text=True, timeout=200, env=dict(os.environ))

    proc = run()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == (f"dask-ps: error: {path}, row group 1: column 'a', row "
                                   f"151: -inf is not a finite number"), proc.stderr[-3000:]
    proc = run("--debug")
    assert proc.returncode == 1 and "Compute Failed" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("dask_ps.exceptions.DataError: ")


def test_a_label_that_is_no_class_is_named_by_its_file_and_line(client1, tmp_path, capsys):
    """``dask-ps train gbdt`` on labels 0/1 with a stray 0.7 ended in "Unknown label type:
    continuous (y has 3 distinct non-integer values, e.g. 0.0)", naming no file nor line.
    Now the file and line of the first row holding it, as LR names it (LIBSVM files of a
    glob, a later block); a table's reader names its line (CSV whose labels are written
    with a point, so read as numbers), or row group and row (Parquet); a regression takes
    the labels as they are."""
    import pandas as pd

    sf = _scheduler_file(client1, tmp_path)
    run = ["--n-estimators", "2", "--scheduler-file", sf]
    no_class = ("not a class: a classifier needs discrete labels such as 0 and 1 (whole "
                "numbers), not continuous values")
    for name, n in (("a", 30), ("b", 60)):
        rows = [f"{i % 2} 1:{i + 1}" for i in range(n)]
        rows[5:5] = ["", "# a comment", ""]
        if name == "b":
            rows[41] = "0.7 1:42"
        (tmp_path / f"{name}.svm").write_text("\n".join(rows) + "\n")
    glob = str(tmp_path / "*.svm")
    assert main(["train", "gbdt", "--train", glob, "--blocksize", "120", *run]) == 2
    out = capsys.readouterr()
    assert out.err == f"dask-ps: error: {glob}: the label field holds 0.7 (first at " \
                      f"{tmp_path / 'b.svm'}, line 42), {no_class}\n"
    assert "training" not in out.out

    path = _lines(tmp_path / "points.csv", 3000, 0)
    text = open(path).read().replace(",0\n", ",0.0\n").replace(",1\n", ",1.0\n").splitlines()
    text[2500] = "0.1,0.5,0.7"
    (tmp_path / "points.csv").write_text("\n".join(text) + "\n")
    assert main(["train", "gbdt", "--train", path, "--format", "csv", "--label", "y",
                 "--blocksize", "16KiB", *run]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"dask-ps: error: {path}, line 2501: column 'y' holds 0.7, {no_class}"

    df = pd.DataFrame({"y": np.arange(1000) % 2 * 1.0, "a": np.arange(1000.0)})
    df.loc[450, "y"] = 0.5
    pq = str(tmp_path / "t.parquet")
    df.to_parquet(pq, row_group_size=300)
    assert main(["train", "gbdt", "--train", pq, "--format", "parquet", "--label", "y",
                 *run]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"dask-ps: error: {pq}, row group 2: label column 'y' holds 0.5 in row 151, {no_class}"
    for data in ([pq, "--format", "parquet", "--label", "y"], [glob]):
        assert main(["train", "gbdt-regression", "--train", *data, *run]) == 0


@pytest.mark.parametrize("lineno", [2501, 55001])  # in the first MiB (sampled), past it
@pytest.mark.parametrize("text, reason", [
    ('0.1,"0.5\nx",1', "expected 3 fields, got 2; a quoted field opens on it and does not "
                       "close: quoted fields must not contain newlines"),
    ("0.1,0.5,1\r0.2,0.5,0", "cannot parse the line; it holds a lone CR (\\r): lines must end "
                             "in LF or CRLF, not CR alone (convert the file, e.g. tr '\\r' "
                             "'\\n')"),
])
def test_a_quoted_newline_or_a_lone_cr_is_named_and_no_model_saved(client1, tmp_path, capsys,
                                                                   text, reason, lineno):
    """A categorical column took a quoted newline ("0.5\\nx" a category), and a lone CR split
    a line in two rows, silently; now the line is named, as read_ctr names it, and no model
    is written."""
    path = _lines(tmp_path / "bad.csv", 60_000, 0, {lineno: text})
    model = tmp_path / "m.npz"
    assert main(["train", "gbdt", "--train", path, "--format", "csv", "--label", "y",
                 "--categorical", "b", "--n-estimators", "2", "--blocksize", "256KiB",
                 "--save", str(model), "--scheduler-file", _scheduler_file(client1, tmp_path)]
                ) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"dask-ps: error: {path}, line {lineno}: {reason}"
    assert not model.exists() and not any(line.startswith("Traceback") for line in err)
