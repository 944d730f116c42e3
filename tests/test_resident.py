"""Objects resident next to the data (Residents): one per worker holding partitions, built
there from its Partition handles, called directly with per-worker arguments."""

import numpy as np
import pytest
from conftest import NO_DASHBOARD

from dask_ps.partitions import partition
from dask_ps.partitions.resident import Residents

pytestmark = pytest.mark.timeout(180)


class _Rows:
    """Sums its tasks' rows, after adding what the driver sends to what it holds."""

    def __init__(self, tasks, offset):
        self.tasks, self.offset, self.held = tasks, offset, 0.0

    def where(self):
        from distributed import get_worker

        try:
            return get_worker().address
        except ValueError:
            return "local"

    def add(self, x):
        self.held += x
        return [self.held + self.offset + sum(float(p.load().sum()) for p in parts)
                for parts in self.tasks]

    def fail(self, x):
        raise ValueError(f"bad {x}")

    def sleep(self, seconds):
        import time

        time.sleep(seconds)


@pytest.mark.parametrize("where", ["local", "client2"])
def test_each_worker_holding_partitions_gets_one_object_built_from_its_handles(where, request):
    client = where if where == "local" else request.getfixturevalue(where)
    X = np.arange(60.0).reshape(30, 2)
    with partition(X, client=client, n_partitions=6) as data, \
            Residents(data, _Rows, 1000.0) as res:
        n = len(res.workers)
        assert n == (1 if where == "local" else 2)
        assert sorted(res.workers) == sorted(set(data.workers))
        if where != "local":  # each object lives on its worker
            assert res.call("where", [()] * n) == res.workers
        # per-worker arguments, results in worker order; state kept between calls
        res.call("add", [(float(i),) for i in range(n)])
        out = res.call("add", [(float(i),) for i in range(n)])
        for i, (sums, tasks) in enumerate(zip(out, res.tasks)):
            for s, idx in zip(sums, tasks):
                rows = sum(X[j * 5:(j + 1) * 5].sum() for j in idx)
                assert s == pytest.approx(2.0 * i + 1000.0 + rows)
        assert sum(len(i) for ts in res.tasks for i in ts) == 6
        with pytest.raises(ValueError, match="bad 7"):
            res.call("fail", [(7,)] * n)
        with pytest.raises(ValueError, match="argument tuples"):
            res.call("add", [(1.0,)] * (n + 1))
        with pytest.raises(AttributeError, match="private"):
            res.call("_secret", [()] * n)
        # the objects answer again after errors, with the state they had
        out = res.call("add", [(0.0,)] * n)
        assert out[0][0] == pytest.approx(1000.0 + sum(
            X[j * 5:(j + 1) * 5].sum() for j in res.tasks[0][0]))


@pytest.mark.parametrize("channel", [True, False])
def test_calls_take_the_direct_channel_where_the_comms_allow_it(channel, client2):
    """On tcp:// workers each call is one request on an authenticated channel (no actor
    RPC); with ``dask-ps.channel`` false the same calls go through the Dask actors."""
    import dask

    X = np.arange(40.0).reshape(20, 2)
    with dask.config.set({"dask-ps.channel": channel}), \
            partition(X, client=client2, n_partitions=4) as data, \
            Residents(data, _Rows, 0.0) as res:
        assert (res._channels is not None) == channel
        n = len(res.workers)
        assert res.call("where", [()] * n) == res.workers
        first = res.call("add", [(1.0,)] * n)
        again = res.call("add", [(1.0,)] * n)
        for a, b in zip(first, again):
            assert np.allclose(np.subtract(b, a), 1.0)
        with pytest.raises(ValueError, match="bad 3"):
            res.call("fail", [(3,)] * n)


@pytest.mark.parametrize("channel", [True, False])
def test_a_worker_dying_during_a_call_raises_worker_lost_without_a_hang(channel):
    """A call waiting on an object whose worker dies ends with WorkerLostError within
    seconds, by either path (the channel's connection breaks; the actor's future fails)."""
    import os
    import threading
    import time

    import dask
    from distributed import Client, LocalCluster

    from dask_ps.exceptions import WorkerLostError

    X = np.arange(40.0).reshape(20, 2)
    with dask.config.set({"dask-ps.channel": channel}), \
            LocalCluster(n_workers=2, threads_per_worker=1, **NO_DASHBOARD,
                         worker_dashboard_address=None) as cluster, Client(cluster) as client, \
            partition(X, client=client, n_partitions=4) as data, \
            Residents(data, _Rows, 0.0) as res:
        n = len(res.workers)
        victim = res.workers[-1]  # the last one waited for: its death must be seen anyway

        def kill():
            try:
                client.run(os._exit, 1, workers=[victim])
            except Exception:  # the worker's connection closes as it dies
                pass

        killer = threading.Timer(1.0, kill)
        killer.start()
        t0 = time.monotonic()
        with pytest.raises(WorkerLostError):
            res.call("sleep", [(150.0,)] * n)
        elapsed = time.monotonic() - t0
        killer.join()
        # seen in ~2-6 s when quiet; under any load, well before the 150 s of the other call
        assert elapsed < 100
