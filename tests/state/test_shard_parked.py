"""A shard's parked pulls (answered by the thread that completes the clock, not the event
loop) and the sum of a BSP clock's pushes of equal keys (no merge, the same bits)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from dask_ps.state.consistency import BSP
from dask_ps.state.optimizers import Add
from dask_ps.state.partition import RangePartitioner
from dask_ps.state.shard import Shard
from dask_ps.state.table import Init, TableSpec

pytestmark = pytest.mark.timeout(60)

N_ROWS, N_COLS = 50, 3


@pytest.fixture
def loop():
    """An event loop in a thread of its own, as a worker's."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def _shard(loop, n_participants: int) -> Shard:
    shard = Shard(0, 1)
    spec = TableSpec("w", N_ROWS, N_COLS, False, np.dtype("float64"),
                     RangePartitioner(1, N_ROWS), Add(), Init())
    for coro in (shard.create_table(spec), shard.start_job("j", n_participants, BSP())):
        asyncio.run_coroutine_threadsafe(coro, loop).result(10)
    return shard


def _push(keys, values, participant: int, name=None):
    kw = dict(updates=[("w", keys, values)], job="j", participant=participant, push_clock=0)
    if name is not None:
        kw.update(name=name, keys=np.arange(N_ROWS), clock=1, timeout=30.0)
    return kw


def test_a_parked_pull_is_answered_by_the_thread_completing_the_clock(loop):
    shard = _shard(loop, 2)
    keys = np.arange(N_ROWS)
    a, b = np.full((N_ROWS, N_COLS), 1.5), np.full((N_ROWS, N_COLS), 2.0)
    got = []

    def park(ok, result):
        got.append((ok, result, threading.get_ident()))

    done, out = shard.call_now("push_pull", _push(keys, a, 0, "w"), park=park)
    assert (done, out) == (False, None) and not got  # participant 1 has not pushed
    done, out = shard.call_now("push_pull", _push(keys, b, 1, "w"), park=park)
    assert done  # its own pull is served at once
    np.testing.assert_array_equal(out[0], a + b)
    (ok, (values, tag), thread), = got  # the parked one: answered from this thread
    assert ok and tag == 1 and thread == threading.get_ident()
    np.testing.assert_array_equal(values, a + b)


def test_a_parked_pull_fails_when_its_job_ends(loop):
    shard = _shard(loop, 2)
    got = []
    shard.call_now("push_pull", _push(np.arange(3), np.ones((3, N_COLS)), 0, "w"),
                   park=lambda ok, result: got.append((ok, result)))
    asyncio.run_coroutine_threadsafe(shard.end_job("j"), loop).result(10)
    (ok, exc), = got
    assert not ok and isinstance(exc, RuntimeError) and "ended while a pull" in str(exc)


def test_equal_keys_sum_to_the_bits_of_the_merge(loop):
    # values spanning many orders of magnitude: their sums depend on the order of addition
    rng = np.random.default_rng(3)
    parts = [rng.normal(size=(N_ROWS, N_COLS)) * 10.0 ** rng.uniform(-8, 8, (N_ROWS, N_COLS))
             for _ in range(3)]
    keys = np.arange(N_ROWS)
    flipped = keys[::-1].copy()  # other keys order: the merge's path
    tables = []
    for order in (keys, flipped):
        shard = _shard(loop, 3)
        for p in (2, 0, 1):  # arrival order differs from participant order
            k = order if p == 1 else keys
            v = parts[p][::-1] if k is flipped else parts[p]
            shard.call_now("push_pull", _push(k, v, p))
        tables.append(shard.call_now("pull", dict(name="w", keys=keys, job="j", clock=1))[1][0])
    np.testing.assert_array_equal(tables[0], tables[1])
    want = np.zeros((N_ROWS, N_COLS))
    for v in parts:  # participant order
        want += v
    np.testing.assert_array_equal(tables[0], want)


def test_a_rule_that_takes_pushes_on_arrival_gets_each_before_its_clock_completes(loop):
    seen = []

    class Early(Add):
        exact_sums = True
        on_arrival = True

        def step(self, w, slots, rows, g):
            super().step(w, slots, rows, g)
            seen.append(w[: N_ROWS].sum())

    for rule, early in ((Early(), True), (Add(), False)):
        seen.clear()
        shard = Shard(0, 1)
        spec = TableSpec("w", N_ROWS, N_COLS, False, np.dtype("float64"),
                         RangePartitioner(1, N_ROWS), rule, Init())
        for coro in (shard.create_table(spec), shard.start_job("j", 2, BSP())):
            asyncio.run_coroutine_threadsafe(coro, loop).result(10)
        keys = np.arange(N_ROWS)
        shard.call_now("push_pull", _push(keys, np.ones((N_ROWS, N_COLS)), 0))
        pulled = shard.call_now("pull", dict(name="w", keys=keys, job=None))[1][0]
        # the rule ran on the first push at once; the plain rule holds it for the clock
        assert pulled.sum() == (N_ROWS * N_COLS if early else 0.0)
        shard.call_now("push_pull", _push(keys, np.ones((N_ROWS, N_COLS)), 1))
        got = shard.call_now("pull", dict(name="w", keys=keys, job="j", clock=1))[1][0]
        np.testing.assert_array_equal(got, np.full((N_ROWS, N_COLS), 2.0))
        assert seen == ([N_ROWS * N_COLS, 2 * N_ROWS * N_COLS] if early else [])
