"""The CSV blocks of :func:`~dask_ps.io.read_ctr`: a first pass counting each block's rows,
then one parse of its lines into hashed CSR rows (the kernel of :mod:`._csv_kernels`, or
pyarrow for what it cannot decide), its labels and (with a weight column) its weights."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from . import _csv_kernels as _ck
from ._blocks import box, expect_rows, header_end, read_array
from ._csv import (
    LineError,
    bad_line,
    block_weights,
    line_hint,
    line_of_row,
    nan_as_null,
    parse_block,
)
from ._line_kernels import CSV, count_rows, lone_crs
from .hashing import HashingEncoder, csr_rows, index_dtype, too_large

__all__ = ["Layout", "count_chunk", "encode_block", "layout_of", "load_chunk"]


class Layout(NamedTuple):
    names: list  # every column of a line
    label: str
    header: bool
    sep: str
    kinds: np.ndarray  # int8 per field: _ck.K_*
    slot: np.ndarray  # int64 per field: the encoder's column, or -1
    weight: str | None = None  # the column of sample weights (not a feature), if any


def layout_of(names: list, label: str, header: bool, sep: str, encoder: HashingEncoder,
              weight: str | None = None) -> Layout:
    pos = {c: i for i, c in enumerate(encoder.columns)}
    kinds = np.array([_ck.K_LABEL if n == label else _ck.K_NUMERIC if n in encoder.numeric
                      else _ck.K_CATEGORICAL if n in encoder.categorical else _ck.K_SKIP
                      for n in names], np.int8)
    slot = np.array([pos.get(n, -1) for n in names], np.int64)
    return Layout(list(names), label, header, sep, kinds, slot, weight)


def _types(layout: Layout, encoder: HashingEncoder) -> dict:
    return {layout.label: pa.float64(), **encoder.arrow_types()}


def encode_block(fs, block, line0: int, layout: Layout, encoder: HashingEncoder, dtype,
                 expect: int) -> tuple:
    """``(X, y)`` of one block whose first pass counted ``expect`` rows; ``(X, y, w)`` with
    a weight column (``layout.weight``, parsed apart by pyarrow:
    :func:`~._csv.block_weights`).

    The kernel (:func:`~._csv_kernels.encode_block`) does the work; a block holding a number
    it cannot convert exactly goes through pyarrow and ``encoder.transform`` instead.

    Raises
    ------
    LineError
        The first bad line, with the file's line number (``line0`` lines precede the block);
        a lone CR (:func:`~._line_kernels.lone_crs`) makes its line bad, as in
        :func:`~._frame.read_frame`.
    ValueError
        Not ``expect`` rows: the file changed since its first pass.
    """
    raw = read_array(fs, block)
    start, skipped = header_end(raw, block, layout.header)
    types = _types(layout, encoder)
    # a lone CR, refused as read_frame refuses it (the kernel reads it as a field's byte)
    if lone_crs(raw[start:]):
        raise bad_line(raw[start:].tobytes(), layout.names, types, layout.sep, block.path,
                       line0 + skipped, "a lone CR", layout.label, True)
    seeds, missing, value, cross_seed = encoder.column_seeds()
    a, b = encoder.cross_columns()
    size = expect * encoder.width
    labels, indptr = np.empty(expect, np.float64), np.empty(expect + 1, np.int64)
    indices = np.empty(size, index_dtype(encoder.n_features, size))
    values = np.empty(size, dtype)
    info = _ck.encode_block(
        raw[start:], ord(layout.sep), layout.kinds, layout.slot,
        seeds, missing, value, encoder.numeric_mode == "log_bucket", len(encoder.columns), a,
        b, cross_seed, encoder.n_features, True, labels, indptr, indices, values)
    status = int(info[_ck.I_STATUS])
    if status in (_ck.STATUS_OK, _ck.STATUS_FULL) and encoder.numeric_mode == "value" and \
            np.isinf(values[:int(info[_ck.I_NNZ])]).any():
        status = _ck.STATUS_SLOW  # a number too large for dtype: the slow path names it
    data = raw[start:].tobytes() if status in (_ck.STATUS_ERROR, _ck.STATUS_SLOW) else b""
    if status == _ck.STATUS_ERROR:
        bad = int(info[_ck.I_LINE])
        line = data.split(b"\n")[bad - 1] + b"\n"
        err = bad_line(line, layout.names, types, layout.sep, block.path,
                       line0 + skipped + bad - 1, "cannot parse the line", layout.label, True)
        if err.line is None:  # the kernel and the slow path disagree: name the line anyway
            err = LineError(block.path, line0 + skipped + bad,
                            f"cannot parse the line{line_hint(line, layout.sep)}")
        raise err
    if status == _ck.STATUS_SLOW:
        table = parse_block(data, layout.names, types, layout.sep, block.path, line0 + skipped,
                            layout.label, True)
        if table.column(layout.label).null_count:
            raise bad_line(data, layout.names, types, layout.sep, block.path, line0 + skipped,
                           "an empty label", layout.label, True)
        expect_rows(block, line0, table.num_rows, expect)
        for name in encoder.numeric if encoder.numeric_mode == "value" else ():
            bad = too_large(table.column(name).to_numpy(zero_copy_only=False), dtype)
            if bad:
                raise LineError(block.path, line0 + skipped + line_of_row(data, bad[0]),
                                f"column {name!r}: {bad[1]}")
        y = table.column(layout.label).to_numpy()
        return _weighted((encoder.transform(nan_as_null(table, encoder.categorical), dtype,
                                            block.path), y), layout, data, block, line0 + skipped,
                         expect)
    rows = int(info[_ck.I_ROWS])
    if status == _ck.STATUS_FULL:  # more rows than the first pass counted
        rows = count_rows(raw[start:], CSV)[0]
    expect_rows(block, line0, rows, expect)
    X = csr_rows(indices, values, encoder.n_features, indptr, int(info[_ck.I_NNZ]))
    return _weighted((X, labels), layout, raw[start:], block, line0 + skipped, expect)


def _weighted(parts: tuple, layout: Layout, data, block, line0: int, expect: int) -> tuple:
    """``parts`` of a block of lines ``data`` (bytes or uint8 array, ``line0`` lines into
    its file), with the weights of ``layout.weight`` (checked) when there is one."""
    if layout.weight is None:
        return parts
    data = data if isinstance(data, bytes) else data.tobytes()
    w = block_weights(data, layout.names, layout.sep, block.path, line0, layout.weight)
    expect_rows(block, line0, w.shape[0], expect)
    return (*parts, w)


def count_chunk(chunk: np.ndarray, fs, header: bool) -> np.ndarray:
    """First pass: rows and newlines of a block (its lines are checked when they are
    encoded, by :func:`load_chunk`)."""
    block = chunk[0]
    raw = read_array(fs, block)
    start, skipped = header_end(raw, block, header)
    rows, newlines = count_rows(raw[start:], CSV)
    return box((rows, newlines + skipped))


def load_chunk(chunk: np.ndarray, fs, layout: Layout, encoder: HashingEncoder,
               dtype) -> np.ndarray:
    block, line0, expect = chunk[0]
    return box(encode_block(fs, block, line0, layout, encoder, dtype, expect))
