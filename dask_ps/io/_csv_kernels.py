"""Numba kernel that turns one block of delimited text (CTR logs) straight into hashed CSR rows.

One pass over the bytes: split each line into fields (RFC 4180 quotes, no newline inside a
field), parse the label and the numeric fields, hash the categorical fields' bytes where they
lie (no string is made), add the crosses, then sort and sum each row's features. The tokens
are those of :class:`~dask_ps.io.HashingEncoder` (the same functions,
:mod:`._hashing_kernels`), so a file gives the same rows as its dataframe through
``HashingEncoder.transform``. The kernel never calls back into Python: it runs without the GIL.

Where the time goes (a 21 MB block of 32 generated Criteo-like columns, ~100 k rows): finding
the fields, 8 bytes at a time (:func:`_field_end`); hashing the categorical fields (their bytes
also loaded 8 at a time); sorting each row (:func:`~._hashing_kernels.emit_row`); numbers,
most of them short integers read without a branch per digit (:func:`_short_integer`) and
bucketed from a table; and the first writes to the output arrays, which the caller allocates
(NumPy maps them on huge pages).

What it cannot decide exactly it hands back: a number with more digits than Clinger's fast
path covers (``STATUS_SLOW``: the caller encodes the block through pyarrow instead), or a bad
line (``STATUS_ERROR`` with its line: the caller words the message).
"""

from __future__ import annotations

import numba
import numpy as np

from ..state._kernels import mix64
from ._hashing_kernels import (
    bucket_code,
    cross_token,
    emit_row,
    hash_bytes,
    load_word,
    number_token,
    pack_bits,
)
from ._libsvm_kernels import _number, _special

__all__ = ["K_CATEGORICAL", "K_LABEL", "K_NUMERIC", "K_SKIP", "encode_block"]

_JIT = dict(cache=True, nogil=True)

# What each field of a line is.
K_SKIP, K_LABEL, K_NUMERIC, K_CATEGORICAL = 0, 1, 2, 3
STATUS_OK, STATUS_ERROR, STATUS_SLOW, STATUS_FULL = 0, 1, 2, 3
# Slots of the int64 ``info`` array.
I_ROWS, I_NNZ, I_NEWLINES, I_STATUS, I_LINE = range(5)
N_INFO = 5

_QUOTE = 34
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_NEWLINES = np.uint64(0x0A0A0A0A0A0A0A0A)
_LOW_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
#: Integers below this take their bucket (log_bucket mode) from a table made per block.
_CODES = 1024


@numba.njit(inline="always", **_JIT)
def _strip(buf, s, e):
    """``[s, e)`` without surrounding spaces and tabs (pyarrow trims numbers so)."""
    while s < e and (buf[s] == 32 or buf[s] == 9):
        s += 1
    while e > s and (buf[e - 1] == 32 or buf[e - 1] == 9):
        e -= 1
    return s, e


@numba.njit(inline="always", **_JIT)
def _nan_text(buf, s, e):
    """Whether the field ``buf[s:e]`` is ``nan`` (any case and sign, spaces and tabs around
    it, quoted or not): a categorical field's missing value, as an empty one."""
    if e - s < 3:
        return False
    if buf[s] == _QUOTE:
        s, e = s + 1, e - 1
    a, b = _strip(buf, s, e)
    return _special(buf, a, b) == 1


@numba.njit(inline="always", **_JIT)
def _zero_bytes(x):
    """The high bit of each zero byte of ``x`` (the lowest exact; those above it may be
    wrong, from the borrow)."""
    return (x - _ONES) & ~x & _HIGHS


@numba.njit(inline="always", **_JIT)
def _low_byte(m):
    """Place of the lowest byte whose high bit ``m`` (not 0) sets."""
    x = (m & (~m + np.uint64(1))) >> np.uint64(7)
    return np.int64((((x - np.uint64(1)) & _ONES) * _ONES) >> np.uint64(56))


@numba.njit(inline="always", **_JIT)
def _short_integer(buf, s, e, n):
    """The value of ``buf[s:e]`` when it is 1 to 8 decimal digits (and 8 bytes from ``s`` are
    in ``buf``), else -1; without a branch per digit."""
    m = e - s
    if m <= 0 or m > 8 or s + 8 > n:
        return -1
    w = load_word(buf, s)
    keep = _ALL >> np.uint64(8 * (8 - m))  # the field's bytes
    # a byte above '9' gets its high bit from + 0x46, one below '0' from - 0x30 (a carry or
    # borrow then spoils the bytes above it only, which a bad byte below already condemns)
    if ((w + _ONES * np.uint64(0x46)) | (w - _ONES * np.uint64(0x30)) | w) & _HIGHS & keep:
        return -1
    # the digits at the top of the word (zeros before them), then pairs, fours, eight
    # (Lemire's parse of eight digits)
    x = ((w & keep & _LOW_NIBBLES) << np.uint64(8 * (8 - m)))
    x = (x * np.uint64(2561)) >> np.uint64(8)
    x = ((x & np.uint64(0x00FF00FF00FF00FF)) * np.uint64(6553601)) >> np.uint64(16)
    return np.int64(((x & np.uint64(0x0000FFFF0000FFFF)) * np.uint64(42949672960001))
                    >> np.uint64(32))


