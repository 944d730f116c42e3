"""What ``dask-ps train`` refuses before starting a cluster from the files' sizes, first
KiB and Parquet footers (an empty file, a table given as LIBSVM, a text column of a GBDT
table), its config values' types and help listings, and how a missing label is named."""

import gzip

import numpy as np
import pandas as pd
import pytest

from dask_ps.algorithms._logistic_data import check_classes
from dask_ps.cli import _parser, main
from dask_ps.cli._defaults import doc_default, estimator_default
from dask_ps.cli._registry import ALGORITHMS
from dask_ps.exceptions import DataError


def _error(capsys, argv) -> str:
    """The one error line of ``argv``, which must not have started a cluster."""
    assert main(argv) == 2
    out = capsys.readouterr()
    assert "cluster:" not in out.out and "dashboard" not in out.out, out.out
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    return lines[0].removeprefix("dask-ps: error: ")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm, name, options, message", [
    ("lr", "empty.svm", [], "no rows"), ("fm", "empty.svm", [], "no rows"),
    ("gbdt", "empty.svm", [], "no rows"), ("mf", "empty.data", [], "no ratings"),
    ("mf", "empty.csv", ["--header"], "no ratings"), ("lda", "empty.dat", [], "no documents"),
    ("lda", "docword.empty.txt", [], "no documents"),
    ("lda", "empty.txt", ["--format", "docword"], "no documents")])
def test_an_empty_training_file_is_refused_before_a_cluster_starts(tmp_path, capsys, algorithm,
                                                                   name, options, message):
    """mf and lda found an empty --train only once a cluster had started and read it (lda:
    "no tokens ...", or for docword "the first three lines must be ...")."""
    path = tmp_path / name
    path.write_bytes(b"")
    assert _error(capsys, ["train", algorithm, "--train", str(path), *options]) == \
        f"{path}: {message}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm, train, test, options, what", [
    ("lr", "1 1:1\n0 2:1\n", "empty.svm", [], "no rows"),
    ("fm", "1 1:1\n0 2:1\n", "empty.svm", [], "no rows"),
    ("gbdt", "1 1:1\n0 2:1\n", "empty.svm", [], "no rows"),
    ("lr", "click,a\n0,1\n1,2\n", "empty.csv", ["--format", "csv", "--label", "click"],
     "no rows"),
    ("gbdt-regression", "y,a\n0,1\n1,2\n", "empty.csv", ["--format", "csv", "--label", "y"],
     "no rows"),
    ("mf", "1\t2\t5\n2\t1\t3\n", "empty.tsv", [], "no ratings"),
    ("mf", "user\titem\trating\n1\t2\t5\n", "empty.tsv", ["--header"], "no ratings"),
    ("lda", "2 0:1 1:2\n", "empty.dat", [], "no documents"),
    ("lda", "1\n2\n2\n1 1 1\n1 2 2\n", "docword.empty.txt", ["--format", "docword"],
     "no documents")])
