"""A fit's set-up done again after a lost worker (:func:`redoes_setup`).

A fit first sets up: its PS model's shards placed, its data read and placed, its tables
created and filled (initial values, a warm start's weights, or the checkpoint a resume
restores), and, with a checkpoint URL, the version before epoch 1 saved. A worker lost
then (killed, out of memory, its batch job ended) used to end the fit with the loss's error
(a :class:`~dask_ps.exceptions.ShardUnavailableError`), where a loss during the epochs is
recovered (:func:`dask_ps.model.recovery.run_clocks`). Nothing is trained before epoch 1,
so nothing is lost with the worker that the set-up cannot make again: the fitting call
starts again on the live workers (a new model, its data placed again), the estimator as
it was before the call and the same seed, so that the fit is the one it would have been.
The redone set-up counts as one of the fit's ``max_recoveries`` and is recorded as a
recovery: a ``{"event": "recovery", "setup": True, ...}`` record at the head of the fit's
epochs in ``history_`` (the fields of :func:`~dask_ps.model.recovery.run_clocks`'s
recoveries) and a ``recovery:`` line per lost shard in the log and on the dashboard
(:func:`~dask_ps.diagnostics.events.log_recovery`).

A fit recovers its set-up when it recovers its epochs: with a checkpoint (a URL or
``"auto"``; no version of it is needed, nothing being trained yet), or when the estimator
recovers without one (``_recovers_without_checkpoint``: LDA rebuilds its counts). With
``checkpoint=None`` (recovery off) the loss's error is raised as before.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

from ..cluster import worker_info
from ..diagnostics.events import log_recovery
from ..exceptions import RecoveryError, WorkerLostError
from ..model.connection import default_cluster
from ..model.recovery import loss_errors

__all__ = ["SETUP_CHECKPOINT", "SetupAttempt", "finish_events", "join_loop", "note_model",
           "redoes_setup"]

#: Where an estimator keeps the :class:`SetupAttempt` of its current fitting call (present
#: only during the call).
_ATTEMPT = "_call_setup"
#: What a set-up's recovery line names as the source of the recreated shards.
SETUP_CHECKPOINT = "a fresh set-up (lost before the first epoch)"


class SetupAttempt:
    """One try of a fitting call: the PS models it made, its epoch loops, and the records
    of the set-ups redone before it (handed to its first loop, see :func:`join_loop`)."""

    def __init__(self, events: list[dict], client=None, workers: frozenset = frozenset()
                 ) -> None:
        self.models: list = []
        self.loops: list = []
        self.events = events
        self.client = client  # the cluster's, when the fit recovers (see _cluster_at_start)
        self.workers = workers  # its workers when the try started

    def began(self) -> bool:
        """Whether a loop of this try ran a job or recovered: a loss is then the loop's."""
        return any(loop.began for loop in self.loops)


def note_model(estimator, model) -> None:
    """Record ``model`` as the PS model the estimator's current fitting call made."""
    attempt = estimator.__dict__.get(_ATTEMPT)
    if attempt is not None:
        attempt.models.append(model)


def join_loop(estimator, loop) -> None:
    """Record ``loop`` as an epoch loop of the current fitting call; the first one gets the
    records of the set-ups redone (its ``setup_events``, put in its ``history_``) and has
    ``max_recoveries`` fewer by as many."""
    attempt = estimator.__dict__.get(_ATTEMPT)
    if attempt is None:
        return
    if not attempt.loops and attempt.events:
        loop.setup_events = list(attempt.events)
        loop.max_recoveries = max(0, loop.max_recoveries - len(attempt.events))
    attempt.loops.append(loop)


