"""Recovery: lost shards recreated from a checkpoint; the driver that runs clocks through it.

:func:`recover` (:meth:`PSModel.recover`) recreates lost shards on live workers and rolls
every shard back to the newest complete checkpoint. :func:`recreate` recreates them empty,
for tables that the workers can rebuild from their own state (LDA's word–topic counts are a
function of the topic assignments; Angel recovers them so). :func:`run_clocks` is the
training driver built on them:

An algorithm hands the driver a ``step(start, stop)`` that runs its clocks ``[start, stop)`` as
one job of a :class:`~dask_ps.PSModel` (for logistic regression a clock of the driver is an
epoch) and returns one result per clock. The driver cuts the clocks into jobs of
``checkpoint_every``, saves a checkpoint after each, and when a job fails because a worker or a
shard was lost it recreates the lost shards on live workers from the newest complete
checkpoint, rolls every shard back to that checkpoint's clock, lets the algorithm relocate its
data (Dask recomputes the partitions a dead worker held), and runs again from there. After
``max_recoveries`` recoveries it stops with a :class:`~dask_ps.exceptions.RecoveryError`
naming the lost shards and the last good checkpoint. Given a ``rebuild`` function instead, it
needs no checkpoint: every table is recreated empty, ``rebuild()`` refills them, and the
run goes on from the first clock of the failed job.

Under BSP, with clocks whose randomness depends only on (seed, clock), a recovered run is the
run that would have happened without the failure, up to the order of floating-point sums.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from ..diagnostics.events import log_checkpoint, log_recovery
from ..exceptions import (
    NoShardWorkerError,
    OptionError,
    RecoveryError,
    ShardUnavailableError,
    WorkerLostError,
)
from . import format as ck
from . import placement
from ._fit_checks import check_not_past, check_resumable, fit_differences
from ._versions import (
    newest_own,
    no_version_of_fit,
    own_version,
    prune,
    sound_or_none,
    warn_all_torn,
    warn_skipped,
)
from .checkpoint import restore_read

__all__ = ["check_not_past", "check_resumable", "fit_differences", "loss_errors", "recover",
           "recreate", "run_clocks"]

def loss_errors() -> tuple:
    """Errors that mean "a worker or shard went away"; a task's other errors are re-raised.
    (TimeoutError: a pull waited in vain for the clock of a participant that died.)"""
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return ShardUnavailableError, WorkerLostError, KilledWorker, CommClosedError, TimeoutError


def _wait_for_departure(model, exc: BaseException, limit: float) -> None:
    """Give the scheduler time to notice the death of a shard's worker that just failed."""
    address = getattr(exc, "address", None)
    if address is None or model.is_local:
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and address in placement.live_workers(model):
        time.sleep(0.2)