def test_an_empty_test_file_is_refused_before_a_cluster_starts(tmp_path, capsys, algorithm,
                                                               train, test, options, what):
    """An empty --test was scored after the fit as "test: no rows" (status 0), or for a
    table, ratings with --header or a docword named by the header it lacks ("an empty file
    (0 bytes): no header ...", "no columns (an empty file?)", "the first three lines must
    be ..."). Refused now as --train is, from the files' sizes, in the words of an empty
    test set once read (:func:`~dask_ps.cli._checks.no_test_rows`), as evaluate says it."""
    (tmp_path / "train").write_text(train)
    (tmp_path / test).write_bytes(b"")
    assert _error(capsys, ["train", algorithm, "--train", str(tmp_path / "train"), "--test",
                           str(tmp_path / test), *options]) == \
        f"--test {tmp_path / test}: {what} to score the model on"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm, train, tests, options, what", [
    ("gbdt", "y,a\n0,1\n1,2\n", {"a.csv": b"y,a\n", "b.csv": b"y,a\n\n \r\n"},
     ["--format", "csv", "--label", "y"], "no rows"),
    ("gbdt-regression", "0,1\n1,2\n", {"a.csv": b"\n", "b.csv": b"\t\n"},
     ["--format", "csv", "--no-header"], "no rows"),
    ("gbdt", None, {"a.parquet": 0, "b.parquet": 0}, ["--format", "parquet", "--label", "y"],
     "no rows"),
    ("lr", None, {"a.parquet": 0, "b.parquet": 0}, ["--format", "parquet", "--label", "y"],
     "no rows"),
    ("lr", "y,a\n0,1\n1,2\n", {"a.csv": b"y,a\n", "b.csv": b"y,a\n\n\r\n"},
     ["--format", "csv", "--label", "y"], "no rows"),
    ("fm", "y,a\n0,1\n1,2\n", {"a.csv.gz": gzip.compress(b"y,a\n", mtime=0),
                                "b.csv.gz": gzip.compress(b"y,a\n\n", mtime=0)},
     ["--format", "csv", "--label", "y"], "no rows"),
    ("mf", "1\t2\t5\n2\t1\t3\n", {"a.tsv": b"\n\n", "b.tsv": b" \t\n"}, [], "no ratings"),
    ("mf", "user\titem\trating\n1\t2\t5\n",
     {"a.tsv": b"user\titem\trating\n", "b.tsv": b"user\titem\trating\n\n"}, ["--header"],
     "no ratings")], ids=["csv", "csv-no-header", "parquet", "lr-parquet", "lr-ctr-csv",
                          "fm-ctr-csv-gz", "ratings", "ratings-header"])
def test_test_files_of_no_data_row_are_refused_before_a_cluster_starts(
        tmp_path, capsys, algorithm, train, tests, options, what):
    """A --test of GBDT's tables or of ratings that is not empty but holds no data row (a
    header alone, blank lines, Parquet files of 0 rows) was refused only once scored, after
    the fit and the save (their readers count no rows before it), LR's Parquet and CTR CSV
    (lr, fm) once the cluster had started; now before a cluster starts
    (:func:`~dask_ps.cli._checks.check_test_rows`), a glob of such files named as one, as a
    glob of empty files is."""
    frame = pd.DataFrame({"y": [0, 1], "a": [1.0, 2.0]})
    if train is None:
        frame.to_parquet(tmp_path / "train")
    else:
        (tmp_path / "train").write_text(train)
    (tmp_path / "t").mkdir()
    for name, text in tests.items():
        if name.endswith(".parquet"):
            frame.iloc[:0].to_parquet(tmp_path / "t" / name)
        else:
            (tmp_path / "t" / name).write_bytes(text)
    ext = next(iter(tests)).split(".", 1)[1]
    assert _error(capsys, ["train", algorithm, "--train", str(tmp_path / "train"), "--test",
                           str(tmp_path / "t" / f"*.{ext}"), *options]) == \
        f"--test {tmp_path / 't' / f'a.{ext}'} (and 1 other file): {what} to score the model on"


def test_the_test_row_check_passes_on_a_first_row_and_looks_at_no_other_format(tmp_path):
    """:func:`~dask_ps.cli._checks.check_test_rows` passes as soon as one file of a glob
    holds a row (read through a compressed file, after blank lines longer than its reads),
    and for files it cannot read (the reader says why); formats whose readers count rows
    before the fit are not looked at."""
    import gzip

    from dask_ps.cli._checks import check_test_rows

    blank = b"\n" + b" \r\n" * 40_000  # 120 KB of blank lines: more than one read
    files = {"a.csv": b"y,a\n", "b.csv": b"y,a\n" + blank + b"1,2\n",
             "a.tsv": b"\n", "b.tsv.gz": gzip.compress(blank + b"1\t2\t5\n", mtime=0),
             "a.parq": None, "b.parq": None, "c.csv.gz": b"not gzip",
             "blank.svm": b"\n", "blank.ldac": b"\n"}
    for name, data in files.items():
        if data is None:
            pd.DataFrame({"user": [1], "item": [2], "rating": [5.0]}).iloc[
                :0 if name.startswith("a") else 1].to_parquet(tmp_path / name)
        else:
            (tmp_path / name).write_bytes(data)
    for pattern, fmt, header in [("*.csv", "csv", True), ("*.tsv*", "ratings", False),
                                 ("*.parq", "ratings", False), ("c.csv.gz", "csv", True),
                                 ("blank.svm", "libsvm", False), ("blank.ldac", "ldac", False)]:
        check_test_rows(str(tmp_path / pattern), fmt, header, "no rows")  # no error
    with pytest.raises(DataError, match=r"a\.csv: no rows to score the model on$"):
        check_test_rows(str(tmp_path / "a.csv"), "csv", True, "no rows")
    with pytest.raises(DataError, match=r"a\.parq: no ratings to score the model on$"):
        check_test_rows(str(tmp_path / "a.parq"), "ratings", False, "no ratings")



