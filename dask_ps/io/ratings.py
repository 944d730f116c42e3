"""Rating triples (user, item, rating[, timestamp]) from TSV / CSV / Parquet, with a global
mapping of any int64 or string ids to dense codes 0..n-1."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._cluster_workers import compute
from ..exceptions import DataError
from ._blocks import OBJECTS, box, decompress_errors, each, open_paths, plan, read, start_lines
from ._csv import (
    OTHER_DELIMITERS,
    PARQUET_BY_NAME,
    LineError,
    check_sep,
    header_names,
    line_of_row,
    read_table,
    strip_header,
)
from ._id_codes import integer_text, number_text
from ._sniff import libsvm_line
from ._storage import named_errors, url_of
from .ids import IdMapping, id_values
from .parquet import footer

__all__ = ["check_ratings_columns", "encode_ratings", "read_ratings"]


def _ids_of(values: pa.ChunkedArray | pa.Array) -> tuple:
    """``(distinct ids, bad)`` of a block's column: int64 ids when all are decimal integers
    within int64 (:func:`~._id_codes.integer_text`), else strings as written; ``bad`` is
    ``(row, id)`` of the first id that is a number but not such an integer (``12.5``,
    ``1e3``, ``99999999999999999999999``) when every id is a number (:func:`_refuse_numbers`
    refuses it if every block's ids are), else None. Vectorised on the distinct ids."""
    uniq = pc.unique(values.drop_null())
    if pa.types.is_integer(uniq.type):
        return uniq.to_numpy().astype(np.int64), None
    uniq = pc.cast(uniq, pa.string())
    ints, ok = integer_text(uniq)
    if ok.all():
        return ints, None
    text = np.asarray(uniq.to_pylist(), dtype=str)
    odd = uniq.filter(pa.array(~ok))
    if not number_text(odd).all():  # an id that is no number ("u12"): string ids
        return text, None
    at = pc.is_in(values, value_set=odd).to_numpy(zero_copy_only=False)
    row = int(np.argmax(at))
    return text, (row, values[row].as_py())


def _refuse_numbers(parts: list, line0: list) -> list:
    """The distinct ids of a column's blocks (``parts``: :meth:`_CSV.scan`'s ``(ids, bad)``,
    ``bad`` a LineError or None); raises the first block's ``bad``, shifted by its
    ``line0``, when every block's ids are numbers (none has an id that is not one: a column
    of integer ids with one ``12.5`` holds a typo, not string ids)."""
    if not any(ids.dtype.kind != "i" and bad is None for ids, bad in parts):
        for (_, bad), l0 in zip(parts, line0):
            if bad is not None:
                raise bad.shifted(l0)
    return [ids for ids, _ in parts]


def _merge_ids(parts: list) -> IdMapping:
    if not parts:
        return IdMapping(np.zeros(0, np.int64))
    if any(p.dtype.kind != "i" for p in parts):  # one string id makes every id a string
        return IdMapping(np.unique(np.concatenate([p.astype(str) for p in parts])))
    ids = np.sort(np.concatenate(parts))  # sorted, then distinct: faster than np.unique's hash
    return IdMapping.from_sorted(ids[np.r_[True, ids[1:] != ids[:-1]]] if ids.size else ids)


def _coded(table: pa.Table, cols: dict, users: IdMapping, items: IdMapping) -> pd.DataFrame:
    out = {}
    for key, mapping in (("user", users), ("item", items)):
        col = table.column(cols[key])
        if mapping.is_integer and pa.types.is_integer(col.type):
            values = pc.cast(col, pa.int64()).to_numpy()  # no Python objects on the way
        else:  # strings to the hash lookup; "7", "007", "7.0" (a float 7.0 too) are id 7
            values = pc.cast(col, pa.string())
        out[key] = mapping.codes(values)
    out["rating"] = pc.cast(table.column(cols["rating"]), pa.float64()).to_numpy()
    if cols.get("timestamp") is not None:
        out["timestamp"] = pc.cast(table.column(cols["timestamp"]), pa.int64()).to_numpy()
    return pd.DataFrame(out)


def _meta(with_time: bool) -> pd.DataFrame:
    cols = {"user": np.int64, "item": np.int64, "rating": np.float64}
    if with_time:
        cols["timestamp"] = np.int64
    return pd.DataFrame({k: np.zeros(0, v) for k, v in cols.items()})


class _CSV:
    """How to read the blocks of one CSV input (picklable, shipped to the workers)."""

    def __init__(self, fs, names, types, cols, sep, header):
        self.fs, self.names, self.types = fs, names, types
        # ids parsed as int64 by pyarrow, as strings in a block with an id that is not one
        self.int_types = {**types, cols["user"]: pa.int64(), cols["item"]: pa.int64()}
        self.cols, self.sep, self.header = cols, sep, header

    def table(self, block, line0):
        """The block parsed once; every line needs a user, an item and a rating (an empty
        one: the first line without a user, else an item, else a rating, is named)."""
        return read_table(self.fs, block, line0, self.header, self.names, self.int_types,
                          self.sep, non_empty=(self.cols["user"], self.cols["item"],
                                               self.cols["rating"]), fallback=self.types)

    def check_timestamps(self, table: pa.Table, block) -> None:
        """LineError naming the line (and field) of the first timestamp that is empty (the
        column is optional as a whole, not on a line: an int64 holds no missing value) or
        not an int64 (1.5, 1e30): read as float64, it would fail the cast when computed."""
        ts = self.cols["timestamp"]
        if ts is None:
            return
        t = table.column(ts).to_numpy(zero_copy_only=False)  # NaN: empty ("nan" refused)
        bad = np.isnan(t) | (t != np.floor(t)) | (np.abs(t) >= 2.0**63)
        if bad.any():
            row = int(np.argmax(bad))
            data, skipped = strip_header(read(self.fs, block), block, self.header)
            why = f"column {ts!r} is empty" if np.isnan(t[row]) else \
                f"column {ts!r} (field {self.names.index(ts) + 1}): {t[row].item()!r} is " \
                f"not an integer (int64)"
            raise LineError(block.path, skipped + line_of_row(data, row), why)

    def scan(self, chunk):
        """``(newlines, (user ids, bad), (item ids, bad), error)`` of a block: a LineError
        ``error`` for a bad line; ``bad`` the LineError of the first id that is a number but
        not an integer (see :func:`_ids_of`), raised if the column's ids are all numbers."""
        try:
            table, newlines = self.table(chunk[0], 0)
            self.check_timestamps(table, chunk[0])
        except LineError as err:
            return box((0, None, None, err))
        return box((newlines, self._ids(table, chunk[0], "user"),
                    self._ids(table, chunk[0], "item"), None))

    def _ids(self, table: pa.Table, block, key: str) -> tuple:
        col = self.cols[key]
        ids, bad = _ids_of(table.column(col))
        if bad is not None:
            data, skipped = strip_header(read(self.fs, block), block, self.header)
            bad = LineError(block.path, skipped + line_of_row(data, bad[0]),
                            f"column {col!r} (field {self.names.index(col) + 1}): id "
                            f"{bad[1]!r} is not an integer (int64), and every id of the "
                            f"column is a number: a typo? (ids are read as strings when some "
                            f"are not numbers, e.g. u12)")
        return ids, bad

    def written_ids(self, chunk, key):
        """The distinct ids of column ``key`` of a block as written (strings: "007", not 7)."""
        table = read_table(self.fs, chunk[0], 0, self.header, self.names, self.types,
                           self.sep)[0]
        return box(np.asarray(pc.unique(table.column(self.cols[key])).to_pylist(), dtype=str))

    def load(self, item, users, items):
        block, line0 = item
        if users.is_integer and items.is_integer:
            table = self.table(block, line0)[0]
        else:  # string ids as written ("007"), as the scan's string blocks found them
            types = {**self.int_types, **{self.cols[k]: pa.string() for k, m in (
                ("user", users), ("item", items)) if not m.is_integer}}
            table = read_table(self.fs, block, line0, self.header, self.names, types,
                               self.sep, fallback=self.types)[0]
        return _coded(table, self.cols, users, items)


def _check_columns(user: str, item: str, rating: str, names: list, where: str = "") -> None:
    """The user, item and rating columns are three of ``names`` (DataError, a ValueError,
    naming them: one column as both user and item trained a model of nothing)."""
    roles = {"user": user, "item": item, "rating": rating}
    absent = [c for c in roles.values() if c not in names]
    if absent:
        which = [k for k, v in roles.items() if v not in names]
        roles_said = " and ".join([", ".join(which[:-1]), which[-1]] if which[:-1] else which)
        raise DataError(f"{where}columns {absent} are not among {names} (named as the "
                        f"{roles_said} column{'s' if len(which) > 1 else ''}: "
                        f"{', '.join(k + '=' for k in which)} in Python, "
                        f"{', '.join(f'--{k}-column' for k in which)} for dask-ps)")
    if len(set(roles.values())) < 3:
        twice = [f"{k}={v!r}" for k, v in roles.items() if list(roles.values()).count(v) > 1]
        raise DataError(f"{where}one column cannot be two of user, item and rating: "
                        f"{', '.join(twice)}")


#: The fields of a headerless text file without ``names``.
DEFAULT_NAMES = ("user", "item", "rating", "timestamp")


class HeaderlessColumnError(DataError):
    """A user, item, rating or timestamp column named otherwise than its default in a text
    file read without a header or ``names`` (see :func:`read_ratings`); ``path`` is the
    file, ``renamed`` a dict of the roles so named to their names."""

    def __init__(self, path: str, renamed: dict) -> None:
        self.path, self.renamed = path, renamed
        said = ", ".join(f"{k}={v!r}" for k, v in renamed.items())
        super().__init__(
            f"{path}: {said} {'names a column' if len(renamed) == 1 else 'name columns'}, but "
            f"the file is read without a header (header=False, no names=), so its fields are "
            f"{list(DEFAULT_NAMES)}: pass header=True for a file that starts with its column "
            f"names, or names= to name its fields")

    def __reduce__(self):
        return HeaderlessColumnError, (self.path, self.renamed)


def _refuse_renamed(path: str, **columns) -> None:
    """HeaderlessColumnError when a column of ``columns`` (``user="u"``) is not its default
    name (a timestamp may be None): without a header or ``names``, a file's fields are
    :data:`DEFAULT_NAMES`, so another name is a header's column or a mistake, not a name
    given to a field (``user="nosuch"`` once read field 1 as the users)."""
    renamed = {k: v for k, v in columns.items() if v not in (k, None)}
    if renamed:
        raise HeaderlessColumnError(path, renamed)


def _layout(urlpath, user, item, rating, timestamp, sep, header, names, blocksize,
            storage_options, compression) -> tuple:
    """``(fs, paths, sep, blocks, names)`` of ratings files as :func:`read_ratings` reads
    them (``blocks`` None for Parquet), from their headers or first lines only.

    Raises
    ------
    DataError
        The user, item or rating column is not among the columns, or one column is named
        for two of them, naming the first file.
    """
    fs, paths = open_paths(urlpath, storage_options)
    if all(p.endswith((".parquet", ".parq")) for p in paths):
        names, blocks = footer(fs, paths[0])[1].names, None
    else:
        if sep is None:
            sep = "," if all(p.endswith((".csv", ".csv.gz", ".csv.bz2")) for p in paths) \
                else "\t"
        check_sep(sep)
        blocks = plan(fs, paths, blocksize, compression)
        if header:
            names = header_names(fs, paths[0], sep, blocks[0].compression, PARQUET_BY_NAME)
        elif names is None:
            _refuse_renamed(paths[0], user=user, item=item, rating=rating,
                            timestamp=timestamp)
            names = list(DEFAULT_NAMES)
            if _first_fields(fs, paths[0], sep, blocks[0].compression) == 3:
                names = names[:3]  # user, item, rating: no timestamp column
    names = list(names)
    _check_columns(user, item, rating, names, f"{paths[0]}: ")  # named with the file
    return fs, paths, sep, blocks, names


def check_ratings_columns(urlpath, *, user: str = "user", item: str = "item",
                          rating: str = "rating", timestamp: str | None = "timestamp",
                          sep: str | None = None, header: bool = False,
                          names: list[str] | None = None, storage_options: dict | None = None,
                          compression: str | None = "infer") -> list[str]:
    """The columns :func:`read_ratings` would find in ``urlpath`` (same parameters), read
    from the first file's header or first line only: a check to run before a cluster starts.

    Raises
    ------
    ValueError
        The user, item or rating column is not among them (naming the file and the
        columns), one column named for two of them, a column named otherwise than its
        default in a file read without a header or ``names``, a ``sep`` that is not one
        character.
    FileNotFoundError
        No file matches ``urlpath``.
    """
    return _layout(urlpath, user, item, rating, timestamp, sep, header, names, None,
                   storage_options, compression)[4]


def header_hint(err: LineError, fs, sep: str, flag: str) -> LineError:
    """``err``, of the first line of a ratings file, with its likely cause: a LIBSVM line
    (label, ``index:value`` pairs); one field holding another of
    :data:`~._csv.OTHER_DELIMITERS` (a comma-separated file read with the default tab: is
    that the delimiter?); or no field a number (a header? ``flag`` says how to read one)."""
    if err.line != 1:
        return err
    fields = header_names(fs, err.path, sep, "infer", PARQUET_BY_NAME)
    if libsvm_line(" ".join(fields).encode()):
        return LineError(err.path, 1, f"{err.reason}: a LIBSVM line (a label, then "
                                      f"index:value pairs), where ratings are lines of user, "
                                      f"item, rating and maybe a timestamp")
    other = next((d for d in OTHER_DELIMITERS if len(fields) == 1 and d != sep
                  and d in fields[0]), None)
    if other is not None:
        return LineError(err.path, 1, f"{err.reason}, read with the delimiter {sep!r}; the "
                                      f"line holds {other!r}: is that the delimiter? "
                                      f"(use sep={other!r})")
    for field in fields:
        try:
            float(field)
            return err
        except ValueError:
            pass
    return LineError(err.path, 1, f"{err.reason} (is line 1 a header? pass {flag})")


def read_ratings(urlpath, *, user: str = "user", item: str = "item", rating: str = "rating",
                 timestamp: str | None = "timestamp", sep: str | None = None,
                 header: bool = False, names: list[str] | None = None,
                 blocksize: int | str | None = "32MiB", storage_options: dict | None = None,
                 compression: str | None = "infer"):
    """Read ratings into a dask dataframe of dense user and item codes.

    Text files (TSV, CSV; MovieLens ``u.data`` is ``user<TAB>item<TAB>rating<TAB>timestamp``
    without a header) are split into blocks of lines; Parquet files (``.parquet``/``.parq``)
    are read with :func:`dask.dataframe.read_parquet`. A first pass (computed now) validates
    every line and collects the distinct ids, so the id mappings are global (the same code for
    an id in every partition); the returned dataframe reads the input again when computed.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (globs expanded, in sorted order;
        a folder stands for the files under it but those named ``.*`` or ``_*``).
    user, item, rating : str, default "user", "item", "rating"
        The columns holding them (names from the header, ``names`` or Parquet).
    timestamp : str or None, default "timestamp"
        Its column, if present (ignored when the input has no such column); when present,
        every line must have one.
    sep : str, optional
        Field delimiter of text files; default tab, or "," for ``.csv`` files.
    header : bool, default False
        Whether text files start with a line of column names.
    names : list of str, optional
        Columns of headerless text (``user``, ``item``, ``rating``, ``timestamp`` pick
        among them); default ``["user", "item", "rating", "timestamp"]``, or its first
        three when the first non-empty line of the first file has 3 fields (every line must
        then have as many as that one). Without a header or ``names``, other ``user``,
        ``item``, ``rating`` or ``timestamp`` names (a header's columns) are refused.
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.

    Returns
    -------
    ratings : dask.dataframe.DataFrame
        Columns ``user``, ``item`` (int64 codes), ``rating`` (float64) and, if present,
        ``timestamp`` (int64), in file order.
    users, items : IdMapping
        Code ``k`` is ``users.ids[k]``; ids are int64 when every id of the column is a
        decimal integer within int64 (``7``, ``-7``, ``007``), strings (as written, sorted)
        when some id is not a number (``u7``); a column of numbers that are not all such
        integers is refused (see Raises).

    Raises
    ------
    ValueError
        Naming the file and line: a wrong number of fields, an empty id, rating or
        timestamp (the ``timestamp`` column may be absent, not empty on a line), a rating
        that is not a number, a timestamp that is not an integer (Parquet: naming the
        column and the row, as :func:`encode_ratings` does); in a column of ids that are
        all numbers, one that is not an integer within int64 (``12.5``, ``1e3``,
        ``99999999999999999999999``: a typo, not a reason to read every id as a string).
        Also a column not found or named for two of user, item and rating (or, without a
        header or ``names``, named otherwise than its default), a ``sep`` that is not one
        character.
    FileNotFoundError
        No file matches ``urlpath``.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://read_ratings_demo.tsv", "wb") as f:
    ...     _ = f.write(b"u7\\tm1\\t4\\t100\\nu3\\tm1\\t5\\t101\\nu7\\tm2\\t1\\t102\\n")
    >>> df, users, items = read_ratings("memory://read_ratings_demo.tsv")
    >>> pdf = df.compute()
    >>> pdf["user"].tolist(), pdf["item"].tolist(), pdf["rating"].tolist()
    ([1, 0, 1], [0, 0, 1], [4.0, 5.0, 1.0])
    >>> users.ids.tolist(), len(items)
    (['u3', 'u7'], 2)
    """
    import dask.dataframe as dd

    fs, paths, sep, blocks, names = _layout(urlpath, user, item, rating, timestamp, sep,
                                            header, names, blocksize, storage_options,
                                            compression)
    if blocks is None:
        df = dd.read_parquet([fs.unstrip_protocol(p) for p in paths],
                             storage_options=storage_options)
        return encode_ratings(df, user=user, item=item, rating=rating, timestamp=timestamp)
    cols = {"user": user, "item": item, "rating": rating,
            "timestamp": timestamp if timestamp in names else None}
    types = {user: pa.string(), item: pa.string(), rating: pa.float64()}
    if cols["timestamp"]:
        types[timestamp] = pa.float64()
    reader = _CSV(fs, names, types, cols, sep, header)
    stats = compute(each(blocks).map_blocks(reader.scan, dtype=object, meta=OBJECTS),
                    what="the first pass over the ratings files")[0]
    line0 = start_lines(blocks, [s[0] for s in stats])
    for l0, s in zip(line0, stats):
        if s[3] is not None:
            raise s[3].shifted(l0) if header else header_hint(
                s[3].shifted(l0), fs, sep, "header=True")
    users = _merge_ids(_as_written(reader, blocks, _refuse_numbers([s[1] for s in stats],
                                                                    line0), "user"))
    items = _merge_ids(_as_written(reader, blocks, _refuse_numbers([s[2] for s in stats],
                                                                    line0), "item"))
    df = dd.from_map(reader.load, list(zip(blocks, line0)), users=users, items=items,
                     meta=_meta(cols["timestamp"] is not None), enforce_metadata=False)
    return df, users, items


def _as_written(reader: _CSV, blocks: list, parts: list, key: str) -> list:
    """A column's distinct ids per block; when some blocks' are integers and others'
    strings, the integer blocks' read again as written ("007", which the load looks up in a
    mapping of strings; 7, str(7), would be another id)."""
    redo = [j for j, p in enumerate(parts) if p.dtype.kind == "i"]
    if not redo or len(redo) == len(parts):
        return parts
    texts = compute(each([blocks[j] for j in redo]).map_blocks(
        reader.written_ids, key, dtype=object, meta=OBJECTS),
        what=f"reading the {key} ids of the ratings files as written")[0]
    parts = list(parts)
    for j, text in zip(redo, texts):
        parts[j] = text
    return parts


def _first_fields(fs, path: str, sep: str, compression: str | None,
                  max_lines: int = 1000) -> int | None:
    """Fields of the first non-empty line of ``path`` (within ``max_lines``), or None."""
    with named_errors(url_of(fs, path)), decompress_errors(path, compression), \
            fs.open(path, "rb", compression=compression) as f:
        for _ in range(max_lines):
            line = f.readline()
            if not line:
                return None
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text:
                return len(next(csv.reader([text], delimiter=sep)))
    return None


def _partition_ids(df: pd.DataFrame, column: str) -> pd.Series:
    """``(rows, distinct ids or None, (row, why) of the first bad id or None, first id)``."""
    ids, bad = id_values(df[column])
    first = ids[0].item() if ids is not None and ids.shape[0] else None
    return pd.Series([(df.shape[0], None if ids is None else np.unique(ids), bad, first)])


def _global_ids(parts: list, column: str) -> IdMapping:
    """The mapping of a dataframe column from its partitions' :func:`_partition_ids`;
    DataError naming the column and the row in the whole dataframe (counted from 0) of the
    first bad id, or of the first id of another kind (numbers and strings) than the first."""
    row0, first, kinds = 0, None, []
    for n, ids, bad, head in parts:
        if bad is not None:
            raise DataError(f"column {column!r}: " + bad[1].format(row=row0 + bad[0]))
        if head is not None:
            if first is None:
                first = (head, row0)
            elif isinstance(head, str) != isinstance(first[0], str):
                raise DataError(
                    f"column {column!r}: ids mix numbers and strings: {first[0]!r} at row "
                    f"{first[1]} and {head!r} at row {row0} (convert the column to one kind, "
                    f"e.g. .astype(str))")
            kinds.append(ids)
        row0 += n
    return _merge_ids(kinds)


def _partition_times(df: pd.DataFrame, column: str) -> pd.Series:
    """``(rows, (row, why) of the first timestamp that is missing or not an int64, or
    None)`` of a partition (numbers; other types, dates, are left to the cast)."""
    s = df[column]
    missing = np.asarray(s.isna(), bool)
    bad = None
    if missing.any():
        bad = (int(np.argmax(missing)), "missing timestamp at row {row}")
    elif pd.api.types.is_float_dtype(s.dtype):
        t = s.to_numpy(np.float64)
        wrong = (t != np.floor(t)) | (np.abs(t) >= 2.0**63)  # the cast would fail or wrap
        if wrong.any():
            i = int(np.argmax(wrong))
            bad = (i, f"timestamp {t[i].item()!r} at row {{row}} is not an integer (int64)")
    return pd.Series([(df.shape[0], bad)])


def _check_times(parts: list, column: str) -> None:
    """DataError naming the column and the row in the whole dataframe (from 0) of the first
    bad timestamp of the partitions' :func:`_partition_times`."""
    row0 = 0
    for n, bad in parts:
        if bad is not None:
            raise DataError(f"column {column!r}: " + bad[1].format(row=row0 + bad[0]))
        row0 += n


def encode_ratings(df, *, user: str = "user", item: str = "item", rating: str = "rating",
                   timestamp: str | None = "timestamp"):
    """Dense codes for the ids of a (dask) dataframe of ratings; see :func:`read_ratings`.

    Parameters
    ----------
    df : dask.dataframe.DataFrame or pandas.DataFrame
    user, item, rating, timestamp : str
        Column names (``timestamp`` is optional: ignored when absent).

    Returns
    -------
    ratings : dask.dataframe.DataFrame
        ``user``, ``item`` (int64 codes), ``rating`` (float64)[, ``timestamp`` (int64)].
    users, items : IdMapping

    Raises
    ------
    ValueError
        A column not found or named for two roles; a missing id, a non-integral or
        non-finite float id (1.2), or numbers and strings mixed in one column (ids 1 and
        "1"), a missing timestamp or a number that is not an int64 (7.25), naming the
        column and the row (counted from 0 in the whole dataframe). Ids are int64 for
        integers and integral floats, else strings: the rule of
        :class:`~dask_ps.MatrixFactorization` for in-memory frames (:func:`id_values`).
    TypeError
        Ids that are neither numbers nor strings.
    """
    import dask
    import dask.dataframe as dd

    if not isinstance(df, dd.DataFrame):
        df = dd.from_pandas(df, npartitions=1)
    _check_columns(user, item, rating, list(df.columns))
    cols = {"user": user, "item": item, "rating": rating,
            "timestamp": timestamp if timestamp in df.columns else None}
    found = [df[[c]].map_partitions(_partition_ids, c, meta=(None, object))
             for c in (user, item)]
    if cols["timestamp"] is not None:
        found.append(df[[timestamp]].map_partitions(_partition_times, timestamp,
                                                    meta=(None, object)))
    u, i, *t = dask.compute(*found)
    users, items = _global_ids(list(u), user), _global_ids(list(i), item)
    if t:
        _check_times(list(t[0]), timestamp)
    meta = _meta(cols["timestamp"] is not None)
    return df.map_partitions(_encode_partition, cols, users, items, meta=meta), users, items


def _encode_partition(df: pd.DataFrame, cols: dict, users: IdMapping,
                      items: IdMapping) -> pd.DataFrame:
    table = pa.Table.from_pandas(df, preserve_index=False)
    for c in (cols["user"], cols["item"]):
        if table.column(c).null_count:
            raise DataError(f"column {c!r} has an empty id")
    return _coded(table, cols, users, items)
