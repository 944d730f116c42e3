"""Training data as partitions held by the workers: :class:`Partitions` (placing them:
:mod:`.placing`)."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from ..cluster import PauseWatch, check_client
from . import inputs
from .worker import Partition, drop_state, fit_spill_target, io_counters

__all__ = ["LOCAL", "WAIT_INTERVAL", "Partitions"]

LOCAL = "local"
#: Seconds between checks of the workers while partitions are computed (see PauseWatch).
WAIT_INTERVAL = 2.0


def _client_of(client):
    """A distributed.Client, or None for the in-process mode ("local", or no client).

    Raises
    ------
    ValueError, TypeError
        See :func:`~dask_ps.cluster.check_client` (a closed client, not a client).
    """
    check_client(client)
    if isinstance(client, str):
        return None
    if client is not None:
        return client
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


class Partitions:
    """Data partitions, each held by one worker (or, without a cluster, by this process).

    Made by :func:`partition` (or :meth:`map`); used by :meth:`dask_ps.PSModel.fit_partitions`
    and :meth:`dask_ps.PSModel.run`, which run each task on the worker holding its partitions.
    The partitions stay where they are for the object's life: they are cached once in worker
    memory (Dask spills them to local disk when memory is short and reads them back from
    there) and never read from their source again, unless a worker is lost — then Dask
    recomputes the lost ones elsewhere (in-memory input is scattered again from this process).

    Attributes
    ----------
    n_rows : list of int
        Rows of each partition.
    nbytes : list of int
        Bytes of each partition (``dask.sizeof``).
    workers : list of str
        Address of the worker holding each partition ("local" without a cluster).
    uid : str
        Identity of this set of partitions (names its worker-local state).
    """

    def __init__(self, client, parts: list, workers: list[str], sizes: list[tuple[int, int]],
                 *, start: dict | None = None, placed: dict | None = None,
                 recipe: tuple | None = None) -> None:
        self.uid = uuid.uuid4().hex[:12]
        self.client = client
        self._parts = list(parts)  # futures, or values in-process
        self.workers = list(workers)
        self.n_rows = [int(s[0]) for s in sizes]
        self.nbytes = [int(s[1]) for s in sizes]
        self._start = start  # io counters before the data was read (for report())
        self._placed = placed or start  # ... once it was in place (transfers since then)
        # how to make partition i again when its worker is lost and Dask cannot recompute
        # it (scattered input): ("scatter", source, bounds) or ("map", parent, fn, args, kw)
        self._recipe = recipe
        self._released = False

    # -- what there is -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._parts)

    @property
    def is_local(self) -> bool:
        """Whether the partitions live in this process (no cluster)."""
        return self.client is None

    @property
    def futures(self) -> list:
        """The Dask futures of the partitions (empty without a cluster)."""
        return [] if self.is_local else list(self._parts)

    @property
    def total_rows(self) -> int:
        return int(sum(self.n_rows))

    @property
    def starts(self) -> list[int]:
        """Row number, in the whole data, of each partition's first row."""
        return inputs.first_rows(self.n_rows)

    def __repr__(self) -> str:
        where = "in-process" if self.is_local else f"on {len(set(self.workers))} workers"
        return (f"<Partitions {self.uid}: {len(self)} partitions, {self.total_rows:,} rows, "
                f"{sum(self.nbytes):,} bytes, {where}>")

    def __getstate__(self):
        raise TypeError("Partitions live on the driver and are not sent to tasks: tasks get "
                        "Partition handles (see PSModel.fit_partitions); a task that uses a "
                        "Partitions object, e.g. to start a job, is refused: jobs start from "
                        "the driver")

    def refs(self) -> list[Partition]:
        """A :class:`Partition` handle per partition, to hand to tasks."""
        self._check()
        if self.is_local:
            return [Partition(self.uid, i, None, n, v)
                    for i, (v, n) in enumerate(zip(self._parts, self.n_rows))]
        return [Partition(self.uid, i, f.key, n) for i, (f, n) in
                enumerate(zip(self._parts, self.n_rows))]

    def tasks(self, nthreads: dict[str, int] | None = None) -> list[tuple[str, list[int]]]:
        """Partitions grouped into tasks: ``(worker, partition indices)``, one task per
        thread of each worker holding partitions (a worker's partitions dealt round-robin
        over its threads); one task per partition without a cluster."""
        if self.is_local:
            return [(LOCAL, [i]) for i in range(len(self))]
        if nthreads is None:
            nthreads = self.client.nthreads()
        out = []
        for w in sorted(set(self.workers)):
            mine = [i for i, pw in enumerate(self.workers) if pw == w]
            k = max(1, min(len(mine), int(nthreads.get(w, 1))))
            out += [(w, mine[j::k]) for j in range(k)]
        return out

    # -- deriving new partitions ---------------------------------------------------------
    def map(self, fn: Callable, *args, with_start: bool = False, **kwargs) -> "Partitions":
        """New partitions ``fn(value, *args, **kwargs)`` of each partition, computed on the
        worker holding it (e.g. encoding, binning). The new ones have the same workers;
        this object stays valid until released. ``with_start``: ``fn(value, *args,
        start=start, **kwargs)``, ``start`` the partition's first row in the whole data
        (:attr:`starts`, for errors that name a row).

        Raises
        ------
        Exception
            The first error of ``fn`` (e.g. bad input naming its partition).
        """
        self._check()
        kws = [dict(kwargs, start=s) if with_start else kwargs for s in self.starts]
        if self.is_local:
            values = [fn(v, *args, **kw) for v, kw in zip(self._parts, kws)]
            return Partitions(None, values, self.workers,
                              [inputs.describe(v, index=i) for i, v in enumerate(values)],
                              start=self._start, placed=self._placed)
        futs = [self.client.submit(fn, f, *args, workers=[w], allow_other_workers=True,
                                   pure=False, **kw)
                for f, w, kw in zip(self._parts, self.workers, kws)]
        out = _finish(self.client, futs, start=self._start, placed=self._placed)
        out._recipe = (("map", self, fn, args, kwargs, with_start)
                       if self._recipe is not None else None)
        return out

    def reduce(self, fn: Callable, combine: Callable | None = None, *args,
               with_start: bool = False) -> Any:
        """``fn(value, *args)`` of each partition, run where it lives; only the results
        travel. Returns their list, in partition order, or ``combine`` applied pairwise
        (``functools.reduce``) when given. ``with_start``: ``fn(value, start, *args)``,
        ``start`` the partition's first row in the whole data (:attr:`starts`, for errors
        that name a row)."""
        import functools

        self._check()
        first = [(s,) if with_start else () for s in self.starts]
        if self.is_local:
            results = [fn(v, *s, *args) for v, s in zip(self._parts, first)]
        else:
            futs = [self.client.submit(fn, f, *s, *args, workers=[w], allow_other_workers=True,
                                       pure=False)
                    for f, w, s in zip(self._parts, self.workers, first)]
            results = self.client.gather(futs)
        return results if combine is None else functools.reduce(combine, results)

    # -- failures ------------------------------------------------------------------------
    def locate(self) -> list[str]:
        """Wait for every partition to be in memory again (after a lost worker) and return
        their workers: Dask recomputes lost partitions from their source; scattered ones are
        scattered again from this process.

        Raises
        ------
        Exception
            The first partition's error.
        """
        self._check()
        if self.is_local:
            return self.workers
        from distributed import wait

        while True:
            for i, f in enumerate(self._parts):
                # a partition computed from a dask graph comes back by itself (Dask
                # recomputes it); one scattered from this process has no graph: scatter it
                # again
                if self._recipe is not None and f.status in ("lost", "cancelled", "error"):
                    self._parts[i] = self._remake(i)
            wait(self._parts)
            for i, f in enumerate(self._parts):
                if f.status == "error":
                    f.result()
                if f.status == "cancelled" and self._recipe is None:
                    raise RuntimeError(f"partition {i} was lost and cannot be made again")
            who = self.client.who_has(self._parts)
            if all(who.get(f.key) for f in self._parts):
                break
            # the scheduler lost one that this client still sees as in memory: its news of
            # the loss is on the way (then the wait above waits for it again)
            time.sleep(0.05)
        self.workers = [who[f.key][0] for f in self._parts]
        return self.workers

    def _remake(self, i: int):
        """A future of partition ``i`` made again from its recipe (scattered input)."""
        if self._recipe is None:
            raise RuntimeError(f"partition {i} was lost and cannot be made again")
        if self._recipe[0] == "scatter":
            _, source, bounds = self._recipe
            piece = inputs.slice_rows(source, int(bounds[i]), int(bounds[i + 1]))
            return self.client.scatter([piece], hash=False)[0]
        _, parent, fn, args, kwargs, with_start = self._recipe
        base = parent._parts[i] if not parent._released else parent._remake(i)
        if base.status in ("lost", "cancelled", "error"):
            base = parent._remake(i)
        if with_start:
            kwargs = dict(kwargs, start=parent.starts[i])
        return self.client.submit(fn, base, *args, pure=False, **kwargs)

    # -- what the data cost ----------------------------------------------------------------
    def report(self) -> dict:
        """What the data has cost since it was first read.

        Returns
        -------
        dict
            ``source_reads`` (blocks of source files read by :mod:`dask_ps.io` readers),
            ``source_bytes``, ``max_reads_per_block`` (1 when no block was read twice),
            ``bytes_in_memory`` and ``bytes_on_disk`` (the partitions now, in worker memory
            and spilled by Dask to local disk), ``incoming_transfers`` and
            ``incoming_transfer_bytes`` (data moved between workers since :func:`partition`
            placed the partitions; 0 when every task ran where its partitions were). Empty
            without a cluster.
        """
        if self.is_local or self._start is None:
            return {}
        self._check_client()
        now = self.client.run(io_counters, keys=[f.key for f in self._parts])
        reads: dict = {}
        out = dict(source_reads=0, source_bytes=0, bytes_in_memory=0, bytes_on_disk=0,
                   incoming_transfers=0, incoming_transfer_bytes=0)
        empty = {"reads": {}, "incoming_count": 0, "incoming_bytes": 0}
        for addr, w in now.items():
            before = self._start.get(addr, empty)
            placed = self._placed.get(addr, empty)
            for block, (n, nbytes) in w["reads"].items():
                n0, b0 = before["reads"].get(block, (0, 0))
                if n > n0:
                    reads[block] = reads.get(block, 0) + n - n0
                    out["source_bytes"] += nbytes - b0
            out["incoming_transfers"] += w["incoming_count"] - placed["incoming_count"]
            out["incoming_transfer_bytes"] += w["incoming_bytes"] - placed["incoming_bytes"]
            out["bytes_in_memory"] += w["in_memory"]
            out["bytes_on_disk"] += w["on_disk"]
        out["source_reads"] = sum(reads.values())
        out["max_reads_per_block"] = max(reads.values(), default=0)
        return out

    # -- life ------------------------------------------------------------------------------
    def _check(self) -> None:
        """Refuse a use after :meth:`release`, or after the client closed (Dask's own
        errors said "IOLoop is closed" or "Client is closed. Can't send update-graph
        message", naming neither the data nor what to do)."""
        if self._released:
            raise RuntimeError(f"partitions {self.uid} were released")
        self._check_client()

    def _check_client(self) -> None:
        if self.client is not None and self.client.status in ("closing", "closed"):
            raise RuntimeError(f"partitions {self.uid}: their client is {self.client.status}, "
                               f"and their data with it (Dask frees a closed client's futures): "
                               f"partition the data again "
                               f"with an open client")

    def release(self) -> None:
        """Let Dask free the partitions and drop their worker-local state
        (:attr:`Partition.state`) on every worker. Idempotent. Only this object's own
        futures are released: partitions made of a caller's futures (:func:`partition` of
        a list of futures) stay alive while the caller holds those futures."""
        if self._released:
            return
        self._released = True
        if self.is_local:
            drop_state(self.uid)
        else:
            try:
                self.client.run(drop_state, self.uid)
            except Exception:  # closing must not fail because a worker is leaving
                pass
            for f in self._parts:
                f.release()
        self._parts = []

    def __enter__(self) -> "Partitions":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _finish(client, futures: list, *, start, placed=None, spill: bool = True,
            first_rows: list[int] | None = None, some_rows: str | None = None,
            most: int | None = None) -> Partitions:
    """Partitions of computed ``futures`` (waited for; the first error raised); ``placed``:
    the io counters once in place, default now; ``spill=False``: :func:`fit_spill_target`
    already ran on the workers (``start`` from :func:`~.worker.placing_counters`);
    ``first_rows``: each one's first row in the whole data, when known (named by
    :func:`~.inputs.describe`'s errors); ``some_rows``: refuse futures without any row
    (:func:`~.inputs.check_some_rows`, told what they are), told by their descriptions;
    ``most``: refuse arrays of more dimensions (:func:`~.inputs.describe`)."""
    from distributed import wait

    # the workers spill what they read early enough to keep room for the rest of the process
    if spill:
        client.run(fit_spill_target)
    # each partition is described as soon as it lands, where it lands (one round trip of
    # the scheduler fewer than describing them after the wait: ~20 ms of 10 tasks, measured)
    described = client.map(inputs.describe, futures, first_rows or [0] * len(futures),
                           range(len(futures)), pure=False, most=most)
    watch = PauseWatch(client, f"computing {len(futures)} partitions")
    while True:
        try:
            wait(futures, timeout=WAIT_INTERVAL)
            break
        except TimeoutError:
            pending = sum(not f.done() for f in futures)
            try:
                watch.check(pending, len(futures))
            except MemoryError:
                # released, not cancelled: a cancel would cancel the keys for every
                # future of this client, also a caller's futures of the same keys
                for f in futures + described:
                    f.release()
                raise
    for f in futures:
        if f.status == "error":
            client.cancel(described)
            f.result()
    try:
        sizes = client.gather(described)
    except Exception:  # a refused partition (no rows, 3-D): nothing kept on the workers
        for f in futures + described:  # released, not cancelled (the caller's futures stay)
            f.release()
        raise
    if some_rows is not None:
        try:
            inputs.check_some_rows([rows for rows, _ in sizes], some_rows)
        except ValueError:
            for f in futures:  # released, not cancelled (the caller's futures stay)
                f.release()
            raise
    who = client.who_has(futures)
    placed = placed if placed is not None else client.run(io_counters)
    return Partitions(client, futures, [who[f.key][0] for f in futures], sizes, start=start,
                      placed=placed)
