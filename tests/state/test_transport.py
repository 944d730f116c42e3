"""How tasks reach the shards: same-worker shards directly, others through the worker's RPC.

The direct path reads ``Worker.state.actors`` (what distributed's own Actor proxy uses for
actor-to-actor calls on one worker); pyproject pins distributed to the versions this passes on.
"""

import numpy as np
import pytest
from conftest import NO_DASHBOARD

import dask_ps
from dask_ps.model import connection
from dask_ps.state.shard import Shard

pytestmark = pytest.mark.timeout(120)


def describe_transport(ps, item):
    transport = ps._client.transport
    ps.push("w", [item], [1.0])
    ps.clock()
    return (sorted(transport.local), all(isinstance(s, Shard) for s in transport.local.values()),
            ps.pull("w", [0, 1, 2, 3]).tolist())


def test_same_worker_shards_are_called_directly(client2):
    with dask_ps.PSModel(client2) as model:
        model.add_table("w", shape=(4,))
        addrs = [s.address for s in model.shards]
        out = model.run(describe_transport, [0, 1], workers=addrs)
        # each task holds exactly its own worker's shard directly, the other through RPC
        assert [o[0] for o in out] == [[0], [1]]
        assert all(o[1] for o in out)
        # BSP: each pull at clock 1 sees both pushes of clock 0, whichever path served it
        assert [o[2] for o in out] == [[1.0, 1.0, 0.0, 0.0]] * 2


def test_client_side_calls_go_through_rpc(client2):
    with dask_ps.PSModel(client2) as model:
        model.add_table("w", shape=(4,))
        assert connection.process_client(model).transport.local == {}
        model.push("w", [3], [2.0])
        assert model.pull("w", [3]).tolist() == [2.0]


def test_in_process_shards_are_local_objects():
    with dask_ps.PSModel("local", n_shards=3) as model:
        transport = connection.process_client(model).transport
        assert sorted(transport.local) == [0, 1, 2]
        model.add_table("w", shape=(5,))
        model.push("w", np.arange(5), np.ones(5))
        assert model.pull("w").sum() == 5


def _mmap_threshold_effect(ps, item):
    """Page faults of three fresh 800 kB arrays after a first one: ~200 each when every
    large allocation is a new mmap (Dask's worker default), none when the heap is reused."""
    import resource

    from dask_ps.state._malloc import tune_malloc

    faults = []
    for _ in range(3):  # the best of three: a thread's first rounds may set up its arena
        np.ones(100_000)  # the heap has the room afterwards
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(3):
            np.ones(100_000)
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    return tune_malloc(), min(faults)


def test_worker_processes_keep_large_temporaries_on_the_heap(client2):
    from dask_ps.state._malloc import tune_malloc

    assert not tune_malloc()  # not in a worker: the user's process is left alone
    with dask_ps.PSModel(client2) as model:
        model.add_table("w", shape=(4,))
        out = model.run(_mmap_threshold_effect, [0, 1])
    assert [o[0] for o in out] == [True, True]
    assert max(o[1] for o in out) < 50, out


