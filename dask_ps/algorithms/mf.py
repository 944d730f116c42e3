"""Biased matrix factorisation of explicit ratings on the parameter server: SGD and ALS.

The model is ``r_ui ≈ mu + b_u + b_i + p_u · q_i`` (Koren, Bell & Volinsky, 2009).

Where the parameters live
-------------------------
The ratings are partitioned **by user**: every user's ratings are in one partition, trained by
one task. So a user's factors and bias are only ever read and written by that task; they stay
local to it (no pull, no push, no PS memory) and come back with its result. Items are shared
by all partitions: their factors and biases are one PS table ``"item"`` of shape
(n_items, rank + 1), bias in the last column.

* ``"sgd"``: per clock a task pulls the item rows its partition touches once, runs a block of
  its ratings through the numba SGD sweep against that snapshot, and pushes one merged delta
  (new - old) per shard to the table, which adds it. Several clocks per epoch bound how stale
  the item rows a task trains against can be. Deltas of an item are summed over the tasks,
  except for items a task rates more than ``1 / learning_rate`` times per clock: those reach
  their local optimum within the clock, so their deltas are averaged over the tasks sharing
  the item (parameter mixing) instead of overshooting (counts from a first short job).
* ``"als"``: the user step is local (each task solves its users' normal equations against the
  pulled items). For the item step each task pushes its partial normal equations of the items
  it touches into a PS table ``"gram"``, whose shards sum them; after the barrier, task ``t``
  solves the items ``t, t + n_tasks, ...`` and pushes their new rows. BSP only.

Dask dataframes are shuffled once by user (Dask's shuffle) so that the invariant holds; the
training tasks then run on the workers that hold the shuffled partitions.
"""

from __future__ import annotations

import math
import numbers
import time

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..cluster import worker_info
from ..model import PSModel
from ._data import compute_on_workers, is_dask_collection
from ._mf_kernels import als_gram, als_solve_gram, als_solve_rows, predict_pairs, sgd_sweep

__all__ = ["MatrixFactorization", "split_by_user", "train"]

SOLVERS = ("sgd", "als")


def _unique_sorted(x: np.ndarray) -> np.ndarray:
    """Distinct values of ``x``, sorted (sort + adjacent difference; faster than np.unique)."""
    s = np.sort(x)
    if s.shape[0] == 0:
        return s
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def _diverged(solver: str, epoch: int, what: str, cfg: dict) -> FloatingPointError:
    hint = (f"try a smaller learning_rate (now {cfg['learning_rate']}) or a larger reg"
            if solver == "sgd" else f"try a larger reg (now {cfg['reg']})")
    return FloatingPointError(f"MatrixFactorization(solver={solver!r}): {what} not finite at "
                              f"iteration {epoch} (training diverged); {hint}")


def _sgd_task(ps, item):
    """Epochs of SGD over one user partition; returns its users' factors and per-epoch SSE."""
    (uids, users, items, ratings), cfg = item
    rng = np.random.default_rng(cfg["seed"])
    k, n = cfg["rank"], ratings.shape[0]
    P = rng.normal(0.0, cfg["init_std"], (uids.shape[0], k))
    bu = np.zeros(uids.shape[0])
    order = rng.permutation(n)  # one shuffle; later epochs visit the ratings in this order
    users, items, ratings = users[order], items[order], ratings[order]
    keys = _unique_sorted(items)
    local = np.searchsorted(keys, items)
    bounds = np.linspace(0, n, cfg["clocks_per_epoch"] + 1).round().astype(np.int64)
    # How the deltas of tasks sharing an item merge. Summed, they act like one sequential
    # sweep while each moves the item a little per clock (lr * its ratings per clock << 1);
    # an item with more ratings per clock than 1 / lr nears its task's optimum within the
    # clock, and summing m such deltas overshoots m times: those deltas are averaged instead
    # (parameter mixing, Zinkevich et al., NIPS 2010).
    sharing = np.maximum(ps.pull("touch", keys), 1.0) if cfg["mix"] else np.ones(keys.shape[0])
    per_clock = np.bincount(local, minlength=keys.shape[0]) / cfg["clocks_per_epoch"]
    history = []
    for epoch in range(1, cfg["max_iter"] + 1):
        t0 = time.perf_counter()
        lr = cfg["learning_rate"] * cfg["decay"] ** (epoch - 1)
        scale = np.where(lr * per_clock >= 1.0, 1.0 / sharing, 1.0)[:, None]
        sse = 0.0
        for a, b in zip(bounds[:-1], bounds[1:]):
            if keys.shape[0]:  # an empty partition only keeps the clock
                Q = ps.pull("item", keys)
                Q0 = Q.copy()
                sse += sgd_sweep(users[a:b], local[a:b], ratings[a:b], P, bu, Q, cfg["mu"], lr,
                                 cfg["reg"], cfg["reg_bias"])
                if not (np.isfinite(sse) and np.isfinite(Q).all()):
                    raise _diverged("sgd", epoch, "the errors or item factors are", cfg)
                ps.push("item", keys, (Q - Q0) * scale)
            ps.clock()
        if not (np.isfinite(P).all() and np.isfinite(bu).all()):
            raise _diverged("sgd", epoch, "the user factors are", cfg)
        history.append((sse, time.perf_counter() - t0))
    return uids, np.column_stack([P, bu]), history


