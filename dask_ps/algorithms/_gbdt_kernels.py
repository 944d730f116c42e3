"""Numba kernels of histogram GBDT: quantized gradients and histograms (row partitioning:
:mod:`._gbdt_rows`; split finding: :mod:`._gbdt_splits`).

The design they serve is DimBoost's (Jiang et al., SIGMOD 2018) and Angel's GBDT: workers
hold binned rows (see :mod:`._gbdt_bins`) with their gradients and build gradient histograms
of all new nodes of a growth step (a tree level); the histograms are summed on
parameter-server shards that each own a contiguous range of histogram columns (features),
and each shard finds the best split of every node over its own columns. The kernels are the
same in one process (:mod:`._gbdt_local`) and on the PS.

Exact sums. Gradients and hessians are quantized to integers at a power-of-two scale
(:func:`quantization_scale`) and held in float64. The dense histogram kernels add them as
integers: a row's gradient, hessian (never negative) and a count of 1 packed in one int64
(:data:`GRAD_SHIFT`, :data:`HESS_SHIFT`), so one integer addition adds all three; the scale
keeps the sums of any :data:`PACKED_ROWS` rows inside their fields, and a node of more rows
is added in pieces of that many, each unpacked into int64 sums. Every sum is an integer
below 2**52 in magnitude, exact in float64. Histograms therefore do not depend on the order
rows are added in, on how rows are split into partitions, or on the order pushes reach a
shard, and sibling subtraction is exact; 1 and 4 partitions give bit-identical trees.
(The same idea as XGBoost's fixed-point GPU histograms and LightGBM's quantized training,
Shi et al., NeurIPS 2022, which packs low-bit gradients the same way; here a step is about
2**-16 of the largest |gradient| and 2**-14 of the largest hessian, whatever the number of
rows (up to 2**35): far finer than what changes a split. The count in the same word: the
dense kernel on 400,000 rows x 100 columns took 169-187 ms with a separate int32 count per
bin, 120-139 ms without, alternated at load ~3.)

Layouts
-------
grad, hess : float64 (T, n)
    Quantized gradient and hessian of each row for each of the ``T`` trees grown together
    (``T = 1``, or the ``K`` classes of a softmax round).
rows : int32 (T, n)
    Per tree, a permutation of the partition's rows in which every node's rows are
    contiguous: node ``v`` owns ``rows[v // nodes_per_tree, node_start[v]:node_start[v] +
    node_count[v]]`` (LightGBM's ``DataPartition``). Node ids of tree ``t`` are
    ``t * nodes_per_tree ...``.
hist : float64 (n_slots, n_hist_rows, 3)
    Per node (a slot: a position in a step's push, or a node id in the pool of histograms
    of the nodes that may split), rows (feature, bin) in the mapper's feature-major order —
    a feature range is a row range — holding the (grad, hess, count) sums in quantized
    units. Node-major: every kernel reads one node's rows of a column contiguously. On the
    PS, a table keyed ``slot * n_hist_rows + row`` with a slicer giving each shard a row
    range (a feature range) of every slot stores a shard's part as (n_slots, R_s, 3), and a
    worker's push to it is a slice of its build buffer; keyed row-major (``row * n_slots +
    slot``, plain range partitioning) the push and the shard transpose instead.
splits : float64 (n_nodes, N_SPLIT_COLS), split_cat : uint32 (n_nodes, n_cat_words)
    Best split per node; columns named by the ``SPLIT_*`` constants of :mod:`._gbdt_splits`;
    ``split_cat`` is the bitset of the bins that go left for a categorical split.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._gbdt_bins import BIN_TYPES, expand_signatures
from ._gbdt_passes import (  # noqa: F401 (PACKED_ROWS, SMALL_NODE_SHARE: the kernels' own)
    _GRAD_LIMIT,
    _HESS_LIMIT,
    _JIT,
    GRAD_SHIFT,
    HESS_SHIFT,
    PACKED_ROWS,
    SMALL_NODE_SHARE,
    _columns,
    _small_node,
    _small_nodes,
    _small_scratch,
    _take,
    _write_block,
)


def quantization_scale(n_rows_total: int, bound: float, hessian: bool = False) -> float:
    """The scale ``s`` (a power of two) of the quantized gradients (or hessians) of a round.

    The largest ``s`` such that, with ``|x_i| <= bound`` for all rows, the sum of
    ``rint(x_i · s)`` over any :data:`PACKED_ROWS` rows fits its field of a packed word (28
    bits signed for gradients, 25 unsigned for the hessians, which are never negative), and
    over all ``n_rows_total`` rows stays below 2**52 in magnitude (exact in float64). The
    first bound decides up to 2**35 rows: a step of about 2**-16 of ``bound`` (2**-14 for
    hessians), whatever the number of rows.
    """
    if not bound > 0 or n_rows_total <= 0:
        return 1.0
    limit = _HESS_LIMIT if hessian else _GRAD_LIMIT
    per_row = min(limit / PACKED_ROWS, 2.0**52 / n_rows_total) - 0.5  # rint adds <= 0.5
    return 2.0 ** math.floor(math.log2(per_row / float(bound)))


# --------------------------------------------------------------------------- histograms

_HIST_COMMON = ("int32[:, ::1], int64[::1], int64[::1], int64, int64[::1], float64[:, ::1], "
                "float64[:, ::1], int64[::1], float64[:, :, ::1]")


@numba.njit("Tuple((int64[::1], int32[::1], int64[::1]))(" + _HIST_COMMON[:-len(
    ", int64[::1], float64[:, :, ::1]")] + ")", **_JIT)
def gather_nodes(rows, node_start, node_count, nodes_per_tree, build_nodes, grad, hess):
    """The rows of the nodes ``build_nodes``, one after the other (node ``j`` at
    ``starts[j]:starts[j + 1]``), with their (grad, hess) pairs in that order (LightGBM's
    "ordered gradients"), each packed in one int64 with a count of 1 (:data:`GRAD_SHIFT`):
    ``(starts, orow, gh)``, int64 (n_build + 1,), int32 (m,), int64 (m,). Arguments as
    :func:`build_hist_dense`'s."""
    nb = build_nodes.shape[0]
    starts = np.empty(nb + 1, np.int64)
    starts[0] = 0
    for j in range(nb):
        starts[j + 1] = starts[j] + node_count[build_nodes[j]]
    orow = np.empty(starts[nb], np.int32)
    gh = np.empty(starts[nb], np.int64)
    for j in range(nb):
        v = build_nodes[j]
        t = v // nodes_per_tree
        s = node_start[v]
        a = starts[j]
        for ii in range(node_count[v]):
            r = rows[t, s + ii]
            orow[a + ii] = r
            gh[a + ii] = (np.int64(grad[t, r]) << GRAD_SHIFT) + \
                (np.int64(hess[t, r]) << HESS_SHIFT) + 1
    return starts, orow, gh


