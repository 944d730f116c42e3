"""Hashed tables' kernels (planning by hash order, the shards' index) against Python twins,
and the sparse TableShard built on them (no cluster)."""

import numpy as np
import pytest

from dask_ps.state import _hash_kernels as H
from dask_ps.state import _plan_kernels as P
from dask_ps.state._kernels import hash_shard
from dask_ps.state.merging import merge_duplicates, merge_pushes
from dask_ps.state.optimizers import FTRL, Add
from dask_ps.state.partition import HashPartitioner, plan_hashed
from dask_ps.state.table import Init, TableShard, TableSpec

MASK = 2**64 - 1


def twin_code(k: int) -> int:
    """Pure-Python twin of hash_code: rotl(splitmix64(k), 32)."""
    z = (k + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    h = z ^ (z >> 31)
    return ((h << 32) | (h >> 32)) & MASK


def twin_shard(k: int, n_shards: int) -> int:
    return (twin_code(k) & 0xFFFFFFFF) % n_shards


def twin_plan(keys, n_shards):
    """(local, offsets, inverse) of a hashed plan: distinct keys by (shard, bucket: the top
    bits of the code), in order of first appearance inside a bucket."""
    b = 0
    while b < 16 and (n_shards << b) * P.BUCKET < len(keys):
        b += 1
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(int(k), i)
    uniq = sorted(first, key=lambda k: (twin_shard(k, n_shards),
                                        twin_code(k & MASK) >> (64 - b) if b else 0, first[k]))
    pos = {k: i for i, k in enumerate(uniq)}
    offsets = np.searchsorted([twin_shard(k, n_shards) for k in uniq], np.arange(n_shards + 1))
    return (np.array(uniq, np.int64), offsets, np.array([pos[int(k)] for k in keys], np.int64))


def test_hash_code_is_a_bijection_and_picks_the_partitioners_shard():
    rng = np.random.default_rng(0)
    keys = np.concatenate([rng.integers(-2**63, 2**63 - 1, 500, dtype=np.int64),
                           np.array([0, 1, -1, 2**63 - 1, -2**63], np.int64)])
    import numba

    @numba.njit
    def codes(ks):
        out = np.empty(ks.shape[0], np.uint64)
        back = np.empty_like(ks)
        for i in range(ks.shape[0]):
            out[i] = H.hash_code(ks[i])
            back[i] = H.key_of(out[i])
        return out, back

    @numba.njit
    def shards(ks, n, magic):
        return np.array([H._shard_of(H.hash_code(k), n, magic) for k in ks])

    got, back = codes(keys)
    assert [int(g) for g in got] == [twin_code(int(k) & MASK) for k in keys]
    np.testing.assert_array_equal(back, keys)
    for n in (1, 2, 3, 7, 64, 1000):
        magic = H.fastmod_magic(n) if n > 1 else np.uint64(0)
        np.testing.assert_array_equal(shards(keys, n, magic), hash_shard(keys, n))


@pytest.mark.parametrize("n_shards", [1, 2, 3, 9])
@pytest.mark.parametrize("n, space", [(0, 1), (1, 5), (40, 30), (49, 10**9), (700, 300),
                                       (5000, 2**62), (30_000, 20_000), (300_000, 2**40),
                                       (20_000, 3)])
def test_plan_hashed_matches_the_twin(n_shards, n, space):
    """One bucket, several, many; all repeats of a few keys (a bucket needing a large
    table); the scratch table carried over from call to call."""
    rng = np.random.default_rng(n + n_shards)
    keys = rng.integers(0, space, n).astype(np.int64)
    if n > 2:
        keys[: n // 3] = -keys[: n // 3]  # negative keys hash like any others
    for defer in (False, True):
        plan = plan_hashed(keys, n_shards, defer_inverse=defer)
        if defer:  # deferred when there are repeats to resolve
            assert plan.deferred == (plan.n_unique < n)
            plan = HashPartitioner(n_shards).complete(plan, keys)
        assert not plan.deferred
        if n <= 5000 or n_shards == 2:  # the twin is slow
            local, offsets, inverse = twin_plan(keys, n_shards)
            np.testing.assert_array_equal(plan.local, local)
            np.testing.assert_array_equal(plan.offsets, offsets)
            np.testing.assert_array_equal(plan.inverse, inverse)
        np.testing.assert_array_equal(plan.local[plan.inverse], keys)
        assert (hash_shard(plan.local[plan.shard_slice(n_shards - 1)], n_shards)
                == n_shards - 1).all()


@pytest.mark.parametrize("n_shards", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 700, 30_000, 300_000])
def test_plan_hashed_of_ascending_keys_skips_the_dedup(n_shards, n):
    """Strictly ascending keys (distinct by construction, as np.unique gives them) take the
    fast path: the same keys, shards and hash-code ranges as the twin; inside a bucket the
    input order. Keys that only look sorted (a repeat, one step down) plan as any others."""
    rng = np.random.default_rng(n)
    keys = np.unique(rng.integers(-2**62, 2**62, n))
    _, twin_offsets, _ = twin_plan(keys, n_shards)
    for defer in (False, True):
        plan = HashPartitioner(n_shards).complete(
            plan_hashed(keys, n_shards, defer_inverse=defer), keys)
        np.testing.assert_array_equal(plan.offsets, twin_offsets)
        np.testing.assert_array_equal(plan.local[plan.inverse], keys)
        assert np.array_equal(np.sort(plan.local), keys)
        codes = np.array([twin_code(int(k) & MASK) for k in plan.local], dtype=np.uint64)
        for s in range(n_shards):
            c = codes[plan.shard_slice(s)]
            assert (np.array([twin_shard(int(k), n_shards)
                              for k in plan.local[plan.shard_slice(s)]]) == s).all()
            # buckets of ~BUCKET keys by the top bits of the code: ascending from bucket to
            # bucket, whatever the order inside one
            b = 0
            while b < 16 and (n_shards << b) * P.BUCKET < keys.shape[0]:
                b += 1
            top = c >> np.uint64(64 - b) if b else np.zeros_like(c)
            assert (np.diff(top.astype(np.int64)) >= 0).all()
    if n >= 2:
        for bad in (np.concatenate([keys[:1], keys]), keys[::-1].copy()):
            plan = plan_hashed(bad, n_shards)
            local, offsets, inverse = twin_plan(bad, n_shards)
            np.testing.assert_array_equal(plan.local, local)
            np.testing.assert_array_equal(plan.inverse, inverse)


@pytest.mark.parametrize("n_shards", [1, 2, 3])
@pytest.mark.parametrize("late", [None, "one", "many"])
@pytest.mark.parametrize("n", [40_000, 300_000])
def test_plan_hashed_may_leave_the_dedup_to_complete(n_shards, late, n):
    """A pull's plan (defer_dedup) whose first buckets have no repeat comes back with every
    place: it expands values per place exactly; complete() then gives the plan a
    deduplicating call gives (itself when the keys were distinct, without touching the
    sent plan's arrays otherwise). Repeats among the first buckets: deduplicated at once.
    300,000 keys make 128 buckets a shard or more, so that the repeats of the last ones
    are found by a slice of the check after the first (partition.CHECK_BUCKETS)."""
    rng = np.random.default_rng(17 + n_shards)
    keys = rng.permutation(np.unique(rng.integers(-2**62, 2**62, n)))
    part = HashPartitioner(n_shards)
    want = plan_hashed(keys, n_shards)
    first_bucket = want.local[: want.local.shape[0] // (n_shards * 64) + 1]
    if late == "one":  # a repeat of a key of a late bucket: beyond the sample
        keys = np.concatenate([keys, want.local[-3:-2]])
        want = plan_hashed(keys, n_shards)
    elif late == "many":
        keys = np.concatenate([keys, want.local[-500:], want.local[-200:]])
        want = plan_hashed(keys, n_shards)
    sent, _ = part.plan(keys, defer_inverse=True, defer_dedup=True)
    assert sent.deferred and sent.buckets.shape[0] and sent.n_unique == keys.shape[0]
    local_before = sent.local.copy()
    values = sent.local.astype(np.float64) * 3.0  # a value per place, as a shard returns
    np.testing.assert_array_equal(sent.expand(values), keys * 3.0)
    done = part.complete(sent, keys)
    assert not done.deferred and not done.buckets.shape[0]
    np.testing.assert_array_equal(done.local, want.local)
    np.testing.assert_array_equal(done.offsets, want.offsets)
    if late is None:  # distinct keys: the caller's position of each key, no inverse
        assert not done.inverse.shape[0]
        np.testing.assert_array_equal(done.order[want.inverse], np.arange(keys.shape[0]))
    else:
        np.testing.assert_array_equal(done.inverse, want.inverse)
    np.testing.assert_array_equal(done.expand(done.local.reshape(-1, 1))[:, 0], keys)
    assert (done.local is sent.local) == (late is None)
    np.testing.assert_array_equal(sent.local, local_before)
    # repeats among the first places: no waiting
    early = np.concatenate([first_bucket, keys])
    plan, _ = part.plan(early, defer_inverse=True, defer_dedup=True)
    assert not plan.buckets.shape[0] and plan.n_unique < early.shape[0]
    plan = part.complete(plan, early)
    np.testing.assert_array_equal(plan.local[plan.inverse], early)


@pytest.mark.parametrize("ncols", [1, 3])
def test_a_plan_known_by_its_order_moves_values_both_ways(ncols):
    """A pull's plan whose dedup waited carries ``order`` (each place's caller position)
    instead of ``inverse``: values go to the caller's order (``expand``) and back
    (``in_plan_order``, what a push sends) exactly as with ``inverse``, and the caller's keys
    come back; repeats found late give an ``inverse`` again."""
    rng = np.random.default_rng(5)
    keys = rng.permutation(np.unique(rng.integers(0, 2**62, 30_000)))
    part = HashPartitioner(3)
    plan = part.complete(*part.plan(keys, defer_inverse=True, defer_dedup=True)[:1], keys)
    assert plan.order.shape[0] == keys.shape[0] and not plan.inverse.shape[0]
    want = plan_hashed(keys, 3)  # the same places, by inverse
    np.testing.assert_array_equal(plan.local, want.local)
    per_key = rng.normal(size=(keys.shape[0], ncols))
    np.testing.assert_array_equal(plan.in_plan_order(per_key), want.in_plan_order(per_key))
    np.testing.assert_array_equal(plan.expand(plan.in_plan_order(per_key)), per_key)
    np.testing.assert_array_equal(part.caller_keys(plan), keys)
    late = np.concatenate([keys, want.local[-2:]])  # a repeat beyond the first buckets
    sent = part.plan(late, defer_inverse=True, defer_dedup=True)[0]
    done = part.complete(sent, late)
    assert done.inverse.shape[0] == late.shape[0] and not done.order.shape[0]
    np.testing.assert_array_equal(done.local[done.inverse], late)


def test_dedup_table_is_reused_from_call_to_call():
    """The thread's scratch table, cleared bucket by bucket: calls of any size in a row, on
    one thread, plan exactly; so does a call whose bucket outgrows it."""
    rng = np.random.default_rng(7)
    for n in (5000, 10, 200_000, 3, 5000, 70_000, 100_000):
        keys = rng.integers(0, max(2, n // 3), n)
        if n == 100_000:  # a bucket of 60,000 places: more than the scratch holds
            keys[:60_000] = 12345
        plan = plan_hashed(keys, 2)
        np.testing.assert_array_equal(plan.local[plan.inverse], keys)
        assert len(set(plan.local.tolist())) == plan.n_unique == len(np.unique(keys))


def test_plan_hashed_is_the_identity_only_for_distinct_keys_in_its_order():
    keys = np.random.default_rng(1).integers(0, 2**62, 1000)
    plan = plan_hashed(keys, 3)
    assert not plan.identity
    again = plan_hashed(plan.local, 3, defer_inverse=True)
    assert again.identity and not again.deferred
    np.testing.assert_array_equal(again.local, plan.local)
    np.testing.assert_array_equal(again.expand(np.arange(1000)), np.arange(1000))
    repeated = np.concatenate([plan.local, plan.local[:1]])
    assert not plan_hashed(repeated, 3).identity


def test_merge_duplicates_sums_repeats_in_input_order():
    keys = np.array([4, 1, 4, 9, 1])
    vals = np.arange(10, dtype=np.float64).reshape(5, 2)
    k, v = merge_duplicates(keys, vals)
    assert sorted(k.tolist()) == [1, 4, 9]
    got = {int(a): b.tolist() for a, b in zip(k, v)}
    assert got == {4: [0 + 4, 1 + 5], 1: [2 + 8, 3 + 9], 9: [6, 7]}
    # float sums in input order: the same bits whatever the run
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 50, 5000)
    vals = rng.normal(size=(5000, 1)) * 10.0 ** rng.integers(-8, 8, (5000, 1))
    k, v = merge_duplicates(keys, vals)
    for key, total in zip(k[:10], v[:10, 0]):
        want = 0.0
        for x in vals[keys == key, 0]:
            want += x
        assert total == want


@pytest.mark.parametrize("n_parts", [2, 3, 5])
def test_merge_pushes_of_sorted_keys_equals_the_hashed_merge(n_parts):
    """Pushes whose keys are each ascending are merged linearly, with the sums of the hashed
    merge (same order of additions, so the same bits); others take the hashed merge."""
    rng = np.random.default_rng(n_parts)
    parts = []
    for p in range(n_parts):
        keys = np.unique(rng.integers(0, 400, rng.integers(0, 300)))
        parts.append((keys, rng.normal(size=(keys.shape[0], 3)) * 10.0 ** rng.integers(
            -8, 8, (keys.shape[0], 1))))
    k, v = merge_pushes(parts)
    assert np.all(k[1:] > k[:-1])
    hk, hv = merge_duplicates(np.concatenate([a for a, _ in parts]),
                              np.concatenate([b for _, b in parts]))
    order = np.argsort(hk)
    np.testing.assert_array_equal(k, hk[order])
    np.testing.assert_array_equal(v, hv[order])
    # one push out of order: the hashed merge, same sums
    parts[0] = (parts[0][0][::-1].copy(), parts[0][1][::-1].copy())
    k2, v2 = merge_pushes(parts)
    order2 = np.argsort(k2)
    np.testing.assert_array_equal(k2[order2], k)
    np.testing.assert_array_equal(v2[order2], v)


def test_index_finds_inserts_and_grows():
    rng = np.random.default_rng(3)
    index = np.zeros(16, np.uint64)
    shift = 64 - 4
    row_keys = np.empty(12, np.int64)
    keys = np.array([5, -3, 2**62, 7, 0], np.int64)
    rows = np.empty(5, np.int64)
    assert H.index_find(index, shift, row_keys, keys, rows) == 5
    assert (rows == -1).all()
    assert H.index_insert(index, shift, row_keys, keys, rows, 0) == 5
    assert rows.tolist() == [0, 1, 2, 3, 4]
    probe = np.array([7, 5, 8, 2**62, -3, 0, 1], np.int64)
    got = np.empty(7, np.int64)
    assert H.index_find(index, shift, row_keys, probe, got) == 2
    assert got.tolist() == [3, 0, -1, 2, 1, 4, -1]
    # rebuilt larger and renumbered in slot order: the same keys, new rows
    big = np.zeros(64, np.uint64)
    H.index_build(big, 64 - 6, row_keys, 5)
    perm = np.empty(5, np.uint32)
    H.index_renumber(big, perm)
    assert sorted(perm.tolist()) == [0, 1, 2, 3, 4]
    renumbered = row_keys[:5][perm]
    H.index_find(big, 64 - 6, renumbered, probe, got)
    assert [renumbered[r] if r >= 0 else None for r in got] == [7, 5, None, 2**62, -3, 0,
                                                                 None]
    # a crowded index (load 3/4) with colliding fingerprints still tells keys apart
    many = rng.integers(0, 2**62, 48)
    index = np.zeros(64, np.uint64)
    row_keys = np.empty(48, np.int64)
    rows = np.full(48, -1, np.int64)
    H.index_insert(index, 64 - 6, row_keys, many, rows, 0)
    H.index_find(index, 64 - 6, row_keys, many, got := np.empty(48, np.int64))
    np.testing.assert_array_equal(got, np.arange(48))


def test_index_insert_gives_a_repeated_key_one_row():
    """A pull whose dedup waited sends repeats: each place of a new key gets the row of its
    first place, and only one row is made; so does the sparse shard."""
    index = np.zeros(64, np.uint64)
    row_keys = np.empty(8, np.int64)
    keys = np.array([9, 4, 9, -1, 4, 9, 7], np.int64)
    rows = np.full(7, -1, np.int64)
    assert H.index_insert(index, 64 - 6, row_keys, keys, rows, 0) == 4
    assert rows.tolist() == [0, 1, 0, 2, 1, 0, 3]
    assert row_keys[:4].tolist() == [9, 4, -1, 7]
    table = TableShard(TableSpec.build("t", (None,), "float32", "hash", Add(),
                                       Init.parse(("uniform", -1.0, 1.0)), 1), 0)
    table.rows(np.array([4, 5], np.int64))
    rows = table.rows(keys)
    assert table.n_rows == 5 and rows[0] == rows[2] == rows[5] and rows[1] == rows[4] == 0
    assert table.keys().tolist() == [4, 5, 9, -1, 7]
    fresh = TableShard(table.spec, 0)
    np.testing.assert_array_equal(table.gather(keys), fresh.gather(keys))


def test_index_find_past_its_window_and_through_equal_fingerprints():
    """Keys made from chosen hash codes: one home slot (the last, so probes wrap), equal
    fingerprints of other keys inside the window that :func:`index_find` compares at once,
    and keys displaced beyond that window; every key found, an absent one with a held
    fingerprint not."""
    shift = 60  # 16 slots: the home slot is the code's top 4 bits
    def key(mid, fp):
        return int(H.key_of(np.uint64((0xF << 60) | (mid << 32) | fp)))
    same_fp = [key(1, 7), key(2, 7)]
    others = [key(m, 8 + m) for m in range(3, 7)]
    absent = np.array([key(9, 7), key(10, 8 + 3)], np.int64)
    for order in (others + same_fp, same_fp + others):
        index = np.zeros(16, np.uint64)
        row_keys = np.empty(16, np.int64)
        keys = np.array(order, np.int64)
        rows = np.full(keys.shape[0], -1, np.int64)
        assert H.index_insert(index, shift, row_keys, keys, rows, 0) == keys.shape[0]
        assert rows.tolist() == list(range(keys.shape[0]))
        assert index[15] != 0 and index[4] != 0 and index[5] == 0  # wrapped from slot 15
        probe = np.concatenate([keys[::-1], absent, keys])
        got = np.empty(probe.shape[0], np.int64)
        assert H.index_find(index, shift, row_keys, probe, got) == 2
        assert got.tolist() == rows[::-1].tolist() + [-1, -1] + rows.tolist()


def test_index_find_in_any_order_with_absent_keys():
    """The lookup's prefetching pipeline (keys hashed ahead of their probe): any order, any
    count around its depth, absent keys mixed in."""
    rng = np.random.default_rng(4)
    held = rng.integers(-2**63, 2**63 - 1, 3000, dtype=np.int64)
    index = np.zeros(8192, np.uint64)
    row_keys = np.empty(3000, np.int64)
    rows = np.full(3000, -1, np.int64)
    H.index_insert(index, 64 - 13, row_keys, held, rows, 0)
    where = {int(k): int(r) for k, r in zip(held, rows)}
    for n in (1, H.PREFETCH // 2, H.PREFETCH, H.PREFETCH + 1, 5000):
        probe = np.concatenate([rng.choice(held, n), rng.integers(0, 2**62, n // 3)])
        rng.shuffle(probe)
        got = np.empty(probe.shape[0], np.int64)
        missing = H.index_find(index, 64 - 13, row_keys, probe, got)
        want = [where.get(int(k), -1) for k in probe]
        assert got.tolist() == want and missing == want.count(-1)


def test_index_find_of_planned_keys_sweeps_ahead_and_finds_every_key():
    """Keys grouped in ascending code ranges, as a plan sends them (the lookup then also
    prefetches the index, the row keys and the rows of the values ahead, in ascending
    order), over several chunks of codes, with absent keys and rows made out of code order:
    the rows a dict gives, with the sweep and without."""
    rng = np.random.default_rng(12)
    held = np.unique(rng.integers(-2**63, 2**63 - 1, 40_000, dtype=np.int64))
    held = held[rng.permutation(held.shape[0])]  # rows in random code order
    shift = 64 - 17
    index = np.zeros(2**17, np.uint64)
    row_keys = np.empty(held.shape[0], np.int64)
    H.index_insert(index, shift, row_keys, held, np.full(held.shape[0], -1, np.int64), 0)
    where = {int(k): r for r, k in enumerate(row_keys)}
    probe = np.unique(np.concatenate([rng.choice(held, 30_000, replace=False),
                                      rng.integers(0, 2**62, 3000)]))
    planned = plan_hashed(probe[rng.permutation(probe.shape[0])], 1).local
    assert planned.shape[0] > 4 * H.CODE_CHUNK
    want = [where.get(int(k), -1) for k in planned]
    got = np.empty(planned.shape[0], np.int64)
    assert H.index_find(index, shift, row_keys, planned, got) == want.count(-1)
    assert got.tolist() == want
    codes = np.empty(planned.shape[0], np.uint64)
    lo, hi = H._codes(planned, codes)
    assert (int(hi) >> shift) - (int(lo) >> shift) <= H.SWEEP_SPAN * planned.shape[0]
    values = np.zeros((held.shape[0], 3), np.float32)  # rows fetched ahead too
    assert H.index_find(index, shift, row_keys, planned, got, values) == want.count(-1)
    assert got.tolist() == want
    for sweep, also in ((True, values), (True, H._NO_ROWS), (False, values)):
        got[:] = -2
        H._find_codes(index, shift, row_keys, planned, codes, got, sweep, also)
        assert got.tolist() == want


@pytest.mark.parametrize("optimizer", [Add(), FTRL(alpha=0.5, l1=0.0)])
def test_sparse_shard_keeps_every_key_across_growth(optimizer):
    """Keys arrive in batches (some repeated, some new) while the index grows and the rows
    are renumbered; every key keeps its values and optimizer state."""
    rng = np.random.default_rng(4)
    spec = TableSpec("t", None, 2, False, np.dtype("float64"), HashPartitioner(1), optimizer,
                     Init("normal", 0.0, 1.0, 7))
    table = TableShard(spec, 0)
    want: dict[int, np.ndarray] = {}
    seen = np.empty(0, np.int64)
    for step in range(12):
        fresh = rng.integers(-2**62, 2**62, int(300 * 1.6 ** step))
        old = seen[rng.integers(0, max(seen.shape[0], 1), 200)] if seen.shape[0] else seen
        keys = np.unique(np.concatenate([fresh, old]))
        rng.shuffle(keys)
        before = table.gather(keys)  # creates the new keys, initialised from the key alone
        for k, v in zip(keys, before):
            if int(k) in want:
                np.testing.assert_array_equal(v, want[int(k)])
        g = rng.normal(size=(keys.shape[0], 2))
        table.apply(keys, g)
        after = table.gather(keys)
        for k, v in zip(keys, after):
            want[int(k)] = v
        seen = np.union1d(seen, keys)
    assert table.n_rows == len(want) == seen.shape[0]
    keys, values, slots = table.view()
    assert sorted(keys.tolist()) == sorted(want)
    for k, v in zip(keys, values):
        np.testing.assert_array_equal(v, want[int(k)])
    # a second table fed the same keys in another order holds the same initial values
    other = TableShard(spec, 0)
    np.testing.assert_array_equal(other.gather(seen[::-1])[::-1],
                                  TableShard(spec, 0).gather(seen))


def test_sparse_shard_recalls_the_rows_of_recent_keys_only_while_valid():
    """A push of the keys its pull sent reuses the rows found then: the same rows as a
    fresh lookup; a caller's buffer changed in place is looked up again; the index growing
    (rows renumbered) forgets them."""
    from dask_ps.state import table as T

    spec = TableSpec("t", None, 1, True, np.dtype("float32"), HashPartitioner(1), Add(),
                     Init())
    table = TableShard(spec, 0)
    rng = np.random.default_rng(9)
    keys = rng.integers(-2**62, 2**62, 5000)
    table.apply(keys, np.ones((5000, 1), np.float32))
    table.apply(keys, np.ones((5000, 1), np.float32))  # recalled
    np.testing.assert_array_equal(table.gather(keys)[:, 0], np.full(5000, 2, np.float32))
    rows = table.rows(keys)
    fresh = np.empty(5000, np.int64)
    H.index_find(table._index, table._shift, table._keys, keys, fresh)
    np.testing.assert_array_equal(rows, fresh)
    buf = keys.copy()
    table.rows(buf)
    buf[1:-1] = rng.integers(-2**62, 2**62, 4998)  # same length and ends, other keys
    got = table.gather(buf)[:, 0]
    np.testing.assert_array_equal(got[1:-1], np.zeros(4998, np.float32))
    assert len(table._recent) <= T.RECALL_CALLS
    more = rng.integers(-2**62, 2**62, 50_000)
    table.rows(more)  # the index grows: rows renumbered, the memo forgotten
    assert all(r.shape[0] == 50_000 for _, r in table._recent)
    np.testing.assert_array_equal(table.gather(keys)[:, 0], np.full(5000, 2, np.float32))
    small = keys[: T.RECALL_MIN - 1]
    table.rows(small)
    assert all(k.shape[0] != small.shape[0] for k, _ in table._recent)
    snapshot = TableShard(spec, 0, recall=False)  # a process's snapshot keeps no memo
    snapshot.rows(keys)
    assert snapshot._recent == []


def test_sparse_shard_keeps_the_keys_of_named_pulls_for_their_push():
    """A pull that names its keys (keys_id) leaves them with the shard, uncopied, for the
    push that names them back (a KeyRef); once given, unknown, or of another count, the push
    is told to send them (KeysNeededError); the oldest are forgotten beyond NAMED_BYTES."""
    from dask_ps.exceptions import KeysNeededError
    from dask_ps.state import table as T
    from dask_ps.state.shard import Shard
    from dask_ps.state.wire_forms import KeyRef

    spec = TableSpec("t", None, 1, True, np.dtype("float64"), HashPartitioner(1), Add(),
                     Init())
    table = TableShard(spec, 0)
    rng = np.random.default_rng(3)
    keys = rng.integers(-2**62, 2**62, 5000)
    np.testing.assert_array_equal(table.gather(keys, ("p", 1))[:, 0], np.zeros(5000))
    got = table.named_keys(KeyRef(("p", 1), 5000))
    assert got is keys  # arrived in a buffer of its own: kept as it is
    with pytest.raises(KeysNeededError, match="send them"):
        table.named_keys(KeyRef(("p", 1), 5000))  # given once
    table.gather(keys, ("p", 2))
    with pytest.raises(KeysNeededError):
        table.named_keys(KeyRef(("p", 2), 4999))
    with pytest.raises(KeysNeededError):
        table.named_keys(KeyRef(("p", 3), 5000))
    small = keys[: T.RECALL_MIN - 1].copy()
    table.gather(small, ("p", 4))  # too small to keep
    with pytest.raises(KeysNeededError):
        table.named_keys(KeyRef(("p", 4), small.shape[0]))
    old, T.NAMED_BYTES = T.NAMED_BYTES, 3 * keys.nbytes
    try:
        for i in range(5):
            table.gather(keys.copy(), ("q", i))
        assert list(table._named) == [("q", 2), ("q", 3), ("q", 4)]
        assert table._named_bytes == 3 * keys.nbytes
    finally:
        T.NAMED_BYTES = old

    # a shard's push naming keys it does not hold changes nothing; one it holds applies
    shard = Shard(0, 1)
    shard.tables["t"] = TableShard(spec, 0)
    shard.tables["t"].gather(keys, ("p", 7))
    ones = np.ones((5000, 1))
    with pytest.raises(KeysNeededError):
        shard._push([("t", KeyRef(("p", 7), 5000), ones), ("t", KeyRef(("p", 8), 5000), ones)],
                    None, 0, 0, False)
    np.testing.assert_array_equal(shard.tables["t"].gather(keys)[:, 0], np.zeros(5000))
    assert shard.counters["push_calls"] == 0
    shard.tables["t"].gather(keys, ("p", 9))
    shard._push([("t", KeyRef(("p", 9), 5000), ones)], None, 0, 0, False)
    np.testing.assert_array_equal(shard.tables["t"].gather(keys)[:, 0], np.ones(5000))
    assert shard.counters["bytes_pushed"] == ones.nbytes  # the keys were not sent


def test_sparse_shard_memory_per_key():
    """Float32 FTRL: key + weight + z + n are 20 bytes per key; the index and the spare
    room of the row arrays come on top, within the documented bounds."""
    spec = TableSpec("w", None, 1, True, np.dtype("float32"), HashPartitioner(1), FTRL(),
                     Init())
    table = TableShard(spec, 0)
    keys = np.random.default_rng(5).integers(0, 2**63 - 1, 200_000)
    for part in np.array_split(keys, 10):
        table.rows(part)
    n = table.n_rows
    row_bytes = 8 + table.values.itemsize + sum(a.itemsize * a.shape[1]
                                                for a in table.slots.values())
    assert row_bytes == 20
    per_key = table.nbytes / n
    index = table._index.nbytes / n
    assert 8 / H.MAX_LOAD <= index <= 2 * 8 / H.MAX_LOAD
    assert per_key <= row_bytes * 1.5 + index + 1e-9
