#!/usr/bin/env python
"""Factorization machine against logistic regression on the same click log, in one run.

A click log with a header is generated (:class:`dask_ps.io.PlantedCTR`: Zipf categorical
columns, count columns, missing values, labels from planted pairwise interactions) as CSV
files, read back with ``read_ctr(..., label="click")`` (columns inferred from the header),
and both models are trained on a LocalCluster from the same dask arrays:

* ``LogisticRegression(solver="ftrl")`` — what the interactions are invisible to;
* ``FactorizationMachineClassifier`` — FTRL linear part, AdaGrad factors.

Reported per model: test log-loss and AUC, the loss of every epoch, wall seconds of the fit;
and the planted model's own test log-loss and AUC (the best any model can do), with the
1-minute load average before and after.

    python benchmarks/fm_vs_lr.py                          # 200,000 rows, 20 columns
    python benchmarks/fm_vs_lr.py --rows 1000000 --epochs 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000, help="training rows")
    p.add_argument("--categorical", type=int, default=20)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--k", type=int, default=8, help="FM factors")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import dask
    from distributed import Client, LocalCluster
    from sklearn.metrics import log_loss, roc_auc_score

    from dask_ps import FactorizationMachineClassifier, LogisticRegression
    from dask_ps.io import PlantedCTR, read_ctr, write_ctr_table

    planted = PlantedCTR(n_categorical=args.categorical, n_numeric=4, max_cardinality=10_000,
                         seed=args.seed)
    n_test = max(10_000, args.rows // 5)
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=args.workers, threads_per_worker=1,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        write_ctr_table(f"{tmp}/train", args.rows, planted, chunk_rows=50_000)
        test = planted.chunk(10**6, n_test)  # a chunk index no training file uses
        X, y = read_ctr(f"{tmp}/train/*.csv", label="click", n_features=2**22)
        X, y = client.persist([X, y])
        print(f"click log: {args.rows:,} training rows, {args.categorical} Zipf categorical "
              f"columns + 4 counts, {len(planted.pairs)} planted pairs; {n_test:,} test rows; "
              f"{args.workers} workers x 1 thread")
        with open(f"{tmp}/test.csv", "wb") as f:
            f.write(planted.csv_chunk(10**6, n_test))
        Xt, yt = dask.compute(*read_ctr(f"{tmp}/test.csv", label="click", n_features=2**22))
        yt = np.asarray(yt)
        z = planted.logit(test)
        best = 1 / (1 + np.exp(-z))
        print(f"  {'model':34s} {'log-loss':>9} {'AUC':>7} {'fit s':>7}  loss per epoch")
        print(f"  {'planted model (the bound)':34s} {log_loss(yt, best):9.4f} "
              f"{roc_auc_score(yt, best):7.4f} {'':>7}")
        for est in (LogisticRegression(max_iter=args.epochs, random_state=0),
                    FactorizationMachineClassifier(k=args.k, max_iter=args.epochs,
                                                   random_state=0)):
            t0 = time.perf_counter()
            est.fit(X, y)
            fit_s = time.perf_counter() - t0
            proba = est.predict_proba(Xt)[:, 1]
            name = type(est).__name__ + (f"(k={args.k})" if hasattr(est, "factors_") else "")
            print(f"  {name:34s} {log_loss(yt, proba):9.4f} {roc_auc_score(yt, proba):7.4f} "
                  f"{fit_s:7.1f}  {[round(h['loss'], 4) for h in est.history_]}")
    print(f"1-min load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
