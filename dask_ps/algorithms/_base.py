"""What every dask_ps estimator shares: parameters, the PS model, data, the epoch loop.

An estimator is a thin scikit-learn shell over a training function written in the PSModel
API. :class:`PSEstimator` gives it, in one place:

* keyword-only parameters checked by scikit-learn's ``_parameter_constraints`` rules
  (:meth:`PSEstimator._validate`), with the parameters every estimator has
  (:data:`COMMON_CONSTRAINTS`);
* the model and the data (:meth:`~PSEstimator._model`, :meth:`~PSEstimator._partition`);
* the epoch loop (:class:`~.epoch_loop.EpochLoop`, :meth:`~PSEstimator._epoch_loop`): checkpoints,
  recovery, progress, callbacks, evaluation, divergence and ``history_``; the checkpoint
  versions of a stream of ``partial_fit`` calls are kept by :mod:`._stream`;
* pickling without the client (an estimator made with ``client=c`` pickles, clones and
  travels to tasks; the copy uses the current client);
* a worker lost during a fit's set-up, before its first epoch, sets the fit up again on the
  live workers (:mod:`._setup`);
* fits that fail leave the estimator as it was: every ``fit`` and ``partial_fit`` a
  subclass defines is wrapped (:func:`keeps_state_on_failure`) so that an exception restores
  its attributes, e.g. ``n_features_in_`` and ``feature_names_in_``, which scikit-learn's
  ``validate_data`` sets before training, stay those of the fitted model.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data as _sklearn_validate_data

from .. import _compat
from ..exceptions import DataError, NoCheckpointToResumeError
from ..model import PSModel
from ..partitions import Partitions, partition
from ..partitions.inputs import check_columns
from ..state.consistency import Consistency
from ._renamed import check_renamed, renamed_value
from ._setup import join_loop, note_model, redoes_setup
from ._stream import _CALL_LOOPS, _LAST_VERSION, notes_last_version, stream_start, stream_versions
from .epoch_loop import EpochLoop

__all__ = ["COMMON_CONSTRAINTS", "Interval", "PSEstimator", "check_numeric_columns",
           "checksum", "history_doc", "history_fields", "keeps_state_on_failure",
           "one_seed_per_call", "validate_data"]

_pv = _compat.sklearn_param_validation()
StrOptions = _pv.StrOptions


class Interval(_pv.Interval):
    """scikit-learn's ``Interval`` constraint, refusing bools: Python's ``True`` is an
    ``Integral`` (and a ``Real``), so scikit-learn's takes ``max_workers=True`` as 1 and
    ``max_recoveries=False`` as 0. Every estimator's numeric constraints are these."""

    def is_satisfied_by(self, val) -> bool:
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)

    def __str__(self) -> str:  # a float bound of 1e6 or more as 1e+15, not 1000000000000000.0
        text = super().__str__()
        if self.type is not numbers.Integral:
            for bound in (self.left, self.right):
                if bound is not None and abs(bound) >= 1e6:
                    text = text.replace(str(float(bound)), f"{float(bound):g}")
        return text


#: Constraints of the parameters every estimator has (scikit-learn's rules).
COMMON_CONSTRAINTS: dict[str, list] = {
    "consistency": [StrOptions({"bsp", "ssp", "asp"}), Consistency],
    "staleness": [Interval(numbers.Integral, 0, None, closed="left"), None],
    "n_shards": [Interval(numbers.Integral, 1, None, closed="left"), None],
    "shard_resources": [str, None],
    # an int seed, a RandomState drawn from once per fit (PSEstimator._seed), or None (seed 0)
    "random_state": [Interval(numbers.Integral, 0, None, closed="left"),
                     np.random.RandomState, None],
    "client": "no_validation",
    "checkpoint": [str, None],  # a URL, "auto" or None
    "checkpoint_every": [Interval(numbers.Integral, 1, None, closed="left")],
    "max_recoveries": [Interval(numbers.Integral, 0, None, closed="left")],
    "resume": ["boolean"],
    "progress": ["boolean", None],
    "callbacks": [list, None],
}

