"""GBDT on the parameter server: histograms summed and split on the shards, a whole fit in one
job (DimBoost, Jiang et al., SIGMOD 2018; Angel's GBDT).

One table, ``"hist"`` (float64, update rule :class:`StepRule`: add, then run a step), holds
per shard a contiguous block of keys (:class:`HistLayout`): the *push area* (a slot per node
whose histogram the workers build in a step), the *pool* (a slot per node that may still
split), a few *scalars*, the step's *instructions* and the step's *answer*. A slot holds the
shard's histogram rows — the rows of its columns, a feature range — of one node, node-major,
one histogram row (3 sums) per key, so that a push carries only the rows holding data.

Every worker task runs the whole boosting loop; every step of a tree is

1. **the push**: each task builds the histograms of the step's nodes over its rows (the
   smaller child of each split; the roots first; its dense partitions kept as one set of
   rows, written straight as the push, sparse ones summed in a buffer), and pushes the
   rows of them that hold data (:meth:`HistLayout.fill_push`; deep nodes have few rows per bin:
   on LightGBM's example a third of the bytes of whole histograms), one merged push per
   shard; at a root step the scalars ride along (each task's root totals, loss sums and
   gradient bound); task 0 adds the step's instructions (:class:`Step`,
   :func:`encode_step`) to every shard, every task its arrival; the shards add the tasks'
   pushes one by one (exact sums, no merge of their keys) and run the step once all have
   arrived;
2. **the answer**: the push, the clock and a pull of the answer rows in one message per
   shard (``ps.push_pull``). When the BSP clock completes on a shard, the summed push is
   applied and the update rule runs the step there (:func:`shard_step`): siblings expanded
   into the pool (``parent - smaller``, the push area cleared on the way:
   :func:`~._gbdt_siblings.take_pushed`), the best split of every open node over the
   shard's columns written to the answer rows, which the waiting pulls then read; only
   those candidates travel back;
3. **the plan**: every task merges the shards' candidates (the same in every task) and runs
   the same :class:`~._gbdt_tree.LevelGrower`, so all decide the same splits, pool slots and
   next step without a word from the driver; each moves its rows.

So a step is one round trip per shard (before: a push, then a ``map_shards`` query through
the shards' event loops and thread pools: two), and the driver is not involved until the
job ends. Trees, losses and bytes come back as the tasks' results. Histograms hold
quantized gradients (exact float64 sums, see :mod:`._gbdt_kernels`): trees do not depend
on the number of workers, partitions or shards. The shards' side is :mod:`._gbdt_shard`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from time import perf_counter, process_time

import numpy as np
import scipy.sparse as sp

from ._gbdt_bins import BinMapper
from ._gbdt_data import labels as labels_of
from ._gbdt_data import to_matrix
from ._gbdt_ensemble import Ensemble
from ._gbdt_kernels import gather_nodes, hist_rows_dense, nonzero_rows, quantization_scale
from ._gbdt_objectives import get_objective
from ._gbdt_shard import TABLE, HistLayout, Step, encode_step, read_answers
from ._gbdt_sketch import sample_rows
from ._gbdt_splits import N_SPLIT_COLS, SPLIT_COLUMN
from ._gbdt_tree import LevelGrower
from ._gbdt_worker import BinnedPartition

__all__ = ["FitConfig", "JobArgs", "boost_task", "early_stop"]


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
    # the largest sample weight (the partitions are then (X, y, w)): it scales the
    # quantization bounds; 1.0 unweighted
    w_max: float = 1.0


@dataclass
class JobArgs:
    """What changes from one job of a fit to the next."""

    first: int  # rounds first .. last (0-based, inclusive)
    last: int
    ensemble: Ensemble  # the trees so far (a task that lost its state rebuilds from them)
    bound: float  # gradient bound of round ``first`` (regression; else unused)
    best_loss: float
    best_round: int
    n_tasks: int = 1  # tasks of the job (each step's push of every one is awaited)
    gain_floor: np.ndarray | None = None  # of round ``first`` (LevelGrower; None: none)


class _Rows:
    """A task's rows of one partition (kept in ``part.state`` between jobs), or of all its
    dense partitions as one set of rows (kept in the first one's): one histogram pass and
    one push per step, written straight from the rows (:func:`_hist_rows`)."""

    def __init__(self, values: list, starts: list, cfg: FitConfig, obj, ensemble: Ensemble,
                 train: bool, matrices: bool = False) -> None:
        Xs = [v[0] if matrices else to_matrix(v[0], cfg.categories) for v in values]
        ys = [_encode(labels_of(v[1]), cfg, s if train else None)
              for v, s in zip(values, starts)]
        # global row ids (row subsampling draws by id, whatever partition holds the row)
        ids = [s + np.arange(x.shape[0], dtype=np.int64) for x, s in zip(Xs, starts)]
        w = None
        if len(values[0]) > 2:  # sample weights (checked by the survey)
            ws = [np.asarray(labels_of(v[2]), np.float64) for v in values]
            if train:  # a row of weight 0 is no row: not in a count, sum or loss
                pos = [x > 0 for x in ws]
                Xs, ys, ids, ws = ([a if m.all() else a[m] for a, m in zip(arrays, pos)]
                                   for arrays in (Xs, ys, ids, ws))
            w = np.concatenate(ws) if len(ws) > 1 else ws[0]
        y = np.concatenate(ys) if len(ys) > 1 else ys[0]
        self.ids = np.concatenate(ids)
        raw = None
        if ensemble.n_trees:
            raw = [ensemble.predict_raw(x) for x in Xs]
            raw = np.concatenate(raw, axis=1) if len(raw) > 1 else raw[0]
        if train:
            M = 2 * cfg.max_leaf_nodes - 1
            self.bp = BinnedPartition(Xs if len(Xs) > 1 else Xs[0], y, cfg.mapper, obj,
                                      cfg.base_score, M, w)
            if raw is not None:
                self.bp.raw[:] = raw
        else:
            X = Xs[0]
            self.X, self.y, self.w = X, y, w
            self.raw = raw if raw is not None else np.repeat(
                np.asarray(cfg.base_score, np.float64)[:, None], X.shape[0], axis=1)
        self.rounds = ensemble.n_rounds


def _encode(y, cfg: FitConfig, start: int | None) -> np.ndarray:
    # labels were checked before the first tree (_gbdt_data.checked_labels, the training
    # set's in the survey, eval_set's in train()): here they are only encoded
    if cfg.classes is None:
        return np.array(y, np.float64)  # a writable copy (the kernels' signatures)
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
        rows = st[cfg.token] = _Rows([part.load()], [start], cfg, obj,
                                     _truncated(job.ensemble, job.first), train)
    return rows


def _train_rows(parts: list, cfg: FitConfig, obj, job: JobArgs) -> list[_Rows]:
    """The task's training rows: its dense partitions as one :class:`_Rows` (kept in the
    first partition's state, under the task's partition indices), sparse ones one each.
    The trees do not change (the histograms are exact sums in any grouping of rows)."""
    if len(parts) < 2:
        return [_local(p, cfg, obj, job, True) for p in parts]
    st = parts[0].state
    key = (cfg.token, tuple(p.index for p in parts))
    rows = st.get(key)
    if rows is not None and rows.rounds == job.first:
        return [rows]
    values = [(to_matrix(v[0], cfg.categories), *v[1:]) for v in (p.load() for p in parts)]
    if any(sp.issparse(v[0]) for v in values):
        return [_local(p, cfg, obj, job, True) for p in parts]
    rows = _Rows(values, [int(cfg.starts[p.index]) for p in parts], cfg, obj,
                 _truncated(job.ensemble, job.first), True, matrices=True)
    st[key] = rows
    return [rows]


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
        nodes = np.asarray(nodes, np.int64)
        held = nodes[self.slot[nodes] >= 0]
        self.free.extend(self.slot[held].tolist())
        self.slot[held] = -1

    def children(self, plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pool slots of a step's splits: ``(parent, small_to, large_to)`` per pair of
        :class:`~._gbdt_tree.LevelPlan` (-1: not kept). The split nodes without a pair give
        their slots back first; the kept larger child takes its parent's slot (the sibling
        subtraction runs in place), the smaller one a free slot, or its parent's when the
        larger one is not kept."""
        parent = self.slot[plan.parent]
        self.slot[plan.parent] = -1
        self.release(plan.split_node)  # the others
        large = plan.large_to >= 0
        large_to = np.where(large, parent, -1)
        small_to = np.where(large, -1, parent)
        fresh = large & (plan.small_to >= 0)
        k = int(fresh.sum())
        if k:  # taken in pair order, as take() would
            small_to[fresh] = self.free[: -k - 1: -1]
            del self.free[-k:]
        self.slot[plan.large_to[large]] = parent[large]
        kept = small_to >= 0
        self.slot[plan.small_to[kept]] = small_to[kept]
        return parent, small_to, large_to


