"""dask-ps against a real single-node Slurm (see conftest.py): the three HPC modes train LR on
a9a and print a test AUC >= 0.900 — a dask-jobqueue cluster (``--cluster slurm`` and the
SLURMCluster example), a batch script with a scheduler file, and SLURMRunner inside one
allocation (example and ``--cluster slurm-runner``) — and shard jobs hold the shards.

Every wait is bounded; every job is cancelled in ``finally`` and the queue checked empty.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from ._slurm import (
    DASK_PS,
    NET,
    PYTHON,
    REPO,
    SCRIPT,
    TIMINGS,
    auc,
    note_times,
    shutdown_noise,
    start_slurm,
    stop_slurm,
)

pytestmark = pytest.mark.timeout(300)

def batch(slurm, args: list[str], env: dict, timeout: float, cwd: Path) -> tuple[dict, str]:
    """Submit ``sbatch args``, wait (bounded) until the job has finished; its final record
    and its output. The job is cancelled if it is still there at the end. Submitted from
    ``cwd``, which is the job's SLURM_SUBMIT_DIR (where scheduler_file.sbatch writes)."""
    out = cwd / "job-%j.out"
    job_id = slurm.run("sbatch", "--parsable", "-D", str(cwd), "-o", str(out), *args,
                       timeout=30, env=env, cwd=cwd).stdout.strip().split(";")[0]
    t0 = time.perf_counter()
    try:
        while True:
            job = slurm.job(job_id)
            if job.get("JobState") not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                break
            assert time.perf_counter() - t0 < timeout, f"job {job_id} still {job['JobState']}"
            time.sleep(0.5)
    finally:
        slurm.run("scancel", job_id, check=False)
    TIMINGS[f"job {args[-1].split('/')[-1][:40]} (s)"] = time.perf_counter() - t0
    text = Path(str(out).replace("%j", job_id)).read_text()
    return job, text


def test_cannot_run_is_a_skip_with_the_reason(tmp_path, monkeypatch):
    """Where Slurm is missing and may not be installed, the fixture skips, saying why (no
    root needed: Slurm's commands are hidden from PATH)."""
    monkeypatch.setenv("PATH", "/bin")  # /usr/bin on Debian; Slurm's daemons are in /usr/sbin
    monkeypatch.setenv("DPS_SLURM_NO_INSTALL", "1")
    import os

    reason = ("not installed and installing is off" if os.geteuid() == 0
              else "the Slurm daemons run as root")
    with pytest.raises(pytest.skip.Exception, match=f"Slurm cannot run here: .*{reason}"):
        start_slurm(tmp_path)


def test_slurm_runs_and_stops_cleanly(slurm):
    """A second private Slurm next to the session's: a running job, then stop ends the job,
    its step and every daemon (nothing of it left in ps), but not a user's process that only
    sourced its env.sh (as the script's help says to)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="dask-ps-slurm-"))  # munged must reach it
    other = start_slurm(folder, cpus=1)
    user = subprocess.Popen(["bash", "-c", f"source {folder}/env.sh && exec sleep 300"])
    try:
        daemons = {f: int((folder / f).read_text()) for f in
                   ("slurmctld.pid", "slurmd.pid", "munge/munged.pid")}
        assert other.run("srun", "-n1", "true", timeout=30).returncode == 0
        other.run("sbatch", "-o", "/dev/null", "--wrap", "sleep 600")
        deadline = time.monotonic() + 30
        while other.job(other.jobs()[0]).get("JobState") != "RUNNING":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(0.5)  # the user's sleep has its SLURM_CONF by now
        assert f"SLURM_CONF={folder}/slurm.conf".encode() in Path(
            f"/proc/{user.pid}/environ").read_bytes().split(b"\0")
        try:
            stop_slurm(other, keep={user.pid})  # asserts that nothing else is left
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        assert user.poll() is None, f"stop ended the user's sleep (status {user.returncode})"
        for f, pid in daemons.items():
            assert not Path(f"/proc/{pid}").exists(), f"{f}'s process {pid} still runs"
    finally:
        user.kill()
        user.wait()
    assert slurm.jobs() == []  # the session's Slurm is untouched


@pytest.mark.parametrize("option", ["--dir", "--port", "--slurmd-port", "--cpus", "--mem-mb"])
def test_an_option_without_its_value_is_a_usage_error(option):
    """start_slurm.sh start --port (no value): the help, then "option --port needs a value"
    as the last line, status 1 (no root needed: nothing starts)."""
    proc = subprocess.run(["bash", str(SCRIPT), "start", option], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].endswith(f"ERROR: option {option} needs a value")
    assert "unbound variable" not in proc.stderr
    proc = subprocess.run(["bash", str(SCRIPT), "start", option, "--no-install"],
                          capture_output=True, text=True, timeout=30)
    assert proc.stderr.splitlines()[-1].endswith(f"ERROR: option {option} needs a value")


@pytest.mark.timeout(900)  # the fixture's fit, bounded at 600 s for a heavily loaded machine
def test_train_lr_on_slurm_jobs(slurm, lr_reference):
    """dask-ps train lr --cluster slurm: 2 worker jobs, AUC >= 0.900, every job gone when
    the command ends (the run is the ``lr_reference`` fixture's)."""
    proc, logs = lr_reference
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert auc(proc.stdout) >= 0.900
    assert "cluster: SLURMCluster: 2 data jobs (1 core, 2GB, walltime 00:10:00)" in proc.stdout
    assert len(list(logs.glob("dask-worker-*.err"))) == 2  # two Slurm jobs ran
    note_times(proc.stdout, "--cluster slurm")
    slurm.wait_idle(30)


def test_shard_jobs_hold_the_shards(slurm, jobdir, monkeypatch):
    """--ps-workers: shard jobs offer the resource, data jobs do not, a model created with
    resources=session.shard_resource puts every shard on them; data jobs are adaptive."""
    import dask_ps
    from dask_ps.cluster import ClusterSpec, connect, worker_info

    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])  # for sbatch/squeue/scancel
    spec = ClusterSpec(mode="slurm", workers=1, ps_workers=1, adapt=True, interface="lo",
                       dashboard_address="127.0.0.1:0", walltime="00:10:00",
                       log_dir=str(jobdir / "logs"), timeout=120)
    with connect(spec) as session:
        names = dict(line.split() for line in slurm.run(
            "squeue", "-h", "-o", "%i %j").stdout.splitlines())
        assert sorted(names.values()) == ["dask-ps-shard", "dask-worker"]
        info = worker_info(session.client)
        ps = sorted(a for a, w in info.items() if w["resources"].get("ps"))
        assert len(info) == 2 and len(ps) == 1
        assert session.shard_resource == "ps"
        model = dask_ps.PSModel(session.client, n_shards=2, resources=session.shard_resource)
        try:
            assert {s.address for s in model.shards} == set(ps)
        finally:
            model.close()
    slurm.wait_idle(30)