def redoes_setup(method: Callable, keep: tuple[str, ...] = ()) -> Callable:
    """``method`` (``fit``, ``partial_fit``) of an estimator, called again, as many as
    ``max_recoveries`` times, when a worker is lost during its set-up (see the module
    docstring). Between tries the estimator's attributes are put back as they were before
    the call, but for ``keep`` (e.g. the seed the call drew). Only the outermost fitting
    call tries again (a ``fit`` calling ``partial_fit``: the ``fit``).

    Raises
    ------
    RecoveryError
        The set-up lost a worker more than ``max_recoveries`` times (the last loss as its
        cause).
    Exception
        Anything else ``method`` raised, unchanged; the loss's own error when the fit does
        not recover (``checkpoint=None``).
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if _ATTEMPT in self.__dict__:  # nested: the outermost call tries again
            return method(self, *args, **kwargs)
        before = dict(self.__dict__)
        events: list[dict] = []
        try:
            while True:
                attempt = self.__dict__[_ATTEMPT] = SetupAttempt(events,
                                                                 *_cluster_at_start(self))
                try:
                    return method(self, *args, **kwargs)
                except Exception as exc:
                    try:
                        event = _setup_loss(self, attempt, exc)
                    except Exception:  # noqa: BLE001 - e.g. the client closed: exc says it
                        event = None
                    if event is None:
                        raise
                    if len(events) >= self.max_recoveries:
                        raise RecoveryError(event["lost_shards"], None, (
                            f"a worker was lost during the fit's set-up, before its first "
                            f"epoch, with {len(events)} recoveries made already "
                            f"(max_recoveries); last error: {exc!r}")) from exc
                    events.append(event)
                    kept = {k: self.__dict__[k] for k in keep if k in self.__dict__}
                    self.__dict__.clear()
                    self.__dict__.update(before)
                    self.__dict__.update(kept)
        finally:
            self.__dict__.pop(_ATTEMPT, None)

    return wrapper


def _recovers(estimator) -> bool:
    return estimator.checkpoint is not None or getattr(
        estimator, "_recovers_without_checkpoint", False)


def _cluster_at_start(estimator) -> tuple:
    """``(client, workers)`` of the cluster a fitting call of ``estimator`` starts on, for
    :func:`_setup_loss`; ``(None, frozenset())`` when the fit does not recover, runs in
    this process, or the scheduler does not answer (the call will say why)."""
    if not _recovers(estimator):
        return None, frozenset()
    client = getattr(estimator, "client", None)
    client = None if isinstance(client, str) else client or default_cluster()
    if client is None:
        return None, frozenset()
    try:
        return client, frozenset(worker_info(client))
    except Exception:  # noqa: BLE001 - e.g. a closed client: the fit raises it itself
        return None, frozenset()


def _setup_loss(estimator, attempt: SetupAttempt, exc: Exception) -> dict | None:
    """The recovery record of ``exc`` when it is a worker lost during the set-up of a fit
    that recovers; else None. Waits (up to the model's timeout) for the scheduler to see
    the worker ``exc`` names leave, so that the next try places nothing on it.

    Besides the errors of a loss (:func:`~dask_ps.model.recovery.loss_errors`), Dask says
    some losses during a set-up otherwise: a scatter to a worker that has just left (a
    ``KeyError`` of its address), futures cancelled because the worker that held their
    data left (``FutureCancelledError``: "already forgotten"), an actor's worker lost (a
    ``RuntimeError``). Any error counts as a loss when a worker of the cluster at the
    try's start is gone (a fit of bad data on a cluster that keeps its workers raises its
    error); a set-up redone in vain counts as one of ``max_recoveries``."""
    from distributed.scheduler import KilledWorker

    cause = exc.__cause__ if isinstance(exc, RecoveryError) else exc  # a first save's loss
    if attempt.began() or not _recovers(estimator):
        return None
    detected = time.time()
    model = attempt.models[-1] if attempt.models else None
    client = attempt.client if model is None else model.client
    if client is None:
        return None
    if isinstance(cause, loss_errors()):
        named = sorted(getattr(cause, "workers", []) or (
            [cause.address] if getattr(cause, "address", None) else []))
    else:  # said otherwise (see above): a loss if a worker of the try's start left
        named = sorted(attempt.workers - set(worker_info(client)))
        if not named:
            return None
    if model is not None and named:
        deadline = time.monotonic() + model.timeout
        while time.monotonic() < deadline and set(named) & set(worker_info(client)):
            time.sleep(0.2)
    live = set(worker_info(client))
    shards = [] if model is None else model.shards
    lost = [r.index for r in shards if r.address not in live]
    gone = sorted(set(named) - live)
    if not (lost or gone or isinstance(cause, (WorkerLostError, KilledWorker))):
        return None  # e.g. a TimeoutError with every worker still there: not a loss
    return dict(event="recovery", setup=True, failed_clock=0,
                lost_workers=sorted(set(gone) | {shards[i].address for i in lost}),
                was=[shards[i].address for i in lost],
                job_clocks_at_failure=None, error=repr(cause), detected_at=detected,
                lost_shards=lost, moved_to=[], checkpoint=None, checkpoint_version=None,
                checkpoint_clock=0, torn_versions=[], clocks_lost=0, seconds=None,
                rebuilt=True)


def finish_events(events: list[dict], model) -> list[dict]:
    """The records ``events`` of the set-ups redone before a fit, completed once it set up
    again on ``model``: where the lost shards are now (``moved_to``; None for a shard index
    the new model does not have) and the seconds from the loss to now (its epochs' start;
    the caller sets the clock). Logs a ``recovery:`` line per lost shard (dashboard,
    ``dask-ps train``)."""
    out = []
    for ev in events:
        ev = dict(ev)
        was = ev.pop("was")
        ev["moved_to"] = [model.shards[i].address if i < model.n_shards else None
                          for i in ev["lost_shards"]]
        ev["seconds"] = time.time() - ev["detected_at"]
        if not model.is_local:
            for shard, old, new in zip(ev["lost_shards"], was, ev["moved_to"]):
                log_recovery(shard, old, str(new), checkpoint=SETUP_CHECKPOINT,
                             model=model.uid, client=model.client)
        out.append(ev)
    return out
