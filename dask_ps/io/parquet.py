"""Parquet: sparse rows (a label column and list columns of feature indices and values), and
tables of a label and feature columns read as a dask DataFrame; the checks of a table's
values, whose errors name the file, the row group and the row."""

from __future__ import annotations

import re
import warnings

import dask
import dask.array as da
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp
from dask.utils import parse_bytes

from ..exceptions import NOT_A_CLASS, NOT_A_NUMBER, DataError
from ..state._malloc import release_memory
from ._blocks import RowGroup, count_read, open_paths
from ._storage import named_errors, url_of
from ._weight_column import WEIGHTS_ARE, check_weight_column, table_weights

__all__ = ["check_feature_types", "check_finite", "check_table_schema", "footer", "label_column",
           "object_schema", "read_sparse_parquet", "read_table_parquet", "sparse_to_table",
           "table_labels", "table_schema", "unique_columns", "unnamed_columns"]

N_FEATURES_KEY = b"dask_ps.n_features"


def sparse_to_table(X: sp.csr_matrix, y: np.ndarray) -> pa.Table:
    """A CSR block and its labels as a table ``label, indices (list<int64>), values
    (list<float32>)``, with ``n_features`` in the schema metadata."""
    offsets = pa.array(X.indptr.astype(np.int32 if X.nnz < 2**31 else np.int64))
    lists = pa.LargeListArray if offsets.type == pa.int64() else pa.ListArray
    indices = lists.from_arrays(offsets, pa.array(X.indices.astype(np.int64)))
    values = lists.from_arrays(offsets, pa.array(X.data.astype(np.float32)))
    table = pa.table({"label": np.asarray(y), "indices": indices, "values": values})
    return table.replace_schema_metadata({N_FEATURES_KEY: str(X.shape[1]).encode()})


def footer(fs, path: str) -> tuple:
    """``(metadata, arrow schema)`` of a Parquet file.

    Raises
    ------
    DataError
        The file is not Parquet (e.g. text given to ``--format parquet``), naming it.
    OSError
        A missing file or bucket, refused access: one line naming its URL
        (:func:`~._storage.named_errors`).
    """
    try:  # s3fs's errors name the key without s3://: named_errors names the URL
        with named_errors(url_of(fs, path)), fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            return pf.metadata, pf.schema_arrow
    except pa.ArrowInvalid as exc:
        raise DataError(f"{path}: not a Parquet file ({exc})") from None


def row_groups(fs, paths: list[str], check=None) -> list[tuple[RowGroup, int, int]]:
    """``(RowGroup, rows, bytes)`` of each row group with rows of Parquet files, in file
    order, each file's footer checked first by ``check(path, metadata, schema)``. Files
    without any row have one group of 0 rows, ``RowGroup(paths[0], None)``, read as an
    empty table by :func:`read_group`: the one empty chunk of every reader, as a CSV file
    of a header alone is read."""
    found = []
    for path in paths:
        meta, schema = footer(fs, path)
        if check is not None:
            check(path, meta, schema)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows:
                found.append((RowGroup(path, g), group.num_rows, group.total_byte_size))
    return found or [(RowGroup(paths[0], None), 0, 0)]


def read_group(fs, source: RowGroup, columns: list) -> pa.Table:
    """The ``columns`` of a row group (of :func:`row_groups`; none: 0 rows), counted read."""
    with named_errors(url_of(fs, source.path)), fs.open(source.path, "rb") as f:
        pf = pq.ParquetFile(f)  # (a file gone, refused or unreachable since planned: named)
        table = pf.schema_arrow.empty_table().select(columns) if source.group is None \
            else pf.read_row_group(source.group, columns=columns)
    count_read(source.path, f"row group {source.group}", table.nbytes)
    return table


