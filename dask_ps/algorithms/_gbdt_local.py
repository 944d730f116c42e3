"""Single-process reference booster: the PS GBDT's algorithm with the network taken out.

:func:`boost_local` runs exactly the steps the parameter-server version distributes, with
the same kernels, so the two give the same trees:

* **bins** — each partition sketches its rows (:func:`partition_sketch`); the driver merges
  the sketches and makes the :class:`BinMapper`; every partition bins its rows once.
* **per round** — workers compute quantized gradients; the driver fixes the quantization
  scales from the objective's bounds (a max over partitions).
* **per step** (a tree level, with the default ``split_share=1``) — workers build the
  histograms of the nodes to build (the roots, then the smaller child of each split) and
  the sums go to the shards (here: added up in a loop); each shard keeps a pool of the
  histograms of the nodes that may split, indexed by node id, expands siblings into it
  (``parent - smaller``) and finds the best split of each new node over its columns
  (:func:`level_splits`); the driver merges the shards' answers and picks the splits
  within the leaf budget (:class:`LevelGrower`); workers move their rows.
* **per tree** — leaf values ``-G / (H + λ)`` times the learning rate; workers add them to
  their rows' scores.

``n_partitions`` and ``n_shards`` split rows and histogram columns as a cluster would; the
result does not depend on them (quantized sums are exact, ties are broken by column then
bin), which the tests check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ._gbdt_bins import BinMapper, bin_mapper
from ._gbdt_ensemble import Ensemble
from ._gbdt_kernels import quantization_scale
from ._gbdt_objectives import Objective, get_objective
from ._gbdt_siblings import expand_siblings
from ._gbdt_sketch import DEFAULT_SAMPLE_COUNT, BinSketch, kernel_array, sample_rate
from ._gbdt_splits import N_SPLIT_COLS, find_splits, merge_splits, split_params
from ._gbdt_tree import LevelGrower, leaf_budget, resolve_split_share
from ._gbdt_worker import BinnedPartition, partition_sketch


def level_splits(hist, mapper: BinMapper, totals, params, grad_unit, hess_unit, c_lo=0,
                 c_hi=None, row0=0, slots=None):
    """Best split per node over columns ``c_lo:c_hi`` — the server-side function.

    Parameters
    ----------
    hist : float64 array (n_slots, R, 3)
        Summed histograms (node-major), holding at least the rows of the columns;
        ``hist[:, 0]`` is histogram row ``row0``. A shard passes its own rows and
        ``row0 = mapper.hist_offsets[c_lo]``.
    mapper : BinMapper
    totals : float64 array (n_nodes, 3)
        Quantized (grad, hess, count) of the nodes.
    params : float64 array
        :func:`split_params`.
    grad_unit, hess_unit : float
        ``1 / scale`` of the round's quantization.
    c_lo, c_hi : int
        The shard's columns (default: all).
    row0 : int
    slots : int64 array (n_nodes,), optional
        The nodes' histograms, ``hist[slots]`` (default: all of ``hist``, in order).

    Returns
    -------
    splits : float64 array (n_nodes, N_SPLIT_COLS)
    split_cat : uint32 array (n_nodes, mapper.n_cat_words)
    """
    c_hi = mapper.n_columns if c_hi is None else c_hi
    n = totals.shape[0]
    slots = np.arange(n, dtype=np.int64) if slots is None else \
        np.ascontiguousarray(slots, dtype=np.int64)
    splits = np.empty((n, N_SPLIT_COLS))
    split_cat = np.empty((n, mapper.n_cat_words), np.uint32)
    find_splits(np.ascontiguousarray(hist), slots, int(row0), int(c_lo), int(c_hi),
                mapper.hist_offsets, mapper.n_bins, mapper.is_categorical,
                np.ones(mapper.n_columns, np.uint8),
                np.ascontiguousarray(totals), params, float(grad_unit), float(hess_unit),
                splits, split_cat)
    return splits, split_cat


def sharded_splits(hist, mapper, bounds, totals, params, grad_unit, hess_unit, slots=None):
    """:func:`level_splits` on every column range of ``bounds``, merged as the driver does."""
    best = None
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        s, c = level_splits(hist, mapper, totals, params, grad_unit, hess_unit, lo, hi,
                            slots=slots)
        if best is None:
            best = (s, c)
        else:
            merge_splits(best[0], best[1], s, c)
    return best


@dataclass
class LocalBoost:
    """What :func:`boost_local` returns.

    Attributes
    ----------
    ensemble : Ensemble
    mapper : BinMapper
    objective : Objective
    history : list of dict
        Per round: ``round``, ``steps`` (steps that split nodes: levels with
        ``split_share=1``; on the PS, one histogram push and split query each), ``time``
        (seconds since the start of the fit), ``train_loss`` and, with an eval set,
        ``eval_loss`` (log-loss, multiclass log-loss or squared error).
    best_round : int or None
        With early stopping, the round kept last (0-based).
    timings : dict
        Seconds spent in ``bins``, ``gradients``, ``histograms``, ``splits``, ``partition``,
        ``leaves``, ``eval``.
    """

    ensemble: Ensemble
    mapper: BinMapper
    objective: Objective
    history: list = field(default_factory=list)
    best_round: int | None = None
    timings: dict = field(default_factory=dict)

    def predict_raw(self, X) -> np.ndarray:
        return self.ensemble.predict_raw(X)

    def predict(self, X) -> np.ndarray:
        """Probabilities (binary: (n,), multiclass: (n, K)) or values (regression)."""
        return self.objective.transform(self.ensemble.predict_raw(X))


def _row_blocks(n, n_partitions):
    bounds = np.linspace(0, n, n_partitions + 1).round().astype(np.int64)
    return list(zip(bounds[:-1], bounds[1:]))


def boost_local(X, y, *, objective="binary", n_classes=None, n_estimators=100,
                learning_rate=0.1, max_leaf_nodes=31, max_depth=None, min_child_weight=1e-3,
                min_samples_leaf=20, reg_lambda=0.0, min_split_gain=0.0, max_bins=255,
                categorical_features=None, max_cat_to_onehot=4, max_cat_threshold=32,
                cat_smooth=10.0, cat_l2=10.0, min_data_per_group=100, eval_set=None,
                early_stopping_rounds=None, split_share=1.0, n_partitions=1, n_shards=1,
                sample_count=DEFAULT_SAMPLE_COUNT, random_state=0) -> LocalBoost:
    """Gradient-boosted trees grown level-wise with a leaf budget, in one process.

    Histogram GBDT (LightGBM: Ke et al., NeurIPS 2017; XGBoost ``hist``: Chen & Guestrin,
    KDD 2016) in the parameter-server form of DimBoost (Jiang et al., SIGMOD 2018): all open
    nodes of a level are evaluated together, histograms of the smaller children are built
    and the larger ones subtracted, splits are found per column range. Parameter names and
    defaults follow LightGBM (``max_leaf_nodes`` is ``num_leaves``, ``min_samples_leaf``
    ``min_data_in_leaf``, ``min_child_weight`` ``min_sum_hessian_in_leaf``).

    Parameters
    ----------
    X : float array (n, d) or scipy.sparse matrix (n, d)
        NaN is a missing value (it learns a default direction); sparse input stores zeros
        implicitly (zero is a value, not missing).
    y : array (n,)
        0/1 (binary), class index 0..K-1 (multiclass), real (regression).
    objective : {"binary", "multiclass", "regression"}
    n_classes : int, required for "multiclass"
    n_estimators : int, default 100
        Boosting rounds (a multiclass round grows one tree per class).
    learning_rate : float, default 0.1
    max_leaf_nodes : int, default 31
        Leaves per tree; a level that would exceed it splits its best nodes first.
    max_depth : int or None
    min_child_weight : float, default 1e-3
    min_samples_leaf : int, default 20
    reg_lambda : float, default 0
    min_split_gain : float, default 0
    max_bins : int, default 255
    categorical_features : bool mask or int indices, optional
        Columns of non-negative integer categories (LightGBM conventions; see
        :func:`find_splits` and the ``max_cat_*``, ``cat_*``, ``min_data_per_group``
        parameters, LightGBM's defaults).
    eval_set : (X_eval, y_eval), optional
        Scored every round (``history``); with ``early_stopping_rounds`` the fit stops when
        the eval loss has not improved for that many rounds and keeps the best round.
    split_share : float in (0, 1] or "auto", default 1
        Share of a tree's remaining leaf budget one step may spend (best gains first):
        1 grows level by level; less grows best-first in batches, closer to LightGBM's
        leaf-wise trees, in more steps (:class:`LevelGrower`); "auto" picks by the number
        of rows (:func:`resolve_split_share`).
    n_partitions, n_shards : int, default 1
        Row partitions and histogram column ranges, as on a cluster (same result).
    sample_count : int, default 200,000
        Rows sampled for the bins.
    random_state : int, default 0
        Seed of the bin sample.

    Returns
    -------
    LocalBoost

    Raises
    ------
    ValueError
        Bad parameter values, labels (single class, outside the classes, not finite), shapes.
    """
    t_start = time.perf_counter()
    obj = get_objective(objective, n_classes)
    for name, value, lo in (("n_estimators", n_estimators, 1), ("max_leaf_nodes",
                            max_leaf_nodes, 2), ("n_partitions", n_partitions, 1),
                            ("n_shards", n_shards, 1)):
        if int(value) != value or value < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be > 0, got {learning_rate!r}")
    if early_stopping_rounds is not None and eval_set is None:
        raise ValueError("early_stopping_rounds needs an eval_set")
    if max_depth is not None and max_depth < 1:
        raise ValueError(f"max_depth must be >= 1 or None, got {max_depth!r}")
    for name, value in (("reg_lambda", reg_lambda), ("min_child_weight", min_child_weight),
                        ("min_samples_leaf", min_samples_leaf),
                        ("min_split_gain", min_split_gain)):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    if not sp.issparse(X):
        X = kernel_array(X)  # the bin kernels take writable arrays
    if X.ndim != 2:
        raise ValueError(f"X must be 2-d, got shape {X.shape}")
    y = obj.check_y(y)
    n, d = X.shape
    if y.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
    if n == 0:
        raise ValueError("X has no rows")
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    split_share = resolve_split_share(split_share, n)
    max_leaf_nodes = leaf_budget(max_leaf_nodes, n, min_samples_leaf, max_depth)
    base = obj.base_score(y)
    timings = dict.fromkeys(("bins", "gradients", "histograms", "splits", "partition",
                             "leaves", "eval"), 0.0)

    # -- bins: sketch per partition, merge, bin each partition once
    t0 = time.perf_counter()
    blocks = _row_blocks(n, n_partitions)
    rate = sample_rate(n, sample_count)
    sk = BinSketch.merge(partition_sketch(X[a:b], a, rate, random_state) for a, b in blocks)
    mapper = bin_mapper(sk, max_bins, categorical_features, min_samples_leaf * rate)
    M = 2 * max_leaf_nodes - 1
    parts = [BinnedPartition(X[a:b], y[a:b], mapper, obj, base, M) for a, b in blocks]
    bounds = mapper.column_bounds(n_shards)
    params = split_params(reg_lambda, min_child_weight, min_samples_leaf, min_split_gain,
                          max_cat_to_onehot, max_cat_threshold, cat_smooth, cat_l2,
                          min_data_per_group)
    timings["bins"] = time.perf_counter() - t0

    ensemble = Ensemble(d, obj.n_outputs, base)
    result = LocalBoost(ensemble, mapper, obj, timings=timings)
    if eval_set is not None:
        X_eval, y_eval = eval_set
        y_eval = obj.check_y(y_eval)
        eval_raw = ensemble.predict_raw(X_eval)
    best_loss, best_round = np.inf, None
    T = obj.n_outputs
    # histograms of the nodes that may split, by node id (on the PS: each shard's rows)
    pool = np.empty((T * M, mapper.n_hist_rows, 3))
    built = _Buffer()  # the children built from rows in a step (the merged push)
    no_splits = np.empty((0, N_SPLIT_COLS)), np.empty((0, mapper.n_cat_words), np.uint32)
    floor = None  # the gain at which the last tree stopped (LevelGrower)
    for rnd in range(n_estimators):
        t0 = time.perf_counter()
        gb, hb = np.max([p.bounds() for p in parts], axis=0)
        gs, hs = quantization_scale(n, gb), quantization_scale(n, hb, hessian=True)
        totals = np.sum([p.gradients(gs, hs) for p in parts], axis=0)
        timings["gradients"] += time.perf_counter() - t0
        grower = LevelGrower(T, max_leaf_nodes, max_depth, min_samples_leaf, min_child_weight,
                             1.0 / hs, mapper.n_cat_words, split_share, floor)
        roots = grower.roots()
        grower.totals[roots] = totals
        nodes = roots[grower.splittable(roots)]
        if nodes.size:
            pool[nodes] = _summed(parts, nodes, timings, built)
        steps = 0
        while True:
            t0 = time.perf_counter()
            splits, split_cat = sharded_splits(pool, mapper, bounds, grower.totals[nodes],
                                               params, 1.0 / gs, 1.0 / hs, nodes) \
                if nodes.size else no_splits
            plan = grower.level(nodes, splits, split_cat)
            timings["splits"] += time.perf_counter() - t0
            if not plan.split_node.size:
                break
            steps += 1
            t0 = time.perf_counter()
            for p in parts:
                p.partition(plan.split_node, plan.left, plan.right, plan.splits,
                            plan.split_cat)
            timings["partition"] += time.perf_counter() - t0
            nodes = plan.open_nodes
            if plan.build.size:
                small = _summed(parts, plan.build, timings, built)
                t0 = time.perf_counter()
                expand_siblings(pool, plan.parent, small, plan.small_to, plan.large_to, pool)
                timings["histograms"] += time.perf_counter() - t0

        floor = grower.frontier_gain()
        t0 = time.perf_counter()
        leaves, values = [], []
        for t in range(T):
            ids = t * M + np.arange(grower.n_nodes[t])
            tot = grower.totals[ids]
            v = -learning_rate * (tot[:, 0] / gs) / (tot[:, 1] / hs + reg_lambda)
            v = np.where(np.isfinite(v), v, 0.0)
            ensemble.add(grower.export(t, mapper, v), t)
            lv = grower.leaves(t)
            leaves.append(lv)
            values.append(v[lv - t * M])
        leaves, values = np.concatenate(leaves), np.concatenate(values)
        for p in parts:
            p.add_leaves(leaves, values)
        timings["leaves"] += time.perf_counter() - t0

        t0 = time.perf_counter()
        rec = dict(round=rnd, steps=steps, train_loss=sum(p.loss_sum() for p in parts) / n)
        stop = False
        if eval_set is not None:
            ensemble.predict_raw(X_eval, out=eval_raw, rounds=(rnd, rnd + 1))
            rec["eval_loss"] = loss = obj.loss(y_eval, eval_raw)
            if loss < best_loss:
                best_loss, best_round = loss, rnd
            elif early_stopping_rounds is not None and rnd - best_round >= \
                    early_stopping_rounds:
                stop = True
        timings["eval"] += time.perf_counter() - t0
        rec["time"] = time.perf_counter() - t_start
        result.history.append(rec)
        if stop:
            break
    if early_stopping_rounds is not None and best_round is not None:
        ensemble.truncate(best_round + 1)
        result.best_round = best_round
    return result


class _Buffer:
    """Reused memory for a step's built histograms: fresh multi-MB arrays every step would
    cost more in page faults than the kernels that fill them."""

    def __init__(self):
        self.flat = np.empty(0)

    def view(self, nodes, rows):
        size = rows * nodes * 3
        if self.flat.shape[0] < size:
            self.flat = np.empty(size)
        return self.flat[:size].reshape(nodes, rows, 3)


def _summed(parts, nodes, timings, buffer):
    """The histograms of ``nodes`` summed over partitions (the merged push)."""
    t0 = time.perf_counter()
    hist = parts[0].histograms(nodes, buffer.view(len(nodes), parts[0].mapper.n_hist_rows))
    for p in parts[1:]:
        hist += p.histograms(nodes)
    timings["histograms"] += time.perf_counter() - t0
    return hist
