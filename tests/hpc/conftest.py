"""A private single-node Slurm for the HPC tests: started once per session by
``tools/slurm/start_slurm.sh`` in a fresh temporary folder with free ports, stopped at the end
(every job cancelled, every daemon ended, checked with ``ps``).

Where Slurm cannot run here (not root, no apt-get, the installation failed: the script's exit
status 3), every test using the ``slurm`` fixture is skipped with the script's reason, which
``pytest -ra`` prints. Any other failure to start fails the tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ._slurm import LR_SLURM, TIMINGS, start_slurm, stop_slurm


@pytest.fixture(scope="session")
def slurm():
    """A running single-node Slurm (session-wide); ``slurm.env`` reaches it."""
    if os.geteuid() != 0:
        pytest.skip(f"Slurm cannot run here: its daemons need root, and this is uid "
                    f"{os.geteuid()}")
    # not under pytest's tmp_path (mode 0700): munged, running as user munge, must reach its
    # socket in this folder
    folder = Path(tempfile.mkdtemp(prefix="dask-ps-slurm-"))
    try:
        instance = start_slurm(folder)
        try:
            yield instance
        finally:
            stop_slurm(instance)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def jobdir(slurm, tmp_path):
    """A folder jobs can write to (output files, scheduler files)."""
    os.chmod(tmp_path, 0o755)
    return tmp_path


@pytest.fixture
def env(slurm, data):
    """The environment of a command run against the test Slurm."""
    return {**slurm.env, "DASK_PS_DATA": str(data), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def lr_reference(slurm, data, tmp_path_factory):
    """One uninterrupted ``dask-ps train lr`` on two Slurm worker jobs (``LR_SLURM``): its
    completed process and its jobs' log folder. Tests check it, and compare with it the fits
    that lose a job."""
    folder = tmp_path_factory.mktemp("lr-reference")
    os.chmod(folder, 0o755)
    env = {**slurm.env, "DASK_PS_DATA": str(data), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([*LR_SLURM, "--log-dir", str(folder / "logs")], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=600)
    return proc, folder / "logs"


def pytest_sessionfinish(session):
    """Under pytest-xdist, the worker that ran the HPC tests hands their timings to the
    controller, which prints them (``tests/conftest.py``)."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["hpc_timings"] = dict(TIMINGS)


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "HPC start-up and recovery times (this run)")
        for k, v in TIMINGS.items():
            terminalreporter.write_line(f"{k}: {v:.4g}")
