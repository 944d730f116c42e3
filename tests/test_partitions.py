"""Data partitions: cutting, placing, streaming to the tasks that own them, worker-local state."""

import contextlib
import itertools
import re
import time

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import dask_ps
from dask_ps.partitions import partition

_COUNTER = itertools.count()  # in each worker process: the order of the steps

pytestmark = pytest.mark.timeout(180)


def _chunks_on(client, Xn, where):
    """A dask array of ``Xn`` in chunks of 100 rows, chunk i held by worker ``where[i]``.

    Scattered with ``hash=False``: under the default hash, identical values scattered by
    another test share its keys, and a key that test is releasing can lose or hang this
    scatter (seen as a test failing or hanging about once in five runs)."""
    import dask
    import dask.array as da

    futures = [client.scatter(Xn[100 * i:100 * (i + 1)], workers=[w], hash=False)
               for i, w in enumerate(where)]
    return da.concatenate([da.from_delayed(dask.delayed(f), shape=(100, Xn.shape[1]),
                                           dtype=Xn.dtype) for f in futures])


def test_in_memory_inputs_are_cut_by_rows():
    X = sp.random(10, 4, density=0.5, format="csr", random_state=0)
    y = np.arange(10)
    parts = partition((X, y), client="local", n_partitions=3)
    assert parts.n_rows == [3, 4, 3] and len(parts) == 3 and parts.total_rows == 10
    values = parts.reduce(lambda v: v)
    assert (sp.vstack([v[0] for v in values]) != X).nnz == 0
    np.testing.assert_array_equal(np.concatenate([v[1] for v in values]), y)
    df = pd.DataFrame({"a": np.arange(7)})
    assert partition(df, client="local", n_partitions=2).n_rows == [4, 3]
    import sparse

    coo = partition(sparse.COO.from_scipy_sparse(X), client="local", n_partitions=2)
    assert sp.issparse(coo.reduce(lambda v: v)[0])


@pytest.mark.parametrize("bad, match", [
    ((np.zeros((3, 2)), np.zeros(4)), "different numbers of rows"),
    (np.zeros((0, 2)), "no rows"),
    ((), "empty tuple"),
])
def test_bad_inputs_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        partition(bad, client="local")


def test_bad_n_partitions_and_by():
    with pytest.raises(ValueError, match="n_partitions must be a positive integer"):
        partition(np.zeros(3), client="local", n_partitions=0)
    with pytest.raises(ValueError, match="by='x' is not a column"):
        partition(pd.DataFrame({"a": [1]}), client="local", by="x")
    with pytest.raises(ValueError, match="needs a DataFrame"):
        partition(np.zeros(3), client="local", by="a")


def test_workers_without_a_cluster_are_refused():
    """There are no workers to choose in this process: not silently ignored."""
    with pytest.raises(ValueError, match=r"workers=\['tcp://127.0.0.1:1'\] needs a Dask "
                                         r"cluster"):
        partition(np.zeros(3), client="local", workers=["tcp://127.0.0.1:1"])


def test_by_keeps_equal_values_in_one_partition():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"user": rng.integers(0, 50, 1000), "r": rng.random(1000)})
    parts = partition(df, client="local", n_partitions=4, by="user")
    users = [set(v["user"]) for v in parts.reduce(lambda v: v)]
    assert sum(len(u) for u in users) == 50  # no user in two partitions
    assert sum(parts.n_rows) == 1000


def _where(ps, part):
    from distributed import get_worker

    part.state["visits"] = part.state.get("visits", 0) + 1
    X = part.load()
    return get_worker().address, part.index, part.epoch, X.shape[0], part.state["visits"]


