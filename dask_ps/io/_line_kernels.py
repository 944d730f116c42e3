"""Counting the rows of a block of text lines without parsing them.

A reader's first pass needs only how many rows each block holds (so that its dask arrays have
known chunks) and how many lines (so that an error later names the line of its file); the one
parse of the lines, which also checks them, is left to the pass that stores them. The newlines
are found by vectorised NumPy; only the first bytes of each line are looked at, in a compiled
loop over the lines.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["CSV", "SVM", "count_rows"]

#: What makes a line a row. ``SVM``: a token before any ``#`` (blank lines, lines of spaces
#: and comment lines are no rows). ``CSV``: anything but an empty line (``\n`` or ``\r\n``).
SVM, CSV = 0, 1


@numba.njit(cache=True, nogil=True)
def _rows_at(buf, starts, rule):
    """Rows among the lines starting at ``starts`` (each runs to its newline or ``buf``'s
    end)."""
    n = buf.shape[0]
    rows = 0
    for s in starts:
        c = buf[s]
        if rule == CSV:
            rows += not (c == 10 or (c == 13 and (s + 1 == n or buf[s + 1] == 10)))
            continue
        # LIBSVM: the whitespace of bytes.split() (space, \t, \v, \f, \r) before the first
        # token; a newline or '#' first means no token.
        while c != 10 and (c == 32 or 9 <= c <= 13):
            s += 1
            if s == n:
                c = 10  # only whitespace up to the end: no token
                break
            c = buf[s]
        rows += c != 10 and c != 35
    return rows


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
    ends = np.flatnonzero(buf == 10)
    starts = np.empty(ends.size + 1, np.int64)
    starts[0] = 0
    starts[1:] = ends + 1
    if starts[-1] == buf.size:  # no line after the last newline
        starts = starts[:-1]
    return int(_rows_at(buf, starts, rule)), int(ends.size)
