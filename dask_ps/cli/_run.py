"""What ``dask-ps train``, ``evaluate`` and ``export`` do, once their options are parsed."""

from __future__ import annotations

import re
import sys
import time

import numpy as np

from ..cluster import SHARD_RESOURCE, connect, worker_info
from ..exceptions import DataError, NoCheckpointToResumeError, OptionError
from ..model._targets import check_store_url
from ._algorithms import Algorithm
from ._checks import (
    check_contents,
    check_files,
    check_model,
    check_save,
    check_test_rows,
    no_test_rows,
)
from ._options import cluster_spec, data_root
from ._registry import by_estimator
from ._report import Events, passes_of, print_history, rate_line, read_line, say

#: ``--n-shards`` above this many per shard worker is refused: each shard is an actor that
#: every clock waits on, so shards beyond a few per worker only add round trips (a 1,000-row
#: LIBSVM file on 2 workers trained in 0.7 s with 2 shards, 2.1 s with 32, 12 s with 128,
#: 171 s with 1000).
MAX_SHARDS_PER_WORKER = 16


def _resolve_dataset(args, algo: Algorithm) -> None:
    """``--dataset NAME``: the files under ``$DASK_PS_DATA`` and the options they imply
    (options given win; ``--test`` only for a dataset without a test file)."""
    ds = algo.datasets[args.dataset]
    root = data_root() / ds.folder
    files = [ds.train, *([ds.test] if ds.test else []), *ds.paths.values()]
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{', '.join(missing)} not found in {root}. Download them from {ds.url} into that "
            f"folder, or set DASK_PS_DATA to a folder holding {ds.folder}/.")
    if args.test and ds.test:
        raise OptionError("--dataset brings its own test file: drop --test")
    fmt, given = ds.options.get("format"), getattr(args, "format", None)
    if fmt is not None and given not in (None, fmt):  # (its other options may be changed)
        raise OptionError(f"--dataset {args.dataset} is {fmt} data: drop --format {given}")
    args.train = str(root / ds.train)
    if ds.test:
        args.test = str(root / ds.test)
    implied = {**ds.options, **{key: str(root / name) for key, name in ds.paths.items()}}
    for key, value in implied.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def build_estimator(args, algo: Algorithm, shard_workers: bool):
    """The estimator of the parsed options: only flags given are passed, so every other
    parameter keeps the estimator's default.

    Raises
    ------
    OptionError
        An option the estimator cannot honour yet (``--resume auto`` without a ``resume``
        parameter, shard workers without ``shard_resources``), or parameters it refuses
        (naming the flags given among them, and ``--resume auto`` when it refuses
        ``resume=True``, e.g. without a ``--checkpoint`` URL).
    """
    kwargs = {p.param: getattr(args, p.param) for p in algo.params if hasattr(args, p.param)}
    est = algo.cls(**kwargs)
    params = est.get_params()
    if kwargs.get("checkpoint") not in (None, "auto"):
        try:  # before the cluster starts and the data is read
            check_store_url(kwargs["checkpoint"])
        except (ValueError, ImportError, OSError) as exc:  # (a protocol not installed,
            raise OptionError(f"--checkpoint: {exc}") from None  # a folder not writable)
    if args.resume == "auto":
        if "resume" not in params:
            raise OptionError(f"--resume auto: {algo.estimator} cannot resume a fit from a "
                              f"checkpoint yet (it has no 'resume' parameter); rerunning "
                              f"starts afresh, so drop --resume")
        est.set_params(resume=True)  # without a checkpoint URL: refused by est._validate
    if shard_workers:
        if "shard_resources" not in params:
            raise OptionError(f"--ps-workers: {algo.estimator} cannot place its shards on shard "
                              f"workers yet (it has no 'shard_resources' parameter); without "
                              f"--ps-workers the shards live on the data workers")
        est.set_params(shard_resources=SHARD_RESOURCE)
    if "progress" in params:  # the command prints one line per epoch instead of a bar
        est.set_params(progress=False)
    try:  # the estimator's own checks of its parameters, now rather than once fitting
        est._validate()
    except ValueError as exc:  # scikit-learn's InvalidParameterError, or a cross-check
        if args.resume == "auto" and isinstance(exc, NoCheckpointToResumeError):
            how = ("--checkpoint auto snapshots into a temporary folder deleted after the run"
                   if est.checkpoint == "auto" else "--checkpoint none writes no checkpoint"
                   if "checkpoint" in kwargs else "no checkpoint is written")
            raise OptionError(f"--resume auto needs --checkpoint URL, the folder of the run "
                              f"to continue ({how})") from exc
        flags = [p.flag for p in algo.params
                 if p.param in kwargs and re.search(rf"\b{p.param}\b", str(exc))]
        if args.resume == "auto" and re.search(r"\bresume=", str(exc)):
            flags.insert(0, "--resume auto")
        raise OptionError((", ".join(flags) + ": " if flags else "") + str(exc)) from exc
    return est