@numba.njit(**_JIT)
def _dense_hist(binned, binned_rows, c_lo, c_hi, hist_offsets, starts, orow, gh, out):
    """Histograms of columns ``c_lo:c_hi`` of the gathered nodes into ``out[j, hist_offsets[c]
    - hist_offsets[c_lo] + b]``: eight columns per pass over a node's rows; the large nodes
    one column block after the other, every node's rows passed over per block (the block's
    columns stay in cache); then each small one (:data:`SMALL_NODE_SHARE`) from its rows
    copied out of ``binned_rows`` (``_small_node``)."""
    width = 1
    for c in range(c_lo, c_hi):
        width = max(width, hist_offsets[c + 1] - hist_offsets[c])
    sp = np.zeros((8, width), np.int64)
    sg = np.zeros((3, 8, width), np.int64)
    row0 = hist_offsets[c_lo]
    small = _small_nodes(starts, binned.shape[1])
    for c in range(c_lo, c_hi, 8):
        k = min(8, c_hi - c)
        for j in range(starts.shape[0] - 1):
            if not small[j]:
                carried = _columns(binned, c, k, orow, gh, starts[j], starts[j + 1], sp, sg)
                _write_block(sp, sg, carried, c, k, hist_offsets, row0, out[j])
    if small.any():
        buf, words, sp, sg = _small_scratch(binned_rows, hist_offsets, c_lo, c_hi)
        for j in range(starts.shape[0] - 1):
            if small[j]:
                carried = _small_node(binned_rows, orow, gh, starts[j], starts[j + 1], c_lo,
                                      c_hi, buf, words, sp, sg)
                _write_block(sp, sg, carried, c_lo, c_hi - c_lo, hist_offsets, row0, out[j])


