"""The ``dask-ps`` command line.

    dask-ps train ALGORITHM [--config run.toml] [data, model, cluster and run options]
    dask-ps train lr --dataset a9a                       # $DASK_PS_DATA/lr_a9a/{a9a,a9a.t}
    dask-ps train mf --dataset movielens100k             # .../mf_movielens100k/u1.{base,test}
    dask-ps train fm --train 'logs/*.csv' --format csv --label click   # columns from the header
    dask-ps train lr --train 'logs/*.csv' --format csv --label click --categorical a,b,c \\
                     --cluster slurm --workers 8 --walltime 02:00:00 --save model.npz
    dask-ps train gbdt --train t.parquet --format parquet --label y --weight w  # sample weights
    srun dask-ps train lr ... --cluster slurm-runner      # inside one Slurm allocation
    dask-ps evaluate model.npz --test PATH [--format csv|parquet] [--header | --no-header]
                     [--sep SEP] [--zero-based auto|true|false]
    dask-ps export model.npz OUT_FOLDER [--format parquet|csv]

Options are checked, and the input files looked up, before any cluster starts. Failures end
with one line on stderr, ``dask-ps: error: <reason>``, and a non-zero status: 2 for a user
error (a bad option, data or file, an unreachable scheduler, lost workers: see
:func:`user_error`), 1 for any other error, a bug (its traceback above the line, which asks
for a report), 143 when stopped by SIGTERM (a walltime or ``scancel``), 130 when
interrupted (after either signal the command ends within :data:`STOP_GRACE` seconds, killing
its child processes if closing them takes longer). ``--debug`` or ``DASK_PS_DEBUG=1`` raises
instead. Python warnings are one line each too, ``dask-ps: warning: <Category>: <message>``
(Python's own format under ``--debug``). Errors and warnings give their advice in the
command's options (``--max-iter 83``, not the estimator's ``max_iter=83``:
:func:`~._words.cli_words`).
A ``--config`` TOML file (UTF-8) gives the same options (keys are long option names, at the
top level or in tables named as the groups of ``--help``, ``[data]``, ``[model]``,
``[cluster]``, ``[run]``; flags given on the command line win; an ``algorithm`` key names
the command's algorithm, or refuses another).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from typing import TYPE_CHECKING

from ..exceptions import OptionError
from . import _options as opt
from ._params import add_params
from ._registry import ALGORITHMS
from ._words import cli_words

if TYPE_CHECKING:
    import numpy as np

__all__ = ["main", "metrics_line", "user_error"]


class Terminated(Exception):
    """SIGTERM arrived (a batch system's walltime or scancel)."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that names an unknown option before a missing required one:
    argparse checks the required options (``--train``/``--dataset``, ``--test``) first, so
    ``dask-ps train lr --datset a9a`` said "one of the arguments --train --dataset is
    required", never naming the misspelt option. Its sub-parsers are of this class too."""

    def parse_known_args(self, args=None, namespace=None):
        import copy
        import difflib
        import re

        args = list(sys.argv[1:] if args is None else args)
        required = [a for a in self._actions if a.required and a.option_strings] + \
            [g for g in self._mutually_exclusive_groups if g.required]
        for r in required:  # first without them: what is left over
            r.required = False
        try:
            first = super().parse_known_args(list(args), copy.copy(namespace) if required
                                             else namespace)
        finally:
            for r in required:
                r.required = True
        extras = first[1]
        unknown = [a for a in extras
                   if a.startswith("-") and a != "--" and not re.fullmatch(r"-\d*\.?\d+", a)]
        if unknown:
            known = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            near = {u: difflib.get_close_matches(u.split("=", 1)[0], known, n=1)
                    for u in unknown}
            hint = ", ".join(f"{u.split('=', 1)[0]}: did you mean {m[0]}?"
                             for u, m in near.items() if m)
            self.error(f"unrecognized arguments: {' '.join(extras)}"
                       + (f" ({hint})" if hint else ""))
        return super().parse_known_args(args, namespace) if required else first


def _parser() -> tuple[argparse.ArgumentParser, dict]:
    """The parser and the ``train`` sub-parser of each algorithm."""
    p = _Parser(prog="dask-ps", description="dask_ps: train, evaluate and "
                                "export models on a Dask parameter server")
    sub = p.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a model",
                           description="Train a model; see dask-ps train ALGORITHM --help")
    algos = train.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    parsers = {}
    for algo in ALGORITHMS.values():
        a = algos.add_parser(algo.name, help=algo.summary, description=f"Train "
                             f"{algo.estimator}: {algo.summary}.")
        data = a.add_argument_group("data")
        src = data.add_mutually_exclusive_group(required=True)
        src.add_argument("--train", help="training data: a file, glob or fsspec URL")
        src.add_argument("--dataset", choices=sorted(algo.datasets),
                         help="a public dataset under $DASK_PS_DATA (default ../shared/data "
                              "beside the repository), with its test file if it has "
                              "one")
        data.add_argument("--test", help="test data, scored after training")
        # listed only where it applies; elsewhere parsed (hidden) to be refused by name
        data.add_argument("--weight", metavar="COLUMN", help=(
            "csv/parquet: the column of sample weights (finite, >= 0; not a feature); a "
            "test file holding it is scored with weighted metrics" if algo.weighted else
            argparse.SUPPRESS))
        algo.data_options(data)
        add_params(a, algo)
        opt.add_cluster_options(a)
        run = a.add_argument_group("run")
        run.add_argument("--config", metavar="FILE", help="a TOML file of these options "
                         "(keys: long option names; flags given here win)")
        run.add_argument("--resume", choices=["never", "auto"], default="never",
                         help="auto: continue from the newest complete version of "
                              "--checkpoint when there is one (default never)")
        run.add_argument("--save", metavar="PATH",
                         help="save the fitted model (a .npz file, no pickle) for dask-ps "
                              "evaluate / export")
        run.add_argument("--history", type=opt.NON_NEGATIVE_INT, default=10,
                         help="training history rows to print, the last ones (default 10; "
                              "0: all)")
        run.add_argument("--debug", action="store_true",
                         help="raise errors with their traceback (or set DASK_PS_DEBUG=1)")
        parsers[algo.name] = a
    ev = sub.add_parser("evaluate", help="score a saved model on test data",
                        description="Score a model saved by dask-ps train --save, in this "
                                    "process; the test data is read as the training data was.")
    ev.add_argument("model", help="the saved model (.npz)")
    ev.add_argument("--test", required=True, help="test data: a file, glob or fsspec URL")
    ev.add_argument("--format", choices=["libsvm", "csv", "parquet"],
                    help="the test data's format when it differs from the training data's: "
                         "csv or parquet for a model trained on a table (columns taken by "
                         "name; default: the training data's)")
    ev.add_argument("--header", action=argparse.BooleanOptionalAction,
                    help="whether the test files start with column names, when they differ "
                         "from the training files: ratings (mf) and gbdt's csv, whose "
                         "columns are then the training files' in order (default: as the "
                         "training files)")
    ev.add_argument("--sep", type=opt.separator,
                    help="csv, ratings (mf): the test data's field delimiter, one character "
                         "('\\t' for a tab), when it differs from the training data's "
                         "(default: the training data's, saved with the model)")
    ev.add_argument("--zero-based", choices=["auto", "true", "false"],
                    help="libsvm: the test data's index base when it differs from the one the "
                         "model was trained with (auto: decided by the test data, index 0 "
                         "anywhere in it: zero-based; default: the model's, saved with it)")
    ev.add_argument("--debug", action="store_true", help="raise errors with their traceback")
    ex = sub.add_parser("export", help="write a saved model's weights as tables",
                        description="Write the weights of a model saved by dask-ps train "
                                    "--save into a new folder, or over an earlier export: "
                                    "tables and a model.json.")
    ex.add_argument("model", help="the saved model (.npz)")
    ex.add_argument("out", help="a new or empty folder, or one holding only an earlier "
                                "export, which is replaced")
    ex.add_argument("--format", choices=["parquet", "csv"], default="parquet",
                    help="table format (default parquet)")
    ex.add_argument("--debug", action="store_true", help="raise errors with their traceback")
    return p, parsers


