"""MatrixFactorization's memory: partitions in the narrowest exact dtypes, ALS's ratings held
once per partition, and an ALS fit's working memory near its ratings (tracemalloc, in this
process; ``benchmarks/mf_memory.py`` measures whole fits)."""

import tracemalloc
import uuid

import numpy as np
import pandas as pd
import pytest

from dask_ps import PSModel
from dask_ps.algorithms import _mf_data as data_
from dask_ps.algorithms._mf_steps import _local
from dask_ps.algorithms._mf_train import train
from dask_ps.kernels.sorting import unique_sorted
from dask_ps.partitions import partition
from dask_ps.partitions.worker import Partition, drop_state

pytestmark = pytest.mark.timeout(300)

#: Bytes of a rating as the input holds it: int64 user, int64 item, float64 rating.
RATING_BYTES = 24


def ratings(n, n_users, n_items, offset=0.0, seed=0):
    """``n`` coded ratings, 1-5 stars (plus ``offset``: 0.1 is not exact in float32)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user": rng.integers(0, n_users, n),
                         "item": rng.integers(0, n_items, n),
                         "rating": rng.integers(1, 6, n) + offset})


@pytest.mark.parametrize("offset, rating_dtype", [(0.0, np.float32), (0.1, np.float64)])
def test_partitions_are_narrow_and_exact(offset, rating_dtype):
    df = ratings(5000, 300, 200, offset)
    uids, users, items, r = data_.to_part(df)
    assert (users.dtype, items.dtype, r.dtype) == (np.int32, np.int32, rating_dtype)
    np.testing.assert_array_equal(uids[users], df["user"])
    np.testing.assert_array_equal(items, df["item"])
    assert np.array_equal(r.astype(np.float64), df["rating"].to_numpy())
    # the global mean and range: the float64 input's, to the bit
    wide = df["rating"].to_numpy()
    assert data_.part_stats((uids, users, items, r)).tolist() == [
        wide.sum(), 5000.0, wide.min(), wide.max()]
    assert data_.narrow_ratings(np.array([1e300])).dtype == np.float64


@pytest.mark.parametrize("offset, per_rating", [(0.0, 12), (0.1, 16)])
def test_als_state_holds_the_ratings_once(offset, per_rating):
    n, n_users, seed = 200_000, 2000, 7
    part_value = data_.to_part(ratings(n, n_users, 500, offset))
    uid = uuid.uuid4().hex
    part = Partition(uid, 3, None, n, part_value)
    try:
        tracemalloc.start()
        try:
            st = _local(part, dict(seed=seed, n_components=4))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        held = sum(a.nbytes for a in st.values() if isinstance(a, np.ndarray)
                   and a.shape[0] == n)
        # one copy: int32 columns and visiting order, the ratings' narrowest exact dtype
        # (before: COO and CSR both, int64 and float64, 48 B a rating)
        assert held == per_rating * n
        # building: 17 / 21 B a rating (before: 42, keeping 32 and 16 more at the first
        # iteration)
        assert peak < 1.25 * RATING_BYTES * n
        # the layout the ALS steps have always read: draws of the partition's seed, by user
        uids, users, items, r = part_value
        drawn = np.random.default_rng([seed, 3]).permutation(n)
        csr = np.argsort(users[drawn], kind="stable")
        keys = unique_sorted(items)
        np.testing.assert_array_equal(st["keys"], keys)
        np.testing.assert_array_equal(st["cols"], np.searchsorted(keys, items[drawn][csr]))
        np.testing.assert_array_equal(st["vals"], r[drawn][csr])
        np.testing.assert_array_equal(st["order"][csr], np.arange(n))  # draws -> CSR
        np.testing.assert_array_equal(np.diff(st["indptr"]), np.bincount(users))
    finally:
        drop_state(uid)


def test_als_training_memory_stays_near_the_ratings():
    """An ALS iteration's working memory: the gathers of the training error are taken in
    slices: 2.6 copies of the ratings here (before: 25, (ratings, rank) float64 gathers of
    the whole partition at rank 32)."""
    n, rank = 300_000, 32
    df = ratings(n, 3000, 300)
    with PSModel("local") as model, partition(df, client="local", by="user") as raw:
        with raw.map(data_.to_part) as data:
            tracemalloc.start()
            try:
                factors, _, items, history = train(
                    model, data, n_users=3000, n_items=300, mu=3.0, solver="als",
                    n_components=rank, reg=0.1, max_iter=1, random_state=0)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert np.isfinite(factors).all() and np.isfinite(items).all()
    assert 0 < history[0]["loss"] < 2
    assert peak < 8 * RATING_BYTES * n


@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_fit_holds_no_frame_of_codes_while_training(solver):
    """The partitions hold the ratings' codes: no frame of them stays alive beside the
    user's input while training (before: the whole fit)."""
    import gc

    from dask_ps import MatrixFactorization

    df = ratings(20_000, 500, 100)
    frames = []

    def count(record):
        gc.collect()
        frames.append(sum(1 for o in gc.get_objects() if isinstance(o, pd.DataFrame)
                          and o is not df and len(o) == len(df)))
        return False

    MatrixFactorization(solver=solver, n_components=4, max_iter=2, client="local", random_state=0,
                        callbacks=[count]).fit(df)
    assert frames == [0, 0]


