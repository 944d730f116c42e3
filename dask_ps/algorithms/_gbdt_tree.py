"""Growing the trees of histogram GBDT in steps with a leaf budget.

:class:`LevelGrower` is the driver's part of growing the trees of one boosting round — level
by level, or best-first in batches — the same in one process and on the PS: given the new
nodes' best splits (merged over shards) it picks the splits to apply within the leaf
budget, numbers the children, chooses per split the child to build from rows (the smaller
one; the other comes from sibling subtraction) and says which nodes are evaluated next. It
holds only per-node numbers. The grown trees go to :class:`._gbdt_ensemble.Ensemble` (flat
arrays and prediction).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ._gbdt_bins import BinMapper
from ._gbdt_splits import (
    N_SPLIT_COLS,
    SPLIT_BIN,
    SPLIT_COLUMN,
    SPLIT_DEFAULT_LEFT,
    SPLIT_GAIN,
    SPLIT_IS_CAT,
    SPLIT_LEFT,
    SPLIT_RIGHT,
)

_JIT = dict(cache=True, nogil=True)


#: ``split_share="auto"``: trees grow level by level (share 1) below this many training
#: rows, best-first with :data:`AUTO_SHARE` from it on (see :func:`resolve_split_share`).
AUTO_SHARE_ROWS = 100_000
AUTO_SHARE = 0.02
#: A gain left at the end of a tree at most this share of its best split's is rounding noise
#: of the gradient sums (1e-13 on a toy set), not a floor (:meth:`LevelGrower.frontier_gain`).
NOISE_GAIN = 1e-9


def resolve_split_share(split_share, n_rows: int) -> float:
    """The share a ``split_share`` parameter means for ``n_rows`` training rows.

    ``"auto"``: 1 (level-wise: the fewest steps, one synchronisation each, what small data
    needs, where latency dominates) below :data:`AUTO_SHARE_ROWS` rows; from there
    :data:`AUTO_SHARE` (best-first in batches with the gain floor of :class:`LevelGrower`,
    as accurate as LightGBM's leaf-wise trees). Measured (100 trees, 63 leaves, 255 bins, 2
    workers x 1 thread, ``benchmarks/gbdt_peers.py``): on ``make_classification(10^6 x
    100)`` (800k training rows) share 1 reaches test AUC 0.9481 in 6.1 steps per tree,
    24.5 s, 48 MB of histograms pushed per tree; 0.02 0.9609 in 22.9 steps, 35.9-38.9 s,
    96 MB (LightGBM 0.9613, 34.5-36.3 s); at 200k training rows share 1 0.9560 in 11.6 s,
    0.1 0.9649 in 19.7 s, 0.02 0.9655 in 19.6 s (LightGBM 0.9655). On LightGBM's example
    (7,000 rows) share 1 gives 0.8345 in 8.8 steps, 0.95 s; 0.02 0.8259 in 32.5, 1.42 s.
    A number is returned as it is.
    """
    if isinstance(split_share, str):
        if split_share != "auto":
            raise ValueError(f"split_share must be in (0, 1] or 'auto', got {split_share!r}")
        return 1.0 if n_rows < AUTO_SHARE_ROWS else AUTO_SHARE
    return float(split_share)


def leaf_budget(max_leaf_nodes: int, n_rows: int, min_samples_leaf: int, max_depth) -> int:
    """The leaves a tree may have: ``max_leaf_nodes``, but at most one per
    ``min_samples_leaf`` training rows and ``2 ** max_depth`` (at least 2). The node arrays
    of a fit are sized by it (``max_leaf_nodes=10**9`` on 1,000 rows asked for 17 TiB)."""
    cap = max(1, int(n_rows) // max(1, int(min_samples_leaf)))
    if max_depth is not None and max_depth < 62:
        cap = min(cap, 2 ** int(max_depth))
    return int(max(2, min(int(max_leaf_nodes), cap)))


class LevelPlan(NamedTuple):
    """One step's decisions (:meth:`LevelGrower.level`).

    Histograms live in a pool indexed by node id (:func:`~._gbdt_siblings.expand_siblings`
    writes children at their ids, :func:`find_splits` reads the ids it is given).

    Attributes
    ----------
    split_node, left, right : int64 arrays (k,)
        The nodes split in this step and their new children.
    splits : float64 array (k, N_SPLIT_COLS); split_cat : uint32 array (k, W)
        Their splits: what the workers apply (:meth:`BinnedPartition.partition`).
    build : int64 array (n_pairs,)
        Per split with a child that may split, the child whose histogram is built from
        rows (the one with fewer rows; needed for the subtraction even when it cannot split).
    parent : int64 array (n_pairs,)
        The split node of each pair (its histogram is in the pool).
    small_to, large_to : int64 arrays (n_pairs,)
        Node ids where the built and the subtracted child go in the pool, -1 when that
        child cannot split (not kept).
    open_nodes : int64 array
        The new nodes that may split, increasing: the next :func:`find_splits` call.
    """

    split_node: np.ndarray
    left: np.ndarray
    right: np.ndarray
    splits: np.ndarray
    split_cat: np.ndarray
    build: np.ndarray
    parent: np.ndarray
    small_to: np.ndarray
    large_to: np.ndarray
    open_nodes: np.ndarray


@numba.njit(**_JIT)
def _may_split(v, M, max_leaves, max_depth, min_count, min_hess, hess_unit, n_leaves, totals,
               depth):
    return (depth[v] < max_depth and n_leaves[v // M] < max_leaves
            and totals[v, 2] >= min_count and totals[v, 1] * hess_unit >= min_hess)


@numba.njit("Tuple((int64[::1], int64[::1], int64[::1], float64[:, ::1], uint32[:, ::1], "
            "int64[::1], int64[::1], int64[::1], int64[::1], int64[::1]))"
            "(int64[::1], float64[:, ::1], uint32[:, ::1], int64, int64, float64, float64, "
            "float64, float64, float64, int64[::1], int64[::1], uint8[::1], float64[:, ::1], "
            "uint32[:, ::1], int64[::1], int64[::1], float64[:, ::1], int64[::1], "
            "float64[::1])", **_JIT)
def _grow_level(nodes, splits, split_cat, M, max_leaves, share, max_depth, min_count,
                min_hess, hess_unit, n_nodes, n_leaves, is_cand, split_rec, cat_rec, left_rec,
                right_rec, totals, depth, floor):
    """:meth:`LevelGrower.level` in one pass (the driver's per-step work, on the PS's
    critical path)."""
    # the new evaluations join the candidates (unsplit nodes with a valid split)
    for j in range(nodes.shape[0]):
        v = nodes[j]
        split_rec[v, :] = splits[j, :]
        cat_rec[v, :] = split_cat[j, :]
        is_cand[v] = 1 if splits[j, SPLIT_COLUMN] >= 0 else 0
    cand = np.flatnonzero(is_cand).astype(np.int64)  # increasing ids
    n = cand.shape[0]
    # choose: by gain (descending), ties to the lower id; per tree a share of its budget
    neg = np.empty(n)
    for i in range(n):
        neg[i] = -split_rec[cand[i], SPLIT_GAIN]
    order = np.argsort(neg, kind="mergesort")
    n_trees = n_leaves.shape[0]
    above = np.zeros(n_trees, np.int64)
    for i in range(n):
        if -neg[i] >= floor[cand[i] // M]:
            above[cand[i] // M] += 1
    room = np.zeros(n_trees, np.int64)
    for t in range(n_trees):
        budget = max_leaves - n_leaves[t]
        if budget > 0:
            room[t] = min(budget, max(1, int(np.ceil(budget * share)), above[t]))
    pick = np.zeros(n, np.bool_)
    for j in range(n):
        t = cand[order[j]] // M
        if room[t] > 0:
            room[t] -= 1
            pick[order[j]] = True
    split_node = cand[pick]
    k = split_node.shape[0]
    left = np.empty(k, np.int64)
    right = np.empty(k, np.int64)
    applied = np.empty((k, split_rec.shape[1]))
    applied_cat = np.empty((k, cat_rec.shape[1]), np.uint32)
    small_left = np.empty(k, np.bool_)
    # apply: number the children in order of split node
    for j in range(k):
        v = split_node[j]
        t = v // M
        is_cand[v] = 0
        left[j] = t * M + n_nodes[t]
        right[j] = left[j] + 1
        n_nodes[t] += 2
        n_leaves[t] += 1
        applied[j, :] = split_rec[v, :]
        applied_cat[j, :] = cat_rec[v, :]
        left_rec[v] = left[j]
        right_rec[v] = right[j]
        for q in range(3):
            totals[left[j], q] = split_rec[v, SPLIT_LEFT + q]
            totals[right[j], q] = split_rec[v, SPLIT_RIGHT + q]
        depth[left[j]] = depth[v] + 1
        depth[right[j]] = depth[v] + 1
        small_left[j] = split_rec[v, SPLIT_LEFT + 2] <= split_rec[v, SPLIT_RIGHT + 2]
    # plan: the children that may split, the child built from rows
    build = np.empty(k, np.int64)
    parent = np.empty(k, np.int64)
    small_to = np.empty(k, np.int64)
    large_to = np.empty(k, np.int64)
    open_nodes = np.empty(2 * k, np.int64)
    n_pairs = 0
    n_open = 0
    for j in range(k):
        lo = _may_split(left[j], M, max_leaves, max_depth, min_count, min_hess, hess_unit,
                        n_leaves, totals, depth)
        ro = _may_split(right[j], M, max_leaves, max_depth, min_count, min_hess, hess_unit,
                        n_leaves, totals, depth)
        if not (lo or ro):
            continue
        if lo:
            open_nodes[n_open] = left[j]
            n_open += 1
        if ro:
            open_nodes[n_open] = right[j]
            n_open += 1
        parent[n_pairs] = split_node[j]
        small, large = (left[j], right[j]) if small_left[j] else (right[j], left[j])
        small_ok, large_ok = (lo, ro) if small_left[j] else (ro, lo)
        build[n_pairs] = small
        small_to[n_pairs] = small if small_ok else -1
        large_to[n_pairs] = large if large_ok else -1
        n_pairs += 1
    return (split_node, left, right, applied, applied_cat, build[:n_pairs].copy(),
            parent[:n_pairs].copy(), small_to[:n_pairs].copy(), large_to[:n_pairs].copy(),
            open_nodes[:n_open].copy())


class LevelGrower:
    """The driver's bookkeeping for ``n_trees`` trees grown together, step by step.

    Node ids of tree ``t`` are ``t * nodes_per_tree + (0 .. nodes_per_tree - 1)``; the root
    is the first. A step (:meth:`level`) takes the best splits of the nodes evaluated last,
    adds them to the candidates (unsplit nodes with a valid split), picks the splits to
    apply, records them, numbers the children and plans the next step.

    With ``split_share = 1`` a step splits every candidate within the leaf budget: growth
    level by level (DimBoost, XGBoost ``depthwise``), one step per level; where the budget
    runs out the highest gains win. With ``split_share < 1`` a step spends at most that
    share of each tree's remaining budget, best gains first, and unchosen candidates wait
    for later steps beside the new nodes: best-first growth in batches, between level-wise
    and LightGBM's leaf-wise growth (``split_share -> 0``: one split per step). A step also
    splits, within the budget, every candidate whose gain reaches ``gain_floor``: passed the
    gain at which the previous round's tree stopped (:meth:`frontier_gain`), the splits
    leaf-wise growth would make anyway go in one step, and the share rule decides only
    among the gains near the last ones. Measured (``boost_local``, 800k rows, 63 leaves):
    share 0.1 alone 26 steps per tree, test AUC 0.9600, with the floor 16.2, 0.9597; share
    0.02 alone 56 steps, 0.9611, with the floor 22.9, 0.9609 (LightGBM 0.9613).

    Parameters
    ----------
    n_trees : int
    max_leaf_nodes : int
        Leaf budget per tree (ties between equal gains: lower node id).
    max_depth : int or None
        Root depth 0; nodes at ``max_depth`` stay leaves.
    min_samples_leaf, min_child_weight : float
        A node with fewer than twice as many rows (or twice the hessian) cannot split; it
        is not evaluated.
    hess_unit : float
        ``1 / scale`` of the quantized hessians.
    n_cat_words : int
    split_share : float in (0, 1], default 1
    gain_floor : float64 array (n_trees,) or None, default None
        Per tree, the gain from which a candidate splits whatever the share (``None``: no
        floor). Gains are in the units of the split finder's (real gradients).
    """

    def __init__(self, n_trees, max_leaf_nodes, max_depth, min_samples_leaf, min_child_weight,
                 hess_unit, n_cat_words, split_share=1.0, gain_floor=None):
        if not 0 < split_share <= 1:
            raise ValueError(f"split_share must be in (0, 1], got {split_share!r}")
        self.n_trees = n_trees
        self.max_leaves = max_leaf_nodes
        self.split_share = float(split_share)
        self.gain_floor = np.full(n_trees, np.inf) if gain_floor is None else \
            np.ascontiguousarray(gain_floor, dtype=np.float64)
        self.max_depth = np.inf if max_depth is None else max_depth
        self.min_count = 2 * min_samples_leaf
        self.min_hess = 2 * min_child_weight
        self.hess_unit = hess_unit
        self.nodes_per_tree = M = 2 * max_leaf_nodes - 1
        n = n_trees * M
        self.split = np.full((n, N_SPLIT_COLS), np.nan)
        self.split_cat = np.zeros((n, n_cat_words), np.uint32)
        self.left = np.full(n, -1, np.int64)
        self.right = np.full(n, -1, np.int64)
        self.totals = np.zeros((n, 3))
        self.depth = np.zeros(n, np.int64)
        self.is_cand = np.zeros(n, np.uint8)
        self.n_nodes = np.ones(n_trees, np.int64)
        self.n_leaves = np.ones(n_trees, np.int64)

    def roots(self) -> np.ndarray:
        return np.arange(self.n_trees, dtype=np.int64) * self.nodes_per_tree

    def splittable(self, nodes) -> np.ndarray:
        """Nodes that may still split: depth, leaf budget of their tree, rows and hessian."""
        t = nodes // self.nodes_per_tree
        tot = self.totals[nodes]
        return ((self.depth[nodes] < self.max_depth) & (self.n_leaves[t] < self.max_leaves)
                & (tot[:, 2] >= self.min_count) & (tot[:, 1] * self.hess_unit >= self.min_hess))

    def level(self, nodes, splits, split_cat) -> LevelPlan:
        """One step: record the new evaluations, choose and record splits, plan the next.

        Parameters
        ----------
        nodes : int64 array (n,)
            The nodes evaluated since the last step (the previous plan's ``open_nodes``, or
            the roots), possibly none.
        splits : float64 array (n, N_SPLIT_COLS); split_cat : uint32 array (n, W)
            Their best splits, merged over shards.

        Returns
        -------
        LevelPlan
            Nothing split (``split_node`` empty) means the trees are done.
        """
        out = _grow_level(np.ascontiguousarray(nodes, dtype=np.int64),
                          np.ascontiguousarray(splits, dtype=np.float64).reshape(
                              -1, N_SPLIT_COLS),
                          np.ascontiguousarray(split_cat, dtype=np.uint32).reshape(
                              -1, self.split_cat.shape[1]),
                          self.nodes_per_tree, self.max_leaves, self.split_share,
                          float(self.max_depth), float(self.min_count), float(self.min_hess),
                          float(self.hess_unit), self.n_nodes, self.n_leaves, self.is_cand,
                          self.split, self.split_cat, self.left, self.right, self.totals,
                          self.depth, self.gain_floor)
        return LevelPlan(*out)

    def frontier_gain(self) -> np.ndarray:
        """Per tree, the next round's ``gain_floor``, float64 array (n_trees,): the best gain
        among the candidates left unsplit where the leaf budget ran out. Where the last step
        spent the budget on every candidate (none left, and its children never evaluated),
        the floor this tree grew with; ``inf`` (no floor) where the tree stopped for want of
        splits, or where the best gain left is rounding noise (at most :data:`NOISE_GAIN`
        times the tree's best split's gain), which would make every candidate reach it."""
        M = self.nodes_per_tree
        out = np.full(self.n_trees, -np.inf)
        cand = np.flatnonzero(self.is_cand)
        np.maximum.at(out, cand // M, self.split[cand, SPLIT_GAIN])
        best = np.full(self.n_trees, -np.inf)
        done = np.flatnonzero(self.left >= 0)
        np.maximum.at(best, done // M, self.split[done, SPLIT_GAIN])
        left = out > -np.inf
        out[left & (out <= NOISE_GAIN * best)] = np.inf
        full = self.n_leaves >= self.max_leaves
        out[~left] = np.where(full, self.gain_floor, np.inf)[~left]
        return out

    def leaves(self, tree) -> np.ndarray:
        """Node ids of the leaves of tree ``tree``."""
        ids = tree * self.nodes_per_tree + np.arange(self.n_nodes[tree])
        return ids[self.left[ids] < 0]

    def export(self, tree, mapper: BinMapper, values):
        """Tree ``tree`` as node arrays for :meth:`._gbdt_ensemble.Ensemble.add` (node 0 the root).

        ``values`` (float64, one per node id of the tree, learning rate included) become
        the leaf values.
        """
        base = tree * self.nodes_per_tree
        ids = base + np.arange(self.n_nodes[tree])
        internal = self.left[ids] >= 0
        s = self.split[ids]
        col = np.where(internal, s[:, SPLIT_COLUMN], -1).astype(np.int64)
        b = np.where(internal, s[:, SPLIT_BIN], 0).astype(np.int64)
        is_cat = internal & (s[:, SPLIT_IS_CAT] == 1)
        num = internal & ~is_cat
        threshold = np.full(ids.shape[0], np.nan)
        threshold[num] = mapper.bin_upper[mapper.hist_offsets[col[num]] + b[num]]
        feature = np.full(ids.shape[0], -1, np.int32)
        feature[internal] = mapper.features[col[internal]]
        cats = []
        for i in np.flatnonzero(is_cat):
            bits = np.unpackbits(self.split_cat[ids[i]].view(np.uint8), bitorder="little")
            on = np.flatnonzero(bits[: mapper.n_bins[col[i]]])
            cats.append(mapper.bin_upper[mapper.hist_offsets[col[i]] + on].astype(np.int64))
        return dict(
            feature=feature, threshold=threshold,
            threshold_bin=np.where(num, b, -1).astype(np.int32),
            default_left=np.where(internal, s[:, SPLIT_DEFAULT_LEFT], 0).astype(np.uint8),
            is_cat=is_cat.astype(np.uint8),
            left=np.where(internal, self.left[ids] - base, -1).astype(np.int32),
            right=np.where(internal, self.right[ids] - base, -1).astype(np.int32),
            value=np.asarray(values, np.float64),
            gain=np.where(internal, s[:, SPLIT_GAIN], 0.0),
            count=self.totals[ids, 2].copy(), categories=cats)
