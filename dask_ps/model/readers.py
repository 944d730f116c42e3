"""A checkpoint's reader tasks: rows of a stored table read a batch of chunks at a time on a
shard's worker, checked as they are read (the codecs the arrays name, their shapes, the keys,
every chunk's checksum), then dropped (:func:`check_part`: a restore checks before it touches
a table) or sent to the shards of the model that owns them (:func:`load_part`). Damage is
returned as the message of the :class:`~dask_ps.exceptions.CheckpointFormatError` it makes,
naming the checkpoint, table, array and rows. Used by :mod:`dask_ps.model.checkpoint`; the
writers are :mod:`dask_ps.model.writers`.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import CheckpointFormatError
from . import connection
from . import format as ck
from .writers import CODECS

__all__ = ["check_part", "load_part", "stored_rows"]


def stored_rows(path: str, name: str, t: dict, spec, r0: int, r1: int, with_slots: bool):
    """Rows ``[r0, r1)`` of a stored table, read and checked a batch of chunks at a time.

    Yields ``(plan, values, slots)`` per batch: ``plan`` places its keys on the shards of
    ``spec`` (:meth:`Partitioner.plan`), ``values`` (m, ncols) and ``slots`` (m, width each)
    are in stored order.

    Raises
    ------
    CheckpointFormatError
        An array of another shape than the table's, a chunk whose checksum fails or that
        is cut short, duplicate or out-of-range keys: naming the checkpoint, table and rows.
    """
    import zarr

    store = ck.zarr_store(path)
    n, where = t["n_keys"], f"checkpoint {path!r}, table {name!r}"

    def open_checked(role: str, shape: tuple, dtype):
        arr = zarr.open_array(store, path=f"{t['path']}/{role}", mode="r", zarr_format=3)
        codecs = [c.to_dict().get("name") for c in arr.metadata.codecs]
        if not set(codecs) <= CODECS:  # a codec named by the file decodes nothing
            raise CheckpointFormatError(f"{where}: array {role} is encoded with {codecs}; a "
                                        f"checkpoint's arrays hold {sorted(CODECS)} alone: "
                                        f"refusing to decode it")
        if arr.shape != shape or arr.dtype != np.dtype(dtype):
            raise CheckpointFormatError(f"{where}: array {role} is {arr.dtype} of shape "
                                        f"{arr.shape}, the table's metadata says "
                                        f"{np.dtype(dtype)} of shape {shape}")
        return arr

    values_arr = open_checked("values", (n, t["ncols"]), t["dtype"])
    keys_arr = open_checked("keys", (n,), np.int64) if spec.sparse else None
    slot_arrs = {k: open_checked(f"slots/{k}", (n, s["width"]), s["dtype"])
                 for k, s in t["slots"].items()} if with_slots else {}
    step = 16 * t["chunk_rows"]  # a batch of chunks at a time bounds the reader's memory
    for a in range(r0, r1, step):
        b = min(a + step, r1)
        try:
            keys = keys_arr[a:b] if keys_arr is not None else np.arange(a, b, dtype=np.int64)
        except ValueError as exc:
            raise _damaged(where, {"keys": keys_arr}, a, b, t["chunk_rows"], exc) from None
        plan, bad = spec.partitioner.plan(keys)
        if bad >= 0 or plan.n_unique != keys.shape[0]:
            raise CheckpointFormatError(f"{where}: rows {a}..{b} hold duplicate or "
                                        f"out-of-range keys")
        try:
            values = values_arr[a:b]
            slots = {k: arr[a:b] for k, arr in slot_arrs.items()}
        except ValueError as exc:  # a checksum that fails, a chunk cut short
            arrays = {"values": values_arr, **{f"slots/{k}": v for k, v in slot_arrs.items()}}
            raise _damaged(where, arrays, a, b, t["chunk_rows"], exc) from None
        yield plan, values, slots


def _damaged(where: str, arrays: dict, a: int, b: int, chunk_rows: int,
             exc: ValueError) -> CheckpointFormatError:
    """The error for rows ``[a, b)`` of ``arrays`` (role -> zarr array), one of which failed
    to read with ``exc``: naming the first array and chunk that fails alone (read again,
    chunk by chunk: the error path only), else the rows of the whole batch."""
    for role, arr in arrays.items():
        for c0 in range(a - a % chunk_rows, b, chunk_rows):
            try:
                arr[c0:min(c0 + chunk_rows, arr.shape[0])]
            except ValueError as one:
                return CheckpointFormatError(
                    f"{where}: array {role!r}, rows {c0}..{min(c0 + chunk_rows, arr.shape[0])}"
                    f" are damaged (its chunk {c0 // chunk_rows}): {one}")
    return CheckpointFormatError(f"{where}: rows {a}..{b} are damaged: {exc}")


def check_part(model, path: str, name: str, t: dict, spec, r0: int, r1: int,
                with_slots: bool) -> int | str:
    """Checker task: rows ``[r0, r1)`` read as :func:`load_part` reads them, and dropped.
    Returns their count, or the message of the :class:`CheckpointFormatError` they raise:
    damage is an outcome of the check, returned to the client (raised in a task, it would
    be logged by distributed's worker as a failed task)."""
    try:
        for _ in stored_rows(path, name, t, spec, r0, r1, with_slots):
            pass
    except CheckpointFormatError as exc:
        return str(exc)
    return r1 - r0


def load_part(model, path: str, name: str, t: dict, spec, r0: int, r1: int,
               with_slots: bool) -> int | str:
    """Loader task: rows ``[r0, r1)`` of a stored table, sent to their shards in ``model``;
    their count, or the damage found, returned as :func:`check_part` returns it."""
    try:
        for plan, values, slots in stored_rows(path, name, t, spec, r0, r1, with_slots):
            connection.set_rows(model, name, plan, values, slots)
    except CheckpointFormatError as exc:
        return str(exc)
    return r1 - r0
