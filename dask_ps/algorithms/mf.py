"""Biased matrix factorisation of explicit ratings on the parameter server: SGD and ALS.

The model is ``r_ui ≈ mu + b_u + b_i + p_u · q_i`` (Koren, Bell & Volinsky, 2009). The ratings
are partitioned by user; user factors stay next to their partition, item factors are a PS
table (training in :mod:`._mf_train`, steps in :mod:`._mf_steps`).
"""

from __future__ import annotations

import functools
import numbers
import warnings

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..exceptions import DataError
from ..io.ids import IdMapping
from ..io.ratings import encode_ratings
from ..partitions.inputs import is_dask
from . import _mf_data as data_
from ._base import COMMON_CONSTRAINTS, Interval, PSEstimator, StrOptions, checksum, history_doc
from ._loaded import check_ratings_model
from ._mf_kernels import predict_pairs
from ._mf_train import train

__all__ = ["MatrixFactorization", "train"]

#: The solvers (their defaults below).
SOLVERS = ("sgd", "als")
DEFAULTS = {
    # tuned on MovieLens-100k u1.base -> u1.test (see the README section)
    "sgd": dict(rank=200, reg=0.05, reg_bias=0.02, reg_fixed=0.0, reg_bias_fixed=0.0,
                learning_rate=0.06, decay=0.82, max_iter=20, init_std=0.01),
    # the fixed parts chosen on u1, ua and two sparse samples of MovieLens-100k (README)
    "als": dict(rank=50, reg=0.1, reg_bias=0.01, reg_fixed=5.0, reg_bias_fixed=3.0,
                learning_rate=None, decay=None, max_iter=15, init_std=0.1),
}


