"""Saving and loading a PSModel: rows move between shards and zarr, in parallel.

Saving runs one writer per shard, on that shard's worker: the writer takes a chunk-aligned
range of each table's rows (by key), fetches those rows from the shards holding them (its own
shard in-process, a few boundary rows or, for sparse tables, the other shards' keys of its
range), sorts them by key and writes whole chunks. Nothing passes through the client but
counts and key samples. Sparse tables are cut into ranges by splitter keys chosen from a
sample of every shard's keys (a sample sort), then made exact with one round of counts. Each
array is created once, in the client, and the writers take it opened (they read no
``zarr.json``).

Loading runs one loader per shard of the new model: it reads a chunk-aligned slice of each
array and sends every row to the shard that owns it under the new partitioning, so a
checkpoint of N shards loads onto M shards with weights and optimizer state unchanged.

The tasks are :mod:`dask_ps.model.writers` and :mod:`dask_ps.model.readers`. See
:mod:`dask_ps.model.format` for the store format, :mod:`dask_ps.model.export` for the
weights written for serving. The functions taking ``model`` first are
:class:`~dask_ps.PSModel`'s methods ``save``, ``load`` and ``restore``.
"""

from __future__ import annotations

import json
import numbers
import time
import warnings
from typing import Self

from ..diagnostics.events import log_checkpoint
from ..exceptions import CheckpointFormatError, OptionError
from . import _format_tables as ft
from . import connection, placement
from . import format as ck
from . import key_ranges as kr
from ._versions import (
    check_unchanged,
    new_version,
    own_version,
    prune,
    warn_skipped,
    writing_done,
)
from .readers import check_part, load_part, open_arrays
from .writers import array_paths, create_arrays
from .writers import plan_table as _plan_table
from .writers import write_part as _write_part

__all__ = ["load", "restore", "restore_read", "save"]


def _run_tasks(model, fn, calls: list[tuple[int, tuple]]) -> list:
    """``fn(model, *args)`` for each ``(shard, args)``: on that shard's worker, or here.

    Raises
    ------
    WorkerLostError
        A shard's worker left the cluster meanwhile (e.g. every job's walltime ended during
        a save): the tasks would wait for a worker forever.
    """
    from distributed import wait

    if model.is_local:
        return [fn(model, *args) for _, args in calls]
    client = model.client
    futs = [client.submit(fn, model, *args, workers=[model.shards[s].address],
                          allow_other_workers=True, pure=False) for s, args in calls]
    needed = {model.shards[s].address for s, _ in calls}
    try:
        while True:
            try:
                wait(futs, timeout=1.0)
                break
            except TimeoutError:  # not done yet: still worth waiting for?
                placement.check_alive(model, needed)
        out = []
        for f in futs:  # bounded too: a result lost with its worker as the workers left
            while True:  # (a walltime's end mid-save) is waited for by gather for ever
                try:
                    out.append(f.result(timeout=1.0))
                    break
                except TimeoutError:
                    placement.check_alive(model, needed)
        return out
    finally:
        for f in futs:
            f.release()


def _check_url(model, url: str) -> None:
    if not isinstance(url, str) or not url:
        raise OptionError(f"a checkpoint URL must be a non-empty string, got {url!r}")
    try:  # resolves the protocol: unknown, or its package missing
        private = ck.is_process_local(url)
    except (ValueError, ImportError) as exc:
        from ..io._storage import protocol_error

        raise (protocol_error(url, exc, "checkpoint")
               or OptionError(f"checkpoint {url!r}: {exc}")) from None
    if not model.is_local and private:
        raise OptionError(f"checkpoint {url!r} is private to one process, but the shards "
                          f"write from their workers: use a path or URL every worker reaches "
                          f"(a shared directory, s3://…)")


# -- save -------------------------------------------------------------------------------------
def _json(value, what: str):
    try:
        return json.loads(json.dumps(value))
    except TypeError as exc:
        raise TypeError(f"{what} must be JSON-serialisable (checkpoints hold no pickles): "
                        f"{exc}") from None


