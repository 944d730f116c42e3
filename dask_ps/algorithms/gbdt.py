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

from ..partitions.inputs import NoRows, UnknownChunks, first_rows, is_dask
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
from ._gbdt_docs import DOC_ATTRS, DOC_NOTES, DOC_PARAMS
from ._gbdt_ensemble import Ensemble
from ._gbdt_fit import (
    DIVERGENCE_ADVICE,
    eval_pair,
    eval_rows_error,
    one_shard,
    train,
    training_workers,
)
from ._gbdt_sketch import DEFAULT_SAMPLE_COUNT
from ._logistic_data import as_scipy, check_dask_width, classes_of, finite_block
from ._weights import check_sample_weight, eval_weights

__all__ = ["Booster", "GBDTClassifier", "GBDTRegressor"]


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
            return super()._model(n_shards=1)
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
            if not hasattr(X, "columns"):  # an array of strings (a frame's: its columns')
                check_numeric_columns(X, type(self).__name__)
            if len(X.shape) != 2:
                raise ValueError(f"Expected 2D array, got a dask collection of shape {X.shape}")
            if reset:
                self.n_features_in_ = int(X.shape[1])
                if hasattr(X, "columns"):
                    self.feature_names_in_ = np.asarray([str(c) for c in X.columns], object)
            elif hasattr(X, "columns"):  # an eval set: the fit's columns, checked before it
                names = getattr(self, "feature_names_in_", None)
                if names is not None and list(map(str, X.columns)) != list(names):
                    raise ValueError(f"X has other columns than at fit: {list(X.columns)} vs "
                                     f"{list(names)}")
                if len(X.columns) != self.n_features_in_:
                    raise ValueError(f"X has {len(X.columns)} features, but "
                                     f"{type(self).__name__} is expecting "
                                     f"{self.n_features_in_} features as input")
            elif not np.isnan(X.shape[1]):
                check_dask_width(X, self.n_features_in_, type(self).__name__)
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

    def fit(self, X, y, sample_weight=None, eval_set=None, eval_sample_weight=None):
        """Fit on ``X`` (n_samples, n_features) and ``y`` (n_samples,).

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, pandas DataFrame, dask array or dask DataFrame
            NaN is a missing value (it learns a default direction per split); sparse
            input (scipy's or a ``sparse.COO``, at predict too) stores zeros implicitly.
            In-memory input is scattered to the workers once; dask input is read once
            and trained where its partitions are.
        y : array-like or dask array/series (n_samples,)
        sample_weight : array-like (n_samples,), dask array or dask series, optional
            (:func:`~._weights.check_sample_weight`, as every estimator's)
            Weights (finite, >= 0) of the rows, as in LightGBM, XGBoost and scikit-learn's
            HistGradientBoosting: each row's gradient, hessian and loss are multiplied by
            its weight, so histograms, split gains, leaf values, ``min_child_weight`` and
            the training loss of ``history_`` are weighted, and so is the initial score
            (the weighted mean label; the log-odds or log-priors of the classes' shares of
            the weight). ``min_samples_leaf`` and ``min_data_per_group`` count rows of
            positive weight unweighted (as HistGradientBoosting counts samples); the bins
            are quantiles of the rows of positive weight, unweighted (as
            HistGradientBoosting's). A row of weight 0 is as if dropped (with every row in
            the bin sample, ``sample_count >= n_samples``, the same trees). Weights travel
            with their rows' partitions: with a dask array ``X``, a dask array (cut to its
            row chunks, as ``y`` is) or in-memory weights; with a dask DataFrame, a dask
            series of its partitions. Default: every row weighs 1 (the same trees, bit for bit, as
            without weights given). Gradients are quantized relative to the largest
            weight's (see Notes), so a few rows of very large weight coarsen the others'.
        eval_set : list of one (X, y) pair, optional
            Scored after every round on the workers that hold it (``history_``); with
            ``early_stopping_rounds``, the stopping criterion.
        eval_sample_weight : list of one array-like (n_eval,), optional
            Weights of ``eval_set``'s rows (LightGBM's name): its loss is then their
            weighted mean. Checked as ``sample_weight``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters; a single class; labels outside the classes in ``eval_set``; infinite
            values, non-finite labels or a classifier's label that is not a class such as 0.7
            (naming the row); a categorical column with non-integer or too large values;
            ``early_stopping_rounds`` without ``eval_set``; ``sample_weight`` or
            ``eval_sample_weight`` of another length than the rows, of more than one
            column, NaN, infinite or negative (naming the row), or all 0
            (:func:`~._weights.check_sample_weight`); so many columns that the bins'
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
        w = check_sample_weight(sample_weight, X)
        categorical = self._categorical(cats)
        ev = None
        if eval_sample_weight is not None and not eval_set:
            raise ValueError("eval_sample_weight needs an eval_set")
        if eval_set:
            Xv, yv = eval_pair(eval_set)
            try:
                Xv, _, _ = self._inputs(Xv, None, reset=False)
            except ValueError as exc:  # scikit-learn's checks of in-memory X name no set
                raise ValueError(f"eval_set: {exc}") from exc
            ev = (Xv, np.asarray(yv) if not is_dask(yv) else yv)
            if eval_sample_weight is not None:
                ev += (check_sample_weight(eval_weights(eval_sample_weight), Xv,
                                           "eval_sample_weight"),)
        classify = isinstance(self, ClassifierMixin)
        data = (X, y) if w is None else (X, y, w)  # the weights travel with their rows
        with self._model() as model, self._partition(model, data, workers=training_workers(
                model, self.max_workers, X, self.n_features_in_)) as data:
            try:
                eval_data = self._partition(model, ev) if ev is not None else None
            except NoRows:  # a dask set of unknown chunk sizes, found empty
                raise eval_rows_error() from None
            except UnknownChunks as exc:  # as the training data's (on a cluster)
                raise exc.named("eval_set", ("X", "y", "eval_sample_weight")) from None
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
                          # the estimator's name, checked on resume as LR's and FM's: a
                          # checkpoint of another estimator is named as such
                          loop=self._epoch_loop(model, type(self).__name__, self.n_estimators,
                                                unit="round", advice=DIVERGENCE_ADVICE,
                                                fit_id=dict(estimator=type(self).__name__)))
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

    def _check_loaded(self) -> None:
        """Refuse fitted state no fit leaves, before it is predicted with (called by
        :func:`~dask_ps.saving.load_estimator`): trees whose arrays prediction cannot walk
        (:meth:`Booster.problem`: it would read other memory or never end), or
        ``n_estimators_`` other than the rounds they hold.

        Raises
        ------
        ValueError
            Naming the attribute and the node, tree or array at fault.
        """
        booster = getattr(self, "booster_", None)
        if booster is None:
            return
        n_features = getattr(self, "n_features_in_", None)
        if n_features is None:
            raise ValueError("booster_ is given without n_features_in_")
        classes = getattr(self, "classes_", ())
        k = len(classes) if len(classes) > 2 else 1
        problem = booster.problem(n_features, k)
        if problem:
            raise ValueError(f"booster_: {problem}")
        rounds = (booster.tree_start.shape[0] - 1) // k
        if getattr(self, "n_estimators_", rounds) != rounds:
            raise ValueError(f"n_estimators_ is {self.n_estimators_}, booster_ holds "
                             f"{rounds} rounds of trees")

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
        elif not np.isnan(X.shape[-1]):  # a known width: checked before any task
            check_dask_width(X, self.n_features_in_, type(self).__name__)
        X = X.rechunk({1: -1})
        if not frame:  # a frame's partitions are checked as they become matrices
            X = X.map_blocks(finite_block, type(self).__name__, allow_nan=True,
                             dtype=X.dtype, meta=X._meta)
        kw = dict(drop_axis=1) if ndim == 1 else dict(chunks=(X.chunks[0], (width,)))
        return X.map_blocks(_block_or_empty, fn, None if ndim == 1 else width, dtype=np.float64,
                            meta=np.empty((0,) * ndim), **kw)

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


def _block_or_empty(block, fn, width: int | None):
    """``fn(block)``; a block of no rows (of a filtered dask array) predicts no rows:
    float64 (0,), or (0, ``width``)."""
    if block.shape[0] == 0:
        return np.empty((0,) if width is None else (0, width))
    return fn(block)


class GBDTClassifier(ClassifierMixin, _GBDT):
    __doc__ = f"""Gradient-boosted trees for classification on the parameter server.

    Two classes: log-loss, one tree per round; more: softmax cross-entropy, one tree per
    class per round (LightGBM's ``binary`` and ``multiclass`` objectives).

    Parameters
    ----------{DOC_PARAMS}
    Attributes
    ----------
    classes_ : ndarray (n_classes,){DOC_ATTRS}{DOC_NOTES}
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
    ----------{DOC_PARAMS}
    Attributes
    ----------{DOC_ATTRS}{DOC_NOTES}
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
