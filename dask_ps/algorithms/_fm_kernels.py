"""Numba kernels of the factorization machine: per-sample steps on a local copy of the rows a
block of CSR rows touches.

The model (Rendle, ICDM 2010) of a row ``x`` is ::

    y(x) = b + sum_j w_j x_j + sum_{j < l} <v_j, v_l> x_j x_l
         = b + sum_j w_j x_j + 1/2 sum_f [(sum_j v_jf x_j)^2 - sum_j v_jf^2 x_j^2]

computed in ``O(k nnz)``; its gradient in ``v_jf`` is ``x_j (sum_l v_lf x_l - v_jf x_j)``.
The linear part steps with FTRL-Proximal (McMahan et al., KDD 2013), the factors with the
rule ``v_rule`` (AdaGrad or SGD) plus an L2 pull ``reg * v`` — the FTRL-FM design of Angel's
``FTRLFM`` (linear weights FTRL, factors by gradient steps). The per-coordinate updates are
:func:`dask_ps.kernels.optim.coord_step`, the servers' own.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.optim import FTRL_RULE, coord_step
from ._logistic_kernels import loss_residual

__all__ = ["fm_margin", "fm_margins_scaled", "fm_steps"]

_JIT = dict(cache=True, nogil=True)


@numba.njit(inline="always", **_JIT)
def fm_margin(indptr, indices, data, i, w, bias, V, s):
    """The FM margin of CSR row ``i``; ``s`` (k,) gets ``sum_j v_jf x_j`` per factor."""
    k = V.shape[1]
    z = bias
    for f in range(k):
        s[f] = 0.0
    sq = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        x = data[p]
        z += w[j, 0] * x
        for f in range(k):
            vx = V[j, f] * x
            s[f] += vx
            sq += vx * vx
    inter = 0.0
    for f in range(k):
        inter += s[f] * s[f]
    return z + 0.5 * (inter - sq)


@numba.njit(**_JIT)
def fm_margins_scaled(indptr, indices, data, rows, w, bias, V, out):
    """FM margins of the CSR ``rows`` whose plain identity overflowed (``inf - inf``), into
    ``out`` (len(rows),): each row scaled by its largest ``|x|`` (``s``), the linear part
    ``s * sum_j w_j (x_j / s)`` and the pairwise one ``s * (s * P)`` with ``P`` the sum
    over pairs of the scaled row, summed in order (``sum_l a_lf * sum_{j<l} a_jf``, no
    cancelling squares) and 0 when ``P`` is 0 (a row with one non-zero: no ``inf * 0``).
    A margin is ``±inf`` when a part overflows, NaN only when the linear part and the
    pairwise part overflow with opposite signs (undefined).

    Parameters
    ----------
    indptr, indices, data : CSR arrays; ``indices`` index ``w`` (n,) and ``V`` (n, k).
    rows : int64 array
    bias : float
    out : float64 array (len(rows),)
    """
    k = V.shape[1]
    acc = np.empty(k)
    for q in range(rows.shape[0]):
        i = rows[q]
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s = max(s, abs(data[p]))
        if s == 0.0:
            out[q] = bias
            continue
        lin = 0.0
        pair = 0.0
        for f in range(k):
            acc[f] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p] / s
            lin += w[j] * x
            for f in range(k):
                a = V[j, f] * x
                pair += a * acc[f]
                acc[f] += a
        lin = bias + s * lin
        pair = 0.0 if pair == 0.0 else s * (s * pair)
        out[q] = lin + pair


@numba.njit(**_JIT)
def fm_steps(indptr, indices, data, y, sw, order, hyper, fit_intercept, w, z, n, v_rule,
             v_hyper, reg, V, A, s):
    """Per-sample steps of a binary FM over CSR rows against local copies of its rows.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of ``n_rows`` rows; ``indices`` index rows
        ``0 .. m-1`` of ``w`` and ``V``.
    y : float array (n_rows, 1)
        Targets in {0, 1}.
    sw : float64 array (n_rows,) or (0,)
        Sample weights: row ``i``'s log-loss gradient (and loss) times ``sw[i]`` (the
        ``reg`` pull is not); empty for none.
    order : int64 array
        Rows to visit, in this order.
    hyper : float64 array (4,)
        FTRL's ``[alpha, beta, l1, l2]`` of the linear part.
    fit_intercept : bool
        Whether the intercept (row ``m`` of ``w``) steps.
    w, z, n : float64 arrays (m + 1, 1)
        Linear weights (row ``m`` the intercept) and their FTRL state, updated in place.
    v_rule : int
        ``ADAGRAD_RULE`` (``v_hyper = [lr, eps]``, ``A`` the accumulators) or ``SGD_RULE``
        (``[lr]``, ``A`` unused) of :mod:`dask_ps.kernels.optim`.
    v_hyper : float64 array
    reg : float
        L2 strength of the factors, added to their gradient.
    V, A : float64 arrays (m, k)
        Factors and their rule's state, updated in place.
    s : float64 array (k,)
        Scratch.

    Returns
    -------
    float
        Summed log-loss of the rows, each scored before its own step (progressive
        validation).
    """
    m = w.shape[0] - 1
    k = V.shape[1]
    weighted = sw.shape[0] != 0
    loss = 0.0
    for q in range(order.shape[0]):
        i = order[q]
        t = fm_margin(indptr, indices, data, i, w, w[m, 0], V, s)
        li, r = loss_residual(t, y[i, 0])
        if weighted:
            li *= sw[i]
            r *= sw[i]
        loss += li
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            coord_step(FTRL_RULE, hyper, w, z, n, j, 0, r * x)
            for f in range(k):
                g = r * x * (s[f] - V[j, f] * x) + reg * V[j, f]
                coord_step(v_rule, v_hyper, V, A, A, j, f, g)
        if fit_intercept:
            coord_step(FTRL_RULE, hyper, w, z, n, m, 0, r)
    return loss