@history_doc
class MatrixFactorization(PSEstimator):
    """Biased matrix factorisation of explicit ratings, trained on a dask_ps parameter server.

    Predicts ``r_ui = mu + b_u + b_i + p_u · q_i`` (global mean, user and item biases, rank-k
    factors). Item factors and biases live on the PS; the ratings are partitioned by user and
    each user's factors stay next to its partition (see :mod:`dask_ps.algorithms._mf_steps`).

    Parameters
    ----------
    solver : {"sgd", "als"}, default "sgd"
        "sgd": Funk/Koren SGD (Surprise's ``SVD``). "als": alternating least squares with
        weighted-λ regularisation (Zhou et al. 2008), biases solved with the factors.
    rank : int, optional
        Latent factors k. Default 200 (sgd), 50 (als).
    reg, reg_bias : float, optional
        L2 strengths of the factors and biases: per update (sgd) or times each row's number
        of ratings (als). Default 0.05 / 0.02 (sgd), 0.1 / 0.01 (als).
    reg_fixed, reg_bias_fixed : float, optional
        ALS only: the part of the factors' and biases' L2 strength that does not grow with
        the row's number of ratings ``n``, so a row's penalty is ``reg * n + reg_fixed``
        (``reg_bias * n + reg_bias_fixed`` for its bias). It keeps rows with one or two
        ratings near the prior on sparse data, where weighted-λ alone overfits them (the
        bias shrinkage of Koren's baseline predictors). Default 5.0 / 3.0 (als); sgd allows
        only 0. Chosen on MovieLens-100k u1, ua and 20 % / 5 % samples: with the defaults
        ALS beats a biases-only baseline on all four (the README's MF section).
    learning_rate : float, optional
        SGD step of the first epoch; epoch ``e`` steps ``learning_rate * decay**(e - 1)``.
        Default 0.06.
    decay : float, optional
        Factor of the SGD step from one epoch to the next. Default 0.82.
    max_iter : int, optional
        Epochs (sgd) or ALS iterations. Default 20 (sgd), 15 (als).
    init_std : float, optional
        Standard deviation of the normal initial factors. Default 0.01 (sgd), 0.1 (als).
    batch_size : "deprecated"
        Not used since SGD runs one clock per item block (the DSGD schedule, see
        :func:`~._mf_train.train`). Passing a value warns (``FutureWarning``) and has no
        effect; the parameter will be removed.
    cold_start : {"mean", "nan", "drop", "raise"}, default "mean"
        Predictions for a user or item not seen at fit: "mean" falls back on the biases and
        the global mean (an unseen user gets ``mu + b_i``); "nan" gives NaN; "drop" gives
        NaN in :meth:`predict` and leaves those rows out of :meth:`evaluate`; "raise" raises
        ValueError naming the first unseen id. Every mode but "raise" warns with the counts.
        :meth:`recommend` follows it for an unseen user: "mean" ranks by ``mu + b_i``,
        "nan" and "drop" recommend nothing.
    user_col, item_col, rating_col : str, default "user", "item", "rating"
        Columns read from dataframes; arrays are read by position.
    clip : bool, default True
        Clip predictions to the range of the training ratings (as Surprise does).
    consistency, staleness, n_shards, random_state, client, shard_resources, checkpoint,
    checkpoint_every, max_recoveries, resume, progress, callbacks
        As for :class:`~dask_ps.LogisticRegression`; ALS always runs BSP. User factors live
        next to their partitions; a ``checkpoint`` URL also saves them, through a PS table
        ``"user"`` (n_users, rank + 1) filled for each save and restore and emptied (its
        memory freed) after it, so that ``resume`` goes on
        with the saved users and items (and a resume of a finished fit returns the saved
        model); a checkpoint of another fit (another solver, or other user or item ids) is
        refused with an :class:`~dask_ps.exceptions.OptionError` naming what differs.
        ``"auto"`` snapshots hold the item table only. ``random_state`` (None: seed 0) may
        be a ``np.random.RandomState``, drawn from once per fit (see
        :meth:`~dask_ps.algorithms._base.PSEstimator._seed`).

    Attributes
    ----------
    user_ids_, item_ids_ : ndarray
        Distinct training ids, sorted (int64 or str): row ``j`` of the user attributes is
        ``user_ids_[j]``.
    user_factors_ : ndarray (n_users, rank) float64
    item_factors_ : ndarray (n_items, rank) float64
        float64 whatever the solver (SGD trains float32 factors: they are widened exactly).
    user_bias_, item_bias_ : ndarray (n_users,), (n_items,) float64
    global_mean_ : float
    rating_range_ : (float, float)
    history_ : list of dict
        See :func:`~dask_ps.algorithms._base.history_fields`; ``loss`` is the training
        RMSE; SGD epochs also hold ``kernel_time``, ``exchange_time`` and
        ``kernel_cpu_time``, the slowest task's wall seconds in the SGD kernel and in pulls,
        pushes and clocks (waits included), and its CPU seconds in the kernel.
    n_iter_ : int

    References
    ----------
    Y. Koren, KDD 2008; Y. Koren, R. Bell and C. Volinsky, IEEE Computer 42(8), 2009; S. Funk,
    "Netflix Update: Try This at Home", 2006; N. Hug, Surprise; Y. Zhou et al., AAIM 2008;
    R. Gemulla et al., KDD 2011 (DSGD, the SGD schedule).

    Examples
    --------
    >>> import pandas as pd
    >>> from dask_ps import MatrixFactorization
    >>> df = pd.read_csv("u1.base", sep="\\t", names=["user", "item", "rating", "ts"])
    >>> mf = MatrixFactorization(client="local", random_state=0).fit(df)  # doctest: +SKIP
    """

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "solver": [StrOptions(set(SOLVERS))],
        "rank": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "reg": [Interval(numbers.Real, 0, None, closed="left"), None],
        "reg_bias": [Interval(numbers.Real, 0, None, closed="left"), None],
        "reg_fixed": [Interval(numbers.Real, 0, None, closed="left"), None],
        "reg_bias_fixed": [Interval(numbers.Real, 0, None, closed="left"), None],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "decay": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "init_std": [Interval(numbers.Real, 0, None, closed="left"), None],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left"),
                       StrOptions({"deprecated"})],
        "cold_start": [StrOptions({"mean", "nan", "drop", "raise"})],
        "user_col": [str], "item_col": [str], "rating_col": [str], "clip": ["boolean"],
    }

    def __init__(self, *, solver="sgd", rank=None, reg=None, reg_bias=None, reg_fixed=None,
                 reg_bias_fixed=None, learning_rate=None, decay=None, max_iter=None,
                 init_std=None, batch_size="deprecated",
                 cold_start="mean", consistency="bsp", staleness=None, n_shards=None,
                 user_col="user", item_col="item", rating_col="rating", clip=True,
                 random_state=None, client=None, shard_resources=None, checkpoint="auto",
                 checkpoint_every=1, max_recoveries=3, resume=False, progress=None,
                 callbacks=None):
        self.solver, self.rank, self.reg, self.reg_bias = solver, rank, reg, reg_bias
        self.reg_fixed, self.reg_bias_fixed = reg_fixed, reg_bias_fixed
        self.learning_rate, self.decay, self.max_iter = learning_rate, decay, max_iter
        self.init_std, self.batch_size, self.cold_start = init_std, batch_size, cold_start
        self.consistency, self.staleness, self.n_shards = consistency, staleness, n_shards
        self.user_col, self.item_col, self.rating_col = user_col, item_col, rating_col
        self.clip, self.random_state, self.client = clip, random_state, client
        self.checkpoint, self.checkpoint_every = checkpoint, checkpoint_every
        self.max_recoveries, self.resume = max_recoveries, resume
        self.progress, self.callbacks = progress, callbacks
        self.shard_resources = shard_resources

    @property
    def _cols(self) -> tuple:
        return self.user_col, self.item_col, self.rating_col

    def _params(self) -> dict:
        """The parameters of the solver, its defaults for those left None."""
        return {k: (v if getattr(self, k) is None else getattr(self, k))
                for k, v in DEFAULTS[self.solver].items()}

    def _check_params(self) -> None:
        p = self._params()
        if self.solver == "als" and p["reg"] <= 0:
            raise ValueError("solver='als' needs reg > 0 (its normal equations are singular "
                             "otherwise)")
        if self.solver == "sgd" and (p["reg_fixed"] or p["reg_bias_fixed"]):
            raise ValueError("reg_fixed and reg_bias_fixed apply to solver='als' only (sgd "
                             f"applies reg per update); got reg_fixed={p['reg_fixed']}, "
                             f"reg_bias_fixed={p['reg_bias_fixed']}")

    def fit(self, X, y=None, *, users: IdMapping | None = None, items: IdMapping | None = None):
        """Fit on rating triples.

        Parameters
        ----------
        X : ndarray (n, 3), pandas.DataFrame, dask.dataframe.DataFrame or dask.array (n, 3)
            (user, item, rating) rows: an array by position, a dataframe by ``user_col``,
            ``item_col`` and ``rating_col``. A dask dataframe (a dask array becomes one, with
            those columns) is shuffled once by user on the cluster and trained where its
            partitions are. Ids are integers (integral floats such as 1.0 are read as
            integers) or strings, the same rule for every form; one column may not mix
            numbers and strings (ids 1 and "1"; but dask's ``dataframe.convert-string``, on by
            default, makes an object column of a dask dataframe strings first).
        y : array-like (n,), optional
            Ratings; then ``X`` holds only users and items (NumPy or pandas).
        users, items : IdMapping, optional
            The mappings :func:`dask_ps.io.read_ratings` returns: ``X`` then holds their
            codes, integers ``0 .. len(mapping) - 1`` (its user and item columns are not
            mapped again).

        Raises
        ------
        ValueError
            Bad parameters, a missing column (named), no ratings, non-finite ratings, ratings
            in a NumPy array of strings or bytes (scikit-learn's ``check_array(...,
            dtype="numeric")`` words; an object array of numeric strings is converted), or ids
            that are missing, non-integral floats (1.2) or numbers and strings mixed in one
            column, or, with ``users=`` and ``items=``, codes that are not theirs (ids
            instead of codes), naming the column and the row (counted from 0 in the whole
            input, a dask dataframe's too); a dask array not of shape (n, 3).
        TypeError
            Ids that are neither numbers nor strings, or a dask collection other than a
            dataframe or an array.
        DivergenceError
            Training diverged (either solver; an ``init_std`` whose draws overflow the
            factors' dtype too), naming the iteration; the estimator keeps what it had.
        """
        self._validate()
        if not (isinstance(self.batch_size, str) and self.batch_size == "deprecated"):
            warnings.warn("MatrixFactorization(batch_size=...) has no effect (SGD runs one "
                          "clock per item block) and will be removed; leave it out",
                          FutureWarning, stacklevel=2)
        p = self._params()
        with self._model() as model:
            frame, user_map, item_map = self._coded(X, y, users, items)
            with self._partition(model, frame, by="user") as raw:
                data = raw.map(data_.to_part)
            del frame  # the partitions hold the codes now (not the frame for the whole fit)
            with data:
                per_part = np.array(data.reduce(data_.part_stats)).reshape(-1, 4)
                stats = [per_part[:, 0].sum(), per_part[:, 1].sum(), per_part[:, 2].min(),
                         per_part[:, 3].max()]
                if stats[1] == 0:
                    raise DataError("X has no ratings")
                mu = float(stats[0] / stats[1])
                # the rows of the item table and of the users are these ids' (sorted)
                fit_id = dict(estimator=type(self).__name__, solver=self.solver,
                              n_users=len(user_map), n_items=len(item_map),
                              user_ids=checksum(user_map.ids), item_ids=checksum(item_map.ids))
                loop = self._epoch_loop(model, f"MatrixFactorization({self.solver})",
                                        p["max_iter"], advice="", fit_id=fit_id)
                user_factors, user_bias, V, history = train(
                    model, data, n_users=len(user_map), n_items=len(item_map), mu=mu,
                    solver=self.solver, rank=p["rank"], reg=p["reg"], reg_bias=p["reg_bias"],
                    reg_fixed=p["reg_fixed"], reg_bias_fixed=p["reg_bias_fixed"],
                    learning_rate=p["learning_rate"], decay=p["decay"],
                    max_iter=p["max_iter"], init_std=p["init_std"],
                    consistency=self.consistency,
                    staleness=self.staleness, random_state=self._seed(), loop=loop)
                if history:
                    history[-1].update(data.report())
        k = p["rank"]
        self.user_ids_, self.item_ids_ = user_map.ids, item_map.ids
        self.user_factors_, self.user_bias_ = user_factors, user_bias  # float64
        # float64 for every solver (SGD's item table is float32): one copy each, cast in it
        self.item_factors_ = np.ascontiguousarray(V[:, :k], dtype=np.float64)
        self.item_bias_ = V[:, k].astype(np.float64)
        self.global_mean_, self.rating_range_ = mu, (float(stats[2]), float(stats[3]))
        self.history_, self.n_iter_ = history, sum(1 for h in history if "loss" in h)
        return self

    def _coded(self, X, y, users, items) -> tuple:
        """``(frame of codes, user mapping, item mapping)`` of the input."""
        if (users is None) != (items is None):
            raise ValueError("give both users= and items= (the mappings read_ratings returns)"
                             " or neither")
        if is_dask(X):
            if y is not None:
                raise ValueError(f"with a dask X, the ratings must be its column "
                                 f"{self.rating_col!r} or its third column (y must be None)")
            if getattr(X, "dtype", np.dtype(float)).kind in data_.NOT_NUMERIC_KINDS and \
                    X.ndim == 2 and X.shape[1] == 3:  # its ratings: strings, as NumPy's
                raise DataError(f"X column 2 (rating): {data_.strings_refused(X.dtype)}")
            X = self._dask_frame(X, 3)
            missing = [c for c in self._cols if c not in X.columns]
            if missing:
                raise ValueError(f"X has no column {missing[0]!r}; its columns are "
                                 f"{list(X.columns)}")
            sizes = {}
            if users is None:
                try:
                    X, users, items = encode_ratings(X, user=self.user_col,
                                                     item=self.item_col,
                                                     rating=self.rating_col, timestamp=None)
                except DataError as err:  # an id, named as the pandas path names it
                    if str(err).startswith("column "):
                        raise DataError(f"X {err}") from None
                    raise
            else:
                sizes = dict(n_users=len(users), n_items=len(items))
            # checked before the shuffle by user (in the same tasks), where a partition's
            # row is known; _partition names it in the whole input
            checked = X.map_partitions(data_.checked_part, self._cols, **sizes,
                                       meta=dict(user="i8", item="i8", rating="f8"))
            return checked, users, items
        u, i, r = data_.triples(X, y, self._cols, True)
        if r.shape[0] == 0:
            raise DataError("X has no ratings")
        if users is None:
            users, items = IdMapping(np.unique(u)), IdMapping(np.unique(i))
            return data_.coded_frame(u, i, r, users, items), users, items
        import pandas as pd

        for j, (ids, n, param) in enumerate(((u, len(users), "users"),
                                             (i, len(items), "items"))):
            _, bad = data_.code_values(ids, n, param)
            if bad is not None:
                where = f"{self._cols[j]!r}" if hasattr(X, "columns") else \
                    f"{j} ({data_.COLUMNS[j]})"
                raise DataError(f"X column {where}: " + bad[1].format(row=bad[0]))
        return pd.DataFrame({"user": u, "item": i, "rating": r}), users, items

    def _partition(self, model, data, **kwargs):
        """:meth:`PSEstimator._partition`; a bad row of a dask input (found by
        :func:`~._mf_data.checked_part` as its partitions are shuffled) is named by its row
        in the whole input, as in pandas input (the partitions before its are counted then,
        and only then)."""
        try:
            return super()._partition(model, data, **kwargs)
        except DataError as err:
            raise data_.whole_row(err, data_.rows_counter(data, compute=None if model.is_local
                                  else lambda c: model.client.compute(c).result())) from None

    def _dask_frame(self, X, width: int, frame: bool = True):
        """A dask dataframe ``X`` as it is, a dask array of shape (n, ``width``) or (n, 3) as
        a dask dataframe of the columns ``user_col``, ``item_col``[, ``rating_col``] (or, not
        ``frame``, as an array one chunk wide).

        Raises
        ------
        ValueError
            A dask array of another shape.
        TypeError
            Another dask collection (a series, a bag, a delayed value).
        """
        import dask.array as da
        import dask.dataframe as dd

        if isinstance(X, dd.DataFrame):
            return X
        if not isinstance(X, da.Array):
            raise TypeError(f"a dask X must be a dask dataframe (columns {list(self._cols)})"
                            f" or a dask array of (user, item, rating) rows; got "
                            f"{type(X).__name__}")
        if X.ndim != 2 or X.shape[1] not in (width, 3):
            raise ValueError(f"a dask array X must have shape (n, {width}) (user, item"
                             f"{', rating' if width == 3 else ''}), got shape {X.shape}")
        X = X.rechunk({1: -1})
        return dd.from_dask_array(X, columns=list(self._cols[:X.shape[1]])) if frame else X

    def _check_loaded(self) -> None:
        """Refuse ids, factors and biases that do not fit together, or a rating range
        upside down (:func:`._loaded.check_ratings_model`; prediction indexed the factors
        by the ids' codes without bounds checks). Raises ValueError naming the attribute."""
        check_ratings_model(self)

    # -- prediction ---------------------------------------------------------------------
    def _indices(self, X, warn: bool = True) -> tuple[np.ndarray, np.ndarray]:
        users, items, _ = data_.triples(X, None, self._cols, False)
        uc = IdMapping.from_sorted(self.user_ids_, "user_ids_").codes(users)
        ic = IdMapping.from_sorted(self.item_ids_, "item_ids_").codes(items)
        self._cold(users, items, uc, ic, warn)
        return uc, ic

    def _cold(self, users, items, uc, ic, warn: bool) -> None:
        n_u, n_i = int((uc < 0).sum()), int((ic < 0).sum())
        if not (n_u or n_i):
            return
        if self.cold_start == "raise":
            ids, codes = (users, uc) if n_u else (items, ic)
            which, hint = self._unseen("user" if n_u else "item",
                                       np.asarray(ids)[np.argmax(codes < 0)])
            raise ValueError(f"{which} was not seen at fit ({n_u} rows with an unseen user, "
                             f"{n_i} with an unseen item; cold_start='raise'){hint}")
        if warn:  # evaluate() warns once, with the counts of all its blocks
            self._warn_unseen(n_u, n_i, "predicted", stacklevel=5)

    def _warn_unseen(self, n_u: int, n_i: int, done: str, stacklevel: int) -> None:
        """The UserWarning of :meth:`predict` and :meth:`evaluate` (``done``: "predicted",
        "scored") about ``n_u`` rows with a user and ``n_i`` with an item not seen at fit
        (none: no warning); ``stacklevel`` counts this method."""
        if not (n_u or n_i):
            return
        how = (f"{done} by cold_start={self.cold_start!r}" if self.cold_start != "drop" or
               done == "predicted" else "left out by cold_start='drop'")
        warnings.warn(f"{n_u} rows with a user and {n_i} with an item not seen at fit: {how}",
                      UserWarning, stacklevel=stacklevel)

    def _unseen(self, kind: str, first) -> tuple[str, str]:
        """``(name, hint)`` of an id not seen at fit, as the messages say them: ``"user 7"``,
        and, for an id of another kind than the fit's (``"u1"`` for integer ids), a hint."""
        if isinstance(first, np.generic):  # read as written: 7, not np.int64(7)
            first = first.item()
        integers = (self.user_ids_ if kind == "user" else self.item_ids_).dtype.kind == "i"
        hint = "" if integers == (not isinstance(first, str)) else (
            f"; the {kind} ids at fit are {'integers' if integers else 'strings'}")
        return f"{kind} {first!r}", hint

    def _predict_indices(self, u: np.ndarray, i: np.ndarray) -> np.ndarray:
        low, high = self.rating_range_ if self.clip else (-np.inf, np.inf)
        out = np.empty(u.shape[0])
        predict_pairs(u, i, self.user_factors_, self.user_bias_, self.item_factors_,
                      self.item_bias_, self.global_mean_, low, high, out)
        if self.cold_start in ("nan", "drop"):
            out[(u < 0) | (i < 0)] = np.nan
        return out

    def predict(self, X):
        """Predicted ratings of (user, item) rows (the cold-start rule for unseen ids).

        Parameters
        ----------
        X : ndarray (n, 2) or (n, 3), pandas or dask dataframe, or dask array (n, 2) or (n, 3)
            Users and items (a third column, e.g. the true rating, is ignored).

        Returns
        -------
        ndarray (n,) float64, or a dask Series for a dask dataframe and a dask array for a
        dask array (which do not warn about unseen ids)

        Raises
        ------
        ValueError
            A bad id (missing, a non-integral float, numbers and strings mixed), naming the
            column and the row (from 0 in the whole input; for a dask input when computed,
            the first bad row, the partitions before it counted then); an unseen id under
            ``cold_start="raise"``.
        """
        check_is_fitted(self)
        if not is_dask(X):
            return self._predict_indices(*self._indices(X))
        import dask

        # counts the rows before a partition with a bad row, in its task (and only then),
        # checking them as the task does (an array's columns by position)
        check = functools.partial(data_.triples, y=None, cols=self._cols, need_ratings=False,
                                  as_array=not hasattr(X, "columns"))
        rows = dask.delayed(data_.RowsFromTask(self._dask_frame(X, 2), check))
        if hasattr(X, "columns"):
            return X.map_partitions(_predict_frame, self, rows, meta=(None, "float64"))
        X = self._dask_frame(X, 2, frame=False)
        return X.map_blocks(_predict_block, self, rows, drop_axis=1, dtype=np.float64,
                            meta=np.empty(0))

    def evaluate(self, X, y=None) -> dict:
        """Error metrics on rated (user, item) rows, with counts of cold-start rows.

        Parameters
        ----------
        X : ndarray (n, 3), pandas or dask dataframe, or dask array (n, 3)
            (user, item, rating) rows, as :meth:`fit` reads them; or users and items with
            the ratings in ``y`` (NumPy or pandas).
        y : array-like (n,), optional

        Returns
        -------
        dict
            ``rmse``, ``mae``, ``n_ratings`` (rows scored), ``n_unseen_users`` and
            ``n_unseen_items``.

        Warns
        -----
        UserWarning
            Rows with a user or an item not seen at fit, as :meth:`predict` warns: how many,
            and how ``cold_start`` scored them (``"drop"``: left out).
        """
        check_is_fitted(self)
        if is_dask(X):
            import dask

            X = self._dask_frame(X, 3)
            try:
                sums = np.sum(dask.compute(*[dask.delayed(data_.in_partition)(
                    data_.evaluate_sums, k, self, d, None)
                    for k, d in enumerate(X.to_delayed())]), axis=0)
            except DataError as err:  # a bad row: named in the whole input, as in fit
                raise data_.whole_row(err, data_.rows_counter(X, functools.partial(
                    data_.triples, y=None, cols=self._cols, need_ratings=True))) from None
        else:
            sums = data_.evaluate_sums(self, X, y)
        sse, sae, n, cold_u, cold_i = sums
        if n == 0:
            raise ValueError("X has no ratings to evaluate")
        self._warn_unseen(int(cold_u), int(cold_i), "scored", stacklevel=3)
        return dict(rmse=float(np.sqrt(sse / n)), mae=float(sae / n), n_ratings=int(n),
                    n_unseen_users=int(cold_u), n_unseen_items=int(cold_i))

    def score(self, X, y=None) -> float:
        """Negative RMSE (scikit-learn's "greater is better" convention)."""
        return -self.evaluate(X, y)["rmse"]

    def recommend(self, user, n: int = 10, exclude=None) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` items of highest predicted rating for ``user``.

        A user not seen at fit (also a string that is not an integer, ``"u1"``, for a model
        of integer ids; ``"1"`` is the id 1, as in :meth:`~dask_ps.io.IdMapping.codes`)
        follows ``cold_start`` as in :meth:`predict`: "mean" ranks the items by
        ``mu + b_i``, "nan" and "drop" recommend nothing (empty arrays), and each warns;
        "raise" raises ValueError naming the user.

        Parameters
        ----------
        user : int or str
            One user id.
        n : int, default 10
        exclude : array-like of item ids, or one item id, optional
            Items left out (e.g. the ones the user rated); ids not seen at fit are ignored.

        Returns
        -------
        item_ids : ndarray (min(n, n_candidates),)
        scores : ndarray float64, decreasing (unclipped predictions)

        Raises
        ------
        ValueError
            ``n`` not a positive integer (a boolean neither); an unseen ``user`` under
            ``cold_start="raise"``, naming it (and the kind of the fit's ids when it is of
            another kind).
        TypeError
            ``user`` not one id (a list of users: call ``recommend`` for each), ``exclude``
            of more than one dimension, or ids that are neither numbers nor strings.

        Warns
        -----
        UserWarning
            An unseen ``user`` under the other modes, naming it and what is recommended.
        """
        check_is_fitted(self)
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if np.ndim(user) != 0 or isinstance(user, (set, frozenset, dict)):
            raise TypeError(f"user must be one user id (an int or a str), got "
                            f"{type(user).__name__} {_shown(user)}; call recommend for each "
                            f"user")
        ids = data_.as_ids(np.array([user]), "user")
        code = int(IdMapping.from_sorted(self.user_ids_, "user_ids_").codes(ids)[0])
        # float64 (a model saved by an earlier version may hold float32 item rows)
        scores = np.add(self.item_bias_, self.global_mean_, dtype=np.float64)
        if code >= 0:
            scores = scores + self.user_bias_[code] + self.item_factors_ @ self.user_factors_[code]
        else:
            which, hint = self._unseen("user", ids[0])
            if self.cold_start == "raise":
                raise ValueError(f"{which} was not seen at fit, nothing to recommend "
                                 f"(cold_start='raise'){hint}")
            what = ("ranks the items by mu + b_i" if self.cold_start == "mean" else
                    "recommends nothing")
            warnings.warn(f"{which} was not seen at fit: cold_start={self.cold_start!r} "
                          f"{what}{hint}", UserWarning, stacklevel=2)
            if self.cold_start in ("nan", "drop"):
                return self.item_ids_[:0], np.zeros(0)
        keep = np.ones(scores.shape[0], bool)
        if exclude is not None:
            if isinstance(exclude, (set, frozenset)):
                exclude = list(exclude)
            if np.ndim(exclude) > 1:
                raise TypeError(f"exclude must be item ids (a 1-d array-like) or one item id,"
                                f" got {np.ndim(exclude)} dimensions")
            ex = IdMapping.from_sorted(self.item_ids_, "item_ids_").codes(
                data_.as_ids(np.atleast_1d(np.asarray(exclude)), "exclude"))
            keep[ex[ex >= 0]] = False
        cand = np.flatnonzero(keep)
        n = min(int(n), cand.shape[0])
        top = cand[np.argpartition(-scores[cand], n - 1)[:n]] if n else cand[:0]
        top = top[np.argsort(-scores[top], kind="stable")]
        return self.item_ids_[top], scores[top]


def _shown(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _predict_indices(est: MatrixFactorization, X) -> np.ndarray:
    # lazy, on the workers: no warning there (evaluate() counts the cold-start rows)
    return est._predict_indices(*est._indices(X, warn=False))


def _predict_part(X, k, est: MatrixFactorization, rows) -> np.ndarray:
    try:
        return data_.in_partition(_predict_indices, k, est, X)
    except DataError as err:  # a bad row: named in the whole input
        raise data_.whole_row(err, rows) from None


def _predict_frame(df, est: MatrixFactorization, rows, partition_info=None):
    import pandas as pd

    k = partition_info["number"] if partition_info else "?"
    return pd.Series(_predict_part(df, k, est, rows), index=df.index)


def _predict_block(block, est: MatrixFactorization, rows, block_info=None):
    k = block_info[0]["chunk-location"][0] if block_info else "?"
    return _predict_part(block, k, est, rows)