@numba.njit(inline="always", **_JIT)
def _field_end(buf, s, n, sep):
    """End of the field starting at ``s``: the separator, newline or end of ``buf`` after it
    (a quoted field runs to its closing quote, which a separator or the line's end must
    follow), or -1 for a quote that does not close on its line."""
    if s < n and buf[s] == _QUOTE:
        i = s + 1
        while i < n and buf[i] != 10:
            if buf[i] == _QUOTE:
                if i + 1 < n and buf[i + 1] == _QUOTE:
                    i += 2
                    continue
                i += 1
                if i < n and buf[i] == 13 and (i + 1 == n or buf[i + 1] == 10):
                    i += 1
                if i < n and buf[i] != sep and buf[i] != 10:
                    return -1
                return i
            i += 1
        return -1
    # 8 bytes at a time: which is a separator or a newline, without a branch per byte
    seps = np.uint64(sep) * _ONES
    i = s
    while i + 8 <= n:
        w = load_word(buf, i)
        m = _zero_bytes(w ^ seps) | _zero_bytes(w ^ _NEWLINES)
        if m:
            return i + _low_byte(m)
        i += 8
    while i < n and buf[i] != sep and buf[i] != 10:
        i += 1
    return i


@numba.njit(inline="always", **_JIT)
def _hash_quoted(buf, s, e, seed):
    """:func:`hash_bytes` of a quoted field's content (``""`` read as ``"``)."""
    h = np.uint64(0xCBF29CE484222325) ^ seed
    i = s + 1
    while i < e - 1:
        c = buf[i]
        if c == _QUOTE:
            i += 1
        h = (h ^ np.uint64(c)) * np.uint64(0x100000001B3)
        i += 1
    return mix64(h)


