"""Parameters renamed the way scikit-learn renames one: the old keyword stays in
``__init__`` for two releases with the default :data:`DEPRECATED`; a fit given it warns
(``FutureWarning``) and uses it. An estimator lists its renamings in ``_renamed_params``
(old name to new name), e.g. ``{"rank": "n_components"}``.

Stored parameters (a model file's, a checkpoint's fit identity) written before a renaming
hold the old name: :func:`stored_params` maps them to the new one.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings

__all__ = ["DEPRECATED", "check_renamed", "renamed_value", "stored_params"]

#: The default of a renamed parameter's old keyword (scikit-learn's sentinel).
DEPRECATED = "deprecated"

#: The version that renamed them, and the one that will drop the old names.
RENAMED_IN, REMOVED_IN = "0.1", "0.3"


def _given(value) -> bool:
    return not (isinstance(value, str) and value == DEPRECATED)


def _default(cls, name: str):
    return inspect.signature(cls.__init__).parameters[name].default


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside dask_ps, for a warning raised by the
    caller of this function (through however many of the package's wrappers)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _renamings(cls) -> dict:
    return getattr(cls, "_renamed_params", {})


def renamed_value(est, new: str):
    """The value of ``est``'s parameter ``new``: that of its old name when given, else its
    own (no warning: :func:`check_renamed` warns at fit)."""
    for old, to in _renamings(type(est)).items():
        if to == new and _given(getattr(est, old)):
            return getattr(est, old)
    return getattr(est, new)


def check_renamed(est) -> None:
    """At fit: for each old name of ``est``'s renamed parameters given a value, a
    ``FutureWarning``.

    Raises
    ------
    ValueError
        The old and the new name both given, with different values, naming both.
    """
    for old, new in _renamings(type(est)).items():
        value = getattr(est, old)
        if not _given(value):
            continue
        mine = getattr(est, new)
        if mine != _default(type(est), new) and mine != value:
            raise ValueError(f"{type(est).__name__}: {old}={value!r} and {new}={mine!r} "
                             f"were both given; {old} is the deprecated name of {new}: "
                             f"give {new} only")
        warnings.warn(f"`{old}` was renamed `{new}` in {RENAMED_IN} and will be removed in "
                      f"{REMOVED_IN}; use {new}={value!r}", FutureWarning,
                      stacklevel=_caller_level())


def stored_params(cls, params: dict) -> dict:
    """``params`` as estimator class ``cls`` takes them now: a renamed parameter stored
    under its old name (a file or checkpoint of an earlier version) under its new name;
    an old name left at :data:`DEPRECATED` dropped (so a file written now loads once the
    old name is gone).

    Raises
    ------
    ValueError
        The old and the new name both stored, with different values, naming both.
    """
    out = dict(params)
    for old, new in _renamings(cls).items():
        if old not in out:
            continue
        value = out.pop(old)
        if not _given(value):
            continue
        if new in out and out[new] not in (value, _default(cls, new)):
            raise ValueError(f"{old}={value!r} (the deprecated name of {new}) and "
                             f"{new}={out[new]!r} differ")
        out[new] = value
    return out
