"""dask-ps train with inputs that are empty or of another format than --format says: named
errors; empty test sets refused by train and evaluate alike."""

import numpy as np
import pytest
from test_cli import _scheduler_file, _svm

from dask_ps.cli import main


@pytest.fixture
def no_cluster(monkeypatch):
    """The CLI's cluster start fails the test: what it refuses, it refuses before one."""
    from dask_ps.cli import _run

    def connect(spec):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(_run, "connect", connect)


@pytest.mark.timeout(200)
def test_empty_files_and_the_wrong_format_are_named(tmp_path, client1, capsys):
    """An empty file gives "no rows" naming it (lr/fm said scikit-learn's "Found array with
    0 sample(s)"); Parquet read as CSV is not taken for a header of binary column names;
    text read as Parquet names the file (was pyarrow's "Parquet magic bytes not found")."""
    import pandas as pd

    empty, head = tmp_path / "empty.svm", tmp_path / "head.csv"
    empty.write_text("")
    head.write_text("click,a\n")
    df = pd.DataFrame({"click": [0, 1, 0, 1], "a": [0.1, 0.2, 0.3, 0.4]})
    parquet, text = tmp_path / "t.parquet", tmp_path / "t.csv"
    df.to_parquet(parquet)
    df.to_csv(text, index=False)
    sf = _scheduler_file(client1, tmp_path)
    cases = [(["--train", str(empty)], f"{empty}: no rows"),
             (["--train", str(head), "--format", "csv", "--label", "click"],
              f"{head}: no rows"),
             (["--train", str(parquet), "--format", "csv", "--label", "click"],
              f"{parquet}: its first line is not delimited text (it holds NUL bytes): a "
              f"binary file (e.g. Parquet: use --format parquet), or lines ending in a lone CR?"),
             (["--train", str(text), "--format", "parquet", "--label", "click"],
              f"{text}: not a Parquet file (Parquet magic bytes not found in footer. Either "
              f"the file is corrupted or this is not a parquet file.)")]
    for algorithm in ("lr", "fm", "gbdt"):
        for argv, message in cases:
            assert main(["train", algorithm, *argv, "--scheduler-file", sf]) == 2
            assert capsys.readouterr().err.strip().splitlines()[-1] == \
                f"dask-ps: error: {message}", (algorithm, argv)


@pytest.mark.timeout(300)
def test_inputs_of_no_rows_given_relative_are_named_as_bad_lines_name_them(
        tmp_path, client1, capsys, monkeypatch):
    """Files that are not empty but hold no row, given by a relative path, were named as
    typed ("head.csv: no rows") once read, where a bad line of the same file names its
    absolute path; now every reader's "no rows" names it so: LIBSVM, CSV, Parquet, ratings
    and LDA's text."""
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    sf = _scheduler_file(client1, tmp_path)
    (tmp_path / "comments.svm").write_text("# no row\n\n")
    (tmp_path / "head.csv").write_text("click,a\n")
    pd.DataFrame({"click": [0, 1], "a": [0.5, 1.5]}).iloc[:0].to_parquet(
        tmp_path / "none.parquet")
    (tmp_path / "head.tsv").write_text("user\titem\trating\n")
    (tmp_path / "zero.ldac").write_text("0\n0\n")
    table = ["--label", "click", "--format"]
    for algorithm, argv, message in [
            ("lr", ["--train", "comments.svm"], f"{tmp_path / 'comments.svm'}: no rows"),
            ("gbdt", ["--train", "comments.svm"], f"{tmp_path / 'comments.svm'}: no rows"),
            ("lr", ["--train", "head.csv", *table, "csv"], f"{tmp_path / 'head.csv'}: no rows"),
            ("gbdt", ["--train", "head.csv", *table, "csv"],
             f"{tmp_path / 'head.csv'}: no rows"),
            ("lr", ["--train", "none.parquet", *table, "parquet"],
             f"{tmp_path / 'none.parquet'}: no rows"),
            ("gbdt", ["--train", "none.parquet", *table, "parquet"],
             f"{tmp_path / 'none.parquet'}: no rows"),
            ("mf", ["--train", "head.tsv", "--header"], f"{tmp_path / 'head.tsv'}: no ratings"),
            ("lda", ["--train", "zero.ldac"],
             f"{tmp_path / 'zero.ldac'}: no tokens (no document counts a term)")]:
        assert main(["train", algorithm, *argv, "--scheduler-file", sf]) == 2, argv
        assert capsys.readouterr().err.strip().splitlines()[-1] == \
            f"dask-ps: error: {message}", (algorithm, argv)


