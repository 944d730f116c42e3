"""The direct path (task threads calling shards over channels) with several threads per
worker process: exact counts, the staleness bound, one pull per shard per clock."""

import contextlib

import numpy as np
import pytest
from test_consistency import N_CLOCKS, clock_task
from test_model import count_task, expected_counts, same_keys_task

import dask_ps

pytestmark = pytest.mark.timeout(180)


def test_the_tasks_of_this_cluster_take_the_direct_path(client2x2):
    with dask_ps.PSModel(client2x2) as model:
        model.add_table("w", shape=(10,))
        out = model.run(lambda ps, _: ps._client.transport.direct, range(4))
        assert out == [True] * 4


@pytest.mark.parametrize("consistency, staleness", [("ssp", 1), ("bsp", None)])
def test_in_process_tasks_call_their_shards_directly_too(consistency, staleness):
    # in-process mode: every shard is local, called from the task threads (as a worker's
    # own shard is), not through the loop thread that hosts them (a hop per call: a GBDT
    # fit of LightGBM's example spent most of its time waking that loop); pulls ahead of
    # the bound park on the shard until the slow task's push releases them
    items = [(i, 4, 0.0 if i < 2 else 0.02) for i in range(4)]
    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("clocks", shape=(4,), dtype="int64")
        assert model.run(lambda ps, _: ps._client.transport.direct, range(2)) == [True] * 2
        out = model.run(clock_task, items, consistency=consistency, staleness=staleness)
        assert model.pull("clocks").tolist() == [N_CLOCKS] * 4
    assert max(gap for gap, _ in out) <= (staleness or 0)


def test_bsp_counts_are_exact_with_threads_sharing_channels(client2x2):
    with dask_ps.PSModel(client2x2) as model:
        model.add_table("counts", shape=(500,), dtype="int64")
        assert model.run(count_task, range(4), consistency="bsp") == [0, 1, 2, 3]
        np.testing.assert_array_equal(model.pull("counts"), expected_counts(range(4)))


@pytest.mark.parametrize("consistency, staleness", [("ssp", 2), ("bsp", None)])
def test_staleness_bound_holds_with_threads_sharing_channels(client2x2, consistency,
                                                             staleness):
    # tasks 0 and 1 fast, 2 and 3 slow (20 ms per clock); they spread over both workers
    items = [(i, 4, 0.0 if i < 2 else 0.02) for i in range(4)]
    with dask_ps.PSModel(client2x2) as model:
        model.add_table("clocks", shape=(4,), dtype="int64")
        out = model.run(clock_task, items, consistency=consistency, staleness=staleness)
        assert model.pull("clocks").tolist() == [N_CLOCKS] * 4
    assert max(gap for gap, _ in out) <= (staleness or 0)


def test_threads_share_one_pull_per_shard_per_clock_across_workers(client2x2):
    n_clocks = 20
    with dask_ps.PSModel(client2x2) as model:
        model.add_table("w", shape=(1000,))
        before = model.stats()
        model.run(same_keys_task, [n_clocks] * 4, consistency="bsp")
        after = model.stats()
        for b, a in zip(before, after):
            # 2 processes x 2 threads: one pull per process and clock, not one per thread
            assert a["pull_calls"] - b["pull_calls"] <= 2 * n_clocks
        np.testing.assert_array_equal(model.pull("w", np.arange(0, 1000, 3)), 4 * n_clocks)


DENSE_ROWS, DENSE_KEYS, DENSE_CLOCKS = 3000, 6000, 4


def _dense_keys(seed, clock):
    return np.random.default_rng([seed, clock]).integers(0, DENSE_ROWS, DENSE_KEYS)


def dense_task(ps, item):
    """Pull and push most rows of a 3-column table per clock (keys travel as bitmaps); each
    pull under BSP must see exactly the pushes of the earlier clocks of every task."""
    seed, seeds = item
    for c in range(DENSE_CLOCKS):
        keys = _dense_keys(seed, c)
        want = np.zeros(DENSE_ROWS)
        for s in seeds:
            for earlier in range(c):
                want += np.bincount(_dense_keys(s, earlier), minlength=DENSE_ROWS)
        got = ps.pull("t", keys)
        np.testing.assert_array_equal(got, np.repeat(want[keys, None], 3, axis=1))
        ps.push("t", keys, np.ones((DENSE_KEYS, 3)))
        ps.clock()
    return True


