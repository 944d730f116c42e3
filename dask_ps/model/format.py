"""Checkpoint stores: versioned zarr (v3) groups of tables, their optimizer state and metadata.

Layout of a checkpoint at ``url`` (any fsspec URL: a local directory, ``s3://…``, ``memory://…``)::

    url/v000001/zarr.json              group; attributes: JSON metadata (see ``save_attrs``)
    url/v000001/t0/values              (n, ncols) weights of the first table
    url/v000001/t0/keys                (n,) int64 keys, ascending (sparse tables only)
    url/v000001/t0/slots/<slot>        (n, width) optimizer state (FTRL z, n; Adam m, v, t…)
    url/v000001/manifest.json          written last: the version is complete once it exists
    url/v000002/…

Arrays are chunked by rows, a fixed number of bytes per chunk whatever the number of shards,
and written by many processes at once, each owning whole chunks. A version without a valid
manifest is torn (its writer died): readers skip it and report it with a
:class:`TornCheckpointWarning`. Every chunk carries a CRC32C checksum and the manifest counts
the chunks of each array (each looked up by its key) and holds a checksum of every
``zarr.json`` (the metadata, and the attributes where a fit keeps its own state, e.g. a GBDT
fit's trees), so a version damaged later (a chunk lost, cut short or overwritten, metadata
changed even where it still parses) is detected too: skipped in favour of an older one when
found before loading, an error naming the array and rows when a checksum fails while
loading. Nothing in a store is ever unpickled: metadata is JSON and the optimizer is rebuilt
from its registered name and hyper-parameters.

This module knows the store (:mod:`dask_ps.model._format_tables`, how its tables are described
in its metadata; :mod:`dask_ps.model._targets`, where a store or an export may be written);
:mod:`dask_ps.model.checkpoint` moves the rows between it and the shards.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import re
import time
import warnings
from dataclasses import dataclass, field

import fsspec
import numpy as np

from ..exceptions import CheckpointFormatError, CheckpointNotFoundError, user_stacklevel
from ._format_tables import spec_from_attrs, table_attrs
from ._manifests import MANIFEST, absent_text, check_manifest, is_torn_write, torn_reasons

__all__ = ["FORMAT", "CheckpointInfo", "TornCheckpointWarning", "check_format", "chunk_keys",
           "latest", "list_versions", "open_version", "read_versions", "spec_from_attrs",
           "table_attrs", "verify", "version_numbers"]

#: Version of the store layout; readers refuse anything newer.
FORMAT = 1
_VERSION = re.compile(r"^v(\d{6,})$")


class TornCheckpointWarning(UserWarning):
    """A checkpoint version was found incomplete (its writer died) or damaged, and skipped."""


@dataclass
class CheckpointInfo:
    """One complete version of a checkpoint store.

    Attributes
    ----------
    url : str
        The store.
    version : int
        Version number (1, 2, …).
    attrs : dict
        Its JSON metadata: tables, clock, data position, library and format version.
    torn : list of int
        Versions newer than this one that were found incomplete and skipped: without a
        manifest (a torn write), or with one that is damaged (not valid JSON, not a
        manifest; the warning says which, :func:`skipped_text`).
    seconds : float
        Time the save took (0 for a version read back).
    damaged : dict
        Versions newer than this one that were complete but are damaged (missing chunks,
        unreadable metadata, found before loading; a chunk whose checksum fails, found
        while loading a folder's newest version), skipped: version -> list of problems.
    arrays : dict
        Each array's metadata as :func:`latest` read it and checked it against the
        manifest's checksums (its ``zarr.json`` parsed, by path in the version, e.g.
        ``"t0/values"``): a load or restore of this version opens its arrays with it
        (:func:`~dask_ps.model.readers.open_arrays`) rather than reading every
        ``zarr.json`` again. Empty for a version not read by :func:`latest` (e.g. one
        :meth:`PSModel.save` returned): its arrays' metadata is read when it is restored.
    """

    url: str
    version: int
    attrs: dict
    torn: list = field(default_factory=list)
    seconds: float = 0.0
    damaged: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def path(self) -> str:
        """URL of this version's zarr group."""
        return version_url(self.url, self.version)

    @property
    def clock(self) -> int:
        """The training clock (driver step) the checkpoint was taken at."""
        return int(self.attrs.get("clock", 0))

    @property
    def data_position(self) -> dict:
        """Where training was in the data (e.g. ``{"epoch": 3}``)."""
        return dict(self.attrs.get("data_position") or {})