@numba.njit(expand_signatures("void(BT[:, ::1], BT[:, ::1], " + _HIST_COMMON + ")",
                              BT=BIN_TYPES), **_JIT)
def build_hist_dense(binned, binned_rows, rows, node_start, node_count, nodes_per_tree,
                     build_nodes, grad, hess, hist_offsets, out):
    """Histograms of the nodes ``build_nodes`` from dense binned rows.

    ``out[j, hist_offsets[c] + b] = (Σ grad, Σ hess, #rows)`` over the rows of node
    ``build_nodes[j]`` whose column ``c`` is in bin ``b``.

    Parameters
    ----------
    binned : uint8/uint16 array (n_cols, n), column by column
    binned_rows : the same bins row by row, array (n, n_cols): read for the nodes holding
        less than :data:`SMALL_NODE_SHARE` of the ``n`` rows
    rows : int32 array (T, n); node_start, node_count : int64 arrays (n_node_ids,)
    nodes_per_tree : int
    build_nodes : int64 array (n_build,)
    grad, hess : float64 arrays (T, n), quantized
    hist_offsets : int64 array (n_cols + 1,)
    out : float64 array (n_build, n_hist_rows, 3), overwritten

    Notes
    -----
    The nodes' rows and (grad, hess) pairs are gathered once (LightGBM's "ordered
    gradients"); then eight columns at a time, every node's rows are passed over once per
    block of columns, the block's columns staying in cache from one node to the next. Each
    row adds its packed (grad, hess, count) word (one int64 addition) per column into eight
    per-column histograms in L1 cache, turned into float64 rows on output (sums stay
    exact). Measured on the steps of 5 trees of a 200k x 100 set (63 leaves, CPU
    seconds, best of 4, machine load ~10): 1.16 s before (a column at a time, one node after
    the other, three float64 sums per row), 0.98 s; then the pair packed in one int64
    instead of two float64 additions: 35 -> 19 ms for 200,000 rows x 100 columns of random
    bins (one thread, load ~2); then the count in the same word (see the module's notes).
    A small node's rows are scattered over the partition: read column by column, every value
    costs a cache line from memory (6-7 ns a value for 1 % of 400,000 rows x 96 columns of
    random bins), copied row by row first 2 ns (``_copy_rows``). On the steps of 20 trees of
    400,000 x 100 rows of ``make_classification`` grown best-first (``split_share=0.1``),
    the histograms took 3.21 s instead of 3.88 (nodes of 1,000 to 4,000 rows: 3.3-11 ns a
    value, now 2.2). The copied rows are then read eight bins a load (``_small_node``; a
    node's every column at once, no staging of its push rows): eight nodes of 0.5 % and one
    of 2 % of 500,000 rows x 100 columns of random bins, as the push of two shards, 16.5 ->
    13.2 ms (CPU time, medians of 17 alternated, load ~4). Then eight columns a pass instead
    of four and bins unpacked only where they fill (``_room``, :mod:`._gbdt_passes`), not
    all after every piece: the push of two shards of 500,000 x 100 random bins, as
    ``hist_rows_dense``, 0.72-0.95 of the time before these changes for nodes from 0.5 % to
    all of the rows (medians of 21 alternated).
    """
    starts, orow, gh = gather_nodes(rows, node_start, node_count, nodes_per_tree, build_nodes,
                                    grad, hess)
    _dense_hist(binned, binned_rows, 0, binned.shape[0], hist_offsets, starts, orow, gh, out)


@numba.njit("int64(float64[:, :, ::1], int64, int64, int64, int64[::1], float64[:, ::1], int64)",
            **_JIT)
