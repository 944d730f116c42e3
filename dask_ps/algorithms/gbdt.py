"""Gradient-boosted trees on the parameter server: :class:`GBDTClassifier` and
:class:`GBDTRegressor`, thin scikit-learn shells over :func:`._gbdt_fit.train`.

Histogram GBDT (LightGBM, XGBoost ``hist``) in DimBoost's parameter-server form: workers
hold their partitions' rows binned once, with their gradients; per growth step every worker
pushes the histograms of all new nodes in one merged push into a table whose shards each own
a range of features; each shard finds the best split of every node over its features and
only those candidates travel back; every worker then takes the same decisions. A whole fit
is one job (see :mod:`._gbdt_ps`).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ..model import PSModel
from ..partitions.inputs import first_rows, is_dask
from ._base import (
    COMMON_CONSTRAINTS,
    Interval,
    PSEstimator,
    StrOptions,
    check_numeric_columns,
    validate_data,
)
from ._gbdt_booster import Booster
from ._gbdt_data import categorical_indices, frame_categories, to_matrix
from ._gbdt_fit import DIVERGENCE_ADVICE, eval_pair, one_shard, train, training_workers
from ._gbdt_sketch import DEFAULT_SAMPLE_COUNT
from ._gbdt_tree import Ensemble
from ._logistic_data import as_scipy, classes_of, finite_block

__all__ = ["Booster", "GBDTClassifier", "GBDTRegressor"]


_DOC_PARAMS = """
    n_estimators : int, default 100
        Boosting rounds (a round grows one tree, or one per class for more than two classes).
    learning_rate : float, default 0.1
        Shrinkage of every leaf value.
    max_leaf_nodes : int, default 31
        Leaves per tree (LightGBM's ``num_leaves``).
    max_depth : int, optional
        Depth limit (root depth 0); default none.
    min_child_weight : float, default 1e-3
        Least hessian sum in a leaf (LightGBM's ``min_sum_hessian_in_leaf``).
    min_samples_leaf : int, default 20
        Least training rows in a leaf (LightGBM's ``min_data_in_leaf``).
    reg_lambda : float, default 0
        L2 regularisation of leaf values: a leaf's value is ``-G / (H + reg_lambda)``.
    min_split_gain : float, default 0
        A split must reduce the loss by more.
    max_bins : int, default 255
        Value bins per feature (quantiles of a sample of ``sample_count`` rows, computed
        once; a missing-value bin comes on top). Up to 255 bins store binned rows as uint8.
    subsample : float in (0, 1], default 1
        Share of rows each round's trees are grown from (bagging; drawn per row from
        ``random_state`` and the round, so the same for any partitioning).
    colsample_bytree : float in (0, 1], default 1
        Share of features each round's trees may split on.
    early_stopping_rounds : int, optional
        With ``eval_set``: stop when the eval loss has not improved for this many rounds,
        and keep the trees of the best round.
    split_share : float in (0, 1] or "auto", default "auto"
        Growth policy. 1: level by level (every node of a level that can split does, best
        gains first when the leaf budget runs out), one histogram push and split query per
        level; less: best-first in batches, each step splitting the best nodes within this
        share of the tree's remaining leaf budget and every node whose gain reaches the one
        the tree before stopped at: nearer LightGBM's leaf-wise trees. "auto": see Notes.
    categorical_features : "from_dtype", None, or array-like of int, bool or str
        Categorical columns: "from_dtype" takes a DataFrame's ``category`` columns (their
        codes); or the columns' indices, a boolean mask, or names. Values of a categorical
        column of an array must be integers >= 0; negative values, NaN and categories
        unseen at fit are missing. Splits follow LightGBM: one-vs-rest up to
        ``max_cat_to_onehot`` categories, else a subset of the categories sorted by
        gradient statistics (``max_cat_threshold``, ``cat_smooth``, ``cat_l2``,
        ``min_data_per_group``; LightGBM's defaults).
    max_cat_to_onehot, max_cat_threshold, cat_smooth, cat_l2, min_data_per_group
        LightGBM's categorical split parameters (defaults 4, 32, 10, 10, 100).
    importance_type : {"gain", "split"}, default "gain"
        What ``feature_importances_`` adds up per feature.
    sample_count : int, default 200,000
        Rows sampled for the bins (LightGBM's ``bin_construct_sample_cnt``).
    n_shards : int, optional
        Shards of the histogram table; each owns a feature range. Default: one when a
        node's histogram (``n_features * (max_bins + 1)`` bins of 24 bytes) stays under
        256 KiB — a step then costs each worker one message, or none on the shard's own
        worker — else one per worker.
    max_workers : int, None or "auto", default "auto"
        At most this many workers (the shards' first; None: all) hold the training rows and
        boost. "auto": the histogram shard's worker alone for at most
        :data:`~._gbdt_fit.ONE_WORKER_CELLS` rows x features (rows known before reading:
        not a dask DataFrame; not with ``shard_resources``), where a step's round trip
        costs more than a worker saves; else all.
    random_state : int, optional
        Seed of the bin sample, row and column sampling (default 0).
    client : distributed.Client or "local", optional
        Default: the current client; "local" (or no client) runs in this process.
    shard_resources : str, optional
        Place the histogram shards only on workers offering this Dask resource (as for
        :class:`~dask_ps.LogisticRegression`). Default: on every worker.
    checkpoint : str, "auto" or None, default None
        Checkpoint URL (see :class:`~dask_ps.LogisticRegression`) of the trees between
        jobs (the histogram table, empty between rounds, is not kept); a task that lost its
        worker-local rows rebuilds them from its partition and the trees so far, so a lost
        worker costs the rounds since the last checkpoint.
    checkpoint_every, max_recoveries, resume, progress
        As for :class:`~dask_ps.LogisticRegression` (rounds, not epochs): ``resume`` goes on
        from the checkpoint's trees (the same data and eval_set, known by the checksums of
        their labels and features, in any partitions, on any number of shards), or keeps
        the first.
    callbacks : list of callable, optional
        ``cb(record) -> bool`` after every round; True stops the fit. With callbacks the
        fit runs one job per round (a few ms each).
"""

_DOC_ATTRS = """
    booster_ : Booster
        The trees as flat arrays.
    n_estimators_ : int
        Rounds kept (the best round's with early stopping).
    best_iteration_ : int or None
        With early stopping, the 0-based round of the best eval loss.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names, when fitted on a DataFrame.
    categories_ : dict
        ``{column: categories}`` of a DataFrame's categorical columns.
    feature_importances_ : ndarray (n_features_in_,) float64
        Total split gain (``importance_type="gain"``, in units of the training loss) or
        number of splits per feature, as LightGBM reports them (not normalised).
    history_ : list of dict
        One record per round (see :func:`~dask_ps.algorithms._base.history_fields`;
        ``epoch`` is the 1-based round): ``loss`` (mean training loss after the round),
        ``steps`` (histogram pushes and split queries of the round), ``hist_bytes``
        (histogram and scalar bytes pushed by all workers in the round) and, with
        ``eval_set``, ``eval_log_loss`` / ``eval_l2``. The last round of each job adds
        ``task_seconds``: per task, the seconds its job spent building histograms into a
        buffer (``hist``: several sparse partitions), writing the push (``push``: with a
        task's dense rows, their histograms too), sending it and waiting for the shards'
        answers (``query``, one round trip per step), moving rows (``partition``),
        planning steps (``grow``)
        and on the rest, and the CPU seconds of its worker process (``process_cpu``).
"""

_DOC_NOTES = """
    Notes
    -----
    Trees are the same for any number of workers, partitions and shards (gradients are
    quantized so sums are exact; bins come from a sample of rows chosen by row id). Growth:
    level-wise (``split_share=1``) needs one synchronisation per level, best-first (``< 1``)
    more. The default ``"auto"`` is level-wise below 100,000 training rows, where a step's
    latency dominates, and ``0.02`` from there, for accuracy; a step also splits every node
    whose gain reaches the gain at which the tree before ran out of leaves, so batches stay
    large (:func:`~dask_ps.algorithms._gbdt_tree.resolve_split_share`). Measured (100 trees,
    63 leaves, 255 bins): LightGBM's example (7,000 rows) level-wise, test AUC 0.8345 in 8.8
    steps per tree (LightGBM 0.816); 10^6 x 100 ``make_classification`` (800,000 training
    rows), 2 workers x 1 thread: level-wise 0.9481 in 6.1 steps, 24.5 s, 48 MB pushed per
    tree; ``"auto"`` 0.9609 in 22.9 steps, 35.9-38.9 s, 96 MB; LightGBM 34.5-36.3 s (0.9613),
    xgboost.dask (63 leaves) 38.4-44.0 s (0.9611) in the same runs (``gbdt_peers.py``).

    References
    ----------
    G. Ke et al., "LightGBM", NeurIPS 2017; T. Chen and C. Guestrin, "XGBoost", KDD 2016;
    J. Jiang et al., "DimBoost: Boosting Gradient Boosting Decision Tree to Higher
    Dimensions", SIGMOD 2018; Angel's GBDT (github.com/Angel-ML/angel).
"""


class _GBDT(PSEstimator):
    """Shared shell of the GBDT estimators (parameters: see the subclasses)."""

    # every step of GBDT is a barrier: BSP, not a parameter
    consistency = "bsp"
    staleness = None
    _objective = ""

    _parameter_constraints = {
        **{k: v for k, v in COMMON_CONSTRAINTS.items() if k not in ("consistency", "staleness")},
        "n_estimators": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_leaf_nodes": [Interval(numbers.Integral, 2, None, closed="left")],
        "max_depth": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "min_child_weight": [Interval(numbers.Real, 0, None, closed="left")],
        "min_samples_leaf": [Interval(numbers.Integral, 1, None, closed="left")],
        "reg_lambda": [Interval(numbers.Real, 0, None, closed="left")],
        "min_split_gain": [Interval(numbers.Real, 0, None, closed="left")],
        "max_bins": [Interval(numbers.Integral, 2, 65535, closed="both")],
        "subsample": [Interval(numbers.Real, 0, 1, closed="right")],
        "colsample_bytree": [Interval(numbers.Real, 0, 1, closed="right")],
        "early_stopping_rounds": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "split_share": [Interval(numbers.Real, 0, 1, closed="right"), StrOptions({"auto"})],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "max_cat_to_onehot": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_cat_threshold": [Interval(numbers.Integral, 1, None, closed="left")],
        "cat_smooth": [Interval(numbers.Real, 0, None, closed="left")],
        "cat_l2": [Interval(numbers.Real, 0, None, closed="left")],
        "min_data_per_group": [Interval(numbers.Integral, 1, None, closed="left")],
        "importance_type": [StrOptions({"gain", "split"})],
        "sample_count": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_workers": [Interval(numbers.Integral, 1, None, closed="left"),
                        StrOptions({"auto"}), None],
    }

    def __init__(self, *, n_estimators=100, learning_rate=0.1, max_leaf_nodes=31,
                 max_depth=None, min_child_weight=1e-3, min_samples_leaf=20, reg_lambda=0.0,
                 min_split_gain=0.0, max_bins=255, subsample=1.0, colsample_bytree=1.0,
                 early_stopping_rounds=None, split_share="auto",
                 categorical_features="from_dtype", max_cat_to_onehot=4, max_cat_threshold=32,
                 cat_smooth=10.0, cat_l2=10.0, min_data_per_group=100, importance_type="gain",
                 sample_count=DEFAULT_SAMPLE_COUNT, n_shards=None, max_workers="auto",
                 random_state=None, client=None, shard_resources=None, checkpoint=None,
                 checkpoint_every=1, max_recoveries=3, resume=False, progress=None,
                 callbacks=None):
        self.n_estimators, self.learning_rate = n_estimators, learning_rate
        self.max_leaf_nodes, self.max_depth = max_leaf_nodes, max_depth
        self.min_child_weight, self.min_samples_leaf = min_child_weight, min_samples_leaf
        self.reg_lambda, self.min_split_gain, self.max_bins = reg_lambda, min_split_gain, \
            max_bins
        self.subsample, self.colsample_bytree = subsample, colsample_bytree
        self.early_stopping_rounds, self.split_share = early_stopping_rounds, split_share
        self.categorical_features = categorical_features
        self.max_cat_to_onehot, self.max_cat_threshold = max_cat_to_onehot, max_cat_threshold
        self.cat_smooth, self.cat_l2 = cat_smooth, cat_l2
        self.min_data_per_group, self.importance_type = min_data_per_group, importance_type
        self.sample_count, self.n_shards, self.random_state, self.max_workers = \
            sample_count, n_shards, random_state, max_workers
        self.client, self.checkpoint, self.checkpoint_every = client, checkpoint, \
            checkpoint_every
        self.max_recoveries, self.resume = max_recoveries, resume
        self.progress, self.callbacks, self.shard_resources = progress, callbacks, shard_resources

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = True
        return tags

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_cache", None)  # the trees as objects: rebuilt from booster_ when needed
        return state

    def _model(self):
        """The PS model of a fit: :data:`~._gbdt_fit.ONE_SHARD_BYTES` decides the default
        number of shards (``n_features_in_`` is known by then)."""
        if self.n_shards is None and one_shard(self.n_features_in_, self.max_bins):
            return PSModel(self.client, n_shards=1,
                           resources=getattr(self, "shard_resources", None))
        return super()._model()

    # -- fit ---------------------------------------------------------------------------
    def _inputs(self, X, y, reset: bool):
        """``(X, y, categories)`` ready to partition: arrays checked by scikit-learn (a
        ``sparse.COO`` as scipy CSR first, as the other estimators take it), a DataFrame
        with categorical columns kept as it is, dask collections as they are."""
        classify = isinstance(self, ClassifierMixin)
        X = as_scipy(X)
        if is_dask(X):  # a frame's columns first: an interval column breaks X.shape
            cats = frame_categories(X, type(self).__name__) if hasattr(X, "columns") else {}
            if len(X.shape) != 2:
                raise ValueError(f"Expected 2D array, got a dask collection of shape {X.shape}")
            if reset:
                self.n_features_in_ = int(X.shape[1])
                if hasattr(X, "columns"):
                    self.feature_names_in_ = np.asarray([str(c) for c in X.columns], object)
            return X, y, cats
        if hasattr(X, "dtypes") and hasattr(X, "columns") and frame_categories(X):
            cats = frame_categories(X, type(self).__name__)
            if reset:
                self.n_features_in_ = X.shape[1]
                self.feature_names_in_ = np.asarray([str(c) for c in X.columns], object)
            elif list(map(str, X.columns)) != list(self.feature_names_in_):
                raise ValueError("X has other columns than at fit: "
                                 f"{list(X.columns)} vs {list(self.feature_names_in_)}")
            if y is not None:
                y = np.asarray(y)
                if y.shape[0] != X.shape[0]:
                    raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
            return X, y, cats
        kw = dict(accept_sparse="csr", dtype=[np.float64, np.float32],
                  ensure_all_finite="allow-nan", reset=reset)
        if y is None and not reset:
            return validate_data(self, X, **kw), None, {}
        X, y = validate_data(self, X, y, y_numeric=not classify, **kw)
        if classify:
            try:
                check_classification_targets(y)
            except ValueError:
                classes_of(y)  # a label that is not a class (0.7), named by its first row
                raise
        return X, y, {}

    def _categorical(self, cats: dict):
        return categorical_indices(self.categorical_features,
                                   list(getattr(self, "feature_names_in_", [])),
                                   self.n_features_in_, cats)

    def fit(self, X, y, eval_set=None):
        """Fit on ``X`` (n_samples, n_features) and ``y`` (n_samples,).

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, pandas DataFrame, dask array or dask DataFrame
            NaN is a missing value (it learns a default direction per split); sparse
            input (scipy's or a ``sparse.COO``, at predict too) stores zeros implicitly.
            In-memory input is scattered to the workers once; dask input is read once
            and trained where its partitions are.
        y : array-like or dask array/series (n_samples,)
        eval_set : list of one (X, y) pair, optional
            Scored after every round on the workers that hold it (``history_``); with
            ``early_stopping_rounds``, the stopping criterion.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters; a single class; labels outside the classes in ``eval_set``; infinite
            values, non-finite labels or a classifier's label that is not a class such as 0.7
            (naming the row); a categorical column with non-integer or too large values;
            ``early_stopping_rounds`` without ``eval_set``; so many columns that the bins'
            per-feature arrays would not fit in memory (:class:`~dask_ps.DataError`).

        Warns
        -----
        UserWarning
            Regression labels so extreme that most rows' quantized gradients are coarse
            (:func:`~dask_ps.algorithms._gbdt_fit.check_quantization`).
        """
        self._validate()
        if self.early_stopping_rounds is not None and not eval_set:
            raise ValueError("early_stopping_rounds needs an eval_set")
        X, y, cats = self._inputs(X, y, reset=True)
        categorical = self._categorical(cats)
        ev = None
        if eval_set:
            Xv, yv = eval_pair(eval_set)
            try:
                Xv, _, _ = self._inputs(Xv, None, reset=False)
            except ValueError as exc:  # scikit-learn's checks of in-memory X name no set
                raise ValueError(f"eval_set: {exc}") from exc
            ev = (Xv, np.asarray(yv) if not is_dask(yv) else yv)
        classify = isinstance(self, ClassifierMixin)
        with self._model() as model, self._partition(model, (X, y), workers=training_workers(
                model, self.max_workers, X, self.n_features_in_)) as data:
            eval_data = self._partition(model, ev) if ev is not None else None
            try:
                r = train(model, data, eval_data, objective=self._objective,
                          classify=classify, categories=cats, categorical=categorical,
                          n_estimators=self.n_estimators, learning_rate=self.learning_rate,
                          max_leaf_nodes=self.max_leaf_nodes, max_depth=self.max_depth,
                          min_child_weight=self.min_child_weight,
                          min_samples_leaf=self.min_samples_leaf, reg_lambda=self.reg_lambda,
                          min_split_gain=self.min_split_gain, max_bins=self.max_bins,
                          subsample=self.subsample, colsample_bytree=self.colsample_bytree,
                          split_share=self.split_share,
                          early_stopping_rounds=self.early_stopping_rounds,
                          sample_count=self.sample_count,
                          cat_params=dict(max_cat_to_onehot=self.max_cat_to_onehot,
                                          max_cat_threshold=self.max_cat_threshold,
                                          cat_smooth=self.cat_smooth, cat_l2=self.cat_l2,
                                          min_data_per_group=self.min_data_per_group),
                          random_state=self._seed(), n_features=self.n_features_in_,
                          loop=self._epoch_loop(model, type(self).__name__, self.n_estimators,
                                                unit="round", advice=DIVERGENCE_ADVICE))
                if r.history:
                    r.history[-1].update(data.report())
            finally:
                if eval_data is not None:
                    eval_data.release()
        if classify:
            self.classes_ = r.classes
        self.categories_ = cats
        self.booster_ = Booster.of(r.ensemble)
        self.n_estimators_ = r.ensemble.n_rounds
        self.best_iteration_ = r.best_round
        self.history_ = r.history
        self._cache = (self.booster_, r.ensemble)  # predict leaves __dict__ as it is
        return self

    # -- prediction --------------------------------------------------------------------
    @property
    def feature_importances_(self) -> np.ndarray:
        check_is_fitted(self)
        return self._ensemble().feature_importances(self.importance_type)

    def _ensemble(self) -> Ensemble:
        cache = getattr(self, "_cache", None)
        if cache is None or cache[0] is not self.booster_:
            self._cache = (self.booster_, self.booster_.ensemble(self.n_features_in_))
        return self._cache[1]

    def _matrix(self, X):
        X, _, _ = self._inputs(X, None, reset=False)
        return to_matrix(X, self.categories_) if hasattr(X, "iloc") else X

    def _raw(self, X, rounds=None, checked=False) -> np.ndarray:
        """Raw scores (n_outputs, n) of in-memory ``X`` (``checked``: a matrix made by
        :meth:`_matrix_frame`)."""
        M = X if checked else self._matrix(X)
        if sp.issparse(M):
            M = sp.csr_matrix(M, dtype=np.float64)
            if not M.has_canonical_format:  # repeated entries of a cell add up, as in fit
                M = M.copy()
                M.sum_duplicates()
        return self._ensemble().predict_raw(M, rounds=rounds)

    def _map(self, X, fn, ndim: int, width: int | None = None):
        """``fn(block)`` over the blocks of a dask ``X`` (lazily), a bad value named by its
        row in the whole ``X`` (a dataframe's partition lengths are computed here)."""
        frame = hasattr(X, "map_partitions")
        if frame:
            check_numeric_columns(X[[c for c in X.columns if str(c) not in self.categories_]],
                                  type(self).__name__, categories=True)  # fit's: categories
            rows = [int(n) for n in X.map_partitions(len).compute()]
            X = X.map_partitions(self._matrix_frame, first_rows(rows), meta=np.empty((0, 0)))
            import dask.array as da

            # the chunks' sizes known: scikit-learn's score takes the predictions' len()
            X = da.Array(X.dask, X.name, (tuple(rows), (self.n_features_in_,)), meta=X._meta)
            fn = functools.partial(fn, checked=True)
        X = X.rechunk({1: -1})
        if not frame:  # a frame's partitions are checked as they become matrices
            X = X.map_blocks(finite_block, type(self).__name__, allow_nan=True,
                             dtype=X.dtype, meta=X._meta)
        kw = dict(drop_axis=1) if ndim == 1 else dict(chunks=(X.chunks[0], (width,)))
        return X.map_blocks(fn, dtype=np.float64, meta=np.empty((0,) * ndim), **kw)

    def _matrix_frame(self, df, starts=None, partition_info=None):
        """A dask dataframe's partition as a matrix; ``starts``: each partition's first row
        in the whole frame, named by errors (``partition_info``: given by
        ``map_partitions``)."""
        names = getattr(self, "feature_names_in_", None)
        if names is not None and list(map(str, df.columns)) != list(names):
            raise ValueError(f"X has other columns than at fit: {list(df.columns)} vs "
                             f"{list(names)}")
        row0 = 0 if starts is None or not partition_info else \
            int(starts[partition_info["number"]])
        return to_matrix(df, self.categories_, row0)

    def _staged_raw(self, X):
        """Raw scores (n_outputs, n) of in-memory ``X`` after each round (a generator)."""
        M = self._matrix(X)
        if sp.issparse(M):
            M = sp.csr_matrix(M, dtype=np.float64)
        ens = self._ensemble()
        raw = None
        for r in range(ens.n_rounds):
            raw = ens.predict_raw(M, rounds=(0, 1)) if raw is None else \
                ens.predict_raw(M, out=raw, rounds=(r, r + 1))
            yield raw.copy()

    def staged_predict(self, X):
        """Predictions after each round: yields ``n_estimators_`` arrays (n,), those of
        the first 1, 2, ... rounds, for in-memory ``X`` (n, n_features_in_)."""
        check_is_fitted(self)
        for raw in self._staged_raw(X):
            yield self._from_raw(raw)


class GBDTClassifier(ClassifierMixin, _GBDT):
    __doc__ = f"""Gradient-boosted trees for classification on the parameter server.

    Two classes: log-loss, one tree per round; more: softmax cross-entropy, one tree per
    class per round (LightGBM's ``binary`` and ``multiclass`` objectives).

    Parameters
    ----------{_DOC_PARAMS}
    Attributes
    ----------
    classes_ : ndarray (n_classes,){_DOC_ATTRS}{_DOC_NOTES}
    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from dask_ps import GBDTClassifier
    >>> X, y = make_classification(2000, random_state=0)
    >>> clf = GBDTClassifier(n_estimators=20, client="local").fit(X, y)
    >>> float(clf.score(X, y)) > 0.9
    True
    """

    def decision_function(self, X):
        """Raw scores (base score plus leaf values).

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, pandas DataFrame, dask array or dask DataFrame
            (n, n_features_in_), the columns of the fit; NaN is missing.

        Returns
        -------
        float64 ndarray (n,) of log-odds of ``classes_[1]`` (two classes), else (n,
        n_classes) of softmax inputs; a dask array for dask ``X``.
        """
        check_is_fitted(self)
        if is_dask(X):
            k = self.booster_.base_score.shape[0]
            return self._map(X, self._decision_block, 1 if k == 1 else 2, k)
        return self._decision_block(X)

    def _decision_block(self, X, checked=False):
        raw = self._raw(X, checked=checked)
        return raw[0] if raw.shape[0] == 1 else raw.T.copy()

    def _from_raw(self, raw) -> np.ndarray:
        return self.classes_[self._proba_from_raw(raw).argmax(axis=1)]

    def _proba_from_raw(self, raw) -> np.ndarray:
        if raw.shape[0] == 1:
            p = np.exp(-np.logaddexp(0.0, -raw[0]))
            return np.column_stack([1.0 - p, p])
        e = np.exp(raw - raw.max(axis=0))
        return (e / e.sum(axis=0)).T

    def _proba_block(self, X, checked=False):
        return self._proba_from_raw(self._raw(X, checked=checked))

    def predict_proba(self, X):
        """Class probabilities.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, pandas DataFrame, dask array or dask DataFrame
            (n, n_features_in_), the columns of the fit; NaN is missing.

        Returns
        -------
        float64 ndarray (n, n_classes), columns in the order of ``classes_`` (a dask array
        for dask ``X``).
        """
        check_is_fitted(self)
        if is_dask(X):
            return self._map(X, self._proba_block, 2, self.classes_.shape[0])
        return self._proba_block(X)

    def predict(self, X):
        """The most probable class of each row.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, pandas DataFrame, dask array or dask DataFrame
            (n, n_features_in_), the columns of the fit; NaN is missing.

        Returns
        -------
        ndarray (n,) of ``classes_``' dtype (a dask array for dask ``X``).
        """
        check_is_fitted(self)
        if is_dask(X):
            idx = self._map(X, self._predict_index, 1)
            return idx.map_blocks(lambda i: self.classes_[i.astype(np.int64)],
                                  dtype=self.classes_.dtype)
        return self.classes_[self._predict_index(X)]

    def _predict_index(self, X, checked=False):
        return self._proba_block(X, checked).argmax(axis=1)

    def staged_predict_proba(self, X):
        """Class probabilities after each round: yields ``n_estimators_`` float64 arrays
        (n, n_classes), of the first 1, 2, ... rounds, for in-memory ``X``."""
        check_is_fitted(self)
        for raw in self._staged_raw(X):
            yield self._proba_from_raw(raw)


class GBDTRegressor(RegressorMixin, _GBDT):
    __doc__ = f"""Gradient-boosted trees for regression (squared error) on the parameter server.

    Parameters
    ----------{_DOC_PARAMS}
    Attributes
    ----------{_DOC_ATTRS}{_DOC_NOTES}
    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from dask_ps import GBDTRegressor
    >>> X, y = make_regression(2000, n_features=5, random_state=0)
    >>> reg = GBDTRegressor(n_estimators=50, client="local").fit(X, y)
    >>> float(reg.score(X, y)) > 0.9
    True
    """

    _objective = "regression"

    def _from_raw(self, raw) -> np.ndarray:
        return raw[0]

    def _predict_block(self, X, checked=False):
        return self._raw(X, checked=checked)[0]

    def predict(self, X):
        """Predicted values.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, pandas DataFrame, dask array or dask DataFrame
            (n, n_features_in_), the columns of the fit; NaN is missing.

        Returns
        -------
        float64 ndarray (n,) (a dask array for dask ``X``).
        """
        check_is_fitted(self)
        if is_dask(X):
            return self._map(X, self._predict_block, 1)
        return self._predict_block(X)
