"""Memory limits too small for what was asked: workers paused at their memory limit fail a
wait instead of hanging it (and the command says so as the user's mistake, naming
``--memory``), and a matrix factorization whose ``n_components`` cannot fit is refused
before training (in Python and by the command), as a factorization machine's is."""

import json

import dask
import numpy as np
import pandas as pd
import pytest
from conftest import NO_DASHBOARD
from distributed import Client, LocalCluster

from dask_ps import MatrixFactorization
from dask_ps.cli import main

pytestmark = pytest.mark.timeout(240)

#: Dask's memory settings that pause a worker at once and never let it resume: what a worker
#: of dask_ps given ``--memory 400MiB`` lived (past 80% of it before any data).
PAUSED = {"distributed.worker.memory.pause": 1e-6, "distributed.worker.memory.target": False,
          "distributed.worker.memory.spill": False,
          "distributed.worker.memory.terminate": False, "dask-ps.pause-timeout": 2}


@pytest.fixture
def paused_client():
    """A client of one in-process worker that pauses as soon as its memory is watched."""
    import time

    with dask.config.set(PAUSED):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                          memory_limit="4GiB", **NO_DASHBOARD) as cluster, \
                Client(cluster) as client:
            for _ in range(100):  # the memory monitor pauses it within 0.1 s
                if all(w.get("status") == "paused"
                       for w in client.scheduler_info()["workers"].values()):
                    break
                time.sleep(0.1)
            yield client


def test_a_computation_on_paused_workers_fails_naming_the_memory(paused_client):
    from dask_ps.cluster import compute_watched
    from dask_ps.exceptions import MemoryLimitError

    with pytest.raises(MemoryLimitError, match=r"counting: every worker it needs \(1\) has "
                       r"been paused at its memory limit .* \(dask-ps --memory\)"):
        compute_watched(paused_client, "counting", dask.delayed(sum)([1, 2]))


def test_the_command_on_paused_workers_fails_as_the_users_mistake(paused_client, tmp_path,
                                                                    capsys):
    """It waited forever (``--memory 400MiB``), or failed as "unexpected MemoryError ... (a
    bug of dask_ps?)" with a traceback (500 MiB)."""
    path = tmp_path / "good.svm"
    path.write_text("1 1:0.5 3:1\n0 2:1 4:0.2\n1 1:1 2:1\n0 3:1 4:1\n")
    sched = tmp_path / "scheduler.json"
    sched.write_text(json.dumps({"type": "Scheduler",
                                 "address": paused_client.scheduler.address}))
    assert main(["train", "lr", "--train", str(path), "--max-iter", "1",
                 "--scheduler-file", str(sched)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "a bug of dask_ps" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("dask-ps: error: ") and "paused at its memory limit" in line, err
    assert "--memory" in line, line


def _ratings(n_users=2, n_items=2):
    rng = np.random.default_rng(0)
    users, items = np.repeat(np.arange(n_users), n_items), np.tile(np.arange(n_items), n_users)
    return pd.DataFrame({"user": users, "item": items,
                         "rating": rng.integers(1, 6, users.shape[0]).astype(float)})


@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_a_rank_whose_factors_cannot_fit_here_is_refused_before_training(solver):
    est = MatrixFactorization(solver=solver, n_components=10**12, max_iter=1, random_state=0)
    with pytest.raises(MemoryError, match=rf"^MatrixFactorization\({solver}\): "
                       r"n_components=1000000000000 makes the factors of 2 users and 2 items take "
                       r"[\d.]+ GiB .* more than half of the [\d.]+ GiB available here; use a "
                       r"smaller n_components$"):
        est.fit(_ratings())
    assert not hasattr(est, "user_factors_")


def test_a_rank_whose_factors_cannot_fit_a_worker_is_refused_before_training():
    """``n_components=10**8`` on 4 ratings: 0.7 GiB of float32 item rows and float64 user
    rows on workers of 1 GiB (it was accepted and ran)."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GiB",
                      **NO_DASHBOARD) as cluster, Client(cluster) as client:
        est = MatrixFactorization(n_components=10**8, max_iter=1, client=client,
                                  random_state=0)
        with pytest.raises(MemoryError, match=r"n_components=100000000 makes the factors of 2 "
                           r"users and 2 items take 0.7 GiB .* more than half of a worker's "
                           r"1.0 GiB memory limit; use a smaller n_components$"):
            est.fit(_ratings())


def test_the_command_refuses_a_rank_that_cannot_fit_as_the_users_mistake(tmp_path, capsys):
    path = tmp_path / "ratings.csv"
    path.write_text("1,1,5\n1,2,3\n2,1,4\n2,2,1\n")
    assert main(["train", "mf", "--train", str(path), "--n-components", "100000000",
                 "--max-iter", "1", "--memory", "1GiB", "--dashboard-address", "none"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(
        "dask-ps: error: MatrixFactorization(sgd): n_components=100000000 makes the factors "
        "of 2 users and 2 items take 0.7 GiB"), err
    assert err.strip().endswith("use a smaller --n-components"), err
