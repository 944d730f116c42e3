"""Matrix factorisation against its peers, in one run: time per epoch, fit time, test RMSE.

    python benchmarks/mf_peers.py [--ratings 10000000] [--users 70000] [--items 10000]
        [--n-components 100] [--epochs 5] [--quick] [--no-spark] [--no-surprise] [--one-worker]

Two sets:

* MovieLens-100k u1 (u1.base -> u1.test): every contender with its defaults; the figure is
  the whole fit's wall time (dask_ps: on a local cluster of 2 worker processes x 1 thread,
  partitioning included; Surprise: building its trainset included).
* a generated set of ``--ratings`` ratings of ``--users`` x ``--items`` (the shape of
  MovieLens-10M; a planted rank-10 biased model, Zipf-popular items, integer ratings 1-5,
  10 % more held out for the test), every SGD contender at the same settings (rank,
  epochs, learning rate, L2 strength, initial spread, no decay): seconds per epoch.

Contenders:

* dask_ps ``MatrixFactorization`` (SGD on the DSGD schedule; ALS on MovieLens only) on 2
  workers x 1 thread (and SGD on 1 worker with ``--one-worker``);
* a single-thread numba reference: dask_ps's own SGD kernel over all the ratings in one
  process, in the same cache-friendly order (by user, users in a random order), with no PS;
* Surprise ``SVD`` (biased MF by SGD, single process, Cython), if installed;
* Spark MLlib ``ALS`` in local mode (``local[2]``), if pyspark and Java are installed.

dask_ps's seconds per epoch are the median over the epochs of ``history_``'s
``epoch_time`` (a job's wall time over its epochs), with the slowest task's seconds in the
kernel and in pulls, pushes and clocks beside them; for the peers, the fit time over the
epochs. Ratios are against the best peer of this run; the machine is shared and noisy (the
script prints ``uptime``'s load), so read them as sizes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd
from _common import data_file, peer

NAMES = ["user", "item", "rating", "ts"]


def movielens(split: str = "u1") -> tuple[pd.DataFrame, pd.DataFrame]:
    return tuple(pd.read_csv(data_file("mf_movielens100k", f"{split}.{part}"), sep="\t",
                             names=NAMES)[NAMES[:3]] for part in ("base", "test"))


def generated(n: int, rank: int = 10, seed: int = 0, users: int | None = None,
              items: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` train and ``n // 10`` test ratings from a planted biased rank-``rank`` model of
    ``users`` x ``items`` (default ``n // 100`` x ``n // 500``)."""
    rng = np.random.default_rng(seed)
    total = n + n // 10
    n_users, n_items = max(10, users or n // 100), max(10, items or n // 500)
    users = rng.integers(0, n_users, total)
    items = (rng.zipf(1.3, total) - 1) % n_items  # popular items anywhere in the id range
    items = rng.permutation(n_items)[items]
    bu, bi = rng.normal(0, 0.4, n_users), rng.normal(0, 0.4, n_items)
    P = rng.normal(0, (0.8 / rank) ** 0.5, (n_users, rank))
    Q = rng.normal(0, (0.8 / rank) ** 0.5, (n_items, rank))
    r = np.empty(total, np.float32)
    step = 1_000_000
    for a in range(0, total, step):  # chunks: the gathers of 10^7 rows would take GBs
        u, i = users[a:a + step], items[a:a + step]
        z = 3.5 + bu[u] + bi[i] + np.einsum("ij,ij->i", P[u], Q[i]) + rng.normal(0, 0.5, u.size)
        r[a:a + step] = np.clip(np.round(z), 1, 5)
    df = pd.DataFrame({"user": users, "item": items, "rating": r})
    return df.iloc[:n].reset_index(drop=True), df.iloc[n:].reset_index(drop=True)


def rmse(pred, truth) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - np.asarray(truth)) ** 2)))


def run_dask_ps(client, train, test, epochs, **kw) -> tuple:
    """(seconds per epoch, fit seconds, test RMSE, and per epoch the slowest task's kernel
    and exchange wall seconds and kernel CPU seconds)."""
    from dask_ps import MatrixFactorization

    t0 = time.perf_counter()
    model = MatrixFactorization(client=client, max_iter=epochs, random_state=0, **kw)
    model.fit(train)
    fit = time.perf_counter() - t0
    h = model.history_
    med = [float(np.median([r.get(k, np.nan) for r in h]))
           for k in ("epoch_time", "kernel_time", "exchange_time", "kernel_cpu_time")]
    return med[0], fit, model.evaluate(test)["rmse"], med[1], med[2], med[3]