def test_a_cluster_of_threads_uses_dask_in_process_comms():
    """Workers as threads of this process (``processes=False``): Dask's ``inproc://`` comms
    hand the shard's packed answer over unserialised; pulls, pushes and errors still work."""
    from distributed import Client, LocalCluster
    from test_model import count_task, expected_counts

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      **NO_DASHBOARD) as cluster, Client(cluster) as client, \
            dask_ps.PSModel(client) as model:
        assert all(s.address.startswith("inproc://") for s in model.shards)
        model.add_table("counts", shape=(500,), dtype="int64")
        assert model.run(count_task, range(4), consistency="bsp") == [0, 1, 2, 3]
        np.testing.assert_array_equal(model.pull("counts"), expected_counts(range(4)))
        with pytest.raises(IndexError, match="key 500 at position 1"):
            model.pull("counts", [3, 500])
        with pytest.raises(dask_ps.exceptions.UnknownTableError):
            model.run(lambda ps, _: ps.pull("nope", [0]), range(2))
        with pytest.raises(ZeroDivisionError):  # raised on the shards, by Dask's RPC
            model.map_shards("counts", lambda keys, values, slots: 1 // 0)
        assert sum(model.map_shards("counts", lambda keys, values, slots: len(keys))) == 500


def _carried_then_left_alone(ps, item):
    """Clocks carried by pulls, then one whose push no pull takes."""
    import time

    from dask_ps.state._outbox import PULLS_CARRY

    state = ps._client.job(ps.job)
    cycles = 0
    # (on a loaded machine the poll may send one first: the count then starts over)
    while state.carried < PULLS_CARRY and cycles < 1000:
        ps.push("w", [0], [1.0])
        ps.clock()
        ps.pull("w", [0])
        cycles += 1
    carried = state.carried
    ps.push("w", [1], [1.0])
    ps.clock()
    t0 = time.monotonic()
    while state.outbox is not None and time.monotonic() - t0 < 10:
        time.sleep(0.001)
    return cycles, carried, state.outbox is None, state.carried


def test_pulls_that_carry_the_clocks_slow_the_outbox_check_down_but_a_push_still_leaves():
    from dask_ps.state._outbox import PULLS_CARRY

    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("w", shape=(4,))
        (cycles, carried, sent, after), = model.run(_carried_then_left_alone, [0])
        # the pulls carried every clock: the loop then checks every IDLE_POLL seconds, not
        # every SEND_DELAY; the push left alone is still sent (and the count starts over)
        assert carried >= PULLS_CARRY
        assert sent and after == 0
        assert model.pull("w", [0, 1]).tolist() == [float(cycles), 1.0]
def _poll_runs_only_while_a_clock_waits(ps, item):
    """A clock left alone (no pull, no wait) before and after clocks the task sent itself;
    how often the outbox poll ran in between."""
    import time

    pc = ps._client
    state = pc.job(ps.job)
    polls = []
    poll = pc._poll
    pc._poll = lambda *a: polls.append(1) or poll(*a)  # counts the rounds scheduled from now

    def left_alone(key):
        ps.push("w", [key], [1.0])
        ps.clock()
        t0 = time.monotonic()
        while state.outbox is not None and time.monotonic() - t0 < 10:
            time.sleep(0.001)
        return state.outbox is None

    def settled():  # rounds of the poll in 0.2 s (every SEND_DELAY = 2 ms if it ran)
        t0 = time.monotonic()  # a round still due (late on a loaded machine) goes first
        while state.polling and time.monotonic() - t0 < 5:
            time.sleep(0.005)
        n = len(polls)
        time.sleep(0.2)
        return len(polls) - n

    out = dict(polling_at_start=settled(), first_sent=left_alone(1),
               polling_after_send=settled())
    for _ in range(3):  # clocks the task sends itself, by waiting for them
        ps.push("w", [0], [1.0])
        ps.clock()
        ps._client.wait(ps.job)
    out["polling_after_waits"] = settled()
    out["second_sent"] = left_alone(2)
    return out


def test_the_outbox_poll_runs_only_while_a_clock_waits_and_still_sends_a_push_left_alone():
    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("w", shape=(4,))
        [out] = model.run(_poll_runs_only_while_a_clock_waits, [0])
        assert out == dict(polling_at_start=0, first_sent=True, polling_after_send=0,
                           polling_after_waits=0, second_sent=True), out
        assert model.pull("w").tolist() == [3.0, 1.0, 1.0, 0.0]


def _push_pull_refused(ps, item):
    """The short way of push_pull (alone under BSP) whose pull is refused after its clock
    was queued: the clock must still leave."""
    import time

    state = ps._client.job(ps.job)
    try:
        ps.push_pull("w", [0], [1.0], [99])
    except IndexError:
        pass
    t0 = time.monotonic()
    while state.outbox is not None and time.monotonic() - t0 < 10:
        time.sleep(0.001)
    return state.outbox is None


def test_a_clock_whose_push_pull_was_refused_still_leaves():
    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("w", shape=(4,))
        assert model.run(_push_pull_refused, [0], consistency="bsp") == [True]
        assert model.pull("w").tolist() == [1.0, 0.0, 0.0, 0.0]


