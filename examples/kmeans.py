"""Mini-batch k-means (Sculley, WWW 2010) in the PSModel API, on a local Dask cluster.

    python examples/kmeans.py [--k 8] [--epochs 5] [--rows 200000]

About a minute with the defaults on 2 busy cores (73 s measured, with scikit-learn's fit);
``--rows 60000 --epochs 3`` is the tests' quick run.

The table "stats" holds, per center, the sum of the points assigned to it so far and their
count, so a pull gives the centers (sum / count), and every step adds its minibatch's sums:
with plain add on the shards, BSP merges the workers' minibatches exactly.
"""

import argparse

import numpy as np

import dask_ps


def step(ps, part, k, batch):
    """One epoch over a partition: a clock per minibatch, where the partition lives."""
    X = part.load()
    rng = np.random.default_rng([part.epoch, part.index])
    for rows in np.array_split(rng.permutation(X.shape[0]), max(1, X.shape[0] // batch)):
        stats = ps.pull("stats")                        # (k, d + 1): sums, then count
        centers = stats[:, :-1] / stats[:, -1:]
        x = X[rows]
        label = ((x[:, None, :] - centers[None]) ** 2).sum(axis=2).argmin(axis=1)
        delta = np.zeros_like(stats)
        np.add.at(delta[:, :-1], label, x)
        delta[:, -1] = np.bincount(label, minlength=k)
        ps.push("stats", np.arange(k), delta)
        ps.clock()


def fit(data, init, epochs, batch=1024, seed=0):
    """Centers (k, d) of the partitions ``data`` (a :class:`dask_ps.Partitions`) from
    ``init`` (k, d)."""
    k = init.shape[0]
    with dask_ps.PSModel(None if data.is_local else data.client) as model:
        model.add_table("stats", (k, init.shape[1] + 1), "float64")
        model.push("stats", np.arange(k), np.column_stack([init, np.ones(k)]))
        model.fit_partitions(lambda ps, part: step(ps, part, k, batch), data, epochs=epochs,
                             seed=seed)
        stats = model.pull("stats")
    return stats[:, :-1] / stats[:, -1:]


def inertia(X, centers):
    return float(((X[:, None, :] - centers[None]) ** 2).sum(axis=2).min(axis=1).sum())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--rows", type=int, default=200_000)
    args = p.parse_args(argv)
    from distributed import Client, LocalCluster
    from sklearn.cluster import MiniBatchKMeans, kmeans_plusplus
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(args.rows, n_features=10, centers=args.k, cluster_std=2.0,
                      random_state=0)
    init, _ = kmeans_plusplus(X[::20], args.k, random_state=0)  # one start for both
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster):
        with dask_ps.partition(X) as data:
            centers = fit(data, init, args.epochs)
            print(f"partitions moved during the fit: {data.report()['incoming_transfers']}")
    ref = MiniBatchKMeans(args.k, init=init, n_init=1, batch_size=1024, random_state=0,
                          max_iter=args.epochs).fit(X)
    ours, theirs = inertia(X, centers), inertia(X, ref.cluster_centers_)
    print(f"inertia: dask_ps {ours:.6g}, scikit-learn MiniBatchKMeans {theirs:.6g} "
          f"(ratio {ours / theirs:.4f})")


if __name__ == "__main__":
    main()
