"""Full-batch logistic regression on the PS: L-BFGS-B (or OWL-QN with an L1 term) on the driver,
gradients computed by the workers next to their partitions and summed by the servers under BSP.

Per function evaluation the driver writes the new weights into the table ``"w"``, and one job
runs a step on every partition: it pulls the weights of the columns its rows touch (kept next
to the partition after the first visit), adds its log-loss gradient over those columns into
the table ``"grad"`` and its loss into ``"loss"``; the shards sum them, in a fixed order under
BSP, so the same data, partitioning and seed give the same model bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

from ..model import PSModel
from ..partitions import Partitions
from ._logistic_kernels import logistic_grad
from ._owlqn import owlqn
from ._stochastic import make_blocks

__all__ = ["train_lbfgs"]


def _gradient_step(ps, part, n_features: int):
    """The partition's summed log-loss and gradient, pushed into "grad" and "loss"."""
    def build():
        X, Y = part.load()
        return make_blocks(X, Y, 1, n_features, 0.0, 0)[0]

    blk = part.cached("lbfgs-columns", build, lambda b: sum(a.nbytes for a in b))
    w = ps.pull("w", blk.keys)
    grad = np.zeros_like(w)
    loss = logistic_grad(blk.indptr, blk.indices, blk.data, blk.Y, w[:-1], w[-1], grad[:-1],
                         grad[-1])
    ps.push("grad", blk.keys, grad)
    ps.push("loss", [0], [loss])


def train_lbfgs(model: PSModel, data: Partitions, shape: tuple, C: float, penalty: str,
                fit_intercept: bool, max_iter: int, tol: float, x0=None,
                on_evaluation=None) -> tuple[np.ndarray, int]:
    """Minimise scikit-learn's objective divided by ``C n_rows``; see
    :func:`dask_ps.algorithms.logistic.train`. Returns weights (n_features + 1, K) and the
    iterations run. ``on_evaluation(objective)`` is called after every function
    evaluation (a pass over the data)."""
    model.add_table("w", shape, "float64")
    model.add_table("grad", shape, "float64")
    model.add_table("loss", (1,), "float64")
    n_rows = max(1, data.total_rows)
    rows = np.arange(shape[0])
    current = np.zeros(shape)

    def objective(x):
        W = x.reshape(shape)
        if not np.isfinite(W).all() and on_evaluation is not None:
            on_evaluation(np.inf)  # the caller names the evaluation and what to do
        model.push("w", rows, W - current)  # the table holds ``current`` exactly
        current[:] = W
        model.fit_partitions(_step, data, consistency="bsp")
        grad, loss = model.pull("grad"), float(model.pull("loss")[0])
        model.push("grad", rows, -grad)
        model.push("loss", [0], [-loss])
        # scikit-learn's objective divided by C n: the same optimum, gradients of order 1
        scale = 1.0 / (C * n_rows)
        obj, g = C * loss, C * grad
        if penalty == "l2":
            obj += 0.5 * float((W[:-1] ** 2).sum())
            g[:-1] += W[:-1]
        obj, g = scale * obj, scale * g
        if not fit_intercept:
            g[-1] = 0.0
        if on_evaluation is not None:
            on_evaluation(obj)
        return obj, g.ravel()

    def _step(ps, part):
        return _gradient_step(ps, part, shape[0] - 1)

    x0 = np.zeros(int(np.prod(shape))) if x0 is None else np.ravel(x0).astype(np.float64)
    if penalty == "l1":  # OWL-QN; the intercept row is not penalised
        mask = np.ones(shape, bool)
        mask[-1] = False
        x, nit, converged = owlqn(objective, x0, 1.0 / (C * n_rows), mask.ravel(), max_iter,
                                  tol)
        if not converged:
            _not_converged("OWL-QN", max_iter, tol)
        return x.reshape(shape), nit
    res = scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                                  options=dict(maxiter=max_iter, gtol=tol, ftol=0.0,
                                               maxcor=20))
    if res.status == 1:  # iteration (or evaluation) limit reached
        _not_converged("L-BFGS-B", max_iter, tol)
    return res.x.reshape(shape), int(res.nit)


def _not_converged(method: str, max_iter: int, tol: float) -> None:
    # scikit-learn's habit: a solver stopped by max_iter says so
    warnings.warn(f"{method} stopped at max_iter={max_iter} iterations before the gradient "
                  f"norm reached tol={tol}; increase max_iter", ConvergenceWarning,
                  stacklevel=4)
