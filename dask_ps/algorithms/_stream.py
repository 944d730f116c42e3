"""The checkpoint versions of a stream of fits (``partial_fit`` calls, warm starts) into one
checkpoint URL: which versions the stream owns (pruned together, keep=2) and whether its
newest still holds the estimator's model, so that the next call need not save it again
before its first epoch (``start_from`` of :class:`~.epoch_loop.EpochLoop`).

"Still holds the model" is known in O(1) of the model's size: the outermost fitting call
that saved the version last records a :class:`StateMark` of the fitted attributes it left
(each one's identity, shape, dtype and a fixed sample of its values); the next call
compares. Any fitting call records anew (or drops the record when it saved no version);
``set_params`` drops it (see :meth:`~._base.PSEstimator.set_params`); an attribute
assigned (``est.coef_ = ...``, a model loaded or unpickled: other objects), added or
removed, a changed shape or dtype, or a change of any sampled value fails the comparison,
and the call saves the model first again, as a stream's first call does. Not seen: a
change made in place to values of a large array (over :data:`SAMPLES` values) that no
sample reads, or inside a container (list, dict) or another object held whole; such an
edit leaves the stream's newest version, a recovery point only, a model without it (a
worker lost before the call's own first version then loses the edit, not the batch).
"""

from __future__ import annotations

import functools
import weakref
from typing import Callable

import numpy as np
import scipy.sparse as sp

#: Where an estimator keeps ``(checkpoint URL, versions)``: the checkpoint versions its
#: fits since the last one from scratch wrote (see :func:`stream_versions`).
_OWN_VERSIONS = "_checkpoint_versions"
#: Where an estimator keeps ``(checkpoint URL, version, StateMark)`` of the version its
#: last fitting call saved last: its model as the call left it (see :func:`stream_start`).
_LAST_VERSION = "_checkpoint_last"
#: The epoch loops of the current fitting call (present only during the call).
_CALL_LOOPS = "_call_loops"
#: Values of an array a :class:`StateMark` reads: all of a smaller one, else this many at
#: evenly spaced flat positions (the first and last among them).
SAMPLES = 4096
#: Levels of nested tuples (e.g. a ``NamedTuple`` of a fit's state) a mark looks into.
_DEPTH = 3


class _Same:
    """An object compared by identity, not kept alive when it can be weakly referenced (an
    array replaced by the user is freed; a dead one matches nothing)."""

    __slots__ = ("_get",)

    def __init__(self, obj) -> None:
        try:
            self._get = weakref.ref(obj)
        except TypeError:  # lists, dicts, ...: held
            self._get = lambda: obj

    def __eq__(self, other) -> bool:
        mine = self._get()
        return isinstance(other, _Same) and mine is not None and mine is other._get()

    __hash__ = None


def _sample(a: np.ndarray):
    """The values of ``a`` at :data:`SAMPLES` fixed flat positions (all of a smaller one),
    as bytes (NaN-safe), or as a tuple for objects; O(:data:`SAMPLES`), no copy of ``a``."""
    if a.size > SAMPLES:
        a = a[np.unravel_index(np.linspace(0, a.size - 1, SAMPLES).astype(np.intp), a.shape)]
    return tuple(a.ravel().tolist()) if a.dtype.hasobject else np.ascontiguousarray(a).tobytes()


def _mark(value, depth: int = 0):
    """What :class:`StateMark` compares of one attribute's ``value`` (with ``==``)."""
    if value is None or isinstance(value, (bool, int, float, complex, np.generic)):
        return "v", type(value), repr(value)
    if isinstance(value, (str, bytes)):
        return "v", type(value), value
    if isinstance(value, np.ndarray):
        return "a", _Same(value), value.shape, value.dtype.str, _sample(value)
    if sp.issparse(value):
        parts = [getattr(value, n, None) for n in ("data", "indices", "indptr", "coords")]
        return ("s", _Same(value), value.format, value.shape,
                tuple(_mark(p, _DEPTH - 1) for p in parts if p is not None))
    if isinstance(value, tuple) and depth < _DEPTH:
        return "t", type(value), tuple(_mark(v, depth + 1) for v in value)
    return "o", _Same(value)


