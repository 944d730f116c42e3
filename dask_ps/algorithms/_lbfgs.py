"""Full-batch logistic regression on the PS: L-BFGS-B (or OWL-QN with an L1 term) on the driver,
loss and gradient computed by the workers next to their partitions.

A function evaluation moves only what it must, in one round trip per worker. Each worker
holding partitions keeps an evaluator object next to them (:class:`_Evaluator`, a Dask actor
made by :class:`~dask_ps.partitions.resident.Residents`): per task (one per worker thread) it
indexes once the distinct columns the task's rows touch and tells the driver those keys once
per fit. Then, per evaluation, the driver sends each worker the change of the weights on its
tasks' keys since the last evaluation, and gets back each task's log-loss and gradient over
the same keys; the driver adds the gradients in task order (the same data and partitioning
give the same model bit for bit). Nothing else travels: no dense table of ``n_features`` rows
is written or read, so a model of 2^22 hashed features costs what the data touches, not 2^22
rows, per evaluation. No shard and no scheduler task takes part: a job of
:meth:`~dask_ps.PSModel.run` per evaluation (its tasks, the job's start and end on every
shard, a shard ``stats`` call for the progress record) cost 0.32 s of the 0.35 s of an a9a
evaluation under load 20 (cProfile of the driver), against a few milliseconds of kernel.

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

Where an a9a evaluation's time went once it was one round trip per worker (C=0.1, 2 workers
x 1 thread; perf_counter stamps in the driver and the evaluators, cProfile of the driver):
12.8 ms wall for 3.6 ms of kernel CPU in the slowest task. Most of the rest was the driver's
solver: L-BFGS-B's ``setulb`` on OpenBLAS's two threads, 3.8 ms of CPU per call (two calls per
evaluation) on 124 variables where one thread takes 9 us (:data:`SOLVER_BLAS_THREADS`); then
a dashboard event per evaluation, a scheduler round trip from the driver's threads that held
the GIL its main thread needed to send the next requests (~1.5 ms; now one per 0.1 s, see
:class:`~dask_ps.diagnostics.FitMonitor`); and the kernel's generic loop over outputs for one
output (2.4 -> 1.3 ms). Requests already left for both workers before either reply was read,
and the arrays travel out of band, without copies: neither showed in the profiles.
"""

from __future__ import annotations

import math
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from ..exceptions import DivergenceError, user_stacklevel
from ..kernels.sorting import unique_sorted
from ..model import PSModel
from ..partitions import Partitions
from ..partitions.resident import Residents
from ._logistic_data import KeyedWeights
from ._logistic_kernels import logistic_grad
from ._owlqn import owlqn
from ._stochastic import make_blocks

__all__ = ["lbfgs_fit", "train_lbfgs"]

#: A task's gradient travels as float32 while its rounding, scaled as the objective, stays
#: below ``tol * GRAD_ROUNDING``.
GRAD_ROUNDING = 1e-2
#: L-BFGS-B's options besides ``maxiter`` and ``gtol``: scikit-learn's memory (SciPy's
#: default ``maxcor=10``) and line search (``maxls=50``), so that from the same gradients both
#: take the same steps (benchmarks/lr_lbfgs.py compares them iteration for iteration); but
#: no ``ftol`` stop (scikit-learn's is 64 eps): ``tol`` alone, on the projected gradient,
#: decides convergence.
LBFGSB_OPTIONS = dict(ftol=0.0, maxls=50, maxcor=10)
#: BLAS threads of the driver while the solver runs. Its BLAS work is vector operations over
#: the active rows and ``maxcor`` x ``maxcor`` factorisations, where OpenBLAS's threads cost
#: more to wake than they save: one L-BFGS-B ``setulb`` call (about two per evaluation) took
#: 3.8 ms of CPU on 124 variables with OpenBLAS's default two threads here, 9 us with one
#: (scipy 1.17, OpenBLAS 0.3.30, load 7).
SOLVER_BLAS_THREADS = 1


