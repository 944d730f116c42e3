"""Numba kernels of logistic regression on CSR rows: margins, log-loss and its gradient.

``K`` columns are ``K`` independent binary problems (one-vs-rest); ``K = 1`` is the binary
case. Columns of the CSR block are local: ``indices`` index the rows of ``w`` pulled for it.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = dict(cache=True, nogil=True)


@numba.njit(inline="always", **_JIT)
def log1pexp(z):
    """``log(1 + exp(z))`` without overflow."""
    if z > 0:
        return z + np.log1p(np.exp(-z))
    return np.log1p(np.exp(z))


@numba.njit(inline="always", **_JIT)
def sigmoid(z):
    """``1 / (1 + exp(-z))`` without overflow for any float ``z``."""
    if z >= 0:
        return 1.0 / (1.0 + np.exp(-z))
    e = np.exp(z)
    return e / (1.0 + e)


@numba.njit(**_JIT)
def logistic_grad(indptr, indices, data, y, w, bias, grad, grad_bias):
    """Accumulate the log-loss gradient of CSR rows; return their summed log-loss.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of ``n`` rows; ``indices`` index rows of ``w``.
    y : float array (n, K)
        Targets in {0, 1}.
    w : float array (m, K)
        Weights of the columns the rows touch.
    bias : float array (K,)
    grad : float64 array (m, K), grad_bias : float64 array (K,)
        Incremented by ``sum_i x_i (sigmoid(x_i w + b) - y_i)``.
    """
    n = indptr.shape[0] - 1
    n_out = w.shape[1]
    loss = 0.0
    margin = np.empty(n_out)
    for i in range(n):
        for k in range(n_out):
            margin[k] = bias[k]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            for k in range(n_out):
                margin[k] += x * w[j, k]
        for k in range(n_out):
            z = margin[k]
            # log-loss of label y: log(1 + exp(z)) - y z
            loss += log1pexp(z) - y[i, k] * z
            r = sigmoid(z) - y[i, k]
            margin[k] = r
            grad_bias[k] += r
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            for k in range(n_out):
                grad[j, k] += x * margin[k]
    return loss


@numba.njit(**_JIT)
def decision(indptr, indices, data, w, bias, out):
    """``out[i] = x_i w + bias`` for CSR rows whose ``indices`` index rows of ``w``."""
    n = indptr.shape[0] - 1
    for i in range(n):
        for k in range(w.shape[1]):
            out[i, k] = bias[k]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for k in range(w.shape[1]):
                out[i, k] += data[p] * w[j, k]
