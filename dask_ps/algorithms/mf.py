"""Biased matrix factorisation of explicit ratings on the parameter server: SGD and ALS.

The model is ``r_ui ≈ mu + b_u + b_i + p_u · q_i`` (Koren, Bell & Volinsky, 2009). The ratings
are partitioned by user; user factors stay next to their partition, item factors are a PS
table (training in :mod:`._mf_train`, steps in :mod:`._mf_steps`, prediction in
:mod:`._mf_predict`).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..exceptions import DataError
from ..io.ids import IdMapping
from ..io.ratings import encode_ratings
from ..partitions.inputs import is_dask
from . import _mf_data as data_
from ._base import COMMON_CONSTRAINTS, Interval, PSEstimator, StrOptions, checksum, history_doc
from ._loaded import check_ratings_model
from ._mf_predict import RatingsPrediction
from ._mf_train import check_room, train
from ._renamed import DEPRECATED, renamed_value

__all__ = ["MatrixFactorization", "train"]

#: The solvers (their defaults below).
SOLVERS = ("sgd", "als")
DEFAULTS = {
    # tuned on MovieLens-100k u1.base -> u1.test (see the README section)
    "sgd": dict(n_components=200, reg=0.05, reg_bias=0.02, reg_fixed=0.0, reg_bias_fixed=0.0,
                learning_rate=0.06, decay=0.82, max_iter=20, init_std=0.01),
    # the fixed parts chosen on u1, ua and two sparse samples of MovieLens-100k (README)
    "als": dict(n_components=50, reg=0.1, reg_bias=0.01, reg_fixed=5.0, reg_bias_fixed=3.0,
                learning_rate=None, decay=None, max_iter=15, init_std=0.1),
}


@history_doc
class MatrixFactorization(RatingsPrediction, PSEstimator):
    """Biased matrix factorisation of explicit ratings, trained on a dask_ps parameter server.

    Predicts ``r_ui = mu + b_u + b_i + p_u · q_i`` (global mean, user and item biases,
    ``n_components`` factors). Item factors and biases live on the PS; the ratings are
    partitioned by user and each user's factors stay next to its partition (see
    :mod:`dask_ps.algorithms._mf_steps`).

    Parameters
    ----------
    solver : {"sgd", "als"}, default "sgd"
        "sgd": Funk/Koren SGD (Surprise's ``SVD``). "als": alternating least squares with
        weighted-λ regularisation (Zhou et al. 2008), biases solved with the factors.
    n_components : int, optional
        Latent factors per user and item (the rank of ``p_u · q_i``; scikit-learn's name, as
        in ``NMF``). Default 200 (sgd), 50 (als).
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
    rank : int, default "deprecated"
        The deprecated name of ``n_components`` (Spark's name), renamed in 0.1 and to be
        removed in 0.3: a fit given it warns (``FutureWarning``) and uses it; given with
        another ``n_components`` it raises ValueError.
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
        ``"user"`` (n_users, n_components + 1) filled for each save and restore and emptied
        (its memory freed) after it, so that ``resume`` goes on
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
    user_factors_ : ndarray (n_users, n_components) float64
    item_factors_ : ndarray (n_items, n_components) float64
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
        "n_components": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "rank": [Interval(numbers.Integral, 1, None, closed="left"), None,
                 StrOptions({DEPRECATED})],
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

    #: Renamed parameters, old name to new (:mod:`._renamed`).
    _renamed_params = {"rank": "n_components"}

    def __init__(self, *, solver="sgd", n_components=None, reg=None, reg_bias=None, reg_fixed=None,
                 reg_bias_fixed=None, learning_rate=None, decay=None, max_iter=None,
                 init_std=None, batch_size="deprecated", rank=DEPRECATED,
                 cold_start="mean", consistency="bsp", staleness=None, n_shards=None,
                 user_col="user", item_col="item", rating_col="rating", clip=True,
                 random_state=None, client=None, shard_resources=None, checkpoint="auto",
                 checkpoint_every=1, max_recoveries=3, resume=False, progress=None,
                 callbacks=None):
        self.solver, self.n_components, self.rank = solver, n_components, rank
        self.reg, self.reg_bias = reg, reg_bias
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

    def _params(self) -> dict:
        """The parameters of the solver, its defaults for those left None (``n_components``
        given as ``rank``, its deprecated name, included)."""
        return {k: (v if renamed_value(self, k) is None else renamed_value(self, k))
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
        MemoryLimitError
            A :class:`MemoryError`, before the data is partitioned: ``n_components`` makes
            the factor tables of these users and items larger than half the memory available
            in this process, or than half a worker's memory limit (naming the bytes; "use a
            smaller n_components").
        FutureWarning
            (A warning) ``rank``, the deprecated name of ``n_components``, is given.
        """
        self._validate()
        if not (isinstance(self.batch_size, str) and self.batch_size == "deprecated"):
            warnings.warn("MatrixFactorization(batch_size=...) has no effect (SGD runs one "
                          "clock per item block) and will be removed; leave it out",
                          FutureWarning, stacklevel=2)
        p = self._params()
        with self._model() as model:
            frame, user_map, item_map = self._coded(X, y, users, items)
            # before the data is partitioned: factors that cannot fit (MemoryLimitError)
            check_room(model, n_users=len(user_map), n_items=len(item_map),
                       n_components=p["n_components"], solver=self.solver)
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
                    solver=self.solver, n_components=p["n_components"], reg=p["reg"],
                    reg_bias=p["reg_bias"],
                    reg_fixed=p["reg_fixed"], reg_bias_fixed=p["reg_bias_fixed"],
                    learning_rate=p["learning_rate"], decay=p["decay"],
                    max_iter=p["max_iter"], init_std=p["init_std"],
                    consistency=self.consistency,
                    staleness=self.staleness, random_state=self._seed(), loop=loop)
                if history:
                    history[-1].update(data.report())
        k = p["n_components"]
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

    def _check_loaded(self) -> None:
        """Refuse ids, factors and biases that do not fit together, or a rating range
        upside down (:func:`._loaded.check_ratings_model`; prediction indexed the factors
        by the ids' codes without bounds checks). Raises ValueError naming the attribute."""
        check_ratings_model(self)