def _fs(url: str):
    fs, root = fsspec.core.url_to_fs(url)
    return fs, root.rstrip("/")


def is_process_local(url: str) -> bool:
    """Whether the URL names storage private to one process (``memory://``)."""
    return "memory" in np.atleast_1d(_fs(url)[0].protocol)


def version_url(url: str, version: int) -> str:
    """URL of version ``version`` of the store at ``url``."""
    return f"{url.rstrip('/')}/v{version:06d}"


def zarr_store(url: str, read_only: bool = False):
    """A zarr store for ``url``: a LocalStore for local paths, else an FsspecStore."""
    from zarr.storage import FsspecStore, LocalStore

    fs, path = _fs(url)
    if "file" in np.atleast_1d(fs.protocol):
        return LocalStore(path, read_only=read_only)
    return FsspecStore.from_url(url, read_only=read_only)


def list_versions(url: str) -> tuple[list[int], list[int]]:
    """Complete and torn version numbers of the store at ``url``, each ascending, listed anew
    (s3fs's cached listing misses other processes' versions); OSError naming ``url``."""
    return read_versions(url)[:2]


def version_numbers(url: str) -> list[int]:
    """Every version number of the store at ``url``, complete or torn: the folder listed
    anew (as :func:`list_versions` lists it), no manifest read. What a new version's
    number is chosen above (:func:`~dask_ps.model._versions.next_version`).

    Returns
    -------
    list of int
        Ascending; empty when ``url`` does not exist.

    Raises
    ------
    OSError
        The folder cannot be listed (an object store denying access), naming ``url``.
    """
    return sorted(v for v, _ in _entries(url)[2])


def _entries(url: str) -> tuple:
    """``(fs, root, [(version, folder name), ...])``: the version folders of the store at
    ``url``, listed anew (none when it does not exist)."""
    from ..io._storage import storage_error
    fs, root = _fs(url)
    try:
        entries = fs.ls(root, detail=False, refresh=True)
    except FileNotFoundError:
        return fs, root, []
    except OSError as exc:  # on an object store: access denied (credentials)
        raise storage_error(url, exc, "checkpoint") from None
    return fs, root, [(int(m.group(1)), m.group(0)) for entry in entries
                      if (m := _VERSION.match(entry.rstrip("/").rsplit("/", 1)[-1]))]


def read_versions(url: str) -> tuple[list[int], list[int], dict]:
    """:func:`list_versions`, and the manifest of each complete version, which told it
    complete: the folder listed anew and every version's manifest read once, for a caller
    to pass on (:func:`latest`'s ``listed``: a save's warning, a resume's first look)
    rather than list and read them again.

    Returns
    -------
    complete, torn : list of int
        As :func:`list_versions`.
    manifests : dict
        Version (each of ``complete``) -> its ``manifest.json``, parsed.

    Raises
    ------
    OSError
        The folder cannot be listed (an object store denying access), naming ``url``.
    """
    fs, root, entries = _entries(url)
    manifests, torn = {}, []
    for v, name in entries:
        if (manifest := _read_manifest(fs, f"{root}/{name}")) is not None:
            manifests[v] = manifest
        else:
            torn.append(v)
    return sorted(manifests), sorted(torn), manifests


def _read_manifest(fs, path: str) -> dict | None:
    return check_manifest(fs, path)[0]