@pytest.mark.timeout(300)
def test_empty_inputs_of_mf_lda_gbdt_are_named_and_empty_test_sets_refused(tmp_path, client1,
                                                                          capsys):
    """mf said "X has no ratings", lda "table 'nwk': shape must be ...", a Parquet file
    without the rating columns "columns [...] are not among [...]" (no file); an empty
    --test file ended mf, lda and gbdt (libsvm) with an error instead of "test: no ...",
    then was scored so with status 0; it is now refused as evaluate refuses it (status 2,
    naming --test), before a cluster starts (test_cli_prechecks)."""
    import pandas as pd

    sf = _scheduler_file(client1, tmp_path)
    empty = {ext: tmp_path / f"empty.{ext}" for ext in ("tsv", "ldac", "svm")}
    for path in empty.values():
        path.write_text("")
    ratings, docs, rows = tmp_path / "r.tsv", tmp_path / "d.ldac", tmp_path / "g.svm"
    ratings.write_text("1\t2\t5\n1\t3\t4\n2\t2\t3\n3\t1\t1\n")
    docs.write_text("2 0:1 1:2\n1 2:3\n3 0:1 3:2 4:1\n")
    _svm(rows, np.tile([0, 1], 50))
    table = tmp_path / "t.parquet"
    pd.DataFrame({"u": [1, 2], "i": [3, 4], "r": [5.0, 1.0]}).to_parquet(table)

    def last(algorithm, *argv, status=2):
        assert main(["train", algorithm, *argv, "--max-iter" if algorithm != "gbdt" else
                     "--n-estimators", "2", "--scheduler-file", sf]) == status
        return capsys.readouterr()

    assert last("mf", "--train", str(empty["tsv"])).err.strip().splitlines()[-1] == \
        f"dask-ps: error: {empty['tsv']}: no ratings"  # (before a cluster starts)
    assert last("lda", "--train", str(empty["ldac"])).err.strip().splitlines()[-1] == \
        f"dask-ps: error: {empty['ldac']}: no documents"
    assert last("mf", "--train", str(table)).err.strip().splitlines()[-1] == \
        f"dask-ps: error: {table}: columns ['user', 'item', 'rating'] are not among " \
        f"['u', 'i', 'r'] (named as the user, item and rating columns: user=, item=, " \
        f"rating= in Python, --user-column, --item-column, --rating-column for dask-ps)"
    for algorithm, train, test, what in [("mf", ratings, "tsv", "no ratings"),
                                         ("lda", docs, "ldac", "no documents"),
                                         ("gbdt", rows, "svm", "no rows")]:
        err = last(algorithm, "--train", str(train), "--test", str(empty[test])).err
        assert err == f"dask-ps: error: --test {empty[test]}: {what} to score the model on\n"


@pytest.mark.timeout(200)
def test_csv_or_parquet_read_as_libsvm_hints_the_format(tmp_path, client1, capsys):
    """The default --format libsvm on a CSV file said "label is not a finite number:
    'click,a,c'" and no more; a CSV's first line (a ',' and no index:value pair) or Parquet's
    magic bytes now add which --format to pass. A bad LIBSVM line gets no such hint."""
    import pandas as pd

    df = pd.DataFrame({"click": [0, 1, 0, 1], "a": [0.1, 0.2, 0.3, 0.4], "c": list("xyzw")})
    head, bare, parquet, svm = (tmp_path / n for n in ("h.csv", "bare.txt", "t.parquet",
                                                       "bad.svm"))
    df.to_csv(head, index=False)
    df.to_csv(bare, index=False, header=False)
    df.to_parquet(parquet)
    svm.write_text("1 1:0.5,2:1\n")
    sf = _scheduler_file(client1, tmp_path)
    csv_hint = " (is this a CSV file? use --format csv)"
    not_libsvm = "line 1: not a LIBSVM line (a label, then index:value pairs): "
    cases = [(head, f"{not_libsvm}'click,a,c'{csv_hint}"),  # (before a cluster starts)
             (bare, f"{not_libsvm}'0,0.1,x'{csv_hint}"),
             (parquet, "not LIBSVM text"),
             (svm, "line 1: value is not a finite number: '1:0.5,2:1'")]
    for algorithm in ("lr", "gbdt"):
        for path, message in cases:
            assert main(["train", algorithm, "--train", str(path), "--scheduler-file", sf]) == 2
            line = capsys.readouterr().err.strip().splitlines()[-1]
            sep = ":" if path == parquet else ","
            assert line.startswith(f"dask-ps: error: {path}{sep} {message}"), (algorithm, line)
            assert line.endswith(" (is this a Parquet file? use --format parquet)"
                                 if path == parquet else message), (algorithm, line)


