"""The steps of matrix factorisation over user partitions: SGD and ALS epochs.

Every user's ratings are in one partition, so its factors and bias are only ever read and
written next to that partition: they live in the partition's worker-local state
(``part.state``), never pulled during training. A fit with a checkpoint copies them into the
table :data:`USERS` before each save (:func:`store_users_step`), and a resume copies them
back (:func:`set_users_step`); the table is emptied after each (its memory freed), so that
the users are held twice only while a checkpoint is written. Items are shared by all
partitions: their factors and biases are the PS table ``"item"`` (n_items, n_components +
1), bias in the last column.

* SGD: the DSGD schedule (Gemulla, Nijkamp, Haas & Sismanis, KDD 2011; the block rotation
  of NOMAD, Yun et al., VLDB 2014, done in lock step). Items are dealt into one block per
  task, of about equal ratings; in clock ``s`` of an epoch task ``t`` owns block
  ``(t + s) % n_blocks``: it pulls that block's item rows once, runs its ratings of the
  block through the float32 numba SGD kernel and pushes one delta. No item is touched by
  two tasks in one clock, so an epoch is serial SGD in a stratified order, with one pull
  and one push of each item row per epoch and task.
* ALS: the user step is local (each partition solves its users' normal equations against the
  pulled items); for the item step each partition pushes its partial normal equations into the
  table ``"gram"``, whose shards sum them; after the barrier, partition ``p`` solves items
  ``p, p + n_parts, ...`` and pushes their new rows (Zhou et al., AAIM 2008). One task runs
  all the partitions of a worker thread, so both halves of an iteration are one clock each.
"""

from __future__ import annotations

import time

import numpy as np

from ..exceptions import DivergenceError
from ..kernels.sorting import unique_sorted
from ._mf_data import index_dtype
from ._mf_kernels import (
    als_gram,
    als_solve_gram,
    als_solve_rows,
    dsgd_order,
    gather_block,
    sgd_sweep,
)

__all__ = ["USERS", "als_task", "check_finite", "collect_step", "diverged", "final_step",
           "pushed_change", "set_users_step", "sgd_task", "store_users_step"]

#: Bytes of each (ratings, rank) gather of the ALS training error (:func:`_sse`).
SSE_SLICE = 2**22

#: Name of the table of user rows (factors, bias last) a checkpoint holds (see
#: :func:`store_users_step`).
USERS = "user"


def diverged(solver: str, epoch: int, what: str, cfg: dict,
             advice: str | None = None) -> DivergenceError:
    """The :class:`~dask_ps.DivergenceError` of every MatrixFactorization solver: names the
    solver, the epoch and ``what`` was not finite, and what to change (``advice``, by default
    the solver's step size or regularisation)."""
    if advice is None:
        advice = (f"try a smaller learning_rate (now {cfg['learning_rate']}) or a larger reg"
                  if solver == "sgd" else f"try a larger reg (now {cfg['reg']})")
    return DivergenceError(f"MatrixFactorization(solver={solver!r})", epoch, what, advice)


def check_finite(cfg: dict, epoch: int, what: str, *values, initial: bool = False,
                 advice: str | None = None) -> None:
    """Raise :func:`diverged` (``what`` is not finite) unless every array or number of
    ``values`` is finite: the one check of MatrixFactorization's factors, errors and pushes
    (the tables would refuse a non-finite push with a ValueError naming a table, not the
    divergence). ``initial``: the factors as drawn with ``init_std`` (the advice is then a
    smaller ``init_std``); ``advice``: what to change, if not the solver's default."""
    if all(np.isfinite(v).all() for v in values):
        return
    if initial:
        raise diverged(cfg["solver"], epoch, f"{what} drawn with init_std={cfg['init_std']} "
                       f"are not finite in {cfg['dtype']}", cfg,
                       f"try a smaller init_std (now {cfg['init_std']})")
    raise diverged(cfg["solver"], epoch, f"{what} not finite", cfg, advice)


