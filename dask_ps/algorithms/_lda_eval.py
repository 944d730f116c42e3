"""How good an LDA model is: the held-out protocol (the same for every model, ours and the
peers'), θ given φ, and the training log-likelihood in parts.

Protocol (issue 13): a fixed, seeded fraction of the documents is held out; the vocabulary is
the terms of the training documents and held-out tokens of other terms are dropped; each
held-out document's tokens are shuffled (seeded) and split in halves; θ_d is estimated from the
first half by fixed-point EM given the model's topic–word matrix φ (:func:`theta_em`, α
pseudo-counts; also the estimator's ``transform``); the perplexity is
``exp(-sum log(θ_d · φ[:, w]) / N)`` over the second halves' ``N`` tokens. This is the
"document completion" estimate of Wallach et al. (ICML 2009), with the fold-in of θ by EM
instead of sampling.

Also here: the training log-likelihood log p(w, z) in three parts that add up exactly — the
documents' (:func:`doc_loglik`, on the worker, also returned by the doc phase), the word rows'
(:func:`word_loglik`, on each shard) and the topic totals' (:func:`topic_loglik`).

References
----------
H. Wallach, I. Murray, R. Salakhutdinov, D. Mimno. Evaluation methods for topic models.
ICML 2009.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from ._lda_tokens import max_length

_JIT = dict(cache=True, nogil=True)


@numba.njit(**_JIT)
def _lgamma_table(n, prior):
    """``table[c] = lgamma(c + prior) - lgamma(prior)`` for ``c`` in ``0..n``."""
    table = np.empty(n + 1, np.float64)
    base = math.lgamma(prior)
    for c in range(n + 1):
        table[c] = math.lgamma(c + prior) - base
    return table


@numba.njit(**_JIT)
def doc_loglik(doc_ptr, z, n_topics, alpha):
    """The documents' part of the collapsed log-likelihood, computed on the worker.

    ``sum_d [sum_k (lgamma(n_dk + α) - lgamma(α)) - lgamma(n_d + Kα) + lgamma(Kα)]``, i.e.
    ``log p(z | α)``. With :func:`word_loglik` over all rows and :func:`topic_loglik`,
    ``log p(w, z) = doc part + word part + topic part`` exactly (Griffiths & Steyvers 2004, eq. 2
    and 3).

    Parameters
    ----------
    doc_ptr : int64 array (D + 1,), z : int32 array (N,)
    n_topics : int, alpha : float

    Returns
    -------
    float
        Summed as :func:`~._lda_kernels.doc_phase` sums it (``lgamma(n + α) - lgamma(α) =
        sum_{c<n} log(c + α)``, token by token), to the last bit: the loss of an iteration
        is the same whether its doc phase runs at once or in the next job.
    """
    log_table = np.log(np.arange(max_length(doc_ptr) + 1) + alpha)
    k_alpha = n_topics * alpha
    cd = np.zeros(n_topics, np.int64)
    ll = 0.0
    for d in range(doc_ptr.shape[0] - 1):
        a, b = doc_ptr[d], doc_ptr[d + 1]
        if a == b:
            continue
        for p in range(a, b):
            k = z[p]
            ll += log_table[cd[k]]
            cd[k] += 1
        ll -= math.lgamma(b - a + k_alpha) - math.lgamma(k_alpha)
        for p in range(a, b):
            cd[z[p]] = 0
    return ll


@numba.njit(**_JIT)
def word_loglik(counts, beta):
    """A shard's part: ``sum (lgamma(n_wk + β) - lgamma(β))`` over the counts given (a dense
    block flattened, or the values of sparse rows: zeros add nothing). int32 array, float."""
    table = _lgamma_table(1023, beta)
    base = math.lgamma(beta)
    ll = 0.0
    for j in range(counts.shape[0]):
        c = counts[j]
        if c < 1024:
            ll += table[c]
        else:
            ll += math.lgamma(c + beta) - base
    return ll


@numba.njit(**_JIT)
def topic_loglik(nk, n_words, beta):
    """The totals' part: ``sum_k (lgamma(Vβ) - lgamma(n_k + Vβ))``. int64 array (K,)."""
    v_beta = n_words * beta
    ll = 0.0
    for k in range(nk.shape[0]):
        ll += math.lgamma(v_beta) - math.lgamma(nk[k] + v_beta)
    return ll


