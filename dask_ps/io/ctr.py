"""Click-through-rate tables (CSV, Parquet, dask dataframes) into hashed sparse features."""

from __future__ import annotations

from typing import NamedTuple

import dask.array as da
import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from ._blocks import OBJECTS, box, each, open_paths, plan, select, start_lines
from ._csv import LineError, header_names, read_table
from .hashing import HashingEncoder

__all__ = ["encode_ctr", "read_ctr"]


class _Layout(NamedTuple):
    names: list  # every column of a line
    types: dict  # the columns kept, with their pyarrow types
    label: str
    header: bool
    sep: str


def _block_table(fs, block, line0, layout: _Layout):
    table, newlines = read_table(fs, block, line0, layout.header, layout.names, layout.types,
                                 layout.sep, required=layout.label)
    return table, newlines, table.column(layout.label).to_numpy().astype(np.float64)


def _scan_chunk(chunk: np.ndarray, fs, layout: _Layout) -> np.ndarray:
    """First pass: rows and newlines of a block, or the error of its first bad line (with the
    line counted from the block's start; the client adds the lines before it)."""
    try:
        table, newlines, _ = _block_table(fs, chunk[0], 0, layout)
    except LineError as err:
        return box((0, 0, err))
    return box((table.num_rows, newlines, None))


def _load_chunk(chunk: np.ndarray, fs, layout: _Layout, encoder: HashingEncoder,
                dtype) -> np.ndarray:
    block, line0 = chunk[0]
    table, _, y = _block_table(fs, block, line0, layout)
    where = f"{block.path} (lines after {line0})"
    return box((encoder.transform(table, dtype, where), y))


def read_ctr(urlpath, encoder: HashingEncoder | None = None, label: str = "Label", *,
             sep: str = ",", header: bool = True, names: list[str] | None = None,
             blocksize: int | str | None = "32MiB", dtype=np.float32,
             storage_options: dict | None = None,
             compression: str | None = "infer") -> tuple[da.Array, da.Array]:
    """Read CSV / TSV click logs into hashed sparse features and labels.

    Every row becomes ``encoder.transform`` of its columns (one global rule, so equal rows
    give equal features whatever the blocks). The default encoder is the Criteo layout:
    label, integer columns I1..I13 and categorical C1..C26, an empty field meaning missing;
    other columns (such as an ``Id``) are ignored. Files are split at line boundaries into
    blocks of about ``blocksize`` bytes (compressed files are one block each); quoted fields
    must not contain newlines.

    The input is read twice: a first pass (computed now, with the active dask scheduler)
    validates every line and counts rows, so the arrays have known chunks and every error
    is raised here; the returned arrays parse and hash the blocks again when computed.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (a glob is expanded, matches in sorted order).
    encoder : HashingEncoder, optional
        Default ``HashingEncoder.criteo()`` (2**20 features, integers log-bucketed).
    label : str, default "Label"
        The label column (required in every row, a number).
    sep : str, default ","
        Field delimiter (``"\\t"`` for Criteo's raw ``train.txt``).
    header : bool, default True
        Whether every file starts with a line of column names; all must agree.
    names : list of str, optional
        Column names when the files have no header (e.g. ``["Label", "I1", ..., "C26"]``
        for Criteo's raw files).
    dtype : numpy dtype, default numpy.float32
        Dtype of ``X``.
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.

    Returns
    -------
    X : dask.array.Array (n_samples, encoder.n_features)
        Blocks are ``scipy.sparse.csr_matrix`` with sorted, summed indices.
    y : dask.array.Array (n_samples,), float64
        The labels as written.

    Raises
    ------
    ValueError
        Naming the file and line: a line with the wrong number of fields, a numeric field
        that is not a number (naming the column too), an empty label. Also a header that
        lacks a column the encoder or ``label`` needs, or headers that differ between files.
    FileNotFoundError
        No file matches ``urlpath``.

    See Also
    --------
    HashingEncoder : the encoding rule.
    encode_ctr : the same from a (dask) dataframe, e.g. read from Parquet.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://read_ctr_demo.csv", "wb") as f:
    ...     _ = f.write(b"click,price,shop\\n1,3.5,a\\n0,,b\\n1,3.5,a\\n")
    >>> enc = HashingEncoder(numeric=["price"], categorical=["shop"], n_features=64)
    >>> X, y = read_ctr("memory://read_ctr_demo.csv", enc, label="click")
    >>> X.shape, y.compute().tolist()
    ((3, 64), [1.0, 0.0, 1.0])
    >>> Xc = X.compute()
    >>> Xc.nnz, (Xc[0] != Xc[2]).nnz
    (6, 0)
    """
    encoder = HashingEncoder.criteo() if encoder is None else encoder
    fs, paths = open_paths(urlpath, storage_options)
    blocks = plan(fs, paths, blocksize, compression)
    if header:
        comp = [b.compression for b in blocks if b.offset == 0]
        heads = [header_names(fs, p, sep, c) for p, c in zip(paths, comp)]
        for p, h in zip(paths[1:], heads[1:]):
            if h != heads[0]:
                raise ValueError(f"{p}: header {h} differs from {paths[0]}'s {heads[0]}")
        names = heads[0] if names is None else list(names)
    elif names is None:
        raise ValueError("files without a header need names=[...] for their columns")
    names = list(names)
    wanted = [label, *encoder.columns]
    absent = [c for c in wanted if c not in names]
    if absent:
        raise ValueError(f"{paths[0]}: columns {absent} are not among {names}")
    types = {label: pa.float64(), **encoder.arrow_types()}
    layout = _Layout(names, types, label, header, sep)

    stats = each(blocks).map_blocks(_scan_chunk, fs, layout, dtype=object,
                                    meta=OBJECTS).compute()
    line0 = start_lines(blocks, [s[1] for s in stats])
    for l0, s in zip(line0, stats):
        if s[2] is not None:
            raise s[2].shifted(l0) from None
    keep = [i for i, s in enumerate(stats) if s[0]] or [0]
    rows = tuple(stats[i][0] for i in keep)
    parts = each([(blocks[i], line0[i]) for i in keep]).map_blocks(
        _load_chunk, fs, layout, encoder, np.dtype(dtype), dtype=object, meta=OBJECTS)
    return _arrays(parts, rows, encoder.n_features, np.dtype(dtype))


