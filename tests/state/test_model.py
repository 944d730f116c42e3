"""PSModel on real LocalClusters and in-process: pull/push, jobs, server-side functions, errors."""

import operator
import re

import numpy as np
import pytest

import dask_ps
from dask_ps.cluster import worker_info

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("partitioner", ["range", "hash"])
@pytest.mark.parametrize("ncols", [None, 3])
def test_pull_returns_what_was_pushed(partitioner, ncols, any_client):
    n = 1000
    shape = (n,) if ncols is None else (n, ncols)
    rng = np.random.default_rng(0)
    keys = rng.integers(0, n, 5000)  # repeats, unsorted, over every shard
    if partitioner == "hash":
        keys = keys * 7919 + 2**41
    upd = rng.normal(size=(5000,) if ncols is None else (5000, ncols))
    with dask_ps.PSModel(any_client, n_shards=3) as model:
        model.add_table("t", shape=shape, dtype="float64", partitioner=partitioner)
        model.push("t", keys, upd)
        probe = np.concatenate([keys[::-1], keys[:10]])
        got = model.pull("t", probe)
        uniq, inv = np.unique(keys, return_inverse=True)
        want = np.zeros((len(uniq),) + shape[1:])
        np.add.at(want, inv, upd)
        lookup = dict(zip(uniq.tolist(), range(len(uniq))))
        np.testing.assert_allclose(got, want[[lookup[k] for k in probe.tolist()]], rtol=1e-12)
        assert got.shape == (len(probe),) + shape[1:]
        if partitioner == "hash":
            assert model.table("t").n_keys == len(uniq)


