"""Bad input gets a clear error naming what is wrong; failures never hang or leave half-work."""

import re
import threading
import time

import numpy as np
import pytest
from conftest import NO_DASHBOARD

import dask_ps

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def model():
    with dask_ps.PSModel("local", n_shards=2, timeout=20) as m:
        m.add_table("w", shape=(10,))
        m.add_table("i", shape=(10,), dtype="int32")
        yield m


@pytest.mark.parametrize("updates, err, match", [
    ([np.nan], ValueError, r"table 'w': update for key 4 \(position 0\) is not finite"),
    ([np.inf], ValueError, "not finite"),
    ([1e300], ValueError, r"update for key 4 \(position 0\) overflows float32: \[1e\+300\]"),
    ([None], TypeError, "real numbers"),
    ([1 + 2j], TypeError, "real numbers"),
])
def test_bad_update_values(model, updates, err, match):
    with pytest.raises(err, match=match):
        model.push("w", [4], updates)
    assert model.pull("w", [4]).tolist() == [0.0]  # nothing was applied


def test_integer_overflow_is_refused(model):
    """The message names the first offending key and says both ranges, the updates' and
    the dtype's, each labelled."""
    with pytest.raises(ValueError, match=re.escape(
            "table 'i': update for key 2 (position 0) overflows int32: [1099511627779] (the "
            "updates' range [1099511627779, 1099511627779], int32's range [-2147483648, "
            "2147483647])")):
        model.push("i", [2], np.array([2**40 + 3]))
    with pytest.raises(ValueError, match=re.escape(
            "update for key 7 (position 1) overflows int32: [-1099511627776] (the updates' "
            "range [-1099511627776, 5], int32's range")):
        model.push("i", [3, 7, 1], np.array([5, -2**40, 1]))
    assert model.pull("i").tolist() == [0] * 10


@pytest.mark.parametrize("updates, match", [
    ([1.0], r"table 'w': key 99 at position 0 is outside the table's rows \[0, 4\)"),
    ([np.nan], r"table 'w': update for key 3 \(position 0\) is not finite"),
])
def test_push_async_raises_a_bad_push_at_the_call(updates, match):
    """``ps.push_async`` validates as ``push`` does, at the call: a refused update is not
    left in a future nobody has to check (it fails the task, not a silent drop)."""
    keys = [99] if updates == [1.0] else [3]

    def task(ps, item):
        ps.push_async("w", np.array(keys), np.array(updates))
        ps.clock()
        return "finished"

    with dask_ps.PSModel("local", timeout=20) as m:
        m.add_table("w", (4,))
        with pytest.raises((IndexError, ValueError), match=match):
            m.run(task, [0])
        assert m.pull("w").tolist() == [0.0] * 4

        def good(ps, item):
            fut = ps.push_async("w", np.array([1]), np.array([2.0]))
            assert fut.done() and fut.result() is None
            ps.clock()
            return "finished"

        assert m.run(good, [0]) == ["finished"]
        assert m.pull("w").tolist() == [0.0, 2.0, 0.0, 0.0]


#: Bad pulls and what each raises: ``(table, keys, error type, message)``.
BAD_PULLS = [
    ("nope", [1], "UnknownTableError", r"^unknown table 'nope'; the model holds \['h', 'w'\]"),
    ("w", np.array([1.5]), "TypeError", r"^table 'w': keys must be integers, got dtype float64"),
    ("w", ["a"], "TypeError", r"^table 'w': keys must be integers, got dtype <U1"),
    ("w", [-1], "IndexError", r"^table 'w': key -1 at position 0 is outside the table's rows "
                              r"\[0, 4\)"),
    ("w", [1, 4], "IndexError", r"^table 'w': key 4 at position 1 is outside"),
    ("w", np.array([2**63], np.uint64), "IndexError", r"^table 'w': key 9223372036854775808 "
                                                      r"at position 0 is outside"),
    ("w", [[1, 2]], "ValueError", r"^table 'w': keys must be 1-D, got shape \(1, 2\)"),
    ("h", None, "ValueError", r"^table 'h' is sparse: pass the keys to pull"),
]


def _outcome(call) -> tuple:
    """``("raised", type, message)`` when ``call()`` raises, else ``("future", outcome)``
    of the future it returns (its exception or result, as text)."""
    try:
        fut = call()
    except Exception as exc:  # noqa: BLE001 - what the call raised is the result
        return "raised", type(exc).__name__, str(exc).split("\n")[0]
    exc = fut.exception(timeout=60)
    return "future", repr(exc if exc is not None else fut.result())


