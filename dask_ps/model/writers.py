"""A checkpoint's (or export's) arrays and writer tasks: each table's arrays created empty,
once, in the client (:func:`create_arrays`: chunks with a checksum, uncompressed,
:data:`CODECS`) and passed to the tasks opened, each table cut into pieces of whole chunks
(:func:`plan_table`), each piece gathered from the shards holding it and written by one task
on a shard's worker (:func:`write_part`, which reads no ``zarr.json``). A piece is bounded in
chunks and in bytes, so that a worker holding a large shard needs ~a piece more memory to
save it, not a copy of its shard. Used by :mod:`dask_ps.model.checkpoint` and
:mod:`dask_ps.model.export`; the readers are :mod:`dask_ps.model.readers`.
"""

from __future__ import annotations

import numpy as np

from . import connection
from . import key_ranges as kr

__all__ = ["CODECS", "PIECE_BYTES", "PIECE_CHUNKS", "array_paths", "create_arrays",
           "piece_rows", "plan_table", "role_paths", "row_bytes", "write_part"]

_SAMPLE = 1024  # keys sampled per shard and writer to choose the splitters of sparse tables
#: Chunks of rows a writer task gathers and writes at once, at most: a save of a large table
#: is many such pieces, so that a worker holding a shard of it needs ~a piece more memory,
#: not a copy of its shard (a 9.4 GiB table of 2*10^8 keys killed its 11.5 GiB workers so).
PIECE_CHUNKS = 16
#: Bytes of rows (values, optimizer state and a sparse table's keys) in a piece, at most
#: (but one chunk at least): a dense float32 vector's chunk is 2^20 rows, so 16 chunks of an
#: Adam table (values and 2 moments) are 192 MiB, more than a shard of 1.5*10^7 rows.
PIECE_BYTES = 64 << 20


def row_bytes(spec) -> int:
    """Bytes a writer gathers per row of table ``spec``: values, optimizer state and (for a
    sparse table) its int64 key."""
    layout = spec.optimizer.slot_layout(spec.ncols, spec.dtype)
    return spec.ncols * spec.dtype.itemsize + sum(w * np.dtype(dt).itemsize
                                                 for w, dt in layout.values()) \
        + (8 if spec.sparse else 0)


def piece_rows(spec, rows_per_chunk: int) -> int:
    """Rows of a writer's piece of table ``spec``: whole chunks, at most
    :data:`PIECE_CHUNKS` of them and :data:`PIECE_BYTES` of rows (:func:`row_bytes`), one
    chunk at least."""
    fit = PIECE_BYTES // max(1, row_bytes(spec) * rows_per_chunk)
    return max(1, min(PIECE_CHUNKS, fit)) * rows_per_chunk


