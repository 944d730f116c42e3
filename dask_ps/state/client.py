"""The worker side of the parameter server: batched pull/push, clocks, one snapshot per process.

One :class:`ProcessClient` per model and process holds what the tasks (threads) of that process
share: the transport to the shards, the snapshot of pulled values, and the updates pushed during
each clock. A task sees it through a :class:`~dask_ps.view.WorkerView`.

* A pull deduplicates its keys, splits them by shard and makes one call per shard, concurrently
  (the keys of a hashed table may leave before the dedup, which then runs while the shards
  answer: see :func:`~dask_ps.state.partition.plan_hashed`); a large one to a remote shard
  goes in pieces (:func:`~dask_ps.state.wire_forms.piece_bounds`), sent back to back.
* Pushes are buffered and merged per clock; when every task of the process has finished a clock,
  one push per shard carries the merged updates of all tables and the clock tick
  (the process cache of Petuum's SSP table, Ho et al., NIPS 2013). Under ASP a task ahead of
  the others sends what is buffered for its earlier clocks with its pull: it reads its writes.
* That push leaves with the process's next pull (one message per shard for both), or on its own
  after ``SEND_DELAY`` seconds; the next one waits for it to be answered, so a participant's
  pushes reach each shard in order. Its errors surface on the next call. The outbox is checked
  only while a clock waits there, and every ``IDLE_POLL`` seconds instead of ``SEND_DELAY``
  once the process has sent its last ``PULLS_CARRY`` clocks itself (with its pulls, or by
  waiting): its event loop is not woken for nothing, taking the GIL from the task and
  channel threads (:class:`~._outbox.Outbox`).
* In a worker, a pull's requests to remote shards leave from the task's own thread over the
  shards' channels (:mod:`~dask_ps.state.channel`), without a hop to the event loop.
* With several tasks per process, or staleness > 0, pulled values are kept and served again while
  the consistency model allows, so N threads at one clock cost one pull per shard, not N
  (under ASP, N when each thread's push left after the others' pulls).
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from typing import NamedTuple

import numpy as np

from ..exceptions import ClosedModelError, UnknownTableError
from ._kernels import fingerprint
from ._malloc import FreezeGCFirst, tune_malloc
from ._outbox import Outbox, _gather, _nbytes
from .consistency import DONE, Consistency
from .merging import split_updates
from .process_job import _Job, _Meanwhile, _Snapshot, _Spread
from .table import RECALL_MIN, TableSpec, as_keys, bad_key_error, checked_update
from .transport import Shipped, Transport
from .wire_forms import piece_bounds

__all__ = ["ProcessClient"]


class _PlannedPull(NamedTuple):
    """A pull checked and planned by :meth:`ProcessClient.plan_pull`, not sent yet."""

    spec: TableSpec
    keys: np.ndarray  # int64 (n,), as the caller gave them with a checked plan
    plan: object  # a KeyPlan, its deferred parts left to the fetch (see _Meanwhile)
    job: str | None
    state: _Job | None
    # the last pulls of the thread that planned it (table -> what push() recognises), where
    # this pull is remembered when it is done, in whichever thread fetched it (pull_async)
    memo: dict


class ProcessClient(FreezeGCFirst, Outbox):
    """A model's shards as seen from one process; shared by the process's tasks.

    Parameters
    ----------
    specs : dict of str to TableSpec
        The model's tables (kept up to date by the model).
    transport : Transport
    """

    def __init__(self, specs: dict, transport: Transport) -> None:
        tune_malloc()  # in a Dask worker: see dask_ps.state._malloc
        self.specs = specs
        self.transport = transport
        self.jobs: dict[str, _Job] = {}
        self._lock = threading.RLock()
        self._clock_moved = threading.Condition(self._lock)
        self._outbox = threading.Lock()
        self._tls = threading.local()  # per thread: the plan of its last pull of each table
        # Bytes of keys and values this process sent to and got from the shards; reports
        # carry it. A diagnostic: counted without a lock, from the tasks' threads and the
        # loop, so concurrent additions may rarely be lost.
        self.bytes_moved = 0
        self.uid = uuid.uuid4().hex[:12]
        self._pulls = itertools.count()  # serial numbers of the keys_id of pulls
        self.closed: str | None = None  # why the connections were closed (see close)

    def close(self, why: str) -> None:
        """Close the connections to the shards (from any thread); later calls of the tasks
        still holding this client raise :class:`~dask_ps.exceptions.ClosedModelError` with
        ``why`` (see :meth:`job`)."""
        self.closed = why
        self.transport.close()

    def spec(self, name: str) -> TableSpec:
        try:
            return self.specs[name]
        except KeyError:
            raise UnknownTableError(name, self.specs) from None

    # -- pull ---------------------------------------------------------------------------
    def pull(self, name: str, keys, job: str | None = None, clock: int = 0,
             checked: bool = False, task: int = 0) -> np.ndarray:
        """Values of ``keys`` for ``task`` at ``clock`` of ``job`` (or outside any job).

        Returns shape (len(keys),) for a vector table, (len(keys), ncols) otherwise.
        ``checked``: ``keys`` are int64, distinct, ascending and in range (not checked).
        Raises what :meth:`plan_pull` refuses, then the errors of the fetch itself.
        """
        return self.pull_planned(self.plan_pull(name, keys, job, checked), clock, task)

    def plan_pull(self, name: str, keys, job: str | None = None,
                  checked: bool = False) -> _PlannedPull:
        """A pull of ``keys`` of table ``name`` in ``job`` (or outside any job), checked and
        planned, for :meth:`pull_planned`: all that a pull can refuse before it sends
        (``checked``: see :meth:`pull`).

        Raises
        ------
        UnknownTableError
            No table ``name``.
        TypeError, ValueError, IndexError
            Keys that are not integers, not 1-D, or (IndexError) outside a dense table's
            rows; no keys (None) for a sparse table. Each names the table (and the key).
        ClosedModelError, RuntimeError
            See :meth:`job`.
        """
        spec = self.spec(name)
        if checked:
            plan = spec.partitioner.plan_ascending(keys)
        else:
            if keys is None:
                if spec.sparse:
                    raise ValueError(f"table {name!r} is sparse: pass the keys to pull")
                keys = np.arange(spec.n_rows, dtype=np.int64)
            keys = as_keys(keys, spec)
            plan, bad = spec.partitioner.plan(keys, defer_inverse=True, defer_dedup=True)
            if bad >= 0:
                raise bad_key_error(spec, keys, bad)
        state = self.job(job) if job is not None else None
        return _PlannedPull(spec, keys, plan, job, state,
                            self._tls.__dict__.setdefault("last_pull", {}))

    def pull_planned(self, planned: _PlannedPull, clock: int = 0, task: int = 0) -> np.ndarray:
        """The values of a pull :meth:`plan_pull` made, for ``task`` at ``clock``: see
        :meth:`pull`. Its plan is remembered for the push that follows in the thread that
        planned it, also when this runs in another (``pull_async``)."""
        spec, keys, plan, job, state, memo = planned
        name = spec.name
        values = np.empty((plan.n_unique, spec.ncols), spec.dtype)
        spread = _Spread(plan, spec.ncols, spec.dtype) if plan.buckets.shape[0] else None
        meanwhile = _Meanwhile(spec, plan, keys, remember=state is not None)
        named = {} if state is not None and spec.sparse else None
        if state is None or not state.use_cache:
            self._raise_inflight(state)
            values = self._fetch(spec, plan, values, job, clock, state, False, meanwhile,
                                 named, spread)
        else:
            with self._lock:
                self._wait_local_clocks(state, clock)
                self._raise_inflight(state)
                if state.consistency.staleness is None and state.ahead(
                        clock, task, self._plan_updates, self._outbox):
                    self._arm_poll(job, state)
                values = self._fetch(spec, plan, values, job, clock, state, True, meanwhile,
                                     named, spread)
        sent = plan
        plan, key_hash = meanwhile()
        if sent.buckets.shape[0]:  # the dedup waited: values came per place
            if plan.local is not sent.local and named:
                named = {}  # repeats: the keys the shards kept are not the push's
            out = spread.result() if spread.active else sent.expand(values)
        else:
            out = plan.expand(values)
        if state is not None:  # remembered by value (hash), not by copy: see push
            memo[name] = (keys.shape[0], key_hash, plan, named)
        return out[:, 0] if spec.vector else out

    def _wait_local_clocks(self, state: _Job, clock: int) -> None:
        """Wait (lock released) until this process's own tasks allow a pull at ``clock``.

        The pulling thread then holds the lock while the shards wait for other processes only,
        which never wait for this one: no deadlock, and threads at one clock share one fetch.
        """
        s = state.consistency.staleness
        if s is None:
            return
        if not self._clock_moved.wait_for(
                lambda: state.process_clock >= clock - s or state.failure is not None,
                self.transport.timeout):
            raise TimeoutError(f"a task at clock {clock} waited {self.transport.timeout:g} s "
                               f"for the other tasks of its process (at clock "
                               f"{state.process_clock}, staleness {s})")
        if state.failure is not None:
            raise RuntimeError(f"job {state.job_id!r} stopped: another task of this process "
                               f"failed ({state.failure!r})")

    def _fetch(self, spec, plan, values, job, clock, state: _Job | None, cache: bool,
               meanwhile=None, named: dict | None = None,
               spread: _Spread | None = None) -> np.ndarray:
        """Fill ``values`` with what the snapshot cannot serve, fetched from the shards, and
        return it (or the one shard's answer that is all of it); the clock's push waiting in
        the outbox goes with it. ``meanwhile()`` runs while remote shards work on the
        requests. With ``named`` (a dict), the remote shards sent all of their keys of
        ``plan`` are asked to keep them under a name, recorded there per shard, for the
        push that follows (see :class:`~dask_ps.state.wire_forms.KeyRef`). With a
        ``spread`` whose places all come from the shards, the answers go there (as they
        arrive) instead of into ``values``; else it is made inactive.

        A shard gets at most one call: ``push_pull`` (the last clock's updates and tick, then
        this pull), ``pull`` or ``push``; straight from this thread when the transport is
        direct, else on the transport's loop.
        """
        requests = self._lookup(spec, plan, values, clock, state, cache)
        if spread is not None:
            spread.active = (all(isinstance(w, slice) for _, w in requests.values())
                             and sum(k.shape[0] for k, _ in requests.values())
                             == plan.n_unique)
        box = self._take_outbox(state)
        if box is not None:
            state.carried += 1
        if not requests and box is None:
            return values
        if cache and state.consistency.staleness is None:  # ASP: the poll's push first
            self._raise_inflight(state, wait=True)  # (the snapshot's flushes hold it)
        calls, places = self._calls(spec, plan, requests, box, job, clock, state, named)
        spread = spread if spread is not None and spread.active else None
        if self.transport.direct:
            def arrived(i, result):
                if places[i] is not None:
                    spread.put(places[i][1], result[0])
            results = self.transport.call_many(calls, self.transport.timeout + 5, meanwhile,
                                               arrived if spread is not None else None)
        else:
            results = self.transport.run(_gather(
                self.transport.call(s, method, _timeout=self.transport.timeout + 5, **kwargs)
                for s, method, kwargs in calls))
        return self._store(spec, places, calls, results, values, clock, state, cache, spread)

    def _lookup(self, spec, plan, values, clock, state, cache: bool) -> dict:
        """Serve what the snapshot holds; returns, per shard, (keys to fetch, where their
        values go in ``values``)."""
        requests = {}
        for s in range(plan.offsets.shape[0] - 1):
            sl = plan.shard_slice(s)
            if sl.start == sl.stop:
                continue
            keys = plan.local[sl]
            snap = state.snapshots.get((spec.name, s)) if cache else None
            if snap is not None and not state.snapshot_valid(snap, clock):
                del state.snapshots[(spec.name, s)]
                snap = None
            if snap is None:
                requests[s] = (keys, sl)  # a slice: the copy in _store is a memcpy
                continue
            rows = snap.lookup(keys)
            hit = rows >= 0
            values[sl][hit] = snap.store.values[rows[hit]]
            if not hit.all():
                requests[s] = (keys[~hit], sl.start + np.flatnonzero(~hit))
        return requests

    def _calls(self, spec, plan, requests: dict, box, job, clock, state,
               named: dict | None = None) -> tuple[list, list]:
        """The ``(shard, method, kwargs)`` of a fetch, remote shards first, and for each the
        ``(keys, where)`` of its pull, or None; ``named``: see :meth:`_fetch`."""
        calls, places = [], []
        for s in self.transport.remote_first:
            if box is None and s not in requests:
                continue
            parts = (self._pull_parts(spec, plan, s, requests[s], clock, named)
                     if s in requests else [({}, None)])
            for j, (kwargs, place) in enumerate(parts):
                kwargs["job"] = job
                if box is not None and j == 0:  # the clock's push goes with the first
                    kwargs.update(updates=box[0][s], participant=state.participant,
                                  push_clock=box[1])
                    self.bytes_moved += _nbytes(box[0][s])
                calls.append((s, "push_pull" if "updates" in kwargs else "pull", kwargs))
                places.append(place)
        return calls, places

    def _pull_parts(self, spec, plan, s: int, request: tuple, clock: int,
                    named: dict | None) -> list:
        """The pull of ``request`` (keys, where) from shard ``s``: ``(kwargs, (keys,
        where))`` of each call. A large pull of a hashed table from a remote shard goes in
        pieces (:func:`~dask_ps.state.wire_forms.piece_bounds`), each named apart."""
        keys, where = request
        whole = isinstance(where, slice)
        wire = spec.partitioner.wire_keys(plan, s, None if whole else keys)
        remote = whole and s not in self.transport.local
        bounds = (piece_bounds(keys.shape[0]) if remote and spec.sparse
                  and self.transport.direct else [(0, keys.shape[0])])
        if named is not None and remote and min(b - a for a, b in bounds) >= RECALL_MIN:
            named[s] = []  # (keys_id, start, stop) of each piece
        parts = []
        for a, b in bounds:
            one = len(bounds) == 1
            kwargs = dict(name=spec.name, keys=wire if one else wire[a:b], clock=clock,
                          timeout=self.transport.timeout)
            self.bytes_moved += kwargs["keys"].nbytes
            if named is not None and s in named:
                kwargs["keys_id"] = (self.uid, next(self._pulls))
                named[s].append((kwargs["keys_id"], a, b))
            parts.append((kwargs, (keys, where) if one else
                          (keys[a:b], slice(where.start + a, where.start + b))))
        return parts

    def _store(self, spec, places, calls, results, values, clock, state,
               cache, spread: _Spread | None = None) -> np.ndarray:
        """Put the shards' answers in ``values`` (or in ``spread``, those it has not had
        as they arrived); returns it, or the one answer that holds all of them (then no
        copy is made)."""
        for (s, _, _), place, result in zip(calls, places, results):
            if place is None:
                continue
            vals, tag = result
            self.bytes_moved += vals.nbytes
            keys, where = place
            if spread is not None:
                if where.start not in spread.placed:
                    spread.put(where, vals)
            elif (isinstance(where, slice) and vals.shape == values.shape
                    and vals.dtype == values.dtype and vals.flags.writeable):
                values = vals
            else:
                values[where] = vals
            if cache:
                snap = state.snapshots.get((spec.name, s))
                if snap is None:
                    snap = state.snapshots[(spec.name, s)] = _Snapshot(spec, tag, clock,
                                                                       state.flushes)
                snap.insert(keys, vals, tag)
        return values

    # -- push and clock -------------------------------------------------------------------
    def check_update(self, name: str, keys, updates, keys_checked: bool = False,
                     copy: bool = True) -> tuple[TableSpec, np.ndarray, np.ndarray]:
        """``(spec, keys, updates)`` of a push to table ``name``, validated: see
        :func:`~dask_ps.state.table.checked_update` (raises UnknownTableError too)."""
        spec = self.spec(name)
        return (spec,) + checked_update(spec, keys, updates, keys_checked, copy)

    def push_now(self, name: str, keys, updates) -> None:
        """Apply an update at once, outside any job (set-up, evaluation, tests)."""
        spec, keys, values = self.check_update(name, keys, updates)
        per_shard = self._plan_updates({name: [(keys, values, None, None)]})
        self.transport.run(self._send(per_shard, None, 0, 0, tick=False))

    def push(self, job: str, clock: int, name: str, keys, updates, task: int = 0) -> None:
        """Buffer an update of ``task`` at ``clock``; it leaves with the process's clock tick.

        The updates of a clock are merged in the order of their tasks' indices (and, within a
        task, in the order pushed), not in the order the threads got here: the same job on the
        same data and partitioning sums them the same way, bit for bit.

        When ``keys`` equal those of this thread's last pull of the table (the usual
        pull-compute-push step), that pull's plan is reused: the keys are neither checked nor
        deduplicated again. Their hash, which tells, is taken in two halves on two threads
        (the shards wait for this push: 10^6 keys in 0.53-0.56 ms instead of 0.83; the
        pull's own, taken while the shards look its keys up, stays in one thread).
        """
        last = getattr(self._tls, "last_pull", {}).get(name)
        keys_arr = np.asarray(keys)
        plan = named = None
        if (last is not None and keys_arr.shape == (last[0],) and keys_arr.dtype == np.int64
                and fingerprint(keys_arr, split=True) == last[1]):
            # Same keys as the pull (a 64-bit hash match): the plan holds them, deduplicated,
            # and the shards that kept them under a name get the name instead.
            plan, named = last[2], last[3]
            spec, keys_arr, values = self.check_update(name, keys_arr, updates, keys_checked=True)
            keys_arr = None  # the caller's array may change before clock(): the plan has them
        else:
            spec, keys_arr, values = self.check_update(name, keys_arr, updates)
            keys_arr = keys_arr.copy()  # buffered until clock(): the caller may reuse its array
        with self._lock:
            self.job(job).pending[clock][name].append((task, keys_arr, values, plan, named))

    def push_pull(self, job: str, task: int, clock: int, name: str, keys, updates,
                  pull_keys, checked: bool = False) -> tuple[np.ndarray, int]:
        """:meth:`push` of ``task`` at ``clock``, :meth:`clock`, then :meth:`pull` of
        ``pull_keys`` at the new clock, in one message per shard; returns ``(values, new
        clock)``.

        The only task of its process under BSP goes the short way (ps-lite's ``ZPushPull``):
        its update is neither copied nor buffered with other tasks' (there are none); it
        leaves at once, with the tick, in the pull's message. Otherwise the three calls.

        ``checked``: the caller vouches for both key sets and the updates (see
        :meth:`dask_ps.view.WorkerView.push_pull`); on the short way none is validated.
        """
        state = self.job(job)
        if not (state.n_local == 1 and state.consistency.staleness == 0 and not state.pending
                and self.transport.direct):
            self.push(job, clock, name, keys, updates, task)
            new = self.clock(job, task)
            return self.pull(name, pull_keys, job, new, task=task), new
        if checked:
            spec = self.spec(name)
            plan = spec.partitioner.plan_ascending(keys)
            per_shard = self._plan_updates({name: [(None, updates, plan, None)]})
        else:
            spec, keys, values = self.check_update(name, keys, updates, copy=False)
            per_shard = self._plan_updates({name: [(keys, values, None, None)]})
        with self._lock:
            self._send_outbox(job, state)  # a clock queued before, answered first
            state.clocks[task] = state.process_clock = clock + 1
            self._clock_moved.notify_all()
            with self._outbox:  # the pull takes it at once: the poll is not armed for it
                state.outbox, state.outbox_since = (per_shard, clock), time.monotonic()
        try:
            return self.pull(name, pull_keys, job, clock + 1, checked), clock + 1
        except BaseException:
            self._arm_poll(job, state)  # a pull refused before it took the clock: send it
            raise

    def _plan_updates(self, by_table: dict) -> list[list]:
        """Each shard's share of the buffered updates of each table (caller's thread): see
        :func:`~dask_ps.state.merging.split_updates`."""
        return split_updates(self.specs, len(self.transport.shards), by_table)

    def map_shards(self, name: str, fn, args: tuple, job: str | None = None,
                   clock: int = 0, key_range: bool = False) -> list:
        """``fn(keys, values, slots, *args)`` on every shard's rows of ``name``, from a task
        at ``clock`` of ``job`` (or outside any job): this process's pushes so far are sent
        first, and each shard runs ``fn`` once a pull at ``clock`` could be served there
        (under BSP, after every participant's pushes of the clocks before). Results in shard
        order. ``key_range``: see :meth:`~dask_ps.state.table.TableShard.view`.

        An error ``fn`` raises on a shard reaches the caller as itself (its type and
        attributes), with a note naming the function, the table, the shard and its worker.
        An ``fn`` still running after the timeout raises
        :class:`~dask_ps.exceptions.ShardFunctionRunningError`: the shard is busy, not lost.
        """
        self.spec(name)
        state = self.job(job) if job is not None else None
        if state is not None:
            with self._lock:
                if state.consistency.staleness is None:  # ASP: this task's pushes too
                    state.ahead(clock, None, self._plan_updates, self._outbox)
                self._send_outbox(job, state)
        return self.transport.map_all(name, Shipped(fn), *args, job=job, clock=clock,
                                      key_range=key_range)

    def join(self, job: str, participant: int, n_local: int, consistency: Consistency,
             task: int) -> None:
        """Register local task ``task`` of ``job``; the process is ``participant``."""
        with self._lock:
            state = self.jobs.get(job)
            if state is None:
                state = self.jobs[job] = _Job(participant, n_local, consistency, job)
            state.clocks[task] = 0

    def job(self, job: str) -> _Job:
        """The state of a running job: the check of every call of a task (pull, push, clock,
        map_shards) that its model and job are still there.

        Raises
        ------
        ClosedModelError
            This client's connections were closed (:meth:`close`): its model was closed, or
            its lost shards replaced.
        RuntimeError
            The job is over (naming it).
        """
        if self.closed is not None:
            raise ClosedModelError(self.closed)
        try:
            return self.jobs[job]
        except KeyError:
            raise RuntimeError(f"job {job!r} is over: a WorkerView is valid only inside the "
                               f"task it was given to") from None

    def abort(self, job: str, exc: BaseException) -> None:
        """A task of this process failed: wake its siblings waiting here, and forget the job."""
        with self._lock:
            state = self.jobs.pop(job, None)
            if state is not None:
                state.failure = exc
                self._clock_moved.notify_all()

    def clock(self, job: str, task: int) -> int:
        """Advance ``task``'s clock; when the process's clock moves, flush. Returns the clock."""
        with self._lock:
            state = self.job(job)
            state.clocks[task] += 1
            self._advance(job, state)
            return state.clocks[task]

    def _advance(self, job: str, state: _Job) -> None:
        if len(state.clocks) < state.n_local:
            return  # a task that has not joined yet is at clock 0
        new = min(state.clocks.values())
        if new == DONE:
            for c in sorted(state.pending):
                self._flush(job, state, c)
            self._send_outbox(job, state)
            self.transport.run(self.transport.call_all("finish", job, state.participant))
            del self.jobs[job]
            return
        for c in range(state.process_clock, new):
            self._flush(job, state, c)
        if new > state.process_clock:
            state.process_clock = new
            self._clock_moved.notify_all()

    def finish(self, job: str, task: int) -> None:
        """``task`` is done; the last task of the process flushes and leaves the job."""
        with self._lock:
            state = self.jobs.get(job)
            if state is None:
                return
            state.clocks[task] = DONE
            self._advance(job, state)

    def wait(self, job: str) -> None:
        """Send the queued clock of ``job`` now and wait for every push in flight (raises
        their errors)."""
        with self._lock:
            state = self.jobs.get(job)
            if state is not None:
                self._send_outbox(job, state)