def _bad_pulls_async(ps, item):
    out = [_outcome(lambda t=t, k=k: ps.pull_async(t, k)) for t, k, _, _ in BAD_PULLS]
    ps.push("w", [1], [2.0])
    ps.push("h", [2**40], [3.0])
    clocked = ps.clock_async()
    assert clocked.result(timeout=60) == 1 == ps.current_clock
    both = ps.pull_async("w", [3, 1]), ps.pull_async("h", [2**40, 5])
    return out, [f.result(timeout=60).tolist() for f in both]


@pytest.mark.parametrize("where", ["local", "2x1"])
def test_pull_async_raises_a_bad_pull_at_the_call(where, request):
    """``ps.pull_async`` checks its pull as ``pull`` does, at the call: an unknown table and
    bad keys (not integers, negative, outside a dense table, not 1-D, none for a sparse
    table) raise there, with pull's messages, instead of waiting in a future nobody has to
    look at; a good pull's values still come in the background."""
    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2, timeout=20) as m:
        m.add_table("w", (4,))
        m.add_table("h", (None,), partitioner="hash")
        (out, values), = m.run(_bad_pulls_async, [0])
    for (table, keys, err, match), got in zip(BAD_PULLS, out):
        assert got[:2] == ("raised", err), (table, keys, got)
        assert re.search(match, got[2]), got
    assert values == [[0.0, 2.0], [3.0, 0.0]]


#: Views kept past their task by :func:`_keep_view`, in this process (on a worker: its own).
_KEPT: dict = {}


def _keep_view(ps, item):
    ps.push("w", [1], [1.0])
    ps.clock()
    _KEPT[item] = ps
    return item


def _use_kept_view(ps, item):
    """The async calls of the view :func:`_keep_view` kept, from a task of a later job."""
    old = _KEPT.pop(item)
    return [_outcome(lambda: old.pull_async("w", [1])), _outcome(old.clock_async),
            _outcome(lambda: old.pull_async("nope", [1]))]


@pytest.mark.parametrize("where", ["local", "2x1"])
def test_async_calls_of_a_view_past_its_job_or_model_raise_at_the_call(where, request):
    """``pull_async`` and ``clock_async`` of a view kept past its job raise at the call, as
    ``pull`` and ``clock`` do (RuntimeError: the job is over); once its model is closed,
    ClosedModelError naming it (on a cluster: the worker's connection, closed by the
    driver's close). Before, both only put the error in a future."""
    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2, timeout=20) as a, \
            dask_ps.PSModel(client, n_shards=2, timeout=20) as b:
        a.add_table("w", (4,))
        b.add_table("w", (4,))
        here = None if where == "local" else [a.shards[0].address]
        a.run(_keep_view, [0], workers=here)
        over = a.run(_use_kept_view, [0], workers=here)[0]
        assert [o[:2] for o in over] == [("raised", "RuntimeError")] * 2 + [
            ("raised", "UnknownTableError")], over
        assert all(re.search(r"^job '[0-9a-f]+' is over: a WorkerView is valid only inside "
                             r"the task it was given to", o[2]) for o in over[:2]), over
        a.run(_keep_view, [1], workers=here)
        a.close()
        closed = b.run(_use_kept_view, [1], workers=here)[0]
        assert closed == [("raised", "ClosedModelError", f"PSModel {a.uid} is closed")] * 2 + [
            ("raised", "UnknownTableError", "unknown table 'nope'; the model holds ['w']")]
        assert b.pull("w").tolist() == [0.0] * 4  # b untouched


def test_calls_of_a_task_after_its_model_is_closed_raise_at_once():
    """In-process, a task that closes its model: its next pull, pull_async, clock_async and
    push raise ClosedModelError at the call (pull used to go on reading the dropped shards,
    pull_async to return their values)."""
    with dask_ps.PSModel("local", n_shards=2, timeout=20) as m:
        m.add_table("w", (4,))

        def closing(ps, item):
            ps.push("w", [1], [1.0])
            ps.clock()
            m.close()
            return [_outcome(lambda: ps.pull_async("w", [1])), _outcome(ps.clock_async),
                    _outcome(lambda: ps.pull("w", [1])),
                    _outcome(lambda: ps.push("w", [1], [1.0]))]

        seen = []
        with pytest.raises(dask_ps.ClosedModelError, match=f"PSModel {m.uid} is closed"):
            m.run(lambda ps, i: seen.append(closing(ps, i)), [0])
    assert seen == [[("raised", "ClosedModelError", f"PSModel {m.uid} is closed")] * 4]