def test_scheduler_file_batch_script(slurm, env, jobdir):
    """examples/hpc/scheduler_file.sbatch: scheduler and workers as job steps, dask-ps with
    --scheduler-file; the job completes with status 0, its log ends with the result, and
    the shutdown (workers first, then the scheduler) logs no error or traceback anywhere."""
    job, text = batch(slurm, [str(REPO / "examples" / "hpc" / "scheduler_file.sbatch")],
                      {**env, "PYTHON": PYTHON, "DASK_PS": DASK_PS, "DASK_INTERFACE": "lo"},
                      240, jobdir)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", text[-3000:]
    assert auc(text) >= 0.900
    assert text.splitlines()[-1].startswith("test: AUC "), text[-3000:]
    logs = {p.name: p.read_text() for p in jobdir.glob(f"dask-*-{job['JobId']}.log")}
    assert sorted(logs) == [f"dask-scheduler-{job['JobId']}.log",
                            f"dask-workers-{job['JobId']}.log"]
    assert "Stopping worker" in logs[f"dask-workers-{job['JobId']}.log"]
    assert not shutdown_noise(text), text[-3000:]
    for name, log in logs.items():
        assert not shutdown_noise(log), f"{name}:\n{log[-3000:]}"
    assert "cluster: scheduler at tcp://127.0.0.1:" in text
    note_times(text, "scheduler file")
    assert slurm.jobs() == []


def test_runner_example(slurm, env, jobdir):
    """examples/hpc/runner.py under sbatch -n 4 ... srun --exact: SLURMRunner."""
    job, text = batch(slurm, [
        "-n", "4", "-c", "1", "--mem-per-cpu=2G", "-t", "00:10:00", "--wrap",
        f"srun --exact -n 4 {PYTHON} {REPO}/examples/hpc/runner.py --interface lo"],
        env, 240, jobdir)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", text[-3000:]
    assert auc(text) >= 0.900 and "2 workers up" in text
    assert slurm.jobs() == []


def test_cli_slurm_runner(slurm, env, jobdir):
    """srun dask-ps train lr --cluster slurm-runner: only the client task prints (3 tasks:
    scheduler, client, one worker — the smallest allocation, to keep the test short)."""
    job, text = batch(slurm, [
        "-n", "3", "-c", "1", "--mem-per-cpu=2G", "-t", "00:10:00", "--wrap",
        f"srun --exact -n 3 {DASK_PS} train lr --dataset a9a --cluster slurm-runner "
        f"--timeout 120 {' '.join(NET)}"], env, 240, jobdir)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", text[-3000:]
    assert auc(text) >= 0.900
    assert re.search(r"^cluster: SLURMRunner: job \d+, 1 worker task ", text, re.M), text
    # the driver closes the workers, then the scheduler: the shutdown logs no traceback
    assert not shutdown_noise(text), text[-3000:]
    note_times(text, "slurm-runner")


def test_slurm_cluster_example(slurm, env, jobdir):
    """examples/hpc/slurm_cluster.py: SLURMCluster with adapt(minimum=2, maximum=2)."""
    proc = subprocess.run(
        [PYTHON, str(REPO / "examples" / "hpc" / "slurm_cluster.py"), "--interface", "lo",
         "--walltime", "00:10:00", "--log-dir", str(jobdir / "logs")],
        env=env, cwd=jobdir, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert auc(proc.stdout) >= 0.900
    slurm.wait_idle(30)
