"""A checkpoint's readers: each stored array opened once, in the client, and checked (the
codecs it names, its shape and dtype: :func:`open_arrays`), then its rows read a batch of
chunks at a time by tasks on the shards' workers, checked as they are read (the keys, every
chunk's checksum), then dropped (:func:`check_part`: a restore checks before it touches a
table) or sent to the shards of the model that owns them (:func:`load_part`). Damage is
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

__all__ = ["check_part", "load_part", "open_arrays", "stored_rows"]


def open_arrays(path: str, name: str, t: dict, spec, with_slots: bool,
                metadata: dict | None = None) -> dict:
    """The arrays of table ``name`` (``t``, its description in the version's metadata) in
    the version at ``path``, opened for reading and checked: ``{"values": ..., "keys": ...
    (a sparse table's), "slots/<slot>": ... (with ``with_slots``)}``, zarr arrays that the
    reader tasks take (pickled with their metadata: a task reads no ``zarr.json``).

    ``metadata`` (array path in the version -> its ``zarr.json`` parsed, e.g.
    :attr:`CheckpointInfo.arrays <dask_ps.model.format.CheckpointInfo>`, as read and
    checked by :func:`~dask_ps.model.format.latest`): an array found there is opened with
    it, its ``zarr.json`` not read again; the others are read here, once each.

    Raises
    ------
    CheckpointFormatError
        An array whose metadata is no zarr v3 array's, or unreadable, encoded with other
        codecs than :data:`~dask_ps.model.writers.CODECS` (its chunks are not decoded), or
        of another shape or dtype than the table's: naming the checkpoint, table and array.
    """
    import zarr
    from zarr.storage import StorePath

    store = ck.zarr_store(path, read_only=True)
    n, where = t["n_keys"], f"checkpoint {path!r}, table {name!r}"
    metadata = metadata or {}

    def open_checked(role: str, shape: tuple, dtype):
        at = f"{t['path']}/{role}"
        try:
            if at in metadata:  # as read and checked already: not read again
                meta = metadata[at]
                if not (isinstance(meta, dict) and meta.get("zarr_format") == 3):
                    raise ValueError("not the metadata of a zarr v3 array")
                arr = zarr.Array(zarr.AsyncArray(dict(meta), StorePath(store, at)))
            else:
                arr = zarr.open_array(store, path=at, mode="r", zarr_format=3)
        except Exception as exc:  # unreadable, or no array's metadata
            raise CheckpointFormatError(f"{where}: array {role}: its zarr.json is missing, "
                                        f"unreadable or not a zarr array's metadata "
                                        f"({type(exc).__name__}: {exc})") from None
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

    arrays = {"values": open_checked("values", (n, t["ncols"]), t["dtype"])}
    if spec.sparse:
        arrays["keys"] = open_checked("keys", (n,), np.int64)
    if with_slots:
        arrays.update({f"slots/{k}": open_checked(f"slots/{k}", (n, s["width"]), s["dtype"])
                       for k, s in t["slots"].items()})
    return arrays


def stored_rows(path: str, name: str, t: dict, spec, r0: int, r1: int, arrays: dict):
    """Rows ``[r0, r1)`` of a stored table, read from its ``arrays`` (:func:`open_arrays`)
    and checked a batch of chunks at a time.

    Yields ``(plan, values, slots)`` per batch: ``plan`` places its keys on the shards of
    ``spec`` (:meth:`Partitioner.plan`), ``values`` (m, ncols) and ``slots`` (m, width each,
    those ``arrays`` holds) are in stored order.

    Raises
    ------
    CheckpointFormatError
        A chunk whose checksum fails or that is cut short, duplicate or out-of-range keys:
        naming the checkpoint, table and rows.
    """
    where = f"checkpoint {path!r}, table {name!r}"
    values_arr, keys_arr = arrays["values"], arrays.get("keys")
    slot_arrs = {role[len("slots/"):]: arr for role, arr in arrays.items()
                 if role.startswith("slots/")}
    step = 16 * t["chunk_rows"]  # a batch of chunks at a time bounds the reader's memory
    for a in range(r0, r1, step):
        b = min(a + step, r1)
        try:
            keys = keys_arr[a:b] if keys_arr is not None else np.arange(a, b, dtype=np.int64)
        except ValueError as exc:
            raise _damaged(path, where, {"keys": keys_arr}, a, b, t["chunk_rows"],
                           exc) from None
        plan, bad = spec.partitioner.plan(keys)
        if bad >= 0 or plan.n_unique != keys.shape[0]:
            raise CheckpointFormatError(f"{where}: rows {a}..{b} hold duplicate or "
                                        f"out-of-range keys")
        try:
            values = values_arr[a:b]
            slots = {k: arr[a:b] for k, arr in slot_arrs.items()}
        except ValueError as exc:  # a checksum that fails, a chunk cut short
            arrays = {"values": values_arr, **{f"slots/{k}": v for k, v in slot_arrs.items()}}
            raise _damaged(path, where, arrays, a, b, t["chunk_rows"], exc) from None
        yield plan, values, slots


def _damaged(path: str, where: str, arrays: dict, a: int, b: int, chunk_rows: int,
             exc: ValueError) -> CheckpointFormatError:
    """The error for rows ``[a, b)`` of ``arrays`` (role -> zarr array) of the version at
    ``path``, one of which failed to read with ``exc``: naming the first array and chunk
    that fails alone (read again, chunk by chunk: the error path only), its number and its
    file (:func:`_chunk_file`), else the rows of the whole batch."""
    for role, arr in arrays.items():
        for c0 in range(a - a % chunk_rows, b, chunk_rows):
            try:
                arr[c0:min(c0 + chunk_rows, arr.shape[0])]
            except ValueError as one:
                return CheckpointFormatError(
                    f"{where}: array {role!r}, rows {c0}..{min(c0 + chunk_rows, arr.shape[0])}"
                    f" are damaged (its chunk {c0 // chunk_rows}, "
                    f"stored at {_chunk_file(path, arr, c0 // chunk_rows)!r}): {one}")
    return CheckpointFormatError(f"{where}: rows {a}..{b} are damaged: {exc}")


def _chunk_file(path: str, arr, chunk: int) -> str:
    """Where chunk ``chunk`` (of whole rows) of zarr array ``arr`` of the version at
    ``path`` is stored: ``path``, the array's path in the version and the chunk's key as
    the array's chunk key encoding spells it (e.g. ``".../v000002/t0/values/c/0/0"``)."""
    where = f"{path.rstrip('/')}/{arr.path}"
    try:  # (an error path: a zarr without this API still gets the array's folder)
        return f"{where}/{arr.metadata.encode_chunk_key((chunk,) + (0,) * (arr.ndim - 1))}"
    except Exception:  # noqa: BLE001
        return where


def check_part(model, path: str, name: str, t: dict, spec, r0: int, r1: int,
               arrays: dict) -> int | str:
    """Checker task: rows ``[r0, r1)`` read as :func:`load_part` reads them, and dropped.
    Returns their count, or the message of the :class:`CheckpointFormatError` they raise:
    damage is an outcome of the check, returned to the client (raised in a task, it would
    be logged by distributed's worker as a failed task)."""
    try:
        for _ in stored_rows(path, name, t, spec, r0, r1, arrays):
            pass
    except CheckpointFormatError as exc:
        return str(exc)
    return r1 - r0


def load_part(model, path: str, name: str, t: dict, spec, r0: int, r1: int,
              arrays: dict) -> int | str:
    """Loader task: rows ``[r0, r1)`` of a stored table, sent to their shards in ``model``;
    their count, or the damage found, returned as :func:`check_part` returns it."""
    try:
        for plan, values, slots in stored_rows(path, name, t, spec, r0, r1, arrays):
            connection.set_rows(model, name, plan, values, slots)
    except CheckpointFormatError as exc:
        return str(exc)
    return r1 - r0
