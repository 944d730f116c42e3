"""Logistic regression on the parameter server: a functional core and a scikit-learn estimator.

Stochastic solvers ("sgd", "adagrad", "ftrl") run one job per epoch, one task per worker thread
over the partitions that worker holds; a clock covers a block of rows trained locally with one
round trip per shard (see :mod:`._stochastic`). "lbfgs" is full-batch: for every
function evaluation the tasks compute their partition's loss and gradient and push them into
tables that the servers sum; the driver runs SciPy's L-BFGS-B on the result.

Several classes are fitted one-vs-rest, as columns of one weight table, in the same passes.
"""

from __future__ import annotations

import numbers
import uuid
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..diagnostics.progress import FitMonitor
from ..driver import run_clocks
from ..model import PSModel
from ..state.optimizers import Average
from ._data import (
    as_scipy,
    dask_partitions,
    data_report,
    encode_part,
    group_parts,
    hash_columns,
    is_dask_collection,
    locate,
    part_refs,
    read_together,
    split_rows,
)
from ._lbfgs import train_lbfgs
from ._logistic_kernels import decision
from ._stochastic import Rule, epoch_task, forget_blocks

__all__ = ["LogisticRegression", "train"]

SOLVERS = ("sgd", "adagrad", "ftrl", "lbfgs")
# per-sample steps (batch_size=1), tuned on a9a and a generated CTR set
#: ``max_iter=None``: epochs of the stochastic solvers, iterations of L-BFGS (scikit-learn's).
DEFAULT_MAX_ITER = {"stochastic": 10, "lbfgs": 100}
DEFAULT_LEARNING_RATE = {"sgd": 0.005, "adagrad": 0.1, "ftrl": 0.1, "lbfgs": None}


class TrainState(NamedTuple):
    """Where a fit ended: its solver, weights ``W`` (n_features + 1, K) and the table's rows
    (weights and update-rule state, see :class:`~._stochastic.Rule`; ``W`` itself for
    "lbfgs")."""

    solver: str
    W: np.ndarray
    state: np.ndarray


