"""Compile dask_ps's numba kernels into their on-disk caches, so a user's first fit does not.

    python -m dask_ps._warm [-q]

Every kernel is ``numba.njit(cache=True)``: compiled once per signature, it is saved next to
its source (``__pycache__/*.nbi`` index, ``*.nbc`` code) and later processes, the Dask
workers included, load it in milliseconds instead of compiling it for seconds. The cache is
keyed by the source file's path and modification time, so a fresh clone (or a changed file)
starts cold; ``make`` runs this module right after installing, and then the first fit is as
quick as the second.

What is warmed is what the estimators really call, with the dtypes they really see: tiny
fits, in this process (``client="local"``), of :class:`~dask_ps.LogisticRegression` (every
solver, binary and multi-class, ``step_on`` worker and server, L1 and L2, float32 and float64
input, with an ``eval_set``) and :class:`~dask_ps.MatrixFactorization` (both solvers), after
reading a small libsvm file with :func:`dask_ps.io.read_libsvm` and a small click table
with :func:`dask_ps.io.read_ctr`; :class:`~dask_ps.FactorizationMachineClassifier` (dense
and keyed), :class:`~dask_ps.LatentDirichletAllocation` (dense and sparse word-topic rows),
:class:`~dask_ps.GBDTClassifier` and :class:`~dask_ps.GBDTRegressor` (binary, multi-class,
regression; float64, float32 and sparse input, with missing values); a hashed table's pull
plan of unsorted keys (its dedup left until the keys have left); and ``dask-ps train
lr`` (what ``make run`` runs) on the small libsvm file with a two-worker local cluster.
Warming twice is harmless: the second run loads every kernel from the cache and takes a few
seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp

__all__ = ["warm"]


def _libsvm(tmp: str) -> None:
    from .io import read_libsvm

    path = os.path.join(tmp, "tiny.libsvm")
    with open(path, "w") as f:
        for i in range(40):
            f.write(f"{1 if i % 2 else -1} {1 + i % 7}:1 {8 + i % 5}:0.5 {13 + i % 3}:1\n")
    X, y = read_libsvm(path)
    X.compute(), y.compute()
    # Base and width given: the first pass only counts rows (a comment line takes the count's
    # line-by-line walk too).
    known = os.path.join(tmp, "known.libsvm")
    with open(known, "w") as f:
        f.write("# a comment\n1 1:1 3:0.5\n")
    X, y = read_libsvm(known, n_features=8, zero_based=False)
    X.compute(), y.compute()


def _ctr(tmp: str) -> None:
    from .io import make_ctr, read_ctr

    X, y = make_ctr(200, n_features=2**10, nnz=5, chunk_rows=100, random_state=0)
    X.compute(), y.compute()
    path = os.path.join(tmp, "tiny.csv")  # Criteo's layout, read_ctr's default encoder
    names = ["Label"] + [f"I{i}" for i in range(1, 14)] + [f"C{i}" for i in range(1, 27)]
    with open(path, "w") as f:
        f.write(",".join(names) + "\n")
        for i in range(40):
            ints = [str((i * j) % 17) if (i + j) % 5 else "" for j in range(13)]
            cats = [f"{(i * 31 + j) % 97:08x}" if (i + j) % 4 else "" for j in range(26)]
            f.write(",".join([str(i % 2)] + ints + cats) + "\n")
    X, y = read_ctr(path)
    X.compute(), y.compute()
    # a table as GBDT reads it, CRLF lines and a quoted field: the checks of its lines
    from .io._frame import read_frame

    crlf = os.path.join(tmp, "tiny_crlf.csv")
    with open(crlf, "wb") as f:
        f.write(b"y,a,b\r\n" + b"".join(b'%d,"x%d",%d\r\n' % (i % 2, i % 3, i)
                                        for i in range(20)))
    read_frame(crlf, "y", categorical=["a"])[0].compute()


def _command_line(tmp: str) -> None:
    """``make run``'s own path (``dask-ps train lr`` on a local cluster, whose worker processes
    compile into the same caches): the reader's dtypes, checkpoints, the test scoring. Two
    workers, as ``make run`` has: a task then pushes to the other worker's shard and the
    shards sum the pushes of two tasks (kernels a one-worker cluster never calls: a fresh
    clone's first ``make run`` compiled them for ~4 s in its first pass)."""
    import contextlib
    import io

    from .cli import main

    path = os.path.join(tmp, "tiny.libsvm")
    for solver in ("ftrl", "lbfgs"):
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(["train", "lr", "--train", path, "--test", path, "--workers", "2",
                           "--solver", solver, "--max-iter", "2",
                           "--checkpoint", os.path.join(tmp, f"ck-{solver}")])
        if status != 0:
            raise RuntimeError(f"dask-ps train lr --solver {solver} failed ({status})")


def _lr(X, y, Xe, ye) -> None:
    from . import LogisticRegression

    fits = [dict(solver="ftrl"), dict(solver="ftrl", penalty="l1"), dict(solver="adagrad"),
            dict(solver="sgd"), dict(solver="ftrl", step_on="server"),
            dict(solver="adagrad", step_on="server"), dict(solver="sgd", step_on="server"),
            dict(solver="lbfgs"), dict(solver="lbfgs", penalty="l1")]
    for kw in fits:
        LogisticRegression(client="local", max_iter=2, random_state=0, **kw).fit(
            X, y, eval_set=[(Xe, ye)]).predict_proba(Xe)


def _mf() -> None:
    from . import MatrixFactorization

    rng = np.random.default_rng(0)
    n = 300
    X = np.column_stack([rng.integers(0, 30, n), rng.integers(0, 20, n),
                         rng.integers(1, 6, n)]).astype(np.float64)
    # ALS (and SGD's layout) read float32 ratings when they are exact (stars), float64
    # otherwise (+ 0.1)
    for solver, offset in (("sgd", 0.0), ("sgd", 0.1), ("als", 0.0), ("als", 0.1)):
        MatrixFactorization(solver=solver, n_components=4, max_iter=2, random_state=0,
                            client="local").fit(X + [0, 0, offset]).predict(X[:10, :2])


def _fm(X, y) -> None:
    from . import FactorizationMachineClassifier

    for width in (None, 2**20):  # dense, and keyed (sparse coef_ and factors_)
        fm = FactorizationMachineClassifier(n_components=2, max_iter=2, random_state=0,
                                            client="local", n_hashed_features=width)
        fm.fit(X, y).predict_proba(X[:10])


def _lda() -> None:
    from . import LatentDirichletAllocation

    rng = np.random.default_rng(0)
    counts = sp.csr_matrix(rng.poisson(0.3, (60, 40)).astype(np.float64))
    for k in (3, 40):  # dense and sparse word-topic rows
        lda = LatentDirichletAllocation(n_components=k, max_iter=3, random_state=0,
                                        client="local").fit(counts)
        lda.transform(counts[:5]), lda.perplexity(counts[:5])


def _gbdt(X, y2, y3) -> None:
    from . import GBDTClassifier, GBDTRegressor

    dense = X.toarray()
    dense[::7, 3] = np.nan  # missing values take their own path
    for data in (dense, dense.astype(np.float32), X):
        for model, target in ((GBDTClassifier, y2), (GBDTClassifier, y3),
                              (GBDTRegressor, y2 + 0.5)):
            model(n_estimators=2, max_leaf_nodes=4, min_samples_leaf=2, random_state=0,
                  client="local").fit(data, target).predict(data[:10])


def _hashed_pulls() -> None:
    """A pull's plan of unsorted keys of a hashed table, whose dedup waits for the keys to
    leave (the estimators pull sorted keys, which skip it): without and with late repeats."""
    from .state.partition import HashPartitioner
    from .state.process_job import _Spread

    part = HashPartitioner(2)
    keys = np.random.default_rng(0).permutation(np.arange(20_000, dtype=np.int64) * 7919)
    late = part.plan(keys)[0].local[-1:]
    for ks in (keys, np.concatenate([keys, late])):
        part.complete(part.plan(ks, defer_inverse=True, defer_dedup=True)[0], ks)
    plan = part.plan(keys, defer_inverse=True, defer_dedup=True)[0]
    for dtype in (np.float32, np.float64):  # a pull's values put in order as they arrive
        _Spread(plan, 1, dtype).put(slice(0, keys.shape[0]), np.zeros((keys.shape[0], 1), dtype))


def warm(verbose: bool = True) -> float:
    """Run the tiny fits that compile (or load) every kernel a fit uses; returns seconds.

    Parameters
    ----------
    verbose : bool, default True
        Print what is being warmed and how long it took, to stderr.

    Returns
    -------
    float
        Wall seconds taken.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    X = sp.random(200, 50, density=0.1, format="csr", random_state=0, dtype=np.float64)
    y2 = rng.integers(0, 2, 200)
    y3 = rng.integers(0, 3, 200)
    steps = [("libsvm reader", lambda tmp: _libsvm(tmp)),
             ("click-table reader", lambda tmp: _ctr(tmp)),
             ("dask-ps train lr (a local cluster)", _command_line),
             ("logistic regression, float64 input", lambda tmp: (
                 _lr(X, y2, X[:50], y2[:50]), _lr(X, y3, X[:50], y3[:50]))),
             ("logistic regression, float32 input", lambda tmp: _lr(
                 X.astype(np.float32), y2, X[:50].astype(np.float32), y2[:50])),
             ("matrix factorization", lambda tmp: _mf()),
             ("factorization machine", lambda tmp: _fm(X, y2)),
             ("hashed tables' pulls of unsorted keys", lambda tmp: _hashed_pulls()),
             ("latent Dirichlet allocation", lambda tmp: _lda()),
             ("gradient-boosted trees", lambda tmp: _gbdt(X, y2, y3))]
    with tempfile.TemporaryDirectory(prefix="dask-ps-warm-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny fits stop early and say so: not news here
        for what, fn in steps:
            t = time.perf_counter()
            fn(tmp)
            if verbose:
                print(f"dask_ps._warm: {what}: {time.perf_counter() - t:.1f} s",
                      file=sys.stderr)
    took = time.perf_counter() - t0
    if verbose:
        print(f"dask_ps._warm: numba caches warm in {took:.1f} s", file=sys.stderr)
    return took


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dask_ps._warm", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    args = p.parse_args(argv)
    warm(verbose=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
