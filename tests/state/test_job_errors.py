"""A job's task errors on real LocalClusters and in-process: what they say, what survives them,
and the driver's writes refused while a job runs."""

import re
import sys
import threading

import numpy as np
import pytest

import dask_ps

pytestmark = pytest.mark.timeout(180)


def _exits_on_item_0(ps, item):
    if item == 0:
        sys.exit(2)
    ps.clock()
    return item


def test_a_task_exiting_on_a_cluster_fails_the_job_and_keeps_the_worker_and_its_shards(
        client2):
    """``sys.exit(2)`` in a task (a BaseException that is no Exception) made Dask end the
    worker: run raised ``ShardUnavailableError ... ConnectionResetError``, the nanny
    restarted the worker and shard 0's rows were lost. It is now a RuntimeError saying what
    the task raised, chained from it; the workers and the rows stay, the model runs jobs."""
    before = sorted(client2.scheduler_info()["workers"])
    with dask_ps.PSModel(client2, n_shards=2) as model:
        model.add_table("w", (10,))
        model.push("w", np.arange(10), np.ones(10))
        with pytest.raises(RuntimeError,
                           match=r"^task for item 0 raised SystemExit\(2\) ") as info:
            model.run(_exits_on_item_0, [0, 1])
        assert isinstance(info.value.__cause__, SystemExit)
        assert info.value.__cause__.args == (2,)
        (note,) = info.value.__notes__
        assert note.startswith(f"raised by function {__name__}._exits_on_item_0 for item 0 of "
                               f"job '")
        assert note.endswith(f" (worker {before[0]})")
        assert info.value.job_clocks is not None
        assert sorted(client2.scheduler_info()["workers"]) == before  # none restarted
        assert model.lost_shards() == []
        np.testing.assert_array_equal(model.pull("w"), np.ones(10))
        assert model.run(lambda ps, i: i * 2, [1, 2]) == [2, 4]


def test_a_task_exiting_in_process_raises_its_own_exit():
    """In-process the task runs in the user's own process: its SystemExit stays itself."""
    with dask_ps.PSModel("local") as model:
        model.add_table("w", (10,))
        with pytest.raises(SystemExit) as info:
            model.run(_exits_on_item_0, [0, 1])
        assert info.value.code == 2
        assert model.run(lambda ps, i: i + 1, [1]) == [2]


def _step_fails_in_epoch_1_partition_1(ps, part):
    ps.clock()
    if (part.epoch, part.index) == (1, 1):
        raise ValueError("bad row")
    return part.index


def _task_fails_on_item_3(ps, item):
    ps.clock()
    if item == 3:
        raise KeyError("bad item")
    return item


@pytest.mark.parametrize("where", ["local", "2x1"])
def test_a_step_or_task_error_keeps_its_type_and_message_and_names_where_it_was_raised(
        where, request):
    """A step's ValueError at epoch 1, partition 1 arrived as ``ValueError: bad row`` with
    nothing saying where (nor did a task's error name its item and worker); it now has a
    note naming the function, the epoch and partition (or item), the job and the worker."""
    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client, n_shards=2) as model, \
            dask_ps.partition(np.arange(8.0), n_partitions=2, client=client) as data:
        model.add_table("w", (4,))
        with pytest.raises(ValueError) as info:
            model.fit_partitions(_step_fails_in_epoch_1_partition_1, data, epochs=3)
        assert type(info.value) is ValueError and info.value.args == ("bad row",)
        assert info.value.job_clocks is not None
        (note,) = info.value.__notes__
        process = "in this process" if client == "local" else f"worker {data.workers[1]}"
        assert re.fullmatch(rf"raised by function {__name__}\._step_fails_in_epoch_1_"
                            rf"partition_1 in epoch 1, partition 1 of job '[0-9a-f]+' "
                            rf"\({process}\)", note), note

        with pytest.raises(KeyError) as info:
            model.run(_task_fails_on_item_3, [0, 1, 2, 3])
        assert type(info.value) is KeyError and info.value.args == ("bad item",)
        (note,) = info.value.__notes__
        addrs = [] if client == "local" else sorted(client.scheduler_info()["workers"])
        process = "in this process" if client == "local" else f"worker {addrs[3 % 2]}"
        assert re.fullmatch(rf"raised by function {__name__}\._task_fails_on_item_3 for item "
                            rf"3 of job '[0-9a-f]+' \({process}\)", note), note
        assert model.run(lambda ps, i: i * 2, [1, 2]) == [2, 4]


def _waits_for_release(ps, item):
    from distributed import Event

    Event(f"started-{item}").set()
    assert Event("release").wait(60)
    ps.push("w", [item], [1.0])
    ps.clock()
    return item


def test_driver_writes_are_refused_while_a_job_runs_and_reads_are_not(client2):
    """A driver's push in the middle of a running job (from another thread) was applied,
    in the middle of the tasks' clock (BSP broken), while add_table and save were refused:
    push and set_rows are refused the same way now; pull still reads; the job ends
    normally."""
    from distributed import Event

    with dask_ps.PSModel(client2, n_shards=2) as model:
        table = model.add_table("w", (4,))
        out: list = []
        job = threading.Thread(target=lambda: out.append(model.run(_waits_for_release,
                                                                   [0, 1])))
        job.start()
        try:
            assert Event("started-0", client=client2).wait(60)
            assert Event("started-1", client=client2).wait(60)
            with pytest.raises(RuntimeError, match=r"^cannot push to table 'w' while job "
                                                   r"'[0-9a-f]+' runs: push between jobs"):
                model.push("w", [2], [5.0])
            with pytest.raises(RuntimeError, match=r"^cannot push to table 'w' while job"):
                table.push([2], [5.0])
            with pytest.raises(RuntimeError, match=r"^cannot set rows of table 'w' while job"):
                table.set_rows([2], [5.0])
            with pytest.raises(RuntimeError, match=r"^cannot add table 'x' while job"):
                model.add_table("x", (3,))
            np.testing.assert_array_equal(model.pull("w"), np.zeros(4))
        finally:
            Event("release", client=client2).set()
            job.join(60)
        assert out == [[0, 1]]
        np.testing.assert_array_equal(model.pull("w"), [1.0, 1.0, 0.0, 0.0])  # no 5.0
        model.push("w", [2], [5.0])  # between jobs
        np.testing.assert_array_equal(model.pull("w"), [1.0, 1.0, 5.0, 0.0])