def test_a_model_whose_client_closed_raises_closed_model_error(client2):
    """A PSModel used after the Dask client it was made on closed (leaving a ``with
    Client(...)`` block) raised a bare "RuntimeError: Event loop is closed"; now
    ClosedModelError naming the client. Closing the model stays silent."""
    from distributed import Client

    other = Client(client2.scheduler.address, set_as_default=False)
    m = dask_ps.PSModel(other, n_shards=2)
    m.add_table("w", (4,))
    np.testing.assert_array_equal(m.pull("w", [1]), [0.0])
    other.close()
    for call in (lambda: m.pull("w", [1]), lambda: m.push("w", [1], [1.0]),
                 lambda: m.run(lambda ps, i: None, [0])):
        with pytest.raises(dask_ps.ClosedModelError, match=rf"PSModel {m.uid}: the Dask "
                                                           rf"client it was made on \({other.id}"
                                                           rf"\) is closed"):
            call()
    m.close()


@pytest.mark.parametrize("n_rows", [2**64, 2**63, 10**30])
def test_a_dense_table_past_int64_keys_is_refused_naming_it(n_rows, recwarn):
    """Rows past int64 keys: a ValueError naming the table, before the shards' bounds are
    computed (no NumPy casting error, no RuntimeWarning)."""
    with dask_ps.PSModel("local", n_shards=2) as m:
        for shape in ((n_rows,), (n_rows, 3)):
            with pytest.raises(ValueError, match=re.escape(
                    "table 'x': a dense table's rows are numbered by int64 keys, so its row "
                    f"count must fit in int64 keys (at most 2**63 - 1 = {2**63 - 1}), got "
                    f"{n_rows}")):
                m.add_table("x", shape)
        assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
        assert "x" not in m.tables


def _overflow(table, shard, key, what, a, b, dtype="int32"):
    """The message of an integer sum past ``dtype``, as a regular expression."""
    import re

    return (f"table '{table}', shard {shard}, key {key}: {re.escape(what)} would take it past "
            f"{dtype} \\({a} \\+ {b}, range")


def _clock_of_two(ps, i):
    ps.push("i", [3], [2**30])
    ps.push("h", [2**40], [2**30])
    ps.clock()
    return i


@pytest.mark.parametrize("where", ["local", "2x1"])
def test_integer_sums_past_the_dtype_are_refused_and_change_nothing(where, request):
    """Sums that wrap an integer table are refused naming table, shard and key, leaving the
    table as it was: a push's duplicate keys (merged client side), a push onto a row (dense,
    as a key list and as a bitmap of rows, and hashed), a clock of two tasks of one process
    (merged client side) or of two processes (on the shard, the first push taken back)."""
    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2, timeout=20) as model:
        model.add_table("i", (100,), "int32")
        model.add_table("h", (None,), "int64", partitioner="hash")
        model.add_table("w", (4,), "float32")  # untouched by the rest
        merged = "the sum of a clock's updates (merged in this process)"
        with pytest.raises(ValueError, match=_overflow("i", 0, 3, merged, 2**30, 2**30)):
            model.push("i", [3, 5, 3], [2**30, 7, 2**30])  # 2^31: wrapped to -2^31 before
        assert model.pull("i")[[3, 5]].tolist() == [0, 0]
        model.push("i", [3], [2**31 - 2])
        with pytest.raises(ValueError, match=_overflow("i", 0, 3, "a push", 2**31 - 2, 2)):
            model.push("i", [1, 3], [5, 2])
        assert model.pull("i", [1, 3]).tolist() == [0, 2**31 - 2]
        # every row of shard 1 (keys 50..99): sent as a bitmap
        model.push("i", np.arange(50, 100), np.full(50, -2**31 + 1))
        with pytest.raises(ValueError, match=_overflow("i", 1, 77, "a push", -2**31 + 1, -2)):
            model.push("i", np.arange(50, 100), np.where(np.arange(50, 100) == 77, -2, 0))
        assert model.pull("i", np.arange(50, 100)).tolist() == [-2**31 + 1] * 50
        model.push("h", [2**40], [2**62])
        with pytest.raises(ValueError, match=_overflow("h", "[01]", 2**40, "a push", 2**62,
                                                       2**62, "int64")):
            model.push("h", [2**40], [2**62])
        assert model.pull("h", [2**40]).tolist() == [2**62]
        model.push("i", [3], [-(2**31 - 2)])
        model.push("h", [2**40], [-(2**62)])
        # one clock of two tasks: of one process (merged there) or of two (on the shard)
        one_process = where == "local"  # else a task per worker: summed on the shard
        with pytest.raises(ValueError, match=_overflow("i", 0, 3, merged if one_process else
                                                       "a push", 2**30, 2**30)):
            model.run(_clock_of_two, [0, 1])
        assert model.pull("i", [1, 3]).tolist() == [0, 0]
        assert model.pull("h", [2**40]).tolist() == [0]
        assert model.pull("w").tolist() == [0.0] * 4


