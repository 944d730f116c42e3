"""A worker's GBDT state next to one partition of rows, and its steps.

:class:`BinnedPartition` is what lives beside a cached partition for the whole fit: the rows
binned once, labels, raw scores, quantized gradients, and per tree the row permutation that
keeps each node's rows contiguous. Its methods are the worker side of a growth step —
:meth:`~BinnedPartition.histograms` (the push), :meth:`~BinnedPartition.partition` (apply
the chosen splits) — and of a round — :meth:`~BinnedPartition.gradients`,
:meth:`~BinnedPartition.add_leaves`. They call the kernels of :mod:`._gbdt_kernels` and
:mod:`._gbdt_rows` only.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._gbdt_bins import BinMapper
from ._gbdt_kernels import build_hist_csr, build_hist_dense
from ._gbdt_objectives import Objective
from ._gbdt_rows import add_leaf_values, partition_csr, partition_dense
from ._gbdt_sketch import kernel_array, sketch


class BinnedPartition:
    """Binned rows of one partition with their labels, scores and gradients.

    Parameters
    ----------
    X : float array (n, d), scipy.sparse matrix (n, d), or list of float arrays
        The partition's raw rows; binned here, then dropped. A list of dense blocks (a
        task's partitions) is binned block by block and kept as one set of rows.
    y : float64 array (n,)
        Checked labels (:meth:`Objective.check_y`).
    mapper : BinMapper
    objective : Objective
    base_score : float64 array (n_outputs,)
    nodes_per_tree : int
        ``2 * max_leaf_nodes - 1``: node ids per tree (:class:`LevelGrower`).
    w : float64 array (n,), optional
        Sample weights of the rows (positive: rows of weight 0 are left out before), which
        multiply their gradients, hessians and losses. Default: unweighted.

    Notes
    -----
    Dense rows are kept binned twice, column by column and row by row (the histograms of
    nodes holding few rows read the latter, see :func:`~._gbdt_kernels.build_hist_dense`):
    2 bytes a value with up to 255 bins, 4 with more; plus per row 12 bytes (label,
    scratch; 8 more with weights) and 28 per row and output (raw score, gradient,
    hessian, row permutation).
    """

    def __init__(self, X, y, mapper: BinMapper, objective: Objective, base_score,
                 nodes_per_tree: int, w=None):
        self.mapper = mapper
        self.objective = objective
        self.sparse = sp.issparse(X)
        if isinstance(X, list):
            self.binned = np.concatenate([mapper.transform(x) for x in X], axis=1) \
                if len(X) > 1 else mapper.transform(X[0])
        else:
            self.binned = mapper.transform(X)
        # dense: the bins row by row too (one byte a value more), read for the nodes holding
        # few of the rows (see _gbdt_kernels.SMALL_NODE_SHARE)
        self.binned_rows = None if self.sparse else np.ascontiguousarray(self.binned.T)
        self.y = kernel_array(y, np.float64)
        self.w = None if w is None else kernel_array(w, np.float64)
        n = self.y.shape[0]
        T = objective.n_outputs
        self.raw = np.repeat(np.asarray(base_score, np.float64)[:, None], n, axis=1)
        self.grad = np.zeros((T, n))
        self.hess = np.zeros((T, n))
        self.rows = np.empty((T, n), np.int32)
        self.nodes_per_tree = nodes_per_tree
        self.node_start = np.zeros(T * nodes_per_tree, np.int64)
        self.node_count = np.zeros(T * nodes_per_tree, np.int64)
        self.scratch = np.empty(n, np.int32)
        self.n_in = n
        self._splits: list = []

    @property
    def n_rows(self) -> int:
        return self.y.shape[0]

    def bounds(self) -> tuple[float, float]:
        """This partition's gradient and hessian bounds (the driver takes the max)."""
        return self.objective.bounds(self.y, self.raw, self.w)

    def gradients(self, grad_scale: float, hess_scale: float, in_bag=None) -> np.ndarray:
        """New quantized gradients; every tree's rows back to one root.

        Parameters
        ----------
        grad_scale, hess_scale : float
        in_bag : bool array (n,), optional
            The rows this round's trees are grown from (row subsampling); the others get
            the trees' values all the same (:meth:`add_leaves`). Default: all rows.

        Returns
        -------
        float64 array (T, 3)
            Per tree the root's (grad, hess, count) sums over the rows in the bag (exact:
            add them over partitions).
        """
        self.objective.gradients(self.y, self.raw, grad_scale, hess_scale, self.grad,
                                 self.hess, self.w)
        if in_bag is None:
            self.rows[:] = np.arange(self.n_rows, dtype=np.int32)
            self.n_in = self.n_rows
        else:
            self.rows[:] = np.concatenate([np.flatnonzero(in_bag),
                                           np.flatnonzero(~in_bag)]).astype(np.int32)
            self.n_in = int(in_bag.sum())
        self._splits = []  # this round's splits, replayed on the rows out of the bag
        roots = np.arange(self.rows.shape[0]) * self.nodes_per_tree
        self.node_start[roots] = 0
        self.node_count[roots] = self.n_in
        g, h = (self.grad, self.hess) if in_bag is None else \
            (self.grad[:, in_bag], self.hess[:, in_bag])
        return np.stack([g.sum(axis=1), h.sum(axis=1),
                         np.full(self.rows.shape[0], float(self.n_in))], axis=1)

    def histograms(self, nodes, out=None) -> np.ndarray:
        """Histograms of ``nodes`` over this partition's rows: float64 (len(nodes),
        n_hist_rows, 3) — one step's push; written into ``out`` if given."""
        m = self.mapper
        nodes = np.ascontiguousarray(nodes, dtype=np.int64)
        if out is None:
            out = np.empty((nodes.shape[0], m.n_hist_rows, 3))
        common = (self.rows, self.node_start, self.node_count, self.nodes_per_tree, nodes,
                  self.grad, self.hess, m.hist_offsets, out)
        if self.sparse:
            indptr, columns, bins = self.binned
            build_hist_csr(indptr, columns, bins, m.zero_bin, *common)
        else:
            build_hist_dense(self.binned, self.binned_rows, *common)
        return out

    def partition(self, split_node, left_node, right_node, splits, split_cat,
                  node_start=None, node_count=None) -> None:
        """Move the rows of the split nodes to their children (of the rows in the bag, or
        of those whose node ranges ``node_start`` / ``node_count`` give)."""
        replay = node_start is not None
        if not replay and self.n_in < self.n_rows:
            self._splits.append((split_node, left_node, right_node, splits, split_cat))
        args = (self.rows, self.node_start if not replay else node_start,
                self.node_count if not replay else node_count, self.nodes_per_tree,
                np.ascontiguousarray(split_node, dtype=np.int64),
                np.ascontiguousarray(left_node, dtype=np.int64),
                np.ascontiguousarray(right_node, dtype=np.int64),
                np.ascontiguousarray(splits), np.ascontiguousarray(split_cat),
                self.mapper.n_bins, self.scratch)
        if self.sparse:
            indptr, columns, bins = self.binned
            partition_csr(indptr, columns, bins, self.mapper.zero_bin, *args)
        else:
            partition_dense(self.binned, *args)

    def add_leaves(self, leaves, values) -> None:
        """Add the leaf values of the round's trees to the scores of their rows; rows out
        of the bag find their leaves by the round's splits replayed on them."""
        leaves = np.ascontiguousarray(leaves, dtype=np.int64)
        values = np.ascontiguousarray(values, dtype=np.float64)
        add_leaf_values(self.rows, self.node_start, self.node_count, self.nodes_per_tree,
                        leaves, values, self.raw)
        if self.n_in == self.n_rows:
            return
        start = np.zeros_like(self.node_start)
        count = np.zeros_like(self.node_count)
        roots = np.arange(self.rows.shape[0]) * self.nodes_per_tree
        start[roots], count[roots] = self.n_in, self.n_rows - self.n_in
        for plan in self._splits:
            self.partition(*plan, node_start=start, node_count=count)
        add_leaf_values(self.rows, start, count, self.nodes_per_tree, leaves, values, self.raw)

    def loss_sum(self) -> float:
        """Summed loss of the partition's rows at the current scores (each times its
        sample weight)."""
        return self.objective.loss_sum(self.y, self.raw, self.w)


def partition_sketch(X, row_offset: int, rate: float, seed: int):
    """The bin sketch of a partition whose first row has global id ``row_offset``."""
    return sketch(X, np.arange(row_offset, row_offset + X.shape[0], dtype=np.int64), rate,
                  seed)