def run_numba(train, test, epochs, rank, lr, reg, init_std) -> tuple:
    """One thread, one process: dask_ps's SGD kernel over all ratings per epoch, in its
    order (by user, users in a random order, shuffled within a user), float32."""
    from dask_ps.algorithms._mf_kernels import predict_pairs, sgd_sweep

    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    u, i = train.user.to_numpy(), train.item.to_numpy()
    n_users, n_items = int(u.max()) + 1, int(i.max()) + 1
    order = rng.permutation(u.shape[0])
    order = order[np.argsort(rng.permutation(n_users)[u[order]], kind="stable")]
    users, items = u[order].astype(np.int32), i[order].astype(np.int32)
    ratings = train.rating.to_numpy(np.float32)[order]
    f = np.float32
    P = rng.normal(0, init_std, (n_users, rank)).astype(f)
    Q = np.zeros((n_items, rank + 1), f)
    Q[:, :rank] = rng.normal(0, init_std, (n_items, rank))
    bu = np.zeros(n_users, f)
    mu = f(ratings.mean())
    sgd_sweep(users[:1], items[:1], ratings[:1], P.copy(), bu.copy(), Q.copy(), mu, f(lr),
              f(reg), f(reg))  # compiled or loaded from the cache, outside the timing
    build = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(epochs):
        t, c = time.perf_counter(), time.process_time()
        sgd_sweep(users, items, ratings, P, bu, Q, mu, f(lr), f(reg), f(reg))
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    tu, ti = test.user.to_numpy(), test.item.to_numpy()
    tu = np.where(tu < n_users, tu, -1)
    ti = np.where(ti < n_items, ti, -1)
    out = np.empty(tu.shape[0])
    low, high = float(ratings.min()), float(ratings.max())
    predict_pairs(tu, ti, P.astype(float), bu.astype(float), Q[:, :rank].astype(float),
                  Q[:, rank].astype(float), float(mu), low, high, out)
    return (float(np.median(times)), build + sum(times), rmse(out, test.rating), None, None,
            float(np.median(cpu)))


def run_surprise(train, test, epochs, rank, **kw) -> tuple[float, float, float]:
    from surprise import SVD, Dataset, Reader

    t0 = time.perf_counter()
    low, high = float(train.rating.min()), float(train.rating.max())
    trainset = Dataset.load_from_df(train, Reader(rating_scale=(low, high))).build_full_trainset()
    build = time.perf_counter() - t0
    algo = SVD(n_factors=rank, n_epochs=epochs, random_state=0, **kw)
    t0 = time.perf_counter()
    algo.fit(trainset)
    fit = time.perf_counter() - t0
    # Surprise predicts one pair at a time in Python: its test pass is not timed
    pred = [algo.predict(u, i).est for u, i in zip(test.user.to_numpy(), test.item.to_numpy())]
    return fit / epochs, fit + build, rmse(pred, test.rating)


def spark_session():
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("mf_peers")
            .config("spark.driver.memory", "6g")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false").getOrCreate())


