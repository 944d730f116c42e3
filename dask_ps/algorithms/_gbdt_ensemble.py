"""The fitted trees of histogram GBDT as flat arrays, and the prediction kernels on raw
(unbinned) features.

:class:`Ensemble` keeps the fitted trees as flat arrays (LightGBM's / scikit-learn's
``TreePredictor`` layout): per node the input feature, the raw threshold (``x <= threshold``
goes left), the default direction of NaN, a category bitset for categorical splits, the
children and the leaf value (learning rate included). The trees are grown by
:class:`._gbdt_tree.LevelGrower` (:meth:`~._gbdt_tree.LevelGrower.export`).
"""

from __future__ import annotations

import numba
import numpy as np

from ._gbdt_bins import X_TYPES, expand_signatures
from ._gbdt_sketch import kernel_array

_JIT = dict(cache=True, nogil=True)

@numba.njit(**_JIT)
def _left_raw(x, thr, dl, cat, cat_start, cat_len, cat_words):
    if np.isnan(x):
        return dl != 0
    if cat:
        if x < 0 or x != np.floor(x) or x >= 32.0 * cat_len:
            return False
        ci = int(x)
        return (cat_words[cat_start + (ci >> 5)] >> np.uint32(ci & 31)) & np.uint32(1) == 1
    return x <= thr


_TREES = ("int64, int64, int64[::1], int32[::1], int32[::1], float64[::1], uint8[::1], "
          "uint8[::1], int32[::1], int32[::1], float64[::1], int64[::1], int32[::1], "
          "uint32[::1], float64[:, ::1]")


@numba.njit(**_JIT)
def _walk(xrow, node, feature, threshold, default_left, is_cat, left, right, cat_start,
          cat_len, cat_words):
    while left[node] >= 0:
        if _left_raw(xrow[feature[node]], threshold[node], default_left[node], is_cat[node],
                     cat_start[node], cat_len[node], cat_words):
            node = left[node]
        else:
            node = right[node]
    return node


@numba.njit(expand_signatures("void(XT[:, ::1], " + _TREES + ")", XT=X_TYPES), **_JIT)
def predict_dense(X, t0, t1, tree_start, tree_class, feature, threshold, default_left, is_cat,
                  left, right, value, cat_start, cat_len, cat_words, out):
    """``out[tree_class[t], i] += leaf value of row i`` for trees ``t0 <= t < t1``.

    Node arrays are flat over all trees; ``left``/``right`` are absolute node indices, -1
    at leaves. A row goes left when ``x <= threshold`` (numerical), when its category's bit
    is set (categorical; negative, non-integer and unknown categories go right), and NaN
    goes where ``default_left`` says.

    Parameters
    ----------
    X : float32/float64 array (n, n_features), C order
    t0, t1 : int
    tree_start : int64 array (n_trees + 1,); tree_class : int32 array (n_trees,)
    feature : int32, threshold : float64, default_left, is_cat : uint8, left, right : int32,
    value : float64, cat_start : int64, cat_len : int32 — arrays (n_nodes,)
    cat_words : uint32 array
    out : float64 array (K, n), added to
    """
    for i in range(X.shape[0]):
        xrow = X[i]
        for t in range(t0, t1):
            leaf = _walk(xrow, tree_start[t], feature, threshold, default_left, is_cat, left,
                         right, cat_start, cat_len, cat_words)
            out[tree_class[t], i] += value[leaf]


@numba.njit("void(int64[::1], int32[::1], float64[::1], int64, " + _TREES + ")", **_JIT)
def predict_csr(indptr, indices, data, n_features, t0, t1, tree_start, tree_class, feature,
                threshold, default_left, is_cat, left, right, value, cat_start, cat_len,
                cat_words, out):
    """:func:`predict_dense` for CSR rows (absent entries are 0)."""
    xrow = np.zeros(n_features)
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            xrow[indices[p]] = data[p]
        for t in range(t0, t1):
            leaf = _walk(xrow, tree_start[t], feature, threshold, default_left, is_cat, left,
                         right, cat_start, cat_len, cat_words)
            out[tree_class[t], i] += value[leaf]
        for p in range(indptr[i], indptr[i + 1]):
            xrow[indices[p]] = 0.0