def count_task(ps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        keys = rng.integers(0, 500, 3)
        ps.push("counts", keys, np.ones(3, np.int64))
        ps.clock()
    return seed


def expected_counts(seeds):
    want = np.zeros(500, np.int64)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for _ in range(2000):
            np.add.at(want, rng.integers(0, 500, 3), 1)
    return want


@pytest.mark.parametrize("n_shards", [1, 2, 3])
def test_bsp_counts_are_exact(any_client, n_shards):
    """4 tasks x 2,000 pushes of +1 to random keys under BSP."""
    with dask_ps.PSModel(any_client, n_shards=n_shards) as model:
        model.add_table("counts", shape=(500,), dtype="int64")
        assert model.run(count_task, range(4), consistency="bsp") == [0, 1, 2, 3]
        np.testing.assert_array_equal(model.pull("counts"), expected_counts(range(4)))


def test_sparse_counts_exact_under_asp(client2):
    with dask_ps.PSModel(client2) as model:
        model.add_table("counts", shape=(None,), dtype="int64", partitioner="hash")
        model.run(sparse_count_task, range(4), consistency="asp")
        keys, counts = model.table("counts").to_numpy()
        want = expected_counts(range(4))
        np.testing.assert_array_equal(keys, np.flatnonzero(want) * 2**33)
        np.testing.assert_array_equal(counts, want[want > 0])


def sparse_count_task(ps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        keys = rng.integers(0, 500, 3)
        ps.push("counts", keys * 2**33, np.ones(3, np.int64))
        ps.clock()


def same_keys_task(ps, n_clocks):
    keys = np.arange(0, 1000, 3)
    for _ in range(n_clocks):
        ps.pull("w", keys)
        ps.push("w", keys, np.ones(len(keys)))
        ps.clock()
    return ps.current_clock


@pytest.mark.parametrize("consistency", ["bsp", "ssp"])
def test_threads_of_a_process_share_one_pull_per_shard_per_clock(client1x4, consistency):
    n_clocks = 20
    with dask_ps.PSModel(client1x4, n_shards=2) as model:
        model.add_table("w", shape=(1000,))
        before = model.stats()
        model.run(same_keys_task, [n_clocks] * 4, consistency=consistency,
                  staleness=None if consistency == "bsp" else 2)
        after = model.stats()
        for b, a in zip(before, after):
            assert a["pull_calls"] - b["pull_calls"] <= n_clocks  # 4 threads, not 4 x
            assert a["push_calls"] - b["push_calls"] == n_clocks
        np.testing.assert_array_equal(model.pull("w", np.arange(0, 1000, 3)), 4 * n_clocks)


def test_server_side_reduce_equals_numpy(any_client):
    with dask_ps.PSModel(any_client, n_shards=3) as model:
        t = model.add_table("w", shape=(10007, 2), dtype="float64", init=("normal", 0, 1),
                            seed=3)
        sq = t.reduce(lambda k, v, s: float((v ** 2).sum()), operator.add)
        full = model.pull("w")
        assert np.isclose(np.sqrt(sq), np.linalg.norm(full), rtol=1e-12)
        top = t.reduce(lambda k, v, s: [(float(v[i, 0]), int(k[i])) for i in
                                        np.argsort(v[:, 0])[-3:]], operator.add)
        assert sorted(top)[-3:] == sorted((float(full[i, 0]), i)
                                          for i in np.argsort(full[:, 0])[-3:])
        # a function may update the shard in place, next to its data
        t.map(lambda k, v, s: v.__imul__(2.0))
        np.testing.assert_allclose(model.pull("w"), 2 * full)


def test_set_state_round_trips_state_and_refuses_bad_arrays_before_writing(any_client):
    """set_state writes what state() read, on every shard; a misspelt slot, a slot or values
    of another shape, or NaN are refused before any shard is written (a misspelt slot
    raised KeyError after the values were overwritten)."""
    with dask_ps.PSModel(any_client, n_shards=3) as model:
        t = model.add_table("a", shape=(10, 2), dtype="float64", optimizer="adagrad")
        rng = np.random.default_rng(0)
        values, acc = rng.normal(size=(10, 2)), rng.uniform(size=(10, 2))
        t.set_state(values, {"accumulator": acc})
        got_values, got_slots = t.state()
        np.testing.assert_array_equal(got_values, values)
        np.testing.assert_array_equal(got_slots["accumulator"], acc)
        for bad_values, bad_slots, message in [
                (values + 1, {"accumulater": acc}, r"keeps no slot \['accumulater'\]; its "
                                                   r"slots: \['accumulator'\]"),
                (values + 1, {"accumulator": acc[:, 0]}, r"slot 'accumulator' must have "
                                                         r"shape \(10, 2\), got \(10,\)"),
                (values[:5], None, r"values must have shape \(10, 2\), got \(5, 2\)"),
                (np.where(np.eye(10, 2) > 0, np.nan, values), None,
                 r"values at row 0, column 0 is nan"),
                (np.full((10, 2), "x"), None, r"values must be numbers")]:
            with pytest.raises(ValueError, match=message):
                t.set_state(bad_values, bad_slots)
            np.testing.assert_array_equal(t.state()[0], values)  # as it was
            np.testing.assert_array_equal(t.state()[1]["accumulator"], acc)
        v = model.add_table("v", shape=(7,), dtype="float32")
        v.set_state(np.arange(7.0))  # a vector table takes (n_rows,)
        np.testing.assert_array_equal(model.pull("v"), np.arange(7.0))


def test_initialisation_is_independent_of_shard_count(any_client):
    tables = []
    for n_shards in (1, 4):
        with dask_ps.PSModel(any_client, n_shards=n_shards) as model:
            model.add_table("d", shape=(100, 2), init=("uniform", -1, 1), seed=5)
            model.add_table("s", shape=(None, 2), partitioner="hash", init=("normal", 0, 0.1),
                            seed=5)
            tables.append((model.pull("d"), model.pull("s", [3, 2**62, -9])))
    np.testing.assert_array_equal(tables[0][0], tables[1][0])
    np.testing.assert_array_equal(tables[0][1], tables[1][1])


def sgd_task(ps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(30):
        keys = rng.integers(0, 200, 50)
        w = ps.pull("w", keys)
        ps.push("w", keys, w - 1.0)  # gradient of (w - 1)^2 / 2
        ps.clock()


def test_bsp_results_identical_in_process_and_on_cluster(client2):
    finals = []
    for client in ("local", client2):
        with dask_ps.PSModel(client, n_shards=2) as model:
            model.add_table("w", shape=(200,), dtype="float64", optimizer="adagrad")
            model.run(sgd_task, [0, 1], consistency="bsp")
            finals.append(model.pull("w"))
    np.testing.assert_allclose(finals[0], finals[1], rtol=1e-12)
    assert np.abs(finals[0]).sum() > 0


def push_pull_task(ps, item):
    """Every clock: add ``item + 1`` to each of 8 rows, tick, and pull them (one call)."""
    keys = np.arange(8)
    out = []
    for _ in range(4):
        got = ps.push_pull("w", keys, np.full(8, item + 1.0), keys[::-1].copy())
        out.append((ps.current_clock, got[::-1].tolist()))
    return out


@pytest.mark.parametrize("n_items", [2, 4])  # alone in its process (the short way), or not
def test_push_pull_pulls_what_every_task_pushed_before_its_new_clock(client2, n_items):
    total = sum(i + 1.0 for i in range(n_items))
    for client in ("local", client2):
        with dask_ps.PSModel(client, n_shards=2) as model:
            model.add_table("w", shape=(8,), dtype="float64")
            for out in model.run(push_pull_task, range(n_items), consistency="bsp"):
                assert out == [(c, [c * total] * 8) for c in range(1, 5)]
            np.testing.assert_array_equal(model.pull("w"), np.full(8, 4 * total))


def checked_push_pull_task(ps, item):
    """push_pull of pushes the caller vouches for: the process's validation refuses."""
    client = ps._client

    def refuse(*args, **kwargs):
        raise AssertionError("a checked push was validated")

    client.check_update = refuse
    try:
        keys = np.array([1, 6, 7])  # both shards
        return [ps.push_pull("w", keys, np.full((3, 2), item + 1.0), np.arange(8),
                             checked=True).tolist() for _ in range(3)]
    finally:
        del client.check_update


def test_push_pull_checked_is_not_validated_and_sums_the_same(client2):
    with dask_ps.PSModel(client2, n_shards=2) as model:
        model.add_table("w", shape=(8, 2), dtype="float64")
        outs = model.run(checked_push_pull_task, range(2), consistency="bsp")
        for out in outs:
            for c, got in enumerate(out, 1):
                want = np.zeros((8, 2))
                want[[1, 6, 7]] = c * 3.0
                np.testing.assert_array_equal(got, want)


@pytest.mark.timeout(240)  # a SpecCluster of 2 nannies: ~14 s; 79 s once on a loaded machine
def test_dedicated_ps_workers():
    from distributed import Client, Nanny, Scheduler, SpecCluster

    workers = {"ps": {"cls": Nanny, "options": {"nthreads": 1, "resources": {"ps": 1}}},
               "compute": {"cls": Nanny, "options": {"nthreads": 1}}}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        ps_worker = [a for a, w in worker_info(client).items()
                     if w["resources"].get("ps")]
        with dask_ps.PSModel(client, resources="ps") as model:
            assert [s.address for s in model.shards] == ps_worker
            model.add_table("c", shape=(10,), dtype="int64")
            model.run(count_task_small, range(3))
            assert model.pull("c").sum() == 3 * 5
        with pytest.raises(ValueError, match="no worker offers resource 'gpu'"):
            dask_ps.PSModel(client, resources="gpu")


def count_task_small(ps, seed):
    for _ in range(5):
        ps.push("c", [seed], [1])
        ps.clock()


def reuse_task(ps, item):
    keys = np.array([5, 1, 5, 9])
    for _ in range(3):
        ps.pull("w", keys)
        ps.push("w", keys, np.ones(4))  # same keys as the pull: its plan is reused
        keys[0] = 2  # the caller changes its array after the push, before clock()
        ps.pull("w", [0])
        ps.push("w", [0], [10.0])  # a second part in the same clock
        ps.clock()
        keys[0] = 5
    return None


def test_push_reusing_the_pull_plan_is_safe_against_caller_changes():
    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("w", shape=(10,))
        model.run(reuse_task, [0])
        np.testing.assert_array_equal(model.pull("w"), [30, 3, 0, 0, 0, 6, 0, 0, 0, 3])


@pytest.mark.parametrize("keys", [np.arange(0, 500), np.arange(499, -1, -1)])
def test_pulled_values_are_the_callers_own(any_client, keys):
    """The values a pull returns may be the shard's answer itself (one shard, no copy): they
    are writable and writing them changes neither the table nor a later pull."""
    with dask_ps.PSModel(any_client, n_shards=2) as model:
        model.add_table("t", shape=(1000,), dtype="float64")
        model.push("t", keys, np.ones(len(keys)))
        got = model.pull("t", keys)
        got[:] = -5
        np.testing.assert_array_equal(model.pull("t", keys), np.ones(len(keys)))


def test_run_from_inside_a_task_is_refused(any_client):
    """A nested ``run`` raises the RuntimeError of the rule (on a cluster, the task's copy of
    the model has no client: it used to fail with an AttributeError of dask_ps internals),
    and the model runs jobs afterwards."""
    with dask_ps.PSModel(any_client, n_shards=2) as model:
        model.add_table("w", shape=(4,))

        def nested(ps, item):
            return model.run(lambda ps2, j: j, [0])

        with pytest.raises(RuntimeError, match=(
                rf"PSModel {model.uid}: run called from inside a task of job '[0-9a-f]+' of "
                rf"PSModel {model.uid} \(this model\); .*one job at a time \(and none from "
                rf"inside a task\)")):
            model.run(nested, [0])
        assert model.run(lambda ps, i: i * 2, [1, 2]) == [2, 4]


def test_run_from_a_task_outside_jobs_is_refused(client2):
    with dask_ps.PSModel(client2, n_shards=2) as model:
        model.add_table("w", shape=(4,))
        fut = client2.submit(lambda m: m.run(lambda ps, j: j, [0]), model, pure=False)
        with pytest.raises(RuntimeError, match=r"run called from inside a task; start jobs "
                                                r"from the driver: one job at a time"):
            fut.result(timeout=60)


def test_a_step_that_uses_the_partitions_object_is_refused_with_the_reason(client2):
    """A step starting a job with the ``Partitions`` of its scope cannot be pickled for the
    workers: the raised error is that of ``Partitions`` (it was distributed's "Could not
    serialize object of type LLGExpr", the reason only in a logged traceback), with a note
    naming the step; the model runs jobs afterwards."""
    with dask_ps.PSModel(client2, n_shards=2) as model, \
            dask_ps.partition(np.arange(8.0), client=client2) as data:
        model.add_table("w", shape=(4,))

        def starts_a_job(ps, part):
            model.fit_partitions(lambda ps2, p: None, data)

        with pytest.raises(TypeError, match=r"^Partitions live on the driver and are not sent "
                                            r"to tasks.*jobs start from the driver\n") as info:
            model.fit_partitions(starts_a_job, data)
        (note,) = info.value.__notes__
        assert re.fullmatch(
            rf"pickling function {__name__}\.test_a_step_that_uses_the_partitions_object_is_"
            rf"refused_with_the_reason\.<locals>\.starts_a_job of job '[0-9a-f]+' for the "
            rf"workers \(the function, what it refers to, or its tasks' items\)", note), note
        assert model.fit_partitions(lambda ps, p: p.load().sum(), data) == [[6.0, 22.0]]


def test_an_unpicklable_result_names_its_step_epoch_and_partition(client2):
    """A result that cannot be pickled raises pickle's error, with a note naming the
    function, the epoch and partition (or item), the worker and the result's type (it was
    distributed's "Could not serialize object of type tuple", after ~80 lines of
    tracebacks)."""
    import threading

    with dask_ps.PSModel(client2, n_shards=2) as model, \
            dask_ps.partition(np.arange(8.0), client=client2) as data:
        def step(ps, part):
            ps.clock()
            return threading.Lock() if (part.epoch, part.index) == (3, 1) else part.index

        with pytest.raises(TypeError, match=r"^cannot pickle '_thread.lock' object\n") as info:
            model.fit_partitions(step, data, epochs=2, first_epoch=2)
        (note,) = info.value.__notes__
        assert note.startswith(f"returned by function {__name__}.test_an_unpicklable_result_"
                               f"names_its_step_epoch_and_partition.<locals>.step in epoch 3, "
                               f"partition 1 of job '")
        assert note.endswith(f" (worker {data.workers[1]}): its result, a lock, cannot be "
                             f"pickled to reach the driver")
        with pytest.raises(TypeError, match="cannot pickle") as info:
            model.run(lambda ps, i: threading.Lock() if i == 2 else i, [0, 1, 2])
        assert " for item 2 of job '" in info.value.__notes__[0]
        assert model.run(lambda ps, i: i * 2, [1, 2]) == [2, 4]


@pytest.mark.parametrize("partitioner", ["range", "hash"])
def test_set_rows_sets_values_and_state_and_the_rule_goes_on_from_them(any_client,
                                                                        partitioner):
    """set_rows writes rows and their FTRL state as given (a push would take them for a
    gradient); the next push steps from that state exactly as the rule does on one shard;
    repeated keys, a key out of range, a misspelt or misshapen slot and NaN are refused
    before any shard is written, a bad row named by its key and its position in keys (it
    said "row 2" for the third key)."""
    keys = np.array([7, 1, 12, 3])
    if partitioner == "hash":
        keys = keys * 7919 + 2**41
    rng = np.random.default_rng(3)
    z, n = rng.normal(size=(4, 2)), rng.uniform(1, 2, size=(4, 2))
    w = rng.normal(size=(4, 2))
    g = rng.normal(size=(4, 2))
    with dask_ps.PSModel(any_client, n_shards=3) as model:
        t = model.add_table("f", shape=(None if partitioner == "hash" else 16, 2),
                            dtype="float64", optimizer=dask_ps.FTRL(alpha=0.1),
                            partitioner=partitioner)
        t.set_rows(keys, w, {"z": z, "n": n})
        np.testing.assert_array_equal(model.pull("f", keys), w)
        # the same rows on one in-process shard, pushed through the rule
        with dask_ps.PSModel("local", n_shards=1) as ref:
            r = ref.add_table("f", shape=(None if partitioner == "hash" else 16, 2),
                              dtype="float64", optimizer=dask_ps.FTRL(alpha=0.1),
                              partitioner=partitioner)
            r.set_rows(keys, w, {"z": z, "n": n})
            r.push(keys, g)
            want = ref.pull("f", keys)
        t.push(keys, g)
        np.testing.assert_array_equal(model.pull("f", keys), want)
        assert not np.allclose(want, w)
        for bad_keys, bad_values, bad_slots, error, message in [
                (keys[[1, 0, 2, 0]], w, None, ValueError,
                 rf"repeated keys \(4 keys, 3 distinct\): key {keys[0]} at positions 1 and 3 "
                 rf"of keys$"),
                (keys, w, {"zz": z}, ValueError, r"keeps no slot \['zz'\]"),
                (keys, w, {"z": z[:, :1]}, ValueError, r"slot 'z' must have shape \(4, 2\)"),
                (keys, np.where(w > 0, np.nan, w), None, ValueError, "not finite"),
                (keys, w, {"n": np.where(np.eye(4, 2, -2) > 0, -n, n)}, ValueError,
                 rf"slot 'n' at key {keys[2]} \(position 2 of keys\), column 0 is -.*"
                 r"keeps it non-negative")] + (
                [] if partitioner == "hash" else
                [(np.array([1, 2, 3, 16]), w, None, IndexError, "16")]):
            with pytest.raises(error, match=message):
                t.set_rows(bad_keys, bad_values, bad_slots)
            np.testing.assert_array_equal(model.pull("f", keys), want)  # as it was


def test_set_rows_refuses_what_an_integer_slot_cannot_hold(any_client):
    """Adam's step count is int64: NaN, 1e30 and 2.7 were cast to -2**63, -2**63 and 2 with
    only numpy's warning; refused, naming the row by its key and position in keys (not
    "row 1" for key 4), and the rows left as they were."""
    with dask_ps.PSModel(any_client, n_shards=2) as model:
        t = model.add_table("a", shape=(6, 2), dtype="float64", optimizer="adam")
        t.set_rows([1, 4], np.ones((2, 2)), {"t": np.array([[3.0], [5.0]])})
        for bad, shown in [(np.nan, "nan"), (1e30, r"1e\+30"), (2.7, "2.7"), (-1.0, "-1")]:
            with pytest.raises(ValueError, match=rf"slot 't' at key 4 \(position 1 of keys\), "
                                                 rf"column 0 is {shown}"):
                t.set_rows([1, 4], np.zeros((2, 2)), {"t": np.array([[3.0], [bad]])})
        values, slots = t.state()
        np.testing.assert_array_equal(values[[1, 4]], np.ones((2, 2)))
        assert slots["t"][[1, 4], 0].tolist() == [3, 5]


@pytest.mark.parametrize("partitioner", ["range", "hash"])
def test_empty_table_puts_every_row_back_to_its_init(partitioner, any_client):
    """PSModel.empty_table (MatrixFactorization's users' table, emptied after each save):
    every shard's part allocated afresh, the rows back to their init; the other tables
    untouched; an unknown table named."""
    keys = np.arange(0, 600, 7) * (7919 if partitioner == "hash" else 1)
    with dask_ps.PSModel(any_client, n_shards=3) as model:
        model.add_table("t", (600, 2), "float64", partitioner=partitioner,
                        init=("normal", 0.0, 1.0), seed=3)
        model.add_table("other", (600,), "float64")
        fresh = model.pull("t", keys)
        model.push("t", keys, np.ones((keys.shape[0], 2)))
        model.push("other", [5], [2.0])
        model.empty_table("t")
        np.testing.assert_array_equal(model.pull("t", keys), fresh)
        assert model.pull("other", [5])[0] == 2.0
        if partitioner == "hash":
            assert model.table("t").n_keys == keys.shape[0]  # the pull made its rows again
        with pytest.raises(dask_ps.UnknownTableError, match="nope"):
            model.empty_table("nope")


def test_a_stopped_job_waits_for_its_released_tasks_asking_less_and_less_often(client2):
    """After an interrupt, the job waits until its released tasks (they run on) end, asking
    only the workers that run one, first after STOP_POLL seconds, then twice as long each time
    up to STOP_POLL_MAX: a 3 s task takes about ten asks (every STOP_POLL, sixty)."""
    import time

    from dask_ps import _compat
    from dask_ps.model.jobs import STOP_POLL_MAX, _wait_tasks_stop

    def running():
        return [str(k) for keys in client2.run(_compat.executing_keys).values() for k in keys
                if str(k).startswith("dask-ps-test-stop-")]

    workers = sorted(client2.scheduler_info()["workers"])
    fut = client2.submit(time.sleep, 3.0, key="dask-ps-test-stop-0", workers=workers[:1],
                         pure=False)
    while not running():
        time.sleep(0.01)
    fut.release()
    asked = _wait_tasks_stop(client2, "dask-ps-test-stop-", 60.0, workers)
    assert running() == []
    assert 2 <= asked <= 3.0 / STOP_POLL_MAX + 6, asked
