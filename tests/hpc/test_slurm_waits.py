"""The wait for Slurm worker jobs (real single-node Slurm, see conftest.py): pending jobs are
reported with squeue's reason, in the progress lines and in the timeout's message, and a job
Slurm can never run ends the wait at once with its reason. Every job is cancelled at the end
and the queue checked empty."""

from __future__ import annotations

import re

import pytest

from dask_ps.cluster import ClusterSpec, connect
from dask_ps.exceptions import OptionError

from ._slurm import CPUS

pytestmark = pytest.mark.timeout(300)


def _spec(jobdir, **kwargs) -> ClusterSpec:
    return ClusterSpec(mode="slurm", interface="lo", dashboard_address="127.0.0.1:0",
                       walltime="00:10:00", log_dir=str(jobdir / "logs"), **kwargs)


def test_a_job_that_can_never_run_ends_the_wait_with_its_reason(slurm, jobdir, monkeypatch):
    """More cores than the node has: Slurm keeps the job pending (PartitionConfig) forever;
    the wait ended only at the timeout, with "0 of 1 workers". Now it ends seconds after the
    submission, naming the job and the reason, and the job is cancelled."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    lines: list[str] = []
    with pytest.raises(OptionError) as info:
        connect(_spec(jobdir, workers=1, cores=16 * CPUS, timeout=90), report=lines.append)
    assert re.fullmatch(r"--cluster slurm: job \d+ can never start as asked: Slurm keeps it "
                        r"pending for PartitionConfig \(it asks for more than its partition "
                        r"has: --cores, --memory, --queue; scontrol show job \d+ tells more\)",
                        str(info.value)), str(info.value)
    assert [line for line in lines if "PartitionConfig" in line], lines  # said before
    slurm.wait_idle(30)


def test_pending_jobs_are_reported_and_named_at_the_timeout(slurm, jobdir, monkeypatch):
    """Two jobs of all the node's cores: one runs, the other waits for it (Resources). The
    wait said nothing for the whole timeout, then "has 1 of 2 workers"; now it says which jobs
    are pending and why, while waiting and in the timeout's message."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    lines: list[str] = []
    with pytest.raises(TimeoutError) as info:
        connect(_spec(jobdir, workers=2, cores=CPUS, timeout=30), report=lines.append)
    text = str(info.value)
    assert re.fullmatch(r"the scheduler at tcp://127\.0\.0\.1:\d+ has [01] of 2 workers after "
                        r"30 s; Slurm jobs \d+, \d+: .*", text), text
    assert re.search(r"\b1 pending \((Resources|Priority)\)", text), text
    assert re.search(r"\b1 (running|configuring)\b", text), text
    assert lines and all(re.fullmatch(r"waiting for workers: [01] of 2 connected; Slurm jobs "
                                      r"\d+, \d+: .*pending.*", line) for line in lines), lines
    assert len(set(lines)) == len(lines)  # once, then on change
    slurm.wait_idle(30)