@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_trained_partitions_let_their_layout_go(solver):
    """Once trained, the state's layout of the ratings goes before the factors are gathered
    (they are not held at once); the users' rows stay until the partitions are released."""
    with PSModel("local") as model, partition(ratings(20_000, 500, 100), client="local",
                                              by="user", n_partitions=2) as raw:
        with raw.map(data_.to_part) as data:
            train(model, data, n_users=500, n_items=100, mu=3.0, solver=solver, n_components=4,
                  reg=0.1, max_iter=2, random_state=0)
            states = [set(part.state) for part in data.refs()]
    assert all({"P", "uids"} <= s for s in states)
    assert not {"cols", "vals", "order", "dsgd"} & set().union(*states)


def _sgd_cfg(parts_values, n_items, n_tasks, seed=5):
    from dask_ps.algorithms._mf_train import _schedule

    cfg = dict(seed=seed, n_components=4, init_std=0.1)
    counts = np.sum([data_.item_counts(v, n_items) for v in parts_values], axis=0)
    _schedule(cfg, counts, n_tasks)
    return cfg


def _reference_layout(parts, cfg):
    """The DSGD layout as built before 2026-12 (int64 draws, an argsort of int64 keys, a copy
    of each block gathered by fancy indexing): the order the layout must keep."""
    B, blocks = cfg["n_blocks"], cfg["blocks"]
    cut = []
    for part in parts:
        uids, users, items, _ = part.load()
        rng = np.random.default_rng([cfg["seed"], part.index, 1])
        order = rng.permutation(users.shape[0])
        rank_of = rng.permutation(uids.shape[0])
        block = blocks[items[order]].astype(np.int64)
        order = order[np.argsort(block * uids.shape[0] + rank_of[users[order]], kind="stable")]
        bounds = np.concatenate(([0], np.cumsum(np.bincount(block, minlength=B))))
        cut.append([order[bounds[b]:bounds[b + 1]] for b in range(B)])
    keys = [unique_sorted(np.concatenate([p.load()[2][c[b]] for p, c in zip(parts, cut)]))
            for b in range(B)]
    return keys, [[(p.load()[1][o], np.searchsorted(keys[b], p.load()[2][o]),
                    p.load()[3][o].astype(np.float32)) for b, o in enumerate(c)]
                  for p, c in zip(parts, cut)]


@pytest.mark.parametrize("offset", [0.0, 0.1])
def test_sgd_layout_is_the_one_copy_built_in_little_memory(offset):
    """SGD's layout cut by item block: the one copy of the ratings it trains on, 12 B a
    rating, in the seeded order of the argsort it replaced; built one partition at a time
    with int32 positions: 14 B a rating traced at the peak here, the layout included (26 B
    before: int64 draws, block ids, sort keys and argsort of every partition beside it; 16
    and 36 B for one partition of 10^7 ratings)."""
    from dask_ps.algorithms._mf_steps import _sgd_local, _task_blocks

    n, n_items = 300_000, 400
    values = [data_.to_part(ratings(n, 3000, n_items, offset, seed=s)) for s in (1, 2)]
    uid = uuid.uuid4().hex
    parts = [Partition(uid, i, None, n, v) for i, v in enumerate(values)]
    try:
        cfg = _sgd_cfg(values, n_items, 3)
        for part in parts:  # the users' rows, made before the layout
            _sgd_local(part, cfg)
        tracemalloc.start()
        try:
            lay = _task_blocks(parts, cfg)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        held = sum(a.nbytes for cut in lay["parts"] for block in cut for a in block)
        assert held == 12 * 2 * n
        assert peak < 20 * 2 * n
        keys, ref = _reference_layout(parts, cfg)
        assert len(lay["keys"]) == 3
        for b in range(3):
            np.testing.assert_array_equal(lay["keys"][b], keys[b])
        for cut, ref_cut in zip(lay["parts"], ref):
            for block, ref_block in zip(cut, ref_cut):
                for a, r in zip(block, ref_block):
                    assert a.dtype in (np.int32, np.float32)
                    np.testing.assert_array_equal(a, r)
        assert _task_blocks(parts, cfg) is lay  # kept for the schedule
        # another schedule (after a lost worker): the former layout goes, from every
        # partition of the task, before the new one is built
        parts[1].state["dsgd"] = "stale"
        cfg2 = _sgd_cfg(values, n_items, 2)
        cfg2["blocks_id"] = cfg["blocks_id"] + 1
        lay2 = _task_blocks(parts, cfg2)
        assert len(lay2["keys"]) == 2 and "dsgd" not in parts[1].state
        assert parts[0].state["dsgd"] is lay2
    finally:
        drop_state(uid)
