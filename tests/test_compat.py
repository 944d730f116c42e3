"""Every private API of ``distributed`` (and scikit-learn) that dask_ps uses, pinned against the
installed version: a Dask upgrade that changes one fails here, naming it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import NO_DASHBOARD

from dask_ps import _compat

pytestmark = pytest.mark.timeout(120)


class _Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


def _worker_side(key):
    worker = _compat.current_worker()
    actors = _compat.worker_actors(worker)
    loop = _compat.worker_loop(worker)
    store = _compat.worker_store(worker)
    return (key in actors, isinstance(loop, asyncio.AbstractEventLoop),
            isinstance(_compat.memory_limit(worker), int), hasattr(store, "__getitem__"),
            hasattr(_compat.in_memory(worker), "__contains__"),
            isinstance(_compat.spilled_bytes(worker), dict),
            all(f is False or 0 < f <= 1 for f in _compat.memory_fractions(worker)),
            isinstance(_compat.managed_in_memory(worker), int),
            _compat.set_spill_offset(worker, 0) and worker.data.offset == 0,
            store.evict.dask_ps_tolerant)


def test_worker_internals(client2):
    from dask_ps.cluster import worker_info

    a, b = sorted(worker_info(client2))
    fut = client2.submit(_Counter, actor=True, workers=[a])
    actor = fut.result()
    assert _compat.actor_address(actor) == a
    assert all(client2.submit(_worker_side, fut.key, workers=[a], pure=False).result())
    assert _compat.current_worker() is None  # not in a worker here


def test_scheduler_workers_and_actor_execute(client2):
    info = _compat.scheduler_workers(client2)
    assert len(info) == 2 and all(w["nthreads"] == 1 for w in info.values())
    a = sorted(info)[0]
    fut = client2.submit(_Counter, actor=True, workers=[a])
    fut.result()

    async def call():
        return await _compat.actor_execute(client2.rpc, a, fut.key, "add", [5])

    resp = client2.sync(call)
    assert resp["status"] == "OK" and resp["result"] == 5
    assert callable(_compat.ProxyRPC())


def test_transfer_counters_and_desired_keys(client2):
    from distributed import Future, get_worker

    a, b = sorted(_compat.scheduler_workers(client2))
    x = client2.submit(np.ones, 100_000, workers=[a], pure=False)
    before = client2.run(lambda dask_worker: _compat.transfer_counters(dask_worker))[b]
    y = client2.submit(lambda v: float(v.sum()), x, workers=[b], pure=False)
    assert y.result() == 100_000
    after = client2.run(lambda dask_worker: _compat.transfer_counters(dask_worker))[b]
    assert after[0] == before[0] + 1 and after[1] - before[1] >= 800_000

    def fetch(key):
        from distributed import get_client

        client = get_client()
        _compat.desire_keys(client, [key])
        return float(Future(key, client).result().sum()), get_worker().address

    assert client2.submit(fetch, x.key, workers=[b], pure=False).result() == (100_000, b)


def test_lift_restrictions(client2):
    a, _ = sorted(client2.nthreads())
    f = client2.submit(np.ones, 3, workers=[a], allow_other_workers=False, pure=False)
    f.result()

    def restrictions(key, dask_scheduler):
        return dask_scheduler.tasks[key].worker_restrictions

    assert client2.run_on_scheduler(restrictions, f.key) == {a}
    _compat.lift_restrictions(client2, [f.key])
    assert client2.run_on_scheduler(restrictions, f.key) is None


def test_failed_task_log_of_a_worker(client2):
    """The worker's "Compute Failed" record gives the exception and the traceback that the
    command line's filter of bad-input failures reads; other records give None."""
    import logging

    def install():
        class Keep(logging.Handler):
            found: list = []

            def emit(self, record):
                self.found.append(_compat.failed_task_log(record))

        logging.getLogger("distributed.worker").addHandler(Keep())

    def collect():
        logger = logging.getLogger("distributed.worker")
        kept = [h for h in logger.handlers if hasattr(h, "found")]
        for h in kept:
            logger.removeHandler(h)
        return [f for h in kept for f in h.found]

    def fail():
        raise KeyError("boom")

    client2.run(install)
    with pytest.raises(KeyError):
        client2.submit(fail, pure=False).result()
    found = [f for fs in client2.run(collect).values() for f in fs if f is not None]
    assert len(found) == 1 and found[0][0] == "KeyError('boom')"
    assert found[0][1].startswith('  File "') and found[0][1].endswith("in fail\n")


def test_scikit_learn_parameter_validation():
    from sklearn.base import BaseEstimator

    pv = _compat.sklearn_param_validation()
    assert {"Interval", "StrOptions", "InvalidParameterError"} <= set(dir(pv))
    assert issubclass(pv.InvalidParameterError, ValueError)
    assert hasattr(BaseEstimator, "_validate_params")


def test_machine_memory():
    import psutil

    assert 2**28 <= _compat.machine_memory() <= psutil.virtual_memory().total


def test_executing_keys(client2):
    """The key of the task that asks is among its worker's executing keys."""
    def mine():
        from distributed import get_worker

        worker = get_worker()
        return worker.get_current_task() in _compat.executing_keys(worker)

    assert client2.submit(mine, pure=False).result(timeout=60)


