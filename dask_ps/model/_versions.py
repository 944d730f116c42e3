"""Claiming the next version of a checkpoint for one save: a folder made with ``os.mkdir`` on
local disks, a conditional put of a :data:`CLAIM` file elsewhere (S3: ``If-None-Match: *``),
tried again when S3 answers a race with a 409 (:func:`~dask_ps.io._storage.is_write_conflict`).
Used by :func:`~dask_ps.model.checkpoint.save`, as :func:`prune` (the versions a save or a
run keeps; a torn version only once :func:`save_over` proves its save ended, as it may be
another save's still writing). And :func:`newest_own`: the newest version
of a folder that holds a given model, for a restore, a recovery or a resume of a folder
where several models save (:func:`own_version`: the one home of "which version is this
model's", :func:`model_differs`); :func:`warn_skipped`: one warning naming every version
skipped on the way, and why; :func:`check_unchanged`: a version read before is still what
the store holds.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import time
import warnings
from dataclasses import replace
from typing import Callable

import numpy as np

from ..exceptions import CheckpointFormatError, user_stacklevel
from . import _format_tables as ft
from . import format as ck
from ._manifests import MANIFEST, absent_text

__all__ = ["CLAIM", "CLAIM_TRIES", "STALE_SECONDS", "WRITING", "check_unchanged", "claim",
           "last_modified", "model_differs", "newest_own", "new_version", "next_version",
           "no_version_of_fit", "own_version", "prune", "remove_version", "said_of",
           "save_over", "sound_or_none", "warn_all_torn", "warn_skipped", "writing_done"]


def new_version(url: str, attrs: dict, tries: int = 32) -> tuple:
    """``(version, path, group)`` of a new version at ``url``: the next number, claimed for
    this save alone (:func:`claim`), or the one after when another save claimed it.

    Raises
    ------
    RuntimeError
        No version could be claimed in ``tries`` attempts (other saves keep taking them).
    OSError
        The claim could not be written, naming ``url`` and why (a missing bucket, access
        denied, S3's 409 conflict at every try), in one line
        (:func:`~dask_ps.io._storage.storage_error`).
    """
    import zarr
    from zarr.errors import ContainsGroupError

    from ..io._storage import storage_error

    taken = 0
    for _ in range(tries):
        version = max(next_version(url), taken + 1)
        path = ck.version_url(url, version)
        taken = version
        try:
            claimed = claim(path)
        except OSError as exc:  # before anything is written: a missing bucket, no access
            raise storage_error(url, exc, "checkpoint") from None
        if not claimed:  # another save has it, maybe not yet listed: the next one
            continue
        try:
            return version, path, zarr.create_group(ck.zarr_store(path), zarr_format=3,
                                                    attributes=attrs)
        except ContainsGroupError:  # no exclusive create here: another save made it first
            writing_done(path)
            continue
        except BaseException:
            writing_done(path)
            raise
    raise RuntimeError(f"{url!r}: no free version after {tries} tries: other saves keep "
                       f"taking them")


def next_version(url: str) -> int:
    """Number for a new version: above every existing one, complete or torn. The folder is
    listed anew (:func:`~dask_ps.model.format.version_numbers`), just before the claim that
    follows, but no manifest is read: a number is taken whether its version is complete or
    not (one listing request, where reading every version's manifest was one per version)."""
    return max(ck.version_numbers(url), default=0) + 1


def prune(url: str, keep: int, first: int = 1, only=None) -> list[int]:
    """Delete all but the ``keep`` newest complete versions, and the torn versions older
    than the newest complete one whose save is over (:func:`save_over`), among versions
    ``>= first`` (older ones, e.g. of another run, are left alone); returns the version
    numbers deleted (or found gone: another save's prune deleted them first).

    ``only`` (a collection of version numbers, e.g. those one run wrote): then only complete
    versions among them are counted and deleted, and torn versions only when older than the
    newest of them; the complete versions another writer put in between are left alone.

    A torn version may be another save's, still writing (saves into one folder at once each
    claim a version of their own): it is deleted only once :func:`save_over` proves its
    writer gone, never under a live one. Pruning is housekeeping: a version that cannot be
    deleted (another process writing into or deleting it, a store refusing) is left in the
    folder with a ``UserWarning`` naming it and why (:func:`remove_version`), not raised."""
    complete, torn = ck.list_versions(url)
    if only is not None:
        only = set(only)
        complete = [v for v in complete if v in only]
    if not complete:
        return []
    mine = [v for v in complete if v >= first]
    doomed = mine[:-keep] if keep > 0 else []
    fs, _ = ck._fs(url)
    doomed += [v for v in torn if first <= v < complete[-1]
               and save_over(fs, ck._fs(ck.version_url(url, v))[1])]
    return sorted(v for v in doomed if remove_version(fs, url, v))


def remove_version(fs, url: str, version: int) -> bool:
    """Delete version ``version`` of the checkpoint at ``url`` (file system ``fs``): its
    manifest first, so that a version cut short by a failure on the way is torn (skipped
    by readers, pruned later), not damaged. True when it is gone (also when another
    process removed it first, or is removing it: waited for, under 2 s); False, with a
    ``UserWarning`` naming it and the last error, when it is still there after 5 tries
    (e.g. ``Directory not empty``: a process still writing into it), pointing at the first
    caller outside dask_ps."""
    path = ck._fs(ck.version_url(url, version))[1]
    error: Exception | None = None
    for attempt in range(5):
        try:
            try:
                fs.rm_file(f"{path}/{MANIFEST}")
            except FileNotFoundError:  # a torn version, or one another prune is deleting
                pass
            fs.rm(path, recursive=True)
            return True
        except OSError as exc:  # FileNotFoundError: a file another prune deleted first
            error = exc
        try:
            if not fs.exists(path):
                return True
        except OSError:
            pass
        time.sleep(0.05 * 2 ** attempt)  # another prune may be deleting it: its time
    warnings.warn(f"checkpoint {url!r}: pruning version {version} failed "
                  f"({type(error).__name__}: {error}); it is left in the folder (the save "
                  f"itself is complete)", UserWarning, stacklevel=user_stacklevel())
    return False


#: Seconds without any write into a torn version after which its save counts as over when
#: its claim cannot tell (:func:`save_over`): a writer on another machine, or a claim
#: without a host and process. A live save writes its chunks one after another, each a file
#: with a new modification time; 10 minutes without one is a save that died (or a clock
#: skew between this machine and the store of that much).
STALE_SECONDS = 600.0

#: Versions this process is writing (their paths, as :func:`claim` took them): a claim of
#: this process is a live save while its path is here (a save from another thread).
WRITING: set = set()


def save_over(fs, root: str, stale: float = STALE_SECONDS) -> bool:
    """Whether the save of the torn version folder ``root`` (file system ``fs``) is over,
    so that its version may be deleted: what :func:`prune` asks before deleting one, as a
    torn version may be another save's still writing.

    Its :data:`CLAIM` (the claimant's host, process id and, on Linux, process id
    namespace) decides when the claimant ran on this machine (and namespace): over when
    that process has ended, or, for this process, when no save of it is writing there
    (:data:`WRITING`). Otherwise (another machine, no claim readable) the version's newest
    modification time decides (its files' and folders', as ``fs`` lists them: ``mtime`` on
    local disks, ``LastModified`` on S3...): over when older than ``stale`` seconds. A
    version whose times are unknown is not over (kept); a version gone
    already is over."""
    try:
        host, pid, *ns = fs.cat_file(f"{root}/{CLAIM}").decode().split()
        pid = int(pid)
    except FileNotFoundError:
        if not fs.exists(root):
            return True
        host, pid, ns = None, None, []
    except (OSError, ValueError, UnicodeDecodeError):  # unreadable: its age decides
        host, pid, ns = None, None, []
    # this machine's processes: its host name, and its process ids' namespace where the
    # claim names one (containers sharing the host's name number their processes apart)
    if host == socket.gethostname() and ns[:1] in ([], [_pid_namespace()]):
        if pid == os.getpid():
            return root not in WRITING
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except (PermissionError, OverflowError):  # another user's process: alive
            pass
    newest = last_modified(fs, root)
    return newest is not None and time.time() - newest > stale


def last_modified(fs, root: str) -> float | None:
    """The newest modification time (Unix seconds) of folder ``root`` and everything in it,
    None when ``fs`` gives none (or the folder is gone)."""
    from datetime import datetime, timezone

    try:
        found = fs.find(root, withdirs=True, detail=True)
        found[root] = fs.info(root)
    except (FileNotFoundError, OSError):
        return None
    times = []
    for info in found.values():
        for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
            t = info.get(key)
            if isinstance(t, str):
                try:
                    t = datetime.fromisoformat(t.replace("Z", "+00:00"))
                except ValueError:
                    continue
            if isinstance(t, datetime):
                t = (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
            if isinstance(t, (int, float)):
                times.append(float(t))
                break
    return max(times, default=None)


#: File whose exclusive creation claims a version for one save, on file systems other than
#: the local one (where the version's folder is made with ``os.mkdir``). It is not empty:
#: s3fs creates an empty file with an unconditional ``touch``, whatever the mode, so that
#: every save claiming a version at once took it; a file with a body is one conditional put.
CLAIM = ".dask_ps_claim"


#: Tries, in all, of a claim S3 keeps answering a 409 write conflict.
CLAIM_TRIES = 5


def claim(path: str, tries: int = CLAIM_TRIES) -> bool:
    """Claim the version folder ``path`` for one save: False when another save has.

    The claim is one exclusive create, so that of two saves into one folder at once (two
    threads, processes or machines) only one takes a version number: on the local file
    system the folder itself (``os.mkdir``, then a :data:`CLAIM` file written in it),
    elsewhere a :data:`CLAIM` file in it (fsspec's create-only mode ``"xb"``); the file
    holds the claimant's host and process, for :func:`save_over`, and the version counts
    as this process's save (:data:`WRITING`) until :func:`writing_done`. A file system
    without a create-only mode claims nothing (True): there, as before, the zarr group's
    creation refuses a version that exists, which is a check then a write, so that two
    saves at the same instant may still take one version. Whether ``"xb"`` is atomic is the
    file system's: it is on local disks and in memory; on S3 through s3fs it is a
    conditional put (``If-None-Match: *``), which S3 makes atomic (tested against moto's
    server: of 8 saves claiming one version at once, one wins). S3 may also answer a
    conditional put racing another 409 ``ConditionalRequestConflict`` ("retry the upload")
    or ``OperationAborted`` (:func:`~dask_ps.io._storage.is_write_conflict`): the claim is
    tried again, ``tries`` times in all, after jittered waits doubling from 50 ms (under 1 s
    in all for 5 tries); a try after a conflict is refused (412: the other save has the
    version, False) or succeeds.

    Raises
    ------
    OSError
        The claim could not be written: the file system's error, or, when every one of the
        ``tries`` conflicted, one naming the claim's URL and saying so.
    """
    from ..io._storage import url_of, write_conflict_code

    fs, root = ck._fs(path)
    if "file" in np.atleast_1d(fs.protocol):
        if os.path.isfile(os.path.dirname(root)):  # the checkpoint's URL names a file
            raise NotADirectoryError(errno.ENOTDIR, "is a file: a checkpoint is a folder (new "
                                                    "or holding earlier versions, v000001/...)")
        os.makedirs(os.path.dirname(root), exist_ok=True)
        try:
            os.mkdir(root)
        except FileExistsError:
            return False
        with open(os.path.join(root, CLAIM), "w") as f:  # who claimed it: see save_over
            f.write(_claimant())
        WRITING.add(root)
        return True
    codes = set()  # S3's error codes of the conflicting tries
    for attempt in range(tries):
        try:
            with fs.open(f"{root}/{CLAIM}", "xb") as f:
                f.write(_claimant().encode())
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError, TypeError):  # no create-only mode here
            return True
        except OSError as exc:
            if (code := write_conflict_code(exc)) is None:
                raise
            codes.add(code)
        else:
            WRITING.add(root)
            return True
        if attempt + 1 < tries:  # jittered: racing claimants try again apart
            time.sleep(0.05 * 2 ** attempt * random.uniform(0.5, 1.0))
    version = os.path.basename(root).lstrip("v").lstrip("0") or "0"
    raise OSError(errno.EIO, f"claiming version {version} ({url_of(fs, f'{root}/{CLAIM}')!r}): "
                             f"S3 answered 409 {' or '.join(sorted(codes))} to each of {tries} "
                             f"tries (other writes of that claim kept racing it); save again")


def writing_done(path: str) -> None:
    """The save of version folder ``path`` (claimed by :func:`claim`) is over, complete or
    failed: its version no longer counts as written by this process (:func:`save_over`)."""
    WRITING.discard(ck._fs(path)[1])


def _claimant() -> str:
    """A :data:`CLAIM`'s text: this host, process and process ids' namespace, where the
    system has them (:func:`save_over` reads them)."""
    return f"{socket.gethostname()} {os.getpid()} {_pid_namespace()}".rstrip() + "\n"


def _pid_namespace() -> str:
    """This process's process id namespace (Linux: ``pid:[4026531836]``), "" elsewhere."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def newest_own(info: ck.CheckpointInfo, differs: Callable, what: str = "this model", *,
               warn: bool = True) -> tuple:
    """``(version, others)``: ``info`` (a folder's newest sound version, from
    :func:`~dask_ps.model.format.latest`) when ``differs(info)`` is None (it holds this
    model, or fit), else the newest older complete and sound version of its folder that
    does, with a ``UserWarning`` naming the newer versions skipped and what they hold
    (pointing at the caller's line outside dask_ps): a folder two models save into holds
    each one's versions, and a restore or resume wants its own. ``version`` is None when
    no version holds it; ``others`` maps each version skipped to what ``differs`` said of
    it (newest first), or to its damage (an older version found damaged on the way, also
    added to the returned version's ``damaged``).

    ``differs(info)`` returns None, or why version ``info`` holds another model (a str);
    ``what`` names the model in the warning (``"this fit"``); ``warn`` False: no warning
    (the caller says every version it skipped at once, :func:`warn_skipped`).
    """
    others: dict = {}
    found = info if (said := differs(info)) is None else None
    if found is None:
        others[info.version] = said
        damaged = dict(info.damaged)
        for v in reversed([v for v in ck.list_versions(info.url)[0] if v < info.version]):
            try:  # torn versions: in info.torn already
                older = ck.latest(info.url, version=v, warn=False)
            except CheckpointFormatError as exc:  # damaged, or of a format not read here
                others[v] = f"is damaged or unreadable ({exc})"
                damaged[v] = [str(exc)]
                continue
            if (said := differs(older)) is None:
                found = replace(older, torn=list(info.torn), damaged=damaged)
                break
            others[v] = said
    if warn and found is not None and others:
        warnings.warn(f"checkpoint folder {info.url!r}: {said_of(others)}; skipped, using "
                      f"version {found.version}, the newest of {what}", UserWarning,
                      stacklevel=user_stacklevel())
    return found, others


def said_of(others: dict, n: int = 3) -> str:
    """What :func:`newest_own` found of the versions it skipped (version -> ``"holds ..."``
    or ``"is damaged ..."``), newest first, versions found alike said together: the first
    ``n`` findings, then the numbers of the other versions."""
    alike: dict = {}
    for v, said in others.items():
        alike.setdefault(said, []).append(v)
    parts = [f"version {vs[0]} {said}" if len(vs) == 1 else
             f"versions {', '.join(map(str, vs[:-1]))} and {vs[-1]}: each {said}"
             for said, vs in list(alike.items())[:n]]
    more = [v for vs in list(alike.values())[n:] for v in vs]
    return "; ".join(parts) + (f"; and versions {more}, of other models or damaged, too"
                               if more else "")


def model_differs(model) -> Callable:
    """``differs(info)`` for :func:`newest_own`: why version ``info`` holds another model
    than ``model`` (:func:`~dask_ps.model._format_tables.other_model`: a table of the model
    it lacks, or one of its name holding another table; the model's scratch tables, which
    a restore empties, left out), None when it holds the model's tables."""
    def differs(info: ck.CheckpointInfo) -> str | None:
        return ft.other_model(model.saved_specs, {
            n: t for n, t in info.attrs.get("tables", {}).items() if n not in model._scratch})

    return differs


def own_version(model, info: ck.CheckpointInfo, differs: Callable | None = None,
                what: str = "this model", skipped: dict | None = None) -> ck.CheckpointInfo:
    """``info``, or the newest older version of its folder holding ``model``
    (:func:`newest_own` with ``differs``, default :func:`model_differs`; warning, naming the
    versions skipped and what they hold): what a restore or a recovery of a folder takes.
    Given ``skipped`` (a dict), no warning: the versions skipped are added to it (version ->
    what it holds), for :func:`warn_skipped` to say with any others the caller skips.

    Raises
    ------
    CheckpointFormatError
        No version of the folder holds the model: naming the folder and what each version
        holds.
    """
    found, others = newest_own(info, differs or model_differs(model), what,
                               warn=skipped is None)
    if skipped is not None:
        skipped.update(others)
    if found is None:
        raise CheckpointFormatError(
            f"checkpoint folder {info.url!r} holds no version of {what}: {said_of(others)}; "
            f"nothing was restored (load one into a new model with PSModel.load)")
    return found


def warn_skipped(info: ck.CheckpointInfo, others: dict, what: str = "this model") -> None:
    """One warning naming every version skipped for version ``info`` of a folder, and why:
    torn (``info.torn``) or damaged (``info.damaged``, found before or while loading), or
    holding another model (``others``, version -> what it holds, from :func:`own_version`'s
    ``skipped``). A :class:`~dask_ps.model.format.TornCheckpointWarning` when any was torn
    or damaged (a UserWarning too), else a ``UserWarning``; none when none was skipped.
    Points at the first caller outside dask_ps."""
    damage = ck.skipped_text(info.torn, info.damaged, info.url)
    held = {v: said for v, said in others.items() if v not in info.damaged}
    if held and damage:
        said = (f"checkpoint folder {info.url!r}: {damage}; {said_of(held)}; skipped, using "
                f"version {info.version}, the newest sound version of {what}")
    elif held:
        said = (f"checkpoint folder {info.url!r}: {said_of(held)}; skipped, using version "
                f"{info.version}, the newest of {what}")
    elif damage:
        said = f"checkpoint {info.url!r}: {damage}; skipped, using version {info.version}"
    else:
        return
    warnings.warn(said, ck.TornCheckpointWarning if damage else UserWarning,
                  stacklevel=user_stacklevel())


def no_version_of_fit(info: ck.CheckpointInfo, others: dict,
                      driver_differs: Callable | None) -> str:
    """The error of a resume from the folder of ``info`` none of whose versions holds this
    fit (``others``: what each holds, :func:`~dask_ps.model._fit_checks.fit_differences`).
    Versions that hold this fit but none of the state it keeps beside its tables
    (``driver_differs(None)`` says what is missing, e.g. a GBDT fit's trees: a checkpoint
    written by a dask_ps that did not keep them) are named first, with the field missing:
    they are no other fit's."""
    missing = None if driver_differs is None else driver_differs(None)
    bare = [v for v, said in others.items()
            if missing is not None and said == f"holds another fit: {missing}"]
    if not bare:
        return (f"resume: checkpoint {info.url!r} holds no version of this fit: "
                f"{said_of(others)}; resume with the same data and parameters, or use "
                f"another checkpoint folder")
    rest = {v: said for v, said in others.items() if v not in bare}
    which = f"version {bare[0]} lacks" if len(bare) == 1 else \
        f"versions {', '.join(map(str, bare[:-1]))} and {bare[-1]} lack"
    return (f"resume: checkpoint {info.url!r} {which} what this fit keeps beside its tables "
            f"(field extra.driver of the metadata is missing): {missing}; this fit cannot "
            f"resume from {'it' if len(bare) == 1 else 'them'}"
            + (f" (and {said_of(rest)})" if rest else "")
            + ": fit afresh (resume=False), or use another checkpoint folder")


def warn_all_torn(url: str, torn: list[int], unit: str = "clock") -> None:
    """Say that a resume from checkpoint ``url`` finds versions, ``torn``, but none complete:
    a :class:`~dask_ps.model.format.TornCheckpointWarning` naming each torn version and why
    (no manifest, a manifest that is not valid JSON...:
    :func:`~dask_ps.model._manifests.absent_text`) and that the fit starts from its first
    ``unit`` (e.g. ``"epoch"``), pointing at the first caller outside dask_ps. A resume of
    a folder that does not exist, or holds no version, says nothing: that is the first fit
    of a resumable run."""
    warnings.warn(f"resume: {absent_text(url, torn)}; nothing to resume from: the fit starts "
                  f"from its first {unit} (the torn versions are left in the folder, this "
                  f"fit's versions are saved after them)", ck.TornCheckpointWarning,
                  stacklevel=user_stacklevel())


def sound_or_none(url: str, listed: tuple, unit: str, restore: Callable):
    """``restore()`` (a resume's restore of a version of checkpoint ``url``, whose versions
    are ``listed``, :func:`~dask_ps.model.format.read_versions`), or None when every
    complete version is damaged: none passes :func:`~dask_ps.model.format.latest`'s checks
    (a chunk missing, metadata changed: a ``CheckpointNotFoundError``), or none restores (a
    chunk failing its checksum: a ``CheckpointFormatError`` marked ``damaged``). Then a
    :class:`~dask_ps.model.format.TornCheckpointWarning` names the damaged versions and
    their damage and says the fit starts from its first ``unit``, as :func:`warn_all_torn`
    does for torn versions: the versions are left in the folder, the fit's versions are
    numbered after them. Any other error (another fit's versions, a newer format) is
    raised."""
    from ..exceptions import CheckpointNotFoundError

    try:
        return restore()
    except (CheckpointNotFoundError, CheckpointFormatError) as exc:
        if isinstance(exc, CheckpointFormatError) and not getattr(exc, "damaged", False):
            raise
        said = "; ".join([str(exc), *getattr(exc, "__notes__", [])]).removeprefix(
            f"no complete checkpoint version at {url!r}; ")
    complete, torn = listed[:2]
    which = (f"version {complete[0]} is" if len(complete) == 1 else
             f"versions {', '.join(map(str, complete[:-1]))} and {complete[-1]} are")
    warnings.warn(f"resume: checkpoint {url!r}: {which} damaged"
                  + (f" (and versions {torn} torn)" if torn else "")
                  + f" ({said}); nothing to resume from: the fit starts from its first "
                  f"{unit} (the damaged versions are left in the folder, this fit's versions "
                  f"are saved after them)", ck.TornCheckpointWarning,
                  stacklevel=user_stacklevel())
    return None


def check_unchanged(info: ck.CheckpointInfo) -> None:
    """Refuse to restore version ``info`` when its metadata in the store (its zarr.json's
    attributes, read again: one small file) is no longer ``info.attrs``: the version was
    edited or replaced since ``info`` was read, and a restore would take the table
    descriptions of one and the rows of the other.

    Raises
    ------
    CheckpointFormatError
        Naming the checkpoint and version, and how to read it again.
    """
    import json

    try:
        stored = ck.open_version(info.path).attrs.asdict()
    except Exception as exc:  # gone, or unreadable now
        raise CheckpointFormatError(f"checkpoint {info.url!r} version {info.version} changed "
                                    f"since it was read: its metadata cannot be read again "
                                    f"({type(exc).__name__}: {exc})") from None
    try:  # as JSON on both sides: a save's own attrs may hold tuples where JSON has lists
        same = json.loads(json.dumps(info.attrs)) == json.loads(json.dumps(stored))
    except (TypeError, ValueError):
        same = False
    if not same:
        raise CheckpointFormatError(
            f"checkpoint {info.url!r} version {info.version} changed since it was read: its "
            f"metadata in the store differs from that of the CheckpointInfo given; read it "
            f"again (format.latest(url, version={info.version})) or restore the URL")
