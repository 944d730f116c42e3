"""A worker's GBDT state next to one partition of rows, and its steps.

:class:`BinnedPartition` is what lives beside a cached partition for the whole fit: the rows
binned once, labels, raw scores, quantized gradients, and per tree the row permutation that
keeps each node's rows contiguous. Its methods are the worker side of a growth step —
:meth:`~BinnedPartition.histograms` (the push), :meth:`~BinnedPartition.partition` (apply
the chosen splits) — and of a round — :meth:`~BinnedPartition.gradients`,
:meth:`~BinnedPartition.add_leaves`. They call the kernels of :mod:`._gbdt_kernels` only.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._gbdt_bins import BinMapper
from ._gbdt_kernels import (
    add_leaf_values,
    build_hist_csr,
    build_hist_dense,
    partition_csr,
    partition_dense,
)
from ._gbdt_objectives import Objective
from ._gbdt_sketch import sketch


class BinnedPartition:
    """Binned rows of one partition with their labels, scores and gradients.

    Parameters
    ----------
    X : float array (n, d) or scipy.sparse matrix (n, d)
        The partition's raw rows; binned here, then dropped.
    y : float64 array (n,)
        Checked labels (:meth:`Objective.check_y`).
    mapper : BinMapper
    objective : Objective
    base_score : float64 array (n_outputs,)
    nodes_per_tree : int
        ``2 * max_leaf_nodes - 1``: node ids per tree (:class:`LevelGrower`).
    """

    def __init__(self, X, y, mapper: BinMapper, objective: Objective, base_score,
                 nodes_per_tree: int):
        self.mapper = mapper
        self.objective = objective
        self.sparse = sp.issparse(X)
        self.binned = mapper.transform(X)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
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

    @property
    def n_rows(self) -> int:
        return self.y.shape[0]

    def bounds(self) -> tuple[float, float]:
        """This partition's gradient and hessian bounds (the driver takes the max)."""
        return self.objective.bounds(self.y, self.raw)

    def gradients(self, grad_scale: float, hess_scale: float) -> np.ndarray:
        """New quantized gradients; every tree's rows back to one root.

        Returns
        -------
        float64 array (T, 3)
            Per tree the root's (grad, hess, count) sums (exact: add them over partitions).
        """
        self.objective.gradients(self.y, self.raw, grad_scale, hess_scale, self.grad,
                                 self.hess)
        self.rows[:] = np.arange(self.n_rows, dtype=np.int32)
        roots = np.arange(self.rows.shape[0]) * self.nodes_per_tree
        self.node_start[roots] = 0
        self.node_count[roots] = self.n_rows
        return np.stack([self.grad.sum(axis=1), self.hess.sum(axis=1),
                         np.full(self.rows.shape[0], float(self.n_rows))], axis=1)

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
            build_hist_dense(self.binned, *common)
        return out

    def partition(self, split_node, left_node, right_node, splits, split_cat) -> None:
        """Move the rows of the split nodes to their children."""
        args = (self.rows, self.node_start, self.node_count, self.nodes_per_tree,
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
        """Add the leaf values of the round's trees to the scores of their rows."""
        add_leaf_values(self.rows, self.node_start, self.node_count, self.nodes_per_tree,
                        np.ascontiguousarray(leaves, dtype=np.int64),
                        np.ascontiguousarray(values, dtype=np.float64), self.raw)

    def loss_sum(self) -> float:
        """Summed loss of the partition's rows at the current scores."""
        return self.objective.loss(self.y, self.raw) * self.n_rows if self.n_rows else 0.0


def partition_sketch(X, row_offset: int, rate: float, seed: int):
    """The bin sketch of a partition whose first row has global id ``row_offset``."""
    return sketch(X, np.arange(row_offset, row_offset + X.shape[0], dtype=np.int64), rate,
                  seed)