def history_fields() -> str:
    """The text of the ``history_`` attribute shared by every estimator's docstring."""
    return """history_ : list of dict
        One record per epoch (a pass over the data; for L-BFGS, a function evaluation):
        ``epoch`` (1-based), ``loss`` (the estimator's training objective, named
        below), ``time`` (seconds since the fit started, at the end of this epoch: when
        the driver heard the last task of its job report it; with ``eval_set``, after its
        evaluation; a fit resumed from a checkpoint keeps the records of the epochs it
        restored, and its own epochs' ``time`` goes on from the last one's: the training
        time that led to the model, never going back, without the pause between the two
        fits nor what the interrupted one ran after its last checkpoint), ``epoch_time``
        (seconds from the end of the epoch before, or from the start of its job for the
        first epoch of a job, so that what runs between two jobs, a checkpoint or the
        restore of a resumed fit, is counted in ``time`` only; epochs run in one job, with no
        checkpoint, callback or evaluation between them, each get their own, and only
        epochs whose tasks did not report their end share the job's time evenly; for
        L-BFGS, from the end of the evaluation before, the solver's step between them
        included, or from the start of the first evaluation), ``bytes`` (keys and values
        pulled and pushed during it) and, with ``eval_set``, ``eval_<metric>`` for each
        metric scored. A ``{"event": "recovery", ...}`` record marks each recovery from a lost
        worker or shard; after a fit on a cluster the last record also reports the data
        (``source_reads``, ``bytes_in_memory``, ``bytes_on_disk``,
        ``incoming_transfer_bytes``, ...; see :meth:`dask_ps.Partitions.report`)."""


HISTORY_REF = "See :func:`~dask_ps.algorithms._base.history_fields`; "


def history_doc(cls):
    """Class decorator: the text of :func:`history_fields` in the class's docstring, in place
    of ``HISTORY_REF`` (which ``help()`` would show as a pointer into this private module)."""
    if cls.__doc__ and HISTORY_REF in cls.__doc__:
        body = history_fields().split("\n", 1)[1].strip()
        cls.__doc__ = cls.__doc__.replace(HISTORY_REF, body + "\n        Here ", 1)
    return cls


#: The methods of a :class:`PSEstimator` subclass wrapped by :func:`keeps_state_on_failure`
#: and :func:`one_seed_per_call`.
FITTING_METHODS = ("fit", "partial_fit")
#: Where a fitting call keeps the seed it drew from a ``RandomState`` (see
#: :meth:`PSEstimator._seed`); present only during the call.
_CALL_SEED = "_call_seed"


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


