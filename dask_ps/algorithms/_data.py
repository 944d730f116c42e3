"""Training data for the estimators: labels encoded once, rows split into partitions.

In-memory inputs (NumPy, scipy.sparse, ``sparse.COO``) are split into one partition per
worker. Dask arrays and dataframes stay where they are: each chunk is encoded on the worker
that computes it, and the training task of that chunk runs there too.
"""

from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp

__all__ = ["PartKey", "as_scipy", "compute_on_workers", "dask_partitions", "data_report",
           "encode_part", "group_parts", "hash_columns", "io_snapshot", "is_dask_collection",
           "load_part", "locate", "part_refs", "read_together", "split_rows"]


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
    """``(X as CSR with sorted indices, targets (n, n_out))`` of one partition, its columns
    hashed into ``n_buckets`` when given. ``X`` keeps float32 values (the readers' dtype:
    half the memory and spill of float64; the kernels compute in float64 all the same, and
    float32 to float64 is exact); other dtypes become float64.

    Raises
    ------
    ValueError
        Non-finite features or a label outside ``classes``, naming the partition.
    """
    if hasattr(X, "to_numpy"):  # pandas
        X = X.to_numpy(dtype=np.float64)
    X = X.tocsr() if hasattr(X, "tocsr") else X
    dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
    # a copy: sum_duplicates works in place, and X may be the caller's (or Dask's) data
    X = sp.csr_matrix(X, dtype=dtype, copy=True)
    X.sum_duplicates()  # canonical: sorted, distinct columns per row (per-sample kernels)
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


def read_together(client, X, y) -> tuple:
    """Dask ``X`` and ``y`` from one read of their source, which they usually share (a reader
    parses each block once for both): persisted together on the cluster of ``client``
    ("local", None without a default client, or a Client), else computed together here.

    Returns ``(X, y, y_values, start)``: ``y_values`` the labels here (1-d), ``start`` the
    :func:`io_snapshot` taken before the reads on the cluster (for :func:`data_report`), None
    when computed here.
    """
    import dask

    if client is None:
        from distributed import default_client

        try:
            client = default_client()
        except ValueError:
            client = None
    if client is None or isinstance(client, str):
        X, y = dask.compute(X, y)
        return as_scipy(X), y, y, None
    start = io_snapshot(client)
    if is_dask_collection(y):
        X, y = client.persist([X, y])
        # chunk by chunk to this process: y.compute() would gather them on one worker first
        chunks = y.to_delayed()
        chunks = chunks.ravel().tolist() if hasattr(chunks, "ravel") else list(chunks)
        values = np.concatenate([np.asarray(v).ravel() for v in client.gather(
            client.compute(chunks))] or [np.zeros(0)])
    else:
        X, values = client.persist(X), y
    values = values.to_numpy() if hasattr(values, "to_numpy") else np.asarray(values)
    return X, y, values.ravel(), start


def split_rows(X: sp.csr_matrix, Y: np.ndarray, n_parts: int) -> list:
    bounds = np.linspace(0, X.shape[0], n_parts + 1).round().astype(int)
    return [(X[a:b], Y[a:b]) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def dask_partitions(client, X, y, classes: np.ndarray, n_out: int,
                    n_buckets: int | None = None) -> list:
    """Futures of the encoded chunks of dask ``X``, ``y``, submitted (not waited for: once
    the caller lets go of ``X`` and ``y``, Dask frees each input chunk as soon as it is
    encoded, instead of holding all of them until the last one is; then
    :func:`locate` them).

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
        if np.isnan(X.shape[0]) or np.isnan(y.shape[0]):
            raise ValueError("X and y need known chunk sizes; call compute_chunk_sizes() on "
                             "them first, e.g. X = X.compute_chunk_sizes()")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows and X {X.shape[0]}")
        y = y.rechunk((X.chunks[0],))
        xs, ys = X.to_delayed().ravel(), y.to_delayed().ravel()
    parts = [encode(xc, yc, classes, n_out, f"partition {i}", n_buckets)
             for i, (xc, yc) in enumerate(zip(xs, ys))]
    # Chunks of X already on the cluster (persisted) are encoded on the worker holding them:
    # no partition moves between workers. The others go where the scheduler puts them.
    who = client.who_has()
    groups: dict = {}
    for i, xc in enumerate(xs):
        holders = who.get(xc.key) or [None]
        groups.setdefault(holders[0], []).append(i)
    futures = [None] * len(parts)
    for addr, idx in groups.items():
        # Loose placement: if that worker dies, Dask recomputes the partition elsewhere
        # instead of waiting for it forever.
        placed = client.compute([parts[i] for i in idx],
                                workers=None if addr is None else [addr],
                                allow_other_workers=addr is not None)
        for i, f in zip(idx, placed):
            futures[i] = f
    return futures


def locate(client, futures: list) -> list[str]:
    """The worker holding each future's result, once all are computed (again, after a
    worker was lost); raises the first partition's error."""
    from distributed import wait

    wait(futures)
    for f in futures:
        if f.status == "error":
            f.result()  # raises the partition's error
    who = client.who_has(futures)
    return [who[f.key][0] for f in futures]


def group_parts(parts: list, workers: list[str] | None, nthreads: dict[str, int]
                ) -> tuple[list[list], list[str] | None]:
    """Gather the parts held by each worker into as many groups as it has threads.

    One training task per group: a worker's threads each run one task over several parts,
    instead of one thread per part competing for its cores (and joining every barrier).

    Returns
    -------
    groups : list of lists of parts
    group_workers : list of str or None
        The worker of each group (None when ``workers`` is None: one group per part).
    """
    if workers is None:
        return [[p] for p in parts], None
    groups, where = [], []
    for w in dict.fromkeys(workers):
        mine = [p for p, pw in zip(parts, workers) if pw == w]
        k = max(1, min(len(mine), nthreads.get(w, 1)))
        groups += [mine[i::k] for i in range(k)]
        where += [w] * k
    return groups, where


