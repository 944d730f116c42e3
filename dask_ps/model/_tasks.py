"""A job's tasks where they run: the threads of one process that run its share of a job
(:func:`run_group`), the epochs of a :func:`~dask_ps.model.jobs.fit_partitions` task
(:class:`EpochLoop`), and the notes their errors get, naming the user's function, where it
ran (item, or epoch and partition), the job and the worker (:func:`user_fn`,
:func:`unpicklable` for a result that cannot be pickled). The driver's side, which places,
starts, watches and ends the job, is :mod:`~dask_ps.model.jobs`.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING

import numpy as np

from .. import _compat
from ..partitions import Partition
from ..partitions.worker import fit_spill_target, measure_step, shed_cache
from ..state._malloc import release_memory
from ..state.consistency import Consistency
from ..state.transport import note_function
from ..view import WorkerView
from . import connection

if TYPE_CHECKING:
    from .core import PSModel

__all__ = ["IN_TASK", "EpochLoop", "run_group", "unpicklable", "user_fn"]

#: ``(model uid, job id)`` of the task this context runs (see :func:`run_group`), or None.
IN_TASK: contextvars.ContextVar = contextvars.ContextVar("dask_ps_task", default=None)
#: ``(epoch, partition)`` of the step an :class:`EpochLoop` runs in this context, or None
#: (between steps): an error raised while it is set is the step's.
_AT: contextvars.ContextVar = contextvars.ContextVar("dask_ps_step", default=None)


class EpochLoop:
    """The task of :func:`~dask_ps.model.jobs.fit_partitions`: epochs over the task's
    partitions; with ``report``, the end of each reported (``ps.report(epoch=e)``)."""

    def __init__(self, step, epochs: int, seed: int, first_epoch: int,
                 report: bool = False) -> None:
        self.step, self.epochs, self.seed, self.first = step, epochs, seed, first_epoch
        self.report = report

    def __call__(self, ps: WorkerView, parts: list[Partition]) -> list:
        out = []
        fit_spill_target()  # the data Dask keeps in memory, beside the shards and the rest
        for e in range(self.epochs):
            epoch = self.first + e
            rng = np.random.default_rng([self.seed, epoch, ps.task])
            for j in rng.permutation(len(parts)):
                part = parts[j]
                part.epoch = epoch
                with measure_step():  # sizes the headroom fit_spill_target leaves
                    _AT.set((epoch, part.index))  # the step's error says where (_task_error)
                    out.append((e, part.index, self.step(ps, part)))
                    _AT.set(None)
                # what the step freed (its partition's copies, a reader's buffers) goes
                # back to the system before the next partition is loaded, when memory is
                # short; so do the cached blocks, past their share
                if release_memory():
                    if shed_cache():
                        release_memory(force=True)
                    fit_spill_target(release=False)
            if self.report:
                ps.report(epoch=epoch)
        return out


def user_fn(fn):
    """The user's function of a job's tasks: a :func:`~dask_ps.model.jobs.fit_partitions`
    step, or :func:`~dask_ps.model.jobs.run`'s ``fn``."""
    return fn.step if isinstance(fn, EpochLoop) else fn


def unpicklable(client, fut, fn, job: str) -> BaseException | None:
    """The error of pickling the first result, of task ``fut``'s, that pickle refuses (it
    stays in its worker's memory: distributed could not send it), with a note naming the
    user's function, the epoch and partition (:func:`~dask_ps.model.jobs.fit_partitions`)
    or item (:func:`~dask_ps.model.jobs.run`), the worker and the result's type; None when
    each pickles (another failure)."""
    try:
        addr = client.who_has([fut])[fut.key][0]
        found = client.run(_find_unpicklable, fut.key, isinstance(fn, EpochLoop),
                           workers=[addr])[addr]
    except Exception:  # noqa: BLE001 - the worker is gone: the error as it is
        return None
    if found is None:
        return None
    (t, e, i), kind, exc = found
    where = _where(fn, t, None if e is None else fn.first + e, i)
    return _note_task(exc, fn, job, where, f"worker {addr}", how="returned by",
                      tail=f": its result, a {kind}, cannot be pickled to reach the driver")


def _where(fn, t: int, epoch: int | None = None, part: int | None = None) -> str:
    """Where a job's function ran, for the notes of its errors: ``"in epoch 3, partition
    1"`` (a :func:`~dask_ps.model.jobs.fit_partitions` step) or ``"for item 2"``
    (:func:`~dask_ps.model.jobs.run`'s ``fn``)."""
    if isinstance(fn, EpochLoop):
        return f"in epoch {epoch}, partition {part}"
    return f"for item {t}"


