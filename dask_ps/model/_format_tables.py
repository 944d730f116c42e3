"""How a table is described in a checkpoint's metadata (the ``tables`` attribute of a
version, see :mod:`dask_ps.model.format`): the rows per chunk of its arrays, its JSON
description, what in a description differs from a table spec (and how a difference of a
checkpoint's is said: :func:`differences_said`), and the spec rebuilt from one."""

from __future__ import annotations

import numpy as np

from ..exceptions import CheckpointFormatError
from ..state.optimizers import OPTIMIZERS
from ..state.table import Init, TableSpec

#: Bytes of weights per chunk (zarr 3 wrote 4 MB chunks at ~1.1 GB/s here, see DESIGN.md).
CHUNK_BYTES = 4 * 2**20

#: The hash function placing a hashed table's keys on shards, as a checkpoint names it
#: (:class:`~dask_ps.state.partition.HashPartitioner`); a load refuses any other name.
HASH = "splitmix64-high32"


def chunk_rows(spec: TableSpec, requested: int | None = None) -> int:
    """Rows per chunk of a table's arrays: about :data:`CHUNK_BYTES` of values."""
    if requested is not None:
        return int(requested)
    return max(1, CHUNK_BYTES // (spec.ncols * spec.dtype.itemsize))


def table_attrs(spec: TableSpec, index: int, n_keys: int, rows_per_chunk: int) -> dict:
    """JSON description of a table as stored."""
    layout = spec.optimizer.slot_layout(spec.ncols, spec.dtype)
    return dict(
        name=spec.name, path=f"t{index}", n_keys=int(n_keys), chunk_rows=int(rows_per_chunk),
        n_rows=spec.n_rows, ncols=spec.ncols, vector=spec.vector, dtype=spec.dtype.str,
        partitioner=dict(name="hash" if spec.sparse else "range",
                         hash=HASH if spec.sparse else None),
        optimizer=spec.optimizer.config(),
        init=dict(kind=spec.init.kind, a=spec.init.a, b=spec.init.b, seed=spec.init.seed),
        slots={k: dict(width=int(w), dtype=np.dtype(dt).str) for k, (w, dt) in layout.items()},
    )


def spec_differences(spec: TableSpec, t: dict) -> dict:
    """``{what: (the checkpoint's, the spec's)}`` where table description ``t`` (see
    :func:`table_attrs`) holds another table than ``spec``: rows (of a range table),
    columns, dtype, partitioner, update rule or the optimizer state it keeps. Empty when
    the checkpoint's rows fit the table (hyper-parameters such as the learning rate, the
    init and the number of shards may differ)."""
    mine = table_attrs(spec, 0, 0, 1)
    theirs = dict(rows=t["n_rows"], columns=None if t["vector"] else t["ncols"],
                  dtype=np.dtype(t["dtype"]).name, partitioner=t["partitioner"]["name"],
                  optimizer=t["optimizer"]["name"], slots=sorted(t.get("slots", {})))
    ours = dict(rows=mine["n_rows"], columns=None if mine["vector"] else mine["ncols"],
                dtype=spec.dtype.name, partitioner=mine["partitioner"]["name"],
                optimizer=mine["optimizer"]["name"], slots=sorted(mine["slots"]))
    return {k: (theirs[k], v) for k, v in ours.items() if theirs[k] != v}


def differences_said(diff: dict, whose: str = "this fit's") -> list[str]:
    """Each difference of ``diff`` (``{name: (the checkpoint's, ours)}``, e.g.
    :func:`spec_differences`'s) as a user reads it: ``"name value (this fit's: value)"``,
    values as Python literals. The one wording of "what the checkpoint holds, and what
    this fit or model has", for a resume, a recovery and a restore.

    Parameters
    ----------
    diff : dict
        ``{name: (the checkpoint's value, ours)}``, in the order said.
    whose : str, default "this fit's"
        Whose the second value is (e.g. ``"the model's"``).

    Returns
    -------
    list of str
        One per difference; the caller joins them (``"; "`` between fields, ``", "``
        within a table).
    """
    return [f"{k} {a!r} ({whose}: {b!r})" for k, (a, b) in diff.items()]


def other_model(specs: dict, tables: dict) -> str | None:
    """Why a checkpoint whose tables are described by ``tables`` (its ``tables`` attribute,
    scratch tables left out) holds another model than the one of saved table specs
    ``specs``: a table of the model it lacks, or one of the model's name holding another
    table (:func:`spec_differences`); e.g. ``"holds tables ['v'], not the model's ['w']:
    it is another model's checkpoint"``. None when it holds the model's tables."""
    own = [n for n in specs if n not in tables]
    if own:
        return (f"holds tables {sorted(tables)}, not the model's {own}: it is another "
                f"model's checkpoint")
    said = []
    for name, spec in specs.items():
        diff = spec_differences(spec, tables[name])
        if "optimizer" in diff:  # its state differs with it: said once
            diff.pop("slots", None)
        if diff:
            said.append(f"table {name!r} has " + ", ".join(
                differences_said(diff, "the model's")))
    return f"holds other tables than the model's: {'; '.join(said)}" if said else None


def spec_from_attrs(t: dict, n_shards: int) -> TableSpec:
    """Rebuild a table's spec, for ``n_shards`` shards, from its JSON description.

    Raises
    ------
    CheckpointFormatError
        An optimizer, partitioner, hash function (``partitioner.hash``) or init this
        dask_ps does not know.
    """
    opt = dict(t["optimizer"])
    name = opt.pop("name")
    if name not in OPTIMIZERS:
        raise CheckpointFormatError(f"table {t['name']!r}: unknown optimizer {name!r} in the "
                                    f"checkpoint; known: {sorted(OPTIMIZERS)}")
    try:
        optimizer = OPTIMIZERS[name](**opt)
    except TypeError as exc:
        raise CheckpointFormatError(f"table {t['name']!r}: optimizer {name!r} "
                                    f"hyper-parameters {opt} not understood: {exc}") from None
    part = t["partitioner"]["name"]
    if part not in ("range", "hash"):
        raise CheckpointFormatError(f"table {t['name']!r}: unknown partitioner {part!r}")
    named, want = t["partitioner"].get("hash"), HASH if part == "hash" else None
    if named != want:  # keys hashed by another function mean other rows
        raise CheckpointFormatError(f"table {t['name']!r}: field partitioner.hash is "
                                    f"{named!r}, a {part} table's is {want!r} in this "
                                    f"dask_ps: refusing to load its keys")
    init = t["init"]
    if init["kind"] not in ("constant", "uniform", "normal"):
        raise CheckpointFormatError(f"table {t['name']!r}: unknown init {init['kind']!r}")
    shape = (t["n_rows"] if part == "range" else None,) + (() if t["vector"] else (t["ncols"],))
    spec = TableSpec.build(t["name"], shape, np.dtype(t["dtype"]), part, optimizer,
                           Init(init["kind"], init["a"], init["b"], init["seed"]), n_shards)
    if part == "range" and t["n_keys"] != t["n_rows"]:  # a save writes every row of it
        raise CheckpointFormatError(f"table {t['name']!r}: {t['n_keys']} rows stored for a "
                                    f"range table of {t['n_rows']} rows: its metadata is "
                                    f"damaged")
    want = sorted(spec.optimizer.slot_layout(spec.ncols, spec.dtype))
    if sorted(t.get("slots", {})) != want:
        raise CheckpointFormatError(f"table {t['name']!r}: optimizer state "
                                    f"{sorted(t.get('slots', {}))} stored, its update rule "
                                    f"{name!r} keeps {want}: its metadata is damaged")
    return spec