@pytest.mark.timeout(200)
def test_a_table_given_to_evaluate_for_a_libsvm_model_names_no_option_it_cannot_take(
        tmp_path, client1, capsys):
    """A LIBSVM model's test file that looks like a table (or Parquet) was hinted with
    "dask-ps train reads it with --format csv", and the reader's advice in Python words
    would read "use --format csv" in evaluate, which refuses --format csv for a LIBSVM
    model: now the hint says that the test data is read as the training data was."""
    import pandas as pd

    model = str(tmp_path / "m.npz")
    assert main(["train", "lr", "--train", _svm(tmp_path / "tr.svm", np.tile([0, 1], 20)),
                 "--max-iter", "1", "--save", model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    capsys.readouterr()
    df = pd.DataFrame({"click": [0, 1], "a": [0.1, 0.2]})
    comma, semi, parquet = (tmp_path / n for n in ("te.csv", "te.txt", "te.parquet"))
    df.to_csv(comma, index=False)
    df.to_csv(semi, index=False, sep=";")
    df.to_parquet(parquet)
    read_as = ("the model was trained on LIBSVM data: dask-ps evaluate reads the test data as "
               "the training data was read)")
    for path, first, what in [(comma, "click,a", "CSV file"),
                              (semi, "click;a", "table of fields separated by ';'"),
                              (parquet, None, "Parquet file")]:
        assert main(["evaluate", model, "--test", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.endswith(f" (is this a {what}? {read_as}\n"), err
        assert "--format" not in err and "--sep" not in err and "format=" not in err, err
        if first:
            assert err.startswith(f"dask-ps: error: {path}, line 1: label is not a finite "
                                  f"number: {first!r} (is this"), err


@pytest.mark.timeout(200)
def test_a_bug_keeps_its_traceback_and_user_errors_stay_one_line(tmp_path, client1, capsys,
                                                                 monkeypatch):
    """Every ValueError was taken for the user's (one line, status 2), a bug's deep in NumPy
    too; now only bad data, options, files and cluster failures are. A ValueError from NumPy
    injected into a real run keeps its traceback (status 1); the estimator's parameter
    checks run before any cluster starts, one line naming the flags."""
    from dask_ps.cli import _lr

    tr = _svm(tmp_path / "tr.svm", np.tile([-1, 1], 100))
    one = _svm(tmp_path / "one.svm", np.ones(50))
    sf = _scheduler_file(client1, tmp_path)
    argv = ["--scheduler-file", sf, "--max-iter", "2"]

    def buggy(client):  # a shape bug, in the load of a real run
        return int(np.zeros(3).reshape(2, 2).sum())

    with monkeypatch.context() as m:
        m.setattr(_lr, "_n_threads", buggy)
        assert main(["train", "lr", "--train", tr, *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "Traceback (most recent call last):" and "buggy" in "\n".join(err)
    assert err[-1] == "dask-ps: error: unexpected ValueError: cannot reshape array of size 3 " \
                      "into shape (2,2) (a bug of dask_ps? please report it with the " \
                      "traceback above)"

    assert main(["train", "lr", "--train", tr, *argv, "--penalty", "l1", "--solver",
                 "sgd"]) == 2
    out = capsys.readouterr()
    assert out.err == "dask-ps: error: --solver, --penalty: penalty='l1' needs solver='ftrl' " \
                      "or 'lbfgs' (OWL-QN)\n" and "cluster:" not in out.out
    assert main(["train", "fm", "--train", one, *argv]) == 2
    assert capsys.readouterr().err == f"dask-ps: error: {one}: the label field holds one " \
        f"class only, 1.0: a classifier needs samples of at least 2 classes\n"


@pytest.mark.timeout(200)
def test_n_shards_far_above_the_workers_is_refused_before_reading(tmp_path, client1, capsys):
    """--n-shards 1000 on a 1,000-row file and 2 local workers ran 184-206 s (9 s with 2
    shards: every clock waits on each shard); above 16 per shard worker is refused: before a
    local cluster starts, once a scheduler's workers are known, before the data is read."""
    tr = _svm(tmp_path / "tr.svm", np.tile([-1, 1], 100))
    assert main(["train", "lr", "--train", tr, "--workers", "2", "--n-shards", "33"]) == 2
    out = capsys.readouterr()
    assert out.err.startswith("dask-ps: error: --n-shards 33: at most 16 per shard worker, so "
                              "32 with 2 workers (") and "cluster:" not in out.out
    argv = ["train", "lr", "--train", tr, "--scheduler-file",
            _scheduler_file(client1, tmp_path), "--max-iter", "1"]
    assert main([*argv, "--n-shards", "17"]) == 2
    out = capsys.readouterr()
    assert out.err == "dask-ps: error: --n-shards 17: at most 16 per shard worker, so 16 " \
                      "with 1 worker (every clock waits on each shard, so more only add round " \
                      "trips; the default is one per worker)\n"
    assert "workers: " in out.out and "training" not in out.out
    assert main([*argv, "--n-shards", "16"]) == 0
    assert "training LogisticRegression" in capsys.readouterr().out


@pytest.mark.timeout(200)
def test_the_model_is_saved_before_the_test_set_is_scored(tmp_path, client1, capsys):
    """A bad line in --test was found when scoring, before the save: the finished model was
    lost. Now it is saved first; a truncated or empty model file is then a user error naming
    it (was BadZipFile / EOFError, status 1, "a bug of dask_ps?")."""
    from dask_ps.saving import load_estimator

    rows = [f"{i % 2},{i},s{i % 7}\n" for i in range(200)]
    train, test = tmp_path / "tr.csv", tmp_path / "te.csv"
    train.write_text("click,price,shop\n" + "".join(rows))
    test.write_text("click,price,shop\n" + "".join(rows[:40]) + "1,N/A,s1\n")
    model = tmp_path / "m.npz"
    assert main(["train", "lr", "--format", "csv", "--train", str(train), "--test", str(test),
                 "--label", "click", "--max-iter", "1", "--hash-features", "64", "--save",
                 str(model), "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 2
    out = capsys.readouterr()
    assert f"saved: {model}" in out.out
    assert out.err == f"dask-ps: error: {test}, line 42: column 'price' (field 2): 'N/A' is " \
                      f"not a finite number\n"
    est, extra = load_estimator(str(model))
    assert est.classes_.tolist() == [0.0, 1.0] and extra["data"]["label"] == "click"
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []

    data = model.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "text.npz").write_bytes(b"hello\n")  # numpy's error spoke of pickles
    for name, why in [("cut.npz", ", or truncated (BadZipFile: File is not a zip file)"),
                      ("empty.npz", " (an empty file)"),
                      ("text.npz", " (it starts with b'hello\\n', not a .npz archive's "
                                   "'PK')")]:
        path = tmp_path / name
        for command in (["evaluate", str(path), "--test", str(train)],
                        ["export", str(path), str(tmp_path / "out")]):
            assert main(command) == 2
            assert capsys.readouterr().err == f"dask-ps: error: {path}: not a dask_ps model " \
                                              f"file{why}\n"



def test_a_failed_save_leaves_no_temporary_file(tmp_path):
    """Saving over a folder left a <path>.tmp-PID file (75 MB for a hashed FM) behind."""
    from dask_ps import LogisticRegression
    from dask_ps.saving import save_estimator

    folder = tmp_path / "adir"
    folder.mkdir()
    # (was NotADirectoryError "Not a directory: '.../adir/.tmp-PID' -> '.../adir/'")
    for path in (str(folder), str(folder) + "/", str(tmp_path / "new") + "/"):
        with pytest.raises(IsADirectoryError, match=f"^{path}: a folder; give a file name "
                                                    f"such as {folder.parent}/"):
            save_estimator(LogisticRegression(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_a_save_whose_temporary_name_is_a_folder_keeps_it_and_its_error(tmp_path):
    """The clean-up of a failed save removed its temporary file by name: when that name was
    a folder (not made by the save), os.remove raised IsADirectoryError over the first error;
    now the folder stays and the open's own error is raised."""
    import os

    from dask_ps import LogisticRegression
    from dask_ps.saving import save_estimator

    path = tmp_path / "m.npz"
    taken = tmp_path / f"m.npz.tmp-{os.getpid()}"
    (taken / "inside").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as err:
        save_estimator(LogisticRegression(), str(path))
    assert err.value.filename == str(taken) and err.value.__context__ is None
    assert (taken / "inside").is_dir() and not path.exists()


def test_a_folder_given_as_a_model_file_is_named(tmp_path, capsys):
    """load_estimator (dask-ps evaluate, export) on a folder, e.g. a checkpoint, raised a raw
    IsADirectoryError from fsspec, status 1."""
    from dask_ps.exceptions import DataError
    from dask_ps.saving import load_estimator

    test = tmp_path / "t.svm"
    test.write_text("1 1:1\n")
    with pytest.raises(DataError, match=f"^{tmp_path}: a folder, not a model file"):
        load_estimator(str(tmp_path))
    assert main(["evaluate", str(tmp_path), "--test", str(test)]) == 2
    assert capsys.readouterr().err.startswith(f"dask-ps: error: {tmp_path}: a folder, not a "
                                              f"model file written by save_estimator")


@pytest.mark.timeout(200)
def test_a_tab_given_as_backslash_t_and_labels_that_are_not_classes(tmp_path, client1, capsys):
    """--sep '\\t' (what the one-column hint advises) raised csv's TypeError, status 1; labels
    0/0.7 gave scikit-learn's "Unknown label type: continuous", status 1. Now the first is a
    tab, the second a user error naming the file, the column, a value and its line."""
    tsv, soft = tmp_path / "log.tsv", tmp_path / "soft.csv"
    tsv.write_text("click\tprice\tshop\n" + "".join(f"{i % 2}\t{i}\t{'ab'[i % 2]}\n"
                                                     for i in range(40)))
    soft.write_text("click,price,shop\n" + "".join(f"{0.7 * (i % 2):g},{i},{'ab'[i % 2]}\n"
                                                   for i in range(40)))
    argv = ["--label", "click", "--max-iter", "1", "--hash-features", "64",
            "--scheduler-file", _scheduler_file(client1, tmp_path)]
    for spelling in ("\\t", "\\\\t", "\t"):
        assert main(["train", "lr", "--format", "csv", "--train", str(tsv), "--sep", spelling,
                     *argv]) == 0, spelling
        assert "training LogisticRegression on 40 rows x 64 features" in capsys.readouterr().out
    for algorithm in ("lr", "fm"):
        assert main(["train", algorithm, "--format", "csv", "--train", str(soft), *argv]) == 2
        out = capsys.readouterr()
        assert out.err == f"dask-ps: error: {soft}: label column 'click' holds 0.7 (first " \
                          f"at {soft}, line 3), not a class: a classifier needs discrete " \
                          f"labels such as 0 and 1 (whole numbers), not continuous values\n"
        assert "training" not in out.out


def test_evaluate_refuses_a_model_saved_without_its_data_options(tmp_path, capsys):
    """A version written by learn_online (save_estimator from Python) ended in KeyError
    'format', status 1."""
    from dask_ps import LogisticRegression
    from dask_ps.saving import save_estimator

    model, test = tmp_path / "v.npz", tmp_path / "t.svm"
    save_estimator(LogisticRegression(), str(model))
    test.write_text("1 1:1\n")
    assert main(["evaluate", str(model), "--test", str(test)]) == 2
    assert capsys.readouterr().err.startswith(
        f"dask-ps: error: {model}: the model file does not say how its training data was read")


@pytest.mark.timeout(120)
def test_misspelt_columns_and_nested_parquet_columns_are_refused_before_a_cluster(
        tmp_path, capsys, no_cluster):
    """A misspelt --label (or column option) was found once the cluster had started (~7 s;
    with a job queue, jobs submitted), a Parquet list column gave pyarrow's cast error as a
    bug (status 1). Now the headers of --train and --test are checked before a cluster
    starts: status 2, naming the file and listing its columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    train.write_text("click,price,shop\n" + "".join(f"{i % 2},{i},{'ab'[i % 2]}\n"
                                                    for i in range(20)))
    test.write_text("clik,price,shop\n1,1,a\n")
    pq.write_table(pa.table({"click": [0, 1], "price": [1.0, 2.0], "tags": [["a"], ["b"]]}),
                   tmp_path / "nested.parquet")
    pq.write_table(pa.table({"click": [0, 1], "tags": [["a"], ["b"]], "price": [1.0, 2.0],
                             "geo": [{"lat": 1.0}] * 2}), tmp_path / "nested2.parquet")
    pq.write_table(pa.table({"click": [0, 1], "price": [1.0, 2.0]}), tmp_path / "ok.parquet")
    pq.write_table(pa.table({"click": [0, 1], "cost": [1.0, 2.0]}), tmp_path / "other.parquet")
    columns = "['click', 'price', 'shop']"
    cases = [
        (["--format", "csv", "--train", train, "--label", "clik"],
         f"{train}: label column 'clik' is not among {columns}"),
        (["--format", "csv", "--train", train, "--label", "click", "--numeric", "prise"],
         f"{train}: columns ['prise'] are not among {columns}"),
        (["--format", "csv", "--train", train, "--label", "click", "--categorical", "shap"],
         f"{train}: columns ['shap'] are not among {columns}"),
        (["--format", "csv", "--train", train, "--label", "click", "--test", test],
         f"{test}: columns ['click'] are not among ['clik', 'price', 'shop']"),
        (["--format", "parquet", "--train", tmp_path / "ok.parquet", "--label", "clik"],
         f"{tmp_path / 'ok.parquet'}: label column 'clik' is not among ['click', 'price']"),
        (["--format", "parquet", "--train", tmp_path / "ok.parquet", "--label", "click",
          "--test", tmp_path / "other.parquet"],
         f"{tmp_path / 'other.parquet'}: columns ['price'] are not among ['click', 'cost']"),
        (["--format", "parquet", "--train", tmp_path / "nested.parquet", "--label", "click"],
         f"{tmp_path / 'nested.parquet'}: column 'tags' is list<element: string>: a list, "
         f"struct or map column cannot be a feature; leave it out (use --exclude tags)"),
        (["--format", "parquet", "--train", tmp_path / "nested2.parquet", "--label", "click"],
         f"{tmp_path / 'nested2.parquet'}: column 'tags' is list<element: string>: a list, "
         f"struct or map column cannot be a feature (nor can ['geo']); leave them out (use "
         f"--exclude tags,geo)"),
    ]
    _refused_before_a_cluster(cases, ("lr", "fm"), capsys)


def _refused_before_a_cluster(cases, algorithms, capsys) -> None:
    """Each ``(argv, message)`` of ``cases`` exits 2 with the one line ``message`` under
    each algorithm, no cluster started."""
    for algorithm in algorithms:
        for argv, message in cases:
            argv = ["train", algorithm, *map(str, argv), "--workers", "1"]
            assert main(argv) == 2, argv
            out = capsys.readouterr()
            assert out.err.startswith(f"dask-ps: error: {message}"), (argv, out.err)
            assert out.err.count("\n") == 1 and "cluster:" not in out.out


def test_gbdt_misspelt_label_or_categorical_column_is_refused_before_a_cluster(
        tmp_path, capsys, no_cluster):
    """dask-ps train gbdt found a misspelt --label or --categorical once the cluster had
    read the files; the headers of --train and --test are now checked first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    train.write_text("y,a,s\n" + "".join(f"{i % 2},{i},{'pq'[i % 2]}\n" for i in range(20)))
    test.write_text("yy,a,s\n1,1,p\n")
    pq.write_table(pa.table({"y": [0, 1], "a": [1.0, 2.0]}), tmp_path / "t.parquet")
    csv = ["--format", "csv", "--train", train]
    table = ["--format", "parquet", "--train", tmp_path / "t.parquet"]
    no = "{}: no column {!r}, named by {} (columns: {})".format  # and the option naming it
    _refused_before_a_cluster(
        [(csv + ["--label", "why"], no(train, "why", "--label", ["y", "a", "s"])),
         (csv + ["--label", "y", "--categorical", "ss"],
          no(train, "ss", "--categorical", ["y", "a", "s"])),
         (csv + ["--label", "y", "--test", test], no(test, "y", "--label", ["yy", "a", "s"])),
         (table + ["--label", "x"], no(tmp_path / "t.parquet", "x", "--label", ["y", "a"]))],
        ("gbdt", "gbdt-regression"), capsys)


@pytest.mark.timeout(200)
def test_a_stray_third_class_for_fm_names_its_first_row(tmp_path, client1, capsys):
    """A -1 among 0/1 labels gave FM's "got y with 3 classes [-1.0, 0.0, 1.0]", naming no
    row; now the rarest class, its count and the first row holding it (in the third of four
    blocks here: its file and line, the header being line 1) are named, status 2, before
    the fit."""
    train = tmp_path / "l.csv"
    labels = [i % 2 for i in range(400)]
    labels[301] = -1
    train.write_text("click,price\n" + "".join(f"{c},{i}\n" for i, c in enumerate(labels)))
    argv = ["train", "fm", "--format", "csv", "--train", str(train), "--label", "click",
            "--max-iter", "1", "--hash-features", "64", "--blocksize", "1000",
            "--scheduler-file", _scheduler_file(client1, tmp_path)]
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.err == f"dask-ps: error: {train}: label column 'click' holds 3 classes " \
                      f"[-1.0, 0.0, 1.0]; the factorization machine is binary (two classes): " \
                      f"-1.0 in 1 row, first at {train}, line 303\n"
    assert "training" not in out.out


def _labelled_files(folder, ext: str, bad: str) -> tuple[str, int]:
    """Two files of 0/1 labels (CSV with a header, or LIBSVM) with blank lines (and LIBSVM
    comments) among their rows; the second holds ``bad`` once, on a line past several of
    them. Returns that file and the line (1-based; a CSV header is line 1)."""
    lines = {}
    for name, n in (("a", 30), ("b", 60)):
        rows = [f"{i % 2},{i}" if ext == "csv" else f"{i % 2} 1:{i + 1}" for i in range(n)]
        rows[5:5] = ["", "# a comment", ""] if ext == "svm" else ["", ""]
        rows[30:30] = ["", "  # indented"] if ext == "svm" else [""]
        lines[name] = (["click,price"] if ext == "csv" else []) + rows
    b = lines["b"]
    at = b.index("1,41" if ext == "csv" else "1 1:42")
    b[at] = f"{bad},41" if ext == "csv" else f"{bad} 1:42"
    for name, text in lines.items():
        (folder / f"{name}.{ext}").write_text("\n".join(text) + "\n")
    return str(folder / f"b.{ext}"), at + 1


@pytest.mark.timeout(300)
def test_a_stray_class_is_named_by_its_file_and_line(tmp_path, client1, capsys):
    """A third class (fm) was named by its data row over all the files concatenated ("first
    in data row 73 (the header not counted)"), a label that is no class (0.7) not at all:
    with --train 'logs/*.csv' the user had to count. Now both name the file and the line in
    it (the CSV header is line 1, blank and comment lines count), here in a later block of
    the second file."""
    sf = _scheduler_file(client1, tmp_path)
    for ext, fmt in (("csv", ["--format", "csv", "--label", "click", "--hash-features", "64"]),
                     ("svm", [])):
        for algorithm, bad in (("fm", "-1"), ("lr", "0.7"), ("fm", "0.7")):
            folder = tmp_path / f"{ext}-{algorithm}-{bad}"
            folder.mkdir()
            path, line = _labelled_files(folder, ext, bad)
            argv = ["train", algorithm, "--train", str(folder / f"*.{ext}"), *fmt,
                    "--max-iter", "1", "--blocksize", "120", "--scheduler-file", sf]
            assert main(argv) == 2, argv
            out = capsys.readouterr()
            column = "label column 'click'" if ext == "csv" else "the label field"
            what = f"dask-ps: error: {folder / f'*.{ext}'}: {column} holds "
            if bad == "-1":
                assert out.err == f"{what}3 classes [-1.0, 0.0, 1.0]; the factorization " \
                                  f"machine is binary (two classes): -1.0 in 1 row, first at " \
                                  f"{path}, line {line}\n", argv
            else:
                assert out.err == f"{what}0.7 (first at {path}, line {line}), not a class: " \
                                  f"a classifier needs discrete labels such as 0 and 1 (whole " \
                                  f"numbers), not continuous values\n", argv
            assert "training" not in out.out


@pytest.mark.timeout(300)
def test_test_labels_that_are_no_class_and_one_training_class_are_named_by_file(
        tmp_path, client1, capsys):
    """A --test file whose labels hold a 0.5 ended the run with scikit-learn's "Classification
    metrics can't handle a mix of continuous and binary targets" as a bug (status 1), after
    training, for lr, fm and gbdt, and in dask-ps evaluate; training labels of one class
    named no file ("the data contains only one class: 1.0"), after "training ...". Now the
    first as the training labels are named, by file and line (the model saved first), the
    second by file, before training."""
    sf = _scheduler_file(client1, tmp_path)
    train = _svm(tmp_path / "tr.svm", np.tile([0, 1], 100))
    labels = np.tile([0.0, 1.0], 50)
    labels[50] = 0.5
    test = _svm(tmp_path / "te.svm", labels)
    one = _svm(tmp_path / "one.svm", np.ones(50))
    no_class = (f"dask-ps: error: {test}: the label field holds 0.5 (first at {test}, line "
                f"51), not a class: a classifier needs discrete labels such as 0 and 1 (whole "
                f"numbers), not continuous values\n")
    for algorithm, rounds in (("lr", "--max-iter"), ("fm", "--max-iter"),
                              ("gbdt", "--n-estimators")):
        model = tmp_path / f"{algorithm}.npz"
        assert main(["train", algorithm, "--train", train, "--test", test, rounds, "2",
                     "--save", str(model), "--scheduler-file", sf]) == 2, algorithm
        out = capsys.readouterr()
        assert out.err == no_class and f"saved: {model}" in out.out, algorithm
        assert main(["evaluate", str(model), "--test", test]) == 2
        assert capsys.readouterr().err == no_class, algorithm
        assert main(["train", algorithm, "--train", one, rounds, "2", "--scheduler-file",
                     sf]) == 2
        out = capsys.readouterr()
        assert out.err == f"dask-ps: error: {one}: the label field holds one class only, " \
                          f"1.0: a classifier needs samples of at least 2 classes\n", algorithm
        assert "training" not in out.out


def test_mf_columns_missing_from_names_or_header_are_refused_before_a_cluster(
        tmp_path, capsys, no_cluster):
    """dask-ps train mf found --names without the rating column, or --header on a file
    without one, once a cluster had started (4-13 s); they are now refused first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    train, test = tmp_path / "r.tsv", tmp_path / "t.tsv"
    train.write_text("".join(f"{i}\t{i % 3}\t{1 + i % 5}\t{100 + i}\n" for i in range(20)))
    test.write_text("u\ti\tr\n1\t1\t5\n")
    headed = tmp_path / "h.tsv"
    headed.write_text("user\titem\trating\n1\t1\t5\n")
    pq.write_table(pa.table({"u": [1, 2], "item": [1, 2], "rating": [3.0, 4.0]}),
                   tmp_path / "r.parquet")
    _refused_before_a_cluster(
        [(["--train", train, "--names", "user,item"],
          f"{train}: columns ['rating'] are not among ['user', 'item'] (named as the rating "
          f"column: rating= in Python, --rating-column for dask-ps)\n"),
         (["--train", train, "--header"],
          f"{train}: columns ['user', 'item', 'rating'] are not among ['0', '0', '1', '100']"),
         (["--train", headed, "--test", test, "--header"],
          f"{test}: columns ['user', 'item', 'rating'] are not among ['u', 'i', 'r']"),
         (["--train", headed, "--header", "--item-column", "user"],
          f"{headed}: one column cannot be two of user, item and rating: user='user', "
          f"item='user'"),
         (["--train", tmp_path / "r.parquet"],
          f"{tmp_path / 'r.parquet'}: columns ['user'] are not among ['u', 'item', 'rating']")],
        ("mf",), capsys)


def test_mf_column_options_on_a_headerless_file_are_refused_before_a_cluster(
        tmp_path, capsys, no_cluster):
    """--user-column, --item-column and --rating-column only renamed the fields of a file
    read without --header or --names: --rating-column nosuch trained on field 3, --user-column
    item --item-column user on the users still (exit 0). Now refused, saying what to pass;
    with --names they pick among its names."""
    train, test = tmp_path / "r.tsv", tmp_path / "t.tsv"
    train.write_text("".join(f"{i}\t{i % 3}\t{1 + i % 5}\t{100 + i}\n" for i in range(20)))
    test.write_text("1\t1\t5\t100\n")
    how = ("pass --header for a file that starts with its column names, or --names to name "
           "the fields of a headerless file (default user,item,rating,timestamp)")
    _refused_before_a_cluster(
        [(["--train", train, "--rating-column", "nosuch"],
          f"--rating-column nosuch names a header column, but --train {train} is read "
          f"without a header: {how}"),
         (["--train", train, "--user-column", "item", "--item-column", "user"],
          f"--user-column item, --item-column user name header columns, but --train {train} "
          f"is read without a header: {how}"),
         (["--train", train, "--user-column", "user", "--rating-column", "r"],
          f"--rating-column r names a header column, but --train {train} is read without a "
          f"header: {how}"),
         (["--train", train, "--names", "a,b,c,d", "--user-column", "x"],
          f"{train}: columns ['x', 'item', 'rating'] are not among ['a', 'b', 'c', 'd'] "
          f"(named as the user, item and rating columns: user=, item=, rating= in Python, "
          f"--user-column, --item-column, --rating-column for dask-ps)\n")],
        ("mf",), capsys)


@pytest.mark.timeout(300)
def test_a_folder_is_its_files_and_a_compressed_file_is_named(tmp_path, client1, capsys):
    """--train FOLDER said "no such file (a directory)" (Parquet written by Spark or dask
    is a folder); a gzip file without .gz said "label is not a finite number:
    '\\x1f\\ufffd\\x08...'" (LIBSVM)."""
    import gzip

    import pandas as pd

    rng = np.random.default_rng(4)
    df = pd.DataFrame({"click": np.arange(40) % 2, "a": rng.random(40), "c": list("xyzw") * 10})
    for fmt in ("csv", "parquet"):
        (tmp_path / fmt).mkdir()
        for i in range(2):
            part = df.iloc[20 * i:20 * (i + 1)]
            path = tmp_path / fmt / f"part-{i}.{fmt}"
            part.to_csv(path, index=False) if fmt == "csv" else part.to_parquet(path)
        (tmp_path / fmt / "_SUCCESS").write_text("")
    (tmp_path / "none").mkdir()
    packed = tmp_path / "train.svm"
    packed.write_bytes(gzip.compress(b"1 1:0.5 3:1\n0 2:0.25\n"))
    sf = _scheduler_file(client1, tmp_path)
    for fmt in ("csv", "parquet"):
        assert main(["train", "lr", "--train", str(tmp_path / fmt), "--format", fmt, "--label",
                     "click", "--max-iter", "1", "--scheduler-file", sf]) == 0
        assert "train wall" in capsys.readouterr().out
    assert main(["train", "lr", "--train", str(tmp_path / "none"), "--format", "csv",
                 "--label", "click", "--scheduler-file", sf]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"dask-ps: error: --train: folder '{tmp_path / 'none'}' holds no file (names starting "
        f"with '.' or '_' are skipped)")
    assert main(["train", "lr", "--train", str(packed), "--scheduler-file", sf]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"dask-ps: error: {packed}: not LIBSVM text (it is gzip-compressed, but its name does "
        f"not end in .gz: rename it to end in .gz)")


@pytest.mark.timeout(600)
def test_train_and_evaluate_refuse_test_data_of_no_rows_alike(tmp_path, client1, capsys):
    """dask-ps evaluate on an empty test file (LIBSVM, a CSV header alone, ratings, LDA-C)
    printed "test: no rows" (or no ratings, no documents) with status 0; then it was
    refused by matching that line, while dask-ps train --test printed it with status 0.
    Each algorithm's scoring now says how many rows it scored
    (:attr:`~dask_ps.cli._algorithms.Algorithm.score`) and both commands refuse none in one
    line naming --test and the file, status 2: files of 0 bytes and files that hold no row
    (comments, a header alone, a Parquet table or docword of 0 rows) of every family. Test
    data whose rows its reader counted (LIBSVM, LDA's) is refused before the fit, not after
    it; GBDT's tables and ratings, whose readers count no rows before the fit, were refused
    only once scored, after the fit (and the save), and CTR CSV once the cluster had
    started: they are now refused before a cluster starts
    (:func:`~dask_ps.cli._checks.check_test_rows`), and no model is saved."""
    import gzip

    import pandas as pd

    sf = _scheduler_file(client1, tmp_path)
    svm = _svm(tmp_path / "tr.svm", np.tile([0, 1], 20))
    frame = pd.DataFrame({"click": [0, 1] * 10, "a": np.arange(20) / 20})
    frame.to_csv(tmp_path / "tr.csv", index=False)
    frame.to_parquet(tmp_path / "tr.parquet")
    frame.iloc[:0].to_parquet(tmp_path / "none.parquet")
    pd.DataFrame({"user": [1], "item": [2], "rating": [5.0]}).iloc[:0].to_parquet(
        tmp_path / "none.r.parquet")
    (tmp_path / "head.csv.gz").write_bytes(gzip.compress(b"click,a\n\n", mtime=0))
    files = {"empty.svm": "", "blank.svm": "# a comment\n\n", "empty.csv": "",
             "head.csv": "click,a\n", "blank.csv": "click,a\n\n \t\r\n",
             "r.tsv": "1\t2\t5\n1\t3\t4\n2\t2\t3\n3\t1\t1\n",
             "rh.tsv": "user\titem\trating\n1\t2\t5\n1\t3\t4\n2\t2\t3\n3\t1\t1\n",
             "empty.tsv": "", "head.tsv": "user\titem\trating\n", "blank.tsv": "\n \n\t\n",
             "headblank.tsv": "user\titem\trating\n\n  \n",
             "d.ldac": "2 0:1 1:2\n1 2:3\n3 0:1 3:2 4:1\n", "empty.ldac": "", "blank.ldac": "\n",
             "docword.d.txt": "3\n5\n4\n1 1 1\n1 2 2\n2 3 3\n3 5 1\n",
             "docword.none.txt": "0\n5\n0\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    csv, parquet = (["--train", str(tmp_path / f"tr.{f}"), "--format", f, "--label", "click"]
                    for f in ("csv", "parquet"))
    for algorithm, argv, tests, what in [
            ("lr", ["--train", svm], ("empty.svm", "blank.svm"), "no rows"),
            ("fm", ["--train", svm], ("blank.svm",), "no rows"),
            ("lr", csv, ("empty.csv", "head.csv"), "no rows"),
            ("lr", parquet, ("none.parquet",), "no rows"),
            ("gbdt", ["--train", svm], ("empty.svm", "blank.svm"), "no rows"),
            ("gbdt", csv, ("empty.csv", "head.csv", "blank.csv", "head.csv.gz"), "no rows"),
            ("gbdt-regression", parquet, ("none.parquet",), "no rows"),
            ("mf", ["--train", str(tmp_path / "r.tsv")], ("empty.tsv", "blank.tsv",
                                                          "none.r.parquet"), "no ratings"),
            ("mf", ["--train", str(tmp_path / "rh.tsv"), "--header"],
             ("head.tsv", "headblank.tsv"), "no ratings"),
            ("lda", ["--train", str(tmp_path / "d.ldac")], ("empty.ldac", "blank.ldac"),
             "no documents"),
            ("lda", ["--train", str(tmp_path / "docword.d.txt")], ("docword.none.txt",),
             "no documents")]:
        model = str(tmp_path / f"{algorithm}.npz")
        run = [*argv, "--n-estimators" if algorithm.startswith("gbdt") else "--max-iter", "1",
               "--scheduler-file", sf]
        assert main(["train", algorithm, *run, "--save", model]) == 0, algorithm
        for test in tests:
            said = f"dask-ps: error: --test {tmp_path / test}: {what} to score the model on\n"
            capsys.readouterr()
            assert main(["evaluate", model, "--test", str(tmp_path / test)]) == 2, \
                (algorithm, test)
            assert capsys.readouterr().err == said, (algorithm, test)
            saved = tmp_path / "test.npz"
            assert main(["train", algorithm, *run, "--test", str(tmp_path / test), "--save",
                         str(saved)]) == 2, (algorithm, test)
            out = capsys.readouterr()
            assert out.err == said and "test:" not in out.out, (algorithm, test)
            # refused before training, and nothing saved: rows counted by a reader's first
            # pass once the cluster has started (LIBSVM, LDA's); files of 0 bytes, tables
            # (GBDT's, CTR CSV, ratings: check_test_rows) and any Parquet (its footers)
            # before it starts
            assert "training " not in out.out and not saved.exists(), (algorithm, test)
            frame = algorithm == "mf" or "--format" in argv or test.endswith(".parquet")
            assert ("cluster:" in out.out) == (not test.startswith("empty.") and not frame), \
                (algorithm, test)


@pytest.mark.timeout(200)
def test_a_libsvm_value_beyond_float32_is_refused_at_read_time_naming_its_line(
        tmp_path, client1, capsys):
    """1:1e39 was read as inf into float32 X (NumPy's "overflow encountered in cast" only),
    and train failed at the fit with "X: value inf at row 0, column 0 is not finite", no file
    nor line; now the reader refuses it, and dask-ps, which has no dtype option, says so."""
    path = tmp_path / "h.svm"
    path.write_text("0 2:1\n1 1:0.5 3:-1e39\n")
    assert main(["train", "lr", "--train", str(path),
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"dask-ps: error: {path}, line 2: value -1e+39 of feature index 3 is too large for "
        f"float32 (X's dtype: at most 3.4028235e+38 in magnitude): '3:-1e39'; dask-ps reads "
        f"feature values as float32 (no option widens them): scale the feature")