def test_steps_run_where_their_partitions_live(client2):
    """In-memory data is scattered once; every step runs on the worker holding its
    partition, in a fresh order each epoch, and nothing moves between workers."""
    X = sp.random(4000, 50, density=0.1, format="csr", random_state=0, dtype=np.float32)
    with dask_ps.PSModel(client2) as model, partition(X, client=client2, n_partitions=6) as data:
        assert sorted(set(data.workers)) == sorted(client2.nthreads())
        out = model.fit_partitions(_where, data, epochs=3, seed=5)
        for e, results in enumerate(out):
            for i, (addr, index, epoch, rows, visits) in enumerate(results):
                assert addr == data.workers[i] and index == i and epoch == e
                assert rows == data.n_rows[i] and visits == e + 1
        # worker-local state lives across jobs too
        again = model.fit_partitions(_where, data, first_epoch=3)[0]
        assert [r[4] for r in again] == [4] * 6 and [r[2] for r in again] == [3] * 6
        report = data.report()
        assert report["incoming_transfers"] == 0 and report["incoming_transfer_bytes"] == 0
        assert report["bytes_in_memory"] > 0
        uid = data.uid
    from dask_ps.partitions.worker import _STATE

    # released: the worker-local state is gone
    assert sum(client2.run(lambda: sum(1 for k in _STATE if k[0] == uid)).values()) == 0


def _order(ps, parts):
    return [p.index for p in parts]


def test_epochs_visit_a_tasks_partitions_in_fresh_orders():
    data = partition(np.arange(60.0), client="local", n_partitions=6)
    seen = []
    with dask_ps.PSModel("local") as model:
        # in-process: one task per partition; a task of several partitions is a cluster's
        runs = model.run(_order, data)
        assert sorted(i for r in runs for i in r) == list(range(6))

        def step(ps, part):
            seen.append((part.epoch, part.index))
        model.fit_partitions(step, data, epochs=4)
    assert sorted(seen) == [(e, i) for e in range(4) for i in range(6)]


def _tick(ps, part):
    return next(_COUNTER)


def test_orders_differ_between_epochs_and_repeat_with_the_seed(client1):
    """One task (1 worker x 1 thread) visits its 8 partitions in an order drawn from the seed,
    the epoch and the task: fresh every epoch, the same again with the same seed."""
    with dask_ps.PSModel(client1) as model, partition(np.arange(80.0), client=client1,
                                                     n_partitions=8) as data:
        runs = []
        for seed in (1, 1, 2):
            ticks = model.fit_partitions(_tick, data, epochs=3, seed=seed)
            runs.append([tuple(np.argsort(t)) for t in ticks])  # partitions in visit order
    assert runs[0] == runs[1] and runs[0] != runs[2]
    assert len(set(runs[0])) == 3  # a fresh order every epoch


def test_a_single_chunk_is_spread_over_the_worker_threads(client2):
    """A small file read as one chunk would leave a worker idle: it is cut and spread."""
    import dask.array as da

    X = da.from_array(np.arange(1000.0).reshape(500, 2), chunks=(500, 2))
    with partition(X, client=client2) as data:
        assert len(data) >= 2 and sorted(set(data.workers)) == sorted(client2.nthreads())
        assert data.total_rows == 500
        np.testing.assert_array_equal(np.concatenate(data.reduce(lambda v: v)),
                                      np.arange(1000.0).reshape(500, 2))


def test_uneven_chunks_are_moved_to_even_the_rows_per_worker(client2):
    """Dask may hold 8 of 10 persisted chunks on one worker: whole partitions move once so
    that each worker holds about as many rows, and the rows stay in their order."""
    a, b = sorted(client2.nthreads())
    Xn = np.arange(2000.0).reshape(1000, 2)

    with partition(_chunks_on(client2, Xn, [a] * 8 + [b] * 2), client=client2) as data:
        rows = {w: sum(n for n, v in zip(data.n_rows, data.workers) if v == w) for w in (a, b)}
        assert rows == {a: 500, b: 500}
        # where the moves put them (not asked of the scheduler again): what it says
        who = client2.who_has(data._parts)
        assert data.workers == [who[f.key][0] for f in data._parts]
        assert data.n_rows == [100] * 10 and data.nbytes == [1600] * 10
        np.testing.assert_array_equal(np.concatenate(data.reduce(lambda v: v)), Xn)
    even = [a if i % 2 else b for i in range(10)]
    with partition(_chunks_on(client2, Xn, even), client=client2) as data:  # left as it is
        assert data.workers == even


