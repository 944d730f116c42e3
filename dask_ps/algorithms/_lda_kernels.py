"""Numba kernels of LDA training: a WarpLDA-style Metropolis–Hastings sampler over a stale
snapshot of the word–topic counts, and the collapsed log-likelihood in parts.

The sampler is WarpLDA's (Chen et al., VLDB 2016). Every token carries ``M`` proposals. The
*word phase* visits the tokens grouped by word: it accepts or rejects the doc proposals drawn at
the end of the last doc phase and draws word proposals ``q_w(k) ∝ n_wk + β`` (an alias table of
the word's row, Walker 1977 / Vose 1991, plus a uniform topic for the β part). The *doc phase*
visits the tokens document by document: it accepts or rejects the word proposals and draws doc
proposals ``q_d(k) ∝ n_dk + α`` (the topic of a random token of the document, or a uniform
topic). A phase reads only the visited word's (or document's) counts and the topic totals, so
costs are O(1) per token plus O(non-zeros of the row) per word, whatever the number of topics K.

The target of token ``i`` is the collapsed conditional (Griffiths & Steyvers, PNAS 2004)
``p(z_i = k) ∝ (n_dk¬ + α)(n_wk¬ + β)/(n_k¬ + Vβ)``, ``¬`` meaning without token ``i``. A doc
proposal counts the token itself at its current topic ``s``, so the reverse move's proposal
``q(s | t)`` counts it at ``t``: the doc factor cancels exactly and the word phase accepts
``t`` with probability ``min(1, (n_wt¬ + β)(n_s¬ + Vβ) / ((n_ws¬ + β)(n_t¬ + Vβ)))``; likewise the
word factor cancels in the doc phase. With ``M > 1`` the later steps reuse proposals drawn for
the first state, as in WarpLDA (an approximation; ``M = 1`` is exact per step).

For the parameter server (PS):

* ``n_wk`` is a *snapshot* of sparse rows pulled once per clock and never changed during it,
  as the delayed counts of WarpLDA, LightLDA (Yuan et al., WWW 2015) and Yahoo LDA (Smola &
  Narayanamurthy, VLDB 2010). ``n_wk¬`` removes the token where the snapshot counts it
  (``Z_PUSHED``); ``n_k = nk + nk_delta`` adds the partition's own moves the snapshot lacks.
  A count that a stale snapshot lacks is clamped at zero, so factors stay positive.
* The word phase emits the partition's ``n_wk`` delta since the last push (from ``Z_PUSHED``
  to the new topic) as CSR rows of the local words, into buffers of
  :func:`delta_capacity` entries allocated once. A clock is::

      pull rows, nk  ->  word_phase (delta)  ->  push delta, nk_delta  ->  doc_phase

  so the doc phase (about a third of the work) runs while the push and the next pull travel.
  At the end of training stop after a push: the table then counts every token's ``Z``.
* Document–topic counts are not stored: the doc phase recounts each document from ``Z``
  (O(document length), no D × K array on the worker), as WarpLDA does.

Data layout of one worker partition (what the PS wiring provides):

* Tokens in document order: ``doc_ptr`` int64 (D + 1,), document ``d`` owns tokens
  ``doc_ptr[d]:doc_ptr[d+1]``. Grouped by local word: ``word_ptr`` int64 (V_local + 1,),
  ``word_tok`` int64 (N,) (:func:`~._lda_tokens.group_by_word`). Local word ids
  ``0..V_local-1`` index the rows pulled, in the order of
  :func:`~._lda_tokens.local_vocabulary`'s global ids.
* Snapshot rows: ``row_ptr`` int64 (V_local + 1,), ``row_topic`` int32, ``row_count`` int32, no
  topic repeated within a row (:func:`~._lda_tokens.dense_to_rows` makes them from dense rows);
  ``nk`` int64 (K,), the snapshot's totals.
* ``state`` int32 (N, width) from :func:`new_state`, the per-token state kept on the worker:
  column ``Z`` the topic, ``Z_PUSHED`` the topic the table counts for the token, then ``M`` doc
  proposals and ``M`` word proposals (``PROP``...). Only ``Z`` must survive a restart:
  :func:`init_state` with ``random_topics=False`` rebuilds the rest, and the table is then
  recounted from ``Z`` (:func:`~._lda_tokens.word_topic_counts`).
* ``rng`` uint64 (1,): a SplitMix64 state (Steele, Lea & Flood, OOPSLA 2014), advanced in place.

Dtypes are fixed so that one compilation serves every call: pointers and totals int64, ids,
topics and counts int32, priors float64. The pure-Python twins are in
``tests/algorithms/test_lda_kernels.py``.

References
----------
J. Chen, K. Li, J. Zhu, W. Chen. WarpLDA: a cache efficient O(1) algorithm for latent Dirichlet
allocation. PVLDB 9(10), 2016 (github.com/thu-ml/warplda).
J. Yuan et al. LightLDA: big topic models on modest computer clusters. WWW 2015.
T. Griffiths, M. Steyvers. Finding scientific topics. PNAS 101, 2004.
"""

