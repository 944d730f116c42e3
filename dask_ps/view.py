"""The worker's side of the PSModel API, on one screen: :class:`WorkerView`.

A task of :meth:`~dask_ps.PSModel.run` or :meth:`~dask_ps.PSModel.fit_partitions` gets a
``WorkerView`` ``ps`` and needs nothing else to talk to the parameter server:

=====================================  =====================================================
``ps.pull(table, keys)``               values of ``keys`` as the consistency model allows
``ps.push(table, keys, updates)``      buffered; merged with the process's other tasks
``ps.clock()``                         end of a clock: the merged pushes leave, one per shard
``ps.push_pull(table, k, g, want)``    push, clock and pull in one message per shard
``ps.map_shards(table, fn, *args)``    ``fn`` next to every shard's rows, after the barrier
``ps.report(**values)``                numbers to the driver's ``callback`` (no round trip)
=====================================  =====================================================

(Li et al., OSDI 2014 — ps-lite's Push, Pull and Wait; Angel's psFunc for ``map_shards``.)
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .diagnostics.events import report
from .state.client import ProcessClient

__all__ = ["WorkerView"]


class WorkerView:
    """A task's handle on the parameter server during a job: pull, push, clock.

    Made by :meth:`~dask_ps.PSModel.run` and :meth:`~dask_ps.PSModel.fit_partitions`, which
    pass it to the task function; valid only inside that task.

    Attributes
    ----------
    job : str
        The job's id.
    task : int
        The task's index in the job.
    """

    def __init__(self, client: ProcessClient, job: str, task: int) -> None:
        self._client = client
        self.job = job
        self.task = task
        self._clock = 0

    @property
    def current_clock(self) -> int:
        """Number of times this task called :meth:`clock`."""
        return self._clock

    def pull(self, table: str, keys=None) -> np.ndarray:
        """Values of ``keys`` of ``table``, as the consistency model allows.

        Parameters
        ----------
        table : str
        keys : array of int, shape (n,), optional
            Any order, repeats allowed; int64 or uint64. None pulls every row of a dense table.

        Returns
        -------
        numpy.ndarray
            Shape (n,) for a vector table, (n, ncols) otherwise, in the table's dtype. Under
            SSP(s) the values include every update of every task up to clock
            ``current_clock - s - 1``; under BSP exactly the updates of clocks before
            ``current_clock``; under ASP at least this task's updates of the clocks before
            ``current_clock``.

        Raises
        ------
        UnknownTableError
            Unknown table name.
        TypeError, ValueError
            Keys that are not integers or not 1-D, or no keys (None) for a sparse table;
            each names the table.
        IndexError
            A key outside a dense table's rows (names the table and the key).
        ClosedModelError
            The model was closed (or its lost shards replaced) while the task ran.
        RuntimeError
            The job is over (the view was kept past its task), or another task of this
            process failed.
        ShardUnavailableError
            A shard did not answer within the model's timeout.
        """
        return self._client.pull(table, keys, self.job, self._clock, task=self.task)

    def push(self, table: str, keys, updates) -> None:
        """Add ``updates`` for ``keys`` to the current clock's update of ``table``.

        Updates of repeated keys are summed. They reach the shards, merged with those of the
        process's other tasks, when every task of the process has called :meth:`clock` (under
        ASP, with this task's next pull if that comes first); the shard then applies the
        table's optimizer to them.

        Parameters
        ----------
        table : str
        keys : array of int, shape (n,)
        updates : array, shape (n,) or (n, ncols)
            Gradients (optimizers) or deltas (plain add); cast to the table's dtype. Copied.

        Raises
        ------
        UnknownTableError, IndexError, TypeError, ValueError
            Unknown table, key outside a dense table, non-numeric or non-finite updates, or
            updates of the wrong shape; each names the table (and the key). On an integer
            table, a sum past its dtype (of the clock's updates merged in this process, at
            :meth:`clock`; or with the rows, on the shard: the clock's later calls) raises
            a ValueError naming the table, shard and key. On that shard, none of the
            clock's updates is applied, to any table (nor are its new keys created); the
            other shards apply their shares of the clock on their own (see
            :func:`~dask_ps.state.merging.apply_all`).
        """
        self._client.push(self.job, self._clock, table, keys, updates, self.task)

    def clock(self) -> int:
        """End this task's current clock; returns the new clock.

        When it is the last task of its process to end the clock, the process's pushes of
        the clock are merged here and queued to leave (with the next pull, or on their own
        soon after), after the previous clock's have been answered.

        Raises
        ------
        ClosedModelError
            The model was closed (or its lost shards replaced) while the task ran.
        RuntimeError
            The job is over (the view was kept past its task), or another task of this
            process failed.
        ValueError
            On an integer table, a sum of the clock's merged updates past its dtype (naming
            table, shard and key); or the error of a shard that refused the previous
            clock's updates (see :meth:`push`).
        ShardUnavailableError
            A shard did not answer the previous clock's updates within the model's timeout.
        """
        self._clock = self._client.clock(self.job, self.task)
        return self._clock

    def push_pull(self, table: str, keys, updates, pull_keys=None,
                  checked: bool = False) -> np.ndarray:
        """:meth:`push`, :meth:`clock`, then :meth:`pull` of ``pull_keys``, in one message
        per shard (ps-lite's ``ZPushPull``): the usual step of a task that is alone in its
        process under BSP skips the buffering and the copy of its push; otherwise the three
        calls are made in turn.

        Parameters
        ----------
        table : str
        keys : array of int, shape (n,)
            Keys of the push, as for :meth:`push`.
        updates : array, shape (n,) or (n, ncols)
            As for :meth:`push`, but not copied on the short way: do not change it before
            the call returns.
        pull_keys : array of int, shape (m,), optional
            Keys pulled at the new clock, as for :meth:`pull` (None: every row of a dense
            table).
        checked : bool, default False
            The caller vouches for the call (the library's own steps, e.g. GBDT's): ``keys``
            and ``pull_keys`` int64, distinct, ascending and in range; ``updates`` finite,
            in the table's dtype, shape ``(n, ncols)``. On the short way nothing is then
            validated (a wrong push corrupts the table instead of raising) and the keys are
            only split at the shards' bounds (~0.06 ms less per step on LightGBM's example).

        Returns
        -------
        numpy.ndarray
            The values of ``pull_keys``, shape (m,) or (m, ncols), in the table's dtype,
            including (under BSP) every task's updates of the clock just ended.

        Raises
        ------
        UnknownTableError, IndexError, TypeError, ValueError, ShardUnavailableError
            As :meth:`push` and :meth:`pull`.
        """
        values, self._clock = self._client.push_pull(self.job, self.task, self._clock, table,
                                                     keys, updates, pull_keys, checked)
        return values

    def map_shards(self, table: str, fn, *args, key_range: bool = False) -> list:
        """``fn(keys, values, slots, *args)`` on every shard's rows of ``table``; the results,
        in shard order. Only the results travel.

        The process's pushes are sent first, and each shard runs ``fn`` once a pull at the
        current clock could be served there: after :meth:`clock` under BSP, it sees every
        task's pushes of the clocks before. ``keys`` (n,) int64 are the shard's global keys
        (with ``key_range=True``, a dense table's shard passes ``(start, stop)`` instead,
        the range it holds: cheaper for large shards), ``values`` (n, ncols) and ``slots``
        (the update rule's state, a dict of (n, width) arrays) are the shard's own arrays:
        ``fn`` may update them in place (e.g. reset a table of histograms). It runs in a
        thread of the shard's worker, holding the shard. Errors as for
        :meth:`dask_ps.PSModel.map_shards` (an ``fn`` or an argument that cannot be pickled
        for another worker's shard: pickle's error, before any shard runs ``fn``).
        """
        return self._client.map_shards(table, fn, args, self.job, self._clock, key_range)

    def report(self, **values) -> None:
        """Send ``values`` (numbers, strings) to the driver's ``callback`` of
        :meth:`~dask_ps.PSModel.run`, e.g. ``ps.report(epoch=3, loss=0.31)``; from a worker
        they travel as a ``"dask_ps.task"`` event, without a round trip.

        The message also holds ``process`` (an id of this task's process) and
        ``bytes_moved`` (keys and values the process has sent to and received from the
        shards so far; the tasks of a process share it). On a cluster, a number ``loss``
        also draws the loss curve of the dashboard page (the job's name is the function's):
        per epoch (``epoch``, or else this task's count of its loss reports), the mean of
        the losses reported for it, once every task has reported a later epoch or the job
        has ended (see the ``callback`` of :meth:`~dask_ps.PSModel.run`)."""
        report(self.job, self.task, {"process": self._client.uid,
                                     "bytes_moved": self._client.bytes_moved, **values})

    def pull_async(self, table: str, keys=None) -> Future:
        """:meth:`pull` at the current clock in a background thread, to overlap it with
        computation; its future's result is the pulled values.

        The pull is checked and planned at the call, as :meth:`pull` does it; only the
        fetch runs in the background. Do not change ``keys`` before the future is done. A
        :meth:`push` of the same keys once it is done reuses the pull's plan, as after
        :meth:`pull`.

        Raises
        ------
        UnknownTableError, TypeError, ValueError, IndexError, ClosedModelError, RuntimeError
            As :meth:`pull`, at the call: an unknown table, bad keys (not integers, not
            1-D, outside a dense table's rows, none for a sparse table), a closed model, a
            job that is over. What can only be known by sending the pull (a shard that does
            not answer, another task's failure while it waits, the error of a push in
            flight) is the future's exception.
        """
        planned = self._client.plan_pull(table, keys, self.job)
        return _background(self._client.pull_planned, planned, self._clock, self.task)

    def push_async(self, table: str, keys, updates) -> Future:
        """:meth:`push`, returning a done future (pushes are buffered anyway: nothing of it
        is left to run in the background).

        Raises
        ------
        UnknownTableError, IndexError, TypeError, ValueError
            As :meth:`push`, at the call: a refused push is never only in a future that
            nobody has to look at (its update would be lost and the job end normally).
        """
        self.push(table, keys, updates)
        fut: Future = Future()
        fut.set_result(None)
        return fut

    def clock_async(self) -> Future:
        """:meth:`clock` in a background thread; its future's result is the new clock. Wait
        for it before the task's next pull, push or clock.

        Raises
        ------
        ClosedModelError, RuntimeError
            As :meth:`clock`, at the call: a closed model, a job that is over. The rest
            of the clock (merging the process's pushes of the clock, sending the previous
            one's) runs in the background, and its errors are the future's exception: an
            integer sum past its table's dtype, a shard that refused or did not answer.
        """
        self._client.job(self.job)  # clock's own check, at the call
        return _background(self.clock)


_pool: ThreadPoolExecutor | None = None


def _background(fn, *args) -> Future:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(4, thread_name_prefix="dask-ps-async")
    return _pool.submit(fn, *args)
