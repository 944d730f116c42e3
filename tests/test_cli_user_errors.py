"""User mistakes that ``dask-ps`` reported as bugs ("unexpected ValueError ... a bug of
dask_ps?", a traceback, status 1): an unknown URL protocol, a protocol whose package is not
installed, an empty path, an LDA or FM table too large for the memory, an early-stopping
fraction that holds out no row. Each is now one line naming the option (or the file and
line), status 2, and what can be checked before a cluster starts is."""

from pathlib import Path

import pytest
from test_cli import _scheduler_file

from dask_ps.cli import main

GOOD = "1 1:0.5 3:1\n0 2:1 4:0.2\n1 1:1 2:1\n0 3:1 4:1\n"


def _error(capsys, argv) -> str:
    """The one error line of ``argv`` (status 2), which must not have started a cluster."""
    assert main(argv) == 2
    out = capsys.readouterr()
    assert "cluster:" not in out.out, out.out
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    return lines[0].removeprefix("dask-ps: error: ")


@pytest.fixture
def good(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.svm").write_text(GOOD)
    return "good.svm"


UNKNOWN = ("unknown protocol 'foo://' (fsspec knows file://, s3://, gs://, http(s)://, "
           "hdfs://, memory:// and others; a local path needs none)")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv, named", [
    (["train", "lr", "--train", "foo://b/x.svm"], "--train foo://b/x.svm"),
    (["train", "lr", "--train", "good.svm", "--test", "foo://x.svm"], "--test foo://x.svm"),
    (["train", "lr", "--train", "good.svm", "--save", "foo://x.npz"], "--save foo://x.npz"),
    (["train", "lr", "--train", "good.svm", "--checkpoint", "foo://x"],
     "--checkpoint: checkpoint foo://x"),
    (["evaluate", "foo://m.npz", "--test", "good.svm"], "model foo://m.npz"),
    (["export", "m.npz", "foo://bar"], "out foo://bar"),
])
def test_an_unknown_protocol_names_the_url_before_a_cluster_starts(good, capsys, argv,
                                                                   named):
    """It was ``unexpected ValueError: Protocol not known: foo`` (fsspec's), with a
    traceback and status 1; ``--save`` only after training."""
    assert _error(capsys, argv) == f"{named}: {UNKNOWN}"


@pytest.mark.timeout(60)
def test_a_protocol_whose_package_is_missing_names_the_package(good, capsys):
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed")
    assert _error(capsys, ["train", "lr", "--train", "gs://b/x.svm"]) == (
        "--train gs://b/x.svm: gs:// URLs need the package gcsfs, which is not installed: "
        "pip install gcsfs (Please install gcsfs to access Google Storage)")


EMPTY = "an empty path; give a file, folder or URL ('.' for the current folder)"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv, option", [
    (["train", "lr", "--train", ""], "--train"),
    (["train", "lr", "--train", "good.svm", "--test", ""], "--test"),
    (["train", "lr", "--train", "good.svm", "--save", ""], "--save"),
    (["evaluate", "m.npz", "--test", ""], "--test"),
    (["evaluate", "", "--test", "good.svm"], "model"),
    (["export", "m.npz", ""], "out"),
    (["export", "", "out"], "model"),
])
def test_an_empty_path_is_refused_naming_the_option(good, capsys, argv, option):
    """'' is the current folder to fsspec: ``--test ''`` read every file of it, ``--save
    ''`` was left out silently, ``export m.npz ''`` said "  is not empty"."""
    if argv[0] != "train":
        Path("m.npz").write_bytes(b"PK")  # (not read)
    assert _error(capsys, argv) == f"{option}: {EMPTY}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm", ["lr", "gbdt"])
