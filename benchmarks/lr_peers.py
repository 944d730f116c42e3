"""Logistic regression against its peers, in one run: time to the same test AUC, non-zeros/s.

    python benchmarks/lr_peers.py [--rows 1000000] [--features 22] [--nnz 30] [--epochs 5]
                                  [--dask-ml-iter 10] [--quick] [--no-dask-ml]

Contenders, on a9a and on a CTR-like set from :func:`dask_ps.io.make_ctr` (power-law feature
frequencies, a planted logistic model, ``--nnz`` features drawn per row over
``2**features`` hashed features; the last ``rows // 5`` generated rows are the test set):

* scikit-learn ``SGDClassifier(loss="log_loss")``, ``--epochs`` epochs, single process: its
  test AUC is the **target** the others race to;
* dask_ps ``LogisticRegression`` (FTRL, per-sample steps) on a local cluster of 2 worker
  processes x 1 thread, input chunks persisted on the workers (generated there) before the
  clock starts; fits with ``max_iter`` = 1, 2, ... until one reaches the target. A fit runs
  whole epochs (an epoch is one job over the partitions): fractions of an epoch are not
  measured;
* dask-ml ``LogisticRegression(solver="lbfgs")`` on the same cluster, chunks as
  ``sparse.COO`` (pydata sparse; dask-glm computes ``X @ beta`` and ``X.T @ r`` on them
  without densifying). dask-glm's default standardisation (``normalize``) densifies the
  chunks and rejects the many all-zero hashed columns, and dask-ml's own intercept column
  cannot be appended to sparse chunks, so it runs with ``normalize=False`` and the intercept
  as a constant column of ones (penalised like the other weights). Each ``--dask-ml-iter``
  value is a separate fit; the list stops at the first that reaches the target;
* a single-process numba SGD kernel over the CSR rows in order, constant step ``--bound-lr``
  (default 0.005, dask_ps's default "sgd" step; 0.05 stayed below the target on both sets):
  the bound, epoch after epoch until the target (its time is the sum of the epochs).

Input conversion (CSR to COO for dask-ml, float64 for scikit-learn) is done before the clock
starts. Throughput is non-zeros x passes / wall time (dask-ml: one pass per L-BFGS
iteration, a lower bound: line searches evaluate more). Ratios are measured in this run; the
machine is shared, so the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np
import scipy.sparse as sp
from _common import add_ctr_arguments, ctr_set, data_file, peer
from sklearn.metrics import roc_auc_score


@numba.njit(cache=True)
def _sgd_epoch(indptr, indices, data, y, w, lr):
    for i in range(indptr.shape[0] - 1):
        z = w[-1]
        for p in range(indptr[i], indptr[i + 1]):
            z += data[p] * w[indices[p]]
        g = 1.0 / (1.0 + np.exp(-z)) - y[i]
        for p in range(indptr[i], indptr[i + 1]):
            w[indices[p]] -= lr * g * data[p]
        w[-1] -= lr * g


def _csr(X) -> sp.csr_matrix:
    """float64 CSR with int32 index arrays (scikit-learn's SGD needs int32)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


def _load():
    return os.getloadavg()[0]


class Results:
    """Rows of (dataset, contender, wall, AUC, passes, reached) and their printout."""

    def __init__(self, name: str, nnz: int):
        self.name, self.nnz, self.rows = name, nnz, []

    def add(self, who: str, wall: float, auc: float, passes: float, target: float | None):
        reached = target is not None and auc >= target
        self.rows.append(dict(who=who, wall=wall, auc=auc, passes=passes, reached=reached))
        rate = self.nnz * passes / wall / 1e6
        mark = "" if target is None else ("  reaches target" if reached else "  below target")
        print(f"  {who:34s} {wall:8.2f} s  AUC {auc:.4f}  {rate:7.1f} M nnz/s  "
              f"load {_load():4.1f}{mark}", flush=True)
        return reached

    def first_reaching(self, prefix: str):
        hit = [r for r in self.rows if r["who"].startswith(prefix) and r["reached"]]
        return hit[0] if hit else None

    def last(self, prefix: str):
        hit = [r for r in self.rows if r["who"].startswith(prefix)]
        return hit[-1] if hit else None


def run_all(name, X, y, Xt, yt, dX, dy, client, args, warm):
    """Every contender on one data set; ``X`` in memory (CSR), ``dX`` persisted on the cluster."""
    from sklearn.linear_model import SGDClassifier

    from dask_ps import LogisticRegression

    res = Results(name, X.nnz)

    # scikit-learn's SGD: the target
    SGDClassifier(loss="log_loss", max_iter=1, tol=None).fit(X[:100], y[:100])  # warm
    t0 = time.perf_counter()
    sgd = SGDClassifier(loss="log_loss", max_iter=args.epochs, tol=None,
                        random_state=0).fit(X, y)
    wall = time.perf_counter() - t0
    target = roc_auc_score(yt, sgd.decision_function(Xt))
    res.add(f"sklearn SGD, {args.epochs} epochs", wall, target, args.epochs, None)
    print(f"  target AUC (SGDClassifier's): {target:.4f}")

    # the bound: epochs of a bare numba kernel until the target
    w = np.zeros(X.shape[1] + 1)
    yf = y.astype(np.float64)
    _sgd_epoch(X.indptr[:2], X.indices, X.data, yf, w.copy(), args.bound_lr)  # compile
    total = 0.0
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        _sgd_epoch(X.indptr, X.indices, X.data, yf, w, args.bound_lr)
        total += time.perf_counter() - t0
        if res.add(f"numba SGD bound, {epoch} epoch(s)", total,
                   roc_auc_score(yt, Xt @ w[:-1] + w[-1]), epoch, target):
            break

    # dask_ps: whole epochs, 1, 2, ... until the target
    warm()
    for epochs in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        ours = LogisticRegression(solver="ftrl", max_iter=epochs, random_state=0,
                                  client=client).fit(dX, dy)
        wall = time.perf_counter() - t0
        if res.add(f"dask_ps FTRL, {epochs} epoch(s)", wall,
                   roc_auc_score(yt, ours.decision_function(Xt)), epochs, target):
            break

    if not args.no_dask_ml:
        _dask_ml(res, dX, dy, Xt, yt, client, args, target)
    return res


def _dask_ml(res, dX, dy, Xt, yt, client, args, target):
    import sparse
    from dask_ml.linear_model import LogisticRegression as DaskMLLogisticRegression
    from distributed import wait

    def coo_with_ones(block):
        ones = np.ones((block.shape[0], 1), block.dtype)
        return sparse.COO.from_scipy_sparse(sp.hstack([block, ones], format="csr"))

    cX = dX.map_blocks(coo_with_ones, dtype=dX.dtype,
                       chunks=(dX.chunks[0], (dX.shape[1] + 1,)),
                       meta=sparse.COO.from_numpy(np.zeros((0, 0), dX.dtype)))
    cX = client.persist(cX)
    wait(cX)
    for n_iter in args.dask_ml_iter:
        t0 = time.perf_counter()
        try:
            dml = DaskMLLogisticRegression(solver="lbfgs", max_iter=n_iter, fit_intercept=False,
                                           solver_kwargs={"normalize": False}).fit(cX, dy)
        except Exception as exc:  # report a peer's failure, keep measuring the others
            print(f"  dask-ml lbfgs failed: {type(exc).__name__}: {exc}")
            return
        wall = time.perf_counter() - t0
        coef = np.asarray(dml.coef_).ravel()
        if res.add(f"dask-ml lbfgs, {n_iter} iterations", wall,
                   roc_auc_score(yt, Xt @ coef[:-1] + coef[-1]), n_iter, target):
            break


def summary(res: Results) -> None:
    sgd = res.last("sklearn SGD")
    ours = res.first_reaching("dask_ps")
    bound = res.first_reaching("numba")
    dml = res.first_reaching("dask-ml") or res.last("dask-ml")
    print(f"  {res.name}: target AUC {sgd['auc']:.4f} (SGDClassifier, {sgd['wall']:.2f} s)")
    if ours is None:
        last = res.last("dask_ps")
        print(f"    dask_ps did not reach it in {last['passes']} epochs "
              f"(AUC {last['auc']:.4f}, {last['wall']:.2f} s)")
        ours = last
    else:
        print(f"    dask_ps time to target / SGDClassifier time = "
              f"{ours['wall'] / sgd['wall']:.2f}  ({ours['wall']:.2f} s / {sgd['wall']:.2f} s)")
    if bound is not None:
        print(f"    dask_ps time to target / numba bound time to target = "
              f"{ours['wall'] / bound['wall']:.1f}  (bound {bound['wall']:.2f} s, "
              f"{bound['passes']} epoch(s))")
    else:
        print("    the numba bound did not reach the target")
    if dml is not None:
        kind = "time to target" if dml["reached"] else (
            f"time of {dml['passes']} iterations, AUC {dml['auc']:.4f} < target: "
            f"a lower bound")
        print(f"    dask-ml / dask_ps = {dml['wall'] / ours['wall']:.1f}  (dask-ml {kind})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ctr_arguments(p)
    p.add_argument("--epochs", type=int, default=5, help="SGDClassifier's epochs; the most "
                   "the others get")
    p.add_argument("--dask-ml-iter", type=lambda s: [int(v) for v in s.split(",")],
                   default=[10], help="L-BFGS iterations of dask-ml, comma-separated")
    p.add_argument("--bound-lr", type=float, default=0.005, help="step of the numba bound")
    p.add_argument("--no-dask-ml", action="store_true")
    p.add_argument("--skip-a9a", action="store_true")
    args = p.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster, wait
    from sklearn.datasets import load_svmlight_file

    from dask_ps import LogisticRegression
    from dask_ps.io import make_ctr

    if not args.no_dask_ml and peer("dask_ml", "dask-ml") is None:
        args.no_dask_ml = True
    if not args.skip_a9a:  # one line, before the cluster starts, when a9a is not there
        a9a = [data_file("lr_a9a", name) for name in ("a9a", "a9a.t")]
    print(f"load average at start: {os.getloadavg()}")
    results = []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        def warm():  # a tiny fit: workers load the numba caches before the clock
            Xw, yw = make_ctr(2000, 2**10, 5, chunk_rows=500, dtype=np.float64)
            LogisticRegression(max_iter=1, client=client).fit(Xw, yw)

        if not args.skip_a9a:
            X, y = load_svmlight_file(str(a9a[0]), n_features=123)
            Xt, yt = load_svmlight_file(str(a9a[1]), n_features=123)
            X, Xt, y, yt = _csr(X), _csr(Xt), (y > 0).astype(np.float64), (yt > 0) * 1.0
            chunk = -(-X.shape[0] // 4)
            dX, dy = client.persist([da.from_array(X, chunks=(chunk, X.shape[1]),
                                                   asarray=False),
                                     da.from_array(y, chunks=(chunk,))])
            wait([dX, dy])
            print(f"a9a: {X.shape[0]:,} rows x {X.shape[1]} features, {X.nnz:,} non-zeros")
            results.append(run_all("a9a", X, y, Xt, yt, dX, dy, client, args, warm))
            del dX, dy

        dX, dy, Xt, yt = ctr_set(client, args)
        X, y, Xt = _csr(dX.compute()), dy.compute(), _csr(Xt)
        print(f"  {X.nnz:,} non-zeros, positive rate {y.mean():.3f}")
        results.append(run_all("ctr", X, y, Xt, yt, dX, dy, client, args, warm))

    print(f"\nsummary (same run; load average now {os.getloadavg()}):")
    for res in results:
        summary(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
