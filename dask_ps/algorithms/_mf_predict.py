"""The prediction side of :class:`~dask_ps.MatrixFactorization`: reading (user, item) rows
(NumPy, pandas, dask) into the codes of the fitted ids, the cold-start rule for ids not seen
at fit, and :meth:`~RatingsPrediction.predict`, :meth:`~RatingsPrediction.evaluate`,
:meth:`~RatingsPrediction.score` and :meth:`~RatingsPrediction.recommend` over the fitted
attributes (``user_ids_``, ``item_ids_``, factors, biases, ``global_mean_``,
``rating_range_``). Training is in :mod:`.mf` and :mod:`._mf_train`.
"""

from __future__ import annotations

import functools
import numbers
import warnings

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..exceptions import DataError
from ..io.ids import IdMapping
from ..partitions.inputs import is_dask
from . import _mf_data as data_
from ._mf_kernels import predict_pairs

__all__ = ["RatingsPrediction"]


class RatingsPrediction:
    """Mixin of :class:`~dask_ps.MatrixFactorization`: its input columns and prediction
    methods, reading the estimator's parameters (``user_col``, ``item_col``,
    ``rating_col``, ``cold_start``, ``clip``) and fitted attributes."""

    @property
    def _cols(self) -> tuple:
        return self.user_col, self.item_col, self.rating_col

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


def _predict_indices(est: RatingsPrediction, X) -> np.ndarray:
    # lazy, on the workers: no warning there (evaluate() counts the cold-start rows)
    return est._predict_indices(*est._indices(X, warn=False))


def _predict_part(X, k, est: RatingsPrediction, rows) -> np.ndarray:
    try:
        return data_.in_partition(_predict_indices, k, est, X)
    except DataError as err:  # a bad row: named in the whole input
        raise data_.whole_row(err, rows) from None


def _predict_frame(df, est: RatingsPrediction, rows, partition_info=None):
    import pandas as pd

    k = partition_info["number"] if partition_info else "?"
    return pd.Series(_predict_part(df, k, est, rows), index=df.index)


def _predict_block(block, est: RatingsPrediction, rows, block_info=None):
    k = block_info[0]["chunk-location"][0] if block_info else "?"
    return _predict_part(block, k, est, rows)
