"""The kernels of LDA's flat word–topic table against pure-Python twins: a pull cut across
shard boundaries gives the dense rows back; keys, counts and the warm sampler."""

import math

import numpy as np
import pytest
from scipy.special import gammaln
from test_lda_kernels import Rng

from dask_ps.algorithms import _lda_table as tb
from dask_ps.algorithms._lda_eval import word_loglik


# -- twins -----------------------------------------------------------------------------------
def shard_rows_twin(start, values, words, K, beta):
    """The rows of ``words`` a shard holding keys ``start..`` gives, as dicts, its totals and
    its log-likelihood part."""
    rows, totals, ll = {}, np.zeros(K, np.int64), 0.0
    for j, v in enumerate(values):
        w, k = divmod(start + j, K)
        if v:
            totals[k] += v
            ll += gammaln(v + beta) - gammaln(beta)
            if w in set(words.tolist()):
                rows.setdefault(w, []).append((k, int(v)))
    return rows, totals, ll


def sample_twin(doc_ptr, token_word, ptr, topic, count, totals, alpha, beta, V, sweeps,
                rng):
    """Topics drawn token by token from ``(n_wk + β)/(n_k + Vβ) · (n_dk + α)``, the weight in
    the kernel's three parts (word, document, priors), summed in the same order."""
    K = totals.size
    inv = 1.0 / (np.maximum(totals, 0) + V * beta)
    cum_prior = np.cumsum(alpha * beta * inv)
    z = np.zeros(token_word.size, np.int64)
    for d in range(doc_ptr.size - 1):
        n_dk = np.zeros(K, np.int64)
        order = []  # the document's topics; one leaving gives its place to the last
        for sweep in range(sweeps + 1):
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                if sweep:
                    n_dk[z[i]] -= 1
                    if n_dk[z[i]] == 0:
                        at = order.index(z[i])
                        order[at] = order[-1]
                        order.pop()
                w = token_word[i]
                row = dict(zip(topic[ptr[w]:ptr[w + 1]].tolist(),
                               np.maximum(count[ptr[w]:ptr[w + 1]], 0).tolist()))
                cum_word = np.cumsum([alpha * c * inv[k] for k, c in row.items()]) if row \
                    else np.zeros(0)
                cum_doc = np.cumsum([n_dk[k] * (row.get(k, 0) + beta) * inv[k]
                                     for k in order]) if order else np.zeros(0)
                mass_word = cum_word[-1] if row else 0.0
                mass_doc = cum_doc[-1] if order else 0.0
                v = rng.uniform() * (mass_word + mass_doc + cum_prior[-1])
                if v < mass_word:
                    k = list(row)[min(int(np.searchsorted(cum_word, v, side="right")),
                                      len(row) - 1)]
                elif v < mass_word + mass_doc:
                    k = order[min(int(np.searchsorted(cum_doc, v - mass_word, side="right")),
                                  len(order) - 1)]
                else:
                    k = min(int(np.searchsorted(cum_prior, v - mass_word - mass_doc,
                                                side="right")), K - 1)
                z[i] = k
                n_dk[k] += 1
                if k not in order:
                    order.append(k)
    return z


def random_table(V, K, density, seed):
    rng = np.random.default_rng(seed)
    nwk = np.where(rng.random((V, K)) < density, rng.integers(1, 2000, (V, K)), 0)
    return nwk.astype(np.int32)


