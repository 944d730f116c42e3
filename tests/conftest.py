"""Shared fixtures: real LocalClusters (module-scoped, they take seconds to start) and data.

``make test`` runs the suite on two pytest-xdist processes (``-n 2 --dist loadgroup``): most
of a distributed test's time is waiting (round trips, timeouts, a Slurm job's start), so two
at once on two cores take ~2/3 of the time of one after another. Every test module is one
group, so that a module's cluster fixture starts once and its tests run in order; the HPC
modules share one group, so one private Slurm serves them all.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import dask
import pytest

# scikit-learn's check_array_api_input (run by parametrize_with_checks) skips itself unless
# SciPy's array-API mode is on, and SciPy reads this variable once, at import.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

# A LocalCluster (SpecCluster) told that a worker left closes that worker's nanny for good
# ``lost-worker-timeout`` (15 s) later if no worker of the same name is registered at that
# moment, and its timer is not cancelled when the nanny's restart registers again. A test
# that kills worker ``1`` within 15 s of another test killing worker ``1`` then loses the
# nanny to the first kill's timer, in the second restart's gap (seen in CI: "Only 2/3
# workers arrived"). The nannies of these clusters restart their workers; nothing here
# relies on the cluster closing a nanny.
dask.config.set({"distributed.deploy.lost-worker-timeout": "1 day"})

REPO = Path(__file__).resolve().parents[1]
#: Seconds a test waits for ``client3``'s nanny to restart a worker it killed: a few seconds
#: on a quiet machine, over 60 once under the whole suite's load on 2 cores (an event waited
#: for, not a speed asserted).
RESTART_WAIT = 240
#: The time of ``dask-ps train``'s read line (``read PATH onto the workers in READ_TOOK:``),
#: a regex: when the read compiled numba kernels (a cold cache, e.g. a fresh worktree) it
#: says so.
READ_TOOK = r"\d+\.\d s(?: \(includes compiling numba kernels: their cache was cold\))?"


def pytest_collection_modifyitems(config, items):
    """One pytest-xdist group per test module; one for all of ``tests/hpc`` (one Slurm)."""
    hpc = REPO / "tests" / "hpc"
    for item in items:
        path = Path(item.path)
        group = "hpc" if hpc in path.parents else str(
            path.relative_to(REPO) if REPO in path.parents else path)
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


def compute_without_large_graph(lazy):
    """``lazy.compute()``, failing on Dask's "Sending large graph" warning: the arrays a task
    graph would carry (a model's weights) must go to the workers once, as futures."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = lazy.compute()
    large = [str(w.message)[:80] for w in seen if "large graph" in str(w.message)]
    assert not large, large
    return out


#: The folders of the live cluster fixtures, where each of their worker processes dumps its
#: threads' stacks on SIGUSR1, to ``stacks-<pid>.txt`` (see :func:`pytest_timeout_set_timer`).
_STACK_FOLDERS: set[Path] = set()
#: Seconds before a test's timeout (at most half of it) when its workers' stacks are dumped.
STACKS_LEAD = 15.0
#: LocalCluster keywords for a cluster without a dashboard. Dask's ``dashboard_address=None``
#: alone still serves the scheduler's HTTP server (health, metrics) on port 8787, warning
#: "Port 8787 is already in use" (a UserWarning) whenever another cluster (a test's, another
#: pytest-xdist process's) holds it; here on a free port instead, as
#: :func:`dask_ps.cluster.connect` starts a cluster without a dashboard.
NO_DASHBOARD = {"dashboard_address": None, "scheduler_kwargs": {"dashboard_address": ":0"}}


def _cluster_fixture(n_workers: int, threads: int, doc: str):
    @pytest.fixture(scope="module")
    def fixture():
        from distributed import Client, LocalCluster
        from distributed.diagnostics.plugin import WorkerPlugin

        class ArmStacks(WorkerPlugin):  # defined here: pickled by value for the workers
            """In each worker, also one a nanny starts later (a restart): its stacks to a
            file of its own on SIGUSR1."""

            def __init__(self, folder):
                self.folder = folder

            def setup(self, worker):
                import faulthandler
                import os
                import signal

                path = os.path.join(self.folder, f"stacks-{os.getpid()}.txt")
                # appended: the driver empties the file before each dump (faulthandler
                # keeps the file object alive)
                faulthandler.register(signal.SIGUSR1, file=open(path, "a"),
                                      all_threads=True)

        folder = Path(tempfile.mkdtemp(prefix="dask-ps-stacks-"))
        with LocalCluster(n_workers=n_workers, threads_per_worker=threads, processes=True,
                          **NO_DASHBOARD, worker_dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.register_plugin(ArmStacks(str(folder)), name="dask-ps-stacks")
            _STACK_FOLDERS.add(folder)
            try:
                yield client
            finally:
                _STACK_FOLDERS.discard(folder)
        shutil.rmtree(folder, ignore_errors=True)

    fixture.__doc__ = doc
    return fixture


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    """A test that hangs on a cluster: pytest-timeout shows the driver's stacks only. Shortly
    before the timeout, the live cluster fixtures' workers dump theirs too (faulthandler, on
    SIGUSR1: it answers even when a worker's event loop or GIL is stuck), and they go to the
    test's captured stderr. Returns None: pytest-timeout still sets its own timer."""
    if not settings.timeout or settings.timeout <= 0:
        return None
    lead = min(STACKS_LEAD, settings.timeout / 2)
    timer = threading.Timer(settings.timeout - lead, _dump_worker_stacks, (item.nodeid, lead))
    timer.daemon = True
    item.stash[_STACKS_TIMER] = timer
    timer.start()
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item):
    timer = item.stash.get(_STACKS_TIMER, None)
    if timer is not None:
        timer.cancel()
    return None


_STACKS_TIMER = pytest.StashKey[threading.Timer]()


def _dump_worker_stacks(nodeid: str, lead: float) -> None:
    signalled = []
    for folder in list(_STACK_FOLDERS):
        for path in sorted(folder.glob("stacks-*.txt")):
            pid = int(path.stem.split("-")[1])
            try:
                path.write_text("")
                os.kill(pid, signal.SIGUSR1)
                signalled.append((pid, path))
            except ProcessLookupError:  # a worker gone (a test killed it, or a restart)
                path.unlink(missing_ok=True)
            except OSError:
                continue
    time.sleep(min(2.0, lead / 2))
    out = [f"\n=== {nodeid}: {lead:g} s before its timeout, the stacks of the cluster "
           f"fixtures' {len(signalled)} worker processes ==="]
    for pid, path in signalled:
        out.append(f"--- worker process {pid} ---\n" + path.read_text()[-30_000:])
    sys.stderr.write("\n".join(out) + "\n")
    sys.stderr.flush()


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



def _stale_scheduler() -> bool:
    """dask's config names the distributed scheduler while no client is open: a client was
    closed where distributed does not restore the config (``client.shutdown()`` or ``close()``
    inside its own ``with`` block), and every later ``compute()`` in this process fails with
    "no Client active"."""
    import dask
    from distributed import default_client

    if dask.config.get("scheduler", None) != "dask.distributed":
        return False
    try:
        default_client()
    except ValueError:
        return True
    return False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Fail the test that left dask's config pointing at a closed client (its teardown, module
    fixtures included), rather than a later test in the same process that computes with the
    default scheduler: which tests those are depends on how pytest-xdist shares out the
    modules."""
    result = yield
    if _stale_scheduler():
        import dask

        dask.config.config.pop("scheduler", None)  # later tests run as they would alone
        raise RuntimeError("dask's config 'scheduler' names the distributed scheduler but no "
                           "client is open: this test, or a fixture closed after it, closed a "
                           "client without restoring the config")
    return result
