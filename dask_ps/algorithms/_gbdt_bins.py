"""Quantile bins of GBDT: the bin mapper (from a merged :class:`BinSketch`) and the binning
kernels.

Layout: only *usable* features (at least two distinct sampled values, NaN counting as one,
and some split leaving ``min_rows`` sampled rows on each side) become histogram
**columns**; feature ``features[c]`` is column ``c``. Column ``c`` owns the histogram rows
``hist_offsets[c] : hist_offsets[c + 1]``: ``n_bins[c]`` value bins, then one row for
missing values (NaN; for categorical columns also negative, rare and unseen
categories). ``bin_upper`` is aligned with those rows: for a numerical column, the upper edge
of each value bin (``+inf`` for the last) — a value ``x`` falls in bin ``b`` iff
``bin_upper[b - 1] < x <= bin_upper[b]``, so "bin ≤ t" is "x ≤ bin_upper[t]"; for a
categorical column, the category (a non-negative integer) of each bin, in increasing order.
The missing row holds NaN. Bins are stored as ``uint8`` when every column has at most 255
value bins, else ``uint16``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from ._gbdt_sketch import BinSketch

_JIT = dict(cache=True, nogil=True)

#: Largest category accepted in a categorical column (LightGBM's limit, int32).
MAX_CATEGORY = 2**31 - 1

# Status codes of ``_bins_from_sketch`` (per feature).
_OK, _NOT_INTEGER, _TOO_LARGE = 0, 1, 2


@numba.njit(**_JIT)
def _greedy_cuts(v, c, max_bins, out):
    """Cut points between sorted distinct values ``v`` (counts ``c``) into at most ``max_bins``
    bins of about equal counts; a value holding a bin's worth of rows gets a bin of its own.
    Cuts are midpoints between neighbouring values. Writes ``out``; returns the number of cuts.
    """
    m = v.shape[0]
    n_cut = 0
    if m <= max_bins:
        for i in range(m - 1):
            out[n_cut] = _midpoint(v[i], v[i + 1])
            n_cut += 1
        return n_cut
    remaining = 0.0
    for i in range(m):
        remaining += c[i]
    bins_left = max_bins
    target = remaining / bins_left
    cur = 0.0
    for i in range(m - 1):
        cur += c[i]
        remaining -= c[i]
        if bins_left > 1 and (cur >= target or c[i + 1] >= target):
            out[n_cut] = _midpoint(v[i], v[i + 1])
            n_cut += 1
            bins_left -= 1
            cur = 0.0
            target = remaining / bins_left
    return n_cut


@numba.njit(**_JIT)
def _midpoint(a, b):
    mid = 0.5 * a + 0.5 * b
    return mid if a <= mid < b else a


@numba.njit(**_JIT)
def _numeric_splittable(v, c, cuts, n_cut, n_missing, min_rows):
    """Whether some threshold leaves ``min_rows`` sampled rows on both sides (missing rows
    on either side) — LightGBM's ``NeedFilter``."""
    total = n_missing
    for i in range(v.shape[0]):
        total += c[i]
    left = 0.0
    j = 0
    for t in range(n_cut + 1):  # bin t holds the values <= cuts[t]
        while j < v.shape[0] and (t == n_cut or v[j] <= cuts[t]):
            left += c[j]
            j += 1
        for extra in (0.0, n_missing):
            lft = left + extra
            if lft >= min_rows and total - lft >= min_rows and 0 < lft < total:
                return True
    return False


@numba.njit("void(int64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
            "uint8[::1], int64, float64, int32[::1], float64[::1], int64[::1], int32[::1])",
            **_JIT)