# -- tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize("n_shards", [1, 3, 7])
@pytest.mark.parametrize("K", [1, 5, 64])
def test_pull_across_shards_gives_the_rows_back(n_shards, K):
    V = 23
    nwk = random_table(V, K, 0.3, K + n_shards)
    nwk[4] = 0  # an empty row
    flat = nwk.reshape(-1)
    rng = np.random.default_rng(n_shards)
    words = np.sort(rng.choice(V, 15, replace=False)).astype(np.int64)
    words = np.union1d(words, [4]).astype(np.int64)
    bounds = np.linspace(0, V * K, n_shards + 1).round().astype(np.int64)  # rows cut
    results, lls = [], 0.0
    for a, b in zip(bounds[:-1], bounds[1:]):
        r = tb.shard_rows(int(a), flat[a:b], words, K, True, 0.01)
        rows, totals, ll = shard_rows_twin(int(a), flat[a:b], words, K, 0.01)
        first, lens, topic, count, tot, got_ll = r
        np.testing.assert_array_equal(tot, totals)
        assert got_ll == pytest.approx(ll, rel=1e-9, abs=1e-9)
        mine = {}
        pos = 0
        for i, n in enumerate(lens):
            if n:
                mine[int(words[first + i])] = list(zip(topic[pos:pos + n].tolist(),
                                                       count[pos:pos + n].tolist()))
            pos += n
        assert mine == {w: v for w, v in rows.items()}
        assert tb.shard_rows(int(a), flat[a:b], words, K, False, 0.01)[5] == 0.0
        results.append(r)
        lls += ll
    ptr, topic, count, totals, ll = tb.join_shards(results, words.size, K)
    np.testing.assert_array_equal(totals, nwk.sum(axis=0))
    assert ll == pytest.approx(word_loglik(flat.copy(), 0.01), rel=1e-9)
    for i, w in enumerate(words):
        dense = np.zeros(K, np.int64)
        dense[topic[ptr[i]:ptr[i + 1]]] = count[ptr[i]:ptr[i + 1]]
        np.testing.assert_array_equal(dense, nwk[w])
        assert np.all(np.diff(topic[ptr[i]:ptr[i + 1]]) > 0)  # ascending, no repeat


def test_shard_rows_large_counts_and_empty_shard():
    K = 3
    values = np.array([0, 5000, 1, 0, 0, 0], np.int32)
    first, lens, topic, count, totals, ll = tb.shard_rows(3, values, np.array([1, 2], np.int64),
                                                          K, True, 0.5)
    assert first == 0 and lens.tolist() == [2, 0]
    assert topic.tolist() == [1, 2] and count.tolist() == [5000, 1]
    expect = math.lgamma(5000.5) + math.lgamma(1.5) - 2 * math.lgamma(0.5)
    assert ll == pytest.approx(expect)
    out = tb.shard_rows(0, np.zeros(0, np.int32), np.array([0], np.int64), K, True, 0.5)
    assert out[1].size == 0 and out[4].tolist() == [0, 0, 0] and out[5] == 0.0


def test_select_rows_and_delta_entries():
    ptr = np.array([0, 2, 2, 5], np.int64)
    topic = np.array([1, 3, 0, 2, 4], np.int32)
    count = np.array([7, 8, 1, 2, 3], np.int32)
    p2, t2, c2 = tb.select_rows(ptr, topic, count, np.array([2, 0, 1], np.int64))
    assert p2.tolist() == [0, 3, 5, 5]
    assert t2.tolist() == [0, 2, 4, 1, 3] and c2.tolist() == [1, 2, 3, 7, 8]
    vocab = np.array([10, 20, 30], np.int64)
    keys, values = tb.delta_entries(vocab, ptr, np.array([3, 1, 4, 0, 2], np.int32), count, 4,
                                    5, np.zeros(5, np.int64), np.zeros(5, np.int32))
    # the first 4 entries only, keys ascending within each row
    assert keys.tolist() == [51, 53, 150, 154] and values.tolist() == [8, 7, 2, 1]


def test_delta_entries_sort_long_and_short_rows():
    rng = np.random.default_rng(4)
    K, V_local = 200, 40
    lens = rng.integers(0, 60, V_local)  # rows up to 59 entries: both sorts
    ptr = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    topic = np.concatenate([rng.choice(K, n, replace=False) for n in lens]).astype(np.int32)
    value = rng.integers(-5, 6, ptr[-1]).astype(np.int32)
    vocab = np.sort(rng.choice(10_000, V_local, replace=False)).astype(np.int64)
    nnz = int(ptr[-1]) - 3
    keys, values = tb.delta_entries(vocab, ptr, topic, value, nnz, K,
                                    np.zeros(ptr[-1], np.int64), np.zeros(ptr[-1], np.int32))
    assert (np.diff(keys) > 0).all()  # ascending and distinct: the push plan is the identity
    want = sorted(zip((np.repeat(vocab, lens) * K + topic)[:nnz].tolist(),
                      value[:nnz].tolist()))
    assert list(zip(keys.tolist(), values.tolist())) == want


