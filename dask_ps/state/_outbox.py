"""How a process's clock reaches the shards: the outbox of :class:`~.client.ProcessClient`.

When every task of a process has finished a clock, the merged updates of all tables and the
clock tick are queued (:meth:`Outbox._flush`). The queued clock leaves with the process's
next pull (one message per shard for both), or on its own after ``SEND_DELAY`` seconds
(:meth:`Outbox._poll`, on the transport's event loop); the next one waits for it to be
answered, so a participant's pushes reach each shard in order, and its errors surface on
the next call. The poll runs only while a clock waits, and every ``IDLE_POLL`` seconds
instead of ``SEND_DELAY`` once the process has sent its last ``PULLS_CARRY`` clocks itself.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from .process_job import _Job
from .wire_forms import KeyRef

__all__ = ["IDLE_POLL", "PULLS_CARRY", "SEND_DELAY", "Outbox"]

#: Seconds a clock's push may wait for the next pull to carry it (the process checks its
#: outbox this often, so a push leaves within twice this time).
SEND_DELAY = 0.002
#: After this many clocks in a row carried by the process's pulls, the outbox is checked every
#: ``IDLE_POLL`` seconds instead (a push then left alone waits up to that long, once).
PULLS_CARRY = 16
IDLE_POLL = 0.032


class Outbox:
    """The sending of a process's clocks, a base of :class:`~.client.ProcessClient`: it uses
    the client's ``transport``, ``jobs``, ``_outbox`` (the lock of each job's outbox),
    ``bytes_moved`` and ``_plan_updates``.
    """

    async def _send(self, per_shard, job, participant, clock, tick):
        shards = [s for s in self.transport.remote_first if tick or per_shard[s]]
        self.bytes_moved += sum(_nbytes(per_shard[s]) for s in shards)
        await _gather(self.transport.call(s, "push", per_shard[s], job=job,
                                          participant=participant, clock=clock, tick=tick)
                      for s in shards)

    def _raise_inflight(self, state: _Job | None, wait: bool = False) -> None:
        """Raise the error of the push sent on its own, if it failed; with ``wait``, wait for
        its answer first."""
        if state is None:
            return
        with self._outbox:
            fut = state.inflight
            if fut is None or not (wait or fut.done()):
                return
            state.inflight = None
        try:
            fut.result(self.transport.timeout + 10)
        except FutureTimeout:
            raise TimeoutError(f"a push of job {state.job_id!r} got no answer within "
                               f"{self.transport.timeout + 10:g} s") from None

    def _flush(self, job: str, state: _Job, clock: int) -> None:
        """Queue the merged updates of ``clock`` and the tick to ``clock + 1``.

        They leave with the next pull of this process (one message per shard instead of two)
        or after ``SEND_DELAY`` seconds, whichever comes first. The previous clock's message
        is sent and answered first, so a participant's ticks reach each shard in order.
        """
        per_shard = state.split(clock, self._plan_updates)
        self._send_outbox(job, state)
        with self._outbox:
            state.outbox = (per_shard, clock)
            state.outbox_since = time.monotonic()
        state.flushes += 1
        self._arm_poll(job, state)

    def _send_outbox(self, job: str, state: _Job) -> None:
        """Send the queued clock now, if no pull took it, and wait for every push in flight
        (raises their errors)."""
        self._raise_inflight(state, wait=True)  # sent by _poll: answered before the next one
        box = self._take_outbox(state)
        if box is not None:
            state.carried += 1  # it left without the poll's help
            per_shard, clock = box
            calls = [(s, "push", dict(updates=part, job=job, participant=state.participant,
                                      clock=clock, tick=tick))
                     for s in self.transport.remote_first
                     for part, tick in self._push_parts(state, s, per_shard[s])]
            self.bytes_moved += _nbytes([u for updates in per_shard for u in updates])
            if self.transport.direct:
                self.transport.call_many(calls, self.transport.timeout)
            else:
                self.transport.run(_gather(self.transport.call(s, m, **kw)
                                           for s, m, kw in calls))
        self._raise_inflight(state, wait=True)  # _poll took it meanwhile

    def _push_parts(self, state: _Job, s: int, updates: list) -> list:
        """``(updates, tick)`` of each call that sends ``updates`` (one clock's, to shard
        ``s``). Under ASP, a remote shard gets the pieces of a push named after a pull's
        pieces (see :meth:`_pull_parts`) one call each, sent back to back, the clock's tick
        with the last: it applies one piece while the next travels (10^6 keys: push and
        delivery 5.3-5.5 ms instead of 6.0-6.3). Not under BSP or SSP: a piece whose keys
        the shard forgot is sent again with them after the others (see
        :meth:`~dask_ps.state.transport.Transport.call_many`), after the tick."""
        if (state.consistency.staleness is None and self.transport.direct
                and s not in self.transport.local and len(updates) > 1
                and all(isinstance(k, KeyRef) for _, k, _ in updates)):
            return [([u], j == len(updates) - 1) for j, u in enumerate(updates)]
        return [(updates, True)]

    def _take_outbox(self, state: _Job | None):
        """The queued clock, or None; exactly one caller gets it."""
        if state is None or state.outbox is None:
            return None
        with self._outbox:
            box, state.outbox = state.outbox, None
        return box

    def _arm_poll(self, job: str, state: _Job) -> None:
        """Make sure :meth:`_poll` will look at the clock just queued: a poll that found
        nothing to wait for has stopped (from any thread)."""
        with self._outbox:
            armed, state.polling = state.polling, True
        if not armed:
            loop = self.transport.loop
            loop.call_soon_threadsafe(loop.call_later, SEND_DELAY, self._poll, job, state)

    def _poll(self, job: str, state: _Job) -> None:
        """On the loop: send the queued clock that no pull took within ``SEND_DELAY``
        seconds (processes that compute long between a clock and their next pull must not
        hold the others back).

        It runs only while a clock is queued (:meth:`_arm_poll` starts it again), every
        ``SEND_DELAY`` seconds: a process that sends its clocks itself (with its pulls, or by
        waiting for them) has its event loop woken twice per clock instead of every
        ``SEND_DELAY`` (a task that pushed, clocked and waited 10^6 keys at a time left it
        ~500 wake-ups a second, each taking a core and the GIL from the task and channel
        threads). While its pulls carry its clocks (``PULLS_CARRY`` in a row) it runs every
        ``IDLE_POLL`` seconds instead, whether a clock is queued or not, and no clock wakes
        it."""
        if self.jobs.get(job) is not state:
            return
        loop = self.transport.loop
        box = None
        with self._outbox:
            if (state.outbox is not None and state.inflight is None
                    and time.monotonic() - state.outbox_since >= SEND_DELAY):
                box, state.outbox = state.outbox, None
                state.inflight = done = Future()
                state.carried = 0
            idle = state.carried >= PULLS_CARRY
            state.polling = again = idle or state.outbox is not None
        if box is not None:
            per_shard, clock = box
            task = loop.create_task(self._send(per_shard, job, state.participant, clock,
                                               tick=True))
            task.add_done_callback(lambda t: _resolve(done, t))
        if again:  # (not state.polling: an _arm_poll since may have started a round)
            loop.call_later(IDLE_POLL if idle else SEND_DELAY, self._poll, job, state)


def _nbytes(updates: list) -> int:
    """Bytes of keys and values of a push's ``(table, keys, values)`` list."""
    return sum(k.nbytes + v.nbytes for _, k, v in updates)


async def _gather(coros):
    return await asyncio.gather(*coros)


def _resolve(fut: Future, task) -> None:
    """Pass the outcome of an asyncio ``task`` to a concurrent ``fut``."""
    if task.cancelled():
        fut.set_exception(RuntimeError("a push was cancelled: its event loop is closing"))
    elif task.exception() is not None:
        fut.set_exception(task.exception())
    else:
        fut.set_result(None)
