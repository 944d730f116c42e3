"""A fitted estimator in one file, without pickle; and its weights as plain tables.

:func:`save_estimator` writes a NumPy ``.npz`` archive (a zip of ``.npy`` arrays) holding

* ``__meta__``: one JSON text — format name and version, the library version, the
  estimator's public class name, its constructor parameters (``client`` left out), how each
  fitted attribute is stored, and caller's ``extra`` metadata (e.g. how the training data
  was read, so that test data can be read the same way: ``dask-ps train --save`` stores
  ``extra["data"]`` with the format, the label, the ``--weight`` column, which ``dask-ps
  evaluate`` leaves out of a test file's features and reads as its weights, and the
  encoder or feature columns);
* one array per fitted NumPy attribute (``a/<name>``; fields of a named tuple as
  ``a/<name>/<field>``; a scipy CSR or CSC matrix, e.g. a wide model's ``coef_`` or a
  keyed factorization machine's ``factors_``, as its three arrays ``a/<name>/data``,
  ``.../indices``, ``.../indptr`` and its format and shape in the JSON).
  Object arrays of strings (string ids) are stored as fixed-width unicode and given back as
  object arrays.

Numbers, strings, lists and dicts (e.g. ``history_``) live in the JSON, and so do each
array's dtype and shape, checked when loading. Loading never unpickles
(``numpy.load(allow_pickle=False)``), imports nothing a file names and creates only
estimator classes exported by :mod:`dask_ps` and the named tuples of fitted state listed in
:func:`_records`, looked up by their exact names. This is the estimator's in-memory state
after ``fit``; the shards' tables during a fit are checkpointed by
:meth:`dask_ps.PSModel.save` (zarr) instead.

:func:`write_tables` writes weights for use outside dask_ps: a folder of Parquet or CSV
tables and a ``model.json``.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import time
import zipfile
from typing import Any

import numpy as np

from ._saved_data import data_problem
from .exceptions import DataError

#: Errors writing the temporary file that are the folder's (it does not exist, is a file, is
#: not writable): said of the path given. Others (a folder holding the temporary file's
#: name) keep their own message, which names that file.
_FOLDER_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM,
                            errno.EROFS})

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


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _records() -> dict[str, type]:
    """The named tuples of fitted state a model file may hold, by the name it gives them
    (``module:qualname``): the only classes loading creates besides the estimator."""
    from .algorithms._gbdt_booster import Booster
    from .algorithms._logistic_data import KeyedWeights
    from .algorithms.fm import FMState
    from .algorithms.logistic import TrainState

    return {_class_name(c): c for c in (Booster, KeyedWeights, FMState, TrainState)}


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
        return {**spec, "dtype": value.dtype.str, "shape": list(value.shape)}
    fmt = getattr(value, "format", None)
    if fmt in ("csr", "csc") and hasattr(value, "indptr"):  # scipy CSR or CSC
        for part in ("data", "indices", "indptr"):
            arrays[f"{key}/{part}"] = getattr(value, part)
        return {"kind": fmt, "key": key, "shape": [int(n) for n in value.shape]}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        name = _class_name(type(value))
        if _records().get(name) is not type(value):
            raise TypeError(f"{where}: a {name} cannot be saved (the named tuples a model "
                            f"file may hold are listed in dask_ps.saving._records)")
        return {"kind": "namedtuple", "class": name,
                "fields": {f: _store(getattr(value, f), f"{key}/{f}", arrays, f"{where}.{f}")
                           for f in value._fields}}
    if isinstance(value, tuple):
        return {"kind": "tuple", "value": _plain(value, where)}
    return {"kind": "value", "value": _plain(value, where)}


def _check_fitted(attr: str, value: Any, where: str) -> None:
    """Values no fitted attribute holds, refused with a :class:`DataError` naming ``where``:
    ``classes_`` that are not distinct, a count (``n_*_``) that is not a non-negative whole
    number, a float (``global_mean_``...) that is NaN or infinite. (Float arrays are
    checked by :func:`_restore`.)"""
    if attr == "classes_":
        classes = np.asarray(value)
        if classes.ndim != 1 or np.unique(classes).shape[0] != classes.shape[0]:
            raise DataError(f"{where}: {str(classes.tolist())[:80]} are not distinct "
                            f"classes")
    elif attr.startswith("n_"):
        if isinstance(value, np.ndarray):
            ok = value.dtype.kind in "iu" and bool((value >= 0).all())
        else:  # bool is an int, not a count; n_features_in_ is always given
            ok = (type(value) is int and value >= 0) or (
                value is None and attr != "n_features_in_")
        if not ok:
            raise DataError(f"{where}: {str(value)[:60]!r} is not a non-negative whole "
                            f"number")
    elif isinstance(value, (float, tuple)) and not _finite_floats(value):
        raise DataError(f"{where}: {str(value)[:80]} is not finite")


def _finite_floats(value) -> bool:
    """Whether every float of ``value`` (a float, or a tuple of them, nested, beside other
    things: a tuple may hold arrays of different shapes) is finite."""
    if isinstance(value, tuple):
        return all(_finite_floats(v) for v in value)
    return not isinstance(value, float) or bool(np.isfinite(value))


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
    ValueError
        An ``extra["data"]`` that loading would refuse (naming the field).
    OptionError
        An empty ``path`` (not the current folder) or an unknown protocol, before anything
        is written (:func:`~dask_ps.io._storage.file_system`).
    ModuleNotFoundError
        The protocol's package is not installed (``gs://`` without gcsfs), naming it.
    OSError
        The file cannot be written (an ``IsADirectoryError`` before anything is written when
        a local ``path`` is a folder; a local one in a folder that does not exist, is a file
        or is not writable, naming ``path`` and the folder; for a URL, naming it and why:
        ``s3://`` of a bucket that does not exist, which is not created, or access denied);
        a local temporary file is removed.
    """
    import dask_ps

    from .io._storage import check_url, file_system, storage_error

    check_url(path, "path")  # (not the current folder)
    if "://" in str(path):  # a protocol unknown, or its package missing: before any work
        fs, root = file_system(path, "path")
    name, params = saved_params(estimator)
    problem = data_problem(extra or {}, name, estimator)
    if problem:
        raise ValueError(f"extra: {problem}")
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
        tmp, made = f"{path}.tmp-{os.getpid()}", False
        try:
            with open(tmp, "wb") as f:
                made = True
                f.write(data)
            os.replace(tmp, path)
        except BaseException as exc:  # e.g. path is a folder, the disk is full: leave
            if made:  # nothing behind (only what this call made: not a folder of that
                with contextlib.suppress(OSError):  # name; its own error would hide the first)
                    os.remove(tmp)
            if isinstance(exc, OSError) and exc.filename == tmp and exc.errno in _FOLDER_ERRNOS:
                # the folder's fault (missing, a file, not writable): name the caller's path
                folder = os.path.dirname(os.path.abspath(path))
                raise type(exc)(f"{path}: the model file cannot be written in {folder!r} "
                                f"({exc.strerror or exc})") from None
            raise
    else:  # no folders made on the way: s3fs would create a bucket of a misspelt name
        try:
            with fs.open(root, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise storage_error(path, exc) from None


def _member(arrays: dict, key: Any, where: str) -> np.ndarray:
    if not isinstance(key, str) or key not in arrays:
        raise DataError(f"{where}: array {key!r} is not in the file")
    return arrays[key]


#: Float arrays of fitted state that may hold NaN or infinity, as ``(class, field)``: a
#: GBDT node's threshold is NaN at leaves and categorical splits, +inf for a split of the
#: last bin (missing values are routed by ``default_left``). Every other float array of a
#: model file (weights, factors, leaf values, optimizer state...) must be finite.
_NON_FINITE = {("dask_ps.algorithms._gbdt_booster:Booster", "threshold")}


def _check_finite(value: np.ndarray, key: str, where: str) -> None:
    """A :class:`DataError` naming ``where`` and ``key`` when float ``value`` holds NaN or
    infinity (one vectorised pass)."""
    if value.dtype.kind in "fc" and not np.isfinite(value).all():
        bad = int(value.size - np.count_nonzero(np.isfinite(value)))
        raise DataError(f"{where}: array {key!r} holds {bad} NaN or infinite value(s) of "
                        f"{value.size}: a fitted model's are finite (the file is damaged, or "
                        f"edited)")


def _restore(spec: Any, arrays: dict, where: str, finite: bool = True):
    """The value ``spec`` (as :func:`_store` wrote it) describes, its arrays from
    ``arrays``; a :class:`DataError` naming ``where`` and the field when it does not fit,
    or (``finite``) when a float array holds NaN or infinity."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind == "array":
        value = _member(arrays, spec.get("key"), where)
        # files of format 1 written before 2026-12-06 do not give dtype and shape
        dtype, shape = spec.get("dtype", value.dtype.str), spec.get("shape", list(value.shape))
        if value.dtype.str != dtype or list(value.shape) != shape:
            raise DataError(f"{where}: array {spec['key']!r} is {value.dtype.str} of shape "
                            f"{list(value.shape)}, the metadata says {dtype} of shape {shape}")
        if finite:
            _check_finite(value, spec["key"], where)
        return value.astype(object) if spec.get("object") else value
    if kind in ("csr", "csc"):
        import scipy.sparse as sp

        k = spec.get("key")
        parts = [_member(arrays, f"{k}/{p}", where) for p in ("data", "indices", "indptr")]
        try:
            value = (sp.csr_matrix if kind == "csr" else sp.csc_matrix)(
                tuple(parts), shape=tuple(spec["shape"]))
            value.check_format(full_check=True)  # indices in range, indptr ascending
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: {kind} matrix {k!r} is damaged ({exc})") from None
        if finite:
            _check_finite(value.data, f"{k}/data", where)
        return value
    if kind in ("tuple", "value"):
        if "value" not in spec:
            raise DataError(f"{where}: no 'value' in its description {str(spec)[:80]}")
        return tuple(spec["value"]) if kind == "tuple" else spec["value"]
    if kind == "namedtuple":
        name = spec.get("class")
        cls = _records().get(name) if isinstance(name, str) else None
        if cls is None:  # never imported nor looked up: a file names no code to run
            raise DataError(f"{where}: refusing to create {spec.get('class')!r}, not a class "
                            f"of fitted state a dask_ps model file holds")
        fields = spec.get("fields")
        if not (isinstance(fields, dict) and list(fields) == list(cls._fields)):
            given = list(fields) if isinstance(fields, dict) else fields
            raise DataError(f"{where}: fields {given} stored, a {cls.__qualname__} has "
                            f"{list(cls._fields)}")
        return cls(**{f: _restore(s, arrays, f"{where}.{f}",
                                  finite and (name, f) not in _NON_FINITE)
                      for f, s in fields.items()})
    raise DataError(f"{where}: unknown kind {kind!r}" if kind is not None else
                    f"{where}: no 'kind' in its description {str(spec)[:80]}")


def _read_members(path: str, data: bytes) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` bytes ``data``, read (CRC checked) now."""
    try:
        npz = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{path}: not a dask_ps model file, or truncated "
                        f"({type(exc).__name__}: {exc})") from None
    arrays = {}
    with npz:
        for name in npz.files:
            try:
                arrays[name] = npz[name]
            except zipfile.BadZipFile:
                raise DataError(f"{path}: damaged model file (bad CRC of {name}.npy)") from None
            except (ValueError, OSError, EOFError) as exc:
                raise DataError(f"{path}: damaged model file ({name}.npy: "
                                f"{type(exc).__name__}: {exc})") from None
    return arrays


