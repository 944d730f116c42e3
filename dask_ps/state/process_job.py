"""What one process knows of a running job (:class:`_Job`: its tasks' clocks, the pushes
buffered per clock, the queued clock, the kept values) and what a pull keeps or computes
beside it (:class:`_Snapshot`, :class:`_Meanwhile`, :class:`_Spread`); used by
:class:`~dask_ps.state.client.ProcessClient` only."""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from ._kernels import fingerprint, scatter_1d
from .consistency import Consistency
from .optimizers import Add
from .partition import HashPartitioner
from .table import Init, TableShard, TableSpec

__all__: list[str] = []


class _Snapshot:
    """Values one shard returned for a table, kept while the consistency model allows."""

    def __init__(self, spec: TableSpec, tag: int, fetched_at: int, flushes: int = 0) -> None:
        store_spec = TableSpec(spec.name, None, spec.ncols, False, spec.dtype,
                               HashPartitioner(1), Add(), Init())
        self.store = TableShard(store_spec, 0, recall=False)
        self.tag = tag
        self.fetched_at = fetched_at
        self.flushes = flushes  # the process's _Job.flushes when it was fetched

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        return self.store.rows(keys, create=False)

    def insert(self, keys: np.ndarray, values: np.ndarray, tag: int) -> None:
        rows = self.store.rows(keys, create=True)
        self.store.values[rows] = values
        self.tag = min(self.tag, tag)


@dataclass
class _Job:
    """What one process knows of a running job."""

    participant: int
    n_local: int
    consistency: Consistency
    job_id: str
    clocks: dict = field(default_factory=dict)  # local task -> clock
    process_clock: int = 0
    pending: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    inflight: Future | None = None  # the answer to a push sent on its own
    snapshots: dict = field(default_factory=dict)  # (table, shard) -> _Snapshot
    failure: BaseException | None = None  # set when a task of this process failed
    # The flushed clock not sent yet, (per-shard updates, clock): it leaves with the next
    # pull, or after SEND_DELAY (see ProcessClient._poll); taken under ProcessClient._outbox.
    outbox: tuple | None = None
    outbox_since: float = 0.0
    carried: int = 0  # clocks in a row that left without the poll (see ProcessClient._poll)
    polling: bool = False  # a ProcessClient._poll is scheduled; under ProcessClient._outbox
    # Under ProcessClient._lock: the times buffered pushes were queued to leave; for each
    # task, the one that took its last pushes; that of the task pulling now (ASP: see ahead)
    flushes: int = 0
    needs: dict = field(default_factory=dict)
    need: int = 0

    @property
    def use_cache(self) -> bool:
        """Whether a kept value can ever be served again: by another task of this process at
        the same clock, or by this task within the staleness bound."""
        s = self.consistency.staleness
        return self.n_local > 1 or (s is not None and s > 0)

    def split(self, clock: int, plan_updates) -> list[list]:
        """The pushes buffered for ``clock``, merged by task index (a stable sort: a task's
        own pushes keep their order) and split per shard by ``plan_updates``; the flush
        that takes them (the next) is each of their tasks' ``needs``."""
        by_table = self.pending.pop(clock, {})
        for parts in by_table.values():
            self.needs.update((p[0], self.flushes + 1) for p in parts)
        return plan_updates({name: [p[1:] for p in sorted(parts, key=lambda p: p[0])]
                             for name, parts in by_table.items()})

    def ahead(self, clock: int, task, plan_updates, lock) -> bool:
        """ASP: ``task`` at ``clock``, which may be ahead of the process's clock, reads its
        writes. The pushes buffered for clocks before ``clock`` (its own, its siblings' so
        far) join the queued clock (each clock's merged apart, after it) or are queued with
        the tick the shards have; the siblings' later pushes of those clocks leave with
        the process's clock. Sets :attr:`need`; under the client's lock, ``lock`` its
        ``_outbox``. Returns whether a clock was queued."""
        ahead = sorted(c for c in self.pending if c < clock)
        if ahead:
            split = [self.split(c, plan_updates) for c in ahead]
            with lock:
                if self.outbox is None:
                    self.outbox = ([[] for _ in split[0]], self.process_clock - 1)
                    self.outbox_since = time.monotonic()
                self.outbox = ([sum((p[s] for p in split), u) for s, u in
                                enumerate(self.outbox[0])], self.outbox[1])
            self.flushes += 1
        self.need = self.needs.get(task, 0)
        return bool(ahead)

    def snapshot_valid(self, snap: _Snapshot, clock: int) -> bool:
        s = self.consistency.staleness
        if s is None:  # ASP: share within a clock, refresh at every new one and for a task
            # whose pushes left since (it reads its writes: see ahead)
            return snap.fetched_at >= clock and snap.flushes >= self.need
        return snap.tag >= clock - s