def latest(url: str, version: int | None = None, *, warn: bool = True,
           listed: tuple | None = None) -> CheckpointInfo:
    """The newest complete version of the store at ``url`` (or version ``version``).

    Torn versions newer than the one returned are listed in ``torn`` and reported with a
    :class:`TornCheckpointWarning` (``warn`` False: listed only, for a caller that skips
    more versions to say them all in one warning, :func:`skipped_text`). ``listed``: what
    :func:`read_versions` read of the folder just before (a save's or a resume's one
    listing, serving their other uses too), else it is listed and read here.

    Raises
    ------
    CheckpointNotFoundError
        No complete version (or not version ``version``); the message says what is there
        instead (:func:`~dask_ps.model._manifests.absent_text`: no such folder, a file, an
        export, torn versions and why each is torn) or which versions are damaged.
    CheckpointFormatError
        A version written in a newer store format than this dask_ps reads.
    TypeError
        ``version`` is not an integer (a string ``"1"`` was reported as missing).
    """
    if version is not None:
        try:
            version = operator.index(version)
        except TypeError:
            raise TypeError(f"checkpoint version must be an integer, got {version!r} "
                            f"({type(version).__name__})") from None
    # each manifest read once, passed on
    complete, torn, manifests = read_versions(url) if listed is None else listed
    if version is not None:
        if version not in complete:
            raise CheckpointNotFoundError(
                f"checkpoint {url!r} has no complete version {version}; complete: {complete}, "
                f"torn: {torn}" + ("" if complete else f" ({absent_text(url, torn)})"))
        problems, read = _inspect(url, version, manifests[version])
        if problems:
            raise CheckpointFormatError(f"checkpoint {url!r} version {version} is damaged: "
                                        + "; ".join(problems))
        chosen = version
    else:
        damaged, chosen = {}, None
        for v in reversed(complete):
            problems, read = _inspect(url, v, manifests[v])
            if not problems:
                chosen = v
                break
            damaged[v] = problems
        if chosen is None and not damaged:  # what is there instead: said
            raise CheckpointNotFoundError(absent_text(url, torn))
        if chosen is None:
            raise CheckpointNotFoundError(
                f"no complete checkpoint version at {url!r}"
                + (f"; torn (incomplete) versions {torn} were skipped" if torn else "")
                + "".join(f"; version {v} is damaged: {'; '.join(p)}"
                          for v, p in damaged.items()))
    newer_torn = [v for v in torn if v > chosen]
    damaged = {} if version is not None else damaged
    if warn and (newer_torn or damaged):
        warnings.warn(f"checkpoint {url!r}: {skipped_text(newer_torn, damaged, url)}; skipped, "
                      f"using version {chosen}", TornCheckpointWarning,
                      stacklevel=user_stacklevel())
    attrs = read["zarr.json"]["attributes"]  # as verified: each file of it read once
    check_format(attrs, url, chosen, read["manifest"])
    arrays = {meta[:-len("/zarr.json")]: parsed for meta, parsed in read.items()
              if meta.endswith("/zarr.json")}  # opened with this by a load or restore
    return CheckpointInfo(url, chosen, attrs, newer_torn, damaged=damaged, arrays=arrays)


def older_sound(info: CheckpointInfo, exc: Exception, errors: list[str], *,
                warn: bool = True) -> CheckpointInfo | None:
    """After version ``info`` failed to load or restore with ``exc`` (a chunk whose checksum
    fails, found only when its data is read), the newest older complete version that
    :func:`latest` accepts, with a :class:`TornCheckpointWarning` naming the version skipped
    and its damage (pointing at the first caller outside dask_ps; ``warn`` False: none, the
    caller says every version it skipped at once); None when there is none.

    Nothing is changed in the store: the damaged version stays as it is. ``errors`` collects
    every version's problem (``"version 2: ..."``), for the error raised when none loads.
    The returned version's ``damaged`` names the versions skipped, ``torn`` the torn ones.
    """
    damaged = {**info.damaged, info.version: [str(exc)]}
    errors.append(f"version {info.version}: {exc}")
    for v in reversed([v for v in list_versions(info.url)[0] if v < info.version]):
        try:
            nxt = latest(info.url, version=v, warn=False)  # torn ones: in info.torn
        except CheckpointFormatError as bad:  # its metadata is damaged too
            errors.append(f"version {v}: {bad}")
            damaged[v] = [str(bad)]
            continue
        nxt.torn = sorted(set(info.torn) | {t for t in nxt.torn if t > v})
        nxt.damaged = damaged
        if warn:
            new = {d: p for d, p in damaged.items() if d not in info.damaged}
            warnings.warn(f"checkpoint {info.url!r}: {skipped_text([], new)}; skipped, using "
                          f"version {v}", TornCheckpointWarning, stacklevel=user_stacklevel())
        return nxt
    return None


