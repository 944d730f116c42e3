"""The times of ``history_``: each epoch's real end as the driver heard it (its tasks report
it, ``ps.report(epoch=e)``), not a share of its job's time."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

import dask_ps
from dask_ps import PSModel
from dask_ps.algorithms.epoch_loop import EpochLoop, _epoch_ends
from dask_ps.diagnostics import FitMonitor

pytestmark = pytest.mark.timeout(300)

#: Seconds each partition's step sleeps in each epoch: the second epoch is the slow one.
SLEEP = {1: 0.01, 2: 0.5, 3: 0.01, 4: 0.01}


def test_epoch_ends_fill_the_epochs_not_heard_evenly():
    # none heard: the job's mean each, their ends spread over it (the fallback)
    assert _epoch_ends(10.0, 14.0, [None] * 4) == [(11.0, 1.0), (12.0, 1.0), (13.0, 1.0),
                                                   (14.0, 1.0)]
    # heard: their own ends; a gap shares the time up to the next heard end
    assert _epoch_ends(10.0, 20.0, [13.0, None, None, 17.0, None]) == [
        (13.0, 3.0), (15.0, 2.0), (17.0, 2.0), (17.0, 0.0), (20.0, 3.0)]
    # an end heard before the one before it (clocks of two processes) is not earlier
    assert _epoch_ends(0.0, 5.0, [2.0, 1.5]) == [(2.0, 2.0), (2.0, 0.0)]


def test_a_stream_of_epoch_ends_without_losses_records_the_drivers_losses_at_those_ends():
    with PSModel("local") as model:
        monitor = FitMonitor(model, "ends", 3, progress=False)
        report = monitor.stream(1)  # the job's count of tasks, told as the job starts
        monitor.job_tasks(2)
        for task, epoch in [(0, 1), (1, 1), (0, 2)]:
            report(dict(task=task, epoch=epoch))
        assert sorted(monitor._streamed) == [1]  # epoch 2: task 1 has not reported it
        report(dict(task=1, epoch=2, accuracy=0.5))  # no loss either
        assert sorted(monitor._streamed) == [1, 2]
        monitor.epochs_done(1, [0.5, 0.25, 0.125])
        monitor.close()
    assert sorted(monitor.streamed) == [1, 2]
    assert [monitor.entries[e]["loss"] for e in (1, 2, 3)] == [0.5, 0.25, 0.125]
    for e in (1, 2):  # at the ends heard, before the job's end (epoch 3's time)
        assert monitor.entries[e]["time"] == monitor.streamed[e] - monitor._start
    assert monitor.entries[1]["time"] <= monitor.entries[2]["time"] < monitor.entries[3][
        "time"]


def slow_step(ps, part):
    keys = np.arange(4)
    ps.pull("w", keys)
    time.sleep(SLEEP[part.epoch])
    ps.push("w", keys, np.ones(4))
    ps.clock()
    return part.epoch


def test_epochs_of_one_job_get_their_real_ends(client2):
    """Four epochs in one job on a cluster, the second one slow (its steps sleep): its
    ``epoch_time`` is its own, not the job's mean, and the ``time`` of each epoch is when
    its tasks reported its end."""
    data = dask_ps.partition(np.ones((40, 2)), client=client2, n_partitions=4)
    jobs = []
    try:
        with PSModel(client2) as model:
            model.add_table("w", shape=(4,))
            loop = EpochLoop(model, "slow second epoch", 4, progress=False)

            def epochs(first, last):
                jobs.append((first, last))
                out = model.fit_partitions(slow_step, data, epochs=last - first + 1,
                                           first_epoch=first, seed=0, report_epochs=True,
                                           callback=loop.task_reports())
                assert [r[0] for r in out] == list(range(first, last + 1))
                return [dict(loss=1.0 / e) for e in range(first, last + 1)]

            history = loop.run(epochs)
    finally:
        data.release()
    assert jobs == [(1, 4)]
    took = [h["epoch_time"] for h in history]
    times = [h["time"] for h in history]
    # each task sleeps 2 x 0.5 s in epoch 2 after reporting epoch 1: a floor, less what
    # the report of epoch 1 took to arrive
    assert took[1] >= 0.6, took
    assert took[1] > 2 * max(took[2:]), took  # the job's mean would be the same for all
    assert all(b > a for a, b in zip(times, times[1:])), times
    np.testing.assert_allclose(np.diff(times), took[1:], rtol=1e-6)  # one job: back to back
    # the epochs' seconds fit in the time since the loop started (how much came before the
    # job is the machine's: no bound on it)
    assert times[-1] - sum(took) >= 0, (times, took)


def _fit(kind, client, max_iter=4):
    rng = np.random.default_rng(0)
    common = dict(max_iter=max_iter, random_state=0, client=client, progress=False,
                  checkpoint=None)
    if kind == "fm":
        X = sp.random(2000, 30, density=0.2, format="csr", random_state=1)
        y = (np.asarray(X.sum(axis=1)).ravel() > 3.0).astype(int)
        return dask_ps.FactorizationMachineClassifier(n_components=2, **common).fit(X, y)
    if kind == "lda":
        X = sp.random(200, 40, density=0.3, format="csr", random_state=1, dtype=np.float64)
        X.data = np.ceil(X.data * 5)
        return dask_ps.LatentDirichletAllocation(n_components=3, **common).fit(X)
    users, items = rng.integers(0, 60, 3000), rng.integers(0, 40, 3000)
    R = np.column_stack([users, items, rng.integers(1, 6, 3000)]).astype(float)
    return dask_ps.MatrixFactorization(n_components=4, solver=kind.split("_")[1], **common).fit(R)


@pytest.mark.parametrize("kind", ["fm", "mf_sgd", "mf_als", "lda"])
def test_estimators_epochs_of_one_job_report_their_ends(kind, client2):
    """The epochs after the first run as one job (without a checkpoint, callback or
    evaluation between them): each gets its own ``epoch_time`` (the job's mean would make
    them equal), ending when the last task reported it."""
    if kind == "lda":  # its jobs last ~JOB_SECONDS at the pace of the first: not compiling
        _fit(kind, client2, max_iter=1)
    records = [h for h in _fit(kind, client2).history_ if "event" not in h]
    took = [h["epoch_time"] for h in records]
    times = [h["time"] for h in records]
    assert len(records) == 4 and all(t > 0 for t in took), records
    assert len(set(took[1:])) == 3, took
    assert all(b > a for a, b in zip(times, times[1:])), times
    # back to back within a job; a job's first epoch counts from the job's start
    assert all(d >= t * (1 - 1e-9) for d, t in zip(np.diff(times), took[1:])), (times, took)
    np.testing.assert_allclose(np.diff(times)[1:], took[2:], rtol=1e-6)
    assert times[-1] - sum(took) >= 0, (times, took)  # (the set-up before: not bounded)


@pytest.mark.parametrize("penalty", ["l2", "l1"])  # L-BFGS-B, OWL-QN
def test_lbfgs_evaluations_have_epoch_times_that_add_up(penalty, client2):
    """An L-BFGS (or, with ``penalty="l1"``, OWL-QN) evaluation's record has its
    ``epoch_time``: from the end of the evaluation before (the first: from its start) to
    the instant of its ``time``."""
    X = sp.random(600, 20, density=0.3, format="csr", random_state=2)
    y = (np.asarray(X.sum(axis=1)).ravel() > 1.5).astype(int)
    model = dask_ps.LogisticRegression(solver="lbfgs", penalty=penalty, C=1.0, max_iter=10,
                                       tol=1e-12, client=client2, progress=False)
    with warnings.catch_warnings():  # (max_iter stops it: several evaluations)
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    records = [h for h in model.history_ if "event" not in h]
    took = [h["epoch_time"] for h in records]
    times = [h["time"] for h in records]
    assert len(records) > 3 and all(np.isfinite(took)) and min(took) >= 0, took
    assert all(b > a for a, b in zip(times, times[1:])), times
    # back to back: an evaluation ends its epoch_time at its time
    np.testing.assert_allclose(np.diff(times), took[1:], rtol=1e-6)
    assert sum(took) <= times[-1] + 1e-6, (times, took)  # (the set-up before: not bounded)
