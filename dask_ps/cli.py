"""The ``dask-ps`` command line: train a model on LIBSVM data and report test metrics.

    dask-ps train lr --train PATH [--test PATH] [--solver ftrl] [--workers 2]
                     [--scheduler-address ADDR | --scheduler-file FILE]
    dask-ps train lr --dataset a9a          # $DASK_PS_DATA/lr_a9a/{a9a,a9a.t}
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DATASETS = {
    # name: (folder, train, test, n_features, where to download)
    "a9a": ("lr_a9a", "a9a", "a9a.t", 123,
            "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a"),
}


def data_root() -> Path:
    """``$DASK_PS_DATA``, default ``../shared/data`` beside the current directory."""
    return Path(os.environ.get("DASK_PS_DATA", Path.cwd().parent / "shared" / "data"))


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
    lr.add_argument("--n-features", type=int, help="default: the largest index seen")
    lr.add_argument("--solver", default="ftrl", choices=["ftrl", "sgd", "adagrad", "lbfgs"])
    lr.add_argument("--max-iter", type=int, help="epochs (default 5) or L-BFGS iterations "
                                                 "(default 500)")
    lr.add_argument("--C", type=float, default=1.0)
    lr.add_argument("--penalty", default="l2", choices=["l2", "l1"])
    lr.add_argument("--batch-size", type=int, default=1)
    lr.add_argument("--learning-rate", type=float)
    lr.add_argument("--consistency", default="bsp", choices=["bsp", "ssp", "asp"])
    lr.add_argument("--staleness", type=int)
    lr.add_argument("--blocksize", help="bytes per data partition (default: two partitions "
                                        "per worker, at most 64MiB each)")
    where = lr.add_mutually_exclusive_group()
    where.add_argument("--scheduler-address", help="an existing Dask scheduler")
    where.add_argument("--scheduler-file", help="an existing Dask scheduler's file")
    lr.add_argument("--workers", type=int, default=2, help="local cluster size (default 2)")
    lr.add_argument("--seed", type=int, default=0)
    return p


def _resolve_dataset(args) -> None:
    folder, train, test, n_features, url = DATASETS[args.dataset]
    root = data_root() / folder
    missing = [f for f in (train, test) if not (root / f).is_file()]
    if missing:
        sys.exit(f"dask-ps: {', '.join(missing)} not found in {root}. Download them from "
                 f"{url} into that folder, or set DASK_PS_DATA to a folder holding {folder}/.")
    args.train, args.test = str(root / train), str(root / test)
    args.n_features = args.n_features or n_features


def train_lr(args) -> int:
    import dask
    from distributed import Client, LocalCluster
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    from .algorithms import LogisticRegression
    from .diagnostics import install
    from .io import read_libsvm

    if args.dataset:
        _resolve_dataset(args)
    if args.scheduler_address or args.scheduler_file:
        cluster = None
        client = Client(args.scheduler_address, scheduler_file=args.scheduler_file)
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                               dashboard_address=":0")
        client = Client(cluster)
    try:
        print(f"dashboard: {client.dashboard_link}", flush=True)
        try:
            print(f"dask_ps page: {install(client)}", flush=True)
        except Exception as exc:  # e.g. a remote scheduler without dask_ps or bokeh
            print(f"dask_ps page unavailable: {exc!r}", flush=True)
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        blocksize = args.blocksize or _blocksize(args.train, n_workers)
        X, y = read_libsvm(args.train, n_features=args.n_features, blocksize=blocksize)
        X, y = client.persist([X, y])
        max_iter = args.max_iter or (500 if args.solver == "lbfgs" else 5)
        model = LogisticRegression(
            solver=args.solver, penalty=args.penalty, C=args.C, max_iter=max_iter,
            batch_size=args.batch_size, learning_rate=args.learning_rate,
            consistency=args.consistency, staleness=args.staleness, random_state=args.seed,
            client=client)
        print(f"training {args.solver} on {X.shape[0]:,} rows x {X.shape[1]:,} features "
              f"({X.numblocks[0]} partitions, {len(client.scheduler_info()['workers'])} "
              f"workers)", flush=True)
        t0 = time.perf_counter()
        model.fit(X, y)
        wall = time.perf_counter() - t0
        for h in model.history_[-10:]:
            print("  " + "  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in h.items()))
        nnz = sum(dask.compute(*[dask.delayed(_nnz)(b) for b in X.to_delayed().ravel()]))
        passes = max_iter if args.solver != "lbfgs" else len(model.history_)
        print(f"train wall {wall:.2f} s, {nnz * passes / wall / 1e6:.1f} M non-zeros/s "
              f"({passes} passes over {nnz:,} non-zeros)")
        if args.test:
            Xt, yt = read_libsvm(args.test, n_features=model.n_features_in_)
            proba, yt = dask.compute(model.predict_proba(Xt), yt)
            positive = yt == model.classes_[-1]
            print(f"test: AUC {roc_auc_score(positive, proba[:, -1]):.4f}  accuracy "
                  f"{accuracy_score(yt, model.classes_[proba.argmax(axis=1)]):.4f}  "
                  f"log-loss {log_loss(positive, proba[:, -1]):.4f}")
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return 0


def _blocksize(urlpath: str, n_workers: int) -> int:
    """Two partitions per worker, between 256 KiB and 64 MiB."""
    import fsspec

    total = sum(f.fs.size(f.path) for f in fsspec.open_files(urlpath))
    return int(min(max(total // (2 * max(1, n_workers)) + 1, 2**18), 2**26))


def _nnz(block) -> int:
    return int(block.nnz)


def main(argv=None) -> int:
    """Entry point of the ``dask-ps`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "train" and args.algorithm == "lr":
        return train_lr(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