def skipped_text(torn: list[int], damaged: dict, url: str | None = None) -> str:
    """What a :class:`TornCheckpointWarning` says of the versions skipped: ``"versions [4]
    are incomplete (torn writes), version 3 is damaged (...)"``, damaged ones newest first
    (``damaged``: version -> its problems). Given the store's ``url``, a version of
    ``torn`` whose manifest is there but damaged (:func:`~._manifests.torn_reasons`: not
    valid JSON, naming the JSON error's line and column; not a manifest) is said damaged,
    naming the file: ``"version 5 is damaged (URL/v000005/manifest.json is not valid JSON
    (truncated or damaged): ...)"``; "torn writes" are only versions without a manifest."""
    reasons = torn_reasons(url, torn) if url and torn else {}
    writes = sorted(v for v in torn if v not in reasons or is_torn_write(reasons[v]))
    damaged = {**damaged, **{v: [f"{url.rstrip('/')}/v{v:06d}/{why}"]
                             for v, why in reasons.items() if not is_torn_write(why)}}
    return ", ".join(([f"versions {writes} are incomplete (torn writes)"] if writes else [])
                     + [f"version {v} is damaged ({'; '.join(p)})"
                        for v, p in sorted(damaged.items(), reverse=True)])


def verify(url: str, version: int) -> list[str]:
    """Problems found in a complete version without reading its data: metadata that does not
    parse or differs from its checksum in the manifest, arrays missing chunks (the keys
    their ``zarr.json`` shape and chunk shape give, :func:`chunk_keys`, looked up among the
    files; stray files do not stand in for one, and an empty file counts as lost). Empty
    when sound.

    (Chunk contents are checked by their CRC32C checksums when read.)

    Parameters
    ----------
    url : str
        The store.
    version : int
        One of its complete versions (:func:`list_versions`).

    Returns
    -------
    list of str
        E.g. ``"array 't0/values' has 3 of its 5 chunks: c/1/0 and c/3/0 are missing"``
        (the first :data:`NAMED_CHUNKS` keys named, then a count).
    """
    return _inspect(url, version)[0]


