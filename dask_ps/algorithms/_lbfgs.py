"""Full-batch logistic regression on the PS: L-BFGS-B (or OWL-QN with an L1 term) on the driver,
loss and gradient computed by the workers next to their partitions.

A function evaluation moves only what it must. Each task (one per worker thread holding
partitions) indexes once the distinct columns its rows touch (their union over the task's
partitions, kept next to them) and tells the driver those keys once per fit. Then, per
evaluation, the driver sends each task the change of the weights on its keys since the last
evaluation, and the task returns its log-loss and its gradient over the same keys; the driver
adds the gradients in task order (the same data and partitioning give the same model bit for
bit). Nothing else travels: no dense table of ``n_features`` rows is written or read, so a
model of 2^22 hashed features costs what the data touches, not 2^22 rows, per evaluation.

Both directions are float32 while the solver allows it (8 bytes per touched feature and task
per evaluation):

* the task keeps the weights it evaluates at in float64 and adds the float32 change the driver
  sends; the driver mirrors that sum exactly, so both hold the same point, within float32
  rounding of the *last step* of ``x`` (error feedback: the next change carries the rounding
  residual), which vanishes as the steps do near the optimum. Loss and gradient are those of
  that point, consistently;
* the tasks' gradients are float32 while their rounding (measured by each task, scaled as the
  objective) stays below ``tol / 100``; at a tighter ``tol`` the fit switches to float64 for
  the rest of it (changes and gradients).

Where the time and bytes went before (10^6 x 2^22 CTR rows, profiled with cProfile): per
evaluation the driver pushed a dense float64 weight change of 2^22 rows, pulled a dense
gradient table and pushed its negation back to reset it (three dense transfers plus their
partitioning plans: most of the wall time), and each task pulled float64 weights and pushed a
float64 gradient with int64 keys (16 + 16 bytes per touched feature).
"""

from __future__ import annotations

import math
import uuid
import warnings

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from ..exceptions import DivergenceError
from ..model import PSModel
from ..partitions import Partitions
from ._logistic_kernels import logistic_grad
from ._owlqn import owlqn
from ._stochastic import make_blocks

__all__ = ["lbfgs_fit", "train_lbfgs"]

#: A task's gradient travels as float32 while its rounding, scaled as the objective, stays
#: below ``tol * GRAD_ROUNDING``.
GRAD_ROUNDING = 1e-2


def _task_block(parts, n_features: int):
    """The rows of a task's partitions as one block over their union of columns."""
    def build():
        loaded = [p.load() for p in parts]
        X = sp.vstack([x for x, _ in loaded], format="csr") if len(loaded) > 1 \
            else loaded[0][0]
        Y = np.concatenate([y for _, y in loaded]) if len(loaded) > 1 else loaded[0][1]
        return make_blocks(X, Y, 1, n_features, 0.0, 0)[0]

    name = "lbfgs-columns-" + ",".join(str(p.index) for p in parts)
    return parts[0].cached(name, build, lambda b: sum(a.nbytes for a in b))


def _task_keys(ps, item, n_features: int) -> np.ndarray:
    """The setup job's task: the sorted columns (and the intercept) its rows touch."""
    return _task_block(item[0], n_features).keys


def _task_evaluate(ps, item, n_features: int, fit: str, version: int) -> tuple:
    """An evaluation's task: apply the weight change, return ``(loss, gradient on the keys,
    max rounding of the gradient)``, or ``None`` when the task lost the weights it held (the
    driver then sends them whole)."""
    parts, change, whole = item
    blk = _task_block(parts, n_features)
    state = parts[0].state
    held = state.get(fit)
    if whole:
        held = state[fit] = [version, change.astype(np.float64)]
    elif held is None or held[0] != version - 1:
        if version == 0:  # the first evaluation starts from zero weights
            held = state[fit] = [-1, np.zeros(change.shape)]
        else:
            state.pop(fit, None)
            return None
    if not whole:
        held[1] += change  # the driver adds the same float32 values to the same float64
        held[0] = version
    w = held[1]
    grad = np.zeros(w.shape)
    loss = logistic_grad(blk.indptr, blk.indices, blk.data, blk.Y, w[:-1], w[-1], grad[:-1],
                         grad[-1])
    if change.dtype == np.float32:
        with np.errstate(over="ignore"):
            g32 = grad.astype(np.float32)
        if not np.isfinite(g32).all():  # beyond float32's range: send it as it is
            return loss, grad, 0.0
        err = float(np.max(np.abs(g32 - grad), initial=0.0))
        return loss, g32, err
    return loss, grad, 0.0