def test_the_ctr_test_row_check_counts_rows_as_the_ctr_reader_does(tmp_path):
    """CTR CSV (``"ctr"``): only empty lines are no rows, as the CTR reader's first pass
    counts them; a line of spaces or tabs is a row to it (one of too few fields, refused
    when read), so it passes here, where GBDT's tables (``"csv"``: a block of whitespace
    alone is no rows to their reader) refuse it."""
    from dask_ps.cli._checks import check_test_rows

    (tmp_path / "empty.csv").write_bytes(b"y,a\n\n\r\n\n")
    (tmp_path / "spaces.csv").write_bytes(b"y,a\n\n \t\r\n")
    with pytest.raises(DataError, match=r"empty\.csv: no rows to score the model on$"):
        check_test_rows(str(tmp_path / "empty.csv"), "ctr", True, "no rows")
    check_test_rows(str(tmp_path / "spaces.csv"), "ctr", True, "no rows")  # no error
    with pytest.raises(DataError, match=r"spaces\.csv: no rows to score the model on$"):
        check_test_rows(str(tmp_path / "spaces.csv"), "csv", True, "no rows")


@pytest.mark.timeout(60)
def test_an_empty_training_file_is_named_as_a_bad_line_names_it(tmp_path, capsys,
                                                                 monkeypatch):
    """``dask-ps train lr --train empty.svm`` said "empty.svm: no rows", the path as typed,
    where a bad line of the same file is named by its absolute path; now both name it so
    (every reader's empty input: LIBSVM, CSV, ratings, LDA's text), and a glob of empty
    files names the first and counts the others."""
    monkeypatch.chdir(tmp_path)
    for name in ("empty.svm", "empty.csv", "empty.data", "empty.dat", "g/a.svm", "g/b.svm",
                 "g/c.svm"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "bad.svm").write_text("1,0.5\n")
    assert _error(capsys, ["train", "lr", "--train", "bad.svm"]).startswith(
        f"{tmp_path / 'bad.svm'}, line 1: ")  # how the others name a file
    for argv, message in [
            (["lr", "--train", "empty.svm"], f"{tmp_path / 'empty.svm'}: no rows"),
            (["fm", "--train", "./empty.svm"], f"{tmp_path / 'empty.svm'}: no rows"),
            (["gbdt", "--train", "empty.csv", "--format", "csv"],
             f"{tmp_path / 'empty.csv'}: no rows"),
            (["mf", "--train", "empty.data"], f"{tmp_path / 'empty.data'}: no ratings"),
            (["lda", "--train", "empty.dat"], f"{tmp_path / 'empty.dat'}: no documents"),
            (["lr", "--train", "g/*.svm"],
             f"{tmp_path / 'g' / 'a.svm'} (and 2 other files): no rows")]:
        assert _error(capsys, ["train", *argv]) == message, argv


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm, sep, text, hint", [
    ("gbdt", "\t", "1\t0.5\t2\n0\t0.1\t3\n",
     "(is this a table of fields separated by '\\t'? use --format csv --sep '\\t' "
     "--no-header)"),
    ("gbdt-regression", ",", "y,a\n1,2\n", "(is this a CSV file? use --format csv)"),
    ("lr", "\t", "# a comment\n1\t0.5\t2\n",
     "(is this a table of fields separated by '\\t'? use --format csv --sep '\\t')"),
    ("fm", ";", "1;0.5\n", "(is this a table of fields separated by ';'? use --format csv "
                            "--sep ';')"),
    ("fm", "|", "1|0.5\n", "(is this a table of fields separated by '|'? use --format csv "
                            "--sep '|')"),
])
def test_a_table_given_as_libsvm_is_refused_with_a_hint_before_a_cluster_starts(
        tmp_path, capsys, algorithm, sep, text, hint):
    path = tmp_path / "t.txt"
    path.write_text(text)
    line = 2 if text.startswith("#") else 1
    first = text.splitlines()[line - 1]
    assert _error(capsys, ["train", algorithm, "--train", str(path)]) == \
        f"{path}, line {line}: not a LIBSVM line (a label, then index:value pairs): " \
        f"{first!r} {hint}"