def _row_group(fs, path: str, group: int | None, n_features: int, dtype) -> tuple:
    table = read_group(fs, RowGroup(path, group), ["label", "indices", "values"])
    ind, val = table.column("indices").combine_chunks(), table.column("values").combine_chunks()
    offsets = ind.offsets.to_numpy()
    keys = ind.values.to_numpy()
    if keys.shape[0] and (keys.min() < 0 or keys.max() >= n_features):
        at = int(np.flatnonzero((keys < 0) | (keys >= n_features))[0])
        row = int(np.searchsorted(offsets - offsets[0], at, side="right")) - 1
        raise DataError(f"{RowGroup(path, group).where}, row {row + 1}: feature index "
                        f"{keys[at]} is outside [0, n_features={n_features})")
    # the index dtype scipy would choose, cast to once (not int64 first, then int32)
    index = np.int32 if max(n_features, keys.shape[0]) <= np.iinfo(np.int32).max else np.int64
    raw = val.values.to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):  # a value beyond dtype's range: refused below
        data = raw.astype(dtype)
    if data.dtype.kind in "fc" and np.isinf(data).any():  # one pass, on the cast values
        at = int(np.flatnonzero(np.isinf(data))[0])
        row = int(np.searchsorted(offsets - offsets[0], at, side="right")) - 1
        what = ("is not finite" if not np.isfinite(raw[at]) else
                f"is too large for {dtype} (X's dtype: at most {np.finfo(dtype).max:.8g} in "
                f"magnitude); scale the feature, or read with dtype=numpy.float64")
        raise DataError(f"{RowGroup(path, group).where}, row {row + 1}: value "
                        f"{raw[at].item()!r} of feature index {keys[at]} {what}")
    X = sp.csr_matrix((data, keys.astype(index), (offsets - offsets[0]).astype(index)),
                      shape=(table.num_rows, n_features))
    y = table.column("label").to_numpy().astype(np.float64)
    del table, ind, val, offsets, keys
    release_memory()  # pyarrow's pool keeps what the row group took (~140 MB per 250k rows)
    X.sum_duplicates()
    return X, y


def read_sparse_parquet(urlpath, n_features: int | None = None, *, dtype=np.float32,
                        storage_options: dict | None = None) -> tuple[da.Array, da.Array]:
    """Read Parquet files of sparse rows (as :func:`dask_ps.io.write_ctr` writes them) into a
    dask array of CSR chunks, one chunk per row group.

    Only the files' footers are read now (row counts, ``n_features``); the row groups are read
    when the arrays are computed.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (globs expanded, in sorted order;
        a folder stands for the files under it but those named ``.*`` or ``_*``).
    n_features : int, optional
        Default: the ``dask_ps.n_features`` the writer stored in the schema metadata.
    dtype : numpy dtype, default numpy.float32
    storage_options : dict, optional

    Returns
    -------
    X : dask.array.Array (n_samples, n_features) of CSR chunks
        0 rows (one chunk) for files without any, as in :func:`~dask_ps.io.read_ctr`.
    y : dask.array.Array (n_samples,), float64

    Raises
    ------
    ValueError
        A file without the columns ``label``, ``indices``, ``values``, or no ``n_features``;
        when computed, a feature index outside ``[0, n_features)`` or an infinite value,
        or one beyond ``dtype``'s range (``1e39`` in float32), naming the row group and row.
    """
    fs, paths = open_paths(urlpath, storage_options)

    def check(path, meta, schema):
        nonlocal n_features
        names = set(schema.names)
        if not {"label", "indices", "values"} <= names:
            raise DataError(f"{path}: needs the columns label, indices and values, has "
                            f"{sorted(names)}")
        stored = (meta.metadata or {}).get(N_FEATURES_KEY)
        if n_features is None and stored is None:
            raise DataError(f"{path}: n_features is not stored in the file; pass it")
        n_features = int(stored) if n_features is None else n_features

    groups = row_groups(fs, paths, check)
    dtype = np.dtype(dtype)
    load = dask.delayed(_row_group, pure=True, nout=2)
    Xs, ys = [], []
    for (path, g), rows, _ in groups:
        X, y = load(fs, path, g, n_features, dtype)
        Xs.append(da.from_delayed(X, (rows, n_features), dtype=dtype,
                                  meta=sp.csr_matrix((0, n_features), dtype=dtype)))
        ys.append(da.from_delayed(y, (rows,), dtype=np.float64))
    return da.concatenate(Xs), da.concatenate(ys)


def _is_number(typ) -> bool:
    return (pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ)
            or pa.types.is_decimal(typ))