class PartKey:
    """The Dask key of a partition, passed to a task instead of its future: Dask would
    resolve a future in the task's arguments, holding every partition of the task in memory
    (unspilled) at once; a task loads one partition at a time with :func:`load_part`."""

    __slots__ = ("key",)

    def __init__(self, key) -> None:
        self.key = key

    def __reduce__(self):
        return PartKey, (self.key,)

    def __repr__(self) -> str:
        return f"PartKey({self.key!r})"


def part_refs(parts: list) -> list:
    """``parts`` with Dask futures replaced by their :class:`PartKey`; other parts as they
    are."""
    from distributed import Future

    return [PartKey(p.key) if isinstance(p, Future) else p for p in parts]


_FETCHED = {"count": 0, "bytes": 0}  # partitions a task fetched from another worker
_FETCHED_LOCK = threading.Lock()


def load_part(part):
    """``(X, Y)`` of a partition: ``part`` itself, or for a :class:`PartKey` the value in
    this worker's store (memory, or Dask's local disk, through its ``SpillBuffer``, which
    counts and spills it like any other key). A partition that is not on this worker (Dask
    recomputed it elsewhere after a worker was lost) is fetched from its holder and counted
    as an incoming transfer (see :func:`data_report`)."""
    if not isinstance(part, PartKey):
        return part
    from dask.sizeof import sizeof
    from distributed import Future, get_client, get_worker

    try:
        return get_worker().data[part.key]
    except KeyError:
        pass
    client = get_client()
    future = Future(part.key, client)
    # a Future made from a key waits for news of it: ask the scheduler for them (what the
    # client does for the futures it holds when it reconnects)
    client._send_to_scheduler({"op": "client-desires-keys", "keys": [part.key]})
    value = future.result()
    with _FETCHED_LOCK:
        _FETCHED["count"] += 1
        _FETCHED["bytes"] += int(sizeof(value))
    return value


def _worker_io(dask_worker=None, keys=()) -> dict:
    """This worker's source reads and incoming transfers so far, and where ``keys`` are now:
    bytes in memory (``sizeof``) and on Dask's local disk (pickled)."""
    from dask.sizeof import sizeof

    from ..io._blocks import source_reads

    out = {"reads": source_reads(), "incoming_count": 0, "incoming_bytes": 0,
           "in_memory": 0, "on_disk": 0}
    if dask_worker is None:
        return out
    with _FETCHED_LOCK:  # Dask's own transfers, and those of load_part
        out["incoming_count"] = dask_worker.state.transfer_incoming_count_total + _FETCHED[
            "count"]
        out["incoming_bytes"] = sum(e["total"] for e in dask_worker.transfer_incoming_log
                                    ) + _FETCHED["bytes"]
    data = dask_worker.data
    memory = getattr(data, "memory", data)
    # distributed's SpillBuffer keeps the pickled size of each spilled key here (pinned
    # distributed version; tests/algorithms/test_data_at_scale.py checks it)
    on_disk = getattr(getattr(data, "_slow_uncached", None), "weight_by_key", {})
    for k in keys:
        if k in memory:
            out["in_memory"] += sizeof(memory[k])
        elif k in on_disk:
            out["on_disk"] += on_disk[k].disk
    return out


def io_snapshot(client) -> dict:
    """Per worker: source reads and incoming transfers so far (see :func:`data_report`)."""
    return client.run(_worker_io)


def data_report(client, futures: list, start: dict) -> dict:
    """What the data of a fit cost since ``start`` (an :func:`io_snapshot`), for history_.

    Returns
    -------
    dict
        ``source_reads`` (blocks of source files read), ``source_bytes``,
        ``max_reads_per_block`` (1 when no block was read twice), ``bytes_in_memory`` and
        ``bytes_on_disk`` (the partitions now, in worker memory and spilled by Dask to local
        disk), ``incoming_transfers`` and ``incoming_transfer_bytes`` (data moved between
        workers; 0 when every task ran where its data was).
    """
    now = client.run(_worker_io, keys=[f.key for f in futures])
    reads: dict = {}
    out = dict(source_reads=0, source_bytes=0, bytes_in_memory=0, bytes_on_disk=0,
               incoming_transfers=0, incoming_transfer_bytes=0)
    for addr, w in now.items():
        before = start.get(addr, {"reads": {}, "incoming_count": 0, "incoming_bytes": 0})
        for block, (n, nbytes) in w["reads"].items():
            n0, b0 = before["reads"].get(block, (0, 0))
            if n > n0:
                reads[block] = reads.get(block, 0) + n - n0
                out["source_bytes"] += nbytes - b0
        out["incoming_transfers"] += w["incoming_count"] - before["incoming_count"]
        out["incoming_transfer_bytes"] += w["incoming_bytes"] - before["incoming_bytes"]
        out["bytes_in_memory"] += w["in_memory"]
        out["bytes_on_disk"] += w["on_disk"]
    out["source_reads"] = sum(reads.values())
    out["max_reads_per_block"] = max(reads.values(), default=0)
    return out


def compute_on_workers(client, parts: list) -> tuple[list, list[str]]:
    """Futures of the delayed ``parts``, computed, and the worker holding each.

    Raises
    ------
    Exception
        The first part's error (e.g. bad input naming its partition).
    """
    futures = client.compute(parts)
    return futures, locate(client, futures)
