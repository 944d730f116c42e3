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
