"""Factorization machines on the parameter server: binary classification of sparse rows.

The model and its per-sample steps are in :mod:`._fm_kernels`, its margins outside training
and the checks of its arrays in :mod:`._fm_model`. Training follows logistic
regression's "worker" design (:mod:`._stochastic`): one job per epoch over the data
partitions, a clock per block of rows; per block a task pulls the rows its columns touch
from two hashed (sparse) tables, runs every step of the block on that local copy in one
numba kernel, and pushes each row's change with a count of 1; the shards move a row by the
mean change of the tasks that touched it (:class:`~dask_ps.state.optimizers.Average`).

* ``"w"``: per feature key (and the intercept's key ``n_features``) the linear weight's
  FTRL state ``[z, n]`` and the count;
* ``"v"``: per feature key the ``n_components`` factors (``k`` below), their AdaGrad
  accumulators and the count. A row never pushed (count 0) starts at ``normal(0,
  init_std)`` drawn from its key alone (:func:`dask_ps.state._kernels.init_rows`), so every
  task starts a new key alike.

The estimator is :class:`~dask_ps.LogisticRegression` with another model: the same data
path (validation, partitions, labels, CSR encoding, blocks cached next to the data), the
same ``partial_fit`` and ``predict_proba``; ``coef_`` and ``intercept_`` are the linear part.
A keyed model (:data:`KEYED_FEATURES` columns or more, after hashing) comes back from the
tables as logistic regression's wide one does: :class:`~._logistic_data.KeyedWeights` of
the keys touched, made into sparse ``coef_`` and ``factors_``, never a dense array over the
width.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ..exceptions import DataError, DivergenceError
from ..kernels.optim import ADAGRAD_RULE, SGD_RULE
from ..model import PSModel
from ..partitions import Partitions
from ..partitions.inputs import is_dask
from ..state._kernels import INIT_NORMAL, init_rows
from ..state.optimizers import FTRL, Average
from . import _logistic_data as D
from ._base import (
    COMMON_CONSTRAINTS,
    Interval,
    StrOptions,
    check_numeric_columns,
    fit_identity,
    validate_data,
)
from ._fm_kernels import fm_steps
from ._fm_model import block_margins, check_fitted_arrays, check_room, fm_margins, fm_table
from ._loaded import check_factorization
from ._logistic_data import KEYED_FEATURES
from ._renamed import DEPRECATED, renamed_value
from ._stochastic import Rule, _blocks, gather_sparse_rows, weight_of
from .epoch_loop import EpochLoop
from .logistic import LogisticRegression

__all__ = ["KEYED_FEATURES", "FMState", "FactorizationMachineClassifier", "fm_margins",
           "fm_table", "train_fm"]

_FACTOR_RULES = {"adagrad": ADAGRAD_RULE, "sgd": SGD_RULE}


class FMState(NamedTuple):
    """Where an FM fit ended, as sparse rows: the keys of the linear table and their FTRL
    state ``[z, n]`` (n_w, 2); the keys of the factor table and ``[v, accumulators]``
    (n_v, 2 k)."""

    w_keys: np.ndarray
    w_state: np.ndarray
    v_keys: np.ndarray
    v_state: np.ndarray


def _pull_factors(ps, keys, k: int, cfg: dict):
    """The factor rows of ``keys`` (float64 copies: V, accumulators) and the pulled rows;
    rows never pushed start at their key's random draw."""
    rows = ps.pull("v", keys)
    V = np.ascontiguousarray(rows[:, :k], dtype=np.float64)
    A = np.ascontiguousarray(rows[:, k:2 * k], dtype=np.float64)
    fresh = np.flatnonzero(rows[:, -1] == 0)
    if fresh.shape[0]:
        init_rows(V, fresh, keys[fresh], INIT_NORMAL, 0.0, cfg["init_std"], cfg["init_seed"])
    return V, A, rows


