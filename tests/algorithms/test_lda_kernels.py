"""LDA kernels against pure-Python twins; count invariants of a simulated PS loop; the MH phases
leave the collapsed conditional invariant; θ EM, log-likelihood parts, the held-out protocol."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln

from dask_ps.algorithms import _lda_eval as ev
from dask_ps.algorithms import _lda_kernels as kr
from dask_ps.algorithms import _lda_tokens as tk
from dask_ps.algorithms._lda_eval import fold_in, heldout_split, perplexity, phi_from_counts
from dask_ps.algorithms._lda_kernels import PROP, Z_PUSHED, Z

MASK = (1 << 64) - 1


# -- twins -----------------------------------------------------------------------------------
class Rng:
    """SplitMix64 (Steele, Lea & Flood, OOPSLA 2014) with Python integers."""

    def __init__(self, state):
        self.state = int(state)

    def raw(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        x = self.state
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
        return x ^ (x >> 31)

    def uniform(self):
        return (self.raw() >> 11) * 2.0 ** -53


def doc_proposals_twin(z, a, b, n_topics, alpha, rng, n_mh):
    """Proposals of one document's tokens, q_d(k) ∝ n_dk + α: a random token's topic, or
    uniform."""
    length = b - a
    total = length + n_topics * alpha
    props = []
    for _ in range(a, b):
        row = []
        for _ in range(n_mh):
            v = rng.uniform() * total
            if v < length:
                row.append(z[min(a + int(v), b - 1)])
            else:
                row.append(min(int((v - length) * (n_topics / (n_topics * alpha))),
                               n_topics - 1))
        props.append(row)
    return props


def init_twin(doc_ptr, z, n_mh, n_topics, alpha, rng):
    state = np.zeros((z.size, kr.new_state(0, n_mh).shape[1]), np.int32)
    state[:, Z] = state[:, Z_PUSHED] = z
    for d in range(doc_ptr.size - 1):
        a, b = doc_ptr[d], doc_ptr[d + 1]
        if b > a:
            state[a:b, PROP:PROP + n_mh] = doc_proposals_twin(z, a, b, n_topics, alpha, rng,
                                                              n_mh)
    return state


def mh_step(x, t, u, target, base, prior):
    """Metropolis–Hastings from ``x`` to ``t`` when the proposal drew ``t`` as the topic of a
    random token (the moving one included, at the current topic) or from the prior:
    ``q(t | x) ∝ base[t] + [t == x] + prior``, ``base`` the counts without the token."""
    def q(a, b):
        return base[a] + (a == b) + prior

    return t if t != x and u < target(t) * q(x, t) / (target(x) * q(t, x)) else x


def word_phase_twin(words, doc_of, snapshot, nk, nk_delta, state, n_mh, alpha, beta, n_words,
                    rng):
    """The word phase from the collapsed conditional: the doc counts as they were when the
    proposals were drawn (recounted here from ``Z``), the snapshot row less the token where the
    snapshot counts it, the current totals. Returns the dense delta to push."""
    n_topics = nk.size
    state = state.copy()
    nk_delta = nk_delta.copy()
    nd = np.zeros((doc_of.max() + 1 if doc_of.size else 0, n_topics), np.int64)
    np.add.at(nd, (doc_of, state[:, Z]), 1)
    delta = np.zeros(snapshot.shape, np.int64)
    prob = np.empty(n_topics)
    alias = np.empty(n_topics, np.int64)
    stack = np.empty(n_topics, np.int64)
    for w in range(snapshot.shape[0]):
        row = np.maximum(snapshot[w], 0)
        topics = np.flatnonzero(snapshot[w]).astype(np.int32)
        counts = snapshot[w, topics].astype(np.int32)
        nw = int(row.sum())
        if nw > 0:
            kr.build_alias.py_func(counts, 0, topics.size, nw, prob, alias, stack)
        for i in np.flatnonzero(words == w):
            z0, zs, d = state[i, Z], state[i, Z_PUSHED], doc_of[i]
            base = nd[d] - (np.arange(n_topics) == z0)

            def target(k):
                return ((base[k] + alpha) * (max(row[k] - (k == zs), 0) + beta)
                        / (max(nk[k] + nk_delta[k] - (k == z0), 0) + n_words * beta))

            x = z0
            for j in range(n_mh):
                x = mh_step(x, state[i, PROP + j], rng.uniform(), target, base, alpha)
            nk_delta[z0] -= 1
            nk_delta[x] += 1
            delta[w, zs] -= 1
            delta[w, x] += 1
            state[i, Z] = state[i, Z_PUSHED] = x
            for j in range(n_mh):
                v = rng.uniform() * (nw + n_topics * beta)
                if v < nw:
                    v *= topics.size / nw
                    slot = min(int(v), topics.size - 1)
                    topic = topics[slot] if v - slot < prob[slot] else topics[alias[slot]]
                else:
                    topic = min(int((v - nw) * (n_topics / (n_topics * beta))), n_topics - 1)
                state[i, PROP + n_mh + j] = topic
    return state, nk_delta, delta


def doc_phase_twin(doc_ptr, words, snapshot, z_pushed, nk, nk_delta, state, n_mh, alpha, beta,
                   n_words, rng):
    """The doc phase from the collapsed conditional: current doc counts, the snapshot row less
    the token where the snapshot counted it (``z_pushed``, before the word phase), the
    current totals; q_w(k) ∝ snapshot + β."""
    n_topics = nk.size
    state = state.copy()
    nk_delta = nk_delta.copy()
    moved = np.zeros(n_topics, np.int64)
    ll = 0.0
    for d in range(doc_ptr.size - 1):
        a, b = doc_ptr[d], doc_ptr[d + 1]
        if a == b:
            continue
        cd = np.bincount(state[a:b, Z], minlength=n_topics)
        ll += (np.sum(gammaln(cd + alpha) - gammaln(alpha))
               - gammaln(b - a + n_topics * alpha) + gammaln(n_topics * alpha))
        for p in range(a, b):
            s0, zs = state[p, Z], z_pushed[p]
            base = np.maximum(snapshot[words[p]] - (np.arange(n_topics) == zs), 0)
            cd_base = cd - (np.arange(n_topics) == s0)

            def target(k):
                return ((cd_base[k] + alpha) * (base[k] + beta)
                        / (max(nk[k] + nk_delta[k] - (k == s0), 0) + n_words * beta))

            x = s0
            for j in range(n_mh):
                x = mh_step(x, state[p, PROP + n_mh + j], rng.uniform(), target, base, beta)
            for arr in (cd, nk_delta, moved):
                arr[s0] -= 1
                arr[x] += 1
            state[p, Z] = x
        state[a:b, PROP:PROP + n_mh] = doc_proposals_twin(state[:, Z], a, b, n_topics, alpha,
                                                          rng, n_mh)
    return state, nk_delta, moved, ll


# -- helpers ---------------------------------------------------------------------------------
def corpus(n_docs, n_words, mean_length, seed, empty=()):
    """Random CSR counts (int32), Zipf-like word frequencies; rows in ``empty`` left empty."""
    rng = np.random.default_rng(seed)
    lengths = rng.poisson(mean_length, n_docs) + 1
    lengths[list(empty)] = 0
    freq = 1.0 / np.arange(1, n_words + 1)
    rows = np.repeat(np.arange(n_docs), lengths)
    cols = rng.choice(n_words, rows.size, p=freq / freq.sum())
    X = sp.csr_matrix((np.ones(rows.size, np.int32), (rows, cols)), shape=(n_docs, n_words))
    X.sum_duplicates()
    return X


class Partition:
    """One simulated worker's cached partition and state (local word ids)."""

    def __init__(self, X, n_mh, n_topics, alpha, seed):
        self.doc_ptr, words = tk.tokens_from_counts(X.indptr, X.indices, X.data)
        self.vocab, self.words = tk.local_vocabulary(words)
        self.word_ptr, self.word_tok = tk.group_by_word(self.words, self.vocab.size)
        self.doc_of = np.repeat(np.arange(self.doc_ptr.size - 1), np.diff(self.doc_ptr))
        self.state = kr.new_state(words.size, n_mh)
        self.rng = np.array([seed], np.uint64)
        self.n_mh = n_mh
        kr.init_state(self.doc_ptr, self.state, n_mh, n_topics, alpha, True, self.rng)
        self.moved = np.zeros(n_topics, np.int64)
        room = kr.delta_capacity(self.word_ptr, n_topics)
        assert room == np.minimum(2 * np.diff(self.word_ptr), n_topics).sum()
        self.out = (np.zeros(self.vocab.size + 1, np.int64), np.zeros(room, np.int32),
                    np.zeros(room, np.int32))


