"""Logistic regression on a9a with each solver, on a local Dask cluster.

    python examples/lr_a9a.py [--solver ftrl|sgd|adagrad|lbfgs ...]

About a minute for the four solvers on 2 cores (64 s measured, 143 s on a busier machine);
the first fit's time includes the cluster's first tasks (data persisted, shards placed).

Data: ``$DASK_PS_DATA/lr_a9a/{a9a,a9a.t}`` (default ``../shared/data`` beside the repo).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", nargs="+", default=["ftrl", "sgd", "adagrad", "lbfgs"])
    args = parser.parse_args(argv)
    root = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    if not all((root / "lr_a9a" / name).is_file() for name in ("a9a", "a9a.t")):
        sys.exit(f"a9a not found under {root}/lr_a9a; point DASK_PS_DATA at the folder holding "
                 f"lr_a9a/ (see `dask-ps train lr --dataset a9a`)")

    import dask
    from distributed import Client, LocalCluster
    from sklearn.metrics import roc_auc_score

    from dask_ps import LogisticRegression
    from dask_ps.io import read_libsvm

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        X, y = read_libsvm(str(root / "lr_a9a" / "a9a"), n_features=123, blocksize="1MiB")
        Xt, yt = read_libsvm(str(root / "lr_a9a" / "a9a.t"), n_features=123)
        X, y = client.persist([X, y])
        for solver in args.solver:
            t0 = time.perf_counter()
            model = LogisticRegression(solver=solver, max_iter=500 if solver == "lbfgs" else 5,
                                       random_state=0).fit(X, y)
            wall = time.perf_counter() - t0
            proba, labels = dask.compute(model.predict_proba(Xt), yt)
            print(f"{solver:8s} test AUC {roc_auc_score(labels > 0, proba[:, 1]):.4f}  "
                  f"fit {wall:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
