#!/usr/bin/env python
"""Factorization machine against logistic regression on the same click log, in one run.

A click log with a header is generated (:class:`dask_ps.io.PlantedCTR`: Zipf categorical
columns, count columns, missing values, labels from planted pairwise interactions) as CSV
files, read back with ``read_ctr(..., label="click")`` (columns inferred from the header),
and both models are trained on a LocalCluster from the same dask arrays:

* ``LogisticRegression(solver="ftrl")`` — what the interactions are invisible to;
* ``FactorizationMachineClassifier`` — FTRL linear part, AdaGrad factors;
* xLearn's FM (``xlearn.create_fm``, C. Ma et al.; the widely used FM/FFM library), when
  ``--xlearn-python`` names the Python of a separate environment where ``pip install
  xlearn`` built it (its 2018 source builds here; the library needs ``$USER`` set). It
  reads the same hashed rows written as LIBSVM text (not timed), runs in a subprocess with
  its defaults (AdaGrad, lr 0.2, lambda 2e-5, instance-wise normalisation) but ``k``,
  ``--epochs`` and one thread per worker of ours; its fit seconds include its own reading
  of the text, also shown apart;
* a numba reference: Rendle's model (S. Rendle, "Factorization Machines", ICDM 2010)
  trained by libFM's SGD (S. Rendle, "Factorization Machines with libFM", ACM TIST 3(3),
  2012, section 4.1): one thread, a seeded shuffle per epoch, per sample the margin in
  O(k nnz) by the sum trick ``0.5 sum_f ((sum_i v_if x_i)^2 - sum_i v_if^2 x_i^2)``,
  logistic loss, plain SGD with L2 on the parameters a sample touches (none on ``w0``);
  step 0.005, L2 1e-5 (weights) and 1e-3 (factors), init ``N(0, 0.01^2)``, chosen on a
  validation chunk (not the test rows) of the 200,000-row log. Its rows are collected to
  this process first (not timed); its fit seconds exclude compilation.

Reported per model: test log-loss and AUC, the loss of every epoch, wall seconds of the fit;
and the planted model's own test log-loss and AUC (the best any model can do), with the
1-minute load average before and after.

    python benchmarks/fm_vs_lr.py                          # 200,000 rows, 20 columns
    python benchmarks/fm_vs_lr.py --rows 1000000 --epochs 3
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import njit


# The reference's kernels are not cached (cache=True): a script run as __main__ cannot
# reload a cached kernel that calls another.
@njit
def _reference_fm_margin(indptr, indices, data, r, w, v, s):
    """The FM margin of row ``r`` in O(k nnz) (Rendle 2010, lemma 3.1); ``s`` (k,) gets
    ``sum_i v_if x_i``, which the gradient reuses."""
    z = w[-1]
    s[:] = 0.0
    sq = 0.0
    for p in range(indptr[r], indptr[r + 1]):
        i, x = indices[p], data[p]
        z += w[i] * x
        for f in range(v.shape[1]):
            t = v[i, f] * x
            s[f] += t
            sq += t * t
    return z + 0.5 * (np.dot(s, s) - sq)


@njit
def _reference_fm_epoch(indptr, indices, data, y, order, w, v, lr, reg_w, reg_v):
    """One epoch of libFM's SGD on the logistic loss (Rendle 2012, eq. 16 and section 4.1):
    ``w[-1]`` is ``w0``; ``v`` (n_features, k). Updates in place, returns the mean log-loss
    of the samples before their step."""
    k = v.shape[1]
    s = np.zeros(k)
    loss = 0.0
    for r in order:
        z = _reference_fm_margin(indptr, indices, data, r, w, v, s)
        if z >= 0:
            e = np.exp(-z)
            prob = 1.0 / (1.0 + e)
            loss += np.log1p(e) + (1.0 - y[r]) * z
        else:
            e = np.exp(z)
            prob = e / (1.0 + e)
            loss += np.log1p(e) - y[r] * z
        g = prob - y[r]
        w[-1] -= lr * g
        for p in range(indptr[r], indptr[r + 1]):
            i, x = indices[p], data[p]
            w[i] -= lr * (g * x + reg_w * w[i])
            for f in range(k):
                v[i, f] -= lr * (g * x * (s[f] - v[i, f] * x) + reg_v * v[i, f])
    return loss / max(len(order), 1)


@njit
def _reference_fm_margins(indptr, indices, data, w, v):
    out = np.empty(len(indptr) - 1)
    s = np.zeros(v.shape[1])
    for r in range(len(out)):
        out[r] = _reference_fm_margin(indptr, indices, data, r, w, v, s)
    return out


class ReferenceFM:
    """Rendle's FM by libFM's SGD (see the module docstring); ``fit(X, y)`` of a CSR matrix."""

    def __init__(self, k=8, max_iter=3, learning_rate=0.005, reg_w=1e-5, reg_v=1e-3,
                 init_std=0.01, random_state=0):
        self.k, self.max_iter, self.learning_rate = k, max_iter, learning_rate
        self.reg_w, self.reg_v, self.init_std = reg_w, reg_v, init_std
        self.random_state = random_state

    def fit(self, X, y):
        rng = np.random.default_rng(self.random_state)
        X = X.tocsr()
        n, d = X.shape
        self.w_ = np.zeros(d + 1)
        self.v_ = rng.normal(0.0, self.init_std, (d, self.k))
        y = np.asarray(y, dtype=np.float64)
        data = X.data.astype(np.float64)
        self.history_ = []
        for _ in range(self.max_iter):
            t0 = time.perf_counter()
            loss = _reference_fm_epoch(X.indptr, X.indices, data, y, rng.permutation(n),
                                       self.w_, self.v_, self.learning_rate, self.reg_w,
                                       self.reg_v)
            self.history_.append({"loss": loss, "epoch_time": time.perf_counter() - t0})
        return self

    def predict_proba(self, X):
        X = X.tocsr()
        z = _reference_fm_margins(X.indptr, X.indices, X.data.astype(np.float64), self.w_,
                                  self.v_)
        p = 1 / (1 + np.exp(-z))
        return np.column_stack([1 - p, p])


_XLEARN = """
import sys, time
import xlearn as xl
train, test, out, k, epochs, threads = sys.argv[1:]
fm = xl.create_fm()
fm.setTrain(train)
t0 = time.perf_counter()
fm.fit({"task": "binary", "k": int(k), "epoch": int(epochs), "nthread": int(threads),
        "metric": "none"}, out + ".model")