def _expand_config(argv: list[str], parsers: dict) -> list[str]:
    """``dask-ps train [ALGORITHM] --config FILE ...`` with the file's options spelled out
    before the command line's."""
    if not argv or argv[0] != "train":
        return argv
    path = opt.config_path(argv[1:])
    if path is None:
        return argv
    rest, skip = [], False
    for i, token in enumerate(argv[1:]):
        if skip:
            skip = False
        elif token == "--config":
            skip = True
        elif not token.startswith("--config="):
            rest.append(token)
    if rest and rest[0] in ALGORITHMS:
        name, rest = rest[0], rest[1:]
    elif rest and not rest[0].startswith("-") and rest[0] not in ("-h", "--help"):
        return argv  # an unknown algorithm: argparse says so
    else:
        name = opt.read_algorithm(path)
        if name is None:
            raise OptionError(f"give the algorithm: dask-ps train ALGORITHM --config {path}, "
                              f"or algorithm = \"lr\" in {path}")
        if name not in ALGORITHMS:
            raise OptionError(f"{path}: algorithm {name!r} is not one of {sorted(ALGORITHMS)}")
    tokens = opt.config_argv(path, parsers[name], rest, f"train {name}", algorithm=name)
    return ["train", name, *tokens, *rest, f"--config={path}"]


