"""Logistic regression on the parameter server: a functional core and a scikit-learn estimator.

Stochastic solvers ("sgd", "adagrad", "ftrl") run one task per data partition: per clock a task
pulls the weights of the features its minibatch touches, computes the log-loss gradient with a
numba kernel, and pushes it; the shards apply the update rule. "lbfgs" is full-batch: for every
function evaluation the tasks compute their partition's loss and gradient and push them into
tables that the servers sum; the driver runs SciPy's L-BFGS-B on the result.

Several classes are fitted one-vs-rest, as columns of one weight table, in the same passes.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..model import PSModel
from ..state.optimizers import FTRL, SGD, AdaGrad
from ._data import (
    as_scipy,
    dask_partitions,
    data_report,
    encode_part,
    hash_columns,
    is_dask_collection,
    read_together,
    split_rows,
)
from ._logistic_kernels import decision, logistic_grad
from ._owlqn import owlqn

__all__ = ["LogisticRegression", "train"]

SOLVERS = ("sgd", "adagrad", "ftrl", "lbfgs")
DEFAULT_LEARNING_RATE = {"sgd": 0.5, "adagrad": 0.1, "ftrl": 0.3, "lbfgs": None}


def _stochastic_task(ps, item):
    """Epochs of minibatch steps over one partition; returns its summed loss per epoch."""
    (X, Y), cfg = item
    rng = np.random.default_rng(cfg["seed"])
    n, n_out, bias_key = X.shape[0], Y.shape[1], cfg["n_features"]
    batch = cfg["batch_size"]
    losses = []
    for epoch in range(1, cfg["max_iter"] + 1):
        order = rng.permutation(n)
        total = 0.0
        for start in range(0, n, batch):
            rows = np.sort(order[start:start + batch])
            Xb = X[rows]
            cols = np.unique(Xb.indices)
            keys = np.append(cols, bias_key)
            W = ps.pull("w", keys)
            grad = np.zeros((cols.shape[0] + 1, n_out))
            total += logistic_grad(Xb.indptr, np.searchsorted(cols, Xb.indices), Xb.data,
                                   Y[rows], W[:-1], W[-1], grad[:-1], grad[-1])
            grad /= rows.shape[0]
            grad[:-1] += cfg["l2"] * W[:-1]
            if not (np.isfinite(W).all() and np.isfinite(grad).all()):
                raise FloatingPointError(
                    f"epoch {epoch}: the weights or gradients are no longer finite (training "
                    f"diverged); try a smaller learning_rate (now {cfg['learning_rate']})")
            if not cfg["fit_intercept"]:
                grad[-1] = 0.0
            ps.push("w", keys, grad)
            ps.clock()
        losses.append(total)
    return losses


def _full_gradient_task(ps, item):
    """The partition's summed log-loss and gradient, pushed into the "grad" and "loss" tables."""
    X, Y = item
    W = ps.pull("w")
    grad = np.zeros_like(W)
    loss = logistic_grad(X.indptr, X.indices, X.data, Y, W[:-1], W[-1], grad[:-1], grad[-1])
    ps.push("grad", np.arange(W.shape[0]), grad)
    ps.push("loss", [0], [loss])


