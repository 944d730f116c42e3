"""A sparse table's rows cut into key ranges, one per writer of a checkpoint (or reader of a
load onto another number of shards): each shard samples and counts its keys
(:func:`sample_keys`, :func:`count_below`, run next to the shards by ``Shard.map_rows``), the
driver picks splitters (:func:`split_sorted`) and whole chunks (:func:`align_up`), and each
writer gathers its range (:func:`rows_in_range`; a dense table's writer takes contiguous
slices instead, :func:`rows_in_slice`). Used by :mod:`dask_ps.model.checkpoint`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["align_up", "count_below", "rows_in_range", "rows_in_slice", "sample_keys",
           "split_sorted"]

#: Keys a shard-side scan (:func:`count_below`) reads at a time.
_SCAN_KEYS = 1 << 22


def sample_keys(keys, values, slots, n: int, seed: int):
    """Count of rows and a sorted random sample of at most ``n`` of their keys."""
    rng = np.random.default_rng(seed)
    pick = keys if keys.shape[0] <= n else keys[rng.choice(keys.shape[0], n, replace=False)]
    return int(keys.shape[0]), np.sort(pick)


def count_below(keys, values, slots, bounds: np.ndarray) -> np.ndarray:
    """Number of keys below each of ``bounds`` (ascending), shape (len(bounds),); the keys
    are read in slices (no int64 per key of a shard that may hold 10^8 of them)."""
    counts = np.zeros(bounds.shape[0] + 1, np.int64)
    for a in range(0, keys.shape[0], _SCAN_KEYS):
        bucket = np.searchsorted(bounds, keys[a:a + _SCAN_KEYS], side="right")
        counts += np.bincount(bucket, minlength=bounds.shape[0] + 1)  # bucket: bounds <= key
    return np.cumsum(counts)[:-1]


def rows_in_range(keys, values, slots, lo, hi, extra: int, with_slots: bool):
    """Rows with ``lo <= key < hi`` plus the ``extra`` smallest keys ``>= hi``, by key.

    ``lo``/``hi`` None mean unbounded. Returns ``(keys, values, slots)`` copies. The shard's
    keys are scanned :data:`_SCAN_KEYS` at a time, so that besides the rows returned only
    a slice's worth of temporaries is made, not an index of every key of the shard.
    """
    sel, above = [], np.empty(0, np.int64)
    for a in range(0, keys.shape[0], _SCAN_KEYS):
        part = keys[a:a + _SCAN_KEYS]
        mask = np.ones(part.shape[0], bool) if lo is None else part >= lo
        if hi is not None:
            mask &= part < hi
        sel.append(np.flatnonzero(mask) + a)
        if extra and hi is not None:  # the smallest keys >= hi so far, at most ``extra``
            above = np.concatenate([above, np.flatnonzero(part >= hi) + a])
            if above.shape[0] > extra:
                above = above[np.argpartition(keys[above], extra - 1)[:extra]]
    sel = np.concatenate(sel + [above]) if sel else above
    sel = sel[np.argsort(keys[sel], kind="stable")]
    return keys[sel], values[sel], ({k: v[sel] for k, v in slots.items()} if with_slots
                                    else {})


def rows_in_slice(keys, values, slots, a: int, b: int, with_slots: bool):
    """A dense shard's rows of global keys ``[a, b)`` it holds: ``(first key, values,
    slots)``, copies of contiguous slices (no key array, no sort).

    ``keys`` is the ``(start, stop)`` range of the shard's keys (``Shard.map_rows`` with
    ``key_range=True``); the rows returned are those of ``[max(a, start), min(b, stop))``,
    none when they do not meet.
    """
    start, stop = keys
    lo, hi = max(a, start), max(min(b, stop), max(a, start))
    return lo, values[lo - start:hi - start].copy(), (
        {k: v[lo - start:hi - start].copy() for k, v in slots.items()} if with_slots else {})


def align_up(x: int, chunk: int) -> int:
    """``x`` rounded up to a multiple of ``chunk``: where a writer's whole chunks start."""
    return -(-x // chunk) * chunk


def split_sorted(samples: list, counts: list, n_parts: int) -> np.ndarray:
    """``n_parts - 1`` ascending splitter keys that cut keys spread over shards (each
    described by a sorted sample and its count) into parts of about equal size."""
    keys = np.concatenate(samples) if samples else np.empty(0, np.int64)
    weights = np.concatenate([np.full(s.shape[0], c / max(s.shape[0], 1))
                              for s, c in zip(samples, counts)]) if samples else keys
    order = np.argsort(keys, kind="stable")
    keys, cum = keys[order], np.cumsum(weights[order])
    if keys.shape[0] == 0:
        return np.empty(0, np.int64)
    targets = cum[-1] * np.arange(1, n_parts) / n_parts
    return np.unique(keys[np.minimum(np.searchsorted(cum, targets), keys.shape[0] - 1)])
