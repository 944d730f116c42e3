"""Numba kernels that plan the keys of a call to a hashed table: distinct keys grouped by
shard and by ranges of their hash code (:func:`~dask_ps.state._hash_kernels.hash_code`).

One radix pass puts the keys in buckets (:func:`plan_hashed`), then repeats are found bucket
by bucket in a small table that stays in cache (:func:`dedup_buckets`), instead of one
random probe of a large table per key. A pull may send its keys before that dedup (which
then runs while the shards answer): of ~8.5 ms of CPU for 10^6 random keys, ~5 ms were left
before they leave, ~3 since the radix pass runs in two threads.

Kernels take arrays and scalars only and have pure-Python twins in
``tests/state/test_hash_kernels.py``.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.helper import halves, run
from ._hash_kernels import _GOLDEN, _shard_of, hash_code
from ._kernels import invert_permutation

_JIT = dict(cache=True, nogil=True)


#: Keys per bucket that :func:`plan_hashed` aims at: the radix pass writes to a few hundred
#: places (in cache), a bucket's dedup table (twice as many slots of 4 bytes) stays in the
#: L2 cache, and so does the range of a shard's index and rows that a bucket's keys visit
#: when the keys are a good part of the shard's.
BUCKET = 4096


@numba.njit(inline="always", **_JIT)
def _bucket_bits(n, n_shards):
    """Bits of hash code that split each shard's keys into buckets of about :data:`BUCKET`."""
    b = 0
    while b < 16 and (n_shards << b) * BUCKET < n:
        b += 1
    return b


@numba.njit(**_JIT)
def _bucket_ids(keys, n_shards, magic, b, ids):
    """``ids[i]``: the bucket of ``keys[i]`` (shard, then the top ``b`` bits of its code).
    Returns whether the keys are strictly ascending.

    A loop of its own: fused with the counting of :func:`plan_hashed`, the hashing waited on
    the counters' increments (4.1 ms for 10^6 keys, against 1.9 + 0.4 ms apart)."""
    shift = np.uint64(64 - b) if b else np.uint64(0)
    ascending = True  # strictly: then the keys are distinct
    prev = keys[0] if keys.shape[0] else 0
    for i in range(keys.shape[0]):
        k = keys[i]
        ascending &= (i == 0) | (k > prev)
        prev = k
        g = hash_code(k)
        top = np.int64(g >> shift) if b else 0
        ids[i] = np.uint32((_shard_of(g, n_shards, magic) << b) + top)
    return ascending


#: Slots of a bucket's dedup table per place in the bucket (a power of two), up to
#: :data:`SPARE_UP_TO` places; twice as many beyond (buckets of many repeats). Probes of a
#: table at most 1/8 full nearly always end at the first slot (no mispredicted branch):
#: 10^6 distinct keys deduplicated in 3.9 ms instead of 7.7 at 2 slots per place, and the
#: table (256 kB for a bucket of 2 :data:`BUCKET`) still stays in the L2 cache. Clearing
#: it per bucket is a small part: generation-tagged words instead (no clearing) checked
#: 10^6 distinct keys in 2.96 ms against 3.31, and a pull runs that check while its shards
#: answer (with no check at all, a 10^6-key remote pull was 0.75 ms shorter in a cluster).
SPARE = 8
SPARE_UP_TO = 2 * BUCKET


@numba.njit(inline="always", **_JIT)
def _table_bits(m):
    """log2 of the slots of the dedup table of a bucket of ``m`` places (at least 16 slots)."""
    want = SPARE * m if m <= SPARE_UP_TO else 2 * m
    tbits = 4
    while (1 << tbits) < want:
        tbits += 1
    return tbits


@numba.njit(**_JIT)
def count_buckets(keys, n_shards, magic, b, ids, count):
    """A plan's first pass, over one part of its keys: ``ids[i]``, the bucket of
    ``keys[i]`` (:func:`_bucket_ids`), and ``count[d]``, the part's keys in bucket ``d``
    (``count`` of at least ``n_shards << b`` entries). Returns whether the keys are strictly
    ascending."""
    nb = n_shards << b
    ascending = _bucket_ids(keys, n_shards, magic, b, ids)
    count[:nb] = 0
    for i in range(keys.shape[0]):
        count[np.int64(ids[i])] += 1
    return ascending


