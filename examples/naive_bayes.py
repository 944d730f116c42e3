"""Multinomial naive Bayes in the PSModel API: per-class feature counts summed on the shards.

    python examples/naive_bayes.py

Reuters money-fx (TF-IDF rows, 8,315 features) from ``$DASK_PS_DATA/lr_reuters_moneyfx``.
One pass: every partition pushes its rows' per-class feature sums into the table "counts"
(n_features, n_classes) and its class counts into "priors"; the totals per class are summed
next to the shards (``map_shards``), so only k numbers per shard travel. The model equals
scikit-learn's ``MultinomialNB(alpha=1)``.
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

import dask_ps


def count(ps, part, classes):
    """Push this partition's per-class feature sums and class counts (one clock)."""
    X, y = part.load()
    Y = (np.asarray(y)[:, None] == classes).astype(float)  # (n, k) one-hot
    sums = np.asarray(X.T @ Y)  # (n_features, k)
    cols = np.flatnonzero(np.abs(sums).sum(axis=1))  # only the features this partition has
    ps.push("counts", cols, sums[cols])
    ps.push("priors", np.arange(len(classes)), Y.sum(axis=0))
    ps.clock()


def fit(data, n_features, classes, alpha=1.0):
    """Log priors (k,) and log feature probabilities (k, n_features)."""
    with dask_ps.PSModel(None if data.is_local else data.client) as model:
        model.add_table("counts", (n_features, len(classes)), "float64")
        model.add_table("priors", (len(classes),), "float64")
        model.fit_partitions(lambda ps, part: count(ps, part, classes), data)
        totals = sum(model.map_shards("counts", lambda keys, values, slots: values.sum(0)))
        counts, priors = model.pull("counts"), model.pull("priors")
    log_prob = np.log(counts + alpha) - np.log(totals + alpha * n_features)
    return np.log(priors / priors.sum()), log_prob.T


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    folder = Path(os.environ.get("DASK_PS_DATA", Path(__file__).resolve().parents[1].parent
                                 / "shared" / "data")) / "lr_reuters_moneyfx"
    if not (folder / "reuters.trn.bz2").is_file() or not (folder / "reuters.tst.bz2").is_file():
        sys.exit(f"Reuters money-fx not found under {folder}; point DASK_PS_DATA at the folder "
                 f"holding lr_reuters_moneyfx/")

    from distributed import Client, LocalCluster
    from sklearn.datasets import load_svmlight_file
    from sklearn.naive_bayes import MultinomialNB

    X, y = load_svmlight_file(str(folder / "reuters.trn.bz2"))
    Xt, yt = load_svmlight_file(str(folder / "reuters.tst.bz2"), n_features=X.shape[1])
    classes = np.unique(y)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster):
        with dask_ps.partition((X, y)) as data:
            log_prior, log_prob = fit(data, X.shape[1], classes)
    predicted = classes[np.argmax(Xt @ log_prob.T + log_prior, axis=1)]
    ref = MultinomialNB(alpha=1.0).fit(X, y)
    same = np.mean(predicted == ref.predict(Xt))
    print(f"test accuracy: dask_ps {np.mean(predicted == yt):.4f}, scikit-learn "
          f"{ref.score(Xt, yt):.4f}; same prediction on {same:.2%} of the rows; largest "
          f"difference of log-probabilities {np.abs(log_prob - ref.feature_log_prob_).max():.2e}")


if __name__ == "__main__":
    main()