@pytest.mark.parametrize("argv, said", [
    (["train", "fm", "--dataset", "a9a", "--format", "csv"],
     "--dataset a9a is libsvm data: drop --format csv"),
    (["train", "lr", "--dataset", "a9a", "--format", "parquet"],
     "--dataset a9a is libsvm data: drop --format parquet"),
    (["train", "gbdt", "--dataset", "lightgbm", "--format", "libsvm"],
     "--dataset lightgbm is csv data: drop --format libsvm"),
])
def test_a_dataset_given_another_format_names_the_dataset(capsys, argv, said):
    """It said "--n-features applies to --format libsvm (csv/parquet: --hash-features)",
    an option the user never gave (the dataset's preset), for a9a with --format csv."""
    assert _error(capsys, argv) == said


@pytest.mark.timeout(60)
def test_a_gbdt_parquet_text_column_is_refused_before_a_cluster_starts(tmp_path, capsys):
    path = tmp_path / "t.parquet"
    pd.DataFrame({"y": [0, 1] * 5, "a": np.arange(10.0), "shop": list("abcdeabcde")}
                 ).to_parquet(path)
    argv = ["train", "gbdt", "--train", str(path), "--format", "parquet"]
    assert _error(capsys, argv) == \
        f"{path}: column 'shop' is not numeric (string); use --categorical shop"
    assert _error(capsys, [*argv, "--weight", "nosuch"]).startswith(
        f"{path}: no column 'nosuch', named by --weight (columns: ['y', 'a', 'shop'])")


@pytest.mark.timeout(60)
def test_gbdt_text_columns_are_advised_as_the_whole_categorical_option(tmp_path, capsys):
    """The advice named --categorical (read_table_parquet's categorical=) without the columns
    to give it; now the option as it is to be given: the columns already categorical, then
    every text column, comma-separated."""
    path = tmp_path / "t.parquet"
    pd.DataFrame({"y": [0, 1] * 5, "c": list("xyxyxyxyxy"), "shop": list("abcdeabcde"),
                  "city": list("pqpqpqpqpq")}).to_parquet(path)
    argv = ["train", "gbdt", "--train", str(path), "--format", "parquet", "--categorical", "c"]
    assert _error(capsys, argv) == \
        f"{path}: column 'shop' is not numeric (string), nor are ['city']; use --categorical " \
        f"c,shop,city"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_lr_weight_column_not_in_the_file_names_the_option(tmp_path, capsys, fmt):
    """LR's --weight nosuch said "columns ['nosuch'] are not among [...]" (the encoder's
    inference, the weight passed as an excluded column), without naming --weight."""
    path = tmp_path / f"t.{fmt}"
    df = pd.DataFrame({"click": [0, 1] * 5, "a": np.arange(10.0)})
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    argv = ["train", "lr", "--train", str(path), "--format", fmt, "--label", "click",
            "--weight", "nosuch"]
    assert _error(capsys, argv) == \
        f"{path}: no column 'nosuch', named by --weight (columns: ['click', 'a'])"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text, message", [
    ("save = 5\n", "save: must be a string (--save PATH), got 5: quote it, save = \"5\""),
    ("train = 1.5\n", "train: must be a string (--train TRAIN), got 1.5"),
    # numbers given as strings were taken silently (new-user pass)
    ('C = "0.5"\n', "C: must be a number (--C C), got the string '0.5': drop the quotes, "
                    "C = 0.5$"),
    ('[model]\nbatch_size = "10"\n', "batch-size (in table [model]): must be an integer "
                                      "(--batch-size BATCH_SIZE), got the string '10': "
                                      "drop the quotes, batch-size = 10$"),
    ('[cluster]\ncores = "two"\n', "cores (in table [cluster]): must be an integer "
                                    "(--cores CORES), got the string 'two'$"),
    ('validation-fraction = "0.1"\n', "validation-fraction: must be a number "
                                      "(--validation-fraction VALIDATION_FRACTION), got the "
                                      "string '0.1'"),
])
def test_config_values_of_the_wrong_type_name_the_key_and_the_type(tmp_path, capsys, text,
                                                                   message):
    import re

    path = tmp_path / "c.toml"
    path.write_text("max-iter = 1\n" + text)
    pattern = re.escape(message[:-1]) + "$" if message.endswith("$") else re.escape(message)
    assert re.match(re.escape(f"{path}: ") + pattern,
                    _error(capsys, ["train", "lr", "--config", str(path)]))