def _inspect(url: str, version: int, manifest: dict | None = None) -> tuple[list[str], dict]:
    """:func:`verify`'s problems, and what it read: ``{"manifest": its manifest, "zarr.json":
    the group's metadata parsed, "<array>/zarr.json": each array's}`` (an unreadable one
    left out), for :func:`latest` to take the version's attributes and format from without
    reading them again. ``manifest``: the version's, as read already (else read here)."""
    fs, root = _fs(version_url(url, version))
    if manifest is None:
        manifest = _read_manifest(fs, root) or {}
    problems, metas = [], {"manifest": manifest}
    sums = manifest.get("metadata") or {}  # none in versions written before they were kept
    for meta in ["zarr.json"] + [f"{a}/zarr.json" for a in manifest.get("arrays", {})]:
        try:
            raw = fs.cat_file(f"{root}/{meta}")
            metas[meta] = json.loads(raw)
        except (FileNotFoundError, ValueError) as exc:
            problems.append(f"{meta} unreadable ({type(exc).__name__}: {exc})")
            continue
        if meta in sums and _digest(raw) != sums[meta]:
            problems.append(f"{meta} changed since it was written (its checksum in the "
                            f"manifest differs)")
    group = metas.get("zarr.json")
    if group is not None and not (isinstance(group, dict) and group.get("node_type") == "group"
                                  and isinstance(group.get("attributes", {}), dict)):
        del metas["zarr.json"]  # parses, but no zarr group's (a version of no checksums)
        problems.append("zarr.json is not the metadata of a zarr group with attributes")
    elif group is not None:
        group.setdefault("attributes", {})
    for array, counts in manifest.get("arrays", {}).items():
        meta = metas.get(f"{array}/zarr.json")
        if len(counts) < 2 or meta is None:  # written before chunks were counted; unreadable
            continue
        try:
            expected = chunk_keys(meta)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            problems.append(f"{array}/zarr.json does not give its chunks ({exc!r})")
            continue
        if len(expected) != counts[1]:
            problems.append(f"array {array!r}: its zarr.json gives {len(expected)} chunks, "
                            f"the manifest counts {counts[1]}")
            continue
        if not expected:  # an empty table's
            continue
        prefix = f"{root}/{array}/"
        try:  # key -> bytes; a chunk holds at least its checksum: an empty file is lost
            found = {p[len(prefix):]: info.get("size") for p, info in
                     fs.find(prefix, detail=True).items() if p.startswith(prefix)}
        except FileNotFoundError:
            found = {}
        missing = [k if k not in found else f"{k} (0 bytes)" for k in expected
                   if found.get(k, 0) == 0]
        if missing:
            named = ", ".join(missing[:NAMED_CHUNKS])
            if len(missing) > NAMED_CHUNKS:
                named += f" and {len(missing) - NAMED_CHUNKS} more"
            elif len(missing) > 1:
                named = f"{', '.join(missing[:-1])} and {missing[-1]}"
            problems.append(f"array {array!r} has {len(expected) - len(missing)} of its "
                            f"{len(expected)} chunks: {named} "
                            f"{'is' if len(missing) == 1 else 'are'} missing")
    return problems, metas


#: Missing chunk keys :func:`verify` names before it counts the rest.
NAMED_CHUNKS = 5


