"""Shared fixtures: real LocalClusters (module-scoped, they take seconds to start) and data.

``make test`` runs the suite on two pytest-xdist processes (``-n 2 --dist loadgroup``): most
of a distributed test's time is waiting (round trips, timeouts, a Slurm job's start), so two
at once on two cores take ~2/3 of the time of one after another. Every test module is one
group, so that a module's cluster fixture starts once and its tests run in order; the HPC
modules share one group, so one private Slurm serves them all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# scikit-learn's check_array_api_input (run by parametrize_with_checks) skips itself unless
# SciPy's array-API mode is on, and SciPy reads this variable once, at import.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """One pytest-xdist group per test module; one for all of ``tests/hpc`` (one Slurm)."""
    hpc = REPO / "tests" / "hpc"
    for item in items:
        path = Path(item.path)
        group = "hpc" if hpc in path.parents else str(path.relative_to(REPO))
        item.add_marker(pytest.mark.xdist_group(group))


_XDIST_HPC_TIMINGS: dict[str, float] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Under pytest-xdist the controller gathers the HPC timings of its workers
    (``tests/hpc/conftest.py`` prints them itself when the suite runs in one process)."""
    _XDIST_HPC_TIMINGS.update(getattr(node, "workeroutput", {}).get("hpc_timings", {}))


def pytest_terminal_summary(terminalreporter):
    if _XDIST_HPC_TIMINGS:
        terminalreporter.write_sep("-", "HPC start-up and recovery times (this run)")
        for k, v in _XDIST_HPC_TIMINGS.items():
            terminalreporter.write_line(f"{k}: {v:.4g}")


def data_dir() -> Path:
    """The shared real datasets: ``$DASK_PS_DATA`` or ``../shared/data`` beside the repo."""
    return Path(os.environ.get("DASK_PS_DATA", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def data():
    path = data_dir()
    if not path.is_dir():
        pytest.fail(f"real datasets not found at {path}; set DASK_PS_DATA")
    return path


def _cluster_fixture(n_workers: int, threads: int, doc: str):
    @pytest.fixture(scope="module")
    def fixture():
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=n_workers, threads_per_worker=threads, processes=True,
                          dashboard_address=None, worker_dashboard_address=None) as cluster, \
                Client(cluster) as client:
            yield client

    fixture.__doc__ = doc
    return fixture


client2 = _cluster_fixture(2, 1, "2 worker processes x 1 thread.")
client1 = _cluster_fixture(1, 1, "1 worker process x 1 thread.")
client3 = _cluster_fixture(3, 1, "3 worker processes x 1 thread (module-scoped: tests that kill "
                                   "a worker leave other modules a whole cluster).")
client1x4 = _cluster_fixture(1, 4, "1 worker process x 4 threads.")
client2x2 = _cluster_fixture(2, 2, "2 worker processes x 2 threads: threads of a process "
                                   "sharing the direct channels to the other's shard.")


@pytest.fixture(params=["local", "1x1", "2x1"])
def any_client(request):
    """No cluster (in-process shards), and the two cluster shapes of the PS core issue."""
    if request.param == "local":
        return "local"
    return request.getfixturevalue({"1x1": "client1", "2x1": "client2"}[request.param])