from __future__ import annotations

import math

import llvmlite.binding
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._lda_tokens import max_length

_JIT = dict(cache=True, nogil=True)

#: Columns of the per-token ``state``: the topic, the topic the table counts, then proposals.
Z, Z_PUSHED, PROP = 0, 1, 2
MAX_MH = 7
#: Largest prior (α, β) a fit takes. Each count the sampler weighs is a count plus a prior
#: or ``Vβ`` (``Kα``): with counts, V and K below 2**63, every weight, product of two
#: (``(n_wk + β)(n_k + Vβ)`` in :func:`_mh_chain`) and lgamma of one stays below 1e70, far
#: from float64's 1.8e308 (``β = 1e308``: ``Vβ`` was infinite, the loss NaN); and
#: ``n_wk + β`` (``components_``) holds the counts exactly (below 2**53), for partial_fit.
MAX_PRIOR = 1e15
_CHUNK = 64  # tokens of a word gathered at once in the word phase

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53

_PREFETCH = ("llvm.prefetch.p0" if llvmlite.binding.llvm_version_info >= (15,)
             else "llvm.prefetch.p0i8")


@intrinsic
def _prefetch_row(typingctx, array, row):
    """Hint the CPU to load row ``row`` of a 2-D C-order array (LLVM's prefetch, read, high
    locality); no effect on results."""
    if not (isinstance(array, types.Array) and array.ndim == 2 and array.layout == "C"
            and isinstance(row, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array_type, row_type = signature.args
        data = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], row_type, types.intp)
        zero = context.get_constant(types.intp, 0)
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, [index, zero],
                                           wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), _PREFETCH)
        builder.call(function, [builder.bitcast(pointer, i8p), ir.Constant(i32, 0),
                                ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, row), codegen


def new_state(n_tokens: int, n_mh: int = 1) -> np.ndarray:
    """A zeroed per-token ``state`` for ``n_mh`` Metropolis–Hastings steps per token and phase.

    A token's record (``2 + 2 n_mh`` int32) is padded to 4, 8 or 16 int32 and the array starts
    on a 64-byte boundary, so no record straddles two cache lines (the word phase reads records
    in random order).

    Parameters
    ----------
    n_tokens : int
    n_mh : int, default 1
        1 to ``MAX_MH`` (7).

    Returns
    -------
    int32 array (n_tokens, 4, 8 or 16), C order

    Raises
    ------
    ValueError
        If ``n_mh`` is not in ``1..MAX_MH``.
    """
    if not 1 <= int(n_mh) <= MAX_MH:
        raise ValueError(f"n_mh must be in 1..{MAX_MH}, got {n_mh!r}")
    need = PROP + 2 * int(n_mh)
    width = 4 if need <= 4 else 8 if need <= 8 else 16
    raw = np.zeros(int(n_tokens) * width + 16, np.int32)
    start = (-raw.ctypes.data % 64) // 4
    return raw[start:start + int(n_tokens) * width].reshape(int(n_tokens), width)


@numba.njit(inline="always", **_JIT)
def _uniform(s):
    """SplitMix64 step: (new state, uniform float in [0, 1) from the top 53 bits)."""
    s = s + _GOLDEN
    x = s
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    x = x ^ (x >> np.uint64(31))
    return s, np.float64(x >> np.uint64(11)) * _TO_UNIT


@numba.njit(**_JIT)
def uniforms(rng, out):
    """Fill ``out`` (float64) with the sampler's uniforms in [0, 1), advancing ``rng``."""
    s = rng[0]
    for i in range(out.shape[0]):
        s, out[i] = _uniform(s)
    rng[0] = s


@numba.njit(**_JIT)
def build_alias(counts, start, m, total, prob, alias, stack):
    """Walker's alias table of ``counts[start:start+m]`` (Vose's O(m) construction).

    Parameters
    ----------
    counts : int32 array
        Weights; negative ones are taken as zero. ``total`` is their (clamped) sum, > 0.
    start, m : int
    total : int
    prob : float64 array (>= m,), alias : int64 array (>= m,), stack : int64 array (>= m,)
        Receive the table in ``[:m]`` (``stack`` is scratch). A draw with ``v`` uniform in
        ``[0, m)`` is slot ``j = int(v)``, kept if ``v - j < prob[j]``, else ``alias[j]``.
    """
    scale = m / total
    n_small = 0
    first_large = m  # small slots at stack[:n_small], large at stack[first_large:m]
    for j in range(m):
        q = max(counts[start + j], 0) * scale
        prob[j] = q
        alias[j] = j
        if q < 1.0:
            stack[n_small] = j
            n_small += 1
        else:
            first_large -= 1
            stack[first_large] = j
    while n_small > 0 and first_large < m:
        n_small -= 1
        small = stack[n_small]
        large = stack[first_large]
        alias[small] = large
        prob[large] = (prob[large] + prob[small]) - 1.0
        if prob[large] < 1.0:  # the large slot became small: move it over
            first_large += 1
            stack[n_small] = large
            n_small += 1
    for j in range(n_small):  # left-overs are full up to rounding
        prob[stack[j]] = 1.0
    for j in range(first_large, m):
        prob[stack[j]] = 1.0


@numba.njit(inline="always", **_JIT)
def _check_state(state, n_mh, n_tokens):
    """Raise before any write if ``state`` cannot hold ``n_mh`` proposals or has the wrong
    number of tokens (numba does not check indices)."""
    if n_mh < 1 or PROP + 2 * n_mh > state.shape[1]:
        raise ValueError("state has too few columns for n_mh proposals (see new_state)")
    if state.shape[0] != n_tokens:
        raise ValueError("state has a row per token: its length differs from the tokens'")


@numba.njit(inline="always", **_JIT)
def _propose_doc(a, b, state, n_topics, alpha, n_mh, s):
    """Doc proposals ``q_d(k) ∝ n_dk + α`` of the tokens ``a:b`` of one document (the topic of
    a random token of it, or a uniform topic). Returns the RNG state."""
    length = b - a
    total = length + n_topics * alpha
    scale = n_topics / (n_topics * alpha)
    for p in range(a, b):
        for j in range(n_mh):
            s, u = _uniform(s)
            v = u * total
            if v < length:
                state[p, PROP + j] = state[min(a + np.int64(v), b - 1), Z]
            else:
                state[p, PROP + j] = min(np.int64((v - length) * scale), n_topics - 1)
    return s


@numba.njit(**_JIT)
def init_state(doc_ptr, state, n_mh, n_topics, alpha, random_topics, rng):
    """Prepare ``state`` for the first :func:`word_phase`.

    Topics are drawn uniformly when ``random_topics``, else column ``Z`` is kept (restored after
    a restart); ``Z_PUSHED`` is set to ``Z`` (the caller pushes the counts of ``Z``) and the doc
    proposals are drawn.

    Parameters
    ----------
    doc_ptr : int64 array (D + 1,)
    state : int32 array (N, width)
        From :func:`new_state`.
    n_mh : int
        Metropolis–Hastings steps per token and phase; ``state`` must have room for them.
    n_topics : int
    alpha : float
    random_topics : bool
    rng : uint64 array (1,)

    Raises
    ------
    ValueError
        If ``state`` has not one row per token or too few columns for ``n_mh``, or
        ``n_topics < 1`` or ``alpha <= 0``.
    """
    _check_state(state, n_mh, doc_ptr[-1])
    if n_topics < 1 or not alpha > 0.0:
        raise ValueError("n_topics must be >= 1 and alpha > 0")
    s = rng[0]
    for p in range(state.shape[0]):
        if random_topics:
            s, u = _uniform(s)
            state[p, Z] = min(np.int64(u * n_topics), n_topics - 1)
        state[p, Z_PUSHED] = state[p, Z]
    for d in range(doc_ptr.shape[0] - 1):
        s = _propose_doc(doc_ptr[d], doc_ptr[d + 1], state, n_topics, alpha, n_mh, s)
    rng[0] = s


@numba.njit(inline="always", **_JIT)
def _copy_fixed(state, buf, rows, start, stop, width, to_state):
    for p in range(start, stop):
        i = rows[p]
        q = p - start
        if to_state:
            for col in range(width):
                state[i, col] = buf[q, col]
        else:
            for col in range(width):
                buf[q, col] = state[i, col]


@numba.njit(inline="always", **_JIT)
def _copy_records(state, buf, rows, start, stop, to_state):
    """Copy the records of tokens ``rows[start:stop]`` from ``state`` to the gather buffer
    ``buf`` (back if ``to_state``); a constant width unrolls to branch-free copies whose cache
    misses overlap."""
    width = state.shape[1]
    if width == 4:
        _copy_fixed(state, buf, rows, start, stop, 4, to_state)
    elif width == 8:
        _copy_fixed(state, buf, rows, start, stop, 8, to_state)
    else:
        _copy_fixed(state, buf, rows, start, stop, 16, to_state)


@numba.njit(**_JIT)
def delta_capacity(word_ptr, n_topics):
    """Room the word phase's delta may need: ``sum_w min(2 n_w, K)`` entries, ``n_w`` the
    partition's tokens of local word ``w`` (a move touches two topics of its word's row)."""
    total = 0
    for w in range(word_ptr.shape[0] - 1):
        total += min(2 * (word_ptr[w + 1] - word_ptr[w]), n_topics)
    return total


@numba.njit(inline="always", **_JIT)
def _mh_chain(props, row, first, n_mh, x0, counts, exclude, prior, nk, nk_delta, v_beta, s):
    """Metropolis–Hastings over the proposals ``props[row, first:first + n_mh]`` from topic
    ``x0``, the target's other factor cancelling with the proposal: accept ``t`` from ``x`` with
    probability ``min(1, f(t) T(x) / (f(x) T(t)))``, ``f(k) = counts[k] - [k == exclude] +
    prior`` (clamped at the prior), ``T(k) = nk[k] + nk_delta[k] - [k == x0] + Vβ``.
    Returns (the final topic, the RNG state)."""
    x = x0
    fx = max(counts[x0] - (x0 == exclude), 0) + prior
    tx = max(nk[x0] + nk_delta[x0] - 1, 0) + v_beta
    for j in range(n_mh):
        t = props[row, first + j]
        s, u = _uniform(s)
        if t == x:
            continue
        ft = max(counts[t] - (t == exclude), 0) + prior
        tt = max(nk[t] + nk_delta[t] - (t == x0), 0) + v_beta
        if u * fx * tt < ft * tx:
            x, fx, tx = t, ft, tt
    return x, s


@numba.njit(**_JIT)
def word_phase(word_ptr, word_tok, row_ptr, row_topic, row_count, nk, nk_delta, state, n_mh,
               alpha, beta, n_words, rng, out_ptr, out_topic, out_value):
    """Word phase: accept the doc proposals, draw the word proposals, emit the count delta.

    Token ``i`` of word ``w`` at topic ``s`` moves to a doc proposal ``t`` with probability
    ``min(1, (n_wt¬ + β)(n_s¬ + Vβ) / ((n_ws¬ + β)(n_t¬ + Vβ)))``, ``n_w¬`` the snapshot row less
    the token at ``Z_PUSHED``, ``n_k¬ = nk + nk_delta`` less the token at ``s``.

    Parameters
    ----------
    word_ptr, word_tok : int64 arrays (V_local + 1,), (N,)
        Tokens grouped by local word.
    row_ptr : int64 array (V_local + 1,), row_topic, row_count : int32 arrays (nnz,)
        Snapshot rows of ``n_wk``; read only.
    nk : int64 array (K,)
        Snapshot topic totals; read only.
    nk_delta : int64 array (K,)
        In: the partition's moves the snapshot does not count (the last doc phase's
        ``nk_moved``; zeros after :func:`init_state`). Out: plus this phase's moves; it then
        equals the column sums of the emitted delta, the ``n_k`` delta to push.
    state : int32 array (N, width)
        Updated in place: ``Z``, ``Z_PUSHED`` and the word proposals.
    n_mh : int
    alpha, beta : float
        Symmetric Dirichlet priors of the document–topic and topic–word distributions, > 0.
    n_words : int
        Global vocabulary size V.
    rng : uint64 array (1,)
    out_ptr : int64 array (V_local + 1,)
    out_topic, out_value : int32 arrays (>= delta_capacity(word_ptr, K),)
        Receive the ``n_wk`` delta since the last push: row ``w`` is
        ``out_topic/out_value[out_ptr[w]:out_ptr[w+1]]``, non-zero entries only.

    Returns
    -------
    int
        Entries written to ``out_topic`` and ``out_value``.

    Raises
    ------
    ValueError
        Before any write, if the arrays' shapes do not match (``state`` against the tokens and
        ``n_mh``, the rows against the words, the outputs too short) or a prior is not
        positive; if a snapshot row holds a topic outside ``0..K-1`` (rows before it are
        then sampled already).
    """
    n_topics = nk.shape[0]
    width = state.shape[1]
    n_tokens = word_tok.shape[0]
    _check_state(state, n_mh, n_tokens)
    if not (alpha > 0.0 and beta > 0.0 and n_words >= 1):
        raise ValueError("alpha, beta must be > 0 and n_words >= 1")
    if (row_ptr.shape[0] != word_ptr.shape[0] or out_ptr.shape[0] != word_ptr.shape[0]
            or nk_delta.shape[0] != n_topics or row_ptr[-1] > row_topic.shape[0]
            or row_topic.shape[0] != row_count.shape[0]):
        raise ValueError("row_ptr, out_ptr (V_local + 1), nk_delta (K) or the rows do not match")
    if min(out_topic.shape[0], out_value.shape[0]) < delta_capacity(word_ptr, n_topics):
        raise ValueError("out_topic and out_value are shorter than delta_capacity()")
    v_beta = n_words * beta
    k_beta = n_topics * beta
    uniform_scale = n_topics / k_beta
    cw = np.zeros(n_topics, np.int64)
    acc = np.zeros(n_topics, np.int64)
    listed = np.zeros(n_topics, np.bool_)
    touched = np.empty(n_topics, np.int64)
    prob = np.empty(n_topics, np.float64)
    alias = np.empty(n_topics, np.int64)
    stack = np.empty(n_topics, np.int64)
    buf = np.empty((_CHUNK, width), np.int32)
    s = rng[0]
    nnz = 0
    out_ptr[0] = 0
    for w in range(word_ptr.shape[0] - 1):
        a, b = word_ptr[w], word_ptr[w + 1]
        r0, r1 = row_ptr[w], row_ptr[w + 1]
        m = r1 - r0
        nw = 0
        for j in range(r0, r1):
            if not 0 <= row_topic[j] < n_topics:
                raise ValueError("a snapshot row holds a topic outside 0..K-1")
            c = max(row_count[j], 0)
            cw[row_topic[j]] = c
            nw += c
        if nw > 0 and a < b:
            build_alias(row_count, r0, m, nw, prob, alias, stack)
        total = nw + k_beta
        slot_scale = m / nw if nw > 0 else 0.0
        n_touched = 0
        for c0 in range(a, b, _CHUNK):
            c1 = min(c0 + _CHUNK, b)
            _copy_records(state, buf, word_tok, c0, c1, False)
            for q in range(c1 - c0):
                if c1 + q < n_tokens:  # the next chunk's records, while this one is sampled
                    _prefetch_row(state, word_tok[c1 + q])
                z0 = buf[q, Z]
                zs = buf[q, Z_PUSHED]
                x, s = _mh_chain(buf, q, PROP, n_mh, z0, cw, zs, beta, nk, nk_delta, v_beta, s)
                if x != z0:
                    nk_delta[z0] -= 1
                    nk_delta[x] += 1
                    buf[q, Z] = x
                if x != zs:
                    buf[q, Z_PUSHED] = x
                    if not listed[zs]:
                        listed[zs] = True
                        touched[n_touched] = zs
                        n_touched += 1
                    if not listed[x]:
                        listed[x] = True
                        touched[n_touched] = x
                        n_touched += 1
                    acc[zs] -= 1
                    acc[x] += 1
                for j in range(n_mh):  # q_w(k) ∝ n_wk + β: the alias table, else uniform
                    s, u = _uniform(s)
                    v = u * total
                    if v < nw:
                        v *= slot_scale
                        slot = min(np.int64(v), m - 1)
                        if v - slot >= prob[slot]:
                            slot = alias[slot]
                        buf[q, PROP + n_mh + j] = row_topic[r0 + slot]
                    else:
                        buf[q, PROP + n_mh + j] = min(np.int64((v - nw) * uniform_scale),
                                                      n_topics - 1)
            _copy_records(state, buf, word_tok, c0, c1, True)
        for j in range(n_touched):
            k = touched[j]
            if acc[k] != 0:
                out_topic[nnz] = k
                out_value[nnz] = acc[k]
                nnz += 1
                acc[k] = 0
            listed[k] = False
        out_ptr[w + 1] = nnz
        for j in range(r0, r1):
            cw[row_topic[j]] = 0
    rng[0] = s
    return nnz


@numba.njit(**_JIT)
def doc_phase(doc_ptr, nk, nk_delta, state, n_mh, alpha, beta, n_words, rng, nk_moved):
    """Doc phase: accept the word proposals, draw the doc proposals, document by document.

    Token ``i`` of document ``d`` at topic ``s`` moves to a word proposal ``t`` with probability
    ``min(1, (n_dt¬ + α)(n_s¬ + Vβ) / ((n_ds¬ + α)(n_t¬ + Vβ)))``, ``n_d`` the document's current
    counts (updated as its tokens move), ``n_k = nk + nk_delta``.

    Parameters
    ----------
    doc_ptr : int64 array (D + 1,)
    nk, state, n_mh, alpha, beta, n_words, rng
        As in :func:`word_phase`; ``nk`` is the word phase's snapshot.
    nk_delta : int64 array (K,)
        As the word phase left it; this phase's moves are added.
    nk_moved : int64 array (K,)
        Receives this phase's moves alone (zeroed first): the next word phase's ``nk_delta``
        (its snapshot counts everything pushed, not these).

    Returns
    -------
    float
        The documents' part of log p(w, z) (:func:`~dask_ps.algorithms._lda_eval.doc_loglik`)
        for the topics at the start of the phase, the ones the word phase pushed.

    Raises
    ------
    ValueError
        Before any write, if ``state`` does not match the tokens and ``n_mh``, the totals'
        arrays do not have K entries, or a prior is not positive.
    """
    n_topics = nk.shape[0]
    _check_state(state, n_mh, doc_ptr[-1])
    if not (alpha > 0.0 and beta > 0.0 and n_words >= 1):
        raise ValueError("alpha, beta must be > 0 and n_words >= 1")
    if nk_delta.shape[0] != n_topics or nk_moved.shape[0] != n_topics:
        raise ValueError("nk_delta and nk_moved need one entry per topic")
    v_beta = n_words * beta
    k_alpha = n_topics * alpha
    log_table = np.log(np.arange(max_length(doc_ptr) + 1) + alpha)
    cd = np.zeros(n_topics, np.int64)
    nk_moved[:] = 0
    ll = 0.0
    s = rng[0]
    for d in range(doc_ptr.shape[0] - 1):
        a, b = doc_ptr[d], doc_ptr[d + 1]
        if a == b:
            continue
        for p in range(a, b):  # count; lgamma(n + α) - lgamma(α) = sum_{c<n} log(c + α)
            k = state[p, Z]
            ll += log_table[cd[k]]
            cd[k] += 1
        ll -= math.lgamma(b - a + k_alpha) - math.lgamma(k_alpha)
        for p in range(a, b):
            s0 = state[p, Z]
            x, s = _mh_chain(state, p, PROP + n_mh, n_mh, s0, cd, s0, alpha, nk, nk_delta,
                             v_beta, s)
            if x != s0:
                cd[s0] -= 1
                cd[x] += 1
                nk_delta[s0] -= 1
                nk_delta[x] += 1
                nk_moved[s0] -= 1
                nk_moved[x] += 1
                state[p, Z] = x
        s = _propose_doc(a, b, state, n_topics, alpha, n_mh, s)
        for p in range(a, b):
            cd[state[p, Z]] = 0
    rng[0] = s
    return ll