class _Evaluations:
    """The driver's side of the evaluations: task keys, the point the tasks hold, bytes moved.

    ``point(x)`` moves the tasks to (the float32-rounded change towards) ``x`` and returns
    ``(W, loss, grad)`` at the point they now hold (``W`` float64 of ``shape``).
    """

    def __init__(self, model: PSModel, data: Partitions, shape: tuple, scale: float,
                 tol: float) -> None:
        self.model, self.shape, self.scale, self.tol = model, shape, scale, tol
        self.fit = "lbfgs-" + uuid.uuid4().hex[:12]
        self.n_features = shape[0] - 1
        self.version = -1
        self.wire = np.float32
        self.nbytes = 0  # bytes moved by the last evaluation
        refs = data.refs()
        tasks = data.tasks(None if model.is_local else model.client.nthreads())
        self.items = [[refs[i] for i in idx] for _, idx in tasks]
        self.workers = None if model.is_local else [w for w, _ in tasks]
        n_features = self.n_features
        self.keys = self._run(lambda ps, item: _task_keys(ps, item, n_features),
                              [(parts,) for parts in self.items])
        self.setup_bytes = sum(k.nbytes for k in self.keys)
        self.held = np.zeros(shape)  # what every task holds on its keys

    def _run(self, fn, items) -> list:
        return self.model.run(fn, items, workers=self.workers)

    def point(self, x: np.ndarray):
        W = x.reshape(self.shape)
        self.version += 1
        version, fit, n_features = self.version, self.fit, self.n_features
        with np.errstate(over="ignore"):
            change = (W - self.held).astype(self.wire)
        if self.wire == np.float32 and not np.isfinite(change).all():
            self.wire = np.float64  # beyond float32's range
            change = W - self.held
        self.held += change  # exactly what the tasks add
        items = [(parts, change[k], False) for parts, k in zip(self.items, self.keys)]

        def step(ps, item):
            return _task_evaluate(ps, item, n_features, fit, version)

        results = self._run(step, items)
        self.nbytes = sum(it[1].nbytes for it in items)
        lost = [t for t, r in enumerate(results) if r is None]
        if lost:  # a task lost its weights (e.g. its worker restarted): send them whole
            whole = [(self.items[t], self.held[self.keys[t]], True) for t in lost]
            for t, r in zip(lost, self._run(step, whole)):
                results[t] = r
            self.nbytes += sum(it[1].nbytes for it in whole)
        grad = np.zeros(self.shape)
        loss = 0.0
        err = 0.0
        for k, (task_loss, g, e) in zip(self.keys, results):
            grad[k] += g  # a task's keys are distinct
            loss += task_loss
            err = max(err, e)
            self.nbytes += g.nbytes + 24
        if self.wire == np.float32 and err * self.scale > self.tol * GRAD_ROUNDING:
            self.wire = np.float64  # float32 gradients are too coarse for this tol
        return self.held, loss, grad


def train_lbfgs(model: PSModel, data: Partitions, shape: tuple, C: float, penalty: str,
                fit_intercept: bool, max_iter: int, tol: float, x0=None,
                on_evaluation=None) -> tuple[np.ndarray, int]:
    """Minimise scikit-learn's objective divided by ``C n_rows``; see
    :func:`dask_ps.algorithms.logistic.train`. Returns weights (n_features + 1, K) and the
    iterations run. ``on_evaluation(objective, nbytes)`` is called after every function
    evaluation (a pass over the data), with the bytes of weights and gradients it moved
    (the first evaluation also counts the tasks' keys, sent once per fit)."""
    n_rows = max(1, data.total_rows)
    scale = 1.0 / (C * n_rows)
    ev = _Evaluations(model, data, shape, scale, tol)
    first = [ev.setup_bytes]

    def objective(x):
        if not np.isfinite(x).all() and on_evaluation is not None:
            on_evaluation(np.inf, math.nan)  # the caller names the evaluation and what to do
        W, loss, grad = ev.point(x)
        # scikit-learn's objective divided by C n: the same optimum, gradients of order 1
        obj, g = C * loss, C * grad
        if penalty == "l2":
            obj += 0.5 * float((W[:-1] ** 2).sum())
            g[:-1] += W[:-1]
        obj, g = scale * obj, scale * g
        if not fit_intercept:
            g[-1] = 0.0
        if on_evaluation is not None:
            on_evaluation(obj, ev.nbytes + first.pop() if first else ev.nbytes)
        return obj, g.ravel()

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


def lbfgs_fit(model, data, shape, C, penalty, fit_intercept, max_iter, tol, init, loop):
    """:func:`train_lbfgs` with a progress monitor and a ``history`` record per evaluation
    (``epoch`` = ``evaluation``, ``loss`` the objective, ``time``, ``bytes``).

    Returns ``(W, n_iterations, history)``.

    Raises
    ------
    DivergenceError
        The objective stopped being finite (the features want scaling, or C is too large).
    """
    from ..diagnostics.progress import FitMonitor

    history = []
    with FitMonitor(model, loop.name, None, progress=loop.progress,
                    unit="evaluation") as monitor:
        def on_evaluation(obj, nbytes):
            e = len(history) + 1
            if not math.isfinite(obj):
                raise DivergenceError(loop.name, e, f"the objective is {obj}",
                                      "scale the features (e.g. scikit-learn's "
                                      "StandardScaler or MaxAbsScaler) or lower C")
            history.append(dict(epoch=e, evaluation=e, loss=obj, bytes=nbytes))
            monitor.epoch_done(e, obj)

        W, nit = train_lbfgs(model, data, shape, C, penalty, fit_intercept, max_iter, tol,
                             None if init is None else init.W, on_evaluation)
    for h in history:
        h.update(time=monitor.entries.get(h["epoch"], {}).get("time", math.nan))
    return W, nit, history
