"""Functions run next to the shards: off the worker's event loop, and from tasks after the
barrier; the dashboard reads finished participants with the model's own "done" clock."""

import re
import time

import numpy as np
import pytest

import dask_ps

pytestmark = pytest.mark.timeout(120)


def _slow_sum(keys, values, slots, seconds):
    time.sleep(seconds)
    return float(values.sum())


def test_a_long_function_on_a_shard_leaves_its_event_loop_free(client1):
    """The checkpoint's whole-shard sort and users' functions run in a thread: meanwhile the
    worker still answers (its loop serves other calls and heartbeats)."""
    from concurrent.futures import ThreadPoolExecutor

    with dask_ps.PSModel(client1) as model:
        model.add_table("w", (100,))
        model.push("w", np.arange(100), np.ones(100))
        with ThreadPoolExecutor(1) as ex:
            slow = ex.submit(model.map_shards, "w", _slow_sum, 3.0)
            time.sleep(0.5)
            t0 = time.perf_counter()
            info = client1.run(lambda: "alive")  # handled by the same worker's event loop
            answered = time.perf_counter() - t0
            assert slow.result() == [100.0]
        assert list(info.values()) == ["alive"]
        assert answered < 2.5, answered  # not held until the 3 s function ends


def _barrier_step(ps, part):
    ps.push("w", [0], [1.0])
    ps.clock()
    # after the clock: every task's push of the clock before is there
    return ps.map_shards("w", lambda keys, values, slots: float(values.sum()))


def test_map_shards_from_tasks_sees_every_push_of_the_clock_before(client2):
    with dask_ps.PSModel(client2) as model, \
            dask_ps.partition(np.zeros((8, 1)), client=client2, n_partitions=4) as data:
        model.add_table("w", (10,))
        sums = model.fit_partitions(_barrier_step, data, consistency="bsp")[0]
    # 4 partitions over 2 single-thread workers: two tasks, each two clocks of one push;
    # a task's second step runs after its first clock, so it sees at least 2 pushes
    assert all(sum(s) >= 2.0 for s in sums), sums
    assert max(sum(s) for s in sums) == 4.0


def test_the_dashboard_reads_finished_participants_with_the_done_clock():
    from dask_ps.diagnostics.collector import participant_clocks
    from dask_ps.state.consistency import DONE

    clocks, gap = participant_clocks([{"clocks": [DONE, 3, 5]}, {"clocks": [DONE, 4, 5]}])
    assert clocks == [None, 4, 5] and gap == 1
    assert participant_clocks([{"clocks": [DONE, DONE]}]) == ([None, None], 0)


def _fails_on_last_shard(keys, values, slots, n_rows):
    if n_rows - 1 in keys:
        raise ValueError(f"bad rows {keys[0]}..{keys[-1]}")
    return len(keys)


@pytest.mark.parametrize("where", ["local", "2x1"])
def test_a_failing_shard_function_is_named_with_its_table_shard_and_worker(where, request):
    """The user's error keeps its type (catchable as ValueError) and gains a note naming the
    function, the table, the shard and its worker; from the driver and from a task."""
    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2) as model:
        model.add_table("w", (10,))
        with pytest.raises(ValueError, match="bad rows 5..9") as info:
            model.map_shards("w", _fails_on_last_shard, 10)
        note = "\n".join(info.value.__notes__)
        address = model.shards[1].address
        assert (f"function {__name__}._fails_on_last_shard on shard 1 (worker {address}) "
                f"of table 'w'") in note, note
        # from a task: the error travels from its worker to the driver, note and all
        with pytest.raises(ValueError, match="bad rows 5..9") as info:
            model.run(lambda ps, i: ps.map_shards("w", _fails_on_last_shard, 10), [0])
        assert f"_fails_on_last_shard on shard 1 (worker {address}) of table 'w'" in "\n".join(
            info.value.__notes__)
        assert model.pull("w").tolist() == [0.0] * 10  # the model is intact