def _metadata(path: str, arrays: dict) -> dict:
    """The JSON metadata, its fields checked."""
    if _META not in arrays:
        raise DataError(f"{path}: not a dask_ps model file (no {_META} member)")
    try:
        meta = json.loads(str(arrays[_META][()]))
    except (ValueError, IndexError) as exc:
        raise DataError(f"{path}: not a dask_ps model file, or truncated ({_META}: "
                        f"{type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{path}: not a dask_ps model file ({_META} is a "
                        f"{type(meta).__name__}, not a JSON object)")
    if meta.get("format") != FORMAT:
        raise DataError(f"{path}: not a dask_ps model file (format {meta.get('format')!r})")
    version = meta.get("format_version")
    if type(version) is not int:
        raise DataError(f"{path}: format_version {version!r} in its metadata is not a whole "
                        f"number")
    for key, kind in (("estimator", str), ("params", dict), ("attributes", dict),
                      ("extra", dict)):
        if not isinstance(meta.get(key), kind):
            raise DataError(f"{path}: field {key!r} of its metadata is "
                            f"{'missing' if key not in meta else repr(meta[key])[:60]}, "
                            f"not a {kind.__name__}")
    return meta


def load_estimator(path: str):
    """Read an estimator written by :func:`save_estimator`.

    Nothing is unpickled, and no class or function named by the file is imported or called
    unless it is a dask_ps estimator or one of the named tuples of fitted state saving
    writes (found by exact name).

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
        No such file (naming it).
    DataError
        Not such a file (a folder, e.g. a checkpoint, included), a damaged one (a bad CRC,
        an array missing or not of the dtype and shape its metadata gives), a newer format
        version, an unknown estimator, parameters it does not take or refuses, a class
        of saved state that is not one of dask_ps's, fitted attributes that do not fit
        together (an estimator's ``_check_loaded``: a GBDT's trees that prediction could
        not walk), or ``extra["data"]`` without what test data of its format is read with
        (e.g. a table model's ``encoder``; a GBDT table's ``categories``, which must be the
        model's ``categories_``): naming the file and the field.
    OptionError
        An empty ``path`` or an unknown protocol (:func:`~dask_ps.io._storage.file_system`).
    ModuleNotFoundError
        The protocol's package is not installed, naming it.
    """
    import inspect

    import dask_ps

    from .algorithms._renamed import stored_params
    from .io._storage import file_system

    fs, root = file_system(path, "path")
    try:
        with fs.open(root, "rb") as f:
            data = f.read()
        if not data and fs.isdir(root):  # s3fs opens a folder (a prefix) as empty
            raise IsADirectoryError(path)
    except IsADirectoryError:
        raise DataError(f"{path}: a folder, not a model file written by save_estimator "
                        f"(dask-ps train --save); a checkpoint folder is continued with "
                        f"resume=True (--resume auto), not loaded") from None
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such model file") from None
    if not data.startswith(b"PK"):  # not a zip: numpy's error would be about pickles
        why = ("an empty file" if not data else
               f"it starts with {data[:16]!r}, not a .npz archive's 'PK'")
        raise DataError(f"{path}: not a dask_ps model file ({why})")
    arrays = _read_members(path, data)
    meta = _metadata(path, arrays)
    if meta["format_version"] > FORMAT_VERSION:
        raise DataError(f"{path}: format version {meta['format_version']} is newer than the "
                        f"{FORMAT_VERSION} this dask_ps {dask_ps.__version__} reads; upgrade "
                        f"dask_ps")
    name = meta["estimator"]
    cls = getattr(dask_ps, name, None) if name in dask_ps.__all__ else None
    if not (isinstance(cls, type) and hasattr(cls, "get_params")):
        raise DataError(f"{path}: unknown estimator {name!r}")
    params = meta["params"]
    unknown = sorted(set(params) - set(inspect.signature(cls).parameters))
    if unknown:
        raise DataError(f"{path}: params: {name} takes no parameter {', '.join(unknown)} "
                        f"(a file of another dask_ps version, or edited?)")
    try:
        estimator = cls(**stored_params(cls, params))  # an earlier version's old names
        if getattr(cls, "_parameter_constraints", None):
            estimator._validate_params()
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: params: {exc}") from None
    for attr, spec in meta["attributes"].items():
        if not (attr.endswith("_") and attr.isidentifier() and not attr.startswith("__")):
            raise DataError(f"{path}: attributes: {attr!r} is not a fitted attribute's name")
        value = _restore(spec, arrays, f"{path}: attribute {attr}")
        _check_fitted(attr, value, f"{path}: attribute {attr}")
        try:
            setattr(estimator, attr, value)
        except AttributeError as exc:  # e.g. a property such as _repr_html_
            raise DataError(f"{path}: attributes: {attr!r} cannot be set ({exc})") from None
    check = getattr(estimator, "_check_loaded", None)  # state the attributes share
    if check is not None:
        try:
            check()
        except ValueError as exc:
            raise DataError(f"{path}: attributes: {exc}") from None
    problem = data_problem(meta["extra"], name, estimator)
    if problem:
        raise DataError(f"{path}: {problem}")
    return estimator, meta["extra"]


