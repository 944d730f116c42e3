"""Read LIBSVM / svmlight text into dask arrays whose blocks are ``scipy.sparse`` CSR."""

from __future__ import annotations

from typing import NamedTuple

import dask.array as da
import numpy as np
import scipy.sparse as sp

from .._cluster_workers import compute
from . import _libsvm_kernels as _k
from ._blocks import OBJECTS as _OBJECTS
from ._blocks import Block as _Block
from ._blocks import box as _box
from ._blocks import each as _each
from ._blocks import expect_rows as _expect_rows
from ._blocks import open_paths, plan, start_lines
from ._blocks import read as _read
from ._blocks import read_array as _read_array
from ._blocks import select as _select
from ._csv import LineError, line_hint
from ._line_kernels import SVM, count_rows, line_of_row, lone_crs
from ._sniff import compressed, other_format

__all__ = ["read_libsvm"]

_REASONS = {
    _k.E_NO_COLON: "malformed pair, expected 'index:value'",
    _k.E_EMPTY_INDEX: "malformed pair, empty feature index",
    _k.E_BAD_INDEX: "malformed pair, feature index is not an integer",
    _k.E_NEG_INDEX: "negative feature index",
    _k.E_ZERO_INDEX: "feature index 0 in one-based input (zero_based=False)",
    _k.E_BIG_INDEX: "feature index beyond n_features={n_features}{based}",
    _k.E_BAD_VALUE: "value is not a finite number",
    _k.E_BAD_LABEL: "label is not a finite number",
    _k.E_DUP_INDEX: "feature index {index} repeated on the line",
    _k.E_RANGE: "value {value!r} of feature index {index} is too large for {dtype} (X's "
                "dtype: at most {top:.8g} in magnitude)",
}

#: What the message of a value too large for X's dtype advises after its token, unless the
#: caller words it (``notes["dtype"]``: the command line has no dtype option).
_WIDER = "scale the feature, or read with dtype=numpy.float64"


#: A UTF-8 byte order mark: skipped at the start of a file, as the CSV and text readers do.
_BOM = b"\xef\xbb\xbf"


def _text(data, block: _Block):
    """The bytes of a block to parse (bytes or a uint8 array): those of :func:`_read`
    without a byte order mark opening the file."""
    if block.offset == 0 and bytes(data[:3]) == _BOM:
        return data[3:]
    return data


class _Err(NamedTuple):
    code: int
    line: int  # 1-based, relative to the block
    token: bytes
    dtype: np.dtype | None = None  # E_RANGE: the dtype the value does not fit


class _Parsed(NamedTuple):
    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    info: np.ndarray


class _Stats(NamedTuple):
    rows: int
    nnz: int
    newlines: int
    lo: int  # smallest feature index as written, NO_LIMIT when the block has none
    hi: int  # largest, -1 when none
    error: _Err | LineError | None
    zero_line: int = 0  # the first line (1-based, in the block) with index 0, 0 when none