@pytest.mark.parametrize("where", ["local", "2x1"])
def test_a_slow_shard_function_is_reported_running_not_lost(where, request, tmp_path):
    """A function still running after the model's timeout is named as such (function,
    table, shard, worker, seconds), not as a lost shard: recovery does not take it for a
    loss; a call that waits as long for it says so too; the shard serves again after."""
    from concurrent.futures import ThreadPoolExecutor

    from dask_ps.model.recovery import loss_errors

    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2) as model:
        model.add_table("w", (10,))
        model.push("w", np.arange(10), np.ones(10))
        held = tmp_path / "held"
        with _short_timeout(model, 1.0):
            slow = _holds_shard(model, held)
            with pytest.raises(dask_ps.ShardFunctionRunningError) as info:
                slow.result()
            exc = info.value
            address = model.shards[exc.shard].address
            assert (f"function {__name__}._hold_until_released on table 'w' is still running "
                    f"on shard {exc.shard} (worker {address}) after 1") in str(exc), str(exc)
            assert not isinstance(exc, loss_errors())
            assert exc.seconds >= 1.0 and model.lost_shards() == []
            # the functions still run: another call waits for them, and says why it failed
            with ThreadPoolExecutor(1) as ex:
                other = ex.submit(model.map_shards, "w", _slow_sum, 0.0)
                with pytest.raises(dask_ps.ShardFunctionRunningError,
                                   match="a map_rows call waited 1 s for it"):
                    other.result()
        (held / "release").touch()
        # the default timeout again: this call waits for the held functions to end
        assert model.map_shards("w", _slow_sum, 0.0) == [5.0, 5.0]
        assert model.pull("w").tolist() == [1.0] * 10


def _hold_until_released(keys, values, slots, folder):
    """Hold the shard: mark it held (a file in ``folder``), then wait for ``folder/release``
    (60 s at most). Files, so that it works from a worker process as in-process."""
    import os
    import pathlib
    import uuid

    folder = pathlib.Path(folder)
    (folder / f"held-{os.getpid()}-{uuid.uuid4().hex}").touch()
    for _ in range(600):
        if (folder / "release").exists():
            break
        time.sleep(0.1)
    return float(values.sum())


def _holds_shard(model, folder):
    """Start a user's function that holds every shard until ``folder/release`` exists;
    return once it holds them all (its future: it fails with the model's timeout)."""
    from concurrent.futures import ThreadPoolExecutor

    folder.mkdir()
    ex = ThreadPoolExecutor(1)
    slow = ex.submit(model.map_shards, "w", _hold_until_released, str(folder))
    ex.shutdown(wait=False)
    for _ in range(600):
        if len(list(folder.glob("held-*"))) == model.n_shards:
            return slow
        time.sleep(0.1)
    raise AssertionError("the function did not start on every shard within 60 s")


class _short_timeout:
    """The driver's calls of ``model`` wait ``seconds`` (set up first with the default, so
    that the set-up itself holds on a busy machine)."""

    def __init__(self, model, seconds):
        from dask_ps.model import connection

        self.transport = connection.process_client(model).transport
        self.seconds = seconds

    def __enter__(self):
        self.before, self.transport.timeout = self.transport.timeout, self.seconds

    def __exit__(self, *exc):
        self.transport.timeout = self.before