def _save(model, url: str, *, clock: int = 0, data_position: dict | None = None,
         extra: dict | None = None, keep: int | None = None,
         chunk_rows: int | None = None) -> ck.CheckpointInfo:
    """Write a new version of the checkpoint at ``url``; see :meth:`PSModel.save`."""

    from .. import __version__

    _check_url(model, url)
    model._refuse_in_job("save", "save between jobs")
    if not isinstance(clock, numbers.Integral) or isinstance(clock, bool) or clock < 0:
        raise ValueError(f"clock must be a non-negative integer (the training clock "
                         f"reached), got {clock!r}")
    if keep is not None and (not isinstance(keep, int) or keep < 1):
        raise ValueError(f"keep must be a positive integer or None, got {keep!r}")
    if chunk_rows is not None and (not isinstance(chunk_rows, int) or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive integer or None, got {chunk_rows!r}")
    t0 = time.perf_counter()
    plans, tables = {}, {}
    for i, (name, spec) in enumerate(model.saved_specs.items()):
        rows_per_chunk = ft.chunk_rows(spec, chunk_rows)
        n, rows_per_chunk, writers = _plan_table(model, spec, rows_per_chunk)
        tables[name] = ft.table_attrs(spec, i, n, rows_per_chunk)
        plans[name] = writers
    attrs = dict(
        dask_ps=dict(format=ck.FORMAT, library_version=__version__),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), saved_at=time.time(),
        n_shards=model.n_shards, clock=int(clock),
        data_position=_json(data_position or {}, "data_position"),
        extra=_json(extra or {}, "extra"), tables=tables)
    # the versions there, listed and their manifests read once: for the warning, and the
    # newest sound one it compares with (the claim's number: listed anew, no manifest read)
    _warn_other_model(url, tables, ck.read_versions(url))
    version, path, group = new_version(url, attrs)
    try:  # until then the version is this process's save, never pruned (prune)
        calls, manifest = [], {}
        for name, t in tables.items():
            arrays = create_arrays(group, t, t["path"], slots=True, dtype=None, squeeze=False)
            n_chunks = -(-t["n_keys"] // t["chunk_rows"])
            manifest.update({p: [t["n_keys"], n_chunks] for p in array_paths(arrays)})
            calls += [(w[0], (path, name, arrays) + w[1:] + (None,)) for w in plans[name]]
        _run_tasks(model, _write_part, calls)
        ck.write_manifest(path, manifest, __version__)
    finally:
        writing_done(path)
    if keep is not None:
        prune(url, keep)
    return ck.CheckpointInfo(url, version, attrs, seconds=time.perf_counter() - t0)


def _warn_other_model(url: str, tables: dict, listed: tuple) -> None:
    """Warn when the newest complete version at ``url`` holds other tables: two models are
    writing into one checkpoint folder. ``listed``: the folder's versions and manifests
    (:func:`~dask_ps.model.format.read_versions`)."""
    if not listed[0]:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.TornCheckpointWarning)
        try:
            previous = ck.latest(url, listed=listed)
        except Exception:  # nothing readable there: nothing to compare with
            return
    theirs = sorted(previous.attrs.get("tables", {}))
    if theirs != sorted(tables):
        warnings.warn(f"checkpoint folder {url!r}: version {previous.version} holds tables "
                      f"{theirs}, this model {sorted(tables)}; two models are writing into "
                      f"one folder (each version is complete, but loading takes the newest)",
                      UserWarning, stacklevel=4)


# -- load -------------------------------------------------------------------------------------
def _run_parts(model, fn, calls: list) -> None:
    """:func:`_run_tasks` of :func:`~dask_ps.model.readers.check_part` or
    :func:`~dask_ps.model.readers.load_part`; raises here, in the client, the first damage
    a task returned.

    Raises
    ------
    CheckpointFormatError
        A damaged array, naming the checkpoint, table, array and rows; its ``damaged``
        attribute True (what :func:`load` and :func:`restore` of a URL skip a version for).
    """
    for out in _run_tasks(model, fn, calls):
        if isinstance(out, str):
            exc = CheckpointFormatError(out)
            exc.damaged = True
            raise exc


def _older(info: ck.CheckpointInfo, exc: CheckpointFormatError, errors: list,
           what: str) -> ck.CheckpointInfo:
    """The version to try after ``info`` failed with ``exc``: the newest older sound one
    (:func:`~dask_ps.model.format.older_sound`; its ``damaged`` names ``info``, said by the
    caller's one warning) when ``exc`` is damage found in the data. Else the first
    version's error is raised, with a note of the others'. ``errors``: the first error,
    then the problems of each version tried (kept between calls)."""
    if not errors:
        errors.append(exc)
    if getattr(exc, "damaged", False):
        nxt = ck.older_sound(info, exc, errors, warn=False)  # adds "version N: ..." to errors
        if nxt is not None:
            return nxt
    elif exc is not errors[0]:
        errors.append(f"version {info.version}: {exc}")
    first, others = errors[0], errors[2:]
    if others:
        first.add_note(f"no older complete version {what} either: " + "; ".join(others))
    raise first