def _narrow(dtype) -> np.dtype | None:
    """The real dtype whose range values of X's ``dtype`` must fit, when narrower than
    float64's (float32 for float32 and complex64), else None."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc" or np.finfo(dtype).max >= np.finfo(np.float64).max:
        return None
    return np.finfo(dtype).dtype


def _parse(data, shift: int, reject_zero: bool, max_raw: int, store: bool = True,
           index_dtype=np.int64, value_dtype=np.float64, fit=None) -> _Parsed | _Err:
    """Run the kernel on one block (bytes or a uint8 array) and fill in the numbers it left to
    the exact slow path; without ``store`` only check and count (the arrays of the result are
    empty). ``fit`` (X's dtype): a value beyond its range (``1e39`` in float32, finite in
    float64) is an error ``E_RANGE``; the kernel converts no value above about 9.0e37
    (:data:`~._libsvm_kernels.E_RANGE`), so the check costs nothing on its numbers."""
    buf = np.frombuffer(data, dtype=np.uint8)
    labels, indptr, indices, values, blob, at, at_line, at_start, info = _k.parse_block(
        buf, shift, reject_zero, max_raw, store, np.empty(0, index_dtype),
        np.empty(0, value_dtype)
    )
    nslow = info[_k.I_NSLOW]
    if nslow:
        # One C-level split and conversion for all of them; float() rounds correctly.
        exact = np.array(blob[: info[_k.I_BLOB]].tobytes().split(), dtype=np.float64)
        wrong = ~np.isfinite(exact)  # overflow such as 1e999
        if (narrow := _narrow(value_dtype if fit is None else fit)) is not None:
            with np.errstate(over="ignore"):  # a feature's value that the cast makes inf
                beyond = np.isinf(exact.astype(narrow)) & (at[:nslow] >= 0) & ~wrong
            wrong |= beyond
        bad = np.flatnonzero(wrong)
        # Slow tokens were recorded in file order up to any kernel error but a repeated
        # index (found after the walk, on an earlier line or this one): an overflow found
        # here comes first unless on a later line.
        if bad.size and (not info[_k.I_ERR] or at_line[bad[0]] <= info[_k.I_ERR_LINE]):
            j = bad[0]
            token = bytes(data[at_start[j] : at_start[j] + 100]).split()[0]
            if narrow is not None and beyond[j]:
                return _Err(_k.E_RANGE, int(at_line[j]), token,
                            np.dtype(value_dtype if fit is None else fit))
            code = _k.E_BAD_VALUE if at[j] >= 0 else _k.E_BAD_LABEL
            return _Err(code, int(at_line[j]), token)
    if info[_k.I_ERR]:
        s, e = info[_k.I_ERR_START], info[_k.I_ERR_END]
        return _Err(int(info[_k.I_ERR]), int(info[_k.I_ERR_LINE]), buf[s:e].tobytes())
    if nslow and store:
        at = at[:nslow]
        is_label = at < 0
        values[at[~is_label]] = exact[~is_label]
        labels[-at[is_label] - 1] = exact[is_label]
    return _Parsed(labels, indptr, indices, values, info)


def _head(fs, block: _Block) -> bytes:
    """The first KiB of a refused line's file (``b""`` if it cannot be read now: the error
    says enough), for the hints of :mod:`~dask_ps.io._sniff`: read for an error only,
    never on the way of a good read."""
    try:
        with fs.open(block.path, "rb", compression=block.compression) as f:
            return f.read(1024)
    except (OSError, EOFError, ValueError):
        return b""


def _format_error(fs, block: _Block, line0: int, err: _Err, n_features: int | None,
                  base: int | None, check=None, notes: dict | None = None) -> LineError:
    """The :class:`LineError` of a line the kernel refused. Read as LIBSVM (no ``check``),
    the message says when the file looks like CSV or Parquet; a format built on its lines
    (LDA-C) gives its own words for the kernel's errors in ``check.reasons`` (code ->
    reason, formatted as :data:`_REASONS`). ``notes`` (``"width"``, ``"zero"``: a caller's
    words on where ``n_features`` or the one-based reading came from) follow the token of
    an index beyond ``n_features`` or an index 0 in one-based input."""
    based = "" if base is None else (" (one-based)" if base else " (zero-based)")
    reasons = {**_REASONS, **getattr(check, "reasons", {})}
    if err.code == _k.E_BIG_INDEX and n_features is None:
        reason = (f"{reasons[_k.E_BIG_INDEX].split(' beyond')[0]} above {_k.MAX_INDEX} "
                  f"(2**63 - 2, the largest that leaves room for n_features = index + 1 in "
                  f"int64; hash larger keys below it)")
    else:
        index = (int(err.token.split(b":")[0]) if err.code in (_k.E_DUP_INDEX, _k.E_RANGE)
                 else None)
        top = value = None
        if err.code == _k.E_RANGE:
            top, value = float(np.finfo(err.dtype).max), float(err.token.split(b":")[1])
        reason = reasons[err.code].format(n_features=n_features, based=based, index=index,
                                          dtype=err.dtype, top=top, value=value)
    token = err.token.decode("utf-8", "replace")
    if len(token) > 80:
        token = token[:77] + "..."
    # the hint of a file that starts like another format: Parquet, a table of delimited
    # fields, compressed bytes (see _sniff.other_format)
    hint = other_format(_head(fs, block)) if check is None else ""
    note = (notes or {}).get({_k.E_BIG_INDEX: "width", _k.E_ZERO_INDEX: "zero"}.get(err.code))
    if note and not (err.code == _k.E_BIG_INDEX and n_features is None):
        hint = f" ({note}){hint}"
    if err.code == _k.E_RANGE:
        hint = f"; {(notes or {}).get('dtype', _WIDER)}"
    line = bytes(_text(_read_array(fs, block), block)).split(b"\n")[err.line - 1]
    if (b"\r" in line and lone_crs(np.frombuffer(line, np.uint8))
            and not compressed(_head(fs, block))):  # (compressed bytes hold CRs by chance)
        hint = line_hint(line, " ")  # old Mac line ends: the file is one line
    return LineError(block.path, line0 + err.line, f"{reason}: {token!r}{hint}")


def _not_integral(data, block: _Block, p: _Parsed, dtype) -> LineError | None:
    """For an integer ``dtype``: the error (line relative to the block) of the first value
    that is not a whole number in its range; a cast would truncate it (``1:0.5`` to 0)."""
    rows, nnz = int(p.info[_k.I_ROWS]), int(p.info[_k.I_NNZ])
    v = p.values[:nnz]
    bad = (v != np.floor(v)) | (v < np.iinfo(dtype).min) | (v > np.iinfo(dtype).max)
    if not bad.any():
        return None
    k = int(np.argmax(bad))
    row = int(np.searchsorted(p.indptr[1:rows + 1], k, side="right"))
    line = line_of_row(np.frombuffer(data, np.uint8), SVM, row)
    return LineError(block.path, line, f"value {v[k].item()!r} is not an integer of dtype "
                                       f"{dtype} (give a float dtype to read fractions)")


def _scan(fs, block: _Block, reject_zero: bool, max_raw: int, check=None,
          integral=None, fit=None) -> _Stats:
    """First pass: validate a block and count its rows, lines and index range (and, given
    an integer dtype ``integral``, that the values are whole numbers of it; given X's dtype
    ``fit``, that they are in its range, as :func:`_parse`'s)."""
    data = _text(_read(fs, block), block)
    p = _parse(data, 0, reject_zero, max_raw, store=check is not None or integral is not None,
               fit=fit)
    if isinstance(p, _Err):
        return _Stats(0, 0, data.count(b"\n"), _k.NO_LIMIT, -1, p)
    info = p.info
    rows, nnz = int(info[_k.I_ROWS]), int(info[_k.I_NNZ])
    error = None if integral is None else _not_integral(data, block, p, integral)
    # only zero-based formats have checks: indices are as written
    if error is None and check is not None:
        X = sp.csr_matrix((p.values[:nnz], p.indices[:nnz], p.indptr[:rows + 1]),
                          shape=(rows, max(int(info[_k.I_MAX]) + 1, 1)))
        X.sum_duplicates()
        try:
            check(fs, block, 0, X, p.labels[:rows])
        except LineError as err:
            error = err
    return _Stats(rows, nnz, int(info[_k.I_NEWLINES]), int(info[_k.I_MIN]),
                  int(info[_k.I_MAX]), error, int(info[_k.I_ZERO_LINE]))


def _count(fs, block: _Block) -> _Stats:
    """First pass when the base and the number of features are known: rows and lines only
    (the lines are checked when they are parsed, by :func:`_load`)."""
    rows, newlines = count_rows(_text(_read_array(fs, block), block), SVM)
    return _Stats(rows, 0, newlines, _k.NO_LIMIT, -1, None)


def _load(fs, block: _Block, line0: int, base: int, n_features: int, dtype,
          expect: int | None = None, check=None, notes: dict | None = None) -> tuple:
    """Second pass: parse (and so check) a block into ``(csr_matrix, labels)``; ``expect``
    is its rows as the first pass counted them; ``check``, ``notes`` as
    :func:`_format_error`'s."""
    data = _text(_read_array(fs, block), block)
    # nnz < len(data): the indices can be int32 before they are counted
    index_dtype = np.int32 if max(n_features, len(data)) <= np.iinfo(np.int32).max else np.int64
    integral = dtype.kind in "iu"  # parsed as float64, checked, then cast
    p = _parse(data, base, base == 1, n_features - 1 + base, True, index_dtype,
               np.float64 if integral else dtype)
    if isinstance(p, _Err):
        raise _format_error(fs, block, line0, p, n_features, base, check, notes)
    if integral and (bad := _not_integral(data, block, p, dtype)) is not None:
        raise bad.shifted(line0)
    rows, nnz = int(p.info[_k.I_ROWS]), int(p.info[_k.I_NNZ])
    if expect is not None:
        _expect_rows(block, line0, rows, expect)
    X = sp.csr_matrix(
        (p.values[:nnz].astype(dtype, copy=False), p.indices[:nnz],
         p.indptr[: rows + 1].astype(index_dtype)),
        shape=(rows, n_features),
    )
    if not p.info[_k.I_CANON]:
        X.sort_indices()  # rows listed out of order; the kernel refused repeated indices
    X.has_canonical_format = True  # sorted and unique: spare scipy an O(nnz) check
    return X, p.labels[:rows].copy()


def _scan_chunk(chunk: np.ndarray, fs, reject_zero: bool, max_raw: int,
                check=None, parse: bool = True, integral=None, fit=None) -> np.ndarray:
    if not parse:
        return _box(_count(fs, chunk[0]))
    return _box(_scan(fs, chunk[0], reject_zero, max_raw, check, integral, fit))


def _load_chunk(chunk: np.ndarray, fs, base: int, n_features: int, dtype,
                check=None, notes: dict | None = None) -> np.ndarray:
    block, line0, rows = chunk[0]
    X, y = _load(fs, block, line0, base, n_features, dtype, rows, check, notes)
    if check is not None:  # a format built on LIBSVM lines (LDA-C) validates the block
        X, y = check(fs, block, line0, X, y)
    return _box((X, y))


def read_libsvm(
    urlpath,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    blocksize: int | str | None = "32MiB",
    dtype=np.float32,
    storage_options: dict | None = None,
    compression: str | None = "infer",
) -> tuple[da.Array, da.Array]:
    """Read LIBSVM / svmlight text files into a sparse dask array and a label array.

    The format is the one read by :func:`sklearn.datasets.load_svmlight_file`: one sample
    per line, ``<label> [qid:<n>] <index>:<value> <index>:<value> ... [# comment]``.
    Blank lines and everything after ``#`` are ignored, tokens are separated by any
    whitespace (CRLF line ends are fine) and a ``qid:`` token right after the label is
    skipped; a UTF-8 byte order mark opening a file is skipped. Values and labels are
    decimal numbers (``1``, ``-0.5``, ``.5``, ``2.``, ``1e-3``), rounded to float64
    exactly as ``float()`` rounds them; ``float()``'s other spellings (``1_000``) are
    refused. Unlike sklearn,
    indices need not be sorted (``1 9:1 3:1`` is read, each row sorted), but as in sklearn
    an index repeated on a line (``1 3:1 3:2``) is an error. Explicit zeros
    (``3:0``) are kept as stored entries, as sklearn does. A NaN value (``3:nan``) or an
    empty one (``3:``) is a missing value and the pair is left out (its index still counts
    for the width and the base); an infinite one is an error (the rule of every reader,
    :mod:`dask_ps.io`).

    Uncompressed files are split at line boundaries into blocks of about ``blocksize``
    bytes; compressed files are read as one block each. The bytes are read twice. A
    first pass (computed now, with the active dask scheduler) counts the rows of every
    block, so the arrays have known chunk sizes. Given ``n_features`` and ``zero_based``
    (True or False), it only looks for newlines and line starts (vectorised, near memory
    speed) and every line is parsed once, and checked then, when the arrays are computed:
    a fit computes them before it trains, so a bad line stops it before the model changes.
    Otherwise the first pass parses every line, to decide the index base and the number of
    features once for the whole input, raises any error now, and the blocks are parsed
    again when computed. Parsing runs in a compiled kernel that releases the GIL.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Paths or URLs of the files (anything fsspec opens: local, ``s3://``,
        ``memory://``, ...); a glob is expanded and its matches are read in sorted
        order; a folder stands for the files under it (sorted, at any depth) but those
        whose names start with ``.`` or ``_`` (``_SUCCESS``, ``.part-0.crc``), as
        pandas' ``read_parquet`` reads a folder. Rows of several files are concatenated
        in the given order.
    n_features : int, optional
        Number of columns of ``X``, at most 2**63 - 1. By default the largest index in
        the input plus one (zero-based) or the largest index (one-based).
    zero_based : bool or "auto", default "auto"
        Whether indices start at 0. ``"auto"`` decides for the whole input: zero-based
        if index 0 occurs anywhere, otherwise one-based (as sklearn: one stray index 0 in
        a one-based file shifts every feature by one; ``dask-ps train`` notes the file
        and line of the first).
    blocksize : int, str or None, default "32MiB"
        Approximate bytes per block of an uncompressed file; ``None`` reads each file
        as one block. Under 64 KiB, at most 1,000 blocks in all (a block is a task; see
        :func:`dask_ps.io._blocks.plan`).
    dtype : numpy dtype, default numpy.float32
        Dtype of ``X``. Values are parsed as float64 and then cast, as sklearn does; for
        an integer dtype every value must be a whole number in its range (``1:0.5`` is an
        error, not a 0), for float32 within its range (``1:1e39`` is an error, not an
        infinity: read it with ``dtype=numpy.float64``).
    storage_options : dict, optional
        Extra options for the fsspec filesystem (credentials, endpoint, ...).
    compression : str or None, default "infer"
        fsspec compression name (``"gzip"``, ``"bz2"``, ...: ``fsspec.available_compressions()``
        lists them), ``"infer"`` to guess from each file's extension, or ``None`` for
        uncompressed.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), dtype ``dtype``
        Blocks are :class:`scipy.sparse.csr_matrix` with sorted, unique indices; the
        meta is a ``csr_matrix`` and the row chunks are known (one per non-empty block).
    y : dask.array.Array of shape (n_samples,), float64
        The labels as written (e.g. -1/+1, 0/1 or class numbers), chunked like ``X``.

    Raises
    ------
    ValueError
        For a malformed line; the message names the file, the 1-based line number in
        that file and the offending token. Malformed means: a pair without a colon, an
        empty or non-integer index, a negative index, index 0 with ``zero_based=False``,
        an index beyond ``n_features`` or above 2**63 - 2 (so that ``n_features``, the
        largest index + 1, fits int64), a value that is infinite (``inf``, overflow) or
        not a number, a label that is not a finite number (``nan`` too), a value that is not
        a whole number of an integer ``dtype`` or beyond the range of a float32 ``dtype``
        (``"<file>, line 3: value 1e+39 of feature index 2 is too large for float32 (X's
        dtype: at most 3.4028235e+38 in magnitude): '2:1e39'; scale the feature, or read
        with dtype=numpy.float64"``), an index repeated on the line (``"<file>,
        line 11: feature index 3 repeated on the line: '3:2'"``, the pair that repeats
        it); a line in a file with CR-only (old Mac)
        line ends says so. Raised when the
        arrays are computed if ``n_features`` and ``zero_based`` are given, else by this
        call. Also for invalid arguments (an unknown ``compression``, naming the codecs),
        and when a file has other rows when computed than when opened.
    FileNotFoundError
        If ``urlpath`` matches no file.

    See Also
    --------
    sklearn.datasets.load_svmlight_file : The reference reader of this format.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://read_libsvm_demo.svm", "wb") as f:
    ...     _ = f.write(b"+1 1:0.5 3:2\\n-1 qid:7 2:1.5  # a comment\\n")
    >>> X, y = read_libsvm("memory://read_libsvm_demo.svm")
    >>> X.shape, X.dtype, y.dtype, X.chunks[0]
    ((2, 3), dtype('float32'), dtype('float64'), (2,))
    >>> X.compute().toarray()
    array([[0.5, 0. , 2. ],
           [0. , 1.5, 0. ]], dtype=float32)
    >>> y.compute()
    array([ 1., -1.])
    """
    if not (isinstance(zero_based, str) and zero_based == "auto"):
        if zero_based not in (True, False):
            raise ValueError(f"zero_based must be True, False or 'auto', not {zero_based!r}")
        zero_based = bool(zero_based)  # numpy bools too; identity tests follow
    if n_features is not None:
        if isinstance(n_features, bool) or int(n_features) != n_features or n_features < 0:
            raise ValueError(f"n_features must be a non-negative integer, not {n_features!r}")
        if n_features > _k.MAX_INDEX + 1:
            raise ValueError(f"n_features must be at most 2**63 - 1 (feature indices are "
                             f"int64), not {n_features!r}")
        n_features = int(n_features)
    dtype = np.dtype(dtype)
    return _read_svm(urlpath, n_features, zero_based, blocksize, dtype, storage_options,
                     compression)


def _read_svm(urlpath, n_features, zero_based, blocksize, dtype, storage_options, compression,
              check=None, out_dtype=None) -> tuple[da.Array, da.Array]:
    """read_libsvm after argument checks; ``check(fs, block, line0, X, y) -> (X, y)`` runs on
    every parsed block (and may raise a ValueError naming its file and line), and makes X
    ``out_dtype`` (default ``dtype``) and y int64 when given."""
    inputs, _ = read_libsvm_inputs([(urlpath, blocksize)], n_features, zero_based, dtype,
                                   storage_options, compression, check=check,
                                   out_dtype=out_dtype)
    return inputs[0]


def read_libsvm_inputs(inputs: list, n_features: int | None = None, zero_based="auto",
                       dtype=np.float32, storage_options: dict | None = None,
                       compression: str | None = "infer", *, base_inputs: int | None = None,
                       scan: bool = False, notes: dict | None = None, check=None,
                       out_dtype=None, where: dict | None = None) -> tuple[list, int]:
    """Several LIBSVM inputs (e.g. training and test data) read with one index base and
    one width, as :func:`sklearn.datasets.load_svmlight_files` reads its files: the first
    pass over all of them is one compute, so the width (the largest index of them all)
    is known without reading any file twice more than :func:`read_libsvm` does.

    Parameters
    ----------
    inputs : list of (urlpath, blocksize)
        Each input's files (as :func:`read_libsvm`'s ``urlpath``) and blocksize.
    n_features, zero_based, dtype, storage_options, compression
        As in :func:`read_libsvm` (arguments checked by the caller), for all inputs.
    base_inputs : int, optional
        With ``zero_based="auto"``: the base is decided by the first ``base_inputs`` inputs
        (e.g. 1: the training data's), and the others are read with it (index 0 in a later
        input of one-based ones is an error). Default: by all inputs, as scikit-learn.
    scan : bool, default False
        Parse every line in the first pass even when the base and the width are known,
        so that every bad line raises now (not when the arrays are computed).
    notes : dict, optional
        ``{"width": str, "zero": str}``: the caller's words on where ``n_features`` and
        the one-based reading come from, said after the token of an index beyond
        ``n_features`` or an index 0 in one-based input; ``"dtype"``: what to do about a
        value beyond ``dtype``'s range, said after its token (default: scale the feature,
        or read with ``dtype=numpy.float64``).
    check, out_dtype
        As :func:`_read_svm`'s (formats built on LIBSVM lines).
    where : dict, optional
        Filled with ``"zero": (path, line)`` when ``zero_based="auto"`` reads the inputs
        zero-based: the first index 0 of those deciding the base (file order; ``line``
        1-based), for a caller to say why every index is read as written rather than
        shifted (no extra read: the first pass notes it).

    Returns
    -------
    inputs : list of (X, y)
        As :func:`read_libsvm` returns them, one pair per input, every ``X`` of
        ``n_features`` columns.
    base : int
        The index base the inputs were read with: 0 (zero-based) or 1.

    Raises
    ------
    ValueError
        As :func:`read_libsvm`, the first bad line of the inputs in order.
    FileNotFoundError
        If an input matches no file.
    """
    opened = []
    for urlpath, blocksize in inputs:
        fs, paths = open_paths(urlpath, storage_options)
        opened.append((fs, plan(fs, paths, blocksize, compression)))
    dtype = np.dtype(dtype)  # the readers built on this one give a type (numpy.float64)

    # Limit on indices as written. With "auto" the base is unknown until every block is
    # scanned, so start from the one-based (looser) bound and tighten it below.
    max_raw = _k.NO_LIMIT if n_features is None else n_features - (zero_based is True)
    # Knowing the base and the width, the first pass only counts rows and lines: every byte
    # is parsed once, when the arrays are computed, and the lines are checked then.
    parse = scan or n_features is None or zero_based == "auto" or check is not None
    stats = [list(s) for s in compute(*[_each(blocks).map_blocks(
        _scan_chunk, fs, zero_based is False, max_raw, check, parse,
        dtype if dtype.kind in "iu" else None, dtype, dtype=object, meta=_OBJECTS
    ) for fs, blocks in opened], what="the first pass over the LIBSVM files")]

    # Line numbers restart in every file; a block starts after the newlines before it.
    line0 = [start_lines(blocks, [s.newlines for s in st])
             for (_, blocks), st in zip(opened, stats)]
    known_base = None if zero_based == "auto" else int(not zero_based)
    found = [(fs, b, s, l0) for (fs, blocks), st, starts in zip(opened, stats, line0)
             for b, s, l0 in zip(blocks, st, starts)]
    for fs, b, s, l0 in found:
        if isinstance(s.error, LineError):
            raise s.error.shifted(l0)
        if s.error is not None:
            raise _format_error(fs, b, l0, s.error, n_features, known_base, check, notes)

    deciding = sum(len(b) for _, b in opened[:base_inputs]) if base_inputs else len(found)
    lo = min(s.lo for _, _, s, _ in found[:deciding])
    hi = max(s.hi for _, _, s, _ in found)
    base = (1 if lo > 0 else 0) if zero_based == "auto" else int(not zero_based)
    if not base and zero_based == "auto" and where is not None:
        fs, b, s, l0 = next(f for f in found[:deciding] if f[2].lo == 0)
        # a first pass that stored its block (integer dtype) did not note the line: the
        # block parsed again up to its first index 0, which it refuses one-based
        line = s.zero_line or _parse(_text(_read(fs, b), b), 0, True, _k.NO_LIMIT,
                                     store=False).line
        where["zero"] = (b.path, l0 + line)
    if base and zero_based == "auto" and (zero := next(
            (f for f in found[deciding:] if f[2].lo == 0), None)):
        fs, b, _, l0 = zero  # index 0 in an input read with the others' base: say where
        err = _parse(_text(_read(fs, b), b), 0, True, _k.NO_LIMIT, store=False)
        raise _format_error(fs, b, l0, err, n_features, base, check, notes)
    if n_features is None:
        n_features = max(hi - base + 1, 0)
    elif hi - base >= n_features:
        # Only reachable with "auto" resolved to zero-based: find the first culprit token.
        fs, b, _, l0 = next(f for f in found if f[2].hi - base >= n_features)
        err = _parse(_text(_read(fs, b), b), 0, False, n_features - 1 + base)
        raise _format_error(fs, b, l0, err, n_features, base, check, notes)
    out = [_arrays(fs, blocks, st, starts, base, n_features, dtype, check, out_dtype, notes)
           for (fs, blocks), st, starts in zip(opened, stats, line0)]
    return out, base


def _arrays(fs, blocks: list, stats: list, line0: list, base: int, n_features: int, dtype,
            check, out_dtype, notes) -> tuple[da.Array, da.Array]:
    """``X, y`` of one input's blocks, known from the first pass (``stats``)."""
    keep = [i for i, s in enumerate(stats) if s.rows] or [0]  # empty blocks add no chunk
    rows = tuple(stats[i].rows for i in keep)
    # One task per block parses it; X and y select from its result, so computing them
    # together reads and parses every block once.
    parts = _each([(blocks[i], line0[i], stats[i].rows) for i in keep]).map_blocks(
        _load_chunk, fs, base, n_features, dtype, check, notes, dtype=object, meta=_OBJECTS
    )
    out_dtype = dtype if out_dtype is None else out_dtype
    label_dtype = np.float64 if check is None else np.int64
    meta = sp.csr_matrix((0, n_features), dtype=out_dtype)
    X = parts.map_blocks(
        _select, 0, new_axis=1, chunks=(rows, (n_features,)), dtype=out_dtype, meta=meta
    )
    y = parts.map_blocks(_select, 1, chunks=(rows,), dtype=label_dtype,
                         meta=np.empty(0, label_dtype))
    return X, y
