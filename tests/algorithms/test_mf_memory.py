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
            st = _local(part, dict(seed=seed, rank=4))
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
                    model, data, n_users=3000, n_items=300, mu=3.0, solver="als", rank=rank,
                    reg=0.1, max_iter=1, random_state=0)
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

    MatrixFactorization(solver=solver, rank=4, max_iter=2, client="local", random_state=0,
                        callbacks=[count]).fit(df)
    assert frames == [0, 0]


@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_trained_partitions_let_their_layout_go(solver):
    """Once trained, the state's layout of the ratings goes before the factors are gathered
    (they are not held at once); the users' rows stay until the partitions are released."""
    with PSModel("local") as model, partition(ratings(20_000, 500, 100), client="local",
                                              by="user", n_partitions=2) as raw:
        with raw.map(data_.to_part) as data:
            train(model, data, n_users=500, n_items=100, mu=3.0, solver=solver, rank=4,
                  reg=0.1, max_iter=2, random_state=0)
            states = [set(part.state) for part in data.refs()]
    assert all({"P", "uids"} <= s for s in states)
    assert not {"cols", "vals", "order", "dsgd"} & set().union(*states)