def prior_loglik(keys: np.ndarray, counts: np.ndarray, n_words: int, n_topics: int,
                 beta: float) -> float:
    """The word and topic parts of ``log p(w, z)`` (:func:`word_loglik` +
    :func:`topic_loglik`) of a whole word–topic table given by its non-zero entries, on the
    driver: what a fit that keeps these counts as its prior subtracts from its own to
    report the log-likelihood of its tokens given them (chain rule: ``log p(w, z | w', z')
    = log p(w w', z z') - log p(w', z')``).

    Parameters
    ----------
    keys : int64 array (n,)
        Flat positions ``word * n_topics + topic`` of the non-zero counts.
    counts : int32 array (n,)
        Their counts (positive).
    n_words, n_topics : int
    beta : float
        The topic–word prior.

    Returns
    -------
    float
    """
    nk = np.bincount(np.asarray(keys) % n_topics, weights=counts, minlength=n_topics)
    return float(word_loglik(np.ascontiguousarray(counts, np.int32), float(beta))
                 + topic_loglik(np.rint(nk).astype(np.int64), int(n_words), float(beta)))


@numba.njit(**_JIT)
def theta_em(indptr, indices, counts, phi_t, alpha, n_iter, theta):
    """Document–topic distributions given the topics, by fixed-point EM.

    For each document, from ``θ = 1/K``, ``n_iter`` times::

        θ_k <- (α + sum_w c_w θ_k φ_kw / sum_j θ_j φ_jw) / (n_d + K α)

    (the EM of the multinomial mixture weights with φ fixed and α pseudo-counts; the
    "fold-in" estimate of Asuncion et al., UAI 2009). Rows sum to 1; an empty document gets the
    prior mean 1/K. A term whose ``θ · φ_w`` is 0 is skipped.

    Parameters
    ----------
    indptr : int64 array (D + 1,), indices : int32 array (nnz,), counts : float64 array (nnz,)
        Document–term counts (CSR; ``indices`` are rows of ``phi_t``).
    phi_t : float64 array (V, K)
        Topic–word probabilities, word-major (``components_.T`` made contiguous).
    alpha : float
    n_iter : int
    theta : float64 array (D, K)
        Receives θ.
    """
    n_topics = phi_t.shape[1]
    acc = np.empty(n_topics, np.float64)
    for d in range(indptr.shape[0] - 1):
        a, b = indptr[d], indptr[d + 1]
        length = 0.0
        for j in range(a, b):
            length += counts[j]
        for k in range(n_topics):
            theta[d, k] = 1.0 / n_topics
        if length <= 0.0:
            continue
        norm = 1.0 / (length + n_topics * alpha)
        for _ in range(n_iter):
            acc[:] = 0.0
            for j in range(a, b):
                w = indices[j]
                dot = 0.0
                for k in range(n_topics):
                    dot += theta[d, k] * phi_t[w, k]
                if dot > 0.0:
                    scale = counts[j] / dot
                    for k in range(n_topics):
                        acc[k] += scale * theta[d, k] * phi_t[w, k]
            for k in range(n_topics):
                theta[d, k] = (acc[k] + alpha) * norm


@numba.njit(**_JIT)
def heldout_loglik(indptr, indices, counts, theta, phi_t):
    """``sum_d sum_w c_dw log(θ_d · φ_w)`` (the log-likelihood of held-out tokens).

    Parameters
    ----------
    indptr, indices, counts
        As in :func:`theta_em`.
    theta : float64 array (D, K)
    phi_t : float64 array (V, K)

    Returns
    -------
    float
        ``-inf`` if a token has probability 0.
    """
    n_topics = phi_t.shape[1]
    ll = 0.0
    for d in range(indptr.shape[0] - 1):
        for j in range(indptr[d], indptr[d + 1]):
            w = indices[j]
            dot = 0.0
            for k in range(n_topics):
                dot += theta[d, k] * phi_t[w, k]
            ll += counts[j] * math.log(dot)
    return ll




