"""The training driver: jobs of clocks, checkpoints, resuming."""

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from dask_ps import PSModel, partition
from dask_ps.algorithms._logistic_data import encode_part
from dask_ps.algorithms.epoch_loop import EpochLoop
from dask_ps.algorithms.logistic import train
from dask_ps.model.format import latest, list_versions
from dask_ps.model.recovery import run_clocks

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def parts(data):
    X, y = load_svmlight_file(str(data / "lr_a9a" / "a9a"), n_features=123)
    return partition((X[:8000], y[:8000]), client="local", n_partitions=3).map(
        encode_part, np.array([-1.0, 1.0]), 1)


def fit(parts, max_iter, **kw):
    with PSModel("local", n_shards=2) as model:
        loop = EpochLoop(model, "test", max_iter, **kw)
        W, history, _, state = train(model, parts, n_features=123, n_outputs=1,
                                     solver="adagrad", max_iter=max_iter, random_state=3,
                                     loop=loop)
    return W, history, state


def test_a_resumed_fit_equals_the_uninterrupted_one(parts):
    """BSP and per-(seed, epoch) minibatch orders: stopping after 2 epochs and resuming from
    the checkpoint gives the weights and optimizer state of 4 epochs in one go."""
    W4, hist4, state4 = fit(parts, 4, checkpoint="memory://resume-a", checkpoint_every=1)
    fit(parts, 2, checkpoint="memory://resume-b")
    assert latest("memory://resume-b").clock == 2  # a checkpoint after the last clock
    W, hist, state = fit(parts, 4, checkpoint="memory://resume-b", resume=True)
    np.testing.assert_allclose(W, W4, rtol=1e-12, atol=1e-14)
    # weights and AdaGrad accumulators, side by side in the table
    np.testing.assert_allclose(state.state, state4.state, rtol=1e-12, atol=1e-14)
    # epochs 1-2 read back from the store
    np.testing.assert_allclose([h["loss"] for h in hist], [h["loss"] for h in hist4],
                               rtol=1e-12)
    assert [h["epoch"] for h in hist] == [1, 2, 3, 4]
    assert len(hist) == 4
    assert latest("memory://resume-b").data_position == {"epoch": 4}


def test_checkpoints_every_k_clocks_and_keep(parts):
    saved = []
    with PSModel("local") as model:
        model.add_table("w", (4,), optimizer="add")

        def step(start, stop):
            saved.append((start, stop))
            model.push("w", [0], [1.0])
            return list(range(start, stop))

        results, events = run_clocks(model, step, 7, checkpoint="memory://every",
                                     checkpoint_every=3, keep=2)
    assert results == list(range(7)) and events == []
    assert saved == [(0, 3), (3, 6), (6, 7)]
    complete, torn = list_versions("memory://every")
    assert complete == [3, 4] and torn == []  # versions at clocks 0, 3, 6, 7; two kept
    assert latest("memory://every").clock == 7


def test_jobs_of_their_own_length_still_checkpoint_every_k_clocks(tmp_path):
    """Jobs sized by ``job_clocks`` (one clock each: an estimator with a per-epoch stop
    rule or callbacks, such as every stochastic ``LogisticRegression``) saved after every
    job, whatever ``checkpoint_every`` said: ``checkpoint_every=2`` (``dask-ps train lr
    --checkpoint-every 2``, which prints "every 2 epochs") wrote a version per epoch. A
    version now follows the job that ends ``checkpoint_every`` clocks after the last."""
    import numpy as np

    from dask_ps import LogisticRegression

    clocks = []
    with PSModel("local") as model:
        model.add_table("w", (4,), optimizer="add")
        results, _ = run_clocks(model, lambda a, b: list(range(a, b)), 7,
                                checkpoint="memory://own-length", checkpoint_every=3,
                                job_clocks=lambda c: 1, keep=None)
        clocks = [latest("memory://own-length", version=v).clock
                  for v in list_versions("memory://own-length")[0]]
    assert results == list(range(7)) and clocks == [0, 3, 6, 7]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    url = str(tmp_path / "ck")
    est = LogisticRegression(client="local", max_iter=10, checkpoint=url, checkpoint_every=5,
                             progress=False).fit(X, X[:, 0] > 0)
    assert len(est.history_) == 10
    assert list_versions(url)[0] == [2, 3]  # at epochs 0, 5 and 10: the newest two kept
    assert latest(url).clock == 10


def test_a_run_prunes_only_its_own_versions():
    """Versions already in the store (a user's save, another run) survive ``keep``."""
    with PSModel("local") as model:
        model.add_table("w", (4,), optimizer="add")
        model.save("memory://others")
        model.save("memory://others")
        run_clocks(model, lambda a, b: list(range(a, b)), 4, checkpoint="memory://others",
                   keep=1)
    assert list_versions("memory://others") == ([1, 2, 7], [])  # this run wrote 3..7


def test_a_step_that_stops_early_ends_the_run():
    with PSModel("local") as model:
        model.add_table("w", (4,), optimizer="add")
        results, _ = run_clocks(model, lambda a, b: list(range(a, min(b, 5))), 9,
                                checkpoint="memory://early", checkpoint_every=2)
    assert results == [0, 1, 2, 3, 4]
    assert latest("memory://early").clock == 5


def test_bad_checkpoint_every():
    with PSModel("local") as model, pytest.raises(ValueError, match="checkpoint_every"):
        run_clocks(model, lambda a, b: [], 3, checkpoint="memory://x", checkpoint_every=0)


