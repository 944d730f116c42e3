"""The dask-ps command: the README's main job, and its error for missing data."""

import os
import subprocess
import sys

import pytest
from conftest import REPO


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
