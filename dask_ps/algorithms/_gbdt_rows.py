"""Numba kernels of histogram GBDT that move a partition's rows: to the children of the
split nodes (LightGBM's ``DataPartition``: per tree a permutation of the rows in which
every node's rows are contiguous, see :mod:`._gbdt_kernels` for the layouts), and a tree's
leaf values onto the rows' raw scores."""

from __future__ import annotations

import numba
import numpy as np

from ._gbdt_bins import BIN_TYPES, expand_signatures
from ._gbdt_kernels import _JIT
from ._gbdt_splits import SPLIT_BIN, SPLIT_COLUMN, SPLIT_DEFAULT_LEFT, SPLIT_IS_CAT


@numba.njit(**_JIT)
def _move_rows(rows, t, s, cnt, bin_of_row, nb, splits, i, split_cat, scratch, node_start,
               node_count, left_id, right_id):
    """Stable partition of ``rows[t, s:s + cnt]`` by split ``i`` given each row's bin in the
    split column (``bin_of_row``); records the children's row ranges."""
    thr = int(splits[i, SPLIT_BIN])
    dl = splits[i, SPLIT_DEFAULT_LEFT] != 0.0
    cat = splits[i, SPLIT_IS_CAT] != 0.0
    words = split_cat[i]
    nl = 0
    nr = 0
    for ii in range(cnt):
        r = rows[t, s + ii]
        b = bin_of_row[ii]
        if b == nb:
            left = dl
        elif cat:
            left = (words[b >> 5] >> np.uint32(b & 31)) & np.uint32(1) == 1
        else:
            left = b <= thr
        if left:
            rows[t, s + nl] = r
            nl += 1
        else:
            scratch[nr] = r
            nr += 1
    for q in range(nr):
        rows[t, s + nl + q] = scratch[q]
    node_start[left_id] = s
    node_count[left_id] = nl
    node_start[right_id] = s + nl
    node_count[right_id] = nr


_PART_COMMON = ("int32[:, ::1], int64[::1], int64[::1], int64, int64[::1], int64[::1], "
                "int64[::1], float64[:, ::1], uint32[:, ::1], int32[::1], int32[::1]")


@numba.njit(expand_signatures("void(BT[:, ::1], " + _PART_COMMON + ")", BT=BIN_TYPES), **_JIT)
def partition_dense(binned, rows, node_start, node_count, nodes_per_tree, split_node,
                    left_node, right_node, splits, split_cat, n_bins, scratch):
    """Move the rows of each split node to its children (stable: left rows first).

    Split ``i`` divides node ``split_node[i]`` by the split ``splits[i]`` / ``split_cat[i]``
    into ``left_node[i]`` and ``right_node[i]``, whose ``node_start`` / ``node_count`` are
    written. A row goes left if its bin is ``<= SPLIT_BIN`` (numerical) or in the bitset
    (categorical); the missing bin follows ``SPLIT_DEFAULT_LEFT``.

    Parameters
    ----------
    binned : uint8/uint16 array (n_cols, n)
    rows : int32 array (T, n), rearranged in place
    node_start, node_count : int64 arrays (n_node_ids,)
    nodes_per_tree : int
    split_node, left_node, right_node : int64 arrays (n_split,)
    splits : float64 array (n_split, N_SPLIT_COLS); split_cat : uint32 array (n_split, W)
    n_bins : int32 array (n_cols,)
    scratch : int32 array (>= n,)
    """
    bin_of_row = np.empty(rows.shape[1], np.int64)
    for i in range(split_node.shape[0]):
        t = split_node[i] // nodes_per_tree
        s, cnt = node_start[split_node[i]], node_count[split_node[i]]
        c = int(splits[i, SPLIT_COLUMN])
        col = binned[c]
        for ii in range(cnt):
            bin_of_row[ii] = col[rows[t, s + ii]]
        _move_rows(rows, t, s, cnt, bin_of_row, n_bins[c], splits, i, split_cat, scratch,
                   node_start, node_count, left_node[i], right_node[i])


@numba.njit(expand_signatures("void(int64[::1], int32[::1], BT[::1], int32[::1], "
                              + _PART_COMMON + ")", BT=BIN_TYPES), **_JIT)
def partition_csr(indptr, columns, bins, zero_bin, rows, node_start, node_count,
                  nodes_per_tree, split_node, left_node, right_node, splits, split_cat, n_bins,
                  scratch):
    """:func:`partition_dense` for binned CSR rows (columns increasing within a row; an
    absent entry is in the column's ``zero_bin``)."""
    bin_of_row = np.empty(rows.shape[1], np.int64)
    for i in range(split_node.shape[0]):
        t = split_node[i] // nodes_per_tree
        s, cnt = node_start[split_node[i]], node_count[split_node[i]]
        c = int(splits[i, SPLIT_COLUMN])
        for ii in range(cnt):
            r = rows[t, s + ii]
            lo = indptr[r]
            hi = indptr[r + 1]
            while lo < hi:
                mid = (lo + hi) >> 1
                if columns[mid] < c:
                    lo = mid + 1
                else:
                    hi = mid
            found = lo < indptr[r + 1] and columns[lo] == c
            bin_of_row[ii] = bins[lo] if found else zero_bin[c]
        _move_rows(rows, t, s, cnt, bin_of_row, n_bins[c], splits, i, split_cat, scratch,
                   node_start, node_count, left_node[i], right_node[i])


@numba.njit("void(int32[:, ::1], int64[::1], int64[::1], int64, int64[::1], float64[::1], "
            "float64[:, ::1])", **_JIT)
def add_leaf_values(rows, node_start, node_count, nodes_per_tree, leaves, values, raw):
    """``raw[t, r] += values[i]`` for every row ``r`` of leaf ``leaves[i]`` (tree ``t``):
    the training rows' scores after a tree, without walking it."""
    for i in range(leaves.shape[0]):
        v = leaves[i]
        t = v // nodes_per_tree
        x = values[i]
        for ii in range(node_start[v], node_start[v] + node_count[v]):
            raw[t, rows[t, ii]] += x