@dataclass(frozen=True)
class HeldOut:
    """A held-out split of a document–term matrix.

    Attributes
    ----------
    train : scipy.sparse.csr_matrix (D_train, V_train), int32 counts
        Training documents over the training vocabulary.
    observed, unseen : scipy.sparse.csr_matrix (D_test, V_train), int32 counts
        First and second halves of each held-out document.
    terms : int64 array (V_train,)
        Column of the input matrix of each training term.
    train_docs, test_docs : int64 arrays
        Rows of the input matrix in ``train`` and in the held-out halves.
    """

    train: sp.csr_matrix
    observed: sp.csr_matrix
    unseen: sp.csr_matrix
    terms: np.ndarray
    train_docs: np.ndarray
    test_docs: np.ndarray


def heldout_split(X, fraction: float = 0.1, seed: int = 0) -> HeldOut:
    """Split documents for the held-out protocol.

    Parameters
    ----------
    X : scipy.sparse matrix (D, V)
        Non-negative integer counts.
    fraction : float, default 0.1
        Share of documents held out (``round(fraction * D)`` of them, chosen at random).
    seed : int, default 0
        Seeds the choice of documents and the shuffles of their tokens.

    Returns
    -------
    HeldOut
    """
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    n_docs = X.shape[0]
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_docs)
    n_test = int(round(fraction * n_docs))
    test_docs, train_docs = np.sort(order[:n_test]), np.sort(order[n_test:])
    train = X[train_docs]
    terms = np.flatnonzero(np.asarray(train.sum(axis=0)).ravel() > 0).astype(np.int64)
    column = np.full(X.shape[1], -1, np.int64)
    column[terms] = np.arange(terms.size)
    train = train[:, terms].astype(np.int32).tocsr()
    halves = ([], [])
    for d in test_docs:
        row = X.getrow(d)
        tokens = np.repeat(column[row.indices], row.data.astype(np.int64))
        tokens = rng.permutation(tokens[tokens >= 0])
        cut = tokens.size // 2
        halves[0].append(tokens[:cut])
        halves[1].append(tokens[cut:])
    observed, unseen = (_counts(h, terms.size) for h in halves)
    return HeldOut(train, observed, unseen, terms, train_docs.astype(np.int64),
                   test_docs.astype(np.int64))


def _counts(docs, n_terms: int) -> sp.csr_matrix:
    lengths = np.array([t.size for t in docs], np.int64)
    rows = np.repeat(np.arange(len(docs)), lengths)
    cols = np.concatenate(docs) if docs else np.zeros(0, np.int64)
    M = sp.csr_matrix((np.ones(rows.size, np.int32), (rows, cols)),
                      shape=(len(docs), n_terms))
    M.sum_duplicates()
    return M


def fold_in(phi, X, alpha: float = 0.1, n_iter: int = 200) -> np.ndarray:
    """θ (D, K) of the documents ``X`` (D, V) given the topics ``phi`` (K, V), by
    :func:`theta_em`; rows sum to 1, empty documents get the prior mean 1/K."""
    X = sp.csr_matrix(X)
    phi_t = np.ascontiguousarray(np.asarray(phi, np.float64).T)
    theta = np.empty((X.shape[0], phi_t.shape[1]), np.float64)
    theta_em(X.indptr.astype(np.int64), X.indices.astype(np.int32),
             X.data.astype(np.float64), phi_t, float(alpha), int(n_iter), theta)
    return theta


def perplexity(phi, split: HeldOut, alpha: float = 0.1, n_iter: int = 200) -> float:
    """Held-out perplexity of the topics ``phi`` (K, V_train; rows are distributions over the
    training vocabulary): θ from ``split.observed``, evaluated on ``split.unseen``."""
    theta = fold_in(phi, split.observed, alpha, n_iter)
    Y = split.unseen
    ll = heldout_loglik(Y.indptr.astype(np.int64), Y.indices.astype(np.int32),
                        Y.data.astype(np.float64), theta,
                        np.ascontiguousarray(np.asarray(phi, np.float64).T))
    return float(np.exp(-ll / Y.sum()))


def phi_from_counts(nwk, beta: float) -> np.ndarray:
    """φ (K, V) = ``((n_wk + β) / (n_k + V β))ᵀ`` from word–topic counts ``nwk`` (V, K)."""
    nwk = np.asarray(nwk, np.float64)
    return np.ascontiguousarray(((nwk + beta) / (nwk.sum(axis=0) + nwk.shape[0] * beta)).T)
