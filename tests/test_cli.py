"""The dask-ps command: the README's main job, its errors for bad options and data, and its
test metrics."""

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import NO_DASHBOARD, READ_TOOK, REPO
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

from dask_ps.cli import main, metrics_line


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dask_ps.cli", *args], capture_output=True,
                          text=True, timeout=280, cwd=REPO, env={**os.environ, **(env or {})})


@pytest.mark.timeout(300)
def test_main_job_prints_a9a_auc(data):
    proc = run_cli("train", "lr", "--dataset", "a9a", env={"DASK_PS_DATA": str(data)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("test: AUC"))
    assert float(line.split()[2]) >= 0.90
    assert "dashboard: http" in proc.stdout and "non-zeros/s" in proc.stdout
    assert "dask_ps page: http" in proc.stdout


def test_missing_dataset_says_where_to_download(tmp_path):
    proc = run_cli("train", "lr", "--dataset", "a9a", env={"DASK_PS_DATA": str(tmp_path)})
    assert proc.returncode != 0
    assert "not found" in proc.stderr and "csie.ntu.edu.tw" in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("script, args", [("ps_demo.py", ["--epochs", "2"]),
                                          ("lr_a9a.py", ["--solver", "ftrl", "lbfgs"])])
def test_examples_run(data, script, args):
    proc = subprocess.run([sys.executable, str(REPO / "examples" / script), *args],
                          capture_output=True, text=True, timeout=280, cwd=REPO,
                          env={**os.environ, "DASK_PS_DATA": str(data)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    aucs = [float(line.split("AUC")[1].split()[0]) for line in proc.stdout.splitlines()
            if "AUC" in line]
    assert aucs and min(aucs) >= 0.89


# --- user errors: short messages, exit status 2, before any cluster starts where possible ---

def _svm(path, labels, seed=0):
    """LIBSVM rows whose class ``c`` (an index into the sorted distinct labels) shows in
    feature ``c + 1``: learnable."""
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    lines = []
    for label in labels:
        c = int(np.searchsorted(classes, label))
        noise = sorted(set(rng.choice(np.arange(5, 15), 3, replace=False).tolist()))
        lines.append(f"{label:g} {c + 1}:{1 + rng.random():.3f} "
                     + " ".join(f"{j}:{rng.random():.3f}" for j in noise))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def tr(tmp_path):
    return _svm(tmp_path / "tr.svm", np.tile([-1, 1], 100))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option, value, message", [
    ("--workers", "0", "argument --workers: must be >= 1, got 0"),
    ("--workers", "-1", "argument --workers: must be >= 1, got -1"),
    ("--max-iter", "0", "argument --max-iter: must be >= 1, got 0"),
    ("--batch-size", "0", "argument --batch-size: must be >= 1, got 0"),
    ("--staleness", "-2", "argument --staleness: must be >= 0, got -2"),
    ("--C", "nan", "argument --C: 'nan' is not a finite number"),
    ("--learning-rate", "-0.1", "argument --learning-rate: must be > 0, got -0.1"),
    ("--blocksize", "0", "argument --blocksize: must be positive, got 0"),
    ("--timeout", "0", "argument --timeout: must be > 0, got 0"),
    ("--sep", ";;", "argument --sep: ';;' is not one character (e.g. ',' or ';'; a tab: '\\t')"),
    ("--sep", "", "argument --sep: '' is not one character"),
    ("--sep", '"', """argument --sep: sep cannot be '"': it quotes fields"""),
    # beyond int64: refused while parsing, not by numba after the cluster started
    ("--n-features", "9223372036854775808", "argument --n-features: must be <= 2**63 - 1 "
                                             "(9223372036854775807, the largest int64), got "
                                             "9223372036854775808"),
    ("--n-features", "1" + "0" * 30, "argument --n-features: must be <= 2**63 - 1"),
    ("--max-iter", "1" + "0" * 20, "argument --max-iter: must be <= 2**63 - 1"),
    ("--workers", "1" + "0" * 20, "argument --workers: must be <= 2**63 - 1"),
])
def test_bad_option_values_are_refused(tr, capsys, option, value, message):
    with pytest.raises(SystemExit) as info:
        main(["train", "lr", "--train", tr, option, value])
    assert info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["--train", "--test", "--scheduler-file"])
def test_missing_files_fail_fast_with_one_line(tr, tmp_path, capsys, option):
    missing = str(tmp_path / "nofile")
    args = {"--train": tr, option: missing}
    argv = ["train", "lr"] + [x for kv in args.items() for x in kv]
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.err == f"dask-ps: error: {option} {missing}: no such file\n"
    assert "dashboard" not in out.out


