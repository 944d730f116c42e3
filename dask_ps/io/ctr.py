"""Click-through-rate tables (CSV, Parquet, dask dataframes) into hashed sparse features."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from .._cluster_workers import compute
from ..exceptions import DataError
from ._blocks import (
    OBJECTS,
    box,
    each,
    open_paths,
    plan,
    select,
    skip_empty_files,
    start_lines,
)
from ._csv import (
    check_columns,
    check_sep,
    common_header,
    csv_kinds,
    header_names,
    numbered_names,
)
from ._ctr_blocks import count_chunk, layout_of, load_chunk
from ._weight_column import check_not_a_feature, check_weight_column, table_weights
from .hashing import HashingEncoder, column_names, cross_pairs
from .parquet import (
    check_feature_types,
    footer,
    object_schema,
    read_group,
    row_groups,
    table_labels,
    unique_columns,
    unnamed_columns,
)

__all__ = ["encode_ctr", "infer_encoder", "read_ctr"]

CRITEO_COLUMNS = HashingEncoder.criteo().columns
#: What to do with a CSV file of 0 bytes (:func:`~._blocks.skip_empty_files`).
_EMPTY_HINT = ("; read it as no rows (a batch of a stream of files, as a file of a header "
               "alone is) by giving the columns: encoder= (the stream's, e.g. infer_encoder "
               "of a file with rows)")
_PARQUET = (".parquet", ".pq", ".parq")


# -- which columns are what --------------------------------------------------------------------
def _is_parquet(paths: list[str], format: str | None) -> bool:
    if format is not None:
        if format not in ("csv", "parquet"):
            raise ValueError(f"format must be 'csv' or 'parquet', got {format!r}")
        return format == "parquet"
    return paths[0].lower().endswith(_PARQUET)


def _arrow_kinds(schema: pa.Schema) -> dict:
    """``{column: kind}`` from Arrow types: integers, floats and decimals are numeric."""
    def numeric(t):
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)

    return {f.name: "numeric" if numeric(f.type) else "categorical" for f in schema}


def _build_encoder(kinds: dict, label: str, numeric, categorical, crosses, exclude,
                   n_features: int, where: str, **options) -> HashingEncoder:
    """The encoder of a table whose columns are ``kinds`` (in order, label included)."""
    names = list(kinds)
    if label not in names:
        raise DataError(f"{where}: label column {label!r} is not among {names}")
    numeric = None if numeric is None else column_names(numeric, "numeric")
    categorical = None if categorical is None else column_names(categorical, "categorical")
    exclude = column_names(exclude, "exclude")
    crosses = cross_pairs(crosses)
    given = [*(numeric or ()), *(categorical or ()), *exclude]
    absent = [c for c in given if c not in names]
    if absent:
        raise DataError(f"{where}: columns {absent} are not among {names}")
    for pair in crosses:
        absent = [c for c in pair if c not in names]
        if absent:
            raise DataError(f"{where}: cross {pair}: column {absent[0]!r} is not among "
                            f"{names}")
    if label in given:
        raise DataError(f"{where}: the label {label!r} cannot be a feature or excluded")
    if numeric is None and categorical is None and not exclude and \
            set(CRITEO_COLUMNS) <= set(names):
        return HashingEncoder.criteo(n_features, crosses=tuple(crosses), **options)
    forced = {**{c: "numeric" for c in numeric or ()},
              **{c: "categorical" for c in categorical or ()}}
    both = set(numeric or ()) & set(categorical or ())
    if both:
        raise DataError(f"{where}: columns {sorted(both)} are both numeric and categorical")
    skip = {label, *(exclude or ()),
            *unnamed_columns(where, names, [*given, *(c for pair in crosses for c in pair)],
                             numeric, categorical)}
    kind = {c: forced.get(c, k) for c, k in kinds.items() if c not in skip}
    if not kind:
        raise DataError(f"{where}: no feature column: the columns {names} are the label "
                        f"{label!r} and excluded")
    return HashingEncoder(numeric=tuple(c for c in names if kind.get(c) == "numeric"),
                          categorical=tuple(c for c in names if kind.get(c) == "categorical"),
                          crosses=tuple(crosses), n_features=n_features, **options)


def infer_encoder(urlpath, label: str = "Label", *, numeric=None, categorical=None,
                  crosses=(), exclude=(), n_features: int = 2**20, format: str | None = None,
                  sep: str = ",", header: bool = True, names: list[str] | None = None,
                  storage_options: dict | None = None, compression: str | None = "infer",
                  **options) -> HashingEncoder:
    """The :class:`HashingEncoder` that :func:`read_ctr` uses for files it is given no encoder
    for: every column but the label and ``exclude`` is a feature.

    * A header holding the Criteo columns (``I1..I13``, ``C1..C26``) and neither ``numeric``
      nor ``categorical`` gives :meth:`HashingEncoder.criteo` (other columns, such as an
      ``Id``, are left out).
    * Otherwise, a Parquet column is numeric when its type is (integers, floats, decimals),
      categorical else (strings, binary, booleans, dictionaries; a list, struct or map
      column is refused: ``exclude`` it); a CSV column is numeric when every
      non-empty value in the first MiB (:data:`~dask_ps.io._csv.SAMPLE_BYTES`) of the first
      file that has rows (of the first :data:`~dask_ps.io._csv.SAMPLE_FILES`) is a number
      (spaces around it allowed), each column on its own (bytes that are not UTF-8 make
      their column categorical, no other). A column without a name (``""``, ``Unnamed: 0``:
      a pandas index) is left out, with a warning, unless an option names it.
      ``numeric`` and ``categorical`` override the guess for the columns they name (e.g. an
      integer id that is a category).

    Store the result with the model (``to_json``) and read test data with the same encoder.

    Parameters
    ----------
    urlpath, label, sep, header, names, storage_options, compression
        As in :func:`read_ctr`.
    numeric, categorical : str or list of str, optional
        Columns forced to be numeric or categorical (a single string is one column).
    crosses : list of (str, str), default ()
        Pairs of columns whose combinations are features (:class:`HashingEncoder`); one
        pair alone is taken too.
    exclude : str or list of str, default ()
        Columns that are not features.
    n_features : int, default 2**20
    format : {"csv", "parquet"}, optional
        Default: Parquet for names ending in ``.parquet``, ``.pq`` or ``.parq``, else CSV.
    **options
        Other :class:`HashingEncoder` arguments (``numeric_mode``, ``seed``).

    Returns
    -------
    HashingEncoder

    Raises
    ------
    ValueError
        A label or a named column (or a cross's) that the files do not have, naming it and
        the files' columns, a column both numeric and
        categorical, columns named twice
        (naming the file and them), a ``sep`` that is not one character, a Parquet feature
        column of a list, struct or map type (naming the file, the column and its type).
    FileNotFoundError
        No file matches ``urlpath``.
    DataError
        Every CSV file is of 0 bytes (no header, no rows), naming the first; a file of 0
        bytes among others is left out with a ``UserWarning`` naming it.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://infer_demo.csv", "wb") as f:
    ...     _ = f.write(b"click,price,shop,zip\\n1,3.5,a,0421\\n0,,b,1200\\n")
    >>> enc = infer_encoder("memory://infer_demo.csv", label="click")
    >>> enc.numeric, enc.categorical
    (('price', 'zip'), ('shop',))
    >>> infer_encoder("memory://infer_demo.csv", label="click", categorical=["zip"],
    ...               crosses=[("shop", "zip")]).categorical
    ('shop', 'zip')
    """
    check_sep(sep)
    fs, paths = open_paths(urlpath, storage_options)
    if not _is_parquet(paths, format) and (header or names is None):
        paths = skip_empty_files(fs, paths, hint=_EMPTY_HINT)[0]
    return _infer_encoder(fs, paths, label, numeric, categorical, crosses, exclude,
                          n_features, format, sep, header, names, compression, **options)


def _infer_encoder(fs, paths: list[str], label, numeric, categorical, crosses, exclude,
                   n_features, format, sep, header, names, compression, **options):
    """:func:`infer_encoder` of the files ``paths`` of ``fs`` (those of 0 bytes left out)."""
    where = paths[0]
    schema = None
    if _is_parquet(paths, format):
        schema = footer(fs, paths[0])[1]
        unique_columns(where, schema.names)
        kinds = _arrow_kinds(schema)
    else:
        comp = plan(fs, paths[:1], None, compression)[0].compression
        if header:
            head = header_names(fs, paths[0], sep, comp)
            names = head if names is None else list(names)
        elif names is None:
            names = numbered_names(fs, paths[0], sep, comp)
        check_columns(paths[0], list(names), sep)
        unique_columns(where, list(names))
        kinds = csv_kinds(fs, paths, list(names), header, sep, compression)
    encoder = _build_encoder(kinds, label, numeric, categorical, crosses, exclude, n_features,
                             where, **options)
    if schema is not None:
        check_feature_types(where, schema, encoder.columns, label)
    return encoder


def check_header(urlpath, encoder: HashingEncoder, label: str = "Label", *,
                 format: str | None = None, sep: str = ",", header: bool = True,
                 names: list[str] | None = None, storage_options: dict | None = None,
                 compression: str | None = "infer", weight: str | None = None) -> None:
    """Check, from the first file's header (CSV) or schema (Parquet) alone, that files
    hold the columns :func:`read_ctr` with ``encoder`` and ``label`` needs: what reading
    them would refuse, found without reading a row (e.g. by a command line before it starts
    a cluster).

    Parameters
    ----------
    urlpath, encoder, label, format, sep, header, names, storage_options, compression, weight
        As in :func:`read_ctr`.

    Raises
    ------
    DataError
        ``"<file>: columns ['clik'] are not among [...]"`` naming the first file, the
        absent columns and those it has; columns named twice; a Parquet feature column of a
        list, struct or map type; CSV files all of 0 bytes (no header: naming the first; one
        among others is left out, with a ``UserWarning`` naming it).
    FileNotFoundError
        No file matches ``urlpath``.
    """
    check_sep(sep)
    fs, paths = open_paths(urlpath, storage_options)
    schema = None
    if not _is_parquet(paths, format) and names is None:  # a file of 0 bytes has no header
        paths = skip_empty_files(fs, paths)[0]
    path = paths[0]
    if _is_parquet(paths, format):
        schema = footer(fs, path)[1]
        have = schema.names
    else:
        comp = plan(fs, paths[:1], None, compression)[0].compression
        have = list(names) if names is not None else \
            (header_names if header else numbered_names)(fs, path, sep, comp)
        check_columns(path, have, sep)
    _has_columns(path, list(have), label, encoder, schema, weight)


def _has_columns(path: str, have: list, label: str, encoder: HashingEncoder,
                 schema: pa.Schema | None = None, weight: str | None = None) -> None:
    """Refuse a header or schema of columns ``have`` that names one twice or lacks ``label``,
    ``weight`` or a column of ``encoder`` (naming ``path``, those absent and ``have``), or
    (Parquet's ``schema``) whose feature column is of a nested type."""
    unique_columns(path, have)
    wanted = (label, *([weight] if weight is not None else []), *encoder.columns)
    absent = [c for c in wanted if c not in have]
    if absent:
        raise DataError(f"{path}: columns {absent} are not among {have}")
    if schema is not None:
        check_feature_types(path, schema, encoder.columns, label)


# -- readers -----------------------------------------------------------------------------------
def read_ctr(urlpath, encoder: HashingEncoder | None = None, label: str = "Label", *,
             numeric=None, categorical=None, crosses=(), exclude=(),
             n_features: int = 2**20, format: str | None = None, sep: str = ",",
             header: bool = True, names: list[str] | None = None,
             blocksize: int | str | None = "32MiB", dtype=np.float32,
             storage_options: dict | None = None,
             compression: str | None = "infer", weight: str | None = None) -> tuple:
    """Read click logs (CSV / TSV with or without a header, or Parquet) into hashed sparse
    features and labels.

    Every row becomes ``encoder.transform`` of its columns (one global rule, so equal rows
    give equal features whatever the blocks). Without an ``encoder``, one is made from the
    files (:func:`infer_encoder`): every column but the label and ``exclude`` is a feature,
    numeric or categorical as the header and the values say, unless ``numeric`` or
    ``categorical`` says otherwise; ``crosses`` adds pairs of columns.

    Missing values and infinities follow the readers' rule (:mod:`dask_ps.io`): an empty
    field, ``nan`` (any case and sign, in a categorical column too) or a null is the column's
    "missing" feature; an infinite number, or a label that is missing or not a finite
    number, is an error naming the file, the line (CSV) or row (Parquet) and the column.

    CSV files are split at line boundaries into blocks of about ``blocksize`` bytes
    (compressed files are one block each); quoted fields must not contain newlines. Their
    bytes are read twice: a first pass (computed now, with the active dask scheduler) counts
    the rows of every block from its newlines (vectorised, near memory speed), so the arrays
    have known chunks; each line is parsed and hashed once, and checked then, when the
    arrays are computed (a fit computes them before it trains, so a bad line stops it before
    the model changes), in a compiled kernel that releases the GIL. Parquet files are read
    by row group (row counts from their footers); their errors too are raised when the
    arrays are computed.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (a glob is expanded, matches in sorted order;
        a folder stands for the files under it but those named ``.*`` or ``_*``).
    encoder : HashingEncoder, optional
        The encoding rule; default :func:`infer_encoder` of the files.
    label : str, default "Label"
        The label column (required in every row, a finite number: text such as ``yes`` is
        refused, map it to numbers).
    numeric, categorical, crosses, exclude, n_features
        How the encoder is made when none is given (see :func:`infer_encoder`); a single
        string is one column, a single pair one cross.
    format : {"csv", "parquet"}, optional
        Default: Parquet for names ending in ``.parquet``, ``.pq`` or ``.parq``, else CSV.
    sep : str, default ","
        Field delimiter (``"\\t"`` for Criteo's raw ``train.txt``).
    header : bool, default True
        Whether every CSV file starts with a line of column names; all must agree.
    names : list of str, optional
        Column names when CSV files have no header (e.g. ``["Label", "I1", ..., "C26"]``
        for Criteo's raw files); default ``"0"``, ``"1"``, ... (as :func:`~._frame.read_frame`).
    dtype : numpy dtype, default numpy.float32
        Dtype of ``X``.
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.
    weight : str, optional
        A column of sample weights: not a feature (an inferred encoder leaves it out; a
        given ``encoder`` must not hash it), required on every row, a finite,
        non-negative number; returned as ``w``. CSV blocks then have that column parsed
        again, by pyarrow.

    Returns
    -------
    X : dask.array.Array (n_samples, encoder.n_features)
        Blocks are ``scipy.sparse.csr_matrix`` with sorted, summed indices; 0 rows for
        files without any (a CSV header alone, a Parquet file of 0 rows; CSV files of 0
        bytes alone, given an ``encoder``: a stream's batch of a quiet hour, which
        :func:`dask_ps.learn_online` skips naming the file).
    y : dask.array.Array (n_samples,), float64
        The labels as written.
    w : dask.array.Array (n_samples,), float64
        Only with ``weight``: the weights, in ``X``'s row chunks (as
        ``fit(X, y, sample_weight=w)`` takes them).

    Raises
    ------
    ValueError
        Naming the file and line: a line with the wrong number of fields, a numeric field
        that is not a number or is infinite (naming the column too), a label that is empty or
        not a finite number, a lone CR (lines end in LF or CRLF) (raised when the arrays are
        computed); with ``weight``, one whose weight is empty, not a number, NaN, infinite
        or negative (naming the column). Also, from this call, a weight column that is the
        label, a feature of ``encoder`` or not in the files, a
        header that lacks a column the encoder or ``label`` needs, headers that differ
        between files, columns named twice in a header or a Parquet schema (naming the file
        and them), a Parquet feature column of a list, struct or map type (naming the
        file, the column and its type; ``exclude`` it), a ``sep`` that is not one character,
        or an ``encoder`` given together
        with ``numeric``, ``categorical``, ``crosses`` or ``exclude``; and, when computed,
        a file that has other rows than when it was opened. A ``DataError`` for CSV files
        all of 0 bytes without an ``encoder`` (no header, no rows: naming the first).
    FileNotFoundError
        No file matches ``urlpath``.

    Warns
    -----
    UserWarning
        Naming each CSV file of 0 bytes: left out among other files, or read as no rows
        when all are (given an ``encoder``).

    See Also
    --------
    HashingEncoder : the encoding rule.
    infer_encoder : the encoder made from the files.
    encode_ctr : the same from a (dask) dataframe.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://read_ctr_demo.csv", "wb") as f:
    ...     _ = f.write(b"click,price,shop\\n1,3.5,a\\n0,,b\\n1,3.5,a\\n")
    >>> X, y = read_ctr("memory://read_ctr_demo.csv", label="click", n_features=64)
    >>> X.shape, y.compute().tolist()
    ((3, 64), [1.0, 0.0, 1.0])
    >>> Xc = X.compute()
    >>> Xc.nnz, (Xc[0] != Xc[2]).nnz
    (6, 0)
    """
    if encoder is not None and (numeric is not None or categorical is not None or crosses
                                or exclude):
        raise ValueError("give either an encoder or numeric/categorical/crosses/exclude "
                         "to make one, not both")
    check_sep(sep)
    check_weight_column(weight, label)
    fs, paths = open_paths(urlpath, storage_options)
    parquet, empty = _is_parquet(paths, format), False
    if not parquet and (header or names is None):  # a file of 0 bytes has no header
        paths, empty = skip_empty_files(fs, paths, encoder is not None, _EMPTY_HINT)
    if encoder is None:
        if weight is not None:
            exclude = [*column_names(exclude, "exclude"), weight]
        encoder = _infer_encoder(fs, paths, label, numeric, categorical, crosses, exclude,
                                 n_features, format, sep, header, names, compression)
    else:
        check_not_a_feature(weight, encoder.columns)
    if parquet:
        return _read_parquet(fs, paths, encoder, label, np.dtype(dtype), weight)
    blocks = plan(fs, paths, blocksize, compression)
    if empty:  # files of 0 bytes alone: no rows, of the encoder's columns
        names = [label, *encoder.columns, *([weight] if weight is not None else [])]
    elif header:
        head = common_header(fs, blocks, sep)
        names = head if names is None else list(names)
    elif names is None:
        names = numbered_names(fs, paths[0], sep, blocks[0].compression)
    names = list(names)
    check_columns(paths[0], names, sep)  # one column: another delimiter? (sep=)
    _has_columns(paths[0], names, label, encoder, weight=weight)
    layout = layout_of(names, label, header, sep, encoder, weight)

    # The first pass counts rows and lines; the one parse of every line, which checks it, is
    # the encoding when the arrays are computed.
    stats = compute(each(blocks).map_blocks(count_chunk, fs, header, dtype=object,
                                            meta=OBJECTS),
                    what="the first pass over the CTR files")[0]
    line0 = start_lines(blocks, [s[1] for s in stats])
    keep = [i for i, s in enumerate(stats) if s[0]] or [0]
    rows = tuple(stats[i][0] for i in keep)
    parts = each([(blocks[i], line0[i], stats[i][0]) for i in keep]).map_blocks(
        load_chunk, fs, layout, encoder, np.dtype(dtype), dtype=object, meta=OBJECTS)
    return _arrays(parts, rows, encoder.n_features, np.dtype(dtype), weight is not None)


def _arrays(parts: da.Array, rows: tuple, n_features: int, dtype, weights: bool = False
            ) -> tuple:
    """X and y (and ``weights``: w) selected from one object chunk ``(csr, labels[,
    weights])`` per block (one parse each)."""
    meta = sp.csr_matrix((0, n_features), dtype=dtype)
    X = parts.map_blocks(select, 0, new_axis=1, chunks=(rows, (n_features,)), dtype=dtype,
                         meta=meta)
    vectors = tuple(parts.map_blocks(select, i, chunks=(rows,), dtype=np.float64,
                                     meta=np.empty(0)) for i in range(1, 3 if weights else 2))
    return (X, *vectors)


def _parquet_group(chunk: np.ndarray, fs, columns: list, encoder: HashingEncoder, label: str,
                   dtype, weight: str | None = None) -> np.ndarray:
    source = chunk[0]
    table = read_group(fs, source, columns)  # files without rows: 0 rows
    where = source.where
    parts = (encoder.transform(table, dtype, where), table_labels(table, label, where))
    return box(parts if weight is None else (*parts, table_weights(table, weight, where)))


def _read_parquet(fs, paths: list[str], encoder: HashingEncoder, label: str,
                  dtype, weight: str | None = None) -> tuple:
    """read_ctr of Parquet files: one chunk per row group (:func:`~.parquet.row_groups`)."""
    found = row_groups(fs, paths, lambda path, meta, schema: _has_columns(
        path, schema.names, label, encoder, schema, weight))
    groups, rows = [g for g, _, _ in found], [n for _, n, _ in found]
    columns = [label, *encoder.columns, *([weight] if weight is not None else [])]
    parts = each(groups).map_blocks(_parquet_group, fs, columns, encoder, label, dtype, weight,
                                    dtype=object, meta=OBJECTS)
    return _arrays(parts, tuple(rows), encoder.n_features, dtype, weight is not None)


def _encode_partition(df, encoder: HashingEncoder, label: str, dtype, i: int,
                      weight: str | None = None):
    where = f"partition {i}"
    table = pa.Table.from_pandas(df, preserve_index=False)
    check_feature_types(where, table.schema, encoder.columns, label)  # lists in objects
    parts = (encoder.transform(table, dtype, where), table_labels(table, label, where))
    return parts if weight is None else (*parts, table_weights(table, weight, where))


def encode_ctr(df, encoder: HashingEncoder | None = None, label: str = "Label",
               dtype=np.float32, weight: str | None = None, **infer) -> tuple:
    """Hashed sparse features and labels of a (dask) dataframe, one chunk per partition.

    Parameters
    ----------
    df : dask.dataframe.DataFrame or pandas.DataFrame
        E.g. ``dask.dataframe.read_parquet(url)``, which splits the files by row groups.
    encoder : HashingEncoder, optional
        Default: made from the columns as :func:`infer_encoder` does (the Criteo preset for
        the Criteo columns, else numeric dtypes numeric and the others categorical).
    label : str, default "Label"
    dtype : numpy dtype, default numpy.float32
    weight : str, optional
        A column of sample weights, as :func:`read_ctr`'s: not a feature (an inferred
        encoder leaves it out; a given ``encoder`` must not hash it), required on every
        row, a finite, non-negative number; returned as ``w``.
    **infer
        ``numeric``, ``categorical``, ``crosses``, ``exclude``, ``n_features`` and other
        :class:`HashingEncoder` arguments, to make the encoder when none is given.

    Returns
    -------
    X : dask.array.Array (n_samples, encoder.n_features) of CSR chunks
    y : dask.array.Array (n_samples,), float64
    w : dask.array.Array (n_samples,), float64
        Only with ``weight``: the weights, in ``X``'s row chunks (as
        ``fit(X, y, sample_weight=w)`` takes them).

    Raises
    ------
    ValueError
        From this call: a weight column that is the label, a feature of ``encoder`` or
        not in ``df``; columns named twice, a feature column of lists, tuples, dicts or
        arrays (of a pandas frame; a dask frame's, when computed); when computed, a missing
        column, a label that is missing or not a finite number (text), an infinite feature
        value, naming the partition, the row and the column (partition lengths are
        computed here); with ``weight``, a weight that is missing, not a number, NaN,
        infinite or negative (``"partition 0: weight column 'w' is empty in row 3: ..."``).
    """
    import dask
    import dask.dataframe as dd

    unique_columns("dataframe", list(df.columns))
    check_weight_column(weight, label, list(df.columns), "dataframe")
    objects = pa.schema([]) if isinstance(df, dd.DataFrame) else object_schema(df)
    if not isinstance(df, dd.DataFrame):
        df = dd.from_pandas(df, npartitions=1)
    if encoder is None:
        kinds = _arrow_kinds(pa.Schema.from_pandas(df._meta, preserve_index=False))
        n_features = infer.pop("n_features", 2**20)
        exclude = infer.pop("exclude", ())
        if weight is not None:
            exclude = [*column_names(exclude, "exclude"), weight]
        encoder = _build_encoder(kinds, label, infer.pop("numeric", None),
                                 infer.pop("categorical", None), infer.pop("crosses", ()),
                                 exclude, n_features, "dataframe", **infer)
    elif infer:
        raise ValueError("give either an encoder or arguments to make one, not both")
    else:
        check_not_a_feature(weight, encoder.columns)
    check_feature_types("dataframe", objects, encoder.columns, label)
    dtype = np.dtype(dtype)
    rows = tuple(int(n) for n in compute(df.map_partitions(len),
                                         what="counting the dataframe's rows")[0])
    encode = dask.delayed(_encode_partition, pure=True)
    parts = [encode(p, encoder, label, dtype, i, weight)
             for i, p in enumerate(df.to_delayed())]
    chunks = [da.from_delayed(dask.delayed(box)(p), (1,), dtype=object, meta=OBJECTS)
              for p in parts]
    return _arrays(da.concatenate(chunks), rows, encoder.n_features, dtype,
                   weight is not None)
