"""Server-side update rules: what a shard does with the updates pushed to it.

An optimizer declares the state it keeps beside the weights (its *slots*) and applies one
step to the touched rows. State lives in the shard, is checkpointed and resharded with the
weights, and never travels to the workers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Real
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..kernels import optim as K
from ._kernels import add_bits

if TYPE_CHECKING:
    from .wire_forms import RowBits

__all__ = ["SGD", "AdaGrad", "Adam", "Add", "Average", "FTRL", "Optimizer", "get_optimizer"]


@dataclass(frozen=True)
class Optimizer:
    """Base class of the server-side update rules.

    Subclasses set ``name`` and ``slots`` — a tuple of ``(slot_name, width, dtype)`` where
    ``width`` is ``None`` for "as many columns as the table" and ``dtype`` ``None`` for "the
    table's dtype" — and implement :meth:`step`.

    Raises
    ------
    ValueError
        At construction, for a hyper-parameter that is not a finite number in its range.
    """

    name: ClassVar[str] = ""
    slots: ClassVar[tuple] = ()
    #: Whether the rule needs a floating-point table.
    needs_float: ClassVar[bool] = True
    #: Whether the pushes of a clock may be applied one by one instead of merged first (their
    #: sums exact in any order, e.g. integers held in float64 below 2**53): no merge of
    #: their keys (a hash of every key) when they push different keys.
    exact_sums: ClassVar[bool] = False
    #: Whether a push is applied as it arrives, even under BSP, instead of held until its
    #: clock completes (with ``exact_sums`` only): for a table whose pulls never read sums
    #: mid-clock (GBDT's: they read what the rule writes once every push of a step is in).
    #: The shard then adds an early task's push while the last one is still on its way.
    on_arrival: ClassVar[bool] = False
    #: Slots whose values are never negative (sums of squares, step counts): a state set
    #: from outside (:meth:`~dask_ps.model.table.Table.set_rows`) is checked.
    nonnegative: ClassVar[tuple] = ()
    #: Code of the per-coordinate kernel (:func:`dask_ps.kernels.optim.coord_step`) when the
    #: rule can also run on the workers, on a local copy of the rows (local steps); else None.
    rule_code: ClassVar[int | None] = None

    def hyper(self) -> np.ndarray:
        """The hyper-parameters as ``coord_step`` takes them (float64), for local steps.

        Raises
        ------
        ValueError
            A rule without a worker-side kernel.
        """
        raise ValueError(f"the {self.name!r} rule has no worker-side kernel")

    def slot_layout(self, ncols: int, dtype: np.dtype) -> dict[str, tuple[int, np.dtype]]:
        """Width and dtype of each state array, for a table of ``ncols`` columns and ``dtype``."""
        return {
            name: (ncols if width is None else width, dtype if dt is None else np.dtype(dt))
            for name, width, dt in self.slots
        }

    def init_slots(self, slots: dict[str, np.ndarray], rows: np.ndarray) -> None:
        """Set the state of new rows ``rows``; zeros unless a rule says otherwise."""
        for arr in slots.values():
            arr[rows] = 0

    def step(self, w: np.ndarray, slots: dict[str, np.ndarray], rows: np.ndarray,
             g: np.ndarray) -> None:
        """Apply one update to rows ``rows`` (int64, distinct) of ``w`` given ``g``.

        ``w`` has shape (n_rows, ncols), ``g`` (len(rows), ncols) and ``w``'s dtype.
        """
        raise NotImplementedError

    def step_bits(self, w: np.ndarray, slots: dict[str, np.ndarray], rows: "RowBits",
                  g: np.ndarray) -> None:
        """:meth:`step` on rows given as a bitmap: ``rows.count`` rows, ascending, and ``g``
        (rows.count, ncols) in that order. Decodes them unless a rule does better (plain
        add adds runs of full words as blocks)."""
        self.step(w, slots, rows.rows(), g)

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not isinstance(value, Real) or isinstance(value, bool) or not np.isfinite(value):
                raise ValueError(f"{type(self).__name__}.{name} must be a finite number, "
                                 f"got {value!r}")
        self._check()

    def _check(self) -> None:
        """Range checks of the hyper-parameters; ValueError naming the one at fault."""

    def _positive(self, *names: str) -> None:
        for name in names:
            if getattr(self, name) <= 0:
                raise ValueError(f"{type(self).__name__}.{name} must be > 0, "
                                 f"got {getattr(self, name)!r}")

    def _non_negative(self, *names: str) -> None:
        for name in names:
            if getattr(self, name) < 0:
                raise ValueError(f"{type(self).__name__}.{name} must be >= 0, "
                                 f"got {getattr(self, name)!r}")

    def config(self) -> dict:
        """JSON-able description (name and hyper-parameters), for checkpoints and reprs."""
        return {"name": self.name, **asdict(self)}


@dataclass(frozen=True)
class Add(Optimizer):
    """Plain addition of the pushed values: counts, deltas, sums of gradients (LDA, GBDT).

    Notes
    -----
    On an integer table a sum past the dtype is refused (the table unchanged, the key
    named). On a float table only each update is checked (finite, within the dtype: see
    :func:`~dask_ps.state.table.checked_update`), not the sums: repeated adds that pass
    the dtype's largest value make the row ``inf`` silently (three pushes of ``3e38`` to a
    float32 row). Refusing them as integer tables do would need the rows before the step,
    since a float addition cannot be taken back exactly: a second pass over the rows, or a
    copy of them, on every push. Use float64 for sums that may grow that large.
    """

    name: ClassVar[str] = "add"
    needs_float: ClassVar[bool] = False

    def step(self, w, slots, rows, g):
        """``w[rows] += g``; for an integer table, the first position whose sum would wrap
        past its dtype (``w`` then unchanged), or -1."""
        if w.dtype.kind == "i":
            return K.add_step_checked(w, rows, g)
        K.add_step(w, rows, g)

    def step_bits(self, w, slots, rows, g):
        """:meth:`step` of rows given as a :class:`~dask_ps.state.wire_forms.RowBits`."""
        if w.dtype.kind == "i":  # the rows decoded: see step
            return K.add_step_checked(w, rows.rows(), g)
        add_bits(w, rows.words, np.ascontiguousarray(g))


@dataclass(frozen=True)
class Average(Optimizer):
    """Per-row mean of the deltas pushed in one clock: model averaging for sparse models.

    Workers that train local copies of the rows they touch (many steps per clock) push the
    change of each row and, as the row's last column, a count of 1. The shard sums the pushes
    of a clock (under BSP, of every worker; otherwise, of the tasks of one process merged
    into one push), then moves each row by the sum of the deltas divided by the sum of the
    counts: rows touched by one worker take its whole update, rows touched by many take the
    mean. The last column of the table accumulates the counts (how often a row was updated).

    A table with this rule needs at least two columns.

    References
    ----------
    Zinkevich, Weimer, Smola & Li, "Parallelized Stochastic Gradient Descent", NIPS 2010;
    McDonald, Hall & Mann, "Distributed Training Strategies for the Structured Perceptron"
    (iterative parameter mixing), NAACL 2010.
    """

    name: ClassVar[str] = "average"

    def step(self, w, slots, rows, g):
        K.average_step(w, rows, g)


@dataclass(frozen=True)
class SGD(Optimizer):
    """Stochastic gradient descent: ``w -= learning_rate * g``.

    Parameters
    ----------
    learning_rate : float, default 0.01
    """

    learning_rate: float = 0.01
    name: ClassVar[str] = "sgd"
    rule_code: ClassVar[int] = K.SGD_RULE

    def _check(self):
        self._positive("learning_rate")

    def hyper(self):
        return np.array([self.learning_rate], np.float64)

    def step(self, w, slots, rows, g):
        K.sgd_step(w, rows, g, self.learning_rate)


@dataclass(frozen=True)
class AdaGrad(Optimizer):
    """AdaGrad: per-coordinate steps ``learning_rate / sqrt(sum of g²)``.

    Parameters
    ----------
    learning_rate : float, default 0.1
    initial_accumulator_value : float, default 0.0
        Starting value of the sum of squared gradients.
    eps : float, default 1e-10
        Added to the square root to avoid division by zero.

    References
    ----------
    Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online Learning and Stochastic
    Optimization", JMLR 12, 2011.
    """

    learning_rate: float = 0.1
    initial_accumulator_value: float = 0.0
    eps: float = 1e-10
    name: ClassVar[str] = "adagrad"
    slots: ClassVar[tuple] = (("accumulator", None, None),)
    nonnegative: ClassVar[tuple] = ("accumulator",)

    rule_code: ClassVar[int] = K.ADAGRAD_RULE

    def _check(self):
        self._positive("learning_rate", "eps")
        self._non_negative("initial_accumulator_value")

    def hyper(self):
        return np.array([self.learning_rate, self.eps], np.float64)

    def init_slots(self, slots, rows):
        slots["accumulator"][rows] = self.initial_accumulator_value

    def step(self, w, slots, rows, g):
        K.adagrad_step(w, slots["accumulator"], rows, g, self.learning_rate, self.eps)


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam with per-row step counts (lazy Adam: untouched rows keep their moments).

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1, beta2 : float, default 0.9, 0.999
    eps : float, default 1e-8

    References
    ----------
    Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015.
    """

    learning_rate: float = 0.001
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    name: ClassVar[str] = "adam"
    slots: ClassVar[tuple] = (("m", None, "float64"), ("v", None, "float64"), ("t", 1, "int64"))
    nonnegative: ClassVar[tuple] = ("v", "t")

    def _check(self):
        self._positive("learning_rate", "eps")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"Adam.{name} must be in [0, 1), got {getattr(self, name)!r}")

    def step(self, w, slots, rows, g):
        K.adam_step(w, slots["m"], slots["v"], slots["t"], rows, g, self.learning_rate,
                    self.beta1, self.beta2, self.eps)