def test_a_save_folder_that_cannot_be_written_is_refused_before_a_cluster(good, capsys,
                                                                        algorithm):
    """Run as root, ``os.access`` says any folder is writable: ``--save /proc/m.npz`` (or
    ``/sys/kernel/...``) trained fully, then failed "the model file cannot be written in
    '/proc' (...)", the model lost. An empty file is now written and removed there first,
    as for a checkpoint."""
    said = _error(capsys, ["train", algorithm, "--train", "good.svm", "--save", "/proc/m.npz"])
    assert said.startswith("--save '/proc/m.npz': the folder '/proc' is not writable ("), said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv, said", [
    (["train", "lr", "--datset", "a9a"],
     "dask-ps train lr: error: unrecognized arguments: --datset a9a (--datset: did you mean "
     "--dataset?)"),
    (["train", "lr", "--dataset=a9a", "--max-itr", "3", "--bogus"],
     "dask-ps train lr: error: unrecognized arguments: --max-itr 3 --bogus (--max-itr: did "
     "you mean --max-iter?)"),
    (["evaluate", "m.npz", "--tset=t.svm"],
     "dask-ps evaluate: error: unrecognized arguments: --tset=t.svm (--tset: did you mean "
     "--test?)"),
    (["train", "lr"], "dask-ps train lr: error: one of the arguments --train --dataset is "
                      "required")])
def test_an_unknown_option_is_named_before_a_missing_required_one(good, capsys, argv, said):
    """``train lr --datset a9a`` (a typo of --dataset) said "one of the arguments --train
    --dataset is required" (argparse checks the required options first), never naming
    --datset."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: dask-ps ") and err.splitlines()[-1] == said, err


@pytest.mark.timeout(60)
def test_an_empty_checkpoint_is_refused_by_the_parser(good, capsys):
    """``--checkpoint ''`` was refused only once the cluster had started and read the
    data."""
    with pytest.raises(SystemExit) as exit_:
        main(["train", "lr", "--train", "good.svm", "--checkpoint", ""])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith(
        "error: argument --checkpoint: an empty path; give a folder or URL ('.' for the "
        "current folder), auto or none")


@pytest.mark.timeout(60)
def test_an_empty_data_folder_variable_counts_as_unset(good, capsys, monkeypatch):
    """``DASK_PS_DATA=''`` made ``--dataset a9a`` look in ./lr_a9a."""
    from dask_ps.cli._options import data_root

    monkeypatch.delenv("DASK_PS_DATA", raising=False)
    default = data_root()
    monkeypatch.setenv("DASK_PS_DATA", "")
    assert data_root() == default != Path("")


@pytest.mark.timeout(300)
def test_an_lda_term_id_too_large_names_its_file_and_line(client1, tmp_path, capsys):
    """``unexpected ValueError: ... n_words=1000000000000 terms need at least 3725.3 GiB``,
    naming neither the file nor the line of the id."""
    path = tmp_path / "l_huge.dat"
    path.write_text("1 0:1\n1 999999999999:1\n")
    assert main(["train", "lda", "--train", str(path), "--topics", "2", "--max-iter", "2",
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"dask-ps: error: {path}, line 2: term id 999,999,999,999 "
                               f"makes 1,000,000,000,000 terms x 2 topics (--topics): their "
                               f"word-topic counts need at least "), lines[0]
    assert lines[0].endswith("; number the terms from 0 without gaps (an id indexes the "
                             "vocabulary), or use fewer --topics"), lines[0]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("argv, start, end", [
    (["lda", "--train", "tiny.dat", "--topics", "300000000"],
     "LatentDirichletAllocation: n_components=300000000 topics x n_words=2 terms need at "
     "least ", "use fewer topics (--topics) or terms (the largest term id plus one: number "
     "the terms from 0 without gaps)"),
    (["fm", "--train", "good.svm", "--n-components", "100000000"],
     "FactorizationMachineClassifier: ", "; use a smaller --n-components"),
    (["lr", "--train", "good.svm", "--early-stopping", "--validation-fraction", "0.01",
      "--seed", "0"],
     "the fraction 0.01 of rows held out for early stopping (--validation-fraction) drew "
     "none of the 4 rows: ", "draw other rows (--seed), use a larger "
     "--validation-fraction, or set --no-early-stopping"),
])
def test_parameters_the_data_cannot_take_are_one_line(client1, good, tmp_path, capsys, argv,
                                                      start, end):
    """An LDA or FM table too large (``unexpected ValueError``/``MemoryError``), no row held
    out for early stopping (``unexpected ValueError``, in Python's words): one line in the
    command's options, status 2."""
    (tmp_path / "tiny.dat").write_text("1 0:1\n1 1:1\n")
    assert main(["train", *argv, "--max-iter", "2",
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("dask-ps: error: " + start), lines[0]
    assert lines[0].endswith(end), lines[0]