def _bins_from_sketch(fstart, value, count, zero_count, nan_count, is_cat, max_bins,
                      min_rows, n_bins, upper, upper_start, status):
    """Bins of every feature from a merged sketch; see :func:`bin_mapper`."""
    d = fstart.shape[0] - 1
    pos = 0
    for f in range(d):
        upper_start[f] = pos
        a, b = fstart[f], fstart[f + 1]
        z = zero_count[f]
        m = b - a + (1 if z > 0 else 0)
        v = np.empty(m)
        c = np.empty(m)
        j = 0
        placed = z == 0
        for i in range(a, b):
            if not placed and value[i] > 0:
                v[j] = 0.0
                c[j] = z
                j += 1
                placed = True
            v[j] = value[i]
            c[j] = count[i]
            j += 1
        if not placed:
            v[j] = 0.0
            c[j] = z
        n_missing = nan_count[f]
        if is_cat[f]:
            n_neg = 0
            for i in range(m):
                if v[i] < 0:
                    n_neg += 1
                    n_missing += c[i]
                elif v[i] != np.floor(v[i]):
                    status[f] = _NOT_INTEGER
                elif v[i] > 2147483647.0:
                    status[f] = _TOO_LARGE
            k = m - n_neg
            if k + (1 if n_missing > 0 else 0) <= 1 or status[f] != _OK:
                n_bins[f] = 0
                continue
            total = n_missing
            most = n_missing
            for i in range(n_neg, m):
                total += c[i]
                most = max(most, c[i])
            if total < 2 * min_rows or total - most < min_rows:
                n_bins[f] = 0
                continue
            # the max_bins most frequent categories (ties: smaller first), in increasing order
            # (v is increasing): those above the max_bins-th count, then those equal to it
            keep = min(k, max_bins)
            cut = 0.0
            if k > max_bins:
                cut = np.sort(c[n_neg:])[k - max_bins]
            n_above = 0
            for i in range(n_neg, m):
                if c[i] > cut:
                    n_above += 1
            room = keep - n_above
            j = 0
            for i in range(n_neg, m):
                if c[i] > cut or (c[i] == cut and room > 0):
                    if c[i] == cut:
                        room -= 1
                    upper[pos + j] = v[i]
                    j += 1
            n_bins[f] = keep
            pos += keep
        else:
            if m + (1 if n_missing > 0 else 0) <= 1:
                n_bins[f] = 0
                continue
            n_cut = _greedy_cuts(v, c, max_bins, upper[pos:])
            if not _numeric_splittable(v, c, upper[pos:], n_cut, n_missing, min_rows):
                n_bins[f] = 0
                continue
            upper[pos + n_cut] = np.inf
            n_bins[f] = n_cut + 1
            pos += n_cut + 1
    upper_start[d] = pos


@numba.njit(**_JIT)
def bin_of(x, nb, o, bin_upper, cat):
    """Bin of value ``x`` in a column with ``nb`` value bins whose rows start at ``o``."""
    if np.isnan(x):
        return nb
    if cat:
        if x < 0:
            return nb
        lo, hi = 0, nb
        while lo < hi:
            mid = (lo + hi) >> 1
            if bin_upper[o + mid] < x:
                lo = mid + 1
            else:
                hi = mid
        if lo < nb and bin_upper[o + lo] == x:
            return lo
        return nb
    # cuts below x among the nb - 1 cuts: branch-free lower bound (values are random)
    n = nb - 1
    if n == 0:
        return 0
    base = o
    while n > 1:
        half = n >> 1
        base = base + half if bin_upper[base + half] < x else base
        n -= half
    return base - o + (1 if bin_upper[base] < x else 0)


def expand_signatures(template, **choices):
    """Explicit numba signatures: ``template`` with each placeholder (a keyword) replaced by
    each of its types, e.g. ``expand_signatures("void(XT[::1])", XT=X_TYPES)``."""
    out = [template]
    for key, options in choices.items():
        out = [s.replace(key, o) for s in out for o in options]
    return out


#: Raw feature dtypes the dense kernels are compiled for.
X_TYPES = ("float32", "float64")
#: Dtypes of binned data: up to 255 value bins and the missing bin fit ``uint8``.
BIN_TYPES = ("uint8", "uint16")


@numba.njit(expand_signatures("void(XT[:, ::1], int32[::1], int32[::1], int64[::1], "
                              "float64[::1], uint8[::1], BT[:, ::1])", XT=X_TYPES,
                              BT=BIN_TYPES), **_JIT)
