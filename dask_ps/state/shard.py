"""The shard: a Dask actor holding one part of every table of a model.

All methods are ``async def``, so they run on the worker's event loop: they never wait for
the single thread that Dask gives to the synchronous actor methods of a worker, and a pull that
must wait for slower clocks parks without holding any thread. The work they do inline is a
numba gather or scatter of at most a few milliseconds. Functions run next to the rows
(:meth:`Shard.map_rows`: user functions, checkpoint sorts) may take seconds on a large shard:
they run in a thread, off the loop, and the loop's own methods wait for them without
blocking it (heartbeats go on).

A task on the shard's own worker calls it directly from its thread (:meth:`Shard.call_now`)
when its pull needs no wait: a lock keeps that thread and the loop apart. A pull from a
thread that must wait for slower clocks may *park* instead (``call_now(..., park=reply)``):
the thread whose push completes the clock then gathers its values and calls ``reply`` itself,
with no hop through the event loop (which only expires parked pulls past their timeout).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import defaultdict

import numpy as np

from .. import _compat
from ..exceptions import ShardFunctionRunningError
from ._clock_steps import apply_held, split_push
from ._malloc import FreezeGCFirst, tune_malloc, untouched_bytes
from .channel import ChannelAddress, ChannelServer
from .channel_security import channel_endpoint
from .channel_wire import unpicklable_result
from .consistency import DONE, ClockTable, Consistency
from .merging import apply_all
from .table import TableShard, TableSpec
from .transport import function_name, packed, running_shard_function
from .wire_forms import KeyRef

__all__ = ["Shard"]


class Shard(FreezeGCFirst):
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
        # pulls parked by call_now: (clock, job, table, keys, reply, deadline, timeout,
        # keys_id)
        self._parked: list[tuple] = []
        self._expiring = False  # the loop checks parked pulls' timeouts
        self.counters = dict(pull_calls=0, push_calls=0, keys_pulled=0, keys_pushed=0,
                             bytes_pulled=0, bytes_pushed=0)
        self._channel_endpoint = channel_endpoint()
        worker = _compat.current_worker()  # in __init__: the task that creates the actor
        self.address = worker.address if worker is not None else "local"
        self._channel: ChannelServer | None = None
        self._lock = threading.Lock()  # the loop against tasks calling call_now
        self._loop: asyncio.AbstractEventLoop | None = None  # set on the loop's first call
        # the function of map_rows running in a thread (it holds the lock), or None; and
        # its (name, table, loop time it started)
        self._off_loop: asyncio.Future | None = None
        self._running: tuple[str, str, float] | None = None

    _METHODS = frozenset({"create_table", "drop_table", "drop_tables", "start_job",
                          "end_job", "pull", "push", "push_pull", "finish", "map_rows",
                          "load_rows", "stats", "close_channel"})

    async def dispatch_call(self, method: str, args: tuple, kwargs: dict):
        """Run ``method(*args, **kwargs)``: the one entry point of remote callers."""
        if method not in self._METHODS:
            raise AttributeError(f"shard {self.shard} has no method {method!r}")
        await self._quiet(kwargs.get("timeout"), f"{method} call")
        return await getattr(self, method)(*args, **kwargs)

    async def _quiet(self, timeout: float | None = None, what: str = "") -> None:
        """Wait, without blocking the loop, until no :meth:`map_rows` function holds the
        lock; the loop's methods then take it only against quick calls of task threads.
        With ``timeout``, a ``what`` (a call) that waited that long for it raises
        :class:`~dask_ps.exceptions.ShardFunctionRunningError` instead."""
        if self._off_loop is None:
            return
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + float(timeout)
        while self._off_loop is not None:
            if deadline is None:
                await asyncio.shield(self._off_loop)
                continue
            try:
                await asyncio.wait_for(asyncio.shield(self._off_loop),
                                       max(0.0, deadline - loop.time()))
            except TimeoutError:
                if self._off_loop is not None:
                    raise self._still_running(f"a {what} waited {float(timeout):g} s for "
                                              f"it to end") from None

    def _still_running(self, detail: str = "") -> ShardFunctionRunningError:
        """The error of a :meth:`map_rows` function still running (on the loop)."""
        fn, table, started = self._running
        return ShardFunctionRunningError(self.shard, self.address, fn, table,
                                         time.monotonic() - started, detail)

    def call_now(self, method: str, kwargs: dict, park=None, settled: list | None = None,
                 wait: float | None = None) -> tuple[bool, object]:
        """``pull``, ``push`` or ``push_pull`` from a task's thread on this shard's worker,
        done at once: ``(True, result)``; or ``(False, pull_kwargs)`` when its pull must wait
        for slower clocks (its push, if any, is done): the caller then runs
        ``pull(**pull_kwargs)`` on the loop.

        With ``park`` (a callable ``park(ok, result_or_exception)``, quick and not raising),
        such a pull is parked here instead and ``(False, None)`` returned: ``park`` is called
        exactly once, from the thread whose push (or the loop's expiry check) settles it.
        With ``settled`` (a list), the replies to the parked pulls this call's push settles
        are appended to it as callables, for the caller to run after its own reply (a
        channel thread answers its remote caller first, then wakes a local task that would
        otherwise hold the GIL it needs to send).

        A call that waits ``wait`` seconds (default: its ``timeout``, else 300) for the
        shard's lock raises :class:`~dask_ps.exceptions.ShardFunctionRunningError` (a
        :meth:`map_rows` function holds it) or TimeoutError, having done nothing.
        """
        kwargs = dict(kwargs)
        ready: list = []
        wait = kwargs.get("timeout", 300.0) if wait is None else wait
        if not self._lock.acquire(True, wait):  # positional: as cheap as ``with`` if free
            raise self._lock_timeout(method, wait)
        try:
            if method in ("push", "push_pull"):
                tick = kwargs.pop("tick", False) if method == "push" else True
                clock = kwargs.pop("clock" if method == "push" else "push_clock", 0)
                notify = self._push(kwargs.pop("updates"), kwargs.get("job"),
                                    kwargs.pop("participant", 0), clock, tick)
                if notify:
                    ready = self._take_parked()
                    if self._waiters:  # registered under this lock: none is missed
                        self._loop.call_soon_threadsafe(self._notify)
                if method == "push" or kwargs.get("name") is None:
                    return True, None if method == "push_pull" else self._min_clock()
            elif method != "pull":
                raise AttributeError(f"shard {self.shard}: {method!r} cannot run from a "
                                     f"task")
            clocks = self._check_job(kwargs.get("job"))
            if clocks is not None and not clocks.ready(kwargs.get("clock", 0)):
                if park is None or self._loop is None:
                    return False, kwargs
                self._table(kwargs["name"])
                timeout = float(kwargs.get("timeout", 300.0))
                self._parked.append((kwargs.get("clock", 0), kwargs["job"], kwargs["name"],
                                     kwargs["keys"], park, time.monotonic() + timeout,
                                     timeout, kwargs.get("keys_id")))
                return False, None
            return True, self._gather(kwargs["name"], kwargs["keys"], clocks,
                                      kwargs.get("keys_id"))
        finally:
            self._lock.release()
            if settled is None:
                _answer_parked(ready)
            else:
                settled.extend(functools.partial(reply, ok, result)
                               for reply, ok, result in ready)

    def _lock_timeout(self, method: str, wait: float) -> Exception:
        """The error of a :meth:`call_now` that waited ``wait`` s in vain for the lock."""
        running = self._running
        if running is not None:
            fn, table, started = running
            return ShardFunctionRunningError(
                self.shard, self.address, fn, table, time.monotonic() - started,
                f"a {method} call waited {float(wait):g} s for it to end")
        return TimeoutError(f"shard {self.shard} (worker {self.address}): a {method} call "
                            f"waited {float(wait):g} s for the shard's lock")

    def _take_parked(self) -> list:
        """Under the lock, after clocks moved or the job changed: the parked pulls now
        settled, as ``(reply, ok, values or exception)``; the others stay parked."""
        if not self._parked:
            return []
        out, keep = [], []
        for entry in self._parked:
            clock, job, name, keys, reply = entry[:5]
            if job != self.job:
                out.append((reply, False, self._ended(job, f"pull of table {name!r}")))
            elif self.clocks.ready(clock):
                try:
                    out.append((reply, True, self._gather(name, keys, self.clocks, entry[7])))
                except Exception as exc:
                    out.append((reply, False, exc))
            else:
                keep.append(entry)
        self._parked = keep
        return out

    def _expire_parked(self) -> None:
        """On the loop, every second while pulls are parked: fail those past their timeout
        (naming the participants they waited for)."""
        now = time.monotonic()
        with self._lock:
            late = [e for e in self._parked if e[5] <= now]
            self._parked = [e for e in self._parked if e[5] > now]
            out = []
            for clock, job, name, _, reply, _, timeout, _ in late:
                what = f"pull of table {name!r}"
                out.append((reply, False, self._ended(job, what) if job != self.job else
                            self._stuck(self.clocks, what, clock, timeout)))
        _answer_parked(out)
        if self.job is not None or self._parked:
            self._loop.call_later(1.0, self._expire_parked)
        else:
            self._expiring = False

    async def dispatch(self, call: tuple):
        """:meth:`dispatch_call` of ``(method, args, kwargs)`` through Dask's RPC; the result
        goes back as one pickle (see :func:`~dask_ps.state.transport.packed`)."""
        result = await self.dispatch_call(*call)
        try:
            return packed(result, on_error="raise")
        except Exception as exc:  # noqa: BLE001 - pickle's own error, not Dask's wrapper
            raise unpicklable_result(exc, result) from None

    def _on_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    async def open_channel(self) -> ChannelAddress | None:
        """Start (once) this shard's direct channel.

        Returns
        -------
        ChannelAddress or None
            Host, port, secret and TLS flag of the channel (the caller hands it to the tasks
            through Dask's comms, inside the model's :class:`ShardRef`); None when the
            worker's comms are neither ``tcp://`` nor ``tls://`` or ``dask-ps.channel`` is
            false (see :mod:`~dask_ps.state.channel`).
        """
        self._on_loop()
        if self._channel is None and self._channel_endpoint is not None:
            host, context = self._channel_endpoint
            self._channel = ChannelServer(host, self, context)
        return None if self._channel is None else self._channel.address

    async def close_channel(self) -> None:
        """Stop the channel (the model is closing; Dask releases the actor next)."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # -- tables ---------------------------------------------------------------------------
    async def create_table(self, spec: TableSpec) -> int:
        """Allocate this shard's part of ``spec``; returns its size in bytes."""
        if spec.name in self.tables:
            raise ValueError(f"table {spec.name!r} already exists on shard {self.shard}")
        table = TableShard(spec, self.shard)
        with self._lock:
            self.tables[spec.name] = table
        return table.nbytes

    async def drop_table(self, name: str) -> None:
        with self._lock:
            self.tables.pop(name, None)

    async def drop_tables(self) -> None:
        """Free every table (the model is closing: its memory goes now, not whenever Dask
        lets go of the actor)."""
        with self._lock:
            self.tables.clear()

    def _table(self, name: str) -> TableShard:
        try:
            return self.tables[name]
        except KeyError:
            raise KeyError(f"table {name!r} is not on shard {self.shard}") from None

    # -- jobs and clocks -----------------------------------------------------------------
    async def start_job(self, job: str, n_participants: int, consistency: Consistency) -> None:
        """Begin a job of ``n_participants`` clocks at 0; a previous job's leftovers go."""
        self._on_loop()
        with self._lock:
            self.job = job
            self.clocks = ClockTable(n_participants, consistency)
            self._pending.clear()
            ready = self._take_parked()  # a previous job's: they fail
        _answer_parked(ready)
        if not self._expiring:
            self._expiring = True
            self._loop.call_later(1.0, self._expire_parked)

    async def end_job(self, job: str) -> None:
        """Close ``job``; pulls waiting in it fail. Updates still held (BSP) belong to clocks
        that not every participant finished (the job failed): they are dropped, as they
        would be without a cluster."""
        if self.job == job:
            with self._lock:
                self._pending.clear()
                self.job, self.clocks = None, None
                ready = self._take_parked()
            _answer_parked(ready)
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
        while True:
            with self._lock:  # a task's call_now sees this waiter, or this sees its tick
                if self.job != job or clocks.ready(clock):
                    break
                fut = loop.create_future()
                self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise self._stuck(clocks, what, clock, timeout) from None
        if self.job != job:
            raise self._ended(job, what)

    def _stuck(self, clocks: ClockTable, what: str, clock: int, timeout: float
               ) -> TimeoutError:
        """The error of a ``what`` at ``clock`` that waited ``timeout`` s in vain."""
        slow = np.flatnonzero(clocks.clocks == clocks.min_clock).tolist()
        return TimeoutError(f"shard {self.shard}: {what} at clock {clock} waited {timeout:g} s "
                            f"for participants {slow} stuck at clock {clocks.min_clock} "
                            f"(staleness {clocks.consistency.staleness})")

    def _ended(self, job: str, what: str) -> RuntimeError:
        return RuntimeError(f"shard {self.shard}: job {job!r} ended while a {what} waited")

    # -- pull / push ---------------------------------------------------------------------
    async def pull(self, name: str, keys: np.ndarray, job: str | None = None,
                   clock: int = 0, timeout: float = 300.0, keys_id=None
                   ) -> tuple[np.ndarray, int]:
        """Values of ``keys`` (distinct, shard-local), once the consistency model allows.

        Returns the values, shape (len(keys), ncols), and the slowest clock they reflect.
        With ``keys_id`` (a remote caller's name for these keys, sent in a buffer of their
        own), a sparse table keeps the keys under that name for the caller's next push,
        which may then name them (a :class:`~dask_ps.state.wire_forms.KeyRef`) instead of
        sending them again.
        """
        self._table(name)
        clocks = self._check_job(job)
        if clocks is not None:
            await self._wait_ready(job, clock, timeout, f"pull of table {name!r}")
        with self._lock:
            return self._gather(name, keys, clocks, keys_id)

    def _gather(self, name: str, keys: np.ndarray, clocks, keys_id=None
                ) -> tuple[np.ndarray, int]:
        out = self._table(name).gather(keys, keys_id)
        c = self.counters
        c["pull_calls"] += 1
        c["keys_pulled"] += keys.shape[0]
        c["bytes_pulled"] += out.nbytes + keys.nbytes
        return out, (DONE if clocks is None else clocks.min_clock)

    def _min_clock(self) -> int:
        return DONE if self.clocks is None else self.clocks.min_clock

    async def push(self, updates: list, job: str | None = None, participant: int = 0,
                   clock: int = 0, tick: bool = False) -> int:
        """Apply (or, under BSP, hold until the barrier) ``updates`` made at ``clock``.

        ``updates`` is a list of ``(table, keys, values)``, keys distinct and shard-local,
        or a :class:`~dask_ps.state.wire_forms.KeyRef` to the keys of a pull of the caller
        (:class:`~dask_ps.exceptions.KeysNeededError` when this shard no longer holds them:
        then nothing is applied). With ``tick``, ``participant`` then moves to
        ``clock + 1``. Returns the slowest clock.

        The updates applied at once are applied all or none, across tables; so are, under
        BSP, those of a clock held until every participant made it (each clock's on its
        own): see :func:`~dask_ps.state.merging.apply_all`. A refused push holds nothing
        and does not tick; a refused held clock is dropped, its error raised to the push
        that completed it. Not across shards, nor across the calls that carry a clock's
        push in pieces (an ASP push through the direct channel, one call per piece of the
        pull before it).
        """
        with self._lock:
            notify = self._push(updates, job, participant, clock, tick)
            min_clock = self._min_clock()
            ready = self._take_parked() if notify else []
        _answer_parked(ready)
        if notify:
            self._notify()
        return min_clock

    def _push(self, updates: list, job, participant: int, clock: int, tick: bool) -> bool:
        """:meth:`push` under the lock; whether waiting pulls must be woken."""
        for name, keys, values in updates:
            self._table(name)
        # named keys first: a push that cannot be served changes nothing
        named = [(name, self.tables[name].named_keys(keys) if isinstance(keys, KeyRef)
                  else keys, values) for name, keys, values in updates]
        for name, keys, values in updates:
            self.counters["keys_pushed"] += keys.shape[0]
            self.counters["bytes_pushed"] += keys.nbytes + values.nbytes  # as sent
        updates = named
        self.counters["push_calls"] += 1
        clocks = self._check_job(job)
        now, held = split_push(self.tables, updates,
                               clocks is not None and clocks.consistency.buffered)
        if now:  # first: a refused push holds nothing either
            apply_all(now, self.shard, "this push" if clocks is None else
                      f"this push of clock {clock}")
        if held:
            self._pending[clock].append((participant, held))
        if clocks is not None and tick and clocks.advance(participant, clock + 1):
            if clocks.consistency.buffered:
                self._flush_pending(clocks.min_clock)
            return True
        return False

    async def push_pull(self, updates: list, job: str | None = None, participant: int = 0,
                        push_clock: int = 0, name: str | None = None, keys=None,
                        clock: int = 0, timeout: float = 300.0, keys_id=None):
        """:meth:`push` of a clock (with its tick), then :meth:`pull` (if ``name``): one
        message per shard for the usual push-clock-pull step."""
        await self.push(updates, job, participant, push_clock, tick=True)
        if name is None:
            return None
        return await self.pull(name, keys, job, clock, timeout, keys_id)

    def _flush_pending(self, upto: int) -> None:
        """Apply the held updates of clocks ``< upto``: see
        :func:`~._clock_steps.apply_held`."""
        apply_held(self._pending, upto, self.tables, self.shard)

    async def finish(self, job: str, participant: int) -> None:
        """``participant`` has left the job: it no longer holds the others back."""
        with self._lock:
            clocks = self._check_job(job)
            moved = clocks.advance(participant, DONE)
            if moved and clocks.consistency.buffered:
                self._flush_pending(clocks.min_clock)
            ready = self._take_parked() if moved else []
        _answer_parked(ready)
        if moved:
            self._notify()

    # -- functions next to the data ------------------------------------------------------
    async def map_rows(self, name: str, fn, *args, job: str | None = None, clock: int = 0,
                       timeout: float = 300.0, key_range: bool = False):
        """``fn(keys, values, slots, *args)`` on this shard's rows of ``name``; its result.

        ``keys`` (n,) int64 are global keys (with ``key_range``, a dense table's are
        ``(start, stop)`` instead: see :meth:`TableShard.view`), ``values`` (n, ncols) and
        ``slots`` (a dict of (n, width) arrays) are views: ``fn`` may update them in place.
        It runs in a thread, holding the shard's lock, so the worker's event loop stays free
        however long it takes. With ``job``, it first waits like a pull at ``clock`` of that
        job (after a BSP clock: every participant's pushes of the clocks before are applied).

        A function still running after ``timeout`` seconds raises
        :class:`~dask_ps.exceptions.ShardFunctionRunningError` to the caller (it is not
        stopped: it holds the shard until it returns, and the calls that wait for it over
        their ``timeout`` raise that error too).
        """
        self._table(name)
        what = function_name(fn)
        if job is not None:
            self._check_job(job)
            await self._wait_ready(job, clock, timeout, f"function {what} on table {name!r}")
        await self._quiet(timeout, f"function {what} on table {name!r}")
        loop = asyncio.get_running_loop()
        self._off_loop = done = loop.create_future()
        self._running = (what, name, time.monotonic())
        running = loop.run_in_executor(None, self._map_locked, name, fn, args, key_range)

        def ended(fut) -> None:
            self._off_loop = self._running = None
            done.set_result(None)
            if not fut.cancelled():
                fut.exception()  # retrieved: its caller may have had the timeout instead

        running.add_done_callback(ended)
        try:
            return await asyncio.wait_for(asyncio.shield(running), timeout)
        except TimeoutError:
            if running.done():  # ended as the timeout fired
                return running.result()
            raise self._still_running() from None

    def _map_locked(self, name: str, fn, args: tuple, key_range: bool = False):
        with self._lock:
            keys, values, slots = self._table(name).view(key_range)
            # the model refuses calls from this thread meanwhile (they would wait for it)
            with running_shard_function(f"function {function_name(fn)} on shard "
                                        f"{self.shard} of table {name!r}"):
                return fn(keys, values, slots, *args)

    async def load_rows(self, name: str, keys: np.ndarray, values: np.ndarray,
                        slots: dict) -> int:
        """Overwrite (or create) rows of ``name`` from a checkpoint, bypassing the update
        rule; see :meth:`TableShard.set_rows`. Returns the rows held afterwards."""
        with self._lock:
            table = self._table(name)
            table.set_rows(keys, values, slots)
            return table.n_rows

    async def stats(self) -> dict:
        """Counters, table sizes and clocks, for diagnostics."""
        with self._lock:
            return self._stats()

    def untouched_bytes(self) -> int:
        """Bytes of this shard's tables not in memory yet (zero-filled pages never written, see
        :func:`~dask_ps.state._malloc.untouched_bytes`): what training will add to the
        worker's memory as it touches their rows."""
        tables = list(self.tables.values())
        return untouched_bytes([a for t in tables for a in (t.values, *t.slots.values())])

    def _stats(self) -> dict:
        return dict(
            shard=self.shard, time=time.time(), **self.counters,
            tables={n: dict(rows=t.n_rows, nbytes=t.nbytes, keys_probed=t.keys_probed,
                            keys_recalled=t.keys_recalled) for n, t in self.tables.items()},
            job=self.job,
            clocks=None if self.clocks is None else self.clocks.clocks.tolist(),
            staleness_bound=None if self.clocks is None else self.clocks.consistency.staleness,
        )


def _answer_parked(ready: list) -> None:
    """Call the replies of settled parked pulls (outside the shard's lock)."""
    for reply, ok, result in ready:
        reply(ok, result)
