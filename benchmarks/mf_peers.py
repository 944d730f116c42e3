"""Matrix factorisation against its peers, in one run: time per epoch and test RMSE.

    python benchmarks/mf_peers.py [--ratings 10000000] [--quick] [--no-spark] [--no-surprise]

Contenders, on MovieLens-100k (u1.base -> u1.test) and on a generated set of ``--ratings``
ratings (a planted rank-10 biased model, Zipf-popular items, integer ratings 1-5, 10 % more
ratings held out for the test):

* dask_ps ``MatrixFactorization`` (SGD, and ALS) on a local cluster of 2 worker processes
  (and SGD on 1 worker, for the 1-vs-2 comparison);
* Surprise ``SVD`` (biased MF by SGD, single process, Cython), if installed;
* Spark MLlib ``ALS`` in local mode (``local[2]``), if pyspark and Java are installed.

Per-epoch times: dask_ps reports the slowest task's wall time of each epoch (``history_``);
for the peers it is the fit time divided by the epochs (their fit includes building their
own data structures). Figures are ratios measured in this run; the machine is shared and
noisy, so read them as sizes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

NAMES = ["user", "item", "rating", "ts"]


def movielens(split: str = "u1") -> tuple[pd.DataFrame, pd.DataFrame]:
    data = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    folder = data / "mf_movielens100k"
    return (pd.read_csv(folder / f"{split}.base", sep="\t", names=NAMES)[NAMES[:3]],
            pd.read_csv(folder / f"{split}.test", sep="\t", names=NAMES)[NAMES[:3]])


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


def run_dask_ps(client, train, test, epochs, **kw) -> tuple[float, float, float]:
    """(seconds per epoch, fit seconds, test RMSE)."""
    from dask_ps import MatrixFactorization

    t0 = time.perf_counter()
    model = MatrixFactorization(client=client, max_iter=epochs, random_state=0, **kw)
    model.fit(train)
    fit = time.perf_counter() - t0
    per_epoch = float(np.median([h["time"] for h in model.history_]))
    return per_epoch, fit, model.evaluate(test)["rmse"]


def run_surprise(train, test, epochs, rank) -> tuple[float, float, float]:
    from surprise import SVD, Dataset, Reader

    t0 = time.perf_counter()
    low, high = float(train.rating.min()), float(train.rating.max())
    trainset = Dataset.load_from_df(train, Reader(rating_scale=(low, high))).build_full_trainset()
    build = time.perf_counter() - t0
    algo = SVD(n_factors=rank, n_epochs=epochs, random_state=0)
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
    p.add_argument("--quick", action="store_true", help="10^6 generated ratings")
    p.add_argument("--epochs", type=int, default=10, help="epochs on the generated set")
    p.add_argument("--rank", type=int, default=32, help="rank on the generated set")
    p.add_argument("--no-spark", action="store_true")
    p.add_argument("--no-surprise", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.ratings = 1_000_000

    from distributed import Client, LocalCluster

    spark = None
    if not args.no_spark:
        try:
            spark = spark_session()
            spark.sparkContext.setLogLevel("ERROR")
        except Exception as exc:  # report a peer's failure, keep measuring the others
            print(f"Spark unavailable: {type(exc).__name__}: {exc}")
    surprise = not args.no_surprise
    if surprise:
        try:
            import surprise as _  # noqa: F401
        except ImportError:
            print("Surprise not installed (pip install scikit-surprise): skipped")
            surprise = False

    rows = []

    def record(data, who, per_epoch, fit, err):
        rows.append((data, who, per_epoch, fit, err))
        print(f"  {who:34s} {per_epoch:7.3f} s/epoch  fit {fit:7.2f} s  RMSE {err:.4f}",
              flush=True)

    ml_train, ml_test = movielens("u1")
    gen_train, gen_test = generated(args.ratings)
    sets = [("ml100k-u1", ml_train, ml_test, None), (f"gen-{args.ratings:.0e}", gen_train,
                                                      gen_test, args.rank)]
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as c2, \
            Client(c2) as client2:
        for name, train, test, rank in sets:
            print(f"{name}: {len(train):,} train / {len(test):,} test ratings, "
                  f"{train.user.nunique():,} users x {train.item.nunique():,} items")
            if rank is None:  # MovieLens: the tuned settings
                sgd = dict(solver="sgd", rank=500)
                als, e_sgd, e_als, s_rank, s_epochs, sp_rank = (dict(solver="als"), 100, 15,
                                                                100, 30, 50)
            else:  # generated: one rank for everyone, per-epoch cost is the point
                sgd = dict(solver="sgd", rank=rank, learning_rate=0.01, decay=0.9,
                           reg=0.02, reg_bias=0.02, init_std=0.1, batch_size=1_000_000)
                als, e_sgd, e_als, s_rank, s_epochs, sp_rank = (
                    dict(solver="als", rank=rank, reg=0.05), args.epochs, 5, rank,
                    args.epochs, rank)
            record(name, f"dask_ps SGD k={sgd['rank']}, 2 workers",
                   *run_dask_ps(client2, train, test, e_sgd, **sgd))
            record(name, f"dask_ps ALS k={als.get('rank', 50)}, 2 workers",
                   *run_dask_ps(client2, train, test, e_als, **als))
            if surprise:
                record(name, f"Surprise SVD k={s_rank}, {s_epochs} ep",
                       *run_surprise(train, test, s_epochs, s_rank))
            if spark is not None:
                record(name, f"Spark ALS k={sp_rank}, local[2]",
                       *run_spark(spark, train, test, e_als if rank else 10, sp_rank, 0.1))
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as c1, \
            Client(c1) as client1:
        name, train, test, rank = sets[1]
        record(name, f"dask_ps SGD k={rank}, 1 worker",
               *run_dask_ps(client1, train, test, args.epochs, solver="sgd", rank=rank,
                            learning_rate=0.01, decay=0.9, reg=0.02, reg_bias=0.02,
                            init_std=0.1, batch_size=1_000_000))
    if spark is not None:
        spark.stop()

    print("\nratios (same run; time per epoch, RMSE difference):")
    for name, *_ in sets:
        by = {who.split(" k=")[0] + (" 1w" if "1 worker" in who else ""): (pe, err)
              for n_, who, pe, _, err in rows if n_ == name}
        ours = by["dask_ps SGD"]
        for peer in ("Surprise SVD", "Spark ALS"):
            if peer in by:
                print(f"  {name}: {peer} / dask_ps SGD per epoch = {by[peer][0] / ours[0]:.2f}; "
                      f"RMSE dask_ps - {peer} = {ours[1] - by[peer][1]:+.4f}")
        if "dask_ps SGD 1w" in by:
            one = by["dask_ps SGD 1w"]
            print(f"  {name}: 1 worker / 2 workers per epoch = {one[0] / ours[0]:.2f}; "
                  f"RMSE 2w - 1w = {ours[1] - one[1]:+.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
