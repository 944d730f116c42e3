#!/usr/bin/env python
"""Online learning on a drifting click stream against refits on the recent window.

A stream of mini-batches is drawn from one planted click model (:class:`dask_ps.io.
PlantedCTR`, seed A), then from another (seed B: other weights, other values) — an abrupt
drift half-way. :func:`dask_ps.learn_online` trains one model on the whole stream, scoring
each batch before training on it (progressive validation). For each of the last ``--score``
batches, a model is refit from scratch (same estimator, ``--refit-epochs`` epochs) on the
``--window`` batches before it and scores that batch. Reported: the mean log-loss of both
on those batches and their ratio (the issue's goal: online within 2 % of the refit), with
the 1-minute load average. In-process (no cluster): the comparison is of models, not speed.

A model version is saved every ``--version-every`` batches (``learn_online(...,
version_every=, versions=)``) into a temporary folder, and a reader thread — a stand-in
for a serving process — loads each new version with :func:`dask_ps.saving.load_estimator`
while the stream is still being trained on, and scores a fixed probe batch with it. The
script checks that some versions were loaded before training ended and that every loaded
version predicts what the trainer's model predicted when it saved that version (exit
status 1 otherwise), and reports how many.

    python benchmarks/online_drift.py                 # LR, 40 batches of 5,000 rows
    python benchmarks/online_drift.py --model fm
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import threading
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["lr", "fm"], default="lr")
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--rows", type=int, default=5000, help="rows per batch")
    p.add_argument("--window", type=int, default=5, help="batches a refit sees")
    p.add_argument("--score", type=int, default=5, help="last batches compared")
    p.add_argument("--refit-epochs", type=int, default=3)
    p.add_argument("--version-every", type=int, default=4, help="batches between versions")
    args = p.parse_args(argv)

    from sklearn.metrics import log_loss

    from dask_ps import FactorizationMachineClassifier, LogisticRegression, learn_online
    from dask_ps.io import HashingEncoder, PlantedCTR
    from dask_ps.saving import load_estimator

    def make(epochs=None):
        kw = dict(client="local", random_state=0, checkpoint=None, max_iter=epochs)
        return (LogisticRegression(**kw) if args.model == "lr"
                else FactorizationMachineClassifier(n_components=4, **kw))

    designs = [PlantedCTR(n_categorical=10, n_numeric=2, max_cardinality=1000, seed=s)
               for s in (1, 2)]
    enc = HashingEncoder(numeric=tuple(designs[0].numeric_columns),
                         categorical=tuple(designs[0].categorical_columns), n_features=2**18)
    batches = []
    for b in range(args.batches):
        t = designs[b >= args.batches // 2].chunk(b, args.rows)
        batches.append((enc.transform(t), t["click"].to_numpy()))
    probe = enc.transform(designs[1].chunk(10**6, 2000))  # rows no batch has
    saved, loaded, at, training = {}, {}, {}, threading.Event()
    done = [0]  # batches trained so far

    def on_batch(record):  # the trainer's own probe predictions at each version
        done[0] = record["batch"]
        if "version" in record:
            saved[record["version"]] = online_est.predict_proba(probe)[:, 1]

    def reader(folder):  # a serving process: load each new version while training goes on
        while training.is_set():
            for path in sorted(glob.glob(f"{folder}/version-*.npz")):
                if path not in loaded:
                    at[path] = done[0]
                    est, _ = load_estimator(path)
                    loaded[path] = est.predict_proba(probe)[:, 1]
            time.sleep(0.05)

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        online_est = make()
        training.set()
        thread = threading.Thread(target=reader, args=(folder,), daemon=True)
        thread.start()
        online = learn_online(online_est, batches, classes=[0, 1],
                              version_every=args.version_every, versions=folder,
                              on_batch=on_batch)
        training.clear()
        thread.join()
    during = [v for v in loaded if at[v] < args.batches]  # while batches remained to train
    diffs = [float(np.max(np.abs(loaded[v] - saved[v]))) for v in loaded]
    ok = len(during) > 0 and len(loaded) == len(diffs) and max(diffs, default=np.inf) < 1e-9
    last = range(args.batches - args.score, args.batches)
    pv = [online.history_[b]["progressive_log_loss"] for b in last]
    refit = []
    for b in last:
        import scipy.sparse as sp

        X = sp.vstack([x for x, _ in batches[b - args.window:b]]).tocsr()
        y = np.concatenate([y for _, y in batches[b - args.window:b]])
        est = make(args.refit_epochs).fit(X, y)
        refit.append(log_loss(batches[b][1], est.predict_proba(batches[b][0]), labels=[0, 1]))
    print(f"{args.model}: {args.batches} batches x {args.rows:,} rows, drift at batch "
          f"{args.batches // 2 + 1}; last {args.score} batches: online progressive log-loss "
          f"{np.mean(pv):.4f}, refit on the {args.window} batches before each "
          f"({args.refit_epochs} epochs) {np.mean(refit):.4f}, ratio "
          f"{np.mean(pv) / np.mean(refit):.3f}; 1-min load {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    print(f"versions: {len(saved)} saved (every {args.version_every} batches); "
          f"{len(loaded)} loaded by a reader thread, {len(during)} of them while batches "
          f"remained to train (the last after batch {max([at[v] for v in during], default=0)}"
          f" of {args.batches}); largest |p(loaded) - p(trainer at save)| on "
          f"{probe.shape[0]:,} probe rows {max(diffs, default=float('nan')):.2e}: "
          f"{'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