def restore_sound(model, info: ck.CheckpointInfo, optimizer_state: bool = True,
                  check: Callable | None = None, own: Callable | None = None, *,
                  skipped: dict | None = None, what: str = "this model",
                  say_torn: bool = True) -> ck.CheckpointInfo:
    """Restore version ``info`` of a checkpoint, or, when its data fails the restore's
    checks (e.g. a chunk whose checksum fails, which :func:`~dask_ps.model.format.latest`
    does not read, or another model's tables), the newest older complete version that passes
    them (:func:`~dask_ps.model.format.older_sound`; the damaged version is left in the
    store): what a resume and a recovery need, where ``restore`` of an explicit version
    stays strict.
    ``own(info)`` picks, before each try, the version to try of those from ``info`` down:
    the newest holding this model or fit (:func:`~dask_ps.model._versions.own_version`
    given ``skipped``: a version of another model is skipped as one, not as damage), adding
    the versions it skips to ``skipped`` (version -> what it holds; a dict the caller may
    have filled already). ``check(info)`` runs before each try (e.g.
    :func:`check_resumable`). Returns the version restored.

    Each version tried is restored as ``latest``, ``own`` or ``older_sound`` read and checked
    it, not read again (:func:`~dask_ps.model.checkpoint.restore_read`).

    Every version skipped on the way is said in one warning, pointing at the caller's line
    outside dask_ps (:func:`~dask_ps.model._versions.warn_skipped`; ``what`` names the
    model): torn (unless ``say_torn`` is False: a recovery expects the version its failure
    tore), damaged (found before loading or while loading), or holding another model;
    a :class:`~dask_ps.model.format.TornCheckpointWarning` when any was torn or damaged,
    else a ``UserWarning``. None when no version restores: the error names them all.

    Raises
    ------
    CheckpointFormatError
        No complete version restores: the first one's error, with a note naming the
        others'.
    """
    from ..exceptions import CheckpointFormatError

    errors: list[str] = []
    skipped = {} if skipped is None else skipped
    first = None
    while True:
        if own is not None:
            info = own(info)
        if check is not None:
            check(info)
        try:  # as latest read it: its metadata and manifest not read again
            restored = restore_read(model, info, optimizer_state)
        except CheckpointFormatError as exc:
            first = first or exc
            nxt = ck.older_sound(info, exc, errors, warn=False)  # said below, with the rest
        else:
            warn_skipped(restored if say_torn else replace(restored, torn=[]), skipped, what)
            return restored
        if nxt is None:
            first.add_note("no other complete version restores either" + (
                ": " + "; ".join(errors[1:]) if len(errors) > 1 else ""))
            raise first
        info = nxt


