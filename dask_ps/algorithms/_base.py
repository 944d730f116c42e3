"""What every dask_ps estimator shares: parameters, the PS model, data, the epoch loop.

An estimator is a thin scikit-learn shell over a training function written in the PSModel
API. :class:`PSEstimator` gives it, in one place:

* keyword-only parameters checked by scikit-learn's ``_parameter_constraints`` rules
  (:meth:`PSEstimator._validate`), with the parameters every estimator has
  (:data:`COMMON_CONSTRAINTS`);
* the model and the data (:meth:`~PSEstimator._model`, :meth:`~PSEstimator._partition`);
* the epoch loop (:class:`EpochLoop`): one job per epoch, checkpoints and recovery
  (:func:`dask_ps.model.recovery.run_clocks`), a progress bar, per-epoch callbacks, an
  ``eval_set`` scored every epoch, divergence detection (:class:`~dask_ps.DivergenceError`),
  and ``history_`` records whose fields mean the same in every estimator;
* pickling without the client (an estimator made with ``client=c`` pickles, clones and
  travels to tasks; the copy uses the current client);
* fits that fail leave the estimator as it was: every ``fit`` and ``partial_fit`` a
  subclass defines is wrapped (:func:`keeps_state_on_failure`) so that an exception restores
  its attributes, e.g. ``n_features_in_`` and ``feature_names_in_``, which scikit-learn's
  ``validate_data`` sets before training, stay those of the fitted model.
"""

from __future__ import annotations

import functools
import math
import numbers
import shutil
import tempfile
import time
from typing import Any, Callable

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data as _sklearn_validate_data

from .. import _compat
from ..diagnostics.progress import FitMonitor
from ..exceptions import DataError, DivergenceError
from ..model import PSModel
from ..model.format import check_store_url
from ..model.recovery import run_clocks
from ..partitions import Partitions, partition
from ..state.consistency import Consistency

__all__ = ["COMMON_CONSTRAINTS", "EpochLoop", "Interval", "PSEstimator", "check_numeric_columns",
           "history_fields", "keeps_state_on_failure", "validate_data"]

_pv = _compat.sklearn_param_validation()
StrOptions = _pv.StrOptions


class Interval(_pv.Interval):
    """scikit-learn's ``Interval`` constraint, refusing bools: Python's ``True`` is an
    ``Integral`` (and a ``Real``), so scikit-learn's takes ``max_workers=True`` as 1 and
    ``max_recoveries=False`` as 0. Every estimator's numeric constraints are these."""

    def is_satisfied_by(self, val) -> bool:
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


#: Constraints of the parameters every estimator has (scikit-learn's rules).
COMMON_CONSTRAINTS: dict[str, list] = {
    "consistency": [StrOptions({"bsp", "ssp", "asp"}), Consistency],
    "staleness": [Interval(numbers.Integral, 0, None, closed="left"), None],
    "n_shards": [Interval(numbers.Integral, 1, None, closed="left"), None],
    "shard_resources": [str, None],
    "random_state": [Interval(numbers.Integral, 0, None, closed="left"), None],
    "client": "no_validation",
    "checkpoint": [str, None],  # a URL, "auto" or None
    "checkpoint_every": [Interval(numbers.Integral, 1, None, closed="left")],
    "max_recoveries": [Interval(numbers.Integral, 0, None, closed="left")],
    "resume": ["boolean"],
    "progress": ["boolean", None],
    "callbacks": [list, None],
}

#: Seconds between the automatic snapshots of ``checkpoint="auto"`` (Angel's default is 60).
AUTO_SNAPSHOT_SECONDS = 60.0

#: A loss above this many times the best one so far (or the estimator's baseline) is
#: divergence.
DIVERGENCE_FACTOR = 100.0


def history_fields() -> str:
    """The text of the ``history_`` attribute shared by every estimator's docstring."""
    return """history_ : list of dict
        One record per epoch (a pass over the data; for L-BFGS, a function evaluation):
        ``epoch`` (1-based), ``loss`` (the estimator's training objective, see
        ``loss_name`` of its notes), ``time`` (seconds since the fit started),
        ``epoch_time`` (seconds of this epoch), ``bytes`` (keys and values pulled and
        pushed during it) and, with ``eval_set``, ``eval_<metric>`` for each metric
        scored. A ``{"event": "recovery", ...}`` record marks each recovery from a lost
        worker or shard; after a fit on a cluster the last record also reports the data
        (``source_reads``, ``bytes_in_memory``, ``bytes_on_disk``,
        ``incoming_transfer_bytes``, ...; see :meth:`dask_ps.Partitions.report`)."""


#: The methods of a :class:`PSEstimator` subclass wrapped by :func:`keeps_state_on_failure`.
FITTING_METHODS = ("fit", "partial_fit")


