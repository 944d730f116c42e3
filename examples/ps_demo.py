"""Logistic regression on a9a on a local Dask cluster, written directly against the PSModel
API: what ``dask_ps.LogisticRegression`` does, in one task function of twenty lines.

Each worker trains on the partitions it holds: per clock it pulls the weights of the features
its minibatch touches, computes the log-loss gradient, pushes it, and clocks; the shards apply
FTRL-Proximal. Prints the test AUC, accuracy and log-loss.

    python examples/ps_demo.py [--workers 2] [--epochs 5] [--batch 256] [--consistency ssp|bsp|asp]

Data: ``$DASK_PS_DATA/lr_a9a/{a9a,a9a.t}`` (default ``../shared/data`` beside the repo).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

A9A_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a"


def find_data() -> Path:
    root = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    folder = root / "lr_a9a"
    if not (folder / "a9a").is_file() or not (folder / "a9a.t").is_file():
        sys.exit(f"a9a not found in {folder}. Download 'a9a' and 'a9a.t' from {A9A_URL} "
                 f"into {folder}, or point DASK_PS_DATA at a folder holding lr_a9a/.")
    return folder


def train_partition(ps, item):
    """One worker's share of training: ``item`` = (X csr, y in {0,1}, epochs, batch, seed)."""
    X, y, epochs, batch, seed = item
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    bias = X.shape[1]  # the last row of the table is the intercept
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch):
            rows = order[start:start + batch]
            Xb, yb = X[rows], y[rows]
            keys = np.unique(Xb.indices)
            w = ps.pull("w", np.append(keys, bias))
            local = Xb[:, keys]  # columns renumbered to the pulled keys
            margin = local @ w[:-1] + w[-1]
            residual = 1.0 / (1.0 + np.exp(-margin)) - yb
            grad = local.T @ residual
            ps.push("w", np.append(keys, bias), np.append(grad, residual.sum()))
            ps.clock()
    return ps.current_clock


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--consistency", default="ssp", choices=["bsp", "ssp", "asp"])
    args = parser.parse_args(argv)
    folder = find_data()

    import dask
    from distributed import Client, LocalCluster
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    import dask_ps
    from dask_ps.io import read_libsvm

    X, y = read_libsvm(str(folder / "a9a"), n_features=123)
    Xt, yt = read_libsvm(str(folder / "a9a.t"), n_features=123)
    X, y, Xt, yt = dask.compute(X, y, Xt, yt)
    y, yt = (y > 0).astype(np.float64), (yt > 0).astype(np.float64)

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True) as cluster, \
            Client(cluster) as client:
        print(f"dashboard: {client.dashboard_link}")
        model = dask_ps.PSModel(client)
        model.add_table("w", shape=(X.shape[1] + 1,), dtype="float64",
                        optimizer=dask_ps.FTRL(alpha=0.1, beta=1.0, l1=0.5, l2=1.0))
        parts = np.array_split(np.arange(X.shape[0]), args.workers)
        items = [client.scatter((X[p], y[p], args.epochs, args.batch, i), direct=True)
                 for i, p in enumerate(parts)]
        t0 = time.perf_counter()
        model.run(train_partition, items, consistency=args.consistency)
        wall = time.perf_counter() - t0
        w = model.pull("w")
        print(f"shards: {[s['tables']['w']['rows'] for s in model.stats()]} rows each")
        model.close()

    proba = 1.0 / (1.0 + np.exp(-(Xt @ w[:-1] + w[-1])))
    print(f"a9a test: AUC {roc_auc_score(yt, proba):.4f}  accuracy "
          f"{accuracy_score(yt, proba > 0.5):.4f}  log-loss {log_loss(yt, proba):.4f}  "
          f"train wall {wall:.2f} s ({args.epochs} epochs, {args.workers} workers, "
          f"{args.consistency})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
