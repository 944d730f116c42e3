"""Full-batch logistic regression on the PS: L-BFGS-B (or OWL-QN with an L1 term) on the driver,
gradients computed by the workers and summed by the servers under BSP."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

from ..model import PSModel
from ._logistic_kernels import logistic_grad
from ._owlqn import owlqn

__all__ = ["train_lbfgs"]


def _full_gradient_task(ps, item):
    """The partition's summed log-loss and gradient, pushed into the "grad" and "loss" tables."""
    X, Y = item
    W = ps.pull("w")
    grad = np.zeros_like(W)
    loss = logistic_grad(X.indptr, X.indices, X.data, Y, W[:-1], W[-1], grad[:-1], grad[-1])
    ps.push("grad", np.arange(W.shape[0]), grad)
    ps.push("loss", [0], [loss])


def train_lbfgs(model: PSModel, parts: list, shape: tuple, C: float, n_rows: int, penalty: str,
                fit_intercept: bool, max_iter: int, tol: float, workers, x0=None,
                monitor=None) -> tuple[np.ndarray, list, int]:
    """Minimise scikit-learn's objective divided by ``C n_rows``; see
    :func:`dask_ps.algorithms.logistic.train`. Returns weights (n_features + 1, K), the
    objective per function evaluation, and the iterations run."""
    model.add_table("w", shape, "float64")
    model.add_table("grad", shape, "float64")
    model.add_table("loss", (1,), "float64")
    rows = np.arange(shape[0])
    current = np.zeros(shape)
    history = []

    def objective(x):
        W = x.reshape(shape)
        model.push("w", rows, W - current)  # the table holds ``current`` exactly
        current[:] = W
        # BSP: the shards add the partitions' gradients in a fixed order, so the result does
        # not depend on which worker answered first
        model.run(_full_gradient_task, parts, consistency="bsp", workers=workers)
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
        history.append(dict(evaluation=len(history) + 1, loss=obj))
        if monitor is not None:
            monitor.epoch_done(len(history), obj)
        return obj, g.ravel()

    x0 = np.zeros(int(np.prod(shape))) if x0 is None else np.ravel(x0).astype(np.float64)
    if penalty == "l1":  # OWL-QN; the intercept row is not penalised
        mask = np.ones(shape, bool)
        mask[-1] = False
        x, nit, converged = owlqn(objective, x0, 1.0 / (C * n_rows), mask.ravel(), max_iter,
                                  tol)
        if not converged:
            _not_converged("OWL-QN", max_iter, tol)
        return x.reshape(shape), history, nit
    res = scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                                  options=dict(maxiter=max_iter, gtol=tol, ftol=0.0,
                                               maxcor=20))
    if res.status == 1:  # iteration (or evaluation) limit reached
        _not_converged("L-BFGS-B", max_iter, tol)
    return res.x.reshape(shape), history, int(res.nit)


def _not_converged(method: str, max_iter: int, tol: float) -> None:
    # scikit-learn's habit: a solver stopped by max_iter says so
    warnings.warn(f"{method} stopped at max_iter={max_iter} iterations before the gradient "
                  f"norm reached tol={tol}; increase max_iter", ConvergenceWarning,
                  stacklevel=4)