def test_dense_key_sets_are_exact_over_the_channels_as_bitmaps(client2x2):
    seeds = list(range(4))
    with dask_ps.PSModel(client2x2) as model:
        model.add_table("t", shape=(DENSE_ROWS, 3), dtype="float64", optimizer="add")
        assert model.run(dense_task, [(s, seeds) for s in seeds], consistency="bsp") == \
            [True] * 4
        want = sum(np.bincount(_dense_keys(s, c), minlength=DENSE_ROWS)
                   for s in seeds for c in range(DENSE_CLOCKS))
        np.testing.assert_array_equal(model.pull("t"), np.repeat(want[:, None], 3, axis=1))
        # the keys went as bitmaps: fewer key bytes than int32 offsets of the distinct keys
        stats = model.stats()
        key_bytes = sum(s["bytes_pulled"] for s in stats) - 8 * 3 * sum(
            s["keys_pulled"] for s in stats)
        assert 0 < key_bytes < sum(s["keys_pulled"] for s in stats)


def _steps(ps, draws: list, add: float) -> dict:
    """Pull-compute-push steps on table "h", one clock per key set of ``draws``: each pull
    is checked against the pushes before it (each adds ``add`` per place of a key: this
    task's push of ones, and any other task's of the same keys); returns those sums."""
    want: dict = {}
    for keys in draws:
        got = ps.pull("h", keys)
        np.testing.assert_array_equal(got, [want.get(int(k), 0.0) for k in keys])
        ps.push("h", keys, np.ones(keys.shape[0]))
        for k in keys:
            want[int(k)] = want.get(int(k), 0.0) + add
        ps.clock()
    ps._client.wait(ps.job)
    return want


def _assert_sums(model, want: dict) -> None:
    """Table "h" holds ``want[key]`` for every key of ``want`` (pulled from the driver)."""
    keys = np.array(list(want), np.int64)
    np.testing.assert_array_equal(model.pull("h", keys), [want[int(k)] for k in keys])


def _remote_keys(ps, pool: np.ndarray) -> tuple:
    """``(transport, remote shard, 2000 keys of the pool on it)`` for a task of a worker
    holding the other shard."""
    pc = ps._client
    t = pc.transport
    [remote] = [s for s in range(len(t.shards)) if s not in t.local]
    plan, _ = pc.spec("h").partitioner.plan(pool)
    return t, remote, plan.local[plan.shard_slice(remote)][:2000].copy()


def named_keys_task(ps, item):
    """Pull-compute-push steps on a hashed table from one task (BSP: each pull sees the pushes
    of the clocks before it; ASP would not promise it); then pushes naming keys the
    remote shard does not hold, through both callers of the transport: each is sent again
    with its keys and applied once."""
    from dask_ps.state.wire_forms import KeyRef

    n_clocks, n = item
    rng = np.random.default_rng(11)
    pool = rng.integers(-2**62, 2**62, 3 * n)
    want = _steps(ps, [rng.choice(pool, n) for _ in range(n_clocks)], 1.0)  # with repeats
    t, remote, mine = _remote_keys(ps, pool)
    ones = np.ones((mine.shape[0], 1))
    t.call_many([(remote, "push", dict(updates=[("h", KeyRef(("x", 1), mine.shape[0], mine),
                                                   ones)]))], t.timeout)
    t.run(t.call(remote, "push", [("h", KeyRef(("x", 2), mine.shape[0], mine), ones)]))
    for k in mine:
        want[int(k)] = want.get(int(k), 0.0) + 2.0
    return [want.get(int(k), 0.0) for k in pool]


def _run_hashed(model, task, items: list) -> tuple:
    """``task`` on ``items`` (BSP), on the workers of the first shards, with a float64 hashed
    table "h": its outputs, and the shards' stats before and after."""
    model.add_table("h", shape=(None,), partitioner="hash", dtype="float64", optimizer="add")
    before = model.stats()
    out = model.run(task, items, consistency="bsp",
                    workers=[r.address for r in model.shards[:len(items)]])
    return out, before, model.stats()


