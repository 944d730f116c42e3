"""A fitted estimator in one file, without pickle; and its weights as plain tables.

:func:`save_estimator` writes a NumPy ``.npz`` archive (a zip of ``.npy`` arrays) holding

* ``__meta__``: one JSON text — format name and version, the library version, the
  estimator's public class name, its constructor parameters (``client`` left out), how each
  fitted attribute is stored, and caller's ``extra`` metadata (e.g. how the training data
  was read, so that test data can be read the same way);
* one array per fitted NumPy attribute (``a/<name>``; fields of a named tuple as
  ``a/<name>/<field>``; a scipy CSR or CSC matrix, e.g. a wide model's ``coef_`` or a
  keyed factorization machine's ``factors_``, as its three arrays ``a/<name>/data``,
  ``.../indices``, ``.../indptr`` and its format and shape in the JSON).
  Object arrays of strings (string ids) are stored as fixed-width unicode and given back as
  object arrays.

Numbers, strings, lists and dicts (e.g. ``history_``) live in the JSON. Loading never
unpickles (``numpy.load(allow_pickle=False)``) and creates only estimator classes exported
by :mod:`dask_ps`. This is the estimator's in-memory state after ``fit``; the shards' tables
during a fit are checkpointed by :meth:`dask_ps.PSModel.save` (zarr) instead.

:func:`write_tables` writes weights for use outside dask_ps: a folder of Parquet or CSV
tables and a ``model.json``.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import time
import zipfile
from typing import Any

import numpy as np

from .exceptions import DataError

__all__ = ["FORMAT", "FORMAT_VERSION", "load_estimator", "save_estimator", "write_tables"]

FORMAT = "dask-ps-estimator"
#: Version written; readers refuse newer ones. 1: first version (2026-12).
FORMAT_VERSION = 1
_META = "__meta__"


def _plain(value: Any, where: str) -> Any:
    """``value`` as JSON-able Python (NumPy scalars and nested containers converted)."""
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"{where}: dict keys must be strings to be saved")
        return {k: _plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise TypeError(f"{where}: a {type(value).__name__} cannot be saved (numbers, strings, "
                    f"lists, dicts, NumPy arrays and named tuples of them can)")


def _store(value: Any, key: str, arrays: dict, where: str) -> dict:
    """How ``value`` is saved; its arrays go into ``arrays`` under ``key``."""
    if isinstance(value, np.ndarray):
        spec = {"kind": "array", "key": key}
        if value.dtype == object:
            if not all(isinstance(v, str) for v in value.ravel()):
                raise TypeError(f"{where}: an object array can be saved only when it holds "
                                f"strings")
            value = value.astype(str)
            spec["object"] = True
        arrays[key] = value
        return spec
    fmt = getattr(value, "format", None)
    if fmt in ("csr", "csc") and hasattr(value, "indptr"):  # scipy CSR or CSC
        for part in ("data", "indices", "indptr"):
            arrays[f"{key}/{part}"] = getattr(value, part)
        return {"kind": fmt, "key": key, "shape": [int(n) for n in value.shape]}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        cls = type(value)
        return {"kind": "namedtuple", "class": f"{cls.__module__}:{cls.__qualname__}",
                "fields": {f: _store(getattr(value, f), f"{key}/{f}", arrays, f"{where}.{f}")
                           for f in value._fields}}
    if isinstance(value, tuple):
        return {"kind": "tuple", "value": _plain(value, where)}
    return {"kind": "value", "value": _plain(value, where)}


def saved_params(estimator) -> tuple[str, dict]:
    """``(class name, parameters)`` of ``estimator`` as :func:`save_estimator` stores them
    (``client`` left out): a check, before a long run that saves it, that it can be saved.

    Raises
    ------
    TypeError
        Not an estimator exported by dask_ps, or a parameter that cannot be stored without
        pickle (a function among ``callbacks``...), naming it.
    """
    import dask_ps

    name = type(estimator).__name__
    if getattr(dask_ps, name, None) is not type(estimator):
        raise TypeError(f"{name} is not an estimator exported by dask_ps")
    return name, {k: _plain(v, f"parameter {k}")
                  for k, v in estimator.get_params(deep=False).items() if k != "client"}


def save_estimator(estimator, path: str, extra: dict | None = None) -> None:
    """Write a fitted (or unfitted) dask_ps estimator to ``path``, without pickle.

    Parameters
    ----------
    estimator : dask_ps estimator
        E.g. :class:`~dask_ps.LogisticRegression`, :class:`~dask_ps.MatrixFactorization`.
        Its parameters must be numbers, strings, bools or None (``client`` is left out).
    path : str
        Local path or fsspec URL of the file written (conventionally ``.npz``). A local file
        is replaced atomically.
    extra : dict, optional
        JSON-able metadata stored beside it (returned by :func:`load_estimator`).

    Raises
    ------
    TypeError
        A parameter or fitted attribute that cannot be stored without pickle, naming it.
    OSError
        The file cannot be written (an ``IsADirectoryError`` before anything is written when
        a local ``path`` is a folder); a local temporary file is removed.
    """
    import fsspec

    import dask_ps

    name, params = saved_params(estimator)
    arrays: dict[str, np.ndarray] = {}
    attributes = {k: _store(v, f"a/{k}", arrays, f"attribute {k}")
                  for k, v in sorted(vars(estimator).items())
                  if k.endswith("_") and not k.startswith("__")}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION,
            "library_version": dask_ps.__version__, "estimator": name, "params": params,
            "attributes": attributes, "extra": _plain(extra or {}, "extra"),
            "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    buf = io.BytesIO()
    np.savez(buf, **{_META: np.array(json.dumps(meta))}, **arrays)
    data = buf.getvalue()
    if "://" not in str(path):  # local: write aside, then rename over the target
        path = os.fspath(path)
        if os.path.isdir(path) or path.endswith(os.sep):
            raise IsADirectoryError(f"{path}: a folder; give a file name such as "
                                    f"{os.path.join(path, 'model.npz')}")
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:  # e.g. path is a folder, the disk is full: leave nothing behind
            if os.path.lexists(tmp):
                os.remove(tmp)
            raise
    else:
        with fsspec.open(path, "wb") as f:
            f.write(data)


def _restore(spec: dict, arrays, where: str):
    kind = spec["kind"]
    if kind == "array":
        value = arrays[spec["key"]]
        return value.astype(object) if spec.get("object") else value
    if kind in ("csr", "csc"):
        import scipy.sparse as sp

        k = spec["key"]
        cls = sp.csr_matrix if kind == "csr" else sp.csc_matrix
        return cls((arrays[f"{k}/data"], arrays[f"{k}/indices"], arrays[f"{k}/indptr"]),
                   shape=tuple(spec["shape"]))
    if kind == "tuple":
        return tuple(spec["value"])
    if kind == "value":
        return spec["value"]
    if kind == "namedtuple":
        module, _, qualname = spec["class"].partition(":")
        if not module.startswith("dask_ps."):
            raise DataError(f"{where}: refusing to create {spec['class']} (not a dask_ps "
                            f"class)")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        return cls(**{f: _restore(s, arrays, f"{where}.{f}")
                      for f, s in spec["fields"].items()})
    raise DataError(f"{where}: unknown kind {kind!r}")


def load_estimator(path: str):
    """Read an estimator written by :func:`save_estimator`.

    Parameters
    ----------
    path : str
        Local path or fsspec URL.

    Returns
    -------
    estimator
        Its fitted attributes restored; ``client`` is None (the current client is used).
    extra : dict
        The metadata given to :func:`save_estimator`.

    Raises
    ------
    FileNotFoundError
        No such file.
    DataError
        Not such a file (a folder, e.g. a checkpoint, included), a newer format version, or
        an unknown estimator (naming them).
    """
    import warnings

    import fsspec

    import dask_ps

    try:
        with fsspec.open(path, "rb") as f:
            data = f.read()
    except IsADirectoryError:
        raise DataError(f"{path}: a folder, not a model file written by save_estimator "
                        f"(dask-ps train --save); a checkpoint folder is continued with "
                        f"resume=True (--resume auto), not loaded") from None
    if not data.startswith(b"PK"):  # not a zip: numpy's error would be about pickles
        why = ("an empty file" if not data else
               f"it starts with {data[:16]!r}, not a .npz archive's 'PK'")
        raise DataError(f"{path}: not a dask_ps model file ({why})")
    try:
        arrays = np.load(io.BytesIO(data), allow_pickle=False)
        meta = json.loads(str(arrays[_META][()]))
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{path}: not a dask_ps model file, or truncated "
                        f"({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{path}: not a dask_ps model file (no metadata)")
    if meta.get("format") != FORMAT:
        raise DataError(f"{path}: not a dask_ps model file (format {meta.get('format')!r})")
    if meta["format_version"] > FORMAT_VERSION:
        raise DataError(f"{path}: format version {meta['format_version']} is newer than the "
                        f"{FORMAT_VERSION} this dask_ps {dask_ps.__version__} reads; upgrade "
                        f"dask_ps")
    name = meta["estimator"]
    cls = getattr(dask_ps, name, None) if name in dask_ps.__all__ else None
    if not (isinstance(cls, type) and hasattr(cls, "get_params")):
        raise DataError(f"{path}: unknown estimator {name!r}")
    estimator = cls(**meta["params"])
    for attr, spec in meta["attributes"].items():
        try:
            setattr(estimator, attr, _restore(spec, arrays, f"{path}: attribute {attr}"))
        except (ImportError, AttributeError) as exc:  # a private helper class moved
            warnings.warn(f"{path}: attribute {attr} not restored ({exc}); the model "
                          f"predicts, but warm_start starts its update rule afresh",
                          stacklevel=2)
    return estimator, meta["extra"]


def write_tables(out: str, tables: dict, meta: dict, fmt: str = "parquet") -> list[str]:
    """Write pandas tables and a ``model.json`` into a new folder ``out``.

    Parameters
    ----------
    out : str
        A local folder that does not exist yet (or is empty).
    tables : dict of str to pandas.DataFrame
        Written as ``<name>.parquet`` (or ``.csv``), without the index.
    meta : dict
        JSON-able description written as ``model.json``.
    fmt : {"parquet", "csv"}

    Returns
    -------
    list of str
        The files written.

    Raises
    ------
    FileExistsError
        ``out`` is a file or a folder that is not empty (the message names what it holds):
        nothing in it is replaced or deleted.
    ValueError
        An unknown ``fmt``.
    """
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"format must be 'parquet' or 'csv', got {fmt!r}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise FileExistsError(f"{out} is a file; give a new folder")
    held = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if held:  # nothing is replaced: an export of its own included
        raise FileExistsError(f"{out} is not empty: it holds {', '.join(held[:8])}"
                              f"{f' and {len(held) - 8} more' if len(held) > 8 else ''}; "
                              f"give a new or empty folder")
    os.makedirs(out, exist_ok=True)
    written = []
    for name, df in tables.items():
        path = os.path.join(out, f"{name}.{fmt}")
        if fmt == "parquet":
            df.to_parquet(path, index=False)
        else:
            df.to_csv(path, index=False)
        written.append(path)
    path = os.path.join(out, "model.json")
    with open(path, "w") as f:
        json.dump(_plain(meta, "meta"), f, indent=1)
    written.append(path)
    return written
