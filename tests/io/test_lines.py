"""The first pass of the text readers counts rows without parsing: it must count exactly the rows
and lines the parsing kernels find, on every kind of line (blank, spaces only, comments, CRLF,
no newline at the end)."""

from __future__ import annotations

import numpy as np
import pytest

from dask_ps.io import _csv_kernels as C
from dask_ps.io import _libsvm_kernels as K
from dask_ps.io._line_kernels import CSV, SVM, count_rows, line_of_row, lone_crs

SVM_LINES = [b"1 1:0.5 3:2", b"", b"   ", b"\t", b"# a comment", b"  # indented comment",
             b"-1 qid:3 2:1 # tail", b"\r", b" \r", b"0", b"+1 7:1\r", b"\x0b1 2:1", b" 1 2:2"]
CSV_LINES = [b"1,a,2", b"", b"\r", b"0,,", b"1,b,3\r", b"0,\"q\",1"]


def _text(lines, rng, n):
    picks = rng.integers(0, len(lines), n)
    text = b"\n".join(lines[i] for i in picks)
    return text + (b"\n" if rng.random() < 0.5 else b"")


def _svm_counts(buf):
    out = K.parse_block(buf, 0, False, K.NO_LIMIT, False, np.empty(0, np.int64),
                        np.empty(0, np.float64))
    info = out[-1]
    assert info[K.I_ERR] == 0
    return int(info[K.I_ROWS]), int(info[K.I_NEWLINES])


def _csv_counts(buf):
    kinds = np.array([C.K_LABEL, C.K_CATEGORICAL, C.K_NUMERIC], np.int8)
    slot = np.array([-1, 0, 1], np.int64)
    z = np.zeros(2, np.uint64)
    empty = np.empty(0, np.int64)
    info = C.encode_block(buf, ord(","), kinds, slot, z, z, z, True, 2, empty, empty,
                          np.empty(0, np.uint64), 2**20, False, np.empty(0, np.float64),
                          np.empty(1, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    assert info[C.I_STATUS] == C.STATUS_OK
    return int(info[C.I_ROWS]), int(info[C.I_NEWLINES])


@pytest.mark.parametrize("seed", range(40))
def test_svm_rows_as_the_parser_counts_them(seed):
    rng = np.random.default_rng(seed)
    buf = np.frombuffer(_text(SVM_LINES, rng, int(rng.integers(0, 30))), np.uint8)
    assert count_rows(buf, SVM) == _svm_counts(buf)


@pytest.mark.parametrize("seed", range(40))
def test_csv_rows_as_the_encoder_counts_them(seed):
    rng = np.random.default_rng(seed)
    buf = np.frombuffer(_text(CSV_LINES, rng, int(rng.integers(0, 30))), np.uint8)
    assert count_rows(buf, CSV) == _csv_counts(buf)


def test_edges():
    empty = np.empty(0, np.uint8)
    assert count_rows(empty, SVM) == (0, 0) == count_rows(empty, CSV)
    for text, svm, csv in [(b"\n", (0, 1), (0, 1)), (b"1", (1, 0), (1, 0)),
                           (b"1\n2", (2, 1), (2, 1)), (b"  ", (0, 0), (1, 0)),
                           (b"\r", (0, 0), (0, 0)), (b"#\n#", (0, 1), (2, 1))]:
        buf = np.frombuffer(text, np.uint8)
        assert count_rows(buf, SVM) == svm, text
        assert count_rows(buf, CSV) == csv, text


@pytest.mark.parametrize("seed", range(10))
def test_rows_when_every_line_is_a_row(seed):
    """The quick count (no line that might not be a row) against the parsers."""
    rng = np.random.default_rng(seed)
    svm = [b"1 1:0.5 3:2", b"-1 qid:3 2:1 # tail", b"0", b"+1 7:1\r", b"1#x"]
    buf = np.frombuffer(_text(svm, rng, int(rng.integers(1, 30))), np.uint8)
    assert count_rows(buf, SVM) == _svm_counts(buf)
    csv = [b"1,a,2", b"0,,", b"1,b,3\r", b"0,\"q\",1"]
    buf = np.frombuffer(_text(csv, rng, int(rng.integers(1, 30))), np.uint8)
    assert count_rows(buf, CSV) == _csv_counts(buf)


def _walk_lines_of_rows(buf, rule):
    """The 1-based lines holding the rows, by the parsers' rule walked line by line."""
    out = []
    for i, line in enumerate(bytes(buf).split(b"\n")[: bytes(buf).count(b"\n") + 1], 1):
        if rule == CSV:
            row = line not in (b"", b"\r")
        else:
            token = line.lstrip(b" \t\x0b\x0c\r")
            row = bool(token) and not token.startswith(b"#")
        if row:
            out.append(i)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_line_of_row_as_the_counts_see_rows(seed):
    """The line an error names for a row (:func:`line_of_row`): every row of count_rows, in
    order, at the line a walk over the lines finds it."""
    rng = np.random.default_rng(seed)
    for lines, rule in ((SVM_LINES, SVM), (CSV_LINES, CSV)):
        buf = np.frombuffer(_text(lines, rng, int(rng.integers(0, 30))), np.uint8)
        rows, _ = count_rows(buf, rule)
        expect = _walk_lines_of_rows(buf, rule)
        assert len(expect) == rows
        assert [line_of_row(buf, rule, r) for r in range(rows)] == expect
        with pytest.raises(IndexError):
            line_of_row(buf, rule, rows)


def test_lone_crs_are_the_crs_before_neither_a_newline_nor_the_end():
    for text, lone in [(b"", 0), (b"\r", 0), (b"1\r\n2\r", 0), (b"1\r2\n", 1), (b"\r1\n", 1),
                       (b"1\r\r\n", 1), (b'"a\rb"\r\n', 1), (b"\r\r", 1), (b"1\n\r\r\r\n", 2)]:
        assert lone_crs(np.frombuffer(text, np.uint8)) == lone, text
    rng = np.random.default_rng(0)
    buf = rng.choice(np.array([10, 13, 49], np.uint8), 10_000)
    text = bytes(buf)
    assert lone_crs(buf) == text.count(b"\r") - text.count(b"\r\n") - text.endswith(b"\r")
    # LF-only text is scanned for a CR 8 bytes at a time before any is counted: one CR at
    # any place of a word, a 4 KiB stretch or the tail is found, in views at any offset
    lines = np.frombuffer(b"12,ab,c\n" * 1100, np.uint8)  # 8800 bytes
    assert lone_crs(lines) == 0
    for at in (0, 7, 4095, 4096, 4100, 8191, 8192, 8789, 8797):  # none before a LF
        with_cr = lines.copy()
        with_cr[at] = 13
        for skip in (0, 3):
            assert lone_crs(with_cr[skip:]) == (at >= skip), (at, skip)