def table_from(parts, n_words, n_topics, column=Z):
    nwk = np.zeros((n_words, n_topics), np.int32)
    for p in parts:
        tk.word_topic_counts(p.vocab[p.words].astype(np.int32),
                             np.ascontiguousarray(p.state[:, column]), nwk)
    return nwk


def ps_iteration(parts, nwk, nk, alpha, beta, last=False):
    """One BSP clock: every part pulls its rows, runs the word phase, pushes; then (unless
    ``last``) the doc phase. Returns the documents' log-likelihood part (0 if ``last``)."""
    n_words, n_topics = nwk.shape
    snaps = [(tk.dense_to_rows(nwk[p.vocab]), nk.copy()) for p in parts]
    pushes = []
    for p, (rows, nk_snap) in zip(parts, snaps):
        nk_delta = p.moved.copy()
        nnz = kr.word_phase(p.word_ptr, p.word_tok, *rows, nk_snap, nk_delta, p.state, p.n_mh,
                            alpha, beta, n_words, p.rng, *p.out)
        pushes.append((p, nnz, nk_delta))
    for p, nnz, nk_delta in pushes:
        ptr, topic, value = p.out
        rows = np.repeat(p.vocab, np.diff(ptr))
        np.add.at(nwk, (rows, topic[:nnz]), value[:nnz])
        nk += nk_delta
    if last:
        return 0.0
    ll = 0.0
    for (p, _, nk_delta), (_, nk_snap) in zip(pushes, snaps):
        ll += kr.doc_phase(p.doc_ptr, nk_snap, nk_delta, p.state, p.n_mh, alpha, beta,
                           n_words, p.rng, p.moved)
    return ll