def check_n_shards(est, hosts: int | None, shard_workers: bool) -> None:
    """Refuse the estimator's ``n_shards`` above :data:`MAX_SHARDS_PER_WORKER` per worker of
    the ``hosts`` that may hold its shards (None: not known yet; ``shard_workers``: those
    are dedicated shard workers)."""
    n = est.get_params().get("n_shards")
    if n is None or hosts is None or n <= MAX_SHARDS_PER_WORKER * max(1, hosts):
        return
    raise OptionError(f"--n-shards {n}: at most {MAX_SHARDS_PER_WORKER} per shard worker, so "
                      f"{MAX_SHARDS_PER_WORKER * max(1, hosts)} with {hosts} "
                      f"{'shard ' if shard_workers else ''}worker{'s' if hosts != 1 else ''} "
                      f"(every clock waits on each shard, so more only add round trips; the "
                      f"default is one per worker)")


def _quiet_dask_shuffle() -> None:
    """distributed's P2P shuffle logs a WARNING each time a shuffle starts and ends (MF's
    partitioning by user); they are routine, not warnings for the user."""
    import logging

    logging.getLogger("distributed.shuffle._scheduler_plugin").setLevel(logging.ERROR)


def train(args, algo: Algorithm) -> int:
    _quiet_dask_shuffle()
    if getattr(args, "weight", None) is not None and not algo.weighted:
        raise OptionError(f"--weight {args.weight}: dask-ps train {algo.name} takes no sample "
                          f"weights ({algo.estimator}.fit has no sample_weight); "
                          f"lr, fm, gbdt and gbdt-regression do")
    spec = cluster_spec(args)
    est = build_estimator(args, algo, spec.ps_workers > 0)
    if args.dataset:
        _resolve_dataset(args, algo)
    # Everything that can be checked without a cluster is checked before starting one.
    algo.check(args)
    _check_checkpoint_every(args, est)
    check_files(args.train, "--train", None if getattr(args, "format", None) == "parquet"
                else getattr(args, "blocksize", None))
    if args.test is not None:  # (an empty one refused, not left out)
        check_files(args.test, "--test")
    for name in algo.files:
        if getattr(args, name, None) is not None:
            check_files(getattr(args, name), "--" + name.replace("_", "-"))
    fmt = algo.data_format(args)
    for option, path in (("--train", args.train), ("--test", args.test)):
        if path and fmt != "parquet":  # empty, or not LIBSVM: from the files' sizes and
            check_contents(path, option, fmt == "libsvm", hasattr(args, "header"),  # first
                           algo.empty)  # KiB (Parquet: its footer, in algo.check_inputs)
    algo.check_inputs(args)  # the files' headers against --label and the column options
    if args.test is not None and (hasattr(args, "header") or fmt in ("csv", "parquet")):
        # GBDT's tables and ratings (mf's format is None): their readers count the rows
        # only once scored, after the fit; CTR CSV (lr, fm: a header always) in a first
        # pass, once the cluster has started; any Parquet: its footers say it
        check_test_rows(args.test, "ctr" if fmt == "csv" and not hasattr(args, "header")
                        else fmt or "ratings", getattr(args, "header", None) is not False,
                        algo.empty)
    if args.save is not None:  # (an empty one refused)
        check_save(args.save)
    if spec.mode not in ("address", "file", "slurm-runner"):  # the workers it will start
        check_n_shards(est, spec.ps_workers or spec.n_workers, spec.ps_workers > 0)
    session = connect(spec, report=say)
    try:
        if spec.mode not in ("address", "file") and not args.debug:
            from ._quiet import QuietDataErrors

            # this run's own workers: bad input is reported once, by its error line
            session.client.register_plugin(QuietDataErrors())
        with session.client.as_current():  # every compute below goes to this cluster
            _train(args, algo, est, session, spec.n_workers + spec.ps_workers)
    finally:
        session.close()
    return 0