@numba.njit(**_JIT)
def bucket_starts(count, parts, n_shards, b, offsets):
    """A plan's second pass: ``count[p, d]`` (keys of part ``p`` in bucket ``d``) becomes
    where they start in the buckets (a bucket holds its parts in order), and ``offsets``
    (``n_shards + 1``) where each shard's buckets start."""
    at = 0
    for d in range(n_shards << b):
        if d & ((1 << b) - 1) == 0:
            offsets[d >> b] = at
        for p in range(parts):
            c = count[p, d]
            count[p, d] = at
            at += c
    offsets[n_shards] = at


@numba.njit(**_JIT)
def scatter_keys(keys, ids, pos, local, dest, ordered, base):
    """A plan's radix pass, over the part of its keys from position ``base``: each key to
    the next place of its bucket (``pos[d]``, advanced): ``local[j] = keys[i]`` and, with
    ``ordered``, ``dest[j] = base + i`` (``order``), else ``dest[base + i] = j``
    (``inverse``). Returns whether every key kept its position.

    Writing ``order`` here costs less than a pass of its own: 10^6 keys in two halves took
    1.79 ms, the keys alone 1.38 ms and ``order`` alone 1.47 more."""
    identity = True
    for i in range(keys.shape[0]):
        d = np.int64(ids[i])
        j = pos[d]
        pos[d] = j + 1
        local[j] = keys[i]
        if ordered:
            dest[j] = base + i
        else:
            dest[base + i] = j
        identity &= j == base + i
    return identity


