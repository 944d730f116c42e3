"""The benchmark and example scripts without a peer library or without their data: one line
each, no traceback (quick: every script stops before it starts a cluster)."""

import os
import subprocess
import sys

import pytest
from conftest import REPO

#: Runs the script ``argv[1]`` as ``__main__`` with the modules named in ``argv[2]``
#: (comma-separated) unimportable, as when the bench extra is not installed.
BLOCK = ("import runpy, sys\n"
         "for m in filter(None, sys.argv[2].split(',')):\n"
         "    sys.modules[m] = None\n"
         "sys.path.insert(0, sys.argv[1].rsplit('/', 1)[0])\n"
         "sys.argv = sys.argv[1:2] + sys.argv[3:]\n"
         "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def run(script: str, data, block=(), *args):
    env = {**os.environ, "DASK_PS_DATA": str(data)}
    return subprocess.run([sys.executable, "-c", BLOCK, str(REPO / script), ",".join(block),
                           *args], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=env)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("script, peers", [
    ("benchmarks/gbdt_peers.py", {"lightgbm": "lightgbm", "xgboost": "xgboost"}),
    ("benchmarks/lr_peers.py", {"dask_ml": "dask-ml"}),
    ("benchmarks/mf_peers.py", {"pyspark": "pyspark", "surprise": "Surprise"}),
    ("benchmarks/lda_peers.py", {"tomotopy": "tomotopy", "gensim": "gensim"}),
])
def test_a_missing_peer_is_skipped_in_one_line(script, peers, tmp_path):
    proc = run(script, tmp_path / "missing", peers)
    for name in peers.values():
        assert f"{name} not installed (pip install -e '.[bench]'): skipped" in proc.stdout, (
            proc.stdout, proc.stderr[-2000:])
    # then the data is missing too (no fit ran): one line naming the file and DASK_PS_DATA
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line, = proc.stderr.strip().splitlines()
    assert f"{tmp_path / 'missing'}/" in line and " not found (DASK_PS_DATA=" in line, line


@pytest.mark.timeout(150)
@pytest.mark.parametrize("script, missing", [
    ("benchmarks/first_fit.py", "lr_a9a/a9a"),
    ("benchmarks/lr_lbfgs.py", "lr_a9a/a9a"),
    ("benchmarks/lr_step_on.py", "lr_a9a/a9a"),
    ("benchmarks/speed_peers.py", "gbdt_lightgbm/binary.train"),
    ("examples/naive_bayes.py", "lr_reuters_moneyfx"),
    ("examples/lr_a9a.py", "lr_a9a"),
    ("examples/mf_movielens.py", "mf_movielens100k"),
    ("examples/ps_demo.py", "lr_a9a"),
])
def test_missing_data_is_one_line(script, missing, tmp_path):
    args = ["--out", str(tmp_path / "out")] if script.endswith("speed_peers.py") else []
    proc = run(script, tmp_path / "missing", (), *args)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line, = proc.stderr.strip().splitlines()
    assert f"{tmp_path / 'missing'}/{missing}" in line and "not found" in line, line
    assert "DASK_PS_DATA" in line, line


def test_naive_bayes_answers_help():
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "naive_bayes.py"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: naive_bayes.py"), proc.stdout
    assert "test accuracy" not in proc.stdout
