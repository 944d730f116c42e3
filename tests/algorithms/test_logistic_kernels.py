"""The per-sample FTRL path for one output (the estimator's default) against the general one."""

import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps.algorithms._logistic_kernels import local_steps
from dask_ps.algorithms._stochastic import Rule
from dask_ps.state.optimizers import FTRL


def _run(X, Y, order, rule, state, l2, fit_intercept):
    buf, w, s1, s2 = rule.unpack(state)
    m = w.shape[0]
    loss = local_steps(X.indptr, X.indices, X.data, Y, order, 1, rule.code, rule.hyper, l2,
                       fit_intercept, w, s1, s2, np.zeros(w.shape), np.empty(m, np.int64),
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