def _touch_task(ps, item):
    """Count, per item, the tasks whose partition rates it (table "touch")."""
    keys = _unique_sorted(item[2])
    if keys.shape[0]:
        ps.push("touch", keys, np.ones(keys.shape[0]))
    ps.clock()


def _als_task(ps, item):
    """ALS iterations over one user partition (two clocks each); returns its users' rows."""
    (uids, users, items, ratings), cfg = item
    k, d = cfg["rank"], cfg["rank"] + 1
    lam, lam_bias, mu = cfg["reg"], cfg["reg_bias"], cfg["mu"]
    keys = _unique_sorted(items)
    local = np.searchsorted(keys, items)
    order = np.argsort(users, kind="stable")  # CSR by user for the user step
    indptr = np.zeros(uids.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(users, minlength=uids.shape[0]), out=indptr[1:])
    cols, vals = local[order], ratings[order]
    owned = np.arange(cfg["task"], cfg["n_items"], cfg["n_tasks"], dtype=np.int64)
    P = np.zeros((uids.shape[0], d))
    history = []
    for it in range(1, cfg["max_iter"] + 1):
        t0 = time.perf_counter()
        # user step, against the item rows of the last item step
        G = np.zeros((keys.shape[0], d * d + d + 1))
        sse = 0.0
        if keys.shape[0]:
            Q = ps.pull("item", keys)
            if als_solve_rows(indptr, cols, vals, Q, mu, lam, lam_bias, P) >= 0 \
                    or not np.isfinite(P).all():
                raise _diverged("als", it, "the user factors are", cfg)
            rows = np.repeat(np.arange(uids.shape[0]), np.diff(indptr))
            with np.errstate(over="ignore", invalid="ignore"):  # checked just below
                err = vals - mu - P[rows, k] - Q[cols, k] - np.einsum(
                    "ij,ij->i", P[rows, :k], Q[cols, :k])
                sse = float(err @ err)
            if not np.isfinite(sse):
                raise _diverged("als", it, "the training errors are", cfg)
            als_gram(users, local, ratings, P, mu, G)
            ps.push("gram", keys, G)
        ps.clock()
        # item step: the shards summed every task's normal equations; solve this task's items
        if owned.shape[0]:
            S = ps.pull("gram", owned)
            new = np.empty((owned.shape[0], d))
            if als_solve_gram(S, lam, lam_bias, new) >= 0 or not np.isfinite(new).all():
                raise _diverged("als", it, "the item factors are", cfg)
            ps.push("item", owned, new - ps.pull("item", owned))
            ps.push("gram", owned, -S)  # back to zero for the next iteration
        ps.clock()
        history.append((sse, time.perf_counter() - t0))
    return uids, P, history