@pytest.mark.timeout(60)
def test_missing_glob_and_debug_traceback(tr, tmp_path, capsys, monkeypatch):
    argv = ["train", "lr", "--train", tr, "--test", str(tmp_path / "*.nothing")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("dask-ps: error: --test ")
    with pytest.raises(FileNotFoundError, match=r"--test .*\*\.nothing: no such file"):
        main([*argv, "--debug"])
    monkeypatch.setenv("DASK_PS_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        main(argv)


@pytest.mark.timeout(60)
def test_unreachable_scheduler_is_refused_at_once(tr, capsys):
    """Nothing listening at ``--scheduler-address``: refused at once, not after Dask's
    retries of the connection for ``--timeout`` seconds (30 s by default)."""
    t0 = time.perf_counter()
    assert main(["train", "lr", "--train", tr, "--scheduler-address", "tcp://127.0.0.1:1",
                 "--timeout", "40"]) == 2
    assert capsys.readouterr().err == (
        "dask-ps: error: --scheduler-address tcp://127.0.0.1:1: nothing is listening there "
        "(connection refused): start the Dask scheduler there first (dask scheduler --port "
        "1), or leave out --scheduler-address to use a local cluster\n")
    assert time.perf_counter() - t0 < 20


@pytest.mark.timeout(120)
def test_bad_test_data_fails_before_training_in_one_line(tr, tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("1 1:1\n-1 2:x\n")
    proc = run_cli("train", "lr", "--train", tr, "--test", str(path), "--workers", "1")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == f"dask-ps: error: {path}, line 2: value is not a finite " \
                                  f"number: '2:x'"
    assert "dashboard" in proc.stdout and "training" not in proc.stdout


@pytest.mark.timeout(60)
def test_scheduler_without_workers_times_out(tr, tmp_path, capsys):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, **NO_DASHBOARD) as cluster, \
            Client(cluster) as client:
        client.write_scheduler_file(str(tmp_path / "s.json"))
        assert main(["train", "lr", "--train", tr, "--scheduler-file", str(tmp_path / "s.json"),
                     "--timeout", "1"]) == 2
    assert capsys.readouterr().err == (f"dask-ps: error: the scheduler at "
                                       f"{cluster.scheduler_address} has 0 of 1 worker after "
                                       f"1 s\n")


# --- metrics and history ---

@pytest.mark.timeout(120)
def test_multiclass_run_on_a_scheduler_file(tmp_path, client1, capsys):
    labels = np.tile([0, 1, 2], 100)
    train = _svm(tmp_path / "m.svm", labels)
    test = _svm(tmp_path / "mt.svm", labels[:90], seed=1)
    assert main(["train", "lr", "--train", train, "--test", test, "--scheduler-file",
                 _scheduler_file(client1, tmp_path), "--max-iter", "12"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "history: last 10 of 12 rows (--history N for more, 0: all)" in out
    # the default checkpoint: snapshots by time, not "every 1 epoch(s)"
    assert ("checkpoint: auto (a snapshot after every 60 s of training, in a temporary folder "
            "deleted after the fit, when every worker runs on this machine)") in out
    line = next(x for x in out if x.startswith("test: AUC"))
    words = line.split()
    assert float(words[2]) >= 0.9, line  # class c lives in feature c + 1
    assert "(macro one-vs-rest, 3 classes)" in line and line.endswith("(multi-class)")
    assert float(words[words.index("log-loss") + 1]) < np.log(3)


def test_metrics_line_multiclass_matches_scikit_learn():
    rng = np.random.default_rng(0)
    classes = np.array([0.0, 1.0, 2.0])
    y = rng.integers(0, 3, 200).astype(float)
    proba = rng.dirichlet(np.ones(3), 200)
    proba[np.arange(200), y.astype(int)] += 0.5
    proba /= proba.sum(axis=1, keepdims=True)
    line, warnings = metrics_line(classes, y, proba)
    auc = roc_auc_score(y, proba, multi_class="ovr")
    assert line == (f"test: AUC {auc:.4f} (macro one-vs-rest, 3 classes)  accuracy "
                    f"{accuracy_score(y, proba.argmax(1)):.4f}  log-loss "
                    f"{log_loss(y, proba):.4f} (multi-class)") and warnings == []
    # a class absent from the test labels: the macro over those present, said so
    keep = y != 2
    line, _ = metrics_line(classes, y[keep], proba[keep])
    aucs = [roc_auc_score(y[keep] == c, proba[keep, c]) for c in (0, 1)]
    assert line.startswith(f"test: AUC {np.mean(aucs):.4f} (macro one-vs-rest over the 2 of 3 "
                           f"classes in the test labels)")


def test_metrics_line_single_class_and_unseen_labels():
    classes = np.array([-1.0, 1.0])
    proba = np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1]])
    line, warnings = metrics_line(classes, np.ones(4), proba)
    assert line == (f"test: AUC n/a (the test labels hold one class only, 1.0)  accuracy "
                    f"0.5000  log-loss {log_loss(np.ones(4), proba, labels=classes):.4f}")
    assert warnings == []
    line, warnings = metrics_line(classes, np.array([0.0, 1.0, 1.0, 0.0]), proba)
    assert warnings == ["test labels [0.0] (2 of 4 rows) are not among the training classes "
                        "[-1.0, 1.0]: those rows count as errors in the accuracy and are left "
                        "out of AUC and log-loss"]
    # predictions 1, -1, 1, -1: the rows labelled 0 are errors, one of the two 1s is right
    assert line.startswith("test: AUC n/a (the test labels hold one class only, 1.0)  "
                           "accuracy 0.2500  log-loss ")
    assert metrics_line(classes, np.zeros(0), np.zeros((0, 2))) == ("test: no rows", [])



@pytest.mark.parametrize("classes, y", [(np.array(["no", "yes"]), np.array([0, 1, 1, 0])),
                                        (np.array([0, 1]), np.array(["no", "yes", "yes", "no"]))])
def test_metrics_line_test_labels_of_another_type_than_the_classes(classes, y):
    """Text classes and test labels that are numbers, or the reverse: scikit-learn's
    "Mix of label input types (string and number)", a bug's traceback, status 1. None is a
    class: said as for labels 3/5 against classes 0/1, with the types."""
    proba = np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1]])
    line, warnings = metrics_line(classes, y, proba)
    kinds = ("numbers", "text") if y.dtype.kind == "i" else ("text", "numbers")
    assert warnings == [f"test labels {np.unique(y).tolist()} (4 of 4 rows) are not among the "
                        f"training classes {classes.tolist()} (the test labels are {kinds[0]}, "
                        f"the classes {kinds[1]}: write the test labels as the training data "
                        f"does): those rows count as errors in the accuracy and are left out "
                        f"of AUC and log-loss"]
    assert line == ("test: AUC n/a (no test label is a training class)  accuracy 0.0000  "
                    "log-loss n/a")
    line, _ = metrics_line(classes, y, proba, np.array([1.0, 2.0, 0.0, 1.0]))
    assert line.endswith("accuracy 0.0000  log-loss n/a  (weighted)")

# --- the command line of issue 15/18: algorithms table, config file, saving, batch behaviour ---

def _scheduler_file(client, tmp_path):
    """The client's scheduler file (a client writes one at most: module-scoped clients keep
    the first, which lives as long as the session's temporary folders)."""
    import json

    path = tmp_path / "scheduler.json"
    # what `dask scheduler --scheduler-file` writes at start; Client.write_scheduler_file dumps
    # scheduler_info(), which after some tasks holds tuple keys JSON cannot take
    path.write_text(json.dumps({"type": "Scheduler", "address": client.scheduler.address}))
    return str(path)


def _estimator_of(argv):
    """The estimator ``dask-ps train`` would fit for ``argv`` (parsed, not run)."""
    from dask_ps.cli import _parser
    from dask_ps.cli._registry import ALGORITHMS
    from dask_ps.cli._run import build_estimator

    args = _parser()[0].parse_args(argv)
    return build_estimator(args, ALGORITHMS[args.algorithm], shard_workers=False)


@pytest.mark.parametrize("algorithm, cls", [("lr", "LogisticRegression"),
                                            ("mf", "MatrixFactorization"),
                                            ("fm", "FactorizationMachineClassifier"),
                                            ("lda", "LatentDirichletAllocation")])
def test_defaults_are_the_estimators(algorithm, cls):
    """No flag given: every parameter is the estimator's default (issue 18: the command line
    used 5 epochs where LogisticRegression uses 10); only the progress bar is off (the
    command prints a line per epoch)."""
    import dask_ps

    est = _estimator_of(["train", algorithm, "--train", "x"])
    expected = getattr(dask_ps, cls)().get_params()
    got = est.get_params()
    assert got.pop("progress", False) is False and expected.pop("progress", None) is None
    assert got == expected
    # and a flag given is passed on
    assert _estimator_of(["train", algorithm, "--train", "x", "--max-iter", "3"]).max_iter == 3


