"""What format a file given as LIBSVM looks like when it is not: the hint of the errors
that refuse it (the command line's check before a cluster starts)."""

from __future__ import annotations

import re

__all__ = ["first_line", "other_format"]

#: An ``index:value`` (or ``qid:n``) pair of a LIBSVM line.
PAIR = re.compile(rb"(?:^|\s)(?:\d+|qid):\S")

#: Delimiters of a table's line, and how ``--sep`` spells them.
_DELIMITERS = {b",": None, b"\t": "'\\t'", b";": "';'", b"|": "'|'"}


def first_line(head: bytes) -> bytes:
    """The first line of ``head`` (a file's first bytes) that is neither blank nor a
    comment (``#``), without a UTF-8 byte order mark or line end; ``b""`` if none."""
    for line in head.removeprefix(b"\xef\xbb\xbf").split(b"\n"):
        line = line.strip()
        if line and not line.startswith(b"#"):
            return line
    return b""


def _number(field: bytes) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def other_format(head: bytes, header_flag: bool = False) -> str:
    """`` (is this a ... file? dask-ps train reads it with --format ...)`` when a file
    whose first bytes are ``head`` looks like Parquet (its magic bytes) or a delimited
    table (a first line with a ``,``, tab, ``;`` or ``|`` and no ``index:value`` pair: with
    ``--sep`` for another delimiter than ``,``; with ``--no-header`` when
    ``header_flag`` and every field of that line is a number); else ``""``."""
    if head.startswith(b"PAR1"):
        return " (is this a Parquet file? dask-ps train reads it with --format parquet)"
    line = first_line(head)
    if not line or PAIR.search(line):
        return ""
    for delimiter, spelt in _DELIMITERS.items():
        fields = line.split(delimiter)
        if len(fields) > 1:
            what = "CSV file" if spelt is None else f"table of fields separated by {spelt}"
            how = "--format csv" + ("" if spelt is None else f" --sep {spelt}")
            if header_flag and all(_number(f.strip()) for f in fields):
                how += " --no-header"
            return f" (is this a {what}? dask-ps train reads it with {how})"
    return ""