def train(model: PSModel, parts: list, *, n_users: int, n_items: int, mu: float,
          solver: str = "sgd", rank: int = 100, reg: float = 0.05, reg_bias: float = 0.01,
          learning_rate: float = 0.007, decay: float = 1.0, max_iter: int = 20,
          init_std: float = 0.1, batch_size: int = 100_000, consistency="bsp",
          staleness=None, random_state: int = 0, workers=None,
          part_sizes: list[int] | None = None) -> tuple:
    """Fit biased matrix factorisation on a PS model (the functional core of
    :class:`~dask_ps.algorithms.MatrixFactorization`).

    Parameters
    ----------
    model : PSModel
        Gets the table ``"item"`` (n_items, rank + 1) float64; also ``"gram"`` (ALS) or
        ``"touch"`` (SGD on several parts: tasks per item).
    parts : list
        One ``(uids, users, items, ratings)`` per task, or Dask futures of them: ``uids``
        int64 (n_local_users,) are the dense indices of the partition's users, which no other
        part contains; ``users`` int64 (n,) index ``uids``; ``items`` int64 (n,) are dense item
        indices in ``[0, n_items)``; ``ratings`` float64 (n,).
    n_users, n_items : int
    mu : float
        Global mean rating (fixed, not learned).
    solver : {"sgd", "als"}
    rank : int
    reg, reg_bias : float
        L2 strengths of the factors and of the biases. SGD: per update, as in Surprise's
        ``SVD``; ALS: weighted-λ, multiplied by each row's number of ratings (Zhou et al.).
    learning_rate, decay : float
        SGD step at epoch ``e`` (1-based): ``learning_rate * decay**(e - 1)``.
    max_iter : int
        Epochs (SGD) or ALS iterations.
    init_std : float
        Standard deviation of the normal initial factors (item factors for ALS).
    batch_size : int
        SGD: ratings per clock of the largest part; every part runs the same number of
        clocks per epoch, ``ceil(max part size / batch_size)``.
    consistency, staleness
        See :meth:`PSModel.run` (SGD; ALS always runs BSP).
    random_state : int
    workers : list of str, optional
        Worker of each part.
    part_sizes : list of int, optional
        Ratings per part; required when ``parts`` are futures.

    Returns
    -------
    user_rows : ndarray (n_users, rank + 1)
        User factors, bias in the last column.
    item_rows : ndarray (n_items, rank + 1)
        Item factors, bias in the last column.
    history : list of dict
        Per epoch/iteration: ``train_rmse`` (SGD: errors before each update, as the sweep
        goes; ALS: after the user step) and ``time`` (seconds, slowest task).

    Raises
    ------
    FloatingPointError
        Non-finite errors or factors, naming the iteration (training diverged).

    References
    ----------
    Koren, "Factorization Meets the Neighborhood", KDD 2008 (biased MF by SGD); Koren, Bell &
    Volinsky, "Matrix Factorization Techniques for Recommender Systems", IEEE Computer 2009;
    Zhou, Wilkinson, Schreiber & Pan, "Large-Scale Parallel Collaborative Filtering for the
    Netflix Prize", AAIM 2008 (ALS with weighted-λ regularisation).
    """
    if part_sizes is None:
        part_sizes = [p[3].shape[0] for p in parts]
    n_total = max(1, sum(part_sizes))
    d = rank + 1
    table = model.add_table("item", (n_items, d), "float64",
                            init=("normal", 0.0, init_std), seed=int(random_state) % 2**31)
    rows = np.arange(n_items, dtype=np.int64)
    delta = np.zeros((n_items, d))
    delta[:, rank] = -table.pull(rows)[:, rank]  # biases start at zero
    table.push(rows, delta)
    cfg = dict(rank=rank, reg=reg, reg_bias=reg_bias, learning_rate=learning_rate, decay=decay,
               max_iter=max_iter, init_std=init_std, mu=mu, n_items=n_items,
               n_tasks=len(parts))
    if solver == "sgd":
        cfg["clocks_per_epoch"] = max(1, math.ceil(max(part_sizes) / batch_size))
        cfg["mix"] = len(parts) > 1
        if cfg["mix"]:
            model.add_table("touch", (n_items,), "float64")
            model.run(_touch_task, parts, consistency="bsp", workers=workers)
        task = _sgd_task
    elif solver == "als":
        model.add_table("gram", (n_items, d * d + d + 1), "float64")
        consistency, staleness, task = "bsp", None, _als_task
    else:
        raise ValueError(f"solver must be one of {list(SOLVERS)}, got {solver!r}")
    items = [(p, dict(cfg, seed=int(random_state) + i, task=i)) for i, p in enumerate(parts)]
    results = model.run(task, items, consistency=consistency, staleness=staleness,
                        workers=workers)
    user_rows = np.zeros((n_users, d))
    for uids, U, _ in results:
        user_rows[uids] = U
    item_rows = table.pull(rows)
    if not np.isfinite(item_rows).all():
        raise _diverged(solver, max_iter, "the item factors are", cfg)
    history = [dict(iteration=e + 1,
                    train_rmse=math.sqrt(sum(r[2][e][0] for r in results) / n_total),
                    time=max(r[2][e][1] for r in results))
               for e in range(max_iter)]
    return user_rows, item_rows, history