def test_restart_spares_the_first_and_last_versions():
    """``restart`` (``checkpoint="auto"``): no version of untouched tables before the first
    clock, none after the last with ``save_last=False``; a loss before the first version
    recreates the tables (as created, plus what ``restart`` pushes) and runs from clock 0."""
    from dask_ps.exceptions import ShardUnavailableError

    calls, restarts, seen = [], [], []
    with PSModel("local") as model:
        model.add_table("w", (4,), optimizer="add")

        def fill():
            restarts.append(1)
            model.push("w", [3], [5.0])

        fill()

        def step(start, stop):
            calls.append((start, stop))
            seen.append(model.pull("w").tolist())
            model.push("w", [0], [1.0])
            if len(calls) == 2:  # the second call's job fails after writing to the table
                raise ShardUnavailableError(0, "local", "gone")
            return list(range(start, stop))

        results, events = run_clocks(model, step, 4, checkpoint="memory://restart",
                                     checkpoint_every=2, restart=fill, save_last=False)
        final = model.pull("w").tolist()
    assert results == [0, 1, 2, 3]
    # job (0, 2) then a version at clock 2; the failed job (2, 4) goes back to clock 2
    assert calls == [(0, 2), (2, 4), (2, 4)] and restarts == [1]
    assert [e["checkpoint_clock"] for e in events] == [2]
    assert list_versions("memory://restart") == ([1], [])  # clock 2 only: none at 0 or 4
    assert final == [2.0, 0.0, 0.0, 5.0]

    # a loss in the very first job: the tables are recreated and refilled, clock 0 again
    for log in (calls, restarts, seen):
        log.clear()
    with PSModel("local") as model:
        model.add_table("w", (4,), optimizer="add")
        fill()
        calls.append(None)  # so that the first job is the failing (second) call
        results, events = run_clocks(model, step, 2, checkpoint="memory://restart0",
                                     restart=fill, save_last=False)
        final = model.pull("w").tolist()
    assert results == [0, 1] and calls == [None, (0, 1), (0, 1), (1, 2)]
    assert restarts == [1, 1] and seen[:2] == [[0.0, 0.0, 0.0, 5.0]] * 2
    assert len(events) == 1 and events[0]["rebuilt"] and events[0]["checkpoint"] is None
    assert events[0]["checkpoint_clock"] == 0 and events[0]["clocks_lost"] == 0
    assert final == [2.0, 0.0, 0.0, 5.0]
    assert list_versions("memory://restart0") == ([1], [])  # after clock 1 only


def test_epochs_of_one_job_get_its_mean_time_spread_over_it():
    """Without a checkpoint the epochs run as one job: each record had the job's mean
    epoch_time but the same ``time`` (the job's end), a vertical step in the loss curve."""
    import time

    with PSModel("local") as model:
        jobs = []

        def epochs(first, last):
            jobs.append((first, last))
            time.sleep(0.05 * (last - first + 1))
            return [dict(loss=1.0 / e) for e in range(first, last + 1)]

        history = EpochLoop(model, "test", 4, progress=False).run(epochs)
    assert jobs == [(1, 4)]
    times = [h["time"] for h in history]
    took = history[0]["epoch_time"]
    assert took >= 0.05 and all(h["epoch_time"] == took for h in history)
    np.testing.assert_allclose(np.diff(times), took, rtol=1e-9)
    assert times[0] >= took


def test_epochs_reported_by_the_tasks_get_the_time_they_ended():
    """A job whose tasks report each epoch as it ends (``EpochLoop.task_reports``, GBDT's
    rounds): an epoch's ``time`` is when it ended, not a share of the job's."""
    import time

    with PSModel("local") as model:
        loop = EpochLoop(model, "test", 4, progress=False)

        def task(ps, item):
            for e in range(1, 5):
                time.sleep(0.3 if e == 1 else 0.01)
                ps.report(epoch=e, loss=1.0 / e)

        def epochs(first, last):
            model.run(task, [0], callback=loop.task_reports(1, 1.0))
            return [dict(loss=1.0 / e) for e in range(first, last + 1)]

        history = loop.run(epochs)
    times = [h["time"] for h in history]
    # spread evenly over the job the first epoch would end at about 0.33 / 4 s
    assert times[0] >= 0.3 and times == sorted(times), times
    assert loop.task_reports(1) is None  # outside a job


def test_epochs_reported_by_the_tasks_are_shown_as_they_end(client1):
    """On a cluster each epoch's ``"dask_ps.fit"`` event (the dashboard's curve,
    ``dask-ps train``'s lines) comes while the job runs: the task waits for the event of
    its epoch before the next one (without streaming it would wait in vain: the events
    would come at the job's end); and none comes twice."""
    import threading
    import time
    import uuid

    from distributed import Event

    from dask_ps.diagnostics import FIT_TOPIC

    tag = uuid.uuid4().hex
    seen = []

    def on_fit(event):
        if event[1].get("name") == tag:
            seen.append(event[1]["epoch"])
            threading.Thread(target=Event(f"{tag}-{event[1]['epoch']}", client=client1).set,
                             daemon=True).start()

    def task(ps, item):
        from distributed import Event

        for e in range(1, 4):
            ps.report(epoch=e, loss=1.0 / e)
            if not Event(f"{tag}-{e}").wait(timeout=30):
                return e  # the epoch not shown while the job ran
        return None

    client1.subscribe_topic(FIT_TOPIC, on_fit)
    try:
        with PSModel(client1, n_shards=1) as model:
            loop = EpochLoop(model, tag, 3, progress=False)
            waited = []

            def epochs(first, last):
                waited.extend(model.run(task, [0], callback=loop.task_reports(1, 1.0)))
                return [dict(loss=1.0 / e) for e in range(first, last + 1)]

            loop.run(epochs)
        assert waited == [None]
        time.sleep(0.5)  # an event sent twice would come by now
        assert seen == [1, 2, 3]
    finally:
        client1.unsubscribe_topic(FIT_TOPIC)
