"""GBDT objectives: labels checked, initial score, quantized gradients, loss, link.

Each objective is a small class in the ``OBJECTIVES`` registry (names as in LightGBM):
``"binary"`` (log-loss), ``"multiclass"`` (softmax, one tree per class per round) and
``"regression"`` (squared error). Raw scores have shape (n_outputs, n). Gradient kernels
write quantized values (``rint(g · grad_scale)``, see :func:`._gbdt_kernels.quantization_scale`).
"""

from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np

from ._gbdt_sketch import kernel_array

_JIT = dict(cache=True, nogil=True)

_GRAD_SIG = ("void(float64[::1], float64[::1], float64, float64, float64[::1], float64[::1], "
             "float64[::1])")


@numba.njit(_GRAD_SIG, **_JIT)
def grad_logloss(y, raw, grad_scale, hess_scale, grad, hess, w):
    """Binary log-loss: ``g = p - y``, ``h = p (1 - p)``, ``p = sigmoid(raw)``, times the
    row's weight ``w[i]`` (``w`` empty: unweighted), quantized (``rint(g · grad_scale)``).
    ``y`` in {0, 1}."""
    weighted = w.shape[0] > 0
    for i in range(y.shape[0]):
        z = raw[i]
        if z >= 0:
            p = 1.0 / (1.0 + np.exp(-z))
        else:
            e = np.exp(z)
            p = e / (1.0 + e)
        if weighted:
            grad[i] = np.rint((p - y[i]) * w[i] * grad_scale)
            hess[i] = np.rint(p * (1.0 - p) * w[i] * hess_scale)
        else:
            grad[i] = np.rint((p - y[i]) * grad_scale)
            hess[i] = np.rint(p * (1.0 - p) * hess_scale)


@numba.njit(_GRAD_SIG, **_JIT)
def grad_l2(y, raw, grad_scale, hess_scale, grad, hess, w):
    """Squared error ``(raw - y)^2 / 2``: ``g = raw - y``, ``h = 1``, times ``w[i]`` (``w``
    empty: unweighted), quantized."""
    weighted = w.shape[0] > 0
    for i in range(y.shape[0]):
        if weighted:
            grad[i] = np.rint((raw[i] - y[i]) * w[i] * grad_scale)
            hess[i] = np.rint(w[i] * hess_scale)
        else:
            grad[i] = np.rint((raw[i] - y[i]) * grad_scale)
            hess[i] = np.rint(hess_scale)


@numba.njit("void(float64[::1], float64[:, ::1], float64, float64, float64[:, ::1], "
            "float64[:, ::1], float64[::1])", **_JIT)
def grad_softmax(y, raw, grad_scale, hess_scale, grad, hess, w):
    """Softmax cross-entropy over ``K`` classes (``raw``, ``grad``, ``hess`` of shape (K, n);
    ``y`` holds class indices): ``g_k = p_k - [y = k]``, ``h_k = K/(K-1) p_k (1 - p_k)``
    (LightGBM's multiclass hessian), times ``w[i]`` (``w`` empty: unweighted), quantized."""
    K, n = raw.shape
    factor = K / (K - 1.0)
    weighted = w.shape[0] > 0
    for i in range(n):
        wi = w[i] if weighted else 1.0
        m = raw[0, i]
        for k in range(1, K):
            m = max(m, raw[k, i])
        s = 0.0
        for k in range(K):
            s += np.exp(raw[k, i] - m)
        for k in range(K):
            p = np.exp(raw[k, i] - m) / s
            t = 1.0 if y[i] == k else 0.0
            if weighted:
                grad[k, i] = np.rint((p - t) * wi * grad_scale)
                hess[k, i] = np.rint(factor * p * (1.0 - p) * wi * hess_scale)
            else:
                grad[k, i] = np.rint((p - t) * grad_scale)
                hess[k, i] = np.rint(factor * p * (1.0 - p) * hess_scale)