def run_spark(spark, train, test, epochs, rank, reg) -> tuple[float, float, float]:
    from pyspark.ml.recommendation import ALS

    types = {"user": "int32", "item": "int32", "rating": "float32"}
    sdf = spark.createDataFrame(train.astype(types)).cache()
    sdf.count()
    t0 = time.perf_counter()
    model = ALS(rank=rank, maxIter=epochs, regParam=reg, userCol="user", itemCol="item",
                ratingCol="rating", coldStartStrategy="nan", seed=0).fit(sdf)
    fit = time.perf_counter() - t0
    pred = model.transform(spark.createDataFrame(test.astype(types))).toPandas()
    # unseen users/items give NaN in Spark: fall back to the global mean, as our rule does
    est = pred.prediction.fillna(float(train.rating.mean())).clip(train.rating.min(),
                                                                  train.rating.max())
    sdf.unpersist()
    return fit / epochs, fit, rmse(est, pred.rating)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ratings", type=int, default=10_000_000)
    p.add_argument("--users", type=int, default=70_000)
    p.add_argument("--items", type=int, default=10_000)
    p.add_argument("--quick", action="store_true", help="10^6 generated ratings")
    p.add_argument("--epochs", type=int, default=5, help="epochs on the generated set")
    p.add_argument("--n-components", "--rank", dest="rank", type=int, default=100,
                   help="rank on the generated set (--rank: its old name)")
    p.add_argument("--no-spark", action="store_true")
    p.add_argument("--no-surprise", action="store_true")
    p.add_argument("--one-worker", action="store_true", help="also dask_ps SGD on 1 worker")
    args = p.parse_args(argv)
    if args.quick:
        args.ratings = 1_000_000

    from distributed import Client, LocalCluster

    use_spark = not args.no_spark and peer("pyspark") is not None
    surprise = not args.no_surprise and peer("surprise", "Surprise") is not None
    ml_train, ml_test = movielens("u1")  # one line, before anything runs, when not there
    spark = None
    if use_spark:
        try:
            spark = spark_session()
            spark.sparkContext.setLogLevel("ERROR")
        except Exception as exc:  # report a peer's failure, keep measuring the others
            print(f"Spark unavailable: {type(exc).__name__}: {exc}")
    print(f"load before: {os.getloadavg()}")

    rows = []

    def record(data, who, per_epoch, fit, err, kernel=None, exchange=None, cpu=None):
        rows.append((data, who, per_epoch, fit, err, cpu))
        more = "" if kernel is None else f"  (kernel {kernel:.3f} s, exchange {exchange:.3f} s)"
        more += "" if cpu is None else f"  kernel CPU {cpu:.3f} s/epoch"
        print(f"  {who:40s} {per_epoch:7.3f} s/epoch  fit {fit:7.3f} s  RMSE {err:.4f}{more}",
              flush=True)

    gen_train, gen_test = generated(args.ratings, users=args.users, items=args.items)
    gen = f"gen-{args.ratings:.0e}"
    k, e = args.rank, args.epochs
    # one setting for every SGD contender on the generated set (Surprise's defaults for the
    # step, the L2 strength and the initial spread; no decay: Surprise has none)
    same = dict(learning_rate=0.005, reg=0.02, init_std=0.1)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as c2, \
            Client(c2) as client2:
        # a tiny fit first: the workers load the numba caches outside the timings
        run_dask_ps(client2, ml_train.iloc[:2000], ml_test.iloc[:200], 1, n_components=4)
        print(f"ml100k-u1: {len(ml_train):,} train / {len(ml_test):,} test ratings; defaults")
        record("ml100k-u1", "dask_ps SGD defaults, 2 workers",
               *run_dask_ps(client2, ml_train, ml_test, None, solver="sgd"))
        record("ml100k-u1", "dask_ps ALS defaults, 2 workers",
               *run_dask_ps(client2, ml_train, ml_test, None, solver="als")[:3])
        if surprise:
            record("ml100k-u1", "Surprise SVD defaults (k=100, 20 ep)",
                   *run_surprise(ml_train, ml_test, 20, 100))
        if spark is not None:
            record("ml100k-u1", "Spark ALS k=50, local[2]",
                   *run_spark(spark, ml_train, ml_test, 10, 50, 0.1))
        print(f"{gen}: {len(gen_train):,} train / {len(gen_test):,} test ratings, "
              f"{gen_train.user.nunique():,} users x {gen_train.item.nunique():,} items; "
              f"k={k}, {e} epochs, {same}")
        record(gen, f"dask_ps SGD k={k}, 2 workers",
               *run_dask_ps(client2, gen_train, gen_test, e, solver="sgd", n_components=k,
                            decay=1.0, reg_bias=same["reg"], **same))
    record(gen, f"numba SGD k={k}, 1 thread",
           *run_numba(gen_train, gen_test, e, k, same["learning_rate"], same["reg"],
                      same["init_std"]))
    if surprise:
        record(gen, f"Surprise SVD k={k}",
               *run_surprise(gen_train, gen_test, e, k, lr_all=same["learning_rate"],
                             reg_all=same["reg"], init_std_dev=same["init_std"]))
    if spark is not None:
        record(gen, f"Spark ALS k={k}, local[2]",
               *run_spark(spark, gen_train, gen_test, e, k, 0.1))
        spark.stop()
    if args.one_worker:
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as c1, \
                Client(c1) as client1:
            record(gen, f"dask_ps SGD k={k}, 1 worker",
                   *run_dask_ps(client1, gen_train, gen_test, e, solver="sgd", n_components=k,
                                decay=1.0, reg_bias=same["reg"], **same)[:3])
    print(f"load after: {os.getloadavg()}")

    print("\nratios dask_ps SGD (2 workers) / best peer, this run:")
    for name, col, what in (("ml100k-u1", 3, "fit seconds"), (gen, 2, "seconds per epoch")):
        mine = [r for r in rows if r[0] == name and r[1].startswith("dask_ps SGD")][0]
        peers = [r for r in rows if r[0] == name and not r[1].startswith("dask_ps")]
        if not peers:
            continue
        best = min(peers, key=lambda r: r[col])
        surp = [r for r in peers if r[1].startswith("Surprise")]
        line = (f"  {name}: {what} {mine[col]:.3f} / {best[col]:.3f} ({best[1]}) = "
                f"{mine[col] / best[col]:.2f}; test RMSE {mine[4]:.4f}")
        if surp:
            line += f" (Surprise {surp[0][4]:.4f}, difference {mine[4] - surp[0][4]:+.4f})"
        print(line)
    cpu = {r[1].split(" k=")[0]: r[5] for r in rows if r[0] == gen and r[5] is not None}
    if len(cpu) == 2:  # independent of the other processes on the machine
        print(f"  {gen}: kernel CPU seconds per epoch, slowest dask_ps task / one thread = "
              f"{cpu['dask_ps SGD']:.3f} / {cpu['numba SGD']:.3f} = "
              f"{cpu['dask_ps SGD'] / cpu['numba SGD']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