#: Seconds the command may take to stop after Ctrl-C or SIGTERM (closing its cluster, its
#: client, the interpreter's exit handlers) before it kills its child processes and exits
#: anyway: a stop signal never leaves it hanging.
STOP_GRACE = 30.0
_stopping: list = []  # the armed timer, once a stop signal came (this main() call's)
_said: list = []  # the failure's line was printed (by this main() call)


def _reset_stop() -> None:
    """Forget an earlier :func:`main` call's stop state (tests, and callers, make many in
    one process): its failure line must not silence this call's watchdog line, nor its
    armed watchdog end this call's run."""
    for timer in _stopping:
        timer.cancel()
    _stopping.clear()
    _said.clear()


def _arm_stop(code: int, line: str) -> None:
    """End the process with status ``code`` :data:`STOP_GRACE` seconds from now if it has
    not ended by then, printing ``line`` unless a failure was printed already, after
    killing its child processes (a local cluster's workers)."""
    import threading

    if _stopping:
        return

    def expire():
        import psutil  # a dependency of distributed

        if not _said:
            print(f"dask-ps: error: {line} (still stopping after {STOP_GRACE:g} s: its "
                  f"processes were killed)", file=sys.stderr, flush=True)
        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
        os._exit(code)

    timer = threading.Timer(STOP_GRACE, expire)
    timer.daemon = True  # runs on during the interpreter's exit handlers
    timer.start()
    _stopping.append(timer)


def _on_sigterm(signum, frame):
    _arm_stop(143, "stopped by SIGTERM")
    raise Terminated()


def _on_sigint(signum, frame):
    _arm_stop(130, "interrupted")
    raise KeyboardInterrupt


def _fail(line: str) -> None:
    """Print the reason of a failure, to stay the last line of the log: the client's
    futures cut short by the failure (a gather waiting on lost workers) are reported by
    asyncio when the interpreter exits ("Task exception was never retrieved"); the run is
    over by then, so that report is silenced."""
    import logging

    print(f"dask-ps: error: {line}", file=sys.stderr, flush=True)
    _said.append(line)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)


def _one_line(exc: BaseException) -> str:
    return " / ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or \
        type(exc).__name__


def _failed(exc: Exception, command: argparse.ArgumentParser | None = None) -> int:
    """Report ``exc``: one line and status 2 for a :func:`user_error` (its advice spelled
    in the options of ``command``, the sub-parser of the command that ran:
    :func:`~._words.cli_words`), else (a bug) its traceback, a line asking for a report,
    and status 1."""
    if user_error(exc):
        _fail(cli_words(_one_line(exc), command))
        return 2
    import traceback

    traceback.print_exception(exc)
    _fail(f"unexpected {type(exc).__name__}: {_one_line(exc)} (a bug of dask_ps? please "
          f"report it with the traceback above)")
    return 1