def is_nested(typ) -> bool:
    """Whether an Arrow type holds several values per row (list, struct, map, union, or a
    dictionary of those): no column of such a type is a feature."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return pa.types.is_nested(typ) or pa.types.is_union(typ)


def check_feature_types(path: str, schema: pa.Schema, columns, label: str | None = None
                        ) -> None:
    """Refuse, from a Parquet file's schema (before any row is read), a feature column of a
    nested type and a label that is not a number or text.

    Parameters
    ----------
    path : str
        The file, named in the error.
    schema : pyarrow.Schema
    columns : iterable of str
        The feature columns (those absent from ``schema`` are left to the caller's check).
    label : str, optional

    Raises
    ------
    DataError
        ``"<path>: column 'tags' is list<element: string>: a list, struct or map column
        cannot be a feature; leave it out (use exclude=['tags'])"`` (the advice of
        :func:`~dask_ps.io.read_ctr`'s, :func:`~dask_ps.io.encode_ctr`'s and
        :func:`~dask_ps.io.infer_encoder`'s parameter, listing every such column; ``dask-ps``
        says ``--exclude tags``), or a nested label column.
    """
    names = set(schema.names)
    if label is not None and label in names and is_nested(schema.field(label).type):
        raise DataError(f"{path}: label column {label!r} is {schema.field(label).type}, not "
                        f"a number")
    nested = [n for n in columns if n in names and is_nested(schema.field(n).type)]
    if nested:
        more = f" (nor can {nested[1:]})" if len(nested) > 1 else ""
        raise DataError(f"{path}: column {nested[0]!r} is {schema.field(nested[0]).type}: a "
                        f"list, struct or map column cannot be a feature{more}; leave "
                        f"{'them' if more else 'it'} out (use exclude={nested!r})")


def _number_text(value) -> bool:
    """Whether a label value of a column that is not numeric casts to a number (or is null,
    refused as missing further on)."""
    if value is None:
        return True
    try:
        pc.cast(pa.array([value]), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True


def object_schema(df) -> pa.Schema:
    """The Arrow types of a pandas DataFrame's object columns, as pyarrow infers them from
    the values (a list per row: a list type), for :func:`check_feature_types`: taken before
    ``dask.dataframe.from_pandas``, which makes every object column text (``"['a', 'b']"``).
    Columns of mixed values pyarrow cannot type are left out."""
    fields = []
    for name in [n for n, t in df.dtypes.items() if t.kind == "O"]:
        try:
            fields.append((name, pa.infer_type(df[name], from_pandas=True)))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            continue
    return pa.schema(fields)


def _type_name(typ) -> str:
    return "string" if pa.types.is_string(typ) or pa.types.is_large_string(typ) else str(typ)


def check_finite(values: np.ndarray, where: str, name: str) -> None:
    """Raise :class:`~dask_ps.DataError` ``"<where>: column <name>, row <i>: inf is not a
    finite number"`` for the first infinite value of a column (rows 1-based)."""
    infinite = np.isinf(values)
    if infinite.any():
        i = int(np.argmax(infinite))
        raise DataError(f"{where}: column {name!r}, row {i + 1}: {values[i]} is not a finite "
                        f"number")


def unique_columns(path: str, names: list[str]) -> None:
    """Refuse a table whose columns ``names`` (a CSV header, a Parquet schema) hold a name
    twice: which of them a column option or the label means is ambiguous.

    Raises
    ------
    DataError
        ``"<path>: columns named twice: ['click'] (columns: [...])"``.
    """
    seen: set = set()
    twice = [n for n in names if n in seen or seen.add(n)]
    if twice:
        raise DataError(f"{path}: columns named twice: {list(dict.fromkeys(twice))} "
                        f"(columns: {list(names)})")


#: Names of a column without one of its own, which pandas gives its index when it saves a
#: table: ``""`` (the first field of ``DataFrame.to_csv``'s header), ``"Unnamed: 0"``
#: (``read_csv`` of such a file), ``"__index_level_0__"`` (pyarrow's stored index).
UNNAMED = re.compile(r"|Unnamed: \d+(_level_\d+)?|__index_level_\d+__")


def unnamed_columns(where: str, names: list[str], listed, numeric=None, categorical=None
                    ) -> list[str]:
    """The columns of ``names`` without a name of their own (:data:`UNNAMED`: a pandas index
    saved with the data, most often) that ``listed`` does not name: not features unless
    listed, each left out with a ``UserWarning`` naming ``where``, its position (from 1)
    and how to use it: ``"...; to use it, name it in the header, or use numeric=['price',
    ''] or categorical=['']"``, the column added to the ``numeric`` and ``categorical``
    columns given (``dask-ps`` says ``--numeric``, ``--categorical``)."""
    listed = set(listed)
    unnamed = [(i, n) for i, n in enumerate(names)
               if UNNAMED.fullmatch(str(n)) and n not in listed]
    for i, name in unnamed:
        warnings.warn(f"{where}: column {i + 1} ({name!r}) has no name of its own (a pandas "
                      f"index saved with the data?): it is not a feature; to use it, name it "
                      f"in the header, or use numeric={[*(numeric or ()), name]!r} or "
                      f"categorical={[*(categorical or ()), name]!r}", UserWarning,
                      stacklevel=4)
    return [n for _, n in unnamed]