def test_pushes_name_the_keys_their_pull_sent_to_remote_shards(client2x2):
    n_clocks, n = 3, 6000
    with dask_ps.PSModel(client2x2) as model:
        [want], before, after = _run_hashed(model, named_keys_task, [(n_clocks, n)])
        pool = np.random.default_rng(11).integers(-2**62, 2**62, 3 * n)
        np.testing.assert_array_equal(model.pull("h", pool), want)
    # the remote shard (1) got the clocks' pushes as values and key names: fewer key bytes
    # than the keys it was pushed (the two pushes sent again carry theirs)
    pushed = after[1]["bytes_pushed"] - before[1]["bytes_pushed"]
    keys = after[1]["keys_pushed"] - before[1]["keys_pushed"]
    assert pushed < 8 * keys + 8 * keys * 3 // 4


def late_repeats_task(ps, n):
    """Pull-compute-push steps (BSP) whose keys repeat only in late buckets: the pull's dedup
    waits until its keys have left (both shards get every place), and the push that follows
    sums each key's repeats once, with its keys sent again (not named)."""
    rng = np.random.default_rng(5)
    keys = rng.permutation(np.unique(rng.integers(-2**62, 2**62, n)))
    part = ps._client.spec("h").partitioner
    last = part.plan(keys)[0].local[-2:]
    keys = np.concatenate([keys, last, last[:1]])
    assert part.plan(keys, defer_inverse=True, defer_dedup=True)[0].buckets.shape[0]
    want = {}
    for _ in range(3):
        got = ps.pull("h", keys)
        np.testing.assert_array_equal(got, [want.get(int(k), 0.0) for k in keys])
        ps.push("h", keys, np.arange(keys.shape[0], dtype=np.float64))
        for i, k in enumerate(keys):
            want[int(k)] = want.get(int(k), 0.0) + i
        ps.clock()
    return keys, [want[int(k)] for k in keys]