#: The key of a :func:`write_tables` ``model.json`` naming the files that export wrote (and
#: whether it finished): a later export into the folder replaces them.
EXPORT_KEY = "dask_ps_export"


def write_tables(out: str, tables: dict, meta: dict, fmt: str = "parquet") -> list[str]:
    """Write pandas tables and a ``model.json`` into folder ``out``: a new or empty one, or
    one holding an earlier export, which is replaced (as by :meth:`dask_ps.PSModel.export`).

    Parameters
    ----------
    out : str
        A folder (local path or fsspec URL such as ``s3://bucket/prefix``); on an object
        store no bucket is created.
    tables : dict of str to pandas.DataFrame
        Written as ``<name>.parquet`` (or ``.csv``), without the index.
    meta : dict
        JSON-able description written as ``model.json``, with ``meta[EXPORT_KEY]`` added:
        ``{"files": [the tables' files], "complete": bool}`` (``model.json`` is written
        first, so that an export cut short is still one to replace, and again at the end
        with ``complete`` true).
    fmt : {"parquet", "csv"}

    Returns
    -------
    list of str
        The files written, ``model.json`` last.

    Raises
    ------
    FileExistsError
        ``out`` is a file, or a folder holding anything that is not an earlier export's
        (the message names it): nothing in it is replaced or deleted. An earlier export
        is the files its ``model.json`` lists (:data:`EXPORT_KEY`); one written before
        that key is known by its ``"estimator"`` and ``"model"`` strings, and its tables
        by the names of ``tables`` (``.parquet`` or ``.csv``).
    OSError
        A missing bucket or refused access, naming the file
        (:func:`~dask_ps.io._storage.storage_error`).
    ValueError
        An unknown ``fmt``.
    OptionError
        An empty ``out`` (not the current folder) or an unknown protocol
        (:func:`~dask_ps.io._storage.file_system`).
    ModuleNotFoundError
        The protocol's package is not installed, naming it.
    """
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"format must be 'parquet' or 'csv', got {fmt!r}")
    from fsspec.implementations.local import LocalFileSystem

    from .io._storage import file_system, storage_error

    fs, root = file_system(out, "out")
    root, names = root.rstrip("/"), [f"{name}.{fmt}" for name in tables]
    try:
        if fs.isfile(root):
            raise FileExistsError(f"{out} is a file; give a new folder")
        held = ({p.rstrip("/").rsplit("/", 1)[-1]: p  # s3fs: not a listing of before
                 for p in fs.ls(root, detail=False, refresh=True)} if fs.isdir(root) else {})
        earlier = _earlier_export(out, fs, held, tables) if held else []
        for name in earlier:  # the earlier export's files not written again (e.g. its
            if name not in names and name != "model.json":  # tables in the other format)
                fs.rm_file(held[name])
    except FileNotFoundError:  # a missing bucket: the first write names it
        pass
    except OSError as exc:
        if isinstance(exc, FileExistsError):
            raise
        raise storage_error(str(out), exc) from None
    if isinstance(fs, LocalFileSystem):  # (s3fs would create a bucket: stores have none)
        fs.makedirs(root, exist_ok=True)

    def write(name: str, df) -> str:  # named as ``out`` is written (a path, or a URL)
        path = f"{str(out).rstrip('/')}/{name}" if "://" in str(out) else os.path.join(out, name)
        try:
            with fs.open(f"{root}/{name}", "wb") as f:
                if isinstance(df, dict):
                    f.write(json.dumps(_plain(df, "meta"), indent=1).encode())
                elif fmt == "parquet":
                    df.to_parquet(f, index=False)
                else:
                    f.write(df.to_csv(index=False).encode())
        except OSError as exc:
            raise storage_error(path, exc) from None
        return path

    write("model.json", {**meta, EXPORT_KEY: {"files": names, "complete": False}})
    written = [write(name, df) for name, df in zip(names, tables.values())]
    return written + [write("model.json", {**meta, EXPORT_KEY: {"files": names,
                                                                 "complete": True}})]


