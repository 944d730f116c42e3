""":class:`~dask_ps.LogisticRegression`'s checks of its parameters before a fit: the
combinations of solver and penalty, what a warm start must keep, and which solvers have
``partial_fit``."""

from __future__ import annotations

import functools
import warnings
from types import MethodType

from ..exceptions import user_stacklevel
from ._stochastic_fit import SOLVERS

__all__ = ["check_params", "check_warm_start", "stochastic_only"]

class stochastic_only:  # noqa: N801 (a decorator, as scikit-learn's available_if)
    """Make a method (``partial_fit``) exist only on an estimator of a stochastic solver
    (:data:`~._stochastic_fit.SOLVERS` but "lbfgs", full-batch): scikit-learn's
    ``available_if`` (``hasattr`` False for ``solver="lbfgs"``, the function as ``fn``),
    whose AttributeError said only "This 'LogisticRegression' has no attribute
    'partial_fit'"; this one names the solver and the solvers that have the method.

    Raises
    ------
    AttributeError
        On access from an estimator whose ``solver`` is "lbfgs".
    """

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def _check(self, obj) -> None:
        solver = getattr(obj, "solver", None)
        if solver == "lbfgs":
            stochastic = [repr(s) for s, rule in SOLVERS.items() if rule is not None]
            name = self.fn.__name__
            raise AttributeError(
                f"{type(obj).__name__} with solver={solver!r} has no attribute {name!r}: "
                f"{name} is one more epoch of a stochastic solver "
                f"({', '.join(stochastic)}); 'lbfgs' (OWL-QN with "
                f"penalty='l1') is full-batch: use fit, or set solver to one of those",
                name=name, obj=obj)

    def __get__(self, obj, owner=None):
        if obj is not None:
            self._check(obj)
            return MethodType(self.fn, obj)

        @functools.wraps(self.fn)
        def out(*args, **kwargs):  # from the class (docs, monkeypatching)
            self._check(args[0])
            return self.fn(*args, **kwargs)

        return out


def check_params(est) -> None:
    """The cross-parameter rules of a :class:`~dask_ps.LogisticRegression` ``est``.

    Raises
    ------
    ValueError
        ``penalty="l1"`` with a solver other than "ftrl" or "lbfgs".

    Warns
    -----
    UserWarning
        ``solver="lbfgs"`` with a checkpoint URL or ``resume``, which it does not use.
    """
    if est.penalty == "l1" and est.solver not in ("ftrl", "lbfgs"):
        raise ValueError("penalty='l1' needs solver='ftrl' or 'lbfgs' (OWL-QN)")
    if est.solver == "lbfgs" and (est.resume or est.checkpoint not in (None, "auto")):
        warnings.warn(f"solver='lbfgs' keeps its state on the driver: it writes no "
                      f"checkpoint and resumes from none (checkpoint={est.checkpoint!r}"
                      f", resume={est.resume!r} are not used)", UserWarning,
                      stacklevel=user_stacklevel())


def check_warm_start(est, n_features: int) -> None:
    """Refuse, before training, a warm start (``warm_start=True`` or ``partial_fit``) of a
    fitted ``est`` whose ``n_hashed_features`` is not the fitted model's: its weights and
    update-rule state are those of the fitted columns (or buckets), and another hashing puts
    other features under them (or, dense, fails deep in training on the table's shape). A
    model saved before the fitted value was kept is checked by the width of its ``coef_``.

    Raises
    ------
    ValueError
        Naming the fitted and the new ``n_hashed_features`` (or widths).
    """
    new, name = est.n_hashed_features, type(est).__name__
    old = est.__dict__.get("_n_hashed_features_", new)
    how = "fit afresh with warm_start=False (for partial_fit: a new estimator)"
    if new != old:
        raise ValueError(f"n_hashed_features={new!r}, but {name} was fitted with "
                         f"n_hashed_features={old!r}: a warm start (warm_start=True or "
                         f"partial_fit) continues the weights of the fitted columns (or "
                         f"buckets) and needs the same hashing; set it back to {old!r}, "
                         f"or {how}")
    width, fitted = new or n_features, est.coef_.shape[1]
    if width != fitted:
        raise ValueError(f"n_hashed_features={new!r} makes {width} columns of weights, but "
                         f"{name} was fitted with {fitted}: a warm start (warm_start=True "
                         f"or partial_fit) needs the same; {how}")
