"""What a user meets when things go wrong on a cluster (issue 18): a worker dies under a fit
with default parameters, inputs of the wrong shape, closing a model, restoring another model's
checkpoint."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import NO_DASHBOARD, RESTART_WAIT

from dask_ps import LogisticRegression, PSModel
from dask_ps.cluster import worker_info

pytestmark = pytest.mark.timeout(300)



def _data(n=4000, d=40, seed=0):
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    y = (np.asarray(X[:, :5].sum(axis=1)).ravel() > 0.5).astype(int)
    return X, y


@pytest.mark.slow
def test_a_stream_batch_saving_no_copy_of_the_last_version_recovers_a_lost_worker(
        client3, tmp_path):
    """A partial_fit going on from the stream's last checkpoint version (the model unchanged
    since) saved a copy of it before its epoch: 2 versions per batch. It saves none now; a
    shard's worker lost in the batch, before its version, is recovered by refilling the
    tables with the model that version holds (as checkpoint="auto" does; the version itself
    is not the batch's start exactly: a worker step's rows count the tasks averaged), at
    the batch's start: the stream ends as good as one without the loss."""
    from dask_ps.model.format import latest

    X, y = _data()
    batches = [(X[i::3], y[i::3]) for i in range(3)]

    def run(url, callbacks=None):
        est = LogisticRegression(client=client3, solver="adagrad", random_state=0,
                                 n_shards=3, checkpoint=url, callbacks=callbacks)
        for Xb, yb in batches:
            est.partial_fit(Xb, yb, classes=[0, 1])
        return est

    base = run(str(tmp_path / "a"))
    assert latest(str(tmp_path / "a")).version == 4  # 2 for the first batch, then 1 each
    calls = []

    def kill_shard_worker(record):  # in batch 2, after its epoch: its save finds it gone
        calls.append(record)
        if len(calls) == 2:
            victim = sorted(worker_info(client3))[1]  # shards go round-robin: shard 1 there
            os.kill(client3.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
        return False

    est = run(str(tmp_path / "b"), [kill_shard_worker])
    events = [h for h in est.history_ if h.get("event") == "recovery"]
    assert len(events) == 1 and events[0]["lost_shards"] == [1], est.history_
    assert events[0]["rebuilt"] and events[0]["checkpoint_clock"] == 0, events
    assert len(calls) == 4  # batch 2's epoch ran again
    # batch 2's save the loss tore took version 3; its rerun saved 4, batch 3 5
    assert latest(str(tmp_path / "b")).version == 5
    # (the rerun's data may sit on 2 workers, of other tasks: the same quality, not weights)
    assert abs(est.score(X, y) - base.score(X, y)) < 0.01
    client3.wait_for_workers(3, timeout=RESTART_WAIT)  # the nanny restarts it for the next test


@pytest.mark.slow
def test_a_default_fit_survives_a_killed_shard_worker(client3):
    """No checkpoint given: the default ("auto") snapshots let the fit recover from the loss
    of a shard's worker, unattended, and end with the same quality."""
    X, y = _data()
    kw = dict(solver="adagrad", max_iter=6, random_state=0, n_shards=3)
    base = LogisticRegression(client=client3, **kw).fit(X, y)
    killed = {}

    def kill_shard_worker(record):  # once, after epoch 2: epoch 3's job finds the shard gone
        if record.get("epoch") == 2 and not killed:
            victim = sorted(worker_info(client3))[1]  # shards go round-robin: shard 1 there
            killed["victim"] = victim
            os.kill(client3.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
        return False

    est = LogisticRegression(client=client3, callbacks=[kill_shard_worker], **kw).fit(X, y)
    assert killed, "the callback never ran"
    events = [h for h in est.history_ if h.get("event") == "recovery"]
    assert len(events) == 1 and events[0]["lost_shards"] == [1], est.history_
    assert [h["epoch"] for h in est.history_ if "epoch" in h][-1] == 6
    assert abs(est.score(X, y) - base.score(X, y)) < 0.01
    client3.wait_for_workers(3, timeout=RESTART_WAIT)  # the nanny restarts it for the next test


def _killing_first_block(X, flag: str):
    """``X`` as a dask array whose first block computed, on a worker, kills that worker
    (``os._exit``, as the OOM killer would): once, the file ``flag`` saying it happened, so
    that Dask computes the block again elsewhere. The fit's data is placed after its PS
    model's shards (one per worker here), before its tables are made: a shard is lost
    during the fit's set-up, at the same point of every run, without a sleep."""
    import dask.array as da

    def load(block):
        if block.size == 0:  # (Dask's meta)
            return block
        try:
            fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return block
        os.close(fd)
        os._exit(1)

    return da.from_array(X, chunks=(500, X.shape[1])).map_blocks(
        load, dtype=X.dtype, meta=np.empty((0, 0), X.dtype))


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint, max_recoveries, error", [
    ("auto", 3, None),  # the default: recovered
    ("url", 1, None),  # a checkpoint folder, no version of it yet: recovered all the same
    # recovery off: the loss's own error, as before
    (None, 3, ("ShardUnavailableError", r"create_table: its worker left the cluster")),
    ("auto", 0, ("RecoveryError", r"cannot recover lost shard\(s\) \[\d\]: a worker was "
                 r"lost during the fit's set-up, before its first epoch, with 0 recoveries "
                 r"made already \(max_recoveries\); last error: ShardUnavailableError")),
])
def test_a_worker_lost_during_the_set_up_is_recovered(client3, tmp_path, checkpoint,
                                                      max_recoveries, error):
    """A worker killed while a fit places its data, before its first epoch (its shard
    lost, its tables not made yet), ended the fit with a ShardUnavailableError, where a
    loss during the epochs is recovered. The set-up is now done again on the live
    workers, unattended, recorded as a recovery (history_ and the recovery log): nothing
    was trained, so no checkpoint version is needed and no epoch is lost."""
    from dask_ps.algorithms._setup import SETUP_CHECKPOINT
    from dask_ps.exceptions import RecoveryError, ShardUnavailableError

    client3.wait_for_workers(3, timeout=RESTART_WAIT)  # a shard on each: any kill loses one
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 8))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    url = None if checkpoint is None else (
        str(tmp_path / "fit.zarr") if checkpoint == "url" else checkpoint)
    kw = dict(client=client3, solver="adagrad", max_iter=3, random_state=0, n_shards=3,
              checkpoint=url, max_recoveries=max_recoveries)
    est = LogisticRegression(**kw)
    data = _killing_first_block(X, str(tmp_path / "killed"))
    try:
        if error is not None:
            with pytest.raises((ShardUnavailableError, RecoveryError), match=error[1]) as info:
                est.fit(data, y)
        else:
            est.fit(data, y)  # an error of the fit propagates as itself
    finally:
        client3.wait_for_workers(3, timeout=RESTART_WAIT)  # the nanny restarts it
    assert (tmp_path / "killed").exists(), "no worker was killed"
    if error is not None:
        assert type(info.value).__name__ == error[0]
        assert not hasattr(est, "coef_")  # left as it was
        return
    events = [h for h in est.history_ if h.get("event") == "recovery"]
    assert len(events) == 1 and est.history_[0] is events[0], est.history_
    ev = events[0]
    assert ev["setup"] and ev["rebuilt"] and len(ev["lost_shards"]) == 1, ev
    assert ev["clocks_lost"] == 0 and ev["failed_clock"] == ev["checkpoint_clock"] == 0, ev
    assert len(ev["lost_workers"]) == 1 and ev["moved_to"][0] in worker_info(client3), ev
    assert "ShardUnavailableError" in ev["error"] and ev["seconds"] >= 0, ev
    assert [h["epoch"] for h in est.history_[1:]] == [1, 2, 3]
    logged = [m for _, m in client3.get_events("dask_ps.recovery")
              if m["checkpoint"] == SETUP_CHECKPOINT and m["lost_worker"] in ev["lost_workers"]]
    assert [(m["shard"], m["new_worker"]) for m in logged] == [
        (ev["lost_shards"][0], ev["moved_to"][0])], logged
    base = LogisticRegression(**kw).fit(X, y)  # the same fit, no loss
    assert abs(est.score(X, y) - base.score(X, y)) < 0.01


