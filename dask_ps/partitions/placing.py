"""Placing training data on the workers: :func:`partition` cuts it into
:class:`~.core.Partitions` (computed where Dask reads them, or scattered), balanced over the
workers' threads once, before any training."""

from __future__ import annotations

import numbers
import time

import numpy as np

from .. import _compat
from ..cluster import PauseWatch, worker_info
from ..exceptions import MemoryLimitError
from . import inputs
from .core import LOCAL, WAIT_INTERVAL, Partitions, _client_of, _finish
from .worker import io_counters, placing_counters

__all__ = ["BALANCE_GAIN", "partition", "room_fraction"]


def partition(data, *, client=None, n_partitions: int | None = None,
              by: str | None = None, workers: list[str] | None = None) -> Partitions:
    """Cut ``data`` into partitions held by the workers of a Dask cluster.

    Parameters
    ----------
    data : array-like, dask collection, tuple of them, or list of futures
        Rows on the first axis. In memory — NumPy, scipy.sparse, ``sparse.COO``, pandas —
        it is cut into ``n_partitions`` row blocks scattered once to the workers (never put
        into a task graph). A dask array, dataframe or series (or a tuple of collections
        aligned by rows, e.g. ``(X, y)``: each partition is then a tuple) is computed once
        on the cluster, one partition per chunk, each where Dask computed it, then whole
        partitions move once from the workers holding the most rows per thread to those
        holding the fewest while that evens the load (:func:`_balance`); a list of Dask
        futures is taken as it is, one partition each: the Partitions keeps futures of its
        own of the same keys, so :meth:`~.core.Partitions.release` (or the end of a
        ``with`` block) drops only those and never cancels the caller's futures, whose
        data Dask keeps while the caller holds them (it frees what :func:`partition`
        made itself: scattered in-memory data, computed dask chunks, moved copies).
        Arrays have 1 or 2 dimensions (rows, then columns), in memory as in dask.
    client : distributed.Client or "local", optional
        Default: the current client; "local" (or no client) keeps the partitions in this
        process. A closed client, or anything else, is refused as :class:`~dask_ps.PSModel`
        refuses it (:func:`dask_ps.cluster.check_client`).
    n_partitions : int, optional
        In-memory data: the number of partitions (default: one per worker thread, 1
        without a cluster). Dask data: at least this many (default: one per worker thread),
        the largest chunks being cut to reach it, so that no worker thread idles. Not with
        a list of futures, which are the partitions, one each (refused, not ignored).
    by : str, optional
        A column of a (dask) DataFrame: rows with equal values go to the same partition
        (in memory by hash; dask data by Dask's shuffle). Not with a list of futures.
    workers : str or list of str, optional
        Addresses of the workers to hold the partitions (default: all; the partitions and
        the default ``n_partitions`` then count only their threads). Not with a list of
        futures, which stay where they are, nor without a cluster.

    Returns
    -------
    Partitions

    Raises
    ------
    ValueError
        Empty data: without any row (``"data has no rows"``: in memory, a dask collection
        whose chunks all have 0 rows, or a list of futures whose values all have 0 rows),
        a list whose rows are ragged, tuples whose elements do not have the same
        rows, an array (in memory, dask, or a future's value, named by its position) of
        more than 2 dimensions, naming its shape,
        unknown dask chunk sizes, a bad ``n_partitions``, ``by`` that is not a
        column, ``workers`` naming no worker of the cluster or given without a cluster
        (``client="local"`` or no client: there are no workers to choose),
        ``n_partitions``, ``by`` or ``workers`` with a list of futures, in-memory
        data whose workers all left the cluster, or a ``client`` that is closed.
    TypeError
        Data of a kind that has no rows, or a future whose value has none, naming its
        position and type: a partition (a future's value, or a piece of the data) is an
        object with a ``shape`` of one dimension or more (NumPy, scipy.sparse,
        ``sparse.COO``, pandas) or a tuple of them; it may have 0 rows (the steps get it
        as it is), but a string, a list, None or a scalar (a 0-d array, in memory or
        dask) is refused. A list mixing futures with other values. A ``client`` that is no
        ``distributed.Client``.
    MemoryError
        In-memory data of which one partition would take more than Dask's ``pause``
        fraction of its worker's memory limit (``distributed.worker.memory.pause``, 80% by
        default; ``terminate``, 95%, when pausing is off): its worker would pause, running
        no step while holding it, or be restarted while receiving it. Named with its size,
        the limit and how many partitions would fit. Or in-memory data whose workers all
        stayed paused (at their memory limit) for
        ``dask-ps.pause-timeout`` seconds (a paused worker takes none while others run).

    Examples
    --------
    >>> import numpy as np
    >>> from dask_ps.partitions import partition
    >>> parts = partition(np.arange(10.0), client="local", n_partitions=3)
    >>> parts.n_rows
    [3, 4, 3]
    """
    if n_partitions is not None and (not isinstance(n_partitions, numbers.Integral)
                                     or isinstance(n_partitions, bool) or n_partitions < 1):
        raise ValueError(f"n_partitions must be a positive integer, got {n_partitions!r}")
    client = _client_of(client)
    if isinstance(data, list) and data and all(hasattr(f, "key") and hasattr(f, "status")
                                               for f in data):
        if client is None:
            raise ValueError("a list of futures needs their Dask client")
        given = [f"{name}={value!r}" for name, value in
                 (("n_partitions", n_partitions), ("by", by), ("workers", workers))
                 if value is not None]
        if given:  # (n_partitions and by were ignored)
            raise ValueError(f"{', '.join(given)} cannot be given with a list of futures: "
                             f"the {len(data)} futures are the partitions, one each, as they "
                             f"are and where they are (give the data itself, in memory or "
                             f"dask, to have it cut, grouped or placed)")
        from distributed import Future

        # copies of the caller's futures: releasing the Partitions drops only these, and
        # the caller's own futures (and their data) stay alive
        return _finish(client, [Future(f.key, client=client) for f in data],
                       start=client.run(placing_counters), spill=False,
                       some_rows=f"{len(data)} futures of 0 rows", most=2)
    items = data if isinstance(data, tuple) else (data,)
    if not items:
        raise ValueError("data is an empty tuple")
    if client is None and workers is not None:
        raise ValueError(f"workers={workers!r} needs a Dask cluster: without a client (or "
                         f"with client='local') the partitions stay in this process")
    threads = None if client is None else _threads(client, workers)
    if by is not None:
        return _grouped(data, by, client, n_partitions, threads)
    if any(inputs.is_dask(x) for x in items):
        return _from_dask(data, client, n_partitions, threads=threads)
    return _from_memory(data, client, n_partitions, threads=threads)


