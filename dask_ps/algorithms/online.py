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

A :class:`~dask_ps.LatentDirichletAllocation` learns a stream of documents alike (batches
``X`` or ``(X, vocabulary)``, no labels): each batch is scored by its perplexity under the
topics before it, as the online LDA of Hoffman, Blei & Bach (NIPS 2010) and gensim's
``LdaModel.update`` report each new mini-batch's (:mod:`._online_lda`).
"""

from __future__ import annotations

import itertools
import logging
import numbers
import os
import re
import warnings
from typing import Iterable

import numpy as np
from sklearn.base import is_classifier

from ..io._blocks import source_paths
from ..partitions.inputs import is_dask
from ..saving import save_estimator, saved_params
from ._online_lda import is_lda, lda_batch, learn_lda, stream_vocabulary

__all__ = ["last_version", "learn_online", "version_path"]

_log = logging.getLogger(__name__)

_VERSION_NAME = re.compile(r"version-(\d+)\.npz")


def version_path(versions: str, batch: int) -> str:
    """The file of version number ``batch`` under ``versions``:
    ``<versions>/version-000012.npz``.

    :func:`learn_online` numbers a version by the batches trained since the folder's first
    one: the highest number already in the folder when it started (:func:`last_version`)
    plus the batches of its own stream. Names sort in training order up to version
    999999 (6 digits); beyond, the number is wider and :func:`last_version`, which
    compares numbers, not names, still finds the newest."""
    return f"{os.fspath(versions).rstrip('/')}/version-{int(batch):06d}.npz"


def last_version(versions: str) -> int:
    """The highest number of the version files (:func:`version_path` names) in the folder
    ``versions`` (local or fsspec URL); 0 when it has none or does not exist. Other files,
    such as an interrupted save's temporary file, are not versions."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(os.fspath(versions))
    try:
        names = fs.ls(root, detail=False, refresh=True)  # not s3fs's listing of before
    except FileNotFoundError:
        return 0
    found = [_VERSION_NAME.fullmatch(str(n).rstrip("/").rsplit("/", 1)[-1]) for n in names]
    return max((int(m.group(1)) for m in found if m), default=0)


def _progressive(est, X, y) -> dict:
    """Log-loss, AUC (two classes) and accuracy of the current model on a batch it has not
    seen; NaN fields before the first fit.

    Raises
    ------
    ValueError
        The batch has labels outside the model's ``classes_`` (naming them).
    """
    from sklearn.metrics import log_loss, roc_auc_score

    if not hasattr(est, "classes_"):
        return {"progressive_log_loss": float("nan"), "progressive_accuracy": float("nan")}
    proba = est.predict_proba(X)
    if is_dask(proba) or is_dask(y):
        import dask

        proba, y = dask.compute(proba, y)
    y = np.asarray(y).ravel()
    labels = est.classes_
    new = np.setdiff1d(np.unique(y), labels)
    if new.size:
        raise ValueError(f"y has labels {new.tolist()} outside the model's classes "
                         f"{labels.tolist()}: a stream's classes are classes= (else those of "
                         f"its first batch), fixed from then on (give classes= every class "
                         f"of the stream)")
    out = {"progressive_log_loss": float(log_loss(y, proba, labels=labels)),
           "progressive_accuracy": float(np.mean(labels[proba.argmax(axis=1)] == y))}
    if labels.shape[0] == 2 and np.unique(y).shape[0] == 2:
        out["progressive_auc"] = float(roc_auc_score(y == labels[1], proba[:, 1]))
    return out


def _rows(X, y) -> tuple[int, object]:
    """``(rows, y)`` of a batch: ``X.shape[0]`` when known; else (a dask DataFrame, whose
    length is a lazy scalar, or a dask array of unknown chunk sizes) the length of ``y``,
    computed once and returned in memory for the progressive scores; the number of rows of
    a list of rows (``partial_fit`` takes what scikit-learn's ``check_array`` does)."""
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    if isinstance(n, numbers.Integral):
        return int(n), y
    if is_dask(y):
        y = np.asarray(y.compute()).ravel()
    return int(np.shape(y)[0]), y


def _where(b: int, X) -> str:
    """``batch 3 of the stream`` and, for a batch read from files, which."""
    files = source_paths(X)
    said = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"batch {b} of the stream" + (f" ({'file' if len(files) == 1 else 'files'} "
                                         f"{said})" if files else "")