def user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix, printed as one line, rather than a bug, printed
    with its traceback.

    The user's: bad input (:class:`~dask_ps.DataError`, raised by dask_ps's readers and
    estimators for what they refuse), a bad option (:class:`~dask_ps.OptionError`: the
    command's checks, a ``--config`` file, an estimator parameter), a file, connection or
    timeout (``OSError``), the cluster failing the run (lost workers, no worker for the
    shards, a failed recovery), training that diverged, an unreadable checkpoint, a missing
    optional package (or a URL's protocol's), and a model or data larger than the memory
    given (:class:`~dask_ps.MemoryLimitError`: ``--memory``, ``--n-components``,
    ``--topics`` or an LDA corpus's largest term id). Any other exception, a ``ValueError``
    raised deep in NumPy or in dask_ps included, is a bug.
    """
    from .. import exceptions as e

    if isinstance(exc, ModuleNotFoundError):  # an optional package, not a module of ours
        return not (exc.name or "dask_ps").startswith("dask_ps")
    return isinstance(exc, (e.DataError, e.OptionError, OSError, e.WorkerLostError,
                            e.NoShardWorkerError, e.RecoveryError, e.DivergenceError,
                            e.CheckpointFormatError, e.MemoryLimitError))


def main(argv=None) -> int:
    """Entry point of the ``dask-ps`` console script; returns the exit status.

    A user error (:func:`user_error`: bad data or option, missing file, unreachable
    scheduler, lost workers) prints ``dask-ps: error: <message>`` and returns 2; any other
    error, a bug, prints its traceback, then that line asking for a report, and returns 1;
    SIGTERM returns 143. ``--debug`` (or ``DASK_PS_DEBUG=1``) raises instead. While the
    command runs, a Python warning prints as ``dask-ps: warning: <Category>: <message>``
    (:func:`warnings.showwarning` is restored when it returns; ``--debug`` keeps Python's
    format).
    """
    _reset_stop()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("DASK_PS_DEBUG", "") not in ("", "0")
    parser, parsers = _parser()
    try:
        argv = _expand_config(argv, parsers)
    except Exception as exc:
        if debug:
            raise
        return _failed(exc)
    args = parser.parse_args(opt.join_negative_sizes(argv))
    args.debug = debug  # DASK_PS_DEBUG=1 too
    command = (parsers[args.algorithm] if args.command == "train" else
               next(a for a in parser._actions if isinstance(a.choices, dict)).choices[
                   args.command])  # the sub-parser of the command: its options' spellings
    from . import _run  # the estimators, distributed: only once a command runs
    previous = previous_int = None
    if threading_is_main():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        previous_int = signal.signal(signal.SIGINT, _on_sigint)
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _warning_line(command)
    try:
        if args.command == "train":
            return _run.train(args, ALGORITHMS[args.algorithm])
        if args.command == "evaluate":
            return _run.evaluate(args)
        return _run.export(args)
    except Terminated:
        _fail("stopped by SIGTERM (a walltime or scancel?)")
        return 143
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except Exception as exc:
        if debug:
            raise
        return _failed(exc, command)
    finally:
        warnings.showwarning = shown
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)


def _warning_line(command: argparse.ArgumentParser):
    """A :func:`warnings.showwarning` printing a warning as one line on stderr, ``dask-ps:
    warning: <Category>: <message>`` (the category left out for a ``UserWarning``), its
    advice in the options of ``command`` (:func:`~._words.cli_words`): not Python's two
    lines, the console script's file and line and its ``sys.exit(main())``."""
    def show(message, category, filename, lineno, file=None, line=None):
        kind = "" if category is UserWarning else f"{category.__name__}: "
        said = cli_words(_one_line(message), command)  # (a Warning, or its text)
        try:
            print(f"dask-ps: warning: {kind}{said}", file=sys.stderr if file is None else file,
                  flush=True)
        except OSError:  # (a closed stream, as warnings' own printer ignores)
            pass

    return show


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def metrics_line(classes: np.ndarray, y: np.ndarray, proba: np.ndarray,
                 sample_weight: np.ndarray | None = None) -> tuple[str, list[str]]:
    """The ``test:`` line (AUC, accuracy, log-loss) and warnings about the test labels.

    Two classes: the AUC of ``classes[1]`` and the binary log-loss. More: the macro average of
    the one-vs-rest AUCs (scikit-learn's ``roc_auc_score(multi_class="ovr")``) and the
    multi-class log-loss. Test labels not among ``classes`` count as errors in the accuracy and
    are left out of AUC and log-loss, with a warning naming them; the AUC is "n/a" (with the
    reason) when fewer than two classes remain.

    Parameters
    ----------
    classes : ndarray (n_classes,)
        The model's ``classes_``, sorted.
    y : ndarray (n_samples,)
        Test labels.
    proba : ndarray (n_samples, n_classes)
        ``predict_proba`` of the test rows.
    sample_weight : ndarray (n_samples,), optional
        The test rows' weights (a test file's ``--weight`` column): AUC, accuracy and
        log-loss weighted as scikit-learn weighs them (``sample_weight=``), the line ending
        in ``(weighted)``; the warning still counts rows.
    """
    import numpy as np
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    if not y.shape[0]:
        return "test: no rows", []
    warnings = []
    seen = np.isin(y, classes)  # (none: text test labels of classes that are numbers)
    if not seen.all():
        unseen = np.unique(y[~seen])
        kinds = [("text" if any(isinstance(v, (str, bytes)) for v in a.tolist()) else
                  "numbers") for a in (unseen, classes)]
        warnings.append(
            f"test labels {unseen.tolist()} ({int((~seen).sum()):,} of {len(y):,} rows) are "
            f"not among the training classes {classes.tolist()}"
            + (f" (the test labels are {kinds[0]}, the classes {kinds[1]}: write the test "
               f"labels as the training data does)" if kinds[0] != kinds[1] else "")
            + ": those rows count as errors in the accuracy and are left out of AUC and "
              "log-loss")
    sw = sample_weight
    hits = np.zeros(y.shape[0], bool)  # (scikit-learn refuses labels of two types)
    hits[seen] = y[seen] == classes[proba[seen].argmax(axis=1)]
    accuracy = accuracy_score(np.ones_like(hits), hits, sample_weight=sw)
    y, proba = y[seen], proba[seen]
    sw = None if sw is None else sw[seen]
    present = np.unique(y)
    multi = classes.shape[0] > 2
    if present.shape[0] < 2:
        reason = (f"the test labels hold one class only, {present.tolist()[0]}" if present.shape[0]
                  else "no test label is a training class")
        auc = f"n/a ({reason})"
    elif not multi:
        auc = f"{roc_auc_score(y == classes[1], proba[:, 1], sample_weight=sw):.4f}"
    elif present.shape[0] == classes.shape[0]:
        ovr = roc_auc_score(y, proba, multi_class="ovr", labels=classes, sample_weight=sw)
        auc = (f"{ovr:.4f} "
               f"(macro one-vs-rest, {classes.shape[0]} classes)")
    else:  # scikit-learn refuses classes absent from y: average over those present
        at = np.searchsorted(classes, present)
        aucs = [roc_auc_score(y == c, proba[:, i], sample_weight=sw)
                for c, i in zip(present, at)]
        auc = (f"{np.mean(aucs):.4f} (macro one-vs-rest over the {present.shape[0]} of "
               f"{classes.shape[0]} classes in the test labels)")
    loss = (f"{log_loss(y, proba, labels=classes, sample_weight=sw):.4f}"
            + (" (multi-class)" if multi else "") if y.shape[0] else "n/a")
    weighted = "" if sample_weight is None else "  (weighted)"
    return f"test: AUC {auc}  accuracy {accuracy:.4f}  log-loss {loss}{weighted}", warnings