def _task_block(parts, n_features: int):
    """The rows of a task's partitions as one block over their union of columns (with
    their sample weights when the partitions are ``(X, Y, sample_weight)``)."""
    def build():
        loaded = [p.load() for p in parts]
        X = sp.vstack([v[0] for v in loaded], format="csr") if len(loaded) > 1 \
            else loaded[0][0]
        Y = np.concatenate([v[1] for v in loaded]) if len(loaded) > 1 else loaded[0][1]
        sw = np.concatenate([v[2] for v in loaded]) if len(loaded[0]) > 2 else None
        return make_blocks(X, Y, 1, n_features, 0.0, 0, sw)[0]

    name = "lbfgs-columns-" + ",".join(str(p.index) for p in parts)
    return parts[0].cached(name, build, lambda b: sum(a.nbytes for a in b))


def pack_keys(keys: np.ndarray, n: int) -> np.ndarray:
    """Sorted distinct ``keys`` in ``[0, n)`` as sent once per fit: a bitmap of ``n`` bits
    (uint8, little bit order) when it is smaller than the keys, else the keys themselves
    (int64). On 10^6 CTR rows x 2^22 features a task touches ~10^6 columns: 0.5 MiB instead
    of 7.9 MB, which made the first evaluation move twice the bytes of the others."""
    keys = np.asarray(keys, np.int64)
    if -(-n // 8) >= keys.nbytes:
        return keys
    mask = np.zeros(n, bool)
    mask[keys] = True
    return np.packbits(mask, bitorder="little")


def unpack_keys(packed: np.ndarray, n: int) -> np.ndarray:
    """The sorted keys (int64) of :func:`pack_keys`'s output."""
    if packed.dtype != np.uint8:
        return packed
    return np.flatnonzero(np.unpackbits(packed, count=n, bitorder="little")).astype(np.int64)


class _Evaluator:
    """The worker side of the evaluations: one per worker holding partitions (see
    :class:`~dask_ps.partitions.resident.Residents`), for its tasks (lists of partitions).

    It keeps, per task, the float64 weights it evaluates at (on the task's keys) and the
    version of the last change added; :meth:`evaluate` adds the driver's change, computes the
    log-loss and its gradient over the task's rows (the tasks of a worker in threads: the
    kernel releases the GIL) and returns them per task.
    """

    def __init__(self, tasks: list, n_features: int) -> None:
        self.tasks, self.n_features = tasks, n_features
        self.held: list = [None] * len(tasks)
        self.pool = ThreadPoolExecutor(len(tasks)) if len(tasks) > 1 else None

    def _map(self, fn, *iterables) -> list:
        if self.pool is None:
            return list(map(fn, *iterables))
        return list(self.pool.map(fn, *iterables))

    def keys(self) -> list[np.ndarray]:
        """Per task: the sorted columns its rows touch, and the intercept (``n_features``),
        packed by :func:`pack_keys`."""
        return [pack_keys(b.keys, self.n_features + 1) for b in self._blocks()]

    def _blocks(self) -> list:
        # built (or found in the partitions' cache) here, on the actor's thread: loading a
        # partition needs the worker's thread state, which the pool's threads lack
        return [_task_block(parts, self.n_features) for parts in self.tasks]

    def evaluate(self, version: int, changes: list, whole: bool) -> list:
        """Per task ``(loss, gradient on its keys, max rounding of a float32 gradient, CPU
        seconds of its thread)``, or None for a task that lost the weights it held (the
        driver then sends them whole)."""
        return self._map(lambda t, b, c: self._one(t, b, c, version, whole),
                         range(len(self.tasks)), self._blocks(), changes)

    def _one(self, t: int, blk, change: np.ndarray, version: int, whole: bool):
        cpu = time.thread_time()
        out = self._gradient(t, blk, change, version, whole)
        return None if out is None else (*out, time.thread_time() - cpu)

    def _gradient(self, t: int, blk, change: np.ndarray, version: int, whole: bool):
        held = self.held[t]
        if whole:
            held = self.held[t] = [version, change.astype(np.float64)]
        elif held is None or held[0] != version - 1:
            if version != 0:
                self.held[t] = None
                return None
            held = self.held[t] = [-1, np.zeros(change.shape)]  # the first starts from 0
        if not whole:
            held[1] += change  # the driver adds the same float32 values to the same float64
            held[0] = version
        w = held[1]
        grad = np.zeros(w.shape)
        loss = logistic_grad(blk.indptr, blk.indices, blk.data, blk.Y, blk.sw, w[:-1], w[-1],
                             grad[:-1], grad[-1])
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

    The solver works on the *active* rows only (:attr:`active`: the rows some task's data
    touches, the intercept, and rows where the starting point is not zero). The others have
    a zero gradient from the data; starting at zero, their L2 (or L1) term keeps it zero, so
    every L-BFGS direction (a combination of gradients and of past steps) is zero there and
    they stay exactly zero: leaving them out changes no step, and the driver's vector work
    (the two-loop recursion, the line search, the objective's assembly) is proportional to
    what the data touches, not to ``n_features`` (2^22 rows for ~6 x 10^5 touched on
    2 x 10^5 CTR rows).

    ``point(x)`` (``x`` over the active rows) moves the tasks to (the float32-rounded change
    towards) ``x`` and returns ``(W, loss, grad)`` at the point they now hold (``W`` float64
    of ``shape``: active rows x outputs). ``x0``: the non-zero rows of the starting point,
    ``(keys, rows)`` (:func:`_nonzero_rows`).
    """

    def __init__(self, data: Partitions, shape: tuple, scale: float, tol: float,
                 x0: tuple | None = None) -> None:
        self.scale, self.tol = scale, tol
        self.n_features = shape[0] - 1
        self.version = -1
        self.wire = np.float32
        self.nbytes = 0  # bytes moved by the last evaluation
        self.cpu = 0.0  # CPU seconds of its slowest task (the evaluator's work, no transfer)
        self.residents = Residents(data, _Evaluator, self.n_features)
        packed = [k for ks in self.residents.call("keys", [()] * len(
            self.residents.workers)) for k in ks]
        self.setup_bytes = sum(k.nbytes for k in packed)
        keys = [unpack_keys(k, self.n_features + 1) for k in packed]
        nonzero = [] if x0 is None else [x0[0]]
        #: sorted rows of the full table the solver works on; the intercept's last
        self.active = unique_sorted(np.concatenate(keys + nonzero + [[self.n_features]]))
        self.keys = [np.searchsorted(self.active, k) for k in keys]  # into the active rows
        self.shape = (self.active.shape[0], shape[1])
        self.held = np.zeros(self.shape)  # what every task holds on its keys

    def close(self) -> None:
        self.residents.close()

    def _by_worker(self, values: list) -> list[list]:
        """A list over all tasks cut into per-worker lists."""
        out, i = [], 0
        for ts in self.residents.tasks:
            out.append(values[i:i + len(ts)])
            i += len(ts)
        return out

    def _evaluate(self, version: int, changes: list, whole: bool) -> list:
        args = [(version, c, whole) for c in self._by_worker(changes)]
        return [r for rs in self.residents.call("evaluate", args) for r in rs]

    def point(self, x: np.ndarray):
        W = x.reshape(self.shape)
        self.version += 1
        with np.errstate(over="ignore"):
            change = (W - self.held).astype(self.wire)
        if self.wire == np.float32 and not np.isfinite(change).all():
            self.wire = np.float64  # beyond float32's range
            change = W - self.held
        self.held += change  # exactly what the tasks add
        changes = [change[k] for k in self.keys]
        results = self._evaluate(self.version, changes, False)
        self.nbytes = sum(c.nbytes for c in changes)
        lost = [t for t, r in enumerate(results) if r is None]
        if lost:  # a task lost its weights: send every task's whole
            whole = [self.held[k] for k in self.keys]
            results = self._evaluate(self.version, whole, True)
            self.nbytes += sum(c.nbytes for c in whole)
        grad = np.zeros(self.shape)
        loss = 0.0
        err = 0.0
        self.cpu = 0.0
        for k, (task_loss, g, e, cpu) in zip(self.keys, results):
            grad[k] += g  # a task's keys are distinct
            loss += task_loss
            err = max(err, e)
            self.cpu = max(self.cpu, cpu)
            self.nbytes += g.nbytes + 24
        if self.wire == np.float32 and err * self.scale > self.tol * GRAD_ROUNDING:
            self.wire = np.float64  # float32 gradients are too coarse for this tol
        return self.held, loss, grad


def _nonzero_rows(x0, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, rows)`` of a starting point's rows that are not zero: of a dense ``x0``
    (``shape``) or of a keyed one (:class:`~._logistic_data.KeyedWeights`)."""
    if isinstance(x0, KeyedWeights):
        keys, rows = x0.keys, np.asarray(x0.W, np.float64)
    else:
        keys, rows = np.arange(shape[0]), np.asarray(x0, np.float64).reshape(shape)
    held = np.any(rows != 0, axis=1)
    return keys[held], rows[held]


def train_lbfgs(model: PSModel, data: Partitions, shape: tuple, C: float, penalty: str,
                fit_intercept: bool, max_iter: int, tol: float, x0=None,
                on_evaluation=None, keyed: bool = False,
                total_weight: float | None = None) -> tuple:
    """Minimise scikit-learn's objective divided by ``C n_rows``, ``n_rows`` the rows, or
    with sample weights (partitions ``(X, Y, sample_weight)``) ``total_weight``, their sum:
    ``(sum_i w_i loss_i + penalty / C) / total_weight``, the objective of the data with
    its rows repeated by integer weights, and the normalisation of scikit-learn's own
    (``sw_sum``); see
    :func:`dask_ps.algorithms.logistic.train`. Returns the weights and the iterations run:
    dense (n_features + 1, K), or with ``keyed`` the
    :class:`~._logistic_data.KeyedWeights` of the active rows (those the data touches, the
    intercept's last: every other row is zero), never an array over ``n_features``. ``x0``:
    a starting point, dense or keyed. ``on_evaluation(objective, nbytes, cpu, start, end)``
    is called after every function evaluation (a pass over the data), with the bytes of
    weights and gradients it moved (the first evaluation also counts the tasks' keys, sent
    once per fit), the CPU seconds of its slowest task (applying the change, the kernel,
    rounding the gradient) and its span (``time.perf_counter``): from the end of the
    evaluation before (the solver's steps between them count in the next), or the start of
    the first, to the end of this one (the objective assembled)."""
    n_rows = max(1, data.total_rows) if total_weight is None else total_weight
    scale = 1.0 / (n_rows if math.isinf(C) else C * n_rows)  # C = inf: no penalty
    x0 = None if x0 is None else _nonzero_rows(x0, shape)
    ev = _Evaluations(data, shape, scale, tol, x0)
    try:
        start = None
        if x0 is not None:
            start = np.zeros(ev.shape)
            start[np.searchsorted(ev.active, x0[0])] = x0[1]
        with threadpool_limits(SOLVER_BLAS_THREADS, user_api="blas"):
            x, nit = _minimize(ev, ev.shape, C, penalty, fit_intercept, max_iter, tol,
                               n_rows, start, on_evaluation)
    finally:
        ev.close()
    if keyed:
        return KeyedWeights(ev.active, x), nit
    W = np.zeros(shape)
    W[ev.active] = x
    return W, nit


def _minimize(ev, shape, C, penalty, fit_intercept, max_iter, tol, n_rows, x0,
              on_evaluation):
    """L-BFGS-B (OWL-QN) over the active rows (``shape``); returns ``(x (shape), nit)``."""
    scale = ev.scale
    first = [ev.setup_bytes]
    ended = [None]  # perf_counter at the end of the last evaluation (before any: its start)

    def objective(x):
        if ended[0] is None:
            ended[0] = time.perf_counter()
        if not np.isfinite(x).all() and on_evaluation is not None:
            # the caller names the evaluation and what to do
            on_evaluation(np.inf, math.nan, math.nan, math.nan, math.nan)
        W, loss, grad = ev.point(x)
        if math.isinf(C):  # no penalty: the mean log-loss (scale = 1 / n)
            obj, g = scale * loss, scale * grad
        else:  # scikit-learn's objective divided by C n: the same optimum, gradients of order 1
            obj, g = C * loss, C * grad
            if penalty == "l2":
                obj += 0.5 * float((W[:-1] ** 2).sum())
                g[:-1] += W[:-1]
            obj, g = scale * obj, scale * g
        if not fit_intercept:
            g[-1] = 0.0
        start, ended[0] = ended[0], time.perf_counter()
        if on_evaluation is not None:
            on_evaluation(obj, ev.nbytes + first.pop() if first else ev.nbytes, ev.cpu,
                          start, ended[0])
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
                                  options=dict(maxiter=max_iter, gtol=tol, **LBFGSB_OPTIONS))
    if res.status == 1:  # iteration (or evaluation) limit reached
        _not_converged("L-BFGS-B", max_iter, tol)
    return res.x.reshape(shape), int(res.nit)


def _not_converged(method: str, max_iter: int, tol: float) -> None:
    # scikit-learn's habit: a solver stopped by max_iter says so
    warnings.warn(f"{method} stopped at max_iter={max_iter} iterations before the gradient "
                  f"norm reached tol={tol}; increase max_iter", ConvergenceWarning,
                  stacklevel=user_stacklevel())  # the user's fit line, from any depth


def lbfgs_fit(model, data, shape, C, penalty, fit_intercept, max_iter, tol, init, loop,
              keyed: bool = False, total_weight: float | None = None):
    """:func:`train_lbfgs` with a progress monitor and a ``history`` record per evaluation
    (``epoch`` = ``evaluation``, ``loss`` the objective, ``time``, ``epoch_time``: seconds
    from the end of the evaluation before, or from the start of the first, ``bytes``,
    ``kernel_cpu_time``: CPU seconds of the slowest task, transfers excluded). An
    evaluation's ``time`` and ``epoch_time`` end at the same instant.

    Returns ``(W, n_iterations, history)``, ``W`` dense or (``keyed``) a
    :class:`~._logistic_data.KeyedWeights`.

    Raises
    ------
    DivergenceError
        The objective stopped being finite (the features want scaling, or C is too large).
    """
    from ..diagnostics.progress import EVENT_INTERVAL, FitMonitor

    history = []
    with FitMonitor(model, loop.name, None, progress=loop.progress, unit="evaluation",
                    event_interval=EVENT_INTERVAL) as monitor:
        def on_evaluation(obj, nbytes, cpu, start, end):
            e = len(history) + 1
            if not math.isfinite(obj):
                raise DivergenceError(loop.name, e, f"the objective is {obj}",
                                      "scale the features (e.g. scikit-learn's "
                                      "StandardScaler or MaxAbsScaler) or lower C")
            history.append(dict(epoch=e, evaluation=e, loss=obj, epoch_time=end - start,
                                bytes=nbytes, kernel_cpu_time=cpu))
            monitor.record(e, obj, nbytes, at=end)

        W, nit = train_lbfgs(model, data, shape, C, penalty, fit_intercept, max_iter, tol,
                             None if init is None else init.W, on_evaluation, keyed,
                             total_weight)
    for h in history:
        h.update(time=monitor.entries.get(h["epoch"], {}).get("time", math.nan))
    return W, nit, history