def chunk_keys(meta: dict) -> list[str]:
    """The store keys of every chunk of a zarr v3 array, relative to the array, from its
    metadata (its ``zarr.json``, parsed): a regular chunk grid, the ``default`` chunk key
    encoding (``c/0/0``, what zarr writes by default and the checkpoints use; another
    separator too) or ``v2`` (``0.0``). No chunk for an array with a dimension of length 0.

    Parameters
    ----------
    meta : dict
        The array's ``zarr.json``.

    Returns
    -------
    list of str
        In C order of the chunk grid, e.g. ``["c/0/0", "c/1/0"]`` for shape (77, 1) and
        chunk shape (64, 1).

    Raises
    ------
    ValueError
        Another chunk grid or key encoding (KeyError, TypeError: metadata without them).
    """
    grid = meta["chunk_grid"]
    if grid["name"] != "regular":
        raise ValueError(f"chunk grid {grid['name']!r}")
    shape, chunks = meta["shape"], grid["configuration"]["chunk_shape"]
    encoding = meta.get("chunk_key_encoding") or {"name": "default"}
    name = encoding["name"]
    if name not in ("default", "v2"):
        raise ValueError(f"chunk key encoding {name!r}")
    sep = (encoding.get("configuration") or {}).get("separator",
                                                    "/" if name == "default" else ".")
    grid_shape = [-(-int(n) // int(c)) for n, c in zip(shape, chunks, strict=True)]
    if name == "v2":
        return [sep.join(map(str, i)) or "0" for i in itertools.product(*map(range, grid_shape))]
    return ["c" + "".join(sep + str(j) for j in i)
            for i in itertools.product(*map(range, grid_shape))]


def check_format(attrs: dict, url: str, version: int, manifest: dict | None = None) -> None:
    """Refuse version ``version`` of ``url`` (``attrs``, its metadata) unless its format,
    in its metadata (``dask_ps.format``) and in its manifest (``format``; ``manifest``, as
    read already, or read here) alike, is one this dask_ps reads, and its tables'
    descriptions give their chunks.

    Raises
    ------
    CheckpointFormatError
        Naming the checkpoint, version and field: a newer format (upgrade dask_ps), one
        no dask_ps writes or two formats that differ (the metadata is damaged or edited),
        a table of no ``chunk_rows`` or ``n_keys``.
    """
    meta = attrs.get("dask_ps")
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        raise CheckpointFormatError(f"checkpoint {url!r} version {version} is not a dask_ps "
                                    f"checkpoint (no 'dask_ps' format attribute)")
    if manifest is None:
        fs, root = _fs(version_url(url, version))
        manifest = _read_manifest(fs, root) or {}
    written = manifest.get("format")
    # each format with the dask_ps version beside it (a manifest's: none before it was kept)
    for where, fmt, by in ((" (field dask_ps.format)", meta["format"], meta),
                           (" (field format of its manifest.json)", written, manifest)):
        if type(fmt) is int and fmt > FORMAT:
            lib = by.get("library_version")
            raise CheckpointFormatError(
                f"checkpoint {url!r} version {version}{where} has format {fmt} (written by "
                f"{f'dask_ps {lib}' if lib else 'a newer dask_ps'}); this dask_ps reads "
                f"formats up to {FORMAT}: upgrade dask_ps to load it")
    if type(meta["format"]) is not int or meta["format"] < 1 or type(written) is not int \
            or written != meta["format"]:
        raise CheckpointFormatError(
            f"checkpoint {url!r} version {version}: its metadata is damaged: field "
            f"dask_ps.format is {meta['format']!r}, field format of its manifest.json "
            f"{written!r}; a dask_ps checkpoint gives one format in both (this dask_ps reads "
            f"1 to {FORMAT})")
    tables = attrs.get("tables")
    problem = None if isinstance(tables, dict) else "no 'tables' attribute"
    for name, t in (tables or {}).items() if problem is None else ():
        if not isinstance(t, dict) or t.get("name") != name:
            problem = f"table {name!r} is described under another name"
        elif not isinstance(t.get("chunk_rows"), int) or t["chunk_rows"] < 1 or \
                not isinstance(t.get("n_keys"), int) or t["n_keys"] < 0:
            problem = (f"table {name!r} has chunk_rows {t.get('chunk_rows')!r} and n_keys "
                       f"{t.get('n_keys')!r}")
        if problem:
            break
    if problem:
        raise CheckpointFormatError(f"checkpoint {url!r} version {version}: its metadata is "
                                    f"damaged: {problem}")


def open_version(path: str, mode: str = "r"):
    """The zarr group of one version (``mode="w"`` creates it)."""
    import zarr

    return zarr.open_group(zarr_store(path), mode=mode, zarr_format=3)


def _digest(raw: bytes) -> str:
    """The checksum of a ``zarr.json`` the manifest keeps (SHA-256, hex)."""
    return hashlib.sha256(raw).hexdigest()


def write_manifest(path: str, arrays: dict, library_version: str | None = None) -> None:
    """Mark the version at ``path`` complete (the last write of a save): the chunk count of
    each of its ``arrays``, the checksum of every ``zarr.json`` (:func:`verify` checks
    them) and the ``library_version`` of dask_ps that wrote it (named beside its format
    when a dask_ps reading older formats refuses it).

    The manifest is written beside and then moved into place, so that a reader never sees
    half of it on file systems where a move is atomic (elsewhere a cut-short manifest fails
    to parse: the version is skipped, said damaged, naming the JSON error's place).
    """
    fs, root = _fs(path)
    metadata = {meta: _digest(fs.cat_file(f"{root}/{meta}"))
                for meta in ["zarr.json"] + [f"{a}/zarr.json" for a in arrays]}
    body = json.dumps(dict(format=FORMAT, written=time.time(), arrays=arrays,
                           metadata=metadata, **({} if library_version is None else
                                                 dict(library_version=library_version))
                           )).encode()
    tmp = f"{root}/{MANIFEST}.tmp"
    fs.pipe_file(tmp, body)
    fs.mv(tmp, f"{root}/{MANIFEST}")
