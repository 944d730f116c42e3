"""Delimited text blocks (CSV / TSV) into Arrow tables, with errors that name file, line and
column.

Blocks come from :mod:`._blocks`; pyarrow's CSV parser does the work (the CTR reader encodes most
blocks with its own kernel, :mod:`._csv_kernels`, and comes here for the rest). When a block is
refused, its lines are walked again with Python's :mod:`csv` module (only then, so the cost is
paid on the error path alone) to find the first bad line and field and say what is wrong with
it. Quoted fields must not contain newlines (a block boundary could fall inside one), and lines
end in LF or CRLF: pyarrow takes both (a quoted newline, a line ended by a lone CR), so a block
holding a quote or a CR has its rows checked against its lines (vectorised), and a lone CR or a
quoted field across lines is a bad line, named as :func:`line_hint` says.

An empty field is null. An infinite number (``inf``, or one that overflows, such as ``1e400``) is
an error, and so is ``nan`` unless the caller reads it as missing (``nan_missing``, the CTR
reader's rule, see :mod:`dask_ps.io`); a ``required`` column (a label) must be a finite number.
"""

from __future__ import annotations

import csv
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..exceptions import NOT_A_NUMBER, DataError
from ._blocks import Block, decompress_errors, header_end, plan, read
from ._line_kernels import CSV, count_rows, lone_crs
from ._sniff import compressed
from ._storage import named_errors, url_of
from ._weight_column import WEIGHTS_ARE, first_bad_weight

__all__ = ["SAMPLE_BYTES", "SAMPLE_FILES", "LineError", "bad_line", "check_sep", "common_header",
           "csv_kinds", "header_end", "header_names", "line_hint", "line_of_row", "locate",
           "nan_as_null", "numbered_names", "numeric_sample", "parse_block", "read_table",
           "PARQUET_BY_NAME", "sample_table", "strip_header", "block_weights", "line_weights"]

#: Bytes of a file's start that the readers parse to guess its columns' types.
SAMPLE_BYTES = 2**20
PARQUET_BY_NAME = "read when named .parquet or .parq"  #: ratings' Parquet (header_names)


