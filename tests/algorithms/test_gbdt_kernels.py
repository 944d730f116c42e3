"""GBDT kernels against slow pure-Python twins (bins, histograms, splits, rows, trees)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps.algorithms._gbdt_bins import BinMapper, bin_mapper
from dask_ps.algorithms._gbdt_kernels import (
    PACKED_ROWS,
    SMALL_NODE_SHARE,
    build_hist_dense,
    gather_nodes,
    hist_rows_dense,
    nonzero_rows,
    quantization_scale,
)
from dask_ps.algorithms._gbdt_local import boost_local, level_splits, sharded_splits
from dask_ps.algorithms._gbdt_objectives import get_objective, grad_logloss, grad_softmax
from dask_ps.algorithms._gbdt_shard import HistLayout
from dask_ps.algorithms._gbdt_siblings import expand_siblings, take_pushed
from dask_ps.algorithms._gbdt_sketch import BinSketch, sample_rate, sketch
from dask_ps.algorithms._gbdt_splits import (
    N_SPLIT_COLS,
    P_CAT_L2,
    P_CAT_SMOOTH,
    P_LAMBDA,
    P_MAX_CAT_ONEHOT,
    P_MAX_CAT_THRESHOLD,
    P_MIN_COUNT,
    P_MIN_DATA_PER_GROUP,
    P_MIN_GAIN,
    P_MIN_HESS,
    SPLIT_BIN,
    SPLIT_COLUMN,
    SPLIT_DEFAULT_LEFT,
    SPLIT_GAIN,
    SPLIT_IS_CAT,
    SPLIT_LEFT,
    merge_splits,
    node_totals,
    split_params,
)
from dask_ps.algorithms._gbdt_tree import (
    AUTO_SHARE,
    AUTO_SHARE_ROWS,
    LevelGrower,
    resolve_split_share,
)
from dask_ps.algorithms._gbdt_worker import BinnedPartition

# ----------------------------------------------------------------------------- helpers


def _mixed_data(n=400, seed=0):
    """Numerical columns (one with NaNs, one with few values), a categorical one."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random(n) < 0.2, 1] = np.nan
    X[:, 2] = rng.integers(0, 4, n) * 0.5
    X[:, 4] = rng.integers(0, 12, n)  # categorical
    logit = X[:, 0] + np.where(np.isnan(X[:, 1]), 1.5, X[:, 1]) + np.isin(X[:, 4], [2, 5, 7])
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    return X, y


def _partition(X, y, objective="binary", max_leaves=7, categorical=(4,), n_classes=None,
               min_rows=0.0):
    obj = get_objective(objective, n_classes)
    mapper = bin_mapper(sketch(X, np.arange(X.shape[0]), 1.0), 16, list(categorical), min_rows)
    part = BinnedPartition(X, y, mapper, obj, obj.base_score(y), 2 * max_leaves - 1)
    gb, hb = part.bounds()
    part.gradients(quantization_scale(len(y), gb), quantization_scale(len(y), hb, hessian=True))
    return mapper, part


def _dense_bins(mapper, X):
    """Binned matrix (n, n_cols), whatever the input's format."""
    return mapper.transform(X.toarray() if sp.issparse(X) else X).T


def twin_hist(binned, hist_offsets, node_rows, grad, hess):
    out = np.zeros((len(node_rows), hist_offsets[-1], 3))
    for j, rows in enumerate(node_rows):
        for r in rows:
            for c in range(binned.shape[1]):
                out[j, hist_offsets[c] + binned[r, c]] += (grad[r], hess[r], 1.0)
    return out


def _valid(CL, CR, HL, HR, p, hu):
    return (CL >= p[P_MIN_COUNT] and CR >= p[P_MIN_COUNT] and HL * hu >= p[P_MIN_HESS]
            and HR * hu >= p[P_MIN_HESS])


def _gain(GL, HL, GR, HR, lam, parent, gu, hu):
    hl, hr = HL * hu + lam, HR * hu + lam
    if not (hl > 0 and hr > 0):
        return -np.inf
    gl, gr = GL * gu, GR * gu
    return (gl * gl * hr + gr * gr * hl) / (hl * hr) - parent


def twin_splits(hist, mapper, totals, p, gu, hu, columns):
    """Brute force over every candidate, in the documented tie order; returns per node
    (gain, column, bin, default_left, left categories or None)."""
    result = []
    for k in range(totals.shape[0]):
        G, H, C = totals[k]
        best = (p[P_MIN_GAIN], -1, -1, 0, None)
        if C >= 2 * p[P_MIN_COUNT] and H * hu >= 2 * p[P_MIN_HESS]:
            parent = (G * gu) ** 2 / (H * hu + p[P_LAMBDA])
            for c in columns:
                o, nb = mapper.hist_offsets[c], mapper.n_bins[c]
                h = hist[k, o:o + nb + 1]
                miss = h[nb]
                cands = []
                if mapper.is_categorical[c]:
                    cands = _twin_categorical(h, nb, G, H, C, p, parent, gu, hu)
                else:
                    for t in range(nb):
                        left = h[:t + 1].sum(axis=0)
                        if t < nb - 1 or miss[2] > 0:
                            dl = 1 if miss[2] == 0 and left[2] >= C - left[2] else 0
                            cands.append((left, t, dl, None, p[P_LAMBDA]))
                        if miss[2] > 0 and t < nb - 1:
                            cands.append((left + miss, t, 1, None, p[P_LAMBDA]))
                for left, t, dl, cats, lam in cands:
                    GL, HL, CL = left
                    if not _valid(CL, C - CL, HL, H - HL, p, hu):
                        continue
                    g = _gain(GL, HL, G - GL, H - HL, lam, parent, gu, hu)
                    if g > best[0]:
                        best = (g, c, t, dl, cats)
        result.append(best if best[1] >= 0 else (-np.inf, -1, -1, 0, None))
    return result


def _twin_categorical(h, nb, G, H, C, p, parent, gu, hu):
    """LightGBM's categorical candidates, in its order (constraints other than the group
    size checked by the caller's _valid)."""
    if nb <= p[P_MAX_CAT_ONEHOT]:
        return [(h[b], 1, 0, {b}, p[P_LAMBDA]) for b in range(nb)]
    used = [b for b in range(nb) if h[b, 2] >= p[P_CAT_SMOOTH]]
    order = sorted(used, key=lambda b: (h[b, 0] * gu / (h[b, 1] * hu + p[P_CAT_SMOOTH]),
                                        used.index(b)))
    max_num = min(int(p[P_MAX_CAT_THRESHOLD]), (len(used) + 1) // 2)
    cands = []
    for seq in (order, order[::-1]):
        left = np.zeros(3)
        group = 0.0
        for i, b in enumerate(seq[:max_num]):
            left = left + h[b]
            group += h[b, 2]
            if left[2] < p[P_MIN_COUNT] or left[1] * hu < p[P_MIN_HESS]:
                continue
            CR, HR = C - left[2], H - left[1]
            if CR < p[P_MIN_COUNT] or CR < p[P_MIN_DATA_PER_GROUP] or HR * hu < p[P_MIN_HESS]:
                break
            if group < p[P_MIN_DATA_PER_GROUP]:
                continue
            group = 0.0
            cands.append((left.copy(), i + 1, 0, set(seq[:i + 1]), p[P_LAMBDA] + p[P_CAT_L2]))
    return cands


def _bits(words, nb):
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[:nb]).tolist())


