"""GBDT on the parameter server: histograms summed and split on the shards, a whole fit in one
job (DimBoost, Jiang et al., SIGMOD 2018; Angel's GBDT).

One table, ``"hist"`` (float64, update rule "add"), holds per shard a contiguous block of keys
(:class:`HistLayout`): the *push area* (a slot per node whose histogram the workers build in
a step), the *pool* (a slot per node that may still split) and a few *scalars*. A slot holds
the shard's histogram rows — the rows of its columns, a feature range — of one node, node-
major, ``ROWS_PER_KEY`` histogram rows (x 3 sums) per key, so a slot is a few hundred keys and
a push costs little more than its bytes.

Every worker task runs the whole boosting loop; every step of a tree is

1. **the push**: each task builds the histograms of the step's nodes over its partitions
   (the smaller child of each split; the roots first) into one buffer laid out as the keys,
   and pushes it, one merged push per shard; at a root step the scalars ride along (each
   task's root totals, loss sums and gradient bound);
2. **the split query**: after the clock, ``ps.map_shards(shard_step)``: each shard (once per
   step, whichever task asks first) expands siblings into the pool (``parent - smaller``),
   zeroes the push area and finds the best split of every open node over its columns; only
   those candidates travel back;
3. **the plan**: every task merges the shards' candidates (the same in every task) and runs
   the same :class:`~._gbdt_tree.LevelGrower`, so all decide the same splits, pool slots and
   next step without a word from the driver; each moves its rows.

So a step is one push and one query (two round trips, the push sent just before the query),
and the driver is not involved until the job ends. Trees, losses and bytes come back as the
tasks' results. Histograms hold quantized gradients (exact float64 sums, see
:mod:`._gbdt_kernels`): trees do not depend on the number of workers, partitions or shards.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._gbdt_bins import BinMapper
from ._gbdt_data import labels as labels_of
from ._gbdt_data import to_matrix
from ._gbdt_kernels import (
    N_SPLIT_COLS,
    SPLIT_COLUMN,
    expand_siblings,
    find_splits,
    merge_splits,
    quantization_scale,
)
from ._gbdt_objectives import get_objective
from ._gbdt_sketch import sample_rows
from ._gbdt_tree import Ensemble, LevelGrower
from ._gbdt_worker import BinnedPartition

__all__ = ["HistLayout", "boost_task", "column_mask", "shard_setup", "shard_step"]

#: Histogram rows (of 3 sums each) per key of the table.
ROWS_PER_KEY = 32
#: The table's name.
TABLE = "hist"


@dataclass(frozen=True)
class HistLayout:
    """Where histograms live in the table ``"hist"``: per shard a block of ``block`` keys,
    ``3 * rows_per_key`` float64 columns each.

    Shard ``s`` owns the columns ``bounds[s]:bounds[s + 1]`` (histogram rows
    ``row0[s]:row0[s + 1]``). In its block, slot ``q`` (push slots ``0 .. n_push - 1``,
    then pool slots) holds one node's rows, padded to ``rows_pad``, as ``keys_per_slot``
    keys; the scalars (``n_scalar`` values) follow the slots in shard 0's block.
    """

    n_shards: int
    bounds: np.ndarray
    row0: np.ndarray
    rows_per_key: int
    keys_per_slot: int
    n_push: int
    n_pool: int
    n_scalar: int

    @classmethod
    def make(cls, mapper: BinMapper, n_shards: int, n_push: int, n_pool: int, n_scalar: int,
             rows_per_key: int = ROWS_PER_KEY) -> HistLayout:
        bounds = mapper.column_bounds(n_shards)
        row0 = mapper.hist_offsets[bounds].astype(np.int64)
        most = max(1, int(np.diff(row0).max(initial=0)))
        return cls(n_shards, bounds, row0, rows_per_key, -(-most // rows_per_key), n_push,
                   n_pool, n_scalar)

    @property
    def rows_pad(self) -> int:
        return self.keys_per_slot * self.rows_per_key

    @property
    def ncols(self) -> int:
        return 3 * self.rows_per_key

    @property
    def scalar_keys(self) -> int:
        return -(-self.n_scalar // self.ncols)

    @property
    def block(self) -> int:
        return (self.n_push + self.n_pool) * self.keys_per_slot + self.scalar_keys

    @property
    def n_keys(self) -> int:
        return self.n_shards * self.block

    def push_offsets(self, hist_offsets: np.ndarray) -> np.ndarray:
        """Histogram offsets of the columns in a push buffer (n_build, n_shards * rows_pad,
        3): shard ``s``'s rows at ``s * rows_pad``, zero padding after them (int64
        (n_cols + 1,), what the histogram kernels take)."""
        n_cols = hist_offsets.shape[0] - 1
        c = np.arange(n_cols)
        s = np.searchsorted(self.bounds, c, side="right") - 1
        out = np.empty(n_cols + 1, np.int64)
        out[:n_cols] = s * self.rows_pad + hist_offsets[:n_cols] - self.row0[s]
        out[n_cols] = self.n_shards * self.rows_pad
        return out

    def push_keys(self, n_build: int) -> np.ndarray:
        """Keys of a push buffer of ``n_build`` nodes (push slots ``0 .. n_build - 1``), in
        the buffer's order (node, shard, key)."""
        j = np.arange(n_build, dtype=np.int64)[:, None, None]
        s = np.arange(self.n_shards, dtype=np.int64)[None, :, None]
        k = np.arange(self.keys_per_slot, dtype=np.int64)[None, None, :]
        return (s * self.block + j * self.keys_per_slot + k).ravel()

    def scalar_keys_of(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keys and rows (scalar_keys, ncols) of a push of the scalars ``values``."""
        rows = np.zeros(self.scalar_keys * self.ncols)
        rows[: values.shape[0]] = values
        first = (self.n_push + self.n_pool) * self.keys_per_slot
        return (np.arange(first, first + self.scalar_keys, dtype=np.int64),
                rows.reshape(self.scalar_keys, self.ncols))


def column_mask(n_cols: int, fraction: float, seed: int, rnd: int) -> np.ndarray:
    """The columns a round's trees may split on (uint8 (n_cols,)): all, or
    ``max(1, round(fraction * n_cols))`` drawn from ``(seed, round)`` — the same in every
    task and shard (LightGBM's ``feature_fraction``, XGBoost's ``colsample_bytree``)."""
    out = np.ones(n_cols, np.uint8)
    if fraction >= 1.0 or n_cols == 0:
        return out
    k = max(1, int(round(fraction * n_cols)))
    out[:] = 0
    out[np.random.default_rng([seed, rnd]).choice(n_cols, k, replace=False)] = 1
    return out


# --------------------------------------------------------------------------- the shards' side

# State of the shards of this process by id of their table's memory: the shard's columns,
# split parameters, and the last step's answer (every task asks; the first computes).
_SHARDS: dict[int, tuple] = {}


def _root(values: np.ndarray) -> np.ndarray:
    while isinstance(values.base, np.ndarray):
        values = values.base
    return values


def shard_setup(keys, values, slots, layout: HistLayout, hist_offsets, n_bins, is_cat,
                params, colsample: float, seed: int) -> int:
    """Keep what :func:`shard_step` needs next to a shard of ``"hist"`` (run once per fit,
    from the driver, through :meth:`PSModel.map_shards`); returns the shard's index."""
    s = int(keys[0]) // layout.block
    root = _root(values)
    state = dict(shard=s, layout=layout, lo=int(layout.bounds[s]),
                 hi=int(layout.bounds[s + 1]), row0=int(layout.row0[s]),
                 offsets=hist_offsets, n_bins=n_bins, is_cat=is_cat, params=params,
                 colsample=colsample, seed=seed, memo=None, mask=None)
    _SHARDS[id(root)] = (weakref.ref(root), state)
    weakref.finalize(root, _SHARDS.pop, id(root), None)
    return s


class Step(NamedTuple):
    """A step's instructions to the shards (the same from every task).

    Attributes
    ----------
    job : str; clock : int
        Identify the step (the shard answers every task from one computation).
    rnd : int
        Boosting round (column sampling).
    n_build : int
        Push slots filled this step.
    roots : int64 array or None
        At a root step, the pool slot of each root (push slot ``t`` holds root ``t``).
    parent, small_to, large_to : int64 arrays
        Else, per split: the parent's pool slot, and the pool slots of its built child
        (push slot ``i``) and of the subtracted one (-1: not kept).
    slots : int64 array
        Pool slots of the nodes to evaluate.
    totals : float64 array (n, 3) or None
        Their (grad, hess, count) sums; None at a root step (from the histograms).
    grad_unit, hess_unit : float
    """

    job: str
    clock: int
    rnd: int
    n_build: int
    roots: np.ndarray | None
    parent: np.ndarray
    small_to: np.ndarray
    large_to: np.ndarray
    slots: np.ndarray
    totals: np.ndarray | None
    grad_unit: float
    hess_unit: float


def shard_step(keys, values, slots, step: Step):
    """One step on a shard of ``"hist"``: the summed push becomes pool histograms (roots
    copied; siblings expanded), the push area is zeroed, and the open nodes' best splits
    over this shard's columns are found.

    Returns
    -------
    splits : float64 (n, N_SPLIT_COLS); split_cat : uint32 (n, W)
    scalars : float64 array or None
        The summed scalars (shard 0 at a root step), then zeroed.
    """
    st = _SHARDS[id(_root(values))][1]
    memo = st["memo"]
    if memo is not None and memo[0] == (step.job, step.clock):
        return memo[1]
    L: HistLayout = st["layout"]
    n_slots = L.n_push + L.n_pool
    hist = values[: n_slots * L.keys_per_slot].reshape(n_slots, L.rows_pad, 3)
    push, pool = hist[: L.n_push], hist[L.n_push:]
    if step.roots is not None:
        pool[step.roots] = push[: step.n_build]
    elif step.n_build:
        expand_siblings(pool, step.parent, push[: step.n_build], step.small_to,
                        step.large_to, pool)
    push[: step.n_build] = 0.0
    n = step.slots.shape[0]
    if step.totals is None:
        nb = int(st["n_bins"][st["lo"]]) + 1 if st["hi"] > st["lo"] else 0
        totals = np.ascontiguousarray(pool[step.slots, :nb].sum(axis=1)) if nb else \
            np.zeros((n, 3))
    else:
        totals = np.ascontiguousarray(step.totals, dtype=np.float64)
    if st["mask"] is None or st["mask"][0] != step.rnd:
        st["mask"] = (step.rnd, column_mask(st["n_bins"].shape[0], st["colsample"],
                                            st["seed"], step.rnd))
    W = _cat_words(st["n_bins"], st["is_cat"])
    splits = np.empty((n, N_SPLIT_COLS))
    split_cat = np.empty((n, W), np.uint32)
    find_splits(pool, np.ascontiguousarray(step.slots, dtype=np.int64), st["row0"], st["lo"],
                st["hi"], st["offsets"], st["n_bins"], st["is_cat"], st["mask"][1], totals,
                st["params"], step.grad_unit, step.hess_unit, splits, split_cat)
    scalars = None
    if st["shard"] == 0 and step.roots is not None:
        area = values[n_slots * L.keys_per_slot:].reshape(-1)
        scalars = area[: L.n_scalar].copy()
        area[:] = 0.0
    result = (splits, split_cat, scalars)
    st["memo"] = ((step.job, step.clock), result)
    return result


def _cat_words(n_bins, is_cat) -> int:
    cat = n_bins[is_cat.astype(bool)]
    return max(1, (int(cat.max()) + 31) // 32) if cat.size else 1


# --------------------------------------------------------------------------- the workers' side

@dataclass
class FitConfig:
    """What every task of a fit knows (sent with each job)."""

    layout: HistLayout
    mapper: BinMapper
    objective: str
    n_classes: int | None
    base_score: np.ndarray
    n_train: int
    starts: np.ndarray  # global id of each training partition's first row
    categories: dict
    classes: np.ndarray | None
    params: np.ndarray
    learning_rate: float
    reg_lambda: float
    max_leaf_nodes: int
    max_depth: int | None
    min_samples_leaf: int
    min_child_weight: float
    split_share: float
    subsample: float
    seed: int
    early_stopping_rounds: int | None
    n_tasks: int
    eval_refs: dict  # task -> eval Partition handles it scores
    token: str


@dataclass
class JobArgs:
    """What changes from one job of a fit to the next."""

    first: int  # rounds first .. last (0-based, inclusive)
    last: int
    ensemble: Ensemble  # the trees so far (a task that lost its state rebuilds from them)
    bound: float  # gradient bound of round ``first`` (regression; else unused)
    best_loss: float
    best_round: int


class _Rows:
    """A task's rows of one partition, kept in ``part.state`` between jobs."""

    def __init__(self, value, start: int, cfg: FitConfig, obj, ensemble: Ensemble,
                 train: bool) -> None:
        X = to_matrix(value[0], cfg.categories)
        y = _encode(labels_of(value[1]), cfg, start if train else None)
        self.start = start
        raw = ensemble.predict_raw(X) if ensemble.n_trees else None
        if train:
            M = 2 * cfg.max_leaf_nodes - 1
            self.bp = BinnedPartition(X, y, cfg.mapper, obj, cfg.base_score, M)
            if raw is not None:
                self.bp.raw[:] = raw
        else:
            self.X, self.y = X, y
            self.raw = raw if raw is not None else np.repeat(
                np.asarray(cfg.base_score, np.float64)[:, None], X.shape[0], axis=1)
        self.rounds = ensemble.n_rounds


def _encode(y, cfg: FitConfig, start: int | None) -> np.ndarray:
    if cfg.classes is None:
        y = np.array(y, np.float64)  # a writable copy (the kernels' signatures)
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            where = f"y[{start + bad[0]}]" if start is not None else f"eval_set y[{bad[0]}]"
            raise ValueError(f"{where} = {y[bad[0]]} is not finite")
        return y
    codes = np.searchsorted(cfg.classes, y)
    codes = np.minimum(codes, cfg.classes.shape[0] - 1)
    bad = np.flatnonzero(cfg.classes[codes] != y)
    if bad.size:
        where = f"y[{start + bad[0]}]" if start is not None else "an eval_set label"
        raise ValueError(f"{where} = {y[bad].tolist()[0]!r} is not one of the classes "
                         f"{cfg.classes.tolist()} seen in training")
    return codes.astype(np.float64)


def _local(part, cfg: FitConfig, obj, job: JobArgs, train: bool) -> _Rows:
    """The partition's rows as this fit keeps them (built at the first visit; again when
    the worker lost them or they belong to another round, e.g. after a recovery)."""
    st = part.state
    rows = st.get(cfg.token)
    if rows is None or rows.rounds != job.first:
        start = int(cfg.starts[part.index]) if train else 0
        rows = st[cfg.token] = _Rows(part.load(), start, cfg, obj,
                                     _truncated(job.ensemble, job.first), train)
    return rows


def _truncated(ensemble: Ensemble, rounds: int) -> Ensemble:
    if ensemble.n_rounds == rounds:
        return ensemble
    out = Ensemble(ensemble.n_features, ensemble.n_outputs, ensemble.base_score)
    out._trees = ensemble._trees[: rounds * ensemble.n_outputs]
    return out


class _Pool:
    """Pool slots of the nodes that may split (the same bookkeeping in every task)."""

    def __init__(self, n_slots: int, n_nodes: int) -> None:
        self.n_slots = n_slots
        self.slot = np.full(n_nodes, -1, np.int64)
        self.reset()

    def reset(self) -> None:
        self.free = list(range(self.n_slots - 1, -1, -1))
        self.slot[:] = -1

    def take(self, node: int) -> int:
        self.slot[node] = s = self.free.pop()
        return s

    def release(self, nodes) -> None:
        for v in nodes:
            if self.slot[v] >= 0:
                self.free.append(int(self.slot[v]))
                self.slot[v] = -1


def boost_task(ps, parts: list, cfg: FitConfig, job: JobArgs) -> dict:
    """The task of a boosting job: rounds ``job.first .. job.last`` over the task's
    partitions (see the module docstring); every task runs the same steps.

    Returns
    -------
    dict
        ``rounds``: per round run ``(train loss sum, eval loss sum, steps, bytes pushed)``
        of this task; ``trees`` (task 0 only): per round the ``n_outputs`` trees
        (:meth:`LevelGrower.export`); ``bound``: the gradient bound of the next round;
        ``stopped``: whether early stopping ended the fit; ``best``: (loss, round).
    """
    obj = get_objective(cfg.objective, cfg.n_classes)
    T = obj.n_outputs
    L = cfg.layout
    mapper = cfg.mapper
    M = 2 * cfg.max_leaf_nodes - 1
    train = [_local(p, cfg, obj, job, True) for p in parts]
    evals = [_local(p, cfg, obj, job, False) for p in cfg.eval_refs.get(ps.task, [])]
    offsets = L.push_offsets(mapper.hist_offsets)
    width = L.n_shards * L.rows_pad
    buf = np.zeros(L.n_push * width * 3)
    tmp = np.zeros_like(buf) if len(train) > 1 else None
    pool = _Pool(L.n_pool, T * M)
    gbound, hbound = obj.bounds(np.zeros(0), np.zeros((T, 0))) if cfg.objective != \
        "regression" else (job.bound, 1.0)
    best_loss, best_round = job.best_loss, job.best_round
    no_splits = np.empty((0, N_SPLIT_COLS)), np.empty((0, mapper.n_cat_words), np.uint32)
    out = dict(rounds=[], trees=[] if ps.task == 0 else None, stopped=False)
    pending = None  # the last round's (eval loss sum, eval rows), pushed at the next root

    def exchange(build, step_kw, scalars=None) -> tuple:
        """Push the histograms of ``build`` (and ``scalars``), clock, query the shards."""
        n_build = len(build)
        h = buf[: n_build * width * 3].reshape(n_build, width, 3)
        for i, r in enumerate(train):
            target = h if i == 0 else tmp[: h.size].reshape(h.shape)
            if mapper.n_columns:
                _hist_into(r.bp, build, offsets, target)
            else:
                target.fill(0.0)
            if i:
                h += target
        keys = L.push_keys(n_build)
        vals = h.reshape(-1, L.ncols)
        if scalars is not None:
            sk, sv = L.scalar_keys_of(scalars)
            keys, vals = np.concatenate([keys, sk]), np.concatenate([vals, sv])
        ps.push(TABLE, keys, vals)
        ps.clock()
        got = ps.map_shards(TABLE, shard_step, Step(ps.job, ps.current_clock, rnd, n_build,
                                                    **step_kw))
        splits, split_cat = got[0][0].copy(), got[0][1].copy()
        for s, c, _ in got[1:]:
            merge_splits(splits, split_cat, s, c)
        return splits, split_cat, got[0][2], keys.nbytes + vals.nbytes

    for rnd in range(job.first, job.last + 1):
        gs = quantization_scale(cfg.n_train, gbound)
        hs = quantization_scale(cfg.n_train, hbound)
        in_bag = None
        totals = np.zeros((T, 3))
        local_bound = 0.0
        for r in train:
            if cfg.subsample < 1.0:
                in_bag = sample_rows(r.start + np.arange(r.bp.n_rows), cfg.subsample,
                                     (cfg.seed + 1) * 1_000_003 + rnd)
            local_bound = max(local_bound, obj.bounds(r.bp.y, r.bp.raw)[0]) \
                if cfg.objective == "regression" else 0.0
            totals += r.bp.gradients(gs, hs, in_bag)
        grower = LevelGrower(T, cfg.max_leaf_nodes, cfg.max_depth, cfg.min_samples_leaf,
                             cfg.min_child_weight, 1.0 / hs, mapper.n_cat_words,
                             cfg.split_share)
        roots = grower.roots()
        pool.reset()
        root_slots = np.array([pool.take(v) for v in roots], np.int64)
        scalars = np.zeros(L.n_scalar)
        scalars[: 3 * T] = totals.ravel()
        if pending is not None:
            scalars[3 * T: 3 * T + 2] = pending
        scalars[3 * T + 2 + ps.task] = local_bound
        units = dict(grad_unit=1.0 / gs, hess_unit=1.0 / hs)
        empty = np.zeros(0, np.int64)
        splits, split_cat, sc, nbytes = exchange(
            roots, dict(roots=root_slots, parent=empty, small_to=empty, large_to=empty,
                               slots=root_slots, totals=None, **units), scalars)
        grower.totals[roots] = sc[: 3 * T].reshape(T, 3)
        if cfg.objective == "regression":
            exact = float(sc[3 * T + 2: 3 * T + 2 + cfg.n_tasks].max())
        if pending is not None and cfg.early_stopping_rounds is not None:
            loss = sc[3 * T] / max(sc[3 * T + 1], 1.0)
            if loss < best_loss:
                best_loss, best_round = loss, rnd - 1
            elif rnd - 1 - best_round >= cfg.early_stopping_rounds:
                out["stopped"] = True
                break
        steps = 0
        nodes = roots
        while True:
            pool.release(nodes[splits[:, SPLIT_COLUMN] < 0])  # evaluated, cannot split
            plan = grower.level(nodes, splits, split_cat)
            if not plan.split_node.size:
                break
            steps += 1
            for r in train:
                r.bp.partition(plan.split_node, plan.left, plan.right, plan.splits,
                               plan.split_cat)
            paired = set(plan.parent.tolist())
            pool.release([v for v in plan.split_node.tolist() if v not in paired])
            nodes = plan.open_nodes
            if not nodes.size:
                splits, split_cat = no_splits
                continue
            parent = pool.slot[plan.parent].copy()
            small_to = np.full(parent.shape[0], -1, np.int64)
            large_to = np.full(parent.shape[0], -1, np.int64)
            for i in range(parent.shape[0]):  # the large child keeps its parent's slot
                p = int(plan.parent[i])
                pool.slot[p] = -1
                if plan.large_to[i] >= 0:
                    pool.slot[plan.large_to[i]] = large_to[i] = parent[i]
                    if plan.small_to[i] >= 0:
                        small_to[i] = pool.take(int(plan.small_to[i]))
                else:
                    pool.slot[plan.small_to[i]] = small_to[i] = parent[i]
            splits, split_cat, _, b = exchange(
                plan.build, dict(roots=None, parent=parent, small_to=small_to,
                                        large_to=large_to, slots=pool.slot[nodes].copy(),
                                        totals=grower.totals[nodes], **units))
            nbytes += b
        leaves, values, trees = [], [], []
        for t in range(T):
            ids = t * M + np.arange(grower.n_nodes[t])
            tot = grower.totals[ids]
            with np.errstate(divide="ignore", invalid="ignore"):
                v = -cfg.learning_rate * (tot[:, 0] / gs) / (tot[:, 1] / hs + cfg.reg_lambda)
            v = np.where(np.isfinite(v), v, 0.0)
            trees.append(grower.export(t, mapper, v))
            lv = grower.leaves(t)
            leaves.append(lv)
            values.append(v[lv - t * M])
        leaves, values = np.concatenate(leaves), np.concatenate(values)
        for r in train:
            r.bp.add_leaves(leaves, values)
            r.rounds = rnd + 1
        eval_sum, n_eval = 0.0, 0
        if evals:
            this = Ensemble(mapper.n_features, T, np.zeros(T))
            for t, tree in enumerate(trees):
                this.add(tree, t)
            for e in evals:
                if e.X.shape[0]:
                    this.predict_raw(e.X, out=e.raw)
                    eval_sum += obj.loss(e.y, e.raw) * e.X.shape[0]
                    n_eval += e.X.shape[0]
                e.rounds = rnd + 1
        pending = (eval_sum, n_eval)
        if cfg.objective == "regression":
            gbound = exact + float(np.abs(values).max(initial=0.0))
        out["rounds"].append((sum(r.bp.loss_sum() for r in train), eval_sum, n_eval, steps,
                              nbytes))
        if out["trees"] is not None:
            out["trees"].append(trees)
    out["bound"] = gbound
    out["best"] = (best_loss, best_round)
    return out


def _hist_into(bp: BinnedPartition, build, offsets, out) -> None:
    """The histograms of ``build`` over ``bp``'s rows, laid out as a push buffer."""
    from ._gbdt_kernels import build_hist_csr, build_hist_dense

    nodes = np.ascontiguousarray(build, dtype=np.int64)
    common = (bp.rows, bp.node_start, bp.node_count, bp.nodes_per_tree, nodes, bp.grad,
              bp.hess, offsets, out)
    if bp.sparse:
        indptr, columns, bins = bp.binned
        build_hist_csr(indptr, columns, bins, bp.mapper.zero_bin, *common)
    else:
        build_hist_dense(bp.binned, *common)


def early_stop(losses: list[float], rounds: int | None) -> tuple[float, int, bool]:
    """``(best loss, its round, stop)`` after the eval losses of rounds ``0 ..``."""
    best, best_round = math.inf, -1
    for i, loss in enumerate(losses):
        if loss < best:
            best, best_round = loss, i
        elif rounds is not None and i - best_round >= rounds:
            return best, best_round, True
    return best, best_round, False