@pytest.mark.parametrize("where", ["local", "2x1"])
@pytest.mark.parametrize("op", ["save", "export"])
def test_a_checkpoint_behind_a_slow_shard_function_is_told_busy_not_lost(where, op, tmp_path,
                                                                         request):
    """A save or an export whose shard functions wait past the model's timeout for a user's
    function holding the shard raises ShardFunctionRunningError naming it (not a lost
    shard: recovery leaves it alone); the checkpoint saved before stays the latest, and
    the next save, once the function ended, succeeds."""
    from dask_ps.model.recovery import loss_errors

    client = "local" if where == "local" else request.getfixturevalue("client2")
    url = str(tmp_path / "ck")
    with dask_ps.PSModel(client, n_shards=2) as model:
        model.add_table("w", (10,))
        model.add_table("s", (None,), partitioner="hash")
        model.push("w", np.arange(10), np.ones(10))
        model.push("s", [5, 2**40], [1.0, 2.0])
        model.save(url)
        model.push("w", [0], [1.0])
        held = tmp_path / "held"
        with _short_timeout(model, 1.0):
            slow = _holds_shard(model, held)
            with pytest.raises(dask_ps.ShardFunctionRunningError) as info:
                if op == "save":
                    model.save(url)
                else:
                    model.export(str(tmp_path / "export"))
            exc = info.value
            assert not isinstance(exc, loss_errors())
            assert (f"function {__name__}._hold_until_released on table 'w' is still running "
                    f"on shard {exc.shard}") in str(exc), str(exc)
            assert "a map_rows call waited 1 s for it" in str(exc), str(exc)
            with pytest.raises(dask_ps.ShardFunctionRunningError):
                slow.result()  # its own caller's timeout
        (held / "release").touch()
        # the default timeout again: this call waits for the held function to end
        assert model.map_shards("w", _slow_sum, 0.0) == [6.0, 5.0]
        assert model.lost_shards() == []
        if op == "save":
            with dask_ps.PSModel.load(client, url) as back:
                assert back.pull("w").tolist() == [1.0] * 10
        model.save(url)
        with dask_ps.PSModel.load(client, url) as back:
            assert back.pull("w").tolist() == [2.0] + [1.0] * 9
            assert back.pull("s", [5, 2**40]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("table", ["w", "s"])
def test_a_failing_checkpoint_write_names_its_table_and_shard(table, tmp_path, monkeypatch):
    """An error of a shard function of a save (in process: the failure injected in the
    gathering of rows) reaches the caller as itself, with a note naming the function, the
    table, the shard and its worker; the checkpoint saved before stays the latest complete
    one."""
    import re

    from dask_ps.model import key_ranges
    from dask_ps.model.format import TornCheckpointWarning

    name = "rows_in_slice" if table == "w" else "rows_in_range"
    real = getattr(key_ranges, name)

    def unreadable(keys, values, slots, *args):
        if (keys[0] >= 5) if isinstance(keys, tuple) else 2**40 in keys:  # shard 1's, 2**40's
            raise ValueError("rows unreadable")
        return real(keys, values, slots, *args)

    url = str(tmp_path / "ck")
    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("w", (10,))
        model.add_table("s", (None,), partitioner="hash")
        model.push("w", np.arange(10), np.ones(10))
        model.push("s", [5, 2**40], [1.0, 2.0])
        model.save(url)
        monkeypatch.setattr(key_ranges, name, unreadable)
        model.push("w", [0], [1.0])
        with pytest.raises(ValueError, match="rows unreadable") as info:
            model.save(url)
        note = "\n".join(info.value.__notes__)
        shard = "1" if table == "w" else "[01]"
        fn = f"{__name__}.{unreadable.__qualname__}"
        assert re.search(f"function {re.escape(fn)} on shard {shard} "
                         f"\\(worker local\\) of table '{table}'", note), note
        monkeypatch.undo()
        with pytest.warns(TornCheckpointWarning, match="versions \\[2\\] are incomplete"), \
                dask_ps.PSModel.load("local", url) as back:  # the failed save's: skipped
            assert back.pull("w").tolist() == [1.0] * 10


def test_a_failing_storage_write_names_its_rows_table_and_shards(tmp_path, monkeypatch):
    """The storage's error in a writer (in process: injected where the writer stores the
    rows in the arrays the client created) keeps its type and gains a note naming the rows,
    the table, the shards and the version's path."""
    import zarr

    def full(self, selection, value):  # every write of rows: the disk is full
        raise OSError(28, "No space left on device")

    with dask_ps.PSModel("local", n_shards=2) as model:
        model.add_table("w", (10,))
        monkeypatch.setattr(zarr.Array, "__setitem__", full)
        with pytest.raises(OSError, match="No space left") as info:
            model.save(str(tmp_path / "ck"), chunk_rows=5)
        note = "\n".join(info.value.__notes__)
        # the first writer's: rows [0, 5), shard 0's (writers run in turn in process)
        assert f"writing rows [0, 5) of table 'w' (from shards [0]) to {tmp_path / 'ck'}" in \
            note, note


def _returns_a_lock(keys, values, slots):
    import threading

    return threading.Lock()


def test_an_unpicklable_shard_result_raises_pickles_error_naming_the_function(client2):
    """A function whose result on a remote shard cannot be pickled raises pickle's own error
    (not distributed's "Could not serialize"), with a note naming the function, the table
    and the shard; the model serves on afterwards."""
    with dask_ps.PSModel(client2, n_shards=2) as model:
        model.add_table("w", (10,))
        with pytest.raises(TypeError, match="cannot pickle '_thread.lock' object") as info:
            model.map_shards("w", _returns_a_lock)
        assert "Could not serialize" not in str(info.value)
        note = "\n".join(getattr(info.value, "__notes__", []))
        assert re.search(rf"returned by function {__name__}._returns_a_lock on shard [01] "
                         r"\(worker tcp://.+\) of table 'w': its result, a lock, cannot be "
                         r"pickled", note), note
        # from a task: the other worker's shard answers through its channel
        with pytest.raises(TypeError, match="cannot pickle '_thread.lock' object") as info:
            model.run(lambda ps, i: ps.map_shards("w", _returns_a_lock), [0])
        assert "_returns_a_lock on shard" in "\n".join(info.value.__notes__)
        model.push("w", np.arange(10), np.ones(10))
        assert model.pull("w").tolist() == [1.0] * 10
        assert model.map_shards("w", lambda k, v, s: float(v.sum())) == [5.0, 5.0]


def _add(keys, values, slots, amount):
    values += amount
    return float(values.sum())


def _locked_adder():
    import threading

    lock = threading.Lock()

    def locked(keys, values, slots):
        with lock:
            values += 1.0

    return locked


def _task_locked(ps, item):
    return ps.map_shards("w", _locked_adder())


def _task_lock_argument(ps, item):
    import threading

    return ps.map_shards("w", _add, threading.Lock())


def test_an_unpicklable_function_or_argument_raises_pickles_error_before_any_shard_runs(
        client2):
    """A function (or an argument) of a shard call that cannot be pickled raised
    distributed's "Could not serialize object of type tuple" (from the driver) or pickle's
    error noted as *raised by* the function (from a task, whose own shard had run it). Now
    pickle's own error, noted as pickling the function, naming the shard and what failed,
    before any shard runs the function: the rows stay as they were."""
    import threading

    where = r"for shard [01] \(worker tcp://.+\) of table 'w': "
    fn_note = rf"^pickling function {__name__}\._locked_adder\.<locals>\.locked {where}the " \
              r"function \(or what it refers to\) cannot be pickled to reach the shard$"
    arg_note = rf"^pickling function {__name__}\._add {where}its argument 0, a lock, " \
               r"cannot be pickled to reach the shard$"
    with dask_ps.PSModel(client2, n_shards=2) as model:
        model.add_table("w", (10,))
        for call, note, task in [
                (lambda: model.map_shards("w", _locked_adder()), fn_note, None),
                (lambda: model.map_shards("w", _add, threading.Lock()), arg_note, None),
                # from tasks: each one's own shard is local, the other one is not
                (lambda: model.run(_task_locked, [0, 1]), fn_note, "_task_locked"),
                (lambda: model.run(_task_lock_argument, [0, 1]), arg_note,
                 "_task_lock_argument")]:
            with pytest.raises(TypeError, match=r"^cannot pickle '_thread.lock' object\n") \
                    as info:
                call()
            notes = info.value.__notes__
            assert len(notes) == (1 if task is None else 2) and re.search(note, notes[0]), notes
            if task is not None:  # and the job's note, naming the task that called
                assert re.fullmatch(rf"raised by function {__name__}\.{task} for item [01] of "
                                    rf"job '[0-9a-f]+' \(worker tcp://.+\)", notes[1]), notes
            assert model.pull("w").tolist() == [0.0] * 10  # no shard ran the function
        assert model.map_shards("w", _add, 2.0) == [10.0, 10.0]  # serves on


@pytest.mark.parametrize("call", ["pull", "push", "map_shards"])
def test_a_shard_function_calling_the_model_in_process_is_refused_not_deadlocked(call):
    """In-process, a shard function that calls the model (which would wait for the shard
    lock it holds) is refused at once, naming itself; the model stays usable after."""
    with dask_ps.PSModel("local", n_shards=2, timeout=60.0) as model:
        model.add_table("w", (10,))
        model.add_table("other", (4,))
        nested = {"pull": lambda: model.pull("other", np.array([0])),
                  "push": lambda: model.push("other", np.array([0]), np.ones(1)),
                  "map_shards": lambda: model.map_shards("other", _slow_sum, 0.0)}[call]

        def calls_the_model(keys, values, slots):
            return nested()

        started = time.monotonic()
        with pytest.raises(RuntimeError, match="a shard function cannot call the model: "
                                               "function .*calls_the_model on shard . of "
                                               "table 'w'") as info:
            model.map_shards("w", calls_the_model)
        assert not isinstance(info.value, dask_ps.ShardFunctionRunningError)
        assert time.monotonic() - started < 30  # refused, not timed out (60 s)
        assert model.pull("other", np.array([0])).tolist() == [0.0]
        model.push("other", np.array([1]), np.ones(1))
        assert model.pull("other").tolist() == [0.0, 1.0, 0.0, 0.0]
        assert model.map_shards("w", _slow_sum, 0.0) == [0.0, 0.0]


def test_a_pull_waiting_for_the_shard_lock_past_its_timeout_raises_not_hangs():
    """A thread's pull (straight to the in-process shard, no loop) that waits for a shard
    function past the transport's timeout raises ShardFunctionRunningError."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    release, holding = threading.Event(), threading.Event()

    def hold(keys, values, slots):
        holding.set()
        return release.wait(60)

    with dask_ps.PSModel("local", n_shards=1, timeout=0.5) as model:
        model.add_table("w", (4,))
        with ThreadPoolExecutor(1) as ex:
            slow = ex.submit(model.map_shards, "w", hold)
            assert holding.wait(60)  # it holds the shard
            started = time.monotonic()
            with pytest.raises(dask_ps.ShardFunctionRunningError,
                               match="a pull call waited 5.5 s for it to end"):
                model.pull("w", np.array([0]))
            assert 5.0 < time.monotonic() - started < 50.0  # waited, then gave up
            release.set()
            with pytest.raises(dask_ps.ShardFunctionRunningError):  # it outlived 0.5 s
                slow.result()
        assert model.pull("w").tolist() == [0.0] * 4
