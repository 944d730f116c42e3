"""The epoch loop every dask_ps estimator trains in (:class:`EpochLoop`): one job per epoch
or per run of epochs between checkpoints, with checkpoints and recovery
(:func:`dask_ps.model.recovery.run_clocks`), a progress bar, per-epoch callbacks, an
``eval_set`` scored every epoch, divergence detection (:class:`~dask_ps.DivergenceError`)
and ``history_`` records whose fields mean the same in every estimator (see
:func:`~dask_ps.algorithms._base.history_fields`)."""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from typing import Callable

from ..diagnostics.progress import FitMonitor
from ..exceptions import DivergenceError
from ..model import PSModel
from ..model._targets import check_store_url
from ..model.recovery import run_clocks
from ._setup import finish_events

__all__ = ["AUTO_SNAPSHOT_SECONDS", "DIVERGENCE_FACTOR", "EpochLoop", "refuse_older_checkpoint"]

#: Seconds between the automatic snapshots of ``checkpoint="auto"`` (Angel's default is 60).
AUTO_SNAPSHOT_SECONDS = 60.0

#: A loss above this many times the best one so far (or the estimator's baseline) is
#: divergence.
DIVERGENCE_FACTOR = 100.0


class EpochLoop:
    """Runs a fit's epochs, one job each, with checkpoints, recovery, progress, callbacks,
    evaluation and divergence detection; collects ``history_``.

    Parameters
    ----------
    model : PSModel
    name : str
        Shown by the progress bar and the dashboard, e.g. ``"LogisticRegression(ftrl)"``.
    n_epochs : int
        At most this many epochs.
    checkpoint : str, "auto" or None, default None
        Checkpoint URL (reachable from every worker), saved every ``checkpoint_every``
        epochs; "auto": snapshots every :data:`AUTO_SNAPSHOT_SECONDS` into a temporary
        folder when every worker runs on this machine. A lost worker or shard is then
        recovered (see :func:`dask_ps.model.recovery.run_clocks`).
    checkpoint_every : int, default 1
    max_recoveries : int, default 3
    resume : bool, default False
        Continue from the newest complete version of ``checkpoint`` when there is one (its
        epochs' records head the history, and this fit's ``time`` goes on from theirs); a
        checkpoint whose tables are not this fit's (another feature count, rank, number of
        topics...) is refused with an :class:`~dask_ps.exceptions.OptionError` before
        anything is restored.
    progress : bool, optional
        Progress bar; default when interactive.
    callbacks : list of callable, optional
        ``cb(record) -> bool``: called with each epoch's record; True ends the fit.
    baseline : float, optional
        The loss of a trivial model (e.g. ``log 2`` for logistic regression): a loss above
        :data:`DIVERGENCE_FACTOR` times it is divergence even in the first epoch.
    advice : str
        What to change when training diverges, for the error message.
    unit : str, default "epoch"
    limit : str, default "max_iter"
        The estimator's parameter that sets ``n_epochs``, for messages (a ``resume`` from a
        checkpoint past ``n_epochs`` is refused naming it; see :meth:`run`'s ``rewinds``).
    job_seconds : float, optional
        Without a checkpoint, run jobs of about this many seconds (sized by the pace of the
        previous one, after a first job of one epoch) instead of one job for the whole
        fit: what a recovery by ``rebuild`` repeats (see :meth:`run`).
    fit_id : dict, optional
        What a checkpoint to resume from must have been written by (e.g. the estimator,
        its hashed width and classes; see :func:`dask_ps.model.recovery.run_clocks`).
    own_versions : list of int, optional
        The versions of ``checkpoint`` the earlier fits of the same stream wrote (e.g. the
        ``partial_fit`` calls before this one), pruned with this fit's so that the stream
        keeps 2 in all; updated in place (``own`` of
        :func:`dask_ps.model.recovery.run_clocks`). Default: this fit's versions alone.
    start_from : CheckpointInfo, optional
        The version of ``checkpoint`` that holds the model as this fit starts (the stream's
        last, the model unchanged since): when :meth:`run` is given ``restart`` or
        ``rebuild``, it is not saved again before the first epoch, and a loss before the
        fit's first version refills the tables with them (``start_from`` of
        :func:`~dask_ps.model.recovery.run_clocks`).

    Attributes
    ----------
    last_version : int or None
        After :meth:`run`: the version the fit saved last into ``own_versions`` (None when
        it saved none there).
    began : bool
        Whether :meth:`run` started a job or recovered from a loss: a loss before is one of
        the fit's set-up (see :mod:`._setup`).
    setup_events : list of dict
        Recoveries of the fit's set-up before this loop (see :mod:`._setup`): put at the
        head of the epochs in the history :meth:`run` returns.
    """

    def __init__(self, model: PSModel, name: str, n_epochs: int, *,
                 checkpoint: str | None = None, checkpoint_every: int = 1,
                 max_recoveries: int = 3, resume: bool = False, progress: bool | None = None,
                 callbacks: list | None = None, baseline: float | None = None,
                 advice: str = "", unit: str = "epoch", limit: str = "max_iter",
                 job_seconds: float | None = None, fit_id: dict | None = None,
                 own_versions: list[int] | None = None, start_from=None) -> None:
        self.model, self.name, self.n_epochs = model, name, int(n_epochs)
        self.checkpoint, self.checkpoint_every = checkpoint, int(checkpoint_every)
        self.max_recoveries, self.resume = int(max_recoveries), bool(resume)
        self.progress, self.callbacks = progress, list(callbacks or [])
        self.baseline, self.advice, self.unit, self.limit = baseline, advice, unit, limit
        self.job_seconds, self.fit_id = job_seconds, fit_id
        self.own_versions, self.start_from = own_versions, start_from
        self.last_version: int | None = None
        self.records: dict[int, dict] = {}
        self._job: tuple | None = None  # (monitor, first epoch) of the running job
        self.began = False
        self.setup_events: list[dict] = []

    def task_reports(self, n_tasks: int | None = None, n_rows: float | None = None):
        """For an ``epochs`` job of :meth:`run` whose ``n_tasks`` tasks (default: the job's)
        report each epoch once as it ends: the ``callback`` of :meth:`PSModel.run` (or
        :meth:`PSModel.fit_partitions` with ``report_epochs=True``) that records when each
        epoch ended (its ``time`` in the history: when the last task reported it) and, for
        reports with a loss (``ps.report(epoch=e, loss=...)``, their losses summed over
        ``n_rows`` rows or their weight), shows it (progress bar, dashboard, ``dask-ps
        train``'s lines) once every task has reported it, not at the job's end
        (:meth:`FitMonitor.stream`); None outside a job of :meth:`run`."""
        if self._job is None:
            return None
        monitor, first = self._job
        return monitor.stream(first, n_tasks, n_rows)

    def run(self, epochs: Callable[[int, int], list[dict]], *,
            evaluate: Callable[[int], dict] | None = None,
            stop: Callable[[list[dict]], bool] | None = None,
            on_recover: Callable[[], None] | None = None,
            rebuild: Callable[[], None] | None = None,
            restart: Callable[[], None] | None = None,
            driver_state: tuple[Callable, Callable] | None = None,
            rewinds: bool = False,
            driver_differs: Callable | None = None) -> list[dict]:
        """Run epochs ``1..n_epochs``; returns the history records.

        Epochs run as few jobs as the fit allows: one per epoch when the driver must act
        after each (``evaluate``, ``stop``, ``callbacks``); else as many as fit between two
        checkpoints (``checkpoint_every``, or about :data:`AUTO_SNAPSHOT_SECONDS` of work with
        ``checkpoint="auto"``), all of them without a checkpoint.

        Parameters
        ----------
        epochs : callable
            ``epochs(first, last) -> list of dict`` runs epochs ``first..last`` (1-based,
            inclusive) as one job and returns their records, each with at least ``loss``.
        evaluate : callable, optional
            ``evaluate(e) -> dict`` of metrics after epoch ``e`` (prefixed ``eval_``).
        stop : callable, optional
            ``stop(records) -> bool``: end the fit after this epoch (e.g. no improvement).
        on_recover : callable, optional
            Called after a recovery, before the epochs run again (e.g. to relocate data).
        rebuild : callable, optional
            Recover from a lost worker or shard without a checkpoint: every table is
            recreated empty, ``on_recover`` runs, ``rebuild()`` refills the tables from the
            workers' state, and the failed job's epochs run again (see
            :func:`dask_ps.model.recovery.run_clocks`).
        restart : callable, optional
            ``restart()`` refills the tables as they were before the first epoch, once they
            are recreated as :meth:`PSModel.add_table` made them (e.g. the warm start's
            pushes; ``lambda: None`` when nothing was pushed). With ``checkpoint="auto"``, or
            ``start_from``, it spares the snapshot before the first epoch: a loss before the
            first snapshot starts the fit again instead. (``checkpoint="auto"`` never saves
            after the last epoch either: its folder is deleted with the fit.)
        driver_state : (save, load), optional
            What the fit keeps in the driver, saved with every checkpoint and loaded when
            ``resume`` goes on from one (see :func:`dask_ps.model.recovery.run_clocks`).
        rewinds : bool, default False
            Whether ``driver_state``'s load takes a checkpoint past ``n_epochs`` back to
            ``n_epochs`` (GBDT's first trees); otherwise ``resume`` refuses one with an
            :class:`~dask_ps.exceptions.OptionError` naming ``limit``.
        driver_differs : callable, optional
            ``driver_differs(saved) -> str or None``: why a checkpoint whose driver state is
            ``saved`` holds another fit; a resume or a recovery takes the newest version of
            this fit, skipping those (see :func:`dask_ps.model.recovery.run_clocks`).

        Raises
        ------
        DivergenceError
            The loss is not finite, or grew past the divergence threshold.
        RecoveryError
            A worker or shard was lost and could not be recovered.
        """
        checkpoint, every, seconds, tmp = self._checkpoint()
        first = {}  # the clock of the first job (a resumed fit's: the checkpoint's)
        setup = finish_events(self.setup_events, self.model)  # logged before the epochs
        monitor = FitMonitor(self.model, self.name, self.n_epochs, progress=self.progress,
                             unit=self.unit)
        t_start = time.perf_counter()
        # a resumed fit's times go on from its checkpoint's last record's (see resumed)
        since = {"time": 0.0}
        per_epoch = evaluate is not None or stop is not None or bool(self.callbacks)
        pace = {"epoch_time": None, "halted": False}
        before = set(self.own_versions or ())
        # the stream's last version holds the model: not saved again when a loss before
        # the fit's first version can refill the tables without it
        start = self.start_from if tmp is None and (
            restart is not None or rebuild is not None) else None

        def job_length(clock: int) -> int:
            if per_epoch:
                return 1
            period = seconds if checkpoint is not None else self.job_seconds
            if checkpoint is None and period is None:
                return self.n_epochs - clock
            if period is None:
                return every
            if pace["epoch_time"] is None:  # measure the first epoch, then fill the period
                return 1
            return max(1, int(period / max(pace["epoch_time"], 1e-6)))

        def run_job(start: int, end: int) -> list[dict]:
            if pace["halted"]:  # no records: the driver ends the run here
                return []
            self.began = True
            first.setdefault("clock", start)
            t0 = time.perf_counter()
            self._job = (monitor, start + 1)
            try:
                out = epochs(start + 1, end)
            finally:
                self._job = None
            t1 = time.perf_counter()
            pace["epoch_time"] = (t1 - t0) / max(1, len(out))
            shares = monitor.epochs_done(start + 1, [r.get("loss", math.nan) for r in out])
            ends = _epoch_ends(t0, t1, [monitor.streamed.get(start + 1 + i)
                                       for i in range(len(out))])
            kept = []
            for i, r in enumerate(out):
                e = start + 1 + i
                record = dict(epoch=e, **r)
                self._check(e, record)
                if evaluate is not None:
                    record.update({f"eval_{k}": v for k, v in evaluate(e).items()})
                at = time.perf_counter() if evaluate is not None else ends[i][0]
                # (with an evaluation, one epoch per job: the evaluation counts too)
                record.update(epoch_time=ends[i][1], time=since["time"] + at - t_start,
                              bytes=shares[i])
                self.records[e] = record
                kept.append(record)
                halt = False
                for cb in self.callbacks:
                    halt = bool(cb(dict(record))) or halt
                done = [self.records[k] for k in sorted(self.records) if k <= e]
                if halt or (stop is not None and stop(done)):
                    pace["halted"] = True
                    break
            return kept

        def resumed(kept: list) -> None:  # the records restored from the checkpoint
            times = [r.get("time") for r in kept if isinstance(r, dict)]
            since["time"] = max([t for t in times if isinstance(t, (int, float))
                                 and math.isfinite(t)], default=0.0)

        def recovered():  # a loss after this one is the loop's, not the set-up's
            self.began = True
            if on_recover is not None:
                on_recover()

        try:
            records, events = run_clocks(
                self.model, run_job, self.n_epochs, checkpoint=checkpoint,
                checkpoint_every=every, checkpoint_seconds=seconds, job_clocks=job_length,
                max_recoveries=self.max_recoveries, on_recover=recovered,
                resume=self.resume and tmp is None,
                data_position=lambda c: {"epoch": c}, rebuild=rebuild,
                restart=restart if tmp is not None or start is not None else None,
                save_last=tmp is None,
                driver_state=driver_state, fit_id=self.fit_id, rewinds=rewinds,
                driver_differs=driver_differs, resumed=resumed,
                unit=self.unit, limit=self.limit,
                own=self.own_versions if tmp is None else None, start_from=start)
        finally:
            monitor.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        own = self.own_versions if tmp is None else None
        if own and own[-1] not in before:
            self.last_version = own[-1]
        history = [dict(r) if r is not None else dict(epoch=i + 1)
                   for i, r in enumerate(records)]
        for ev in reversed(events):
            history.insert(ev["failed_clock"], ev)
        head = first.get("clock", len(records))
        for ev in reversed(setup):
            history.insert(head, dict(ev, failed_clock=head, checkpoint_clock=head))
        return history

    def _check(self, e: int, record: dict) -> None:
        loss = record.get("loss")
        if loss is None:
            return
        best = min([r["loss"] for r in self.records.values() if "loss" in r] or [math.inf])
        limits = [DIVERGENCE_FACTOR * b for b in (best, self.baseline)
                  if b is not None and math.isfinite(b) and b > 0]
        if not math.isfinite(loss):
            what = f"the training loss is {loss}"
        elif limits and loss > min(limits):
            what = (f"the training loss {loss:.4g} is more than {DIVERGENCE_FACTOR:g} times "
                    + (f"the best so far ({best:.4g})" if best <= (self.baseline or math.inf)
                       else f"that of a trivial model ({self.baseline:.4g})"))
        else:
            return
        raise DivergenceError(self.name, e, what, self.advice)

    def _checkpoint(self) -> tuple[str | None, int, float | None, str | None]:
        """``(url, every, seconds, temporary folder)`` of the fit's snapshots.

        ``checkpoint="auto"``: snapshots every :data:`AUTO_SNAPSHOT_SECONDS` into a
        temporary folder, deleted after the fit, when every worker runs on this machine (it
        must be reachable from all of them); none otherwise.
        """
        url = self.checkpoint
        if url is None:
            return None, 1, None, None
        if url != "auto":
            check_store_url(url)  # now, not at the first save after training
            return url, self.checkpoint_every, None, None
        if not _same_host(self.model):
            return None, 1, None, None
        import dask

        tmp = tempfile.mkdtemp(prefix="dask-ps-snapshot-",
                               dir=dask.config.get("temporary-directory", None))
        return tmp, 1, AUTO_SNAPSHOT_SECONDS, tmp