def label_column(path: str, names: list[str], label: str | None, categorical) -> str:
    """The label column of a table of columns ``names`` (default the first), checked with
    the ``categorical`` feature columns: DataError naming ``path`` for one that is not
    there, or a categorical label."""
    label = names[0] if label is None else label
    absent = [c for c in (label, *categorical) if c not in names]
    if absent:
        raise DataError(f"{path}: no column {absent[0]!r} (columns: {names})")
    if label in categorical:
        raise DataError(f"{path}: the label {label!r} cannot be categorical")
    return label


def table_labels(table: pa.Table, label: str, where: str, classes: bool = False
                 ) -> np.ndarray:
    """The label column of a table, checked: float64 numbers that must be finite; with
    ``classes``, a column that is not numeric (text classes) as it is, every row set, and
    numbers that must be whole (classes).

    Raises
    ------
    DataError
        Naming ``where`` and the first row (1-based) whose label is missing or not a finite
        number (text such as ``yes``, without ``classes``: map it to numbers), or
        (``classes``) a number that is not whole (``0.7``: not a class), or a label column
        that is missing.
    """
    if label not in table.column_names:
        raise DataError(f"{where}: label column {label!r} is missing")
    col = table.column(label)
    if classes and not _is_number(col.type):
        if col.null_count:
            i = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False)))
            raise DataError(f"{where}: label column {label!r} is empty in row {i + 1}")
        return col.to_numpy(zero_copy_only=False)
    try:
        y = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        i, value = next(((i, v) for i, v in enumerate(col.to_pylist()) if not _number_text(v)),
                        (0, col[0].as_py()))
        raise DataError(f"{where}: label column {label!r} holds {value!r} in row {i + 1}, "
                        f"not a number: {NOT_A_NUMBER}") from None
    bad = ~np.isfinite(y)
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(f"{where}: label column {label!r} is empty or not a finite number "
                        f"in row {i + 1} ({y[i]})")
    if classes:
        bad = np.floor(y) != y
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(f"{where}: label column {label!r} holds {y[i].item()!r} in row "
                            f"{i + 1}, not a class: {NOT_A_CLASS}")
    return y


