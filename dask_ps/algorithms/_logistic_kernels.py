"""Numba kernels of logistic regression on CSR rows: margins, log-loss and its gradient.

``K`` columns are ``K`` independent binary problems (one-vs-rest); ``K = 1`` is the binary
case. Columns of the CSR block are local: ``indices`` index the rows of ``w`` pulled for it.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.memory import prefetch
from ..kernels.optim import FTRL_RULE, coord_step, ftrl_coord

_JIT = dict(cache=True, nogil=True)


@numba.njit(inline="always", **_JIT)
def log1pexp(z):
    """``log(1 + exp(z))`` without overflow."""
    if z > 0:
        return z + np.log1p(np.exp(-z))
    return np.log1p(np.exp(z))


@numba.njit(inline="always", **_JIT)
def loss_residual(z, y):
    """``(log(1 + exp(z)) - y z, 1 / (1 + exp(-z)) - y)``: a row's log-loss at margin ``z``
    and its residual, without overflow for any float ``z``, from one ``exp(-|z|)`` instead of
    one each. The loss has the bits of :func:`log1pexp`, the residual those of the two-branch
    sigmoid it replaces."""
    e = np.exp(-abs(z))
    if z > 0:
        return z + np.log1p(e) - y * z, 1.0 / (1.0 + e) - y
    return np.log1p(e) - y * z, e / (1.0 + e) - y


@numba.njit(**_JIT)
def logistic_grad(indptr, indices, data, y, sw, w, bias, grad, grad_bias):
    """Accumulate the log-loss gradient of CSR rows; return their summed log-loss.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of ``n`` rows; ``indices`` index rows of ``w``.
    y : float array (n, K)
        Targets in {0, 1}.
    sw : float64 array (n,) or (0,)
        Sample weights: row ``i``'s loss and gradient count ``sw[i]`` times; empty for
        none (every row once, with the operations, and bits, of an unweighted sum).
    w : float array (m, K)
        Weights of the columns the rows touch.
    bias : float array (K,)
    grad : float64 array (m, K), grad_bias : float64 array (K,)
        Incremented by ``sum_i sw_i x_i (sigmoid(x_i w + b) - y_i)``.

    Notes
    -----
    ``K = 1`` has a loop of its own, the margin a scalar: the same operations in the same
    order (the same bits), in 1.34 ms instead of 2.38 ms of CPU on half of a9a (16,280 rows).
    """
    n = indptr.shape[0] - 1
    n_out = w.shape[1]
    weighted = sw.shape[0] != 0
    loss = 0.0
    if n_out == 1:
        b = bias[0]
        gb = grad_bias[0]
        for i in range(n):
            z = b
            for p in range(indptr[i], indptr[i + 1]):
                z += data[p] * w[indices[p], 0]
            li, r = loss_residual(z, y[i, 0])
            if weighted:
                li *= sw[i]
                r *= sw[i]
            loss += li
            gb += r
            for p in range(indptr[i], indptr[i + 1]):
                grad[indices[p], 0] += data[p] * r
        grad_bias[0] = gb
        return loss
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
            li, r = loss_residual(z, y[i, k])
            if weighted:
                li *= sw[i]
                r *= sw[i]
            loss += li
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



@numba.njit(**_JIT)
def local_steps(indptr, indices, data, y, sw, order, batch, rule, hyper, l2, fit_intercept,
                w, s1, s2, grad, touched, mark):
    """Minibatch steps of an update rule over CSR rows, against a local copy of the weights.

    The rows are visited in ``order``, ``batch`` at a time; after each minibatch the rule
    ``rule`` updates the rows of ``w`` (and its state ``s1``, ``s2``) that the minibatch
    touched, with the mean log-loss gradient plus ``l2 * w`` — the server-side kernels of
    :mod:`dask_ps.kernels.optim`, so a step here equals a push of that gradient there.

    Parameters
    ----------
    indptr, indices, data : CSR arrays; ``indices`` index rows ``0 .. m-1`` of ``w``.
    y : float array (n, K)
        Targets in {0, 1}.
    sw : float64 array (n,) or (0,)
        Sample weights: row ``i``'s gradient (and loss) is multiplied by ``sw[i]`` (the
        ``l2`` term is not); empty for none.
    order : int64 array
        Rows to visit, in this order.
    batch : int
        Rows per step.
    rule : int
        ``SGD_RULE`` (``hyper = [lr]``), ``ADAGRAD_RULE`` (``[lr, eps]``, ``s1`` the
        accumulator) or ``FTRL_RULE`` (``[alpha, beta, l1, l2]``, ``s1 = z``, ``s2 = n``).
    l2 : float
        L2 strength added to the gradient of the touched feature rows (not the intercept).
    fit_intercept : bool
        Whether the intercept (row ``m`` of ``w``) is updated.
    w, s1, s2 : float64 arrays (m + 1, K)
        Weights (row ``m`` the intercept) and rule state, updated in place.
    grad : float64 array (m + 1, K), touched : int64 array (m + 1,), mark : int64 array (m + 1,)
        Scratch: ``grad`` zero and ``mark`` all -1 on entry, and left so on exit.

    Returns
    -------
    float
        Summed log-loss of the rows, each taken before the step that uses it (progressive
        validation, as in McMahan et al., KDD 2013).
    """
    m = w.shape[0] - 1
    n_out = w.shape[1]
    margin = np.empty(n_out)
    loss = 0.0
    if batch == 1 and n_out == 1 and rule == FTRL_RULE:
        return _binary_ftrl_steps(indptr, indices, data, y, sw, order, hyper, l2,
                                  fit_intercept, w, s1, s2)
    if batch == 1:  # per sample: no gradient buffer (the rows' columns are distinct)
        for q in range(order.shape[0]):
            i = order[q]
            loss += _residuals(indptr, indices, data, y, sw, w, i, m, margin)
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                for k in range(n_out):
                    coord_step(rule, hyper, w, s1, s2, j, k,
                               data[p] * margin[k] + l2 * w[j, k])
            if fit_intercept:
                for k in range(n_out):
                    coord_step(rule, hyper, w, s1, s2, m, k, margin[k])
        return loss
    for start in range(0, order.shape[0], batch):
        stop = min(start + batch, order.shape[0])
        cnt = 0
        for q in range(start, stop):
            i = order[q]
            loss += _residuals(indptr, indices, data, y, sw, w, i, m, margin)
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if mark[j] < 0:
                    mark[j] = cnt
                    touched[cnt] = j
                    cnt += 1
                r = mark[j]
                for k in range(n_out):
                    grad[r, k] += data[p] * margin[k]
            if fit_intercept:
                if mark[m] < 0:
                    mark[m] = cnt
                    touched[cnt] = m
                    cnt += 1
                for k in range(n_out):
                    grad[mark[m], k] += margin[k]
        scale = 1.0 / (stop - start)
        for r in range(cnt):
            j = touched[r]
            for k in range(n_out):
                g = grad[r, k] * scale
                if j != m:
                    g += l2 * w[j, k]
                coord_step(rule, hyper, w, s1, s2, j, k, g)
                grad[r, k] = 0.0
            mark[j] = -1
    return loss


# rows ahead whose weight rows a per-sample step prefetches (see _binary_ftrl_steps)
_AHEAD = 4


@numba.njit(**_JIT)
def _binary_ftrl_steps(indptr, indices, data, y, sw, order, hyper, l2, fit_intercept, w, z,
                       n):
    """The per-sample path of :func:`local_steps` for one output and FTRL (the estimator's
    default), with the same arithmetic in the same order.

    A scalar margin replaces the loops over outputs, and the weight rows of the row
    ``_AHEAD`` steps ahead in ``order`` (a random permutation) are prefetched (and that
    row's entries a stride earlier), so that their cache misses overlap the current row's
    work instead of stalling the next step: 0.33-0.35 s of CPU instead of 0.37-0.42 s
    (touching only the first entry of the row ahead) for 500,000 generated rows x 2^22
    features in 5 blocks, the same weights bit for bit (``time.thread_time``, load ~3).
    The hyper-parameters are read once into scalars (read from ``hyper`` at every
    coordinate, LLVM cannot hoist the loads past the stores into ``w``, which might alias
    it) and a row's loss and residual share one ``exp`` (:func:`loss_residual`): together
    0.41-0.43 s of CPU instead of 0.51-0.61 s for 500,000 generated rows x 22 non-zeros, the
    same weights bit for bit; either change alone measured little or no gain.
    """
    alpha, beta, l1, l2_rule = hyper[0], hyper[1], hyper[2], hyper[3]
    weighted = sw.shape[0] != 0
    m = w.shape[0] - 1
    loss = 0.0
    n_rows = order.shape[0]
    for q in range(n_rows):
        if q + 2 * _AHEAD < n_rows:  # the entries of a row two strides ahead ...
            far = indptr[order[q + 2 * _AHEAD]]
            prefetch(indices, far)
            prefetch(data, far)
        if q + _AHEAD < n_rows:  # ... and the weight rows of the row one stride ahead
            nxt = order[q + _AHEAD]
            prefetch(y, nxt)
            for p in range(indptr[nxt], indptr[nxt + 1]):
                prefetch(w, indices[p])
        i = order[q]
        margin = w[m, 0]
        for p in range(indptr[i], indptr[i + 1]):
            margin += data[p] * w[indices[p], 0]
        li, r = loss_residual(margin, y[i, 0])
        if weighted:
            li *= sw[i]
            r *= sw[i]
        loss += li
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            ftrl_coord(w, z, n, j, 0, data[p] * r + l2 * w[j, 0], alpha, beta, l1, l2_rule)
        if fit_intercept:
            ftrl_coord(w, z, n, m, 0, r, alpha, beta, l1, l2_rule)
    return loss


@numba.njit(inline="always", **_JIT)
def _residuals(indptr, indices, data, y, sw, w, i, m, out):
    """``out[k] = sigmoid(x_i w[:, k] + w[m, k]) - y[i, k]``; returns row ``i``'s log-loss;
    both times ``sw[i]`` when ``sw`` is not empty."""
    loss = 0.0
    for k in range(w.shape[1]):
        out[k] = w[m, k]
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        for k in range(w.shape[1]):
            out[k] += data[p] * w[j, k]
    for k in range(w.shape[1]):
        z = out[k]
        li, out[k] = loss_residual(z, y[i, k])
        if sw.shape[0] != 0:
            li *= sw[i]
            out[k] *= sw[i]
        loss += li
    return loss


@numba.njit(**_JIT)
def rows_loss(indptr, indices, data, y, sw, rows, w):
    """Summed log-loss of CSR rows ``rows`` under weights ``w`` (m + 1, K), intercept last,
    row ``i``'s times ``sw[i]`` (``sw`` (n,) float64, or empty: unweighted)."""
    m = w.shape[0] - 1
    loss = 0.0
    for q in range(rows.shape[0]):
        i = rows[q]
        for k in range(w.shape[1]):
            z = w[m, k]
            for p in range(indptr[i], indptr[i + 1]):
                z += data[p] * w[indices[p], k]
            if sw.shape[0] != 0:
                loss += sw[i] * (log1pexp(z) - y[i, k] * z)
            else:
                loss += log1pexp(z) - y[i, k] * z
    return loss
