"""Logistic regression on the parameter server: a functional core and a scikit-learn estimator.

Stochastic solvers ("ftrl", "adagrad", "sgd") run one job per epoch over the data partitions,
each step where its partition lives, a clock per block of rows (see :mod:`._stochastic` for
the two designs, local steps and server-side rules). "lbfgs" is full-batch: per function
evaluation the driver sends each worker's evaluator (next to its partitions) the weight change
on the features its rows touch, gets back their loss and gradient over the same features,
sums them and runs SciPy's L-BFGS-B (OWL-QN with ``penalty="l1"``) on the result (see
:mod:`._lbfgs`).
Several classes are fitted one-vs-rest, as columns of one weight table, in the same passes.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..exceptions import DataError
from ..model import PSModel
from ..partitions import Partitions
from ..partitions.inputs import is_dask
from . import _logistic_data as D
from ._base import (
    COMMON_CONSTRAINTS,
    Interval,
    PSEstimator,
    StrOptions,
    check_numeric_columns,
    fit_identity,
    history_doc,
    validate_data,
)
from ._lbfgs import lbfgs_fit
from ._loaded import check_linear
from ._logistic_params import check_params, check_warm_start, stochastic_only
from ._stochastic import check_held_out, divergence_advice
from ._stochastic_fit import SOLVERS, stochastic_fit
from ._weights import check_sample_weight, total_weight
from .epoch_loop import EpochLoop

__all__ = ["LogisticRegression", "TrainState", "train"]

#: ``max_iter=None``: epochs of the stochastic solvers, iterations of L-BFGS (scikit-learn's).
DEFAULT_MAX_ITER = {"stochastic": 10, "lbfgs": 100}
# per-sample steps (batch_size=1), tuned on a9a and a generated CTR set
DEFAULT_LEARNING_RATE = {"sgd": 0.005, "adagrad": 0.1, "ftrl": 0.1, "lbfgs": None}


class TrainState(NamedTuple):
    """Where a fit ended: its solver, the weights ``W`` (n_features + 1, K) and the update
    rule's state rows (m, width) in the worker step's layout (:class:`~._stochastic.Rule`)
    whichever step ran, with the server step's slots (``W`` itself for "lbfgs").
    A wide (or keyed "lbfgs") model's ``W`` is a :class:`~._logistic_data.KeyedWeights` and
    ``state`` holds the rows of its keys, in the same order."""

    solver: str
    W: np.ndarray | D.KeyedWeights
    state: np.ndarray


def train(model: PSModel, data: Partitions, *, n_features: int, n_outputs: int,
          solver: str = "ftrl", step_on: str = "worker", penalty: str | None = "l2",
          C: float = 1.0, fit_intercept: bool = True, max_iter: int = 10, batch_size: int = 1,
          learning_rate: float = 0.1, tol: float = 1e-6, consistency="bsp", staleness=None,
          random_state: int = 0, clocks_per_epoch: int = 4, early_stopping: bool = False,
          n_iter_no_change: int = 5, validation_fraction: float = 0.1, init=None,
          loop: EpochLoop | None = None, evaluate=None, table_dtype: str = "float64",
          collect: bool = True, total_weight: float | None = None) -> tuple:
    """Fit logistic regression on a PS model; the functional core of
    :class:`LogisticRegression` (see it for the parameters).

    ``data`` holds encoded ``(X csr, Y (n, n_outputs))`` partitions, or ``(X, Y,
    sample_weight)`` ones (:func:`~._logistic_data.encode_part`) with ``total_weight`` the
    weights' sum, which then stands for the rows ``n`` in the objective's normalisation
    (see :class:`LogisticRegression`'s ``fit``); ``init`` a previous result's state; ``loop`` the
    :class:`~.epoch_loop.EpochLoop` (checkpoints, progress, callbacks); ``evaluate(epoch)`` scores
    an eval set; ``table_dtype`` the dtype of the weight table. ``collect=False`` leaves the
    weights on the shards (table "w" of ``model``, e.g. for :meth:`~dask_ps.PSModel.save` or
    pulls of the keys a test set touches) instead of gathering them to the driver: a model of
    10^8 keys and more need not fit in the driver's memory; ``W`` and ``state`` are then None.

    A wide model (``n_features >=`` :data:`~._logistic_data.WIDE_FEATURES`, any column key
    below 2**63 - 1) of a stochastic solver (:func:`~._stochastic_fit.stochastic_fit`) keeps
    its rows in a hashed table, memory per key touched, as does a narrower one whose dense
    table would exceed :data:`~._stochastic_fit.DENSE_TABLE_BYTES` (the same model either
    way). "lbfgs" works on the rows the data touches, whatever the width. Every solver
    returns the rows the fit touched, by key, from :data:`~._logistic_data.KEYED_FEATURES`
    columns (no array over ``n_features`` in the driver).

    Returns
    -------
    W : ndarray (n_features + 1, n_outputs) or KeyedWeights
        Weights; the last row is the intercept. From
        :data:`~._logistic_data.KEYED_FEATURES` columns: the weights of the keys touched
        (:class:`~._logistic_data.KeyedWeights`).
    history : list of dict
    n_iter : int
        Epochs run, or L-BFGS iterations.
    state : TrainState
        Where to continue from (``init``).

    References
    ----------
    McMahan et al., KDD 2013 (FTRL-Proximal); Duchi et al., JMLR 2011 (AdaGrad); Li et al.,
    OSDI 2014 (the parameter server); Nocedal & Wright, Numerical Optimization, ch. 7
    (L-BFGS); Andrew & Gao, ICML 2007 (OWL-QN).
    """
    shape = (n_features + 1, n_outputs)
    if penalty is None or math.isinf(C):  # no regularisation, either way (scikit-learn's)
        penalty, C = None, math.inf
    name = f"LogisticRegression({solver})"
    if loop is None:
        loop = EpochLoop(model, name, max_iter)
    loop.baseline = math.log(2.0) * n_outputs  # the all-zero model's loss per row
    n_rows = max(1, data.total_rows)
    weight = n_rows if total_weight is None else total_weight  # the rows the loss counts
    if solver == "lbfgs":
        loop.unit = "evaluation"
        W, nit, history = lbfgs_fit(model, data, shape, C, penalty, fit_intercept, max_iter,
                                    tol, init, loop, n_features >= D.KEYED_FEATURES,
                                    total_weight)
        state = W.W if isinstance(W, D.KeyedWeights) else W
        return W, history, nit, TrainState("lbfgs", W, state)
    W, history, n_iter, state = stochastic_fit(
        model, data, loop, name=name, shape=shape, n_rows=n_rows, weight=weight,
        solver=solver, step_on=step_on, penalty=penalty, C=C, fit_intercept=fit_intercept,
        batch_size=batch_size, learning_rate=learning_rate, tol=tol, consistency=consistency,
        staleness=staleness, random_state=random_state, clocks_per_epoch=clocks_per_epoch,
        early_stopping=early_stopping, n_iter_no_change=n_iter_no_change,
        validation_fraction=validation_fraction, init=init, evaluate=evaluate,
        table_dtype=table_dtype, collect=collect)
    return W, history, n_iter, None if W is None else TrainState(solver, W, state)


def _keyed_from_dense(coef: np.ndarray, intercept: np.ndarray) -> D.KeyedWeights:
    """The :class:`~._logistic_data.KeyedWeights` of a dense ``coef_`` (K, n_features): its
    non-zero columns' weights (the others contribute nothing to a margin)."""
    return D.KeyedWeights.from_coef(sp.csr_matrix(coef), intercept)


@history_doc
class LogisticRegression(ClassifierMixin, PSEstimator):
    """Logistic regression trained on a dask_ps parameter server.

    Parameters
    ----------
    solver : {"ftrl", "adagrad", "sgd", "lbfgs"}, default "ftrl"
        FTRL-Proximal, AdaGrad or SGD steps (stochastic), or full-batch L-BFGS-B with
        gradients computed next to the data and summed by the driver (OWL-QN with
        ``penalty="l1"``).
    step_on : {"worker", "server"}, default "worker"
        Stochastic solvers: where the update rule runs. "worker": each task runs the rule's
        per-sample steps on a local copy of the rows a block touches and the shards average
        the changes (fewer round trips; the default, measured faster to the same AUC on a9a
        and a CTR set). "server": tasks push minibatch gradients (``batch_size`` rows per
        clock) and the shards apply the rule, as in Li et al. (OSDI 2014).
    penalty : {"l2", "l1"} or None, default "l2"
        "l1" needs "ftrl" or "lbfgs". None: no regularisation (``C`` unused), as
        ``C=np.inf``.
    C : float, default 1.0
        Inverse regularisation strength (scikit-learn's convention), in (0, inf];
        ``np.inf``: no regularisation (scikit-learn's way of asking for none).
    fit_intercept : bool, default True
    max_iter : int, optional
        Epochs at most, or L-BFGS iterations. Default: 10 epochs, or 100 iterations for
        "lbfgs" (which warns with ``ConvergenceWarning`` when it stops there before ``tol``).
    batch_size : int, optional
        Rows per update step. Default 1 (per-sample steps, as in McMahan et al.), 256 with
        ``step_on="server"``.
    learning_rate : float, optional
        Step of "sgd" and "adagrad"; ``alpha`` of "ftrl". Default 0.005, 0.1 and 0.1.
    tol : float, default 1e-6
        L-BFGS-B projected-gradient tolerance; for stochastic solvers, the least improvement
        of the watched loss that resets ``n_iter_no_change``.
    early_stopping : bool, default False
        Hold out ``validation_fraction`` of the rows and stop when their loss stalls.
    validation_fraction : float, default 0.1
    n_iter_no_change : int, default 5
    clocks_per_epoch : int, default 4
        "worker" steps: clocks (pull, local steps, push) per epoch and task.
    consistency : {"bsp", "ssp", "asp"}, default "bsp"
    staleness : int, optional
        With ``consistency="ssp"``; default 1.
    n_shards : int, optional
        Default: one per worker (1 without a cluster).
    n_hashed_features : int, optional
        Hash the input's columns into this many buckets (below 2**32); ``coef_`` is then
        indexed by bucket. Without it, input of 2**32 columns or more (up to 2**63 - 1: the
        column index is the 64-bit key, e.g. a hashed feature id) makes a *wide* model: its
        weights live in hashed PS tables holding only the keys training touches (stochastic
        solvers only; see ``coef_``).
    table_dtype : {"float32", "float64"}, optional
        Dtype of the PS table of weights and update-rule state (training computes in
        float64 either way). Default: "float64", "float32" for a wide model (half the
        memory per key: 8-byte key plus 4 bytes per column, FTRL's ``z``, ``n`` and a count).
    random_state : int, np.random.RandomState or None, optional
        Default: None, seed 0.
    warm_start : bool, default False
        Start from the previous fit's weights and update-rule state (``partial_fit`` always
        does): the same number of features and ``n_hashed_features`` as that fit, else a
        ValueError before training.
    client : distributed.Client or "local", optional
        Default: the current Dask client, else in-process.
    shard_resources : str, optional
        Place the shards only on workers offering this Dask resource (e.g. "ps" for
        dedicated parameter-server workers that are never retired; see the README's HPC
        section). Default: on every worker.
    checkpoint : str, "auto" or None, default "auto"
        URL of a zarr checkpoint store reachable from every worker, saved every
        ``checkpoint_every`` epochs; a fit that loses a worker or shard recovers from it.
        "auto": a snapshot after every 60 s of training in a temporary folder, deleted
        after the fit, when every worker runs on this machine — recovery at the cost of one
        save per minute (a loss before the first snapshot starts the fit again; a fit
        shorter than a minute writes nothing); None: no recovery. "lbfgs" writes none and
        resumes from none (its state is the driver's): a URL or ``resume`` given with it
        warns (UserWarning).
    checkpoint_every : int, default 1
    max_recoveries : int, default 3
    resume : bool, default False
        Continue from the newest complete version of ``checkpoint`` if there is one; a
        checkpoint of another fit (another feature count, classes, solver, fit_intercept or
        hashing) is refused with an :class:`~dask_ps.exceptions.OptionError` before
        anything is restored. Needs a checkpoint URL (None or "auto": ValueError).
    progress : bool, optional
        Progress bar (terminal or Jupyter); default when interactive.
    callbacks : list of callable, optional
        ``cb(record) -> bool`` after every epoch (see ``history_``); True stops the fit.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    coef_ : ndarray (1, n_features) for two classes, else (n_classes, n_features), float64
        From :data:`~._logistic_data.KEYED_FEATURES` (2**20) columns (after hashing), a
        ``scipy.sparse.csr_matrix`` of that shape, float64, with sorted column indices
        (int64 from 2**31 columns; int32 below, as scipy makes them): the non-zero weights
        of the keys training touched, as a
        :class:`~dask_ps.FactorizationMachineClassifier`'s. The fit and the predictions of
        such a model hold the weights of the keys the data touched, never an array over the
        width (8 GiB at 2**30 columns).
    intercept_ : ndarray (1,) or (n_classes,)
    n_features_in_ : int
    n_iter_ : ndarray (1,)
        Epochs, or L-BFGS iterations, run.
    history_ : list of dict
        See :func:`~dask_ps.algorithms._base.history_fields`; ``loss`` is the mean
        progressive log-loss (each row scored before its own step; weighted by
        ``sample_weight``), or the L-BFGS objective; ``eval_log_loss``,
        ``eval_accuracy`` (and ``eval_auc`` for two classes) with ``eval_set``.

    Notes
    -----
    More than two classes are fitted one-vs-rest and ``predict_proba`` normalises their
    sigmoids in log space. Bit-for-bit reproducible for the same data, partitioning and
    ``random_state`` under BSP. Across partitionings "lbfgs" sums the gradients in another
    order and agrees to its ``tol``: with "l2" a fit stops once each coordinate of the
    projected gradient of scikit-learn's objective divided by ``C n`` is below ``tol``, so
    two fits' ``(coef_, intercept_)`` differ by at most ``4 sqrt(n_features + 1) tol C n /
    mu`` in norm (``mu``: the smallest Hessian eigenvalue of that objective). Measured: 5e-6
    against a bound of 1.5e-4 for 1 and 4 partitions of 2000 rows, 20 features, ``C=10``,
    ``tol=1e-8``.
    """

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "solver": [StrOptions(set(SOLVERS))], "step_on": [StrOptions({"worker", "server"})],
        "penalty": [StrOptions({"l2", "l1"}), None],
        "C": [Interval(numbers.Real, 0, None, closed="right")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left")],
        "clocks_per_epoch": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_hashed_features": [Interval(numbers.Integral, 1, 2**32, closed="left"), None],
        "table_dtype": [StrOptions({"float32", "float64"}), None],
        "warm_start": ["boolean"],
    }

    def __init__(self, *, solver="ftrl", step_on="worker", penalty="l2", C=1.0,
                 fit_intercept=True, max_iter=None, batch_size=None, learning_rate=None,
                 tol=1e-6, early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 clocks_per_epoch=4, consistency="bsp", staleness=None, n_shards=None,
                 n_hashed_features=None, table_dtype=None, random_state=None, warm_start=False,
                 client=None, shard_resources=None, checkpoint="auto", checkpoint_every=1,
                 max_recoveries=3, resume=False, progress=None, callbacks=None):
        self.solver, self.step_on, self.penalty, self.C = solver, step_on, penalty, C
        self.fit_intercept, self.max_iter, self.batch_size = fit_intercept, max_iter, batch_size
        self.learning_rate, self.tol, self.early_stopping = learning_rate, tol, early_stopping
        self.validation_fraction, self.n_iter_no_change = validation_fraction, n_iter_no_change
        self.clocks_per_epoch, self.consistency, self.staleness = (clocks_per_epoch,
                                                                    consistency, staleness)
        self.n_shards, self.n_hashed_features = n_shards, n_hashed_features
        self.table_dtype = table_dtype
        self.random_state, self.warm_start, self.client = random_state, warm_start, client
        self.checkpoint, self.checkpoint_every = checkpoint, checkpoint_every
        self.max_recoveries, self.resume = max_recoveries, resume
        self.progress, self.callbacks = progress, callbacks
        self.shard_resources = shard_resources

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_params(self) -> None:
        check_params(self)

    def fit(self, X, y, sample_weight=None, eval_set=None):
        """Fit on ``X`` (n_samples, n_features) and labels ``y`` (n_samples,).

        ``X``: NumPy, scipy.sparse, ``sparse.COO``, a dask array (dense or CSR chunks, as
        :func:`dask_ps.io.read_libsvm` gives) or a dask dataframe (``y`` a dask series or
        array). In-memory input is scattered to the workers once; dask input is read once
        and trained where its partitions are.

        Parameters
        ----------
        sample_weight : array-like (n_samples,), optional
            Non-negative weights, float64, partitioned with ``X`` and ``y`` (placed and
            cached with them). For dask ``X`` a dask array (cut to ``X``'s row chunks, as
            ``y``) or, for a dask dataframe, a dask series of its partitions; a column
            as it (:func:`~._weights.check_sample_weight`, every estimator's). The loss is
            scikit-learn's ``sum_i w_i loss_i`` plus the unweighted penalty ``|coef|/C``
            (L1) or ``|coef|^2 / 2C``; the normalisation by rows (``n`` above) becomes the
            total weight ``sum_i w_i``, as scikit-learn's (``sw_sum``): integer weights fit
            as the rows repeated ("lbfgs": the same objective), zero weights as the rows
            dropped. Stochastic solvers scale each row's step by its weight relative to the
            mean weight (see :mod:`._stochastic`): repeated rows and weights agree in
            expectation, not step for step. ``history_``'s losses are weighted means. None:
            every row once, bit for bit as before weights existed.
        eval_set : list of (X, y), optional
            Scored after every epoch (``history_``'s ``eval_*``), partitioned once per fit.
            Any input ``X`` may be, refused alike: on a cluster a dask array of unknown
            chunk sizes (call ``compute_chunk_sizes()``, or give the dask dataframe), and
            an ``X`` of no rows, each naming ``eval_set[i]``.

        Raises
        ------
        ValueError
            Bad parameters, a single class, labels that are not classes (continuous, such
            as 0.7: a DataError naming one), infinite features, a label outside the classes,
            a ``warm_start`` fit on another number of features or another
            ``n_hashed_features``, (wide ``X``) a column key outside [0, n_features) or
            ``solver="lbfgs"``, or a ``sample_weight`` of another length, of more than
            one column, negative, NaN or infinite (naming the row), all zero, or not
            partitioned as a dask dataframe ``X`` (:func:`~._weights.check_sample_weight`);
            with ``early_stopping`` and ``max_iter > 1``, no row held out, or held-out rows
            that all weigh zero (:func:`~._stochastic.check_held_out`, before any epoch).
        DivergenceError
            Training diverged (the loss exploded or the weights stopped being finite).
        """
        return self._fit(X, y, None, self.max_iter, self.warm_start, eval_set,
                         sample_weight)

    @stochastic_only  # hasattr False for "lbfgs": scikit-learn's way, with a clearer error
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One more epoch over ``X``, ``y`` from the current weights (stochastic solvers:
        with ``solver="lbfgs"`` there is no such method, an AttributeError);
        ``sample_weight`` as in :meth:`fit`, the step scale relative to this call's mean
        weight.

        Parameters
        ----------
        X, y, sample_weight
            As in :meth:`fit`.
        classes : array-like, optional
            Every class ``y`` can hold in this and later calls: needed on the first call
            (before the model is fitted), as scikit-learn's ``SGDClassifier.partial_fit``
            needs it; later, if given, the same classes.

        Raises
        ------
        ValueError
            With ``resume=True``; ``classes`` left out on the first call ("classes must be
            passed on the first call to partial_fit.", scikit-learn's words), classes that
            differ from the first call's, labels of ``y`` outside ``classes``
            (scikit-learn's rule: ``classes`` lists them all) or the fitted ``classes_``,
            another number of features or ``n_hashed_features``, or a bad
            ``sample_weight`` (as :meth:`fit`).
        """
        self._refuse_resume()
        if classes is None and not hasattr(self, "classes_"):  # scikit-learn's
            # _check_partial_fit_first_call would set classes_ before the fit (which reads
            # it as a warm start, and a failed fit would keep it): its check and words only
            raise ValueError(f"classes must be passed on the first call to partial_fit. "
                             f"({type(self).__name__}: every class y can hold, e.g. "
                             f"partial_fit(X, y, classes=[0, 1]))")
        if classes is not None and hasattr(self, "classes_") and not np.array_equal(
                np.unique(classes), self.classes_):
            raise ValueError(f"classes {np.unique(classes).tolist()} differ from the first "
                             f"call's {self.classes_.tolist()}")
        return self._fit(X, y, classes, 1, True, None, sample_weight)

    def _fit(self, X, y, classes, epochs, warm: bool, eval_set, sample_weight=None):
        self._validate()
        warm = warm and hasattr(self, "classes_")
        epochs = epochs or DEFAULT_MAX_ITER["lbfgs" if self.solver == "lbfgs" else
                                            "stochastic"]
        X = D.as_scipy(X)
        if not is_dask(X):
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32],
                                 reset=not warm)
        else:
            check_numeric_columns(X, type(self).__name__)
            y = D.check_dask_X(X, y, type(self).__name__)
        sw = check_sample_weight(sample_weight, X)
        n_features = int(X.shape[1])
        if warm and n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} was "
                             f"fitted with {self.n_features_in_}: a warm start needs the same")
        if warm:
            self._check_warm_start(n_features)
        with self._model() as model, self._partition(
                model, (X, y) if sw is None else (X, y, sw)) as raw:
            labels = D.fit_classes(raw.reduce(D.labels_of, None, with_start=True), classes,
                                   self.classes_ if warm else None)
            if labels.shape[0] < 2:
                raise DataError(f"{type(self).__name__} needs samples of at least 2 classes in "
                                f"the data, but the data contains only one class: "
                                f"{labels.tolist()[0]!r}")
            n_out = 1 if labels.shape[0] == 2 else labels.shape[0]
            with raw.map(D.encode_part, labels, n_out, self.n_hashed_features,
                         with_start=True) as data:
                raw.release()  # the encoded partitions replace the raw ones
                W, history, n_iter, state = self._train(
                    model, data, labels, n_out, epochs, warm, eval_set, n_features,
                    None if sw is None else total_weight(data))
                if history:
                    history[-1].update(data.report())
        self.classes_, self.n_features_in_ = labels, n_features
        self.history_ = (self.history_ if warm else []) + history
        self.n_iter_, self._ps_state_ = np.array([n_iter]), state
        if isinstance(W, D.KeyedWeights):
            self.coef_, self.intercept_ = W.to_coef(self.n_hashed_features or n_features)
        else:
            self.coef_, self.intercept_ = np.ascontiguousarray(W[:-1].T), W[-1].copy()
        self._n_hashed_features_ = self.n_hashed_features  # what a warm start must keep
        self._tables = D.TableCache()  # the previous model's prediction table goes
        return self

    def _check_warm_start(self, n_features: int) -> None:
        """:func:`~._logistic_params.check_warm_start` (the hashing a warm start keeps)."""
        check_warm_start(self, n_features)

    def _train(self, model, data, labels, n_out, epochs, warm, eval_set, n_features,
               total_weight=None):
        seed = self._seed() + (1000 * len(self.history_) if warm else 0)  # new orders
        lr = self.learning_rate or DEFAULT_LEARNING_RATE[self.solver]
        name = f"LogisticRegression({self.solver})"
        if self.early_stopping and self.solver != "lbfgs" and epochs > 1:  # (one cannot stop)
            check_held_out(data, seed, self.validation_fraction)  # before any epoch
        loop = self._epoch_loop(model, name, epochs, advice=divergence_advice(lr),
                                continues=warm, fit_id=fit_identity(self, n_features, labels))
        evaluate = None
        if eval_set:
            from ._logistic_eval import Evaluator

            evaluate = Evaluator(model, self, eval_set, labels, n_out, n_features)
        width = self.n_hashed_features or n_features
        try:
            return train(
                model, data, n_features=width, n_outputs=n_out,
                solver=self.solver, step_on=self.step_on, penalty=self.penalty, C=self.C,
                fit_intercept=self.fit_intercept, max_iter=epochs,
                batch_size=self.batch_size or (256 if self.step_on == "server" else 1),
                learning_rate=lr, tol=self.tol, consistency=self.consistency,
                staleness=self.staleness, random_state=seed,
                clocks_per_epoch=self.clocks_per_epoch, early_stopping=self.early_stopping,
                n_iter_no_change=self.n_iter_no_change,
                validation_fraction=self.validation_fraction,
                init=self._ps_state_ if warm else None, loop=loop, evaluate=evaluate,
                table_dtype=self.table_dtype or ("float32" if width >= D.WIDE_FEATURES
                                                 else "float64"), total_weight=total_weight)
        finally:
            if evaluate is not None:
                evaluate.release()

    def decision_function(self, X):
        """Margins ``X coef_.T + intercept_``: shape (n,) for two classes, else (n, n_classes).
        A dask ``X`` gives a dask array, computed chunk by chunk; the workers get the
        weights of the non-zero columns only, by key, from
        :data:`~._logistic_data.KEYED_FEATURES` columns (a dense ``coef_`` too)."""
        check_is_fitted(self)
        X = D.as_scipy(X)
        b, h = self.intercept_, self._fitted_hashing()
        coef_t = (self._keyed_table((self.coef_, b), D.KeyedWeights.from_coef)
                  if sp.issparse(self.coef_) else np.ascontiguousarray(self.coef_.T))
        if is_dask(X):
            check_numeric_columns(X, type(self).__name__)
            if not sp.issparse(self.coef_) and self.coef_.shape[1] >= D.KEYED_FEATURES:
                # a dense coef_ over a wide input (a model saved before every solver was
                # keyed there): the workers get its non-zero rows by key, not the whole
                # array (2 GiB at 2**28 columns, which killed 3 GiB workers)
                coef_t = self._keyed_table((self.coef_, b), _keyed_from_dense)
            return D.dask_margins(X, coef_t, b, h, self.n_features_in_, type(self).__name__)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        out = D.margins(X, coef_t, b, h)
        return out[:, 0] if out.shape[1] == 1 else out

    def _check_loaded(self) -> None:
        """Refuse fitted arrays that do not fit together (called by
        :func:`~dask_ps.saving.load_estimator`; :func:`._loaded.check_linear`): a
        ``coef_`` or ``intercept_`` of another shape than the classes and the fitted width
        (prediction read past them), a hashing width beyond the weights.

        Raises
        ------
        ValueError
            Naming the attribute.
        """
        check_linear(self)

    def _fitted_hashing(self):
        """The ``n_hashed_features`` the fitted weights were made with (a later
        ``set_params`` is for the next fit); the parameter for a model saved before it was
        kept."""
        return self.__dict__.get("_n_hashed_features_", self.n_hashed_features)

    def _keyed_table(self, sources: tuple, build):
        """``build(*sources)``, the table a keyed model predicts from, made once per fitted
        ``sources`` (:class:`~._logistic_data.TableCache`; a model loaded from a file gets
        its cache here, at its first prediction)."""
        tables = self.__dict__.get("_tables")
        if tables is None:
            tables = self._tables = D.TableCache()
        return tables.get(sources, lambda: build(*sources))

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes) (a dask array for dask ``X``): finite,
        in [0, 1], rows summing to 1."""
        z = self.decision_function(X)
        if is_dask(z):
            k = self.classes_.shape[0]
            return z.map_blocks(D.proba_from_margins, dtype=np.float64,
                                chunks=(z.chunks[0], (k,)),
                                **({"new_axis": 1} if z.ndim == 1 else {}))
        return D.proba_from_margins(z)

    def predict(self, X):
        """Most probable class of each row, shape (n,) (a dask array for dask ``X``)."""
        z = self.decision_function(X)
        idx = (z > 0).astype(int) if z.ndim == 1 else z.argmax(axis=1)
        if is_dask(idx):
            return idx.map_blocks(D.take_classes, self.classes_, dtype=self.classes_.dtype)
        return self.classes_[idx]