def test_the_memory_monitors_evict_tolerates_an_emptied_store(tmp_path):
    """distributed's ``SpillBuffer.evict`` lets zict's KeyError through when its memory store
    is empty (a task's thread may empty it between the memory monitor's check and its
    eviction); :func:`_compat.worker_store` makes it return -1 instead, taking the store's
    lock. Fails here once distributed catches it itself: the workaround may then go."""
    from distributed.spill import SpillBuffer

    data = SpillBuffer(str(tmp_path), target=10**6)
    with pytest.raises(KeyError, match="dictionary is empty"):
        data.evict()
    _compat._tolerate_thread_evictions(data)
    assert data.evict() == -1
    data["x"] = np.arange(10)
    assert data.evict() > 0 and list(data.slow) == ["x"] and not data.fast
    assert data.evict() == -1 and data["x"].sum() == 45


class _SlowToPickle:
    """Pickled (spilled) once ``release`` is set, after setting ``started``: an eviction
    kept in flight."""

    def __init__(self, started, release):
        self.started, self.release = started, release

    def __reduce__(self):
        self.started.set()
        self.release.wait(60)
        return int, (7,)


def test_an_eviction_in_flight_makes_the_others_wait_or_give_up(tmp_path):
    """zict's ``LRU.evict`` picks the oldest key and returns at once, "cancelled", while that
    key's eviction is in flight in another thread: the memory monitor and zict's
    ``evict_until_below_target`` call it again and again (a busy loop) until it ends. Through
    :func:`_compat.worker_store`, the monitor's ``evict()`` (on an event loop) returns -1 at
    once instead, and another thread waits for the eviction in flight. Fails here once zict
    no longer returns at once: the wait may then go."""
    import threading

    from distributed.spill import SpillBuffer

    def in_thread(evict):
        out = []
        thread = threading.Thread(target=lambda: out.append(evict()), daemon=True)
        thread.start()
        return thread, out

    async def on_event_loop(evict):
        return evict()

    data = SpillBuffer(str(tmp_path), target=10**9)
    for wrapped in (False, True):
        started, release = threading.Event(), threading.Event()
        data["a"], data["b"] = _SlowToPickle(started, release), np.arange(10)
        spilling, _ = in_thread(data.fast.evict)
        assert started.wait(60)
        if not wrapped:  # zict: at once, cancelled, for as long as the eviction lasts
            assert [data.fast.evict() for _ in range(3)] == [(None, None, 0)] * 3
        else:
            assert asyncio.run(on_event_loop(data.evict)) == -1
            waiting, waited = in_thread(data.fast.evict)
            waiting.join(0.5)
            assert waiting.is_alive() and not waited and "a" in data.fast
        release.set()
        spilling.join()
        assert list(data.slow) == ["a"] and list(data.fast) == ["b"]
        if wrapped:
            waiting.join()
            assert waited == [(None, None, 0)]
        del data["a"], data["b"]
        _compat._tolerate_thread_evictions(data)


def test_stop_heartbeats_stops_the_workers_heartbeat_callback():
    """``stop_heartbeats`` (before ``close_workers`` asks the workers to close) relies on
    ``Worker.periodic_callbacks["heartbeat"]`` and the coroutine ``Worker.heartbeat``."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      **NO_DASHBOARD) as cluster, Client(cluster) as client:
        [worker] = cluster.workers.values()
        assert worker.periodic_callbacks["heartbeat"].is_running()
        client.run(_compat.stop_heartbeats)
        assert not worker.periodic_callbacks["heartbeat"].is_running()
        assert client.submit(sum, [1, 2]).result() == 3  # the worker still serves


def _exit_process():
    import os

    os._exit(1)


@pytest.mark.slow
@pytest.mark.parametrize("keeping", [False, True])
def test_a_local_cluster_keeping_nannies_gets_its_lost_worker_back(keeping):
    """``SpecCluster`` closes a lost worker's nanny for good when ``lost-worker-timeout``
    passes before the nanny's restart registers (here 50 ms: a worker process takes far
    longer to start). ``local_cluster_keeping_nannies`` leaves the worker to its nanny. If
    distributed stops closing the nanny (``keeping=False`` failing here), the class can go."""
    import time

    import dask
    from conftest import RESTART_WAIT
    from distributed import Client, LocalCluster

    cls = _compat.local_cluster_keeping_nannies() if keeping else LocalCluster
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "50ms"}), \
            cls(n_workers=2, threads_per_worker=1, **NO_DASHBOARD) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2, timeout=RESTART_WAIT)
        first = {a for a, w in client.scheduler_info()["workers"].items() if w["name"] == 1}
        client.submit(_exit_process, workers=list(first), pure=False)
        deadline = time.monotonic() + RESTART_WAIT

        def named_1():
            return {a for a, w in client.scheduler_info()["workers"].items() if w["name"] == 1}

        if keeping:  # a worker 1 at another address: the nanny's restart
            while (named_1() in (set(), first) and 1 in cluster.workers
                   and time.monotonic() < deadline):  # (the restart: ~10 timeouts at least)
                time.sleep(0.05)
            assert named_1() not in (set(), first) and sorted(cluster.workers) == [0, 1]
            assert all(n.status.name == "running" for n in cluster.workers.values())
        else:  # the nanny of worker 1 closed: the cluster is down to worker 0
            while sorted(cluster.workers) != [0] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sorted(cluster.workers) == [0]