def plan_table(model, spec, rows_per_chunk: int) -> tuple[int, int, list]:
    """Total rows of a table, rows per chunk (no more than the rows: a small table makes a
    small store) and its writers: ``(shard, lo, hi, extra, skip, r0, r1, ask)``, each of
    :func:`piece_rows` rows at most (a sparse table's: about, as the sample allows). A dense
    table's writer takes rows ``[lo, hi)`` = ``[r0, r1)`` of the shards ``ask`` holding
    them, as contiguous slices."""
    n_shards = model.n_shards
    if not spec.sparse:
        n, starts = spec.n_rows, spec.partitioner.starts
        rows_per_chunk = max(1, min(rows_per_chunk, n))
        piece = piece_rows(spec, rows_per_chunk)
        writers = []
        for w in range(n_shards):
            r0 = min(kr.align_up(int(starts[w]), rows_per_chunk), n)
            r1 = n if w == n_shards - 1 else min(kr.align_up(int(starts[w + 1]),
                                                             rows_per_chunk), n)
            for a in range(r0, r1, piece):
                b = min(a + piece, r1)
                ask = [s for s in range(n_shards) if starts[s] < b and starts[s + 1] > a]
                writers.append((w, a, b, 0, 0, a, b, ask))
        return n, rows_per_chunk, writers
    t = connection.process_client(model).transport  # map_all: errors named, see there
    found = t.map_all(spec.name, kr.sample_keys, _SAMPLE * n_shards, 0)
    counts, samples = [c for c, _ in found], [s for _, s in found]
    total = int(sum(counts))
    rows_per_chunk = max(1, min(rows_per_chunk, total))
    n_parts = n_shards * max(1, -(-total // (n_shards * piece_rows(spec, rows_per_chunk))))
    if n_parts > n_shards:  # a sample dense enough for the pieces' splitters
        found = t.map_all(spec.name, kr.sample_keys, _SAMPLE * n_parts // n_shards, 1)
        samples = [s for _, s in found]
    bounds = kr.split_sorted(samples, counts, n_parts) if n_parts > 1 else np.empty(0, int)
    below = np.sum(t.map_all(spec.name, kr.count_below, bounds), axis=0) \
        if bounds.shape[0] else np.empty(0, np.int64)
    edges = [None] + [int(b) for b in bounds] + [None]
    ranks = [0] + [int(r) for r in below] + [total]
    writers, everyone = [], list(range(n_shards))
    for w in range(len(edges) - 1):
        last = w == len(edges) - 2
        r0 = min(kr.align_up(ranks[w], rows_per_chunk), total)
        r1 = total if last else min(kr.align_up(ranks[w + 1], rows_per_chunk), total)
        if r1 > r0:
            writers.append((w % n_shards, edges[w], edges[w + 1], r1 - ranks[w + 1] if not last
                            else 0, r0 - ranks[w], r0, r1, everyone))
    return total, rows_per_chunk, writers


def write_part(model, path: str, name: str, arrays: dict, lo, hi, extra: int, skip: int,
               r0: int, r1: int, ask: list, dtype) -> int:
    """Writer task: rows of ranks ``[r0, r1)`` of table ``name`` into ``arrays``, the
    table's arrays in the version (or export) at ``path`` as :func:`create_arrays` opened
    them (pickled with their metadata: the task reads no ``zarr.json``).

    A sparse table's rows (``arrays`` has keys) are gathered by key range and sorted; a
    dense table's are contiguous slices of the shards holding them (:func:`_dense_rows`).

    Raises
    ------
    RuntimeError
        The rows found are not the ``r1 - r0`` planned: the table changed meanwhile.
    ShardFunctionRunningError
        A shard's function (this gathering, or another holding the shard) still running
        after the model's timeout (see :meth:`~dask_ps.state.transport.Transport.map_all`,
        whose errors name the function, the table, the shard and its worker).
    Exception
        The storage's error, as itself, with a note naming the rows, the table, the shards
        they came from and the version's path.
    """
    pc = connection.process_client(model)
    t = pc.transport
    with_slots = "slots" in arrays
    if "keys" not in arrays:  # a dense (range) table
        keys, values, slots = None, *_dense_rows(t, name, ask, r0, r1, with_slots)
    else:
        parts = t.map_all(name, kr.rows_in_range, lo, hi, extra, with_slots, shards=ask)
        keys = np.concatenate([p[0] for p in parts])
        take = np.argsort(keys, kind="stable")[skip: skip + (r1 - r0)]
        if take.shape[0] != r1 - r0:
            raise RuntimeError(f"table {name!r} changed while it was being saved: expected "
                               f"{r1 - r0} rows at [{r0}, {r1}), found {take.shape[0]}")
        keys, values = keys[take], np.concatenate([p[1] for p in parts])[take]
        slots = {k: np.concatenate([p[2][k] for p in parts])[take]
                 for k in arrays.get("slots", {})}
        del parts
    if dtype is not None:
        values = values.astype(dtype)
    try:
        _write(arrays, r0, r1, keys, values, slots)
    except Exception as exc:  # the storage's error, as itself: which write it was
        exc.add_note(f"writing rows [{r0}, {r1}) of table {name!r} (from shards {ask}) to "
                     f"{path}")
        raise
    return r1 - r0


def _write(arrays: dict, r0: int, r1: int, keys, values, slots: dict) -> None:
    """Rows ``[r0, r1)`` of a table into its opened ``arrays`` (see :func:`write_part`)."""
    arr = arrays["values"]
    arr[r0:r1] = values.reshape((r1 - r0,) + arr.shape[1:])
    if keys is not None:
        arrays["keys"][r0:r1] = keys
    for slot, slot_arr in arrays.get("slots", {}).items():
        slot_arr[r0:r1] = slots[slot]


def _dense_rows(t, name: str, ask: list, r0: int, r1: int, with_slots: bool) -> tuple:
    """``(values, slots)`` of rows ``[r0, r1)`` of dense table ``name``, from shards
    ``ask``: one slice of each (:func:`~dask_ps.model.key_ranges.rows_in_slice`), joined
    only when the rows span shards."""
    parts = t.map_all(name, kr.rows_in_slice, r0, r1, with_slots, key_range=True, shards=ask)
    parts = sorted((p for p in parts if p[1].shape[0]), key=lambda p: p[0])
    at = r0
    for first, values, _ in parts:
        if first != at:
            break
        at += values.shape[0]
    if at != r1:
        raise RuntimeError(f"table {name!r} changed while it was being saved: expected rows "
                           f"[{r0}, {r1}), found {[(p[0], p[0] + len(p[1])) for p in parts]}")
    if len(parts) == 1:
        return parts[0][1], parts[0][2]
    return (np.concatenate([p[1] for p in parts]),
            {k: np.concatenate([p[2][k] for p in parts]) for k in parts[0][2]})


def role_paths(arrays: dict) -> dict:
    """The paths in their group of a table's arrays (:func:`create_arrays`' ``arrays``),
    by role: ``{"values": "t0/values", "keys": ..., "slots": {slot: ...}}``."""
    return {role: ({k: a.path for k, a in arr.items()} if role == "slots" else arr.path)
            for role, arr in arrays.items()}


def array_paths(arrays: dict) -> list[str]:
    """The paths of a table's arrays (:func:`create_arrays`' ``arrays``): values, keys, slots."""
    paths = role_paths(arrays)
    return [paths["values"]] + ([paths["keys"]] if "keys" in paths else []) + \
        list(paths.get("slots", {}).values())


def create_arrays(group, t: dict, prefix: str, *, slots: bool, dtype, squeeze: bool) -> dict:
    """Empty arrays of one table (``t``, its description: :func:`table_attrs
    <dask_ps.model._format_tables.table_attrs>`) in zarr group ``group``, under ``prefix``.

    Each array is created here, once (its ``zarr.json`` written), and returned opened for
    :func:`write_part`'s tasks, which take it pickled with its metadata and read no
    ``zarr.json``. Every chunk is written, zeros included, so that the manifest's chunk
    count can tell a lost chunk from one never written.

    Parameters
    ----------
    group : zarr.Group
        The version's (or export's) group, writable.
    t : dict
        ``n_keys``, ``chunk_rows``, ``ncols``, ``dtype``, ``vector``, ``partitioner`` and
        ``slots`` (slot -> ``width``, ``dtype``).
    prefix : str
        The table's path in ``group`` (``"t0"``; an export's: the table's name).
    slots : bool
        Create the optimizer state's arrays too.
    dtype : numpy dtype or None
        The values' dtype (None: the table's).
    squeeze : bool
        A dense table's values become array ``prefix`` itself, and a vector's are 1-D (an
        export's layout).

    Returns
    -------
    dict
        ``{"values": zarr.Array, "keys": ... (a hash-partitioned table's), "slots": {slot:
        ...} (with ``slots``)}``: (n_keys, ncols) values (or (n_keys,)), (n_keys,) int64
        keys, (n_keys, width) slots, chunked by ``chunk_rows`` rows, each chunk with a
        CRC32C checksum (:data:`CODECS`); their paths: :func:`role_paths`.
    """
    from zarr.codecs import Crc32cCodec

    n, c, ncols = t["n_keys"], t["chunk_rows"], t["ncols"]
    one_d = squeeze and t["vector"]
    kw = dict(compressors=[Crc32cCodec()], fill_value=0)  # a checksum, not compression

    def create(path: str, **shape):
        return group.create_array(path, **shape, **kw).with_config(
            {"write_empty_chunks": True})

    vpath = f"{prefix}/values" if (t["partitioner"]["name"] == "hash" or not squeeze) else prefix
    arrays = {"values": create(vpath, shape=(n,) if one_d else (n, ncols),
                               chunks=(c,) if one_d else (c, ncols),
                               dtype=np.dtype(dtype or t["dtype"]))}
    if t["partitioner"]["name"] == "hash":
        arrays["keys"] = create(f"{prefix}/keys", shape=(n,), chunks=(c,), dtype="int64")
    if slots:
        arrays["slots"] = {slot: create(f"{prefix}/slots/{slot}", shape=(n, s["width"]),
                                        chunks=(c, s["width"]), dtype=np.dtype(s["dtype"]))
                           for slot, s in t["slots"].items()}
    return arrays


#: The codecs :func:`create_arrays` writes: the only ones a load decodes with
#: (:mod:`dask_ps.model.readers`; a zarr codec is found by the name in the file's metadata,
#: and some, e.g. numcodecs' pickle, run code).
CODECS = {"bytes", "crc32c"}
