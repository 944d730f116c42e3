"""Numba kernels of LDA's word–topic table on the parameter server, and of the worker's side
of its pulls and pushes.

The table is one flat int32 vector of ``V * K`` entries, entry ``w * K + k`` the count
``n_wk``, range-partitioned over the shards (so by word: shard ``s`` holds the rows of a
contiguous range of words, a row cut in two only at a shard boundary). Why flat and not
``(V, K)``: a clock's push is the sparse delta of the word phase (``sum_w min(2 n_w, K)``
entries at most, often far fewer), sent as flat keys and int32 values, where a ``(V, K)``
table would take whole rows of K values (4 kB each at K = 1000). A pull is a function run
next to each shard (:func:`shard_rows`, through ``map_shards``): it scans the shard once and
returns, as CSR rows, only the non-zero counts of the words the task asked for, with the
shard's topic totals (the totals need no table of their own, and are always exactly the
column sums of the rows pulled with them) and, when asked, the shard's part of the
log-likelihood (:func:`~dask_ps.algorithms._lda_eval.word_loglik`).

The pure-Python twins are in ``tests/algorithms/test_lda_table.py``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._lda_kernels import _uniform

_JIT = dict(cache=True, nogil=True)
_LGAMMA_TABLE = 1024


@numba.njit(**_JIT)
def shard_rows(start, values, words, n_topics, with_ll, beta):
    """What a pull of ``words`` gets from one shard of the flat table.

    Parameters
    ----------
    start : int
        Global key of ``values[0]``; the shard holds keys ``start .. start + n - 1``.
    values : int32 array (n,)
        The shard's counts.
    words : int64 array (m,)
        Global word ids asked for, ascending, distinct.
    n_topics : int
        K.
    with_ll : bool
        Also sum ``lgamma(n + β) - lgamma(β)`` over the shard's counts.
    beta : float

    Returns
    -------
    first : int
        Position in ``words`` of the first word whose row (or part of it) the shard holds.
    lens : int64 array (r,)
        Non-zero counts of the rows of ``words[first:first + r]`` held here.
    topic, count : int32 arrays (sum(lens),)
        Those counts, word by word, topics ascending.
    totals : int64 array (K,)
        Column sums of every row (part) the shard holds.
    ll : float
        The shard's part of the word log-likelihood (0 unless ``with_ll``); negative counts,
        which a consistent table never holds, count as zero.
    """
    n = values.shape[0]
    totals = np.zeros(n_topics, np.int64)
    if n == 0:
        return (0, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                totals, 0.0)
    stop = start + n
    w_first = start // n_topics
    w_last = (stop - 1) // n_topics
    first = np.searchsorted(words, w_first)
    last = np.searchsorted(words, w_last, side="right")
    lens = np.zeros(last - first, np.int64)
    cap = 0
    for i in range(first, last):  # room for every entry of the rows asked for
        w = words[i]
        cap += min((w + 1) * n_topics, stop) - max(w * n_topics, start)
    topic = np.empty(cap, np.int32)
    count = np.empty(cap, np.int32)
    table = np.empty(_LGAMMA_TABLE, np.float64)
    base = math.lgamma(beta)
    if with_ll:
        for c in range(_LGAMMA_TABLE):
            table[c] = math.lgamma(c + beta) - base
    ll = 0.0
    nnz = 0
    i = first
    for w in range(w_first, w_last + 1):
        a = max(w * n_topics, start)
        b = min((w + 1) * n_topics, stop)
        k0 = a - w * n_topics
        asked = i < last and words[i] == w
        for j in range(a - start, b - start):
            v = values[j]
            if v != 0:
                k = k0 + j - (a - start)
                totals[k] += v
                if with_ll and v > 0:
                    ll += table[v] if v < _LGAMMA_TABLE else math.lgamma(v + beta) - base
                if asked:
                    topic[nnz] = k
                    count[nnz] = v
                    nnz += 1
                    lens[i - first] += 1
        if asked:
            i += 1
    return first, lens, topic[:nnz].copy(), count[:nnz].copy(), totals, ll


def join_shards(results: list, n_words: int, n_topics: int):
    """The CSR rows of ``n_words`` words and the totals from the shards' :func:`shard_rows`.

    Returns
    -------
    ptr : int64 array (n_words + 1,)
    topic, count : int32 arrays
    totals : int64 array (K,)
    ll : float
        Sum of the shards' parts.
    """
    lens = np.zeros(n_words, np.int64)
    totals = np.zeros(n_topics, np.int64)
    ll = 0.0
    for first, part, _, _, tot, part_ll in results:
        lens[first:first + part.shape[0]] += part  # a row cut by a shard boundary adds up
        totals += tot
        ll += part_ll
    ptr = np.zeros(n_words + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    # shards hold consecutive key ranges: their rows, in shard order, are in word order
    topic = np.concatenate([r[2] for r in results]) if results else np.zeros(0, np.int32)
    count = np.concatenate([r[3] for r in results]) if results else np.zeros(0, np.int32)
    return ptr, topic, count, totals, ll


@numba.njit(**_JIT)
def select_rows(ptr, topic, count, pos):
    """Rows ``pos`` (int64 (r,)) of CSR rows: ``(ptr int64 (r + 1,), topic, count)``."""
    out_ptr = np.zeros(pos.shape[0] + 1, np.int64)
    for i in range(pos.shape[0]):
        out_ptr[i + 1] = out_ptr[i] + ptr[pos[i] + 1] - ptr[pos[i]]
    out_topic = np.empty(out_ptr[-1], np.int32)
    out_count = np.empty(out_ptr[-1], np.int32)
    for i in range(pos.shape[0]):
        a = ptr[pos[i]]
        o = out_ptr[i]
        for j in range(ptr[pos[i] + 1] - a):
            out_topic[o + j] = topic[a + j]
            out_count[o + j] = count[a + j]
    return out_ptr, out_topic, out_count


@numba.njit(**_JIT)
def delta_entries(vocab, ptr, topic, value, nnz, n_topics, keys_out, values_out):
    """The word phase's delta (CSR rows ``ptr``/``topic``/``value`` of local words, its first
    ``nnz`` entries) as a push: ``(keys_out[:nnz], values_out[:nnz])``, table keys
    ``vocab[w] * K + topic`` ascending (each row's entries sorted by topic), so that the
    push's key plan is the identity (no sort, no scatter when it is merged and sent).

    ``vocab`` int64 (V_local,) ascending; ``keys_out`` int64 and ``values_out`` int32 of at
    least ``nnz`` entries are overwritten.
    """
    for w in range(ptr.shape[0] - 1):
        a, b = ptr[w], min(ptr[w + 1], nnz)
        if a >= b:
            continue
        base = vocab[w] * n_topics
        m = b - a
        if m <= 16:  # insertion sort of a short row
            for j in range(m):
                k, v = topic[a + j], value[a + j]
                i = j
                while i > 0 and keys_out[a + i - 1] > base + k:
                    keys_out[a + i] = keys_out[a + i - 1]
                    values_out[a + i] = values_out[a + i - 1]
                    i -= 1
                keys_out[a + i] = base + k
                values_out[a + i] = v
        else:
            order = np.argsort(topic[a:b])
            for j in range(m):
                keys_out[a + j] = base + topic[a + order[j]]
                values_out[a + j] = value[a + order[j]]
    return keys_out[:nnz], values_out[:nnz]


@numba.njit(**_JIT)
def topic_counts(word_ptr, word_tok, z, vocab, n_topics):
    """``(keys int64, counts int32)``: the table entries ``vocab[w] * K + k`` and counts of
    the tokens of each local word ``w`` (``word_ptr``/``word_tok``) at topic ``z`` (int32
    (N,)); non-zero ones only, word by word."""
    cap = 0
    for w in range(word_ptr.shape[0] - 1):
        cap += min(word_ptr[w + 1] - word_ptr[w], n_topics)
    keys = np.empty(cap, np.int64)
    counts = np.empty(cap, np.int32)
    acc = np.zeros(n_topics, np.int32)
    touched = np.empty(n_topics, np.int64)
    nnz = 0
    for w in range(word_ptr.shape[0] - 1):
        m = 0
        for p in range(word_ptr[w], word_ptr[w + 1]):
            k = z[word_tok[p]]
            if acc[k] == 0:
                touched[m] = k
                m += 1
            acc[k] += 1
        base = vocab[w] * n_topics
        for j in range(m):
            k = touched[j]
            keys[nnz] = base + k
            counts[nnz] = acc[k]
            acc[k] = 0
            nnz += 1
    return keys[:nnz], counts[:nnz]


#: Passes of :func:`sample_from_model` after its first, each token's topic redrawn given
#: every other topic of its document (the documents' topic mixes settle under the model). On
#: AP, K = 10, resumed after 170 iterations at loss 8.573, the first iteration had 8.94 with
#: none, 8.66 with 2, 8.60 with 4, 8.56 with 8, 8.56 with 16 (9.62 drawn from ``p(k | w)``
#: alone); a pass costs the CPU of about 2 sampler iterations at K = 10, 6 at K = 100.
#: 4 passes instead of 8 lose more than they save (AP, resumed 40 iterations, two seeds):
#: at K = 100 after 300 iterations (loss 8.686) the draw takes 1.4 s of CPU, not 2.0 s
#: (about 12 iterations), but the first loss is 8.97 (8.84 with 8) and the chain stays about
#: 16 iterations behind (8.756 vs 8.716 at the 40th); after 150 (8.856), 9.14 vs 9.00,
#: about 19 iterations saved and 10 behind; at K = 10 (8.583), 0.33 s vs 0.59 s (5
#: iterations) for 8.602 vs 8.573 first, still 8.577 vs 8.573 after 25 iterations.
DRAW_SWEEPS = 8


@numba.njit(**_JIT)
def sample_from_model(doc_ptr, token_word, row_ptr, row_topic, row_count, totals, alpha,
                      beta, n_words, sweeps, z, rng):
    """Topics of fresh tokens drawn from a model's word–topic counts and their documents:
    document by document, token by token, ``p(z_i = k) ∝ (n_wk + β) / (n_k + Vβ) ·
    (n_dk + α)``, ``n_dk`` the topics drawn so far in the token's document; then ``sweeps``
    passes redraw each token given all the other topics of its document, the model fixed
    (Gibbs sampling of the documents' topics, as when documents are folded into a trained
    model). The word–topic counts are the pulled rows (e.g. a checkpoint's, or those of the
    other documents after a lost worker); the token's own document adds nothing to them.
    From an empty table, a draw from the documents' prior (uniform for the first token).

    The weight is summed in three parts, as SparseLDA does (Yao, Mimno & McCallum, KDD
    2009): ``α n_wk / (n_k + Vβ)`` over the word's row (cumulated once per word),
    ``n_dk (n_wk + β) / (n_k + Vβ)`` over the document's topics (``n_wk`` found by
    bisection in the row) and ``αβ / (n_k + Vβ)`` (cumulated once): ``O(t log r + log K)``
    per token and pass, ``t`` the document's distinct topics and ``r`` the row's non-zeros.

    Parameters
    ----------
    doc_ptr : int64 array (D + 1,)
        Tokens of each document.
    token_word : int32 array (N,)
        Local word (row) of each token.
    row_ptr, row_topic, row_count
        CSR rows of the local words, topics ascending within a row (as pulled).
    totals : int64 array (K,)
    alpha, beta : float
    n_words : int
        V.
    sweeps : int
        Passes after the first.
    z : int32 array (N,)
        Receives the topics (by token).
    rng : uint64 array (1,)
    """
    n_topics = totals.shape[0]
    v_beta = n_words * beta
    inv = np.empty(n_topics, np.float64)
    cum_prior = np.empty(n_topics, np.float64)
    acc = 0.0
    for k in range(n_topics):
        inv[k] = 1.0 / (max(totals[k], 0) + v_beta)
        acc += alpha * beta * inv[k]
        cum_prior[k] = acc
    mass_prior = acc
    cum_word = np.empty(row_topic.shape[0], np.float64)
    for w in range(row_ptr.shape[0] - 1):
        acc = 0.0
        for j in range(row_ptr[w], row_ptr[w + 1]):
            acc += alpha * max(row_count[j], 0) * inv[row_topic[j]]
            cum_word[j] = acc
    n_dk = np.zeros(n_topics, np.int64)
    topics = np.empty(n_topics, np.int64)  # the document's topics (n_dk > 0)
    at_list = np.full(n_topics, -1, np.int64)  # where each is in ``topics`` (-1: absent)
    cum_doc = np.empty(n_topics, np.float64)
    s = rng[0]
    for d in range(doc_ptr.shape[0] - 1):
        m = 0
        for sweep in range(sweeps + 1):
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                if sweep > 0:
                    k = z[i]
                    n_dk[k] -= 1
                    if n_dk[k] == 0:  # out of the list: the last one takes its place
                        last = topics[m - 1]
                        topics[at_list[k]] = last
                        at_list[last] = at_list[k]
                        at_list[k] = -1
                        m -= 1
                w = token_word[i]
                r0, r1 = row_ptr[w], row_ptr[w + 1]
                mass_word = cum_word[r1 - 1] if r1 > r0 else 0.0
                mass_doc = 0.0
                for j in range(m):
                    k = topics[j]
                    at = r0 + np.searchsorted(row_topic[r0:r1], k)
                    c = max(row_count[at], 0) if at < r1 and row_topic[at] == k else 0
                    mass_doc += n_dk[k] * (c + beta) * inv[k]
                    cum_doc[j] = mass_doc
                s, u = _uniform(s)
                v = u * (mass_word + mass_doc + mass_prior)
                if v < mass_word:
                    j = min(np.searchsorted(cum_word[r0:r1], v, side="right"), r1 - r0 - 1)
                    k = row_topic[r0 + j]
                elif v < mass_word + mass_doc:
                    j = min(np.searchsorted(cum_doc[:m], v - mass_word, side="right"), m - 1)
                    k = topics[j]
                else:
                    k = min(np.searchsorted(cum_prior, v - mass_word - mass_doc,
                                            side="right"), n_topics - 1)
                z[i] = k
                n_dk[k] += 1
                if at_list[k] < 0:
                    at_list[k] = m
                    topics[m] = k
                    m += 1
        for j in range(m):
            n_dk[topics[j]] = 0
            at_list[topics[j]] = -1
    rng[0] = s


def token_words(word_ptr, word_tok) -> np.ndarray:
    """Local word (int32) of each token, from the tokens grouped by word
    (:func:`~._lda_tokens.group_by_word`)."""
    out = np.empty(word_tok.shape[0], np.int32)
    out[word_tok] = np.repeat(np.arange(word_ptr.shape[0] - 1, dtype=np.int32),
                              np.diff(word_ptr))
    return out
