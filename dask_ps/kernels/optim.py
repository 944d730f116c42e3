"""Numba kernels of the server-side update rules.

Each applies one step to the rows ``rows`` (distinct) of ``w`` (n_rows, ncols) given the
updates ``g`` (len(rows), ncols); optimizer state arrays have the shape of ``w`` unless noted.
Arithmetic is done in float64 and stored in the table's dtype.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = dict(cache=True, nogil=True)


@numba.njit(**_JIT)
def add_step(w, rows, g):
    """Plain add: ``w[r] += g`` (counts, deltas)."""
    if w.shape[1] == 1:  # vectors: a 1-D loop runs ~2x faster than one over rows of 1 column
        w1, g1 = w[:, 0], g[:, 0]
        for i in range(rows.shape[0]):
            w1[rows[i]] += g1[i]
        return
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(w.shape[1]):
            w[r, j] += g[i, j]


@numba.njit(inline="always", **_JIT)
def add_flagged(v, k, b):
    """``v[k] += b`` in ``v``'s integer dtype (wrapping); negative when the sum wrapped:
    ``(a ^ s) & (b ^ s)`` for ``a`` the value before and ``s`` after."""
    a = v[k]
    v[k] += b
    s = v[k]
    return (a ^ s) & (b ^ s)


@numba.njit(inline="always", **_JIT)
def sub_flagged(v, k, b):
    """``v[k] -= b`` as :func:`add_flagged`: negative when the difference wrapped."""
    a = v[k]
    v[k] -= b
    s = v[k]
    return (a ^ b) & (a ^ s)


@numba.njit(**_JIT)
def add_step_checked(w, rows, g):
    """:func:`add_step` for an integer table that refuses a sum past its dtype: returns -1,
    or the first position ``i`` of ``rows`` (distinct) whose row would wrap, ``w`` then
    unchanged. The adding pass flags a wrap without a branch (:func:`add_flagged`); only
    when one wrapped are the rows taken back (wrapping additions undo exactly) and the first
    one found."""
    flag = 0
    if w.shape[1] == 1:  # as add_step: a 1-D loop for vectors
        w1, g1 = w[:, 0], g[:, 0]
        for i in range(rows.shape[0]):
            flag |= add_flagged(w1, rows[i], g1[i])
    else:
        for i in range(rows.shape[0]):
            row = w[rows[i]]
            for j in range(w.shape[1]):
                flag |= add_flagged(row, j, g[i, j])
    if flag >= 0:
        return -1
    first = -1
    for i in range(rows.shape[0]):
        row = w[rows[i]]
        for j in range(w.shape[1]):
            if sub_flagged(row, j, g[i, j]) < 0 and first < 0:  # undone: it wrapped back
                first = i
    return first


@numba.njit(**_JIT)
def average_step(w, rows, g):
    """Mean of pushed deltas: ``w[r, :-1] += g[:-1] / g[-1]; w[r, -1] += g[-1]``.

    The last column of ``g`` counts the pushers summed into the row, so each row moves by
    the mean of their deltas; the table's last column accumulates those counts.
    """
    last = w.shape[1] - 1
    for i in range(rows.shape[0]):
        r = rows[i]
        count = g[i, last]
        if count > 0:
            for j in range(last):
                w[r, j] += g[i, j] / count
            w[r, last] += count


@numba.njit(inline="always", **_JIT)
def _sgd_coord(w, r, j, g, lr):
    w[r, j] -= lr * g


@numba.njit(inline="always", **_JIT)
def _adagrad_coord(w, acc, r, j, g, lr, eps):
    acc[r, j] += g * g
    w[r, j] -= lr * g / (np.sqrt(np.float64(acc[r, j])) + eps)


@numba.njit(inline="always", **_JIT)
def ftrl_coord(w, z, n, r, j, g, alpha, beta, l1, l2):
    """One FTRL-Proximal step of coordinate ``(r, j)`` with gradient ``g`` (see
    :func:`ftrl_step`); hyper-parameters as scalars, so that a loop calling it keeps them in
    registers."""
    ni = np.float64(n[r, j])
    n_new = ni + g * g
    sigma = (np.sqrt(n_new) - np.sqrt(ni)) / alpha
    zi = np.float64(z[r, j]) + g - sigma * np.float64(w[r, j])
    z[r, j] = zi
    n[r, j] = n_new
    w[r, j] = _ftrl_weight(zi, n_new, alpha, beta, l1, l2)


# Rules that also run on the workers (local steps), by code: one per-coordinate update each,
# shared by the server kernels below and by local training, so both do the same arithmetic.
SGD_RULE, ADAGRAD_RULE, FTRL_RULE = 0, 1, 2


@numba.njit(inline="always", **_JIT)
def coord_step(rule, hyper, w, s1, s2, r, j, g):
    """Update coordinate ``(r, j)`` of ``w`` (state ``s1``, ``s2``) with gradient ``g``.

    ``rule`` and ``hyper``: ``SGD_RULE`` ``[lr]``; ``ADAGRAD_RULE`` ``[lr, eps]`` with ``s1``
    the accumulator; ``FTRL_RULE`` ``[alpha, beta, l1, l2]`` with ``s1 = z``, ``s2 = n``.
    """
    if rule == SGD_RULE:
        _sgd_coord(w, r, j, g, hyper[0])
    elif rule == ADAGRAD_RULE:
        _adagrad_coord(w, s1, r, j, g, hyper[0], hyper[1])
    else:
        ftrl_coord(w, s1, s2, r, j, g, hyper[0], hyper[1], hyper[2], hyper[3])


@numba.njit(**_JIT)
def sgd_step(w, rows, g, lr):
    """SGD: ``w -= lr * g``."""
    for i in range(rows.shape[0]):
        for j in range(w.shape[1]):
            _sgd_coord(w, rows[i], j, np.float64(g[i, j]), lr)


@numba.njit(**_JIT)
def adagrad_step(w, acc, rows, g, lr, eps):
    """AdaGrad (Duchi, Hazan & Singer, JMLR 2011): ``acc += g²; w -= lr g / (√acc + eps)``."""
    for i in range(rows.shape[0]):
        for j in range(w.shape[1]):
            _adagrad_coord(w, acc, rows[i], j, np.float64(g[i, j]), lr, eps)


@numba.njit(**_JIT)
def adam_step(w, m, v, t, rows, g, lr, beta1, beta2, eps):
    """Adam (Kingma & Ba, ICLR 2015), lazy: each row counts its own steps in ``t`` (n_rows, 1).

    Rows a push does not touch keep their moments, as in TensorFlow's LazyAdam, so a sparse
    push costs O(touched rows).
    """
    for i in range(rows.shape[0]):
        r = rows[i]
        t[r, 0] += 1
        c1 = 1.0 - beta1 ** t[r, 0]
        c2 = 1.0 - beta2 ** t[r, 0]
        for j in range(w.shape[1]):
            gi = np.float64(g[i, j])
            mj = beta1 * m[r, j] + (1.0 - beta1) * gi
            vj = beta2 * v[r, j] + (1.0 - beta2) * gi * gi
            m[r, j] = mj
            v[r, j] = vj
            w[r, j] -= lr * (mj / c1) / (np.sqrt(vj / c2) + eps)


@numba.njit(**_JIT)
def ftrl_step(w, z, n, rows, g, alpha, beta, l1, l2):
    """FTRL-Proximal (McMahan et al., KDD 2013, Algorithm 1), per coordinate.

    ``sigma = (√(n + g²) − √n) / alpha; z += g − sigma w; n += g²``, then
    ``w = 0`` if ``|z| <= l1`` else ``−(z − sign(z) l1) / ((beta + √n) / alpha + l2)``.
    """
    for i in range(rows.shape[0]):
        for j in range(w.shape[1]):
            ftrl_coord(w, z, n, rows[i], j, np.float64(g[i, j]), alpha, beta, l1, l2)


@numba.njit(inline="always", **_JIT)
def _ftrl_weight(z, n, alpha, beta, l1, l2):
    """FTRL-Proximal's closed-form weight of one coordinate from its ``z`` and ``n``."""
    if abs(z) <= l1:
        return 0.0
    sign = 1.0 if z > 0 else -1.0
    return -(z - sign * l1) / ((beta + np.sqrt(n)) / alpha + l2)


@numba.njit(**_JIT)
def ftrl_weights(z, n, alpha, beta, l1, l2, w):
    """``w`` from FTRL-Proximal's state ``z``, ``n`` (arrays of one shape, 2-D)."""
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            w[i, j] = _ftrl_weight(np.float64(z[i, j]), np.float64(n[i, j]), alpha, beta, l1, l2)