def _check_checkpoint_every(args, est) -> None:
    """Refuse ``--checkpoint-every`` where it would be ignored: without a checkpoint URL
    (``--checkpoint auto`` snapshots by time, none by epochs).

    Raises
    ------
    OptionError
    """
    from ..algorithms.epoch_loop import AUTO_SNAPSHOT_SECONDS

    if getattr(args, "checkpoint_every", None) is None:
        return
    checkpoint = est.get_params().get("checkpoint")
    if checkpoint in (None, "auto"):
        raise OptionError(f"--checkpoint-every {args.checkpoint_every}: applies to a "
                          f"--checkpoint URL (this fit's checkpoint is "
                          + (f"'auto': snapshots every {AUTO_SNAPSHOT_SECONDS:g} s of "
                             f"training, not by epochs)" if checkpoint == "auto" else
                             "none: it writes no checkpoint)"))


def _train(args, algo: Algorithm, est, session, n_workers: int) -> None:
    from ..algorithms.epoch_loop import AUTO_SNAPSHOT_SECONDS
    from ..diagnostics import install
    from ..saving import save_estimator

    events = None
    try:
        client = session.client
        t = session.times
        say(f"cluster: {session.description}; scheduler after {t['scheduler']:.1f} s, first "
            f"worker after {t['first_worker']:.1f} s, all {n_workers} after "
            f"{t['all_workers']:.1f} s")
        say("workers: " + ", ".join(
            a + "".join(f" ({k}={v:g})" for k, v in sorted(w.get("resources", {}).items()))
            for a, w in sorted(worker_info(client).items())))
        if args.dashboard_address is None:  # (the option asks for no link, no page)
            say("dashboard: none (--dashboard-address none)")
        else:
            say(f"dashboard: {client.dashboard_link}")
            try:
                say(f"dask_ps page: {install(client)}")
            except Exception as exc:  # e.g. a remote scheduler without dask_ps or bokeh
                say(f"dask_ps page unavailable: {exc!r}")
        if session.shard_resource:
            est.set_params(shard_resources=session.shard_resource)
        resource = est.get_params().get("shard_resources")
        check_n_shards(est, sum(resource is None or resource in w.get("resources", {})
                                for w in worker_info(client).values()), resource is not None)
        before = _compiled(client)  # (not timed: a round trip to the workers)
        t0 = time.perf_counter()
        data = algo.load(args, client)
        if data.test is not None and _known_rows(data.test) == 0:  # before training
            raise no_test_rows(args.test, algo.empty)
        _placed(data)
        seconds = time.perf_counter() - t0
        say(read_line(args.train, seconds, data.summary,
                      _compiled_since(before, _compiled(client))))
        est.set_params(client=client)
        params = est.get_params()
        passes = algo.passes_for(est)[0]
        if params.get("checkpoint") == "auto":
            say(f"checkpoint: auto (a snapshot after every {AUTO_SNAPSHOT_SECONDS:g} s of "
                f"training, in a temporary folder deleted after the fit, when every worker "
                f"runs on this machine)")
        elif params.get("checkpoint"):
            say(f"checkpoint: {params['checkpoint']} every "
                f"{passes_of(params.get('checkpoint_every', 1), passes)}"
                + (" (resuming from its newest complete version, if any)"
                   if params.get("resume") else ""))
        elif getattr(args, "checkpoint", "") is None:  # --checkpoint none given
            say("checkpoint: none (--checkpoint none: no checkpoint is written)")
        n = len(client.nthreads())
        say(f"training {algo.estimator} on {data.summary}, {n} worker{'s' if n != 1 else ''}")
        events = Events(client, passes)
        # checkpoint="auto" snapshots go to a temporary folder deleted after the fit
        kept = est.get_params().get("checkpoint") not in (None, "auto")
        t0 = time.perf_counter()
        try:
            est.fit(*data.fit_args, **data.fit_kwargs)
        except BaseException:  # a batch log must say where to resume from
            if events.checkpoints and kept:
                say(f"last checkpoint: {events.checkpoints[-1]} (rerun with --resume auto "
                    f"to continue from it)")
            raise
        wall = time.perf_counter() - t0
        print_history(est.history_, args.history, passes)
        say(rate_line(est.history_, data.units, algo.unit, wall, events.restored,
                      *algo.passes_for(est)))
        for line in algo.report(est, args):
            say(line)
        if events.checkpoints and kept:
            say(f"last checkpoint: {events.checkpoints[-1]}")
        if args.save:  # before scoring: a bad line in --test must not lose the model
            save_estimator(est, args.save, extra={"algorithm": algo.name, "data": data.meta,
                                                  "train": args.train})
            say(f"saved: {args.save} ({algo.estimator}; dask-ps evaluate {args.save} "
                f"--test PATH)")
        if data.test is not None:
            say_scores(algo.score(est, data.test), args.test, algo.empty)
    finally:
        if events is not None:
            events.close()


