"""Numba kernels against pure-Python twins."""

import numpy as np
import pytest

from dask_ps.state import _kernels as K
from dask_ps.state.partition import BITMAP_SORT, HashPartitioner, RangePartitioner
from dask_ps.state.wire_forms import RowBits, as_rows


def plan_keys_py(keys, starts, hashed):
    """Slow twin of a partitioner's plan: same grouping; inside a shard, ascending keys for a
    range table of fewer than ``64 * BITMAP_SORT`` rows per key (its bitmap path), else
    first-appearance order; a hashed table's plan is ``test_hash_kernels.twin_plan``'s."""
    n_shards = len(starts) - 1
    if hashed:
        from test_hash_kernels import twin_plan

        return twin_plan(keys, n_shards)
    uniq = list(dict.fromkeys(keys.tolist()))
    if starts[-1] // 64 < BITMAP_SORT * len(keys):
        uniq = sorted(uniq)
    if hashed:
        shard = [int(K.hash_shard(np.array([k]), n_shards)[0]) for k in uniq]
    else:
        shard = [int(np.searchsorted(starts, k, side="right") - 1) for k in uniq]
    groups = [[k for k, s in zip(uniq, shard) if s == t] for t in range(n_shards)]
    local = [k if hashed else k - starts[t] for t in range(n_shards) for k in groups[t]]
    order = [k for t in range(n_shards) for k in groups[t]]
    offsets = np.cumsum([0] + [len(g) for g in groups])
    inverse = [order.index(k) for k in keys.tolist()]
    return np.array(local, np.int64), offsets, np.array(inverse, np.int64)


@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("n_shards", [1, 3])
def test_plan_keys_matches_python_twin(hashed, n_shards):
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50, 200)
    part = HashPartitioner(n_shards) if hashed else RangePartitioner(n_shards, n_rows=50)
    (local, offsets, inverse, *_), bad = part.plan(keys)
    want = plan_keys_py(keys, part.starts, hashed)
    assert bad == -1
    np.testing.assert_array_equal(local, want[0])
    np.testing.assert_array_equal(offsets, want[1])
    np.testing.assert_array_equal(inverse, want[2])
    # reconstructs the keys
    glob = local.copy()
    if not hashed:
        for s in range(n_shards):
            glob[offsets[s]:offsets[s + 1]] += part.starts[s]
    np.testing.assert_array_equal(glob[inverse], keys)