def one_seed_per_call(method: Callable) -> Callable:
    """``method`` of an estimator (``fit``, ``partial_fit``) during which
    :meth:`PSEstimator._seed` draws from a ``random_state`` that is a ``RandomState`` once:
    every later call of ``_seed`` in it (and a ``fit`` calling ``partial_fit``) gets the
    same seed. The seed is forgotten when the outermost call returns or raises."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        outer = _CALL_SEED not in self.__dict__
        if outer:
            self.__dict__[_CALL_SEED] = None  # drawn at the first _seed()
        try:
            return method(self, *args, **kwargs)
        finally:
            if outer:
                self.__dict__.pop(_CALL_SEED, None)

    return wrapper


def _fitting(method: Callable) -> Callable:
    """A fitting ``method`` (``fit``, ``partial_fit``, or the function of scikit-learn's
    ``available_if`` of one) wrapped by :func:`keeps_state_on_failure`,
    :func:`one_seed_per_call`, :func:`~._setup.redoes_setup` (its seed kept) and
    :func:`~._stream.notes_last_version`, once: a method wrapped already (a subclass's
    inherited descriptor) is returned as it is."""
    if getattr(method, "_keeps_state_on_failure", False):
        return method
    return keeps_state_on_failure(one_seed_per_call(
        redoes_setup(notes_last_version(method), keep=(_CALL_SEED,))))


class PSEstimator(BaseEstimator):
    """Base of the dask_ps estimators (see the module docstring)."""

    _parameter_constraints: dict = dict(COMMON_CONSTRAINTS)
    #: Whether the estimator recovers a lost worker without a checkpoint (LDA rebuilds its
    #: counts), its set-up too (:mod:`._setup`); else ``checkpoint=None`` turns recovery off.
    _recovers_without_checkpoint = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for name in FITTING_METHODS:  # a failed fit leaves the estimator as it was
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, _fitting(method))
            elif callable(getattr(method, "fn", None)):  # scikit-learn's available_if
                method.fn = _fitting(method.fn)

    def __getstate__(self) -> dict:
        # a Dask client does not pickle: the copy (e.g. in a task) uses the current client
        state = super().__getstate__() if hasattr(super(), "__getstate__") else dict(
            self.__dict__)
        state = dict(state)
        if state.get("client") is not None and not isinstance(state["client"], str):
            state["client"] = None
        return state

    def set_params(self, **params):
        """scikit-learn's ``set_params``; the next ``partial_fit`` into a checkpoint saves
        the model before its first epoch again (the stream's newest version was written
        under the parameters before; see :mod:`._stream`)."""
        self.__dict__.pop(_LAST_VERSION, None)
        return super().set_params(**params)

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
        if isinstance(self.random_state, np.random.Generator):  # scikit-learn refuses it too
            raise _pv.InvalidParameterError(
                f"The 'random_state' parameter of {type(self).__name__} is a "
                f"np.random.Generator, which is not taken (as in scikit-learn: an int, a "
                f"np.random.RandomState or None); pass an int seed drawn from it, e.g. "
                f"random_state=int(rng.integers(2**31 - 1)), or np.random.RandomState(seed)")
        self._validate_params()
        check_renamed(self)  # a renamed parameter's old name: FutureWarning, or ValueError
        if self.staleness is not None and self.consistency != "ssp":
            raise ValueError(f"staleness={self.staleness} needs consistency='ssp', got "
                             f"consistency={self.consistency!r}")
        if isinstance(self.client, str) and self.client != "local":
            raise ValueError(f"client must be a distributed.Client, 'local' or None, "
                             f"got {self.client!r}")
        if self.resume and self.checkpoint in (None, "auto"):
            why = ("writes no checkpoint" if self.checkpoint is None else "snapshots into a "
                   "temporary folder deleted after each fit")
            raise NoCheckpointToResumeError(
                f"resume=True needs a checkpoint URL to resume from, but checkpoint="
                f"{self.checkpoint!r} {why}; give checkpoint=URL (the folder of the fit to "
                f"continue), or resume=False")
        self._check_params()

    def _check_params(self) -> None:
        """Cross-parameter checks of a subclass (ValueError naming the parameters)."""

    def _refuse_resume(self) -> None:
        """A ``partial_fit`` going on from the model in memory refuses ``resume=True``: a
        resume continues the checkpoint's fit, finished at its one pass, and so trained
        nothing on the batch (LogisticRegression's second and later calls; a warm LDA's
        resume was refused as another fit, or trained nothing on the same documents)."""
        if self.resume:
            raise ValueError("partial_fit trains on its batch from the model in memory and "
                             "does not resume from a checkpoint (resume=True would continue "
                             "the checkpoint's finished fit and skip the batch); set "
                             "resume=False: a restarted learner loads a saved model "
                             "(dask_ps.saving.load_estimator) or resumes a fit")

    def _model(self, n_shards: int | None = None) -> PSModel:
        """A new PS model on the estimator's client (or in this process), of ``n_shards``
        (default: the estimator's); its shards on the workers offering the resource
        ``shard_resources`` when set (dedicated PS workers). A worker it loses before the
        fit's first epoch sets the fit up again (:mod:`._setup`)."""
        model = PSModel(self.client, n_shards=n_shards or self.n_shards,
                        resources=getattr(self, "shard_resources", None))
        note_model(self, model)
        return model

    def _partition(self, model: PSModel, data, **kwargs) -> Partitions:
        """``data`` as partitions on the model's cluster (or in this process)."""
        return partition(data, client="local" if model.is_local else model.client, **kwargs)

    def _seed(self) -> int:
        """The seed of this fit, the same for every part of it and every worker.

        ``random_state`` None gives 0 (a fit is reproducible by default); an int is the
        seed itself; a ``np.random.RandomState`` gives one draw
        ``randint(np.iinfo(np.int32).max)`` (scikit-learn's way), made at the first call
        in a ``fit`` or ``partial_fit`` and returned by every later call in it
        (:func:`one_seed_per_call`). The instance advances as scikit-learn's do: two
        estimators given ``RandomState(0)`` fit the same model, a second fit with the same
        instance another one. The seed is not part of a checkpoint's fit id: ``resume``
        restores the checkpoint's tables whatever the seed, and goes on with the seed of
        the resuming fit (the same as the interrupted one's for a fresh ``RandomState`` of
        the same seed, or the same int).
        """
        rs = self.random_state
        if not isinstance(rs, np.random.RandomState):
            return 0 if rs is None else int(rs)
        seed = self.__dict__.get(_CALL_SEED)
        if seed is None:
            seed = int(rs.randint(np.iinfo(np.int32).max))
            if _CALL_SEED in self.__dict__:  # in a fit: the same seed for the rest of it
                self.__dict__[_CALL_SEED] = seed
        return seed

    def _epoch_loop(self, model: PSModel, name: str, n_epochs: int, *,
                    continues: bool = False, **kwargs) -> "EpochLoop":
        """An :class:`EpochLoop` with the estimator's checkpoint, progress and callbacks.

        ``continues``: the fit goes on from the fitted model (``partial_fit``, a warm
        start), so the checkpoint versions of the earlier such fits into the same URL, back
        to the last fit from scratch, count as its own: a stream of ``partial_fit`` calls
        keeps 2 versions in all (the newest), not 2 per call. A fit from scratch starts a
        new count (the versions of earlier fits are left alone). When the stream's newest
        version still holds the model (unchanged since the call that saved it, as its
        :class:`~._stream.StateMark` sees in O(1)), the fit does not save it again before
        its first epoch (when a loss before its first version can refill the tables from
        it: ``start_from`` of :class:`EpochLoop`): a stream saves one version per call."""
        own = start = None
        if self.checkpoint not in (None, "auto"):
            own = stream_versions(self, continues)
            start = stream_start(self, own)
        loop = EpochLoop(model, name, n_epochs, checkpoint=self.checkpoint,
                         checkpoint_every=self.checkpoint_every,
                         max_recoveries=self.max_recoveries, resume=self.resume,
                         progress=self.progress, callbacks=self.callbacks,
                         own_versions=own, start_from=start, **kwargs)
        self.__dict__.get(_CALL_LOOPS, []).append(loop)
        join_loop(self, loop)
        return loop


#: A dask frame's columns are judged by the first of its first this many partitions that
#: has rows (:func:`check_numeric_columns`).
HEAD_PARTITIONS = 8


#: The dtype kinds scikit-learn's ``check_array(..., dtype="numeric")`` refuses: strings,
#: bytes, raw (void) data.
_NOT_NUMERIC_KINDS = ("U", "S", "V")


def check_numeric_columns(X, estimator: str, categories: bool = False) -> None:
    """Refuse an array ``X`` of strings or bytes (NumPy or dask, or a list of rows that
    NumPy reads as one), as scikit-learn's ``check_array(..., dtype="numeric")`` refuses
    it, and a data frame ``X`` (pandas or dask) with columns that hold no numbers, naming
    them; anything else passes (an object array of numbers written as strings included:
    scikit-learn converts it).

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
        An array of strings or bytes (dtype kind ``U``, ``S``, ``V``), in scikit-learn's
        words ("dtype='numeric' is not compatible with arrays of bytes/strings...") after
        the estimator's name and the dtype, numbers in it or not (scikit-learn's
        ``LogisticRegression.fit`` converts numeric strings, its ``predict`` refuses them:
        here both refuse). Columns of strings, objects, dates or categories of strings:
        up to 5 named, with their dtype and a value, and what to do (scikit-learn's own
        error names only the value: "could not convert string to float: 'u'").
    """
    dtype = getattr(X, "dtype", None)
    if dtype is None and isinstance(X, list):  # rows of values: as NumPy reads them
        try:
            dtype = np.asarray(X).dtype
        except (ValueError, TypeError):  # ragged rows: scikit-learn says so
            dtype = None
    if getattr(dtype, "kind", None) in _NOT_NUMERIC_KINDS:
        raise ValueError(f"{estimator}: X has dtype {dtype}: dtype='numeric' is not "
                         f"compatible with arrays of bytes/strings. Convert your data to "
                         f"numeric values explicitly instead, e.g. X.astype(np.float64)")
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


#: Parameters naming a fit's update rules, recorded by :func:`fit_identity` when the
#: estimator has them.
RULE_PARAMS = ("solver", "step_on", "factor_solver")
#: Parameters that change what the tables hold without changing their shape (a trained or
#: a zero bias row; a column's own row or its hash bucket's) or, for ``n_components``, name
#: the shape the table's columns come from; recorded by :func:`fit_identity` when the
#: estimator has them (a checkpoint of an earlier version recorded FM's ``k``).
TABLE_PARAMS = ("fit_intercept", "n_hashed_features", "n_components")


def _numbers_as_floats(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind in "biuf" else a


def fit_identity(estimator, n_features: int, classes) -> dict:
    """What a checkpoint of a linear or FM fit records of it, for ``resume``: the estimator,
    the feature count (the hashed width when it hashes) and the classes. A hashed table
    holds any key, so another width is only seen here (see
    :func:`dask_ps.model._fit_checks.check_resumable`).

    Parameters
    ----------
    estimator : PSEstimator
        Its class name, and the :data:`RULE_PARAMS` and :data:`TABLE_PARAMS` it has, are
        recorded.
    n_features : int
        Columns of ``X``.
    classes : array-like (n_classes,)
        The fit's classes, recorded as text; numbers (bool, int, float) as floats, so that
        the labels 1, True and 1.0 are one class, as in the checkpoints of earlier versions
        (whose fits made every numeric class a float).

    Returns
    -------
    dict
        JSON-able ``{"estimator": str, "n_features": int, "classes": list of str}``, and
        each of :data:`RULE_PARAMS` and :data:`TABLE_PARAMS` the estimator has (as text).
        A checkpoint that lacks one (written before it was recorded) is not checked on it.
    """
    width = getattr(estimator, "n_hashed_features", None) or n_features
    out = dict(estimator=type(estimator).__name__, n_features=int(width),
               classes=[str(c) for c in _numbers_as_floats(np.asarray(classes)).tolist()])
    # the update rules (FTRL's and AdaGrad's worker steps keep tables of one layout) and
    # what the tables mean
    out.update({name: str(renamed_value(estimator, name)) for name in RULE_PARAMS +
                TABLE_PARAMS if hasattr(estimator, name)})
    return out


def checksum(*arrays) -> str:
    """SHA-256 (hex) of the arrays' values, one after the other: how a fit id (see
    :func:`fit_identity`) knows a set it does not keep, e.g. MatrixFactorization's user and
    item ids, an LDA vocabulary or a GBDT fit's bins.

    Parameters
    ----------
    *arrays : array-like
        Numbers are hashed by their bytes in C order (so the dtype counts), text (str or
        object arrays) by its UTF-32 code points, padded to its longest string whatever
        the array's width (``<U12`` or ``<U7`` holding the same strings hash alike).

    Returns
    -------
    str
        64 hex digits.
    """
    digest = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind in "OU":  # as text of its longest string's width (not the dtype's)
            a = a.astype(str)
            a = a.astype(f"<U{max(int(np.char.str_len(a).max(initial=0)), 1)}")
        digest.update(np.ascontiguousarray(a).data)
    return digest.hexdigest()


def validate_data(estimator, *args, **kwargs):
    """scikit-learn's ``validate_data``, after :func:`check_numeric_columns` of ``X`` (the
    first of ``args``), then :func:`~dask_ps.partitions.inputs.check_columns` of a sparse
    ``X`` (scikit-learn takes column indices out of the matrix's shape: the kernels then
    read past their weights)."""
    if args:
        check_numeric_columns(args[0], type(estimator).__name__)
    out = _sklearn_validate_data(estimator, *args, **kwargs)
    X = out[0] if isinstance(out, tuple) else out
    if sp.issparse(X) and X.format == "csr":
        check_columns(X, "X")
    return out


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