def _divergence_advice(learning_rate: float, factor_learning_rate: float,
                      init_std: float) -> str:
    """What an FM fit that diverged should change (:class:`~dask_ps.DivergenceError`): the
    learning rates, and ``init_std``, first when it is 1 or more (a row's pairwise terms
    start near ``init_std**2`` per pair: at ``init_std=10`` the first epoch's loss was 190
    times a trivial model's, at 1 the fit trained).

    Returns
    -------
    str
        E.g. ``"try a smaller init_std (now 1e+20), learning_rate (now 0.1) or
        factor_learning_rate (now 0.02)"``.
    """
    rates = [f"learning_rate (now {learning_rate:g})",
             f"factor_learning_rate (now {factor_learning_rate:g})"]
    std = f"init_std (now {init_std:g})"
    names = [std, *rates] if init_std >= 1.0 else [*rates, std]
    return f"try a smaller {names[0]}, {names[1]} or {names[2]}"


def _not_finite(data: np.ndarray) -> str:
    """What a block whose steps made the weights not finite shows: its largest ``|x|`` when
    1e150 or more (a margin's pairwise terms multiply two values and their factors: rows
    with 1e300 gave ``inf - inf``, NaN, and a fit that no learning rate could save)."""
    big = float(np.abs(data).max()) if data.shape[0] else 0.0
    what = "the weights are no longer finite"
    if big >= 1e150:
        what += (f" (the rows hold |x| up to {big:g}: their products in the pairwise terms "
                 f"overflow float64; scale the features)")
    return what


def fm_step(ps, part, cfg: dict) -> np.ndarray:
    """One epoch of FM over a partition, a clock per block (see the module docstring);
    returns ``[summed progressive log-loss, rows, 0, 0]`` (the layout of
    :func:`~._stochastic.worker_step`).

    Raises
    ------
    DivergenceError
        When the weights or factors stop being finite, naming the epoch.
    """
    rule, k = Rule(cfg["optimizer"], 1), cfg["n_components"]
    n_blocks = max(1, round(cfg["clocks_per_epoch"] * part.n_rows / cfg["rows_per_task"]))
    blocks = _blocks(part, cfg, n_blocks)
    rng = np.random.default_rng([cfg["seed"], part.epoch, part.index])
    v_rule, v_hyper = _FACTOR_RULES[cfg["factor_solver"]], cfg["v_hyper"]
    sums = np.zeros(4)
    for b in rng.permutation(len(blocks)):
        blk = blocks[b]
        state = ps.pull("w", blk.keys)
        buf, w, z, n = rule.unpack(state[:, :-1])
        fkeys = blk.keys[:-1]
        V, A, vrows = _pull_factors(ps, fkeys, k, cfg)
        sums[0] += fm_steps(blk.indptr, blk.indices, blk.data, blk.Y, blk.sw,
                            rng.permutation(blk.train), rule.hyper, cfg["fit_intercept"], w,
                            z, n, v_rule, v_hyper, cfg["reg_factors"], V, A, np.empty(k))
        if not (np.isfinite(w).all() and np.isfinite(V).all()):
            raise DivergenceError(cfg["name"], part.epoch, _not_finite(blk.data),
                                  _divergence_advice(cfg["learning_rate"], cfg["v_hyper"][0],
                                                     cfg["init_std"]))
        sums[1] += weight_of(blk, blk.train)
        delta = np.empty_like(state)
        np.subtract(rule.pack(buf), state[:, :-1], out=delta[:, :-1])
        delta[:, -1] = 1.0
        ps.push("w", blk.keys, delta)
        dv = np.empty((fkeys.shape[0], 2 * k + 1))
        np.subtract(V, vrows[:, :k], out=dv[:, :k])
        np.subtract(A, vrows[:, k:2 * k], out=dv[:, k:2 * k])
        dv[:, -1] = 1.0
        ps.push("v", fkeys, dv)
        ps.clock()
    return sums