def flat_problem(flat: dict, n_features: int, n_outputs: int) -> str | None:
    """What makes flat tree arrays (:meth:`Ensemble.flat`'s, e.g. a saved model's or a
    checkpoint's) unsafe to predict with, or None: the kernels read them unchecked, so a
    child outside its tree or not after its parent (a cycle: a walk that never ends), a
    feature beyond ``n_features``, a category bitset beyond ``cat_words`` or a tree of no
    output would read other memory or hang.

    Parameters
    ----------
    flat : dict
        ``tree_start``, ``tree_class``, ``cat_words`` and the node arrays of
        :attr:`Ensemble._NODE` with ``cat_start``, ``cat_len``.
    n_features, n_outputs : int

    Returns
    -------
    str or None
        The first problem, naming the array and a node (absolute index) or tree.
    """
    n = np.shape(flat["feature"])[0] if np.ndim(flat["feature"]) == 1 else -1
    for k in Ensemble._NODE + ("cat_start", "cat_len"):
        if np.shape(flat[k]) != (max(n, 0),):
            return f"{k} has shape {np.shape(flat[k])}, feature {np.shape(flat['feature'])}: " \
                   f"one value per node"
    start = np.asarray(flat["tree_start"])
    if start.ndim != 1 or start.shape[0] < 1 or start.dtype.kind not in "iu" or \
            start[0] != 0 or start[-1] != n or (np.diff(start) < 1).any():
        return (f"tree_start {str(start.tolist())[:60]} does not rise from 0 to the {n} "
                f"nodes, each tree at least one node")
    tree_class = np.asarray(flat["tree_class"])
    if tree_class.shape != (start.shape[0] - 1,) or (
            tree_class.size and not (0 <= tree_class.min() and tree_class.max() < n_outputs)):
        return (f"tree_class {str(tree_class.tolist())[:60]} is not one output in "
                f"[0, {n_outputs}) per tree")
    left, right = np.asarray(flat["left"]), np.asarray(flat["right"])
    node = np.arange(n)
    end = np.repeat(start[1:], np.diff(start))  # one past each node's tree
    inner = left >= 0
    bad = inner != (right >= 0)
    for child in (left, right):  # children after their parent, in its tree: no cycle
        bad |= inner & ((child <= node) | (child >= end))
    feature = np.asarray(flat["feature"])
    bad_feature = inner & ((feature < 0) | (feature >= n_features))
    words = np.shape(flat["cat_words"])[0]
    cs, cl = np.asarray(flat["cat_start"]), np.asarray(flat["cat_len"])
    bad_cat = inner & (np.asarray(flat["is_cat"]) != 0) & ((cs < 0) | (cl < 0) | (cs + cl > words))
    for mask, what in ((bad, "children outside its tree, not after it, or only one"),
                       (bad_feature, f"a feature outside [0, {n_features})"),
                       (bad_cat, f"a category set outside cat_words' {words} words")):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            t = int(np.searchsorted(start, i, side="right") - 1)
            return (f"node {i} (of tree {t}) has {what}: left {left[i]}, right {right[i]}, "
                    f"feature {feature[i]}")
    return None


