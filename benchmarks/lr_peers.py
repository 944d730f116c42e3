"""Logistic regression against its peers, in one run: time, test AUC and non-zeros per second.

    python benchmarks/lr_peers.py [--rows 1000000] [--features 22] [--quick]

Contenders, on a9a and on a generated CTR-like set (power-law feature frequencies, a planted
logistic model, ``--nnz`` non-zeros per row over ``2**features`` hashed features):

* dask_ps ``LogisticRegression`` (FTRL) on a local cluster of 2 worker processes;
* scikit-learn ``SGDClassifier(loss="log_loss")``, single process;
* dask-ml ``LogisticRegression`` (admm) on the same cluster, if dask-ml is installed;
* a single-process numba SGD epoch over the CSR rows: the bound.

Figures are ratios measured in this run; the machine is noisy, so read them as sizes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score


def ctr_like(n_rows: int, n_features: int, nnz: int, seed: int = 0):
    """Binary rows with Zipf-distributed hashed features and labels from a planted model."""
    rng = np.random.default_rng(seed)
    ranks = rng.zipf(1.2, size=n_rows * nnz) % n_features
    scramble = rng.permutation(n_features)  # frequent features anywhere in the index space
    indices = scramble[ranks].astype(np.int32)
    indptr = np.arange(0, n_rows * nnz + 1, nnz, dtype=np.int32)
    X = sp.csr_matrix((np.ones(n_rows * nnz), indices, indptr), shape=(n_rows, n_features))
    X.sum_duplicates()
    w = rng.normal(0, 0.3, n_features)
    p = 1 / (1 + np.exp(-(X @ w - 1.0)))
    return _int32(X), (rng.random(n_rows) < p).astype(np.int64)


def _int32(X: sp.csr_matrix) -> sp.csr_matrix:
    """CSR with int32 index arrays, which SGDClassifier requires."""
    X = X.tocsr()
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


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


def numba_bound(X, y, Xt, yt):
    w = np.zeros(X.shape[1] + 1)
    _sgd_epoch(X.indptr[:2], X.indices, X.data, y.astype(float), w.copy(), 0.05)  # compile
    t0 = time.perf_counter()
    _sgd_epoch(X.indptr, X.indices, X.data, y.astype(float), w, 0.05)
    wall = time.perf_counter() - t0
    return wall, roc_auc_score(yt, Xt @ w[:-1] + w[-1])


def run_all(name, X, y, Xt, yt, client, epochs, with_dask_ml):
    import dask.array as da
    from sklearn.linear_model import SGDClassifier

    from dask_ps import LogisticRegression

    rows = []
    nnz = X.nnz

    def record(who, wall, auc, passes):
        rows.append((name, who, wall, auc, nnz * passes / wall))
        rate = nnz * passes / wall / 1e6
        print(f"  {who:28s} {wall:8.2f} s  AUC {auc:.4f}  {rate:8.1f} M nnz/s", flush=True)

    wall, auc = numba_bound(X, y, Xt, yt)
    record("numba SGD, 1 epoch (bound)", wall, auc, 1)

    t0 = time.perf_counter()
    sgd = SGDClassifier(loss="log_loss", max_iter=epochs, tol=None, random_state=0).fit(X, y)
    record(f"sklearn SGD, {epochs} epochs", time.perf_counter() - t0,
           roc_auc_score(yt, sgd.decision_function(Xt)), epochs)

    chunk = -(-X.shape[0] // 4)
    dX = da.from_array(X, chunks=(chunk, X.shape[1]), asarray=False)
    dy = da.from_array(y, chunks=(chunk,))
    dX, dy = client.persist([dX, dy])
    # per-sample FTRL (McMahan et al.'s setting); one epoch, then as many as the peers
    for n_epochs in sorted({1, epochs}):
        t0 = time.perf_counter()
        ours = LogisticRegression(solver="ftrl", max_iter=n_epochs, batch_size=1,
                                  learning_rate=0.1, random_state=0, client=client).fit(dX, dy)
        record(f"dask_ps FTRL, {n_epochs} epochs", time.perf_counter() - t0,
               roc_auc_score(yt, ours.decision_function(Xt)), n_epochs)

    if with_dask_ml:
        try:
            from dask_ml.linear_model import LogisticRegression as DaskMLLogisticRegression
        except ImportError:
            print("  dask-ml not installed (pip install dask-ml): skipped")
        else:
            import sparse

            # dask-glm takes pydata sparse chunks, not scipy ones
            cX = client.persist(dX.map_blocks(sparse.COO.from_scipy_sparse, dtype=dX.dtype))
            t0 = time.perf_counter()
            try:
                # its intercept column cannot be appended to sparse chunks: fitted without
                # (its standardisation densifies the chunks, so large sets run out of memory)
                dml = DaskMLLogisticRegression(solver="admm", max_iter=epochs,
                                               fit_intercept=False).fit(cX, dy)
            except Exception as exc:  # report a peer's failure, keep measuring the others
                print(f"  dask-ml admm failed: {type(exc).__name__}: {exc}")
            else:
                wall = time.perf_counter() - t0
                auc = roc_auc_score(yt, Xt @ dml.coef_.ravel())
                record(f"dask-ml admm, {epochs} iters, no icpt", wall, auc, epochs)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=22, help="log2 of the feature count")
    p.add_argument("--nnz", type=int, default=30)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="200,000 generated rows")
    p.add_argument("--no-dask-ml", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 200_000

    from distributed import Client, LocalCluster
    from sklearn.datasets import load_svmlight_file

    data = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    X, y = load_svmlight_file(str(data / "lr_a9a" / "a9a"), n_features=123)
    Xt, yt = load_svmlight_file(str(data / "lr_a9a" / "a9a.t"), n_features=123)
    y, yt = (y > 0).astype(np.int64), (yt > 0).astype(np.int64)
    Gx, Gy = ctr_like(args.rows + args.rows // 5, 2 ** args.features, args.nnz)
    n = args.rows

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        print(f"a9a: {X.shape[0]:,} rows, {X.nnz:,} non-zeros")
        rows = run_all("a9a", _int32(X), y, _int32(Xt), yt, client, args.epochs,
                       not args.no_dask_ml)
        print(f"CTR-like: {n:,} rows x 2^{args.features} features, {Gx[:n].nnz:,} non-zeros")
        rows += run_all("ctr", Gx[:n], Gy[:n], Gx[n:], Gy[n:], client, args.epochs,
                        not args.no_dask_ml)

    print("\nratios (wall time, same run):")
    for name in ("a9a", "ctr"):
        by = {who.split(",")[0]: wall for n_, who, wall, _, _ in rows if n_ == name}
        ours = by["dask_ps FTRL"]
        line = f"  {name}: dask_ps / sklearn SGD = {ours / by['sklearn SGD']:.2f}"
        if "dask-ml admm" in by:
            line += f", dask-ml / dask_ps = {by['dask-ml admm'] / ours:.2f}"
        line += f", dask_ps / numba bound (per epoch) = {ours / args.epochs / by['numba SGD']:.1f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