def test_uint64_key_beyond_dense_table_is_named(model):
    with pytest.raises(IndexError, match="key 9223372036854775808 at position 0"):
        model.pull("w", np.array([2**63], np.uint64))


@pytest.mark.parametrize("kwargs, match", [
    (dict(name=None, shape=(3,)), "non-empty string"),
    (dict(name="", shape=(3,)), "non-empty string"),
    (dict(name="t", shape=(3.5,)), "table 't': shape must be"),
    (dict(name="t", shape=("10",)), "table 't': shape must be"),
    (dict(name="t", shape=(10, None)), "table 't': shape must be"),
    (dict(name="t", shape=(None,)), "partitioner='hash' for a sparse table"),
    (dict(name="t", shape=(3,), dtype="bogus"), "table 't': dtype must be one of"),
    (dict(name="t", shape=(3,), init=float("nan")), "init must be"),
    (dict(name="t", shape=(3,), init=("normal", 0, -1)), "standard deviation"),
    (dict(name="t", shape=(3,), init=("uniform", 1.0, 0.0)), "low must not exceed high"),
    (dict(name="t", shape=(3,), dtype="int32", init=0.5), "integer constant"),
    (dict(name="t", shape=(3,), seed=2**70), "seed must be an integer"),
])
def test_bad_table_arguments(model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        model.add_table(**kwargs)


@pytest.mark.parametrize("make, match", [
    (lambda: dask_ps.FTRL(alpha=0.0), "FTRL.alpha must be > 0"),
    (lambda: dask_ps.Adam(beta1=1.0), r"Adam.beta1 must be in \[0, 1\)"),
    (lambda: dask_ps.AdaGrad(eps=0.0), "AdaGrad.eps must be > 0"),
    (lambda: dask_ps.SGD(learning_rate="0.1"), "SGD.learning_rate must be a finite number"),
    (lambda: dask_ps.SGD(learning_rate=-1), "SGD.learning_rate must be > 0"),
])
def test_bad_optimizer_hyper_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("kwargs, match", [
    (dict(consistency="ssp", staleness="2"), "non-negative integer"),
    (dict(consistency="ssp", staleness=1.5), "non-negative integer"),
    (dict(consistency="bsp", staleness=5), "applies to consistency='ssp'"),
    (dict(consistency="ssp", staleness=-2), "non-negative integer"),
])
def test_bad_consistency(model, kwargs, match):
    with pytest.raises(ValueError, match=match):
        kwargs = dict(kwargs)
        cons = kwargs.pop("consistency")
        model.run(lambda ps, i: None, [0], consistency=cons, **kwargs)


@pytest.mark.parametrize("args, err, match", [
    (dict(client="locl"), ValueError, "'local' or None"),
    (dict(client=42), TypeError, "'local' or None"),
    (dict(client="local", n_shards=2.7), ValueError, "positive integer"),
    (dict(client="local", timeout=0), ValueError, "positive number of seconds"),
])
def test_bad_model_arguments(args, err, match):
    with pytest.raises(err, match=match):
        dask_ps.PSModel(**args)


def test_consistency_objects_check_their_staleness():
    with pytest.raises(ValueError, match="non-negative integer"):
        dask_ps.Consistency(staleness=-2)
    with pytest.raises(ValueError, match="use SSP"):
        dask_ps.BSP(staleness=3)


def test_empty_job_returns_empty_list(model):
    assert model.run(lambda ps, i: i, []) == []


def test_one_job_at_a_time_and_no_tables_during_a_job(model):
    started, release = threading.Event(), threading.Event()

    def holds_the_job(ps, item):
        started.set()
        assert release.wait(30)
        return item

    out = []
    t = threading.Thread(target=lambda: out.append(model.run(holds_the_job, [0])))
    t.start()
    try:
        assert started.wait(30)
        with pytest.raises(RuntimeError, match="already running on this model"):
            model.run(holds_the_job, [1])
        with pytest.raises(RuntimeError, match="cannot add table 'x' while job"):
            model.add_table("x", shape=(3,))
    finally:
        release.set()
        t.join(30)
    assert out == [[0]]
    model.add_table("x", shape=(3,))


def _push_one(ps, i):
    ps.push("v", [i], [1.0])
    ps.clock()
    return float(ps.pull("v", [i])[0])


@pytest.mark.parametrize("where", ["local", "2x1"])
@pytest.mark.parametrize("n_tasks", [1, 2])
def test_a_task_cannot_start_a_job_on_another_model(where, n_tasks, request):
    """A task of model A's job that runs a job of model B is refused, naming both (it held
    A's barrier for B's whole job, A's tasks raced for B, and A's failure orphaned B's
    job); B is left free: the driver runs its job after."""
    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2, timeout=20) as a, \
            dask_ps.PSModel("local", n_shards=2, timeout=20) as b:
        a.add_table("w", (4,))
        b.add_table("v", (4,))

        def nested(ps, i):
            ps.push("w", [i], [1.0])
            return b.run(_push_one, [0, 1])

        with pytest.raises(RuntimeError, match=(
                f"PSModel {b.uid}: run called from inside a task of job '[0-9a-f]+' of "
                f"PSModel {a.uid}; a task cannot start a job")):
            a.run(nested, list(range(n_tasks)))
        assert b._job is None and b.pull("v").tolist() == [0.0] * 4
        assert b.run(_push_one, [0, 1]) == [1.0, 1.0]
        assert a.run(lambda ps, i: float(ps.pull("w", [i])[0]), [0]) == [0.0]