def train_fm(model: PSModel, data: Partitions, *, n_features: int, n_components: int = 8,
             learning_rate: float = 0.1, l1: float = 0.0, l2: float = 0.0,
             factor_solver: str = "adagrad", factor_learning_rate: float = 0.02,
             reg_factors: float = 1e-5, init_std: float = 0.01, fit_intercept: bool = True,
             max_iter: int = 10, consistency="bsp", staleness=None, random_state: int = 0,
             init_seed: int = 0, clocks_per_epoch: int = 4, init: FMState | None = None,
             loop: EpochLoop | None = None, keyed: bool | None = None,
             total_weight: float | None = None) -> tuple:
    """Fit a binary factorization machine on a PS model; the functional core of
    :class:`FactorizationMachineClassifier` (see it for the parameters).

    ``data`` holds encoded ``(X csr, Y (n, 1))`` partitions
    (:func:`~._logistic_data.encode_part`); ``init`` a previous fit's :class:`FMState`;
    ``keyed`` whether to return the weights by key (default: for ``n_features >=``
    :data:`KEYED_FEATURES`). Partitions ``(X csr, Y, sample_weight)`` train on weighted
    rows, ``total_weight`` the weights' sum: each row's step (linear and factor gradients,
    not ``reg_factors``' pull) times its weight relative to the mean weight, as in
    :mod:`._stochastic`.

    Returns
    -------
    W : ndarray (n_features + 1, 1) or KeyedWeights
        Linear weights; the last row is the intercept. Keyed: those of the keys touched,
        the intercept's key ``n_features`` last (:class:`~._logistic_data.KeyedWeights`).
    V : ndarray (n_features, n_components) or KeyedWeights
        Factors (zero for features never seen). Keyed: the factors of the feature keys
        touched.
    history : list of dict
    n_iter : int
    state : FMState

    References
    ----------
    Rendle, "Factorization Machines", ICDM 2010; McMahan et al., KDD 2013 (FTRL-Proximal);
    Duchi et al., JMLR 2011 (AdaGrad); Angel's FTRL-FM (github.com/Angel-ML/angel,
    ``FTRLFM``): FTRL linear part, gradient steps on the factors.
    """
    name, k = "FactorizationMachineClassifier", n_components
    loop = loop or EpochLoop(model, name, max_iter)
    loop.baseline = float(np.log(2.0))
    rule = Rule(FTRL(alpha=learning_rate, beta=1.0, l1=l1, l2=l2), 1)
    w_table = model.add_table("w", (None, rule.ncols), "float64", partitioner="hash",
                              optimizer=Average())
    v_table = model.add_table("v", (None, 2 * k + 1), "float64", partitioner="hash",
                              optimizer=Average())

    def fill():  # the tables before the first epoch: empty, or the warm start's
        if init is None:
            return
        # a row pushed with count 1 onto zeros becomes the pushed row
        if init.w_keys.shape[0]:
            w_table.push(init.w_keys, np.column_stack([init.w_state,
                                                       np.ones(init.w_keys.shape[0])]))
        if init.v_keys.shape[0]:
            v_table.push(init.v_keys, np.column_stack([init.v_state,
                                                       np.ones(init.v_keys.shape[0])]))

    fill()
    v_hyper = (np.array([factor_learning_rate, 1e-10]) if factor_solver == "adagrad"
               else np.array([factor_learning_rate]))
    cfg = dict(name=name, n_features=n_features, n_components=k, optimizer=rule.optimizer,
               learning_rate=learning_rate, factor_solver=factor_solver, v_hyper=v_hyper,
               reg_factors=reg_factors, init_std=init_std, init_seed=init_seed,
               seed=random_state, clocks_per_epoch=clocks_per_epoch,
               fit_intercept=fit_intercept, validation_fraction=0.0,
               rows_per_task=max(1, data.total_rows) / max(1, len(data.tasks())),
               weight_scale=1.0 if total_weight is None
               else max(1, data.total_rows) / total_weight)

    def step(ps, part):
        return fm_step(ps, part, cfg)

    def epochs(first: int, last: int) -> list[dict]:
        return [dict(loss=float(s[0] / max(1.0, s[1])))
                for s in (np.sum(r, axis=0) for r in model.fit_partitions(
                    step, data, epochs=last - first + 1, first_epoch=first,
                    consistency=consistency, staleness=staleness, seed=random_state,
                    callback=loop.task_reports(), report_epochs=True))]

    history = loop.run(epochs, on_recover=data.locate, restart=fill)
    w_keys, w_state = gather_sparse_rows(w_table, rule.width)
    v_keys, v_state = gather_sparse_rows(v_table, 2 * k)
    state = FMState(w_keys, w_state, v_keys, v_state)
    if keyed is None:
        keyed = n_features >= KEYED_FEATURES
    if keyed:
        return (D.KeyedWeights(w_keys, rule.weights(w_state)),
                D.KeyedWeights(v_keys, v_state[:, :k]), history, len(history), state)
    W = np.zeros((n_features + 1, 1))
    W[w_keys] = rule.weights(w_state)
    V = np.zeros((n_features, k))
    V[v_keys] = v_state[:, :k]
    return W, V, history, len(history), state


