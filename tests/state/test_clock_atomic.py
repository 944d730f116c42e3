"""A clock's updates to a shard are applied all or none, across its tables: a table that
refuses its update (an integer sum past the dtype, a sparse shard past its rows) leaves the
clock's other tables on that shard as they were."""

import functools

import pytest

import dask_ps
from dask_ps.state import _hash_kernels

pytestmark = pytest.mark.timeout(120)


def _float_then_int(table, ps, item):
    """One clock: a float table first, then the integer ``table`` (which overflows)."""
    ps.push("w", [1], [1.0])
    ps.push(table, [3], [2**30])
    ps.clock()
    return item


def _run(model, table, n_tasks, consistency):
    return model.run(functools.partial(_float_then_int, table), list(range(n_tasks)),
                     consistency=consistency)


@pytest.mark.parametrize("consistency", ["asp", "bsp"])
@pytest.mark.parametrize("table", ["i", "h"])
def test_a_refused_table_leaves_the_clocks_other_tables_unchanged(any_client, table,
                                                                  consistency):
    """One task whose clock pushes to a float table and to an integer one (dense or
    hashed) that already holds a value near its maximum: the integer sum is refused on the
    shard, and the float table keeps its value too."""
    with dask_ps.PSModel(any_client, n_shards=1, timeout=20) as model:
        model.add_table("w", (4,), "float32")
        model.add_table("i", (8,), "int32")
        model.add_table("h", (None,), "int32", partitioner="hash")
        model.push(table, [3], [2**31 - 2**29])
        with pytest.raises(ValueError, match=f"table '{table}', shard 0, key 3: a push"):
            _run(model, table, 1, consistency)
        assert model.pull("w").tolist() == [0.0] * 4
        assert model.pull(table, [3]).tolist() == [2**31 - 2**29]


@pytest.mark.parametrize("table", ["i", "h"])
def test_a_bsp_clock_refused_on_the_shard_leaves_every_table(client2, table):
    """Two processes' pushes of one BSP clock, summed on the shard: the integer sum wraps
    there; the float table's merged update of that clock is not applied either."""
    with dask_ps.PSModel(client2, n_shards=1, timeout=20) as model:
        model.add_table("w", (4,), "float32")
        model.add_table("i", (8,), "int32")
        model.add_table("h", (None,), "int32", partitioner="hash")
        model.push("w", [2], [0.5])
        with pytest.raises(ValueError, match=f"table '{table}', shard 0, key 3: a push") as err:
            _run(model, table, 2, "bsp")
        assert (f"none of the updates of clock 0 (tables ['{table}', 'w']) is applied on "
                f"shard 0") in "".join(getattr(err.value, "__notes__", []))
        assert model.pull("w").tolist() == [0.0, 0.0, 0.5, 0.0]
        assert model.pull(table, [3]).tolist() == [0]
        # the model goes on: a clock that fits is applied to both
        model.push(table, [3], [5])
        assert model.pull(table, [3]).tolist() == [5]


def _int_then_sparse(ps, item):
    ps.push("i", [3], [7])
    ps.push("s", [10, 11, 12, 13], [1.0, 1.0, 1.0, 1.0])
    ps.clock()


def test_a_sparse_shard_full_refuses_the_whole_clock(monkeypatch):
    """A sparse table that would hold more keys than a shard may (lowered here, in
    process) refuses its update; the integer table pushed first in that clock keeps its
    value."""
    monkeypatch.setattr(_hash_kernels, "MAX_ROWS", 5)
    with dask_ps.PSModel("local", n_shards=1, timeout=20) as model:
        model.add_table("i", (8,), "int32")
        model.add_table("s", (None,), "float32", partitioner="hash")
        model.push("s", [1, 2, 3], [1.0, 1.0, 1.0])
        with pytest.raises(ValueError, match="table 's': shard 0 would hold 7 keys, more "
                                             "than 5"):
            model.run(_int_then_sparse, [0], consistency="asp")
        assert model.pull("i", [3]).tolist() == [0]
        assert model.pull("s", [1, 2, 3]).tolist() == [1.0, 1.0, 1.0]