def boost_task(ps, parts: list, cfg: FitConfig, job: JobArgs) -> dict:
    """The task of a boosting job: rounds ``job.first .. job.last`` over the task's
    partitions (see the module docstring); every task runs the same steps.

    Returns
    -------
    dict
        ``rounds``: per round run ``(train loss sum, eval loss sum, steps, bytes pushed)``
        of this task; ``trees`` (task 0 only): per round the ``n_outputs`` trees
        (:meth:`LevelGrower.export`); ``bound``, ``gain_floor``: the gradient bound and the
        gain floor of the next round;
        ``stopped``: whether early stopping ended the fit; ``best``: (loss, round).
    """
    obj = get_objective(cfg.objective, cfg.n_classes)
    T = obj.n_outputs
    L = cfg.layout
    mapper = cfg.mapper
    M = 2 * cfg.max_leaf_nodes - 1
    train = _train_rows(parts, cfg, obj, job)
    evals = [_local(p, cfg, obj, job, False) for p in cfg.eval_refs.get(ps.task, [])]
    offsets = L.push_offsets(mapper.hist_offsets)
    width = L.n_shards * L.rows_pad
    # the histograms of the built nodes (summed over the task's partitions), then the push:
    # their rows holding data, the scalars' and the instructions' rows
    # one dense partition: its histograms written straight as the push (no buffer)
    fused = len(train) == 1 and not train[0].bp.sparse and mapper.n_columns > 0
    n_hist = 0 if fused else L.n_push * width * 3
    buf = np.zeros(n_hist)
    tmp = np.zeros(n_hist) if len(train) > 1 else None
    push_keys = np.empty(L.push_size, np.int64)
    push_vals = np.empty((L.push_size, L.ncols))
    answer_keys: dict = {}
    pool = _Pool(L.n_pool, T * M)
    gbound, hbound = obj.bounds(np.zeros(0), np.zeros((T, 0))) if cfg.objective != \
        "regression" else (job.bound, 1.0)
    # weighted rows: the bounds are of the gradients of weight w_max (1.0 unweighted)
    w_max = cfg.w_max
    best_loss, best_round = job.best_loss, job.best_round
    floor = job.gain_floor
    no_splits = np.empty((0, N_SPLIT_COLS)), np.empty((0, mapper.n_cat_words), np.uint32)
    out = dict(rounds=[], trees=[] if ps.task == 0 else None, stopped=False)
    clk = dict.fromkeys(("hist", "push", "query", "partition", "grow", "rest"), 0.0)
    t_start = perf_counter()
    cpu_start = process_time()
    pending = None  # the last round's (eval loss sum, eval rows), pushed at the next root

    def seq(rnd: int, step: int) -> int:
        """A step's number in the fit (the same in every task and job)."""
        return rnd * (2 * cfg.max_leaf_nodes + 2) + step + 1

    def exchange(build, step: Step, scalars=None) -> tuple:
        """Push the histograms of ``build`` (and ``scalars``; task 0: the step's
        instructions), clock, and pull the shards' answers: one round trip."""
        t0 = perf_counter()
        n_build = len(build)
        built = [0.0]  # the fused path: seconds building histograms while writing the push
        if fused:
            bp = train[0].bp  # its rows gathered once for every shard's columns
            gathered = gather_nodes(bp.rows, bp.node_start, bp.node_count, bp.nodes_per_tree,
                                    np.ascontiguousarray(build, dtype=np.int64), bp.grad,
                                    bp.hess)
            rows_of = functools.partial(_timed_hist_rows, built, bp, gathered, L)
        else:
            h = buf[: n_build * width * 3].reshape(n_build, width, 3)
            for i, r in enumerate(train):
                target = h if i == 0 else tmp[: h.size].reshape(h.shape)
                if mapper.n_columns:
                    _hist_into(r.bp, build, offsets, target)
                else:
                    target.fill(0.0)
                if i:
                    h += target
            rows_of = functools.partial(nonzero_rows, h, L.rows_pad)
        t1 = perf_counter()
        # every task pushes the instruction rows: task 0 the step, the others only their
        # arrival (the shards run the step once every task's push is in)
        instr = encode_step(step)
        if ps.task != 0:
            instr[1:] = 0.0
        m = L.fill_push(rows_of, scalars, instr, push_keys, push_vals)
        keys, vals = push_keys[:m], push_vals[:m]
        n = step.slots.shape[0]
        want = answer_keys.get((n, scalars is not None))
        if want is None:
            want = answer_keys[n, scalars is not None] = L.answer_keys(n, scalars is not None)
        t2 = perf_counter()
        # the push is ours (fill_push: keys ascending, values exact finite sums), and so
        # are the answer's keys: neither is validated nor planned again
        got = ps.push_pull(TABLE, keys, vals, want, checked=True)
        splits, split_cat, sc = read_answers(got, L, n, scalars is not None, step.seq)
        t3 = perf_counter()
        clk["hist"] += t1 - t0 + built[0]
        clk["push"] += t2 - t1 - built[0]
        clk["query"] += t3 - t2
        return splits, split_cat, sc, keys.nbytes + vals.nbytes

    for rnd in range(job.first, job.last + 1):
        gs = quantization_scale(cfg.n_train, gbound * w_max)
        hs = quantization_scale(cfg.n_train, hbound * w_max, hessian=True)
        in_bag = None
        totals = np.zeros((T, 3))
        local_bound = 0.0
        for r in train:
            if cfg.subsample < 1.0:
                in_bag = sample_rows(r.ids, cfg.subsample,
                                     (cfg.seed + 1) * 1_000_003 + rnd)
            local_bound = max(local_bound, obj.bounds(r.bp.y, r.bp.raw, r.bp.w)[0] / w_max) \
                if cfg.objective == "regression" else 0.0
            totals += r.bp.gradients(gs, hs, in_bag)
        grower = LevelGrower(T, cfg.max_leaf_nodes, cfg.max_depth, cfg.min_samples_leaf,
                             cfg.min_child_weight, 1.0 / hs, mapper.n_cat_words,
                             cfg.split_share, floor)
        roots = grower.roots()
        pool.reset()
        root_slots = np.array([pool.take(v) for v in roots], np.int64)
        scalars = np.zeros(L.n_scalar)
        scalars[: 3 * T] = totals.ravel()
        if pending is not None:
            scalars[3 * T: 3 * T + 2] = pending
        scalars[3 * T + 2 + ps.task] = local_bound
        units = dict(grad_unit=1.0 / gs, hess_unit=1.0 / hs, n_tasks=job.n_tasks)
        empty = np.zeros(0, np.int64)
        splits, split_cat, sc, nbytes = exchange(
            roots, Step(seq(rnd, 0), rnd, len(roots), root_slots, empty, empty, empty,
                        root_slots, None, **units), scalars)
        grower.totals[roots] = sc[: 3 * T].reshape(T, 3)
        if cfg.objective == "regression":
            exact = float(sc[3 * T + 2: 3 * T + 2 + cfg.n_tasks].max())
        if pending is not None and cfg.early_stopping_rounds is not None:
            loss = sc[3 * T] / (sc[3 * T + 1] if sc[3 * T + 1] > 0 else 1.0)  # rows or weight
            if loss < best_loss:
                best_loss, best_round = loss, rnd - 1
            elif rnd - 1 - best_round >= cfg.early_stopping_rounds:
                out["stopped"] = True
                break
        steps = 0
        nodes = roots
        while True:
            pool.release(nodes[splits[:, SPLIT_COLUMN] < 0])  # evaluated, cannot split
            t0 = perf_counter()
            plan = grower.level(nodes, splits, split_cat)
            t1 = perf_counter()
            clk["grow"] += t1 - t0
            if not plan.split_node.size:
                break
            steps += 1
            for r in train:
                r.bp.partition(plan.split_node, plan.left, plan.right, plan.splits,
                               plan.split_cat)
            clk["partition"] += perf_counter() - t1
            parent, small_to, large_to = pool.children(plan)
            nodes = plan.open_nodes
            if not nodes.size:
                splits, split_cat = no_splits
                continue
            splits, split_cat, _, b = exchange(
                plan.build, Step(seq(rnd, steps), rnd, len(plan.build), None, parent,
                                 small_to, large_to, pool.slot[nodes].copy(),
                                 grower.totals[nodes], **units))
            nbytes += b
        floor = grower.frontier_gain()
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
                    eval_sum += obj.loss_sum(e.y, e.raw, e.w)
                    n_eval += e.X.shape[0] if e.w is None else float(e.w.sum())
                e.rounds = rnd + 1
        pending = (eval_sum, n_eval)
        if cfg.objective == "regression":
            gbound = exact + float(np.abs(values).max(initial=0.0))
        out["rounds"].append((sum(r.bp.loss_sum() for r in train), eval_sum, n_eval, steps,
                              nbytes))
        ps.report(epoch=rnd + 1, loss=out["rounds"][-1][0])  # the round shown as it ends
        if out["trees"] is not None:
            out["trees"].append(trees)
    out["bound"], out["gain_floor"] = gbound, floor
    clk["rest"] = perf_counter() - t_start - sum(clk.values())
    clk["process_cpu"] = process_time() - cpu_start
    out["timings"] = clk
    out["best"] = (best_loss, best_round)
    return out