@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("n_shards", [1, 3])
def test_plan_ascending_is_the_plan_of_ascending_distinct_keys(hashed, n_shards):
    part = HashPartitioner(n_shards) if hashed else RangePartitioner(n_shards, n_rows=5000)
    rng = np.random.default_rng(1)
    for n in (0, 1, 40, 3000):  # int32 offsets on the wire, or a bitmap (dense keys)
        keys = np.sort(rng.choice(5000, n, replace=False)).astype(np.int64)
        want, bad = part.plan(keys)
        got = part.plan_ascending(keys)
        assert bad == -1 and got.identity == want.identity
        for field in ("local", "offsets"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
        for s in range(n_shards):
            a, b = part.wire_keys(got, s), part.wire_keys(want, s)
            assert type(a) is type(b)
            np.testing.assert_array_equal(getattr(a, "words", a), getattr(b, "words", b))


@pytest.mark.parametrize("n_rows, keys, first_bad", [
    (10, [3, 9, 10, -1], 2),  # unsorted, small table: checked while the bitmap is set
    (10, [-1, 3, 9], 0),  # sorted: the ends tell
    (10, [3, 9, 10], 2),
    (10**7, [5, 3, 10**7, 2], 2),  # unsorted, large table: a pass of its own
    (10**7, [5, 3, -7, 2], 2),
])
def test_plan_keys_reports_first_bad_key(n_rows, keys, first_bad):
    part = RangePartitioner(2, n_rows=n_rows)
    _, bad = part.plan(np.array(keys))
    assert bad == first_bad
    # the scratch bitmap is left clean: the next plan is exact
    (local, offsets, inverse, *_), bad = part.plan(np.array([4, 1, 4]))
    assert bad == -1 and sorted(local.tolist()) == [1, 4]
    assert local[inverse].tolist() == [4, 1, 4]


def test_hash_partition_is_balanced_for_patterned_keys():
    keys = np.arange(0, 2**20, 1024, dtype=np.int64) << 20  # strided, high bits only
    counts = np.bincount(K.hash_shard(keys, 4), minlength=4)
    assert counts.min() > 0.2 * len(keys)


def test_init_rows_depends_on_key_only():
    a = np.zeros((3, 4))
    b = np.zeros((5, 4))
    K.init_rows(a, np.arange(3), np.array([10, 11, 12]), K.INIT_NORMAL, 0.0, 1.0, 7)
    K.init_rows(b, np.array([4, 0]), np.array([12, 10]), K.INIT_NORMAL, 0.0, 1.0, 7)
    np.testing.assert_array_equal(a[2], b[4])
    np.testing.assert_array_equal(a[0], b[0])
    big = np.zeros((20000, 1))
    K.init_rows(big, np.arange(20000), np.arange(20000), K.INIT_NORMAL, 1.0, 2.0, 0)
    assert abs(big.mean() - 1.0) < 0.05 and abs(big.std() - 2.0) < 0.05


@pytest.mark.parametrize("hashed", [False, True])
def test_sorted_keys_take_the_sequential_path_with_the_same_plan(hashed):
    keys = np.array([0, 0, 3, 7, 7, 7, 12, 19, 25, 49])
    part = HashPartitioner(3) if hashed else RangePartitioner(3, n_rows=50)
    plan, bad = part.plan(keys)
    want = plan_keys_py(keys, part.starts, hashed)
    assert bad == -1 and not plan.identity
    for got, exp in zip(plan[:3], want):
        np.testing.assert_array_equal(got, exp)
    uniq = np.unique(keys)
    unique_plan, _ = part.plan(uniq)
    assert unique_plan.identity == (not hashed)
    glob = unique_plan.local.copy()
    if not hashed:
        for s in range(3):
            glob[unique_plan.shard_slice(s)] += part.starts[s]
    np.testing.assert_array_equal(unique_plan.expand(glob * 10), uniq * 10)


@pytest.mark.parametrize("hashed", [False, True])
def test_caller_keys_rebuild_the_planned_keys(hashed):
    keys = np.random.default_rng(3).integers(0, 40, 100)
    part = HashPartitioner(3) if hashed else RangePartitioner(3, n_rows=40)
    plan, _ = part.plan(keys)
    np.testing.assert_array_equal(part.caller_keys(plan), keys)


def test_fingerprint_tells_arrays_apart():
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2**40, 1000)
    same = keys.copy()
    swapped = keys.copy()
    swapped[[3, 7]] = swapped[[7, 3]]
    changed = keys.copy()
    changed[500] += 1
    assert K.fingerprint(keys) == K.fingerprint(same)
    assert K.fingerprint(keys) != K.fingerprint(swapped)
    assert K.fingerprint(keys) != K.fingerprint(changed)
    assert K.fingerprint(keys[:999]) != K.fingerprint(keys)


def _fingerprint_twin(keys) -> int:
    """Pure-Python :func:`fingerprint`: ``n + sum(mix64(k_i ^ i * golden))`` mod 2^64."""
    def mix64(z):
        z = (z + 0x9E3779B97F4A7C15) % 2**64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
        return z ^ (z >> 31)

    return (len(keys) + sum(mix64((int(k) % 2**64) ^ (i * 0x9E3779B97F4A7C15 % 2**64))
                            for i, k in enumerate(keys))) % 2**64


@pytest.mark.parametrize("n", [1000, 2**15 + 17])
def test_fingerprint_in_two_halves_sums_to_the_same_hash(n):
    # split: the second half's terms on the helper thread, summed mod 2^64
    keys = np.random.default_rng(n).integers(-2**63, 2**63 - 1, n)
    want = _fingerprint_twin(keys)
    assert K.fingerprint(keys) == want
    assert K.fingerprint(keys, split=True) == want