def _check_against_twin(splits, cats, twin, mapper):
    for k, (g, c, t, dl, cset) in enumerate(twin):
        assert splits[k, SPLIT_COLUMN] == c, k
        if c < 0:
            assert splits[k, SPLIT_GAIN] == -np.inf
            continue
        assert splits[k, SPLIT_GAIN] == pytest.approx(g, rel=1e-12)
        assert splits[k, SPLIT_BIN] == t
        assert splits[k, SPLIT_DEFAULT_LEFT] == dl
        if cset is not None:
            assert _bits(cats[k], mapper.n_bins[c]) == cset


# ----------------------------------------------------------------------------- bins


def test_bins_identical_whatever_the_partitioning():
    """The same rows in 1 or 4 partitions (uneven, any merge order), with a sample of rows
    drawn by hashing row ids, give the same bins."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5000, 6))
    X[:, 3] = np.round(X[:, 3])
    X[rng.random(5000) < 0.1, 2] = np.nan
    rate = sample_rate(5000, 1200)
    one = bin_mapper(sketch(X, np.arange(5000), rate, seed=7), 31)
    cuts = [0, 700, 701, 3000, 5000]
    parts = [sketch(X[a:b], np.arange(a, b), rate, seed=7) for a, b in zip(cuts, cuts[1:])]
    four = bin_mapper(BinSketch.merge(parts[::-1]), 31)
    nested = bin_mapper(BinSketch.merge([parts[2], BinSketch.merge(parts[:2]), parts[3]]), 31)
    for m in (four, nested):
        for name in ("features", "n_bins", "hist_offsets", "is_categorical", "zero_bin"):
            np.testing.assert_array_equal(getattr(one, name), getattr(m, name))
        np.testing.assert_array_equal(one.bin_upper, m.bin_upper)
    assert 1000 < sketch(X, np.arange(5000), rate, seed=7).n_rows < 1400  # a sample
    np.testing.assert_array_equal(one.n_bins, [31, 31, 31, 9, 31, 31])  # 9 distinct values
    # a different seed samples other rows: other bins
    other = bin_mapper(sketch(X, np.arange(5000), rate, seed=8), 31)
    assert not np.array_equal(one.bin_upper, other.bin_upper)


def test_bins_of_feature_ranges_join_to_the_bins_of_all():
    """Bins computed per range of features (as the workers do, each from its range of the
    merged sketch) and joined are those of the whole sketch: constant, all-NaN, categorical
    and few-valued columns in any range."""
    X, _ = _mixed_data(600, seed=5)
    X = np.column_stack([X, np.full(600, 3.0), np.full(600, np.nan), X[:, 0] * 2])
    cat = np.zeros(X.shape[1], bool)
    cat[4] = True
    sk = sketch(X, np.arange(600), 1.0)
    whole = bin_mapper(sk, 16, cat, 30.0)
    assert whole.n_columns == 6  # the constant and the all-NaN columns dropped
    for bounds in ([0, 8], [0, 4, 5, 8], list(range(9)), [0, 0, 6, 8]):
        joined = BinMapper.concat([bin_mapper(sk.columns(a, b), 16, cat[a:b], 30.0, a)
                                   for a, b in zip(bounds, bounds[1:])])
        for name in ("n_features", "features", "n_bins", "hist_offsets", "is_categorical",
                     "zero_bin", "column_of", "dtype"):
            np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name))
        np.testing.assert_array_equal(joined.bin_upper, whole.bin_upper)
    bad = np.array([[1.0, 2.5], [2.0, 1.0]])
    with pytest.raises(ValueError, match="categorical feature 1 has the non-integer value"):
        bin_mapper(sketch(bad, np.arange(2), 1.0).columns(1, 2), categorical=[0],
                   feature_offset=1)


def test_binning_dense_and_csr_agree_and_respect_edges():
    rng = np.random.default_rng(2)
    X = sp.random(300, 8, density=0.3, format="csr", random_state=3)
    X.data = np.round(X.data * 20) - 5
    X.data[::17] = np.nan
    dense = X.toarray()
    m = bin_mapper(sketch(X, np.arange(300), 1.0), 6, categorical=[7])
    sm = bin_mapper(sketch(dense, np.arange(300), 1.0), 6, categorical=[7])
    np.testing.assert_array_equal(m.bin_upper, sm.bin_upper)
    binned = m.transform(dense).T
    assert binned.dtype == np.uint8
    indptr, cols, bins = m.transform(X)
    rebuilt = np.tile(m.zero_bin, (300, 1)).astype(np.int64)
    for r in range(300):
        rebuilt[r, cols[indptr[r]:indptr[r + 1]]] = bins[indptr[r]:indptr[r + 1]]
    np.testing.assert_array_equal(rebuilt, binned)
    for c, f in enumerate(m.features):  # twin: bin = number of cuts below x; NaN -> missing
        o, nb = m.hist_offsets[c], m.n_bins[c]
        x = dense[:, f]
        if m.is_categorical[c]:
            cats = list(m.bin_upper[o:o + nb])
            want = [cats.index(v) if v in cats else nb for v in x]
        else:
            want = np.where(np.isnan(x), nb, np.searchsorted(m.bin_upper[o:o + nb - 1], x))
        np.testing.assert_array_equal(binned[:, c], want)
    assert rng is not None


def test_greedy_bins_balance_counts_and_isolate_heavy_values():
    rng = np.random.default_rng(4)
    x = np.concatenate([np.zeros(5000), rng.normal(size=5000)])[:, None]
    m = bin_mapper(sketch(x, np.arange(10000), 1.0), 32)
    b = m.transform(x)[0]
    counts = np.bincount(b, minlength=m.n_bins[0])
    assert m.n_bins[0] <= 32
    assert counts[m.zero_bin[0]] == 5000  # zero has a bin of its own
    others = np.delete(counts, m.zero_bin[0])
    assert others.max() < 3 * 5000 / 31 and others.min() > 0


def test_categorical_bins_and_errors():
    X = np.array([[0.0], [3.0], [3.0], [-1.0], [np.nan], [7.0]] * 10)
    m = bin_mapper(sketch(X, np.arange(60), 1.0), 255, categorical=[0])
    np.testing.assert_array_equal(m.bin_upper[:3], [0.0, 3.0, 7.0])
    np.testing.assert_array_equal(m.transform(np.array([[3.0], [-1.0], [5.0], [np.nan]]))[0],
                                  [1, 3, 3, 3])  # negative, unseen, NaN: the missing bin
    with pytest.raises(ValueError, match="categorical feature 0 has the non-integer value 2.5"):
        bin_mapper(sketch(np.array([[2.5], [1.0]]), np.arange(2), 1.0), categorical=[0])
    # the message said "categories must be integers >= 0", while negative values (-1.5 too)
    # are read as missing, as scikit-learn's HistGradientBoosting reads them
    with pytest.raises(ValueError) as info:
        bin_mapper(sketch(np.array([[0.5], [1.0]]), np.arange(2), 1.0), categorical=[0])
    assert ">= 0" not in str(info.value) and str(info.value).endswith(
        "a category is an integer from 0 to 2147483647; negative values (integer or not) and "
        "NaN are read as missing, as scikit-learn's HistGradientBoosting reads them")
    neg = bin_mapper(sketch(np.array([[-1.5], [1.0], [-2.0]] * 5), np.arange(15), 1.0),
                     categorical=[0])
    np.testing.assert_array_equal(neg.transform(np.array([[-1.5], [1.0], [-2.0]]))[0],
                                  [1, 0, 1])  # missing, category 1, missing
    with pytest.raises(ValueError, match="above the largest"):
        bin_mapper(sketch(np.array([[2.0**40], [1.0]]), np.arange(2), 1.0), categorical=[0])
    with pytest.raises(ValueError, match="categorical feature index 3 out of range"):
        bin_mapper(sketch(X, np.arange(60), 1.0), categorical=[3])


# ----------------------------------------------------------------------------- histograms


@pytest.mark.parametrize("sparse", [False, True])
def test_histograms_equal_twin_and_sibling_subtraction_is_exact(sparse):
    X, y = _mixed_data()
    X[:, 3] = np.where(np.abs(X[:, 3]) < 0.8, 0.0, X[:, 3])  # a sparse-ish column
    Xin = sp.csr_matrix(np.nan_to_num(X, nan=0.0)) if sparse else X
    mapper, part = _partition(Xin, y)
    binned = _dense_bins(mapper, Xin)
    rng = np.random.default_rng(5)
    in_left = rng.random(len(y)) < 0.3
    # node 0 = all rows; split it by hand into nodes 1 (left) and 2 (right)
    order = np.concatenate([np.flatnonzero(in_left), np.flatnonzero(~in_left)])
    part.rows[0] = order
    part.node_start[:3] = [0, 0, in_left.sum()]
    part.node_count[:3] = [len(y), in_left.sum(), (~in_left).sum()]
    got = part.histograms(np.array([0, 1, 2]))
    want = twin_hist(binned, mapper.hist_offsets,
                     [order, np.flatnonzero(in_left), np.flatnonzero(~in_left)],
                     part.grad[0], part.hess[0])
    np.testing.assert_array_equal(got, want)
    # larger = parent - smaller, bit for bit
    out = np.empty((2, got.shape[1], 3))
    expand_siblings(got[:1].copy(), np.array([0]), got[1:2].copy(), np.array([0]),
                    np.array([1]), out)
    np.testing.assert_array_equal(out, got[1:])
    one = np.empty((1, got.shape[1], 3))  # only the larger child kept
    expand_siblings(got[:1].copy(), np.array([0]), got[1:2].copy(), np.array([-1]),
                    np.array([0]), one)
    np.testing.assert_array_equal(one[0], got[2])
    # quantized sums do not depend on the order the rows are added in
    part.rows[0] = order[::-1]
    part.node_count[0] = len(y)
    np.testing.assert_array_equal(part.histograms(np.array([0]))[0], got[0])


def test_a_shard_takes_its_push_into_the_pool_as_sibling_subtraction_and_clears_it():
    rng = np.random.default_rng(11)
    R = 40
    small = rng.integers(-9, 9, (3, R, 3)).astype(np.float64)
    small[:, ::3] = 0.0  # rows without data
    pool = rng.integers(-50, 50, (6, R, 3)).astype(np.float64)
    # pair 0: larger child in its parent's slot 0, smaller one to slot 4; pair 1: only the
    # smaller child, in its parent's slot 1; pair 2: the larger one elsewhere (slot 5)
    parent, small_to, large_to = np.array([0, 1, 2]), np.array([4, 1, -1]), \
        np.array([0, -1, 5])
    want = pool.copy()
    expand_siblings(pool.copy(), parent, small.copy(), small_to, large_to, want)
    push = small.copy()
    take_pushed(pool, parent, push, small_to, large_to)
    np.testing.assert_array_equal(pool, want)
    assert not push.any()
    # a root step: the push copied to the roots' slots
    push = small[:2].copy()
    take_pushed(pool, np.full(2, -1), push, np.array([3, 2]), np.full(2, -1))
    np.testing.assert_array_equal(pool[[3, 2]], small[:2])
    assert not push.any()


# ----------------------------------------------------------------------------- split finding


def _level(seed=0, n_nodes=4, params=None):
    X, y = _mixed_data(600, seed)
    mapper, part = _partition(X, y)
    rng = np.random.default_rng(seed)
    node = rng.integers(0, n_nodes, len(y))
    part.rows[0] = np.argsort(node, kind="stable")
    counts = np.bincount(node, minlength=n_nodes)
    part.node_start[:n_nodes] = np.concatenate([[0], np.cumsum(counts)[:-1]])
    part.node_count[:n_nodes] = counts
    hist = part.histograms(np.arange(n_nodes))
    totals = node_totals(hist, mapper.hist_offsets)
    gb, hb = part.bounds()
    gu, hu = 1 / quantization_scale(len(y), gb), 1 / quantization_scale(len(y), hb, True)
    p = split_params(min_samples_leaf=5, min_data_per_group=10, cat_smooth=5, reg_lambda=0.5) \
        if params is None else params
    return mapper, hist, totals, p, gu, hu


def test_histogram_rows_written_as_a_push_equal_the_histograms():
    rng = np.random.default_rng(5)
    n, widths = 300, np.array([7, 1, 40, 12])
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    binned = np.ascontiguousarray(
        (rng.random((4, n)) * widths[:, None]).astype(np.uint8))
    rows = rng.permutation(n).astype(np.int32)[None, :]
    # nodes of many rows and of few (fewer than half a column's bins: only the bins with
    # rows are visited)
    node_start = np.array([0, 0, 250, 290], np.int64)
    node_count = np.array([n, 250, 50, 6], np.int64)
    build = np.array([2, 0, 3], np.int64)
    grad = rng.integers(-50, 50, (1, n)).astype(np.float64)
    hess = rng.integers(1, 9, (1, n)).astype(np.float64)
    hist = np.zeros((3, offsets[-1], 3))
    by_row = binned.T.copy()  # the bins row by row (small nodes are read from them)
    build_hist_dense(binned, by_row, rows, node_start, node_count, 4, build, grad, hess,
                     offsets, hist)
    for c_lo, c_hi in ((0, 4), (2, 4)):  # every column; a shard's range
        rows_pad, key0 = int(offsets[c_hi] - offsets[c_lo]) + 3, 1000
        part = np.ascontiguousarray(hist[:, offsets[c_lo]: offsets[c_hi]])
        part = np.concatenate([part, np.zeros((3, 3, 3))], axis=1)
        want_k, want_v = np.zeros(1000, np.int64), np.zeros((1000, 3))
        m = nonzero_rows(part, rows_pad, 0, key0, want_k, want_v, 0)
        keys, values = np.zeros(1000, np.int64), np.zeros((1000, 3))
        gathered = gather_nodes(rows, node_start, node_count, 4, build, grad, hess)
        assert hist_rows_dense(binned, by_row, *gathered, offsets, c_lo, c_hi, rows_pad, key0,
                               keys, values, 0) == m
        np.testing.assert_array_equal(keys[:m], want_k[:m])
        np.testing.assert_array_equal(values[:m], want_v[:m])
        assert m < part[..., 2].size and (values[:m, 2] > 0).all()


def test_histograms_of_nodes_beyond_one_packed_piece_are_exact_at_the_bounds():
    """(grad, hess, count) words packed in one int64 are summed PACKED_ROWS rows at a
    time: nodes of more rows, with every gradient at +-bound and every hessian at its bound
    (the largest sums the scales allow), give the exact sums, as the pushed rows do."""
    rng = np.random.default_rng(11)
    n = 2 * PACKED_ROWS + 123
    widths = np.array([2, 5, 255, 3, 9])
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    binned = np.ascontiguousarray((rng.random((5, n)) * widths[:, None]).astype(np.uint8))
    gs, hs = quantization_scale(n, 0.7), quantization_scale(n, 0.3, hessian=True)
    grad = np.rint(np.where(rng.random((1, n)) < 0.5, -0.7, 0.7) * gs)
    grad[0, : PACKED_ROWS + 7] = np.rint(0.7 * gs)  # one sign through a whole piece
    grad[0, PACKED_ROWS + 7: 2 * PACKED_ROWS + 14] = np.rint(-0.7 * gs)  # and the other
    hess = np.full((1, n), np.rint(0.3 * hs))
    rows = rng.permutation(n).astype(np.int32)[None, :]
    node_start = np.array([0, 0, n - 40], np.int64)
    node_count = np.array([n, n - 40, 40], np.int64)
    build = np.array([0, 1, 2], np.int64)
    hist = np.zeros((3, offsets[-1], 3))
    by_row = binned.T.copy()
    build_hist_dense(binned, by_row, rows, node_start, node_count, 4, build, grad, hess,
                     offsets, hist)
    for j, v in enumerate(build):
        r = rows[0, node_start[v]: node_start[v] + node_count[v]]
        for c in range(5):
            o, w = offsets[c], widths[c]
            b = binned[c, r]
            np.testing.assert_array_equal(hist[j, o: o + w, 0],
                                          np.bincount(b, grad[0, r], minlength=w))
            np.testing.assert_array_equal(hist[j, o: o + w, 1],
                                          np.bincount(b, hess[0, r], minlength=w))
            np.testing.assert_array_equal(hist[j, o: o + w, 2], np.bincount(b, minlength=w))
    keys, values = np.zeros(3 * offsets[-1] + 1, np.int64), np.zeros((3 * offsets[-1] + 1, 3))
    gathered = gather_nodes(rows, node_start, node_count, 4, build, grad, hess)
    m = hist_rows_dense(binned, by_row, *gathered, offsets, 0, 5, int(offsets[-1]), 0, keys,
                        values, 0)
    flat = hist.reshape(-1, 3)
    held = np.flatnonzero(flat[:, 2])
    np.testing.assert_array_equal(keys[:m], held)
    np.testing.assert_array_equal(values[:m], flat[held])


def _assert_bincounts(hist, binned, rows, node_start, node_count, build, offsets, grad, hess):
    """``hist[j]`` holds bincount's (grad, hess, count) sums of node ``build[j]``'s rows."""
    for j, v in enumerate(build):
        r = rows[0, node_start[v]: node_start[v] + node_count[v]]
        for c in range(binned.shape[0]):
            o, w, b = offsets[c], offsets[c + 1] - offsets[c], binned[c, r]
            np.testing.assert_array_equal(hist[j, o: o + w], np.stack(
                [np.bincount(b, grad[0, r], w), np.bincount(b, hess[0, r], w),
                 np.bincount(b, minlength=w)], axis=1))


def test_packed_words_are_unpacked_only_where_a_bin_fills():
    """A bin's packed word holds up to PACKED_ROWS rows: between pieces only the bins
    holding more than half that many are unpacked, and the next piece takes as many rows
    as the fullest bin left has room for."""
    from dask_ps.algorithms._gbdt_passes import GRAD_SHIFT, HESS_SHIFT, _room

    word = (np.int64(-3) << GRAD_SHIFT) + (np.int64(5) << HESS_SHIFT)
    sp_ = np.zeros((2, 4), np.int64)
    sg = np.zeros((3, 2, 4), np.int64)
    sp_[0, 1] = word + 10
    sp_[1, 3] = word + 300
    assert _room(sp_, sg, 2) == (PACKED_ROWS - 300, False) and not sg.any()
    sp_[1, 2] = word + PACKED_ROWS // 2 + 1
    assert _room(sp_, sg, 2) == (PACKED_ROWS // 2, True)
    assert sp_[1, 2] == 0 and sp_[1, 3] == word + 300 and sp_[0, 1] == word + 10
    np.testing.assert_array_equal(sg[:, 1, 2], [-3, 5, PACKED_ROWS // 2 + 1])
    assert np.count_nonzero(sg) == 3


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_bins_of_many_rows_at_the_bounds_are_exact(dtype):
    """A column of one bin (every row in it), one of two, one of 255, gradients at +-bound
    in long runs of one sign: a large node (column passes) and a small one (copied rows)
    of several pieces each give bincount's sums, as histograms and as pushed rows."""
    rng = np.random.default_rng(23)
    n = 48 * PACKED_ROWS
    widths = np.array([1, 2, 255, 9])
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    binned = np.ascontiguousarray((rng.random((4, n)) * widths[:, None]).astype(dtype))
    gs, hs = quantization_scale(n, 0.9), quantization_scale(n, 0.2, hessian=True)
    sign = np.where(np.arange(n) // (3 * PACKED_ROWS) % 2 == 0, 1.0, -1.0)
    grad, hess = np.rint(sign * 0.9 * gs)[None, :], np.full((1, n), np.rint(0.2 * hs))
    rows = np.arange(n, dtype=np.int32)[None, :]  # runs of one sign stay together
    sizes = [n - PACKED_ROWS - 500, PACKED_ROWS + 500]  # large, small
    assert sizes[1] < SMALL_NODE_SHARE * n < sizes[0]
    node_start, node_count = np.array([0, sizes[0]]), np.array(sizes)
    build = np.array([0, 1], np.int64)
    hist = np.zeros((2, offsets[-1], 3))
    build_hist_dense(binned, binned.T.copy(), rows, node_start, node_count, 4, build, grad,
                     hess, offsets, hist)
    _assert_bincounts(hist, binned, rows, node_start, node_count, build, offsets, grad, hess)
    size = hist[..., 0].size + 1
    keys, values = np.zeros(size, np.int64), np.zeros((size, 3))
    gathered = gather_nodes(rows, node_start, node_count, 4, build, grad, hess)
    m = hist_rows_dense(binned, binned.T.copy(), *gathered, offsets, 0, 4, int(offsets[-1]),
                        0, keys, values, 0)
    np.testing.assert_array_equal(values[:m], hist.reshape(-1, 3)[keys[:m]])
    assert m == np.count_nonzero(hist[..., 2])


@pytest.mark.parametrize("dtype, widths", [(np.uint8, [3, 256, 17, 1, 60]),
                                           (np.uint16, [300, 2, 1000, 5, 9])])
def test_small_nodes_read_from_the_rows_by_row_give_the_same_sums(dtype, widths):
    """Nodes holding less than SMALL_NODE_SHARE of the rows are histogrammed from their rows
    copied out of the row-major bins (one of more than PACKED_ROWS rows: unpacked pieces),
    the others column by column: every sum is bincount's, for the whole histograms and a
    shard's rows of them written as a push."""
    rng = np.random.default_rng(17)
    n = 40 * PACKED_ROWS
    widths = np.array(widths)
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    binned = np.ascontiguousarray((rng.random((5, n)) * widths[:, None]).astype(dtype))
    rows = rng.permutation(n).astype(np.int32)[None, :]
    sizes = [n // 2, PACKED_ROWS + 100, 37, n // 2 - PACKED_ROWS - 137]  # small: the 2nd, 3rd
    assert sizes[1] < SMALL_NODE_SHARE * n < sizes[3]
    node_start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    node_count = np.array(sizes, np.int64)
    build = np.array([1, 0, 2, 3], np.int64)
    grad = rng.integers(-50, 50, (1, n)).astype(np.float64)
    hess = rng.integers(1, 9, (1, n)).astype(np.float64)
    hist = np.zeros((4, offsets[-1], 3))
    build_hist_dense(binned, binned.T.copy(), rows, node_start, node_count, 4, build, grad,
                     hess, offsets, hist)
    _assert_bincounts(hist, binned, rows, node_start, node_count, build, offsets, grad, hess)
    c_lo, c_hi = 1, 4  # a shard's columns
    part = np.ascontiguousarray(hist[:, offsets[c_lo]: offsets[c_hi]])
    rows_pad = part.shape[1]
    want_k, want_v = np.zeros(part.size, np.int64), np.zeros((part.size // 3, 3))
    m = nonzero_rows(part, rows_pad, 0, 0, want_k, want_v, 0)
    keys, values = np.zeros(part.size, np.int64), np.zeros((part.size // 3, 3))
    gathered = gather_nodes(rows, node_start, node_count, 4, build, grad, hess)
    assert hist_rows_dense(binned, binned.T.copy(), *gathered, offsets, c_lo, c_hi, rows_pad, 0,
                           keys, values, 0) == m
    np.testing.assert_array_equal(keys[:m], want_k[:m])
    np.testing.assert_array_equal(values[:m], want_v[:m])


def test_push_carries_the_rows_holding_data_and_adds_up_to_the_histograms():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6))
    mapper = bin_mapper(sketch(X, np.arange(400), 1.0), 31)
    L = HistLayout.make(mapper, 2, 4, 6, 5)
    n_build, R = 3, L.rows_pad
    hist = np.zeros((n_build, 2 * R, 3))
    data = rng.random((n_build, 2 * R)) < 0.3
    hist[data] = rng.integers(1, 9, (int(data.sum()), 3))
    scalars, instr = np.arange(1.0, 6.0), np.arange(1.0, 8.0)
    keys = np.full(L.push_size, -1, np.int64)
    values = np.zeros((L.push_size, L.ncols))
    def rows_of(s, key0, keys, values, at):
        return nonzero_rows(hist, R, s, key0, keys, values, at)

    m = L.fill_push(rows_of, scalars, instr, keys, values)
    per_area = -(-7 // L.ncols)
    assert m == data.sum() + -(-5 // L.ncols) + 2 * per_area  # no empty histogram row
    assert (np.diff(keys[:m]) > 0).all()  # ascending: the plan needs no reordering
    table = np.zeros((L.n_keys, L.ncols))
    table[keys[:m]] += values[:m]
    for s in range(2):
        block = table[s * L.block: (s + 1) * L.block]
        np.testing.assert_array_equal(block[: n_build * R].reshape(n_build, R, 3),
                                      hist[:, s * R: (s + 1) * R])
        np.testing.assert_array_equal(
            block[L.first_instr: L.first_instr + per_area].ravel()[:7], instr)
    np.testing.assert_array_equal(
        table[L.first_scalar: L.first_scalar + L.scalar_keys].ravel()[:5], scalars)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_find_splits_equals_brute_force(seed):
    mapper, hist, totals, p, gu, hu = _level(seed)
    splits, cats = level_splits(hist, mapper, totals, p, gu, hu)
    twin = twin_splits(hist, mapper, totals, p, gu, hu, range(mapper.n_columns))
    _check_against_twin(splits, cats, twin, mapper)
    assert (splits[:, SPLIT_COLUMN] >= 0).all()
    # left sums are the histogram's: the children's totals
    for k in range(len(totals)):
        assert splits[k, SPLIT_LEFT + 2] + splits[k, SPLIT_LEFT + 5] == totals[k, 2]


def test_categorical_one_vs_rest_equals_brute_force():
    p = split_params(min_samples_leaf=5, max_cat_to_onehot=16)
    mapper, hist, totals, _, gu, hu = _level(1, params=p)
    splits, cats = level_splits(hist, mapper, totals, p, gu, hu)
    _check_against_twin(splits, cats, twin_splits(hist, mapper, totals, p, gu, hu,
                                                  range(mapper.n_columns)), mapper)
    col = mapper.n_columns - 1  # the categorical column alone
    s, c = level_splits(hist[:, mapper.hist_offsets[col]:], mapper, totals, p, gu, hu, col,
                        col + 1, row0=mapper.hist_offsets[col])
    assert (s[:, SPLIT_IS_CAT] == 1).all() and (s[:, SPLIT_BIN] == 1).all()
    _check_against_twin(s, c, twin_splits(hist, mapper, totals, p, gu, hu, [col]), mapper)


def test_split_finding_on_column_ranges_merges_to_the_global_best():
    """What the shards and the driver do: each range's answer is the brute-force best over
    that range, and the merge of all ranges (any order) is the global best."""
    mapper, hist, totals, p, gu, hu = _level(3, n_nodes=6)
    glob, glob_cat = level_splits(hist, mapper, totals, p, gu, hu)
    for n_shards in (2, 3, 5, 9):
        bounds = mapper.column_bounds(n_shards)
        answers = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            rows = slice(mapper.hist_offsets[lo], mapper.hist_offsets[hi])
            s, c = level_splits(hist[:, rows], mapper, totals, p, gu, hu, lo, hi,
                                row0=mapper.hist_offsets[lo])
            _check_against_twin(s, c, twin_splits(hist, mapper, totals, p, gu, hu,
                                                  range(lo, hi)), mapper)
            answers.append((s, c))
        for order in (answers, answers[::-1]):
            best, best_cat = order[0][0].copy(), order[0][1].copy()
            for s, c in order[1:]:
                merge_splits(best, best_cat, s, c)
            np.testing.assert_array_equal(best, glob)
            np.testing.assert_array_equal(best_cat, glob_cat)


def test_missing_alone_on_the_left_when_the_first_bins_are_empty():
    """A node without rows in the lowest bins whose missing rows differ from the others:
    the split "missing | values" is found at the first threshold, missing left, as the
    brute force finds it (not as its mirror, values | missing, at the last threshold)."""
    x = np.tile([1.0, 2.0, 3.0, 4.0, np.nan], 60)
    y = np.isnan(x).astype(float)
    mapper, part = _partition(x[:, None], y, categorical=())
    keep = np.flatnonzero(x != 1.0)  # the node: bin 0 is empty
    part.rows[0, :keep.size] = keep
    part.node_start[0], part.node_count[0] = 0, keep.size
    hist = part.histograms(np.array([0]))
    totals = node_totals(hist, mapper.hist_offsets)
    gb, hb = part.bounds()
    gu, hu = 1 / quantization_scale(300, gb), 1 / quantization_scale(300, hb, True)
    p = split_params(min_samples_leaf=5)
    s, c = level_splits(hist, mapper, totals, p, gu, hu)
    _check_against_twin(s, c, twin_splits(hist, mapper, totals, p, gu, hu, [0]), mapper)
    assert s[0, SPLIT_BIN] == 0 and s[0, SPLIT_DEFAULT_LEFT] == 1


def test_ties_go_to_the_lower_column():
    X, y = _mixed_data(300)
    X = np.hstack([X[:, :1], X[:, :1], X[:, :1]])  # three identical columns
    mapper, part = _partition(X, y, categorical=())
    hist = part.histograms(np.array([0]))
    totals = node_totals(hist, mapper.hist_offsets)
    gb, hb = part.bounds()
    gu, hu = 1 / quantization_scale(300, gb), 1 / quantization_scale(300, hb, True)
    for bounds in ([0, 3], [0, 1, 2, 3], [0, 2, 3]):
        s, _ = sharded_splits(hist, mapper, np.array(bounds), totals, split_params(), gu, hu)
        assert s[0, SPLIT_COLUMN] == 0


# ----------------------------------------------------------------------------- partition, grower


@pytest.mark.parametrize("sparse", [False, True])
def test_partition_rows_equals_twin(sparse):
    X, y = _mixed_data(500, 4)
    Xin = sp.csr_matrix(np.nan_to_num(X, nan=0.0)) if sparse else X
    mapper, part = _partition(Xin, y)
    binned = _dense_bins(mapper, Xin)
    hist = part.histograms(np.array([0]))
    totals = node_totals(hist, mapper.hist_offsets)
    gb, hb = part.bounds()
    p = split_params(min_samples_leaf=5, min_data_per_group=10, cat_smooth=5)
    gu, hu = 1 / quantization_scale(500, gb), 1 / quantization_scale(500, hb, True)
    # every column once: force a split on it by finding the best within that column
    for c in range(mapper.n_columns):
        rows = slice(mapper.hist_offsets[c], mapper.hist_offsets[c + 1])
        s, cat = level_splits(hist[:, rows], mapper, totals, p, gu, hu, c, c + 1,
                              row0=mapper.hist_offsets[c])
        if s[0, SPLIT_COLUMN] < 0:
            continue
        part.rows[0] = np.arange(500)
        part.node_start[0], part.node_count[0] = 0, 500
        part.partition([0], [1], [2], s, cat)
        b = binned[:, c].astype(np.int64)
        nb = mapper.n_bins[c]
        if s[0, SPLIT_IS_CAT]:
            go = np.isin(b, list(_bits(cat[0], nb)))
        else:
            go = np.where(b == nb, s[0, SPLIT_DEFAULT_LEFT] == 1, b <= s[0, SPLIT_BIN])
        np.testing.assert_array_equal(part.rows[0, :part.node_count[1]], np.flatnonzero(go))
        np.testing.assert_array_equal(part.rows[0, part.node_count[1]:500], np.flatnonzero(~go))
        assert part.node_start[2] == part.node_count[1] == s[0, SPLIT_LEFT + 2]


def _plan(g, nodes, gains, columns=None, sums=None):
    s = np.zeros((len(nodes), N_SPLIT_COLS))
    s[:, SPLIT_GAIN] = gains
    s[:, SPLIT_COLUMN] = 0 if columns is None else columns
    if sums is not None:
        s[:, SPLIT_LEFT:SPLIT_LEFT + 6] = sums
    return g.level(np.array(nodes), s, np.zeros((len(nodes), 1), np.uint32))


def test_level_grower_spends_the_leaf_budget_on_the_highest_gains():
    g = LevelGrower(2, max_leaf_nodes=4, max_depth=None, min_samples_leaf=1,
                    min_child_weight=0.0, hess_unit=1.0, n_cat_words=1)
    g.n_leaves[:] = [2, 1]  # tree 0 may split 2 more nodes, tree 1 three
    g.n_nodes[:] = [5, 3]
    # tree 0: nodes 1, 2, 3; tree 1 (ids 7..13): 7, 8 (8 without a valid split)
    plan = _plan(g, [1, 2, 3, 7, 8], [1.0, 5.0, 5.0, 0.5, 0.1], [0, 0, 0, 0, -1])
    np.testing.assert_array_equal(plan.split_node, [2, 3, 7])  # ties: lower node id
    np.testing.assert_array_equal(plan.left, [5, 7, 10])
    np.testing.assert_array_equal(g.n_leaves, [4, 2])
    assert g.is_cand[1] == 1 and g.is_cand[8] == 0  # 1 waits (tree 0 has no budget left)


def test_level_grower_numbers_children_and_plans_the_next_level():
    g = LevelGrower(2, max_leaf_nodes=8, max_depth=None, min_samples_leaf=10,
                    min_child_weight=0.0, hess_unit=1.0, n_cat_words=1)
    # tree 0: children of 30 and 70 rows (both open, left built); tree 1: 50 and 15 rows
    # (only the left open: the right, smaller, is built for the subtraction)
    plan = _plan(g, g.roots(), 1.0, sums=[[0, 30, 30, 0, 70, 70], [0, 50, 50, 0, 15, 15]])
    np.testing.assert_array_equal(plan.split_node, [0, 15])
    np.testing.assert_array_equal(plan.left, [1, 16])
    np.testing.assert_array_equal(plan.right, [2, 17])
    np.testing.assert_array_equal(plan.build, [1, 17])
    np.testing.assert_array_equal(plan.parent, [0, 15])
    np.testing.assert_array_equal(plan.open_nodes, [1, 2, 16])
    np.testing.assert_array_equal(plan.small_to, [1, -1])
    np.testing.assert_array_equal(plan.large_to, [2, 16])
    np.testing.assert_array_equal(g.n_leaves, [2, 2])
    np.testing.assert_array_equal(g.depth[[1, 2, 16, 17]], 1)
    np.testing.assert_array_equal(g.totals[[1, 17], 2], [30, 15])


def test_best_first_steps_spend_a_share_of_the_budget_and_keep_the_rest_waiting():
    g = LevelGrower(1, max_leaf_nodes=9, max_depth=None, min_samples_leaf=1,
                    min_child_weight=0.0, hess_unit=1.0, n_cat_words=1, split_share=0.5)
    sums = [0, 10, 10, 0, 10, 10]
    plan = _plan(g, [0], 1.0, sums=[sums])  # budget 8: a step may spend 4
    plan = _plan(g, plan.open_nodes, [3.0, 2.0], sums=[sums, sums])
    np.testing.assert_array_equal(plan.split_node, [1, 2])
    # 4 new candidates, budget 5 (share: 3): the three best; node 3 waits
    plan = _plan(g, plan.open_nodes, [1.0, 9.0, 8.0, 7.0], sums=[sums] * 4)
    np.testing.assert_array_equal(plan.split_node, [4, 5, 6])
    assert g.is_cand[3] == 1
    plan = _plan(g, plan.open_nodes, [0.5] * 6, sums=[sums] * 6)  # budget 2 (share: 1)
    np.testing.assert_array_equal(plan.split_node, [3])  # the one that waited wins
    plan = _plan(g, plan.open_nodes, [0.1] * 2, sums=[sums] * 2)  # budget 1
    np.testing.assert_array_equal(plan.split_node, [7])  # ties: lower node id
    assert g.n_leaves[0] == 9 and not _plan(g, plan.open_nodes, [], sums=None).split_node.size


def test_a_gain_floor_splits_every_candidate_reaching_it_in_one_step():
    g = LevelGrower(2, max_leaf_nodes=9, max_depth=None, min_samples_leaf=1,
                    min_child_weight=0.0, hess_unit=1.0, n_cat_words=1, split_share=0.1,
                    gain_floor=np.array([2.0, np.inf]))
    sums = [0, 10, 10, 0, 10, 10]
    roots = g.roots()  # 0 and 17
    plan = _plan(g, roots, 1.0, sums=[sums] * 2)
    np.testing.assert_array_equal(plan.split_node, roots)
    # tree 0: both children reach the floor (the share alone allows 1 of budget 7);
    # tree 1 (no floor): the share's one split, the best
    plan = _plan(g, plan.open_nodes, [3.0, 2.5, 3.0, 2.5], sums=[sums] * 4)
    np.testing.assert_array_equal(plan.split_node, [1, 2, 18])
    # tree 0: 9 and 8 reach the floor, 1.5 and 1.0 do not: two splits, not one; tree 1:
    # node 19 (2.5) waited and beats its new children (0.5, 0.25)
    plan = _plan(g, plan.open_nodes, [1.0, 9.0, 8.0, 1.5, 0.5, 0.25], sums=[sums] * 6)
    np.testing.assert_array_equal(plan.split_node, [4, 5, 19])
    np.testing.assert_array_equal(g.frontier_gain(), [1.5, 0.5])  # 1.5: node 6
    # a tree without candidates left, its budget not spent, has no floor to pass on
    g.is_cand[17:] = 0
    np.testing.assert_array_equal(g.frontier_gain(), [1.5, np.inf])
    # a gain left that is rounding noise against the tree's best split is no floor
    g.split[6, SPLIT_GAIN] = 1e-13
    np.testing.assert_array_equal(g.frontier_gain(), [1.0, np.inf])  # node 3 is next
    g.split[3, SPLIT_GAIN] = 1e-14
    np.testing.assert_array_equal(g.frontier_gain(), [np.inf, np.inf])
    # a step that spends the budget on every candidate leaves none (and never evaluates
    # their children): the tree passes on the floor it grew with
    g = LevelGrower(1, max_leaf_nodes=4, max_depth=None, min_samples_leaf=1,
                    min_child_weight=0.0, hess_unit=1.0, n_cat_words=1, split_share=0.1,
                    gain_floor=np.array([2.0]))
    plan = _plan(g, [0], 5.0, sums=[sums])
    plan = _plan(g, plan.open_nodes, [3.0, 2.5], sums=[sums] * 2)
    np.testing.assert_array_equal(plan.split_node, [1, 2])
    assert g.n_leaves[0] == 4 and not plan.open_nodes.size
    np.testing.assert_array_equal(g.frontier_gain(), [2.0])


def test_auto_split_share_is_level_wise_on_small_data_and_best_first_on_large():
    assert resolve_split_share("auto", AUTO_SHARE_ROWS - 1) == 1.0
    assert resolve_split_share("auto", AUTO_SHARE_ROWS) == AUTO_SHARE < 1.0
    assert resolve_split_share(0.25, 10**7) == 0.25
    with pytest.raises(ValueError, match="split_share"):
        resolve_split_share("best", 10)


# ----------------------------------------------------------------------------- prediction


def twin_predict(ens, X):
    f = ens.flat()
    out = np.repeat(ens.base_score[:, None], X.shape[0], axis=1)
    for i in range(X.shape[0]):
        for t in range(ens.n_trees):
            v = f["tree_start"][t]
            while f["left"][v] >= 0:
                x = X[i, f["feature"][v]]
                if np.isnan(x):
                    go = f["default_left"][v] == 1
                elif f["is_cat"][v]:
                    words = f["cat_words"][f["cat_start"][v]:f["cat_start"][v] + f["cat_len"][v]]
                    go = x >= 0 and x == int(x) and int(x) in _bits(words, 32 * len(words))
                else:
                    go = x <= f["threshold"][v]
                v = f["left"][v] if go else f["right"][v]
            out[f["tree_class"][t], i] += f["value"][v]
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_prediction_equals_twin_and_training_scores(sparse):
    X, y = _mixed_data(800, 6)
    if sparse:
        X = sp.csr_matrix(np.nan_to_num(X, nan=0.0))
    r = boost_local(X, y, n_estimators=8, max_leaf_nodes=8, min_samples_leaf=5,
                    categorical_features=[4], min_data_per_group=10, cat_smooth=5)
    assert r.ensemble.feature_importances("split")[4] > 0  # categorical splits happened
    Xt, _ = _mixed_data(200, 7)
    Xt[:5, 4] = [-1, 2.5, 99, np.nan, 5]  # negative, non-integer, unseen, missing
    Xt[5:9, 0] = [np.inf, -np.inf, np.nan, 0]
    Xt = sp.csr_matrix(np.nan_to_num(Xt, nan=0.0)) if sparse else Xt
    dense = Xt.toarray() if sparse else Xt
    np.testing.assert_allclose(r.predict_raw(Xt), twin_predict(r.ensemble, dense), rtol=1e-13)
    # the scores accumulated by routing binned rows are those of routing raw rows
    assert r.history[-1]["train_loss"] == pytest.approx(
        r.objective.loss(r.objective.check_y(y), r.predict_raw(X)), rel=1e-12)


def test_more_than_255_bins_use_uint16_and_thresholds_match_bins():
    rng = np.random.default_rng(17)
    X = rng.normal(size=(3000, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=3000) > 0).astype(float)
    r = boost_local(X, y, n_estimators=5, max_leaf_nodes=8, max_bins=1000)
    assert r.mapper.dtype == np.uint16 and r.mapper.n_bins.max() > 255
    f = r.ensemble.flat()
    inner = f["left"] >= 0
    col = r.mapper.column_of[f["feature"][inner]]
    np.testing.assert_array_equal(  # raw threshold = upper edge of the threshold bin
        f["threshold"][inner],
        r.mapper.bin_upper[r.mapper.hist_offsets[col] + f["threshold_bin"][inner]])
    assert f["threshold_bin"][inner].max() > 255
    np.testing.assert_allclose(r.predict_raw(X), twin_predict(r.ensemble, X), rtol=1e-13)


def test_feature_importances_add_up():
    X, y = _mixed_data(600, 8)
    r = boost_local(X, y, n_estimators=5, max_leaf_nodes=6, min_samples_leaf=5)
    f = r.ensemble.flat()
    inner = f["left"] >= 0
    assert r.ensemble.feature_importances("split").sum() == inner.sum()
    assert r.ensemble.feature_importances("gain").sum() == pytest.approx(f["gain"][inner].sum())
    assert r.ensemble.feature_importances("gain")[0] > r.ensemble.feature_importances("gain")[3]
    with pytest.raises(ValueError, match="'gain' or 'split'"):
        r.ensemble.feature_importances("cover")


# ----------------------------------------------------------------------------- objectives


def test_gradient_kernels_equal_numpy():
    rng = np.random.default_rng(9)
    raw = rng.normal(size=(3, 50)) * 3
    y = rng.integers(0, 3, 50).astype(float)
    g, h = np.empty((3, 50)), np.empty((3, 50))
    grad_softmax(y, raw, 2.0**40, 2.0**40, g, h, np.zeros(0))
    p = np.exp(raw) / np.exp(raw).sum(axis=0)
    onehot = (np.arange(3)[:, None] == y).astype(float)
    np.testing.assert_allclose(g / 2.0**40, p - onehot, atol=1e-11)
    np.testing.assert_allclose(h / 2.0**40, 1.5 * p * (1 - p), atol=1e-11)
    yb = (y > 0).astype(float)
    grad_logloss(yb, raw[0].copy(), 2.0**40, 2.0**40, g[0], h[0], np.zeros(0))
    s = 1 / (1 + np.exp(-raw[0]))
    np.testing.assert_allclose(g[0] / 2.0**40, s - yb, atol=1e-11)
    np.testing.assert_allclose(h[0] / 2.0**40, s * (1 - s), atol=1e-11)
    assert np.array_equal(g, np.rint(g))  # quantized: integers
    w = rng.integers(0, 4, 50).astype(float)  # sample weights multiply each row's pair
    gw, hw = np.empty((3, 50)), np.empty((3, 50))
    grad_logloss(yb, raw[0].copy(), 2.0**40, 2.0**40, gw[0], hw[0], w)
    np.testing.assert_allclose(gw[0] / 2.0**40, (s - yb) * w, atol=1e-11)
    np.testing.assert_allclose(hw[0] / 2.0**40, s * (1 - s) * w, atol=1e-11)
    grad_softmax(y, raw, 2.0**40, 2.0**40, gw, hw, w)
    np.testing.assert_allclose(gw / 2.0**40, (p - onehot) * w, atol=1e-11)
    np.testing.assert_allclose(hw / 2.0**40, 1.5 * p * (1 - p) * w, atol=1e-11)
    s = quantization_scale(1000, 1.0)  # the packed sums of PACKED_ROWS rows decide
    assert PACKED_ROWS * (s + 0.5) <= 2**27 - 1 < PACKED_ROWS * (2 * s + 0.5)  # 28 bits signed
    sh = quantization_scale(1000, 1.0, hessian=True)  # 25 bits unsigned
    assert PACKED_ROWS * (sh + 0.5) <= 2**25 - 1 < PACKED_ROWS * (2 * sh + 0.5)
    big = quantization_scale(2**40, 1.0)  # so many rows that float64's 2**52 decides
    assert 2**40 * (big + 0.5) <= 2**52 < 2**40 * (2 * big + 0.5)