def _hist_rows(bp: BinnedPartition, gathered: tuple, L: HistLayout, s: int, key0: int, keys,
               values, at: int) -> int:
    """Shard ``s``'s histogram rows holding data of the nodes gathered (``gathered``:
    :func:`~._gbdt_kernels.gather_nodes` over ``bp``'s dense rows), written as a push
    (:meth:`HistLayout.fill_push`)."""
    return hist_rows_dense(bp.binned, bp.binned_rows, *gathered, bp.mapper.hist_offsets,
                           int(L.bounds[s]), int(L.bounds[s + 1]), L.rows_pad, key0, keys,
                           values, at)


def _timed_hist_rows(built: list, *args) -> int:
    """:func:`_hist_rows`, its seconds added to ``built[0]`` (clocked as ``hist``, not as
    writing the push)."""
    t0 = perf_counter()
    at = _hist_rows(*args)
    built[0] += perf_counter() - t0
    return at


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
        build_hist_dense(bp.binned, bp.binned_rows, *common)


def early_stop(losses: list[float], rounds: int | None) -> tuple[float, int, bool]:
    """``(best loss, its round, stop)`` after the eval losses of rounds ``0 ..``."""
    best, best_round = math.inf, -1
    for i, loss in enumerate(losses):
        if loss < best:
            best, best_round = loss, i
        elif rounds is not None and i - best_round >= rounds:
            return best, best_round, True
    return best, best_round, False
