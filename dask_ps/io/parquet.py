"""Sparse rows in Parquet: a label column and list columns of feature indices and values."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from ..state._malloc import release_memory
from ._blocks import count_read, open_paths

__all__ = ["read_sparse_parquet", "sparse_to_table"]

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


def _row_group(fs, path: str, group: int, n_features: int, dtype) -> tuple:
    with fs.open(path, "rb") as f:
        table = pq.ParquetFile(f).read_row_group(group, columns=["label", "indices", "values"])
    count_read(path, f"row group {group}", table.nbytes)
    ind, val = table.column("indices").combine_chunks(), table.column("values").combine_chunks()
    offsets = ind.offsets.to_numpy()
    keys = ind.values.to_numpy()
    if keys.shape[0] and (keys.min() < 0 or keys.max() >= n_features):
        at = int(np.flatnonzero((keys < 0) | (keys >= n_features))[0])
        row = int(np.searchsorted(offsets - offsets[0], at, side="right")) - 1
        raise ValueError(f"{path}: row group {group}, row {row}: feature index {keys[at]} is "
                         f"outside [0, n_features={n_features})")
    # the index dtype scipy would choose, cast to once (not int64 first, then int32)
    index = np.int32 if max(n_features, keys.shape[0]) <= np.iinfo(np.int32).max else np.int64
    X = sp.csr_matrix((val.values.to_numpy().astype(dtype), keys.astype(index),
                       (offsets - offsets[0]).astype(index)),
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
        Files or fsspec URLs (globs expanded, in sorted order).
    n_features : int, optional
        Default: the ``dask_ps.n_features`` the writer stored in the schema metadata.
    dtype : numpy dtype, default numpy.float32
    storage_options : dict, optional

    Returns
    -------
    X : dask.array.Array (n_samples, n_features) of CSR chunks
    y : dask.array.Array (n_samples,), float64

    Raises
    ------
    ValueError
        A file without the columns ``label``, ``indices``, ``values``, or no ``n_features``.
    """
    fs, paths = open_paths(urlpath, storage_options)
    groups = []
    for path in paths:
        with fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            meta, names = pf.metadata, set(pf.schema_arrow.names)
        if not {"label", "indices", "values"} <= names:
            raise ValueError(f"{path}: needs the columns label, indices and values, has "
                             f"{sorted(names)}")
        stored = (meta.metadata or {}).get(N_FEATURES_KEY)
        if n_features is None and stored is None:
            raise ValueError(f"{path}: n_features is not stored in the file; pass it")
        n_features = int(stored) if n_features is None else n_features
        groups += [(path, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    dtype = np.dtype(dtype)
    load = dask.delayed(_row_group, pure=True, nout=2)
    Xs, ys = [], []
    for path, g, rows in groups:
        X, y = load(fs, path, g, n_features, dtype)
        Xs.append(da.from_delayed(X, (rows, n_features), dtype=dtype,
                                  meta=sp.csr_matrix((0, n_features), dtype=dtype)))
        ys.append(da.from_delayed(y, (rows,), dtype=np.float64))
    return da.concatenate(Xs), da.concatenate(ys)