# -- input ------------------------------------------------------------------------------------
def _as_ids(col, name: str) -> np.ndarray:
    """Ids as int64 (integers, or integral floats) or as an object array (strings).

    Raises
    ------
    ValueError
        Non-integral or non-finite float ids, or missing ids, naming the column and row.
    """
    a = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
    if a.dtype.kind in "iu":
        if a.dtype == np.uint64 and a.size and a.max() >= np.uint64(2**63):
            raise ValueError(f"{name}: ids must fit in int64")
        return a.astype(np.int64, copy=False)
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}: id {a[i].item()!r} at row {i} is not an integer")
        return a.astype(np.int64)
    if a.dtype.kind in "OUST" or str(a.dtype) == "string":
        a = a.astype(object)
        missing = np.asarray(_pd().isna(a), bool)
        if missing.any():
            raise ValueError(f"{name}: missing id at row {int(np.argmax(missing))}")
        return a
    raise TypeError(f"{name}: ids must be integers or strings, got dtype {a.dtype}")


def _as_ratings(col, name: str, where: str = "") -> np.ndarray:
    a = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
    try:
        a = a.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}{name}: ratings must be numbers, got dtype {a.dtype}") from None
    bad = ~np.isfinite(a)
    if bad.any():
        raise ValueError(f"{where}{name}: rating {a[np.argmax(bad)].item()!r} at row "
                         f"{int(np.argmax(bad))} is not finite")
    return a


def _pd():
    import pandas as pd

    return pd


def _triples(est, X, y, need_ratings: bool) -> tuple:
    """``(user ids, item ids, ratings or None)`` of an in-memory input (NumPy or pandas)."""
    if hasattr(X, "columns"):  # pandas
        names = [est.user_col, est.item_col]
        if need_ratings and y is None:
            names.append(est.rating_col)
        for what, name in zip(("user_col", "item_col", "rating_col"), names):
            if name not in X.columns:
                raise ValueError(f"X has no column {name!r} ({what}); its columns are "
                                 f"{list(X.columns)}")
        cols = [X[n] for n in names]
        labels = [f"column {n!r}" for n in names]
    else:
        a = np.asarray(X)
        width = 3 if need_ratings and y is None else 2
        if a.ndim != 2 or a.shape[1] not in (width, 3):
            raise ValueError(f"X must be an array of shape (n, {width}) (user, item"
                             f"{', rating' if width == 3 else ''}), got shape {a.shape}")
        cols = [a[:, j] for j in range(width)]
        labels = [f"column {j} ({w})" for j, w in zip(range(width), ("user", "item",
                                                                        "rating"))]
    if y is not None and need_ratings:
        cols = cols[:2] + [y]
        labels = labels[:2] + ["y"]
    users = _as_ids(cols[0], f"X {labels[0]}")
    items = _as_ids(cols[1], f"X {labels[1]}")
    ratings = _as_ratings(cols[2], labels[2]) if need_ratings else None
    if ratings is not None and ratings.shape[0] != users.shape[0]:
        raise ValueError(f"y has {ratings.shape[0]} ratings for {users.shape[0]} rows of X")
    return users, items, ratings


def _factorize(ids: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Dense codes and sorted distinct ids (int64 or object)."""
    try:
        codes, uniques = _pd().factorize(ids, sort=True)
    except TypeError as exc:
        raise ValueError(f"{name} ids mix types that cannot be ordered ({exc})") from None
    return codes.astype(np.int64), np.asarray(uniques)


def _lookup(index, ids: np.ndarray) -> np.ndarray:
    """Dense index of each id, -1 where unseen at fit."""
    if ids.dtype.kind in "iu" and index.dtype.kind == "O":
        ids = ids.astype(object)  # int ids against string ids: all unseen, no error
    return index.get_indexer(ids).astype(np.int64)


def split_by_user(users: np.ndarray, items: np.ndarray, ratings: np.ndarray, n_users: int,
                  n_parts: int) -> list:
    """Parts of in-memory triples (dense indices) for :func:`train`: user ``u`` goes to part
    ``u % n_parts`` as local user ``u // n_parts``; parts may be empty."""
    part = users % n_parts
    order = np.argsort(part, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(part, minlength=n_parts))))
    parts = []
    for p in range(n_parts):
        sl = order[bounds[p]:bounds[p + 1]]
        parts.append((np.arange(p, n_users, n_parts, dtype=np.int64), users[sl] // n_parts,
                      items[sl], ratings[sl]))
    return parts


def _encode_frame(df, user_index, item_index, cols: tuple, where: str):
    """A dask partition as dense (u, i, r) columns; ValueError names partition and row."""
    pd = _pd()
    out = pd.DataFrame({
        "u": _lookup(user_index, _as_ids(df[cols[0]], f"{where} column {cols[0]!r}")),
        "i": _lookup(item_index, _as_ids(df[cols[1]], f"{where} column {cols[1]!r}")),
        "r": _as_ratings(df[cols[2]], f"column {cols[2]!r}", f"{where}: "),
    })
    return out