def bin_dense(X, features, n_bins, hist_offsets, bin_upper, is_cat, out):
    """``out[c, i] = bin of X[i, features[c]]`` in column ``c`` (missing bin ``n_bins[c]``):
    binned data is stored column by column.

    Parameters
    ----------
    X : float32/float64 array (n, d), C order
    features, n_bins : int32 array (n_cols,); hist_offsets : int64 array (n_cols + 1,)
    bin_upper : float64 array (hist_offsets[-1],); is_cat : uint8 array (n_cols,)
    out : uint8/uint16 array (n_cols, n), C order

    Notes
    -----
    A binary search is a chain of dependent loads; searching a block of rows in lockstep
    keeps many loads in flight (several times faster than one row at a time), and the
    block's rows stay in cache while every column is binned.
    """
    n = X.shape[0]
    block = 32
    base = np.empty(block, np.int64)
    xs = np.empty(block)
    for i0 in range(0, n, block):
        m = min(block, n - i0)
        for c in range(features.shape[0]):
            f = features[c]
            nb = n_bins[c]
            o = hist_offsets[c]
            if is_cat[c]:
                for j in range(m):
                    out[c, i0 + j] = bin_of(X[i0 + j, f], nb, o, bin_upper, True)
                continue
            for j in range(m):
                xs[j] = X[i0 + j, f]
                base[j] = o
            k = nb - 1  # cuts
            while k > 1:
                half = k >> 1
                for j in range(m):
                    b = base[j]
                    base[j] = b + half if bin_upper[b + half] < xs[j] else b
                k -= half
            for j in range(m):
                x = xs[j]
                if np.isnan(x):
                    out[c, i0 + j] = nb
                elif k == 0:
                    out[c, i0 + j] = 0
                else:
                    out[c, i0 + j] = base[j] - o + (1 if bin_upper[base[j]] < x else 0)


@numba.njit(expand_signatures("void(float64[::1], int32[::1], int32[::1], int64[::1], "
                              "float64[::1], uint8[::1], BT[::1])", BT=BIN_TYPES), **_JIT)
def bin_entries(values, columns, n_bins, hist_offsets, bin_upper, is_cat, out):
    """``out[p] = bin of values[p]`` in column ``columns[p]`` (the stored entries of CSR rows).
    """
    for p in range(values.shape[0]):
        c = columns[p]
        out[p] = bin_of(values[p], n_bins[c], hist_offsets[c], bin_upper, is_cat[c])