@numba.njit(**_JIT)
def encode_block(buf, sep, kinds, slot, seeds, missing, value_token, log_bucket, n_columns,
                 cross_a, cross_b, cross_seed, n_features, encode, labels, indptr, indices,
                 values):
    """Parse and encode a block of whole lines (no header).

    Parameters
    ----------
    buf : uint8 array
    sep : int
        The delimiter byte.
    kinds : int8 array (n_fields,)
        ``K_*`` of each field of a line, in file order.
    slot : int64 array (n_fields,)
        The encoder's column of each numeric or categorical field (its place in
        ``HashingEncoder.columns``).
    seeds, missing, value_token : uint64 arrays (n_columns,)
        Per encoder column: its seed, its "missing" token, its "value" token.
    log_bucket : bool
        Numeric mode: buckets (True) or one feature with the value (False).
    n_columns : int
        Columns of the encoder (the row's first features), crosses come after.
    cross_a, cross_b : int64 arrays, cross_seed : uint64 array
        The crosses: pairs of encoder columns, and each cross's seed.
    n_features : int
    encode : bool
        False: only check the lines and count the rows and newlines.
    labels : float64 array (capacity,)
    indptr : int64 array (capacity + 1,)
    indices : int32 or int64 array (capacity * width,)
    values : float array (capacity * width,)
        Filled with the rows when ``encode`` (else not used): row ``r`` has label
        ``labels[r]`` and the sorted, distinct ``indices[indptr[r]:indptr[r + 1]]`` (repeats
        summed) with their ``values``; ``width`` is the encoder's columns and crosses. The
        caller allocates them (NumPy maps large arrays on huge pages, which the first write
        faults in ~3x quicker than the kernel's own allocation would).

    Returns
    -------
    info : int64 (N_INFO,)
        ``info[I_ROWS]``, ``info[I_NNZ]``, ``info[I_NEWLINES]`` (when the status is OK), and
        ``info[I_STATUS]``: ``STATUS_ERROR`` with ``info[I_LINE]`` the 1-based line of the
        first bad line (a wrong number of fields, a quote that does not close, a numeric
        field that is not a number or is infinite, a label that is empty, NaN or infinite),
        ``STATUS_SLOW`` when a number needs the exact slow parser, ``STATUS_FULL`` when there
        are more rows than ``capacity``; the arrays are then incomplete.
    """
    n = buf.shape[0]
    n_fields = kinds.shape[0]
    capacity = labels.shape[0] if encode else 0
    width = n_columns + cross_a.shape[0]
    info = np.zeros(N_INFO, np.int64)
    if encode:
        indptr[0] = 0
    tokens = np.empty(width, np.uint64)
    vals = np.empty(width, np.float64)
    order = np.empty(5 * width + 1, np.uint64)  # the row's keys, then sorting scratch
    cols = np.empty(width, np.int64)
    nf = np.uint64(n_features)
    bits, key_bits = pack_bits(width, n_features)
    codes = np.empty(_CODES if log_bucket and encode else 0, np.int64)
    for i in range(codes.shape[0]):  # the buckets of small integers (a logarithm each)
        codes[i] = bucket_code(float(i))
    rows = 0
    nnz = 0
    line = 0
    pos = 0
    status = STATUS_OK
    while pos < n:
        line += 1
        if buf[pos] == 10 or (buf[pos] == 13 and (pos + 1 == n or buf[pos + 1] == 10)):
            pos += 1 if buf[pos] == 10 else 2
            continue  # a blank line: no row
        f = 0
        s = pos
        label = 0.0
        while True:
            fe = _field_end(buf, s, n, sep)
            if fe < 0 or f >= n_fields:
                status = STATUS_ERROR
                break
            last = fe >= n or buf[fe] == 10
            ce = fe - 1 if last and fe > s and buf[fe - 1] == 13 else fe  # content end
            k = kinds[f]
            if k == K_LABEL or k == K_NUMERIC:
                a, b = s, ce
                iv = _short_integer(buf, s, ce, n)
                if iv < 0:  # not 1 to 8 digits alone: spaces, quotes, signs, fractions...
                    a, b = _strip(buf, s, ce)
                    if b - a >= 2 and buf[a] == _QUOTE and buf[b - 1] == _QUOTE:
                        a, b = _strip(buf, a + 1, b - 1)
                if a == b:
                    if k == K_LABEL:
                        status = STATUS_ERROR
                        break
                    j = slot[f]
                    tokens[j] = missing[j]
                    vals[j] = 1.0
                else:
                    st, v = (0, float(iv)) if iv >= 0 else _number(buf, a, b)
                    if st == 2:
                        if _special(buf, a, b) == 1 and k == K_NUMERIC:
                            j = slot[f]
                            tokens[j] = missing[j]
                            vals[j] = 1.0
                        else:
                            status = STATUS_ERROR
                            break
                    elif st == 1:
                        status = STATUS_SLOW
                        break
                    elif k == K_LABEL:
                        label = v
                    else:
                        j = slot[f]
                        if log_bucket:
                            if encode:  # (an if-expression with 0 would make it a float)
                                code = codes[iv] if 0 <= iv < _CODES else bucket_code(v)
                                tokens[j] = number_token(code, seeds[j])
                            vals[j] = 1.0
                        else:
                            tokens[j] = value_token[j]
                            vals[j] = v
            elif k == K_CATEGORICAL and encode:
                j = slot[f]
                if ce == s or (ce - s == 2 and buf[s] == _QUOTE) or _nan_text(buf, s, ce):
                    tokens[j] = missing[j]
                elif buf[s] == _QUOTE:
                    tokens[j] = _hash_quoted(buf, s, ce, seeds[j])
                else:
                    tokens[j] = hash_bytes(buf, s, ce, seeds[j])
                vals[j] = 1.0
            f += 1
            if last:
                pos = fe + 1
                break
            s = fe + 1
        if status == STATUS_OK and f != n_fields:
            status = STATUS_ERROR
        if status == STATUS_OK and encode and rows == capacity:
            status = STATUS_FULL
        if status != STATUS_OK:
            break
        if encode:
            labels[rows] = label
            for p in range(cross_a.shape[0]):
                tokens[n_columns + p] = cross_token(tokens[cross_a[p]], tokens[cross_b[p]],
                                                    cross_seed[p])
                vals[n_columns + p] = 1.0
            nnz += emit_row(tokens, vals, nf, bits, key_bits, order, cols, indices, values,
                            nnz)
            indptr[rows + 1] = nnz
        rows += 1
    info[I_ROWS] = rows
    info[I_NNZ] = nnz
    info[I_NEWLINES] = line - (n > 0 and buf[n - 1] != 10)  # every line but an unended last
    info[I_STATUS] = status
    info[I_LINE] = line if status != STATUS_OK else 0
    return info