@pytest.mark.parametrize("n_shards", [1, 3])
def test_distinct_unsorted_keys_of_a_large_range_table_keep_their_order(n_shards):
    from dask_ps.state.partition import _bitmap

    rng = np.random.default_rng(5)
    part = RangePartitioner(n_shards, n_rows=100_000)  # > 512 rows per key: order kept
    for keys in (rng.permutation(100_000)[:150], rng.permutation(1000)[:150],
                 np.concatenate([rng.permutation(500)[:100], [7]])):
        plan, bad = part.plan(keys)
        want = plan_keys_py(keys, part.starts, False)
        assert bad == -1
        for got, exp in zip(plan[:3], want):
            np.testing.assert_array_equal(got, exp)
        one_shard = len(set(np.searchsorted(part.starts, keys, side="right"))) == 1
        assert plan.identity == (one_shard and len(np.unique(keys)) == len(keys))
        assert not _bitmap(100_000).any()  # left zeroed for the next call
    # keys of one shard, distinct, in any order: nothing to reorder
    plan, _ = part.plan(np.array([part.starts[1] - 1, 0, 2]))
    assert plan.identity and plan.expand(np.arange(3)).tolist() == [0, 1, 2]


@pytest.mark.parametrize("n_shards", [1, 3])
def test_unsorted_keys_of_a_small_range_table_come_out_sorted(n_shards):
    from dask_ps.state.partition import _bitmap

    rng = np.random.default_rng(6)
    part = RangePartitioner(n_shards, n_rows=5000)
    big = RangePartitioner(n_shards, n_rows=100_000)
    for keys in (rng.permutation(5000)[:1000], rng.permutation(5000)[:4500],  # dense words
                 rng.integers(0, 5000, 300),
                 np.array([4999, 0, 64, 63, 4999])):
        plan, bad = part.plan(keys)
        want = plan_keys_py(keys, part.starts, False)
        assert bad == -1 and not plan.identity
        for got, exp in zip(plan[:3], want):
            np.testing.assert_array_equal(got, exp)
        assert not _bitmap(5000).any()
        big.plan(rng.permutation(100_000)[:100])  # a larger table reuses the scratch
        assert not _bitmap(100_000).any()


# -- dense key sets as bitmaps (RowBits) -----------------------------------------------------
@pytest.mark.parametrize("n_rows, n_shards", [(1000, 3), (4096, 2), (130, 1), (6400, 7)])
def test_dense_keys_travel_as_bitmaps_of_each_shards_rows(n_rows, n_shards):
    rng = np.random.default_rng(n_rows)
    part = RangePartitioner(n_shards, n_rows=n_rows)
    keys = rng.integers(0, n_rows, 3 * n_rows)  # repeats, unsorted, nearly every row
    plan, bad = part.plan(keys)
    assert bad == -1 and plan.ascending and plan.words.shape[0] == (n_rows + 63) // 64
    for s in range(n_shards):
        sl = plan.shard_slice(s)
        wire = part.wire_keys(plan, s)
        assert isinstance(wire, RowBits) and wire.shape == (sl.stop - sl.start,)
        assert wire.words.shape[0] == (part.shard_size(s) + 63) // 64
        np.testing.assert_array_equal(wire.rows(), plan.local[sl])
        # a subset (the snapshot served the rest) is encoded from the offsets themselves
        sub = plan.local[sl][::2]
        np.testing.assert_array_equal(part.wire_keys(plan, s, sub).rows(), sub)
        # as received by a shard: arrays stay arrays, bitmaps become their rows
        np.testing.assert_array_equal(as_rows(wire), plan.local[sl])


def test_sparse_key_sets_travel_as_offsets():
    part = RangePartitioner(2, n_rows=100_000)
    keys = np.array([5, 70_000, 3, 99_999])
    plan, _ = part.plan(keys)
    for s in range(2):
        wire = part.wire_keys(plan, s)
        assert wire.dtype == np.int32
        np.testing.assert_array_equal(wire, plan.local[plan.shard_slice(s)])
    hashed = HashPartitioner(2)
    plan, _ = hashed.plan(keys)
    assert hashed.wire_keys(plan, 0).dtype == np.int64


