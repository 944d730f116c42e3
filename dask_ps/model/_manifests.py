"""Why a checkpoint version is torn, and what a URL without a complete version holds:
the manifest's check (:func:`check_manifest`, the one test of "is this version complete"),
:func:`torn_text` (each torn version's reason, for a warning or an error) and
:func:`absent_text` (no such folder, a file, an export, torn versions only, a folder
without versions): the messages of :func:`~dask_ps.model.format.latest` and of a resume
that finds nothing to resume. Below :mod:`dask_ps.model.format`, which imports it.
"""

from __future__ import annotations

import itertools
import json

import fsspec

__all__ = ["MANIFEST", "absent_text", "check_manifest", "torn_text"]

#: The file written last into a version: the version is complete once it holds a manifest.
MANIFEST = "manifest.json"


def check_manifest(fs, path: str) -> tuple[dict | None, str | None]:
    """``(manifest, None)`` for version folder ``path`` whose manifest makes it complete,
    else ``(None, why it is torn)``."""
    try:
        manifest = json.loads(fs.cat_file(f"{path}/{MANIFEST}"))
    except FileNotFoundError:  # its save died (or is still writing) before the manifest
        return None, f"no {MANIFEST}"
    except ValueError:  # cut short while being written, or overwritten
        return None, f"{MANIFEST} is not JSON"
    if not (isinstance(manifest, dict) and "format" in manifest):
        return None, f"{MANIFEST} is not a manifest (no format field)"
    # damage that still parses (fields of other types) is not a manifest either: torn
    arrays, sums = manifest.get("arrays", {}), manifest.get("metadata", {})
    if not (isinstance(arrays, dict) and isinstance(sums, dict)
            and all(isinstance(c, list) for c in arrays.values())):
        return None, f"{MANIFEST} is malformed (its arrays or metadata fields)"
    return manifest, None


def torn_text(url: str, torn: list[int], n: int = 3) -> str:
    """Why each of the torn versions ``torn`` of the store at ``url`` is torn, newest
    first, versions alike said together (their manifests read again):
    ``"v000027: manifest.json is not JSON; v000026 and v000025: no manifest.json"``; the
    first ``n`` reasons, then how many more versions."""
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    alike: dict = {}
    for v in sorted(torn, reverse=True):
        why = check_manifest(fs, f"{root}/v{v:06d}")[1] or "complete now (written since)"
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
    reason, :func:`torn_text`), or a folder without versions (naming a few entries)."""
    if torn:
        return (f"no complete checkpoint version at {url!r}: every version is torn "
                f"(incomplete: its save died, or is still writing): {torn_text(url, torn)}")
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
