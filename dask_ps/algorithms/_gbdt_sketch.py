"""The mergeable sketch GBDT bins are computed from: a deterministic sample of rows.

Bins are computed once, before the first tree, from a *sample of rows chosen by hashing each
row's global id* (Bernoulli sampling with a rate ``sample_count / n_rows``, decided by
``splitmix64(row_id, seed)``). A partition's sketch holds, per feature, the distinct sampled
values and their counts (zeros and NaNs only counted); sketches merge by adding counts, so the
merged sketch — and the bins computed from it (:func:`._gbdt_bins.bin_mapper`) — are the same
for any partitioning of the rows and any merge order. This is LightGBM's construction (bins
from a sample of ``bin_construct_sample_cnt = 200,000`` rows) made distributed; XGBoost's
weighted quantile summaries (Chen & Guestrin, KDD 2016, app. A) would give an error bound
without the sample, but their pruning depends on the merge tree, so bins would change with
the partitioning, and "same bins on 1 and 4 partitions" is a target here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

_JIT = dict(cache=True, nogil=True)

#: Rows sampled for the bins (LightGBM's ``bin_construct_sample_cnt``).
DEFAULT_SAMPLE_COUNT = 200_000

_SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def kernel_array(a, dtype=None) -> np.ndarray:
    """``a`` as the GBDT kernels take it: a C-contiguous, writable ndarray (of ``dtype`` if
    given). Their explicit numba signatures are of writable arrays, so a read-only one (a
    memmap, a pandas 3 copy-on-write Series or ``to_numpy()``) is copied; ``a`` itself
    when it already is such an array (no copy)."""
    return np.require(a, dtype, requirements=["C", "W"])


@numba.njit("void(int64[::1], uint64, uint64[::1])", **_JIT)
def hash_rows(row_ids, seed, out):
    """``out[i] = splitmix64(row_ids[i] + seed · golden)``: a per-row pseudo-random 64-bit word
    that depends only on the row's global id and the seed (Steele et al., OOPSLA 2014)."""
    for i in range(row_ids.shape[0]):
        z = np.uint64(row_ids[i]) + seed * _SPLITMIX_GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out[i] = z ^ (z >> np.uint64(31))


def sample_rows(row_ids, rate: float, seed: int) -> np.ndarray:
    """Boolean mask of the rows kept by the deterministic Bernoulli sample of ``rate``.

    Parameters
    ----------
    row_ids : int64 array (n,)
        Global row ids (a row keeps its id whatever partition holds it).
    rate : float in [0, 1]
    seed : int

    Returns
    -------
    bool array (n,)
    """
    row_ids = np.ascontiguousarray(row_ids, dtype=np.int64)
    if rate >= 1.0:
        return np.ones(row_ids.shape[0], bool)
    h = np.empty(row_ids.shape[0], np.uint64)
    hash_rows(row_ids, np.uint64(seed % 2**64), h)
    return h < np.uint64(int(rate * 2.0**64))


def sample_rate(n_rows_total: int, sample_count: int = DEFAULT_SAMPLE_COUNT) -> float:
    """The Bernoulli rate that samples about ``sample_count`` of ``n_rows_total`` rows."""
    return 1.0 if n_rows_total <= sample_count else sample_count / n_rows_total


@dataclass(frozen=True)
class BinSketch:
    """Sampled values of one or more partitions: exact counts of distinct values per feature.

    Attributes
    ----------
    n_rows : int
        Rows sampled.
    nan_count : int64 array (n_features,)
        NaNs among the sampled rows of each feature.
    feature : int32 array (m,), value : float64 array (m,), count : int64 array (m,)
        Distinct non-zero, non-NaN sampled values, sorted by (feature, value), and how often
        each occurs. Zeros are implied: ``n_rows - nan_count[f] - count[feature == f].sum()``.
    """

    n_rows: int
    nan_count: np.ndarray
    feature: np.ndarray
    value: np.ndarray
    count: np.ndarray

    @property
    def n_features(self) -> int:
        return self.nan_count.shape[0]

    def columns(self, lo: int, hi: int) -> BinSketch:
        """The sketch of features ``lo .. hi - 1`` only, renumbered from 0 (views, no
        copy): what the bins of that range are computed from."""
        a, b = np.searchsorted(self.feature, [lo, hi])
        return BinSketch(self.n_rows, self.nan_count[lo:hi], self.feature[a:b] - np.int32(lo),
                         self.value[a:b], self.count[a:b])

    @classmethod
    def merge(cls, sketches) -> BinSketch:
        """The sketch of the union of the partitions; any order and grouping gives the same."""
        sketches = list(sketches)
        if not sketches:
            raise ValueError("no sketches to merge")
        d = {s.n_features for s in sketches}
        if len(d) != 1:
            raise ValueError(f"sketches of different numbers of features: {sorted(d)}")
        n_rows = sum(s.n_rows for s in sketches)
        nan_count = np.sum([s.nan_count for s in sketches], axis=0, dtype=np.int64)
        if len(sketches) == 1:
            return cls(n_rows, nan_count, sketches[0].feature, sketches[0].value,
                       sketches[0].count)
        value = np.concatenate([s.value for s in sketches])
        count = np.concatenate([s.count for s in sketches])
        base = np.cumsum([0] + [s.value.shape[0] for s in sketches])
        bounds = np.arange(sketches[0].n_features + 1)
        fstart = np.stack([np.searchsorted(s.feature, bounds) + base[i]
                           for i, s in enumerate(sketches)])
        out_f = np.empty(value.shape[0], np.int32)
        out_v = np.empty(value.shape[0])
        out_c = np.empty(value.shape[0], np.int64)
        n = _merge_runs(fstart.astype(np.int64), value, count, out_f, out_v, out_c)
        return cls(n_rows, nan_count, out_f[:n].copy(), out_v[:n].copy(), out_c[:n].copy())


