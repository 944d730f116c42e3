"""Splitting files into blocks of whole lines, and mapping functions over the blocks with dask.

Every reader of this package plans its input the same way: the files an fsspec URL (or glob)
names, in sorted order, each uncompressed file cut into blocks of about ``blocksize`` bytes at
line boundaries, each compressed file one block (a compressed stream cannot seek).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import uuid
import warnings
from collections import Counter
from typing import NamedTuple

import dask.array as da
import numpy as np
from dask.utils import parse_bytes
from fsspec import available_compressions
from fsspec.core import get_fs_token_paths
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import infer_compression, read_block

from ..exceptions import DataError
from ._line_kernels import line_of_row
from ._storage import (
    bucket_of,
    check_url,
    client_error,
    named_errors,
    protocol_error,
    storage_error,
    unreachable,
    url_of,
)

__all__ = ["Block", "OBJECTS", "box", "chunk_sources", "count_read", "each", "expect_rows",
           "files_named", "find_newline", "header_end", "lines_before", "open_paths", "plan",
           "read", "read_array", "row_origin", "select", "skip_empty_files", "source_reads",
           "start_lines"]

OBJECTS = np.empty(0, dtype=object)

# Reads of source data in this process, by (path, part): how the estimators report that each
# source block was read once (a spilled partition comes back from Dask's disk, not from here).
_READS: Counter = Counter()
_READ_BYTES: Counter = Counter()
_LOCK = threading.Lock()


def count_read(path: str, part, nbytes: int) -> None:
    """Record one read of ``part`` (a block offset, a row group) of a source file."""
    with _LOCK:
        _READS[(path, part)] += 1
        _READ_BYTES[(path, part)] += nbytes


def source_reads() -> dict:
    """``{(path, part): (reads, bytes)}`` of the source reads of this process so far."""
    with _LOCK:
        return {k: (n, _READ_BYTES[k]) for k, n in _READS.items()}


class Block(NamedTuple):
    path: str
    offset: int
    length: int | None  # None: the whole (decompressed) file
    compression: str | None


class RowGroup(NamedTuple):
    """A Parquet file's row group, one chunk of a reader's arrays; ``group`` None: no row
    group, the one empty chunk of files without rows (:func:`~.parquet.row_groups`)."""

    path: str
    group: int | None  # pyarrow's index, from 0

    @property
    def where(self) -> str:
        """``"<file>, row group <g>"`` as errors name it: counted from 1, as rows are."""
        return self.path if self.group is None else f"{self.path}, row group {self.group + 1}"


def source_paths(collection) -> list[str]:
    """The files a dask collection made by this package's readers reads: the paths of the
    :class:`Block` and :class:`RowGroup` items in its graph (alone or first in a tuple), in
    graph order, each once; ``[]`` for anything else (NumPy, other dask collections, a
    graph that cannot be read). Meant for error messages (e.g. which file a batch of
    :func:`dask_ps.learn_online` came from), so it never raises."""
    graph = getattr(collection, "__dask_graph__", None)
    found: dict[str, None] = {}
    try:
        values = dict(graph()).values() if graph is not None else ()
        for value in values:
            if not (isinstance(value, np.ndarray) and value.dtype == object):
                continue
            for item in value.ravel():
                if isinstance(item, tuple) and not isinstance(item, (Block, RowGroup)) and item:
                    item = item[0]
                if isinstance(item, (Block, RowGroup)):
                    found.setdefault(item.path, None)
    except Exception:  # noqa: BLE001 - a description for a message, not a check
        return list(found)
    return list(found)


def open_paths(urlpath, storage_options: dict | None = None, what: str = "",
               folders: bool = True):
    """``(fs, paths)`` of a URL, glob or list of them; raises FileNotFoundError for none.
    A path of a remote file system keeps its protocol (``s3://bucket/key``, which its
    methods take), so that errors and reports name the file as the user wrote it.

    Globs use ``*``, ``?`` and ``[...]`` (fsspec expands ``*`` only; a path holding ``?``
    or ``[`` is expanded here unless a file has that very name), matching files (not
    folders) in sorted order. A folder given (not a glob's match) stands for the files
    under it, as pyarrow's and pandas' ``read_parquet`` read a folder: sorted, at any
    depth, but for names starting with ``.`` or ``_`` (``_SUCCESS``, ``.part-0.crc``, a
    file being written as ``.name.tmp``), and those under such folders.

    Raises
    ------
    FileNotFoundError
        No file matches (naming ``urlpath``, and a missing bucket of an object store), or
        a folder holds none (naming it).
    PermissionError, ConnectionError
        An object store's client found no credentials, or could not reach its endpoint
        (:func:`~._storage.client_error`), naming ``urlpath``.
    OptionError
        An empty path (``""``: not the current folder), or an unknown protocol, naming
        ``urlpath`` (:func:`~._storage.check_url`, :func:`~._storage.protocol_error`).
    ModuleNotFoundError
        A known protocol whose package is not installed (``gs://`` without gcsfs), naming
        ``urlpath`` and the package to install.
    OSError
        Another error of the storage (access denied: wrong credentials), in one line
        naming ``urlpath`` (:func:`~._storage.storage_error`; ``what``, e.g.
        ``"vocabulary"``, says what it is).

    ``folders=False`` leaves a folder given as it is (a model file's path: its reader
    names a folder).
    """
    check_url(urlpath, what or "urlpath")
    try:
        fs, _, paths = get_fs_token_paths(urlpath, mode="rb", storage_options=storage_options)
        paths = [q for p in paths
                 for q in (_glob_files(fs, p) if any(c in p for c in "?[") and not fs.exists(p)
                           else [p])]
        given = {fs._strip_protocol(os.fspath(u)).rstrip("/")  # not a glob's matches
                 for u in (urlpath if isinstance(urlpath, (list, tuple)) else [urlpath])}
        expanded = [(p, _folder_files(fs, p) if folders and p.rstrip("/") in given else [p])
                    for p in paths]
    except (ValueError, ImportError) as exc:  # a protocol unknown, or its package missing
        one = urlpath if not isinstance(urlpath, (list, tuple)) else next(  # the URL whose
            (u for u in urlpath if "://" in str(u)), urlpath[0])  # protocol was refused
        said = protocol_error(os.fspath(one), exc, what)
        if said is None:
            raise type(exc)(f"{urlpath!r}: {exc}") from None
        raise said from None
    except OSError as exc:
        raise storage_error(str(urlpath), exc, what) from None
    except Exception as exc:  # noqa: BLE001 - botocore's own (no credentials, endpoint)
        raise (client_error(str(urlpath), exc) or exc) from None
    empty = [p for p, found in expanded if not found]
    if empty:
        raise FileNotFoundError(f"folder {url_of(fs, empty[0])!r} holds no file (names "
                                f"starting with '.' or '_' are skipped)")
    paths = [q for _, found in expanded for q in found]
    if not isinstance(fs, LocalFileSystem) and "memory" not in np.atleast_1d(fs.protocol):
        paths = [url_of(fs, p) for p in paths]  # s3://bucket/key: as errors name them
    if not paths:
        _reachable(fs, urlpath, what)
        bucket = bucket_of(urlpath) if isinstance(urlpath, str) else None
        if bucket and not _exists(fs, bucket):
            raise FileNotFoundError(f"no file matches {urlpath!r}: bucket {bucket!r} does "
                                    f"not exist")
        raise FileNotFoundError(f"no file matches {urlpath!r}")
    return fs, paths


def files_named(urlpath, paths: list[str] | None = None) -> str:
    """The files of ``urlpath`` (a URL, glob or list) as errors name a file they hold
    (:func:`open_paths`'s: a local file by its absolute path, a remote one by its URL):
    ``"/data/a.svm"``, or for several ``"/data/a.svm (and 2 other files)"``, for an error
    about all of them (``"...: no rows"``). ``paths``: those files, when the caller has
    them (else looked up).

    Raises
    ------
    FileNotFoundError, OSError
        As :func:`open_paths`.
    """
    paths = open_paths(urlpath)[1] if paths is None else paths
    more = len(paths) - 1
    return paths[0] + (f" (and {more} other file{'s' if more > 1 else ''})" if more else "")


def _reachable(fs, urlpath, what: str) -> None:
    """Raise ``ConnectionError`` naming ``urlpath`` when no file matched it because its
    server could not be reached: fsspec's HTTP ``exists`` and ``glob`` say False and
    nothing for any error of their requests; listing the folder of the first URL tells."""
    if isinstance(fs, LocalFileSystem):
        return
    first = next(iter(urlpath), "") if isinstance(urlpath, (list, tuple)) else urlpath
    try:
        fs.ls(fs._parent(os.fspath(first)))
    except Exception as exc:  # noqa: BLE001 - only a server not reached is said here
        if unreachable(exc) is not None:
            raise storage_error(str(urlpath), exc, what) from None


def _exists(fs, path: str) -> bool:
    """``fs.exists(path)``, True when it cannot tell (the error is another's to report)."""
    try:
        return fs.exists(path)
    except OSError:
        return True


def _folder_files(fs, path: str) -> list[str]:
    """``[path]`` for a file; the files under the folder ``path`` (sorted, at any depth, but
    those whose name, or a folder's on the way, starts with ``.`` or ``_``, as pyarrow's
    dataset discovery skips them), ``[]`` when it holds none."""
    if not fs.isdir(path):
        return [path]
    root = path.rstrip("/")
    found = sorted(f for f in fs.find(root, withdirs=False)
                   if not any(part.startswith((".", "_"))
                              for part in f[len(root):].strip("/").split("/")))
    return found


def _glob_files(fs, pattern: str) -> list[str]:
    """The files (not folders, as fsspec's ``*``) matching ``pattern``, sorted; their types
    come with the one listing (``detail=True``), not from one request per file."""
    found = fs.glob(pattern, detail=True)
    return sorted(f for f, info in found.items() if info.get("type") != "directory")


#: A blocksize below this many bytes is for small inputs only: at most
#: :data:`MAX_SMALL_BLOCKS` blocks. Every block is a task costing milliseconds whatever its
#: size, so a forgotten unit (``blocksize=1``, one block per byte: 150 s for a 14 kB file
#: instead of 15) is refused rather than run. A block smaller than a line is read empty
#: (a line belongs to the block it starts in), so small blocks stay correct, only slow.
MIN_BLOCKSIZE = 64 * 1024
MAX_SMALL_BLOCKS = 1000


def plan(fs, paths: list[str], blocksize, compression: str | None) -> list[Block]:
    """The blocks of ``paths``; ``blocksize`` in bytes (int or "32MiB") or None for whole files.

    Raises
    ------
    ValueError
        A blocksize that is not positive, or one under :data:`MIN_BLOCKSIZE` (64 KiB)
        that cuts more than :data:`MAX_SMALL_BLOCKS` blocks off the files beyond their
        first ones (naming the blocksize, the count and the first file); a
        ``compression`` other than "infer", None or a codec fsspec has (naming them).
    """
    if compression != "infer" and compression not in available_compressions():
        codecs = ", ".join(repr(c) for c in available_compressions() if c is not None)
        raise ValueError(f"compression must be 'infer', None or one of {codecs}, not "
                         f"{compression!r}")
    size = None if blocksize is None else parse_bytes(blocksize)
    if size is not None and size <= 0:
        raise ValueError(f"blocksize must be positive, not {blocksize!r}")
    comps = [infer_compression(p) if compression == "infer" else compression for p in paths]
    sizes = [None if comp is not None or size is None else _size(fs, path)
             for path, comp in zip(paths, comps)]
    if size is not None and size < MIN_BLOCKSIZE:
        count = sum(1 if n is None else max(-(-n // size), 1) for n in sizes)
        # a file is a block whatever the blocksize: only the blocks it cuts off count
        if count - len(paths) > MAX_SMALL_BLOCKS:
            what = f"{size:,} byte{'s' if size != 1 else ''}" + \
                (f" ({blocksize!r})" if isinstance(blocksize, str) else "")
            raise ValueError(
                f"blocksize {what} cuts {paths[0]}"
                f"{f' and {len(paths) - 1:,} more files' if len(paths) > 1 else ''} into "
                f"{count:,} blocks, one task each: a blocksize under 64 KiB is for small "
                f"inputs, at most {MAX_SMALL_BLOCKS:,} blocks; give a larger one such as "
                f"'64MiB' (a number without a unit counts bytes)")
    blocks = []
    for path, comp, n in zip(paths, comps, sizes):
        if n is None:
            blocks.append(Block(path, 0, None, comp))
            continue
        for off in range(0, max(n, 1), size):
            blocks.append(Block(path, off, min(size, n - off), None))
    return blocks


def skip_empty_files(fs, paths: list[str], keep_one: bool = False, hint: str = ""
                     ) -> tuple[list[str], bool]:
    """``paths`` without their files of 0 bytes, and whether all were: a table's file of 0
    bytes holds no header to read columns from, and no row (a file just made, not written
    yet; a quiet hour's whose writer wrote no header). Each one left out is named by a
    ``UserWarning``, as a file of a header alone reads as no rows.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
    paths : list of str
        The files (:func:`open_paths`), at least one.
    keep_one : bool, default False
        When every file is of 0 bytes: return the first (to be read as no rows: the caller
        knows the columns) with a warning naming it, instead of raising.
    hint : str, default ""
        Said after the error's message (``"; ..."``: what to do).

    Raises
    ------
    DataError
        Every file is of 0 bytes (and not ``keep_one``): ``"<file>: an empty file (0
        bytes): no header to read the columns from, and no rows"``, naming how many others
        are empty too.
    """
    empty = [p for p in paths if _size(fs, p) == 0]
    if len(empty) == len(paths):
        if not keep_one:
            more = f" (as are the {len(paths) - 1} other files)" if len(paths) > 1 else ""
            raise DataError(f"{paths[0]}: an empty file (0 bytes){more}: no header to read "
                            f"the columns from, and no rows{hint}")
        warnings.warn(f"{paths[0]}: an empty file (0 bytes): read as no rows", UserWarning,
                      stacklevel=3)
        return paths[:1], True
    for path in empty:
        warnings.warn(f"{path}: an empty file (0 bytes: no header, no rows): skipped",
                      UserWarning, stacklevel=3)
    skipped = set(empty)
    return [p for p in paths if p not in skipped], False


def _size(fs, path: str) -> int:
    """``fs.size(path)``; a missing file (or bucket) or refused access named by its URL."""
    try:
        return fs.size(path)
    except OSError as exc:
        raise storage_error(url_of(fs, path), exc) from None
    except Exception as exc:  # noqa: BLE001 - botocore's own (no credentials, endpoint)
        raise (client_error(url_of(fs, path), exc) or exc) from None


@contextlib.contextmanager
def decompress_errors(path: str, compression: str | None):
    """Within it, a compressed file's corrupt or truncated stream (the codec's ``OSError``,
    ``EOFError`` or ``ValueError``, which name no file: "Compressed file ended before the
    end-of-stream marker was reached") comes as a :class:`~dask_ps.DataError` naming
    ``path``; a missing file, refused access or an unreachable server go through (to
    :func:`~._storage.named_errors`, outside it). Nothing changes without ``compression``.
    The one rule of every reader's opening of a compressed file (its blocks, and the first
    lines read for a header or a sample)."""
    try:
        yield
    except (FileNotFoundError, PermissionError, ConnectionError):
        raise
    except (OSError, EOFError, ValueError) as exc:
        if not compression or unreachable(exc) is not None:
            raise
        # a corrupt archive says only "Invalid data stream": name the file
        raise DataError(f"{path}: cannot decompress ({compression}): {exc}") from exc


def read(fs, block: Block) -> bytes:
    """The bytes of a block: whole lines only (a line belongs to the block it starts in)."""
    if block.length is None:
        with named_errors(url_of(fs, block.path)), \
                decompress_errors(block.path, block.compression), \
                fs.open(block.path, "rb", compression=block.compression) as f:
            data = f.read()
            count_read(block.path, 0, len(data))
            return data
    with named_errors(url_of(fs, block.path)), fs.open(block.path, "rb") as f:
        data = read_block(f, block.offset, block.length, delimiter=b"\n")
    count_read(block.path, block.offset, len(data))
    return data


def read_array(fs, block: Block) -> np.ndarray:
    """The bytes of :func:`read` as a read-only uint8 array, for the parsing kernels.

    A block of a local uncompressed file is a memory map of the file's pages (in the page
    cache once read): the kernel reads them where they lie, without the copy that ``read``
    makes (a third of the time of counting a block's rows, a tenth of parsing it).
    Truncating the file while a block is parsed can then end the process (SIGBUS) rather
    than raise; a file that changed between two passes is still found by
    :func:`expect_rows`.
    """
    if block.length is None or block.compression is not None or \
            not isinstance(fs, LocalFileSystem):
        return np.frombuffer(read(fs, block), np.uint8)
    with open(block.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if block.offset >= size:
            count_read(block.path, block.offset, 0)
            return np.empty(0, np.uint8)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    # As fsspec's read_block: a block starts after the first newline at or past its offset
    # (at 0 for the first) and ends after the first newline at or past offset + length.
    start = 0
    if block.offset:
        start = mm.find(b"\n", block.offset) + 1 or size
    end = block.offset + block.length
    end = size if end >= size else (mm.find(b"\n", end) + 1 or size)
    count_read(block.path, block.offset, end - start)
    return np.frombuffer(mm, np.uint8)[start:end]  # the array keeps the map open


def find_newline(data, start: int = 0) -> int:
    """``data.find(b"\\n", start)`` of bytes or of a uint8 array."""
    if isinstance(data, bytes):
        return data.find(b"\n", start)
    step = 1 << 16
    for i in range(start, len(data), step):
        hit = np.flatnonzero(data[i:i + step] == 10)
        if hit.size:
            return i + int(hit[0])
    return -1


def header_end(data, block: Block, header: int) -> tuple[int, int]:
    """Where a block's lines start after its file's ``header`` first lines (0 for a block
    that does not start its file), and how many lines those are; ``data`` is bytes or a
    uint8 array."""
    if not header or block.offset != 0:
        return 0, 0
    cut = -1
    for _ in range(int(header)):
        cut = find_newline(data, cut + 1)
        if cut < 0:
            return len(data), int(header)
    return cut + 1, int(header)


def expect_rows(block: Block, line0: int, rows: int, expect: int) -> None:
    """Raise DataError unless a block parsed into the ``expect`` rows its first pass counted
    (the arrays' chunks): its file changed in between."""
    if rows != expect:
        raise DataError(f"{block.path}: {rows} rows after line {line0}, {expect} when the "
                        f"file was opened; did it change since?")


def start_lines(blocks: list[Block], newlines: list[int]) -> list[int]:
    """Lines of its file before each block (line numbers restart in every file)."""
    line0, seen = [], {}
    for b, n in zip(blocks, newlines):
        line0.append(seen.get(b.path, 0))
        seen[b.path] = line0[-1] + n
    return line0


def lines_before(fs, block: Block, step: int = 2**20) -> int:
    """Lines of its file before a block (as :func:`read` cuts it), counted by reading the file
    up to the block: for an error's line number when no first pass counted them."""
    if not block.offset:
        return 0
    n = 0
    with named_errors(url_of(fs, block.path)), fs.open(block.path, "rb") as f:
        for start in range(0, block.offset, step):
            n += f.read(min(step, block.offset - start)).count(b"\n")
        while chunk := f.read(step):  # the line the offset falls in ends the block before
            if b"\n" in chunk:
                return n + 1
    return n


def each(items: list) -> da.Array:
    """A 1-d object dask array with one chunk per item, to map a function over them: chunk
    ``i`` is the graph's value ``(name, i)``, ``box(items[i])`` (what :func:`chunk_sources`
    reads back; dask's ``from_array`` lays a NumPy array out so too, but as it chooses)."""
    name = f"array-{uuid.uuid1()}"
    graph = {(name, i): box(item) for i, item in enumerate(items)}
    return da.Array(graph, name, ((1,) * len(items),), dtype=object, meta=OBJECTS)


def chunk_sources(collection) -> list | None:
    """Where each chunk of a reader's array comes from, along its rows: per chunk the
    ``(Block, lines before it in its file, rows)`` a text reader (:func:`read_ctr`'s CSV,
    :func:`read_libsvm`) parses, or the :class:`RowGroup` of a Parquet one; None when the
    chunks are not those items one to one (a rechunked, concatenated or persisted array, or
    not a reader's). Read from the items :func:`each` put in the graph; meant for error
    messages (:func:`row_origin`), so it never raises.
    """
    chunks = getattr(collection, "chunks", None)
    graph = getattr(collection, "__dask_graph__", None)
    try:
        found: dict[str, dict] = {}
        for key, value in dict(graph()).items():
            if not (isinstance(key, tuple) and len(key) == 2 and isinstance(value, np.ndarray)
                    and value.dtype == object and value.shape == (1,)):
                continue
            item = value[0]
            if isinstance(item, RowGroup) or (
                    isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], Block)):
                found.setdefault(key[0], {})[key[1]] = item
        rows = tuple(chunks[0])
        fits = [[items[i] for i in range(len(rows))] for items in found.values()
                if sorted(items) == list(range(len(rows))) and all(
                    isinstance(items[i], RowGroup) or items[i][2] == n
                    for i, n in enumerate(rows))]
    except Exception:  # noqa: BLE001 - a description for a message, not a check
        return None
    return fits[0] if len(fits) == 1 else None


def row_origin(fs, source, row: int, rule: int, header: int = 0) -> str:
    """``"<file>, line <n>"`` of row ``row`` (0-based) of a chunk whose :func:`chunk_sources`
    item is ``source`` (lines 1-based, of its file, the ``header`` lines and blank and comment
    lines counted, as the readers' errors count them); ``"<file>, row group <g>, row <r>"``
    (1-based) for Parquet.

    The lines before the block come with it (the readers' first pass counted them); the line
    of the row within it costs one read of the block (the error path only): blank and
    comment lines are no rows, and the first pass counted rows, not where they are.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
        The file system of the block's file.
    source : tuple or RowGroup
        ``(Block, lines before it, rows)``, or a Parquet row group.
    row : int
    rule : int
        Which lines are rows: :data:`~._line_kernels.SVM` or :data:`~._line_kernels.CSV`.
    header : int, default 0
        Lines at the start of each file that are no rows (a CSV header).
    """
    if isinstance(source, RowGroup):
        return f"{source.where}, row {row + 1}"
    block, line0, _ = source
    data = read_array(fs, block)
    start, skipped = header_end(data, block, header)
    return f"{block.path}, line {line0 + skipped + line_of_row(data[start:], rule, row)}"


def box(value) -> np.ndarray:
    arr = np.empty(1, dtype=object)
    arr[0] = value
    return arr


def select(chunk: np.ndarray, i: int):
    return chunk[0][i]