def train(model: PSModel, parts: list, *, n_features: int, n_outputs: int, solver: str = "ftrl",
          penalty: str = "l2", C: float = 1.0, fit_intercept: bool = True, max_iter: int = 10,
          batch_size: int = 256, learning_rate: float = 0.1, tol: float = 1e-6,
          consistency="bsp", staleness=None, random_state: int = 0,
          workers=None, n_rows: int | None = None, clocks_per_epoch: int = 4,
          early_stopping: bool = False, validation_fraction: float = 0.1,
          n_iter_no_change: int = 5, callback=None, init: TrainState | None = None,
          checkpoint: str | None = None, checkpoint_every: int = 1, max_recoveries: int = 3,
          resume: bool = False, progress: bool | None = None
          ) -> tuple[np.ndarray, list, int, TrainState]:
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
        Rows per update step (stochastic solvers).
    learning_rate : float
        Step of "sgd" and "adagrad"; ``alpha`` of "ftrl".
    tol : float
        Projected-gradient tolerance of L-BFGS-B; for the stochastic solvers, the least
        improvement of the watched loss that counts (see ``n_iter_no_change``).
    consistency, staleness
        See :meth:`PSModel.run` (stochastic solvers).
    random_state : int
    workers : list of str, optional
        Worker of each part.
    n_rows : int, optional
        Total rows; default: summed over ``parts``.
    clocks_per_epoch : int, default 4
        Stochastic solvers: a task's rows are cut into this many blocks per epoch; per block
        it pulls the rows the block touches once, runs all its update steps on that local
        copy and pushes the change (one clock). More clocks: fresher weights across workers,
        more round trips.
    early_stopping : bool, default False
        Stochastic solvers: hold out ``validation_fraction`` of the rows (drawn at random in
        each block) and watch their log-loss instead of the training loss.
    validation_fraction : float, default 0.1
    n_iter_no_change : int, default 5
        Stop after this many epochs in a row whose watched loss is not below the best so far
        minus ``tol`` (scikit-learn's ``SGDClassifier`` rule).
    callback : callable, optional
        Called with each epoch's history record (stochastic solvers), on the driver.
    init : TrainState, optional
        Where to start (a previous result's ``state``). From another solver, only its
        weights carry over.
    checkpoint : str, optional
        URL of a checkpoint store (reachable from every worker), saved every
        ``checkpoint_every`` epochs (stochastic solvers). A lost worker or shard is then
        recovered automatically: see :func:`dask_ps.driver.run_clocks`.
    checkpoint_every : int, default 1
    max_recoveries : int, default 3
    resume : bool, default False
        Continue from the newest complete version of ``checkpoint`` when there is one.
    progress : bool, optional
        Show a progress bar; default: when interactive (a terminal or Jupyter).

    Returns
    -------
    W : ndarray (n_features + 1, n_outputs)
        Weights; the last row is the intercept.
    history : list of dict
        Per epoch: the mean progressive training log-loss ``loss`` (each row scored just
        before its step), ``validation_loss`` with early stopping, ``time`` (seconds since the
        fit started) and ``bytes`` pulled and pushed during it; per L-BFGS evaluation: the
        objective ``loss``, ``time`` and ``bytes``. Recoveries from lost workers appear as
        ``{"event": "recovery", …}`` entries where they happened.
    n_iter : int
        Epochs run, or L-BFGS iterations.
    state : TrainState
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
        if checkpoint is not None:
            raise ValueError("checkpoint needs a stochastic solver ('ftrl', 'sgd', 'adagrad')")
        with FitMonitor(model, "LogisticRegression(lbfgs)", None, progress=progress,
                        unit="evaluation") as monitor:
            W, history, nit = train_lbfgs(model, parts, shape, C, n_rows, penalty,
                                          fit_intercept, max_iter, tol, workers,
                                          None if init is None else init.W, monitor)
        monitor.annotate(history, "evaluation")
        return W, history, nit, TrainState("lbfgs", W, W)
    if penalty == "l1" and solver not in ("ftrl", "lbfgs"):
        raise ValueError(f"penalty='l1' needs solver='ftrl' or 'lbfgs', got {solver!r}")
    steps = max(1, n_rows // batch_size)
    hyper = {"sgd": [learning_rate], "adagrad": [learning_rate, 1e-10],
             "ftrl": [learning_rate, 1.0, lam / n_rows * steps if penalty == "l1" else 0.0,
                      0.0]}[solver]
    rule = Rule(solver, n_outputs, hyper)
    table = model.add_table("w", (shape[0], rule.ncols), "float64", optimizer=Average())
    if init is not None:
        start = init.state if init.solver == solver else rule.from_weights(init.W)
        table.push(np.arange(shape[0]), np.column_stack([start, np.ones(shape[0])]))
    fit = uuid.uuid4().hex
    cfg = dict(fit=fit, n_features=n_features, n_outputs=n_outputs, batch_size=batch_size,
               solver=solver, hyper=rule.hyper, clocks_per_epoch=clocks_per_epoch,
               validation_fraction=validation_fraction if early_stopping else 0.0,
               fit_intercept=fit_intercept, l2=lam / n_rows if penalty == "l2" else 0.0)
    groups, placed = group_parts(parts, workers,
                                 {} if model.is_local else model.client.nthreads())
    done: dict[int, dict] = {}  # epoch -> record, rewritten when a recovery reruns epochs

    def epochs(start: int, stop: int) -> list[dict]:
        """Epochs ``start + 1 .. stop``, one job each; fewer when the stopping rule fires."""
        out = []
        for epoch in range(start + 1, stop + 1):
            # keys, not futures: a task streams its partitions (see epoch_task)
            items = [(part_refs(g), dict(cfg, seed=random_state + i, epoch=epoch))
                     for i, g in enumerate(groups)]
            sums = np.array(model.run(epoch_task, items, consistency=consistency,
                                      staleness=staleness, workers=placed)).sum(axis=0)
            record = dict(epoch=epoch, loss=float(sums[0] / max(1.0, sums[1])))
            if early_stopping:
                record["validation_loss"] = float(sums[2] / max(1.0, sums[3]))
            monitor.epoch_done(epoch, record["loss"])
            done[epoch] = record
            out.append(record)
            if callback is not None:
                callback(record)
            # (after resuming from a checkpoint, the epochs run since)
            if _no_change([done[e] for e in sorted(done) if e <= epoch], early_stopping, tol,
                          n_iter_no_change):
                break
        return out

    def relocate():  # Dask recomputed the partitions of a lost worker elsewhere
        nonlocal groups, placed
        if workers is not None:
            groups, placed = group_parts(parts, locate(model.client, parts),
                                         model.client.nthreads())

    monitor = FitMonitor(model, f"LogisticRegression({solver})", max_iter, progress=progress)
    try:
        records, events = run_clocks(model, epochs, max_iter, checkpoint=checkpoint,
                                     checkpoint_every=checkpoint_every,
                                     max_recoveries=max_recoveries, on_recover=relocate,
                                     resume=resume, data_position=lambda c: {"epoch": c})
    finally:
        monitor.close()
        if model.is_local:
            forget_blocks(fit)
        else:
            model.client.run(forget_blocks, fit)
    history = monitor.annotate(list(records))
    for ev in reversed(events):
        history.insert(ev["failed_clock"], ev)
    state = _gather_state(table, rule.width)
    W = rule.weights(state)
    return W, history, len(records), TrainState(solver, W, state)


def _touched_state(keys, values, slots, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A shard's rows whose state is not all zero, and those state columns (not the count)."""
    rows = np.flatnonzero(values[:, :width].any(axis=1))
    return keys[rows], values[rows, :width]


def _gather_state(table, width: int) -> np.ndarray:
    """The state columns of every row of a dense table, as float64 (n_rows, width).

    Rows never touched are all zero, so only the others travel: with hashed features most
    rows of a large table are untouched after an epoch (and the count column stays behind).
    """
    state = np.zeros((table.shape[0], width))
    for keys, rows in table.map(_touched_state, width):
        state[keys] = rows
    return state


def _no_change(records: list[dict], early_stopping: bool, tol: float, patience: int) -> bool:
    """scikit-learn's rule: the last ``patience`` epochs each failed to beat the best loss
    before them by ``tol`` (the validation loss with early stopping, else the training loss)."""
    watched = [r["validation_loss" if early_stopping else "loss"] for r in records]
    best, stale = np.inf, 0
    for v in watched:
        stale = stale + 1 if v > best - tol else 0
        best = min(best, v)
    return stale >= patience


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
    max_iter : int, optional
        Epochs at most, or L-BFGS iterations. Default: 10 epochs for the stochastic solvers,
        100 iterations for "lbfgs" (scikit-learn's default), which warns
        (``ConvergenceWarning``) when it stops there before meeting ``tol``.
    batch_size : int, default 1
        Rows per update step of the stochastic solvers (1: per-sample steps, as in McMahan
        et al.'s FTRL).
    learning_rate : float, optional
        Step of "sgd" and "adagrad"; ``alpha`` of "ftrl". Default: 0.005, 0.1 and 0.1
        respectively (tuned with ``batch_size=1`` on a9a and a generated CTR set).
    tol : float, default 1e-6
        L-BFGS-B projected-gradient tolerance; for the stochastic solvers, the least
        improvement of the watched loss (training, or validation with ``early_stopping``)
        that resets ``n_iter_no_change``.
    early_stopping : bool, default False
        Stochastic solvers: hold out ``validation_fraction`` of the rows and stop when their
        log-loss stops improving.
    validation_fraction : float, default 0.1
        In (0, 1); rows drawn at random within each partition.
    n_iter_no_change : int, default 5
        Epochs without an improvement of at least ``tol`` before stopping.
    clocks_per_epoch : int, default 4
        Stochastic solvers: clocks (pull, local steps, push) per epoch and task. Each clock
        costs one round trip per shard; more clocks mix the workers' updates more often.
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
    checkpoint : str, optional
        URL of a zarr checkpoint store reachable from every worker: the model is saved
        every ``checkpoint_every`` epochs and a fit that loses a worker or a shard recovers
        by itself from the newest checkpoint (stochastic solvers).
    checkpoint_every : int, default 1
        Epochs between checkpoints.
    max_recoveries : int, default 3
        Recoveries allowed in one fit before it fails with
        :class:`~dask_ps.exceptions.RecoveryError`.
    progress : bool, optional
        Show a progress bar of the epochs (terminal or Jupyter). Default: when interactive.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    coef_ : ndarray (1, n_features) for two classes, else (n_classes, n_features), float64
    intercept_ : ndarray (1,) or (n_classes,)
    n_features_in_ : int
    history_ : list of dict
        Per epoch: mean progressive training log-loss ``loss`` (each row scored before its
        own step), ``validation_loss`` with ``early_stopping``, ``time`` (seconds since the
        fit started) and ``bytes`` pulled and pushed; per L-BFGS function evaluation: the
        objective ``loss``, ``time`` and ``bytes`` (see :func:`dask_ps.plot_history`). A
        ``{"event": "recovery", "lost_shards", "checkpoint", "clocks_lost", …}`` entry marks
        each recovery.
        After a fit on dask collections with a cluster, the last entry also reports the
        data: ``source_reads`` and ``source_bytes`` (blocks and bytes the readers of
        :mod:`dask_ps.io` read from their files during the fit), ``max_reads_per_block``,
        ``bytes_in_memory`` and ``bytes_on_disk`` (the partitions at the end, in worker memory
        and spilled by Dask), ``incoming_transfers`` and ``incoming_transfer_bytes`` (data
        moved between workers).
    n_iter_ : ndarray (1,)
        Epochs, or L-BFGS iterations, run.

    Notes
    -----
    More than two classes are fitted one-vs-rest (one column each, in the same passes) and
    ``predict_proba`` normalises their probabilities, as scikit-learn's one-vs-rest does.
    """

    def __init__(self, solver="ftrl", penalty="l2", C=1.0, fit_intercept=True, max_iter=None,
                 batch_size=1, learning_rate=None, tol=1e-6, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=5, clocks_per_epoch=4,
                 consistency="bsp", staleness=None, n_shards=None, n_hashed_features=None,
                 random_state=None, warm_start=False, client=None, checkpoint=None,
                 checkpoint_every=1, max_recoveries=3, progress=None):
        self.solver = solver
        self.penalty = penalty
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.clocks_per_epoch = clocks_per_epoch
        self.consistency = consistency
        self.staleness = staleness
        self.n_shards = n_shards
        self.n_hashed_features = n_hashed_features
        self.random_state = random_state
        self.warm_start = warm_start
        self.client = client
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.max_recoveries = max_recoveries
        self.progress = progress

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
        if not (isinstance(self.validation_fraction, numbers.Real)
                and 0 < self.validation_fraction < 1):
            raise ValueError(f"validation_fraction must be in (0, 1), "
                             f"got {self.validation_fraction!r}")
        for name in ("max_iter", "batch_size", "n_iter_no_change", "clocks_per_epoch"):
            value = getattr(self, name)
            if name == "max_iter" and value is None:
                continue
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
        max_iter = self.max_iter
        if max_iter is None:
            max_iter = DEFAULT_MAX_ITER["lbfgs" if self.solver == "lbfgs" else "stochastic"]
        return self._fit(X, y, None, max_iter, self.warm_start)

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
        if y_local.shape[0] == 0:  # as scikit-learn's check_array says for numpy input
            raise ValueError(f"Found array with 0 sample(s) (shape={tuple(X.shape)}) while a "
                             f"minimum of 1 is required by {type(self).__name__}.")
        check_classification_targets(y_local)
        labels = np.unique(y_local if classes is None else classes)
        if warm and not first:
            if np.setdiff1d(np.unique(y_local), self.classes_).size:
                raise ValueError(f"y has classes outside {self.classes_.tolist()}")
            labels = self.classes_
        if labels.shape[0] < 2:
            raise ValueError(f"LogisticRegression needs samples of at least 2 classes in the "
                             f"data, but the data contains only one class: {labels.tolist()[0]!r}")
        init = getattr(self, "_ps_state_", None) if warm and not first else None
        # a continued fit draws new minibatch orders, not the first fit's again
        seed = (0 if self.random_state is None else int(self.random_state)) + (
            1000 * len(getattr(self, "history_", [])) if init is not None else 0)
        self.classes_ = labels
        n_out = 1 if self.classes_.shape[0] == 2 else self.classes_.shape[0]
        with PSModel(self.client, n_shards=self.n_shards) as model:
            workers = None
            if distributed and not model.is_local:
                parts = dask_partitions(model.client, X, y, self.classes_, n_out,
                                        self.n_hashed_features)
                # releases the persisted input, each chunk once encoded: the encoded
                # partitions replace it (both at once would double the data)
                X = y = None
                workers = locate(model.client, parts)
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
                early_stopping=self.early_stopping and epochs > 1,
                validation_fraction=self.validation_fraction,
                n_iter_no_change=self.n_iter_no_change, clocks_per_epoch=self.clocks_per_epoch,
                random_state=seed, workers=workers, n_rows=y_local.shape[0], init=init,
                checkpoint=self.checkpoint, checkpoint_every=self.checkpoint_every,
                max_recoveries=self.max_recoveries, progress=self.progress)
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