def _earlier_export(out: str, fs, held: dict, tables: dict) -> list[str]:
    """The names in folder ``out`` (``held``: name -> ``fs`` path) of an earlier
    :func:`write_tables` export, which it replaces; refused (FileExistsError naming them)
    if ``out`` holds anything else (see :func:`write_tables`)."""
    try:
        desc = json.loads(fs.cat_file(held["model.json"])) if "model.json" in held else None
    except (OSError, ValueError):  # a folder named model.json, not JSON, not UTF-8
        desc = None
    mark = desc.get(EXPORT_KEY) if isinstance(desc, dict) else None
    ours = {"model.json"}
    if isinstance(mark, dict) and isinstance(mark.get("files"), list):
        ours |= {f for f in mark["files"] if isinstance(f, str)}
    elif isinstance(desc, dict) and all(isinstance(desc.get(k), str)
                                        for k in ("estimator", "model")):
        ours |= {f"{t}.{ext}" for t in tables for ext in ("parquet", "csv")}
    else:
        ours = set()
    mine = sorted(h for h in held if h in ours and fs.isfile(held[h]))
    others = sorted(h for h in held if h not in mine)
    some = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    if not mine:
        raise FileExistsError(f"{out} is not empty: it holds {some}, not an earlier export "
                              f"(no model.json of dask-ps export); give a new or empty folder")
    if others:
        raise FileExistsError(f"{out} holds an earlier export ({', '.join(mine)}) and also "
                              f"{some}, which are not part of it: move them away, or give "
                              f"a new or empty folder")
    return mine