def _threads(client, workers: list[str] | None = None) -> dict[str, int]:
    """Threads of each worker of the cluster (only of ``workers``, if given)."""
    threads = {a: int(w.get("nthreads", 1)) for a, w in worker_info(client).items()}
    if workers is None:
        return threads
    workers = [workers] if isinstance(workers, str) else list(workers)
    unknown = sorted(set(workers) - set(threads))
    if unknown or not workers:
        raise ValueError(f"workers names {unknown[0]!r}, not a worker of the cluster "
                         f"({sorted(threads)})" if unknown else "workers is empty")
    return {a: threads[a] for a in workers}


def _running(client, threads: dict[str, int]) -> dict[str, int]:
    """The running ones of ``threads``' workers (a scatter to a paused worker waits for it,
    then fails with distributed's "No valid workers found", 30 s); if every one is paused,
    they are waited for as :class:`~dask_ps.cluster.PauseWatch` waits for a computation
    (``dask-ps.pause-timeout``).

    Raises
    ------
    MemoryError
        Every one of them stayed paused at its memory limit, naming them.
    ValueError
        Every one of them left the cluster.
    """
    watch = PauseWatch(client, f"placing the data on {sorted(threads)}", workers=list(threads))
    while True:
        info = worker_info(client)
        if not set(threads) & set(info):
            raise ValueError(f"the workers to hold the data left the cluster: {sorted(threads)}")
        out = {a: t for a, t in threads.items() if info.get(a, {}).get("status") == "running"}
        if out:
            return out
        watch.check(len(threads), len(threads))
        time.sleep(0.1)