def test_partitions_go_only_to_the_workers_asked_for(client2):
    """workers=: in-memory data is scattered there, dask chunks computed elsewhere move
    there (and a dask DataFrame grouped by a column too); an unknown address is refused."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    a, b = sorted(client2.nthreads())
    Xn = np.arange(400.0).reshape(200, 2)
    for data in (Xn, da.from_array(Xn, chunks=(25, 2))):
        for w in (a, b):
            with partition(data, client=client2, workers=[w]) as parts:
                assert set(parts.workers) == {w}
                np.testing.assert_array_equal(np.concatenate(parts.reduce(lambda v: v)), Xn)
    with partition(Xn, client=client2, workers=[b, a]) as parts:  # both: as by default
        assert set(parts.workers) == {a, b}
    frame = dd.from_pandas(pd.DataFrame({"g": np.arange(200) % 7, "x": np.arange(200.0)}),
                           npartitions=4)
    with partition(frame, client=client2, by="g", workers=[b]) as parts:
        assert set(parts.workers) == {b} and parts.total_rows == 200
    with partition(Xn, client=client2, workers=b) as parts:  # one address
        assert set(parts.workers) == {b}
    with pytest.raises(ValueError, match="'tcp://127.0.0.1:1', not a worker of the cluster"):
        partition(Xn, client=client2, workers=["tcp://127.0.0.1:1"])
    with pytest.raises(ValueError, match="futures"):
        partition([client2.scatter(Xn, hash=False)], client=client2, workers=[a])


def test_balancing_moves_are_part_of_placing_not_later_transfers(client2):
    """Partitions all computed on one worker are balanced over both when placed; report()
    counts transfers from there, so the moves are not counted as data moved later."""
    a, _ = sorted(client2.nthreads())
    Xn = -np.arange(3000.0).reshape(1000, 3)
    with partition(_chunks_on(client2, Xn, [a] * 10), client=client2) as data:
        assert len(set(data.workers)) == 2  # moved
        report = data.report()
        assert report["incoming_transfers"] == 0 and report["incoming_transfer_bytes"] == 0
        np.testing.assert_array_equal(np.concatenate(data.reduce(lambda v: v)), Xn)


@contextlib.contextmanager
def _paused(client, worker):
    """``worker`` paused by hand (its memory monitor off meanwhile) until the block ends;
    entered once the scheduler sees it paused (the worker tells it in its own time)."""
    from distributed.core import Status

    def set_status(status, dask_worker):
        mm = dask_worker.memory_manager
        if status == Status.paused:
            mm._dask_ps_pause, mm.memory_pause_fraction = mm.memory_pause_fraction, False
        else:
            mm.memory_pause_fraction = mm._dask_ps_pause
        dask_worker.status = status

    def seen_as(dask_scheduler):
        return dask_scheduler.workers[worker].status.name

    client.run(set_status, Status.paused, workers=[worker])
    try:
        deadline = time.monotonic() + 30
        while client.run_on_scheduler(seen_as) != "paused" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.run_on_scheduler(seen_as) == "paused"
        yield
    finally:
        client.run(set_status, Status.running, workers=[worker])


def test_a_move_to_a_paused_worker_runs_elsewhere_instead_of_waiting(client2):
    """Balancing moves are strict (Dask's work stealing would undo them), so a paused target
    would hold one forever: after WAIT_INTERVAL the move is resubmitted loose and runs on a
    worker that can, and the placement finishes with the data intact."""
    from dask_ps.partitions.core import WAIT_INTERVAL

    a, b = sorted(client2.nthreads())
    Xn = np.arange(2000.0).reshape(1000, 2)
    X = _chunks_on(client2, Xn, [a] * 10)

    with _paused(client2, b):
        t0 = time.perf_counter()
        with partition(X, client=client2) as data:
            assert set(data.workers) == {a}  # b could take nothing
            who = client2.who_has(data._parts)
            assert data.workers == [who[f.key][0] for f in data._parts]
            np.testing.assert_array_equal(np.concatenate(data.reduce(lambda v: v)), Xn)
        assert time.perf_counter() - t0 < 30 * WAIT_INTERVAL  # generous: it did not hang


def test_in_memory_data_goes_to_the_running_workers_and_all_paused_is_named(client2):
    """A scatter to a paused worker waits, then fails after 30 s ("No valid workers
    found"): in-memory data goes to the running workers; asked to go only to paused ones,
    placing waits for them up to dask-ps.pause-timeout, then says so."""
    import dask

    a, b = sorted(client2.nthreads())
    Xn = np.arange(600.0).reshape(200, 3) + 0.25  # values of its own (keys of its own)

    with _paused(client2, b):
        t0 = time.monotonic()
        with partition(Xn, client=client2) as data:
            assert set(data.workers) == {a}
            np.testing.assert_array_equal(np.concatenate(data.reduce(lambda v: v)), Xn)
        with dask.config.set({"dask-ps.pause-timeout": 1}), \
                pytest.raises(MemoryError, match=r"placing the data on \['tcp.* paused at its "
                                                 r"memory limit for \d+ s"):
            partition(Xn, client=client2, workers=[b])
        assert time.monotonic() - t0 < 25  # generous: no 30 s wait for the paused worker


def test_dask_tuples_are_read_once_and_kept_aligned(client2):
    import dask.array as da

    rng = np.random.default_rng(0)
    Xn, yn = rng.random((300, 3)), rng.integers(0, 2, 300)
    X, y = da.from_array(Xn, chunks=(100, 3)), da.from_array(yn, chunks=100)
    with partition((X, y), client=client2) as data:
        assert data.n_rows == [100, 100, 100]
        got = data.reduce(lambda v: v)
        np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), Xn)
        np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), yn)
        mapped = data.map(lambda v, k: v[0] * k, 2.0)
        np.testing.assert_array_equal(np.concatenate(mapped.reduce(lambda v: v)), 2 * Xn)
        assert mapped.workers == data.workers
        mapped.release()
    with pytest.raises(RuntimeError, match="released"):
        data.refs()


def test_partitions_do_not_pickle():
    import pickle

    with pytest.raises(TypeError, match="tasks get Partition handles"):
        pickle.dumps(partition(np.zeros(3), client="local"))


def test_a_partition_too_big_for_its_worker_is_refused_before_the_scatter(client1):
    """A partition above Dask's pause fraction of its worker's memory limit is refused,
    naming it, its size, the limit and the remedies, before anything is sent (scattered,
    one past the terminate fraction got the worker restarted and a bare CommClosedError).
    The fraction is read from this process's Dask config: a tiny one makes a small
    partition "too big" for the fixture's worker."""
    import dask

    (addr,) = client1.nthreads()
    limit = client1.scheduler_info()["workers"][addr]["memory_limit"]
    held = set(client1.has_what()[addr])
    Xn = np.arange(8000.0).reshape(4000, 2)  # 64,000 bytes, two partitions of 32,000
    fraction = 40_000 / limit  # room for 40,000 bytes
    with dask.config.set({"distributed.worker.memory.pause": fraction / 2,
                          "distributed.worker.memory.terminate": fraction}):
        with pytest.raises(MemoryError, match=r"^partition 0 \(2,000 rows\) takes 32,\d+ bytes "
                                              r".* where Dask pauses a worker .*n_partitions=4 "
                                              r"or more.*dask collection"):
            partition(Xn, client=client1, n_partitions=2)
        assert set(client1.has_what()[addr]) == held  # nothing was sent
        with dask.config.set({"distributed.worker.memory.pause": False}), \
                partition(Xn, client=client1, n_partitions=2) as data:  # fits below terminate
            assert data.n_rows == [2000, 2000]


@pytest.mark.parametrize("bad, said", [
    ("abc", "partition 1 has no rows: got str;"),
    (None, "partition 1 has no rows: got NoneType;"),
    (np.float64(2.0), "partition 1 has no rows: got float64;"),
    ([1, 2], "partition 1 has no rows: got list;"),
    ((np.ones(2), "b"), "partition 1 (element 1 of its tuple) has no rows: got str;"),
])
def test_futures_without_rows_are_refused_naming_their_position(client1, bad, said):
    """A partition is an object with a shape (NumPy, scipy, pandas) or a tuple of them, 0
    rows allowed; the rest is refused, naming its position and type (a string was accepted,
    None refused without its position)."""
    def good():
        return client1.scatter(np.ones((5, 2)), hash=False)

    with partition([good(), client1.scatter(np.ones((0, 2)), hash=False)],
                   client=client1) as data:
        assert data.n_rows == [5, 0]
    with pytest.raises(TypeError) as info:
        partition([good(), client1.scatter([bad], hash=False)[0]], client=client1)
    assert str(info.value).startswith(said)


def test_futures_of_more_than_two_dimensions_are_refused_naming_their_position(client1):
    """A future whose value is a 3-D array (or a tuple holding one) was taken as a
    partition, where in-memory and dask arrays of more than 2 dimensions are refused
    (:func:`~dask_ps.partitions.inputs.check_dims`); now refused as they are, naming the
    future's position (its partition) and the shape, the caller's futures left alone."""
    import gc

    addr = next(iter(client1.has_what()))
    held = set(client1.has_what()[addr])
    good = client1.scatter(np.ones((5, 2)), hash=False)
    cube = client1.scatter(np.ones((4, 2, 3)), hash=False)
    with pytest.raises(ValueError, match=r"^partition 1 has 3 dimensions \(shape \(4, 2, 3\)\): "
                                         r"an array of a partition has 1 or 2"):
        partition([good, cube], client=client1)
    pair = client1.scatter([(np.ones(4), np.ones((4, 1, 1)))], hash=False)[0]
    with pytest.raises(ValueError, match=r"^partition 0 \(element 1 of its tuple\) has 3 "
                                         r"dimensions \(shape \(4, 1, 1\)\)"):
        partition([pair, good], client=client1)
    assert cube.result().shape == (4, 2, 3)  # the caller's future is still there
    with partition([good, client1.scatter(np.ones((3, 4)), hash=False)],
                   client=client1) as data:  # 2-D and 1-D values pass
        assert data.n_rows == [5, 3]
    del good, cube, pair, data
    gc.collect()  # (the tracebacks of the refusals held the partitions' futures)
    deadline = time.monotonic() + 10  # nothing of this test left behind (what an earlier
    while set(client1.has_what()[addr]) - held and time.monotonic() < deadline:  # test left
        time.sleep(0.05)  # may have gone meanwhile)
    assert not set(client1.has_what()[addr]) - held


def test_futures_without_any_row_are_refused_as_in_memory_data(client1):
    """Futures whose values all had 0 rows were accepted, where in-memory data of 0 rows is
    refused ("data has no rows"); told by the partitions' descriptions (no round trip
    more), nothing kept, the caller's futures left alone."""
    addr = next(iter(client1.has_what()))
    held = set(client1.has_what()[addr])
    empty = [client1.scatter(np.ones((0, 2)), hash=False) for _ in range(2)]
    with pytest.raises(ValueError, match=r"^data has no rows \(2 futures of 0 rows\)$"):
        partition(empty, client=client1)
    with pytest.raises(ValueError, match=r"^data has no rows$"):
        partition(np.ones((0, 2)), client=client1)
    assert [f.result().shape for f in empty] == [(0, 2), (0, 2)]  # still there
    with partition([empty[0], client1.scatter(np.ones((3, 2)), hash=False)],
                   client=client1) as data:
        assert data.n_rows == [0, 3]  # one empty partition among others: as before
    del empty, data
    deadline = time.monotonic() + 10  # the refused partitions were released
    while set(client1.has_what()[addr]) - held and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(client1.has_what()[addr]) == held


def test_dask_data_without_any_row_is_refused_as_in_memory_data(client2):
    """A dask array or dataframe whose chunks all had 0 rows (e.g. filtered to nothing) was
    accepted with a cluster, where in-memory data and futures of 0 rows are refused: the
    same rule now, told by the computed chunks' descriptions (no compute more), nothing
    left on the cluster; one chunk of 0 rows among others is fine, as before."""
    import dask.array as da
    import dask.dataframe as dd

    held = {k for ks in client2.has_what().values() for k in ks}
    frame = dd.from_pandas(pd.DataFrame({"a": np.arange(30), "b": np.ones(30)}),
                           npartitions=3)
    none = frame[frame.a < 0]
    X = da.concatenate([da.zeros((0, 2), chunks=(0, 2))] * 2)
    cases = [(none, "3 dask chunks of 0 rows"), (none.a, "3 dask chunks of 0 rows"),
             (da.zeros((0, 2), chunks=(5, 2)), "1 dask chunk of 0 rows"),
             (X, "2 dask chunks of 0 rows"),
             ((X[:, 0], X), "2 dask chunks of 0 rows")]
    for data, what in cases:
        with pytest.raises(ValueError, match=rf"^data has no rows \({what}\)$"):
            partition(data, client=client2)
        with pytest.raises(ValueError, match=r"^data has no rows$"):
            partition(data, client="local")  # computed here: in-memory data of 0 rows
    with pytest.raises(ValueError, match=r"^data has no rows \(\d+ dask chunks? of 0 rows\)$"):
        partition(none, client=client2, by="a")
    with partition(frame[frame.a >= 10], client=client2) as data:
        assert data.total_rows == 20 and 0 in data.n_rows  # the first chunk kept no row
    deadline = time.monotonic() + 10  # the refused chunks were released
    while {k for ks in client2.has_what().values() for k in ks} - held and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert {k for ks in client2.has_what().values() for k in ks} == held


def test_in_memory_data_without_rows_is_refused():
    with pytest.raises(TypeError, match="^data has no rows: got str"):
        partition("abc", client="local")


def _keys_on_cluster(client, keys) -> set:
    """Those of ``keys`` some worker holds, once the scheduler settled: polled until a
    released key is gone (its release reaches the scheduler, then the workers, a moment
    after the call) or 30 s passed."""
    keys = set(keys)
    deadline = time.monotonic() + 30
    while True:
        held = {k for ks in client.has_what().values() for k in ks} & keys
        if not held or time.monotonic() > deadline:
            return held
        time.sleep(0.05)


def test_releasing_partitions_of_user_futures_leaves_them_alive(client2):
    """partition() of the caller's futures (scattered, computed) keeps its own futures of
    them: the end of ``with`` (or release()) drops only those, the caller's futures still
    give their data; what partition() made itself (scattered in-memory data) is freed."""
    import dask.array as da

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    futs = [client2.scatter(X[:100], hash=False), client2.scatter(X[100:200], hash=False),
            client2.compute(da.from_array(X[200:], chunks=50) * 2)]
    with partition(futs, client=client2) as data:
        assert data.reduce(lambda v: v.shape[0]) == [100, 100, 100]
    assert data._released
    np.testing.assert_array_equal(futs[0].result(), X[:100])
    np.testing.assert_array_equal(futs[1].result(), X[100:200])
    np.testing.assert_array_equal(futs[2].result(), X[200:] * 2)
    assert all(f.status == "finished" for f in futs)
    # released again by hand: still alive, still held by the workers
    data = partition(futs[:2], client=client2)
    data.release()
    np.testing.assert_array_equal(futs[0].result(), X[:100])
    keys = [f.key for f in futs]
    assert set(client2.who_has(futs)) == set(keys)
    assert all(client2.who_has(futs)[k] for k in keys)
    # partition()'s own data: freed on release
    own = partition(X, client=client2, n_partitions=3)
    own_keys = [f.key for f in own.futures]
    held = {k for ks in client2.has_what().values() for k in ks}
    assert set(own_keys) <= held and len(own_keys) == 3
    with own:
        pass
    assert _keys_on_cluster(client2, own_keys) == set()
    del futs


def test_a_client_that_is_closed_or_none_is_refused_as_by_psmodel(client1):
    """``partition(X, client=closed)`` failed with "RuntimeError: IOLoop is closed", and a
    partition set's calls after its client closed with "IOLoop is closed" or "Client is
    closed. Can't send update-graph message"; ``client=3`` with an AttributeError."""
    from distributed import Client

    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(TypeError, match="client must be a distributed.Client, 'local' or "
                                        "None, got int"):
        partition(X, client=3)
    other = Client(client1.scheduler.address)
    data = partition(X, client=other, n_partitions=2)
    assert data.reduce(len) == [3, 3]
    other.close()
    with pytest.raises(ValueError, match="client is closed: pass an open distributed.Client"):
        partition(X, client=other)
    for call in (data.refs, data.report, lambda: data.map(len), lambda: data.reduce(len)):
        with pytest.raises(RuntimeError, match=f"partitions {data.uid}: their client is "
                                               f"closed, and their data with it"):
            call()
    data.release()  # still fine: idempotent, nothing to free


def test_in_memory_elements_of_another_length_beside_dask_data_are_named(client1):
    """A NumPy ``y`` of another length beside a dask ``X`` failed with dask's "Chunks do not
    add up to shape. Got chunks=((3, 3, 3, 1),), shape=(5,)" (in-process it was named)."""
    import dask.array as da

    X = da.from_array(np.zeros((10, 2)), chunks=3)
    for client in (client1, "local"):
        with pytest.raises(ValueError, match=r"have (10 and 5|\[10, 5\]) rows|different "
                                             r"numbers of rows \[10, 5\]"):
            partition((X, np.zeros(5)), client=client)
    with pytest.raises(ValueError, match="the elements of the data have 10 and 5 rows; they "
                                         "must be aligned by rows"):
        partition((X, list(range(5))), client=client1)
    with partition((X, list(range(10))), client=client1) as data:  # a list of the right length
        assert data.total_rows == 10


def test_a_list_mixing_futures_and_values_or_ragged_is_named(client1):
    """Both failed with NumPy's "setting an array element with a sequence. The requested
    array has an inhomogeneous shape", naming neither the data nor the futures."""
    X = np.zeros((4, 2))
    [fut] = client1.scatter([X])
    with pytest.raises(TypeError, match=r"data is a list mixing Dask futures \(first at "
                                        r"position 1\) with other values \(first at position "
                                        r"0\): give a list of futures only"):
        partition([X, fut], client=client1)
    with pytest.raises(ValueError, match="data is a list that is no array of rows"):
        partition([[1, 2], [3]], client="local")
    assert partition([[1, 2], [3, 4]], client="local").total_rows == 2


def test_futures_with_n_partitions_or_by_are_refused_not_ignored(client1):
    """``partition(futures, n_partitions=7)`` gave one partition per future, silently: the
    futures are the partitions, as they are, so n_partitions (and by) are refused, naming
    both, as workers= was."""
    futs = client1.scatter([np.zeros((4, 2)), np.ones((3, 2))], hash=False)
    for kwargs, said in (({"n_partitions": 7}, "n_partitions=7"), ({"by": "a"}, "by='a'"),
                         ({"n_partitions": 3, "workers": ["w"]},
                          "n_partitions=3, workers=['w']")):
        with pytest.raises(ValueError, match=rf"^{re.escape(said)} cannot be given with a "
                                             rf"list of futures: the 2 futures are the "
                                             rf"partitions, one each"):
            partition(futs, client=client1, **kwargs)
    with partition(futs, client=client1) as data:
        assert data.n_rows == [4, 3]


_DIMS = (r"^data( \(element 1 of its tuple\))? has 3 dimensions \(shape \(4, 2, 2\)\): an "
         r"array of a partition has 1 or 2 \(rows on the first axis, then columns\)")


@pytest.mark.parametrize("client", ["local", "client1"])
def test_3d_data_is_refused_alike_in_memory_and_dask(client, request):
    """A 3-D NumPy array was cut into partitions while a dask one was refused (on a
    cluster; in this process both were accepted); a 0-D dask array failed with an
    IndexError, a 0-D NumPy array being named. Now one check, one message, for all."""
    import dask.array as da
    import sparse

    client = request.getfixturevalue(client) if client != "local" else client
    X3 = np.zeros((4, 2, 2))
    for data in (X3, da.from_array(X3, chunks=2), (np.zeros((4, 2)), X3),
                 sparse.COO.from_numpy(X3),
                 (da.zeros((4, 2), chunks=2), X3), (da.zeros((4, 2), chunks=2), X3.tolist()),
                 X3.tolist()):
        with pytest.raises(ValueError, match=_DIMS):
            partition(data, client=client, n_partitions=2)
    for data in (np.array(3.0), da.from_array(np.array(3.0)),
                 (da.zeros(4, chunks=2), np.array(1.0))):
        with pytest.raises(TypeError, match=r"^data( \(element 1 of its tuple\))? has no "
                                            r"rows: got (ndarray|Array);"):
            partition(data, client=client)
    with partition((da.zeros((4, 2), chunks=2), np.arange(4.0)), client=client) as data:
        assert data.total_rows == 4  # 1-D and 2-D still fine
    computed = []  # refused before any chunk is computed (in this process too)
    lazy = da.zeros((4, 2, 2), chunks=2).map_blocks(lambda b: computed.append(1) or b,
                                                    meta=np.zeros((0, 0, 0)))
    with pytest.raises(ValueError, match=_DIMS):
        partition(lazy, client=client)
    assert computed == []