def plan_hashed(keys, n_shards, magic, count, ids, table, local, inverse, order,
                defer_inverse, defer_dedup):
    """Deduplicate the keys of a hashed table and group them by shard and hash-code range.

    One pass finds the bucket of each key and counts the buckets (:func:`count_buckets`)
    and one radix pass puts the keys in them (:func:`scatter_keys`): by shard, then by the
    top bits of their hash code (about :data:`BUCKET` keys each, so a shard's buckets run
    in ascending code ranges), each bucket in input order; ``inverse`` gets the place of
    each key there. Both passes run in two halves of the keys, the second on the process's
    helper thread (:func:`~dask_ps.kernels.helper.run`; each bucket holds the first
    half's keys, then the second's, as one pass would put them): 10^6 random keys over
    2 shards planned in 2.8-3.0 ms instead of 3.9-4.1 (3 runs of 60 alternated calls),
    time during which a pull's shards wait for their first keys.

    Inside a bucket (in cache), repeats are found in a small open-addressing table of
    positions in the bucket (4 bytes a slot, :data:`SPARE` slots per place, cleared for
    each bucket) and dropped (the first appearance stays). No sort: the shards need the
    code ranges (a bucket's keys visit a cache-sized range of their index and rows), not the
    order inside one, and a key's value is then found in the bucket it went to, which the
    caller's expansion reads as a few hundred sequential streams instead of at random.
    Strictly ascending keys (distinct by construction: ``np.unique``'s output, CSR columns)
    skip the dedup.

    Parameters
    ----------
    keys : int64 array, shape (n,)
        Any order, repeats allowed.
    n_shards : int
    magic : uint64
        :func:`~dask_ps.state._hash_kernels.fastmod_magic` of ``n_shards`` (unused for 1
        shard).
    count : int64 array, shape (2, >= n_shards * 2**16)
        Scratch; nothing is expected of its content.
    ids : uint32 array, shape (>= n,)
        Scratch for the bucket of each key.
    table : uint32 array, shape (slots,)
        Scratch for the dedup table; a call whose biggest bucket needs more slots
        (:func:`table_size`) makes a table of its own.
    local : int64 array, shape (n,)
        Filled with the distinct keys in its first ``n_unique`` entries.
    inverse : int64 array, shape (n,)
        Filled with the position in ``local`` of each input key; with ``defer_inverse``
        and repeats, with its place in the buckets (before repeats were dropped): the caller
        finishes it with :func:`fill_inverse` and ``runs`` (while the shards answer a pull).
        Left unfilled when the dedup is left to the caller (``order`` tells the same).
    order : int64 array, shape (n,)
        Filled, when the dedup is left to the caller, with the input position of each place
        (``inverse``'s inverse permutation): what a pull needs to put the shards' answers in
        the caller's order as they come, and written by the radix pass for less than
        ``inverse`` costs (10^6 keys: 2.2 against 2.5 ms), where inverting ``inverse``
        afterwards cost 1.1 ms more; else scratch.
    defer_inverse : bool
    defer_dedup : bool
        Leave the dedup to the caller (:func:`dedup_buckets`, while the shards answer a
        pull that sends every place: a shard gives repeats the same row) when the first
        :data:`DEDUP_SAMPLE` places have no repeat.

    Returns
    -------
    n_unique : int
    offsets : int64 array, shape (n_shards + 1,)
        ``local[offsets[s]:offsets[s + 1]]`` go to shard ``s``.
    runs : int64 array, shape (n,) or (0,)
        Position in ``local`` of each place in the buckets, when there were repeats and
        ``defer_inverse``; else empty (``inverse`` is complete).
    identity : bool
        Whether the keys were distinct and in that order already (``inverse`` = arange);
        with a dedup left to the caller, whether ``order`` is arange.
    ends : int64 array, shape (n_shards << b,) or (0,)
        The end of each bucket in ``local`` when the dedup was left to the caller: then
        ``n_unique`` is ``n``, ``local`` holds every place and ``order`` is complete
        (``inverse`` is not).
    """
    n = keys.shape[0]
    b = _bucket_bits(n, n_shards)
    parts = halves(n)
    ascending = all(run(lambda i, j: count_buckets(
        keys[i:j], n_shards, magic, b, ids[i:j], count[0 if i == 0 else 1]) and (
        i == 0 or keys[i - 1] < keys[i]), parts))
    offsets = np.zeros(n_shards + 1, np.int64)
    bucket_starts(count, len(parts), n_shards, b, offsets)
    ordered = defer_dedup and not ascending  # (ascending keys are distinct: no dedup)
    dest = order if ordered else inverse
    identity = all(run(lambda i, j: scatter_keys(
        keys[i:j], ids[i:j], count[0 if i == 0 else 1], local, dest, ordered, i), parts))
    ends = count[len(parts) - 1, : n_shards << b]  # the last part's ends are the buckets'
    u, runs, identity, ends = _finish_plan(local, ends, offsets, table, inverse, order,
                                           ascending, identity, ordered, defer_inverse,
                                           defer_dedup)
    return u, offsets, runs, identity, ends


@numba.njit(**_JIT)
def _finish_plan(local, ends, offsets, table, inverse, order, ascending, identity, ordered,
                 defer_inverse, defer_dedup):
    """:func:`plan_hashed` once the keys are in their buckets: the dedup (or its sample),
    ``inverse``; returns ``(n_unique, runs, identity, ends)``."""
    n = local.shape[0]
    if ascending:
        return n, inverse[:0], identity, ends[:0]
    if defer_dedup and not dedup_buckets(local, ends, table, offsets, True, DEDUP_SAMPLE, 0)[0]:
        return n, inverse[:0], identity, ends.copy()  # the dedup waits
    if ordered:  # repeats among the first places: deduplicated now, by ``inverse``
        invert_permutation(order, inverse)
    _, u, runs = dedup_buckets(local, ends, table, offsets, False, n, 0)
    if runs.shape[0] and not defer_inverse:
        fill_inverse(runs, inverse)
        runs = runs[:0]
    return u, runs, identity and u == n, ends[:0]


#: Places whose repeats :func:`plan_hashed` looks for before it lets the dedup wait
#: (``defer_dedup``): keys with repeats among their first buckets are deduplicated at once.
DEDUP_SAMPLE = 4096