def run_clocks(model, step: Callable[[int, int], list], n_clocks: int, *,
               checkpoint: str | None = None, checkpoint_every: int = 1,
               checkpoint_seconds: float | None = None, resume: bool = False,
               keep: int | None = 2, max_recoveries: int = 3,
               job_clocks: Callable[[int], int] | None = None,
               on_recover: Callable[[], None] | None = None,
               data_position: Callable[[int], dict] | None = None,
               rebuild: Callable[[], None] | None = None,
               restart: Callable[[], None] | None = None,
               save_last: bool = True,
               driver_state: tuple[Callable, Callable] | None = None,
               fit_id: dict | None = None, rewinds: bool = False, unit: str = "clock",
               limit: str = "n_clocks",
               own: list[int] | None = None,
               start_from: ck.CheckpointInfo | None = None,
               driver_differs: Callable | None = None,
               resumed: Callable[[list], None] | None = None) -> tuple[list, list[dict]]:
    """Run clocks ``[0, n_clocks)`` with ``step``, checkpointing and recovering.

    Parameters
    ----------
    model : PSModel
    step : callable
        ``step(start, stop) -> list`` runs clocks ``[start, stop)`` (as one job of ``model``,
        or one per clock) and returns one JSON-able result per clock (e.g. the epoch's
        loss). Fewer results than clocks mean the algorithm stopped early: the run ends
        there (with its final checkpoint).
    n_clocks : int
    checkpoint : str, optional
        Checkpoint URL (reachable from every worker). Without one, failures are not
        recovered: they raise :class:`RecoveryError`.
    checkpoint_every : int, default 1
        Clocks per job; a checkpoint follows every job (and one is taken before the first,
        unless ``restart`` is given, and after the last, unless ``save_last`` is False).
    checkpoint_seconds : float, optional
        Then a checkpoint follows a job only once this many seconds have passed since the
        previous one.
    resume : bool, default False
        Start from the newest complete version of ``checkpoint`` holding this fit, if there
        is one (newer versions of other fits skipped with a ``UserWarning`` naming them):
        its tables, its clock and its results of the clocks before; an
        :class:`~dask_ps.exceptions.OptionError` when its tables are not the model's (see
        :func:`check_resumable`) or, unless ``rewinds``, when its clock is past
        ``n_clocks`` (:func:`check_not_past`), before anything is restored. A folder
        whose versions are all torn, or whose complete versions are all damaged: a
        ``TornCheckpointWarning`` names each and why
        (:func:`~dask_ps.model._versions.warn_all_torn`,
        :func:`~dask_ps.model._versions.sound_or_none`), and the run starts at clock 0,
        its versions saved after them (they are left in the folder).
    keep : int or None, default 2
        Complete versions of this run kept (older ones pruned); versions that were in
        ``checkpoint`` before the run, or that another writer saved there meanwhile, are
        never deleted.
    max_recoveries : int, default 3
    job_clocks : callable, optional
        ``job_clocks(clock) -> int``: clocks of the job starting at ``clock`` (instead of
        ``checkpoint_every``; e.g. sized by the time an epoch takes, or one clock per job
        for a per-clock callback); without ``checkpoint_seconds`` a checkpoint then follows
        the first job that ends ``checkpoint_every`` clocks or more after the previous one.
    on_recover : callable, optional
        Called after a recovery, before running again (e.g. to locate recomputed data).
    data_position : callable, optional
        ``data_position(clock) -> dict`` stored in each checkpoint; default
        ``{"clock": clock}``.
    rebuild : callable, optional
        Recover without a checkpoint: after a loss every table is recreated empty
        (:func:`recreate`), ``on_recover`` runs, then ``rebuild()`` refills the tables (e.g.
        from the workers' state), and the run goes on from the first clock of the failed
        job. Checkpoints, if any, are still saved but not restored.
    driver_state : (save, load), optional
        State the algorithm keeps in the driver rather than in tables (e.g. boosted trees):
        ``save(clock) -> dict`` (JSON-able) goes into every checkpoint, and ``load(dict or
        None, clock)`` gets it back when ``resume`` starts from one (None: the checkpoint
        holds none), before the first job.
    resumed : callable, optional
        ``resumed(results)`` before the first job of a resume: the results of the clocks
        before it, as the checkpoint kept them (e.g. to go on from their times).
    fit_id : dict, optional
        JSON-able description of the fit (e.g. its estimator, feature count, classes):
        saved with every checkpoint; ``resume`` refuses a checkpoint whose description
        differs (see :func:`check_resumable`).
    driver_differs : callable, optional
        ``driver_differs(saved) -> str or None``: why a checkpoint whose ``driver_state``
        is ``saved`` (None: it keeps none) holds another fit (e.g. GBDT's trees of other
        data), None when it is this fit's: with ``fit_id``, what a resume and a recovery
        tell this fit's versions by (:func:`fit_differences`).
    rewinds : bool, default False
        Whether ``driver_state``'s load can take a checkpoint past ``n_clocks`` back to
        ``n_clocks`` (GBDT: its first trees are those of the shorter fit); then ``resume``
        goes on from one, at clock ``n_clocks``.
    unit, limit : str
        What a clock is and what sets ``n_clocks``, for :func:`check_not_past`'s message.
    own : list of int, optional
        The versions of ``checkpoint`` earlier runs of the same learner wrote (e.g. the
        ``partial_fit`` calls of a stream before this one): counted as this run's, so that
        ``keep`` bounds the versions of the whole stream; updated in place (the versions
        this run writes appended, the pruned ones removed).
    start_from : CheckpointInfo, optional
        A version of ``checkpoint`` that holds the model this run starts from (e.g. the
        last version of the stream of ``partial_fit`` calls it goes on from, the model
        unchanged since): no version is saved before the first clock. Needs ``restart``
        or ``rebuild``: a loss before this run's first version refills the tables with
        them, not from a version (that one would not be exactly the run's start, e.g. the
        counts of a worker step's averaged rows; the folder's newest may be another's).

    Returns
    -------
    results : list
        One per clock.
    events : list of dict
        One per recovery: ``lost_shards``, ``lost_workers``, ``moved_to``, ``checkpoint``,
        ``checkpoint_version``, ``checkpoint_clock``, ``torn_versions`` (incomplete versions
        skipped, e.g. one the failure interrupted), ``failed_clock`` (first clock of the
        failed job), ``clocks_lost`` (driver clocks run again: ``failed_clock -
        checkpoint_clock``, plus one if the failed job had done any work),
        ``job_clocks_at_failure`` (the PS clock each participant of the failed job had
        reached, None when finished or unknown), ``error``, ``detected_at`` (Unix
        time the driver saw the failure) and ``seconds`` (time to recover). With
        ``rebuild``, or ``restart`` before the first version, ``checkpoint`` and its fields
        are None, ``rebuilt`` is True and ``checkpoint_clock`` is the clock the run went on
        from.

    Raises
    ------
    RecoveryError
        A loss without a checkpoint, more than ``max_recoveries`` losses, or no live
        worker left to hold the lost shards (it names the checkpoint to resume from).
    Exception
        Any other error of a step, unchanged.
    """
    if start_from is not None and restart is None and rebuild is None:
        raise ValueError("start_from needs restart or rebuild (to recover before the run's "
                         "first version)")
    if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be a positive integer, got "
                         f"{checkpoint_every!r}")
    position = data_position or (lambda c: {"clock": c})
    results: list = []  # grown as clocks finish: n_clocks may be huge (stops early)
    events: list[dict] = []
    every = checkpoint_every if checkpoint is not None else max(n_clocks, 1)
    last = None
    clock = 0
    def differs(info):  # which versions of the folder are this fit's
        return fit_differences(model, info, fit_id, driver_differs)

    listed = ck.read_versions(checkpoint) if resume and checkpoint is not None else None
    if listed is not None and listed[1] and not listed[0]:  # every version torn: said
        warn_all_torn(checkpoint, listed[1], unit)
    if listed is not None and listed[0]:  # one listing: whether to resume, and from which
        def check(info):
            check_resumable(model, info, fit_id, driver_differs)
            if not rewinds:
                check_not_past(info, n_clocks, unit, limit)

        skipped: dict = {}  # versions of other fits: said with the damaged, at once

        def own_fit(info):
            start, others = newest_own(info, differs, "this fit", warn=False)
            if start is None:  # no version of this fit: named, with what the folder holds
                raise OptionError(no_version_of_fit(info, others, driver_differs))
            skipped.update(others)
            return start

        last = sound_or_none(checkpoint, listed, unit, lambda: restore_sound(
            model, ck.latest(checkpoint, warn=False, listed=listed), check=check,
            own=own_fit, skipped=skipped, what="this fit"))
    if last is not None:  # resumed
        clock = min(last.clock, n_clocks)
        kept = list(last.attrs.get("extra", {}).get("results", []))[:clock]
        results[:] = kept + [None] * (clock - len(kept))
        if resumed is not None:
            resumed(results[:clock])
        if driver_state is not None:
            driver_state[1](last.attrs.get("extra", {}).get("driver"), clock)
        if not model.is_local:  # the batch log says where the rerun starts
            log_checkpoint(last.url, last.version, model=model.uid, client=model.client,
                           resumed_clock=clock)

    if last is None and start_from is not None:  # the model is saved already
        last = start_from
    # versions this run (and the earlier runs of its stream) wrote; others' are kept
    mine: list[int] = own if own is not None else []

    saved = {"clock": clock}  # the clock of the tables' last version (saved or restored)

    def save(c):
        saved["clock"] = c
        extra = dict(results=results[:c])
        if fit_id is not None:
            extra["fit"] = fit_id
        if driver_state is not None:
            extra["driver"] = driver_state[0](c)
        info = model.save(checkpoint, clock=c, data_position=position(c), extra=extra)
        mine.append(info.version)
        if keep is not None:
            gone = prune(checkpoint, keep, first=mine[0], only=mine)
            mine[:] = [v for v in mine if v not in gone]
        return info

    losses = loss_errors()
    started = time.time()
    pending_save = checkpoint is not None and last is None and restart is None
    failure: dict | None = None  # the loss being recovered from
    n_failures = 0
    while clock < n_clocks or pending_save or failure is not None:
        stop = min(clock + (every if job_clocks is None else max(1, job_clocks(clock))),
                   n_clocks)
        try:
            if failure is not None:  # inside the try: a loss during recovery is one more
                if failure.pop("restart", False):  # before the first version: start again
                    rec = recreate(model)
                    if on_recover is not None:
                        on_recover()
                    restart()
                    rec.update(checkpoint=None, version=None, clock=0, torn=[],
                               seconds=time.perf_counter() - rec["started"])
                elif rebuild is None:
                    try:
                        rec = recover(model, checkpoint, differs=differs, what="this fit")
                    except NoShardWorkerError as exc:  # e.g. every job's walltime ended at once
                        raise RecoveryError(model.lost_shards(), f"{last.url} version "
                                            f"{last.version} (clock {last.clock})",
                                            f"{exc}; rerun with resume to continue from the "
                                            f"checkpoint") from None
                    if on_recover is not None:
                        on_recover()
                else:
                    rec = recreate(model)
                    if on_recover is not None:
                        on_recover()
                    rebuild()
                    rec.update(checkpoint=None, version=None, clock=failure["failed_clock"],
                               torn=[], seconds=time.perf_counter() - rec["started"])
                events.append(dict(failure, lost_shards=rec["lost_shards"],
                                   moved_to=rec["moved_to"], checkpoint=rec["checkpoint"],
                                   checkpoint_version=rec["version"],
                                   checkpoint_clock=rec["clock"], torn_versions=rec["torn"],
                                   clocks_lost=failure["failed_clock"] - rec["clock"]
                                   + failure.pop("partial"), seconds=rec["seconds"],
                                   **({"rebuilt": True} if rec["checkpoint"] is None
                                      else {})))
                clock, failure, pending_save = rec["clock"], None, False
                saved["clock"] = clock
            elif pending_save:
                last = save(clock)
                pending_save = False
            else:
                done = step(clock, stop)
                if len(done) < stop - clock:  # the algorithm stopped early (converged)
                    n_clocks = clock + len(done)
                    del results[n_clocks:]
                results[clock:clock + len(done)] = done
                clock += len(done)
                pending_save = checkpoint is not None and (
                    save_last if clock == n_clocks else (
                        clock - saved["clock"] >= checkpoint_every
                        if checkpoint_seconds is None else time.time() - (
                            started if last is None else last.attrs["saved_at"])
                        >= checkpoint_seconds))
        except losses as exc:
            detected = time.time()
            _wait_for_departure(model, exc, model.timeout)
            lost = model.lost_shards() or getattr(exc, "shards", [])
            good = None if last is None else f"{last.url} version {last.version} " \
                                             f"(clock {last.clock})"
            before_first = restart is not None and checkpoint is not None and (
                last is None or last is start_from)
            if rebuild is None and not before_first and (checkpoint is None or last is None):
                raise RecoveryError(lost, good, f"no checkpoint to recover from ({exc!r}); "
                                    f"pass a checkpoint URL to recover automatically") from exc
            if n_failures >= max_recoveries:
                raise RecoveryError(lost, good, f"{n_failures} recoveries already "
                                    f"(max_recoveries); last error: {exc!r}") from exc
            n_failures += 1
            failed_clocks = getattr(exc, "job_clocks", None)  # set by a failed job
            partial = max([c for c in (failed_clocks or []) if c is not None], default=0) > 0
            failure = dict(
                event="recovery", failed_clock=clock, partial=int(partial),
                lost_workers=sorted(getattr(exc, "workers", []) or
                                    ([exc.address] if getattr(exc, "address", None) else [])),
                job_clocks_at_failure=failed_clocks, error=repr(exc), detected_at=detected,
                **({"restart": True} if before_first and rebuild is None else {}))
    return results, events