def _to_part(df) -> tuple:
    """A user-shuffled dask partition as a part of :func:`train` (local user indices)."""
    users, uids = _pd().factorize(df["u"].to_numpy())
    return (np.asarray(uids, np.int64), users.astype(np.int64),
            df["i"].to_numpy(np.int64), df["r"].to_numpy(np.float64))


def _part_size(part) -> int:
    return int(part[3].shape[0])


def _dask_parts(client, X, est, n_parts: int) -> tuple:
    """Ids, global mean, rating range and user-shuffled parts (futures) of a dask dataframe.

    Returns ``(user_ids, item_ids, mu, (low, high), parts, workers, sizes)``.
    """
    import dask

    cols = (est.user_col, est.item_col, est.rating_col)
    for what, name in zip(("user_col", "item_col", "rating_col"), cols):
        if name not in X.columns:
            raise ValueError(f"X has no column {name!r} ({what}); its columns are "
                             f"{list(X.columns)}")
    uu, ii = dask.compute(X[cols[0]].drop_duplicates(), X[cols[1]].drop_duplicates())
    _, user_ids = _factorize(_as_ids(uu, f"X column {cols[0]!r}"), "user")
    _, item_ids = _factorize(_as_ids(ii, f"X column {cols[1]!r}"), "item")
    pd = _pd()
    uidx, iidx = pd.Index(user_ids), pd.Index(item_ids)
    meta = pd.DataFrame({"u": np.zeros(0, np.int64), "i": np.zeros(0, np.int64),
                         "r": np.zeros(0, np.float64)})
    enc = X[list(cols)].map_partitions(
        lambda df, partition_info=None: _encode_frame(
            df, uidx, iidx, cols, f"partition {(partition_info or {}).get('number', '?')}"),
        meta=meta)
    # every user's ratings into one partition: user factors stay local to its task
    enc = enc.shuffle(on="u", npartitions=n_parts)
    parts = [dask.delayed(_to_part, pure=True)(d) for d in enc.to_delayed()]
    futures, workers = compute_on_workers(client, parts)
    sizes = client.gather(client.map(_part_size, futures, pure=False))
    stats = client.gather([client.submit(_part_stats, f, pure=False) for f in futures])
    total, n = sum(s[0] for s in stats), sum(s[1] for s in stats)
    low = min((s[2] for s in stats if s[1]), default=np.nan)
    high = max((s[3] for s in stats if s[1]), default=np.nan)
    return user_ids, item_ids, total / max(n, 1), (low, high), futures, workers, sizes


def _scatter(client, parts: list) -> tuple[list, list[str], list[int]]:
    """Futures of in-memory parts, part ``p`` on the ``p``-th worker (sorted by address)."""
    addrs = sorted(worker_info(client))
    workers = [addrs[p % len(addrs)] for p in range(len(parts))]
    futures = [client.scatter([part], workers=[w], hash=False)[0]
               for part, w in zip(parts, workers)]
    return futures, workers, [_part_size(part) for part in parts]


def _part_stats(part) -> tuple:
    r = part[3]
    if r.shape[0] == 0:
        return 0.0, 0, np.nan, np.nan
    return float(r.sum()), int(r.shape[0]), float(r.min()), float(r.max())


DEFAULTS = {
    # tuned on MovieLens-100k u1.base -> u1.test (see the README section)
    "sgd": dict(rank=200, reg=0.05, reg_bias=0.02, learning_rate=0.01, decay=0.97,
                max_iter=100, init_std=0.01),
    "als": dict(rank=50, reg=0.1, reg_bias=0.01, learning_rate=None, decay=None,
                max_iter=15, init_std=0.1),
}


