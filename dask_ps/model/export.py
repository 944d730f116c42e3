"""Exporting a PSModel's weights for serving: a plain zarr group, written by one writer per
shard as a checkpoint is (see :mod:`dask_ps.model.checkpoint`), without optimizer state."""

from __future__ import annotations

import numpy as np

from . import connection
from . import format as ck
from ._format_tables import chunk_rows, table_attrs
from ._targets import check_export_target
from .checkpoint import _check_url, _run_tasks
from .writers import create_arrays, role_paths
from .writers import plan_table as _plan_table
from .writers import write_part as _write_part

__all__ = ["export"]


def export(model, url: str, *, dtype=None, tables: list[str] | None = None) -> None:
    """Write the weights (no optimizer state) as a plain zarr group, for serving.

    Dense table ``name`` becomes array ``name`` (shape as the table's); a sparse one
    becomes ``name/keys`` (int64, ascending) and ``name/values``. Readable with zarr
    alone; attributes under ``dask_ps_export`` describe the tables (``complete`` is False
    until every row is written).

    Parameters
    ----------
    url : str
        Any fsspec URL reachable from the workers: a new or empty folder, or an earlier
        export, which is replaced.
    dtype : {None, "float16", "float32", "float64"}
        Cast the weights (e.g. float16 halves the size of float32 weights).
    tables : list of str, optional
        Default: all.

    Raises
    ------
    FileExistsError
        ``url`` holds anything but an earlier export (files of its own, a checkpoint's
        versions): the message names the folder and what it holds; nothing is written or
        deleted.
    UnknownTableError
        A name in ``tables`` that is not a table.
    ValueError
        A process-private URL with a cluster, or another ``dtype``; finite weights beyond
        ``dtype``'s range (e.g. 1e5 in float16, whose largest is 65504), which the cast
        would write as +-inf: the message names the table, how many values and the largest
        magnitude; nothing is written.
    """
    _export(model, url, dtype=dtype, tables=tables)


def _export(model, url: str, *, dtype=None, tables=None) -> None:
    import zarr

    from .. import __version__

    _check_url(model, url)
    if dtype is not None:
        try:  # NumPy's TypeError ("data type 'bogus' not understood") named no argument
            known = np.dtype(dtype) in (np.float16, np.float32, np.float64)
        except TypeError:
            known = False
        if not known:
            raise ValueError(f"dtype must be float16, float32, float64 or None, got "
                             f"{dtype!r}")
    names = list(model.specs) if tables is None else list(tables)
    for name in names:
        connection.process_client(model).spec(name)  # UnknownTableError naming it
    if dtype is not None:
        for name in names:
            _check_range(model, name, np.dtype(dtype))
    check_export_target(url)  # replaces an earlier export only: nothing else is deleted
    described, plans, calls = {}, {}, []
    for i, name in enumerate(names):
        spec = model.specs[name]
        n, c, writers = _plan_table(model, spec, chunk_rows(spec))
        plans[name] = table_attrs(spec, i, n, c), writers
        described[name] = dict(sparse=spec.sparse, n_keys=n,
                               dtype=str(np.dtype(dtype or spec.dtype)),
                               trained_dtype=str(spec.dtype))
    # its tables are named from the start: an export cut short is still ours to replace
    meta = dict(format=ck.FORMAT, library_version=__version__, tables=described)
    group = zarr.open_group(ck.zarr_store(url), mode="w", zarr_format=3,
                            attributes=dict(dask_ps_export=dict(meta, complete=False)))
    for name, (t, writers) in plans.items():
        arrays = create_arrays(group, t, name, slots=False, dtype=dtype, squeeze=True)
        described[name]["arrays"] = role_paths(arrays)
        calls += [(w[0], (url, name, arrays) + w[1:] + (dtype,)) for w in writers]
    _run_tasks(model, _write_part, calls)
    group.attrs.update(dict(dask_ps_export=dict(meta, complete=True)))


#: Rows of a shard's table scanned at once by :func:`_overflow` (bounded temporaries).
_SCAN_ROWS = 1 << 16


def overflow_limit(dtype) -> float:
    """The smallest magnitude that a cast to float ``dtype`` rounds to +-inf: halfway between
    its largest finite value and the next power of two (a tie rounds to even, up), e.g.
    65520.0 for float16 (65519.99 is written as 65504); inf for float64.

    Parameters
    ----------
    dtype : numpy float dtype

    Returns
    -------
    float
        Exact in float64 for float16 and float32.
    """
    info = np.finfo(dtype)
    half_ulp = 2.0 ** (info.maxexp - 2 - info.nmant)  # of the largest finite value
    with np.errstate(over="ignore"):
        return float(np.float64(info.max) + np.float64(half_ulp))


def _overflow(keys, values, slots, limit: float) -> tuple[int, float]:
    """Shard function: ``(count, largest magnitude)`` of the finite ``values`` of magnitude
    ``limit`` or more (:func:`overflow_limit`: those a cast makes infinite; 0, 0.0: none).
    Compared, not cast: the one cast is the writer's."""
    if values.dtype.kind == "f":  # exact in a wider float: no float64 copy of the values
        limit = values.dtype.type(limit)
    count, largest = 0, 0.0
    for a in range(0, values.shape[0], _SCAN_ROWS):
        part = values[a:a + _SCAN_ROWS]
        bad = part >= limit
        bad |= part <= -limit
        if bad.any():
            bad &= np.isfinite(part)  # inf is written as itself
            count += int(bad.sum())
            if bad.any():
                largest = max(largest, float(np.abs(part[bad]).max()))
    return count, largest


def _check_range(model, name: str, dtype: np.dtype) -> None:
    """Refuse to export table ``name`` as ``dtype`` when a finite weight is beyond its
    range (the cast would write it as +-inf), before anything is written.

    Raises
    ------
    ValueError
        Naming the table, the count of such values and the largest magnitude.
    """
    spec = model.specs[name]
    if np.dtype(spec.dtype).kind == "f" and dtype.itemsize >= np.dtype(spec.dtype).itemsize:
        return  # a float cast to a float as wide or wider stays finite
    found = connection.process_client(model).transport.map_all(name, _overflow,
                                                               overflow_limit(dtype))
    count = sum(c for c, _ in found)
    if count:
        largest = max(m for _, m in found)
        raise ValueError(f"export as {dtype.name}: table {name!r} holds {count:,} value"
                         f"{'s' if count != 1 else ''} beyond {dtype.name}'s range (largest "
                         f"magnitude {largest:.6g}; {dtype.name} holds up to "
                         f"{float(np.finfo(dtype).max):.6g}), which would be written as "
                         f"+-inf: export as a wider dtype (or dtype=None), or leave out the "
                         f"table (tables=); nothing was written")