class FactorizationMachineClassifier(LogisticRegression):
    """Binary factorization machine (Rendle, ICDM 2010) trained on a dask_ps parameter
    server, FTRL on the linear part and AdaGrad on the factors (FTRL-FM).

    The model of a row ``x`` is ``b + sum_j w_j x_j + sum_{j<l} <v_j, v_l> x_j x_l`` with
    ``n_components``-dimensional factors ``v_j``: pairwise interactions of features that are rarely
    seen together, learnt through their factors. Linear weights and factors live in hashed PS
    tables (memory per key touched). Input as :class:`~dask_ps.LogisticRegression`'s (NumPy,
    scipy.sparse, dask arrays of CSR chunks such as :func:`dask_ps.io.read_ctr` gives).

    Parameters
    ----------
    n_components : int, default 8
        Factors per feature (the dimension of each ``v_j``; scikit-learn's name, as in
        polylearn's ``FactorizationMachineClassifier``).
    learning_rate : float, optional
        FTRL's ``alpha`` of the linear part; default 0.1.
    l1, l2 : float, default 0.0
        FTRL's per-coordinate L1 and L2 strengths of the linear part (McMahan et al.).
    factor_solver : {"adagrad", "sgd"}, default "adagrad"
    factor_learning_rate : float, default 0.02
        AdaGrad's (or SGD's) step of the factors. On a generated log of 10^5 rows with 20
        Zipf columns of up to 10^4 values (``PlantedCTR(n_categorical=20,
        max_cardinality=10_000)``, 3 epochs), 0.02 gave test log-loss 0.5501 and 0.05 gave
        0.5779 (the factors overfit the rare values; logistic regression: 0.5559).
    reg_factors : float, default 1e-5
        L2 strength of the factors (added to their gradient at every step).
    init_std : float, default 0.01
        Standard deviation of the factors' normal start (a pure function of the key and
        ``random_state``).
    fit_intercept : bool, default True
    max_iter : int, optional
        Epochs; default 10.
    clocks_per_epoch : int, default 4
    consistency, staleness, n_shards, n_hashed_features, random_state, warm_start, client,
    shard_resources, checkpoint, checkpoint_every, max_recoveries, resume, progress, callbacks
        As in :class:`~dask_ps.LogisticRegression`.
    k : int, default "deprecated"
        The deprecated name of ``n_components``, renamed in 0.1 and to be removed in 0.3: a
        fit given it warns (``FutureWarning``) and uses it; given with another
        ``n_components`` it raises ValueError.

    Attributes
    ----------
    classes_ : ndarray (2,)
    coef_ : ndarray (1, n_features), float64, or scipy.sparse.csr_matrix
        Linear weights, by column of ``X`` (by bucket with ``n_hashed_features``). A *keyed*
        model's (below) is a ``csr_matrix`` of that shape, float64, with sorted column
        indices (int64, int32 below 2**31 columns as scipy makes them), holding the
        non-zero weights of the features training touched (as a wide
        :class:`~dask_ps.LogisticRegression`'s ``coef_``).
    intercept_ : ndarray (1,)
    factors_ : ndarray (n_features, n_components), float64, or scipy.sparse.csc_matrix
        Zero for features never seen in training. A keyed model's is a ``csc_matrix`` of
        that shape (a compressed column per factor, sorted row indices: the feature keys)
        holding the non-zero factors of the features training touched. CSC, not CSR:
        a CSR matrix of ``n_features`` rows carries ``n_features + 1`` row offsets (128 MiB
        at 2**24 columns, impossible at 2**63). Indexing, ``toarray()`` and ``@`` work as
        on any scipy matrix.

        **Keyed or dense.** ``coef_`` and ``factors_`` are sparse (keyed) when the model has
        :data:`KEYED_FEATURES` (2**20) columns or more — ``n_hashed_features`` when given, else
        those of ``X`` (64-bit keys of wide input included) — and dense NumPy arrays below it. Why
        a rule on the width alone: it is known before the fit (from ``X.shape`` and the
        parameters), the same on every machine, whatever ``n_components``, the data or the memory
        free, so code written against one fit holds for the next. Why 2**20: at that width a dense
        model of ``n_components=8`` is already 72 MiB, and as much in a saved file, mostly zeros;
        such widths come from hashing (2**20 is the default width of :func:`dask_ps.io.read_ctr`
        and ``dask-ps train --hash-features``), sized for few collisions, so most columns stay
        untouched, and nobody reads them by position. Measured at 2**24 buckets and
        ``n_components=8`` on 200-300 real rows: dense, 1.13 GiB of ``coef_`` and ``factors_``, a
        1.2 GB file and a 3 GiB peak; keyed, 10-280 kB, a file of 36-723 kB (with the warm start's
        state) and no peak to speak of. Below 2**20 a dense model is small and is what scikit-learn
        users and tools expect. A keyed model costs an index per stored value: at most twice the
        dense bytes if every column is touched. A dense model too large for half the memory free
        (an ``n_components`` in the thousands), or an ``n_components`` whose factor table (1024
        rows of ``2 n_components + 1`` float64 per shard from its start, keyed or dense) exceeds
        half of a shard's memory, is refused before training with a ``MemoryError``.
    n_features_in_ : int
    n_iter_ : ndarray (1,)
    history_ : list of dict
        ``loss``: the mean progressive log-loss of each epoch (every row scored before its
        own step).

    Raises
    ------
    ValueError
        From ``fit``: more than two classes, or what :class:`~dask_ps.LogisticRegression`
        refuses (one class, infinite features, bad parameters).
    MemoryLimitError
        From ``fit``, before training: an ``n_components`` too large for the memory (see
        ``factors_``; a ``MemoryError``).

    References
    ----------
    S. Rendle, "Factorization Machines", ICDM 2010; H. B. McMahan et al., "Ad Click
    Prediction: a View from the Trenches", KDD 2013; Angel's FTRL-FM
    (github.com/Angel-ML/angel, ``FTRLFM``).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from dask_ps import FactorizationMachineClassifier
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.integers(0, 4, 2000), rng.integers(0, 4, 2000)
    >>> X = sp.csr_matrix((np.ones(4000), np.c_[a, 4 + b].ravel(), np.arange(0, 4001, 2)),
    ...                   shape=(2000, 8))
    >>> y = (a == b).astype(int)                 # an interaction: no linear model sees it
    >>> fm = FactorizationMachineClassifier(n_components=4, max_iter=5, random_state=0,
    ...                                     checkpoint=None).fit(X, y)
    >>> bool(fm.score(X, y) > 0.9)
    True
    >>> keyed = FactorizationMachineClassifier(n_components=4, max_iter=5, random_state=0,
    ...                                        n_hashed_features=2**24,
    ...                                        checkpoint=None).fit(X, y)
    >>> type(keyed.factors_).__name__, keyed.factors_.shape, keyed.coef_.nnz <= 8
    ('csc_matrix', (16777216, 4), True)
    >>> bool(keyed.score(X, y) > 0.9)
    True
    """

    solver = "ftrl"  # the linear part's rule (LogisticRegression's data path asks)

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "k": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({DEPRECATED})],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "l1": [Interval(numbers.Real, 0, None, closed="left")],
        "l2": [Interval(numbers.Real, 0, None, closed="left")],
        "factor_solver": [StrOptions(set(_FACTOR_RULES))],
        "factor_learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "reg_factors": [Interval(numbers.Real, 0, None, closed="left")],
        "init_std": [Interval(numbers.Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "clocks_per_epoch": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_hashed_features": [Interval(numbers.Integral, 1, 2**32, closed="left"), None],
        "warm_start": ["boolean"],
    }

    #: Renamed parameters, old name to new (:mod:`._renamed`).
    _renamed_params = {"k": "n_components"}

    def __init__(self, *, n_components=8, learning_rate=None, l1=0.0, l2=0.0,
                 factor_solver="adagrad", factor_learning_rate=0.02, reg_factors=1e-5,
                 init_std=0.01, fit_intercept=True, max_iter=None, clocks_per_epoch=4,
                 consistency="bsp",
                 staleness=None, n_shards=None, n_hashed_features=None, random_state=None,
                 warm_start=False, client=None, shard_resources=None, checkpoint="auto",
                 checkpoint_every=1, max_recoveries=3, resume=False, progress=None,
                 callbacks=None, k=DEPRECATED):
        self.n_components, self.k, self.learning_rate = n_components, k, learning_rate
        self.l1, self.l2 = l1, l2
        self.factor_solver, self.factor_learning_rate = factor_solver, factor_learning_rate
        self.reg_factors, self.init_std, self.fit_intercept = reg_factors, init_std, fit_intercept
        self.max_iter, self.clocks_per_epoch = max_iter, clocks_per_epoch
        self.consistency, self.staleness, self.n_shards = consistency, staleness, n_shards
        self.n_hashed_features, self.random_state = n_hashed_features, random_state
        self.warm_start, self.client, self.shard_resources = warm_start, client, shard_resources
        self.checkpoint, self.checkpoint_every = checkpoint, checkpoint_every
        self.max_recoveries, self.resume = max_recoveries, resume
        self.progress, self.callbacks = progress, callbacks

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _check_params(self) -> None:
        """No cross-parameter rule (LogisticRegression's are about its solvers)."""

    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (n_samples, n_features) and binary labels ``y`` (n_samples,).

        Parameters
        ----------
        sample_weight : array-like (n_samples,), optional
            Non-negative weights, taken and partitioned as by
            :meth:`LogisticRegression.fit`: each row's step (linear part and factors) is
            scaled by its weight relative to the mean weight; ``l1``, ``l2`` and
            ``reg_factors`` are not weighted. None: every row once, as before.

        Raises
        ------
        ValueError
            More than two classes, one class, infinite features, bad parameters, a
            ``warm_start`` fit on another number of features, ``n_hashed_features`` or
            ``n_components``, ``k`` and ``n_components`` both given and different, or a bad
            ``sample_weight`` (as :meth:`LogisticRegression.fit`).
        DivergenceError
            Training diverged.
        FutureWarning
            (A warning) ``k``, the deprecated name of ``n_components``, is given.
        """
        return self._fit(X, y, None, self.max_iter, self.warm_start, None, sample_weight)

    def _check_warm_start(self, n_features: int) -> None:
        """:meth:`LogisticRegression._check_warm_start`, and the fitted ``n_components``:
        the factors continued have that many columns (another ``n_components`` failed deep
        in the shards, on the shape of the factor table's updates).

        Raises
        ------
        ValueError
            Naming the fitted and the new ``n_components``.
        """
        super()._check_warm_start(n_features)
        fitted, mine = self.factors_.shape[1], renamed_value(self, "n_components")
        if mine != fitted:
            raise ValueError(f"n_components={mine}, but {type(self).__name__} was fitted "
                             f"with n_components={fitted}: a warm start (warm_start=True or "
                             f"partial_fit) continues the fitted factors and needs the same "
                             f"n_components; set it back to {fitted}, or fit afresh with "
                             f"warm_start=False (for partial_fit: a new estimator)")

    def _train(self, model, data, labels, n_out, epochs, warm, eval_set, n_features,
               total_weight=None):
        if n_out != 1:
            raise DataError(f"Only binary classification is supported: "
                            f"{type(self).__name__} got y with {labels.shape[0]} classes "
                            f"{labels.tolist()}")
        seed = self._seed() + (1000 * len(self.history_) if warm else 0)  # new orders
        lr = self.learning_rate or 0.1
        loop = self._epoch_loop(model, type(self).__name__, epochs, continues=warm,
                                advice=_divergence_advice(lr, self.factor_learning_rate,
                                                          self.init_std),
                                fit_id=fit_identity(self, n_features, labels))
        width = self.n_hashed_features or n_features
        keyed = width >= KEYED_FEATURES
        n_components = renamed_value(self, "n_components")
        check_room(type(self).__name__, model, width, n_components, keyed)
        W, V, history, n_iter, state = train_fm(
            model, data, n_features=width, n_components=n_components,
            learning_rate=lr, l1=self.l1, l2=self.l2, factor_solver=self.factor_solver,
            factor_learning_rate=self.factor_learning_rate, reg_factors=self.reg_factors,
            init_std=self.init_std, fit_intercept=self.fit_intercept, max_iter=epochs,
            consistency=self.consistency, staleness=self.staleness, random_state=seed,
            init_seed=self._seed(), clocks_per_epoch=self.clocks_per_epoch,
            init=self._ps_state_ if warm else None, loop=loop, keyed=keyed,
            total_weight=total_weight)
        # keyed: CSR (n_components, width) of the keys held, transposed (a CSC view, no copy)
        self.factors_ = V.to_coef(width)[0].T if keyed else V
        return W, history, n_iter, state

    def _check_loaded(self) -> None:
        """:meth:`LogisticRegression._check_loaded` for two classes, and ``factors_``
        (n_features, n_components) and the saved tables' rows
        (:func:`._loaded.check_factorization`).

        Raises
        ------
        ValueError
            Naming the attribute.
        """
        check_factorization(self)

    def decision_function(self, X):
        """FM margins, shape (n,) (a dask array for dask ``X``, computed chunk by chunk),
        from dense or sparse (keyed) ``coef_`` and ``factors_`` alike; never NaN for finite
        ``X``: a margin beyond float64 (values such as 1e300) is ``±inf``, probability 0
        or 1 in :meth:`predict_proba` (:func:`~._fm_model.fm_margins`).

        Raises
        ------
        ValueError
            ``X`` not finite or of another width, or a row whose margin is undefined (its
            linear part and pairwise part overflow with opposite signs), naming the row.
        """
        check_is_fitted(self)
        X = D.as_scipy(X)
        check_fitted_arrays(type(self).__name__, self.coef_, self.factors_)
        sources = (self.coef_, self.intercept_, self.factors_)
        table = (self._keyed_table(sources, fm_table) if sp.issparse(self.coef_)
                 else fm_table(*sources))
        b, h = float(self.intercept_[0]), self._fitted_hashing()
        if is_dask(X):
            check_numeric_columns(X, type(self).__name__)
            return D.dask_margins(X, table, b, h, self.n_features_in_, type(self).__name__,
                                  block=block_margins)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return block_margins(X, table, b, h)