def test_pulls_send_late_repeats_and_their_pushes_sum_them(client2x2):
    with dask_ps.PSModel(client2x2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        [(keys, want)] = model.run(late_repeats_task, [20_000], consistency="bsp",
                                   workers=[model.shards[0].address])
        np.testing.assert_array_equal(model.pull("h", keys), want)
        assert sum(s["tables"]["h"]["rows"] for s in model.stats()) == np.unique(keys).shape[0]


def pieces_task(ps, item):
    """Pull-compute-push steps (BSP, both workers' tasks on the same keys, with repeats)
    whose pulls send the remote shard their keys in pieces (``PIECE_KEYS`` made small in
    this process): each pull sees every push of the clocks before it. Then a push riding
    with a pull in pieces names keys the shard does not hold: it is sent again with its
    keys, and the pieces behind it are pulled again, so that they see it."""
    from dask_ps.state import wire_forms
    from dask_ps.state.wire_forms import KeyRef

    task, n_clocks, n = item
    old = wire_forms.PIECE_KEYS
    wire_forms.PIECE_KEYS = 1100  # pieces of more than RECALL_MIN keys: named
    try:
        pool = np.random.default_rng(3).integers(-2**62, 2**62, 3 * n)
        # both tasks pull and push the same keys, with repeats
        want = _steps(ps, [np.random.default_rng(c).choice(pool, n) for c in range(n_clocks)],
                      2.0)
        if task:
            return None
        t, remote, mine = _remote_keys(ps, pool)
        # the calls below go past the clocks: a pull at the next clock (BSP) of a key of the
        # remote shard waits until the other task's last push has reached that shard
        ps.pull("h", mine[:1])
        calls = [(remote, "push_pull", dict(updates=[("h", KeyRef(("x", 1), 2000, mine),
                                                      np.ones((2000, 1)))],
                                            name="h", keys=mine[:500])),
                 (remote, "pull", dict(name="h", keys=mine[500:]))]
        got = np.concatenate([v for v, _ in t.call_many(calls, t.timeout)])[:, 0]
        np.testing.assert_array_equal(got, [want.get(int(k), 0.0) + 1.0 for k in mine])
        return len(wire_forms.piece_bounds(n))
    finally:
        wire_forms.PIECE_KEYS = old


def test_large_pulls_go_to_remote_shards_in_pieces_and_stay_exact(client2):
    n_clocks, n = 4, 9000
    with dask_ps.PSModel(client2) as model:
        out, before, after = _run_hashed(model, pieces_task, [(t, n_clocks, n) for t in (0, 1)])
        assert out[1] is None and out[0] > 1
    # each shard answered more pull calls than the tasks pulled from it (pieces), and got
    # the remote task's pushes as values and names of the pieces' keys (16 bytes a key
    # with their keys, 8 without)
    for a, b in zip(before, after):
        assert b["pull_calls"] - a["pull_calls"] > 2 * n_clocks + 2
        assert b["bytes_pushed"] - a["bytes_pushed"] < 14 * (b["keys_pushed"] - a["keys_pushed"])


def one_task_pieces(ps, item):
    """Pull-compute-push steps of one task (BSP) whose pulls go to the remote shard in
    pieces (``PIECE_KEYS`` made small in this process); returns the sums pushed."""
    from dask_ps.state import wire_forms

    pool, n_clocks, n = item
    old = wire_forms.PIECE_KEYS
    wire_forms.PIECE_KEYS = 2200  # pieces of ~1900 keys, over RECALL_MIN
    try:
        return _steps(ps, [np.random.default_rng(c).choice(pool, n) for c in range(n_clocks)],
                      1.0)
    finally:
        wire_forms.PIECE_KEYS = old


def test_a_held_push_in_pieces_finds_its_rows_in_the_lookup_memo(client2):
    # BSP holds a clock's pushes until the barrier; the pieces of one participant's push
    # are applied one by one, each finding the rows its pull's piece looked up (they were
    # joined into one array, looked up again: 10^6 keys pushed to a remote shard took
    # 21-63 ms instead of 7-10)
    pool = np.random.default_rng(7).integers(-2**62, 2**62, 36_000)
    with dask_ps.PSModel(client2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        model.push("h", pool, np.zeros(pool.shape[0]))  # rows made: none renumbered later
        before = model.stats()
        [want] = model.run(one_task_pieces, [(pool, 4, 12_000)], consistency="bsp",
                           workers=[model.shards[0].address])
        after = model.stats()
        _assert_sums(model, want)
    pushed = after[1]["keys_pushed"] - before[1]["keys_pushed"]
    assert pushed > 4 * 4 * 1024  # every clock's pull went in pieces of over RECALL_MIN keys
    probed, recalled = (after[1]["tables"]["h"][k] - before[1]["tables"]["h"][k]
                        for k in ("keys_probed", "keys_recalled"))
    assert recalled == pushed and probed == pushed  # each key pulled once, pushed once


def spread_task(ps, item):
    """Pulls of distinct keys in the caller's random order (their dedup waits: every place
    is sent), in pieces to the remote shard (``PIECE_KEYS`` made small in this process), of
    a vector and a matrix table. Returns, per pull, the values and how many places went
    into the caller's order as they arrived (:class:`~dask_ps.state.process_job._Spread`).
    Under SSP the second pull of each table finds part of its keys in the process's
    snapshot, so its places do not all come from the shards."""
    from dask_ps.state import process_job, wire_forms

    pool = item
    old_keys, old_put = wire_forms.PIECE_KEYS, process_job._Spread.put
    spread = []

    def put(self, where, values):
        spread[-1] += where.stop - where.start
        return old_put(self, where, values)

    wire_forms.PIECE_KEYS = 2200
    process_job._Spread.put = put
    try:
        ps.push("h", pool, (pool % 1000).astype(np.float64))
        ps.push("m", pool, np.repeat((pool % 997)[:, None], 3, axis=1).astype(np.float32))
        ps.clock()
        ps._client.wait(ps.job)
        ps.clock()
        rng = np.random.default_rng(5)
        first = rng.permutation(pool)[:12_000]
        second = np.concatenate([first[:3000], rng.permutation(pool)[:9000]])
        second = np.unique(second)[rng.permutation(np.unique(second).shape[0])]
        out = []
        for keys in (first, second):
            for name in ("h", "m"):
                spread.append(0)
                out.append((name, keys, ps.pull(name, keys), spread[-1]))
        return out
    finally:
        wire_forms.PIECE_KEYS, process_job._Spread.put = old_keys, old_put


@pytest.mark.parametrize("consistency, staleness", [("bsp", None), ("ssp", 2)])
def test_pulls_in_pieces_put_values_in_order_as_they_arrive(client2, consistency, staleness):
    pool = np.unique(np.random.default_rng(9).integers(-2**62, 2**62, 30_000))
    with dask_ps.PSModel(client2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        model.add_table("m", shape=(None, 3), partitioner="hash", dtype="float32",
                        optimizer="add")
        [out] = model.run(spread_task, [pool], consistency=consistency, staleness=staleness,
                          workers=[model.shards[0].address])
    for i, (name, keys, got, spread) in enumerate(out):
        want = (keys % 1000).astype(np.float64) if name == "h" else \
            np.repeat((keys % 997)[:, None], 3, axis=1).astype(np.float32)
        np.testing.assert_array_equal(got, want)
        if i < 2 or staleness is None:  # every place from the shards: all spread
            assert spread == keys.shape[0]
        else:  # part served by the snapshot: expanded after the last answer instead
            assert spread == 0


def meanwhile_task(ps, item):
    """A pull in pieces from the remote shard whose own work (the check for repeats, in a
    step per bucket here, and the keys' hash) is slowed to 100 ms a step: returns the values,
    the steps run, and how many steps had run when each answer was put in order."""
    import time

    from dask_ps.state import partition, process_job, wire_forms

    pool = item
    old = (wire_forms.PIECE_KEYS, partition.CHECK_BUCKETS, process_job._Spread.put,
           process_job._Meanwhile.__next__)
    steps, at_put = [0], []

    def step(self):
        out = old[3](self)  # raises StopIteration at the end, before any sleep
        steps[0] += 1
        time.sleep(0.1)
        return out

    def put(self, where, values):
        at_put.append(steps[0])
        return old[2](self, where, values)

    wire_forms.PIECE_KEYS, partition.CHECK_BUCKETS = 2200, 1
    process_job._Spread.put, process_job._Meanwhile.__next__ = put, step
    try:
        ps.push("h", pool, (pool % 1000).astype(np.float64))
        ps.clock()
        ps._client.wait(ps.job)
        ps.clock()
        keys = np.random.default_rng(3).permutation(pool)[:12_000]
        return keys, ps.pull("h", keys), steps[0], at_put
    finally:
        (wire_forms.PIECE_KEYS, partition.CHECK_BUCKETS, process_job._Spread.put,
         process_job._Meanwhile.__next__) = old


def async_reuse_task(ps, item):
    """A pull_async, then a push of the same keys once its future is done: returns the
    values pulled and the plans the push made (0: it reused the pull's, as after a pull)."""
    from dask_ps.state import partition

    pool = item
    old, plans = partition.plan_hashed, []

    def spy(keys, *args, **kwargs):
        plans.append(keys.shape[0])
        return old(keys, *args, **kwargs)

    partition.plan_hashed = spy
    try:
        keys = np.random.default_rng(6).permutation(pool)[:5000]
        got = ps.pull_async("h", keys).result()
        before = len(plans)
        ps.push("h", keys, np.ones(keys.shape[0]))
        ps.clock()
        return keys, got, len(plans) - before
    finally:
        partition.plan_hashed = old


def test_a_push_after_pull_async_reuses_its_plan(client2):
    """The plan of a pull fetched in the background (pull_async) is remembered for the
    thread that asked for it: the push of the same keys that follows reuses it, as after a
    pull, instead of planning the keys again."""
    pool = np.unique(np.random.default_rng(5).integers(-2**62, 2**62, 8000))
    with dask_ps.PSModel(client2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        model.push("h", pool, (pool % 1000).astype(np.float64))
        [(keys, got, plans)] = model.run(async_reuse_task, [pool],
                                         workers=[model.shards[0].address])
        np.testing.assert_array_equal(got, (keys % 1000).astype(np.float64))
        np.testing.assert_array_equal(model.pull("h", keys), (keys % 1000) + 1.0)
    assert plans == 0


def test_a_pull_reads_the_shards_answers_between_the_steps_of_its_own_work(client2):
    """The pull's own work (its plan's dedup check, the keys' hash) is done in steps while
    no answer waits to be read, not all before the first is read: a shard whose answers
    filled the connection's buffers stopped until the caller was done."""
    pool = np.unique(np.random.default_rng(4).integers(-2**62, 2**62, 30_000))
    with dask_ps.PSModel(client2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        [(keys, got, n_steps, at_put)] = model.run(
            meanwhile_task, [pool], workers=[model.shards[0].address])
    np.testing.assert_array_equal(got, (keys % 1000).astype(np.float64))
    assert n_steps >= 3 and len(at_put) >= 2  # several steps, several pieces
    assert min(at_put) < n_steps  # an answer was put before the last step, not after all


def failing_step_task(ps, item):
    """A pull whose own work fails in a step (the keys' hash, made to raise once), then the
    same pull again: the first raises that error, the second is served."""
    from dask_ps.state import process_job, wire_forms

    pool = item
    old = (wire_forms.PIECE_KEYS, process_job.fingerprint)

    def broken(keys):
        process_job.fingerprint = old[1]
        raise ZeroDivisionError("a step failed")

    wire_forms.PIECE_KEYS, process_job.fingerprint = 2200, broken
    try:
        keys = np.random.default_rng(2).permutation(pool)[:12_000]
        try:
            ps.pull("h", keys)
            first = None
        except ZeroDivisionError as exc:
            first = str(exc)
        return keys, first, ps.pull("h", keys)
    finally:
        wire_forms.PIECE_KEYS, process_job.fingerprint = old


def test_a_pulls_failing_step_is_raised_after_the_answers_and_the_next_pull_is_served(client2):
    pool = np.unique(np.random.default_rng(4).integers(-2**62, 2**62, 30_000))
    with dask_ps.PSModel(client2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        model.push("h", pool, (pool % 1000).astype(np.float64))
        [(keys, first, again)] = model.run(failing_step_task, [pool],
                                           workers=[model.shards[0].address])
    assert first == "a step failed"
    np.testing.assert_array_equal(again, (keys % 1000).astype(np.float64))


def asp_push_pieces_task(ps, item):
    """ASP pull-compute-push steps of distinct keys, each clock's push sent on its own
    (``wait``) to the remote shard in pieces named after the pull's pieces (``PIECE_KEYS``
    made small in this process); each pull is checked against the pushes before it."""
    from dask_ps.state import _outbox, wire_forms

    pool, n_clocks, n = item
    old, delay = wire_forms.PIECE_KEYS, _outbox.SEND_DELAY
    wire_forms.PIECE_KEYS = 2200  # pieces of ~2000 keys, over RECALL_MIN: named
    # every push leaves with the ``wait`` after its clock, never with the outbox poll (in
    # one call, not in pieces), which a loaded machine could let step in first
    _outbox.SEND_DELAY = 60.0
    want: dict = {}
    try:
        for c in range(n_clocks):
            keys = np.random.default_rng(c).choice(pool, n, replace=False)
            got = ps.pull("h", keys)
            np.testing.assert_array_equal(got, [want.get(int(k), 0.0) for k in keys])
            ps.push("h", keys, np.full(n, c + 1.0))
            for k in keys:
                want[int(k)] = want.get(int(k), 0.0) + c + 1.0
            ps.clock()
            ps._client.wait(ps.job)  # the push leaves on its own, in pieces
        return want
    finally:
        wire_forms.PIECE_KEYS, _outbox.SEND_DELAY = old, delay


def _named_bytes(n):
    from dask_ps.state import table

    old, table.NAMED_BYTES = table.NAMED_BYTES, n
    return old


@contextlib.contextmanager
def _forgetful(client, model, forget: bool = True):
    """Table "h" (hashed, float64, "add") on ``model``; with ``forget``, its shard 1 keeps
    the keys of 2 pull pieces of ~2000 keys only (a push naming older ones is sent again
    with its keys). Yields a pool of 40,000 distinct keys."""
    model.add_table("h", shape=(None,), partitioner="hash", dtype="float64", optimizer="add")
    remote = model.shards[1].address
    old = client.run(_named_bytes, 40_000, workers=[remote])[remote] if forget else None
    try:
        yield np.unique(np.random.default_rng(8).integers(-2**62, 2**62, 40_000))
    finally:
        if forget:
            client.run(_named_bytes, old, workers=[remote])


@pytest.mark.parametrize("forget", [False, True])
def test_asp_pushes_go_in_pieces_and_apply_once(client2, forget):
    # under ASP a clock's push named after a pull's pieces goes to the remote shard one
    # piece per call, the tick with the last; with forget, the remote shard keeps the keys
    # of 2 pieces only: the first piece of each push is sent again with its keys, after the
    # others were applied, and they must not be applied twice
    with dask_ps.PSModel(client2) as model, _forgetful(client2, model, forget) as pool:
        before = model.stats()
        [want] = model.run(asp_push_pieces_task, [(pool, 4, 12_000)], consistency="asp",
                           workers=[model.shards[0].address])
        after = model.stats()
        _assert_sums(model, want)
    # 4 clocks, each push in 3 pieces of ~2000 keys named (8 bytes a key: the values), or
    # with forget, the first piece of each sent again with its keys (16 bytes a key)
    pushes, keys, sent = (after[1][k] - before[1][k]
                          for k in ("push_calls", "keys_pushed", "bytes_pushed"))
    assert pushes == 3 * 4
    assert (sent - 8 * keys > 8 * 4 * 1500) == forget


def carried_push_task(ps, item):
    """Pull-compute-push steps of distinct keys in random order, whose pulls go to the remote
    shard in pieces put in order as they arrive, each clock's push carried by the next pull
    (no ``wait``): a push the shard cannot resolve is sent again with its keys, and the
    pieces pulled behind it again. Returns the sums pushed and, per clock, how many pulled
    values were wrong: not the sums of the clocks before (BSP), nor, under ASP, those
    without the last clock's push (it may have left on its own and not arrived yet)."""
    from dask_ps.state import wire_forms

    pool, n_clocks, n, stale_ok = item
    old = wire_forms.PIECE_KEYS
    wire_forms.PIECE_KEYS = 2200
    want: dict = {}
    last = (np.zeros(0, np.int64), 0.0)  # the last clock's keys and pushed value
    wrong = []
    try:
        for c in range(n_clocks):
            keys = np.random.default_rng(c).choice(pool, n, replace=False)
            got = ps.pull("h", keys)
            now = np.array([want.get(int(k), 0.0) for k in keys])
            bad = got != now
            if stale_ok:  # without the last push
                bad &= got != now - np.isin(keys, last[0]) * last[1]
            wrong.append(int(bad.sum()))
            ps.push("h", keys, np.full(n, c + 1.0))
            for k in keys:
                want[int(k)] = want.get(int(k), 0.0) + c + 1.0
            last = (keys, c + 1.0)
            ps.clock()
        ps._client.wait(ps.job)
        return want, wrong
    finally:
        wire_forms.PIECE_KEYS = old


@pytest.mark.parametrize("consistency", ["bsp", "asp"])
def test_pulls_behind_a_push_sent_again_put_their_values_once(client2, consistency):
    # the remote shard keeps the keys of 2 pieces only: the push riding with each pull's
    # first piece names keys it forgot, is sent again with them, and so are the pieces
    # pulled behind it; their first answers must not be put in order (each pull returned
    # uninitialised memory, found by a break test). Under ASP the push may also leave on
    # its own (after SEND_DELAY) and reach the shard after the next pull: a value without
    # it is right then, garbage never
    with dask_ps.PSModel(client2) as model, _forgetful(client2, model) as pool:
        [(want, wrong)] = model.run(carried_push_task,
                                    [(pool, 4, 12_000, consistency == "asp")],
                                    consistency=consistency,
                                    workers=[model.shards[0].address])
        _assert_sums(model, want)
    assert wrong == [0] * 4


def test_spread_counts_a_slice_put_again_once_and_refuses_missing_values():
    from dask_ps.state.partition import HashPartitioner
    from dask_ps.state.process_job import _Spread

    keys = np.random.default_rng(2).permutation(np.arange(10_000, dtype=np.int64) * 7919)
    plan = HashPartitioner(2).plan(keys, defer_inverse=True, defer_dedup=True)[0]
    assert plan.buckets.shape[0]  # every place sent: the spread's case
    values = plan.local.astype(np.float64)[:, None]  # a value per place: its key
    spread = _Spread(plan, 1, np.float64)
    spread.put(slice(0, 6000), values[:6000])
    spread.put(slice(0, 6000), values[:6000])  # again (a piece pulled again)
    with pytest.raises(RuntimeError, match="put 6000 of its 10000"):
        spread.result()
    spread.put(slice(6000, 10_000), values[6000:])
    np.testing.assert_array_equal(spread.result()[:, 0], keys)


def reordered_push_task(ps, item):
    """Pull-compute-push steps of distinct keys in random order (pulled in pieces put in
    order as they arrive), each key pushed a value of its own, to a vector and a matrix
    table; each clock's push waits (``wait``) or rides with the next pull. Returns the sums
    pushed per table and how many push pieces were put in order as they left
    (:class:`~dask_ps.state.wire_forms.Reordered`)."""
    from dask_ps.state import wire_forms

    pool, n_clocks, n, wait = item
    old_keys, old_array = wire_forms.PIECE_KEYS, wire_forms.Reordered.array
    reordered = [0]

    def array(self):
        reordered[0] += 1
        return old_array(self)

    wire_forms.PIECE_KEYS, wire_forms.Reordered.array = 2200, array
    want = {"h": {}, "m": {}}
    try:
        for c in range(n_clocks):
            keys = np.random.default_rng(c).choice(pool, n, replace=False)
            for name in ("h", "m"):
                ps.pull(name, keys)
                upd = (keys % 1009 + c).astype(np.float64)[:, None] * [1.0, 2.0, 3.0][
                    :1 if name == "h" else 3]
                ps.push(name, keys, upd[:, 0] if name == "h" else upd)
                for k, u in zip(keys.tolist(), upd[:, 0] if name == "h" else upd):
                    want[name][k] = want[name].get(k, 0.0) + u
            ps.clock()
            if wait:
                ps._client.wait(ps.job)
        ps._client.wait(ps.job)
        return want, reordered[0]
    finally:
        wire_forms.PIECE_KEYS, wire_forms.Reordered.array = old_keys, old_array


@pytest.mark.parametrize("consistency, staleness, wait", [
    ("bsp", None, False), ("ssp", 1, True), ("asp", None, True), ("asp", None, False)])
def test_pushes_in_a_pulls_pieces_put_each_value_under_its_key(client2, consistency,
                                                                staleness, wait):
    # a push named after its pull's pieces puts its values in the pieces' order as each
    # piece leaves: every key must get its own value, for vector and matrix tables, whether
    # the pieces go one call each (ASP) or in one call, sent on their own or with a pull
    with dask_ps.PSModel(client2) as model:
        model.add_table("h", shape=(None,), partitioner="hash", dtype="float64",
                        optimizer="add")
        model.add_table("m", shape=(None, 3), partitioner="hash", dtype="float32",
                        optimizer="add")
        pool = np.unique(np.random.default_rng(3).integers(-2**62, 2**62, 30_000))
        [(want, reordered)] = model.run(reordered_push_task, [(pool, 3, 12_000, wait)],
                                        consistency=consistency, staleness=staleness,
                                        workers=[model.shards[0].address])
        _assert_sums(model, want["h"])
        keys = np.array(list(want["m"]), np.int64)
        np.testing.assert_array_equal(model.pull("m", keys),
                                      np.array([want["m"][k] for k in keys.tolist()],
                                               np.float32))
    # ~6000 keys of each pull go to the remote shard, in 2-3 named pieces per table
    assert reordered >= 3 * 2 * 2