class Ensemble:
    """Fitted trees as flat arrays, and their prediction.

    Parameters
    ----------
    n_features : int
    n_outputs : int
        1, or the number of classes of a softmax model (one tree per class per round).
    base_score : float64 array (n_outputs,)
        Initial raw score.
    """

    #: Node arrays: input feature (-1 at leaves), raw threshold (``x <= threshold`` goes
    #: left; NaN for categorical splits and leaves), threshold bin (the same in bins of the
    #: fit's BinMapper), default_left (NaN), is_cat, children (-1 at leaves), value (leaf
    #: value, learning rate included), gain, count (training rows).
    _NODE = ("feature", "threshold", "threshold_bin", "default_left", "is_cat", "left", "right",
             "value", "gain", "count")

    def __init__(self, n_features, n_outputs, base_score):
        self.n_features = n_features
        self.n_outputs = n_outputs
        self.base_score = np.asarray(base_score, np.float64).reshape(n_outputs)
        self._trees = []
        self._flat = None

    @property
    def n_trees(self) -> int:
        return len(self._trees)

    @property
    def n_rounds(self) -> int:
        return self.n_trees // self.n_outputs

    def add(self, tree: dict, tree_class: int) -> None:
        """Append a tree (:meth:`LevelGrower.export`) predicting output ``tree_class``."""
        cats = tree["categories"]
        words, start, length = [], np.zeros(tree["feature"].shape[0], np.int64), \
            np.zeros(tree["feature"].shape[0], np.int32)
        for i, c in zip(np.flatnonzero(tree["is_cat"]), cats):
            n_words = int(c.max()) // 32 + 1 if c.size else 1
            w = np.zeros(n_words, np.uint32)
            np.bitwise_or.at(w, c >> 5, (np.uint32(1) << (c & 31).astype(np.uint32)))
            start[i] = sum(x.shape[0] for x in words)
            length[i] = n_words
            words.append(w)
        t = {k: tree[k] for k in self._NODE}
        t.update(cat_start=start, cat_len=length,
                 cat_words=np.concatenate(words) if words else np.zeros(0, np.uint32),
                 tree_class=tree_class)
        self._trees.append(t)
        self._flat = None

    @classmethod
    def from_flat(cls, n_features: int, n_outputs: int, base_score, flat: dict) -> "Ensemble":
        """The ensemble whose :meth:`flat` arrays are ``flat`` (e.g. a saved model's)."""
        out = cls(n_features, n_outputs, base_score)
        out.load_flat(flat)
        return out

    def load_flat(self, flat: dict) -> None:
        """Replace the trees with those whose :meth:`flat` arrays are ``flat``.

        Raises
        ------
        ValueError
            Arrays no fit grows (:func:`flat_problem`), which prediction could not walk.
        """
        problem = flat_problem(flat, self.n_features, self.n_outputs)
        if problem:
            raise ValueError(f"the trees are damaged: {problem}")
        cls = type(self)
        self._trees, self._flat = [], None
        start = np.asarray(flat["tree_start"], np.int64)
        words = np.asarray(flat["cat_words"], np.uint32)
        for t in range(start.shape[0] - 1):
            a, b = int(start[t]), int(start[t + 1])
            tree = {k: np.asarray(flat[k])[a:b].copy() for k in cls._NODE}
            for k in ("left", "right"):
                tree[k] = np.where(tree[k] >= 0, tree[k] - a, -1).astype(np.int32)
            cs = np.asarray(flat["cat_start"], np.int64)[a:b]
            cl = np.asarray(flat["cat_len"], np.int32)[a:b]
            used = cl > 0
            w0 = int(cs[used].min()) if used.any() else 0
            w1 = int((cs + cl)[used].max()) if used.any() else 0
            tree.update(cat_start=np.where(used, cs - w0, 0).astype(np.int64),
                        cat_len=cl.copy(), cat_words=words[w0:w1].copy(),
                        tree_class=int(flat["tree_class"][t]))
            self._trees.append(tree)

    def truncate(self, n_rounds: int) -> None:
        """Keep the first ``n_rounds`` rounds."""
        del self._trees[n_rounds * self.n_outputs:]
        self._flat = None

    def flat(self) -> dict:
        """All trees concatenated, node indices absolute (what the kernels take)."""
        if self._flat is None:
            sizes = np.array([t["feature"].shape[0] for t in self._trees], np.int64)
            start = np.zeros(len(sizes) + 1, np.int64)
            np.cumsum(sizes, out=start[1:])
            f = {k: np.concatenate([t[k] for t in self._trees]) if self._trees
                 else np.zeros(0) for k in self._NODE}
            for k in ("left", "right"):
                shift = np.repeat(start[:-1], sizes).astype(np.int32)
                f[k] = np.where(f[k] >= 0, f[k] + shift, -1).astype(np.int32)
            wsz = np.array([t["cat_words"].shape[0] for t in self._trees], np.int64)
            wstart = np.zeros(len(wsz) + 1, np.int64)
            np.cumsum(wsz, out=wstart[1:])
            f["cat_start"] = (np.concatenate([t["cat_start"] for t in self._trees])
                              + np.repeat(wstart[:-1], sizes)) if self._trees else \
                np.zeros(0, np.int64)
            f["cat_len"] = np.concatenate([t["cat_len"] for t in self._trees]) \
                if self._trees else np.zeros(0, np.int32)
            f["cat_words"] = np.concatenate([t["cat_words"] for t in self._trees]) \
                if self._trees else np.zeros(0, np.uint32)
            f["tree_start"] = start
            f["tree_class"] = np.array([t["tree_class"] for t in self._trees], np.int32)
            dt = dict(feature=np.int32, threshold=np.float64, threshold_bin=np.int32,
                      default_left=np.uint8,
                      is_cat=np.uint8, value=np.float64, gain=np.float64, count=np.float64)
            for k, d in dt.items():
                f[k] = np.ascontiguousarray(f[k], dtype=d)
            self._flat = f
        return self._flat

    def predict_raw(self, X, out=None, rounds=None) -> np.ndarray:
        """Raw scores, shape (n_outputs, n).

        Parameters
        ----------
        X : float array (n, n_features) or scipy.sparse matrix
        out : float64 array (n_outputs, n), optional
            Scores to add the trees to (the base score is then not added).
        rounds : (int, int), optional
            Only the trees of rounds ``[r0, r1)``.
        """
        import scipy.sparse as sp

        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features; the model was fit on "
                             f"{self.n_features}")
        n = X.shape[0]
        if out is None:
            out = np.repeat(self.base_score[:, None], n, axis=1)
        r0, r1 = (0, self.n_rounds) if rounds is None else rounds
        f = self.flat()
        args = (r0 * self.n_outputs, r1 * self.n_outputs, f["tree_start"], f["tree_class"],
                f["feature"], f["threshold"], f["default_left"], f["is_cat"], f["left"],
                f["right"], f["value"], f["cat_start"], f["cat_len"], f["cat_words"], out)
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            predict_csr(kernel_array(X.indptr, np.int64), kernel_array(X.indices, np.int32),
                        kernel_array(X.data, np.float64), self.n_features, *args)
        else:
            X = np.asarray(X)
            float_x = X.dtype in (np.float32, np.float64)
            predict_dense(kernel_array(X, None if float_x else np.float64), *args)
        return out

    def feature_importances(self, kind: str = "gain") -> np.ndarray:
        """Total split gain (``"gain"``) or number of splits (``"split"``) per input feature.
        """
        if kind not in ("gain", "split"):
            raise ValueError(f"importance kind must be 'gain' or 'split', got {kind!r}")
        f = self.flat()
        inner = f["left"] >= 0 if self._trees else np.zeros(0, bool)
        w = f["gain"][inner] if kind == "gain" else None
        return np.bincount(f["feature"][inner], weights=w,
                           minlength=self.n_features).astype(np.float64)