def _named(exc: Exception, where: str, note: str | None = None) -> Exception:
    """``exc`` naming ``where``: an exception of the same type whose message starts with it
    (raise it ``from exc``), or, for a type that is not made from one message, ``exc``
    itself with a note (:meth:`BaseException.add_note`): ``note``, by default ``while
    learn_online processed <where>``."""
    if len(exc.args) == 1 and isinstance(exc.args[0], str) and \
            not isinstance(exc, UnicodeError):
        try:
            named = type(exc)(f"{where}: {exc.args[0]}")
        except Exception:  # noqa: BLE001 - a constructor of other arguments: a note
            named = None
        if named is not None and named.args == (f"{where}: {exc.args[0]}",):
            named.__dict__.update(vars(exc))  # attributes of the error (e.g. its notes)
            return named
    exc.add_note(note or f"while learn_online processed {where}")
    return exc


def _raise_named(exc: Exception, where: str, note: str | None = None):
    """Raise :func:`_named` of ``exc`` (from it when it is a new exception)."""
    named = _named(exc, where, note)
    if named is exc:
        raise exc
    raise named from exc


def learn_online(estimator, batches: Iterable, *, classes=None, version_every: int | None = None,
                 versions: str | None = None, on_batch=None, vocabulary=None):
    """Train ``estimator`` on a stream of mini-batches with progressive validation, saving a
    model version every ``version_every`` batches without stopping.

    Parameters
    ----------
    estimator : LogisticRegression, FactorizationMachineClassifier or LatentDirichletAllocation
        A classifier with a stochastic solver, or a topic model; fitted already (it
        continues) or not. With ``checkpoint=URL`` the stream keeps the newest 2
        checkpoint versions its batches saved there (each ``partial_fit`` saves one after
        its batch, pruning those of the batches before; the first also one before it: its
        model is not saved yet). An LDA's ``partial_fit`` runs ``max_iter`` Gibbs
        iterations on the batch, the first topics of its tokens drawn from the topics
        before, the counts of every batch before kept as its prior: the topics after a
        batch count all the stream's tokens (streaming Gibbs sampling, see
        :meth:`~dask_ps.LatentDirichletAllocation.partial_fit`).
    batches : iterable of (X, y), or for LDA of X or (X, vocabulary)
        Not a path (refused: learn_online reads no files; read each batch with a reader).
        Consumed lazily, one batch at a time. A classifier's: any input ``partial_fit``
        takes (NumPy, scipy.sparse, pandas, dask arrays such as :func:`dask_ps.io.read_ctr`
        gives, dask DataFrames with ``y`` a dask Series; dask arrays of unknown chunk sizes
        in process, while on a cluster ``partial_fit`` asks for ``compute_chunk_sizes()``).
        A batch without rows (e.g. a file of a quiet hour holding only its header) is
        skipped: no record, no version, a warning on the ``dask_ps.algorithms.online``
        logger naming it. A stream of no batch with rows (or of no batch) teaches nothing:
        a ``UserWarning`` says so, and an estimator not fitted before stays unfitted (no
        ``history_``; ``predict`` raises scikit-learn's ``NotFittedError``), as
        ``partial_fit`` refuses data without rows.
        An LDA's: document-term counts (n_documents, n_terms), any ``X`` its
        ``partial_fit`` takes (scipy.sparse CSR, NumPy, ``sparse.COO``, pandas, dask arrays
        or DataFrames: a dask batch is computed once in this process, where its score
        needs its counts, and ``partial_fit`` scatters it), or a tuple ``(X, vocabulary)``
        as :func:`dask_ps.io.read_ldac`, :func:`~dask_ps.io.read_docword` and
        :func:`~dask_ps.io.read_text` return (or a list ``[X, vocabulary]`` of a matrix
        ``X``; a vocabulary None is the stream's); the
        columns of every batch must be the same terms (give the readers the stream's
        vocabulary, e.g. ``(read_text(f, vocabulary=terms) for f in files)``). A batch
        without a token (no rows, or only zeros) is skipped as an empty one is.
    classes : array-like, optional
        All the classes of the stream (scikit-learn's ``partial_fit`` convention: a label
        outside them is refused); needed when the first batch may lack one. Classifiers
        only.
    version_every : int, optional
        Save a version after every this many batches of the stream (with ``versions``;
        none after a skipped empty batch: the model did not change).
    versions : str, optional
        Folder (local or fsspec URL) of the versions, :func:`version_path` names. When it
        holds versions already (a learner restarted on it), the numbers go on after the
        highest (:func:`last_version`): after a folder ending at ``version-000006.npz``,
        ``version_every=2`` writes ``version-000008.npz``, ``version-000010.npz``, ...; a
        version file is never overwritten. A version's number is the highest one before
        plus the number of the batch of this stream it was saved after.
    on_batch : callable, optional
        ``on_batch(record)`` after each batch (e.g. to log or to stop: a True return ends the
        stream), after its version is saved. Each learnt batch is also logged at INFO level
        on the ``dask_ps.algorithms.online`` logger (its rows, progressive scores and
        version: ``logging.basicConfig(level=logging.INFO)`` shows them). An error
        ``on_batch`` raises names the batch (see Raises).
    vocabulary : sequence of str (n_terms,), optional
        LDA only: the terms of the stream's columns, given to each ``partial_fit`` (kept as
        the model's ``vocabulary_``, saved in its versions, for ``top_words``); a batch's
        own vocabulary (``(X, vocabulary)``) must be the same terms, and so must the
        ``vocabulary_`` of a model fitted before (each checked, naming the first term that
        differs). Default: the batches' own, else the model's ``vocabulary_``, else none.

    Returns
    -------
    estimator
        Its ``history_`` holds one record per batch (the epoch ``partial_fit`` ran): ``loss``
        (the progressive loss inside the batch, each row scored before its own step), and
        ``batch``, ``rows``, ``progressive_log_loss``, ``progressive_accuracy``,
        ``progressive_auc`` (two classes) of the batch scored before training on it, and
        ``version`` (the file written after it, if one was). ``batch`` counts the batches of
        this call (from 1).

        An LDA's ``history_`` holds its Gibbs iterations' records (``epoch``, ``loss``,
        ... of :class:`~dask_ps.LatentDirichletAllocation`); the last iteration's record of
        each batch also holds the batch's: ``batch``, ``rows`` (documents), ``tokens``
        (the batch's total count), ``progressive_log_likelihood`` (``sum_dw c_dw
        log(θ_d · φ_w)`` of the batch, the topics ``φ`` before the batch and each
        document's ``θ_d`` folded in on its own words:
        :meth:`~dask_ps.LatentDirichletAllocation.score`), ``progressive_perplexity``
        (``exp(-progressive_log_likelihood / tokens)``: lower is better; the stream's is
        ``exp(-Σ log-likelihoods / Σ tokens)``) and ``version``. Before the first fit
        there are no topics: the first batch's two progressive fields are NaN, as a
        classifier's first ``progressive_log_loss`` is. ``[r for r in est.history_ if
        "batch" in r]`` are the batches' records; ``on_batch`` gets each.

    Raises
    ------
    ValueError
        Before any batch and before ``versions`` is made: an estimator without
        ``partial_fit`` (``solver="lbfgs"``, GBDT), or that is neither a classifier nor
        LDA, or with ``resume=True`` (batches are learnt from the model in memory, no
        checkpoint is resumed); ``classes`` for an LDA, ``vocabulary`` for a classifier,
        ``batches`` a path, ``vocabulary`` not str terms or other terms than the model's
        ``vocabulary_``; ``version_every`` without ``versions`` (or the reverse), or not an
        integer >= 1 (``True`` included), a batch that is not an
        ``(X, y)`` pair, a batch with labels outside the classes the model has
        (``classes``, else those of the first batch; the first batch too: ``classes`` must
        include every label of the stream), or what ``partial_fit`` refuses; an LDA batch
        that is a tuple of other than ``(X, vocabulary)``, whose second item is not str
        terms (labels), or whose terms differ from ``vocabulary`` or the model's.
    Exception
        Any error raised while a batch was made, scored, trained on or saved, or by
        ``on_batch`` after it, names it: an exception of the same type whose message starts
        with ``batch 3 of the stream`` and, for a batch read from files
        (:func:`dask_ps.io.read_ctr`, ...), ``(file ...)`` (raised from the original one);
        an exception type not made from one message (e.g. ``PermissionError``) keeps its
        message and gets that as a note. The estimator keeps what it learnt from the
        batches before (a failed ``partial_fit`` leaves it as it was). An error saving a
        batch's version (the folder became read-only, the disk is full, ...) or of
        ``on_batch`` comes after the batch was learnt, and says so: ``batch 3 of the stream
        was learnt (the estimator in memory holds it: go on with it from batch 4); its
        version could not be saved: ...`` (its record names no version), ``batch 3 of the
        stream was learnt; its on_batch(record) raised``.
    TypeError
        With ``versions``, before any batch: a parameter that cannot be saved in a version
        (a function among ``callbacks``), naming it.
    NotADirectoryError, OSError
        With ``versions``, before any batch: it is a file, or its folder cannot be made, or
        no file can be written in it (e.g. ``PermissionError``: a test file is made and
        removed there first).
    FileExistsError
        The next version's file appeared meanwhile (another learner writes to the folder);
        nothing is overwritten.

    Warns
    -----
    UserWarning
        No batch of the stream had rows (an LDA's: a token): nothing was learnt.

    References
    ----------
    A. Blum, A. Kalai, J. Langford, "Beating the hold-out: bounds for k-fold and progressive
    cross-validation", COLT 1999; H. B. McMahan et al., "Ad Click Prediction: a View from the
    Trenches", KDD 2013; M. Hoffman, D. Blei, F. Bach, "Online learning for latent
    Dirichlet allocation", NIPS 2010.
    """
    if (version_every is None) != (versions is None):
        raise ValueError("version_every and versions go together: give both or neither")
    if version_every is not None and (isinstance(version_every, (bool, np.bool_))
                                      or not isinstance(version_every, numbers.Real)
                                      or int(version_every) != version_every
                                      or version_every < 1):
        raise ValueError(f"version_every must be an integer >= 1, got {version_every!r}")
    if not hasattr(estimator, "partial_fit"):
        solver = getattr(estimator, "solver", None)
        raise ValueError(f"{type(estimator).__name__} has no partial_fit" + (
            f": partial_fit needs a stochastic solver ('ftrl', 'sgd', 'adagrad'), got "
            f"solver={solver!r}" if solver == "lbfgs" else
            ": learn_online needs an estimator that learns batch by batch"))
    if getattr(estimator, "resume", False):
        raise ValueError(f"{type(estimator).__name__}(resume=True): learn_online trains each "
                         f"batch from the model in memory (partial_fit) and resumes no "
                         f"checkpoint (resume=True would continue the checkpoint's finished "
                         f"fit instead of learning the batches); set resume=False: a "
                         f"restarted stream loads its newest version "
                         f"(dask_ps.saving.load_estimator) and goes on with it")
    lda = is_lda(estimator)
    if not lda and not is_classifier(estimator):
        raise ValueError(f"{type(estimator).__name__} is not a classifier: learn_online "
                         f"needs a classifier that learns batch by batch "
                         f"(partial_fit(X, y, classes=...)) and is scored on each batch "
                         f"before it learns it (predict_proba), or a "
                         f"LatentDirichletAllocation; call its own partial_fit on each "
                         f"batch instead")
    if lda and classes is not None:
        raise ValueError(f"classes={classes!r} is for classifiers: "
                         f"LatentDirichletAllocation learns documents without labels; leave "
                         f"classes out")
    if not lda and vocabulary is not None:
        raise ValueError(f"vocabulary= is for LatentDirichletAllocation (the terms of the "
                         f"documents' columns), not {type(estimator).__name__}; leave it out")
    reader = ("(read_ldac(f, vocabulary) for f in files)" if lda else
              "(read_ctr(f, label=..., encoder=encoder) for f in files), the encoder fixed "
              "once (infer_encoder) so that every batch hashes its features alike and an "
              "empty file is an empty batch")
    if isinstance(batches, (str, bytes, os.PathLike)):
        raise ValueError(f"batches={os.fspath(batches)!r} is a path: learn_online reads no "
                         f"files; give an iterable of batches, each read by a reader, e.g. "
                         f"{reader}")
    if lda:
        vocabulary = stream_vocabulary(estimator, vocabulary)
    if versions is not None:
        _check_versions(estimator, versions)
    first = last_version(versions) if versions is not None else 0
    stream, learnt = iter(batches), 0
    for b in itertools.count(1):
        try:
            batch = next(stream)
        except StopIteration:
            break
        except Exception as exc:
            _raise_named(exc, f"batch {b} of the stream (making it)")
        if isinstance(batch, (str, bytes, os.PathLike)):  # (a list of files)
            raise ValueError(f"batch {b} of the stream is a path, {os.fspath(batch)!r}: "
                             f"learn_online reads no files; give batches each read by a "
                             f"reader, e.g. {reader}")
        if lda:
            X, terms = lda_batch(b, batch, vocabulary)
        elif not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise ValueError(f"batch {b} of the stream is a {type(batch).__name__}, not an "
                             f"(X, y) pair")
        else:
            X = batch[0]
        try:
            record = learn_lda(estimator, b, X, terms, lambda: _where(b, X)) if lda else \
                _learn(estimator, b, *batch, classes)
        except Exception as exc:
            _raise_named(exc, _where(b, X))
        if record is None:
            continue
        learnt += 1
        if version_every is not None and b % version_every == 0:
            try:
                _save_version(estimator, version_path(versions, first + b))
            except Exception as exc:  # the batch is learnt: say so, and where to restart
                done = (f"{_where(b, X)} was learnt (the estimator in memory holds it: go "
                        f"on with it from batch {b + 1}); its version could not be saved")
                _raise_named(exc, done, f"{done}: {exc}")
        _log.info("learn_online: %s learnt: %s", _where(b, X), _said(record))
        try:
            stop = on_batch is not None and on_batch(estimator.history_[-1])
        except Exception as exc:
            done = f"{_where(b, X)} was learnt; its on_batch(record) raised"
            _raise_named(exc, done, f"{done} (the error above)")
        if stop:
            break
    if not learnt:
        warnings.warn(f"learn_online: no batch of the stream ({b - 1} "
                      f"{'batch' if b == 2 else 'batches'}) had "
                      f"{'a token' if lda else 'rows'}: {type(estimator).__name__} learnt "
                      f"nothing" + ("" if _fitted(estimator) else " and is not fitted"),
                      UserWarning, stacklevel=2)
    return estimator