print("FIT_SECONDS", time.perf_counter() - t0, flush=True)
fm.setTest(test)
fm.setSigmoid()
fm.predict(out + ".model", out)
"""


def xlearn_fm(python, tmp, X, y, Xt, k, epochs, threads):
    """Probabilities of xLearn's FM on ``Xt`` after training on ``(X, y)`` in a subprocess
    of ``python``, with its fit seconds and its seconds of reading the training text."""
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(X, y, f"{tmp}/xl_train.txt")
    dump_svmlight_file(Xt, np.zeros(Xt.shape[0]), f"{tmp}/xl_test.txt")
    run = subprocess.run([python, "-c", _XLEARN, f"{tmp}/xl_train.txt", f"{tmp}/xl_test.txt",
                          f"{tmp}/xl_out.txt", str(k), str(epochs), str(threads)],
                         capture_output=True, text=True,
                         env={**os.environ, "USER": os.environ.get("USER") or "bench"})
    if run.returncode:
        raise RuntimeError(f"xLearn failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    fit_s = float(re.search(r"FIT_SECONDS (\S+)", run.stdout).group(1))
    read_s = float(re.search(r"reading problem: (\S+)", run.stdout).group(1))
    return np.loadtxt(f"{tmp}/xl_out.txt"), fit_s, read_s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000, help="training rows")
    p.add_argument("--categorical", type=int, default=20)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--n-components", "--k", dest="k", type=int, default=8,
                   help="FM factors (n_components; --k: its old name)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ref-lr", type=float, default=0.005, help="numba reference's SGD step")
    p.add_argument("--xlearn-python", help="a Python with xlearn installed: add xLearn's FM")
    p.add_argument("--xlearn-epochs", type=int, help="xLearn's epochs (default --epochs)")
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
        reference = ReferenceFM(k=args.k, max_iter=args.epochs, learning_rate=args.ref_lr)
        ReferenceFM(k=2, max_iter=1).fit(Xt[:10], yt[:10]).predict_proba(Xt[:10])  # compile
        for warm in (LogisticRegression(max_iter=1, random_state=0),
                     FactorizationMachineClassifier(n_components=args.k, max_iter=1,
                                                    random_state=0)):
            warm.fit(X, y)  # the workers' first use of each (imports, kernels): not timed
        for est in (LogisticRegression(max_iter=args.epochs, random_state=0),
                    FactorizationMachineClassifier(n_components=args.k, max_iter=args.epochs,
                                                   random_state=0),
                    reference):
            if est is reference:  # one process: the rows come here first (not timed)
                Xl, yl = dask.compute(X, y)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            est.fit(*((Xl, yl) if est is reference else (X, y)))
            fit_s = time.perf_counter() - t0
            proba = est.predict_proba(Xt)[:, 1]
            name = ("reference FM, libFM SGD 1 thread" if est is reference else
                    type(est).__name__)
            if est is reference or hasattr(est, "n_components"):
                name += f"(k={args.k})"
            print(f"  {name:34s} {log_loss(yt, proba):9.4f} {roc_auc_score(yt, proba):7.4f} "
                  f"{fit_s:7.1f}  {[round(h['loss'], 4) for h in est.history_]}  load "
                  f"{load:.1f}; s per epoch {[round(h['epoch_time'], 1) for h in est.history_]}")
        if args.xlearn_python:
            load, epochs = os.getloadavg()[0], args.xlearn_epochs or args.epochs
            proba, fit_s, read_s = xlearn_fm(args.xlearn_python, tmp, Xl, yl, Xt, args.k,
                                             epochs, args.workers)
            name = f"xLearn FM, {args.workers} thr, {epochs} ep(k={args.k})"
            print(f"  {name:34s} {log_loss(yt, proba):9.4f} {roc_auc_score(yt, proba):7.4f} "
                  f"{fit_s:7.1f}  ({read_s:.1f} s of it reading its text)  load {load:.1f}")
    print(f"1-min load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