def _placed(data) -> None:
    """Wait until the workers hold the training data ``data`` persisted (a reader may
    return before its partitions are made), so that the read line's time includes it."""
    from distributed import futures_of

    from ..cluster import wait_watched

    futures = futures_of([data.fit_args, data.fit_kwargs])
    if futures:
        wait_watched(futures[0].client, "placing the training data", futures)


def _compiled(client) -> dict | None:
    """The dask_ps kernels each process compiled so far (this one, "", and every worker, by
    address: :func:`~dask_ps.kernels.compiled.compiled_kernels`); None if a worker could
    not say (e.g. it left): then nothing is claimed."""
    from ..kernels.compiled import compiled_kernels

    try:
        return {"": compiled_kernels(), **client.run(compiled_kernels)}
    except Exception:
        return None


def _compiled_since(before: dict | None, after: dict | None) -> bool | None:
    """Whether some process compiled a kernel between snapshots ``before`` and ``after`` of
    :func:`_compiled` (None if either is unknown; a worker that joined in between counts
    from none)."""
    if before is None or after is None:
        return None
    return any(n > before.get(process, {}).get(name, 0)
               for process, counts in after.items() for name, n in counts.items())


def _known_rows(test) -> int | None:
    """The rows of test data as read (a :class:`~._algorithms.TestSet`'s ``X``, or the
    data itself), when its reader's first pass counted them (LIBSVM, CSV/Parquet tables,
    LDA's formats: a dask array of known chunks); else None (a dataframe of ratings)."""
    shape = getattr(getattr(test, "X", test), "shape", None)
    n = shape[0] if shape else None  # (NaN: chunks of unknown size)
    return int(n) if isinstance(n, (int, np.integer)) else None


