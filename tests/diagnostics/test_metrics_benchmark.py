"""benchmarks/metrics_overhead.py keeps running (its figures are read by people, not asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_metrics_overhead_benchmark_runs(tmp_path):
    out = tmp_path / "metrics_overhead.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "metrics_overhead.py"),
                           "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=380, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert set(figures["overhead"]) == {"on (1 s)", "on (0.01 s)"}
    assert figures["polls"]["on (0.01 s)"] > figures["polls"]["on (1 s)"] > 0
    assert 0 < figures["counter_fraction"] < 1
    assert "metrics overhead:" in proc.stdout