def pushed_change(cfg: dict, epoch: int, what: str, new: np.ndarray,
                  old: np.ndarray) -> np.ndarray:
    """``new - old``, computed in place in ``new``: the change a step pushes for rows it
    pulled as ``old`` and made ``new`` (``what``, e.g. "item factors"), both already
    checked (:func:`check_finite`; the table's rows are finite). Two finite rows can still
    differ by more than their dtype holds (``1e308`` and ``-1e308`` in float64), and that
    change is named as such (it was said as "the item factors are not finite", of finite
    factors).

    Raises
    ------
    DivergenceError
        The change is not finite, naming ``what``, the epoch and the dtype.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # checked next
        new -= old
    check_finite(cfg, epoch, f"the {what} are finite, but their change pushed (new - old, "
                 f"{new.dtype}) is", new)
    return new


def _local(part, cfg: dict) -> dict:
    """The partition's ALS state (made at the first visit, and again after a lost worker):
    its users' rows ``P`` (factors, bias last) and its ratings held once, as a CSR block by
    user (:func:`als_block`)."""
    st = part.state
    if "P" not in st:
        uids, users, items, ratings = part.load()
        st["uids"] = uids
        st["P"] = np.zeros((uids.shape[0], cfg["n_components"] + 1))
        st.update(als_block(users, items, ratings, uids.shape[0],
                            np.random.default_rng([cfg["seed"], part.index])))
    return st


def als_block(users, items, ratings, n_users: int, rng) -> dict:
    """A partition's ratings as ALS reads them, one copy in the narrowest dtypes.

    Returns
    -------
    dict
        ``keys`` int64 (m,): the sorted item codes rated; ``indptr`` int64 (n_users + 1,),
        ``cols`` (nnz,) rows of ``keys`` and ``vals`` (nnz,) the ratings (their dtype): the
        CSR block by user, within a user in a random order drawn from ``rng``; ``order``
        (nnz,): the block's positions in that random order (the order of the items' normal
        equations, :func:`~._mf_kernels.als_gram`). ``cols`` and ``order`` are int32 below
        2^31 ratings.
    """
    n = ratings.shape[0]
    idx = index_dtype(max(n, 1))
    # transients of 4 B a rating where they can be (the peak: 5 words a rating, sorting)
    shuffled = rng.permutation(n).astype(idx)  # position in the input of each draw
    by_user = np.argsort(users[shuffled], kind="stable").astype(idx)  # draws, by user: CSR
    src = shuffled[by_user]  # position in the input of each CSR entry
    del shuffled
    order = np.empty(n, idx)
    order[by_user] = np.arange(n, dtype=idx)
    del by_user
    keys = unique_sorted(items)
    indptr = np.zeros(n_users + 1, np.int64)
    np.cumsum(np.bincount(users, minlength=n_users), out=indptr[1:])
    cols = np.empty(n, idx)
    for a in range(0, n, 2**16):  # searchsorted answers int64: in slices
        cols[a:a + 2**16] = np.searchsorted(keys, items[src[a:a + 2**16]])
    return dict(keys=keys.astype(np.int64), indptr=indptr, cols=cols, vals=ratings[src],
                order=order)


def _sse(st: dict, Q: np.ndarray, mu: float, k: int) -> float:
    """Sum of the squared training errors of the partition's ratings, against its users'
    rows and the item rows ``Q`` (rows of its keys), taken in slices of users: the gathered
    (ratings, rank) rows stay near :data:`SSE_SLICE` bytes."""
    indptr, cols, vals, P = st["indptr"], st["cols"], st["vals"], st["P"]
    err = np.empty(vals.shape[0])
    step = max(1, SSE_SLICE // (8 * max(k, 1)))
    u0, n_users = 0, P.shape[0]
    while u0 < n_users:
        u1 = max(u0 + 1, int(np.searchsorted(indptr, indptr[u0] + step, side="right")) - 1)
        u1 = min(u1, n_users)
        a, b = indptr[u0], indptr[u1]
        rows = np.repeat(np.arange(u0, u1), np.diff(indptr[u0:u1 + 1]))
        c = cols[a:b]
        with np.errstate(over="ignore", invalid="ignore"):  # checked by the caller
            err[a:b] = vals[a:b].astype(np.float64) - mu - P[rows, k] - Q[c, k] - np.einsum(
                "ij,ij->i", P[rows, :k], Q[c, :k])
        u0 = u1
    with np.errstate(over="ignore", invalid="ignore"):
        return float(err @ err)


def _sgd_local(part, cfg: dict) -> dict:
    """The partition's SGD state: its users' float32 factors and biases (made at the first
    visit, and again after a lost worker)."""
    st = part.state
    if "P" not in st:
        uids = part.load()[0]
        rng = np.random.default_rng([cfg["seed"], part.index])
        st["uids"] = uids
        with np.errstate(over="ignore"):  # an overflow of float32 is refused below
            st["P"] = rng.normal(0.0, cfg["init_std"],
                                 (uids.shape[0], cfg["n_components"])).astype(np.float32)
        check_finite(cfg, 1, "the user factors", st["P"], initial=True)
        st["bu"] = np.zeros(uids.shape[0], np.float32)
    return st


def _task_blocks(parts: list, cfg: dict) -> dict:
    """The task's ratings cut by item block, once per schedule (kept in the first
    partition's state): the one copy of its ratings that training reads, beside the
    partitions' own (which it does not read; read by position instead, the kernel ran 1.2-6
    times slower, its reads of the ratings a cache miss each).

    Returns ``{"keys": [sorted item keys the task rates in block b, int64], "parts": [per
    partition, per block: (users int32, local item rows int32 into keys[b], ratings
    float32)]}``; within a block the ratings keep one random order drawn from the seed.
    Built one partition at a time, with 8 B a rating of int32 positions besides (the
    partition's draws, sorted by :func:`~._mf_kernels.dsgd_order`, gathered by
    :func:`~._mf_kernels.gather_block`).
    """
    tag = (cfg["n_blocks"], cfg["blocks_id"], tuple(p.index for p in parts))
    head = parts[0].state
    if head.get("dsgd_tag") == tag:
        return head["dsgd"]
    for part in parts:  # a former schedule's layout goes before this one is built
        part.state.pop("dsgd", None)
        part.state.pop("dsgd_tag", None)
    B, blocks = cfg["n_blocks"], cfg["blocks"]
    rated = np.zeros(blocks.shape[0], bool)  # the items the task rates
    for part in parts:
        _sgd_local(part, cfg)
        rated[part.load()[2]] = True
    keys = [np.flatnonzero(rated & (blocks == b)).astype(np.int64) for b in range(B)]
    local_of = np.zeros(blocks.shape[0], np.int32)  # each item's row in its block's keys
    for k in keys:
        local_of[k] = np.arange(k.shape[0], dtype=np.int32)
    lay = {"keys": keys, "parts": []}
    for part in parts:
        uids, users, items, ratings = part.load()
        n = ratings.shape[0]
        rng = np.random.default_rng([cfg["seed"], part.index, 1])
        # by block, then by user in a random order, shuffled within a user: a user's factors
        # stay in cache for its ratings (random rows of P cost a memory miss each). The
        # draws of rng.permutation, shuffled in int32 (Generator.shuffle draws the same
        # whatever the dtype)
        order = np.arange(n, dtype=index_dtype(max(n, 1)))
        rng.shuffle(order)
        rank_of = np.arange(uids.shape[0], dtype=index_dtype(max(uids.shape[0], 1)))
        rng.shuffle(rank_of)
        bounds = dsgd_order(order, users, items, rank_of, blocks, B, np.empty_like(order))
        cut = []
        for b in range(B):
            m = int(bounds[b + 1] - bounds[b])
            out = (np.empty(m, np.int32), np.empty(m, np.int32), np.empty(m, np.float32))
            gather_block(order[bounds[b]:bounds[b + 1]], users, items, local_of, ratings,
                         *out)
            cut.append(out)
        del order
        lay["parts"].append(cut)
    head["dsgd_tag"], head["dsgd"] = tag, lay
    return lay


def sgd_task(ps, parts: list, cfg: dict, first: int, last: int) -> list[tuple]:
    """SGD epochs ``first..last`` over a task's partitions, on the DSGD schedule, the end of
    each reported (``ps.report(epoch=e)``, for the history's times); returns
    per epoch ``(SSE, ratings, kernel seconds, exchange seconds, kernel CPU seconds)``: the
    SSE of the errors before each update, the wall time in the SGD kernel, the wall time in
    pulls, pushes and clocks (barrier waits included) and the kernel's thread CPU time
    (below its wall time when other processes share the cores).

    The items are dealt into ``n_blocks`` blocks of about equal ratings (one per task).
    An epoch has ``n_blocks`` clocks; at clock ``s`` task ``t`` owns block
    ``(t + s) % n_blocks``: it pulls the block's item rows it rates once, runs all its
    ratings of the block through :func:`~._mf_kernels.sgd_sweep` and pushes one delta
    (new - old). No two tasks touch an item in the same clock, so under BSP the epoch is
    a serial SGD pass in a stratified order (Gemulla, Nijkamp, Haas & Sismanis, KDD 2011).

    Raises
    ------
    DivergenceError
        Non-finite errors or factors, naming the epoch.
    """
    lay = _task_blocks(parts, cfg)
    B = cfg["n_blocks"]
    f32 = np.float32
    out = []
    for epoch in range(first, last + 1):
        lr = cfg["learning_rate"] * cfg["decay"] ** (epoch - 1)
        with np.errstate(over="ignore"):  # checked next
            scalars = (f32(cfg["mu"]), f32(lr), f32(cfg["reg"]), f32(cfg["reg_bias"]))
        check_finite(cfg, epoch, f"the mean rating {cfg['mu']:g} in float32 (the SGD "
                     f"kernel's dtype) is", scalars[0],
                     advice="scale the ratings down or use solver='als' (float64)")
        sse, n, t_kernel, cpu, t_all = 0.0, 0, 0.0, 0.0, time.perf_counter()
        for s in range(B):
            b = (ps.task + s) % B
            keys = lay["keys"][b]
            if keys.shape[0]:  # a task without ratings in the block only keeps the clock
                Q = ps.pull("item", keys)
                Q0 = Q.copy()
                t0, c0 = time.perf_counter(), time.thread_time()
                for part, cut in zip(parts, lay["parts"]):
                    users, local, ratings = cut[b]
                    sse += sgd_sweep(users, local, ratings, part.state["P"],
                                     part.state["bu"], Q, *scalars)
                    n += ratings.shape[0]
                t_kernel += time.perf_counter() - t0
                cpu += time.thread_time() - c0
                check_finite(cfg, epoch, "the errors or item factors are", sse, Q)
                ps.push("item", keys, pushed_change(cfg, epoch, "item factors", Q, Q0))
            ps.clock()
        for part in parts:
            check_finite(cfg, epoch, "the user factors are", part.state["P"],
                         part.state["bu"])
        out.append((sse, n, t_kernel, time.perf_counter() - t_all - t_kernel, cpu))
        ps.report(epoch=epoch)
    return out


def als_task(ps, parts: list, cfg: dict, first: int, last: int) -> list[tuple[float, int]]:
    """ALS iterations ``first..last`` over a task's partitions (two clocks each), the end
    of each reported (``ps.report(epoch=e)``); returns the SSE and ratings of each."""
    out = []
    for e in range(first, last + 1):
        out.append(_als_iteration(ps, parts, cfg, e))
        ps.report(epoch=e)
    return out


def _als_iteration(ps, parts: list, cfg: dict, epoch: int) -> tuple[float, int]:
    """One ALS iteration over a task's partitions (two clocks); returns SSE and ratings."""
    k, d = cfg["n_components"], cfg["n_components"] + 1
    lam, lam_bias, mu = cfg["reg"], cfg["reg_bias"], cfg["mu"]
    lam0, lb0 = cfg["reg_fixed"], cfg["reg_bias_fixed"]
    sse, count = 0.0, 0
    for part in parts:  # user step, against the item rows of the last item step
        st = _local(part, cfg)
        keys, P = st["keys"], st["P"]
        if not keys.shape[0]:
            continue
        Q = ps.pull("item", keys)
        if als_solve_rows(st["indptr"], st["cols"], st["vals"], Q, mu, lam, lam_bias, lam0, lb0,
                          P) >= 0:
            raise diverged("als", epoch, "the user factors are not finite", cfg)
        check_finite(cfg, epoch, "the user factors are", P)
        sse += _sse(st, Q, mu, k)
        count += st["vals"].shape[0]
        check_finite(cfg, epoch, "the training errors are", sse)
        G = np.zeros((keys.shape[0], d * d + d + 1))
        als_gram(st["order"], st["indptr"], st["cols"], st["vals"], P, mu, G)
        check_finite(cfg, epoch, "the items' normal equations are", G)
        ps.push("gram", keys, G)
    ps.clock()
    for part in parts:  # item step: the shards summed every partition's normal equations
        owned = np.arange(part.index, cfg["n_items"], cfg["n_parts"], dtype=np.int64)
        if not owned.shape[0]:
            continue
        S = ps.pull("gram", owned)
        new = np.empty((owned.shape[0], d))
        if als_solve_gram(S, lam, lam_bias, lam0, lb0, new) >= 0:
            raise diverged("als", epoch, "the item factors are not finite", cfg)
        check_finite(cfg, epoch, "the item factors are", new)
        ps.push("item", owned, pushed_change(cfg, epoch, "item factors", new,
                                             ps.pull("item", owned)))
        ps.push("gram", owned, -S)  # back to zero for the next iteration
    ps.clock()
    return sse, count


def set_users_step(ps, part, cfg: dict) -> None:
    """The partition's user rows (factors, bias last) set from the table :data:`USERS`
    (restored from a checkpoint by a resume), in place of the rows a partition starts with.

    Raises
    ------
    DivergenceError
        The restored rows are not finite (the checkpoint's were not).
    """
    if cfg["solver"] == "als":
        st = _local(part, cfg)
        st["P"][:] = ps.pull(USERS, st["uids"])
        rows = st["P"]
    else:
        st = _sgd_local(part, cfg)
        rows = ps.pull(USERS, st["uids"])
        k = cfg["n_components"]
        st["P"], st["bu"] = np.ascontiguousarray(rows[:, :k]), rows[:, k].copy()
    check_finite(cfg, 0, "the user factors restored by the resume are", rows)


def store_users_step(ps, part, cfg: dict) -> None:
    """Write the partition's user rows into the table :data:`USERS` (before a checkpoint
    saves it), the table's rows of other partitions untouched. The table must be empty (its
    rows zero: :func:`~._mf_train.train` empties it after each save and restore), so the
    rows are pushed as they are: one temporary of the partition's rows at most (SGD's, in
    the table's dtype; ALS's rows are pushed from the partition's state)."""
    uids, P, bu = collect_step(ps, part, cfg)
    if uids.shape[0]:
        if bu is None and P.dtype == np.dtype(cfg["dtype"]):
            rows = P
        else:
            rows = np.empty((uids.shape[0], cfg["n_components"] + 1), cfg["dtype"])
            rows[:, :cfg["n_components"]] = P[:, :cfg["n_components"]]
            rows[:, cfg["n_components"]] = P[:, cfg["n_components"]] if bu is None else bu
        ps.push(USERS, uids, rows)
    ps.clock()


def collect_step(ps, part, cfg: dict) -> tuple:
    """``(uids, P, bu)``: the partition's user codes, their factors and biases as held in
    its state (no copy): ALS's ``P`` (n, n_components + 1) float64 holds the bias in its last
    column (``bu`` None); SGD's ``P`` (n, rank) and ``bu`` (n,) are float32."""
    if cfg["solver"] == "als":
        st = _local(part, cfg)
        return st["uids"], st["P"], None
    st = _sgd_local(part, cfg)
    return st["uids"], st["P"], st["bu"]


def final_step(ps, part, cfg: dict) -> tuple:
    """:func:`collect_step` once training is over: the state's layout of the ratings (ALS's
    block, SGD's cut by item block) is let go first, so that it is not held while the
    factors are gathered."""
    st = part.state
    for name in ("keys", "indptr", "cols", "vals", "order", "dsgd", "dsgd_tag"):
        st.pop(name, None)
    return collect_step(ps, part, cfg)  # (its users' rows are kept: "P" is in the state)