def _from_memory(data, client, n_partitions, bounds=None, threads=None) -> Partitions:
    data = _rows_ready(data)
    n = inputs.n_rows_of(data, "data")
    inputs.check_rows(data)
    inputs.check_some_rows([n])
    if client is None:
        threads = {}
    else:
        threads = _running(client, _threads(client) if threads is None else threads)
    if bounds is None:
        k = min(n_partitions or max(1, sum(threads.values()) if threads else 1), n)
        bounds = inputs.split_bounds(n, k)
    k = len(bounds) - 1
    values = [inputs.slice_rows(data, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    sizes = [inputs.describe(v, index=i) for i, v in enumerate(values)]
    if client is None:
        return Partitions(None, values, [LOCAL] * k, sizes)
    slots = [a for a, t in sorted(threads.items()) for _ in range(max(1, t))]
    targets = [slots[i % len(slots)] for i in range(k)]
    _check_fits(client, sizes, targets)
    start = client.run(io_counters)
    # a list of one: scatter would take a tuple (X, y) apart
    futures = [client.scatter([v], workers=[w], hash=False)[0] for v, w in zip(values, targets)]
    out = Partitions(client, futures, targets, sizes, start=start, placed=client.run(io_counters),
                     recipe=("scatter", data, bounds))
    return out


def _check_fits(client, sizes: list[tuple[int, int]], targets: list[str]) -> None:
    """Refuse, before the scatter, in-memory partitions of which one would not fit in its
    worker: a partition above :func:`room_fraction` of the memory limit of the worker it goes
    to (the scatter of one above the terminate fraction gets the worker restarted by its
    nanny, and the user a bare ``CommClosedError``; one above the pause fraction leaves the
    worker paused, running no step, for as long as a step holds it in memory — whatever
    else the process holds, ~0.1-0.3 GiB, comes on top). Workers without a limit are not
    checked.

    Raises
    ------
    MemoryLimitError
        A :class:`MemoryError` naming the partition, its rows and bytes, the worker, its
        limit and the fraction, and the remedies.
    """
    from ..cluster import worker_info

    fraction, name = room_fraction()
    info, gib = worker_info(client), 2.0 ** 30
    for i, ((rows, nbytes), addr) in enumerate(zip(sizes, targets)):
        limit = int(info.get(addr, {}).get("memory_limit") or 0)
        if limit <= 0 or nbytes <= fraction * limit:
            continue
        need = -(-len(sizes) * nbytes // int(fraction * limit))  # ceil: near-equal rows
        raise MemoryLimitError(
            f"partition {i} ({rows:,} rows) takes {nbytes:,} bytes ({nbytes / gib:.2f} GiB), "
            f"more than {fraction:.0%} of the memory limit of worker {addr} "
            f"({limit / gib:.2f} GiB), where Dask {name} a worker "
            f"(distributed.worker.memory): in-memory data is sent to the workers one whole "
            f"partition each. Cut it into more partitions (n_partitions={need} or more), or "
            f"give a dask collection (dask.array.from_array, dask_ps.io readers) so that the "
            f"workers read it in chunks; or give the workers more memory")


def room_fraction() -> tuple[float, str]:
    """The fraction of a worker's memory limit one in-memory partition may take, and what
    Dask does past it: its ``distributed.worker.memory.pause`` fraction (0.8 by default:
    "pauses"), or, with pausing off, its ``terminate`` fraction (0.95: "restarts"), or the
    whole limit with both off, as configured in this process."""
    import dask

    for key, name in (("pause", "pauses"), ("terminate", "restarts")):
        value = dask.config.get(f"distributed.worker.memory.{key}", False)
        if value:
            return float(value), name
    return 1.0, "runs out of memory on"


def _rows_ready(data):
    """In-memory data (or a tuple of such) as something with rows: lists as arrays, its
    dimensions checked (:func:`~.inputs.check_dims`: as dask data's), pydata sparse as
    scipy CSR."""
    data = _arrays(data)
    inputs.check_dims(data, "data")
    if not isinstance(data, tuple):
        return data.to_scipy_sparse().tocsr() if hasattr(data, "to_scipy_sparse") else data
    return tuple(x.to_scipy_sparse().tocsr() if hasattr(x, "to_scipy_sparse") else x
                 for x in data)


def _arrays(data):
    """``data`` (or each element of its tuple) a list as an array (:func:`_array_of`)."""
    return tuple(_array_of(x) for x in data) if isinstance(data, tuple) else _array_of(data)


def _array_of(x):
    """A list as an array (of rows); anything else as it is."""
    if isinstance(x, list):
        futures = [i for i, v in enumerate(x) if hasattr(v, "key") and hasattr(v, "status")]
        if futures:  # (numpy said "setting an array element with a sequence")
            raise TypeError(f"data is a list mixing Dask futures (first at position "
                            f"{futures[0]}) with other values (first at position "
                            f"{min(set(range(len(x))) - set(futures))}): give a list of "
                            f"futures only, one partition each, or in-memory data")
        try:
            return np.asarray(x)
        except ValueError as exc:  # ragged rows
            raise ValueError(f"data is a list that is no array of rows ({exc})") from None
    return x


def _from_dask(data, client, n_partitions, spread: bool = True, threads=None) -> Partitions:
    import dask

    if client is None:
        inputs.check_dims(_arrays(data), "data")  # before computing it all
        computed = dask.compute(data)[0]
        return _from_memory(computed, None, n_partitions)
    chunks, first_rows = inputs.as_dask_chunks(data)
    if not chunks:
        raise ValueError("data has no partitions")
    start = client.run(placing_counters)
    # Dask's scheduler computes each chunk where its inputs are (a persisted input stays
    # where it is): the partitions start on the workers that read them
    futures = client.compute(chunks)
    # refused as in-memory data of 0 rows, told by the computed chunks' descriptions
    parts = _finish(client, futures, start=start, spill=False, first_rows=first_rows,
                    some_rows=f"{len(chunks)} dask chunk{'s' * (len(chunks) > 1)} of 0 rows")
    threads = _threads(client) if threads is None else threads
    want = n_partitions or sum(threads.values())
    if not spread:
        return parts
    if len(parts) >= want:
        return _balance(parts, threads)
    parts = _spread(parts, want, threads)  # its first pieces stay where they were computed
    return _balance(parts, threads) if set(parts.workers) - set(threads) else parts


#: :func:`_balance` moves a partition only if that lowers the largest load (rows per worker
#: thread) by more than this fraction of the mean load.
BALANCE_GAIN = 0.05


def _balance(parts: Partitions, threads: dict[str, int] | None = None) -> Partitions:
    """Move whole partitions, once, before any training: those on workers outside
    ``threads`` (the workers to hold them, default all) to the least loaded of those; then
    from the workers holding the most rows per thread to those holding the fewest, while a
    move lowers the largest load by more than :data:`BALANCE_GAIN` of the mean (Dask places
    persisted chunks unevenly: 6 and 4 of 10 equal chunks on two workers made every epoch of
    a BSP job wait 1.5x the shorter task's time). Deterministic for a given placement."""
    client = parts.client
    threads = _threads(client) if threads is None else threads
    where = list(parts.workers)
    if len(threads) < 2 and all(w in threads for w in where):
        return parts
    load = {a: 0 for a in threads}
    for w, n in zip(where, parts.n_rows):
        if w in load:
            load[w] += n

    def per(w):
        return load[w] / max(1, threads.get(w, 1))

    moves = {}
    for i, w in enumerate(where):
        if w not in load:
            lo = min(load, key=lambda a: (per(a), a))
            load[lo] += parts.n_rows[i]
            where[i] = moves[i] = lo
    mean = sum(load.values()) / max(1, sum(max(1, threads.get(w, 1)) for w in load))
    for _ in range(len(where) if len(threads) > 1 else 0):
        hi = max(load, key=lambda w: (per(w), w))
        lo = min(load, key=lambda w: (per(w), w))
        t_hi, t_lo = max(1, threads.get(hi, 1)), max(1, threads.get(lo, 1))
        mine = [i for i, w in enumerate(where) if w == hi and parts.n_rows[i] > 0]
        if not mine:
            break
        best = min(mine, key=lambda i: (max((load[hi] - parts.n_rows[i]) / t_hi,
                                            (load[lo] + parts.n_rows[i]) / t_lo), i))
        after = max((load[hi] - parts.n_rows[best]) / t_hi,
                    (load[lo] + parts.n_rows[best]) / t_lo)
        if per(hi) - after <= BALANCE_GAIN * mean:
            break
        load[hi] -= parts.n_rows[best]
        load[lo] += parts.n_rows[best]
        where[best] = lo
        moves[best] = lo
    if not moves:
        return parts
    from distributed import Future, wait

    def move(i, strict=True):
        # strict: with loose restrictions Dask's work stealing runs a move where its data
        # already is (the source worker is idle, the target busy with the other moves), as
        # it did for 2 of 5 moves of a 10^6-row CTR set: the imbalance stayed
        return client.submit(_same, parts._parts[i], pure=False, workers=[moves[i]],
                             allow_other_workers=not strict)

    futures = [move(i) if i in moves else Future(f.key, client=client)
               for i, f in enumerate(parts._parts)]
    # a strict move waits for its worker as long as it takes: loose again (Dask runs it on
    # a worker that can, likely where the data is) if that worker left or is paused
    loose = False
    while True:
        try:
            wait([futures[i] for i in moves], timeout=WAIT_INTERVAL)
            break
        except TimeoutError:
            info = worker_info(client)
            for i in moves:
                target = info.get(moves[i], {"status": "gone"})
                if not futures[i].done() and target.get("status", "running") != "running":
                    futures[i].cancel()
                    futures[i] = move(i, strict=False)
                    loose = True
    for i in moves:
        if futures[i].status == "error":
            futures[i].result()
    # the same partitions (sizes known), where the strict moves put them: asked of the
    # scheduler only after a loose move (4 round trips of a full _finish fewer: 60 ms of a
    # 0.15-0.3 s placement on a loaded 2-core machine); the io counters taken anew, as the
    # moves are part of placing the data, not of the training that follows (report()'s
    # transfers count from here)
    if loose:
        who = client.who_has([futures[i] for i in moves])
        where = [who[f.key][0] if i in moves and who.get(f.key) else w
                 for i, (f, w) in enumerate(zip(futures, where))]
    out = Partitions(client, futures, where, list(zip(parts.n_rows, parts.nbytes)),
                     start=parts._start, placed=client.run(io_counters))
    # placed: a move lost with its worker is recomputed on any worker (strict to a dead
    # address, locate() waited for ever)
    _compat.lift_restrictions(client, [futures[i].key for i in moves])
    parts.release()
    return out


def _spread(parts: Partitions, want: int, threads: dict[str, int] | None = None
            ) -> Partitions:
    """Cut the largest partitions until there are ``want``, the pieces moved to the workers
    (of ``threads``, default all) holding the fewest rows (once, now, before any
    training)."""
    client = parts.client
    threads = _threads(client) if threads is None else threads
    pieces = {i: 1 for i in range(len(parts))}
    while sum(pieces.values()) < want:
        i = max(pieces, key=lambda j: parts.n_rows[j] / pieces[j])
        if parts.n_rows[i] <= pieces[i]:
            break
        pieces[i] += 1
    load = {a: 0.0 for a in threads}
    for i, w in enumerate(parts.workers):
        if w in load:
            load[w] += parts.n_rows[i] / pieces[i]
    futures = []
    for i, f in enumerate(parts._parts):
        bounds = inputs.split_bounds(parts.n_rows[i], pieces[i])
        for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            piece = client.submit(inputs.slice_rows, f, int(a), int(b), pure=False,
                                  workers=[parts.workers[i]], allow_other_workers=True)
            if j > 0:  # the first piece stays; the others go where the fewest rows are
                target = min(load, key=lambda w: (load[w] / max(1, threads.get(w, 1)), w))
                load[target] += int(b - a)
                if parts.workers[i] in load:
                    load[parts.workers[i]] -= int(b - a)
                piece = client.submit(_same, piece, pure=False, workers=[target],
                                      allow_other_workers=True)
            futures.append(piece)
    out = _finish(client, futures, start=parts._start)
    parts.release()
    return out


def _same(value):
    return value


def _grouped(data, by: str, client, n_partitions, threads=None) -> Partitions:
    """Partitions of a DataFrame in which rows with equal ``by`` share a partition."""
    if isinstance(data, tuple) or not hasattr(data, "columns"):
        raise ValueError("by= needs a DataFrame (pandas or dask)")
    if by not in data.columns:
        raise ValueError(f"by={by!r} is not a column; the columns are {list(data.columns)}")
    restricted = threads is not None and client is not None and \
        set(threads) != set(_threads(client))
    if client is None:
        threads = {}
    elif threads is None:
        threads = _threads(client)
    k = n_partitions or max(1, sum(threads.values()) if threads else 1)
    if inputs.is_dask(data):
        # the task-based shuffle: the P2P one logs WARNINGs at every start and end
        parts = _from_dask(data.shuffle(on=by, npartitions=k, shuffle_method="tasks"),
                           client, None, spread=False)
        return _balance(parts, threads) if restricted else parts
    import pandas as pd

    group = (pd.util.hash_array(data[by].to_numpy()) % np.uint64(k)).astype(np.int64)
    order = np.argsort(group, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(group, minlength=k))))
    return _from_memory(data.iloc[order].reset_index(drop=True), client, None, bounds=bounds,
                        threads=threads or None)