class LineError(DataError):
    """A bad line: ``"<file>, line <n>: <reason>"``; ``line`` is None when it was not found."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = path, line, reason
        where = path if line is None else f"{path}, line {line}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):  # picklable, to travel from a worker with its fields
        return LineError, (self.path, self.line, self.reason)

    def shifted(self, lines: int) -> LineError:
        """The same error with ``lines`` more lines before it (a later block of the file)."""
        return LineError(self.path, None if self.line is None else self.line + lines,
                         self.reason)


def check_sep(sep) -> str:
    """``sep``, a field delimiter, checked: one ASCII character other than a quote or a line
    break (what Python's :mod:`csv`, pyarrow and the CTR kernel take).

    Raises
    ------
    ValueError
        ``"sep must be one character, such as ',' or '\\t' (a tab), got ';;'"``; for one
        character, what is wrong with it: a quote, a line end, not ASCII.
    """
    if not (isinstance(sep, str) and len(sep) == 1):
        raise ValueError(f"sep must be one character, such as ',' or '\\t' (a tab), got "
                         f"{sep!r}")
    if sep == '"':
        raise ValueError(f"sep cannot be {sep!r}: it quotes fields (\"a,b\" is one field); "
                         f"use ',' or ';', or '\\t' (a tab)")
    if sep in "\r\n":
        raise ValueError(f"sep cannot be {sep!r}: it ends lines (one line is one row)")
    if not sep.isascii():
        raise ValueError(f"sep must be an ASCII character (the files are split on one byte, "
                         f"and {sep!r} takes {len(sep.encode())} in UTF-8), got {sep!r}")
    return sep


def header_names(fs, path: str, sep: str, compression: str | None,
                 parquet: str = "use format='parquet'") -> list[str]:
    """Column names from the first line of a file (a UTF-8 byte order mark dropped, as
    spreadsheets write one; spaces and tabs around a name dropped: ``click, price``).

    Raises
    ------
    ValueError
        The first line is not delimited text (a binary file, e.g. Parquet, its reading
        said by ``parquet``; a compressed file whose name does not say so; lone CR line
        endings), or is empty (``"<file>: no columns (an empty file?)"``), naming it.
    """
    with named_errors(url_of(fs, path)), decompress_errors(path, compression), \
            fs.open(path, "rb", compression=compression) as f:
        raw = f.readline()
    line = raw.decode("utf-8", "replace").rstrip("\r\n").lstrip("\ufeff")
    if not line:
        raise DataError(f"{path}: no columns (an empty file?)")
    if compressed(raw):
        raise DataError(f"{path}: not delimited text{compressed(raw)}")
    try:
        if raw.startswith(b"PAR1") or b"\x00" in raw:  # csv reads binary as garbage names
            raise csv.Error("it holds NUL bytes")
        fields = next(csv.reader([line], delimiter=sep))
        return [f.strip(" \t") for f in fields]
    except csv.Error as exc:
        raise DataError(f"{path}: its first line is not delimited text ({exc}): a binary "
                        f"file (e.g. Parquet: {parquet}), or lines ending in a lone "
                        f"CR?") from None


def numbered_names(fs, path: str, sep: str, compression: str | None) -> list[str]:
    """Column names of files without a header: ``"0"``, ``"1"``, ... for the fields of
    the first line of ``path`` (errors as :func:`header_names`)."""
    return [str(i) for i in range(len(header_names(fs, path, sep, compression)))]


#: Delimiters a table's one-field header may hold (:func:`check_columns`).
OTHER_DELIMITERS = ("\t", ";", "|", ",")


def check_columns(path: str, names: list[str], sep: str) -> None:
    """Refuse a table of one column (a label, no feature), naming the delimiter its header
    seems to use instead of ``sep`` (a tab-separated file read as CSV is one column).

    Raises
    ------
    DataError
        ``"<path>: one column, 'y\\ta\\tb', read with the delimiter ',': ..."``.
    """
    if len(names) != 1:
        return
    hint = next((f"; its header holds {d!r}: is that the delimiter? (use sep={d!r})"
                 for d in OTHER_DELIMITERS if d != sep and d in names[0]), "")
    raise DataError(f"{path}: one column, {names[0]!r}, read with the delimiter {sep!r}: "
                    f"no feature column beside a label{hint}")


def common_header(fs, blocks: list[Block], sep: str) -> list[str]:
    """The column names of the first line of every file of ``blocks``.

    Raises
    ------
    ValueError
        A file whose first line differs from the first file's.
    """
    files = [(b.path, b.compression) for b in blocks if b.offset == 0]
    heads = [header_names(fs, p, sep, c) for p, c in files]
    for (p, _), h in zip(files[1:], heads[1:]):
        if h != heads[0]:
            raise DataError(f"{p}: header {h} differs from {files[0][0]}'s {heads[0]}")
    return heads[0]


def sample_table(fs, path: str, names: list[str], header: bool, sep: str,
                 compression: str | None, kind=pa.string(), partial: bool = False
                 ) -> pa.Table:
    """The whole lines of the first :data:`SAMPLE_BYTES` of a file (after its header), every
    column as ``kind`` (strings; binary to take bytes that are not UTF-8), to guess the
    columns' types from; ``partial``: the lines before the first bad one.

    Raises
    ------
    LineError
        A line of the sample with the wrong number of fields (or not UTF-8, for strings),
        or (not ``partial``) a lone CR or a quoted field across lines; with ``partial``,
        only when it is the first line.
    """
    with named_errors(url_of(fs, path)), decompress_errors(path, compression), \
            fs.open(path, "rb", compression=compression) as f:
        data = f.read(SAMPLE_BYTES)
    if len(data) == SAMPLE_BYTES:
        data = data[: data.rfind(b"\n") + 1]
    skipped = 0
    if header:
        data, skipped = (data[data.find(b"\n") + 1:] if b"\n" in data else b""), 1
    types = {n: kind for n in names}
    try:  # partial: the lines as pyarrow splits them, as the CTR reader's guess always took
        return parse_block(data, names, types, sep, path, skipped, strict_lines=not partial)
    except LineError as exc:
        if not partial or exc.line is None or exc.line <= skipped + 1:
            raise
        # the lines before the bad one (which the reader will name) are a sample still
        cut = data.split(b"\n")[: exc.line - skipped - 1]
        return parse_block(b"\n".join(cut) + b"\n", names, types, sep, path, skipped,
                           strict_lines=False)


#: Files :func:`~dask_ps.io.infer_encoder` opens at most to find rows to guess from (a
#: glob's first files may hold a header alone: hours without clicks).
SAMPLE_FILES = 64


def numeric_sample(col) -> bool:
    """Whether a binary column of a sample (nulls for empty fields) holds numbers only: all
    UTF-8, each a number once spaces and tabs around it are dropped, and one at least."""
    col = col.drop_null()
    try:
        text = pc.utf8_trim(pc.cast(col, pa.string()), " \t")
        text = pc.if_else(pc.equal(text, ""), None, text).drop_null()
        if not len(text):
            return False
        pc.cast(text, pa.float64())
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # not UTF-8, or not a number
        return False


def csv_kinds(fs, paths: list[str], names: list[str], header: bool, sep: str,
              compression: str | None) -> dict:
    """``{column: "numeric" | "categorical"}`` from the first rows of the first file that
    has some (of the first :data:`SAMPLE_FILES`): a column is numeric when its every
    non-empty value in them is a number (each column on its own: a byte that is not UTF-8
    makes its column categorical, no other); a first line that does not parse gives no
    rows (the reader names it)."""
    table = None
    for path in paths[:SAMPLE_FILES]:
        comp = plan(fs, [path], None, compression)[0].compression
        try:
            table = sample_table(fs, path, names, header, sep, comp, pa.binary(), True)
        except LineError:
            table = None  # a bad first line: let the reader name it
        if table is not None and table.num_rows:
            break
    return {n: "numeric" if table is not None and numeric_sample(table.column(n))
            else "categorical" for n in names}


def strip_header(data: bytes, block: Block, header: int) -> tuple[bytes, int]:
    """The block without its file's ``header`` first lines, and how many lines were dropped."""
    start, skipped = header_end(data, block, header)
    return (data[start:] if start else data), skipped


def _bad_field(value: str, nan_ok: bool, label: bool) -> str | None:
    """What is wrong with a non-empty numeric field, or None: not a number (a ``label``'s
    text said so, with :data:`~dask_ps.exceptions.NOT_A_NUMBER`), infinite, or NaN (unless
    ``nan_ok``)."""
    try:
        v = float(value)
    except ValueError:
        v = None
    if v is None and label:
        return f"the label {value!r} is not a number: {NOT_A_NUMBER}"
    if v is None or math.isinf(v) or (math.isnan(v) and not nan_ok):
        return f"{value!r} is not a finite number"
    return None


def line_hint(line: bytes, sep: str) -> str:
    """``"; ..."``: the likely cause of a line a parser refuses when its fields do not say,
    or ``""``: a lone CR in it (lines must end in LF or CRLF), or a quoted field that does
    not close on it (quoted fields must not contain newlines)."""
    text = line.decode("utf-8", "replace").rstrip("\n")
    text = text[:-1] if text.endswith("\r") else text
    if "\r" in text:
        if _quoted_cr(text):
            return ("; a quoted field on it holds a CR (\\r): quoted fields must not contain "
                    "line breaks (CR or LF)")
        return ("; it holds a lone CR (\\r): lines must end in LF or CRLF, not CR alone "
                "(convert the file, e.g. tr '\\r' '\\n')")
    try:
        next(csv.reader([text], delimiter=sep, strict=True))
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            return ("; a quoted field opens on it and does not close: quoted fields must not "
                    "contain newlines")
    return ""


def _quoted_cr(text: str) -> bool:
    """Whether a CR of ``text`` (one line) is inside a quoted field (quotes counted from
    the line's start: a doubled quote inside a field closes and reopens it)."""
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif ch == "\r" and quoted:
            return True
    return False


def locate(data: bytes, names: list[str], types: dict, sep: str,
           required: str | None = None, nan_missing: bool = False) -> tuple[int, str] | None:
    """(1-based line in ``data``, what is wrong) of the first bad line, or None.

    ``types`` gives the columns read and their pyarrow types (numbers are floating); the
    ``required`` column must be present and a finite number; ``nan_missing``: other numeric
    columns may hold ``nan`` (missing).
    """
    text = data.decode("utf-8", "replace")
    position = {n: i for i, n in enumerate(names)}
    for i, raw in enumerate(text.split("\n"), start=1):  # a lone CR ends no line here
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line:
            continue
        if "\r" in line:  # a lone CR, or below a quoted field that does not close
            return i, f"cannot parse the line{line_hint(raw.encode(), sep)}"
        fields = next(csv.reader([line], delimiter=sep))
        hint = line_hint(raw.encode(), sep) if '"' in line else ""
        if len(fields) != len(names):
            return i, f"expected {len(names)} fields, got {len(fields)}{hint}"
        if hint:  # the right number of fields, but one runs on to the next line
            return i, f"cannot parse the line{hint}"
        for name, typ in types.items():
            value = fields[position[name]]
            if not pa.types.is_floating(typ):
                continue
            if value == "":
                if name == required:
                    return i, f"column {name!r} is empty"
                continue
            why = _bad_field(value, nan_missing and name != required, name == required)
            if why:
                return i, f"column {name!r} (field {position[name] + 1}): {why}"
    return None


def parse_block(data: bytes, names: list[str], types: dict, sep: str, where: str,
                line0: int, required: str | None = None, nan_missing: bool = False,
                strict_lines: bool = True, fallback: dict | None = None) -> pa.Table:
    """Parse whole lines of delimited text into a table of the columns ``types`` names.

    Parameters
    ----------
    data : bytes
        Whole lines, without a header.
    names : list of str
        All the columns of a line, in order.
    types : dict of str to pyarrow.DataType
        The columns to keep and their types (float64 or string); an empty field is null.
    sep : str
        The field delimiter.
    where : str
        The file, for error messages.
    line0 : int
        Lines of the file before ``data``.

    required : str, optional
        A numeric column that must be a finite number on every line (the label); checked
        here for NaN, by :func:`read_table` for empty fields.
    nan_missing : bool, default False
        Whether ``nan`` in the other numeric columns is a missing value (kept as NaN) rather
        than an error.
    strict_lines : bool, default True
        Whether to refuse a lone CR or a quoted field across lines (pyarrow takes both);
        off for a sample whose columns' types are guessed, the reader checking the lines.
    fallback : dict of str to pyarrow.DataType, optional
        The types to parse with (and name errors with) when pyarrow refuses ``types``, or
        when ``data`` holds a space or a tab that is not ``sep`` (pyarrow's integers take
        them around the digits, its casts from strings do not): e.g. int64 ids, strings
        when a line has an id that is not an integer.

    Raises
    ------
    LineError
        ``"<file>, line <n>: ..."`` naming the first line with a wrong number of fields, a
        field that is not a number in a numeric column, an infinite number (pyarrow accepts
        ``inf`` and overflowing numbers such as ``1e400``; they are refused here), NaN
        where it is not allowed, a lone CR or a quoted field that does not close on its line
        (pyarrow takes both, see :func:`line_hint`).
    """
    if not data.strip():
        return pa.table({n: pa.array([], type=t) for n, t in types.items()})
    if fallback is not None and (b" " in data or (sep != "\t" and b"\t" in data)
                                 or _first_line_refuses(data, names, types, fallback, sep)):
        types, fallback = fallback, None
    try:
        table = _arrow_csv(data, names, types, sep)
    except pa.ArrowInvalid as exc:
        if fallback is not None:
            return parse_block(data, names, fallback, sep, where, line0, required,
                               nan_missing, strict_lines)
        raise bad_line(data, names, types, sep, where, line0, str(exc), required,
                       nan_missing) from exc
    if strict_lines and _rows_unlike_lines(data, table.num_rows, sep):
        raise bad_line(data, names, types, sep, where, line0, "a line break inside a field",
                       required, nan_missing)
    if any(pc.any(pc.is_inf(table.column(n))).as_py() or (
            (n == required or not nan_missing) and pc.any(pc.is_nan(table.column(n))).as_py())
           for n, t in types.items() if pa.types.is_floating(t)):
        raise bad_line(data, names, types, sep, where, line0, "a non-finite number", required,
                       nan_missing)
    return table


#: The bytes of the integers pyarrow parses (digits, a sign, hexadecimal "0x1f"): a field
#: with any other byte is not one.
_INTEGER_BYTES = frozenset(b"0123456789+-xXabcdefABCDEF")


def _first_line_refuses(data: bytes, names: list[str], types: dict, fallback: dict,
                        sep: str) -> bool:
    """Whether the first non-empty line of ``data`` has, in a column ``types`` parses as
    integers and ``fallback`` does not, a field no integer has a byte of ("u7"): the parse
    with ``types`` would fail, so :func:`parse_block` goes to ``fallback`` without it (a
    block of string ids paid a failed integer parse). False when unsure (a quote)."""
    cols = [names.index(c) for c, t in types.items()
            if pa.types.is_integer(t) and fallback.get(c, t) != t]
    start, end = 0, -1
    while cols and end < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end].rstrip(b"\r")
        if line.strip():
            fields = line.split(sep.encode())
            return b'"' not in line and len(fields) == len(names) and any(
                not _INTEGER_BYTES.issuperset(fields[j]) for j in cols)
        start = end + 1
    return False


