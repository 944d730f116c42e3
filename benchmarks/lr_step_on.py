"""Where should the update rule run? ``LogisticRegression(step_on="worker")`` (local steps,
averaged deltas) against ``step_on="server"`` (minibatch gradients, the rule on the shards),
for FTRL and AdaGrad, on a9a and a generated CTR set, in one run.

    python benchmarks/lr_step_on.py [--rows 1000000] [--epochs 5] [--quick]

Each design trains ``--epochs`` epochs with ``eval_set`` = the test set, on a local cluster of
2 worker processes x 1 thread; per epoch it records the test AUC, the training time (the
epoch's job, evaluation excluded) and the bytes pulled and pushed. The table gives the time
to the target AUC (the best AUC any design reached, minus 0.001), the AUC after the last
epoch and the bytes per epoch.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from _common import add_ctr_arguments, ctr_set, data_file

DESIGNS = [("ftrl", "worker", {}), ("ftrl", "server", {}),
           ("adagrad", "worker", {}), ("adagrad", "server", {})]


def run(name, X, y, Xt, yt, client, epochs, server_batch):
    from dask_ps import LogisticRegression

    rows = []
    for solver, where, kw in DESIGNS:
        batch = server_batch if where == "server" else None
        model = LogisticRegression(solver=solver, step_on=where, batch_size=batch,
                                   max_iter=epochs, n_iter_no_change=epochs, random_state=0,
                                   client=client, checkpoint=None, **kw)
        model.fit(X, y, eval_set=[(Xt, yt)])
        hist = [h for h in model.history_ if "eval_auc" in h]
        rows.append(dict(solver=solver, where=where, aucs=[h["eval_auc"] for h in hist],
                         times=np.cumsum([h["epoch_time"] for h in hist]).tolist(),
                         bytes=float(np.mean([h["bytes"] for h in hist]))))
        print(f"  {name} {solver:8s} step_on={where:6s}: AUC per epoch "
              f"{[round(a, 4) for a in rows[-1]['aucs']]}, s {np.round(rows[-1]['times'], 2)}"
              f", {rows[-1]['bytes'] / 1e6:.2f} MB/epoch", flush=True)
    target = max(max(r["aucs"]) for r in rows) - 0.001
    print(f"\n{name}: target AUC {target:.4f} (best reached - 0.001); load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  {'solver':8s} {'step_on':8s} {'time to target':>15s} {'epochs':>6s} "
          f"{'final AUC':>9s} {'MB/epoch':>9s}")
    for r in rows:
        hit = next((i for i, a in enumerate(r["aucs"]) if a >= target), None)
        when = "not reached" if hit is None else f"{r['times'][hit]:.2f} s"
        print(f"  {r['solver']:8s} {r['where']:8s} {when:>15s} "
              f"{'-' if hit is None else hit + 1:>6} {r['aucs'][-1]:9.4f} "
              f"{r['bytes'] / 1e6:9.2f}")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ctr_arguments(p)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--server-batch", type=int, default=256)
    p.add_argument("--skip-a9a", action="store_true")
    p.add_argument("--skip-ctr", action="store_true")
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster
    from sklearn.datasets import load_svmlight_file

    if not args.skip_a9a:  # one line, before the cluster starts, when a9a is not there
        a9a = [data_file("lr_a9a", name) for name in ("a9a", "a9a.t")]
    print(f"load average at start: {os.getloadavg()}")
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        if not args.skip_a9a:
            X, y = load_svmlight_file(str(a9a[0]), n_features=123)
            Xt, yt = load_svmlight_file(str(a9a[1]), n_features=123)
            run("a9a", X, y, Xt, yt, client, args.epochs, args.server_batch)
        if not args.skip_ctr:
            dX, dy, Xt, yt = ctr_set(client, args, np.float32)
            run("ctr", dX, dy, Xt, yt, client, args.epochs, args.server_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
