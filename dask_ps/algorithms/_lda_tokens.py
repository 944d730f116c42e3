"""The token layout of LDA's worker partitions: token arrays from document–term counts,
tokens grouped by word, local vocabularies, and dense/CSR forms of word–topic counts.

These run once per partition (vectorised NumPy) or in tests and benchmarks (numba); the
sampler that uses the layout is :mod:`._lda_kernels` (WarpLDA, Chen et al., PVLDB 2016),
whose module docstring describes the arrays.
"""

from __future__ import annotations

import numba
import numpy as np

from ..exceptions import DataError
from ._base import check_numeric_columns

__all__ = ["check_dask_documents", "dense_to_rows", "group_by_word", "local_vocabulary",
           "max_length", "tokens_from_counts", "word_topic_counts"]

_JIT = dict(cache=True, nogil=True)


@numba.njit(**_JIT)
def word_topic_counts(words, z, out):
    """``out[w, k] += #{tokens with word w and topic k}``.

    Parameters
    ----------
    words, z : int32 arrays (N,)
        Word id (row of ``out``) and topic of each token.
    out : int32 array (V, K)
        Added to (zero it for plain counts).
    """
    for p in range(words.shape[0]):
        out[words[p], z[p]] += 1


@numba.njit(**_JIT)
def dense_to_rows(dense):
    """CSR rows of a dense count block: (ptr int64 (R + 1,), topic int32, count int32),
    non-zero entries only, topics ascending within a row."""
    n_rows, n_topics = dense.shape
    ptr = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        c = 0
        for k in range(n_topics):
            if dense[r, k] != 0:
                c += 1
        ptr[r + 1] = ptr[r] + c
    topic = np.empty(ptr[n_rows], np.int32)
    count = np.empty(ptr[n_rows], np.int32)
    j = 0
    for r in range(n_rows):
        for k in range(n_topics):
            if dense[r, k] != 0:
                topic[j] = k
                count[j] = dense[r, k]
                j += 1
    return ptr, topic, count


@numba.njit(**_JIT)
def max_length(ptr):
    """Length of the longest segment of ``ptr`` (int64 (D + 1,)), e.g. the longest document."""
    longest = 0
    for d in range(ptr.shape[0] - 1):
        longest = max(longest, ptr[d + 1] - ptr[d])
    return longest


# -- preparation (vectorised NumPy, once per partition) ---------------------------------------
def tokens_from_counts(indptr, indices, data, *, first_row: int = 0):
    """Token arrays of a document–term count matrix given as CSR parts.

    Parameters
    ----------
    indptr, indices, data : arrays
        CSR of a (D, V) matrix of counts: non-negative integers (any numeric dtype).
    first_row : int, default 0
        Document number of row 0, used in error messages only.

    Returns
    -------
    doc_ptr : int64 array (D + 1,)
    words : int32 array (N,)
        Term id of each token, document-major, a term repeated ``count`` times.

    Raises
    ------
    ValueError
        Naming the first document and term whose count is negative, non-integer or not finite.
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices)
    data = np.asarray(data)
    bad = ~np.isfinite(data) | (data < 0) | (data != np.round(data))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        d = int(np.searchsorted(indptr, j, side="right")) - 1
        raise DataError(f"LDA needs non-negative integer counts: document {first_row + d}, "
                        f"term {int(indices[j])} has count {data[j]}")
    reps = data.astype(np.int64)
    words = np.repeat(indices.astype(np.int32), reps)
    ends = np.zeros(reps.shape[0] + 1, np.int64)
    np.cumsum(reps, out=ends[1:])
    return ends[indptr], words


def group_by_word(words, n_local_words: int):
    """``(word_ptr, word_tok)``: the tokens of each word, in token order (a stable counting
    sort). ``words`` int32 (N,) of local ids ``< n_local_words``; both outputs int64."""
    words = np.asarray(words)
    word_tok = np.argsort(words, kind="stable").astype(np.int64)
    word_ptr = np.zeros(n_local_words + 1, np.int64)
    np.cumsum(np.bincount(words, minlength=n_local_words), out=word_ptr[1:])
    return word_ptr, word_tok


def local_vocabulary(words):
    """``(vocab, local)``: the sorted global ids a partition uses (int64) and each token's
    local id (int32), ``vocab[local] == words``."""
    vocab, local = np.unique(words, return_inverse=True)
    return vocab.astype(np.int64), local.astype(np.int32)


def check_dask_documents(X, estimator: str) -> None:
    """A dask ``X`` of documents x terms, checked before anything is computed: 2-D, a term
    at least (the words of scikit-learn's check for an in-memory ``X``), numeric columns.

    Raises
    ------
    ValueError
        Naming the shape, or a dask DataFrame's non-numeric column.
    """
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (documents x terms), got shape {X.shape}")
    if X.shape[1] == 0:
        raise ValueError(f"X has 0 feature(s) (terms), shape {X.shape}, while a minimum of 1 "
                         f"is required by {estimator}: no term to model (did read_text's "
                         f"min_df / max_df / max_features or vocabulary keep none?)")
    check_numeric_columns(X, estimator)  # a dask DataFrame's, named now