def nonzero_rows(hist, rows_pad, s, key0, keys, values, at):
    """Append shard ``s``'s histogram rows holding rows of data (count > 0) of every node of
    a push buffer to ``keys``/``values`` from position ``at``; returns the new end.

    A row without data sums to zero: leaving it out of a push changes no sum, and deep nodes
    have few rows per bin (LightGBM's example, 2 workers: 27 % of the rows hold data). Every
    row is written at ``at``, which moves on only past rows with data (no branch on the
    data: 0.32 against 0.15 ms for 8 nodes of 6,160 rows, half of them holding data), so
    ``keys``/``values`` may be written one row past the returned end (within the rows
    scanned).

    Parameters
    ----------
    hist : float64 array (n_build, n_shards * rows_pad, 3)
        The push buffer: shard ``s``'s rows of node ``j`` at ``hist[j, s * rows_pad:]``.
    rows_pad, s : int
    key0 : int
        Key of shard ``s``'s first row of push slot 0; row ``r`` of node ``j`` gets
        ``key0 + j * rows_pad + r`` (ascending, in the order written).
    keys : int64 array; values : float64 array (len(keys), 3)
    at : int
    """
    base = s * rows_pad
    for j in range(hist.shape[0]):
        hj = hist[j]
        k = key0 + j * rows_pad
        for r in range(rows_pad):
            c = hj[base + r, 2]
            keys[at] = k + r
            values[at, 0] = hj[base + r, 0]
            values[at, 1] = hj[base + r, 1]
            values[at, 2] = c
            at += c != 0.0
    return at


@numba.njit(**_JIT)
def _emit_rows(sp, sg, carried, k, first, width, dense, key, keys, values, at):
    """Append the bins holding rows of the ``k`` column scratches (see ``_columns``; column
    ``q``'s ``width[q]`` bins, histogram rows ``first[q]`` on) as push rows from ``at``, in
    ascending rows, and clear them; returns the new end. ``dense``: about half of the bins
    or more may hold rows, written without a branch on it (one row may be written past the
    end); else only those (few bins hold rows: the branch is predictable, the empty ones
    hold zeros already)."""
    for q in range(k):
        for b in range(width[q]):
            if dense:
                g, h, n = _take(sp, sg, q, b, carried)
                keys[at] = key + first[q] + b
                values[at, 0] = g
                values[at, 1] = h
                values[at, 2] = n
                at += n != 0.0
            elif sp[q, b] != 0 or (carried and sg[2, q, b] != 0):  # rows: a count
                g, h, n = _take(sp, sg, q, b, carried)
                keys[at] = key + first[q] + b
                values[at, 0] = g
                values[at, 1] = h
                values[at, 2] = n
                at += 1
    return at


@numba.njit(expand_signatures("int64(BT[:, ::1], BT[:, ::1], int64[::1], int32[::1], "
                              "int64[::1], int64[::1], int64, int64, int64, int64, int64[::1], "
                              "float64[:, ::1], int64)", BT=BIN_TYPES), **_JIT)
def hist_rows_dense(binned, binned_rows, starts, orow, gh, hist_offsets, c_lo, c_hi, rows_pad,
                    key0, keys, values, at):
    """:func:`build_hist_dense` of the columns ``c_lo:c_hi`` of the nodes gathered by
    :func:`gather_nodes` (``starts, orow, gh``; gathered once for every shard's columns)
    written as a push: only the histogram rows holding data (count > 0), to
    ``keys``/``values`` from ``at``, in ascending keys (row ``r`` of the range in gathered
    node ``j``: ``key0 + j * rows_pad + r``; see :func:`nonzero_rows`). Returns the new end.

    The same sums and rows as :func:`build_hist_dense` followed by :func:`nonzero_rows`, for
    one shard's column range, without the whole histograms in between: the column blocks'
    scratches go straight to each node's staged rows (:func:`_emit_rows`, dense for a node
    of at least half as many rows as a column has bins), which are then joined (a small
    node's written straight, ``_small_node``). That
    per-node cost was most of a deep level's: on LightGBM's example (3,500 rows of a
    worker, 6,160 histogram rows), 8 nodes of 50 rows 0.26 -> 0.11 ms, 30 of 20 rows
    0.89 -> 0.25 ms, the root 0.29 -> 0.21 ms.
    """
    n_rows = hist_offsets[c_hi] - hist_offsets[c_lo]
    n_build = starts.shape[0] - 1
    if n_rows == 0 or n_build == 0:
        return at
    most = 1
    for c in range(c_lo, c_hi):
        most = max(most, hist_offsets[c + 1] - hist_offsets[c])
    sp = np.zeros((8, most), np.int64)
    sg = np.zeros((3, 8, most), np.int64)
    first = np.empty(8, np.int64)
    width = np.empty(8, np.int64)
    small = _small_nodes(starts, binned.shape[1])
    # large node j's rows staged at [slot[j] * (n_rows + 1), ...): one spare row for a
    # dense write
    slot = np.cumsum(~small) - 1
    stage_keys = np.empty((slot[-1] + 1) * (n_rows + 1), np.int64)
    stage_values = np.empty((stage_keys.shape[0], 3))
    end = np.arange(n_build) * 0
    end[:] = slot * (n_rows + 1)
    row0 = hist_offsets[c_lo]
    for c in range(c_lo, c_hi, 8):
        k = min(8, c_hi - c)
        for q in range(k):
            first[q] = hist_offsets[c + q] - row0
            width[q] = hist_offsets[c + q + 1] - hist_offsets[c + q]
        for j in range(n_build):
            if not small[j]:
                a, e = starts[j], starts[j + 1]
                carried = _columns(binned, c, k, orow, gh, a, e, sp, sg)
                end[j] = _emit_rows(sp, sg, carried, k, first, width, 2 * (e - a) >= most,
                                    key0 + j * rows_pad, stage_keys, stage_values, end[j])
    # then node by node: the large ones' staged rows, the small ones' straight to keys/values
    if small.any():
        first = hist_offsets[c_lo:c_hi] - row0
        width = hist_offsets[c_lo + 1:c_hi + 1] - hist_offsets[c_lo:c_hi]
        buf, words, sp, sg = _small_scratch(binned_rows, hist_offsets, c_lo, c_hi)
    for j in range(n_build):
        if small[j]:
            a, e = starts[j], starts[j + 1]
            carried = _small_node(binned_rows, orow, gh, a, e, c_lo, c_hi, buf, words, sp, sg)
            at = _emit_rows(sp, sg, carried, c_hi - c_lo, first, width, 2 * (e - a) >= most,
                            key0 + j * rows_pad, keys, values, at)
            continue
        for i in range(slot[j] * (n_rows + 1), end[j]):
            keys[at] = stage_keys[i]
            values[at, 0] = stage_values[i, 0]
            values[at, 1] = stage_values[i, 1]
            values[at, 2] = stage_values[i, 2]
            at += 1
    return at


