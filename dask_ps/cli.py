"""The ``dask-ps`` command line: train a model on LIBSVM data and report test metrics.

    dask-ps train lr --train PATH [--test PATH] [--solver ftrl] [--workers 2]
                     [--scheduler-address ADDR | --scheduler-file FILE]
    dask-ps train lr --dataset a9a          # $DASK_PS_DATA/lr_a9a/{a9a,a9a.t}

Options are checked, and the input files looked up, before any cluster starts. A user error
(bad option, data or file, unreachable scheduler) prints ``dask-ps: error: <message>`` and
exits with status 2; ``--debug`` or ``DASK_PS_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

DATASETS = {
    # name: (folder, train, test, n_features, where to download)
    "a9a": ("lr_a9a", "a9a", "a9a.t", 123,
            "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a"),
}


def data_root() -> Path:
    """``$DASK_PS_DATA``, default ``../shared/data`` beside the current directory."""
    return Path(os.environ.get("DASK_PS_DATA", Path.cwd().parent / "shared" / "data"))


def _number(kind, low: float, strict: bool):
    """An argparse type: a finite ``kind`` (int or float) above ``low`` (or equal, if not
    strict)."""
    what = "an integer" if kind is int else "a finite number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        if not (value > low if strict else value >= low):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if strict else '>='} {low:g}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


POSITIVE_INT = _number(int, 1, strict=False)
NON_NEGATIVE_INT = _number(int, 0, strict=False)
POSITIVE = _number(float, 0, strict=True)


def _bytes(text: str) -> int:
    from dask.utils import parse_bytes

    try:
        size = parse_bytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 64MiB") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return size


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dask-ps", description="dask_ps command line")
    sub = p.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a model")
    algo = train.add_subparsers(dest="algorithm", required=True)
    lr = algo.add_parser("lr", help="logistic regression on LIBSVM data")
    src = lr.add_mutually_exclusive_group(required=True)
    src.add_argument("--train", help="LIBSVM file, glob or fsspec URL")
    src.add_argument("--dataset", choices=sorted(DATASETS),
                     help="a public dataset under $DASK_PS_DATA")
    lr.add_argument("--test", help="LIBSVM test data")
    lr.add_argument("--n-features", type=POSITIVE_INT, help="default: the largest index seen")
    lr.add_argument("--solver", default="ftrl", choices=["ftrl", "sgd", "adagrad", "lbfgs"])
    lr.add_argument("--max-iter", type=POSITIVE_INT,
                    help="epochs (default 5) or L-BFGS iterations (default 500)")
    lr.add_argument("--C", type=POSITIVE, default=1.0)
    lr.add_argument("--penalty", default="l2", choices=["l2", "l1"])
    lr.add_argument("--batch-size", type=POSITIVE_INT, default=1)
    lr.add_argument("--learning-rate", type=POSITIVE)
    lr.add_argument("--consistency", default="bsp", choices=["bsp", "ssp", "asp"])
    lr.add_argument("--staleness", type=NON_NEGATIVE_INT)
    lr.add_argument("--blocksize", type=_bytes, help="bytes per data partition, e.g. 64MiB "
                    "(default: two partitions per worker, at most 64MiB each)")
    where = lr.add_mutually_exclusive_group()
    where.add_argument("--scheduler-address", help="an existing Dask scheduler")
    where.add_argument("--scheduler-file", help="an existing Dask scheduler's file")
    lr.add_argument("--timeout", type=POSITIVE, default=30.0,
                    help="seconds to wait for the scheduler and its first worker (default 30)")
    lr.add_argument("--workers", type=POSITIVE_INT, default=2,
                    help="local cluster size (default 2)")
    lr.add_argument("--seed", type=NON_NEGATIVE_INT, default=0)
    lr.add_argument("--history", type=NON_NEGATIVE_INT, default=10,
                    help="training history rows to print, the last ones (default 10; 0: all)")
    lr.add_argument("--debug", action="store_true",
                    help="show the Python traceback of errors (or set DASK_PS_DEBUG=1)")
    return p


def _resolve_dataset(args) -> None:
    folder, train, test, n_features, url = DATASETS[args.dataset]
    root = data_root() / folder
    missing = [f for f in (train, test) if not (root / f).is_file()]
    if missing:
        sys.exit(f"dask-ps: {', '.join(missing)} not found in {root}. Download them from "
                 f"{url} into that folder, or set DASK_PS_DATA to a folder holding {folder}/.")
    args.train, args.test = str(root / train), str(root / test)
    if args.n_features is None:
        args.n_features = n_features


def _check_files(urlpath: str, option: str) -> None:
    """Fail before any cluster starts if ``urlpath`` names no file (or a missing one)."""
    from .io._blocks import open_paths

    try:
        fs, paths = open_paths(urlpath)
    except FileNotFoundError:
        raise FileNotFoundError(f"{option} {urlpath}: no such file") from None
    absent = [p for p in paths if not fs.isfile(p)]
    if absent:
        raise FileNotFoundError(f"{option} {absent[0]}: no such file"
                                + (" (a directory)" if fs.isdir(absent[0]) else ""))


def _connect(args):
    """``(client, cluster)``: an existing scheduler (cluster None) or a new LocalCluster."""
    from distributed import Client, LocalCluster

    if args.scheduler_address or args.scheduler_file:
        # Client waits forever for a scheduler file to appear: refuse a missing one now.
        if args.scheduler_file and not os.path.isfile(args.scheduler_file):
            raise FileNotFoundError(f"--scheduler-file {args.scheduler_file}: no such file")
        client = Client(args.scheduler_address, scheduler_file=args.scheduler_file,
                        timeout=args.timeout)
        try:
            client.wait_for_workers(1, timeout=args.timeout)
        except TimeoutError:  # distributed's WorkerStartTimeoutError
            address = client.scheduler.address
            client.close()
            raise TimeoutError(f"the scheduler at {address} has no worker after "
                               f"{args.timeout:g} s") from None
        return client, None
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                           dashboard_address=":0")
    return Client(cluster), cluster


def train_lr(args) -> int:
    import dask

    from .algorithms import LogisticRegression
    from .cluster import worker_info
    from .diagnostics import install
    from .io import read_libsvm

    if args.dataset:
        _resolve_dataset(args)
    # Everything that can be checked without a cluster is checked before starting one.
    _check_files(args.train, "--train")
    if args.test:
        _check_files(args.test, "--test")
    max_iter = args.max_iter if args.max_iter is not None else (
        500 if args.solver == "lbfgs" else 5)
    model = LogisticRegression(
        solver=args.solver, penalty=args.penalty, C=args.C, max_iter=max_iter,
        batch_size=args.batch_size, learning_rate=args.learning_rate,
        consistency=args.consistency, staleness=args.staleness, random_state=args.seed)
    model._check_params()
    client, cluster = _connect(args)
    try:
        print(f"dashboard: {client.dashboard_link}", flush=True)
        try:
            print(f"dask_ps page: {install(client)}", flush=True)
        except Exception as exc:  # e.g. a remote scheduler without dask_ps or bokeh
            print(f"dask_ps page unavailable: {exc!r}", flush=True)
        n_workers = len(worker_info(client))
        blocksize = args.blocksize or _blocksize(args.train, n_workers)
        X, y = read_libsvm(args.train, n_features=args.n_features, blocksize=blocksize)
        if args.test:  # its lines are checked now, not after training
            Xt, yt = read_libsvm(args.test, n_features=X.shape[1])
        X, y = client.persist([X, y])
        model.set_params(client=client)
        print(f"training {args.solver} on {X.shape[0]:,} rows x {X.shape[1]:,} features "
              f"({X.numblocks[0]} partitions, {n_workers} workers)", flush=True)
        t0 = time.perf_counter()
        model.fit(X, y)
        wall = time.perf_counter() - t0
        history = model.history_
        shown = history[-args.history:] if args.history else history
        print(f"history: last {len(shown)} of {len(history)} rows (--history N for more, 0: "
              f"all)" if len(shown) < len(history) else f"history: {len(history)} rows")
        for h in shown:
            print("  " + "  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in h.items()))
        nnz = sum(dask.compute(*[dask.delayed(_nnz)(b) for b in X.to_delayed().ravel()]))
        passes = max_iter if args.solver != "lbfgs" else len(model.history_)
        print(f"train wall {wall:.2f} s, {nnz * passes / wall / 1e6:.1f} M non-zeros/s "
              f"({passes} passes over {nnz:,} non-zeros)")
        if args.test:
            proba, yt = dask.compute(model.predict_proba(Xt), yt)
            line, warnings = metrics_line(model.classes_, yt, proba)
            for w in warnings:
                print(f"dask-ps: warning: {w}", file=sys.stderr, flush=True)
            print(line)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return 0


def metrics_line(classes: np.ndarray, y: np.ndarray, proba: np.ndarray
                 ) -> tuple[str, list[str]]:
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
    """
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    if not y.shape[0]:
        return "test: no rows", []
    warnings = []
    seen = np.isin(y, classes)
    if not seen.all():
        warnings.append(
            f"test labels {np.unique(y[~seen]).tolist()} ({int((~seen).sum()):,} of {len(y):,} "
            f"rows) are not among the training classes {classes.tolist()}: those rows count "
            f"as errors in the accuracy and are left out of AUC and log-loss")
    accuracy = accuracy_score(y, classes[proba.argmax(axis=1)])
    y, proba = y[seen], proba[seen]
    present = np.unique(y)
    multi = classes.shape[0] > 2
    if present.shape[0] < 2:
        reason = (f"the test labels hold one class only, {present.tolist()[0]}" if present.shape[0]
                  else "no test label is a training class")
        auc = f"n/a ({reason})"
    elif not multi:
        auc = f"{roc_auc_score(y == classes[1], proba[:, 1]):.4f}"
    elif present.shape[0] == classes.shape[0]:
        auc = (f"{roc_auc_score(y, proba, multi_class='ovr', labels=classes):.4f} "
               f"(macro one-vs-rest, {classes.shape[0]} classes)")
    else:  # scikit-learn refuses classes absent from y: average over those present
        at = np.searchsorted(classes, present)
        aucs = [roc_auc_score(y == c, proba[:, i]) for c, i in zip(present, at)]
        auc = (f"{np.mean(aucs):.4f} (macro one-vs-rest over the {present.shape[0]} of "
               f"{classes.shape[0]} classes in the test labels)")
    loss = (f"{log_loss(y, proba, labels=classes):.4f}" + (" (multi-class)" if multi else "")
            if y.shape[0] else "n/a")
    return f"test: AUC {auc}  accuracy {accuracy:.4f}  log-loss {loss}", warnings


def _blocksize(urlpath: str, n_workers: int) -> int:
    """Two partitions per worker, between 256 KiB and 64 MiB."""
    import fsspec

    total = sum(f.fs.size(f.path) for f in fsspec.open_files(urlpath))
    return int(min(max(total // (2 * max(1, n_workers)) + 1, 2**18), 2**26))


def _nnz(block) -> int:
    return int(block.nnz)


def main(argv=None) -> int:
    """Entry point of the ``dask-ps`` console script.

    A user error (bad data or option, missing file, unreachable scheduler, a dask_ps error)
    prints ``dask-ps: error: <message>`` and returns 2; ``--debug`` (or ``DASK_PS_DEBUG=1``)
    shows its traceback instead.
    """
    from . import exceptions

    args = _parser().parse_args(argv)
    user_errors = (ValueError, OSError, *(getattr(exceptions, n) for n in exceptions.__all__))
    try:
        if args.command == "train" and args.algorithm == "lr":
            return train_lr(args)
    except user_errors as exc:
        if args.debug or os.environ.get("DASK_PS_DEBUG", "") not in ("", "0"):
            raise
        print(f"dask-ps: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dask-ps: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