@dataclass(frozen=True)
class BinMapper:
    """Bins of every usable feature; the histogram row layout shared by workers and shards.

    Attributes
    ----------
    n_features : int
        Columns of the input.
    features : int32 array (n_cols,)
        Input feature of each histogram column (usable features, increasing).
    n_bins : int32 array (n_cols,)
        Value bins of each column; bin ``n_bins[c]`` is its missing bin.
    hist_offsets : int64 array (n_cols + 1,)
        First histogram row of each column (feature-major); ``hist_offsets[-1]`` rows in all.
    bin_upper : float64 array (hist_offsets[-1],)
        Upper edge (numerical) or category (categorical) of each histogram row; NaN on
        missing rows.
    is_categorical : uint8 array (n_cols,)
    zero_bin : int32 array (n_cols,)
        Bin of the value 0 (the bin of entries a sparse row does not store).
    column_of : int32 array (n_features,)
        Column of each input feature, -1 if it is not usable (constant, all-NaN).
    dtype : numpy dtype
        ``uint8`` or ``uint16``, the dtype of binned data.
    """

    n_features: int
    features: np.ndarray
    n_bins: np.ndarray
    hist_offsets: np.ndarray
    bin_upper: np.ndarray
    is_categorical: np.ndarray
    zero_bin: np.ndarray
    column_of: np.ndarray
    dtype: np.dtype

    @property
    def n_columns(self) -> int:
        return self.features.shape[0]

    @property
    def n_hist_rows(self) -> int:
        return int(self.hist_offsets[-1])

    @property
    def n_cat_words(self) -> int:
        """uint32 words of a bitset over the bins of any categorical column (at least 1)."""
        cat = self.n_bins[self.is_categorical.astype(bool)]
        return max(1, (int(cat.max()) + 31) // 32) if cat.size else 1

    @classmethod
    def concat(cls, mappers: list) -> BinMapper:
        """The mapper of all features from mappers of consecutive feature ranges (each
        from :func:`bin_mapper` of :meth:`BinSketch.columns` of its range): the same as
        :func:`bin_mapper` of the whole sketch, each range computed where its sketches
        are merged."""
        lo = np.cumsum([0] + [m.n_features for m in mappers])
        features = np.concatenate([m.features.astype(np.int64) + lo[i]
                                   for i, m in enumerate(mappers)]).astype(np.int32)
        nb = np.concatenate([m.n_bins for m in mappers]).astype(np.int32)
        hist_offsets = np.zeros(nb.shape[0] + 1, np.int64)
        np.cumsum(nb + 1, out=hist_offsets[1:])
        column_of = np.full(int(lo[-1]), -1, np.int32)
        column_of[features] = np.arange(features.shape[0], dtype=np.int32)
        dtype = np.dtype(np.uint8 if (nb.max() if nb.size else 0) <= 255 else np.uint16)
        return cls(int(lo[-1]), features, nb, hist_offsets,
                   np.concatenate([m.bin_upper for m in mappers]),
                   np.concatenate([m.is_categorical for m in mappers]).astype(np.uint8),
                   np.concatenate([m.zero_bin for m in mappers]).astype(np.int32),
                   column_of, dtype)

    def column_bounds(self, n_shards: int) -> np.ndarray:
        """Split the columns into ``n_shards`` contiguous ranges of about equal histogram rows.

        Returns
        -------
        int64 array (n_shards + 1,)
            Column bounds; shard ``s`` owns columns ``bounds[s]:bounds[s + 1]`` — histogram
            rows ``hist_offsets[bounds[s]]:hist_offsets[bounds[s + 1]]``. Some ranges are
            empty when there are fewer columns than shards.
        """
        targets = self.hist_offsets[-1] * np.arange(n_shards + 1) / n_shards
        bounds = np.searchsorted(self.hist_offsets, targets, side="left").astype(np.int64)
        bounds[0], bounds[-1] = 0, self.n_columns
        return np.maximum.accumulate(bounds)

    def transform(self, X):
        """Bin rows of raw features.

        Parameters
        ----------
        X : float array (n, n_features) or scipy.sparse matrix (n, n_features)

        Returns
        -------
        dtype array (n_cols, n) (column by column), or (indptr int64, columns int32,
        bins dtype) for sparse
            For sparse input only the stored entries of usable features are binned; an
            absent entry is in the column's ``zero_bin``. Columns are increasing in each row.
        """
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features; the bins were made for "
                             f"{self.n_features}")
        args = (self.n_bins, self.hist_offsets, self.bin_upper, self.is_categorical)
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            if not X.has_canonical_format:
                X = X.copy()
                X.sum_duplicates()
            columns = self.column_of[X.indices]
            keep = columns >= 0
            row = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[keep]
            indptr = np.zeros(X.shape[0] + 1, np.int64)
            np.cumsum(np.bincount(row, minlength=X.shape[0]), out=indptr[1:])
            columns = np.ascontiguousarray(columns[keep], dtype=np.int32)
            bins = np.empty(columns.shape[0], self.dtype)
            bin_entries(X.data[keep].astype(np.float64), columns, *args, bins)
            return indptr, columns, bins
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        out = np.empty((self.n_columns, X.shape[0]), self.dtype)
        bin_dense(np.ascontiguousarray(X), self.features, *args, out)
        return out


def categorical_mask(categorical, d: int) -> np.ndarray:
    """The uint8 mask (d,) of the categorical features given as :func:`bin_mapper` takes
    them (None, a bool mask, or feature indices).

    Raises
    ------
    ValueError
        A mask of the wrong shape, an index outside ``[0, d)``.
    """
    is_cat = np.zeros(d, np.uint8)
    if categorical is not None:
        categorical = np.asarray(categorical)
        if categorical.dtype == bool:
            if categorical.shape != (d,):
                raise ValueError(f"categorical mask has shape {categorical.shape}, "
                                 f"expected ({d},)")
            is_cat[categorical] = 1
        else:
            bad = categorical[(categorical < 0) | (categorical >= d)]
            if bad.size:
                raise ValueError(f"categorical feature index {int(bad[0])} out of range "
                                 f"[0, {d})")
            is_cat[categorical.astype(np.int64)] = 1
    return is_cat