def _epoch_ends(start: float, end: float, heard: list) -> list[tuple[float, float]]:
    """``(end, seconds)`` of each epoch of a job that ran from ``start`` to ``end``: its end
    as the driver heard it (``heard``: the time its last task reported it, or None), and
    the seconds since the end of the epoch before (the first: since ``start``). Epochs not
    heard share the time between the heard ends around them (or the job's start and end)
    evenly: a job whose tasks reported none gives each epoch the job's mean, their ends
    spread over it."""
    out: list[tuple[float, float]] = []
    last, i = start, 0
    while i < len(heard):
        if heard[i] is not None:
            at = max(heard[i], last)
            out.append((at, at - last))
            last, i = at, i + 1
            continue
        j = next((k for k in range(i, len(heard)) if heard[k] is not None), len(heard))
        share = max(0.0, (end if j == len(heard) else heard[j]) - last) / (j - i)
        out += [(last + (k + 1) * share, share) for k in range(j - i)]
        last, i = out[-1][0], j
    return out


def _same_host(model: PSModel) -> bool:
    """Whether every worker of the model's cluster runs on this machine (in-process: yes)."""
    if model.is_local:
        return True
    import socket

    from distributed.comm import get_address_host

    from ..cluster import worker_info

    hosts = {get_address_host(a) for a in worker_info(model.client)}
    local = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    try:
        local |= set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return hosts <= local


