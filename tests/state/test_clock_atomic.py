"""A clock's updates to a shard are applied all or none, across its tables: a table that
refuses its update (an integer sum past the dtype, a sparse shard past its rows) leaves the
clock's other tables on that shard as they were."""

import functools

import numpy as np
import pytest
import zarr

import dask_ps
from dask_ps.state import _hash_kernels
from dask_ps.state.merging import apply_all
from dask_ps.state.optimizers import Add
from dask_ps.state.partition import HashPartitioner
from dask_ps.state.table import Init, TableShard, TableSpec

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


def _new_keys_then_overflow(ps, item):
    """One BSP clock: task 0 pushes 100 new keys (accepted on the shard), task 1 pushes 2000
    more (the shard's index grows, renumbering its rows) and key 3, which overflows."""
    keys = [*range(100, 200), 3] if item == 0 else [*range(1000, 3000), 3]
    ps.push("h", keys, [1] * (len(keys) - 1) + [2**30 * item])
    ps.clock()


def _held_keys(model, tmp_path, name: str) -> list:
    """The keys of hashed table ``name`` as its count, its rows and an export show them."""
    keys, _ = model.table("h").to_numpy()
    model.export(str(tmp_path / name), tables=["h"])
    exported = zarr.open_group(str(tmp_path / name), mode="r")["h/keys"][:]
    assert model.table("h").n_keys == len(keys)
    assert exported.tolist() == keys.tolist()
    return keys.tolist()


def test_a_refused_push_creates_no_keys_in_a_hashed_int_table(client2, tmp_path):
    """A refused push of new keys to a hashed integer table (another key's sum overflows)
    leaves no row of them: not after a direct push, nor after a BSP clock of two processes
    whose first push (with new keys) the shard applied before the second was refused, while
    the second's new keys grew the shard's index."""
    with dask_ps.PSModel(client2, n_shards=1, timeout=20) as model:
        model.add_table("h", (None,), "int32", partitioner="hash")
        model.push("h", [3], [2**31 - 2**29])
        with pytest.raises(ValueError, match="table 'h', shard 0, key 3: a push"):
            model.push("h", [100, 3, 101, 102], [1, 2**30, 1, 1])
        assert _held_keys(model, tmp_path, "direct") == [3]
        with pytest.raises(ValueError, match="table 'h', shard 0, key 3: a push"):
            model.run(_new_keys_then_overflow, [0, 1], consistency="bsp")
        assert _held_keys(model, tmp_path, "clock") == [3]
        assert model.pull("h", [3]).tolist() == [2**31 - 2**29]
        # the table goes on: new keys are created, found and added to as before
        model.push("h", [100, 3, 5000], [4, -5, 6])
        assert _held_keys(model, tmp_path, "after") == [3, 100, 5000]
        assert model.pull("h", [5000, 3, 100, 101]).tolist() == [6, 2**31 - 2**29 - 5, 4, 0]


def test_apply_all_refused_drops_the_rows_it_created_across_pieces_and_growth():
    """In process, on a shard's tables: a call whose pieces created rows in two hashed
    integer tables, then the index of one grew (renumbering its rows, the first piece's
    new ones among them) before another key's sum was refused, leaves both tables with the
    keys, values and index they had; later calls create and find keys as before."""
    specs = [TableSpec(n, None, 2, False, np.dtype("int32"), HashPartitioner(1), Add(),
                       Init("constant", 5.0)) for n in ("a", "b")]
    a, b = TableShard(specs[0], 0), TableShard(specs[1], 0)
    ones = lambda n: np.ones((n, 2), np.int32)  # noqa: E731
    apply_all([(a, np.array([3, 7]), np.array([[2**31 - 9, 0], [1, 1]], np.int32))], 0, "x")
    before = a.gather(np.array([3, 7]))
    size = a._index.shape[0]
    grown = np.arange(1000, 3000)  # past the index's load: it grows, rows renumbered
    with pytest.raises(ValueError, match="table 'a', shard 0, key 3, column 0: a push"):
        apply_all([(a, np.arange(100, 200), ones(100)), (b, np.array([1, 2]), ones(2)),
                   (a, np.concatenate([grown, [3]]), ones(2001) * 4)], 0, "x")
    assert a._index.shape[0] > size
    assert sorted(a.view()[0].tolist()) == [3, 7] and b.n_rows == 0
    np.testing.assert_array_equal(a.gather(np.array([3, 7])), before)
    absent = np.concatenate([np.arange(100, 200), grown])
    assert (a.rows(absent, create=False) == -1).all() and a.n_rows == 2
    apply_all([(a, np.array([150, 3, 2500]), ones(3))], 0, "x")
    assert sorted(a.view()[0].tolist()) == [3, 7, 150, 2500]
    assert a.gather(np.array([2500, 7, 150, 3])).tolist() == [
        [6, 6], [6, 6], [6, 6], [2**31 - 3, 6]]
