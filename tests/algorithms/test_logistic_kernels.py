"""The one-output paths of the logistic kernels (the estimator's default) against the general
ones."""

import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps.algorithms._logistic_kernels import local_steps, logistic_grad
from dask_ps.algorithms._stochastic import Rule
from dask_ps.state.optimizers import FTRL

NONE = np.zeros(0)  # no sample weights


def _run(X, Y, order, rule, state, l2, fit_intercept):
    buf, w, s1, s2 = rule.unpack(state)
    m = w.shape[0]
    loss = local_steps(X.indptr, X.indices, X.data, Y, NONE, order, 1, rule.code, rule.hyper,
                       l2, fit_intercept, w, s1, s2, np.zeros(w.shape), np.empty(m, np.int64),
                       np.full(m, -1, np.int64))
    return loss, w, s1, s2


@pytest.mark.parametrize("l2, fit_intercept", [(0.0, True), (0.01, False)])
def test_binary_ftrl_steps_equal_the_general_path(l2, fit_intercept):
    """One output takes its own kernel; two identical outputs take the general one and must
    give, column by column, the same weights, state and loss bit for bit."""
    rng = np.random.default_rng(3)
    X = sp.random(300, 50, density=0.1, format="csr", random_state=4)
    X.data[X.indptr[7]:X.indptr[8]] = 0  # an empty row, also among the rows touched ahead
    X.eliminate_zeros()
    y = (rng.random((300, 1)) < 0.4).astype(float)
    order = rng.permutation(300)
    ftrl = FTRL(alpha=0.1, beta=1.0, l1=0.01, l2=0.0)
    state = np.abs(rng.normal(size=(51, 2))) * 0.1
    one = _run(X, y, order, Rule(ftrl, 1), state, l2, fit_intercept)
    two = _run(X, np.hstack([y, y]), order, Rule(ftrl, 2),
               state[:, [0, 0, 1, 1]], l2, fit_intercept)
    assert two[0] == 2 * one[0]
    for a, b in zip(one[1:], two[1:]):
        np.testing.assert_array_equal(b, np.hstack([a, a]))
    assert np.abs(one[1]).sum() > 0  # it trained


def test_binary_gradient_equals_the_general_path():
    """logistic_grad's one-output loop against two identical outputs (the general loop): the
    same gradients bit for bit; and against NumPy. The gradients add to what they held."""
    rng = np.random.default_rng(5)
    X = sp.random(400, 60, density=0.1, format="csr", random_state=6)
    y = (rng.random((400, 1)) < 0.3).astype(float)
    w = rng.normal(size=(60, 1))
    bias = np.array([0.3])
    held = rng.normal(size=(61, 1))

    def run(Y, W, b, g):
        loss = logistic_grad(X.indptr, X.indices, X.data, Y, NONE, W, b, g[:-1], g[-1])
        return loss, g

    one = run(y, w, bias, held.copy())
    two = run(np.hstack([y, y]), np.hstack([w, w]), np.hstack([bias, bias]),
              np.hstack([held, held]))
    np.testing.assert_array_equal(two[1], np.hstack([one[1], one[1]]))
    np.testing.assert_allclose(two[0], 2 * one[0], rtol=1e-14)  # summed in another order
    z = X @ w[:, 0] + bias[0]
    r = 1.0 / (1.0 + np.exp(-z)) - y[:, 0]
    np.testing.assert_allclose(one[0], np.sum(np.logaddexp(0.0, z) - y[:, 0] * z), rtol=1e-12)
    np.testing.assert_allclose(one[1][:-1, 0], held[:-1, 0] + X.T @ r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(one[1][-1, 0], held[-1, 0] + r.sum(), rtol=1e-10)