def bin_mapper(sk: BinSketch, max_bins: int = 255, categorical=None,
               min_rows: float = 0.0, feature_offset: int = 0) -> BinMapper:
    """Bins from a (merged) sketch.

    Numerical features: with at most ``max_bins`` distinct sampled values, one bin per value;
    otherwise greedy bins of about equal sampled counts, a value holding a bin's worth of rows
    in a bin of its own (LightGBM's ``GreedyFindBin``, written anew). Categorical features
    (LightGBM conventions): the ``max_bins`` most frequent non-negative integer categories,
    one bin each; negative values, NaN and the other categories share the missing bin.

    Parameters
    ----------
    sk : BinSketch
    max_bins : int, default 255
        Value bins per feature (the missing bin comes on top); at most 255 gives ``uint8``.
    categorical : None, bool array (n_features,) or int array of feature indices
    min_rows : float, default 0
        Sampled rows each side of a split needs (``min_samples_leaf`` times the sample
        rate); features no split of which could give both sides that many are dropped, as
        LightGBM does. With the whole data sampled this drops only features that cannot
        split.
    feature_offset : int, default 0
        Input index of the sketch's first feature, for error messages (a sketch of a range
        of features: :meth:`BinSketch.columns`, :meth:`BinMapper.concat`).

    Returns
    -------
    BinMapper

    Raises
    ------
    ValueError
        ``max_bins`` outside [2, 65535]; a categorical feature with a non-negative
        non-integer value or a category above 2**31 - 1 (the message names the feature and
        the value; negative values are missing, not refused).
    """
    if not 2 <= max_bins <= 65535:
        raise ValueError(f"max_bins must be in [2, 65535], got {max_bins}")
    d = sk.n_features
    is_cat = categorical_mask(categorical, d)
    fstart = np.searchsorted(sk.feature, np.arange(d + 1)).astype(np.int64)
    nonzero = np.add.reduceat(np.append(sk.count, 0), fstart[:-1]) * (np.diff(fstart) > 0)
    zero_count = (sk.n_rows - sk.nan_count - nonzero).astype(np.float64)
    n_bins = np.zeros(d, np.int32)
    upper = np.empty(sk.value.shape[0] + d, np.float64)
    upper_start = np.empty(d + 1, np.int64)
    status = np.zeros(d, np.int32)
    _bins_from_sketch(fstart, sk.value, sk.count.astype(np.float64), zero_count,
                      sk.nan_count.astype(np.float64), is_cat, int(max_bins), float(min_rows),
                      n_bins, upper, upper_start, status)
    for f in np.flatnonzero(status):
        vals = sk.value[fstart[f]:fstart[f + 1]]
        if status[f] == _NOT_INTEGER:
            v = float(vals[vals != np.floor(vals)][0])
            raise ValueError(f"categorical feature {f + feature_offset} has the non-integer "
                             f"value {v!r}: a category is an integer from 0 to "
                             f"{MAX_CATEGORY}; negative values (integer or not) and NaN are "
                             f"read as missing, as scikit-learn's HistGradientBoosting "
                             f"reads them")
        v = float(vals.max())
        raise ValueError(f"categorical feature {f + feature_offset} has the category {v!r}, "
                         f"above the "
                         f"largest allowed, {MAX_CATEGORY}")
    features = np.flatnonzero(n_bins > 0).astype(np.int32)
    nb = n_bins[features]
    hist_offsets = np.zeros(features.shape[0] + 1, np.int64)
    np.cumsum(nb + 1, out=hist_offsets[1:])
    bin_upper = np.full(int(hist_offsets[-1]), np.nan)
    # value bins of column c: rows hist_offsets[c] + (0 .. nb[c]-1)
    within = np.arange(nb.sum()) - np.repeat(np.cumsum(nb) - nb, nb)  # bin index in column
    src = np.repeat(upper_start[features], nb) + within
    dst = np.repeat(hist_offsets[:-1], nb) + within
    bin_upper[dst] = upper[src]
    column_of = np.full(d, -1, np.int32)
    column_of[features] = np.arange(features.shape[0], dtype=np.int32)
    dtype = np.dtype(np.uint8 if (nb.max() if nb.size else 0) <= 255 else np.uint16)
    cat = is_cat[features]
    zero_bin = np.empty(features.shape[0], np.int32)
    if features.size:
        zeros = np.zeros((1, d))
        zb = np.empty((features.shape[0], 1), np.uint16)
        bin_dense(zeros, features, nb, hist_offsets, bin_upper, cat, zb)
        zero_bin[:] = zb[:, 0]
    return BinMapper(d, features, nb, hist_offsets, bin_upper, cat, zero_bin, column_of, dtype)