def _kill(client, address: str) -> None:
    """SIGKILL the worker at ``address`` (as the OOM killer would) and wait until the
    scheduler has seen it leave; its nanny restarts it at another address."""
    import time

    os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)
    deadline = time.monotonic() + RESTART_WAIT
    while address in worker_info(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert address not in worker_info(client)


def test_a_set_up_error_is_a_loss_when_a_worker_of_its_start_left(client3):
    """Dask says some losses during a fit's set-up otherwise than the errors of a loss: a
    scatter to a worker that had just left raises ``KeyError(address)``, futures whose
    data's worker left ``FutureCancelledError`` ("already forgotten"), an actor's shard
    ``RuntimeError('Worker holding Actor was lost')``. The fit ended with them (a new
    user's run: 5 of 11 fits whose worker was killed 0.05-0.3 s in), where the README says
    a loss during the set-up is recovered. Such an error is now a loss when a worker of
    the cluster at the try's start is gone; with every worker there, it is the fit's own."""
    from distributed.client import FutureCancelledError

    from dask_ps.algorithms._setup import SetupAttempt, _cluster_at_start, _setup_loss

    client3.wait_for_workers(3, timeout=RESTART_WAIT)
    est = LogisticRegression(client=client3)  # checkpoint="auto": it recovers
    attempt = SetupAttempt([], *_cluster_at_start(est))
    assert attempt.workers == set(worker_info(client3))
    victim = sorted(attempt.workers)[1]
    said = [KeyError(victim), FutureCancelledError("encode_part-1", "already forgotten"),
            RuntimeError("Worker holding Actor was lost")]
    assert [_setup_loss(est, attempt, exc) for exc in said] == [None] * 3  # all there
    _kill(client3, victim)
    try:
        for exc in said:
            event = _setup_loss(est, attempt, exc)
            assert event is not None and event["setup"] and event["lost_workers"] == [
                victim] and event["error"] == repr(exc), (exc, event)
        # a fit without recovery raises them as they are; so does a try started since
        off = LogisticRegression(client=client3, checkpoint=None)
        assert _setup_loss(off, SetupAttempt([], *_cluster_at_start(off)), said[0]) is None
        assert _setup_loss(est, SetupAttempt([], *_cluster_at_start(est)), said[0]) is None
    finally:
        client3.wait_for_workers(3, timeout=RESTART_WAIT)


def test_a_worker_that_leaves_before_its_shard_is_made_is_a_loss(client3):
    """A shard is made on the worker it is given, and there only: when that worker left
    before making it (killed while a fit set up), the placement waited for it until its
    timeout, 120 s, then said that no worker thread was free (a new user's run, twice).
    It now raises a WorkerLostError, a loss that a fit's set-up recovers, within about a
    second of the scheduler seeing the worker leave."""
    import threading
    import time

    from dask_ps.exceptions import WorkerLostError

    client3.wait_for_workers(3, timeout=RESTART_WAIT)
    victim = sorted(worker_info(client3))[1]  # shards go round-robin: shard 1 there
    busy = client3.submit(time.sleep, 600, workers=[victim], pure=False)  # its only thread
    deadline = time.monotonic() + 60
    while not client3.processing(workers=[victim])[victim] and time.monotonic() < deadline:
        time.sleep(0.05)
    killer = threading.Timer(1.0, _kill, (client3, victim))
    killer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(WorkerLostError, match=rf"lost worker\(s\) \['{victim}'\], "
                                                  rf"holding shards \[1\]"):
            PSModel(client3, n_shards=3, timeout=120)
        assert time.monotonic() - t0 < 60  # not the 120 s of the placement's timeout
    finally:
        killer.join()
        busy.cancel()
        client3.wait_for_workers(3, timeout=RESTART_WAIT)


def test_a_call_to_a_shard_whose_worker_left_fails_at_once(client3):
    """The driver's calls go through Dask's RPC, whose connect retried the dead address
    until the model's timeout (a pull and a run each waited 25 s at timeout=20, with
    'got no answer'). They now ask the scheduler after 1 s whether the worker is still
    there, and fail saying it left and how to recover."""
    import time

    from dask_ps.exceptions import ShardUnavailableError

    model = PSModel(client3, n_shards=3, timeout=120)
    model.add_table("w", (30,))
    victim = model.shards[1].address
    os.kill(client3.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while model.lost_shards() != [1] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert model.lost_shards() == [1]
    for call in (lambda: model.pull("w", [15]), lambda: model.run(lambda ps, i: ps.clock(),
                                                                   range(1))):
        t0 = time.monotonic()
        with pytest.raises(ShardUnavailableError, match=r"shard 1 .*its worker left the "
                                                        r"cluster.*PSModel\.recover"):
            call()
        assert time.monotonic() - t0 < 60  # not the 120 s timeout (~1 s here)
    np.testing.assert_array_equal(model.pull("w", [0, 29]), [0, 0])  # the others answer
    model.close()
    client3.wait_for_workers(3, timeout=RESTART_WAIT)  # the nanny restarts it for the next test


@pytest.mark.parametrize("bad, message", [
    (lambda X, y: (X[:, 0], y), r"Expected 2D array"),
    (lambda X, y: (X, y.reshape(-1, 1)[:, [0, 0]]), r"y should be a 1d array"),
])
def test_bad_shapes_on_a_cluster_read_as_in_process(client3, bad, message):
    """A 1-D X or a 2-D y: scikit-learn's message on a cluster too (dask input as well)."""
    import dask.array as da

    X = np.random.default_rng(0).normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    Xb, yb = bad(X, y)
    for client in ("local", client3):
        with pytest.raises(ValueError, match=message):
            LogisticRegression(client=client, max_iter=2).fit(Xb, yb)
    with pytest.raises(ValueError, match=message):
        LogisticRegression(client=client3, max_iter=2).fit(
            da.from_array(Xb, chunks=100), da.from_array(yb, chunks=100))


def test_a_column_y_is_raveled_with_scikit_learns_warning(client3):
    from sklearn.exceptions import DataConversionWarning

    X = np.random.default_rng(0).normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int).reshape(-1, 1)
    with pytest.warns(DataConversionWarning):
        est = LogisticRegression(client=client3, max_iter=2, random_state=0).fit(X, y)
    assert est.coef_.shape == (1, 4)


def test_close_releases_the_shards_memory(client3):
    """close() drops the shards' tables on their workers at once, not when the model object
    is garbage-collected."""
    def held_bytes(dask_worker):
        import gc

        gc.collect()
        from dask_ps.state.shard import Shard

        return sum(t.values.nbytes for s in gc.get_objects() if isinstance(s, Shard)
                   for t in s.tables.values())

    model = PSModel(client3, n_shards=3)
    model.add_table("big", (3_000_000, 4), "float64")
    before = sum(client3.run(held_bytes).values())
    assert before >= 3_000_000 * 4 * 8
    model.close()
    after = sum(client3.run(held_bytes).values())
    assert after < before - 3_000_000 * 4 * 8 * 0.99, (before, after)
    del model  # still referenced here: the release did not wait for this


def test_restore_refuses_another_models_checkpoint(tmp_path):
    a = PSModel("local", n_shards=2)
    a.add_table("w", (10,))
    a.save(str(tmp_path / "a"))
    b = PSModel("local", n_shards=2)
    b.add_table("v", (10,))
    b.push("v", np.arange(10), np.ones(10))
    with pytest.raises(ValueError, match=r"'v'"):
        b.restore(str(tmp_path / "a"))
    np.testing.assert_array_equal(b.pull("v"), np.ones(10))  # the model is as it was
    b.save(str(tmp_path / "b"))
    with pytest.warns(UserWarning, match=r"'w'"):
        b.save(str(tmp_path / "a"))  # another model's tables are there


@pytest.mark.timeout(400)
def test_data_larger_than_memory_without_spilling_fails_clearly():
    """Spilling off, data ~3x the cluster's memory: the workers pause at their limit and
    never resume; the fit stops with a MemoryError naming the memory, instead of hanging."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    memory = {"distributed.worker.memory.spill": False, "distributed.worker.memory.target": False,
              "distributed.worker.memory.pause": 0.6,
              "distributed.worker.memory.terminate": False, "dask-ps.pause-timeout": 5}
    with dask.config.set(memory), \
            LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="500MiB",
                         **NO_DASHBOARD, worker_dashboard_address=None) as cluster, \
            Client(cluster) as client:
        rows = 3 * 2 * 500 * 2**20 // (8 * 1000)  # ~3x the cluster's memory in float64
        X = da.random.default_rng(0).random((rows, 1000), chunks=(5_000, 1000))
        y = (X[:, 0] > 0.5).astype(int)
        with pytest.raises(MemoryError, match=r"paused at its memory limit.*GiB of 0\.98 GiB"
                                              r".*spill"):
            LogisticRegression(client=client, max_iter=1).fit(X, y)


def test_fits_inside_dask_tasks_train_in_their_task(client2):
    """joblib's "dask" backend runs each fit of a cross-validation in a task: every worker
    thread held a fit whose shards waited for a free thread, a deadlock with no error.
    Inside a worker, an estimator without a client now trains in its task."""
    import joblib
    from sklearn.model_selection import cross_val_score

    X, y = _data(n=600, d=6)
    with joblib.parallel_backend("dask"):
        scores = cross_val_score(LogisticRegression(max_iter=3, random_state=0), X, y,
                                 cv=3, n_jobs=-1)
    alone = cross_val_score(LogisticRegression(max_iter=3, random_state=0, client="local"),
                            X, y, cv=3)
    np.testing.assert_allclose(scores, alone)


def test_shards_that_find_no_free_worker_thread_fail_in_time(client1):
    """A model given the cluster's client explicitly inside the task that holds the only
    worker thread: the shards cannot be created, and the model says so after its timeout
    instead of waiting for ever."""
    def inside():
        from distributed import get_client

        from dask_ps.model import placement

        placement.PLACE_TIMEOUT = 0  # in this worker process, for this test
        try:
            PSModel(get_client(), timeout=3)
        except TimeoutError as exc:
            return str(exc)
        finally:
            placement.PLACE_TIMEOUT = 120.0
        return "placed"

    said = client1.submit(inside, pure=False).result(timeout=120)
    assert said.startswith("the 1 shard(s) were not placed on the cluster within 3 s: "
                           "creating a shard takes a worker thread, and none was free"), said


def test_a_closed_client_is_named(client2):
    from distributed import Client

    closed = Client(client2.scheduler.address)
    closed.close()
    with pytest.raises(ValueError, match=r"^client is closed: pass an open "
                                         r"distributed.Client, 'local'"):
        LogisticRegression(client=closed, max_iter=1).fit(*_data(n=50, d=4))


def test_partitions_of_a_lost_worker_are_made_again_for_the_next_job():
    """After a worker holding partitions (and no shard) died, every later job on the same
    Partitions failed at once with WorkerLostError naming it, until the user called the
    undocumented ``locate()``. The next job now has them made again elsewhere. (A cluster of
    its own: the killed worker's restart is not waited for.)"""
    import time

    from distributed import Client, LocalCluster

    import dask_ps

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      **NO_DASHBOARD) as cluster, Client(cluster) as client:
        model = PSModel(client, n_shards=1)
        model.add_table("s", (1,), "float64", optimizer="add")
        data = dask_ps.partition(np.ones((600, 3)), n_partitions=6, client=client)
        victim = next(w for w in sorted(set(data.workers)) if w != model.shards[0].address)
        os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while victim in worker_info(client) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert victim not in worker_info(client)

        def step(ps, part):
            ps.push("s", [0], [part.load().shape[0]])
            ps.clock()

        model.fit_partitions(step, data, epochs=1)
        assert model.pull("s", [0]).tolist() == [600.0]
        assert victim not in data.workers
        data.release()
        model.close()


def test_a_participant_that_never_started_is_named(client2):
    """A job whose task waits behind other work on its worker (the only thread busy): the
    others' barrier timed out saying the participant was "stuck at clock 0", as if it had
    run and hung. The error now says it never started, and why."""
    import time

    def task(ps, item):
        for _ in range(3):
            ps.pull("w", [0])
            ps.push("w", [0], [1.0])
            ps.clock()

    model = PSModel(client2, timeout=3)
    try:
        model.add_table("w", (4,))
        busy_worker = sorted(worker_info(client2))[1]
        busy = client2.submit(time.sleep, 12, workers=[busy_worker], pure=False)
        deadline = time.monotonic() + 30
        while busy.key not in {k for ks in client2.processing().values() for k in ks}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(TimeoutError, match=r"stuck at clock 0 .*; participant\(s\) 1 on "
                                               + busy_worker.replace(".", r"\.")
                                               + r" never started: every thread of their "
                                               r"worker was busy with other work"):
            model.run(task, [0, 1], workers=sorted(worker_info(client2)))
        busy.result()
    finally:
        model.close()