def evaluate(args) -> int:
    """Score a saved model on test data, in this process (Dask's threads)."""
    import dask

    from ..saving import load_estimator

    check_model(args.model)
    check_files(args.test, "--test")
    est, extra = load_estimator(args.model)
    algo = by_estimator(type(est).__name__)
    data = extra.get("data")
    if not (isinstance(data, dict) and "format" in data):  # e.g. a learn_online version
        raise DataError(f"{args.model}: the model file does not say how its training data "
                        f"was read (saved by save_estimator, not dask-ps train --save), so "
                        f"dask-ps evaluate cannot read test data for it: score it in Python "
                        f"(dask_ps.saving.load_estimator)")
    data = test_options(data, args, algo)
    if data["format"] != "parquet":  # files of 0 bytes, as train checks --test
        check_contents(args.test, "--test", False, empty=algo.empty)
    if "header" in data or data.get("format") == "parquet":  # as train checks --test
        check_test_rows(args.test, data["format"], bool(data.get("header")), algo.empty)
    try:
        with dask.config.set(scheduler="threads"):
            test = algo.load_test(args.test, data, args)
            scores = algo.score(est, test)
    except DataError as exc:
        said = _format_hint(exc, args.test, data["format"])
        if said is None:
            raise
        raise DataError(said) from exc
    say_scores(scores, args.test, algo.empty)
    return 0


def say_scores(scores: tuple, urlpath: str, empty: str) -> None:
    """Print ``scores``, the ``(rows, lines)`` an Algorithm's ``score`` says of test data
    ``urlpath`` (``warning: `` lines to stderr), as ``dask-ps train`` and ``evaluate`` do.

    Raises
    ------
    DataError
        No rows (:func:`no_test_rows`).
    """
    rows, lines = scores
    if not rows:
        raise no_test_rows(urlpath, empty)
    for line in lines:
        if line.startswith("warning: "):
            print(f"dask-ps: {line}", file=sys.stderr, flush=True)
        else:
            say(line)


def test_options(data: dict, args, algo: Algorithm) -> dict:
    """How ``dask-ps evaluate`` reads its test data: the training data's options ``data``
    (saved with the model) with ``--format``, ``--header``, ``--sep`` and ``--zero-based``
    as overrides.

    ``--format`` switches a model trained on a table between CSV and Parquet (its
    encoder or feature columns go by column name); ``--header``/``--no-header`` apply to
    ratings (mf) and to headed or headerless CSV tables (gbdt): a gbdt test file whose
    columns are numbered (no header) while the training data's were named, or the
    reverse, has the training data's columns in order (``by_position``, read by
    :func:`~._gbdt._by_position`); ``--sep`` to CSV tables
    and ratings (default: the training data's delimiter, saved with the model; a model
    trained on Parquet reads CSV test data with ``,``); ``--zero-based`` to LIBSVM
    (applied by the reader, :func:`~._algorithms.read_libsvm_test`, whose errors name it).

    Raises
    ------
    OptionError
        An override the model's data cannot take (naming the training data's format).
    """
    data = dict(data)
    fmt, trained = getattr(args, "format", None), data["format"]
    tables = ("csv", "parquet")
    if fmt is not None and fmt != trained:
        if not (fmt in tables and trained in tables):
            why = {"libsvm": "its features are LIBSVM column indices, not a table's columns",
                   "csv": "its features are a table's columns, not LIBSVM column indices",
                   "parquet": "its features are a table's columns, not LIBSVM column indices"
                   }.get(trained, "--format applies to lr, fm and gbdt models")
            raise OptionError(f"--format {fmt}: the model ({algo.name}) was trained on "
                              f"{trained} data: {why}")
        data["format"] = fmt
    # gbdt's tables: columns named (a header, Parquet) or numbered (no header)
    named = trained == "parquet" or data.get("header") if "header" in data else None
    header = getattr(args, "header", None)
    if header is not None:
        if not (trained == "ratings" or data["format"] == "csv" and "header" in data):
            raise OptionError(
                f"--{'' if header else 'no-'}header: applies to ratings (mf) and to gbdt's "
                f"csv tables; the model ({algo.name}) reads {data['format']} test data "
                + ("with its header always (a click table's columns go by name)"
                   if data["format"] == "csv" else "without a header line"))
        data["header"] = header
    if named is not None and trained in tables and named != (data["format"] == "parquet"
                                                             or data["header"]):
        data.update(by_position=True, trained_named=named)  # (_gbdt._by_position)
    sep = getattr(args, "sep", None)
    if sep is not None:
        if data["format"] not in ("csv", "ratings"):
            raise OptionError(f"--sep {sep!r}: applies to csv and ratings test data; the "
                              f"model ({algo.name}) reads {data['format']} test data")
        data["sep"] = sep
    zero_based = getattr(args, "zero_based", None)
    if zero_based is not None and data["format"] != "libsvm":
        raise OptionError(f"--zero-based {zero_based}: applies to LIBSVM test data; the model "
                          f"({algo.name}) reads {data['format']} test data")
    return data