@numba.njit("int64(int64[:, ::1], float64[::1], int64[::1], int32[::1], float64[::1], "
            "int64[::1])", **_JIT)
def _merge_runs(fstart, value, count, out_feature, out_value, out_count):
    """Merge per-feature sorted runs of several sketches, adding the counts of equal values;
    run of feature ``f`` in sketch ``s``: ``fstart[s, f]:fstart[s, f + 1]``. Returns the
    number of entries written."""
    S, d = fstart.shape[0], fstart.shape[1] - 1
    width = 0
    for f in range(d):
        w = 0
        for s in range(S):
            w += fstart[s, f + 1] - fstart[s, f]
        width = max(width, w)
    buf_v = np.empty(width)
    buf_c = np.empty(width, np.int64)
    pos = 0
    for f in range(d):
        n = 0
        for s in range(S):
            for i in range(fstart[s, f], fstart[s, f + 1]):
                buf_v[n] = value[i]
                buf_c[n] = count[i]
                n += 1
        if n == 0:
            continue
        order = np.argsort(buf_v[:n], kind="mergesort")
        for j in range(n):
            i = order[j]
            if j > 0 and buf_v[i] == out_value[pos - 1]:
                out_count[pos - 1] += buf_c[i]
            else:
                out_feature[pos] = f
                out_value[pos] = buf_v[i]
                out_count[pos] = buf_c[i]
                pos += 1
    return pos


def _aggregate(feature, value, count):
    """Add up the counts of equal (feature, value) pairs of sorted arrays."""
    if feature.shape[0] == 0:
        return feature.astype(np.int32), value.astype(np.float64), count.astype(np.int64)
    new = np.empty(feature.shape[0], bool)
    new[0] = True
    new[1:] = (feature[1:] != feature[:-1]) | (value[1:] != value[:-1])
    starts = np.flatnonzero(new)
    return (feature[starts].astype(np.int32), value[starts].astype(np.float64),
            np.add.reduceat(count.astype(np.int64), starts))


def sketch(X, row_ids, rate: float, seed: int = 0, mask=None) -> BinSketch:
    """The sketch of one partition: its rows kept by ``sample_rows(row_ids, rate, seed)``
    (and by ``mask``).

    Parameters
    ----------
    X : float array (n, d) or scipy.sparse matrix (n, d)
        Sparse input contributes its stored entries; absent entries are zeros.
    row_ids : int array (n,)
        Global ids of the rows of ``X``.
    rate : float
        From :func:`sample_rate` of the total number of rows.
    seed : int
    mask : bool array (n,), optional
        Only these rows may be sampled (a fit's rows of positive sample weight: the bins
        are those of the rows of weight 0 dropped, unweighted otherwise). Default: all.

    Returns
    -------
    BinSketch
    """
    keep = sample_rows(row_ids, rate, seed)
    if mask is not None:
        keep &= mask
    if sp.issparse(X):
        Xs = sp.csr_matrix(X)[keep]
        Xs.sum_duplicates()
        d = Xs.shape[1]
        feature = Xs.indices.astype(np.int32)
        value = Xs.data.astype(np.float64)
        nan = np.isnan(value)
        nan_count = np.bincount(feature[nan], minlength=d).astype(np.int64)
        ok = ~nan & (value != 0)
        feature, value = feature[ok], value[ok]
        order = np.lexsort((value, feature))
        feature, value = feature[order], value[order]
    else:
        Xs = np.asarray(X)[keep]
        if Xs.ndim != 2:
            raise ValueError(f"X must be 2-d, got shape {np.shape(X)}")
        d = Xs.shape[1]
        cols = np.sort(np.asarray(Xs.T, dtype=np.float64, order="C"), axis=1)  # NaN last
        nan_count = np.isnan(cols).sum(axis=1).astype(np.int64)
        value = cols.ravel()
        feature = np.repeat(np.arange(d, dtype=np.int32), cols.shape[1])
        ok = ~np.isnan(value) & (value != 0)
        feature, value = feature[ok], value[ok]
    return BinSketch(int(keep.sum()), nan_count,
                     *_aggregate(feature, value, np.ones(value.shape[0], np.int64)))