@pytest.mark.parametrize("ncols", [1, 3])
def test_gather_bits_matches_fancy_indexing(ncols):
    rng = np.random.default_rng(ncols)
    values = rng.normal(size=(1000, ncols))
    rows = np.unique(np.concatenate([np.arange(128, 448),  # full words, one run
                                     rng.integers(0, 1000, 200)]))
    words = K.rows_to_bits(rows, 16)
    np.testing.assert_array_equal(K.bits_to_rows(words, np.empty(len(rows), np.int64)), rows)
    out = K.gather_bits(values, words, np.empty((len(rows), ncols)))
    np.testing.assert_array_equal(out, values[rows])


def test_deferred_inverse_equals_the_inverse():
    rng = np.random.default_rng(1)
    part = RangePartitioner(3, n_rows=5000)
    keys = rng.integers(0, 5000, 20_000)
    want, _ = part.plan(keys)
    plan, _ = part.plan(keys, defer_inverse=True)
    assert plan.deferred and not want.deferred
    done = part.complete(plan, keys)
    assert not done.deferred and part.complete(done, keys) is done
    np.testing.assert_array_equal(done.inverse, want.inverse)
    np.testing.assert_array_equal(done.local, want.local)
    # keys that are sorted already, or of a large table, have nothing to defer
    for k, n_rows in ((np.sort(keys), 5000), (keys, 10**8)):
        p = RangePartitioner(3, n_rows=n_rows)
        assert not p.plan(k, defer_inverse=True)[0].deferred


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_distinct_ranks_are_numpys_unique_and_inverse(dtype):
    from dask_ps.state.partition import distinct_ranks

    rng = np.random.default_rng(3)
    n_rows = 2**20
    keys = (rng.zipf(1.3, 300_000) % n_rows).astype(dtype)
    out = np.empty(keys.shape[0], np.int32)
    distinct = distinct_ranks(keys, n_rows, out)
    want, inverse = np.unique(keys, return_inverse=True)
    assert distinct.dtype == np.int64
    np.testing.assert_array_equal(distinct, want)
    np.testing.assert_array_equal(out, inverse)
    # the scratch bitmap is the call's own: a second call starts clean
    np.testing.assert_array_equal(distinct_ranks(keys[:10], n_rows, out[:10]),
                                  np.unique(keys[:10]))


def test_distinct_ranks_name_a_key_out_of_range():
    from dask_ps.state.partition import distinct_ranks

    keys = np.array([3, 1, 8, 2], np.int64)
    with pytest.raises(ValueError, match="key 8 at position 2 is outside"):
        distinct_ranks(keys, 8, np.empty(4, np.int64))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_checked_integer_add_finds_the_first_wrapping_row_and_changes_nothing(dtype):
    """add_step_checked against exact (Python int) sums: the first row past the dtype, the
    table then unchanged (updates down to the dtype's minimum), else every sum."""
    from dask_ps.kernels.optim import add_step_checked

    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    seen = set()
    for _ in range(200):
        ncols = int(rng.integers(1, 4))
        w = rng.integers(info.min, info.max, (200, ncols), dtype=dtype, endpoint=True)
        rows = rng.choice(200, 50, replace=False).astype(np.int64)
        g = rng.integers(info.min, info.max, (50, ncols), dtype=dtype, endpoint=True)
        g = (g // int(rng.choice([1, 2**8, 2**20]))).astype(dtype)
        exact = w[rows].astype(object) + g.astype(object)
        past = ((exact < info.min) | (exact > info.max)).any(axis=1)
        first = int(np.argmax(past)) if past.any() else -1
        before = w.copy()
        assert add_step_checked(w, rows, g) == first
        if first >= 0:
            assert np.array_equal(w, before)
        else:
            assert (w[rows].astype(object) == exact).all()
        seen.add(first >= 0)
    assert seen == {True, False}