def _rows_unlike_lines(data: bytes, rows: int, sep: str) -> bool:
    """Whether the ``rows`` pyarrow parsed from ``data`` may not be its lines: a lone CR
    (pyarrow ends a line there) or a quoted field across lines (pyarrow takes it whole).
    Each scan is vectorised and runs only on data holding a CR, or a quote."""
    buf = np.frombuffer(data, np.uint8)
    if b"\r" in data and lone_crs(buf):
        return True
    if b'"' not in data:
        return False
    last = data[data.rfind(b"\n", 0, len(data) - 1) + 1:]  # its quote may run to the end
    return rows != count_rows(buf, CSV)[0] or bool(line_hint(last, sep))


#: A text field that is NaN: ``nan`` in any case and sign, spaces and tabs around it.
NAN_TEXT = r"^[ \t]*[+-]?[nN][aA][nN][ \t]*$"


def nan_as_null(table: pa.Table, columns) -> pa.Table:
    """``table`` whose string ``columns`` hold null where a field is ``nan`` (any case and
    sign, see :data:`NAN_TEXT`): the missing value of a categorical CSV field, as an empty
    one is (:mod:`dask_ps.io`)."""
    for name in columns:
        i = table.column_names.index(name)
        col = table.column(i)
        nan = pc.fill_null(pc.match_substring_regex(col, NAN_TEXT), False)
        if pc.any(nan).as_py():
            table = table.set_column(i, name, pc.if_else(nan, pa.scalar(None, col.type), col))
    return table