@pytest.mark.parametrize("value, expected", [("none", None), ("l1", "l1"), ("l2", "l2")])
def test_penalty_none_trains_unregularised(tmp_path, value, expected):
    """``--penalty none`` is scikit-learn's ``penalty=None`` (the command line had no way
    to train without regularisation), in a ``--config`` file too."""
    from dask_ps.cli import _expand_config, _parser

    assert _estimator_of(["train", "lr", "--train", "x", "--penalty", value]).penalty \
        == expected
    config = tmp_path / "run.toml"
    config.write_text(f'[model]\npenalty = "{value}"\n')
    argv = _expand_config(["train", "lr", "--train", "x", "--config", str(config)],
                          _parser()[1])
    assert _estimator_of(argv).penalty == expected
    with pytest.raises(SystemExit):
        _estimator_of(["train", "lr", "--train", "x", "--penalty", "None"])


def test_cli_choices_are_what_the_estimators_accept():
    from dask_ps.algorithms import logistic, mf
    from dask_ps.cli._registry import ALGORITHMS

    def choices(algo, flag):
        return next(p.kwargs["choices"] for p in ALGORITHMS[algo].params if p.flag == flag)

    assert sorted(choices("lr", "--solver")) == sorted(logistic.SOLVERS)
    assert sorted(choices("mf", "--solver")) == sorted(mf.SOLVERS)


def test_dataset_resolves_beside_the_repository(monkeypatch, tmp_path):
    """Without $DASK_PS_DATA, --dataset looks in ../shared/data beside the repository, as the
    README and tests/conftest.py say, whatever the current folder."""
    from dask_ps.cli._options import data_root

    monkeypatch.delenv("DASK_PS_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert data_root() == REPO.parent / "shared" / "data"
    monkeypatch.setenv("DASK_PS_DATA", str(tmp_path))
    assert data_root() == tmp_path


def test_rate_leaves_the_first_pass_out():
    """A cold run compiles numba kernels in its first pass: the rate is that of the later
    passes, and the first pass's time is said, never a misleading '0.0 M/s'."""
    from dask_ps.cli._report import rate_line

    history = [{"epoch": 1, "time": 57.0}, {"epoch": 2, "time": 58.0},
               {"event": "recovery", "time": 58.5}, {"epoch": 3, "time": 59.0}]
    line = rate_line(history, 1e6, "non-zeros", 60.0)
    assert line == ("train wall 60.00 s (3 epochs 59.00 s; the other 1.00 s: placing the data "
                    "and starting the shards before, collecting the model after); first epoch "
                    "57.00 s (includes compiling numba kernels when their cache is cold), then "
                    "1.00 M non-zeros/s (2 epochs over 1,000,000 non-zeros)")
    one = rate_line([{"epoch": 1, "time": 57.0}], 1e6, "non-zeros", 58.0)
    assert "no rate" in one and "/s" not in one and "(1 epoch 57.00 s;" in one
    # each algorithm's word for a pass: GBDT's boosting rounds, LDA's iterations
    rounds = rate_line(history, 1e4, "rows", 60.0, restored=1, passes="round")
    # (this run's times go on from the restored round's: its 2 rounds took 2 s)
    assert rounds.startswith("train wall 60.00 s (2 rounds 2.00 s; the other 58.00 s: ")
    assert rounds.endswith("(1 round over 10,000 rows; round 1 restored from the checkpoint)")
    assert "epoch" not in rounds and "pass" not in rounds
    assert "3 iterations 59.00 s" in rate_line(history, 1e6, "tokens", 60.0, passes="iteration")


def test_a_small_rate_is_said_in_a_unit_that_shows_its_digits():
    """A 100-row file's rate read "then 0.00 M rows/s": a rate below 0.1 M/s is said in
    thousands, below 0.1 k/s as it is, two decimals each."""
    from dask_ps.cli._report import rate_line

    history = [{"epoch": 1, "time": 2.0}, {"epoch": 2, "time": 2.03},
               {"epoch": 3, "time": 2.06}]
    line = rate_line(history, 100, "rows", 3.0)
    assert line.endswith("then 3.33 k rows/s (2 epochs over 100 rows)"), line
    assert "M rows/s" not in line
    assert rate_line(history, 2, "documents", 3.0).endswith(
        "then 66.67 documents/s (2 epochs over 2 documents)")
    from dask_ps.cli._report import per_second

    assert [per_second(r, "rows") for r in (2.5e6, 1e5, 99_000, 100, 99.5, 0.5)] == [
        "2.50 M rows/s", "0.10 M rows/s", "99.00 k rows/s", "0.10 k rows/s", "99.50 rows/s",
        "0.50 rows/s"]


def test_a_resume_of_a_finished_fit_says_no_pass_ran():
    """``--resume auto`` on a checkpoint holding every epoch of the fit ran none, and the
    line said "train wall 3.58 s; 1 epoch over 451,592 non-zeros; epochs 1-5 restored from
    the checkpoint; no rate": now it says that no epoch ran."""
    from dask_ps.cli._report import rate_line

    history = [{"epoch": e, "time": 0.1 * e} for e in range(1, 6)]
    assert rate_line(history, 451592, "non-zeros", 3.58, restored=5) == (
        "train wall 3.58 s; no epoch run: epochs 1-5 (all of this fit's) restored from the "
        "checkpoint")
    line = rate_line(history, 1e4, "rows", 3.0, restored=4, passes="round")
    assert line.endswith("; 1 round over 10,000 rows; rounds 1-4 restored from the "
                         "checkpoint; no rate: a first round includes compiling numba kernels "
                         "when their cache is cold"), line


def test_a_resumed_runs_passes_count_from_the_restored_time():
    """A resumed fit's ``time`` goes on from the restored epochs' (``history_fields``): the
    run's epochs took the seconds since the last restored one's ``time``. Counted from 0
    they were past the run's wall time, and the line dropped them."""
    from dask_ps.cli._report import rate_line

    history = [{"epoch": 1, "time": 30.0}, {"epoch": 2, "time": 40.0},
               {"event": "recovery", "seconds": 0.5}, {"epoch": 3, "time": 41.0},
               {"epoch": 4, "time": 41.5}]
    assert rate_line(history, 1e6, "rows", 3.0, restored=2) == (
        "train wall 3.00 s (2 epochs 1.50 s; the other 1.50 s: placing the data and starting "
        "the shards before, collecting the model after); first epoch 1.00 s (includes "
        "compiling numba kernels when their cache is cold), then 2.00 M rows/s (1 epoch over "
        "1,000,000 rows; epochs 1-2 restored from the checkpoint)")


def test_history_rows_show_lists_and_dicts_compactly(capsys):
    """GBDT's ``task_seconds`` (a dict of seconds per task) was printed as the Python list
    of dicts; it shows each key's range over the tasks, a recovery's lists without quotes
    and its ``detected_at`` as a date, long lists of numbers summarised. ``history_`` is
    unchanged."""
    import copy
    import time

    from dask_ps.cli._report import SHORT_LIST, print_history

    at = time.mktime((2025, 3, 4, 5, 6, 7, 0, 0, -1))
    history = [
        {"epoch": 1, "loss": 0.5, "steps": 2, "hist_bytes": 71328.0,
         "task_seconds": [{"hist": 0.0003, "push": 0.0003, "query": 0.0178, "rest": 0.0048},
                          {"hist": 0.0012, "push": 0.0003, "query": 0.019, "rest": 0.0066}],
         "time": 0.0268},
        {"event": "recovery", "lost_workers": ["tcp://10.0.0.5:40123"], "lost_shards": [1],
         "job_clocks_at_failure": [2, None], "torn_versions": [], "detected_at": at,
         "seconds": 1.25},
        {"epoch": 2, "task_seconds": [{"hist": 0.0003, "process_cpu": 0.0195}],
         "per_block": list(range(9)), "sizes": {"a": 1.23456789, "b": "x"}}]
    assert SHORT_LIST < 9
    kept = copy.deepcopy(history)
    print_history(history, 0, "round")
    assert capsys.readouterr().out.splitlines() == [
        "history: 3 rows",
        "  round 1  loss 0.5  steps 2  hist_bytes 71328  task_seconds [2 tasks, min..max: "
        "hist 0.0003..0.0012, push 0.0003, query 0.0178..0.019, rest 0.0048..0.0066]  "
        "time 0.0268",
        "  event recovery  lost_workers [tcp://10.0.0.5:40123]  lost_shards [1]  "
        "job_clocks_at_failure [2, None]  torn_versions []  detected_at 2025-03-04 05:06:07  "
        "seconds 1.25",
        "  round 2  task_seconds [1 task: hist 0.0003, process_cpu 0.0195]  per_block "
        "[9 values: min 0, median 4, max 8]  sizes {a 1.23457, b x}"]
    assert history == kept


def test_one_history_row_is_said_in_the_singular(capsys):
    from dask_ps.cli._report import print_history

    print_history([{"epoch": 1, "loss": 0.5}], 10)
    assert capsys.readouterr().out.splitlines() == ["history: 1 row", "  epoch 1  loss 0.5"]
    print_history([{"epoch": 1}, {"epoch": 2}], 10)
    assert capsys.readouterr().out.startswith("history: 2 rows\n")


def test_history_rows_name_the_pass_as_the_output_does(capsys):
    """GBDT's rounds and LDA's iterations are said so in their history rows too (they read
    ``epoch 3`` beside ``3 rounds``); L-BFGS's rows keep their ``evaluation`` number only."""
    from dask_ps.cli._report import print_history

    print_history([{"epoch": 3, "loss": 0.5}], 10, "round")
    assert capsys.readouterr().out.splitlines()[1] == "  round 3  loss 0.5"
    print_history([{"epoch": 2, "log_likelihood": -7.0}], 10, "iteration")
    assert capsys.readouterr().out.splitlines()[1] == "  iteration 2  log_likelihood -7"
    print_history([{"epoch": 4, "evaluation": 4, "loss": 0.25}], 10, "evaluation")
    assert capsys.readouterr().out.splitlines()[1] == "  evaluation 4  loss 0.25"
    print_history([{"epoch": 4, "loss": 0.25}], 10)
    assert capsys.readouterr().out.splitlines()[1] == "  epoch 4  loss 0.25"


@pytest.mark.timeout(120)
def test_compressed_input_is_split_over_the_workers(client2, data):
    """A .bz2 file is read as one block: the partitions of a fit cut it into one per worker
    thread, placed on different workers."""
    from dask_ps import partition
    from dask_ps.io import read_libsvm

    path = str(data / "lr_reuters_moneyfx" / "reuters.trn.bz2")
    X, y = read_libsvm(path)
    assert X.numblocks[0] == 1
    with partition((X, y), client=client2) as parts:
        assert len(parts) == 2 and len(set(parts.workers)) == 2
        got = parts.reduce(lambda v: v)
    assert (sp.vstack([g[0] for g in got]) != X.compute()).nnz == 0
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), y.compute())