def test_config_strings_where_an_option_takes_text_stay_accepted(tmp_path):
    """What the refusal of quoted numbers leaves alone: "auto" where a number or auto is
    taken, sizes, walltimes, separators, column lists, paths; numbers where numbers are."""
    from dask_ps.cli._options import config_argv

    path = tmp_path / "c.toml"
    path.write_text('split-share = "auto"\nmax-workers = "Auto"\nmemory = "2GB"\n'
                    'walltime = "01:30:00"\nblocksize = "64MiB"\nsep = ";"\n'
                    'categorical = "a,b"\nlabel = "7"\nn-estimators = 3\n'
                    'learning-rate = 0.5\nmax-bins = 16\n[data]\nformat = "csv"\n')
    _, parsers = _parser()
    assert config_argv(str(path), parsers["gbdt"], ["--train", "x"], "train gbdt") == [
        "--split-share=auto", "--max-workers=Auto", "--memory=2GB", "--walltime=01:30:00",
        "--blocksize=64MiB", "--sep=;", "--categorical=a,b", "--label=7",
        "--n-estimators=3", "--learning-rate=0.5", "--max-bins=16", "--format=csv"]


def test_weight_is_listed_only_for_the_algorithms_taking_weights():
    _, parsers = _parser()
    for name, algo in ALGORITHMS.items():
        assert ("--weight" in parsers[name].format_help()) == algo.weighted, name


def test_help_defaults_read_lowercase_parenthesized_and_referred_entries():
    doc = ("Parameters\n----------\na : int, optional\n    Epochs; default 10.\n"
           "b : int, optional\n    Seed (default 0).\nc : str or None, default None\n"
           "    A URL, used by default when given.\nd, e,\nf\n    As in "
           ":class:`~dask_ps.Other`.\n")
    assert doc_default(doc, "a") == "10"
    assert doc_default(doc, "b") == "0"
    assert doc_default(doc, "c") == "None"
    assert doc_default(doc, "f", lambda other: other + "'s") == "Other's"
    fm = ALGORITHMS["fm"].cls
    shown = {p: estimator_default(fm, p) for p in ("learning_rate", "max_iter", "staleness",
                                                   "n_shards", "random_state")}
    assert shown == {"learning_rate": "0.1", "max_iter": "10", "staleness": "1",
                     "n_shards": "one per worker (1 without a cluster)",
                     "random_state": "None, seed 0"}


def test_a_missing_label_is_named_as_missing():
    with pytest.raises(DataError, match=r"^y holds a missing label \(NaN\) \(first at y\[3\]\): "
                                        r"every row needs a label"):
        check_classes(np.array([0.0, 0.5, 1.0, np.nan]), "y", lambda v: "at y[3]")
    with pytest.raises(DataError, match=r"^y holds 0\.5, not a class"):
        check_classes(np.array([0.0, 0.5, 1.0]), "y")