def _restore(model, info: ck.CheckpointInfo, optimizer_state: bool = True, *,
             check: bool = True, read: bool = False) -> None:
    """Replace the model's tables by those of checkpoint ``info`` (all shards), in place.

    With ``check``, every array the load reads is first read and checked (checksums, shapes,
    keys) on the shards' workers before any table is touched, so that a damaged checkpoint
    leaves the model as it was: a second read of the checkpoint, not a second copy of the
    tables in memory. A new model (nothing to lose) skips it. With ``read``, ``info`` was
    just read from the store by :func:`~dask_ps.model.format.latest` (a load or restore of
    a URL, a recovery or resume: :func:`restore_read`), which checked its metadata against
    the manifest's checksums and its format: its metadata and manifest are not read again.
    Each array is opened here, once, with the metadata ``info.arrays`` holds (what
    ``latest`` read of it), else reading its ``zarr.json``; the tasks take it opened
    (:func:`~dask_ps.model.readers.open_arrays`)."""
    _check_url(model, info.url)
    model._refuse_in_job("restore", "restore between jobs")
    if not read:  # a version given, read before: its metadata still the store's
        check_unchanged(info)
        ck.check_format(info.attrs, info.url, info.version)  # a version named by hand too
    # a scratch table of the model (add_table(checkpoint=False)) is not restored, even from
    # a checkpoint written when it was kept: it is made empty again below
    tables = {n: t for n, t in info.attrs["tables"].items() if n not in model._scratch}
    said = ft.other_model(model.saved_specs, tables)
    if said:
        raise CheckpointFormatError(f"checkpoint {info.url!r} version {info.version} {said}; "
                                    f"nothing was restored (load it into a new model with "
                                    f"PSModel.load)")
    try:
        specs = {name: ft.spec_from_attrs(t, model.n_shards) for name, t in tables.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # metadata edited
        raise CheckpointFormatError(
            f"checkpoint {info.url!r} version {info.version}: "
            f"{exc if isinstance(exc, ValueError) else f'its metadata is damaged ({exc!r})'}"
        ) from None
    calls = []
    for name, t in tables.items():
        try:  # each array's metadata: as latest read it, else read here, once
            arrays = open_arrays(info.path, name, t, specs[name], optimizer_state,
                                 info.arrays)
        except CheckpointFormatError as exc:  # as damage a reader task finds
            exc.damaged = True
            raise
        n, c = t["n_keys"], t["chunk_rows"]
        bounds = [min(kr.align_up(round(n * w / model.n_shards), c), n)
                  for w in range(model.n_shards)] + [n]
        calls += [(w, (info.path, name, t, specs[name], bounds[w], bounds[w + 1], arrays))
                  for w in range(model.n_shards) if bounds[w + 1] > bounds[w]]
    if check:
        _run_parts(model, check_part, calls)
    for name, spec in specs.items():
        connection.call_all(model, "drop_table", name)
        connection.call_all(model, "create_table", spec)
        model.specs[name] = spec
    for name in model._scratch:  # empty on every shard, a recreated one's too
        connection.call_all(model, "drop_table", name)
        connection.call_all(model, "create_table", model.specs[name])
    try:
        _run_parts(model, load_part, calls)
    except BaseException as exc:  # e.g. a worker lost while loading
        if check:
            exc.add_note(f"checkpoint {info.url!r} version {info.version} was loaded only in "
                         f"part: tables {sorted(specs)} hold some of its rows and initial "
                         f"values elsewhere; restore it again, or another version")
        raise
    model.checkpoint_info = info


def restore_read(model, info: ck.CheckpointInfo,
                 optimizer_state: bool = True) -> ck.CheckpointInfo:
    """:func:`restore` of version ``info`` as :func:`~dask_ps.model.format.latest` just
    read it (a recovery's or a resume's choice: :func:`~dask_ps.model.recovery.restore_sound`),
    as :func:`restore` of a URL restores the version it chose: with the metadata and
    manifest ``latest`` read and checked (their checksums, the format, the torn and damaged
    versions skipped), not read again; the model's tables are compared with it as
    :func:`restore` compares them, and its arrays are checked before the model is touched.
    A ``CheckpointInfo`` read at some earlier time is given to :func:`restore`, which reads
    its metadata again to compare.

    Returns
    -------
    CheckpointInfo
        ``info`` (also ``model.checkpoint_info``).

    Raises
    ------
    CheckpointFormatError
        As :func:`restore` of a version: another model's tables, or a damaged array (its
        ``damaged`` attribute True); the model is unchanged.
    RuntimeError
        While a job runs.
    """
    _restore(model, info, optimizer_state, read=True)
    return info


def save(model, url: str, *, clock: int = 0, data_position: dict | None = None,
         extra: dict | None = None, keep: int | None = None,
         chunk_rows: int | None = None) -> ck.CheckpointInfo:
    """Write every table and its optimizer state as a new version of a zarr checkpoint.

    Each shard's rows are written from its own worker, in parallel, into arrays chunked
    independently of the number of shards (sparse tables sorted by key). The version
    becomes readable only once complete (its manifest is written last).

    Parameters
    ----------
    url : str
        Any fsspec URL (local directory, ``s3://…``); with a cluster it must be reachable
        from every worker (``memory://`` works only without a cluster).
    clock : int, default 0
        Training clock reached (driver step), stored for resuming.
    data_position : dict, optional
        Where training was in the data, e.g. ``{"epoch": 3}`` (JSON).
    extra : dict, optional
        Other JSON metadata (e.g. an estimator's loss history).
    keep : int, optional
        After the save, keep only this many newest complete versions of the folder
        (whichever save wrote them), deleting the older ones; torn versions older than the
        newest complete one are deleted too once their save is provably over (its process
        ended, on this machine, else nothing written into it for
        :data:`~dask_ps.model._versions.STALE_SECONDS`, 10 minutes): another save's
        version still being written is never deleted. A version that cannot be deleted is
        left with a ``UserWarning``, the save complete. None: nothing is deleted.
    chunk_rows : int, optional
        Rows per chunk; default about 4 MiB of weights per chunk.

    Returns
    -------
    CheckpointInfo

    Raises
    ------
    RuntimeError
        While a job runs.
    ValueError
        A process-private URL with a cluster, a ``clock`` that is not a non-negative
        integer, or a bad ``keep``/``chunk_rows``.
    TypeError
        Metadata that is not JSON-serialisable.
    OSError
        The store refuses the new version before anything is written (``s3://`` of a
        bucket that does not exist, access denied), naming ``url`` and why; the versions
        there are left as they were.

    Notes
    -----
    Saves into one folder at once (from threads, processes or machines) each take a
    version of their own: a version is claimed by one exclusive create before anything is
    written into it (the folder itself on a local file system, else a create-only file,
    where the file system has that mode; without one, two saves at the same instant may
    still write into one version).

    Examples
    --------
    >>> import dask_ps
    >>> model = dask_ps.PSModel("local", n_shards=3)
    >>> w = model.add_table("w", shape=(6,), optimizer="adagrad")
    >>> model.push("w", [0, 5], [1.0, -1.0])
    >>> model.save("memory://doc/run", clock=1).version
    1
    >>> again = dask_ps.PSModel.load("local", "memory://doc/run", n_shards=2)
    >>> again.pull("w")
    array([-0.1,  0. ,  0. ,  0. ,  0. ,  0.1], dtype=float32)
    >>> again.checkpoint_info.clock
    1
    >>> again.close(); model.close()
    """
    info = _save(model, url, clock=clock, data_position=data_position, extra=extra,
                keep=keep, chunk_rows=chunk_rows)
    if not model.is_local:  # the dashboard's table of checkpoints
        log_checkpoint(info.url, info.version, seconds=info.seconds, model=model.uid,
                       client=model.client)
    return info


def load(cls, client, url: str, n_shards: int | None = None, optimizer_state: bool = True,
         *, version: int | None = None, resources: str | None = None,
         timeout: float | None = None) -> Self:
    """A new model holding the newest sound version of the checkpoint at ``url``.

    A folder's newest complete version that is damaged is skipped for the newest older one
    that loads, with a :class:`~dask_ps.model.format.TornCheckpointWarning` naming it and
    its damage: damage found before loading (missing chunks, changed metadata) or while
    loading (a chunk whose checksum fails; the model is then loaded afresh from the older
    version). The damaged version is left in the store as it is. A ``version`` named that
    is damaged raises instead, as :meth:`restore` of a version does.

    Parameters
    ----------
    client, n_shards, resources, timeout
        As for :class:`PSModel` (``timeout`` None: its default); ``n_shards`` may
        differ from the checkpoint's: rows and optimizer state are resharded exactly.
    url : str
    optimizer_state : bool, default True
        Restore the update rules' state (AdaGrad accumulators, Adam moments, FTRL z and
        n); with False the state starts afresh and only the weights are loaded.
    version : int, optional
        A given version instead of the newest sound one.

    Returns
    -------
    PSModel
        With ``checkpoint_info`` (a :class:`~dask_ps.model.format.CheckpointInfo`:
        version, clock, data position, torn and damaged versions skipped).

    Raises
    ------
    CheckpointNotFoundError
        No complete version, saying what is there instead (no such folder, a file, an
        export and how to read one, torn versions and why each is torn: see
        :func:`~dask_ps.model._manifests.absent_text`), or every complete one damaged
        (naming each one's damage).
    CheckpointFormatError
        A newer store format, an optimizer or layout this dask_ps does not know, or a
        table description its table checks refuse (naming the checkpoint and version); a
        damaged ``version`` (naming the checkpoint, table, array and rows); with no
        ``version``, the newest version's error when no older one loads either (a note
        names the others').

    Warns
    -----
    TornCheckpointWarning
        Newer versions were incomplete (a writer died) or damaged, and were skipped: one
        warning naming each, pointing at the caller's line.

    Notes
    -----
    Loading runs no code from the store: it holds JSON metadata and numeric arrays only.
    """
    info = ck.latest(url, version, warn=False)  # the versions skipped: said once, below
    errors: list[str] = []
    while True:
        model = cls(client, n_shards, resources=resources,
                    **({} if timeout is None else {"timeout": timeout}))
        try:  # a new model: nothing to lose, no check first
            _restore(model, info, optimizer_state, check=False, read=True)
            warn_skipped(info, {})
            return model
        except CheckpointFormatError as exc:
            model.close()
            if version is not None:
                raise
            info = _older(info, exc, errors, "loads")
        except BaseException:
            model.close()
            raise


def restore(model, checkpoint, optimizer_state: bool = True) -> ck.CheckpointInfo:
    """Replace every table by its state in a checkpoint, on the current shards.

    The checkpoint is read twice: first every array is checked (checksums, shapes, keys)
    without touching the tables, then loaded; a damaged version leaves the model's tables,
    keys, optimizer state and specs as they were. Given a URL, a damaged newest version is
    then skipped for the newest older one that restores, as :meth:`PSModel.load` does,
    with a :class:`~dask_ps.model.format.TornCheckpointWarning` naming it and its damage
    (it is left in the store as it is); given one version, its damage raises. Given a URL
    where other models save too, the newest version holding this model's tables is
    restored, newer ones of another model skipped with a ``UserWarning`` naming them.

    Parameters
    ----------
    checkpoint : str or CheckpointInfo
        A URL (its newest sound version) or one version.
    optimizer_state : bool, default True
        As for :meth:`PSModel.load`.

    Returns
    -------
    CheckpointInfo
        What was restored (also ``model.checkpoint_info``).

    Raises
    ------
    CheckpointNotFoundError
        No complete version, saying what is there instead, as :meth:`PSModel.load` does.
    CheckpointFormatError
        Another model's checkpoint (it lacks a table of this model, or holds one of its
        name with other rows, columns, dtype or update rule: naming the table and what
        differs), or a folder none of whose versions holds this model (naming the folder
        and what each version holds); a newer format, a format or hash function this
        dask_ps does not read (naming the field), or a damaged array (naming the
        checkpoint, table and rows) of the version given, or of every complete version of
        the URL; a version given whose metadata changed in the store since it was read:
        the model is unchanged.
    RuntimeError
        While a job runs.

    Warns
    -----
    TornCheckpointWarning
        Given a URL, newer versions were torn or damaged and were skipped: one warning
        naming every version skipped and why (those holding another model too), pointing
        at the caller's line.
    UserWarning
        Given a URL, newer versions hold another model and were skipped (naming them),
        none torn or damaged.

    Notes
    -----
    A version given (a ``CheckpointInfo``) is restored with the table descriptions its
    store holds now: its metadata is read again (one small file, beside the manifest read
    for its format) and compared with ``checkpoint.attrs``; when they differ (the version
    was edited or replaced since it was read) a CheckpointFormatError says the checkpoint
    changed since it was read, and nothing is restored.
    """
    if isinstance(checkpoint, ck.CheckpointInfo):
        _restore(model, checkpoint, optimizer_state)
        return checkpoint
    info, errors, others = ck.latest(checkpoint, warn=False), [], {}
    while True:  # every version skipped, damaged or of another model: said in one warning
        info = own_version(model, info, skipped=others)
        try:
            _restore(model, info, optimizer_state, read=True)
        except CheckpointFormatError as exc:
            info = _older(info, exc, errors, "restores")
            continue
        warn_skipped(info, others)
        return info

