""":func:`~.online.learn_online`'s side for :class:`~.lda.LatentDirichletAllocation`: a
batch of documents (``X``, or ``(X, vocabulary)`` as the text readers return it), the
stream's vocabulary kept the model's, and the progressive perplexity of each batch under
the topics before it (the estimate of Hoffman, Blei & Bach's online LDA and of gensim's
``LdaModel.update``, here with the collapsed Gibbs sampler's ``partial_fit``).
"""

from __future__ import annotations

import logging

import numpy as np

from ..partitions.inputs import is_dask
from ._lda_steps import as_csr
from .lda import LatentDirichletAllocation, same_terms

__all__ = ["is_lda", "lda_batch", "learn_lda", "stream_vocabulary"]

_log = logging.getLogger("dask_ps.algorithms.online")


def is_lda(estimator) -> bool:
    """Whether ``learn_online`` trains ``estimator`` as a topic model (batches of
    documents, progressive perplexity) rather than a classifier."""
    return isinstance(estimator, LatentDirichletAllocation)


def _terms(vocabulary, what: str) -> np.ndarray:
    """``vocabulary`` as a 1-D array of str.

    Raises
    ------
    ValueError
        Not a 1-D sequence of str (e.g. labels: LDA batches have none), naming ``what``.
    """
    terms = np.asarray(vocabulary)
    if terms.ndim != 1 or terms.dtype.kind not in "UO" or not all(
            isinstance(t, str) for t in terms.tolist()):
        raise ValueError(f"{what} is not a vocabulary (a 1-D sequence of str terms), got "
                         f"{type(vocabulary).__name__} of dtype {terms.dtype} and shape "
                         f"{terms.shape}: a LatentDirichletAllocation batch is X or "
                         f"(X, vocabulary), without labels")
    return terms.astype(str)


#: What a stream's terms that differ from the model's are told to do.
_READ_ALIKE = ("every batch's columns must be the model's terms (read each batch with the "
               "stream's vocabulary, e.g. read_text(file, vocabulary=...))")


def _same_terms(terms: np.ndarray, model: np.ndarray, what: str, than: str) -> None:
    """:func:`~.lda.same_terms`, with a stream's advice."""
    same_terms(terms, model, what, than, _READ_ALIKE)


def stream_vocabulary(estimator, vocabulary) -> np.ndarray | None:
    """``learn_online``'s ``vocabulary=`` checked before any batch: str terms, those of
    the model when it has some (``vocabulary_``)."""
    if vocabulary is None:
        return None
    terms = _terms(vocabulary, "vocabulary=")
    if hasattr(estimator, "vocabulary_"):
        _same_terms(terms, np.asarray(estimator.vocabulary_, dtype=str), "vocabulary=",
                    "the model's vocabulary_")
    return terms


def lda_batch(b: int, batch, vocabulary: np.ndarray | None) -> tuple[object, np.ndarray | None]:
    """``(X, vocabulary)`` of batch ``b``: a tuple, or a list of 2 items the first of them
    a matrix (``ndim`` 2; a list of documents' rows is ``X``), is ``(X, vocabulary)`` (its
    vocabulary may be None: the stream's), anything else the documents ``X`` with the
    stream's.

    Raises
    ------
    ValueError
        A tuple of other than 2 items, a second item that is not a vocabulary (labels), or
        a vocabulary other than the stream's ``vocabulary=``.
    """
    pair = isinstance(batch, tuple) or (isinstance(batch, list) and len(batch) == 2
                                        and getattr(batch[0], "ndim", None) == 2)
    if not pair:
        return batch, vocabulary
    if len(batch) != 2:
        raise ValueError(f"batch {b} of the stream is a {type(batch).__name__} of "
                         f"{len(batch)} items, not X or an (X, vocabulary) pair")
    X, terms = batch
    if terms is None:
        return X, vocabulary
    terms = _terms(terms, f"batch {b} of the stream's second item")
    if vocabulary is not None:
        _same_terms(terms, vocabulary, f"batch {b} of the stream's vocabulary",
                    "vocabulary=")
    return X, terms


def _progressive(est, docs, tokens: int) -> dict:
    """The log-likelihood (:meth:`~.lda.LatentDirichletAllocation.score`) and perplexity
    of the documents under the topics as they stand; NaN before the first fit."""
    if not hasattr(est, "components_"):
        return {"progressive_log_likelihood": float("nan"),
                "progressive_perplexity": float("nan")}
    ll = est.score(docs)
    return {"progressive_log_likelihood": ll,
            "progressive_perplexity": float(np.exp(-ll / tokens))}


def learn_lda(estimator, b: int, X, vocabulary, where) -> dict | None:
    """Score batch ``b`` (documents ``X``) with the topics as they stand, then
    ``partial_fit`` it; its record (also the last of ``history_``, the record of the
    batch's last iteration), or None for a batch without a token (skipped, logged naming
    ``where()``, the batch's description). A dask ``X`` is computed once, here (the score
    needs its counts)."""
    docs = as_csr(X.compute()) if is_dask(X) else X
    counts = as_csr(docs)
    if counts.count_nonzero() == 0 and getattr(docs, "ndim", 2) == 2:
        _log.warning("learn_online: %s holds no token (%d documents): skipped", where(),
                     counts.shape[0])
        return None
    if hasattr(estimator, "vocabulary_") and vocabulary is not None:
        _same_terms(vocabulary, np.asarray(estimator.vocabulary_, dtype=str),
                    "its vocabulary", "the model's vocabulary_")
    tokens = int(np.rint(counts.sum()))
    record = {"batch": b, "rows": int(counts.shape[0]), "tokens": tokens,
              **_progressive(estimator, docs, tokens)}
    estimator.partial_fit(docs, vocabulary=vocabulary)
    estimator.history_[-1].update(record)
    return estimator.history_[-1]