def recreate(model) -> dict:
    """Recreate lost shards on live workers and every table empty on every shard, as
    :meth:`PSModel.add_table` made them (the caller refills them).

    Returns
    -------
    dict
        ``lost_shards`` (indices), ``moved_to`` (their new workers), ``started``
        (``time.perf_counter()`` at the start).

    Raises
    ------
    ValueError
        No live worker can host the lost shards.
    """
    t0 = time.perf_counter()
    model._refuse_in_job("recreate tables", "recover between jobs")
    lost = placement.lost_shards(model)
    was = [model.shards[i].address for i in lost]
    moved = placement.replace_shards(model, lost) if lost else []
    for name in model.specs:
        model.empty_table(name)
    if not model.is_local:
        for shard, old, new in zip(lost, was, moved):
            log_recovery(shard, old, new, checkpoint="rebuilt", model=model.uid,
                         client=model.client)
    return dict(lost_shards=lost, moved_to=moved, started=t0)


def recover(model, checkpoint: str, optimizer_state: bool = True, *,
            differs: Callable | None = None, what: str = "this model") -> dict:
    """Recreate lost shards on live workers and roll every shard back to the newest
    complete version of ``checkpoint`` holding the model.

    In a folder where other models save too, newer versions of another model are skipped
    (:func:`~dask_ps.model._versions.own_version`), and so are damaged ones, found before
    loading or while loading (:func:`restore_sound`). ``differs(info) -> str or None`` says
    why a version holds another model (default: another model's tables; :func:`run_clocks`
    passes :func:`fit_differences` of its fit), ``what`` names the model in the warning.

    Returns
    -------
    dict
        ``lost_shards`` (indices), ``moved_to`` (their new workers), ``checkpoint``
        (URL), ``version``, ``clock`` (of the checkpoint), ``torn`` and ``seconds``.

    Raises
    ------
    CheckpointNotFoundError
        No complete checkpoint (saying what is there instead, as PSModel.load does).
    CheckpointFormatError
        No version of the folder holds the model (naming the folder and what each version
        holds), checked before any shard is moved; or none of those that do restores.
    NoShardWorkerError
        No live worker can host the lost shards (a ValueError).

    Warns
    -----
    TornCheckpointWarning
        Newer versions were damaged, and skipped: one warning naming every version skipped
        and why (those holding another model too), pointing at the caller's line. Torn
        versions (e.g. the one the failure interrupted) are not warned of: they are in
        ``torn``.
    UserWarning
        Newer versions hold another model and were skipped (naming them and what they
        hold), none damaged.
    """
    t0 = time.perf_counter()
    info = ck.latest(checkpoint, warn=False)  # what it skipped: said once, when restored
    skipped: dict = {}  # versions of other models, said with the damaged ones

    def own(i):
        return own_version(model, i, differs, what, skipped=skipped)

    info = own(info)  # before any shard is moved: no version of the model, nothing moved
    lost = placement.lost_shards(model)
    was = [model.shards[i].address for i in lost]
    moved = placement.replace_shards(model, lost) if lost else []
    # a version torn by the very failure being recovered from is expected: it is reported
    # in the result (``torn``), not warned of
    info = restore_sound(model, info, optimizer_state, own=own, skipped=skipped, what=what,
                         say_torn=False)
    if not model.is_local:  # the dashboard's table of recoveries
        for shard, old, new in zip(lost, was, moved):
            log_recovery(shard, old, new, checkpoint=f"{info.url} v{info.version}",
                         model=model.uid, client=model.client)
    return dict(lost_shards=lost, moved_to=moved, checkpoint=info.url,
                version=info.version, clock=info.clock, torn=info.torn,
                seconds=time.perf_counter() - t0)