def _arrays(parts: da.Array, rows: tuple, n_features: int, dtype) -> tuple[da.Array, da.Array]:
    """X and y selected from one object chunk ``(csr, labels)`` per block (one parse each)."""
    meta = sp.csr_matrix((0, n_features), dtype=dtype)
    X = parts.map_blocks(select, 0, new_axis=1, chunks=(rows, (n_features,)), dtype=dtype,
                         meta=meta)
    y = parts.map_blocks(select, 1, chunks=(rows,), dtype=np.float64, meta=np.empty(0))
    return X, y


def _encode_partition(df, encoder: HashingEncoder, label: str, dtype, i: int):
    where = f"partition {i}"
    if label not in df.columns:
        raise ValueError(f"{where}: label column {label!r} is missing")
    y = np.asarray(df[label], dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError(f"{where}: label column {label!r} is empty or not a number in row "
                         f"{int(np.argmax(~np.isfinite(y))) + 1}")
    return encoder.transform(df, dtype, where), y


def encode_ctr(df, encoder: HashingEncoder | None = None, label: str = "Label",
               dtype=np.float32) -> tuple[da.Array, da.Array]:
    """Hashed sparse features and labels of a (dask) dataframe, one chunk per partition.

    Parameters
    ----------
    df : dask.dataframe.DataFrame or pandas.DataFrame
        E.g. ``dask.dataframe.read_parquet(url)``, which splits the files by row groups.
    encoder : HashingEncoder, optional
        Default ``HashingEncoder.criteo()``.
    label : str, default "Label"
    dtype : numpy dtype, default numpy.float32

    Returns
    -------
    X : dask.array.Array (n_samples, encoder.n_features) of CSR chunks
    y : dask.array.Array (n_samples,), float64

    Raises
    ------
    ValueError
        A missing column, or a label that is empty or not a number, naming the partition
        and row (raised when the arrays are computed; partition lengths are computed here).
    """
    import dask
    import dask.dataframe as dd

    encoder = HashingEncoder.criteo() if encoder is None else encoder
    if not isinstance(df, dd.DataFrame):
        df = dd.from_pandas(df, npartitions=1)
    dtype = np.dtype(dtype)
    rows = tuple(int(n) for n in df.map_partitions(len).compute())
    encode = dask.delayed(_encode_partition, pure=True)
    parts = [encode(p, encoder, label, dtype, i) for i, p in enumerate(df.to_delayed())]
    chunks = [da.from_delayed(dask.delayed(box)(p), (1,), dtype=object, meta=OBJECTS)
              for p in parts]
    return _arrays(da.concatenate(chunks), rows, encoder.n_features, dtype)