#: The fields of a batch's record in its log line, in this order (those it has).
_LOGGED = ("rows", "tokens", "progressive_log_loss", "progressive_accuracy", "progressive_auc",
           "progressive_perplexity", "version")


def _said(record: dict) -> str:
    """A batch's record in a log line: ``rows 2000, progressive_log_loss 0.4613, ...``."""
    return ", ".join(f"{k} {record[k]:.4g}" if isinstance(record[k], float) else
                     f"{k} {record[k]}" for k in _LOGGED if k in record)


def _fitted(estimator) -> bool:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _check_versions(estimator, versions) -> None:
    """Before the stream: the estimator's parameters can be saved (:func:`saved_params`)
    and ``versions`` is, or is made, a folder where a file can be written (a probe file,
    made and removed; an error naming it, not at the first version, ``version_every``
    batches in, after a batch was learnt)."""
    import fsspec

    from ..io._storage import check_writable

    saved_params(estimator)
    name = os.fspath(versions)
    fs, root = fsspec.core.url_to_fs(name)
    if fs.exists(root) and not fs.isdir(root):
        raise NotADirectoryError(f"versions={name!r} is a file: versions go in a folder "
                                 f"(version-000001.npz, ...); name a folder")
    try:
        fs.makedirs(root, exist_ok=True)
    except OSError as exc:
        raise type(exc)(f"versions={name!r}: the folder cannot be made "
                        f"({exc.strerror or exc})") from None
    try:  # a test file, written and removed (check_writable)
        check_writable(name, "versions", folder=True)
    except OSError as exc:
        raise type(exc)(f"{exc}; no batch was learnt") from None


def _learn(estimator, b: int, X, y, classes) -> dict | None:
    """Score batch ``b`` with the model as it stands, then train on it (the first batch of an
    unfitted model without ``classes``: with the classes of its labels); its record (also
    the last of ``history_``), or None for a batch without rows (skipped, logged)."""
    rows, y_seen = _rows(X, y)
    if rows == 0:
        _log.warning("learn_online: %s has no rows: skipped", _where(b, X))
        return None
    record = {"batch": b, "rows": rows, **_progressive(estimator, X, y_seen)}
    if classes is None and not hasattr(estimator, "classes_"):  # the first batch's labels:
        # partial_fit needs classes on its first call (scikit-learn's rule); it checks y
        # (a NaN or continuous label named as y's) before them, as before
        from ._logistic_data import _unique

        classes = _unique(np.ravel(y_seen.compute() if is_dask(y_seen) else y_seen), "y")
    estimator.partial_fit(X, y, classes=classes)
    estimator.history_[-1].update(record)
    return estimator.history_[-1]


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
