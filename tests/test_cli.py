"""The dask-ps command: the README's main job, its errors for bad options and data, and its
test metrics."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import REPO
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
    t0 = time.perf_counter()
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.err == f"dask-ps: error: {option} {missing}: no such file\n"
    assert "dashboard" not in out.out and time.perf_counter() - t0 < 20


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
def test_unreachable_scheduler_times_out(tr, capsys):
    t0 = time.perf_counter()
    assert main(["train", "lr", "--train", tr, "--scheduler-address", "tcp://127.0.0.1:1",
                 "--timeout", "2"]) == 2
    assert "dask-ps: error: Timed out trying to connect" in capsys.readouterr().err
    assert time.perf_counter() - t0 < 30


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

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, \
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
    client1.write_scheduler_file(str(tmp_path / "scheduler.json"))
    assert main(["train", "lr", "--train", train, "--test", test, "--scheduler-file",
                 str(tmp_path / "scheduler.json"), "--max-iter", "12"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "history: last 10 of 12 rows (--history N for more, 0: all)" in out
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
