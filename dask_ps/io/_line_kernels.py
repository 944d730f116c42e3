"""Counting the rows of a block of text lines without parsing them.

A reader's first pass needs only how many rows each block holds (so that its dask arrays have
known chunks) and how many lines (so that an error later names the line of its file); the one
parse of the lines, which also checks them, is left to the pass that stores them. A compiled
loop with no branch per byte (vectorised) counts the newlines and the lines that might not be
rows (those starting with whitespace, ``#`` or a carriage return); only when there are some does
a second loop walk from line to line to decide each. On generated LIBSVM lines: ~1.6-2.5 GB per
CPU second against ~0.7 for the walk alone (2 cores shared with other jobs), with no temporary
array (NumPy's ``flatnonzero(buf == 10)`` allocates a byte per byte).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["CSV", "SVM", "count_rows", "line_of_row", "lone_crs"]

#: What makes a line a row. ``SVM``: a token before any ``#`` (blank lines, lines of spaces
#: and comment lines are no rows). ``CSV``: anything but an empty line (``\n`` or ``\r\n``).
SVM, CSV = 0, 1


@numba.njit(cache=True, nogil=True)
def _quick(buf, rule):
    """``(newlines, odd)``: ``odd`` counts the lines that may not be rows (a first byte that
    is a newline, a carriage return, or for ``SVM`` other whitespace or ``#``). Loops with
    no branch per byte, which the compiler vectorises (~1.8-3 GB per CPU second, against
    ~0.7 for :func:`_exact`'s walk from line to line on generated LIBSVM lines)."""
    n = buf.shape[0]
    if n == 0:
        return 0, 0
    newlines = np.uint8(buf[0] == 10)
    if rule == CSV:
        odd = np.uint8((buf[0] == 10) | (buf[0] == 13))
        for i in range(1, n):
            c = buf[i]
            newlines += np.uint8(c == 10)
            odd += np.uint8(buf[i - 1] == 10) & np.uint8((c == 10) | (c == 13))
    else:
        c = buf[0]
        odd = np.uint8((np.uint8(c - 9) <= 4) | (c == 32) | (c == 35))
        for i in range(1, n):
            c = buf[i]
            newlines += np.uint8(c == 10)
            odd += np.uint8(buf[i - 1] == 10) & np.uint8((np.uint8(c - 9) <= 4) | (c == 32)
                                                         | (c == 35))
    return newlines, odd


@numba.njit(cache=True, nogil=True)
def _exact(buf, rule):
    n = buf.shape[0]
    rows = 0
    newlines = 0
    i = 0
    while i < n:  # at the start of a line
        c = buf[i]
        if rule == CSV:
            rows += not (c == 10 or (c == 13 and (i + 1 == n or buf[i + 1] == 10)))
        else:
            # LIBSVM: the whitespace of bytes.split() (space, \t, \v, \f, \r) before the
            # first token; a newline, '#' or the end first means no token.
            while c != 10 and (c == 32 or 9 <= c <= 13):
                i += 1
                if i == n:
                    c = 10
                    break
                c = buf[i]
            rows += c != 10 and c != 35
        while i < n and buf[i] != 10:
            i += 1
        newlines += i < n
        i += 1
    return rows, newlines


def count_rows(buf: np.ndarray, rule: int) -> tuple[int, int]:
    """``(rows, newlines)`` of whole lines of text.

    Parameters
    ----------
    buf : uint8 array
        The bytes; the last line may lack its newline.
    rule : int
        ``SVM`` or ``CSV``: which lines are rows (see the constants).

    Returns
    -------
    rows, newlines : int
        As the parsing kernels of the same format count them (``parse_block`` of
        :mod:`._libsvm_kernels`, ``encode_block`` of :mod:`._csv_kernels`).
    """
    newlines, odd = _quick(buf, rule)
    if odd:  # some line may not be a row: look at each
        return tuple(int(v) for v in _exact(buf, rule))
    # every line is a row, the last one too unless the bytes end with its newline
    return int(newlines + (buf.shape[0] > 0 and buf[-1] != 10)), int(newlines)


@numba.njit(cache=True, nogil=True)
def _lone_crs(buf):
    n = 0
    for i in range(buf.shape[0] - 1):
        n += np.uint8(buf[i] == 13) & np.uint8(buf[i + 1] != 10)
    return n


@numba.njit(cache=True, nogil=True)
def _holds_cr(buf):
    """Whether ``buf`` holds a CR: 4 KiB at a time without a branch per byte (a running
    maximum, which the compiler vectorises: memchr's speed, ~4x the count's), stopping at
    the first 4 KiB that holds one."""
    n = buf.shape[0]
    i = 0
    while i + 4096 <= n:
        seen = np.uint8(0)
        for j in range(i, i + 4096):
            seen = max(seen, np.uint8(buf[j] == np.uint8(13)))
        if seen:
            return True
        i += 4096
    for j in range(i, n):
        if buf[j] == 13:
            return True
    return False


def lone_crs(buf: np.ndarray) -> int:
    """How many carriage returns of whole lines of text (uint8) end no line: a CR ends one
    before a newline (CRLF) or as the last byte, no other (pyarrow ends a line at any CR, so
    a lone one splits a row in two). A loop with no branch per byte (~13 GB per CPU second),
    run only on bytes that hold a CR (LF-only text: a scan at memchr's speed, no count)."""
    return int(_lone_crs(buf)) if _holds_cr(buf) else 0


def line_of_row(buf: np.ndarray, rule: int, row: int) -> int:
    """The line of whole lines of text that holds a row, for an error's line number.

    Vectorised NumPy (a few temporary bytes per byte of ``buf``): meant for the error path,
    run once on one block, never on the way of a good read.

    Parameters
    ----------
    buf : uint8 array
        The bytes; the last line may lack its newline.
    rule : int
        ``SVM`` or ``CSV``: which lines are rows, as :func:`count_rows` decides.
    row : int
        The row, 0-based, among the rows of ``buf``.

    Returns
    -------
    int
        Its line, 1-based, among all the lines of ``buf`` (blank and comment lines
        counted).

    Raises
    ------
    IndexError
        ``buf`` has ``row`` rows or fewer.
    """
    buf = np.asarray(buf, np.uint8)
    n = buf.shape[0]
    starts = np.concatenate([[0], np.flatnonzero(buf == 10) + 1])
    starts = starts[starts < n]  # the end of the bytes starts no line
    if rule == CSV:  # a row unless empty: "\n", or "\r" before a newline or the end
        first = buf[starts]
        after = np.append(buf, np.uint8(10))[np.minimum(starts + 1, n)]
        is_row = (first != 10) & ~((first == 13) & (after == 10))
    else:  # the first byte past the blanks (space, \t, \v, \f, \r) of each line
        blank = (buf == 32) | ((buf >= 9) & (buf <= 13) & (buf != 10))
        kept = np.flatnonzero(~blank)
        at = np.searchsorted(kept, starts)
        first = np.append(buf[kept], np.uint8(10))[at]  # none left: the end, no row
        is_row = (first != 10) & (first != 35)
    lines = np.flatnonzero(is_row)
    if not 0 <= row < lines.shape[0]:
        raise IndexError(f"row {row} of {lines.shape[0]}")
    return int(lines[row]) + 1