def fitted_attributes(estimator) -> list[tuple[str, object]]:
    """The estimator's fitted attributes (names ending with ``_``, but ``history_`` and
    dunders), sorted by name: what a stream's newest version must hold."""
    return sorted((k, v) for k, v in estimator.__dict__.items()
                  if k.endswith("_") and not k.startswith("__") and k != "history_")


class StateMark:
    """A cheap record of an estimator's fitted attributes (:func:`fitted_attributes`):
    each one's identity, type, shape, dtype and :data:`SAMPLES` of its values (see the
    module docstring for what it sees). O(number of attributes x :data:`SAMPLES`),
    whatever the model's size.

    A mark pickles and copies as one that holds no estimator (an unpickled or copied
    estimator's attributes are other objects anyway).

    Parameters
    ----------
    estimator : object, optional
        Whose attributes to record; None for a mark that :meth:`holds` nothing.
    """

    __slots__ = ("_marks",)

    def __init__(self, estimator=None) -> None:
        self._marks = None if estimator is None else [
            (k, _mark(v)) for k, v in fitted_attributes(estimator)]

    def __reduce__(self):
        return type(self), ()

    def holds(self, estimator) -> bool:
        """Whether ``estimator``'s fitted attributes are those recorded, unchanged as far
        as the mark sees."""
        return self._marks is not None and self._marks == StateMark(estimator)._marks


def notes_last_version(method: Callable) -> Callable:
    """``method`` of an estimator (``fit``, ``partial_fit``) after whose outermost call the
    estimator knows the checkpoint version its last epoch loop saved last, with the
    :class:`StateMark` of the model it leaves (:data:`_LAST_VERSION`; dropped when the call
    saved none): the next ``partial_fit`` of the stream, the model unchanged, need not save
    it again before its first epoch (see :func:`stream_start`)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        outer = _CALL_LOOPS not in self.__dict__
        if outer:
            self.__dict__[_CALL_LOOPS] = []
        try:
            out = method(self, *args, **kwargs)
            if outer:
                loops = self.__dict__[_CALL_LOOPS]
                saved = loops[-1].last_version if loops else None
                if saved is None:
                    self.__dict__.pop(_LAST_VERSION, None)
                else:
                    self.__dict__[_LAST_VERSION] = (loops[-1].checkpoint, saved,
                                                    StateMark(self))
            return out
        finally:
            if outer:
                self.__dict__.pop(_CALL_LOOPS, None)

    wrapper._notes_last_version = True
    return wrapper


def stream_versions(estimator, continues: bool) -> list[int]:
    """The list of the checkpoint versions (of ``estimator.checkpoint``, a URL) that the
    estimator's stream of fits owns, updated in place by the fit's epoch loop
    (``own_versions`` of :class:`~.epoch_loop.EpochLoop`): those of the earlier fits when
    this one ``continues`` (``partial_fit``, a warm start) into the same URL, else a new
    empty list (a fit from scratch, another URL; the versions of earlier fits are left
    alone, and a failed fit puts the previous list back)."""
    held = estimator.__dict__.get(_OWN_VERSIONS)
    if not continues or held is None or held[0] != estimator.checkpoint:
        held = (estimator.checkpoint, [])
        estimator.__dict__[_OWN_VERSIONS] = held
    return held[1]


def stream_start(estimator, own: list[int]):
    """The ``CheckpointInfo`` of the stream's newest version ``own[-1]`` when it holds the
    estimator's model (saved last by the last fitting call, the fitted attributes unchanged
    since as far as its :class:`StateMark` sees) and is still complete and sound; else
    None."""
    last = estimator.__dict__.get(_LAST_VERSION)
    if not own or last is None or last[:2] != (estimator.checkpoint, own[-1]) or \
            not last[2].holds(estimator):
        return None
    from ..exceptions import CheckpointFormatError, CheckpointNotFoundError
    from ..model import format as ck

    try:
        return ck.latest(estimator.checkpoint, version=own[-1])
    except (CheckpointNotFoundError, CheckpointFormatError):  # deleted or damaged since
        return None
