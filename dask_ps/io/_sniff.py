"""What format a file given as LIBSVM looks like when it is not: the hint of the errors
that refuse it (:func:`~dask_ps.io.read_libsvm`'s, and the command line's check before a
cluster starts), in the readers' parameters (``format='csv'``, ``sep=';'``: ``dask-ps``
spells them as its options, :func:`dask_ps.cli._words.cli_words`); and whether a file read
as text is compressed (its magic number) under a name that does not say so."""

from __future__ import annotations

import re

__all__ = ["compressed", "first_line", "libsvm_line", "other_format"]

#: An ``index:value`` (or ``qid:n``) pair of a LIBSVM line.
PAIR = re.compile(rb"(?:^|\s)(?:\d+|qid):\S")

#: A whole ``index:value`` (or ``qid:n``) field of a LIBSVM line.
_PAIR_FIELD = re.compile(rb"(?:\d+|qid):[^:\s]+")

#: Delimiters of a table's line (the first, ``,``, is the table readers' default ``sep``).
_DELIMITERS = (",", "\t", ";", "|")


#: Magic numbers of compressed files, the codec's name (fsspec's ``compression=``) and the
#: file name extension from which the readers infer it.
_MAGIC = ((b"\x1f\x8b", "gzip", ".gz"), (b"\xfd7zXZ\x00", "xz", ".xz"),
          (b"PK\x03\x04", "zip", ".zip"), (b"\x28\xb5\x2f\xfd", "zstd", ".zst"))
#: bzip2's: ``BZh``, the block size digit, then the first block's magic (pi's digits).
_BZ2 = re.compile(rb"BZh[1-9]1AY&SY")


def compressed(head: bytes, option: bool = True) -> str:
    """`` (it is gzip-compressed, but its name does not end in .gz: ...)`` when ``head``, a
    file's first bytes read as they are (no codec inferred from its name), starts with the
    magic number of a compressed format (gzip, bzip2, xz, zip, zstd); else ``""``. Called
    when its text was refused, for the error's hint: such bytes are no UTF-8 text.
    ``option``: the reader takes ``compression=`` (the hint names it), else only the
    renaming is said."""
    from fsspec import available_compressions

    found = [(codec, ext) for magic, codec, ext in _MAGIC if head.startswith(magic)]
    if _BZ2.match(head):
        found.append(("bz2", ".bz2"))
    if not found:
        return ""
    codec, ext = found[0]
    if codec not in available_compressions():
        return f" (it is {codec}-compressed: decompress it first)"
    return (f" (it is {codec}-compressed, but its name does not end in {ext}: rename it "
            f"to end in {ext}" + (f", or give compression={codec!r})" if option else ")"))


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


def other_format(head: bytes, header: bool = False) -> str:
    """`` (is this a ... file? use format=...)`` when a file whose first bytes are ``head``
    looks like Parquet (its magic bytes) or a delimited table (a first line with a ``,``,
    tab, ``;`` or ``|`` and no ``index:value`` pair: with ``sep=`` for another delimiter
    than ``,``; with ``header=False`` when ``header`` and every field of that line is a
    number); the hint of :func:`compressed` for compressed bytes; else ``""``.

    The advice is in the table readers' parameters (``format``, ``sep``, ``header`` of
    :func:`~dask_ps.io.read_ctr`), which ``dask-ps`` says as its options (``use --format
    csv --sep ';'``). ``header``: the reader meant takes ``header=`` (the ``dask-ps``
    command has ``--no-header``).

    Examples
    --------
    ``" (is this a table of fields separated by ';'? use format='csv', sep=';')"``.
    """
    if compressed(head):
        return compressed(head)
    if head.startswith(b"PAR1"):
        return " (is this a Parquet file? use format='parquet')"
    line = first_line(head)
    if not line or PAIR.search(line):
        return ""
    for delimiter in _DELIMITERS:
        fields = line.split(delimiter.encode())
        if len(fields) > 1:
            what = ("CSV file" if delimiter == _DELIMITERS[0] else
                    f"table of fields separated by {delimiter!r}")
            how = ["format='csv'", *([f"sep={delimiter!r}"] if delimiter != "," else [])]
            if header and all(_number(f.strip()) for f in fields):
                how.append("header=False")
            return f" (is this a {what}? use {', '.join(how)})"
    return ""


def libsvm_line(line: bytes) -> bool:
    """Whether ``line`` reads as a line of LIBSVM: a label (a number, or numbers joined by
    ``,``: multi-label), then one or more ``index:value`` pairs (``qid:n`` too). For the
    hint of readers of other formats that refuse such a line (ratings, LDA-C)."""
    fields = line.split()
    return (len(fields) > 1 and all(_number(f) for f in fields[0].split(b","))
            and all(_PAIR_FIELD.fullmatch(f) for f in fields[1:]))
