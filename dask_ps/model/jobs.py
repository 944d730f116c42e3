"""Jobs: tasks that pull, push and clock on a model's shards under one consistency model.

:func:`run` runs ``fn(ps, item)`` per item; :func:`fit_partitions` runs a step on every data
partition, where the partition lives, for some epochs. With a cluster, the tasks of one
worker run in threads of one Dask task pinned to it, so a worker of any thread count can host
any number of them, and its tasks share one snapshot and one merged push per shard per clock.
While a job runs, the driver watches the workers it needs: a lost one ends the job with
:class:`~dask_ps.exceptions.WorkerLostError` instead of a hang. A failed job's exception
carries ``job_clocks``: the clock each participant had reached (None when finished), read
from the shards, for the recovery driver.

This module is the driver's side of a job: it places, starts, watches and ends it. What its
tasks run in their worker process (their threads, the epochs of a step, the notes on their
errors) is :mod:`~dask_ps.model._tasks`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from .. import _compat
from ..cluster import PauseWatch
from ..diagnostics.events import watch_job
from ..diagnostics.progress import JobReports
from ..exceptions import ShardUnavailableError, WorkerLostError
from ..partitions import Partition, Partitions
from ..state.consistency import DONE, Consistency, get_consistency
from ..state.keys import TASKS_PREFIX
from ..state.transport import note_function
from ..view import WorkerView
from . import connection, placement
from ._tasks import IN_TASK, EpochLoop, run_group, unpicklable, user_fn

if TYPE_CHECKING:
    from .core import PSModel

__all__ = ["fit_partitions", "run"]

#: Seconds between checks, while a job runs, that its workers and shards are still alive.
WATCH_INTERVAL = 0.5
#: Seconds a job stopped by an interrupt (Ctrl-C, SIGTERM's exception) waits, once ended
#: on the shards, for its tasks to stop running before its caller goes on (to release the
#: shards, close the workers): a task still running would call shards that are gone, or
#: be cancelled with its worker, and the workers would log either into the terminal.
STOP_WAIT = 10.0
#: Seconds between the first two checks that a stopped job's tasks stopped (on the workers
#: still running one), doubling after each check up to :data:`STOP_POLL_MAX`.
STOP_POLL = 0.05
STOP_POLL_MAX = 0.5


def run(model: PSModel, fn: Callable[[WorkerView, Any], Any], items: Iterable | Partitions, *,
        consistency: str | Consistency = "bsp", staleness: int | None = None,
        workers: list[str] | None = None,
        callback: Callable[[dict], None] | None = None) -> list:
    """Run ``fn(ps, item)`` for each item as one task of a job, under one consistency model.

    Each task gets a :class:`~dask_ps.view.WorkerView` ``ps`` to pull, push and clock. Tasks
    on the same worker process share one snapshot and one merged push per shard per clock.
    With a cluster, the items are spread round-robin over the workers (or placed by
    ``workers``) and each worker runs its items in threads of one Dask task; without a
    cluster, they run in threads of this process.

    Given :class:`~dask_ps.partitions.Partitions` instead of items, the job has one task per
    thread of each worker holding partitions, run on that worker, and ``fn(ps, parts)`` gets
    the task's :class:`~dask_ps.partitions.Partition` handles (see :func:`fit_partitions`
    for the usual loop over them).

    Parameters
    ----------
    fn : callable
        ``fn(ps, item) -> result``. Dask futures in ``items`` are resolved first.
    items : iterable or Partitions
        One per task.
    consistency : {"bsp", "ssp", "asp"} or Consistency, default "bsp"
    staleness : int, optional
        With ``consistency="ssp"``; default 1.
    workers : list of str, optional
        Worker address for each item (not with Partitions: they decide).
    callback : callable, optional
        ``callback(msg)`` runs in this process for every ``ps.report(**values)`` of a
        task, as soon as it arrives (a worker's reports travel as events, no round trip);
        ``msg`` holds ``job``, ``task``, ``time`` and the values. Calls are serialised and
        must be quick; their errors are logged, not raised. With or without it, on a
        cluster, the reports holding a number ``loss`` draw the loss curve of the dashboard
        page (:mod:`dask_ps.diagnostics`): per epoch (``epoch``, or else the task's count of
        its loss reports), the mean of the losses reported for it, once every task has
        reported a later epoch or the job has ended.

    Returns
    -------
    list
        The tasks' results, in the order of ``items`` (of the tasks, for Partitions).

    Raises
    ------
    RuntimeError
        A job already runs on this model, or ``run`` was called from inside a task (of a
        job of this model or another, naming both, or of none): one job at a time, started
        from the driver.
    ValueError
        ``workers`` of the wrong length or naming an address outside the cluster.
    WorkerLostError
        A worker the job needs (a task's or a shard's) left the cluster.
    TypeError
        (Or pickle's error.) On a cluster: ``fn``, what it refers to, or an item cannot be
        pickled for the workers (e.g. a step that uses a ``Partitions`` object), or a
        task's result cannot be pickled to reach the driver; pickle's error, with a note
        naming the function, the job and (for a result) the item, or the epoch and
        partition, the worker and the result's type.
    Exception
        The first error of a task; the job is then ended, so no task is left waiting. Its
        ``job_clocks`` attribute holds each participant's clock at the failure. An error
        ``fn`` raised keeps its type and message, with a note naming the function, the
        item (or epoch and partition), the job and the worker.
    RuntimeError
        On a cluster, ``fn`` raised a BaseException that is no Exception (``SystemExit``,
        ``KeyboardInterrupt``), which would end its worker: "task for item 0 raised
        SystemExit(2) ...", chained from it; the worker and its shards survive.
        In-process, it is raised as itself.
    """
    cons = get_consistency(consistency, staleness)
    _refuse_in_task(model)  # before a copy of an in-process model looks for its shards
    connection.process_client(model)  # ClosedModelError on a closed model
    _refuse_nested(model)  # before anything needs the driver's client
    info = None if model.is_local else placement.live_workers(model)
    if isinstance(items, Partitions):
        if workers is not None:
            raise ValueError("workers= cannot be given with Partitions: tasks run where the "
                             "partitions are")
        items, workers = _partition_tasks(model, items, info)
    items = list(items)
    if not items:
        return []
    job = uuid.uuid4().hex[:12]
    with connection.LOCK:  # claim the model atomically: two run() calls race otherwise
        _refuse_nested(model)
        model._job = job
    results: list = [None] * len(items)
    step = user_fn(fn)  # the name of the job's curve
    reports = JobReports(model, getattr(step, "__qualname__", type(step).__name__), len(items),
                         callback)
    shards = None
    stopped = False  # interrupted (Ctrl-C, SIGTERM's exception): not a task's error
    groups = None
    try:
        groups = _task_groups(model, len(items), workers, info)
        connection.call_all(model, "start_job", job, len(groups), cons)
        with watch_job(model._client, job, reports.handler()):
            if model.is_local:
                done = run_group(model, job, 0, cons, fn, list(enumerate(items)))
            else:
                done = _run_dask(model, fn, items, job, cons, groups)
        for t, r in done:
            results[t] = r
        return results
    except BaseException as exc:
        stopped = not isinstance(exc, Exception)
        # skip shards known dead: each call to one waits for its whole timeout
        shards = [i for i in range(model.n_shards) if i not in placement.lost_shards(model)]
        exc.job_clocks = None
        for r in connection.call_each(model, "stats", shards=shards, timeout=2.0):
            if isinstance(r, dict) and r.get("clocks") is not None:
                exc.job_clocks = [None if c >= DONE else int(c) for c in r["clocks"]]
                break
        raise
    finally:
        reports.close()  # the last epochs reach the loss curve, a failed job's too
        # ends the job on the shards; after a failure this wakes tasks still waiting.
        # A dead shard must not mask the error.
        for r in connection.call_each(model, "end_job", job, shards=shards,
                                      timeout=10.0 if shards is None else 2.0):
            if isinstance(r, BaseException) and not isinstance(r, ShardUnavailableError):
                raise r
        model._job = None
        if stopped and not model.is_local:  # woken, the tasks end at their next call
            _wait_tasks_stop(model._client, f"{TASKS_PREFIX}{job}-", STOP_WAIT,
                             None if groups is None else list(groups))


def fit_partitions(model: PSModel, step: Callable[[WorkerView, Partition], Any],
                   data: Partitions, *, epochs: int = 1, consistency: str | Consistency = "bsp",
                   staleness: int | None = None, seed: int = 0, first_epoch: int = 0,
                   callback: Callable[[dict], None] | None = None,
                   report_epochs: bool = False) -> list[list]:
    """Run ``step(ps, part)`` on every partition of ``data``, for ``epochs`` epochs, as one
    job; each step runs on the worker holding its partition.

    The job has one task per thread of each worker holding partitions (the worker's
    partitions dealt over its threads). A task visits its partitions in a fresh random order
    every epoch (drawn from ``seed``, the epoch and the task), one at a time: ``step`` gets a
    :class:`~dask_ps.partitions.Partition` handle, loads its value with ``part.load()`` (from
    the worker's memory, or Dask's spill on local disk) and keeps what must live across
    epochs and jobs in ``part.state``. ``step`` pulls, pushes and clocks as often as it
    likes (e.g. once per block of rows); the tasks of a worker process share one snapshot
    and one merged push per shard per clock.

    Parameters
    ----------
    step : callable
        ``step(ps, part) -> result``; ``part.epoch`` is the epoch being run.
    data : Partitions
        From :func:`dask_ps.partitions.partition`.
    epochs : int, default 1
    consistency, staleness, callback
        As for :func:`run`.
    seed : int, default 0
        Seed of the partitions' orders.
    first_epoch : int, default 0
        Number of the first epoch (``part.epoch``), for a fit that runs one job per epoch.
    report_epochs : bool, default False
        Each task also reports the end of each of its epochs to ``callback``
        (``ps.report(epoch=e)``, after its last step of the epoch): e.g. for the callback
        of :meth:`dask_ps.diagnostics.FitMonitor.stream`, which then records when each
        epoch ended.

    Returns
    -------
    list of lists
        ``results[e][i]``: what ``step`` returned for partition ``i`` in epoch
        ``first_epoch + e``.

    Raises
    ------
    ValueError
        ``epochs`` below 1.
    Exception
        As for :func:`run`.

    Examples
    --------
    >>> def step(ps, part):                     # doctest: +SKIP
    ...     X = part.load()
    ...     w = ps.pull("w", keys)
    ...     ps.push("w", keys, gradient(X, w))
    ...     ps.clock()
    >>> model.fit_partitions(step, partition(X), epochs=5)   # doctest: +SKIP
    """
    if not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    task = EpochLoop(step, int(epochs), int(seed), int(first_epoch), bool(report_epochs))
    per_task = run(model, task, data, consistency=consistency, staleness=staleness,
                   callback=callback)
    out = [[None] * len(data) for _ in range(epochs)]
    for results in per_task:
        for e, i, r in results:
            out[e][i] = r
    return out


def _partition_tasks(model: PSModel, data: Partitions, info) -> tuple[list, list | None]:
    """One item per task of ``data`` (its Partition handles) and the worker of each; the
    partitions of a worker that left are made again elsewhere first
    (:meth:`~dask_ps.partitions.Partitions.locate`)."""
    if data.is_local != model.is_local:
        raise ValueError("the partitions and the model must both be in this process or both "
                         "on the same cluster")
    if info is not None and not set(data.workers) <= set(info):
        data.locate()  # a worker holding partitions left: Dask makes them again elsewhere
    refs = data.refs()
    tasks = data.tasks(None if info is None else
                       {a: int(w.get("nthreads", 1)) for a, w in info.items()})
    items = [[refs[i] for i in idx] for _, idx in tasks]
    return items, (None if model.is_local else [w for w, _ in tasks])


def _task_groups(model: PSModel, n_tasks: int, workers, info) -> dict[str, list[int]]:
    """Task indices by worker address (one group, "local", without a cluster)."""
    if model.is_local:
        return {"local": list(range(n_tasks))}
    if workers is None:
        addrs = sorted(info)
        workers = [addrs[t % len(addrs)] for t in range(n_tasks)]
    if len(workers) != n_tasks:
        raise ValueError(f"workers has {len(workers)} addresses for {n_tasks} items")
    groups: dict[str, list[int]] = {}
    for t, addr in enumerate(workers):
        if addr not in info:
            if addr in model._seen_workers:  # it was here, and left
                raise WorkerLostError([addr], [r.index for r in model.shards
                                               if r.address == addr])
            raise ValueError(f"worker {addr} (item {t}) is not in the cluster")
        groups.setdefault(addr, []).append(t)
    return dict(sorted(groups.items()))


#: The rule :func:`run` enforces, ending its RuntimeErrors.
ONE_JOB = "one job at a time (and none from inside a task)"


def _refuse_nested(model: PSModel) -> None:
    """Raise RuntimeError if ``model`` runs a job, or is a task's copy of a cluster model
    (it has no client: jobs start from the driver), or is called from a task of a job, of
    this model or another: that task would hold its own job's barrier for the other job's
    whole run, its sibling tasks would race for the other model (one job at a time), and a
    failure of its job would leave the other's running, orphaned."""
    _refuse_in_task(model)
    if model._job is not None:
        raise RuntimeError(f"job {model._job!r} is already running on this model: {ONE_JOB}")
    if model._client is None and not model.is_local:
        from .._compat import current_worker

        where = ("from inside a task" if current_worker() is not None else
                 "on a copy of the model (copies have no Dask client)")
        raise RuntimeError(f"PSModel {model.uid}: run called {where}; start jobs from the "
                           f"driver: {ONE_JOB}")


def _refuse_in_task(model: PSModel) -> None:
    """Raise RuntimeError, naming both models, if this is a task of a job (see
    :func:`_refuse_nested`)."""
    inside = IN_TASK.get()
    if inside is not None:
        uid, job = inside
        raise RuntimeError(f"PSModel {model.uid}: run called from inside a task of job {job!r} "
                           f"of PSModel {uid}{' (this model)' if uid == model.uid else ''}; "
                           f"a task cannot start a job: start the jobs from the driver, one "
                           f"after the other: {ONE_JOB}")


def _wait_tasks_stop(client, prefix: str, limit: float, workers=None) -> int:
    """Wait up to ``limit`` seconds until no worker (of ``workers``: addresses; default all)
    runs a task whose key starts with ``prefix`` (released futures: their tasks run on until
    they return); returns how many times it asked.

    Asks at once, then only the workers still running one (a released task does not start
    later), :data:`STOP_POLL` seconds later, then twice as long after each answer up to
    :data:`STOP_POLL_MAX`: a big cluster is not asked every 50 ms for seconds.
    """
    deadline = time.monotonic() + limit
    pending = None if workers is None else list(workers)
    delay, asked = STOP_POLL, 0
    while time.monotonic() < deadline and (pending is None or pending):
        try:
            running = client.run(_compat.executing_keys, workers=pending, on_error="return")
        except Exception:  # noqa: BLE001 - a client or worker gone: nothing to wait for
            return asked + 1
        asked += 1
        pending = [w for w, keys in running.items()
                   if isinstance(keys, list) and any(str(k).startswith(prefix) for k in keys)]
        if pending:
            time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(2 * delay, STOP_POLL_MAX)
    return asked


def _run_dask(model: PSModel, fn, items, job, cons, groups) -> list:
    from distributed import wait

    client = model._client
    futs: list = []
    try:
        for pid, (addr, tasks) in enumerate(groups.items()):
            futs.append(client.submit(
                run_group, model, job, pid, cons, fn, [(t, items[t]) for t in tasks],
                workers=[addr], allow_other_workers=False, pure=False,
                key=f"{TASKS_PREFIX}{job}-{pid}"))
    except TypeError as exc:  # distributed could not pickle the task: say why, and whose
        for fut in futs:
            fut.cancel()
        cause = exc.__cause__  # pickle's error (distributed's serialize raises from it)
        if cause is None:
            raise
        raise note_function(cause, user_fn(fn), f"of job {job!r} for the workers (the "
                            f"function, what it refers to, or its tasks' items)",
                            how="pickling") from None
    needed = set(groups) | {r.address for r in model.shards}
    # a task pinned to a worker paused at its memory limit never starts
    paused = PauseWatch(client, f"job {job}", workers=set(groups))
    try:
        out, remaining, polls = [], list(futs), 0
        while remaining:
            try:
                wait(remaining, timeout=WATCH_INTERVAL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                # a task pinned to a dead worker would wait forever, and the others at
                # the next barrier with it: watch the workers instead
                placement.check_alive(model, needed)
                polls += 1
                if polls % 4 == 0 and _started(client, remaining) < len(remaining):
                    paused.check(len(remaining), len(futs))
            for fut in [f for f in remaining if f.done()]:
                try:
                    # the first error ends the job
                    out.extend(_result(model, fut, needed, fn, job))
                except TimeoutError as exc:
                    raise _with_unstarted(exc, client, futs, list(groups)) from exc
                remaining.remove(fut)
        return out
    finally:
        for fut in futs:
            fut.release()


def _with_unstarted(exc: TimeoutError, client, futs, addresses: list) -> TimeoutError:
    """``exc`` (a barrier that waited in vain), saying which participants never started:
    their worker's threads were busy with other work (another model's job, other tasks)."""
    try:
        running = {k for keys in client.run(_compat.executing_keys).values() for k in keys}
    except Exception:  # noqa: BLE001 - a worker gone: the error as it is
        return exc
    idle = [f"{pid} on {addresses[pid]}" for pid, f in enumerate(futs)
            if not f.done() and f.key not in running]
    if not idle:
        return exc
    return TimeoutError(f"{exc}; participant(s) {', '.join(idle)} never started: every thread "
                        f"of their worker was busy with other work (another job, or other "
                        f"Dask tasks); run one job at a time on these workers, or give them "
                        f"more threads")


def _started(client, futs) -> int:
    """How many of ``futs`` are done or processing on a worker."""
    processing = {k for keys in client.processing().values() for k in keys}
    return sum(f.done() or f.key in processing for f in futs)


def _result(model: PSModel, fut, needed: set[str], fn, job: str):
    """A finished task's result. Its worker may die before we fetch it; Dask would then
    rerun the task, pinned to that worker, and never finish: watch the workers meanwhile.
    One that cannot be pickled raises pickle's error, with a note naming the function and
    the result (see :func:`~._tasks.unpicklable`)."""
    for attempt in itertools.count():
        try:
            # a timeout cancels the transfer under way: a result that takes longer to fetch
            # than a fixed timeout would be fetched again and again, never whole (seen with
            # the ~100 MB bin samples of a GBDT survey on a loaded box); double it each time
            return fut.result(timeout=WATCH_INTERVAL * 2 ** min(attempt, 8))
        except TypeError:  # distributed's "Could not serialize", with ~80 lines of tracebacks
            if fut.status != "finished":  # the task's own TypeError
                raise
            found = unpicklable(model._client, fut, fn, job)
            if found is None:
                raise
            raise found from None
        except TimeoutError:
            if fut.status == "error":  # the task's own TimeoutError (the poll's class):
                fut.result()  # raise it
            placement.check_alive(model, needed)
        except (UnboundLocalError, asyncio.CancelledError, concurrent.futures.CancelledError):
            # the task was cancelled, or distributed's sync() fell through on that (seen when
            # the task's worker is SIGKILLed under load: a CancelledError is no Exception):
            # give the scheduler time to notice the death, which check_alive reports
            time.sleep(WATCH_INTERVAL)
            placement.check_alive(model, needed)
            if attempt > 60:
                raise WorkerLostError(sorted(needed), []) from None
