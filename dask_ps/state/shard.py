"""The shard: a Dask actor holding one part of every table of a model.

All methods are ``async def``, so they run on the worker's event loop: they never wait for
the single thread that Dask gives to the synchronous actor methods of a worker, a pull that
must wait for slower clocks parks without holding any thread, and, as the loop runs one
method at a time, the tables need no lock. The work they do inline is a numba gather or
scatter of at most a few milliseconds.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import numpy as np

from ._malloc import tune_malloc
from .consistency import DONE, ClockTable, Consistency
from .partition import merge_duplicates
from .table import TableShard, TableSpec
from .transport import packed

__all__ = ["Shard"]


class Shard:
    """One shard of a :class:`~dask_ps.PSModel`: its part of each table and the job's clocks.

    Parameters
    ----------
    shard : int
        Index of this shard, in ``range(n_shards)``.
    n_shards : int
        Number of shards of the model.

    Notes
    -----
    Created by :class:`~dask_ps.PSModel` with ``client.submit(Shard, ..., actor=True)``, or
    in the calling process when no Dask client is active. Callers go through
    :class:`~dask_ps.state.client.ProcessClient`, never through this class directly.
    """

    def __init__(self, shard: int, n_shards: int) -> None:
        tune_malloc()  # in a Dask worker: see dask_ps.state._malloc
        self.shard = shard
        self.n_shards = n_shards
        self.tables: dict[str, TableShard] = {}
        self.job: str | None = None
        self.clocks: ClockTable | None = None
        self._pending: dict[int, list] = defaultdict(list)
        self._waiters: list[asyncio.Future] = []
        self.counters = dict(pull_calls=0, push_calls=0, keys_pulled=0, keys_pushed=0,
                             bytes_pulled=0, bytes_pushed=0)

    _METHODS = frozenset({"create_table", "drop_table", "start_job", "end_job", "pull", "push",
                          "push_pull", "finish", "apply", "load_rows", "stats"})

    async def dispatch(self, call: tuple):
        """Run ``(method, args, kwargs)``: the one entry point of remote callers. The result
        goes back as one pickle (see :func:`~dask_ps.state.transport.packed`)."""
        method, args, kwargs = call
        if method not in self._METHODS:
            raise AttributeError(f"shard {self.shard} has no method {method!r}")
        return packed(await getattr(self, method)(*args, **kwargs))

    # -- tables ---------------------------------------------------------------------------
    async def create_table(self, spec: TableSpec) -> int:
        """Allocate this shard's part of ``spec``; returns its size in bytes."""
        if spec.name in self.tables:
            raise ValueError(f"table {spec.name!r} already exists on shard {self.shard}")
        self.tables[spec.name] = TableShard(spec, self.shard)
        return self.tables[spec.name].nbytes

    async def drop_table(self, name: str) -> None:
        self.tables.pop(name, None)

    def _table(self, name: str) -> TableShard:
        try:
            return self.tables[name]
        except KeyError:
            raise KeyError(f"table {name!r} is not on shard {self.shard}") from None

    # -- jobs and clocks -----------------------------------------------------------------
    async def start_job(self, job: str, n_participants: int, consistency: Consistency) -> None:
        """Begin a job of ``n_participants`` clocks at 0; a previous job's leftovers go."""
        self.job = job
        self.clocks = ClockTable(n_participants, consistency)
        self._pending.clear()

    async def end_job(self, job: str) -> None:
        """Close ``job``; pulls waiting in it fail. Updates still held (BSP) belong to clocks
        that not every participant finished (the job failed): they are dropped, as they
        would be without a cluster."""
        if self.job == job:
            self._pending.clear()
            self.job, self.clocks = None, None
            self._notify()

    def _check_job(self, job: str | None) -> ClockTable | None:
        if job is None:
            return None
        if job != self.job:
            raise RuntimeError(f"shard {self.shard}: job {job!r} is not running "
                               f"(current: {self.job!r})")
        return self.clocks

    def _notify(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    async def _wait_ready(self, job: str, clock: int, timeout: float, what: str) -> None:
        """Park (no thread held) until a pull at ``clock`` may be served, or the job ends."""
        clocks = self.clocks
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.job == job and not clocks.ready(clock):
            fut = loop.create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                slow = np.flatnonzero(clocks.clocks == clocks.min_clock).tolist()
                raise TimeoutError(
                    f"shard {self.shard}: {what} at clock {clock} waited {timeout:g} s for "
                    f"participants {slow} stuck at clock {clocks.min_clock} "
                    f"(staleness {clocks.consistency.staleness})"
                ) from None
        if self.job != job:
            raise RuntimeError(f"shard {self.shard}: job {job!r} ended while a {what} waited")

    # -- pull / push ---------------------------------------------------------------------
    async def pull(self, name: str, keys: np.ndarray, job: str | None = None,
                   clock: int = 0, timeout: float = 300.0) -> tuple[np.ndarray, int]:
        """Values of ``keys`` (distinct, shard-local), once the consistency model allows.

        Returns the values, shape (len(keys), ncols), and the slowest clock they reflect.
        """
        table = self._table(name)
        clocks = self._check_job(job)
        if clocks is not None:
            await self._wait_ready(job, clock, timeout, f"pull of table {name!r}")
        out = table.gather(keys)
        c = self.counters
        c["pull_calls"] += 1
        c["keys_pulled"] += keys.shape[0]
        c["bytes_pulled"] += out.nbytes + keys.nbytes
        return out, (DONE if clocks is None else clocks.min_clock)

    async def push(self, updates: list, job: str | None = None, participant: int = 0,
                   clock: int = 0, tick: bool = False) -> int:
        """Apply (or, under BSP, hold until the barrier) ``updates`` made at ``clock``.

        ``updates`` is a list of ``(table, keys, values)``, keys distinct and shard-local.
        With ``tick``, ``participant`` then moves to ``clock + 1``. Returns the slowest clock.
        """
        for name, keys, values in updates:
            self._table(name)
            self.counters["keys_pushed"] += keys.shape[0]
            self.counters["bytes_pushed"] += keys.nbytes + values.nbytes
        self.counters["push_calls"] += 1
        clocks = self._check_job(job)
        if clocks is None or not clocks.consistency.buffered:
            for name, keys, values in updates:
                self.tables[name].apply(keys, values)
        elif updates:
            self._pending[clock].append((participant, updates))
        if clocks is not None and tick and clocks.advance(participant, clock + 1):
            if clocks.consistency.buffered:
                self._flush_pending(clocks.min_clock)
            self._notify()
        return DONE if clocks is None else clocks.min_clock

    async def push_pull(self, updates: list, job: str | None = None, participant: int = 0,
                        push_clock: int = 0, name: str | None = None, keys=None,
                        clock: int = 0, timeout: float = 300.0):
        """:meth:`push` of a clock (with its tick), then :meth:`pull` (if ``name``): one
        message per shard for the usual push-clock-pull step."""
        await self.push(updates, job, participant, push_clock, tick=True)
        if name is None:
            return None
        return await self.pull(name, keys, job, clock, timeout)

    def _flush_pending(self, upto: int) -> None:
        """Apply the held updates of clocks ``< upto``: per clock, per table, one summed step."""
        for c in sorted(k for k in self._pending if k < upto):
            by_table: dict[str, list] = defaultdict(list)
            for _, updates in sorted(self._pending.pop(c), key=lambda item: item[0]):
                for name, keys, values in updates:
                    by_table[name].append((keys, values))
            for name, parts in by_table.items():
                if len(parts) == 1:
                    keys, values = parts[0]
                else:
                    keys, values = merge_duplicates(np.concatenate([k for k, _ in parts]),
                                                    np.concatenate([v for _, v in parts]))
                self.tables[name].apply(keys, values)

    async def finish(self, job: str, participant: int) -> None:
        """``participant`` has left the job: it no longer holds the others back."""
        clocks = self._check_job(job)
        if clocks.advance(participant, DONE):
            if clocks.consistency.buffered:
                self._flush_pending(clocks.min_clock)
            self._notify()

    # -- functions next to the data ------------------------------------------------------
    async def apply(self, name: str, fn, *args):
        """``fn(keys, values, slots, *args)`` on this shard's rows of ``name``; its result.

        ``keys`` (n,) int64 are global keys, ``values`` (n, ncols) and ``slots`` (a dict of
        (n, width) arrays) are views: ``fn`` may update them in place.
        """
        keys, values, slots = self._table(name).view()
        return fn(keys, values, slots, *args)

    async def load_rows(self, name: str, keys: np.ndarray, values: np.ndarray,
                        slots: dict) -> int:
        """Overwrite (or create) rows of ``name`` from a checkpoint, bypassing the update
        rule; see :meth:`TableShard.set_rows`. Returns the rows held afterwards."""
        table = self._table(name)
        table.set_rows(keys, values, slots)
        return table.n_rows

    async def stats(self) -> dict:
        """Counters, table sizes and clocks, for diagnostics."""
        return dict(
            shard=self.shard, time=time.time(), **self.counters,
            tables={n: dict(rows=t.n_rows, nbytes=t.nbytes) for n, t in self.tables.items()},
            job=self.job,
            clocks=None if self.clocks is None else self.clocks.clocks.tolist(),
            staleness_bound=None if self.clocks is None else self.clocks.consistency.staleness,
        )
