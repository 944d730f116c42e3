"""Fitted state read from a model file, checked before anything predicts with it.

:func:`dask_ps.saving.load_estimator` checks each array's dtype and shape against the file's
own metadata and refuses NaN; but a file edited with its checksums and metadata recomputed
can hold arrays that agree with the metadata and not with each other: a ``coef_`` narrower
than the columns a prediction reads, user factors fewer than the user ids, a hashing width
beyond the weights. The numba kernels (and scipy's sparse products) index those arrays
without bounds checks, so such a file read other memory (a segmentation fault, or garbage
margins and ratings) or answered for another model (a ``coef_`` of two rows for two
classes, a rating range upside down). Each estimator's ``_check_loaded`` calls the
function here for its fitted attributes; each raises ``ValueError`` naming the attribute
(``load_estimator`` makes it a ``DataError`` naming the file).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["STATE_COLUMNS", "check_factorization", "check_linear", "check_ratings_model"]


def _count(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _floats(name: str, value, shape: tuple, why: str = "", sparse: str | None = None) -> None:
    """Refuse ``value`` unless it is a float array of ``shape`` (dense; or, when ``sparse``
    names a scipy format, a sparse matrix of it as well), naming ``name`` (and ``why``
    that shape: what it follows from)."""
    kinds = "a float array" if sparse is None else f"a float array or a {sparse} matrix"
    ok = (isinstance(value, np.ndarray) or (sparse is not None and sp.issparse(value)
                                            and value.format == sparse))
    if not ok or value.dtype.kind != "f":
        raise ValueError(f"{name} is {type(value).__name__} of dtype "
                         f"{getattr(value, 'dtype', None)}, not {kinds}")
    if tuple(value.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(value.shape)}, not {shape}"
                         f"{f' ({why})' if why else ''}")


def _rows(value) -> int:
    """The rows of what should be a 2-d array (0 for anything else, which is then named)."""
    shape = np.shape(value) if isinstance(value, np.ndarray) else ()
    return shape[0] if len(shape) == 2 else 0


def _keys(name: str, keys, n: int, high: int) -> None:
    """Refuse table keys that are not ``n`` distinct ascending integers in ``[0, high]``."""
    if not (isinstance(keys, np.ndarray) and keys.dtype.kind in "iu" and keys.ndim == 1):
        raise ValueError(f"{name} is not a 1-d array of integer keys")
    if keys.shape[0] != n:
        raise ValueError(f"{name} holds {keys.shape[0]} keys for {n} rows of state")
    if n and (keys[0] < 0 or keys[-1] > high or not (np.diff(keys) > 0).all()):
        raise ValueError(f"{name} are not distinct ascending keys in [0, {high}] (from "
                         f"{keys[0]} to {keys[-1]})")


#: Columns of a logistic regression's ``_ps_state_.state`` per output, by solver: the
#: weights (SGD, L-BFGS) or ``[w, accumulator]`` (AdaGrad), ``[z, n]`` (FTRL).
STATE_COLUMNS = {"ftrl": 2, "adagrad": 2, "sgd": 1, "lbfgs": 1}


def _accumulators(name: str, rows: np.ndarray, cols: slice, what: str) -> None:
    """Refuse optimizer state ``rows`` whose columns ``cols`` (``what``: AdaGrad's
    accumulators, FTRL's ``n``: sums of squared gradients) hold a negative value: a fit
    never makes one, and the next ``partial_fit`` divided by the square root of it (NaN
    weights, then a DivergenceError blaming the learning rate). (NaN and infinity are
    refused by :func:`dask_ps.saving.load_estimator` for every float array of a file.)"""
    part = rows[:, cols]
    bad = ~(part >= 0)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"{name} holds {int(bad.sum())} negative value(s) in its {what} "
                         f"columns (the first in row {r}, column {c + (cols.start or 0)}: "
                         f"{float(part[r, c])}); a fit's are sums of squared gradients, "
                         f"never negative")


def check_linear(est, n_outputs: int | None = None) -> int:
    """The fitted state of a :class:`~dask_ps.LogisticRegression` (or of the linear part
    of a factorization machine, ``n_outputs=1``) ``est``: ``classes_`` of at least two
    classes, ``coef_`` (K, width) and ``intercept_`` (K,) floats, where K is 1 for two
    classes and the number of classes otherwise and ``width`` is the fitted
    ``n_hashed_features`` or else ``n_features_in_``; a ``_ps_state_`` (a
    :class:`~.logistic.TrainState`) whose rows are those of the same width, of its
    solver's columns (:data:`STATE_COLUMNS`), AdaGrad's accumulators and FTRL's ``n``
    never negative.

    Returns
    -------
    int
        ``width`` (0 for an unfitted estimator, whose state is not checked).

    Raises
    ------
    ValueError
        Naming the attribute that does not fit.
    """
    if not hasattr(est, "coef_"):
        return 0
    for name in ("classes_", "intercept_", "n_features_in_"):
        if not hasattr(est, name):
            raise ValueError(f"coef_ is given without {name}")
    n_classes = np.shape(est.classes_)[0]
    k = 1 if n_classes == 2 else n_classes
    if n_classes < 2 or (n_outputs is not None and k != n_outputs):
        raise ValueError(f"classes_ holds {n_classes} classes: a fitted "
                         f"{type(est).__name__} has "
                         f"{'two' if n_outputs == 1 else 'two or more'}")
    hashed = est._fitted_hashing()
    if hashed is not None and not (_count(hashed) and 1 <= hashed < 2**32):
        raise ValueError(f"_n_hashed_features_ is {hashed!r}, not a width in [1, 2**32) "
                         f"or None")
    width = hashed or est.n_features_in_
    why = (f"{n_classes} classes_, {'_n_hashed_features_' if hashed else 'n_features_in_'}"
           f"={width}")
    _floats("coef_", est.coef_, (k, width), why, sparse="csr")
    _floats("intercept_", est.intercept_, (k,), why)
    state = getattr(est, "_ps_state_", None)
    W = getattr(state, "W", None)
    if W is None:  # not a TrainState (the factorization machine's is checked by it)
        return width
    if isinstance(W, np.ndarray):
        _floats("_ps_state_.W", W, (width + 1, k), "a row per column of coef_ and the "
                                                    "intercept's")
    else:
        _floats("_ps_state_.W.W", W.W, (_rows(W.W), k))
        _keys("_ps_state_.W.keys", W.keys, W.W.shape[0], width)
    rows = W.shape[0] if isinstance(W, np.ndarray) else W.W.shape[0]
    if not (isinstance(state.state, np.ndarray) and state.state.ndim == 2
            and state.state.shape[0] == rows):
        raise ValueError(f"_ps_state_.state has shape {np.shape(state.state)}, not one row "
                         f"for each of the {rows} rows of _ps_state_.W")
    per = STATE_COLUMNS.get(getattr(state, "solver", None))
    if per is None:
        raise ValueError(f"_ps_state_.solver is {getattr(state, 'solver', None)!r}, not one "
                         f"of {sorted(STATE_COLUMNS)}")
    if state.state.shape[1] != per * k:
        raise ValueError(f"_ps_state_.state has {state.state.shape[1]} columns, not "
                         f"{per * k} (solver {state.solver!r}, {k} output(s))")
    if per == 2:
        _accumulators("_ps_state_.state", state.state, slice(k, 2 * k),
                      "FTRL n" if state.solver == "ftrl" else "AdaGrad accumulator")
    return width


def check_factorization(est) -> None:
    """:func:`check_linear` for a binary factorization machine ``est``, then its
    ``factors_`` (width, k) of the same kind as ``coef_`` (dense, or CSC beside a CSR
    ``coef_``) and its ``_ps_state_`` (an :class:`~.fm.FMState`): FTRL rows ``[z, n]``
    and factor rows ``[v, accumulators]`` (2 k) of distinct keys within the width (the
    intercept's key is the width itself), ``n`` and the accumulators never negative.

    Raises
    ------
    ValueError
        Naming the attribute that does not fit.
    """
    width = check_linear(est, n_outputs=1)
    if not width:
        return
    if not hasattr(est, "factors_"):
        raise ValueError("coef_ is given without factors_")
    V = est.factors_
    k = V.shape[1] if getattr(V, "ndim", 0) == 2 else 0
    if sp.issparse(est.coef_):
        _floats("factors_", V, (width, max(k, 1)), "a row per column of coef_", "csc")
        if not sp.issparse(V):
            raise ValueError("factors_ is a dense array beside a sparse coef_")
    else:
        _floats("factors_", V, (width, max(k, 1)), "a row per column of coef_")
    state = getattr(est, "_ps_state_", None)
    if state is None:
        return
    for part, n_cols, high in (("w", 2, width), ("v", 2 * k, width - 1)):
        rows = getattr(state, f"{part}_state")
        _floats(f"_ps_state_.{part}_state", rows, (_rows(rows), n_cols),
                "[z, n]" if part == "w" else "[v, accumulators] of factors_' n_components")
        _keys(f"_ps_state_.{part}_keys", getattr(state, f"{part}_keys"), rows.shape[0], high)
        _accumulators(f"_ps_state_.{part}_state", rows, slice(n_cols // 2, n_cols),
                      "FTRL n" if part == "w" else "factor accumulator")


def check_ratings_model(est) -> None:
    """The fitted state of a :class:`~dask_ps.MatrixFactorization` ``est``: user and item
    ids sorted and distinct (int64, or strings), as many factor rows (float, of one width:
    ``n_components``) and biases as ids, a finite ``global_mean_`` and a ``rating_range_``
    ``(low, high)`` with ``low <= high``.

    Raises
    ------
    ValueError
        Naming the attribute that does not fit (a :class:`~dask_ps.exceptions.DataError`
        for ids out of order).
    """
    from ..io.ids import IdMapping

    if not hasattr(est, "user_factors_"):
        return
    n_components = None  # the factors' columns, user_factors_' (the estimator's parameter)
    for kind in ("user", "item"):
        ids = getattr(est, f"{kind}_ids_", None)
        # (string ids are restored as an object array of the strings the file stored)
        if not (isinstance(ids, np.ndarray) and (ids.dtype == np.int64 or ids.dtype.kind in "UO")):
            raise ValueError(f"{kind}_ids_ is not an array of int64 or string ids (dtype "
                             f"{getattr(ids, 'dtype', type(ids).__name__)})")
        IdMapping.from_sorted(ids, f"{kind}_ids_")  # 1-d, sorted, distinct
        factors = getattr(est, f"{kind}_factors_", None)
        why = (f"a row per id of {kind}_ids_"
               f"{', of the n_components of user_factors_' if n_components else ''}")
        shape = (ids.shape[0],
                 n_components or (factors.shape[1] if np.ndim(factors) == 2 else 1))
        _floats(f"{kind}_factors_", factors, shape, why)
        n_components = shape[1]
        _floats(f"{kind}_bias_", getattr(est, f"{kind}_bias_", None), (ids.shape[0],),
                f"one per id of {kind}_ids_")
    mean = getattr(est, "global_mean_", None)
    if not (isinstance(mean, numbers.Real) and not isinstance(mean, bool)
            and np.isfinite(mean)):
        raise ValueError(f"global_mean_ is {mean!r}, not a finite number")
    bounds = getattr(est, "rating_range_", None)
    if not (isinstance(bounds, tuple) and len(bounds) == 2 and all(
            isinstance(b, numbers.Real) and not isinstance(b, bool) for b in bounds)
            and bounds[0] <= bounds[1]):
        raise ValueError(f"rating_range_ is {bounds!r}, not (low, high) with low <= high")
