"""Online learning: an estimator kept fresh on a stream of mini-batches.

:func:`learn_online` feeds each batch of a stream (an iterator of ``(X, y)``: files as they
arrive, dataframes, ...) to the estimator's ``partial_fit`` — one pass over the batch from
the current weights and update-rule state — after scoring the batch with the model as it
stood before seeing it: progressive validation (Blum, Kalai & Langford, COLT 1999; McMahan
et al., KDD 2013, section 5.1), the honest online estimate of the loss on unseen data. Every
``version_every`` batches the estimator is written to a new version file
(:func:`dask_ps.saving.save_estimator`, an atomic rename), which a serving process can load
while training goes on. Version numbers go on after the highest one already in the folder,
so a learner restarted on it (e.g. from its last version after a crash) never overwrites a
version and the newest name is always the newest model.
"""

from __future__ import annotations

import os
import re
from typing import Iterable

import numpy as np

from ..partitions.inputs import is_dask
from ..saving import save_estimator

__all__ = ["last_version", "learn_online", "version_path"]

_VERSION_NAME = re.compile(r"version-(\d+)\.npz")


def version_path(versions: str, batch: int) -> str:
    """The file of version number ``batch`` under ``versions``:
    ``<versions>/version-000012.npz``.

    :func:`learn_online` numbers a version by the batches trained since the folder's first
    one: the highest number already in the folder when it started (:func:`last_version`)
    plus the batches of its own stream; names sort in training order."""
    return f"{os.fspath(versions).rstrip('/')}/version-{int(batch):06d}.npz"


def last_version(versions: str) -> int:
    """The highest number of the version files (:func:`version_path` names) in the folder
    ``versions`` (local or fsspec URL); 0 when it has none or does not exist. Other files,
    such as an interrupted save's temporary file, are not versions."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(os.fspath(versions))
    try:
        names = fs.ls(root, detail=False)
    except FileNotFoundError:
        return 0
    found = [_VERSION_NAME.fullmatch(str(n).rstrip("/").rsplit("/", 1)[-1]) for n in names]
    return max((int(m.group(1)) for m in found if m), default=0)


def _progressive(est, X, y, classes) -> dict:
    """Log-loss, AUC (two classes) and accuracy of the current model on a batch it has not
    seen; NaN fields before the first fit."""
    from sklearn.metrics import log_loss, roc_auc_score

    if not hasattr(est, "classes_"):
        return {"progressive_log_loss": float("nan"), "progressive_accuracy": float("nan")}
    proba = est.predict_proba(X)
    if is_dask(proba) or is_dask(y):
        import dask

        proba, y = dask.compute(proba, y)
    y = np.asarray(y).ravel()
    labels = est.classes_
    out = {"progressive_log_loss": float(log_loss(y, proba, labels=labels)),
           "progressive_accuracy": float(np.mean(labels[proba.argmax(axis=1)] == y))}
    if labels.shape[0] == 2 and np.unique(y).shape[0] == 2:
        out["progressive_auc"] = float(roc_auc_score(y == labels[1], proba[:, 1]))
    return out


def learn_online(estimator, batches: Iterable, *, classes=None, version_every: int | None = None,
                 versions: str | None = None, on_batch=None):
    """Train ``estimator`` on a stream of mini-batches with progressive validation, saving a
    model version every ``version_every`` batches without stopping.

    Parameters
    ----------
    estimator : LogisticRegression or FactorizationMachineClassifier
        With a stochastic solver; fitted already (it continues) or not.
    batches : iterable of (X, y)
        Any input ``partial_fit`` takes (NumPy, scipy.sparse, dask arrays such as
        :func:`dask_ps.io.read_ctr` gives); consumed lazily, one batch at a time.
    classes : array-like, optional
        All the classes of the stream (scikit-learn's ``partial_fit`` convention); needed
        when the first batch may lack one.
    version_every : int, optional
        Save a version after every this many batches (with ``versions``).
    versions : str, optional
        Folder (local or fsspec URL) of the versions, :func:`version_path` names. When it
        holds versions already (a learner restarted on it), the numbers go on after the
        highest (:func:`last_version`): after a folder ending at ``version-000006.npz``,
        ``version_every=2`` writes ``version-000008.npz``, ``version-000010.npz``, ...; a
        version file is never overwritten.
    on_batch : callable, optional
        ``on_batch(record)`` after each batch (e.g. to log or to stop: a True return ends the
        stream).

    Returns
    -------
    estimator
        Its ``history_`` holds one record per batch (the epoch ``partial_fit`` ran): ``loss``
        (the progressive loss inside the batch, each row scored before its own step), and
        ``batch``, ``rows``, ``progressive_log_loss``, ``progressive_accuracy``,
        ``progressive_auc`` (two classes) of the batch scored before training on it, and
        ``version`` (the file written after it, if one was). ``batch`` counts the batches of
        this call (from 1).

    Raises
    ------
    ValueError
        ``version_every`` without ``versions`` (or the reverse), a batch that is not an
        ``(X, y)`` pair, or what ``partial_fit`` refuses.
    FileExistsError
        The next version's file appeared meanwhile (another learner writes to the folder);
        nothing is overwritten.

    References
    ----------
    A. Blum, A. Kalai, J. Langford, "Beating the hold-out: bounds for k-fold and progressive
    cross-validation", COLT 1999; H. B. McMahan et al., "Ad Click Prediction: a View from the
    Trenches", KDD 2013.
    """
    if (version_every is None) != (versions is None):
        raise ValueError("version_every and versions go together: give both or neither")
    if version_every is not None and (int(version_every) != version_every or version_every < 1):
        raise ValueError(f"version_every must be an integer >= 1, got {version_every!r}")
    if versions is not None and "://" not in str(versions):
        os.makedirs(versions, exist_ok=True)
    first = last_version(versions) if versions is not None else 0
    for b, batch in enumerate(batches, start=1):
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise ValueError(f"batch {b} of the stream is a {type(batch).__name__}, not an "
                             f"(X, y) pair")
        X, y = batch
        record = {"batch": b, "rows": int(X.shape[0]), **_progressive(estimator, X, y, classes)}
        estimator.partial_fit(X, y, classes=classes)
        estimator.history_[-1].update(record)
        if version_every is not None and b % version_every == 0:
            _save_version(estimator, version_path(versions, first + b))
        if on_batch is not None and on_batch(estimator.history_[-1]):
            break
    return estimator


def _save_version(estimator, path: str) -> None:
    """:func:`save_estimator` to ``path``, its last ``history_`` record naming it (the
    version holds that record too), refusing to replace a file there; on failure the
    record names no version."""
    import fsspec

    fs, where = fsspec.core.url_to_fs(path)
    if fs.exists(where):
        raise FileExistsError(f"{path} exists already: another learner writes versions to "
                              f"this folder; not overwritten")
    record = estimator.history_[-1]
    record["version"] = path
    try:
        save_estimator(estimator, path)
    except BaseException:
        del record["version"]
        raise