class Objective:
    """Base class; subclasses set ``name`` and implement the methods."""

    name = ""

    def __init__(self, n_classes: int | None = None):
        self.n_classes = n_classes

    @property
    def n_outputs(self) -> int:
        return 1

    def check_y(self, y) -> np.ndarray:
        """Labels as float64 (n,), ready for the gradient kernels (C-contiguous, writable:
        :func:`~._gbdt_sketch.kernel_array`, a copy of read-only labels); raises ValueError
        naming the first bad row."""
        y = kernel_array(np.asarray(y, dtype=np.float64).ravel())
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise ValueError(f"y[{bad[0]}] = {y[bad[0]]} is not finite")
        return y

    def base_score(self, y) -> np.ndarray:
        raise NotImplementedError

    def prior_score(self, prior) -> np.ndarray:
        """The initial score of a classifier from its classes' shares of the sample weight
        ``prior`` (float64 (n_classes,), summing to 1).

        Raises
        ------
        ValueError
            A class holding no weight where the score would be infinite (binary).
        """
        raise NotImplementedError

    def bounds(self, y, raw, w=None) -> tuple[float, float]:
        """Bounds on |gradient| and hessian of these rows (the global bound, a max over
        partitions, sets the quantization scales); with sample weights ``w``, bounds of
        the weighted gradients where computed from the rows (regression), else the
        unweighted ones (the caller scales them by the largest weight)."""
        raise NotImplementedError

    def gradients(self, y, raw, grad_scale, hess_scale, grad, hess, w=None) -> None:
        """Quantized gradients and hessians of the rows into ``grad``, ``hess``, each row's
        times its sample weight ``w[i]`` (float64 (n,); None: unweighted)."""
        raise NotImplementedError

    def losses(self, y, raw) -> np.ndarray:
        """Loss of each row with raw scores ``raw`` (n_outputs, n): float64 (n,)."""
        raise NotImplementedError

    def loss(self, y, raw) -> float:
        """Mean loss of rows with raw scores ``raw`` (n_outputs, n); inf, without numpy's
        overflow warnings, where it overflows float64 (the fit's DivergenceError says so)."""
        with np.errstate(over="ignore"):
            return float(np.mean(self.losses(y, raw)))

    def loss_sum(self, y, raw, w=None) -> float:
        """Summed loss of the rows, each times its sample weight ``w[i]`` (None: 1); inf
        where it overflows, as :meth:`loss`."""
        if w is None:
            return self.loss(y, raw) * y.shape[0] if y.shape[0] else 0.0
        with np.errstate(over="ignore"):
            return float(np.dot(w, self.losses(y, raw)))

    def transform(self, raw) -> np.ndarray:
        """Predictions from raw scores: probabilities (n,) or (n, K), or values (n,)."""
        raise NotImplementedError


def _sigmoid(z):
    return np.exp(-np.logaddexp(0.0, -z))


class Binary(Objective):
    """Log-loss for labels in {0, 1}; initial score the log-odds of the mean (LightGBM's
    ``boost_from_average``)."""

    name = "binary"

    def check_y(self, y):
        y = super().check_y(y)
        bad = np.flatnonzero((y != 0) & (y != 1))
        if bad.size:
            raise ValueError(f"binary labels must be 0 or 1; y[{bad[0]}] = {y[bad[0]]}")
        return y

    def base_score(self, y):
        p = float(np.mean(y))
        if not 0.0 < p < 1.0:
            raise ValueError(f"y has a single class ({int(p)}); binary boosting needs both")
        return np.array([np.log(p / (1.0 - p))])

    def prior_score(self, prior):
        p = float(prior[1])
        if not 0.0 < p < 1.0:
            raise ValueError(f"sample_weight puts all the weight on one of the two classes "
                             f"(the second's share: {p:g}); binary boosting needs weight on "
                             f"both")
        return np.array([np.log(p / (1.0 - p))])

    def bounds(self, y, raw, w=None):
        return 1.0, 0.25

    def gradients(self, y, raw, grad_scale, hess_scale, grad, hess, w=None):
        grad_logloss(y, raw[0], grad_scale, hess_scale, grad[0], hess[0], _weights(w))

    def losses(self, y, raw):
        z = raw[0]
        return np.logaddexp(0.0, z) - y * z

    def transform(self, raw):
        return _sigmoid(raw[0])


