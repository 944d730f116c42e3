"""Numba kernel that parses one block of LIBSVM text (raw bytes) into CSR pieces.

The kernel never calls back into Python, so it runs without the GIL and several blocks
parse in parallel on one worker. Numbers are converted exactly (correctly rounded, the
same result as ``float()``/``strtod``) when Clinger's fast path applies, which covers
every value with at most 15-16 significant digits and a modest exponent; the few tokens
it cannot prove exact are copied to a side buffer and converted by the caller with
Python's correctly rounded parser, so the output never differs from ``float(token)``.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["parse_block"]

# Error codes; the caller turns them into messages.
E_NO_COLON = 1
E_EMPTY_INDEX = 2
E_BAD_INDEX = 3
E_NEG_INDEX = 4
E_ZERO_INDEX = 5
E_BIG_INDEX = 6
E_BAD_VALUE = 7
E_BAD_LABEL = 8
E_DUP_INDEX = 9
#: A value finite in float64 but beyond the range of X's narrower dtype (float32): found by
#: the caller, on the numbers the kernel leaves to it (every value above 2**53 * 10**22,
#: about 9.0e37, is one of them, so every value beyond float32's 3.4e38 is).
E_RANGE = 10

# Slots of the int64 ``info`` array returned next to the data arrays.
I_ROWS, I_NNZ, I_NSLOW, I_BLOB, I_MIN, I_MAX, I_CANON, I_NEWLINES = range(8)
I_ERR, I_ERR_LINE, I_ERR_START, I_ERR_END, I_ZERO_LINE = range(8, 13)
N_INFO = 13

NO_LIMIT = np.iinfo(np.int64).max
#: The largest feature index a file may hold: 2**63 - 2, so that the index and the width
#: ``n_features`` (the largest index + 1) both fit int64 (the largest key of a wide model).
MAX_INDEX = 2**63 - 2
# ``idx * 10 + digit`` stays at most MAX_INDEX while idx < _TENTH, or == _TENTH and the
# digit <= _LAST (one comparison per digit in the usual case)
_TENTH, _LAST = MAX_INDEX // 10, MAX_INDEX % 10

# Exact powers of ten: 10**k is representable in float64 for k <= 22.
_POW10 = np.array([float(10**k) for k in range(23)])
_IPOW10 = np.array([10**k for k in range(16)], dtype=np.int64)
_TWO53 = 2**53


@numba.njit(cache=True, nogil=True, inline="always")
def _isspace(c):
    # The same set as bytes.split(): space, \t, \n, \v, \f, \r.
    return c == 32 or (9 <= c <= 13)


@numba.njit(cache=True, nogil=True, inline="always")
def _number(buf, s, e):
    """Parse buf[s:e] as ``[+-]?(d+.?d*|.d+)([eE][+-]?d+)?``.

    Returns (status, value): status 0 = exact value, 1 = valid but needs the slow
    exact parser, 2 = not a number (this includes nan and inf: see :func:`_special`).
    """
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    mant = 0
    nsig = 0
    ndig = 0
    exp10 = 0
    slow = False
    while i < e and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        ndig += 1
        if mant != 0 or d != 0:
            if nsig < 18:  # keeps mant below 10**18, far from int64 overflow
                mant = mant * 10 + d
                nsig += 1
            else:
                slow = True
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            d = buf[i] - 48
            ndig += 1
            if mant != 0 or d != 0:
                if nsig < 18:
                    mant = mant * 10 + d
                    nsig += 1
                else:
                    slow = True
            exp10 -= 1
            i += 1
    if ndig == 0:
        return 2, 0.0
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        ex = 0
        edig = 0
        while i < e and 48 <= buf[i] <= 57:
            if ex < 100000:  # larger exponents over/underflow anyway
                ex = ex * 10 + (buf[i] - 48)
            edig += 1
            i += 1
        if edig == 0:
            return 2, 0.0
        exp10 += -ex if eneg else ex
    if i != e:
        return 2, 0.0
    if mant == 0:
        return 0, -0.0 if neg else 0.0
    if slow or mant > _TWO53:
        return 1, 0.0
    # Clinger's fast path: both operands are exact, so one IEEE operation rounds correctly.
    if 0 <= exp10 <= 22:
        v = mant * _POW10[exp10]
    elif -22 <= exp10 < 0:
        v = mant / _POW10[-exp10]
    elif 22 < exp10 <= 37 and mant <= _TWO53 // _IPOW10[exp10 - 22]:
        v = (mant * _IPOW10[exp10 - 22]) * _POW10[22]
    else:
        return 1, 0.0
    return 0, -v if neg else v


@numba.njit(cache=True, nogil=True, inline="always")
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@numba.njit(cache=True, nogil=True, inline="always")
def _special(buf, s, e):
    """1 for ``nan``, 2 for ``inf`` / ``infinity`` (any case, optional sign), else 0."""
    if s < e and (buf[s] == 43 or buf[s] == 45):
        s += 1
    n = e - s
    if n == 3:
        a, b, c = _lower(buf[s]), _lower(buf[s + 1]), _lower(buf[s + 2])
        if a == 110 and b == 97 and c == 110:
            return 1
        if a == 105 and b == 110 and c == 102:
            return 2
    if n == 8:
        word = b"infinity"
        for k in range(8):
            if _lower(buf[s + k]) != word[k]:
                return 0
        return 2
    return 0


@numba.njit(cache=True, nogil=True, inline="always")
def _plain_pair(buf, i, n):
    """``(index, end, value)`` of a pair ``digits:digits[.digits]`` at ``buf[i]`` (a digit)
    that ends the token (whitespace, ``#`` or the end follows) and whose value has at most 15
    digits, so that it is exact; ``end`` is 0 for any other token."""
    idx = 0
    j = i
    while j < n and 48 <= buf[j] <= 57 and j - i < 18:
        idx = idx * 10 + (buf[j] - 48)
        j += 1
    if j >= n or buf[j] != 58:
        return 0, 0, 0.0
    j += 1
    s = j
    mant = 0
    while j < n and 48 <= buf[j] <= 57:
        mant = mant * 10 + (buf[j] - 48)
        j += 1
    nd = j - s
    frac = 0
    if j < n and buf[j] == 46:
        j += 1
        f = j
        while j < n and 48 <= buf[j] <= 57:
            mant = mant * 10 + (buf[j] - 48)
            j += 1
        frac = j - f
        nd += frac
    if nd == 0 or nd > 15 or (j < n and not _isspace(buf[j]) and buf[j] != 35):
        return 0, 0, 0.0
    # below 10**15 < 2**53 both operands are exact: one IEEE operation rounds correctly
    v = mant / _POW10[frac] if frac else float(mant)
    return idx, j, v


@numba.njit(cache=True, nogil=True, inline="always")
def _record(indices, values, k, idx, v, shift, store, prev, ordered, lo, hi):
    """Store pair ``k`` (feature ``idx``, value ``v``) when ``store``; returns the row's
    ``ordered`` flag (indices strictly increasing so far) and the index bounds updated."""
    if store:
        indices[k] = idx - shift
        values[k] = v
    return ordered and idx > prev, min(lo, idx), max(hi, idx)


@numba.njit(cache=True, nogil=True)
def _line_indices(buf, s, e, out, at):
    """How many pairs the line ``buf[s:e]`` (its content, a line the kernel parsed without
    error) has; their feature indices go to ``out`` and their starts to ``at`` (each of at
    least ``(e - s) // 2 + 1`` items: a token and its separator take 2 bytes or more)."""
    m = 0
    tok = 0
    i = s
    while True:
        while i < e and _isspace(buf[i]):
            i += 1
        if i >= e:
            return m
        ts = i
        while i < e and not _isspace(buf[i]):
            i += 1
        tok += 1
        if tok == 1 or (tok == 2 and i - ts >= 4 and buf[ts] == 113 and buf[ts + 1] == 105
                        and buf[ts + 2] == 100 and buf[ts + 3] == 58):
            continue  # the label, a query id
        v = 0
        j = ts
        while buf[j] != 58:  # digits, checked by the parse
            v = v * 10 + (buf[j] - 48)
            j += 1
        out[m] = v
        at[m] = ts
        m += 1


@numba.njit(cache=True, nogil=True)
def _repeat_in(buf, s, e, scratch, at):
    """The byte span of the first pair of the line ``buf[s:e]`` (as :func:`_line_indices`)
    whose feature index an earlier pair of the line has, or ``(-1, -1)``: its indices are
    copied to ``scratch`` and sorted there (both arrays as :func:`_line_indices` asks); only
    when two are equal, the first pair repeating one is looked for (a stable sort)."""
    m = _line_indices(buf, s, e, scratch, at)
    part = scratch[:m]
    part.sort()
    for t in range(1, m):
        if part[t] == part[t - 1]:
            break
    else:
        return -1, -1
    m = _line_indices(buf, s, e, scratch, at)  # in line order again
    idx = scratch[:m]
    order = np.argsort(idx, kind="mergesort")
    best = -1
    for t in range(1, m):
        if idx[order[t]] == idx[order[t - 1]] and (best < 0 or order[t] < best):
            best = order[t]
    ts = at[best]
    te = ts
    while te < e and not _isspace(buf[te]):
        te += 1
    return ts, te


@numba.njit(cache=True, nogil=True)
def parse_block(buf, shift, reject_zero, max_raw, store, index_probe, value_probe):
    """Parse a block of whole LIBSVM lines.

    Parameters
    ----------
    buf : uint8 array
        The raw bytes.
    shift : int
        Subtracted from every feature index (1 for one-based input).
    reject_zero : bool
        Index 0 is an error (one-based input).
    max_raw : int
        Largest allowed feature index as written in the file.
    store : bool
        Fill the output arrays; False only checks the lines and counts (a first pass).
    index_probe, value_probe : arrays
        Their dtypes are those of ``indices`` and ``values`` (e.g. int32 and float32: the
        numbers are parsed as float64 and rounded once, as ``float(token)`` then a cast).

    Returns
    -------
    labels, indptr, indices, values, blob, slow_at, slow_line, slow_start, info
        ``info[I_ROWS]`` rows and ``info[I_NNZ]`` pairs of the (over-allocated, or empty
        without ``store``) arrays are filled. The ``info[I_NSLOW]`` numbers the kernel could
        not convert exactly are in ``blob[:info[I_BLOB]]``, space separated; ``slow_at`` says
        where each goes (``k >= 0``: ``values[k]``, ``k < 0``: ``labels[-k - 1]``),
        ``slow_line`` and ``slow_start`` locate its token for error messages. ``info[I_ERR]``
        is nonzero after an error, with the 1-based line in the block and the token's byte
        span. A pair whose value is NaN or empty (``3:``) is left out (a missing value).
        Indices may come in any order on a line but not twice (``E_DUP_INDEX``, the token of
        the first pair that repeats one); ``info[I_CANON]`` says whether every line's are
        strictly increasing (then the CSR rows are sorted). Without ``store``,
        ``info[I_ZERO_LINE]`` is the first line (1-based) holding index 0, 0 for none (what
        makes ``zero_based="auto"`` read zero-based); with it, 0.

    Notes
    -----
    The repeat check costs one comparison per pair (each index against the previous one of
    its line, which also tells ``info[I_CANON]``); only a line whose indices are not
    strictly increasing is walked again, after the block's walk, and a copy of its indices
    sorted (:func:`_repeat_in`).
    """
    n = buf.size
    n_nl = 0
    n_col = 0
    for i in range(n):
        c = buf[i]
        n_nl += c == 10
        n_col += c == 58
    labels = np.empty(n_nl + 1 if store else 0, np.float64)
    indptr = np.empty(n_nl + 2 if store else 1, np.int64)
    indices = np.empty(n_col if store else 0, index_probe.dtype)
    values = np.empty(n_col if store else 0, value_probe.dtype)
    blob = np.empty(n + 1, np.uint8)
    slow_at = np.empty(n_col + n_nl + 1, np.int64)
    slow_line = np.empty(n_col + n_nl + 1, np.int64)
    slow_start = np.empty(n_col + n_nl + 1, np.int64)
    # lines whose indices are not strictly increasing: checked for repeats after the loop
    unordered_at = np.empty(n_nl + 1, np.int64)
    unordered_end = np.empty(n_nl + 1, np.int64)
    unordered_line = np.empty(n_nl + 1, np.int64)
    n_unordered = 0
    info = np.zeros(N_INFO, np.int64)
    info[I_NEWLINES] = n_nl
    zero_line = 0
    lo = NO_LIMIT
    hi = -1
    canonical = True
    rows = 0
    nnz = 0
    nslow = 0
    blen = 0
    err = 0
    err_s = 0
    err_e = 0
    indptr[0] = 0
    line = 0
    pos = 0
    while pos < n:
        line += 1
        # one walk over the line: tokens end at whitespace; '#' ends the content
        i = pos
        k = nnz
        prev = -1
        ordered = True
        first = True
        is_label = True
        empty = True
        while True:
            while i < n and _isspace(buf[i]) and buf[i] != 10:
                i += 1
            if i >= n or buf[i] == 10 or buf[i] == 35:
                break
            ts = i
            if not is_label and 48 <= buf[i] <= 57:
                # The common pair, digits ':' digits ['.' digits], read in one walk; anything
                # else (a sign, an exponent, many digits, an error) takes the general path.
                idx, vend, v = _plain_pair(buf, i, n)
                if vend > 0 and idx <= max_raw and (idx > 0 or not reject_zero):
                    first = False
                    empty = False
                    ordered, lo, hi = _record(indices, values, k, idx, v, shift, store,
                                              prev, ordered, lo, hi)
                    prev = idx
                    k += 1
                    i = vend
                    continue
            colon = -1
            while i < n and not _isspace(buf[i]) and buf[i] != 35:
                if buf[i] == 58 and colon < 0:
                    colon = i
                i += 1
            te = i
            empty = False
            if is_label:
                is_label = False
                st, v = _number(buf, ts, te)
                if st == 2:
                    err, err_s, err_e = E_BAD_LABEL, ts, te
                    break
                if store:
                    labels[rows] = v
                if st == 1:
                    for j in range(ts, te):
                        blob[blen] = buf[j]
                        blen += 1
                    blob[blen] = 32
                    blen += 1
                    slow_at[nslow] = -(rows + 1)
                    slow_line[nslow] = line
                    slow_start[nslow] = ts
                    nslow += 1
                continue
            if first:
                first = False
                # svmlight's optional query id sits right after the label; it is not a feature.
                if (te - ts >= 4 and buf[ts] == 113 and buf[ts + 1] == 105
                        and buf[ts + 2] == 100 and buf[ts + 3] == 58):
                    continue
            err_s, err_e = ts, te
            if colon < 0:
                err = E_NO_COLON
                break
            if colon == ts:
                err = E_EMPTY_INDEX
                break
            j = ts
            neg = buf[j] == 45
            if neg:
                j += 1
            if j == colon:
                err = E_BAD_INDEX
                break
            idx = 0
            while j < colon and 48 <= buf[j] <= 57:
                if idx >= _TENTH and (idx > _TENTH or buf[j] - 48 > _LAST):
                    err = E_BIG_INDEX  # above MAX_INDEX (before int64 could overflow)
                    break
                idx = idx * 10 + (buf[j] - 48)
                j += 1
            if err:
                break
            if j != colon:
                err = E_BAD_INDEX
                break
            if neg:
                err = E_NEG_INDEX
                break
            if idx == 0 and reject_zero:
                err = E_ZERO_INDEX
                break
            if idx > max_raw:
                err = E_BIG_INDEX
                break
            st, v = _number(buf, colon + 1, te)
            if st == 2:
                if te == colon + 1 or _special(buf, colon + 1, te) == 1:
                    # empty or NaN: a missing value, the pair is left out; its index
                    # still counts for the width (a second pass, given it, checks it)
                    lo, hi = min(lo, idx), max(hi, idx)
                    ordered = ordered and idx > prev
                    prev = idx
                    continue
                err = E_BAD_VALUE
                break
            if st == 1:
                for j in range(colon + 1, te):
                    blob[blen] = buf[j]
                    blen += 1
                blob[blen] = 32
                blen += 1
                slow_at[nslow] = k
                slow_line[nslow] = line
                slow_start[nslow] = ts
                nslow += 1
            ordered, lo, hi = _record(indices, values, k, idx, v, shift, store, prev,
                                      ordered, lo, hi)
            prev = idx
            k += 1
        if err:
            break
        if not ordered:
            unordered_at[n_unordered] = pos
            unordered_end[n_unordered] = i
            unordered_line[n_unordered] = line
            n_unordered += 1
        while i < n and buf[i] != 10:  # a comment, or nothing
            i += 1
        pos = i + 1
        if empty:
            continue
        nnz = k
        rows += 1
        if store:
            indptr[rows] = nnz
        elif lo == 0 and zero_line == 0:  # a test a line of the first pass alone
            zero_line = line
    scratch = np.empty(0, np.int64)
    at = np.empty(0, np.int64)
    for u in range(n_unordered):  # before any error of the loop: they are earlier lines
        canonical = False
        s, e = unordered_at[u], unordered_end[u]
        if scratch.shape[0] < (e - s) // 2 + 1:  # one buffer, grown for longer lines
            scratch = np.empty(max((e - s) // 2 + 1, 2 * scratch.shape[0]), np.int64)
            at = np.empty(scratch.shape[0], np.int64)
        rs, re_ = _repeat_in(buf, s, e, scratch, at)
        if rs >= 0:
            err, line, err_s, err_e = E_DUP_INDEX, unordered_line[u], rs, re_
            break
    info[I_ROWS] = rows
    info[I_NNZ] = nnz
    info[I_NSLOW] = nslow
    info[I_BLOB] = blen
    info[I_MIN] = lo
    info[I_MAX] = hi
    info[I_CANON] = canonical
    info[I_ZERO_LINE] = zero_line
    if err:
        info[I_ERR] = err
        info[I_ERR_LINE] = line
        info[I_ERR_START] = err_s
        info[I_ERR_END] = err_e
    return labels, indptr, indices, values, blob, slow_at, slow_line, slow_start, info
