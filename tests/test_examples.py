"""The small algorithms of examples/ run on a LocalCluster and match scikit-learn."""

import re
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run(script, *args):
    proc = subprocess.run([sys.executable, str(REPO / "examples" / script), *args],
                          capture_output=True, text=True, timeout=580, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_kmeans_matches_minibatch_kmeans_and_moves_no_partition(data):
    out = run("kmeans.py", "--rows", "60000", "--epochs", "3")
    assert "partitions moved during the fit: 0" in out, out
    ratio = float(re.search(r"ratio ([0-9.]+)", out).group(1))
    assert abs(ratio - 1) <= 0.02, out


def test_naive_bayes_equals_scikit_learn(data):
    out = run("naive_bayes.py")
    accuracy = re.search(r"dask_ps ([0-9.]+), scikit-learn ([0-9.]+)", out)
    assert accuracy.group(1) == accuracy.group(2), out
    assert "same prediction on 100.00% of the rows" in out, out
    assert float(re.search(r"log-probabilities ([0-9.e+-]+)", out).group(1)) < 1e-9, out


@pytest.mark.parametrize("script", ["kmeans.py", "naive_bayes.py"])
def test_examples_are_short_and_use_the_public_api_only(script):
    text = (REPO / "examples" / script).read_text()
    assert len(text.splitlines()) <= 80
    imported = re.findall(r"^\s*(?:from|import) (dask_ps[\w.]*)", text, re.M)
    assert imported and set(imported) == {"dask_ps"}, imported
    names = set(re.findall(r"dask_ps\.(\w+)", text))
    import dask_ps

    assert names <= set(dask_ps.__all__), names - set(dask_ps.__all__)
