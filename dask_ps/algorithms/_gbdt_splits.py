"""Numba kernels of histogram GBDT's split finding: the split table, the split parameters and
the search of the best split of every node over a shard's histogram columns.

Run on the parameter-server shards next to their columns (:mod:`._gbdt_shard`) and in one
process (:mod:`._gbdt_local`); the histogram layout and the exact quantized sums they read are
described in :mod:`._gbdt_kernels`. Gains and the categorical many-vs-many search follow
LightGBM's ``FeatureHistogram`` (its defaults for the parameters of :func:`split_params`).
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = dict(cache=True, nogil=True)

# Columns of a split table (one row per node).
SPLIT_GAIN = 0          # loss reduction; -inf when the node has no valid split
SPLIT_COLUMN = 1        # histogram column (index into BinMapper.features); -1 when none
SPLIT_BIN = 2           # numerical: rows with bin <= SPLIT_BIN go left; categorical: #left bins
SPLIT_DEFAULT_LEFT = 3  # 1.0 when the missing bin goes left
SPLIT_IS_CAT = 4
SPLIT_LEFT = 5          # 5, 6, 7: left (grad, hess, count), quantized units
SPLIT_RIGHT = 8         # 8, 9, 10: right (grad, hess, count)
N_SPLIT_COLS = 11

# Entries of the ``params`` array of :func:`find_splits`.
P_LAMBDA = 0             # L2 regularisation of leaf values (reg_lambda)
P_MIN_HESS = 1           # min_child_weight: least hessian sum in a child
P_MIN_COUNT = 2          # min_samples_leaf: least rows in a child
P_MIN_GAIN = 3           # min_split_gain: a split must reduce the loss by more
P_MAX_CAT_ONEHOT = 4     # categorical columns with at most this many bins split one-vs-rest
P_MAX_CAT_THRESHOLD = 5  # most categories on the left of a many-vs-many split
P_CAT_SMOOTH = 6         # categories with fewer rows are skipped; smoothing of G/(H + s)
P_CAT_L2 = 7             # extra L2 for many-vs-many categorical splits
P_MIN_DATA_PER_GROUP = 8  # least rows per group of categories added to the left
N_PARAMS = 9


def split_params(reg_lambda=0.0, min_child_weight=1e-3, min_samples_leaf=20,
                 min_split_gain=0.0, max_cat_to_onehot=4, max_cat_threshold=32,
                 cat_smooth=10.0, cat_l2=10.0, min_data_per_group=100) -> np.ndarray:
    """The ``params`` array of :func:`find_splits` (defaults: LightGBM's)."""
    p = np.empty(N_PARAMS)
    p[[P_LAMBDA, P_MIN_HESS, P_MIN_COUNT, P_MIN_GAIN, P_MAX_CAT_ONEHOT, P_MAX_CAT_THRESHOLD,
       P_CAT_SMOOTH, P_CAT_L2, P_MIN_DATA_PER_GROUP]] = [
        reg_lambda, min_child_weight, min_samples_leaf, min_split_gain, max_cat_to_onehot,
        max_cat_threshold, cat_smooth, cat_l2, min_data_per_group]
    return p


def node_totals(hist, hist_offsets) -> np.ndarray:
    """(grad, hess, count) sums of each node from the rows of the first column: exact, so
    every shard gets the same totals from its own columns. Returns float64 (n_nodes, 3)."""
    return np.ascontiguousarray(hist[:, : hist_offsets[1] - hist_offsets[0]].sum(axis=1))


# --------------------------------------------------------------------------- split finding

@numba.njit(**_JIT)
def _offer(out, out_cat, k, gain, c, t, dl, cat, GL, HL, CL, GR, HR, CR):
    """Keep the candidate if it beats the node's best so far (strictly: ties keep the
    earlier candidate, i.e. the lower column, then the lower bin)."""
    if gain > out[k, SPLIT_GAIN]:
        out[k, SPLIT_GAIN] = gain
        out[k, SPLIT_COLUMN] = c
        out[k, SPLIT_BIN] = t
        out[k, SPLIT_DEFAULT_LEFT] = dl
        out[k, SPLIT_IS_CAT] = cat
        out[k, SPLIT_LEFT] = GL
        out[k, SPLIT_LEFT + 1] = HL
        out[k, SPLIT_LEFT + 2] = CL
        out[k, SPLIT_RIGHT] = GR
        out[k, SPLIT_RIGHT + 1] = HR
        out[k, SPLIT_RIGHT + 2] = CR
        out_cat[k, :] = 0
        return True
    return False


@numba.njit(**_JIT)
def _score(GL, HL, GR, HR, lam, parent, gu, hu):
    """Loss reduction ``GL²/(HL+λ) + GR²/(HR+λ) - G²/(H+λ)`` (sums de-quantized), with
    one division."""
    gl = GL * gu
    gr = GR * gu
    hl = HL * hu + lam
    hr = HR * hu + lam
    if not (hl > 0.0 and hr > 0.0):
        return -np.inf
    return (gl * gl * hr + gr * gr * hl) / (hl * hr) - parent


@numba.njit(**_JIT)
def _numerical(h, k, nb, c, G, H, C, parent, params, gu, hu, out, out_cat):
    lam = params[P_LAMBDA]
    min_h = params[P_MIN_HESS]
    min_c = params[P_MIN_COUNT]
    mG = h[nb, 0]
    mH = h[nb, 1]
    mC = h[nb, 2]
    best = out[k, SPLIT_GAIN]
    best_t = -1
    best_left = False  # the missing bin goes left
    GL = 0.0
    HL = 0.0
    CL = 0.0
    # t = nb - 1 (all values left) is a split only with missing values, which go right
    last = nb if mC > 0 else nb - 1
    # an empty bin gives the previous threshold's sums and gains, which win ties (strict
    # ``>``): it is scanned all the same, without a branch on it (about half of the bins
    # hold rows, at random: skipping them cost more in mispredicted branches than the
    # arithmetic; 0.25 -> 0.16 ms per step on LightGBM's example, 63 leaves)
    for t in range(last):
        GL += h[t, 0]
        HL += h[t, 1]
        CL += h[t, 2]
        # missing values right
        CR = C - CL
        HR = H - HL
        if CR < min_c or HR * hu < min_h:
            break  # the right side only shrinks
        if CL >= min_c and CR >= min_c and HL * hu >= min_h and HR * hu >= min_h:
            gain = _score(GL, HL, G - GL, HR, lam, parent, gu, hu)
            if gain > best:
                best = gain
                best_t = t
                best_left = False
        # missing values left
        if mC > 0 and t < nb - 1:
            CR -= mC
            HR -= mH
            cl = CL + mC
            hl = HL + mH
            if cl >= min_c and CR >= min_c and hl * hu >= min_h and HR * hu >= min_h:
                gain = _score(GL + mG, hl, G - GL - mG, HR, lam, parent, gu, hu)
                if gain > best:
                    best = gain
                    best_t = t
                    best_left = True
    if best_t < 0:
        return
    GL = 0.0
    HL = 0.0
    CL = 0.0
    for t in range(best_t + 1):
        GL += h[t, 0]
        HL += h[t, 1]
        CL += h[t, 2]
    if best_left:
        GL += mG
        HL += mH
        CL += mC
        dl = 1.0
    else:
        # no missing value seen: NaN follows the child with more rows
        dl = 1.0 if mC == 0 and CL >= C - CL else 0.0
    _offer(out, out_cat, k, best, c, best_t, dl, 0.0, GL, HL, CL, G - GL, H - HL, C - CL)


@numba.njit(**_JIT)
def _categorical(h, k, nb, c, G, H, C, parent, params, gu, hu, out, out_cat):
    """LightGBM's categorical split (``FindBestThresholdCategoricalInner``, written anew):
    one-vs-rest for few categories, else categories sorted by ``G / (H + cat_smooth)`` and
    the best prefix from either end; missing, rare and unseen categories go right."""
    lam = params[P_LAMBDA]
    min_h = params[P_MIN_HESS]
    min_c = params[P_MIN_COUNT]
    if nb <= params[P_MAX_CAT_ONEHOT]:
        for b in range(nb):
            GL = h[b, 0]
            HL = h[b, 1]
            CL = h[b, 2]
            GR = G - GL
            HR = H - HL
            CR = C - CL
            if CL >= min_c and CR >= min_c and HL * hu >= min_h and HR * hu >= min_h:
                gain = _score(GL, HL, GR, HR, lam, parent, gu, hu)
                if _offer(out, out_cat, k, gain, c, 1.0, 0.0, 1.0, GL, HL, CL, GR, HR, CR):
                    out_cat[k, b >> 5] |= np.uint32(1) << np.uint32(b & 31)
        return
    smooth = params[P_CAT_SMOOTH]
    lam2 = lam + params[P_CAT_L2]
    per_group = params[P_MIN_DATA_PER_GROUP]
    used = np.empty(nb, np.int64)
    n_used = 0
    for b in range(nb):
        if h[b, 2] >= smooth:
            used[n_used] = b
            n_used += 1
    if n_used == 0:
        return
    used = used[:n_used]
    ratio = np.empty(n_used)
    for i in range(n_used):
        b = used[i]
        ratio[i] = h[b, 0] * gu / (h[b, 1] * hu + smooth)
    order = used[np.argsort(ratio, kind="mergesort")]
    max_num = min(int(params[P_MAX_CAT_THRESHOLD]), (n_used + 1) // 2)
    best_dir = 0
    best_len = 0
    for direction in range(2):
        GL = 0.0
        HL = 0.0
        CL = 0.0
        group = 0.0
        for i in range(min(n_used, max_num)):
            b = order[i] if direction == 0 else order[n_used - 1 - i]
            GL += h[b, 0]
            HL += h[b, 1]
            CL += h[b, 2]
            group += h[b, 2]
            if CL < min_c or HL * hu < min_h:
                continue
            GR = G - GL
            HR = H - HL
            CR = C - CL
            if CR < min_c or CR < per_group or HR * hu < min_h:
                break
            if group < per_group:
                continue
            group = 0.0
            gain = _score(GL, HL, GR, HR, lam2, parent, gu, hu)
            if _offer(out, out_cat, k, gain, c, i + 1.0, 0.0, 1.0, GL, HL, CL, GR, HR, CR):
                best_dir = direction
                best_len = i + 1
    if best_len > 0 and out[k, SPLIT_COLUMN] == c:
        for i in range(best_len):
            b = order[i] if best_dir == 0 else order[n_used - 1 - i]
            out_cat[k, b >> 5] |= np.uint32(1) << np.uint32(b & 31)


@numba.njit("void(float64[:, :, ::1], int64[::1], int64, int64, int64, int64[::1], int32[::1], "
            "uint8[::1], uint8[::1], float64[:, ::1], float64[::1], float64, float64, "
            "float64[:, ::1], uint32[:, ::1])", **_JIT)
def find_splits(hist, slots, row0, c_lo, c_hi, hist_offsets, n_bins, is_cat, allowed, totals,
                params, grad_unit, hess_unit, out, out_cat):
    """Best split of every node over the columns ``c_lo:c_hi`` — what one shard runs.

    Numerical columns try every threshold bin with the missing bin on each side (XGBoost's
    sparsity-aware split finding, Chen & Guestrin 2016, alg. 3); categorical columns follow
    LightGBM. Gain is ``GL²/(HL+λ) + GR²/(HR+λ) - G²/(H+λ)`` (λ + cat_l2 for many-vs-many
    categorical splits); a split needs gain > ``min_split_gain`` and each child at least
    ``min_samples_leaf`` rows and ``min_child_weight`` hessian. Ties go to the lower column,
    then the lower bin, so the best over any split of the columns into ranges, merged with
    :func:`merge_splits`, equals the best over all columns.

    Parameters
    ----------
    hist : float64 array (n_slots, R, 3)
        Summed histograms holding at least the range's rows; ``hist[:, 0]`` is histogram
        row ``row0`` (a shard passes its own rows and ``row0 = hist_offsets[c_lo]``).
    slots : int64 array (n_nodes,)
        The nodes to evaluate: ``hist[slots[k]]`` (node ids into the pool of histograms).
    row0, c_lo, c_hi : int
    hist_offsets : int64 (n_cols + 1,); n_bins : int32 (n_cols,); is_cat : uint8 (n_cols,)
        Of the whole :class:`BinMapper`.
    allowed : uint8 (n_cols,)
        Columns that may split (0: skipped; column sampling per tree).
    totals : float64 array (n_nodes, 3)
        (grad, hess, count) of each node, quantized (:func:`node_totals` or the parent's
        split).
    params : float64 array (N_PARAMS,)
        From :func:`split_params`.
    grad_unit, hess_unit : float
        ``1 / scale`` of the quantized gradients and hessians.
    out : float64 array (n_nodes, N_SPLIT_COLS); out_cat : uint32 array (n_nodes, W)
        Overwritten with the best split per node (gain -inf and column -1 when none).
    """
    lam = params[P_LAMBDA]
    min_h = params[P_MIN_HESS]
    min_c = params[P_MIN_COUNT]
    for k in range(totals.shape[0]):
        out[k, :] = 0.0
        out[k, SPLIT_GAIN] = params[P_MIN_GAIN]
        out[k, SPLIT_COLUMN] = -1.0
        out_cat[k, :] = 0
        G = totals[k, 0]
        H = totals[k, 1]
        C = totals[k, 2]
        if C >= 2 * min_c and H * hess_unit >= 2 * min_h:
            parent = (G * grad_unit) ** 2 / (H * hess_unit + lam)
            hk = hist[slots[k]]
            for c in range(c_lo, c_hi):  # increasing: the tie-breaking rule
                if allowed[c] == 0:
                    continue
                o = hist_offsets[c] - row0
                nb = n_bins[c]
                h = hk[o:o + nb + 1]
                if is_cat[c]:
                    _categorical(h, k, nb, c, G, H, C, parent, params, grad_unit, hess_unit,
                                 out, out_cat)
                else:
                    _numerical(h, k, nb, c, G, H, C, parent, params, grad_unit, hess_unit,
                               out, out_cat)
        if out[k, SPLIT_COLUMN] < 0:
            out[k, SPLIT_GAIN] = -np.inf


def merge_splits(best, best_cat, other, other_cat) -> None:
    """Fold another shard's split table into ``best`` (in place): per node the higher gain,
    ties to the lower column. Any order of shards gives the same result."""
    take = (other[:, SPLIT_GAIN] > best[:, SPLIT_GAIN]) | (
        (other[:, SPLIT_GAIN] == best[:, SPLIT_GAIN]) & (other[:, SPLIT_COLUMN] >= 0)
        & ((best[:, SPLIT_COLUMN] < 0) | (other[:, SPLIT_COLUMN] < best[:, SPLIT_COLUMN])))
    best[take] = other[take]
    best_cat[take] = other_cat[take]