class Multiclass(Objective):
    """Softmax cross-entropy over ``n_classes`` classes labelled 0 .. K-1; initial scores
    the log class priors."""

    name = "multiclass"

    @property
    def n_outputs(self):
        return self.n_classes

    def check_y(self, y):
        y = super().check_y(y)
        K = self.n_classes
        if K is None or K < 2:
            raise ValueError(f"multiclass needs n_classes >= 2, got {K}")
        bad = np.flatnonzero((y != np.floor(y)) | (y < 0) | (y >= K))
        if bad.size:
            raise ValueError(f"multiclass labels must be integers in [0, {K}); "
                             f"y[{bad[0]}] = {y[bad[0]]}")
        return y

    def base_score(self, y):
        prior = np.bincount(y.astype(np.int64), minlength=self.n_classes) / y.shape[0]
        return np.log(np.maximum(prior, 1e-12))

    def prior_score(self, prior):
        return np.log(np.maximum(np.asarray(prior, np.float64), 1e-12))

    def bounds(self, y, raw, w=None):
        K = self.n_classes
        return 1.0, 0.25 * K / (K - 1.0)

    def gradients(self, y, raw, grad_scale, hess_scale, grad, hess, w=None):
        grad_softmax(y, raw, grad_scale, hess_scale, grad, hess, _weights(w))

    def losses(self, y, raw):
        m = raw.max(axis=0)
        lse = m + np.log(np.exp(raw - m).sum(axis=0))
        return lse - raw[y.astype(np.int64), np.arange(y.shape[0])]

    def transform(self, raw):
        e = np.exp(raw - raw.max(axis=0))
        return (e / e.sum(axis=0)).T


def exact_sum(y) -> dict:
    """The sum of float64 values, exactly, so that it is the same however they are split:
    ``{e: m}`` (Python ints) with ``sum(y) == sum(m * 2**e)``. Each value is its 53-bit
    integer mantissa times a power of two; mantissas are summed per exponent in halves of
    26/27 bits, exactly in float64 (chunks of at most 2**25 values)."""
    y = np.asarray(y, np.float64).ravel()
    out: dict = {}
    for a in range(0, y.shape[0], 2**25):
        m, e = np.frexp(y[a: a + 2**25])
        mi = (m * 2.0**53).astype(np.int64)
        ue, inv = np.unique(e.astype(np.int64) - 53, return_inverse=True)
        hi = np.bincount(inv, weights=(mi >> 26).astype(np.float64), minlength=ue.shape[0])
        lo = np.bincount(inv, weights=(mi & (2**26 - 1)).astype(np.float64),
                         minlength=ue.shape[0])
        for k, h, q in zip(ue.tolist(), hi.tolist(), lo.tolist()):
            out[k] = out.get(k, 0) + int(h) * 2**26 + int(q)
    return out


def exact_total(sums) -> Fraction:
    """The sum of the parts whose :func:`exact_sum` are ``sums``, exactly."""
    total = Fraction(0)
    for part in sums:
        for e, m in part.items():
            total += Fraction(m) * Fraction(2) ** e
    return total


def exact_mean(sums, n: int) -> float:
    """The mean of values whose :func:`exact_sum` are ``sums`` (one per part), ``n`` of
    them, rounded once."""
    return float(exact_total(sums) / max(n, 1))


_EMPTY = np.zeros(0)


def _weights(w) -> np.ndarray:
    """The gradient kernels' weights: float64 (n,), or empty for unweighted rows."""
    return _EMPTY if w is None else kernel_array(w, np.float64)


class Regression(Objective):
    """Squared error; initial score the mean label (summed exactly: the same for any
    partitioning). Reported loss: mean squared error."""

    name = "regression"

    def base_score(self, y):
        return np.array([exact_mean([exact_sum(y)], np.size(y))])

    def bounds(self, y, raw, w=None):
        if not y.size:
            return 0.0, 1.0
        if w is None:
            return float(np.max(np.abs(raw[0] - y))), 1.0
        return float(np.max(np.abs(raw[0] - y) * w)), 1.0

    def gradients(self, y, raw, grad_scale, hess_scale, grad, hess, w=None):
        grad_l2(y, raw[0], grad_scale, hess_scale, grad[0], hess[0], _weights(w))

    def losses(self, y, raw):
        return (raw[0] - y) ** 2

    def transform(self, raw):
        return raw[0].copy()


OBJECTIVES = {c.name: c for c in (Binary, Multiclass, Regression)}


def get_objective(name: str, n_classes: int | None = None) -> Objective:
    """The objective called ``name``; ValueError listing the valid names otherwise."""
    try:
        return OBJECTIVES[name](n_classes)
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; valid: {sorted(OBJECTIVES)}") from None
