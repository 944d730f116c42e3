"""Why a checkpoint version is torn, and what a URL without a complete version holds:
the manifest's check (:func:`check_manifest`, the one test of "is this version complete"),
:func:`torn_reasons` (why each version not complete is not: a torn write, no manifest, or
a manifest that is damaged), :func:`torn_text` (those reasons, for a warning or an error) and
:func:`absent_text` (no such folder, a file, an export, torn versions only, a folder
without versions): the messages of :func:`~dask_ps.model.format.latest` and of a resume
that finds nothing to resume. Below :mod:`dask_ps.model.format`, which imports it.
"""

from __future__ import annotations

import itertools
import json

import fsspec

__all__ = ["MANIFEST", "absent_text", "check_manifest", "is_torn_write", "torn_reasons",
           "torn_text"]

#: The file written last into a version: the version is complete once it holds a manifest.
MANIFEST = "manifest.json"
#: :func:`check_manifest`'s reason for a version without a manifest: a torn write (its save
#: died, or is still writing); every other reason is a manifest that is there but damaged.
NO_MANIFEST = f"no {MANIFEST}"
#: :func:`torn_reasons`'s reason for a version complete when read again (a save finished).
WRITTEN_SINCE = "complete now (written since)"


def check_manifest(fs, path: str) -> tuple[dict | None, str | None]:
    """``(manifest, None)`` for version folder ``path`` whose manifest makes it complete,
    else ``(None, why it is not)``: :data:`NO_MANIFEST` (a torn write), or what is wrong
    with the manifest there, a text beginning with its file name (``"manifest.json is not
    valid JSON (truncated or damaged): Expecting ',' delimiter at line 1, column 57"``)."""
    try:
        manifest = json.loads(fs.cat_file(f"{path}/{MANIFEST}"))
    except FileNotFoundError:  # its save died (or is still writing) before the manifest
        return None, NO_MANIFEST
    except UnicodeDecodeError as exc:  # (it is written moved into place, whole: damaged)
        return None, (f"{MANIFEST} is not valid JSON (damaged): not UTF-8 text (byte "
                      f"{exc.start})")
    except json.JSONDecodeError as exc:  # cut short, or overwritten
        return None, (f"{MANIFEST} is not valid JSON (truncated or damaged): {exc.msg} at "
                      f"line {exc.lineno}, column {exc.colno}")
    if not (isinstance(manifest, dict) and "format" in manifest):
        return None, f"{MANIFEST} is not a manifest (no format field)"
    # damage that still parses (fields of other types) is not a manifest either
    arrays, sums = manifest.get("arrays", {}), manifest.get("metadata", {})
    if not (isinstance(arrays, dict) and isinstance(sums, dict)
            and all(isinstance(c, list) for c in arrays.values())):
        return None, f"{MANIFEST} is malformed (its arrays or metadata fields)"
    return manifest, None


def torn_reasons(url: str, torn: list[int]) -> dict[int, str]:
    """Why each of the versions ``torn`` of the store at ``url`` is not complete, newest
    first: :func:`check_manifest`'s reason (their manifests read again), or
    :data:`WRITTEN_SINCE` for one complete now."""
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    return {v: check_manifest(fs, f"{root}/v{v:06d}")[1] or WRITTEN_SINCE
            for v in sorted(torn, reverse=True)}


def is_torn_write(why: str) -> bool:
    """Whether a reason of :func:`torn_reasons` is a torn write (no manifest: its save died,
    or is still writing; or it has finished since), not a damaged manifest."""
    return why in (NO_MANIFEST, WRITTEN_SINCE)


def torn_text(url: str, torn: list[int], n: int = 3, reasons: dict | None = None) -> str:
    """Why each of the versions ``torn`` of the store at ``url`` is not complete, newest
    first, versions alike said together (:func:`torn_reasons`): ``"v000027: manifest.json
    is not valid JSON (...); v000026 and v000025: no manifest.json"``; the first ``n``
    reasons, then how many more versions. ``reasons``: :func:`torn_reasons`'s, if read
    already."""
    alike: dict = {}
    for v, why in (torn_reasons(url, torn) if reasons is None else reasons).items():
        alike.setdefault(why, []).append(f"v{v:06d}")
    parts = [f"{_names(vs)}: {why}" for why, vs in itertools.islice(alike.items(), n)]
    more = sum(len(vs) for vs in list(alike.values())[n:])
    return "; ".join(parts) + (f"; and {more} more torn" if more else "")


def _names(names: list[str], n: int = 3) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``, ``"a, b, c and 4 more"``."""
    shown = names[:n] + ([f"{len(names) - n} more"] if len(names) > n else [])
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


#: What a checkpoint is, for the messages of a URL that holds none.
_WHAT = ("a checkpoint is a folder of versions (v000001/...), written by PSModel.save or a "
         "fit's checkpoint=URL")


def absent_text(url: str, torn: list[int]) -> str:
    """Why the store at ``url`` has no complete version, saying what is there: no such
    folder, a file, an export of :meth:`PSModel.export` or of ``dask-ps export`` (not a
    checkpoint: how one is read instead), a folder of torn versions only (each one's
    reason, :func:`torn_text`; damaged manifests said as such), or a folder without
    versions (naming a few entries)."""
    if torn:
        reasons = torn_reasons(url, torn)
        writes = [is_torn_write(why) for why in reasons.values()]
        what = ("every version is torn (incomplete: its save died, or is still writing)"
                if all(writes) else f"every version's {MANIFEST} is damaged" if not any(writes)
                else f"every version is torn (incomplete: its save died, or is still "
                     f"writing) or its {MANIFEST} is damaged")
        return (f"no complete checkpoint version at {url!r}: {what}: "
                f"{torn_text(url, torn, reasons=reasons)}")
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    try:
        if not fs.exists(root):
            return f"no checkpoint at {url!r}: no such folder"
        if fs.isfile(root):
            return f"no checkpoint at {url!r}: it is a file, not a folder ({_WHAT})"
        entries = sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(root, detail=False))
    except OSError:  # unreadable: said as before
        return f"no complete checkpoint version at {url!r}"
    for meta, key in (("zarr.json", "attributes"), ("model.json", None)):
        try:
            attrs = json.loads(fs.cat_file(f"{root}/{meta}"))
            attrs = attrs.get(key) if key else attrs
            export = attrs["dask_ps_export"]
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            continue
        if key:  # PSModel.export: a plain zarr group of weights
            tables = export.get("tables") if isinstance(export, dict) else None
            name, t = next(iter(tables.items())) if isinstance(tables, dict) and tables \
                else ("name", {})
            where = f"{name}/values" if isinstance(t, dict) and t.get("sparse") else name
            return (f"{url!r} is an export of a model's weights (PSModel.export), not a "
                    f"checkpoint: read its arrays with zarr, e.g. zarr.open_group({url!r})"
                    f"[{where!r}][:] (a dense table is an array of its name, a sparse one "
                    f"'name/keys' and 'name/values'); it keeps no optimizer state, and "
                    f"PSModel.load reads checkpoints only ({_WHAT})")
        return (f"{url!r} is an export of a saved model's weights as tables (dask-ps "
                f"export: model.json and parquet or csv files), not a checkpoint: read its "
                f"tables with pandas; dask-ps evaluate takes the model (.npz) saved by "
                f"dask-ps train --save, and PSModel.load reads checkpoints only ({_WHAT})")
    held = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5
                                      else "")
    return (f"no complete checkpoint version at {url!r}: the folder holds no versions ("
            + (f"it holds {held}" if entries else "it is empty") + f"); {_WHAT}")