@pytest.mark.timeout(180)
def test_compressed_run_says_it_split_the_input(client2, data, tmp_path, capsys):
    path = str(data / "lr_reuters_moneyfx" / "reuters.trn.bz2")
    test = str(data / "lr_reuters_moneyfx" / "reuters.tst.bz2")
    assert main(["train", "lr", "--train", path, "--test", test, "--scheduler-file",
                 _scheduler_file(client2, tmp_path), "--max-iter", "3"]) == 0
    out = capsys.readouterr().out
    assert (f"note: {path} gave 1 partition for 2 worker threads (a compressed or small file is "
            f"read as one block): split into 2 after reading") in out
    assert "7,770 rows x 8,315 features (2 partitions), 2 workers" in out
    assert float(next(x for x in out.splitlines() if x.startswith("test: AUC")).split()[2]) > 0.9


def _ctr_csv(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    shop = rng.choice(["a", "b", "c", "d"], n)
    price = rng.gamma(2.0, 2.0, n).round(2)
    click = ((shop == "a") | (shop == "b") & (price < 3)).astype(int)
    lines = ["click,price,shop"] + [f"{c},{p},{s}" for c, p, s in zip(click, price, shop)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.timeout(180)
def test_csv_and_parquet_tables_save_evaluate_export(client1, tmp_path, capsys):
    """--format csv --label click with named columns; the saved model (no pickle) scores the
    test set the same in evaluate (reading it as training did), and exports its weights."""
    import json

    import pandas as pd

    train, test = _ctr_csv(tmp_path / "tr.csv"), _ctr_csv(tmp_path / "te.csv", seed=1)
    model = str(tmp_path / "m.npz")
    sf = _scheduler_file(client1, tmp_path)
    common = ["--label", "click", "--numeric", "price", "--categorical", "shop",
              "--hash-features", "64", "--scheduler-file", sf, "--max-iter", "5"]
    assert main(["train", "lr", "--format", "csv", "--train", train, "--test", test,
                 "--save", model, *common]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("test: AUC"))
    assert float(line.split()[2]) > 0.9 and f"saved: {model}" in out
    assert main(["evaluate", model, "--test", test]) == 0
    assert capsys.readouterr().out.strip() == line
    assert main(["export", model, str(tmp_path / "out"), "--format", "csv"]) == 0
    coef = pd.read_csv(tmp_path / "out" / "coef.csv")
    meta = json.loads((tmp_path / "out" / "model.json").read_text())
    assert list(coef.columns) == ["feature", "coef"] and coef.feature.max() < 64
    assert meta["data"]["label"] == "click" and meta["n_features"] == 64
    # the same export again replaces the earlier one (it was refused: "out is not empty")
    assert main(["export", model, str(tmp_path / "out"), "--format", "csv"]) == 0
    assert sorted(os.listdir(tmp_path / "out")) == ["coef.csv", "model.json"]
    assert pd.read_csv(tmp_path / "out" / "coef.csv").equals(coef)
    # beside files of the user's, nothing is replaced: refused, named, untouched
    (tmp_path / "out" / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["export", model, str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"dask-ps: error: {tmp_path / 'out'} holds an earlier export (coef.csv, model.json) "
        f"and also notes.txt, which are not part of it: move them away, or give a new or "
        f"empty folder\n")
    assert sorted(os.listdir(tmp_path / "out")) == ["coef.csv", "model.json", "notes.txt"]
    assert pd.read_csv(tmp_path / "out" / "coef.csv").equals(coef)
    # the same table as Parquet
    for name in ("tr", "te"):
        pd.read_csv(tmp_path / f"{name}.csv").to_parquet(tmp_path / f"{name}.parquet")
    assert main(["train", "lr", "--format", "parquet", "--train", str(tmp_path / "tr.parquet"),
                 "--test", str(tmp_path / "te.parquet"), *common]) == 0
    pline = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("test: AUC"))
    assert float(pline.split()[2]) > 0.9


@pytest.mark.timeout(420)
def test_generated_click_log_with_a_header_trains_with_no_column_list(client1, tmp_path,
                                                                       capsys):
    """`dask-ps train lr --format csv --label click` on a generated click log (20 Zipf
    categorical columns, 4 count columns, missing values): the columns come from the header
    and the values, the saved model holds that encoder, and it beats chance on held-out
    rows; the same for `dask-ps train fm`."""
    import json

    import pandas as pd

    from dask_ps.io import PlantedCTR

    planted = PlantedCTR(n_categorical=20, n_numeric=4, max_cardinality=500, seed=3)
    train, test = tmp_path / "tr.csv", tmp_path / "te.csv"
    train.write_bytes(planted.csv_chunk(0, 6000))
    test.write_bytes(planted.csv_chunk(1, 2000))
    model = str(tmp_path / "m.npz")
    assert main(["train", "lr", "--format", "csv", "--label", "click", "--train", str(train),
                 "--test", str(test), "--scheduler-file", _scheduler_file(client1, tmp_path),
                 "--max-iter", "3", "--hash-features", "4096", "--save", model]) == 0
    out = capsys.readouterr().out
    assert "6,000 rows x 4,096 features" in out
    auc = float(next(x for x in out.splitlines() if x.startswith("test: AUC")).split()[2])
    assert auc > 0.6
    assert main(["export", model, str(tmp_path / "out"), "--format", "csv"]) == 0
    meta = json.loads((tmp_path / "out" / "model.json").read_text())["data"]
    enc = json.loads(meta["encoder"])
    assert sorted(enc["categorical"]) == sorted(planted.categorical_columns)
    assert sorted(enc["numeric"]) == sorted(planted.numeric_columns)
    assert enc["n_features"] == 4096 and meta["label"] == "click"
    # the factorization machine from the same file, no column list either
    assert main(["train", "fm", "--format", "csv", "--label", "click", "--train", str(train),
                 "--test", str(test), "--scheduler-file", _scheduler_file(client1, tmp_path),
                 "--max-iter", "2", "--n-components", "4", "--hash-features", "4096", "--save",
                 model]) == 0
    out = capsys.readouterr().out
    assert float(next(x for x in out.splitlines() if x.startswith("test: AUC")).split()[2]) > 0.6
    assert main(["export", model, str(tmp_path / "fm"), "--format", "csv"]) == 0
    factors = pd.read_csv(tmp_path / "fm" / "factors.csv")
    assert list(factors.columns) == ["feature", "f0", "f1", "f2", "f3"] and len(factors) > 20


@pytest.mark.timeout(180)
def test_mf_ratings_with_string_ids_save_and_evaluate(client1, tmp_path, capsys):
    """dask-ps train mf from TSV ratings (string ids), RMSE printed, saved without pickle,
    evaluated again from the file."""
    from dask_ps.saving import load_estimator

    rng = np.random.default_rng(0)
    users, items = rng.integers(0, 30, 1500), rng.integers(0, 20, 1500)
    r = np.clip(np.round(3 + (users % 3 - 1) + (items % 2) + rng.normal(0, 0.3, 1500)), 1, 5)
    rows = [f"u{u}\ti{i}\t{x:g}\t{k}" for k, (u, i, x) in enumerate(zip(users, items, r))]
    (tmp_path / "tr.tsv").write_text("\n".join(rows[:1200]) + "\n")
    (tmp_path / "te.tsv").write_text("\n".join(rows[1200:]) + "\n")
    model = str(tmp_path / "mf.npz")
    assert main(["train", "mf", "--train", str(tmp_path / "tr.tsv"), "--test",
                 str(tmp_path / "te.tsv"), "--n-components", "4", "--max-iter", "20", "--save",
                 model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("test: RMSE"))
    assert float(line.split()[2]) < 0.8  # the baseline (the mean) is ~1.0 here
    assert re.search(rf"^read {re.escape(str(tmp_path / 'tr.tsv'))} onto the workers in "
                     rf"{READ_TOOK}: 1,200 ratings \(\d+ partitions?\)$", out, re.M), out
    est, extra = load_estimator(model)
    assert est.user_ids_.dtype.kind in "OU" and est.user_ids_[0].startswith("u")
    assert extra["algorithm"] == "mf"
    assert main(["evaluate", model, "--test", str(tmp_path / "te.tsv")]) == 0
    assert capsys.readouterr().out.strip() == line


def test_saved_file_holds_no_pickle(tmp_path):
    """The model file loads with allow_pickle=False and refuses newer format versions."""
    import json

    from dask_ps import LogisticRegression
    from dask_ps.saving import FORMAT_VERSION, load_estimator, save_estimator

    X = np.random.default_rng(0).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    est = LogisticRegression(client="local", max_iter=3, progress=False).fit(X, y)
    path = tmp_path / "m.npz"
    save_estimator(est, str(path), extra={"note": "x"})
    again, extra = load_estimator(str(path))
    np.testing.assert_array_equal(again.predict_proba(X), est.predict_proba(X))
    assert extra == {"note": "x"} and again.get_params()["client"] is None
    assert np.load(path, allow_pickle=False)["a/coef_"].shape == (1, 3)
    arrays = dict(np.load(path, allow_pickle=False))
    meta = json.loads(str(arrays["__meta__"][()]))
    meta["format_version"] = FORMAT_VERSION + 1
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="newer than the 1 this dask_ps"):
        load_estimator(str(path))


def _toml(path, text):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


@pytest.mark.timeout(120)
def test_config_file_and_flags_override_it(tr, tmp_path, client1, capsys):
    sf = _scheduler_file(client1, tmp_path)
    cfg = _toml(tmp_path / "run.toml", f'algorithm = "lr"\nmax-iter = 3\n\n[cluster]\n'
                                       f'scheduler_file = "{sf}"\n\n[model]\nsolver = "sgd"\n')
    assert main(["train", "--config", cfg, "--train", tr, "--max-iter", "2"]) == 0
    out = capsys.readouterr().out
    assert "history: 2 rows" in out and "LogisticRegression(sgd) 2/2" in out
    assert main(["train", "lr", "--config", cfg, "--train", tr]) == 0
    assert "history: 3 rows" in capsys.readouterr().out


def test_a_flag_wins_over_the_file_s_other_data_source(tmp_path, capsys):
    """dataset in the file, --train on the command line: "argument --train: not allowed
    with argument --dataset" before; now --train wins, as any flag does."""
    from dask_ps.cli import _parser
    from dask_ps.cli._options import config_argv

    cfg = _toml(tmp_path / "run.toml", 'dataset = "a9a"\n')
    missing = str(tmp_path / "nofile")
    assert main(["train", "lr", "--config", cfg, "--train", missing]) == 2
    assert capsys.readouterr().err == f"dask-ps: error: --train {missing}: no such file\n"
    parser = _parser()[1]["lr"]  # an array still gives a comma list where one is taken
    cfg = _toml(tmp_path / "run.toml", 'dataset = "a9a"\ncategorical = ["a", "b"]\n')
    assert config_argv(cfg, parser, ["--train", "x"], "train lr") == ["--categorical=a,b"]


@pytest.mark.parametrize("text, message", [
    ("max-iter = 0\n", "run.toml: max-iter: must be >= 1, got 0"),
    ('test = ["a.svm", "b.svm"]\n', "run.toml: test: takes one value, not a list ['a.svm', "
                                    "'b.svm']: for several files, one glob such as"),
    ('solver = ["sgd", "ftrl"]\n', "run.toml: solver: takes one value, not a list"),
    ("n-features = 99999999999999999999\n", "run.toml: n-features: must be <= 2**63 - 1"),
    ("solver = \"newton\"\n", "run.toml: solver: 'newton' is not one of"),
    ("colour = 3\n", "run.toml: unknown option 'colour' for dask-ps train lr"),
    ("early-stopping = 1\n", "run.toml: early-stopping: must be true or false, got 1"),
    ("max-iter = 3\n[model]\nmax_iter = 4\n", "run.toml: 'max-iter' is set twice (at the top "
                                           "level and in table [model])"),
    ("[model]\nmax_iter = 3\nmax-iter = 4\n", "run.toml: 'max-iter' is set twice (both in "
                                           "table [model], spelt with - and _)"),
    # a key in a table (tables only group) says which table
    ("[cluster]\ncolour = 3\n", "run.toml: unknown option 'colour' (in table [cluster]) for"),
    ("[data]\nfoo = 1\n", "run.toml: unknown option 'foo' (in table [data]) for dask-ps "
                          "train lr"),
    # a table of another name than the groups of options was read as one, a misspelt one
    # too ([modle]): its keys were taken, or an unknown key was named in it
    ("[modle]\nsolver = 'sgd'\n", "run.toml: unknown table [modle] (did you mean [model]?): "
                                  "tables only group the options, and are named [cluster], "
                                  "[data], [model] or [run]\n"),
    ("[Cluster]\nworkers = 1\n", "run.toml: unknown table [Cluster] (did you mean "
                                 "[cluster]?): tables only group"),
    ("[other]\nfoo = 1\n", "run.toml: unknown table [other]: tables only group the options, "
                           "and are named [cluster], [data], [model] or [run]\n"),
    ("[model.sgd]\nfoo = 1\n", "run.toml: unknown table [model.sgd]: tables only group"),
    ('algorithm = "lr"\ndata = {formta = "csv"}\n', "run.toml: unknown option 'formta' (in "
                                                     "table [data])"),
    ('algorithm = "lr"\nrnu = {history = 0}\n', "run.toml: unknown table [rnu] (did you "
                                                 "mean [run]?)"),
    ("[model]\nmax-iter = 0\n", "run.toml: max-iter (in table [model]): must be >= 1, got 0"),
    ("max-iter = \n", "run.toml: "),
    ('algorithm = "lda"\n', 'run.toml: algorithm = "lda" is not the command\'s dask-ps train '
                            'lr: drop the key, or run dask-ps train lda --config '),
    ('[model]\nalgorithm = "mf"\n', 'run.toml: algorithm = "mf" is not the command\'s'),
    (b"\xff\xfem\x00a\x00", "run.toml: not UTF-8 text (byte 0xff at offset 0, a UTF-16 byte "
                             "order mark): save the TOML file as UTF-8"),
    (b'solver = "\xe9"\n', "run.toml: not UTF-8 text (byte 0xe9 at offset 10): save"),
])
def test_bad_config_files_name_file_and_key(tmp_path, capsys, text, message):
    cfg = _toml(tmp_path / "run.toml", text)
    assert main(["train", "lr", "--config", cfg, "--train", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dask-ps: error: {tmp_path / message}") and err.count("\n") == 1


def test_config_tables_named_as_the_groups_of_options_stay_accepted(tmp_path):
    """What the refusal of unknown table names leaves alone: the four groups of --help, any
    key in any of them, keys at the top level, an inline table, an empty table."""
    from dask_ps.cli import _parser
    from dask_ps.cli._options import config_argv

    parsers = _parser()[1]
    cfg = _toml(tmp_path / "run.toml", 'algorithm = "lr"\nmax-iter = 3\nrun = {history = 0}\n'
                                       '[cluster]\nworkers = 1\n[data]\nformat = "csv"\n'
                                       '[model]\nsolver = "sgd"\nresume = "never"\n')
    assert config_argv(cfg, parsers["lr"], [], "train lr", algorithm="lr") == [
        "--max-iter=3", "--history=0", "--workers=1", "--format=csv", "--solver=sgd",
        "--resume=never"]
    for name in parsers:  # every algorithm's command groups its options alike
        cfg = _toml(tmp_path / "g.toml", "[cluster]\n[data]\n[model]\n[run]\nhistory = 1\n")
        assert config_argv(cfg, parsers[name], [], f"train {name}") == ["--history=1"]


@pytest.mark.parametrize("algorithm", [[], ["lr"]])
def test_config_naming_a_directory_or_a_file_that_is_not_utf8(tmp_path, capsys, algorithm):
    """With the algorithm on the command line or from the file: one line, status 2."""
    assert main(["train", *algorithm, "--config", str(tmp_path), "--train", "x"]) == 2
    assert capsys.readouterr().err == (f"dask-ps: error: --config {tmp_path}: a directory, "
                                       f"not a TOML file\n")
    cfg = _toml(tmp_path / "latin1.toml", b'algorithm = "lr"\n# caf\xe9\n')
    assert main(["train", *algorithm, "--config", cfg, "--train", "x"]) == 2
    assert capsys.readouterr().err == (f"dask-ps: error: {cfg}: not UTF-8 text (byte 0xe9 at "
                                       f"offset 22): save the TOML file as UTF-8\n")


def test_a_config_file_with_a_utf8_bom_is_read(tmp_path, capsys):
    """A TOML file saved with a UTF-8 byte order mark (a Windows editor) was refused with
    tomllib's "Invalid statement (at line 1, column 1)", naming no BOM: it is dropped now."""
    from dask_ps.cli import _parser
    from dask_ps.cli._options import config_argv, read_algorithm

    parser = _parser()[1]["lr"]
    text = 'algorithm = "lr"\r\n[model]\r\nmax-iter = 3\r\n'
    cfg = _toml(tmp_path / "bom.toml", b"\xef\xbb\xbf" + text.encode())
    assert read_algorithm(cfg) == "lr"
    assert config_argv(cfg, parser, [], "train lr", algorithm="lr") == ["--max-iter=3"]
    cfg = _toml(tmp_path / "latin1.toml", b'\xef\xbb\xbfalgorithm = "lr"\n# caf\xe9\n')
    assert main(["train", "--config", cfg, "--train", "x"]) == 2  # the offset in the file
    assert capsys.readouterr().err == (f"dask-ps: error: {cfg}: not UTF-8 text (byte 0xe9 at "
                                       f"offset 25): save the TOML file as UTF-8\n")


@pytest.mark.parametrize("argv, message", [
    # in the command's words (it said "resume=True needs a checkpoint URL ...")
    (["--resume", "auto"], "--resume auto needs --checkpoint URL, the folder of the run to "
                           "continue (--checkpoint auto snapshots into a temporary folder"),
    (["--resume", "auto", "--checkpoint", "auto"], "--resume auto needs --checkpoint URL"),
    # --checkpoint none (any case) is checkpoint=None: it was a folder named "none"
    (["--resume", "auto", "--checkpoint", "none"], "--resume auto needs --checkpoint URL, the "
                                                   "folder of the run to continue (--checkpoint "
                                                   "none writes no checkpoint)\n"),
    (["--resume", "auto", "--checkpoint", " None"], "--resume auto needs --checkpoint URL, the "
                                                    "folder of the run to continue (--checkpoint "
                                                    "none writes no checkpoint)\n"),
    (["--checkpoint", "NONE", "--checkpoint-every", "2"], "--checkpoint-every 2: applies to a "
                                                          "--checkpoint URL (this fit's "
                                                          "checkpoint is none: it writes no "
                                                          "checkpoint)\n"),
    (["--ps-workers", "1"], "--ps-workers applies to --cluster slurm|pbs|sge|lsf, not local"),
    (["--cluster", "slurm", "--adapt", "--worker-lifetime", "1h"],
     "--worker-lifetime needs --ps-workers"),
    (["--cluster", "slurm", "--scheduler-file", "f"],
     "--cluster slurm starts its own scheduler: drop --scheduler-file"),
    (["--cluster", "slurm-runner", "--workers", "3"], "--workers does not apply to slurm-runner"),
    (["--cluster", "slurm-runner"], "--cluster slurm-runner: SLURM_PROCID, SLURM_NTASKS, and "
                                    "SLURM_JOB_ID must be present"),
    # not a traceback and "unexpected RuntimeError (a bug of dask_ps?)" from LocalCluster
    (["--interface", "nosuchif0"], "--interface nosuchif0: no such network interface on this "
                                   "machine ("),
    # not sbatch's error, nor jobs whose workers fail
    (["--cluster", "slurm", "--interface", "nosuchif0"],
     "--interface nosuchif0: no such network interface on this machine, where the scheduler "
     "runs ("),
    (["--label", "y"], "--label applies to --format csv|parquet"),
    (["--exclude", "id"], "--exclude applies to --format csv|parquet"),
    (["--memory", "1KB"], "--memory 1KB: a worker needs at least 640 MiB (a worker process of "
                          "dask_ps takes about 405 MiB before any data"),
    # a worker of dask_ps past 80% of 400 MiB from the start: paused, the command waited forever
    (["--memory", "400MiB"], "--memory 400MiB: a worker needs at least 640 MiB"),
    (["--memory", "500MiB"], "--memory 500MiB: a worker needs at least 640 MiB"),
    (["--memory", "lots"], "--memory 'lots' is not a size such as 4GB"),
    (["--save", "/nonexistent_dir/m.npz"], "--save /nonexistent_dir/m.npz: no folder "
                                           "/nonexistent_dir"),
    (["--save", "."], "--save .: a directory; give a file name such as ./model.npz"),
    (["--checkpoint", "zzz://b/ck"], "--checkpoint: checkpoint zzz://b/ck: unknown protocol "
                                     "'zzz://' (fsspec knows file://, s3://"),
    (["--checkpoint", "/proc/dask-ps-ck"], "--checkpoint: checkpoint '/proc/dask-ps-ck': no "
                                           "folder can be made in '/proc' ("),
    # a forgotten unit: one block, one task, per byte of the 6 kB file
    (["--blocksize", "1"], "--blocksize 1: blocksize 1 byte cuts "),
    # the default checkpoint of lr is "auto" (by time): epochs would be ignored
    (["--checkpoint-every", "3"], "--checkpoint-every 3: applies to a --checkpoint URL (this "
                                  "fit's checkpoint is 'auto': snapshots every 60 s"),
    (["--checkpoint", "auto", "--checkpoint-every", "2"], "--checkpoint-every 2: applies to"),
])
def test_options_not_supported_yet_fail_before_any_cluster(tr, capsys, monkeypatch, argv,
                                                           message):
    """Plumbing waiting for the estimators (resume, shard placement) and contradictory
    cluster options: one line, status 2, nothing started."""
    import signal

    for name in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    sigint = signal.getsignal(signal.SIGINT)
    assert main(["train", "lr", "--train", tr, *argv]) == 2
    assert signal.getsignal(signal.SIGINT) is sigint  # dask-jobqueue's handler is not left
    out = capsys.readouterr()
    assert out.err.startswith(f"dask-ps: error: {message}") and out.err.count("\n") == 1
    assert "cluster:" not in out.out


def test_a_config_file_s_checkpoint_none_is_no_checkpoint(tr, tmp_path, capsys):
    """``checkpoint = "none"`` in a --config file is --checkpoint none (checkpoint=None), so
    --resume auto is refused before any cluster; a number is still refused as one."""
    cfg = _toml(tmp_path / "run.toml", '[model]\ncheckpoint = "None"\n')
    assert main(["train", "lr", "--config", cfg, "--train", tr, "--resume", "auto"]) == 2
    out = capsys.readouterr()
    assert out.err == ("dask-ps: error: --resume auto needs --checkpoint URL, the folder of "
                       "the run to continue (--checkpoint none writes no checkpoint)\n")
    assert "cluster:" not in out.out
    cfg = _toml(tmp_path / "bad.toml", "checkpoint = 3\n")
    assert main(["train", "lr", "--config", cfg, "--train", tr]) == 2
    assert capsys.readouterr().err == (f"dask-ps: error: {cfg}: checkpoint: must be a string "
                                       f"(--checkpoint URL), got 3: quote it, checkpoint = "
                                       f"\"3\"\n")


@pytest.mark.timeout(180)
def test_checkpoint_none_writes_none_and_one_worker_is_singular(tr, tmp_path, capsys,
                                                                 monkeypatch):
    """``--checkpoint none`` wrote checkpoints into a folder ./none ("checkpoint written:
    none version 2"); now it is checkpoint=None: nothing written, no "last checkpoint" line,
    and the log says so. A one-worker cluster is "1 worker process", trained on "1 worker"
    (it said "1 worker processes", "1 workers")."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", "lr", "--train", tr, "--workers", "1", "--max-iter", "1",
                 "--checkpoint", "none", "--dashboard-address", "none"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert not (tmp_path / "none").exists()
    assert "checkpoint: none (--checkpoint none: no checkpoint is written)" in out
    assert not [x for x in out if "checkpoint written" in x or "last checkpoint" in x]
    assert out[0].startswith("cluster: LocalCluster: 1 worker process x 1 thread; ")
    assert next(x for x in out if x.startswith("training ")).endswith("), 1 worker")


def test_a_checkpoint_naming_a_file_fails_before_any_cluster(tr, capsys):
    """Not after the first epochs, as a fit's first save would (the training file itself
    is named here)."""
    assert main(["train", "lr", "--train", tr, "--checkpoint", tr]) == 2
    out = capsys.readouterr()
    assert out.err == (f"dask-ps: error: --checkpoint: checkpoint {tr!r} is a file: a "
                       f"checkpoint is a folder (new or holding earlier versions, "
                       f"v000001/...); name a folder instead\n")
    assert "cluster:" not in out.out


def test_unexpected_errors_end_with_one_line(tr, capsys, monkeypatch):
    from dask_ps.cli import _run

    def boom(*a, **k):
        raise RuntimeError("boom\n  second line")

    monkeypatch.setattr(_run, "train", boom)
    assert main(["train", "lr", "--train", tr]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Traceback") and err[-1] == (
        "dask-ps: error: unexpected RuntimeError: boom / second line (a bug of dask_ps? please "
        "report it with the traceback above)")


@pytest.mark.timeout(120)
def test_sigterm_exits_143_with_one_line(tr, tmp_path):
    """A walltime or scancel sends SIGTERM: the command stops with status 143 and says so."""
    import signal

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      **NO_DASHBOARD) as cluster, Client(cluster) as client:
        sf = _scheduler_file(client, tmp_path)
        n0 = len(cluster.scheduler.clients)
        proc = subprocess.Popen([sys.executable, "-m", "dask_ps.cli", "train", "lr", "--train",
                                 tr, "--scheduler-file", sf, "--timeout", "100"], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 90
            while len(cluster.scheduler.clients) <= n0:  # until the command connects
                if proc.poll() is not None:
                    raise AssertionError(proc.communicate()[1][-3000:])
                assert time.monotonic() < deadline
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 143, err[-2000:]
    assert err.splitlines()[-1] == "dask-ps: error: stopped by SIGTERM (a walltime or scancel?)"


def test_a_closing_workers_heartbeat_failure_is_left_out_of_its_log():
    """The command line's workers: while running, a failed heartbeat is logged (the
    scheduler may be lost); once the worker is closing, it is its own closing."""
    import logging

    from distributed import Client, LocalCluster

    from dask_ps.cli._quiet import QuietDataErrors, _ClosingHeartbeatFilter

    def passes(worker) -> bool:
        record = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1,
                                   "Failed to communicate with scheduler during heartbeat.",
                                   None, None)
        return _ClosingHeartbeatFilter(worker).filter(record)

    logger = logging.getLogger("distributed.worker")
    before = list(logger.filters)
    try:
        with LocalCluster(n_workers=1, processes=False, **NO_DASHBOARD) as cluster, \
                Client(cluster) as client:
            client.register_plugin(QuietDataErrors())
            [worker] = cluster.workers.values()
            assert passes(worker)
            assert any(isinstance(f, _ClosingHeartbeatFilter) for f in logger.filters)
        assert not passes(worker)  # closed with its cluster
    finally:
        for f in list(logger.filters):
            if f not in before:
                logger.removeFilter(f)


@pytest.mark.timeout(180)
def test_mf_evaluate_of_a_test_file_with_one_string_id(client1, tmp_path, capsys):
    """A test file with one user "bob" is read as string ids: every user of a model of int
    ids was unseen (5,001 of 5,001, exit 0); now only "bob" is, and no Python warning is
    printed (the test line counts the unseen rows)."""
    rng = np.random.default_rng(1)
    users, items = rng.integers(1, 30, 600), rng.integers(1, 20, 600)
    rows = [f"{u}\t{i}\t{1 + (u + i) % 5}\t{k}" for k, (u, i) in enumerate(zip(users, items))]
    (tmp_path / "tr.tsv").write_text("\n".join(rows) + "\n")
    (tmp_path / "te.tsv").write_text("\n".join(rows[:50] + ["bob\t3\t4\t9"] + rows[50:100])
                                     + "\n")
    model = str(tmp_path / "mf.npz")
    assert main(["train", "mf", "--train", str(tmp_path / "tr.tsv"), "--n-components", "4",
                 "--max-iter", "2", "--save", model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    capsys.readouterr()
    assert main(["evaluate", model, "--test", str(tmp_path / "te.tsv")]) == 0
    out = capsys.readouterr()
    assert out.out.strip().endswith("(101 ratings; unseen: 1 user, 0 items)"), out.out
    assert "warning" not in out.err.lower(), out.err