def check_counts(parts, nwk, nk, column):
    n_words, n_topics = nwk.shape
    want = table_from(parts, n_words, n_topics, column)
    np.testing.assert_array_equal(nwk, want)
    np.testing.assert_array_equal(nk, want.sum(axis=0))
    assert nk.sum() == sum(p.words.size for p in parts)


# -- tests -----------------------------------------------------------------------------------
def test_rng_is_splitmix64():
    twin = Rng(0)
    assert twin.raw() == 0xE220A8397B1DCDAF  # the published first output for seed 0
    rng = np.array([12345], np.uint64)
    out = np.empty(1000)
    kr.uniforms(rng, out)
    twin = Rng(12345)
    np.testing.assert_array_equal(out, [twin.uniform() for _ in range(1000)])
    assert int(rng[0]) == twin.state
    assert 0.0 <= out.min() and out.max() < 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alias_table_reproduces_the_weights(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(-2, 50, 37).astype(np.int32)
    counts[[3, 9]] = 0
    m = counts.size - 5
    w = np.maximum(counts[5:], 0)
    prob, alias, stack = np.empty(m), np.empty(m, np.int64), np.empty(m, np.int64)
    kr.build_alias(counts, 5, m, int(w.sum()), prob, alias, stack)
    implied = np.zeros(m)
    for j in range(m):
        implied[j] += prob[j] / m
        implied[alias[j]] += (1.0 - prob[j]) / m
    np.testing.assert_allclose(implied, w / w.sum(), atol=1e-12)


@pytest.mark.parametrize("n_mh", [1, 2])
def test_phases_match_their_twins(n_mh):
    """Three clocks of two simulated workers; each phase of each worker against its twin,
    bit for bit (state, totals, the pushed delta) and the log-likelihood to 1e-9."""
    K, V, alpha, beta = 5, 9, 0.3, 0.05
    X = corpus(8, V, 6, seed=3, empty=[2])
    parts = [Partition(X[:4], n_mh, K, alpha, 11), Partition(X[4:], n_mh, K, alpha, 12)]
    # init against its twin
    for p, seed in zip(parts, (11, 12)):
        twin = Rng(seed)
        z = np.array([min(int(twin.uniform() * K), K - 1) for _ in range(p.words.size)],
                     np.int32)
        np.testing.assert_array_equal(p.state, init_twin(p.doc_ptr, z, n_mh, K, alpha, twin))
        assert int(p.rng[0]) == twin.state
    nwk = table_from(parts, V, K)
    nk = nwk.sum(axis=0).astype(np.int64)
    for _ in range(3):
        snapshot, nk_snap = nwk.copy(), nk.copy()
        pushes = []
        for p in parts:
            p.z_pushed = p.state[:, Z_PUSHED].copy()
            local = snapshot[p.vocab]
            twin = Rng(int(p.rng[0]))
            want_state, want_nkd, want_delta = word_phase_twin(
                p.words, p.doc_of, local, nk_snap, p.moved, p.state, n_mh, alpha, beta, V, twin)
            nk_delta = p.moved.copy()
            nnz = kr.word_phase(p.word_ptr, p.word_tok, *tk.dense_to_rows(local), nk_snap,
                                nk_delta, p.state, n_mh, alpha, beta, V, p.rng, *p.out)
            np.testing.assert_array_equal(p.state, want_state)
            np.testing.assert_array_equal(nk_delta, want_nkd)
            assert int(p.rng[0]) == twin.state
            ptr, topic, value = p.out
            got = np.zeros_like(want_delta)
            got[np.repeat(np.arange(p.vocab.size), np.diff(ptr)), topic[:nnz]] = value[:nnz]
            np.testing.assert_array_equal(got, want_delta)
            assert np.all(value[:nnz] != 0)
            np.testing.assert_array_equal(nk_delta, want_delta.sum(axis=0))
            pushes.append(nk_delta)
            nwk[p.vocab] += got.astype(np.int32)
            nk += nk_delta
        for p, nk_delta in zip(parts, pushes):
            twin = Rng(int(p.rng[0]))
            want = doc_phase_twin(p.doc_ptr, p.words, snapshot[p.vocab], p.z_pushed, nk_snap,
                                  nk_delta, p.state, n_mh, alpha, beta, V, twin)
            ll = kr.doc_phase(p.doc_ptr, nk_snap, nk_delta, p.state, n_mh, alpha, beta, V,
                              p.rng, p.moved)
            np.testing.assert_array_equal(p.state, want[0])
            np.testing.assert_array_equal(nk_delta, want[1])
            np.testing.assert_array_equal(p.moved, want[2])
            assert ll == pytest.approx(want[3], rel=1e-9, abs=1e-9)
            assert int(p.rng[0]) == twin.state
    assert any((p.state[:, Z] != p.state[:, Z_PUSHED]).any() for p in parts)  # it moved


@pytest.mark.parametrize("K, V, alpha, beta", [(6, 40, 0.1, 0.01),      # ordinary
                                               (50, 5, 0.1, 0.01),      # K > V
                                               (8, 30, 1e-6, 1e-6)])    # tiny priors
def test_counts_follow_the_assignments_every_clock(K, V, alpha, beta):
    """After every push the table equals the counts of what was pushed (``Z_PUSHED``), sums
    to the token count, and the totals match; the log-likelihood parts are finite and add up
    to log p(w, z); proposals are valid topics."""
    X = corpus(30, V, 12, seed=5, empty=[0, 17])
    parts = [Partition(X[:15], 1, K, alpha, 1), Partition(X[15:], 1, K, alpha, 2)]
    nwk = table_from(parts, V, K)
    nk = nwk.sum(axis=0).astype(np.int64)
    for clock in range(8):
        ll_docs = ps_iteration(parts, nwk, nk, alpha, beta, last=clock == 7)
        check_counts(parts, nwk, nk, Z_PUSHED)
        if clock < 7:
            assert np.isfinite(ll_docs)
            total = ll_docs + ev.word_loglik(nwk.ravel(), beta) + ev.topic_loglik(nk, V, beta)
            assert total == pytest.approx(joint_loglik(parts, nwk, alpha, beta), rel=1e-9)
            for p in parts:
                props = p.state[:, PROP:PROP + 2]
                assert props.min() >= 0 and props.max() < K
    check_counts(parts, nwk, nk, Z)  # ended on a word phase: everything is pushed
    assert (nwk >= 0).all()
    phi = phi_from_counts(nwk, beta)
    assert np.isfinite(phi).all() and np.allclose(phi.sum(axis=1), 1.0)


def joint_loglik(parts, nwk, alpha, beta):
    """log p(w, z) of the pushed assignments (``Z_PUSHED``), from dense counts and gammaln."""
    V, K = nwk.shape
    ll = np.sum(gammaln(nwk + beta)) - V * K * gammaln(beta)
    nk = nwk.sum(axis=0)
    ll += K * gammaln(V * beta) - np.sum(gammaln(nk + V * beta))
    for p in parts:
        nd = np.zeros((p.doc_ptr.size - 1, K), np.int64)
        np.add.at(nd, (p.doc_of, p.state[:, Z_PUSHED]), 1)
        nd = nd[np.diff(p.doc_ptr) > 0]
        ll += (np.sum(gammaln(nd + alpha)) - nd.size * gammaln(alpha)
               + nd.shape[0] * gammaln(K * alpha) - np.sum(gammaln(nd.sum(axis=1) + K * alpha)))
    return ll


def test_doc_loglik_matches_doc_phase():
    K, alpha = 7, 0.2
    X = corpus(12, 20, 9, seed=8, empty=[4])
    p = Partition(X, 1, K, alpha, 3)
    want = ev.doc_loglik(p.doc_ptr, np.ascontiguousarray(p.state[:, Z]), K, alpha)
    nwk = table_from([p], 20, K)
    nk = nwk.sum(axis=0).astype(np.int64)
    got = kr.doc_phase(p.doc_ptr, nk, np.zeros(K, np.int64), p.state, 1, alpha, 0.01, 20,
                       p.rng, p.moved)
    # to the last bit: the loss of an iteration whose job ends before its doc phase (which
    # then sums this) is the same as if the doc phase had run at once
    assert got == want


# -- the MH phases leave the exact collapsed conditional invariant ----------------------------
# doc 0 = words [0, 1, 0, 2], doc 1 = [0, 1, 1], doc 2 = [2, 0]; token 0 (doc 0, word 0) is
# the first token both phases visit. Its topic is drawn from the collapsed conditional given
# the others; one phase must leave that distribution unchanged (detailed balance).
TINY_WORDS = np.array([0, 1, 0, 2, 0, 1, 1, 2, 0], np.int32)
TINY_DOCS = np.array([0, 4, 7, 9], np.int64)
TINY_Z = np.array([-1, 1, 2, 3, 0, 1, 3, 2, 0], np.int32)  # token 0 to be drawn
TINY_K, TINY_V, TINY_ALPHA, TINY_BETA = 4, 3, 0.5, 0.1


def conditional(exclude_self=True):
    """p(z_0 = k | rest) ∝ (n_dk¬ + α)(n_wk¬ + β)/(n_k¬ + Vβ); without the exclusion: the
    (wrong) distribution that counts the token itself at every k."""
    others = np.arange(1, TINY_Z.size)
    nd = np.bincount(TINY_Z[1:4], minlength=TINY_K)
    nw = np.bincount(TINY_Z[others][TINY_WORDS[others] == 0], minlength=TINY_K)
    nk = np.bincount(TINY_Z[others], minlength=TINY_K)
    extra = 0 if exclude_self else 1
    p = ((nd + extra + TINY_ALPHA) * (nw + extra + TINY_BETA)
         / (nk + extra + TINY_V * TINY_BETA))
    return p / p.sum()


def tiny_state(z0, n_mh, rng):
    z = TINY_Z.copy()
    z[0] = z0
    state = kr.new_state(z.size, n_mh)
    state[:, Z] = z
    kr.init_state(TINY_DOCS, state, n_mh, TINY_K, TINY_ALPHA, False, rng)
    nwk = np.zeros((TINY_V, TINY_K), np.int32)
    tk.word_topic_counts(TINY_WORDS, z, nwk)
    return state, nwk


@pytest.mark.parametrize("n_mh", [1, 3])
def test_word_phase_keeps_the_collapsed_conditional(n_mh):
    pi = conditional()
    word_ptr, word_tok = tk.group_by_word(TINY_WORDS, TINY_V)
    rng = np.array([7], np.uint64)
    draws = np.random.default_rng(0).choice(TINY_K, 20000, p=pi)
    ends = np.empty_like(draws)
    out = (np.zeros(TINY_V + 1, np.int64), np.zeros(18, np.int32), np.zeros(18, np.int32))
    for r, z0 in enumerate(draws):
        state, nwk = tiny_state(z0, n_mh, rng)
        nk = nwk.sum(axis=0).astype(np.int64)
        kr.word_phase(word_ptr, word_tok, *tk.dense_to_rows(nwk), nk, np.zeros(TINY_K, np.int64),
                      state, n_mh, TINY_ALPHA, TINY_BETA, TINY_V, rng, *out)
        ends[r] = state[0, Z]
    freq = np.bincount(ends, minlength=TINY_K) / ends.size
    assert (ends != draws).mean() > 0.05  # the chain moves
    assert 0.5 * np.abs(freq - pi).sum() < 0.015
    assert 0.5 * np.abs(freq - conditional(exclude_self=False)).sum() > 0.05  # test has power


@pytest.mark.parametrize("n_mh, tolerance", [(1, 0.015), (3, 0.05)])
def test_doc_phase_keeps_the_collapsed_conditional(n_mh, tolerance):
    """Word proposals drawn here from q_w ∝ snapshot + β, as the word phase draws them. One
    step is exact; later steps reuse proposals drawn for the first state, WarpLDA's
    approximation, whose size on this deliberately small example the looser bound records
    (measured: total variation 0.026 with 3 steps)."""
    pi = conditional()
    rng = np.array([9], np.uint64)
    gen = np.random.default_rng(1)
    draws = gen.choice(TINY_K, 20000, p=pi)
    uniforms = gen.random((draws.size, TINY_WORDS.size, n_mh, 1))
    ends = np.empty_like(draws)
    for z0 in range(TINY_K):
        state0, nwk = tiny_state(z0, n_mh, rng)
        nk = nwk.sum(axis=0).astype(np.int64)
        q = np.cumsum(nwk[TINY_WORDS] + TINY_BETA, axis=1)
        q /= q[:, -1:]
        reps = np.flatnonzero(draws == z0)
        # inverse CDF: the word proposals of every token of every repetition
        props = (uniforms[reps] > q[None, :, None, :]).sum(axis=-1)
        for r, prop in zip(reps, props):
            state = state0.copy()
            kr.init_state(TINY_DOCS, state, n_mh, TINY_K, TINY_ALPHA, False, rng)
            state[:, PROP + n_mh:PROP + 2 * n_mh] = prop
            kr.doc_phase(TINY_DOCS, nk, np.zeros(TINY_K, np.int64), state, n_mh, TINY_ALPHA,
                         TINY_BETA, TINY_V, rng, np.zeros(TINY_K, np.int64))
            ends[r] = state[0, Z]
    freq = np.bincount(ends, minlength=TINY_K) / ends.size
    assert (ends != draws).mean() > 0.05
    assert 0.5 * np.abs(freq - pi).sum() < tolerance
    assert 0.5 * np.abs(freq - conditional(exclude_self=False)).sum() > 0.05


# -- θ given φ, held-out protocol ------------------------------------------------------------
def theta_twin(X, phi, alpha, n_iter):
    K = phi.shape[0]
    theta = np.full((X.shape[0], K), 1.0 / K)
    for d in range(X.shape[0]):
        row = X.getrow(d)
        n = row.data.sum()
        if n == 0:
            continue
        for _ in range(n_iter):
            acc = np.zeros(K)
            for w, c in zip(row.indices, row.data):
                r = theta[d] * phi[:, w]
                acc += c * r / r.sum()
            theta[d] = (acc + alpha) / (n + K * alpha)
    return theta


@pytest.mark.parametrize("alpha", [0.1, 1e-6])
def test_theta_em_matches_twin_rows_sum_to_one(alpha):
    rng = np.random.default_rng(4)
    K, V = 6, 25
    phi = rng.dirichlet(np.full(V, 0.3), K)
    X = corpus(9, V, 10, seed=6, empty=[3])
    theta = fold_in(phi, X, alpha, 50)
    np.testing.assert_allclose(theta, theta_twin(X, phi, alpha, 50), rtol=1e-9, atol=1e-15)
    assert np.isfinite(theta).all()
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(theta[3], np.full(K, 1.0 / K))  # empty: the prior mean


def test_heldout_split_and_uniform_model_perplexity():
    X = sp.hstack([corpus(200, 60, 20, seed=9), sp.csr_matrix((200, 1), dtype=np.int32)],
                  format="csr")  # the last term is used by no document
    split = heldout_split(X, 0.1, seed=3)
    again = heldout_split(X, 0.1, seed=3)
    assert (split.observed != again.observed).nnz == 0 and (split.unseen != again.unseen).nnz == 0
    assert split.test_docs.size == 20 and split.train.shape[0] == 180
    assert np.intersect1d(split.test_docs, split.train_docs).size == 0
    known = np.asarray(split.train.sum(axis=0)).ravel()
    assert (known > 0).all() and split.train.shape[1] == split.terms.size
    test = X[split.test_docs][:, split.terms]
    np.testing.assert_array_equal((split.observed + split.unseen).toarray(), test.toarray())
    halves = np.asarray(split.observed.sum(axis=1)).ravel()
    np.testing.assert_array_equal(halves, np.asarray(test.sum(axis=1)).ravel() // 2)
    V = split.terms.size
    assert perplexity(np.full((4, V), 1.0 / V), split) == pytest.approx(V, rel=1e-12)


def test_tokens_from_counts_names_the_bad_entry():
    X = sp.csr_matrix(np.array([[1, 0, 2], [0, 3, 0], [0, 0, 0], [1, 1, 0]], np.float32))
    doc_ptr, words = tk.tokens_from_counts(X.indptr, X.indices, X.data)
    np.testing.assert_array_equal(doc_ptr, [0, 3, 6, 6, 8])
    np.testing.assert_array_equal(words, [0, 2, 2, 1, 1, 1, 0, 1])
    bad = X.copy()
    bad.data[3] = 1.5
    with pytest.raises(ValueError, match="document 13, term 0 has count 1.5"):
        tk.tokens_from_counts(bad.indptr, bad.indices, bad.data, first_row=10)
    bad.data[3] = -1
    with pytest.raises(ValueError, match="document 3, term 0"):
        tk.tokens_from_counts(bad.indptr, bad.indices, bad.data)


def test_new_state_aligned_and_checked():
    for n_mh, width in [(1, 4), (2, 8), (3, 8), (4, 16), (7, 16)]:
        state = kr.new_state(1001, n_mh)
        assert state.shape == (1001, width) and state.ctypes.data % 64 == 0
        assert state.flags.c_contiguous and not state.any()
    with pytest.raises(ValueError, match="n_mh must be in 1..7"):
        kr.new_state(3, 8)


def test_word_loglik_table_and_direct_paths_agree():
    counts = np.array([0, 1, 5, 1023, 1024, 5000], np.int32)
    want = sum(math.lgamma(c + 0.01) - math.lgamma(0.01) for c in counts)
    assert ev.word_loglik(counts, 0.01) == pytest.approx(want, rel=1e-12)


def test_each_kernel_compiled_once():
    """The wrappers and tests pass fixed dtypes: one specialisation per kernel."""
    for kernel in (kr.init_state, kr.word_phase, kr.doc_phase, tk.dense_to_rows, kr.delta_capacity,
                   tk.word_topic_counts, kr.uniforms, ev.word_loglik, ev.topic_loglik,
                   ev.theta_em, ev.heldout_loglik, ev.doc_loglik):
        assert len(kernel.signatures) <= 1, (kernel, kernel.signatures)


def test_phases_refuse_mismatched_arrays_before_writing():
    X = corpus(5, 8, 6, seed=2)
    p = Partition(X, 1, 4, 0.1, 1)
    nwk = table_from([p], 8, 4)
    rows = tk.dense_to_rows(nwk[p.vocab])
    nk = nwk.sum(axis=0).astype(np.int64)
    before = p.state.copy()
    ptr, topic, value = p.out
    with pytest.raises(ValueError, match="shorter than delta_capacity"):
        kr.word_phase(p.word_ptr, p.word_tok, *rows, nk, np.zeros(4, np.int64), p.state, 1,
                      0.1, 0.01, 8, p.rng, ptr, topic[:3], value)
    with pytest.raises(ValueError, match="too few columns"):
        kr.word_phase(p.word_ptr, p.word_tok, *rows, nk, np.zeros(4, np.int64), p.state, 2,
                      0.1, 0.01, 8, p.rng, *p.out)
    with pytest.raises(ValueError, match="alpha, beta must be > 0"):
        kr.doc_phase(p.doc_ptr, nk, np.zeros(4, np.int64), p.state, 1, 0.1, 0.0, 8, p.rng,
                     np.zeros(4, np.int64))
    bad = (rows[0], rows[1].copy(), rows[2])
    bad[1][0] = 4
    with pytest.raises(ValueError, match="outside 0..K-1"):
        kr.word_phase(p.word_ptr, p.word_tok, *bad, nk, np.zeros(4, np.int64), p.state.copy(),
                      1, 0.1, 0.01, 8, p.rng, *p.out)
    np.testing.assert_array_equal(p.state, before)
