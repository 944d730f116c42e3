#!/usr/bin/env python
"""FTRL logistic regression on random 63-bit feature keys: a model of 2·10^8 keys on one box.

    python benchmarks/lr_wide.py --keys 200000000            # the issue's run (~16 GiB free)
    python benchmarks/lr_wide.py --quick                     # a try: 2*10^6 keys

Generates a CTR-like set on the workers of a LocalCluster (2 worker processes x 1 thread), one
partition per task, never through the driver: each row has ``--head-nnz`` keys drawn with a
power-law skew from ``--head-keys`` random 63-bit keys that carry planted weights (the label is
drawn from their logistic model) and ``--tail-nnz`` uniform random keys in [0, 2**63 - 1) that
carry no signal (each seen about once: the long tail that makes CTR models wide). Enough rows
are generated that about ``--keys`` distinct keys are touched. Then fits FTRL
(:func:`dask_ps.algorithms.logistic.train`, step_on="worker", float32 hashed table) for
``--epochs`` epochs with the weights left on the shards (``collect=False``: a 2·10^8-key model
need not pass through the driver), and reports, measured in this run:

* distinct keys in the table and the table's bytes per key (shards' own accounting: keys,
  rows and hash index);
* peak memory per worker process (the scheduler's view, sampled every ``--sample-s`` s) and
  the driver's peak RSS;
* seconds per epoch (the training loop's own clock) and generation time;
* test AUC of ``--test-rows`` fresh rows, scored from the weights their keys pull from the
  shards;
* zarr checkpoint save time (both shards write in parallel) and load time onto 2 shards,
  the loaded table's key count and the same test AUC from the loaded model.

Run it on a quiet machine; on a shared one read the numbers as sizes (``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

N_FEATURES = 2**63 - 1  # the widest scipy CSR: keys in [0, 2**63 - 1)


def planted(seed: int, head_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """The head: ``head_keys`` random 63-bit keys and their planted weights."""
    rng = np.random.default_rng([seed, 2**32])
    return rng.integers(0, N_FEATURES, head_keys), rng.normal(0.0, 1.0, head_keys)


def make_part(index: int, rows: int, head_nnz: int, tail_nnz: int, seed: int,
              head_keys: int, with_margin: bool = False):
    """``(X, y)`` of one partition: CSR (rows, 2**63 - 1) of float32 ones, sorted keys; int8
    labels drawn from the head keys' logistic model (and its margins, float64 (rows,),
    ``with_margin``)."""
    import scipy.sparse as sp

    keys, weights = planted(seed, head_keys)
    rng = np.random.default_rng([seed, index])
    h = (head_keys * rng.random((rows, head_nnz)) ** 3).astype(np.int64)  # skewed
    z = weights[h].sum(axis=1) / np.sqrt(head_nnz) - 1.0
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-z))).astype(np.int8)
    cols = np.concatenate([keys[h], rng.integers(0, N_FEATURES, (rows, tail_nnz))], axis=1)
    cols.sort(axis=1)
    nnz = head_nnz + tail_nnz
    X = sp.csr_matrix((np.ones(rows * nnz, np.float32), cols.ravel(),
                       np.arange(0, rows * nnz + 1, nnz)), shape=(rows, N_FEATURES))
    X.sum_duplicates()  # a row may draw a head key twice
    return (X, y, z) if with_margin else (X, y)


def _nnz(part) -> int:
    return int(part[0].nnz)


def test_auc(model, rule, Xt, yt) -> float:
    """ROC AUC of test rows, from the weights of the keys they touch, pulled from table "w"."""
    from sklearn.metrics import roc_auc_score

    from dask_ps.algorithms._logistic_data import KeyedWeights, margins

    keys = np.append(np.unique(Xt.indices), N_FEATURES)  # the intercept's key last
    W = rule.weights(np.asarray(model.pull("w", keys), np.float64)[:, :-1])
    z = margins(Xt, KeyedWeights(keys, W), W[-1])[:, 0]
    return float(roc_auc_score(yt, z))


def table_size(model) -> tuple[int, int, list]:
    """Rows and bytes of table "w" over the shards, and the bytes per shard."""
    per = [s["tables"]["w"] for s in model.stats()]
    return sum(p["rows"] for p in per), sum(p["nbytes"] for p in per), [p["nbytes"] for p in per]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--keys", type=float, default=None,
                   help="distinct keys to touch (about); default 2*10^7 (--quick: 2*10^6)")
    p.add_argument("--head-keys", type=int, default=100_000)
    p.add_argument("--head-nnz", type=int, default=4)
    p.add_argument("--tail-nnz", type=int, default=28)
    p.add_argument("--rows-per-part", type=int, default=200_000)
    p.add_argument("--test-rows", type=int, default=None, help="default 200,000 (--quick: 50,000)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="11GiB", help="per worker process")
    p.add_argument("--sample-s", type=float, default=0.5)
    p.add_argument("--dir", default=None, help="checkpoint folder (default: a temp dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="defaults for a try: 2*10^6 keys, 50,000 test rows, small partitions")
    p.add_argument("--json", default=None, help="also write the summary here")
    args = p.parse_args(argv)
    args.keys = args.keys or (2e6 if args.quick else 2e7)
    args.test_rows = args.test_rows or (50_000 if args.quick else 200_000)
    if args.quick:
        args.rows_per_part = min(args.rows_per_part, 40_000)
    per_worker = max(1, round(args.keys / args.tail_nnz / args.rows_per_part / args.workers))
    n_parts = per_worker * args.workers  # as many partitions on every worker
    rows = n_parts * args.rows_per_part

    import dask
    from distributed import Client, LocalCluster, wait
    from lr_scale import PeakMemory
    from sklearn.metrics import roc_auc_score

    import dask_ps
    from dask_ps.algorithms import _logistic_data as D
    from dask_ps.algorithms._stochastic import Rule
    from dask_ps.algorithms.logistic import SOLVERS, train
    from dask_ps.partitions import partition

    def load() -> str:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    summary = dict(args=vars(args), rows=rows, partitions=n_parts, uptime_start=load())
    print(f"{rows:,} rows in {n_parts} partitions, {args.head_nnz} head + {args.tail_nnz} tail "
          f"keys per row; load: {summary['uptime_start']}", flush=True)
    memory = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
              "distributed.worker.memory.pause": False,
              "distributed.worker.memory.terminate": 0.98}
    tmp = tempfile.TemporaryDirectory(prefix="lr_wide_") if args.dir is None else None
    root = Path(args.dir or tmp.name)
    try:
        with dask.config.set(memory), LocalCluster(
                n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit,
                dashboard_address=":0", worker_dashboard_address=None,
                local_directory=str(root / "_dask")) as cluster, Client(cluster) as client, \
                PeakMemory(client, args.sample_s) as mem:
            workers = sorted(client.scheduler_info()["workers"])
            t0 = time.perf_counter()
            futs = [client.submit(make_part, i, args.rows_per_part, args.head_nnz,
                                  args.tail_nnz, args.seed, args.head_keys, pure=False,
                                  workers=[workers[i % len(workers)]])
                    for i in range(n_parts)]
            wait(futs)
            raw = partition(futs, client=client)
            data = raw.map(D.encode_part, np.array([0, 1]), 1)
            raw.release()
            del futs
            summary["generate_s"] = time.perf_counter() - t0
            phases = summary["peak_gib_after"] = {}

            def phase(name):  # the peak per worker so far
                phases[name] = [round(v / 2**30, 2) for v in mem.peak.values()]

            phase("generate")
            nnz = sum(data.reduce(_nnz))
            summary["nnz"] = int(nnz)
            print(f"generated and encoded {nnz:,} non-zeros in {summary['generate_s']:.1f} s",
                  flush=True)
            Xt, yt, zt = make_part(10**9, args.test_rows, args.head_nnz, args.tail_nnz,
                                   args.seed, args.head_keys, with_margin=True)
            summary["auc_planted_model"] = float(roc_auc_score(yt, zt))

            model = dask_ps.PSModel(client)
            t0 = time.perf_counter()
            _, history, n_iter, _ = train(model, data, n_features=N_FEATURES, n_outputs=1,
                                          solver="ftrl", learning_rate=args.learning_rate,
                                          max_iter=args.epochs, random_state=args.seed,
                                          table_dtype="float32", collect=False)
            summary["fit_s"] = time.perf_counter() - t0
            summary["epoch_s"] = [h.get("epoch_time") for h in history if "loss" in h]
            summary["train_loss"] = [h["loss"] for h in history if "loss" in h]
            phase("train")
            data.release()
            n_rows, nbytes, per_shard = table_size(model)
            summary.update(keys=n_rows - 1, table_bytes=nbytes, table_bytes_per_shard=per_shard,
                           bytes_per_key=nbytes / n_rows)
            print(f"trained {n_iter} epoch(s): {summary['epoch_s']} s each; {n_rows - 1:,} "
                  f"distinct keys, table {nbytes / 2**30:.2f} GiB = {nbytes / n_rows:.1f} B "
                  f"per key; load: {load()}", flush=True)
            rule = Rule(SOLVERS["ftrl"](args.learning_rate, 0.0), 1)
            url = str(root / "ck")
            t0 = time.perf_counter()
            model.save(url)
            summary["save_s"] = time.perf_counter() - t0
            phase("save")
            summary["auc"] = test_auc(model, rule, Xt, yt)
            model.close()
            t0 = time.perf_counter()
            loaded = dask_ps.PSModel.load(client, url, n_shards=args.workers)
            summary["load_s"] = time.perf_counter() - t0
            summary["loaded_keys"] = table_size(loaded)[0] - 1
            summary["auc_loaded"] = test_auc(loaded, rule, Xt, yt)
            phase("load")
            loaded.close()
            summary["peak_memory_per_worker_gib"] = {a: v / 2**30 for a, v in mem.peak.items()}
        summary["driver_peak_rss_gib"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                          / 2**20)
        summary["uptime_end"] = load()
        peaks = ", ".join(f"{v:.2f}" for v in summary["peak_memory_per_worker_gib"].values())
        print(f"checkpoint: saved in {summary['save_s']:.1f} s, loaded onto {args.workers} "
              f"shards in {summary['load_s']:.1f} s ({summary['loaded_keys']:,} keys)")
        print(f"test AUC {summary['auc']:.4f} (from the loaded checkpoint "
              f"{summary['auc_loaded']:.4f}) on {args.test_rows:,} rows; the planted model's "
              f"AUC (the best possible) {summary['auc_planted_model']:.4f}")
        print(f"peak GiB per worker after each phase: {summary['peak_gib_after']}")
        print(f"peak memory per worker: [{peaks}] GiB; driver peak RSS "
              f"{summary['driver_peak_rss_gib']:.2f} GiB; load: {summary['uptime_end']}")
        print(f"SUMMARY keys={summary['keys']:,} bytes_per_key={summary['bytes_per_key']:.1f} "
              f"peak_GiB_per_worker=[{peaks}] epoch_s={summary['epoch_s']} "
              f"auc={summary['auc']:.4f} save_s={summary['save_s']:.1f} "
              f"load_s={summary['load_s']:.1f}", flush=True)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=1, default=str))
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