def refuse_older_checkpoint(url: str, held: str, kept: str, what: str, since: str) -> None:
    """Refuse to resume from checkpoint ``url`` whose newest version holds table ``held``
    but not ``kept``: one written before the estimator kept ``kept`` with its checkpoints
    (``what``: ``(what the version holds, what it lacks)``; ``since``: the date of that
    change). The generic check said "tables ['item'] (this fit's: ['item', 'user'])", as if
    the data or parameters differed. Nothing is said of a folder without a sound version:
    the resume itself names it.

    Raises
    ------
    OptionError
        Naming the checkpoint, its version, what it holds and lacks, and what to do.
    """
    import warnings

    from ..exceptions import OptionError
    from ..model import format as ck

    try:
        with warnings.catch_warnings():  # torn versions: said when the resume reads it
            warnings.simplefilter("ignore")
            info = ck.latest(url)
    except Exception:  # noqa: BLE001 - none, or damaged: the resume itself says so
        return
    tables = info.attrs.get("tables", {})
    if held in tables and kept not in tables:
        raise OptionError(f"resume: checkpoint {url!r} version {info.version} holds "
                          f"{what[0]} only: a dask_ps before {since} wrote it, without "
                          f"{what[1]} that a resume needs; fit afresh (resume=False) or "
                          f"into another checkpoint folder")
