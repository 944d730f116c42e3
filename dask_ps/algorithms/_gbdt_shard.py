"""The shards' side of GBDT on the PS: the layout of the table ``"hist"``, a step's
instructions, and the update rule that runs the step where the histograms are summed.

See :mod:`._gbdt_ps` for the protocol. A step reaches a shard as values pushed with the
histograms (:func:`encode_step`); when the push that completes a BSP clock is applied,
:class:`StepRule` runs :func:`shard_step` next to the shard's columns and writes the best
split of each evaluated node to the answer rows, which the workers pull
(:func:`read_answers`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from ..state.optimizers import OPTIMIZERS, Add
from ._gbdt_bins import BinMapper
from ._gbdt_siblings import take_pushed
from ._gbdt_splits import N_SPLIT_COLS, find_splits, merge_splits

__all__ = ["ROWS_PER_KEY", "TABLE", "HistLayout", "Step", "StepRule", "column_mask",
           "decode_step", "encode_step", "read_answers", "shard_setup", "shard_step"]

#: Histogram rows (of 3 sums each) per key of the table: one, so that a push carries only the
#: rows holding data (:func:`~._gbdt_kernels.nonzero_rows`; with 32 rows per key, 90 % of
#: the keys of LightGBM's example held some data, against 27 % of the rows).
ROWS_PER_KEY = 1
#: The table's name.
TABLE = "hist"


@dataclass(frozen=True)
class HistLayout:
    """Where histograms live in the table ``"hist"``: per shard a block of ``block`` keys,
    ``3 * rows_per_key`` float64 columns each.

    Shard ``s`` owns the columns ``bounds[s]:bounds[s + 1]`` (histogram rows
    ``row0[s]:row0[s + 1]``). In its block, slot ``q`` (push slots ``0 .. n_push - 1``,
    then pool slots) holds one node's rows, padded to ``rows_pad``, as ``keys_per_slot``
    keys; then come the scalars (``n_scalar`` values, summed in shard 0's block), the
    step's instructions (:func:`encode_step`, ``n_instr`` values) and the step's answer
    (per evaluated node its best split and category bitset, ``n_cat_words`` words as
    float64, then a copy of the summed scalars).
    """

    n_shards: int
    bounds: np.ndarray
    row0: np.ndarray
    rows_per_key: int
    keys_per_slot: int
    n_push: int
    n_pool: int
    n_scalar: int
    n_cat_words: int = 1

    @classmethod
    def make(cls, mapper: BinMapper, n_shards: int, n_push: int, n_pool: int,
             n_scalar: int) -> HistLayout:
        bounds = mapper.column_bounds(n_shards)
        row0 = mapper.hist_offsets[bounds].astype(np.int64)
        most = max(1, int(np.diff(row0).max(initial=0)))
        return cls(n_shards, bounds, row0, ROWS_PER_KEY, -(-most // ROWS_PER_KEY), n_push,
                   n_pool, n_scalar, mapper.n_cat_words)

    @property
    def rows_pad(self) -> int:
        return self.keys_per_slot * self.rows_per_key

    @property
    def ncols(self) -> int:
        return 3 * self.rows_per_key

    def _keys(self, n_values: int) -> int:
        return -(-n_values // self.ncols)

    @property
    def scalar_keys(self) -> int:
        return self._keys(self.n_scalar)

    @property
    def n_instr(self) -> int:
        """Values of a step's instructions at most (:func:`encode_step`)."""
        return _HEAD + 3 * self.n_push + 4 * self.n_pool

    @property
    def answer_width(self) -> int:
        """Values of one node's answer: its split, then its category bitset."""
        return N_SPLIT_COLS + self.n_cat_words

    @property
    def first_scalar(self) -> int:
        return (self.n_push + self.n_pool) * self.keys_per_slot

    @property
    def first_instr(self) -> int:
        return self.first_scalar + self.scalar_keys

    @property
    def first_answer(self) -> int:
        return self.first_instr + self._keys(self.n_instr)

    @property
    def block(self) -> int:
        return self.first_answer + self._keys(1 + self.n_pool * self.answer_width
                                              + self.n_scalar)

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

    @property
    def instr_keys(self) -> int:
        """Keys of a step's instructions in one shard's block, at most."""
        return self._keys(self.n_instr)

    @property
    def push_size(self) -> int:
        """Keys of a push, at most (:meth:`fill_push`)."""
        return (self.n_shards * (self.n_push * self.rows_pad + self.instr_keys)
                + self.scalar_keys)

    def fill_push(self, rows_of, scalars: np.ndarray | None, instr: np.ndarray,
                  keys: np.ndarray, values: np.ndarray) -> int:
        """Write a step's push into ``keys`` (int64) and ``values`` (float64, ``ncols``
        columns), at least :attr:`push_size` long: shard by shard, the histogram rows
        holding data (``rows_of(s, key0, keys, values, at)`` writes shard ``s``'s from
        ``at`` and returns the new end, ``key0`` the key of its first row of push slot 0:
        :func:`~._gbdt_kernels.nonzero_rows` of a push buffer, or
        :func:`~._gbdt_kernels.hist_rows_dense`), then (shard 0) the ``scalars`` if given,
        then the instructions ``instr`` (:func:`encode_step`). Keys come out ascending (a
        plan without reordering). Returns how many were written."""
        at = 0
        for s in range(self.n_shards):
            at = rows_of(s, s * self.block, keys, values, at)
            if s == 0 and scalars is not None:
                at = self._put_area(scalars, self.first_scalar, keys, values, at)
            at = self._put_area(instr, s * self.block + self.first_instr, keys, values, at)
        return at

    def _put_area(self, flat: np.ndarray, first_key: int, keys: np.ndarray,
                  values: np.ndarray, at: int) -> int:
        k = self._keys(flat.shape[0])
        rows = values[at: at + k]
        rows[:] = 0.0
        rows.reshape(-1)[: flat.shape[0]] = flat
        keys[at: at + k] = np.arange(first_key, first_key + k)
        return at + k

    def answer_keys(self, n_nodes: int, scalars: bool) -> np.ndarray:
        """Keys of every shard's answer about ``n_nodes`` nodes (and the scalars)."""
        k = self._keys(1 + n_nodes * self.answer_width + (self.n_scalar if scalars else 0))
        return (np.arange(self.n_shards, dtype=np.int64)[:, None] * self.block
                + self.first_answer + np.arange(k, dtype=np.int64)[None, :]).ravel()


#: Values before the arrays in a step's instructions (:func:`encode_step`).
_HEAD = 10


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

# State of the shards of this process by id of their table's memory: the shard's columns and
# split parameters, put there by shard_setup.
_SHARDS: dict[int, tuple] = {}


def _root(values: np.ndarray) -> np.ndarray:
    while isinstance(values.base, np.ndarray):
        values = values.base
    return values


def shard_setup(keys, values, slots, layout: HistLayout, hist_offsets, n_bins, is_cat,
                params, colsample: float, seed: int) -> int:
    """Keep what a step needs next to a shard of ``"hist"`` (run once per fit, from the
    driver, through :meth:`PSModel.map_shards`); returns the shard's index."""
    s = int(keys[0]) // layout.block
    root = _root(values)
    state = dict(shard=s, layout=layout, lo=int(layout.bounds[s]),
                 hi=int(layout.bounds[s + 1]), row0=int(layout.row0[s]),
                 offsets=hist_offsets, n_bins=n_bins, is_cat=is_cat, params=params,
                 colsample=colsample, seed=seed, mask=None)
    _SHARDS[id(root)] = (weakref.ref(root), state)
    weakref.finalize(root, _SHARDS.pop, id(root), None)
    return s


class Step(NamedTuple):
    """A step's instructions to the shards (the same for every shard).

    Attributes
    ----------
    seq : int
        The step's number in the fit (> 0), echoed in the answers: an answer without it
        comes from a shard that did not run the step.
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
    n_tasks : int
        Tasks of the fit: the shard runs the step once each has pushed (every task's push
        adds 1 to the instructions' first value, the arrival count).
    """

    seq: int
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
    n_tasks: int = 1


def encode_step(step: Step) -> np.ndarray:
    """``step`` as float64 values (exact: small integers and the two units), pushed with
    the histograms so that the shard runs the step when the push is applied."""
    root = step.roots is not None
    arrays = ([step.roots] if root else [step.parent, step.small_to, step.large_to]) + \
        [step.slots] + ([] if step.totals is None else [np.ravel(step.totals)])
    head = [1.0, step.seq, step.rnd, step.n_build, float(root), step.grad_unit,
            step.hess_unit, len(step.slots), float(step.totals is not None), step.n_tasks]
    return np.concatenate([np.array(head, np.float64)] +
                          [np.asarray(a, np.float64) for a in arrays])


def decode_step(values: np.ndarray) -> Step:
    """The :class:`Step` of :func:`encode_step`'s values."""
    seq, rnd, n_build = int(values[1]), int(values[2]), int(values[3])
    root, n = values[4] == 1, int(values[7])
    at = _HEAD

    def take(k):
        nonlocal at
        at += k
        return values[at - k: at]

    ints = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    empty = np.zeros(0, np.int64)
    if root:
        roots, parent, small_to, large_to = ints(take(n_build)), empty, empty, empty
    else:
        roots = None
        parent, small_to, large_to = (ints(take(n_build)) for _ in range(3))
    slots = ints(take(n))
    totals = take(3 * n).reshape(n, 3).copy() if values[8] == 1 else None
    return Step(seq, rnd, n_build, roots, parent, small_to, large_to, slots, totals,
                float(values[5]), float(values[6]), int(values[9]))


@dataclass(frozen=True)
class StepRule(Add):
    """The update rule of ``"hist"``: add the pushed rows, then, once every task's push
    of a step is in (the arrival count of :func:`encode_step`), run the step
    (:func:`shard_step`) — so the push that completes a BSP clock on a shard also answers
    it, and a worker's pull of the answer is the step's only round trip.

    The pushed sums are exact in any order (quantized gradients, :mod:`._gbdt_kernels`), so
    a clock's pushes, which hold different rows (only those with data), are added one by
    one instead of merged first (``exact_sums``), each as it arrives, even under BSP
    (``on_arrival``: the pulls read only the answer rows, written once every push of the
    step is in), so an early task's push is added while the last one is on its way.

    Registered among the optimizers (``"gbdt_step"``), so that a table restored from a
    checkpoint (recovery from a lost worker) gets it back; the fit then runs
    :func:`shard_setup` again.
    """

    name: ClassVar[str] = "gbdt_step"
    exact_sums: ClassVar[bool] = True
    on_arrival: ClassVar[bool] = True

    def step(self, w, slots, rows, g):
        super().step(w, slots, rows, g)
        _after_push(w)

    def step_bits(self, w, slots, rows, g):
        super().step_bits(w, slots, rows, g)
        _after_push(w)


OPTIMIZERS.setdefault(StepRule.name, StepRule)


def _after_push(values: np.ndarray) -> None:
    entry = _SHARDS.get(id(_root(values)))
    if entry is None:
        return
    st = entry[1]
    L: HistLayout = st["layout"]
    instr = values[L.first_instr: L.first_answer].reshape(-1)
    if instr[0] == 0.0 or instr[0] != instr[_HEAD - 1]:
        return  # no step, or not every task's push of it, yet
    step = decode_step(instr)
    instr[:] = 0.0
    shard_step(values, st, step)


def shard_step(values: np.ndarray, st: dict, step: Step) -> None:
    """One step on a shard of ``"hist"`` (``values``: its rows): the summed push becomes
    pool histograms (roots copied; siblings expanded), the push area is zeroed, and the
    evaluated nodes' best splits over this shard's columns are written to the answer area
    (shard 0 adds the summed scalars at a root step, then zeroes them)."""
    L: HistLayout = st["layout"]
    n_slots = L.n_push + L.n_pool
    hist = values[: n_slots * L.keys_per_slot].reshape(n_slots, L.rows_pad, 3)
    push, pool = hist[: L.n_push], hist[L.n_push:]
    if step.roots is not None:
        none = np.full(step.n_build, -1, np.int64)
        take_pushed(pool, none, push[: step.n_build], step.roots, none)
    elif step.n_build:
        take_pushed(pool, step.parent, push[: step.n_build], step.small_to, step.large_to)
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
    splits = np.empty((n, N_SPLIT_COLS))
    split_cat = np.empty((n, L.n_cat_words), np.uint32)
    find_splits(pool, step.slots, st["row0"], st["lo"], st["hi"], st["offsets"], st["n_bins"],
                st["is_cat"], st["mask"][1], totals, st["params"], step.grad_unit,
                step.hess_unit, splits, split_cat)
    answer = values[L.first_answer:].reshape(-1)
    answer[0] = step.seq
    answer = answer[1:]
    A = L.answer_width
    rows = answer[: n * A].reshape(n, A)
    rows[:, :N_SPLIT_COLS] = splits
    rows[:, N_SPLIT_COLS:] = split_cat
    if st["shard"] == 0 and step.roots is not None:
        area = values[L.first_scalar: L.first_instr].reshape(-1)
        answer[n * A: n * A + L.n_scalar] = area[: L.n_scalar]
        area[:] = 0.0


def read_answers(values: np.ndarray, layout: HistLayout, n: int, scalars: bool,
                 seq: int) -> tuple:
    """The merged best splits of ``n`` nodes from the pulled answer rows of every shard
    (:meth:`HistLayout.answer_keys`): ``(splits, split_cat, scalars or None)``.

    Raises
    ------
    RuntimeError
        A shard did not answer step ``seq`` (it lost the fit's state, e.g. recreated after
        a lost worker without :func:`shard_setup`): no split is made from a stale answer.
    """
    L = layout
    per = values.reshape(L.n_shards, -1)
    stale = np.flatnonzero(per[:, 0] != seq)
    if stale.size:
        raise RuntimeError(f"GBDT: shard {int(stale[0])} of table {TABLE!r} did not run step "
                           f"{seq} (it answered step {int(per[stale[0], 0])}): the shard lost "
                           f"the fit's state")
    per = per[:, 1:]
    A = L.answer_width
    splits = split_cat = None
    for s in range(L.n_shards):
        rows = per[s, : n * A].reshape(n, A)
        sp_, cat = np.ascontiguousarray(rows[:, :N_SPLIT_COLS]), \
            np.ascontiguousarray(rows[:, N_SPLIT_COLS:]).astype(np.uint32)
        if splits is None:
            splits, split_cat = sp_, cat
        else:
            merge_splits(splits, split_cat, sp_, cat)
    sc = per[0, n * A: n * A + L.n_scalar].copy() if scalars else None
    return splits, split_cat, sc