class _Meanwhile:
    """What a pull computes while the shards answer: its plan's deferred ``inverse`` (or
    dedup), to recognise the keys of the push that follows, and their hash.

    An iterator of steps, each a slice of that work (well under a millisecond for 10^6
    keys), which the transport advances while no answer is waiting to be read
    (:meth:`~dask_ps.state.transport.Transport.call_many`): done at once, 3-5 ms of it kept
    the pull from reading the shards' first answers, and a remote shard whose answers filled
    the connection's buffers then waited, its next lookups too, until it was done (7 ms in
    one pull on a slow machine). Calling it finishes the steps left and returns
    ``(plan, hash)``.
    """

    def __init__(self, spec: TableSpec, plan, keys: np.ndarray, remember: bool) -> None:
        self.spec, self.plan, self.keys, self.remember = spec, plan, keys, remember
        self.result = None
        self._steps = self._run()

    def _run(self):
        plan = yield from self.spec.partitioner.completion(self.plan, self.keys)
        if self.remember:
            yield
        self.result = plan, (fingerprint(self.keys) if self.remember else 0)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._steps)

    def __call__(self):
        for _ in self._steps:
            pass
        return self.result


class _Spread:
    """A pull's values put in the caller's order piece by piece, as the shards' answers
    arrive, rather than all at once after the last one: for a plan that sent every place
    (its dedup waited, see :func:`~dask_ps.state.partition.plan_hashed`), whose places are
    then a permutation of the caller's keys. Putting 10^6 values in order took 1.2-1.6 ms
    after the last answer of a remote pull in 8 pieces; spread, each piece's reply is read
    and put in under 0.1 ms while the next ones are on their way.

    The pull sets :attr:`active` false before any answer when its places do not all come
    from the shards (some served by the process's snapshot): it then expands as before.
    While active, the answers go here only: the pull's values are :meth:`result`.

    Parameters
    ----------
    plan : KeyPlan
        With every place kept and ``plan.order`` the caller's position of each (a
        permutation).
    ncols : int
    dtype : numpy.dtype
    """

    def __init__(self, plan, ncols: int, dtype) -> None:
        self.order = plan.order
        self.out = np.empty((plan.order.shape[0], ncols), dtype)
        self.active = True
        self.filled = 0
        self.placed: set = set()  # the first place of each slice put

    def put(self, where: slice, values: np.ndarray) -> None:
        """Put the values of the places ``where`` (a slice; shape (m, ncols)); a slice put
        again is overwritten (counted once)."""
        order = self.order[where]
        if values.shape[1] == 1:
            scatter_1d(values.reshape(-1), order, self.out.reshape(-1))
        else:
            self.out[order] = values
        if where.start not in self.placed:
            self.filled += order.shape[0]
            self.placed.add(where.start)

    def result(self) -> np.ndarray:
        """The values in the caller's order, shape (n, ncols).

        Raises
        ------
        RuntimeError
            Some places were never put (a bug: their values would be garbage).
        """
        if self.filled != self.out.shape[0]:
            raise RuntimeError(f"a pull put {self.filled} of its {self.out.shape[0]} values "
                               f"in order; the others never arrived")
        return self.out