class MatrixFactorization(BaseEstimator):
    """Biased matrix factorisation of explicit ratings, trained on a dask_ps parameter server.

    Predicts ``r_ui = mu + b_u + b_i + p_u · q_i`` (global mean, user and item biases, rank-k
    factors). Item factors and biases live on the PS; the ratings are partitioned by user and
    each user's factors stay local to the task that trains its partition (see the module
    docstring of :mod:`dask_ps.algorithms.mf`).

    Parameters
    ----------
    solver : {"sgd", "als"}, default "sgd"
        "sgd": biased MF by stochastic gradient descent (Funk; Koren 2008 — Surprise's
        ``SVD``). "als": alternating least squares with weighted-λ regularisation (Zhou et
        al. 2008), biases solved with the factors.
    rank : int, optional
        Number of latent factors k. Default 200 (sgd), 50 (als).
    reg : float, optional
        L2 strength of the factors: per update (sgd) or times each row's number of ratings
        (als). Default 0.05 (sgd), 0.1 (als).
    reg_bias : float, optional
        Same for the biases. Default 0.02 (sgd), 0.01 (als).
    learning_rate : float, optional
        SGD step of the first epoch. Default 0.01.
    decay : float, optional
        SGD step multiplier per epoch (``learning_rate * decay**(epoch - 1)``). Default 0.97.
    max_iter : int, optional
        Epochs (sgd) or ALS iterations. Default 100 (sgd), 15 (als).
    init_std : float, optional
        Standard deviation of the normal initial factors. Default 0.01 (sgd), 0.1 (als).
    batch_size : int, default 100_000
        SGD ratings per clock in the largest partition: the item rows a task trains against
        are at most that many of its own updates old (plus the consistency model's staleness).
    consistency : {"bsp", "ssp", "asp"}, default "bsp"
        SGD only; ALS always runs BSP.
    staleness : int, optional
        With ``consistency="ssp"``.
    n_shards : int, optional
        Default: one per worker (1 without a cluster).
    user_col, item_col, rating_col : str, default "user", "item", "rating"
        Column names read from pandas and dask dataframes. NumPy arrays are read by position:
        (user, item, rating) for ``fit``, (user, item[, ignored]) for ``predict``.
    clip : bool, default True
        Clip predictions to the range of the training ratings (as Surprise does).
    random_state : int, optional
    client : distributed.Client or "local", optional
        Default: the current Dask client, else in-process.

    Attributes
    ----------
    user_ids_ : ndarray (n_users,)
        Distinct training user ids, sorted (int64, or object for string ids); row ``j`` of the
        user attributes belongs to ``user_ids_[j]``.
    item_ids_ : ndarray (n_items,)
    user_factors_ : ndarray (n_users, rank) float64
    item_factors_ : ndarray (n_items, rank) float64
    user_bias_ : ndarray (n_users,) float64
    item_bias_ : ndarray (n_items,) float64
    global_mean_ : float
    rating_range_ : (float, float)
        Lowest and highest training rating (the clipping range).
    history_ : list of dict
        Per epoch/iteration: ``train_rmse`` and ``time`` (seconds, slowest task).
    n_iter_ : int

    Notes
    -----
    **Cold start.** A user (item) not seen at fit contributes nothing to a prediction: an
    unseen user gets ``mu + b_i``, an unseen item ``mu + b_u``, both unseen ``mu``.
    :meth:`evaluate` reports how many rows were predicted so; metrics are never NaN.

    **Ids.** Any int64 or string ids; integral float ids (from a float NumPy array) are read
    as int64. The mapping to dense indices is kept in ``user_ids_`` and ``item_ids_``.

    References
    ----------
    Y. Koren, "Factorization Meets the Neighborhood: a Multifaceted Collaborative Filtering
    Model", KDD 2008; Y. Koren, R. Bell and C. Volinsky, "Matrix Factorization Techniques for
    Recommender Systems", IEEE Computer 42(8), 2009; S. Funk, "Netflix Update: Try This at
    Home", 2006; N. Hug, Surprise (``surprise.prediction_algorithms.matrix_factorization.SVD``);
    Y. Zhou, D. Wilkinson, R. Schreiber and R. Pan, "Large-Scale Parallel Collaborative
    Filtering for the Netflix Prize", AAIM 2008.

    Examples
    --------
    >>> import pandas as pd
    >>> from dask_ps import MatrixFactorization
    >>> df = pd.read_csv("u1.base", sep="\\t", names=["user", "item", "rating", "ts"])
    >>> test = pd.read_csv("u1.test", sep="\\t", names=["user", "item", "rating", "ts"])
    >>> mf = MatrixFactorization(solver="sgd", client="local", random_state=0).fit(df)
    >>> mf.evaluate(test)["rmse"]                            # doctest: +SKIP
    0.914
    """

    def __init__(self, solver="sgd", rank=None, reg=None, reg_bias=None, learning_rate=None,
                 decay=None, max_iter=None, init_std=None, batch_size=100_000,
                 consistency="bsp", staleness=None, n_shards=None, user_col="user",
                 item_col="item", rating_col="rating", clip=True, random_state=None,
                 client=None):
        self.solver = solver
        self.rank = rank
        self.reg = reg
        self.reg_bias = reg_bias
        self.learning_rate = learning_rate
        self.decay = decay
        self.max_iter = max_iter
        self.init_std = init_std
        self.batch_size = batch_size
        self.consistency = consistency
        self.staleness = staleness
        self.n_shards = n_shards
        self.user_col = user_col
        self.item_col = item_col
        self.rating_col = rating_col
        self.clip = clip
        self.random_state = random_state
        self.client = client

    def _params(self) -> dict:
        """The solver's hyper-parameters, defaults filled in and checked."""
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {list(SOLVERS)}, got {self.solver!r}")
        p = {name: (default if getattr(self, name) is None else getattr(self, name))
             for name, default in DEFAULTS[self.solver].items()}
        for name in ("rank", "max_iter"):
            if not isinstance(p[name], numbers.Integral) or p[name] < 1:
                raise ValueError(f"{name} must be a positive integer, got {p[name]!r}")
        if not isinstance(self.batch_size, numbers.Integral) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        checks = {"reg": (0, False), "reg_bias": (0, False), "init_std": (0, False),
                  "learning_rate": (0, True), "decay": (0, True)}
        for name, (low, strict) in checks.items():
            v = p[name]
            if v is None and self.solver == "als" and name in ("learning_rate", "decay"):
                continue
            if not (isinstance(v, numbers.Real) and np.isfinite(v)
                    and (v > low if strict else v >= low)):
                raise ValueError(f"{name} must be a {'positive' if strict else 'non-negative'} "
                                 f"number, got {v!r}")
        if self.solver == "als" and p["reg"] <= 0:
            raise ValueError("solver='als' needs reg > 0 (its normal equations are singular "
                             "otherwise)")
        p["rank"], p["max_iter"] = int(p["rank"]), int(p["max_iter"])
        return p

    def fit(self, X, y=None):
        """Fit on rating triples.

        Parameters
        ----------
        X : ndarray (n, 3), pandas.DataFrame or dask.dataframe.DataFrame
            (user, item, rating) rows: an array by position, a dataframe by ``user_col``,
            ``item_col`` and ``rating_col``. A dask dataframe is shuffled once by user on the
            cluster and trained where its partitions are.
        y : array-like (n,), optional
            Ratings; then ``X`` holds only users and items (NumPy or pandas).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters, a missing column (named), ids that are not integers or strings,
            non-finite ratings (naming the row, and the partition for dask input), or no
            ratings.
        FloatingPointError
            Training diverged (non-finite errors or factors), naming the iteration.
        """
        p = self._params()
        seed = 0 if self.random_state is None else int(self.random_state)
        with PSModel(self.client, n_shards=self.n_shards) as model:
            workers, sizes = None, None
            if is_dask_collection(X):
                if y is not None:
                    raise ValueError("with a dask dataframe X, the ratings must be its "
                                     f"column {self.rating_col!r} (y must be None)")
                if model.is_local:
                    X = X.compute()
                else:
                    (self.user_ids_, self.item_ids_, mu, rng, parts, workers,
                     sizes) = _dask_parts(model.client, X, self, model.n_workers)
            if workers is None:
                users, items, ratings = _triples(self, X, y, True)
                if ratings.shape[0] == 0:
                    raise ValueError("X has no ratings")
                users, self.user_ids_ = _factorize(users, "user")
                items, self.item_ids_ = _factorize(items, "item")
                mu, rng = float(ratings.mean()), (float(ratings.min()), float(ratings.max()))
                parts = split_by_user(users, items, ratings, self.user_ids_.shape[0],
                                      model.n_workers)
                if not model.is_local:  # one part per worker, sent once, not in the graph
                    parts, workers, sizes = _scatter(model.client, parts)
            elif sum(sizes) == 0:
                raise ValueError("X has no ratings")
            U, V, self.history_ = train(
                model, parts, n_users=self.user_ids_.shape[0],
                n_items=self.item_ids_.shape[0], mu=mu, solver=self.solver,
                rank=p["rank"], reg=p["reg"], reg_bias=p["reg_bias"],
                learning_rate=p["learning_rate"], decay=p["decay"], max_iter=p["max_iter"],
                init_std=p["init_std"], batch_size=self.batch_size,
                consistency=self.consistency, staleness=self.staleness, random_state=seed,
                workers=workers, part_sizes=sizes)
        k = p["rank"]
        self.user_factors_, self.user_bias_ = np.ascontiguousarray(U[:, :k]), U[:, k].copy()
        self.item_factors_, self.item_bias_ = np.ascontiguousarray(V[:, :k]), V[:, k].copy()
        self.global_mean_ = float(mu)
        self.rating_range_ = (float(rng[0]), float(rng[1]))
        self.n_iter_ = p["max_iter"]
        return self

    def __getstate__(self) -> dict:
        # a Dask client does not pickle: the copy (e.g. in a task) uses the current client
        state = self.__dict__.copy()
        if state.get("client") is not None and not isinstance(state["client"], str):
            state["client"] = None
        return state

    # -- prediction ---------------------------------------------------------------------
    def _indices(self, X) -> tuple[np.ndarray, np.ndarray]:
        users, items, _ = _triples(self, X, None, False)
        pd = _pd()
        return (_lookup(pd.Index(self.user_ids_), users),
                _lookup(pd.Index(self.item_ids_), items))

    def _predict_indices(self, u: np.ndarray, i: np.ndarray) -> np.ndarray:
        low, high = self.rating_range_ if self.clip else (-np.inf, np.inf)
        out = np.empty(u.shape[0])
        predict_pairs(u, i, self.user_factors_, self.user_bias_, self.item_factors_,
                      self.item_bias_, self.global_mean_, low, high, out)
        return out

    def predict(self, X):
        """Predicted ratings of (user, item) rows, cold-start rule for unseen ids.

        Parameters
        ----------
        X : ndarray (n, 2) or (n, 3), pandas or dask dataframe
            Users and items (a third column, e.g. the true rating, is ignored).

        Returns
        -------
        ndarray (n,) float64, or a dask Series for a dask dataframe
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            return X.map_partitions(_predict_frame, self, meta=(None, "float64"))
        return self._predict_indices(*self._indices(X))

    def evaluate(self, X, y=None) -> dict:
        """Error metrics on rated (user, item) rows, with counts of cold-start rows.

        Parameters
        ----------
        X, y
            As for :meth:`fit` (a dask dataframe is evaluated partition by partition).

        Returns
        -------
        dict
            ``rmse``, ``mae``, ``n_ratings``, ``n_unseen_users`` and ``n_unseen_items``
            (rows whose user, item, was not seen at fit and was predicted by the cold-start
            rule).
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            import dask

            parts = dask.compute(*[dask.delayed(_evaluate_sums)(self, d, None)
                                   for d in X.to_delayed()])
            sums = np.sum(parts, axis=0)
        else:
            sums = _evaluate_sums(self, X, y)
        sse, sae, n, cold_u, cold_i = sums
        if n == 0:
            raise ValueError("X has no ratings to evaluate")
        return dict(rmse=float(np.sqrt(sse / n)), mae=float(sae / n), n_ratings=int(n),
                    n_unseen_users=int(cold_u), n_unseen_items=int(cold_i))

    def score(self, X, y=None) -> float:
        """Negative RMSE on rated rows (scikit-learn's "greater is better" convention, as its
        ``neg_root_mean_squared_error`` scorer); see :meth:`evaluate` for the RMSE itself."""
        return -self.evaluate(X, y)["rmse"]

    def recommend(self, user, n: int = 10, exclude=None) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` items of highest predicted rating for ``user``.

        Parameters
        ----------
        user : int or str
            A user id; an unseen user is ranked by ``mu + b_i`` (cold-start rule).
        n : int, default 10
        exclude : array-like of item ids, optional
            Items to leave out (e.g. those the user already rated).

        Returns
        -------
        item_ids : ndarray (min(n, n_candidates),)
        scores : ndarray of float64, same length, decreasing (unclipped predictions)
        """
        check_is_fitted(self)
        if not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        u = int(_lookup(_pd().Index(self.user_ids_), _as_ids(np.array([user]), "user"))[0])
        scores = self.global_mean_ + self.item_bias_
        if u >= 0:
            scores = scores + self.user_bias_[u] + self.item_factors_ @ self.user_factors_[u]
        keep = np.ones(scores.shape[0], bool)
        if exclude is not None:
            ex = _lookup(_pd().Index(self.item_ids_), _as_ids(np.asarray(exclude), "exclude"))
            keep[ex[ex >= 0]] = False
        cand = np.flatnonzero(keep)
        n = min(int(n), cand.shape[0])
        top = cand[np.argpartition(-scores[cand], n - 1)[:n]] if n else cand[:0]
        top = top[np.argsort(-scores[top], kind="stable")]
        return self.item_ids_[top], scores[top]


def _predict_frame(df, est: MatrixFactorization) -> "object":
    return _pd().Series(est.predict(df), index=df.index)


def _evaluate_sums(est: MatrixFactorization, X, y) -> np.ndarray:
    """SSE, SAE, count and cold-start counts of one in-memory block."""
    _, _, ratings = _triples(est, X, y, True)
    u, i = est._indices(X)
    err = est._predict_indices(u, i) - ratings
    return np.array([err @ err, np.abs(err).sum(), err.shape[0], (u < 0).sum(),
                     (i < 0).sum()], dtype=np.float64)
