"""Start, use and stop a private single-node Slurm (``tools/slurm/start_slurm.sh``) from
tests: shared by conftest.py's fixture and the tests (``tests.hpc._slurm``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "slurm" / "start_slurm.sh"
#: CPUs declared for the test node: a driver job, a scheduler and two workers fit at once.
CPUS = 4
#: Start-up and recovery times measured in this session (printed at the end of the run).
TIMINGS: dict[str, float] = {}
PYTHON = sys.executable
DASK_PS = str(Path(sys.executable).with_name("dask-ps"))
#: the test Slurm lives on loopback: scheduler and workers must never bind another interface
NET = ["--interface", "lo", "--dashboard-address", "127.0.0.1:0"]
#: ``dask-ps train lr`` on a9a over two Slurm worker jobs (add ``--log-dir``): the reference
#: fit and the fits that lose a job mid-way run the same options. 30 epochs of about 0.3 s
#: each (more under load) leave time to cancel a job after the second.
LR_SLURM = [PYTHON, "-m", "dask_ps.cli", "train", "lr", "--dataset", "a9a", "--cluster", "slurm",
            "--workers", "2", "--walltime", "00:10:00", "--timeout", "120", "--max-iter", "30",
            "--seed", "0", *NET]


def auc(text: str) -> float:
    """The AUC of the single ``test: AUC x`` line of ``text``."""
    found = re.findall(r"^test: AUC (\d\.\d+)", text, re.M)
    assert len(found) == 1, text[-3000:]
    return float(found[0])


def note_times(stdout: str, mode: str) -> None:
    """Record the ``cluster:`` line's start-up times."""
    m = re.search(r"scheduler after ([\d.]+) s, first worker after ([\d.]+) s, all \d+ after "
                  r"([\d.]+) s", stdout)
    if m:
        TIMINGS[f"{mode}: scheduler up (s)"] = float(m.group(1))
        TIMINGS[f"{mode}: first worker (s)"] = float(m.group(2))
        TIMINGS[f"{mode}: all workers (s)"] = float(m.group(3))


def load() -> str:
    """The machine's load averages (1, 5, 15 min), for the figures a test reports."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass
class Slurm:
    """A running test Slurm: its folder and the environment that reaches it."""

    dir: Path
    env: dict = field(default_factory=dict)

    def run(self, *cmd, timeout=60, check=True, env=None, cwd=None) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), env=self.env if env is None else env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, check=check)

    def jobs(self) -> list[str]:
        """Ids of jobs not finished (pending, running, completing)."""
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def job(self, job_id: str) -> dict:
        """``scontrol show job`` as a dict (JobState, ExitCode, ...)."""
        out = self.run("scontrol", "show", "job", "-o", job_id).stdout
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def wait_idle(self, timeout: float = 60) -> None:
        """Wait until no job is left in the queue (bounded)."""
        deadline = time.monotonic() + timeout
        while self.jobs():
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs still queued after {timeout} s: {self.jobs()}")
            time.sleep(0.5)


def _ours(folder: Path, keep=()) -> list[str]:
    """``ps`` lines of processes that belong to the Slurm in ``folder`` (its daemons, job
    steps and jobs: anything whose command line names the folder or whose environment holds
    its SLURM_CONF), but for the PIDs ``keep`` (a user's processes that sourced env.sh)."""
    conf = f"SLURM_CONF={folder}/slurm.conf".encode()
    pids = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            pid = env.parent.name
            if int(pid) == os.getpid() or int(pid) in keep:
                continue
            cmdline = (env.parent / "cmdline").read_bytes()
            if conf in env.read_bytes().split(b"\0") or str(folder).encode() in cmdline:
                pids.append(pid)
        except (OSError, ValueError):
            continue
    if not pids:
        return []
    ps = subprocess.run(["ps", "-o", "pid,args", "-p", ",".join(pids)], capture_output=True,
                        text=True)
    return [line for line in ps.stdout.splitlines()[1:] if line.strip()]


def start_slurm(folder: Path, cpus: int = CPUS) -> Slurm:
    """Start a Slurm in ``folder``; skips (exit status 3) or fails with the script's words."""
    if not shutil.which("bash"):
        pytest.skip("Slurm tests need bash")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(["bash", str(SCRIPT), "start", "--dir", str(folder), "--cpus",
                               str(cpus)], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], timeout=120)
        pytest.fail("start_slurm.sh start did not finish within 600 s")
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    if proc.returncode == 3:
        pytest.skip(f"Slurm cannot run here: {lines[-1] if lines else 'no reason given'}")
    if proc.returncode != 0:
        subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], timeout=120)
        pytest.fail("start_slurm.sh start failed:\n" + "\n".join(lines[-20:]))
    TIMINGS.setdefault("slurm start (s)", time.perf_counter() - t0)
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    return Slurm(folder, env)


def stop_slurm(slurm: Slurm, keep=()) -> None:
    """Stop it and check that nothing of it is left (but the PIDs ``keep``)."""
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(slurm.dir)],
                          capture_output=True, text=True, timeout=180)
    TIMINGS.setdefault("slurm stop (s)", time.perf_counter() - t0)
    left = _ours(slurm.dir, keep)
    assert proc.returncode == 0 and not left, (
        f"stop failed ({proc.returncode}) or left processes {left}:\n{proc.stderr[-3000:]}")




def shutdown_noise(text: str) -> list[str]:
    """ERROR/CRITICAL records and tracebacks in a Dask log, but for the traceback
    ``distributed.batched`` attaches to its INFO record "Batched Comm Closed" (a stream to a
    peer that has just left: logged at INFO, by design, even in an orderly close)."""
    noise, record = [], ""
    for line in text.splitlines():
        if re.match(r"\d{4}-\d\d-\d\d [\d:,]+ - \S+ - [A-Z]+ - ", line):
            record = line
            if re.search(r" - (ERROR|CRITICAL) - ", line):
                noise.append(line)
        elif line.startswith("Traceback") and " - distributed.batched - INFO - Batched Comm " \
                "Closed" not in record:
            noise.append(f"{line} after: {record or '(no record)'}")
    return noise