def train(model: PSModel, parts: list, *, n_features: int, n_outputs: int, solver: str = "ftrl",
          penalty: str = "l2", C: float = 1.0, fit_intercept: bool = True, max_iter: int = 10,
          batch_size: int = 256, learning_rate: float = 0.1, tol: float = 1e-6,
          consistency="bsp", staleness=None, random_state: int = 0,
          workers=None, n_rows: int | None = None,
          init: tuple | None = None) -> tuple[np.ndarray, list, int, tuple]:
    """Fit logistic regression on a PS model; returns the weights and the loss per epoch.

    Parameters
    ----------
    model : PSModel
        Gets the tables "w" (and "grad", "loss" for lbfgs).
    parts : list
        One ``(X csr (n_i, n_features) float64 with sorted indices, Y (n_i, n_outputs) in
        {0, 1})`` per task, or Dask futures of them (then give ``n_rows`` and ``workers``).
    n_features, n_outputs : int
    solver : {"sgd", "adagrad", "ftrl", "lbfgs"}
    penalty : {"l2", "l1"}
        "l1" with "ftrl" (its closed-form L1 step) or "lbfgs" (then OWL-QN).
    C : float
        Inverse regularisation strength, as in scikit-learn: the objective is
        ``C * sum(log-loss) + penalty(w)``, the intercept unpenalised.
    fit_intercept : bool
    max_iter : int
        Epochs (stochastic solvers) or L-BFGS iterations.
    batch_size : int
        Rows per clock (stochastic solvers).
    learning_rate : float
        Step of "sgd" and "adagrad"; ``alpha`` of "ftrl".
    tol : float
        Projected-gradient tolerance of L-BFGS-B.
    consistency, staleness
        See :meth:`PSModel.run` (stochastic solvers).
    random_state : int
    workers : list of str, optional
        Worker of each part.
    n_rows : int, optional
        Total rows; default: summed over ``parts``.
    init : (values, slots), optional
        Starting weights and update-rule state (a previous result's ``state``).

    Returns
    -------
    W : ndarray (n_features + 1, n_outputs)
        Weights; the last row is the intercept.
    history : list of dict
        Per epoch (or per L-BFGS evaluation): the objective ``loss``.
    n_iter : int
        Epochs run, or L-BFGS iterations.
    state : (values, slots)
        Final weights and update-rule state, to continue from (``init``).

    References
    ----------
    McMahan et al., KDD 2013 (FTRL-Proximal); Nocedal & Wright, Numerical Optimization, ch. 7
    (L-BFGS); scikit-learn ``LogisticRegression`` for the objective.
    """
    shape = (n_features + 1, n_outputs)
    lam = 1.0 / C
    if n_rows is None:
        n_rows = sum(p[0].shape[0] for p in parts)
    n_rows = max(1, n_rows)
    if solver == "lbfgs":
        return _train_lbfgs(model, parts, shape, C, n_rows, penalty, fit_intercept, max_iter,
                            tol, workers, None if init is None else init[0])
    if penalty == "l1" and solver not in ("ftrl", "lbfgs"):
        raise ValueError(f"penalty='l1' needs solver='ftrl' or 'lbfgs', got {solver!r}")
    steps = max(1, n_rows // batch_size)
    optimizer = {"sgd": lambda: SGD(learning_rate),
                 "adagrad": lambda: AdaGrad(learning_rate),
                 "ftrl": lambda: FTRL(alpha=learning_rate, beta=1.0,
                                      l1=lam / n_rows * steps if penalty == "l1" else 0.0,
                                      l2=0.0)}[solver]()
    table = model.add_table("w", shape, "float64", optimizer=optimizer)
    if init is not None:
        table.set_state(*init)
    cfg = dict(n_features=n_features, batch_size=batch_size, max_iter=max_iter,
               learning_rate=learning_rate,
               fit_intercept=fit_intercept, l2=lam / n_rows if penalty == "l2" else 0.0)
    items = [(p, dict(cfg, seed=random_state + i)) for i, p in enumerate(parts)]
    losses = model.run(_stochastic_task, items, consistency=consistency, staleness=staleness,
                       workers=workers)
    history = [dict(epoch=e + 1, loss=float(sum(task[e] for task in losses) / n_rows))
               for e in range(max_iter)]
    values, slots = table.state()
    return values, history, max_iter, (values, slots)


def _train_lbfgs(model, parts, shape, C, n_rows, penalty, fit_intercept, max_iter, tol,
                 workers, x0=None):
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
        return obj, g.ravel()

    x0 = np.zeros(int(np.prod(shape))) if x0 is None else np.ravel(x0).astype(np.float64)
    if penalty == "l1":  # OWL-QN; the intercept row is not penalised
        mask = np.ones(shape, bool)
        mask[-1] = False
        x, nit = owlqn(objective, x0, 1.0 / (C * n_rows), mask.ravel(), max_iter, tol)
        return x.reshape(shape), history, nit, (x.reshape(shape), {})
    res = scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                                  options=dict(maxiter=max_iter, gtol=tol, ftol=0.0,
                                               maxcor=20))
    return res.x.reshape(shape), history, int(res.nit), (res.x.reshape(shape), {})


class LogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression trained on a dask_ps parameter server.

    Parameters
    ----------
    solver : {"ftrl", "sgd", "adagrad", "lbfgs"}, default "ftrl"
        Server-side update rule of the stochastic solvers, or full-batch L-BFGS-B with
        gradients reduced by the servers.
    penalty : {"l2", "l1"}, default "l2"
        "l1" needs solver "ftrl" or "lbfgs" (which then runs OWL-QN, Andrew & Gao 2007).
    C : float, default 1.0
        Inverse regularisation strength (scikit-learn's convention).
    fit_intercept : bool, default True
    max_iter : int, default 10
        Epochs, or L-BFGS iterations (use 100 or more with "lbfgs").
    batch_size : int, default 256
        Rows per clock.
    learning_rate : float, optional
        Step of "sgd" and "adagrad"; ``alpha`` of "ftrl". Default: 0.5, 0.1 and 0.3
        respectively (tuned on a9a).
    tol : float, default 1e-6
        L-BFGS-B projected-gradient tolerance.
    consistency : {"bsp", "ssp", "asp"}, default "bsp"
    staleness : int, optional
        With ``consistency="ssp"``.
    n_shards : int, optional
        Default: one per worker (1 without a cluster).
    n_hashed_features : int, optional
        Hash the input's columns into this many buckets (feature hashing, for huge or
        unknown dimensions); ``coef_`` then has this many columns, indexed by bucket.
    random_state : int, optional
    warm_start : bool, default False
        Start from the previous fit's weights and update-rule state (same classes and
        features).
    client : distributed.Client or "local", optional
        Default: the current Dask client, else in-process.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    coef_ : ndarray (1, n_features) for two classes, else (n_classes, n_features), float64
    intercept_ : ndarray (1,) or (n_classes,)
    n_features_in_ : int
    history_ : list of dict
        Loss per epoch (or per L-BFGS function evaluation). After a fit on dask collections
        with a cluster, the last entry also reports the data: ``source_reads`` and
        ``source_bytes`` (blocks and bytes the readers of :mod:`dask_ps.io` read from their
        files during the fit), ``max_reads_per_block``, ``bytes_in_memory`` and
        ``bytes_on_disk`` (the partitions at the end, in worker memory and spilled by Dask),
        ``incoming_transfers`` and ``incoming_transfer_bytes`` (data moved between workers).
    n_iter_ : ndarray (1,)
        Epochs, or L-BFGS iterations, run.

    Notes
    -----
    More than two classes are fitted one-vs-rest (one column each, in the same passes) and
    ``predict_proba`` normalises their probabilities, as scikit-learn's one-vs-rest does.
    """

    def __init__(self, solver="ftrl", penalty="l2", C=1.0, fit_intercept=True, max_iter=10,
                 batch_size=256, learning_rate=None, tol=1e-6, consistency="bsp",
                 staleness=None, n_shards=None, n_hashed_features=None, random_state=None,
                 warm_start=False, client=None):
        self.solver = solver
        self.penalty = penalty
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.tol = tol
        self.consistency = consistency
        self.staleness = staleness
        self.n_shards = n_shards
        self.n_hashed_features = n_hashed_features
        self.random_state = random_state
        self.warm_start = warm_start
        self.client = client

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_params(self) -> None:
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {list(SOLVERS)}, got {self.solver!r}")
        if self.penalty not in ("l2", "l1"):
            raise ValueError(f"penalty must be 'l2' or 'l1', got {self.penalty!r}")
        if self.penalty == "l1" and self.solver not in ("ftrl", "lbfgs"):
            raise ValueError("penalty='l1' needs solver='ftrl' or 'lbfgs' (OWL-QN)")
        for name in ("C", "learning_rate", "tol"):
            value = getattr(self, name)
            if name == "learning_rate" and value is None:
                continue
            if not isinstance(value, numbers.Real) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.n_hashed_features is not None and (
                not isinstance(self.n_hashed_features, numbers.Integral)
                or not 1 <= self.n_hashed_features < 2**32):
            raise ValueError(f"n_hashed_features must be an integer in [1, 2**32), "
                             f"got {self.n_hashed_features!r}")
        for name in ("max_iter", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def fit(self, X, y):
        """Fit on ``X`` (n_samples, n_features) and labels ``y`` (n_samples,).

        ``X`` may be a NumPy array, a scipy.sparse matrix, a ``sparse.COO``, a dask array
        (chunks dense or CSR, as :func:`dask_ps.io.read_libsvm` gives) or a dask dataframe of
        numeric columns (then ``y`` a dask series or array). Dask inputs stay on the workers:
        each chunk trains where it was computed.

        Raises
        ------
        ValueError
            Bad parameters, a single class, non-finite input, or non-finite weights after
            training (with the advice to lower ``learning_rate``).
        """
        return self._fit(X, y, None, self.max_iter, self.warm_start)

    def partial_fit(self, X, y, classes=None):
        """One more epoch over ``X``, ``y`` from the current weights (stochastic solvers).

        Parameters
        ----------
        classes : array-like, optional
            All the classes, required on the first call if ``y`` may not show them all.

        Raises
        ------
        ValueError
            With solver "lbfgs", or classes that differ from the first call's.
        """
        if self.solver == "lbfgs":
            raise ValueError("partial_fit needs a stochastic solver ('ftrl', 'sgd', 'adagrad')")
        if classes is not None and hasattr(self, "classes_") and not np.array_equal(
                np.unique(classes), self.classes_):
            raise ValueError(f"classes {np.unique(classes).tolist()} differ from the first "
                             f"call's {self.classes_.tolist()}")
        return self._fit(X, y, classes, 1, True)

    def _fit(self, X, y, classes, epochs: int, warm: bool):
        self._check_params()
        first = not hasattr(self, "classes_")
        X = as_scipy(X)
        start = None
        if is_dask_collection(X):  # one read of the source for y (classes) and X (partitions)
            X, y, y_local, start = read_together(self.client, X, y)
        distributed = start is not None
        if distributed:
            self.n_features_in_ = int(X.shape[1])
        else:
            X, y_local = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                                       reset=not warm or first)
        check_classification_targets(y_local)
        labels = np.unique(y_local if classes is None else classes)
        if warm and not first:
            if np.setdiff1d(np.unique(y_local), self.classes_).size:
                raise ValueError(f"y has classes outside {self.classes_.tolist()}")
            labels = self.classes_
        if labels.shape[0] < 2:
            raise ValueError(f"LogisticRegression needs samples of at least 2 classes in the "
                             f"data, but the data contains only one class: {labels[0]!r}")
        init = getattr(self, "_ps_state_", None) if warm and not first else None
        # a continued fit draws new minibatch orders, not the first fit's again
        seed = (0 if self.random_state is None else int(self.random_state)) + (
            1000 * len(getattr(self, "history_", [])) if init is not None else 0)
        self.classes_ = labels
        n_out = 1 if self.classes_.shape[0] == 2 else self.classes_.shape[0]
        with PSModel(self.client, n_shards=self.n_shards) as model:
            workers = None
            if distributed and not model.is_local:
                parts, workers = dask_partitions(model.client, X, y, self.classes_, n_out,
                                                 self.n_hashed_features)
                X = y = None  # releases the persisted input: the encoded partitions replace it
            else:
                X, Y = encode_part(X, y_local, self.classes_, n_out, "X",
                                   self.n_hashed_features)
                parts = split_rows(X, Y, model.n_workers)
            W, history, n_iter, self._ps_state_ = train(
                model, parts, n_features=self.n_hashed_features or self.n_features_in_,
                n_outputs=n_out,
                solver=self.solver, penalty=self.penalty, C=self.C,
                fit_intercept=self.fit_intercept, max_iter=epochs,
                batch_size=self.batch_size,
                learning_rate=(DEFAULT_LEARNING_RATE[self.solver] if self.learning_rate is None
                               else self.learning_rate),
                tol=self.tol, consistency=self.consistency, staleness=self.staleness,
                random_state=seed, workers=workers, n_rows=y_local.shape[0], init=init)
            if start is not None and history:
                history[-1].update(data_report(model.client, parts, start))
        self.history_ = (getattr(self, "history_", []) if warm and not first else []) + history
        if not np.isfinite(W).all():
            raise ValueError("training diverged: the weights are not finite; try a smaller "
                             "learning_rate")
        self.n_iter_ = np.array([n_iter])
        self.coef_ = np.ascontiguousarray(W[:-1].T)
        self.intercept_ = W[-1].copy()
        return self

    def decision_function(self, X):
        """Margins ``X coef_.T + intercept_``: shape (n,) for two classes, else (n, n_classes).

        A dask ``X`` gives a dask array, computed chunk by chunk.
        """
        check_is_fitted(self)
        X = as_scipy(X)
        if is_dask_collection(X):
            if hasattr(X, "to_dask_array"):
                X = X.to_dask_array(lengths=True)
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                                 f"expecting {self.n_features_in_} features as input")
            X = X.rechunk({1: -1})
            # functions of arrays only: the estimator (and its client) stays here
            coef_t, b = np.ascontiguousarray(self.coef_.T), self.intercept_
            h = self.n_hashed_features
            if coef_t.shape[1] == 1:
                return X.map_blocks(_binary_margins, coef_t, b, h, drop_axis=1,
                                    dtype=np.float64, meta=np.empty((0,)))
            return X.map_blocks(_margins, coef_t, b, h, chunks=(X.chunks[0], (coef_t.shape[1],)),
                                dtype=np.float64, meta=np.empty((0, 0)))
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        out = _margins(X, np.ascontiguousarray(self.coef_.T), self.intercept_,
                       self.n_hashed_features)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes) (a dask array for dask ``X``)."""
        z = self.decision_function(X)
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # a sigmoid that never overflows
        if p.ndim == 1:
            return _stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Most probable class of each row, shape (n,) (a dask array for dask ``X``)."""
        z = self.decision_function(X)
        idx = (z > 0).astype(int) if z.ndim == 1 else z.argmax(axis=1)
        if is_dask_collection(idx):
            return idx.map_blocks(_take_classes, self.classes_, dtype=self.classes_.dtype)
        return self.classes_[idx]


def _margins(X, coef_t: np.ndarray, intercept: np.ndarray, n_buckets=None) -> np.ndarray:
    """``X coef_t + intercept``, shape (n, n_outputs), for a dense or sparse block (its columns
    hashed into ``n_buckets`` first, when given)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if n_buckets is not None:
        X = hash_columns(X, n_buckets)
    out = np.empty((X.shape[0], coef_t.shape[1]))
    decision(X.indptr, X.indices, X.data, coef_t, intercept, out)
    return out


def _binary_margins(X, coef_t, intercept, n_buckets=None) -> np.ndarray:
    return _margins(X, coef_t, intercept, n_buckets)[:, 0]


def _take_classes(idx: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return classes[idx]


def _stack(columns):
    if is_dask_collection(columns[0]):
        import dask.array as da

        return da.stack(columns, axis=1)
    return np.column_stack(columns)
