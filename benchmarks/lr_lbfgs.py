"""Full-batch L-BFGS logistic regression against scikit-learn's, in one run: s/iteration,
bytes moved per loss+gradient evaluation, objective.

    python benchmarks/lr_lbfgs.py [--rows 1000000] [--features 22] [--nnz 30] [--quick]
                                  [--iters 10] [--skip-a9a] [--skip-ctr]

* a9a: both to convergence at scikit-learn's default tol=1e-4, for each ``--a9a-C`` (default
  1 and 0.1: the issue's AUC 0.9025 needs C <= 0.1); wall time of the fit, test AUC and the
  objective (scikit-learn's: ``C sum log-loss + |w|^2 / 2``) of each;
* the CTR-like set of :func:`dask_ps.io.make_ctr` (``--rows`` x ``2**features``, ``--nnz``
  per row): at most ``--iters`` L-BFGS iterations each (``max_iter``, tol 1e-4: float32
  traffic), seconds per iteration and the objective reached. A tol below ~1e-6 makes dask_ps
  switch to float64 changes and gradients (twice the bytes).

dask_ps runs on a local cluster of 2 worker processes x 1 thread, the data persisted on the
workers before the clock starts; its bytes per evaluation are the weights and gradients the
evaluation moved (``history_[e]["bytes"]``; the first evaluation also sends each task's keys
once), next to the bound ``2 x distinct features touched x 4 B x workers``. scikit-learn
runs in this process on the same rows (float64 CSR). The machine is shared: the load
average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from _common import add_ctr_arguments, ctr_set, data_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score


def objective(X, y, coef, intercept, C):
    """scikit-learn's L2 logistic objective (``C sum log-loss + |w|^2 / 2``); ``coef`` dense,
    or sparse (dask_ps's "lbfgs" model of 2**20 columns or more)."""
    coef = coef.toarray() if sp.issparse(coef) else coef
    z = X @ np.ravel(coef) + float(np.ravel(intercept)[0])
    return float(C * np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(np.ravel(coef) ** 2))


def touched_bound(X, n_tasks: int) -> int:
    """``2 x distinct features touched x 4 B`` summed over ``n_tasks`` row blocks of ``X``."""
    total = 0
    for rows in np.array_split(np.arange(X.shape[0]), n_tasks):
        total += np.unique(X[rows].indices).size + 1
    return 2 * 4 * total


def race(name, X, y, Xt, yt, dX, dy, client, max_iter, tol, load, C=1.0):
    from sklearn.linear_model import LogisticRegression as SkLR

    from dask_ps import LogisticRegression

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = time.perf_counter()
        sk = SkLR(C=C, solver="lbfgs", max_iter=max_iter, tol=tol).fit(X, y)
        t = time.perf_counter() - t
        nit = int(np.ravel(sk.n_iter_)[0])
        rows.append(("scikit-learn lbfgs", t, nit, None,
                     objective(X, y, sk.coef_, sk.intercept_, C),
                     roc_auc_score(yt, sk.decision_function(Xt))))
        t = time.perf_counter()
        ours = LogisticRegression(solver="lbfgs", C=C, max_iter=max_iter, tol=tol,
                                  client=client).fit(dX, dy)
        t = time.perf_counter() - t
        nit = int(np.ravel(ours.n_iter_)[0])
        per_eval = [h["bytes"] for h in ours.history_]
        evals = len(ours.history_)
        cpu = float(np.median([h["kernel_cpu_time"] for h in ours.history_]))
        gaps = np.diff([0.0] + [h["time"] for h in ours.history_])
        rows.append(("dask_ps lbfgs (2x1)", t, nit, (per_eval[0], np.median(per_eval[1:])),
                     objective(X, y, ours.coef_, ours.intercept_, C),
                     roc_auc_score(yt, ours.decision_function(Xt))))
    print(f"dask_ps: {evals} evaluations; per evaluation median {np.median(gaps[1:]):.4f} s "
          f"wall, of which {cpu:.4f} s CPU in the slowest task (kernel and change); "
          f"{gaps[0]:.2f} s from the solver's start to the end of the first evaluation "
          f"(evaluators, blocks, keys)")
    bound = touched_bound(X, 2)
    literal = 2 * 4 * 2 * (np.unique(X.indices).size + 1)
    print(f"\n{name} (load average {load():.1f}); bytes bound 2 x touched x 4 B x workers = "
          f"{literal / 1e6:.4f} MB (touched: distinct features of all rows); per task, "
          f"halves of the rows: {bound / 1e6:.4f} MB")
    print(f"{'contender':22s} {'wall s':>8s} {'iters':>6s} {'s/iter':>8s} "
          f"{'MB/eval (1st, median)':>22s} {'objective':>16s} {'test AUC':>9s}")
    for who, wall, nit, nb, obj, auc in rows:
        mb = "" if nb is None else f"{nb[0] / 1e6:.4f}, {nb[1] / 1e6:.4f}"
        print(f"{who:22s} {wall:8.2f} {nit:6d} {wall / max(nit, 1):8.3f} {mb:>22s} "
              f"{obj:16.6f} {auc:9.4f}")
    (_, w_sk, n_sk, _, f_sk, _), (_, w_ps, n_ps, _, f_ps, _) = rows
    print(f"ratio dask_ps / scikit-learn: s/iter {(w_ps / n_ps) / (w_sk / n_sk):.2f}, "
          f"objective {f_ps / f_sk - 1:+.2e} relative")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ctr_arguments(p)
    p.add_argument("--iters", type=int, default=10, help="L-BFGS iterations on the CTR set")
    p.add_argument("--a9a-C", type=lambda v: [float(c) for c in v.split(",")],
                   default=[1.0, 0.1], help="C values of the a9a races, comma-separated "
                   "(test AUC 0.9025 needs C <= 0.1: scikit-learn reaches 0.9022 at C=1)")
    p.add_argument("--skip-a9a", action="store_true")
    p.add_argument("--skip-ctr", action="store_true")
    args = p.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster, wait
    from sklearn.datasets import load_svmlight_file

    from dask_ps import LogisticRegression

    def load():
        return os.getloadavg()[0]

    if not args.skip_a9a:  # one line, before the cluster starts, when a9a is not there
        a9a = [data_file("lr_a9a", name) for name in ("a9a", "a9a.t")]

    print(f"load average at start: {os.getloadavg()}")
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        # a tiny fit first: the workers load the numba caches before the clock
        Xw = sp.random(400, 20, density=0.2, format="csr", random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            LogisticRegression(solver="lbfgs", max_iter=2, client=client).fit(
                Xw, np.arange(400) % 2)
        if not args.skip_a9a:
            X, y = load_svmlight_file(str(a9a[0]), n_features=123)
            Xt, yt = load_svmlight_file(str(a9a[1]), n_features=123)
            y, yt = (y > 0).astype(np.float64), (yt > 0).astype(np.float64)
            chunk = -(-X.shape[0] // 2)
            dX, dy = client.persist([da.from_array(X, chunks=(chunk, 123), asarray=False),
                                     da.from_array(y, chunks=(chunk,))])
            wait([dX, dy])
            for C in args.a9a_C:
                race(f"a9a, C={C:g}, to convergence (tol 1e-4)", X, y, Xt, yt, dX, dy,
                     client, 1000, 1e-4, load, C)
            del dX, dy
        if not args.skip_ctr:
            dX, dy, Xt, yt = ctr_set(client, args)
            X, y = sp.csr_matrix(dX.compute(), dtype=np.float64), dy.compute()
            race(f"CTR-like, {args.iters} iterations", X, y, Xt, yt, dX, dy, client,
                 args.iters, 1e-4, load)
    print(f"\nload average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