def test_topic_counts_match_a_dense_count():
    rng = np.random.default_rng(0)
    n, V_local, K = 500, 17, 6
    local = rng.integers(0, V_local, n).astype(np.int32)
    z = rng.integers(0, K, n).astype(np.int32)
    vocab = np.sort(rng.choice(1000, V_local, replace=False)).astype(np.int64)
    word_tok = np.argsort(local, kind="stable").astype(np.int64)
    word_ptr = np.concatenate(([0], np.cumsum(np.bincount(local, minlength=V_local))))
    keys, counts = tb.topic_counts(word_ptr.astype(np.int64), word_tok, z, vocab, K)
    dense = np.zeros((1000, K), np.int64)
    np.add.at(dense, (vocab[local], z), 1)
    got = np.zeros(1000 * K, np.int64)
    np.add.at(got, keys, counts)
    np.testing.assert_array_equal(got, dense.reshape(-1))
    assert np.unique(keys).size == keys.size and (counts > 0).all()


def test_sample_from_model_matches_twin_and_distribution():
    K, V, alpha, beta = 4, 50, 0.3, 0.1
    totals = np.array([100, 0, 40, 10], np.int64)
    ptr = np.array([0, 2, 2, 5], np.int64)  # word 1 has no counts
    topic = np.array([0, 2, 0, 1, 3], np.int32)
    count = np.array([30, 10, 7, -2, 5], np.int32)  # a stale negative count: zero
    gen = np.random.default_rng(1)
    lengths = gen.integers(0, 9, 60)
    doc_ptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    token_word = gen.integers(0, 3, doc_ptr[-1]).astype(np.int32)
    for sweeps in (0, 2):
        z = np.empty(token_word.size, np.int32)
        rng = np.array([12345], np.uint64)
        tb.sample_from_model(doc_ptr, token_word, ptr, topic, count, totals, alpha, beta, V,
                             sweeps, z, rng)
        twin = sample_twin(doc_ptr, token_word, ptr, topic, count, totals, alpha, beta, V,
                           sweeps, Rng(12345))
        np.testing.assert_array_equal(z, twin)
    # a document of one token: its topic's law is the model's p(k | w) alone, whatever the
    # passes after the first
    n = 6000
    one = np.arange(n + 1, dtype=np.int64)
    z = np.empty(n, np.int32)
    tb.sample_from_model(one, np.zeros(n, np.int32), ptr, topic, count, totals, alpha, beta,
                         V, 2, z, np.array([7], np.uint64))
    row = np.zeros(K)
    row[topic[:2]] = count[:2]
    p = (row + beta) / (totals + V * beta)
    p /= p.sum()
    seen = np.bincount(z, minlength=K) / n
    tolerance = 4 * np.sqrt(p * (1 - p) / n) + 1e-3  # 4 standard errors
    assert np.all(np.abs(seen - p) <= tolerance), (seen, p)


def test_sample_from_model_follows_the_documents_topics():
    """Words shared by two topics alike are drawn with the topic of their document's other
    words (a word only topic 0 or only topic 1 has): the document's draws count."""
    V, alpha, beta = 3, 0.1, 0.01  # two topics
    ptr = np.array([0, 1, 2, 4], np.int64)  # word 0: topic 0, word 1: topic 1, word 2: both
    topic = np.array([0, 1, 0, 1], np.int32)
    count = np.array([1000, 1000, 500, 500], np.int32)
    totals = np.array([1500, 1500], np.int64)
    n_docs = 400  # half of topic 0's word, half of topic 1's, then 10 shared words each
    token_word = np.tile(np.r_[np.zeros(10), np.full(10, 2)], n_docs).astype(np.int32)
    token_word[np.repeat(np.arange(n_docs) % 2 == 1, 20) & (token_word == 0)] = 1
    doc_ptr = np.arange(0, 20 * n_docs + 1, 20, dtype=np.int64)
    z = np.empty(token_word.size, np.int32)
    tb.sample_from_model(doc_ptr, token_word, ptr, topic, count, totals, alpha, beta, V,
                         tb.DRAW_SWEEPS, z, np.array([3], np.uint64))
    shared = (token_word == 2).reshape(n_docs, 20)
    doc_topic = np.arange(n_docs) % 2
    agree = (z.reshape(n_docs, 20) == doc_topic[:, None])[shared].mean()
    assert agree > 0.9, agree  # drawn from p(k | w) alone: 0.5
