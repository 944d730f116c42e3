"""``eval_set`` of :class:`~dask_ps.LogisticRegression`: scored after every epoch.

The eval data is partitioned and encoded once per fit. After each epoch one job runs a step
on every eval partition, where it lives: it pulls the weights of the columns its rows touch
(from the table as the solver lays it out) and returns its margins; the driver turns them into
the log-loss, the accuracy and, for two classes, the ROC AUC.
"""

from __future__ import annotations

import numpy as np

from ..partitions.inputs import NoRows, UnknownChunks
from . import _logistic_data as D
from ._logistic_kernels import decision
from ._stochastic import make_blocks

__all__ = ["Evaluator"]


def _margins_step(ps, part, n_features: int, to_weights) -> tuple:
    def build():
        X, Y = part.load()
        return make_blocks(X, Y, 1, n_features, 0.0, 0)[0]

    blk = part.cached("eval-columns", build, lambda b: sum(a.nbytes for a in b))
    W = to_weights(ps.pull("w", blk.keys))
    out = np.empty((blk.indptr.shape[0] - 1, W.shape[1]))
    decision(blk.indptr, blk.indices, blk.data, np.ascontiguousarray(W[:-1]), W[-1], out)
    return out, blk.Y


class Evaluator:
    """``evaluate(epoch, to_weights) -> dict`` of eval metrics, for :func:`.logistic.train`.

    Parameters
    ----------
    model : PSModel
    est : LogisticRegression
    eval_set : list of (X, y)
    labels : ndarray
        The fit's classes.
    n_out : int
    n_features : int
        Columns of ``X`` (before hashing).

    Raises
    ------
    ValueError
        Naming ``eval_set[i]``: not an ``(X, y)`` pair, another number of features than the
        training data's, an ``X`` of no rows (also a dask one found empty once partitioned),
        or (on a cluster, as for the training data) a dask array of unknown chunk sizes,
        saying what to call (:meth:`~dask_ps.partitions.inputs.UnknownChunks.named`).
    """

    def __init__(self, model, est, eval_set, labels: np.ndarray, n_out: int,
                 n_features: int) -> None:
        self.model, self.labels = model, labels
        self.n_features = est.n_hashed_features or n_features
        self.parts = []
        for i, pair in enumerate(eval_set):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(f"eval_set[{i}] must be an (X, y) pair")
            X, y = pair
            if X.shape[1] != n_features:
                raise ValueError(f"eval_set[{i}]: X has {X.shape[1]} features, the training "
                                 f"data {n_features}")
            try:
                raw = est._partition(model, (X, y))
            except NoRows:
                raise ValueError(f"eval_set[{i}]: X has no rows (0 samples): its scores "
                                 f"would be undefined; give an eval set with rows") from None
            except UnknownChunks as exc:  # as the training data's (on a cluster)
                raise exc.named(f"eval_set[{i}]") from None
            with raw:
                self.parts.append(raw.map(D.encode_part, labels, n_out, est.n_hashed_features,
                                          where=f"eval_set[{i}]", with_start=True))

    def __call__(self, epoch: int, to_weights) -> dict:
        from sklearn.metrics import roc_auc_score

        n_features = self.n_features

        def step(ps, part):
            return _margins_step(ps, part, n_features, to_weights)

        out = {}
        for i, data in enumerate(self.parts):
            results = self.model.fit_partitions(step, data)[0]
            z = np.concatenate([r[0] for r in results])
            Y = np.concatenate([r[1] for r in results])
            key = "" if len(self.parts) == 1 else f"{i}_"
            if z.shape[1] == 1:
                p = D.proba_from_margins(z[:, 0])
                y = Y[:, 0].astype(int)
                out[f"{key}auc"] = float(roc_auc_score(y, p[:, 1])) if 0 < y.sum() < len(y) \
                    else float("nan")
            else:
                p, y = D.proba_from_margins(z), Y.argmax(axis=1)
            eps = 1e-15
            out[f"{key}log_loss"] = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y],
                                                                 eps, 1.0))))
            out[f"{key}accuracy"] = float(np.mean(p.argmax(axis=1) == y))
        return out

    def release(self) -> None:
        for data in self.parts:
            data.release()