def _note_task(exc: BaseException, fn, job: str, where: str, process: str,
               how: str = "raised by", tail: str = "") -> BaseException:
    """``exc`` with the note naming the user's function of job ``job``, ``where`` it ran
    (:func:`_where`) and its ``process`` (``"worker tcp://..."``): ``"raised by function
    mod.step in epoch 1, partition 1 of job '...' (worker tcp://...)"``; the one form of the
    notes of a task's errors, its own and its result's pickling (:func:`unpicklable`)."""
    return note_function(exc, user_fn(fn), f"{where} of job {job!r} ({process}){tail}",
                         how=how)


def _task_error(exc: BaseException, model: PSModel, fn, job: str, t: int) -> BaseException:
    """What task ``t`` raises for ``exc``, raised by its function ``fn``: ``exc`` with the
    note of :func:`_note_task` (none when an :class:`EpochLoop` raised it between steps:
    the library's error, not the step's).

    On a worker, a BaseException that is no Exception (``SystemExit``, ``KeyboardInterrupt``)
    would make Dask end the worker, and lose its shards: it becomes a RuntimeError (chained
    from it by the caller) saying what was raised. In-process, the user's own process, it
    stays itself, as it is (a Ctrl-C's KeyboardInterrupt, say)."""
    at = _AT.get()
    worker = None if model.is_local else _compat.current_worker()
    if (isinstance(fn, EpochLoop) and at is None) or (
            worker is None and not isinstance(exc, Exception)):
        return exc
    where = _where(fn, t, *(at or ()))
    process = "in this process" if worker is None else f"worker {worker.address}"
    if not isinstance(exc, Exception) and worker is not None:
        exc = RuntimeError(f"task {where} raised {exc!r} (this RuntimeError instead on "
                           f"the worker: a {type(exc).__name__} would end the worker, and "
                           f"lose its shards)")
    return _note_task(exc, fn, job, where, process)


def _find_unpicklable(key: str, epochs: bool, dask_worker=None):
    """On a worker: ``((item, epoch index, partition), type name, error)`` of the first
    result of :func:`run_group`'s ``(item, result)`` pairs held under ``key`` that
    cloudpickle refuses (``epochs``: each of an :class:`EpochLoop`'s ``(epoch index,
    partition, result)`` triples checked alone), or None."""
    import cloudpickle

    for t, result in _compat.worker_store(dask_worker).get(key, ()):
        for e, i, r in result if epochs else [(None, None, result)]:
            try:
                cloudpickle.dumps(r)
            except Exception as exc:  # noqa: BLE001 - pickle's own error, whatever it is
                return (t, e, i), type(r).__name__, exc
    return None


def run_group(model: PSModel, job: str, participant: int, cons: Consistency, fn,
              tasks: list) -> list:
    """Run ``fn(ps, item)`` for the ``(index, item)`` pairs of one process, one thread each.

    Threads share the process's snapshot and merged pushes. Returns ``(index, result)`` pairs;
    raises the first error without waiting for the other threads (the driver then ends the
    job, which wakes any thread waiting at a barrier).
    """
    pc = connection.process_client(model)
    for t, _ in tasks:
        pc.join(job, participant, len(tasks), cons, t)

    errors: list[BaseException] = []

    def one(t, item):
        inside = IN_TASK.set((model.uid, job))  # see jobs._refuse_nested
        at = _AT.set(None)
        try:
            result = fn(WorkerView(pc, job, t), item)
        except BaseException as exc:
            raised = _task_error(exc, model, fn, job, t)
            errors.append(raised)  # list.append is atomic: errors[0] is the first in time
            pc.abort(job, raised)
            if raised is exc:
                raise
            raise raised from exc
        finally:
            _AT.reset(at)
            IN_TASK.reset(inside)
        pc.finish(job, t)
        return t, result

    if len(tasks) == 1:
        return [one(*tasks[0])]
    ex = ThreadPoolExecutor(len(tasks), thread_name_prefix="dask-ps-task")
    try:
        # each thread runs in a copy of this task's context: get_worker() works there too
        futs = [ex.submit(contextvars.copy_context().run, one, t, item) for t, item in tasks]
        wait_futures(futs, return_when=FIRST_EXCEPTION)
        if errors:  # the others fail soon after, when the driver ends the job
            raise errors[0]
        return [f.result() for f in futs]
    finally:
        ex.shutdown(wait=False)