@dataclass(frozen=True)
class FTRL(Optimizer):
    """FTRL-Proximal with L1 and L2 regularisation; pulled weights are the closed-form ``w``.

    Parameters
    ----------
    alpha : float, default 0.05
        Learning-rate scale.
    beta : float, default 1.0
        Learning-rate smoothing.
    l1, l2 : float, default 1.0
        Regularisation strengths (per coordinate, per step as in the paper).

    Notes
    -----
    The state ``z`` and ``n`` is kept in the table's dtype (each step computes in float64
    and stores the result): a float32 table holds 12 bytes per coordinate (weight, ``z``,
    ``n``), 20 per key of a sparse vector table with its int64 key.

    References
    ----------
    McMahan et al., "Ad Click Prediction: a View from the Trenches", KDD 2013, Algorithm 1.
    """

    alpha: float = 0.05
    beta: float = 1.0
    l1: float = 1.0
    l2: float = 1.0
    name: ClassVar[str] = "ftrl"
    slots: ClassVar[tuple] = (("z", None, None), ("n", None, None))
    nonnegative: ClassVar[tuple] = ("n",)
    rule_code: ClassVar[int] = K.FTRL_RULE

    def _check(self):
        self._positive("alpha")
        self._non_negative("beta", "l1", "l2")

    def hyper(self):
        return np.array([self.alpha, self.beta, self.l1, self.l2], np.float64)

    def step(self, w, slots, rows, g):
        K.ftrl_step(w, slots["z"], slots["n"], rows, g, self.alpha, self.beta, self.l1, self.l2)


OPTIMIZERS = {cls.name: cls for cls in (Add, Average, SGD, AdaGrad, Adam, FTRL)}


def get_optimizer(spec: str | Optimizer | None) -> Optimizer:
    """An :class:`Optimizer` from an instance, a registered name, or None (plain add).

    Raises
    ------
    ValueError
        For an unknown name; the message lists the valid ones.
    TypeError
        For anything that is neither a string nor an Optimizer.
    """
    if spec is None:
        return Add()
    if isinstance(spec, Optimizer):
        return spec
    if isinstance(spec, str):
        try:
            return OPTIMIZERS[spec.lower()]()
        except KeyError:
            raise ValueError(
                f"unknown optimizer {spec!r}; valid names are {sorted(OPTIMIZERS)}"
            ) from None
    raise TypeError(f"optimizer must be a name or an Optimizer instance, "
                    f"not {type(spec).__name__}")