def _table_groups(groups: list, fs, names: list, target: str, numeric: list,
                  label_type, classes: bool, weight: str | None = None):
    """One partition of :func:`read_table_parquet`: row groups ``[RowGroup, ...]`` (of
    :func:`row_groups`) read, checked and joined as a pandas DataFrame (numeric features
    and ``weight``, float64)."""
    tables = []
    for source in groups:
        table = read_group(fs, source, names).select(names)
        where = source.where
        for name in numeric:
            i = table.column_names.index(name)
            col = pc.cast(table.column(name), pa.float64())
            check_finite(col.to_numpy(zero_copy_only=False), where, name)
            table = table.set_column(i, name, col)
        if weight is not None:
            table = table.set_column(names.index(weight), weight,
                                     pa.array(table_weights(table, weight, where)))
        table_labels(table, target, where, classes)
        i = table.column_names.index(target)
        try:
            table = table.set_column(i, target, pc.cast(table.column(target), label_type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise DataError(f"{where}: label column {target!r} is "
                            f"{_type_name(table.column(target).type)}, the first file's is "
                            f"{_type_name(label_type)}") from None
        tables.append(table)
    return pa.concat_tables(tables).to_pandas(ignore_metadata=True)


def table_schema(found: pa.Schema) -> pa.Schema:
    """A Parquet file's arrow schema without the pandas index it stores (no column)."""
    index = [c for c in (found.pandas_metadata or {}).get("index_columns", [])
             if isinstance(c, str)]
    return pa.schema([fd for fd in found if fd.name not in index])


def check_table_schema(path: str, schema: pa.Schema, label: str | None, categorical=(),
                       classes: bool = False, weight: str | None = None) -> str:
    """The label column of a table of columns ``schema`` (:func:`table_schema` of file
    ``path``), checked as :func:`read_table_parquet` reads it: from a footer alone, so
    that a command line checks it before starting a cluster.

    Raises
    ------
    DataError
        Naming ``path``: a ``label`` or ``weight`` column it lacks, a weight column that is
        the label, categorical or not numeric, a feature column that is neither numeric nor
        ``categorical`` (``"column 'shop' is not numeric (string); use
        categorical=['shop']"``: every such column added to ``categorical``; ``dask-ps``
        says ``--categorical shop``), or (without ``classes``) a label column that is not
        numeric.
    """
    names = schema.names
    label = label_column(path, names, label, categorical)
    check_weight_column(weight, label, names, path)
    if weight is not None and (weight in categorical
                               or not _is_number(schema.field(weight).type)):
        raise DataError(f"{path}: weight column {weight!r} is "
                        f"{_type_name(schema.field(weight).type)}"
                        f"{', categorical' if weight in categorical else ''}: {WEIGHTS_ARE}")
    text = [n for n in names if n != label and n not in categorical
            and not _is_number(schema.field(n).type)]
    if text:
        more = f", nor are {text[1:]}" if len(text) > 1 else ""
        raise DataError(f"{path}: column {text[0]!r} is not numeric "
                        f"({_type_name(schema.field(text[0]).type)}){more}; use "
                        f"categorical={[*categorical, *text]!r}")
    label_type = schema.field(label).type
    if not _is_number(label_type) and not classes:
        raise DataError(f"{path}: label column {label!r} is not numeric "
                        f"({_type_name(label_type)})")
    return label


def read_table_parquet(urlpath, label: str | None = None, *, categorical=(),
                       classes: bool = False, blocksize: int | str | None = "64MiB",
                       storage_options: dict | None = None, weight: str | None = None):
    """Parquet tables as a dask DataFrame whose every row group is checked as it is read
    (when the frame is computed): :func:`dask_ps.io._frame.read_frame` for Parquet.

    Feature columns are numeric (float64; null or NaN is NaN, infinity an error) or named
    in ``categorical`` (as stored). The label is required on every row: a finite number,
    float64; or, with ``classes``, the first file's type (classes), text or numbers.
    A pandas index stored in the files is no column.

    Parameters
    ----------
    urlpath, label, categorical, classes, weight
        As :func:`~dask_ps.io._frame.read_frame` takes them (``weight``: a numeric column of
        sample weights, float64, every row a finite, non-negative number).
    blocksize : int or str, optional
        Uncompressed bytes of the consecutive row groups of a file joined in one partition
        (None: one row group per partition).
    storage_options : dict, optional

    Returns
    -------
    frame : dask.dataframe.DataFrame
        One partition of 0 rows for files without any, as a CSV file of a header alone.
    label : str
    w : dask.dataframe.Series of float64
        Only with ``weight``: the frame's weight column.

    Raises
    ------
    DataError
        Files with other columns than the first's, a ``label`` or ``categorical`` column
        the files lack, a feature column that is neither numeric nor ``categorical``, or
        (without ``classes``) a label column that is not numeric; when
        computed, ``"<file>, row group <g>: ..."`` naming the column and the first row
        (both 1-based, the row in the row group) holding an infinite feature, a label that
        is empty or not a finite number, or a weight that is empty, NaN, infinite or
        negative; a ``weight`` column that is the label, categorical, absent or not
        numeric (from this call).
    FileNotFoundError
        No file matches ``urlpath``.
    """
    import dask.dataframe as dd

    fs, paths = open_paths(urlpath, storage_options)
    limit = parse_bytes(blocksize) if blocksize is not None else 0
    schema = None

    def check(path, meta, found):
        nonlocal schema
        found = table_schema(found)
        unique_columns(path, found.names)
        if schema is None:
            schema = found
        elif sorted(found.names) != sorted(schema.names):
            raise DataError(f"{path}: columns {found.names} differ from {paths[0]}'s "
                            f"{schema.names}")

    parts, size = [], 0
    for source, _, nbytes in row_groups(fs, paths, check):
        if parts and parts[-1][0].path == source.path and size + nbytes <= limit:
            parts[-1].append(source)
            size += nbytes
        else:
            parts.append([source])
            size = nbytes
    names = schema.names
    label = check_table_schema(paths[0], schema, label, categorical, classes, weight)
    label_type = schema.field(label).type
    if not classes or pa.types.is_decimal(label_type):
        label_type = pa.float64()
    numeric = [n for n in names if n not in (label, weight) and n not in categorical]
    types = pa.schema([(n, pa.float64() if n in numeric or n == weight else
                        label_type if n == label else schema.field(n).type) for n in names])
    # (not ``columns=``: dask would pass the columns a computation projects to instead)
    frame = dd.from_map(_table_groups, parts, fs=fs, names=names, target=label,
                        numeric=numeric, label_type=label_type, classes=classes, weight=weight,
                        meta=types.empty_table().to_pandas(ignore_metadata=True),
                        label="read-table-parquet", enforce_metadata=False)
    return (frame, label) if weight is None else (frame, label, frame[weight])
