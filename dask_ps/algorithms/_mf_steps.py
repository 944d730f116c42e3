"""The steps of matrix factorisation over user partitions: SGD and ALS epochs.

Every user's ratings are in one partition, so its factors and bias are only ever read and
written next to that partition: they live in the partition's worker-local state
(``part.state``), never pulled, pushed or stored on the PS. Items are shared by all
partitions: their factors and biases are the PS table ``"item"`` (n_items, rank + 1), bias in
the last column.

* SGD: per clock a step pulls the item rows its partition touches once, runs a block of its
  ratings through the numba SGD sweep against that snapshot, and pushes one delta (new - old)
  per shard; the shards add them. Items a partition rates more than ``1 / learning_rate``
  times per clock reach their local optimum within the clock: their deltas are averaged over
  the partitions sharing the item (parameter mixing, Zinkevich et al., NIPS 2010) instead of
  summed, which would overshoot.
* ALS: the user step is local (each partition solves its users' normal equations against the
  pulled items); for the item step each partition pushes its partial normal equations into the
  table ``"gram"``, whose shards sum them; after the barrier, partition ``p`` solves items
  ``p, p + n_parts, ...`` and pushes their new rows (Zhou et al., AAIM 2008). One task runs
  all the partitions of a worker thread, so both halves of an iteration are one clock each.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import DivergenceError
from ._mf_kernels import als_gram, als_solve_gram, als_solve_rows, sgd_sweep

__all__ = ["als_task", "collect_step", "sgd_step", "touch_step"]


def _unique_sorted(x: np.ndarray) -> np.ndarray:
    """Distinct values of ``x``, sorted (sort + adjacent difference; faster than np.unique)."""
    s = np.sort(x)
    if s.shape[0] == 0:
        return s
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def diverged(solver: str, epoch: int, what: str, cfg: dict) -> DivergenceError:
    advice = (f"try a smaller learning_rate (now {cfg['learning_rate']}) or a larger reg"
              if solver == "sgd" else f"try a larger reg (now {cfg['reg']})")
    return DivergenceError(f"MatrixFactorization(solver={solver!r})", epoch, what, advice)


def _local(part, cfg: dict) -> dict:
    """The partition's local state: its users' factors and biases and its ratings in the
    order SGD visits them (made at the first visit, and again after a lost worker)."""
    st = part.state
    if "P" not in st:
        uids, users, items, ratings = part.load()
        rng = np.random.default_rng([cfg["seed"], part.index])
        k = cfg["rank"]
        n = ratings.shape[0]
        st["uids"] = uids
        st["P"] = rng.normal(0.0, cfg["init_std"], (uids.shape[0], k)) if cfg["solver"] == \
            "sgd" else np.zeros((uids.shape[0], k + 1))
        st["bu"] = np.zeros(uids.shape[0])
        order = rng.permutation(n)  # one shuffle; the epochs visit the ratings in this order
        st["users"], st["items"], st["ratings"] = users[order], items[order], ratings[order]
        st["keys"] = _unique_sorted(items)
        st["local"] = np.searchsorted(st["keys"], st["items"])
    return st


def touch_step(ps, part, cfg: dict) -> None:
    """Count, per item, the partitions rating it (table ``"touch"``)."""
    keys = _local(part, cfg)["keys"]
    if keys.shape[0]:
        ps.push("touch", keys, np.ones(keys.shape[0]))
    ps.clock()


def sgd_step(ps, part, cfg: dict) -> tuple[float, int]:
    """One SGD epoch over a partition, ``clocks_per_epoch`` clocks; returns its SSE (errors
    before each update) and ratings.

    Raises
    ------
    DivergenceError
        Non-finite errors or factors, naming the epoch.
    """
    st = _local(part, cfg)
    keys, local, n = st["keys"], st["local"], st["ratings"].shape[0]
    if "scale" not in st:
        sharing = np.maximum(ps.pull("touch", keys), 1.0) if cfg["mix"] else \
            np.ones(keys.shape[0])
        st["sharing"] = sharing
        st["per_clock"] = np.bincount(local, minlength=keys.shape[0]) / cfg["clocks_per_epoch"]
        st["scale"] = True
    lr = cfg["learning_rate"] * cfg["decay"] ** (part.epoch - 1)
    scale = np.where(lr * st["per_clock"] >= 1.0, 1.0 / st["sharing"], 1.0)[:, None]
    bounds = np.linspace(0, n, cfg["clocks_per_epoch"] + 1).round().astype(np.int64)
    sse = 0.0
    for a, b in zip(bounds[:-1], bounds[1:]):
        if keys.shape[0]:  # an empty partition only keeps the clock
            Q = ps.pull("item", keys)
            Q0 = Q.copy()
            sse += sgd_sweep(st["users"][a:b], local[a:b], st["ratings"][a:b], st["P"],
                             st["bu"], Q, cfg["mu"], lr, cfg["reg"], cfg["reg_bias"])
            if not (np.isfinite(sse) and np.isfinite(Q).all()):
                raise diverged("sgd", part.epoch, "the errors or item factors are not finite",
                               cfg)
            ps.push("item", keys, (Q - Q0) * scale)
        ps.clock()
    if not (np.isfinite(st["P"]).all() and np.isfinite(st["bu"]).all()):
        raise diverged("sgd", part.epoch, "the user factors are not finite", cfg)
    return sse, n


def als_task(ps, parts: list, cfg: dict, first: int, last: int) -> list[tuple[float, int]]:
    """ALS iterations ``first..last`` over a task's partitions (two clocks each); returns
    the SSE and ratings of each."""
    return [_als_iteration(ps, parts, cfg, e) for e in range(first, last + 1)]


def _als_iteration(ps, parts: list, cfg: dict, epoch: int) -> tuple[float, int]:
    """One ALS iteration over a task's partitions (two clocks); returns SSE and ratings."""
    k, d = cfg["rank"], cfg["rank"] + 1
    lam, lam_bias, mu = cfg["reg"], cfg["reg_bias"], cfg["mu"]
    lam0, lb0 = cfg["reg_fixed"], cfg["reg_bias_fixed"]
    sse, count = 0.0, 0
    for part in parts:  # user step, against the item rows of the last item step
        st = _local(part, cfg)
        if "indptr" not in st:
            order = np.argsort(st["users"], kind="stable")  # CSR by user
            indptr = np.zeros(st["uids"].shape[0] + 1, np.int64)
            np.cumsum(np.bincount(st["users"], minlength=st["uids"].shape[0]),
                      out=indptr[1:])
            st["indptr"], st["cols"], st["vals"] = indptr, st["local"][order], \
                st["ratings"][order]
        keys, P = st["keys"], st["P"]
        if not keys.shape[0]:
            continue
        Q = ps.pull("item", keys)
        if als_solve_rows(st["indptr"], st["cols"], st["vals"], Q, mu, lam, lam_bias, lam0, lb0,
                          P) >= 0 or not np.isfinite(P).all():
            raise diverged("als", epoch, "the user factors are not finite", cfg)
        rows = np.repeat(np.arange(P.shape[0]), np.diff(st["indptr"]))
        with np.errstate(over="ignore", invalid="ignore"):  # checked just below
            err = st["vals"] - mu - P[rows, k] - Q[st["cols"], k] - np.einsum(
                "ij,ij->i", P[rows, :k], Q[st["cols"], :k])
            sse += float(err @ err)
        count += err.shape[0]
        if not np.isfinite(sse):
            raise diverged("als", epoch, "the training errors are not finite", cfg)
        G = np.zeros((keys.shape[0], d * d + d + 1))
        als_gram(st["users"], st["local"], st["ratings"], P, mu, G)
        ps.push("gram", keys, G)
    ps.clock()
    for part in parts:  # item step: the shards summed every partition's normal equations
        owned = np.arange(part.index, cfg["n_items"], cfg["n_parts"], dtype=np.int64)
        if not owned.shape[0]:
            continue
        S = ps.pull("gram", owned)
        new = np.empty((owned.shape[0], d))
        if als_solve_gram(S, lam, lam_bias, lam0, lb0, new) >= 0 or not np.isfinite(new).all():
            raise diverged("als", epoch, "the item factors are not finite", cfg)
        ps.push("item", owned, new - ps.pull("item", owned))
        ps.push("gram", owned, -S)  # back to zero for the next iteration
    ps.clock()
    return sse, count


def collect_step(ps, part, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """The partition's user codes and their rows (factors, bias last)."""
    st = _local(part, cfg)
    P = st["P"] if cfg["solver"] == "als" else np.column_stack([st["P"], st["bu"]])
    return st["uids"], P
