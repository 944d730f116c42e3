"""Training data for the estimators: labels encoded once, rows split into partitions.

In-memory inputs (NumPy, scipy.sparse, ``sparse.COO``) are split into one partition per
worker. Dask arrays and dataframes stay where they are: each chunk is encoded on the worker
that computes it, and the training task of that chunk runs there too.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["as_scipy", "compute_on_workers", "dask_partitions", "encode_part", "hash_columns",
           "is_dask_collection", "split_rows"]


def is_dask_collection(x) -> bool:
    return hasattr(x, "__dask_graph__") and x.__dask_graph__() is not None


def as_scipy(X):
    """pydata ``sparse`` arrays as scipy CSR; anything else unchanged."""
    return X.to_scipy_sparse().tocsr() if hasattr(X, "to_scipy_sparse") else X


def targets(codes: np.ndarray, n_out: int) -> np.ndarray:
    """One column per class (one-vs-rest), or one column "is class 1" for two classes."""
    cols = np.arange(n_out) if n_out > 1 else np.array([1])
    return (codes[:, None] == cols).astype(np.float64)


def hash_columns(X: sp.csr_matrix, n_buckets: int) -> sp.csr_matrix:
    """Feature hashing: column ``j`` goes to bucket ``splitmix64(j) >> 32 mod n_buckets``;
    values of columns sharing a bucket are summed (Weinberger et al., ICML 2009, unsigned)."""
    from ..state._kernels import hash_shard

    buckets = hash_shard(X.indices.astype(np.int64), n_buckets)
    # sum_duplicates works in place: the caller's data and indptr must not be shared
    out = sp.csr_matrix((X.data.copy(), buckets, X.indptr.copy()), shape=(X.shape[0], n_buckets))
    out.sum_duplicates()
    return out


def encode_part(X, y, classes: np.ndarray, n_out: int, where: str = "",
                n_buckets: int | None = None) -> tuple:
    """``(X as CSR float64 with sorted indices, targets (n, n_out))`` of one partition,
    its columns hashed into ``n_buckets`` when given.

    Raises
    ------
    ValueError
        Non-finite features or a label outside ``classes``, naming the partition.
    """
    if hasattr(X, "to_numpy"):  # pandas
        X = X.to_numpy(dtype=np.float64)
    X = sp.csr_matrix(X.tocsr() if hasattr(X, "tocsr") else X, dtype=np.float64)
    X.sort_indices()
    if not np.isfinite(X.data).all():
        raise ValueError(f"{where}: X contains NaN or infinity")
    if n_buckets is not None:
        X = hash_columns(X, n_buckets)
    y = (y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)).ravel()
    codes = np.searchsorted(classes, y)
    bad = (codes >= classes.shape[0]) | (classes[np.minimum(codes, classes.shape[0] - 1)] != y)
    if bad.any():
        raise ValueError(f"{where}: label {y[np.argmax(bad)]!r} is not among {classes.tolist()}")
    return X, targets(codes, n_out)


def split_rows(X: sp.csr_matrix, Y: np.ndarray, n_parts: int) -> list:
    bounds = np.linspace(0, X.shape[0], n_parts + 1).round().astype(int)
    return [(X[a:b], Y[a:b]) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def dask_partitions(client, X, y, classes: np.ndarray, n_out: int,
                    n_buckets: int | None = None) -> tuple[list, list[str]]:
    """Futures of the encoded chunks of dask ``X``, ``y`` and the worker holding each.

    Raises
    ------
    ValueError
        ``X`` that is not 2-D, or ``y`` whose length differs from ``X``'s.
    """
    import dask

    encode = dask.delayed(encode_part, pure=True)
    if hasattr(X, "to_dask_array"):  # dask dataframe: partitions as they are
        ys = y.to_delayed() if hasattr(y, "to_delayed") else None
        if ys is None or len(ys) != X.npartitions:
            raise ValueError("with a dask dataframe X, y must be a dask series partitioned "
                             "like X")
        xs = X.to_delayed()
    else:
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        X = X.rechunk({1: -1})
        if hasattr(y, "to_dask_array"):
            y = y.to_dask_array(lengths=True)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows and X {X.shape[0]}")
        y = y.rechunk((X.chunks[0],))
        xs, ys = X.to_delayed().ravel(), y.to_delayed().ravel()
    parts = [encode(xc, yc, classes, n_out, f"partition {i}", n_buckets)
             for i, (xc, yc) in enumerate(zip(xs, ys))]
    return compute_on_workers(client, parts)


def compute_on_workers(client, parts: list) -> tuple[list, list[str]]:
    """Futures of the delayed ``parts``, computed, and the worker holding each.

    Raises
    ------
    Exception
        The first part's error (e.g. bad input naming its partition).
    """
    from distributed import wait

    futures = client.compute(parts)
    wait(futures)
    for f in futures:
        if f.status == "error":
            f.result()  # raises the partition's error
    who = client.who_has(futures)
    return futures, [who[f.key][0] for f in futures]
