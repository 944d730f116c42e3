"""The column passes of the dense histogram kernels of :mod:`._gbdt_kernels` (see its notes
on exact sums): rows' packed (grad, hess, count) words added into per-column scratches of
packed words, unpacked into int64 sums where a bin fills (:func:`_room`), written out as a
node's histogram rows; large nodes read column by column, small ones from their rows
copied out of the row-major bins (:func:`_small_node`).
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = dict(cache=True, nogil=True)

#: Rows whose packed (grad, hess, count) words are summed as integers before they are
#: unpacked (:func:`quantization_scale` keeps their sums inside their fields).
PACKED_ROWS = 2**10
#: A packed word: ``grad << GRAD_SHIFT | hess << HESS_SHIFT | count``: the count in the low
#: 11 bits (at most PACKED_ROWS), the hessian (never negative) in the next 25, the signed
#: gradient in the top 28.
HESS_SHIFT = 11
GRAD_SHIFT = 36
_GRAD_LIMIT = 2.0**27 - 1.0  # largest |sum| of a piece's gradients
_HESS_LIMIT = 2.0**25 - 1.0
_COUNT_MASK = np.int64(2**HESS_SHIFT - 1)
_HESS_MASK = np.int64(2**(GRAD_SHIFT - HESS_SHIFT) - 1)


@numba.njit(inline="always", **_JIT)
def _fields(v):
    """(grad, hess, count) int64 sums of a packed word (see :data:`GRAD_SHIFT`)."""
    return v >> GRAD_SHIFT, (v >> HESS_SHIFT) & _HESS_MASK, v & _COUNT_MASK


@numba.njit(**_JIT)
def _one_column(col, orow, gh, a, e, sp):
    for ii in range(a, e):
        sp[col[orow[ii]]] += gh[ii]


@numba.njit(**_JIT)
def _four_columns(c0, c1, c2, c3, orow, gh, a, e, sp):
    # four independent bins per row: their additions overlap instead of waiting on each other
    p0, p1, p2, p3 = sp[0], sp[1], sp[2], sp[3]
    for ii in range(a, e):
        r = orow[ii]
        p = gh[ii]
        p0[c0[r]] += p
        p1[c1[r]] += p
        p2[c2[r]] += p
        p3[c3[r]] += p


@numba.njit(**_JIT)
def _eight_columns(binned, c, orow, gh, a, e, sp):
    # :func:`_four_columns` of eight: a row's index and word loaded once for eight bins
    c0, c1, c2, c3 = binned[c], binned[c + 1], binned[c + 2], binned[c + 3]
    c4, c5, c6, c7 = binned[c + 4], binned[c + 5], binned[c + 6], binned[c + 7]
    for ii in range(a, e):
        r = orow[ii]
        p = gh[ii]
        sp[0, c0[r]] += p
        sp[1, c1[r]] += p
        sp[2, c2[r]] += p
        sp[3, c3[r]] += p
        sp[4, c4[r]] += p
        sp[5, c5[r]] += p
        sp[6, c6[r]] += p
        sp[7, c7[r]] += p


@numba.njit(**_JIT)
def _most_rows(p):
    # the largest count of one column's packed words (a loop of vector instructions)
    most = np.int64(0)
    for b in range(p.shape[0]):
        most = max(most, p[b] & _COUNT_MASK)
    return most


@numba.njit(**_JIT)
def _room(sp, sg, k):
    """Rows the first ``k`` column scratches ``sp`` can take before one is unpacked: a
    packed word holds the sums of up to :data:`PACKED_ROWS` rows (:func:`quantization_scale`
    bounds every row's fields), so it takes ``PACKED_ROWS`` minus its count more. The bins
    holding more than half that many are first added into their int64 sums ``sg`` (grad,
    hess, count) and cleared. Returns ``(rows, whether sg received sums)``: at least
    ``PACKED_ROWS // 2`` rows. Unpacking every bin after every piece of ``PACKED_ROWS``
    rows cost 15-17 % of the large nodes' columns passes (nodes of 4-100 % of 500,000 rows,
    bins spread over 255: a bin fills after hundreds of pieces)."""
    most = 0
    for q in range(k):
        most = max(most, _most_rows(sp[q]))
    half = PACKED_ROWS // 2
    if most <= half:
        return PACKED_ROWS - most, False
    for q in range(k):
        for b in range(sp.shape[1]):
            if sp[q, b] & _COUNT_MASK > half:
                g, h, n = _fields(sp[q, b])
                sg[0, q, b] += g
                sg[1, q, b] += h
                sg[2, q, b] += n
                sp[q, b] = 0
    return PACKED_ROWS - half, True


@numba.njit(**_JIT)
def _columns(binned, c, k, orow, gh, a, e, sp, sg):
    """Add rows ``a:e`` to the scratches of columns ``c:c + k``: packed sums in ``sp``,
    piece by piece, bins about to fill unpacked into the int64 sums ``sg`` (grad, hess,
    count; see :func:`_room`) in between. ``binned`` is column by column, read through
    ``orow``. Returns whether ``sg`` holds sums."""
    carried = False
    a0, room = a, PACKED_ROWS
    while a0 < e:
        if a0 > a:
            room, unpacked = _room(sp, sg, k)
            carried |= unpacked
        e0 = min(e, a0 + room)
        q0 = 0
        if k == 8:
            _eight_columns(binned, c, orow, gh, a0, e0, sp)
            q0 = 8
        elif k >= 4:
            _four_columns(binned[c], binned[c + 1], binned[c + 2], binned[c + 3], orow, gh, a0,
                          e0, sp)
            q0 = 4
        for q in range(q0, k):
            _one_column(binned[c + q], orow, gh, a0, e0, sp[q])
        a0 = e0
    return carried


@numba.njit(inline="always", **_JIT)
def _take(sp, sg, q, b, carried):
    """Bin ``b`` of column scratch ``q`` as (grad, hess, count) float64 sums, cleared."""
    g, h, n = _fields(sp[q, b])
    sp[q, b] = 0
    if carried:
        g += sg[0, q, b]
        h += sg[1, q, b]
        n += sg[2, q, b]
        sg[0, q, b] = 0
        sg[1, q, b] = 0
        sg[2, q, b] = 0
    return float(g), float(h), float(n)


#: A node holding less than this share of its partition's rows has its rows' bins copied
#: out of the row-major bins into a buffer before the column passes (:func:`_small_nodes`,
#: :func:`_copy_rows`): its rows are scattered over the partition, so reading them column
#: by column costs a cache miss per row and column, copying them one or two per row.
SMALL_NODE_SHARE = 1.0 / 32.0


@numba.njit(**_JIT)
def _small_nodes(starts, n):
    """Which gathered nodes (``starts``, see :func:`gather_nodes`) are small for ``n`` rows
    (:data:`SMALL_NODE_SHARE`)."""
    nb = starts.shape[0] - 1
    small = np.zeros(nb, np.bool_)
    for j in range(nb):
        small[j] = starts[j + 1] - starts[j] < SMALL_NODE_SHARE * n
    return small


@numba.njit(**_JIT)
def _copy_rows(binned_rows, orow, a, e, c_lo, c_hi, buf):
    """The bins of columns ``c_lo:c_hi`` of rows ``orow[a:e]`` into ``buf[:e - a]``, row by
    row. In chunks of 64 rows, each row's first and last bytes are copied first: those
    loads, cache misses when the rows are scattered, are then in flight together instead of
    one row after the other (a node of 0.5-2 % of 400,000 rows x 96 columns of random bins:
    2.1-2.3 ns a value copied row by row without them, 1.0-1.5 with them)."""
    w = c_hi - c_lo
    if w <= 0:
        return
    for i0 in range(a, e, 64):
        i1 = min(e, i0 + 64)
        for i in range(i0, i1):
            r = orow[i]
            buf[i - a, 0] = binned_rows[r, c_lo]
            buf[i - a, w - 1] = binned_rows[r, c_hi - 1]
        for i in range(i0, i1):
            src = binned_rows[orow[i]]
            dst = buf[i - a]
            for c in range(c_lo, c_hi):
                dst[c - c_lo] = src[c]


@numba.njit(**_JIT)
def _words8(words, j, gh, a, e, sp):
    # the bins of eight columns of a copied row in one 64-bit load (uint8 bins)
    s0, s1, s2, s3 = sp[8 * j], sp[8 * j + 1], sp[8 * j + 2], sp[8 * j + 3]
    s4, s5, s6, s7 = sp[8 * j + 4], sp[8 * j + 5], sp[8 * j + 6], sp[8 * j + 7]
    for i in range(e - a):
        w = words[i, j]
        p = gh[a + i]
        s0[w & 255] += p
        s1[(w >> 8) & 255] += p
        s2[(w >> 16) & 255] += p
        s3[(w >> 24) & 255] += p
        s4[(w >> 32) & 255] += p
        s5[(w >> 40) & 255] += p
        s6[(w >> 48) & 255] += p
        s7[(w >> 56) & 255] += p


@numba.njit(**_JIT)
def _words4(words, j, gh, a, e, sp):
    # the same for uint16 bins: four columns a load
    s0, s1, s2, s3 = sp[4 * j], sp[4 * j + 1], sp[4 * j + 2], sp[4 * j + 3]
    for i in range(e - a):
        w = words[i, j]
        p = gh[a + i]
        s0[w & 65535] += p
        s1[(w >> 16) & 65535] += p
        s2[(w >> 32) & 65535] += p
        s3[(w >> 48) & 65535] += p


@numba.njit(**_JIT)
def _small_scratch(binned_rows, hist_offsets, c_lo, c_hi):
    """For :func:`_small_node` over columns ``c_lo:c_hi``: a buffer of :data:`PACKED_ROWS`
    rows of their bins, padded to whole 64-bit words (zeros: bin 0 of columns no
    histogram row reads), the same as int64 words, and the packed and the int64 scratches
    of every column (and padding column): ``(buf, words, sp, sg)``."""
    most = 1
    for c in range(c_lo, c_hi):
        most = max(most, hist_offsets[c + 1] - hist_offsets[c])
    per = 8 // binned_rows.itemsize
    n_pad = (c_hi - c_lo + per - 1) // per * per
    buf = np.zeros((PACKED_ROWS, n_pad), binned_rows.dtype)
    return buf, buf.view(np.int64), np.zeros((n_pad, most), np.int64), \
        np.zeros((3, n_pad, most), np.int64)


@numba.njit(**_JIT)
def _small_node(binned_rows, orow, gh, a, e, c_lo, c_hi, buf, words, sp, sg):
    """:func:`_columns` of all the columns ``c_lo:c_hi`` of a small node's rows ``a:e`` at
    once (scratches of :func:`_small_scratch`): piece by piece (see :func:`_room`), the
    rows' bins copied row by row (:func:`_copy_rows`) into ``buf``, then added eight
    (uint16: four) columns a pass, each row's bins of those columns read in one 64-bit load
    (``words``) instead of one load a value. Returns whether ``sg`` holds sums."""
    per = 8 // binned_rows.itemsize
    carried = False
    a0, room = a, PACKED_ROWS
    while a0 < e:
        if a0 > a:
            room, unpacked = _room(sp, sg, c_hi - c_lo)
            carried |= unpacked
        e0 = min(e, a0 + room)
        _copy_rows(binned_rows, orow, a0, e0, c_lo, c_hi, buf)
        for j in range(words.shape[1]):
            if per == 8:
                _words8(words, j, gh, a0, e0, sp)
            else:
                _words4(words, j, gh, a0, e0, sp)
        a0 = e0
    return carried


@numba.njit(**_JIT)
def _write_block(sp, sg, carried, c, k, hist_offsets, row0, hj):
    """Columns ``c:c + k``'s scratches (see :func:`_columns`) into a node's histogram rows
    ``hj`` (the column range's rows from ``row0``), cleared."""
    for q in range(k):
        o = hist_offsets[c + q] - row0
        for b in range(hist_offsets[c + q + 1] - hist_offsets[c + q]):
            g, h, n = _take(sp, sg, q, b, carried)
            hj[o + b, 0] = g
            hj[o + b, 1] = h
            hj[o + b, 2] = n