def test_worker_view_after_its_job(model):
    kept = []
    model.run(lambda ps, i: kept.append(ps), [0])
    with pytest.raises(RuntimeError, match="is over"):
        kept[0].push("w", [1], [1.0])


def half_failing(ps, item):
    if item == 0:
        time.sleep(0.5)
        raise ValueError("task 0 failed")
    for _ in range(100):
        ps.pull("w", [1])
        ps.push("w", [1], [1.0])
        ps.clock()


def test_failed_task_wakes_its_siblings_at_once():
    # a sibling left waiting at the barrier would wait for the model's timeout (120 s); woken,
    # it is gone within ~0.6 s of the start (0.5 s of it task 0's sleep): 60 s is the margin
    # for a loaded machine
    with dask_ps.PSModel("local", n_shards=2, timeout=120) as model:
        model.add_table("w", shape=(10,))
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match="task 0 failed"):
            model.run(half_failing, [0, 1])
        deadline = t0 + 60
        while any(t.name.startswith("dask-ps-task") for t in threading.enumerate()):
            assert time.perf_counter() < deadline, "a sibling task is still waiting"
            time.sleep(0.05)


def push_then_fail(ps, item):
    if item == 0:
        time.sleep(0.5)
        raise ValueError("fail")
    ps.push("w", [1], [1.0])
    ps.clock()
    ps.pull("w", [1])


def test_failed_bsp_job_applies_no_half_finished_clock(any_client):
    with dask_ps.PSModel(any_client, timeout=20) as m:
        m.add_table("w", shape=(4,))
        with pytest.raises(ValueError, match="fail"):
            m.run(push_then_fail, [0, 1], consistency="bsp")
        assert m.pull("w", [1]).tolist() == [0.0]