def _arrow_csv(data: bytes, names: list[str], types: dict, sep: str) -> pa.Table:
    """pyarrow's parse of whole lines (see :func:`parse_block`); raises ArrowInvalid."""
    return pacsv.read_csv(
        pa.py_buffer(data),
        read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
        parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=False),
        convert_options=pacsv.ConvertOptions(
            column_types=types, include_columns=list(types), null_values=[""],
            strings_can_be_null=True, quoted_strings_can_be_null=False))


def _refused(data: bytes, names: list[str], types: dict, sep: str) -> tuple[int, str] | None:
    """(1-based line, pyarrow's reason) of the first line pyarrow refuses, found by halving
    the lines (a few parses of at most ``data``: the error path only), or None. For the
    values Python's ``float`` takes and pyarrow does not (``1_000``, other scripts'
    digits, bytes that are not UTF-8), which :func:`locate` passes."""
    lines = data.split(b"\n")

    def reason(a: int, b: int) -> str | None:
        chunk = b"\n".join(lines[a:b])
        if not chunk.strip():
            return None
        try:
            _arrow_csv(chunk + b"\n", names, types, sep)
        except pa.ArrowInvalid as exc:
            return str(exc)
        return None

    lo, hi = 0, len(lines)
    why = reason(lo, hi)
    if why is None:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        first = reason(lo, mid)
        if first is not None:
            hi, why = mid, first
        else:
            lo = mid
    why = reason(lo, lo + 1) or why
    m = re.match(r"In CSV column #(\d+): Row #\d+: (.*)", why, re.S)
    if m and int(m.group(1)) < len(names):
        col = int(m.group(1))
        why = f"column {names[col]!r} (field {col + 1}): {m.group(2).strip()}"
    return lo + 1, why