def keeps_state_on_failure(method: Callable) -> Callable:
    """``method`` of an estimator, restoring the estimator's attributes when it raises.

    The attributes (``__dict__``) are copied before the call (a shallow copy: the fits
    replace their fitted attributes, they do not change them in place); on any exception
    (KeyboardInterrupt too) they are put back, attributes the call added removed, and the
    exception goes on unchanged. A fitted model stays fitted and consistent (a failed
    ``fit(X[:, :5], y)`` used to leave ``n_features_in_ == 5`` beside an 8-column
    ``coef_``); an unfitted one stays unfitted.

    Parameters
    ----------
    method : callable
        ``method(self, *args, **kwargs)``.

    Returns
    -------
    callable
        The wrapped method (its name, docstring and signature are ``method``'s).
    """
    if getattr(method, "_keeps_state_on_failure", False):
        return method

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        before = dict(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    wrapper._keeps_state_on_failure = True
    return wrapper


class PSEstimator(BaseEstimator):
    """Base of the dask_ps estimators (see the module docstring)."""

    _parameter_constraints: dict = dict(COMMON_CONSTRAINTS)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for name in FITTING_METHODS:  # a failed fit leaves the estimator as it was
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, keeps_state_on_failure(method))

    def __getstate__(self) -> dict:
        # a Dask client does not pickle: the copy (e.g. in a task) uses the current client
        state = super().__getstate__() if hasattr(super(), "__getstate__") else dict(
            self.__dict__)
        state = dict(state)
        if state.get("client") is not None and not isinstance(state["client"], str):
            state["client"] = None
        return state

    def __sklearn_clone__(self):
        """scikit-learn's ``clone``, the ``client`` shared rather than copied: a Dask client
        cannot be deep-copied (``clone`` copies every parameter), and the clones that
        ``GridSearchCV`` and the like make should train on the same cluster."""
        client = self.client
        if client is None or isinstance(client, str):
            return super().__sklearn_clone__()
        self.client = None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def _validate(self) -> None:
        """Check every parameter against ``_parameter_constraints`` (scikit-learn's
        ``InvalidParameterError``, a ValueError, naming it), then the estimator's own
        cross-checks (:meth:`_check_params`)."""
        self._validate_params()
        if self.staleness is not None and self.consistency != "ssp":
            raise ValueError(f"staleness={self.staleness} needs consistency='ssp', got "
                             f"consistency={self.consistency!r}")
        if isinstance(self.client, str) and self.client != "local":
            raise ValueError(f"client must be a distributed.Client, 'local' or None, "
                             f"got {self.client!r}")
        self._check_params()

    def _check_params(self) -> None:
        """Cross-parameter checks of a subclass (ValueError naming the parameters)."""

    def _model(self) -> PSModel:
        """A new PS model on the estimator's client (or in this process); its shards on the
        workers offering the resource ``shard_resources`` when set (dedicated PS workers)."""
        return PSModel(self.client, n_shards=self.n_shards,
                       resources=getattr(self, "shard_resources", None))

    def _partition(self, model: PSModel, data, **kwargs) -> Partitions:
        """``data`` as partitions on the model's cluster (or in this process)."""
        return partition(data, client="local" if model.is_local else model.client, **kwargs)

    def _seed(self) -> int:
        return 0 if self.random_state is None else int(self.random_state)

    def _epoch_loop(self, model: PSModel, name: str, n_epochs: int, **kwargs) -> "EpochLoop":
        """An :class:`EpochLoop` with the estimator's checkpoint, progress and callbacks."""
        return EpochLoop(model, name, n_epochs, checkpoint=self.checkpoint,
                         checkpoint_every=self.checkpoint_every,
                         max_recoveries=self.max_recoveries, resume=self.resume,
                         progress=self.progress, callbacks=self.callbacks, **kwargs)


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
        Continue from the newest complete version of ``checkpoint`` when there is one; a
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
    job_seconds : float, optional
        Without a checkpoint, run jobs of about this many seconds (sized by the pace of the
        previous one, after a first job of one epoch) instead of one job for the whole
        fit: what a recovery by ``rebuild`` repeats (see :meth:`run`).
    fit_id : dict, optional
        What a checkpoint to resume from must have been written by (e.g. the estimator,
        its hashed width and classes; see :func:`dask_ps.model.recovery.run_clocks`).
    """

    def __init__(self, model: PSModel, name: str, n_epochs: int, *,
                 checkpoint: str | None = None, checkpoint_every: int = 1,
                 max_recoveries: int = 3, resume: bool = False, progress: bool | None = None,
                 callbacks: list | None = None, baseline: float | None = None,
                 advice: str = "", unit: str = "epoch",
                 job_seconds: float | None = None, fit_id: dict | None = None) -> None:
        self.model, self.name, self.n_epochs = model, name, int(n_epochs)
        self.checkpoint, self.checkpoint_every = checkpoint, int(checkpoint_every)
        self.max_recoveries, self.resume = int(max_recoveries), bool(resume)
        self.progress, self.callbacks = progress, list(callbacks or [])
        self.baseline, self.advice, self.unit = baseline, advice, unit
        self.job_seconds, self.fit_id = job_seconds, fit_id
        self.records: dict[int, dict] = {}

    def run(self, epochs: Callable[[int, int], list[dict]], *,
            evaluate: Callable[[int], dict] | None = None,
            stop: Callable[[list[dict]], bool] | None = None,
            on_recover: Callable[[], None] | None = None,
            rebuild: Callable[[], None] | None = None,
            restart: Callable[[], None] | None = None,
            driver_state: tuple[Callable, Callable] | None = None) -> list[dict]:
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
            pushes; ``lambda: None`` when nothing was pushed). With ``checkpoint="auto"`` it
            spares the snapshot before the first epoch: a loss before the first snapshot
            starts the fit again instead. (``checkpoint="auto"`` never saves after the last
            epoch either: its folder is deleted with the fit.)
        driver_state : (save, load), optional
            What the fit keeps in the driver, saved with every checkpoint and loaded when
            ``resume`` goes on from one (see :func:`dask_ps.model.recovery.run_clocks`).

        Raises
        ------
        DivergenceError
            The loss is not finite, or grew past the divergence threshold.
        RecoveryError
            A worker or shard was lost and could not be recovered.
        """
        checkpoint, every, seconds, tmp = self._checkpoint()
        monitor = FitMonitor(self.model, self.name, self.n_epochs, progress=self.progress,
                             unit=self.unit)
        t_start = time.perf_counter()
        per_epoch = evaluate is not None or stop is not None or bool(self.callbacks)
        pace = {"epoch_time": None, "halted": False}

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
            t0 = time.perf_counter()
            out = epochs(start + 1, end)
            took = (time.perf_counter() - t0) / max(1, len(out))
            pace["epoch_time"] = took
            shares = monitor.epochs_done(start + 1, [r.get("loss", math.nan) for r in out])
            kept = []
            for i, r in enumerate(out):
                e = start + 1 + i
                record = dict(epoch=e, **r)
                self._check(e, record)
                if evaluate is not None:
                    record.update({f"eval_{k}": v for k, v in evaluate(e).items()})
                record.update(epoch_time=took, time=time.perf_counter() - t_start,
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

        try:
            records, events = run_clocks(
                self.model, run_job, self.n_epochs, checkpoint=checkpoint,
                checkpoint_every=every, checkpoint_seconds=seconds, job_clocks=job_length,
                max_recoveries=self.max_recoveries, on_recover=on_recover,
                resume=self.resume and tmp is None,
                data_position=lambda c: {"epoch": c}, rebuild=rebuild,
                restart=restart if tmp is not None else None, save_last=tmp is None,
                driver_state=driver_state, fit_id=self.fit_id)
        finally:
            monitor.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        history = [dict(r) if r is not None else dict(epoch=i + 1)
                   for i, r in enumerate(records)]
        for ev in reversed(events):
            history.insert(ev["failed_clock"], ev)
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


#: A dask frame's columns are judged by the first of its first this many partitions that
#: has rows (:func:`check_numeric_columns`).
HEAD_PARTITIONS = 8


def check_numeric_columns(X, estimator: str, categories: bool = False) -> None:
    """Refuse a data frame ``X`` (pandas or dask) with columns that hold no numbers, naming
    them; anything else passes.

    Strings and objects are judged by their first 100 values (of a dask frame, those of the
    first of its first :data:`HEAD_PARTITIONS` partitions that has rows, computed once):
    numbers written as strings or objects pass, as scikit-learn takes them, and so do
    missing values among them (NaN, None, ``pd.NA``); the example value named is the first
    that is neither.

    Parameters
    ----------
    X : object
        What an estimator was given; only data frames (a ``dtypes`` per column) are looked
        at.
    estimator : str
        The estimator's name, for the message.
    categories : bool, default False
        Whether category columns pass whatever their categories (GBDT's: it splits on
        their codes); else only categories that are numbers do.

    Raises
    ------
    ValueError
        Columns of strings, objects, dates or categories of strings: up to 5 named, with
        their dtype and a value, and what to do (scikit-learn's own error names only the
        value: "could not convert string to float: 'u'").
    """
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(dtypes, "items"):  # arrays; a Series has one dtype
        return

    @functools.cache
    def head():
        if not hasattr(X, "npartitions"):
            return X.iloc[:100]
        for i in range(min(X.npartitions, HEAD_PARTITIONS)):  # the first with rows
            part = X.partitions[i].compute()
            if len(part):
                break
        return part.iloc[:100]

    def first_bad(j):
        """The first value of column ``j`` that is neither a number nor missing, or None."""
        import pandas as pd

        for v in head().iloc[:, j]:
            try:
                float(v)
            except (TypeError, ValueError):
                missing = pd.isna(v)  # an array for list values
                if not (isinstance(missing, (bool, np.bool_)) and missing):
                    return v
        return None

    def numeric(j, dt) -> bool:
        if getattr(dt, "categories", None) is not None:  # a category column: its values'
            if categories:
                return True
            dt = dt.categories.dtype
        if getattr(dt, "kind", "O") in "biuf":
            return True
        if getattr(dt, "kind", "") != "O":  # dates, durations, complex, intervals...
            return False
        # strings or objects that are numbers (scikit-learn takes them), or missing
        return first_bad(j) is None

    bad = [(j, name, dt) for j, (name, dt) in enumerate(dtypes.items()) if not numeric(j, dt)]
    if not bad:
        if not hasattr(X, "npartitions"):  # dask frames are read as floats, pd.NA as NaN
            _check_na_objects(dtypes, head, estimator)
        return
    said = []
    for j, name, dt in bad[:5]:
        value = first_bad(j) if getattr(dt, "kind", "") == "O" else \
            (head().iloc[0, j] if len(head()) else None)
        example = "" if value is None else f", e.g. {value!r}"
        said.append(f"{name!r} ({dt}{example})")
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    raise ValueError(f"{estimator}: X has columns that hold no numbers: {', '.join(said)}{more}; "
                     f"encode them as numbers first (category codes; GBDT also takes pandas "
                     f"'category' columns), hash them with dask_ps.io.encode_ctr, or drop "
                     f"them")


def _check_na_objects(dtypes, head, estimator: str) -> None:
    """Refuse ``pd.NA`` among the numbers of a pandas frame's string or object columns (of
    the values :func:`check_numeric_columns` reads): scikit-learn's conversion to float
    fails on it with a bare ``TypeError`` ("float() argument must be ... not 'NAType'"),
    where NaN and None are read as missing values."""
    import pandas as pd

    said = []
    for j, (name, dt) in enumerate(dtypes.items()):
        if getattr(dt, "kind", "") != "O" or getattr(dt, "categories", None) is not None:
            continue
        column = head().iloc[:, j]
        where = np.flatnonzero([v is pd.NA for v in column])
        if where.shape[0]:
            said.append(f"{name!r} ({dt}, row {column.index[where[0]]!r})")
    if said:
        raise ValueError(f"{estimator}: X has string or object columns whose missing values "
                         f"are pd.NA, which cannot be read as numbers: {', '.join(said[:5])}; "
                         f"convert them to floats first, e.g. X.astype({{name: 'Float64'}}) "
                         f"(pd.NA then reads as NaN)")


def fit_identity(estimator, n_features: int, classes) -> dict:
    """What a checkpoint of a linear or FM fit records of it, for ``resume``: the estimator,
    the feature count (the hashed width when it hashes) and the classes. A hashed table
    holds any key, so another width is only seen here (see
    :func:`dask_ps.model.recovery.check_resumable`).

    Parameters
    ----------
    estimator : PSEstimator
        Its class name and ``n_hashed_features`` (when it has one) are recorded.
    n_features : int
        Columns of ``X``.
    classes : array-like (n_classes,)
        The fit's classes, recorded as text.

    Returns
    -------
    dict
        JSON-able ``{"estimator": str, "n_features": int, "classes": list of str}``.
    """
    width = getattr(estimator, "n_hashed_features", None) or n_features
    return dict(estimator=type(estimator).__name__, n_features=int(width),
                classes=[str(c) for c in np.asarray(classes).tolist()])


def validate_data(estimator, *args, **kwargs):
    """scikit-learn's ``validate_data``, after :func:`check_numeric_columns` of ``X`` (the
    first of ``args``)."""
    if args:
        check_numeric_columns(args[0], type(estimator).__name__)
    return _sklearn_validate_data(estimator, *args, **kwargs)


def check_finite_rows(values: np.ndarray, where: str) -> None:
    """Raise ValueError naming the first row and column of ``values`` that is infinite."""
    bad = np.isinf(values)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataError(f"{where}: value {values[r, c]} at row {r}, column {c} is infinite")


def merged(records: list[dict], extra: dict[str, Any]) -> list[dict]:
    """``records`` with ``extra`` added to the last one (e.g. the data report)."""
    if records and extra:
        records[-1].update(extra)
    return records