def test_errors_name_table_key_and_shape(any_client):
    with dask_ps.PSModel(any_client, n_shards=2) as model:
        model.add_table("w", shape=(10, 2))
        model.add_table("c", shape=(10,), dtype="int32")
        with pytest.raises(dask_ps.UnknownTableError, match="unknown table 'v'.*\\['c', 'w'\\]"):
            model.pull("v", [1])
        with pytest.raises(IndexError, match="table 'w': key 10 at position 1 .*\\[0, 10\\)"):
            model.pull("w", [3, 10])
        with pytest.raises(IndexError, match="table 'w': key -1 at position 0"):
            model.push("w", [-1], np.zeros((1, 2)))
        with pytest.raises(ValueError, match="table 'w': updates for 2 keys must have shape "
                                             "\\(2, 2\\), got \\(2,\\)"):
            model.push("w", [1, 2], np.zeros(2))
        with pytest.raises(TypeError, match="table 'c' holds int32: updates must be integers"):
            model.push("c", [1], [0.5])
        with pytest.raises(TypeError, match="table 'w': keys must be integers"):
            model.pull("w", [0.5])
        with pytest.raises(ValueError, match="already has a table 'w'"):
            model.add_table("w", shape=(3,))
    with pytest.raises(dask_ps.ClosedModelError):
        model.pull("w", [1])


def stuck_then_timeout(ps, item):
    """Task 0 never reaches its first clock: task 1's pull at clock 1 times out (task 1 has
    17 s to start its pull, on a loaded machine, before task 0 would leave the job)."""
    if item == 0:
        time.sleep(20)
        return
    ps.push("w", [1], [1.0])
    ps.clock()
    ps.pull("w", [1])


def raises_timeout(ps, item):
    if item == 0:
        raise TimeoutError("the task's own timeout")


@pytest.mark.parametrize("fn, match", [
    (raises_timeout, "the task's own timeout"),
    (stuck_then_timeout, "at clock 1 waited 3 s"),  # for the shard or its own process
])
def test_a_task_timeout_reaches_the_driver(any_client, fn, match):
    # a task's TimeoutError is the class of the driver's own polling timeout: it must still
    # end the job, not be taken for "no result yet"
    with dask_ps.PSModel(any_client, timeout=3) as m:
        m.add_table("w", shape=(4,))
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError, match=match):
            m.run(fn, [0, 1], consistency="bsp")
        assert time.perf_counter() - t0 < 30


def test_a_table_larger_than_the_shards_memory_is_refused_up_front():
    """A table whose shards exceed a worker's memory limit (a dense one whole, a hashed one
    at its first rows) is refused before any shard allocates it, naming its bytes, shards and
    the limit; in-process, what this process may use. The model keeps its tables."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GiB",
                      **NO_DASHBOARD) as cluster, Client(cluster) as client, \
            dask_ps.PSModel(client, n_shards=2) as model:
        model.add_table("small", (100, 4))
        # 2^28 float32 rows: 1 GiB over 2 shards, both on the one 1 GiB worker
        with pytest.raises(MemoryError, match=(
                r"table 'big' would take 1,073,741,824 bytes \(1.00 GiB\): 268435456 rows x 1 "
                r"float32 columns, with the state of optimizer 'add' \(4 bytes a row\), over 2 "
                r"shard\(s\) of up to 536,870,912 bytes; 1.00 GiB on worker tcp://.* with the "
                r"model's other tables, more than 95% of the smallest shard worker memory "
                r"limit \(1.00 GiB\)")):
            model.add_table("big", (2**28,))
        with pytest.raises(MemoryError, match=r"table 'wide' would take .* its first 1024 "
                                              r"rows per shard .* x 131072 float64 columns"):
            model.add_table("wide", (None, 2**17), "float64", partitioner="hash")
        assert model.tables == ["small"]
        assert all(set(s["tables"]) == {"small"} for s in model.stats())
        model.add_table("big", (2**20,))  # 4 MiB: fits
    with dask_ps.PSModel("local", n_shards=2) as model, \
            pytest.raises(MemoryError, match=r"table 'huge' would take .* on this process, "
                                             r"more than what this process may use"):
        model.add_table("huge", (2**34, 4))


def test_the_bounds_of_huge_dense_tables_are_exact_integers():
    """Past 2**53 rows the shards' bounds are computed in integers (float64 would round
    them, past int64 at 2**63 - 1), rounded as below it (half to even)."""
    from dask_ps.state.partition import make_partitioner

    n = 2**63 - 1
    assert make_partitioner("range", 3, n).starts.tolist() == [0, n // 3, 2 * n // 3 + 1, n]
    assert make_partitioner("range", 2, 2**60 + 1).starts.tolist() == [0, 2**59, 2**60 + 1]
    for n, s in [(5, 2), (7, 2), (10, 4), (2**53, 3)]:
        exact = np.linspace(0, n, s + 1).round().astype(np.int64).tolist()
        assert make_partitioner("range", s, n).starts.tolist() == exact