def bad_line(data: bytes, names: list[str], types: dict, sep: str, where: str, line0: int,
             detail: str, required: str | None = None, nan_missing: bool = False) -> LineError:
    """The :class:`LineError` of the first bad line of ``data`` (see :func:`locate`, then
    the first line pyarrow refuses), or one naming the block when no line is found at fault
    (``detail`` says what the parser found)."""
    found = locate(data, names, types, sep, required, nan_missing) or \
        _refused(data, names, types, sep)
    if found is None:
        return LineError(where, None, f"cannot parse the lines after line {line0}: {detail}")
    return LineError(where, line0 + found[0], found[1])


def line_of_row(data: bytes, row: int) -> int:
    """1-based line of ``data`` holding table row ``row`` (0-based; blank lines are no rows)."""
    seen = -1
    for i, line in enumerate(data.split(b"\n"), start=1):
        seen += bool(line.strip(b"\r"))
        if seen == row:
            return i
    raise IndexError(row)


def read_table(fs, block: Block, line0: int, header: bool, names: list[str], types: dict,
               sep: str, required: str | None = None, nan_missing: bool = False,
               non_empty: tuple = (), fallback: dict | None = None) -> tuple[pa.Table, int]:
    """Read and parse one block (once); returns the table and the block's newline count.
    ``required``, ``nan_missing``, ``fallback``: see :func:`parse_block`; ``non_empty``: more
    columns of ``types`` (of any type: ids, ratings) that no line may leave empty.

    Raises
    ------
    LineError
        A bad line (see :func:`parse_block`), or an empty field in column ``required``, else
        in the first column of ``non_empty`` that has one (its first such line).
    """
    raw = read(fs, block)
    data, skipped = strip_header(raw, block, header)
    table = parse_block(data, names, types, sep, block.path, line0 + skipped, required,
                        nan_missing, fallback=fallback)
    for col in ([required] if required is not None else []) + list(non_empty):
        if table.column(col).null_count:
            row = int(np.argmax(table.column(col).is_null().to_numpy(zero_copy_only=False)))
            raise LineError(block.path, line0 + skipped + line_of_row(data, row),
                            f"column {col!r} is empty")
    return table, raw.count(b"\n")


