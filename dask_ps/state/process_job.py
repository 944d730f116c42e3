"""What one process knows of a running job (:class:`_Job`: its tasks' clocks, the pushes
buffered per clock, the queued clock, the kept values) and what a pull keeps or computes
beside it (:class:`_Snapshot`, :class:`_Meanwhile`); used by
:class:`~dask_ps.state.client.ProcessClient` only."""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from ._kernels import fingerprint
from .consistency import Consistency
from .optimizers import Add
from .partition import HashPartitioner
from .table import Init, TableShard, TableSpec

__all__: list[str] = []


class _Snapshot:
    """Values one shard returned for a table, kept while the consistency model allows."""

    def __init__(self, spec: TableSpec, tag: int, fetched_at: int) -> None:
        store_spec = TableSpec(spec.name, None, spec.ncols, False, spec.dtype,
                               HashPartitioner(1), Add(), Init())
        self.store = TableShard(store_spec, 0, recall=False)
        self.tag = tag
        self.fetched_at = fetched_at

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
    carried: int = 0  # clocks in a row whose push left with a pull (see ProcessClient._poll)

    @property
    def use_cache(self) -> bool:
        """Whether a kept value can ever be served again: by another task of this process at
        the same clock, or by this task within the staleness bound."""
        s = self.consistency.staleness
        return self.n_local > 1 or (s is not None and s > 0)

    def snapshot_valid(self, snap: _Snapshot, clock: int) -> bool:
        s = self.consistency.staleness
        if s is None:  # ASP: share within a clock, refresh at every new one
            return snap.fetched_at >= clock
        return snap.tag >= clock - s


class _Meanwhile:
    """What a pull computes while the shards answer: its plan's deferred ``inverse`` and, to
    recognise the keys of the push that follows, their hash. Runs once; calling it again
    returns ``(plan, hash)``."""

    def __init__(self, spec: TableSpec, plan, keys: np.ndarray, remember: bool) -> None:
        self.spec, self.plan, self.keys, self.remember = spec, plan, keys, remember
        self.result = None

    def __call__(self):
        if self.result is None:
            plan = self.spec.partitioner.complete(self.plan, self.keys)
            self.result = plan, (fingerprint(self.keys) if self.remember else 0)
        return self.result