def _format_hint(exc: DataError, urlpath: str, fmt: str) -> str | None:
    """The message of ``exc``, an error reading test data ``urlpath`` as ``fmt`` (the
    format the model was trained on), saying so when the file looks like another format
    (its first line or bytes): ``... (this file looks like LIBSVM, '1 3:1', while the
    model was trained on CSV data: ...)``. A LIBSVM model's reader asks whether the file is
    a table to read with ``format='csv'`` (:func:`~dask_ps.io._sniff.other_format`), which
    this command cannot: that question is answered so, and a compressed file's hint names
    no ``compression=``. None when there is nothing to say."""
    from ..io._blocks import open_paths
    from ..io._sniff import compressed, libsvm_line, other_format

    message = str(exc)
    if fmt not in ("csv", "parquet", "libsvm"):
        return None
    try:
        fs, paths = open_paths(urlpath)
        named = getattr(exc, "path", None)  # a bad line's file: one of a glob's
        with fs.open(named if named in paths else paths[0], "rb", compression="infer") as f:
            head = f.read(1 << 16)
    except (OSError, ValueError, IndexError):
        return None
    if fmt == "libsvm":  # the reader's words: other_format of the file's first KiB
        asked = other_format(head[:1024])
        if not asked or not message.endswith(asked):
            return None
        if compressed(head):
            return message.removesuffix(asked) + compressed(head, option=False)
        what = asked.split("? ", 1)[0].removeprefix(" (is this a ")
        return (f"{message.removesuffix(asked)} (is this a {what}? the model was trained on "
                f"LIBSVM data: dask-ps evaluate reads the test data as the training data "
                f"was read)")
    first = head.removeprefix(b"\xef\xbb\xbf").split(b"\n", 1)[0].strip()
    if not libsvm_line(first):
        return None
    line = first[:60].decode("utf-8", "replace") + ("..." if len(first) > 60 else "")
    return (f"{message} (this file looks like LIBSVM, {line!r}, while the model was trained "
            f"on {fmt.upper()} data: dask-ps evaluate reads the test data as the training "
            f"data was read)")


def export(args) -> int:
    """Write a saved model's weights as tables (Parquet or CSV) and a model.json, then say
    how the tables number the features (LIBSVM data: as its lines do) or LDA's terms (a UCI
    docword's wordID, from 1; an LDA-C id, from 0; or the vocabulary's words)."""
    from ..io._storage import check_writable, file_system
    from ..saving import load_estimator, write_tables

    file_system(args.out, "out")  # (an empty one, an unknown protocol: before reading)
    check_model(args.model)
    check_writable(args.out, "out", folder=True)  # (no credentials: before loading)
    est, extra = load_estimator(args.model)
    algo = by_estimator(type(est).__name__)
    tables, desc = algo.export(est, extra.get("data", {}))
    for path in write_tables(args.out, tables, desc, args.format):
        say(f"wrote {path}")
    for key in ("feature", "term"):  # how the tables number the features (as model.json)
        if desc.get(key):
            say(f"{key}: {desc[key]}")
    return 0