def line_weights(table: pa.Table, weight: str, lines, path: str) -> np.ndarray:
    """The float64 weights of a parsed CSV block (``table``, whose ``weight`` column is
    float64, null for an empty field) of file ``path``; ``lines()`` gives ``(data, line0)``,
    the block's lines and the lines of the file before them (called on the error path
    only, to find the line).

    Raises
    ------
    LineError
        ``"<path>, line <n>: column 'w' (the sample weight) is empty: sample weights must
        be ..."``: the first line whose weight is empty, NaN, infinite or negative (a field
        that is not a number is :func:`~._csv.parse_block`'s to name).
    """
    col = table.column(weight)
    found = first_bad_weight(col)
    if found is not None:
        data, line0 = lines()
        raise LineError(path, line0 + line_of_row(data, found[0]),
                        f"column {weight!r} (the sample weight) {found[1]}: {WEIGHTS_ARE}")
    return col.to_numpy(zero_copy_only=False)


def block_weights(data: bytes, names: list[str], sep: str, path: str, line0: int,
                  weight: str) -> np.ndarray:
    """The checked weights of whole CSV lines ``data`` (no header) whose columns are
    ``names``, ``line0`` lines into ``path``: pyarrow parses the one column (read_ctr's
    kernel hashes the features apart).

    Raises
    ------
    LineError
        A line with another number of fields, a weight that is not a number, or (see
        :func:`line_weights`) empty, NaN, infinite or negative.
    """
    table = parse_block(data, names, {weight: pa.float64()}, sep, path, line0,
                        nan_missing=True)
    return line_weights(table, weight, lambda: (data, line0), path)
