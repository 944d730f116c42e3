"""Numba kernels of biased matrix factorisation: the SGD sweep and the ALS normal equations.

The model is ``r_ui ≈ mu + b_u + b_i + p_u · q_i``. Item rows travel as one array ``Q`` of
shape (m, k + 1): columns ``:k`` are ``q_i``, column ``k`` is ``b_i`` (one PS row per item).
User rows are ``P`` (n, k) and ``bu`` (n,), or ``P`` (n, k + 1) with the bias in column ``k``.
Indices are local: ``users`` index rows of ``P``, ``items`` rows of ``Q``. Kernels take arrays
and scalars only and write into the arrays they are given; pure-Python twins are in
``tests/algorithms/test_mf.py``.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = dict(cache=True, nogil=True)


# reassociation only (SIMD sums); no "nnan"/"ninf": divergence must still show as NaN
@numba.njit(fastmath={"reassoc", "contract"}, **_JIT)
def sgd_sweep(users, items, ratings, P, bu, Q, mu, lr, reg, reg_bias):
    """One pass of biased-MF SGD over the given ratings, in their order; updates in place.

    For each rating, with ``e = r - (mu + b_u + b_i + p_u · q_i)``::

        b_u += lr (e - reg_bias b_u)        b_i += lr (e - reg_bias b_i)
        p_u += lr (e q_i - reg p_u)         q_i += lr (e p_u - reg q_i)

    (both factor updates from the old values), as in Funk's SVD and Koren (KDD 2008, sec. 2.1;
    Surprise's ``SVD``). Compiled with ``fastmath``: the dot product is summed in the
    factors' precision in any order (SIMD), so results match a sequential float64 sum to
    the factors' rounding only.

    Parameters
    ----------
    users, items : int32 array (n,)
        Local row of ``P``/``bu`` and of ``Q`` of each rating.
    ratings : float32 array (n,)
    P : float32 array (n_users, k), bu : float32 array (n_users,)
    Q : float32 array (n_items, k + 1)
        Item factors, item bias in the last column.
    mu, lr, reg, reg_bias : float32
        Scalars of the factors' dtype (a float64 scalar would widen the inner loops).

    Returns
    -------
    float
        Sum of the squared errors, each taken before its rating's update (float64).
    """
    k = P.shape[1]
    sse = 0.0
    old_p = np.empty(k, P.dtype)
    one = np.ones(1, P.dtype)[0]  # an int literal would widen float32 sums to float64
    zero, keep = one - one, one - lr * reg
    for t in range(users.shape[0]):
        u = users[t]
        p = P[u]
        q = Q[items[t]]
        dot = zero
        for f in range(k):
            dot += p[f] * q[f]
        e = ratings[t] - (mu + bu[u] + q[k] + dot)
        sse += e * e
        bu[u] += lr * (e - reg_bias * bu[u])
        q[k] += lr * (e - reg_bias * q[k])
        step = lr * e  # x + lr (e y - reg x) = keep x + step y
        for f in range(k):
            old_p[f] = p[f]
        for f in range(k):
            p[f] = keep * p[f] + step * q[f]
        for f in range(k):
            q[f] = keep * q[f] + step * old_p[f]
    return sse


@numba.njit(**_JIT)
def balance_blocks(counts, order, loads, out):
    """Deal items into blocks of about equal rating counts: longest processing time first
    (Graham, 1969), each item in ``order`` to the block with the fewest ratings so far
    (the lowest such block on ties).

    Parameters
    ----------
    counts : int64 array (n_items,)
        Ratings of each item.
    order : int64 array (n_items,)
        Items by decreasing count (e.g. ``np.argsort(-counts, kind="stable")``).
    loads : int64 array (n_blocks,)
        Zeros on entry; receives each block's ratings.
    out : int32 array (n_items,)
        Receives each item's block.
    """
    n_blocks = loads.shape[0]
    for j in range(order.shape[0]):
        i = order[j]
        best = 0
        for b in range(1, n_blocks):
            if loads[b] < loads[best]:
                best = b
        out[i] = best
        loads[best] += counts[i]


@numba.njit(**_JIT)
def dsgd_order(order, users, items, rank_of, blocks, n_blocks, tmp):
    """Sort a partition's positions by item block, then by the users' random rank, in place
    and stably (a user's ratings of a block keep their order in ``order``): the order of
    ``np.argsort(blocks[items[order]] * n_users + rank_of[users[order]], kind="stable")``,
    by two counting passes (rank, then block) through ``tmp``, with no wider temporary.

    Parameters
    ----------
    order : int array (n,)
        Positions in the partition (a permutation of ``0 .. n - 1``); sorted in place.
    users, items : int array (n,)
        The partition's user rows and item codes.
    rank_of : int array (n_users,)
        Each user's rank (a permutation of ``0 .. n_users - 1``).
    blocks : int array (n_items,)
        Each item's block, ``0 .. n_blocks - 1``.
    n_blocks : int
    tmp : array (n,) of ``order``'s dtype
        Scratch.

    Returns
    -------
    int64 array (n_blocks + 1,)
        The bounds of the blocks in ``order``: block ``b`` is ``order[bounds[b]:bounds[b + 1]]``.
    """
    n = order.shape[0]
    start = np.zeros(rank_of.shape[0] + 1, np.int64)
    for j in range(n):  # the counts: in the partition's order (no random reads)
        start[rank_of[users[j]] + 1] += 1
    for r in range(rank_of.shape[0]):
        start[r + 1] += start[r]
    for t in range(n):
        j = order[t]
        r = rank_of[users[j]]
        tmp[start[r]] = j
        start[r] += 1
    bounds = np.zeros(n_blocks + 1, np.int64)
    for j in range(n):
        bounds[blocks[items[j]] + 1] += 1
    for b in range(n_blocks):
        bounds[b + 1] += bounds[b]
    at = bounds[:n_blocks].copy()
    for t in range(n):
        j = tmp[t]
        b = blocks[items[j]]
        order[at[b]] = j
        at[b] += 1
    return bounds


@numba.njit(**_JIT)
def gather_block(pos, users, items, local_of, ratings, out_users, out_items, out_ratings):
    """A block of a partition's ratings in the order ``pos``, as :func:`sgd_sweep` reads them:
    ``out_users[t] = users[pos[t]]``, ``out_items[t] = local_of[items[pos[t]]]`` (the item's
    row in the block's pulled rows), ``out_ratings[t] = ratings[pos[t]]`` (cast to
    ``out_ratings``' dtype as ``astype`` casts), with no temporary."""
    for t in range(pos.shape[0]):
        j = pos[t]
        out_users[t] = users[j]
        out_items[t] = local_of[items[j]]
        out_ratings[t] = ratings[j]


@numba.njit(**_JIT)
def _cholesky_solve(A, b, x, y):
    """Solve ``A x = b`` for symmetric positive definite ``A`` (overwritten by its Cholesky
    factor); ``y`` is scratch. Returns False if ``A`` is not positive definite."""
    d = A.shape[0]
    for j in range(d):
        s = A[j, j]
        for p in range(j):
            s -= A[j, p] * A[j, p]
        if not s > 0.0:
            return False
        ljj = np.sqrt(s)
        A[j, j] = ljj
        for i in range(j + 1, d):
            s = A[i, j]
            for p in range(j):
                s -= A[i, p] * A[j, p]
            A[i, j] = s / ljj
    for i in range(d):
        s = b[i]
        for p in range(i):
            s -= A[i, p] * y[p]
        y[i] = s / A[i, i]
    for i in range(d - 1, -1, -1):
        s = y[i]
        for p in range(i + 1, d):
            s -= A[p, i] * x[p]
        x[i] = s / A[i, i]
    return True


@numba.njit(inline="always", **_JIT)
def _with_one(F, j, v):
    """``v = [F[j, :k], 1]`` (the design row of a least-squares step); returns the bias
    ``F[j, k]``."""
    k = F.shape[1] - 1
    for f in range(k):
        v[f] = F[j, f]
    v[k] = 1.0
    return F[j, k]


@numba.njit(**_JIT)
def als_solve_rows(indptr, cols, ratings, F, mu, lam, lam_bias, lam0, lam_bias0, out):
    """Weighted-λ ALS for the rows of a CSR block: each row's factors and bias at once.

    Row ``u`` (ratings ``r_uj`` of columns ``j = cols[indptr[u]:indptr[u+1]]``) gets
    ``x_u = [p_u, b_u]`` minimising
    ``sum_j (r_uj - mu - b_j - [F_j, 1] · x_u)^2 + (lam n_u + lam0) |p_u|^2
    + (lam_bias n_u + lam_bias0) b_u^2`` with ``F_j`` the fixed side's factors and
    ``b_j = F[j, k]`` its bias (Zhou et al., 2008, eq. 5, with biases and a fixed part added).

    Parameters
    ----------
    indptr : int array (n + 1,), cols : int array (nnz,), ratings : float array (nnz,)
    F : float array (m, k + 1)
        Fixed side: factors, bias in the last column.
    mu, lam, lam_bias, lam0, lam_bias0 : float
        Global mean; L2 strengths per rating and fixed, of the factors and of the bias.
    out : float64 array (n, k + 1)
        Receives ``[p_u, b_u]``; rows without ratings are set to zero.

    Returns
    -------
    int
        -1 on success, else the first row whose system is not positive definite.
    """
    d = F.shape[1]
    k = d - 1
    A = np.empty((d, d))
    b = np.empty(d)
    x = np.empty(d)
    y = np.empty(d)
    v = np.empty(d)
    for u in range(indptr.shape[0] - 1):
        A[:, :] = 0.0
        b[:] = 0.0
        n = indptr[u + 1] - indptr[u]
        if n == 0:
            out[u, :] = 0.0
            continue
        for p in range(indptr[u], indptr[u + 1]):
            t = ratings[p] - mu - _with_one(F, cols[p], v)
            for f in range(d):
                b[f] += t * v[f]
                for g in range(f + 1):
                    A[f, g] += v[f] * v[g]
        for f in range(d):
            A[f, f] += (lam * n + lam0) if f < k else (lam_bias * n + lam_bias0)
            for g in range(f + 1, d):
                A[f, g] = A[g, f]
        if not _cholesky_solve(A, b, x, y):
            return u
        out[u, :] = x
    return -1


@numba.njit(**_JIT)
def als_gram(order, indptr, cols, ratings, P, mu, G):
    """Accumulate the item side's normal equations over the ratings of a CSR block (by user,
    as :func:`als_solve_rows` reads it), in the order ``order``.

    For each rating, with ``x = [p_u, 1]`` and target ``t = r - mu - b_u``, row ``i`` of ``G``
    gets ``x xᵀ`` (flattened, first ``d²`` columns), ``t x`` (next ``d``) and a count (last).
    The ratings are visited as ``order`` lists their positions in the block (its row ``u``
    found from ``indptr``): the block is held once, in the order of the user step, while
    each item's sums are taken in the order given.

    Parameters
    ----------
    order : int array (nnz,)
        Positions in the block (a permutation of ``0 .. nnz - 1``), in the order to visit.
    indptr : int array (n_users + 1,), cols : int array (nnz,), ratings : float array (nnz,)
        The block: ratings ``indptr[u]:indptr[u + 1]`` are row ``u``'s (of ``P``), ``cols``
        their rows of ``G``.
    P : float array (n_users, k + 1)
        User factors, user bias in the last column.
    mu : float
    G : float64 array (n_items, d * d + d + 1), ``d = k + 1``
    """
    d = P.shape[1]
    x = np.empty(d)
    for t in range(order.shape[0]):
        p = order[t]
        u = np.searchsorted(indptr, p, side="right") - 1
        i = cols[p]
        r = ratings[p] - mu - _with_one(P, u, x)
        for f in range(d):
            for g in range(d):
                G[i, f * d + g] += x[f] * x[g]
            G[i, d * d + f] += r * x[f]
        G[i, d * d + d] += 1.0


@numba.njit(**_JIT)
def als_solve_gram(G, lam, lam_bias, lam0, lam_bias0, out):
    """Solve the normal equations accumulated by :func:`als_gram`, one row at a time.

    Row ``i``: ``(G_i + diag(lam n_i + lam0, ..., lam_bias n_i + lam_bias0)) x = h_i``; rows
    with ``n_i = 0`` get zeros.

    Parameters
    ----------
    G : float64 array (m, d * d + d + 1)
    lam, lam_bias, lam0, lam_bias0 : float
    out : float64 array (m, d)

    Returns
    -------
    int
        -1 on success, else the first row whose system is not positive definite.
    """
    d = out.shape[1]
    A = np.empty((d, d))
    b = np.empty(d)
    x = np.empty(d)
    y = np.empty(d)
    for i in range(G.shape[0]):
        n = G[i, d * d + d]
        if n == 0:
            out[i, :] = 0.0
            continue
        for f in range(d):
            for g in range(d):
                A[f, g] = G[i, f * d + g]
            A[f, f] += (lam * n + lam0) if f < d - 1 else (lam_bias * n + lam_bias0)
            b[f] = G[i, d * d + f]
        if not _cholesky_solve(A, b, x, y):
            return i
        out[i, :] = x
    return -1


@numba.njit(**_JIT)
def predict_pairs(users, items, P, bu, Q, bi, mu, low, high, out):
    """``mu + b_u + b_i + p_u · q_i`` clipped to ``[low, high]``; a ``-1`` user (item) is
    unseen and contributes nothing (cold start: biases and global mean only)."""
    k = P.shape[1]
    for t in range(users.shape[0]):
        u = users[t]
        i = items[t]
        pred = mu
        if u >= 0:
            pred += bu[u]
        if i >= 0:
            pred += bi[i]
        if u >= 0 and i >= 0:
            for f in range(k):
                pred += P[u, f] * Q[i, f]
        out[t] = min(max(pred, low), high)