@numba.njit(**_JIT)
def dedup_buckets(local, ends, table, offsets, check, min_places, from_bucket):
    """Drop the repeats of the keys in buckets (see :func:`plan_hashed`), bucket by bucket.

    Parameters
    ----------
    local : int64 array, shape (n,)
        Keys by bucket; compacted in place (distinct keys first, in the order of their first
        place), unless ``check``.
    ends : int64 array, shape (n_shards << b,)
        End of each bucket in ``local``.
    table : uint32 array
        Scratch (see :func:`plan_hashed`).
    offsets : int64 array, shape (n_shards + 1,)
        Set to the distinct keys' offsets per shard, unless ``check``.
    check : bool
        Only look for a repeat: nothing is written but the scratch; stop at the first repeat,
        or at the end of the bucket that reaches ``min_places`` places.
    min_places : int
    from_bucket : int
        With ``check``: the bucket to start at (its places and those after, up to the
        bucket that reaches place ``min_places``), so that a long check can be made in
        slices (see :func:`~dask_ps.state.partition.completion`).

    Returns
    -------
    repeat : bool
        Whether a repeat was found.
    n_unique : int
        Distinct keys (without ``check``).
    runs : int64 array, shape (n,) or (0,)
        Position in ``local`` of each place, when there were repeats (without ``check``).
    """
    nb = ends.shape[0]
    n = ends[nb - 1] if nb else 0
    per_shard = nb // (offsets.shape[0] - 1)
    biggest = 0
    start = 0
    for d in range(nb):
        biggest = max(biggest, ends[d] - start)
        start = ends[d]
    if (1 << _table_bits(biggest)) > table.shape[0]:  # a bucket of many repeats
        table = np.empty(1 << _table_bits(biggest), np.uint32)
    runs = local[:0]
    u = 0
    d0 = from_bucket if check else 0
    start = ends[d0 - 1] if d0 > 0 else 0
    for d in range(d0, nb):
        if check and start >= min_places:
            break
        end = ends[d]
        first = u
        tbits = _table_bits(end - start)  # the bucket's table, cleared
        tmask = (1 << tbits) - 1
        tshift = np.uint64(64 - tbits)
        table[: 1 << tbits] = 0
        # the table holds 1 + a place of the bucket's keys seen: where they are in
        # ``local``, from ``base``: moved down over the repeats, unless ``check``
        base = start if check else first
        for j in range(start, end):
            k = local[j]
            x = np.uint64(k)
            t = np.int64(((x ^ (x >> np.uint64(29))) * _GOLDEN) >> tshift)
            while True:
                w = np.int64(table[t])
                if w == 0:  # new: kept, moved down over the repeats before it
                    table[t] = np.uint32((j if check else u) - base + 1)
                    if not check:
                        local[u] = k
                    v = u
                    u += 1
                    break
                if local[base + w - 1] == k:
                    if check:
                        return True, u, runs
                    v = first + w - 1
                    if runs.shape[0] == 0:  # the first repeat: every place so far was its own
                        runs = np.empty(n, np.int64)
                        for q in range(j):
                            runs[q] = q
                    break
                t = (t + 1) & tmask
            if runs.shape[0]:
                runs[j] = v
        if not check and d % per_shard == per_shard - 1:  # a shard's last bucket
            offsets[d // per_shard + 1] = u
        start = end
    return runs.shape[0] > 0, u, runs


def table_size(n: int) -> int:
    """Slots of a dedup table for buckets of up to ``n`` places (see :func:`_table_bits`)."""
    return 1 << _table_bits(n)


@numba.njit(**_JIT)
def fill_inverse(runs, inverse):
    """``inverse[i] = runs[inverse[i]]``: from the place of each input key in the buckets to
    its position in ``local`` (see :func:`plan_hashed`)."""
    for i in range(inverse.shape[0]):
        inverse[i] = runs[inverse[i]]


# -- the shard's index -------------------------------------------------------------------------
