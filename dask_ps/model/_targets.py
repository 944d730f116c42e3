"""Where a checkpoint or an export may be written, checked before anything is:
:func:`check_store_url` refuses a checkpoint URL where no folder of versions can be (before
any training), :func:`check_export_target` an export's URL holding anything but an earlier
export (an export replaces what is there). The store itself is :mod:`dask_ps.model.format`.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .format import _fs, version_numbers

__all__ = ["check_export_target", "check_store_url"]


def check_store_url(url: str) -> None:
    """Refuse, before any training, a checkpoint URL where no checkpoint folder can be: an
    unknown protocol, an existing file, or on the local file system a link to nothing, a
    path under a file, or a folder that cannot be created or written to (tried by making
    and removing a temporary file in it, or in its nearest existing parent); on S3 one
    where an empty object cannot be written and deleted (no bucket, wrong credentials):
    :func:`~dask_ps.io._storage.check_writable`.

    Raises
    ------
    ValueError
        Naming ``url`` and what is in the way: a checkpoint is a folder of versions
        (``v000001/``...); an :class:`~dask_ps.OptionError` for an empty ``url`` (not the
        current folder) or a protocol fsspec does not know.
    ModuleNotFoundError
        A known protocol whose package is not installed (``gs://`` without gcsfs), naming
        ``url`` and the package.
    OSError
        Naming ``url`` and the folder where no folder can be made (a read-only file
        system, no permission, ``/proc``), or on an object store what the write met (a
        missing bucket, access denied), of the system's error's type, with its reason.
    """
    from ..io._storage import check_url, check_writable, protocol_error, write_error

    check_url(url, "checkpoint")
    try:
        fs, root = _fs(url)
    except (ValueError, ImportError) as exc:
        said = protocol_error(url, exc, "checkpoint")
        raise (said or type(exc)(f"checkpoint {url!r}: {exc}")) from None

    try:
        if fs.exists(root) and not fs.isdir(root):
            raise ValueError(f"checkpoint {url!r} is a file: a checkpoint is a folder (new "
                             f"or holding earlier versions, v000001/...); name a folder "
                             f"instead")
    except Exception as exc:  # noqa: BLE001 - on an object store: access denied, no
        said = write_error(url, exc, "checkpoint")  # credentials (botocore's own)
        if said is None:
            raise
        raise said from None
    if "file" in np.atleast_1d(fs.protocol) and not os.path.exists(root):
        if os.path.islink(root):
            raise ValueError(f"checkpoint {url!r} is a link to {os.readlink(root)!r}, which "
                             f"does not exist: name a folder (new or existing) instead")
        up = os.path.dirname(root)
        while up != os.path.dirname(up) and not os.path.lexists(up):
            up = os.path.dirname(up)
        if os.path.exists(up) and not os.path.isdir(up):
            raise ValueError(f"checkpoint {url!r}: {up!r} is a file, so no folder can be "
                             f"made under it")
    # what the first save would meet, met now (an object store has no folders)
    check_writable(url, "checkpoint", folder=True)


def check_export_target(url: str) -> None:
    """Refuse to export into ``url`` unless everything there is an earlier export's.

    An export replaces what is at its URL, so the URL must not exist, be an empty folder, or
    hold an earlier export of dask_ps and nothing else (its ``zarr.json``, whose attributes
    ``dask_ps_export`` name its tables, and a folder per table).

    Raises
    ------
    FileExistsError
        ``url`` is a file, holds checkpoint versions, or holds anything that is not part of
        an earlier export (the message names the folder and what is in it); nothing there
        is touched.
    """
    fs, root = _fs(url)
    if fs.isfile(root):
        raise FileExistsError(f"export target {url!r} is a file: give a new or empty folder")
    try:
        entries = sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(root, detail=False))
    except FileNotFoundError:
        return
    if not entries:
        return
    versions = version_numbers(url)  # (names only: no manifest read)
    if versions:
        raise FileExistsError(f"export target {url!r} is a checkpoint folder (versions "
                              f"{versions}): an export there would delete "
                              f"them; export into a new or empty folder")
    try:
        attrs = json.loads(fs.cat_file(f"{root}/zarr.json")).get("attributes") or {}
        tables = attrs["dask_ps_export"]["tables"]
    except (FileNotFoundError, ValueError, AttributeError, KeyError, TypeError):
        tables = None
    if not isinstance(tables, dict):
        raise FileExistsError(f"export target {url!r} is not empty and is not an earlier "
                              f"export of dask_ps: it holds {_some(entries)}; an export "
                              f"there would delete them: export into a new or empty folder")
    ours = {"zarr.json"} | {str(name).split("/")[0] for name in tables}
    foreign = [e for e in entries if e not in ours]
    if foreign:
        raise FileExistsError(f"export target {url!r} holds an earlier export and also "
                              f"{_some(foreign)}, which are not part of it; an export there "
                              f"would delete them: move them away or export into another "
                              f"folder")


def _some(names: list[str], n: int = 8) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")
