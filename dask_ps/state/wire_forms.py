"""The forms in which a call's keys and values travel between a process and a shard, and
where a large pull is cut into pieces.

* :class:`RowBits`: a dense set of a range shard's rows, as a bitmap.
* :class:`KeyRef`: the keys of a push, named instead of sent (the keys of the pull before it,
  which the shard kept); :func:`with_keys` puts the keys back when the shard no longer
  holds them.
* :class:`Reordered`: a push's values, put in its keys' order as it is pickled.
* :func:`piece_bounds`: the pieces of a large pull of a hashed table from a remote shard.

Made by :mod:`~dask_ps.state.partition`, :mod:`~dask_ps.state.merging` and
:mod:`~dask_ps.state.client` (a pull's pieces), read by :mod:`~dask_ps.state.shard`,
:mod:`~dask_ps.state.table` and :mod:`~dask_ps.state.transport` (a push sent again with its
keys).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _kernels

__all__ = ["KeyRef", "MAX_PIECES", "PIECE_KEYS", "Reordered", "RowBits", "as_rows",
           "move_rows", "piece_bounds", "with_keys"]


def move_rows(values: np.ndarray, index: np.ndarray, out: np.ndarray, take: bool) -> np.ndarray:
    """``out = values[index]`` (``take``) or ``out[index] = values``, rows of 2-D arrays;
    a vector's (one column) as a 1-D loop, ~1.5-2x faster than moving rows.

    Parameters
    ----------
    values : numpy.ndarray, shape (n, ncols)
    index : numpy.ndarray of int64
        Shape (m,) with ``take`` (rows of ``values``), else (n,) (rows of ``out``).
    out : numpy.ndarray, shape (m, ncols) or (len(out), ncols)
        Filled and returned.
    take : bool
    """
    if values.ndim == 2 and values.shape[1] == 1:
        v, o = values.reshape(-1), out.reshape(-1)
        (_kernels.take_1d if take else _kernels.scatter_1d)(v, index, o)
    elif take:
        np.take(values, index, axis=0, out=out)
    else:
        out[index] = values
    return out



class RowBits(NamedTuple):
    """Distinct rows of one range shard as a bitmap: the wire form of a dense set of keys.

    Row ``r`` (an offset inside the shard) is in the set when bit ``r % 64`` of
    ``words[r // 64]`` is set. For a set holding more than 1 row in 32 this is smaller than
    the rows as int32 (10^6 of a shard's 10^6 rows: 125 kB instead of 4 MB), and the shard
    reads it in memory order. Made by :meth:`~dask_ps.state.partition.RangePartitioner.wire_keys`.

    Attributes
    ----------
    words : numpy.ndarray of uint64, shape (ceil(shard rows / 64),)
    count : int
        Number of rows in the set (set bits).
    """

    words: np.ndarray
    count: int

    @property
    def shape(self) -> tuple[int]:
        """``(count,)``, like the array of rows it stands for."""
        return (self.count,)

    @property
    def nbytes(self) -> int:
        """Bytes on the wire."""
        return self.words.nbytes

    def rows(self) -> np.ndarray:
        """The rows, ascending, shape (count,): int32 below 2^31 rows (half the bytes for
        the update rules to read), else int64."""
        small = 64 * self.words.shape[0] < 2**31
        return _kernels.bits_to_rows(self.words, np.empty(self.count,
                                                           np.int32 if small else np.int64))


class KeyRef:
    """The keys of a push, named instead of sent: they are the keys a pull of this process
    sent to the same shard (the pull-compute-push step), which the shard keeps under the
    pull's ``keys_id`` (see :meth:`~dask_ps.state.table.TableShard.named_keys`). On the wire
    only the name and count travel (16 bytes instead of 8 per key); the sender keeps the keys,
    to send them after all if the shard answers :class:`~dask_ps.exceptions.KeysNeededError`
    (see :func:`with_keys`).

    Parameters
    ----------
    id : tuple
        The pull's ``keys_id``: (process uid, serial number).
    count : int
        Number of keys.
    keys : numpy.ndarray or None
        The keys (sender's side only; None once received).
    """

    __slots__ = ("id", "count", "keys")

    def __init__(self, id: tuple, count: int, keys: np.ndarray | None = None) -> None:
        self.id, self.count, self.keys = id, int(count), keys

    def __reduce__(self):
        return KeyRef, (self.id, self.count)

    @property
    def shape(self) -> tuple[int]:
        """``(count,)``, like the array of keys it stands for."""
        return (self.count,)

    @property
    def nbytes(self) -> int:
        """Bytes of keys on the wire: none."""
        return 0


class Reordered:
    """The values of a push's piece, put in its keys' order when the piece is pickled
    rather than before: ``values[index]``, rows of the caller's ``values`` (n, ncols). So
    the first piece of a push named after a pull's pieces leaves without waiting for the
    others' values to be ordered, and the shard applies it while the next is put in order
    (see :func:`~dask_ps.state.merging.split_updates`). Pickles as the array it stands
    for; ``shape`` and ``nbytes`` are that array's.

    Parameters
    ----------
    values : numpy.ndarray
        Shape (n, ncols); the push's own copy (it must not change until sent).
    index : numpy.ndarray of int64
        Shape (m,): the row of ``values`` of each key of the piece.
    """

    __slots__ = ("values", "index")

    def __init__(self, values: np.ndarray, index: np.ndarray) -> None:
        self.values, self.index = values, index

    def array(self) -> np.ndarray:
        """``values[index]``, shape (m, ncols)."""
        v = self.values
        return move_rows(v, self.index, np.empty((self.index.shape[0], v.shape[1]), v.dtype), True)

    def __reduce_ex__(self, protocol):
        return self.array().__reduce_ex__(protocol)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.index.shape[0], self.values.shape[1])

    @property
    def nbytes(self) -> int:
        return self.index.shape[0] * self.values.shape[1] * self.values.itemsize


#: A pull of a hashed table sends a remote shard its keys in pieces of about this many
#: (:func:`piece_bounds`), each a call of its own: the shard looks up one piece while the
#: next travels, and its answer travels while the shard looks up the next. A 10^6-key pull
#: and push (4 pieces) took 0.85-0.92 of the time in one piece, paired runs in one cluster
#: (machine loaded to 5; the gain is larger with idle cores); in 8 pieces, 0.93-0.95 of the
#: time in 4 (medians of 50 and 100 paired repeats, 39.9 against 42.7 ms and 39.2 against
#: 41.3): the last piece's lookup, which nothing overlaps, is half as long.
PIECE_KEYS = 2**17
#: At most this many pieces per shard and pull.
MAX_PIECES = 8


def piece_bounds(n: int) -> list[tuple[int, int]]:
    """Where a pull cuts ``n`` keys of one remote shard into pieces: ``(start, stop)`` of
    each, in order; one piece below ``1.5 * PIECE_KEYS`` keys."""
    k = min(MAX_PIECES, (n + PIECE_KEYS // 2) // PIECE_KEYS)
    if k <= 1:
        return [(0, n)]
    cuts = [n * j // k for j in range(k + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def with_keys(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments of a ``push`` or ``push_pull`` call with each :class:`KeyRef` of its
    updates (the ``updates`` keyword or the first positional argument) replaced by its keys."""
    def unref(updates):
        return [(name, k.keys if isinstance(k, KeyRef) else k, v) for name, k, v in updates]
    if "updates" in kwargs:
        kwargs = dict(kwargs, updates=unref(kwargs["updates"]))
    elif args:
        args = (unref(args[0]),) + tuple(args[1:])
    return args, kwargs


def as_rows(keys: np.ndarray | RowBits) -> np.ndarray:
    """Keys as received by a shard, as an array of rows.

    Parameters
    ----------
    keys : numpy.ndarray or RowBits
        Offsets inside the shard (int32/int64, shape (n,)), returned as they are, or a bitmap
        of them, decoded (ascending, int32 below 2^31 rows, else int64).
    """
    return keys.rows() if isinstance(keys, RowBits) else keys