@numba.njit(expand_signatures("void(int64[::1], int32[::1], BT[::1], int32[::1], "
                              + _HIST_COMMON + ")", BT=BIN_TYPES), **_JIT)
def build_hist_csr(indptr, columns, bins, zero_bin, rows, node_start, node_count,
                   nodes_per_tree, build_nodes, grad, hess, hist_offsets, out):
    """Histograms of the nodes ``build_nodes`` from binned CSR rows, in O(stored entries +
    histogram rows) per node: the stored entries are added, then each column's ``zero_bin``
    receives the node's totals minus the column's stored sums (LightGBM's sparse trick).

    Parameters
    ----------
    indptr : int64 array (n + 1,), columns : int32 array (nnz,), bins : uint8/uint16 (nnz,)
        From :meth:`BinMapper.transform`.
    zero_bin : int32 array (n_cols,)
    Others as in :func:`build_hist_dense`.
    """
    n_cols = zero_bin.shape[0]
    sg = np.zeros((out.shape[1], 2))  # (grad, hess) pairs and counts: two stores per entry
    sc = np.zeros(out.shape[1], np.int64)
    for j in range(build_nodes.shape[0]):
        v = build_nodes[j]
        t = v // nodes_per_tree
        hj = out[j]
        G = 0.0
        H = 0.0
        for ii in range(node_start[v], node_start[v] + node_count[v]):
            r = rows[t, ii]
            g = grad[t, r]
            h = hess[t, r]
            G += g
            H += h
            for p in range(indptr[r], indptr[r + 1]):
                b = hist_offsets[columns[p]] + bins[p]
                sg[b, 0] += g
                sg[b, 1] += h
                sc[b] += 1
        C = node_count[v]
        for c in range(n_cols):
            g_c = 0.0
            h_c = 0.0
            n_c = 0
            for b in range(hist_offsets[c], hist_offsets[c + 1]):
                g_c += sg[b, 0]
                h_c += sg[b, 1]
                n_c += sc[b]
                hj[b, 0] = sg[b, 0]
                hj[b, 1] = sg[b, 1]
                hj[b, 2] = sc[b]
                sg[b, 0] = 0.0
                sg[b, 1] = 0.0
                sc[b] = 0
            z = hist_offsets[c] + zero_bin[c]
            hj[z, 0] += G - g_c
            hj[z, 1] += H - h_c
            hj[z, 2] += C - n_c