def _svm_file(tmp_path) -> str:
    path = tmp_path / "tr.svm"
    path.write_text("".join(f"{(-1) ** i} 1:{i}.5 3:1\n" for i in range(20)))
    return str(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv, message", [
    # argparse said "argument --memory: expected one argument" (a leading '-')
    (["--memory", "-1GB"], "--memory -1GB: a memory limit must be positive, not negative; "
                           "give a size such as 4GB, a fraction of this machine's memory such "
                           "as 0.5, or auto"),
    (["--memory=-1GB"], "--memory -1GB: a memory limit must be positive, not negative;"),
    # "unexpected RuntimeError: Nanny failed to start. (a bug of dask_ps?)"
    (["--memory=-1"], "--memory -1: a memory limit must be positive, not negative;"),
    (["--memory", "-0.5"], "--memory -0.5: a memory limit must be positive, not negative;"),
    # a size of zero (a plain 0 is Dask's no limit for a local worker: see below)
    (["--memory", "0GB"], "--memory 0GB: a memory limit must be positive, not zero"),
    (["--cluster", "slurm", "--memory", "0"], "--memory 0: a memory limit must be "
                                              "positive, not zero"),
    # a fraction of the machine below a worker's least memory, as --memory 1KB is refused
    (["--memory", "0.000001"], "--memory 0.000001 (0 MiB of this machine's "),
    (["--cluster", "slurm", "--memory", "-2GB"], "--memory -2GB: a memory limit must be "
                                                 "positive, not negative; give a size such "
                                                 "as 4GB"),
])
def test_negative_or_zero_memory_is_refused_naming_the_option(tmp_path, capsys, argv,
                                                              message):
    assert _error(capsys, ["train", "lr", "--train", _svm_file(tmp_path), *argv]) \
        .startswith(message)


@pytest.mark.parametrize("value", ["0", "0.0", "auto", "0.5", "4GB"])
def test_a_local_worker_takes_dasks_own_memory_forms(value):
    from dask_ps._cluster_parts import _check_memory

    _check_memory("--memory", value, jobqueue=False)  # 0: Dask's no limit


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value, message", [
    # all failed inside Dask as "unexpected ValueError (a bug of dask_ps?)"
    ("foo:bar", "'foo:bar': its port 'bar' is not an integer (give HOST:PORT, :PORT, PORT, "
                "or none for no dashboard)"),
    (":", "':': its port '' is not an integer"),
    ("a:1:2", "'a:1:2' is not HOST:PORT (more than one ':'"),
    (":8787,x:y", "'x:y' (of ':8787,x:y'): its port 'y' is not an integer"),
    # Dask took a free port instead, with a warning
    (":70000", "':70000': its port 70000 is not in 0 to 65535"),
    ("-1", "'-1': its port -1 is not in 0 to 65535"),
])
def test_a_dashboard_address_dask_cannot_read_is_refused_while_parsing(tmp_path, capsys,
                                                                       value, message):
    with pytest.raises(SystemExit) as info:
        main(["train", "lr", "--train", _svm_file(tmp_path), "--dashboard-address", value])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"error: argument --dashboard-address: {message}" in err, err


def test_the_dashboard_addresses_taken_are_those_dask_reads():
    """The check reads addresses as distributed's clean_dashboard_address does (it is not
    imported while parsing): what it takes, Dask reads to ports in range; what it refuses,
    Dask fails on or moves to another port."""
    import argparse

    from distributed.utils import clean_dashboard_address

    from dask_ps.cli._options import _dashboard_address

    for text in [":0", ":8787", "8787", "localhost:8787", "127.0.0.1:0", "localhost",
                 ":8787,:8788", "0", "65535", "None", " none "]:
        got = _dashboard_address(text)
        if got is None:
            continue
        assert all(0 <= a["port"] <= 65535 for a in clean_dashboard_address(got)), text
    for text in ["foo:bar", "a:1:2", ":", "host:", ":65536", "-5", ":8787,x:y"]:
        with pytest.raises(argparse.ArgumentTypeError):
            _dashboard_address(text)
        try:
            bad = any(not 0 <= a["port"] <= 65535 for a in clean_dashboard_address(text))
        except ValueError:
            bad = True
        assert bad, text


@pytest.mark.timeout(60)
def test_config_memory_and_dashboard_are_checked_alike(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('memory = "-1GB"\n')
    assert _error(capsys, ["train", "lr", "--train", _svm_file(tmp_path), "--config",
                           str(config)]).startswith("--memory -1GB: a memory limit must be "
                                                    "positive, not negative")
    config.write_text('dashboard-address = "foo:bar"\n')
    line = _error(capsys, ["train", "lr", "--train", _svm_file(tmp_path), "--config",
                           str(config)])
    assert "dashboard-address" in line and "its port 'bar' is not an integer" in line, line
