"""A fitted GBDT ensemble as flat arrays: what an estimator keeps (``booster_``), and what
:mod:`dask_ps.saving` saves and loads."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._gbdt_ensemble import Ensemble, flat_problem

__all__ = ["Booster"]


class Booster(NamedTuple):
    """A fitted ensemble as flat arrays (saved and loaded by :mod:`dask_ps.saving`).

    Node arrays (n_nodes,) over all trees: ``feature`` (int32, -1 at leaves),
    ``threshold`` (float64: ``x <= threshold`` goes left), ``threshold_bin`` (int32),
    ``default_left`` (uint8: where NaN goes), ``is_cat`` (uint8), ``left``/``right``
    (int32 absolute node indices, -1 at leaves), ``value`` (float64 leaf value, learning
    rate included), ``gain`` (float64), ``count`` (float64 training rows), ``cat_start``
    (int64), ``cat_len`` (int32) into ``cat_words`` (uint32 bitsets of the categories that
    go left); per tree ``tree_start`` (int64 (n_trees + 1,)) and ``tree_class`` (int32);
    ``base_score`` (float64 (n_outputs,)).
    """

    base_score: np.ndarray
    tree_start: np.ndarray
    tree_class: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    threshold_bin: np.ndarray
    default_left: np.ndarray
    is_cat: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    count: np.ndarray
    cat_start: np.ndarray
    cat_len: np.ndarray
    cat_words: np.ndarray

    @classmethod
    def of(cls, ensemble: Ensemble) -> Booster:
        """The flat arrays of a grown :class:`~._gbdt_ensemble.Ensemble`: its (cached)
        ``Ensemble.flat`` node arrays, shared, and a copy of ``base_score``."""
        f = ensemble.flat()
        return cls(ensemble.base_score.copy(), **{k: f[k] for k in cls._fields[1:]})

    def ensemble(self, n_features: int) -> Ensemble:
        """The :class:`~._gbdt_ensemble.Ensemble` these arrays hold, for ``n_features`` input
        columns (what prediction walks)."""
        return Ensemble.from_flat(n_features, self.base_score.shape[0], self.base_score,
                                  self._asdict())

    def problem(self, n_features: int, n_outputs: int) -> str | None:
        """What makes these arrays no fitted ensemble of ``n_outputs`` outputs over
        ``n_features`` columns (a damaged or edited model file), or None: a ``base_score``
        of another length, or trees prediction could not walk
        (:func:`~._gbdt_ensemble.flat_problem`)."""
        if np.shape(self.base_score) != (n_outputs,):
            return (f"base_score has shape {np.shape(self.base_score)}, the model "
                    f"{n_outputs} output(s)")
        return flat_problem(self._asdict(), n_features, n_outputs)
