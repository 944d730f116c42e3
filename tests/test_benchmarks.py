"""The benchmark scripts keep running (their figures are read by people, not asserted here)."""

import json
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ps_core_benchmark_runs(tmp_path):
    out = tmp_path / "ps_core.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "ps_core.py"), "--quick",
                           "--key-order", "sorted", "--hashed-breakdown", "--json", str(out)],
                          capture_output=True, text=True, timeout=380, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(out.read_text())["summary"]
    assert set(summary["train"]) == {"10000", "100000"}
    for row in summary["train"].values():
        assert row["ps_keys_per_s"] > 0 and row["ceiling_keys_per_s"] > 0
    assert summary["headline"]["dense"]["ratio"] > 0
    assert "1e6-key pull+push" in proc.stdout
    # the paired headline: a ratio per round of (ours, then 2 raw transfers) for each table
    for table in ("dense", "sparse"):
        paired = summary["headline"][table]["paired"]
        assert paired["rounds"] == len(paired["ratios"]) == len(paired["ours_ms"]) == 9
        assert min(paired["ratios"]) > 0 and paired["q1"] <= paired["median"] <= paired["q3"]
    assert "paired, sparse: median ratio" in proc.stdout
    # the hashed line's breakdown timed the pull's planning on A and the lookup on shard B
    hashed = json.loads(out.read_text())["hashed_breakdown"]
    labels = {(w, row[0]) for w, rows in hashed["timers"].items() for row in rows}
    assert {("A", "_Partitioner.plan"), ("B", "TableShard.rows")} <= labels
    assert all(ms > 0 for ms in hashed["pull_ms"] + hashed["push_ms"])
    assert "Where the hashed 1e6-key remote pull + push goes" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_checkpoint_benchmark_runs():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "checkpoint.py"), "--quick"],
                          capture_output=True, text=True, timeout=280, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "load onto 3 shards" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_lr_scale_benchmark_runs(tmp_path):
    out = tmp_path / "lr_scale.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "lr_scale.py"),
                           "--rows", "20000", "--features", "16", "--epochs", "1",
                           "--dir", str(tmp_path / "data"), "--json", str(out)],
                          capture_output=True, text=True, timeout=380, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["runs"]["large"]["rows"] == 20000
    assert summary["runs"]["small"]["rows"] == 2000
    assert summary["cost_per_sample_ratio_large_over_small"] > 0
    assert "cost per sample, large / small" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_lr_wide_benchmark_runs(tmp_path):
    out = tmp_path / "lr_wide.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "lr_wide.py"), "--quick",
                           "--keys", "200000", "--test-rows", "20000", "--json", str(out)],
                          capture_output=True, text=True, timeout=380, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads(out.read_text())
    # every tail key is random 63-bit: about rows x tail_nnz distinct keys, and the loaded
    # checkpoint holds them all and scores the same
    assert s["keys"] >= 0.95 * s["rows"] * s["args"]["tail_nnz"]
    assert s["loaded_keys"] == s["keys"] and s["auc_loaded"] == s["auc"]
    assert 0.5 < s["auc"] <= s["auc_planted_model"] + 0.02
    assert 20 <= s["bytes_per_key"] < 100 and len(s["peak_memory_per_worker_gib"]) == 2
    assert "SUMMARY keys=" in proc.stdout


def _fm_benchmark():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fm_vs_lr", REPO / "benchmarks" / "fm_vs_lr.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_fm_epoch_matches_a_naive_twin():
    """The numba reference FM of fm_vs_lr.py steps as libFM's SGD written out naively:
    margin by the O(k n^2) double sum, gradient x_i (sum_j v_jf x_j - v_if x_i)."""
    import numpy as np
    import scipy.sparse as sp

    bench = _fm_benchmark()
    rng = np.random.default_rng(0)
    X = sp.random(30, 12, density=0.3, format="csr", random_state=1) * 2.0
    y = (rng.random(30) < 0.4).astype(float)
    order = rng.permutation(30)
    w0, v0 = rng.normal(0, 0.1, 13), rng.normal(0, 0.1, (12, 3))
    lr, reg_w, reg_v = 0.1, 0.01, 0.02
    w, v = w0.copy(), v0.copy()
    loss = bench._reference_fm_epoch(X.indptr, X.indices, X.data, y, order, w, v, lr, reg_w,
                                     reg_v)
    tw, tv, tloss = w0.copy(), v0.copy(), 0.0
    for r in order:
        idx, x = X.indices[X.indptr[r]:X.indptr[r + 1]], X.data[X.indptr[r]:X.indptr[r + 1]]
        z = tw[-1] + sum(tw[i] * xi for i, xi in zip(idx, x))
        z += sum(tv[idx[a]] @ tv[idx[b]] * x[a] * x[b]
                 for a in range(len(idx)) for b in range(a + 1, len(idx)))
        p = 1 / (1 + np.exp(-z))
        tloss -= y[r] * np.log(p) + (1 - y[r]) * np.log(1 - p)
        g = p - y[r]
        s = sum(tv[i] * xi for i, xi in zip(idx, x)) if len(idx) else np.zeros(3)
        grad_v = {i: g * xi * (s - tv[i] * xi) + reg_v * tv[i] for i, xi in zip(idx, x)}
        tw[-1] -= lr * g
        for i, xi in zip(idx, x):
            tw[i] -= lr * (g * xi + reg_w * tw[i])
            tv[i] -= lr * grad_v[i]
    np.testing.assert_allclose(w, tw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(v, tv, rtol=1e-10, atol=1e-12)
    assert loss == pytest.approx(tloss / 30, rel=1e-10)
    z = bench.ReferenceFM(k=3).fit(X, y).predict_proba(X)
    assert z.shape == (30, 2) and np.allclose(z.sum(axis=1), 1)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_fm_vs_lr_benchmark_runs():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fm_vs_lr.py"),
                           "--rows", "20000", "--categorical", "6", "--epochs", "1"],
                          capture_output=True, text=True, timeout=380, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "reference FM, libFM SGD 1 thread" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_online_drift_benchmark_loads_versions_while_training():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "online_drift.py"),
                           "--model", "fm", "--batches", "12", "--rows", "1000",
                           "--window", "3", "--score", "2", "--version-every", "2"],
                          capture_output=True, text=True, timeout=380, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "while batches remained to train" in proc.stdout and ": ok" in proc.stdout


def test_ps_core_summarises_the_headline_across_runs():
    import importlib.util
    spec = importlib.util.spec_from_file_location("ps_core", REPO / "benchmarks" / "ps_core.py")
    ps_core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ps_core)

    def result(paired, unpaired):
        return {"summary": {"headline": {"sparse": {
            "target": 0.4, "ratio": unpaired, "paired": {"median": paired}}}}}

    across = ps_core.across_runs([result(0.45, 0.38), result(0.35, 0.50),
                                  result(0.42, 0.41)])["sparse"]
    assert across["runs"] == 3 and across["target"] == 0.4
    assert across["paired"]["median"] == 0.42 and across["paired"]["met"] == 2
    assert (across["paired"]["min"], across["paired"]["max"]) == (0.35, 0.45)
    assert across["unpaired"]["median"] == 0.41 and across["unpaired"]["met"] == 2
    text = ps_core.report_across({"sparse": across})
    assert "2 of 3 runs >= 40%" in text and "35.0%" in text
