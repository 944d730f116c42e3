"""Logistic regression on generated CTR-like data larger than memory: does cost per sample stay
flat as data grows?

    python benchmarks/lr_scale.py --disk-gb 36 [--format parquet] [--epochs 5] [--dir DIR]
    python benchmarks/lr_scale.py --rows 200000            # a quick try

Writes (once; reused when the manifest matches) a CTR-like dataset with ``dask_ps.io.write_ctr``
on the workers of a LocalCluster (2 worker processes x 1 thread, each with ``--memory-limit``),
then fits ``dask_ps.LogisticRegression`` (FTRL) twice from the files: on all of it and on its
first tenth (``--small-ratio``). Reported, measured in this run: rows, non-zeros and bytes on
disk; fit wall time; non-zeros per second per epoch; peak memory per worker (the scheduler's
view, sampled every ``--sample-s`` seconds, and the kernel's high-water mark of each worker
process over the fit, ``VmHWM``, which no sampling misses) against its limit; bytes Dask
spilled to disk; and the ratio of the cost per sample (wall / (rows x epochs)) of the large run
to the small one, which should stay near 1. Run it on a quiet machine; on a shared one read the
numbers as sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from dask_ps.cluster import worker_info


def _bytes_per_row(fmt: str, n_features: int, nnz: int) -> float:
    """Bytes per row on disk, measured on a small sample written here."""
    from dask_ps.io import write_ctr

    with tempfile.TemporaryDirectory() as tmp:
        out = write_ctr(tmp, 20_000, n_features, nnz, format=fmt, chunk_rows=20_000)
    return out[0][2] / out[0][0]


def ensure_data(root: Path, rows: int, args) -> dict:
    """Generate the dataset on the workers unless the manifest says it is already there."""
    from dask_ps.io import write_ctr

    spec = dict(rows=rows, n_features=2 ** args.features, nnz=args.nnz, format=args.format,
                chunk_rows=args.chunk_rows, seed=args.seed)
    manifest = root / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("spec") == spec:
        return json.loads(manifest.read_text())
    t0 = time.perf_counter()
    out = write_ctr(str(root), rows, spec["n_features"], args.nnz, format=args.format,
                    chunk_rows=args.chunk_rows, random_state=args.seed)
    info = dict(spec=spec, files=len(out), nnz=int(sum(o[1] for o in out)),
                file_rows=[int(o[0]) for o in out], file_nnz=[int(o[1]) for o in out],
                bytes=int(sum(o[2] for o in out)), write_s=time.perf_counter() - t0)
    manifest.write_text(json.dumps(info))
    return info


def _files(root: Path, fmt: str, fraction: float) -> list[str]:
    ext = "parquet" if fmt == "parquet" else "svm"
    files = sorted(str(p) for p in root.glob(f"part-*.{ext}"))
    return files[:max(1, round(len(files) * fraction))]


class PeakMemory:
    """Polls the scheduler's per-worker memory and spill metrics in a thread."""

    def __init__(self, client, every: float) -> None:
        self.client, self.every = client, every
        self.peak: dict = {}
        self.spilled: dict = {}
        self.paused: dict = {}  # samples in which the worker was paused
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                info = worker_info(self.client)
            except Exception:  # the cluster is closing
                return
            for addr, w in info.items():
                m = w.get("metrics", {})
                self.peak[addr] = max(self.peak.get(addr, 0), int(m.get("memory", 0)))
                disk = int(m.get("spilled_bytes", {}).get("disk", 0))
                self.spilled[addr] = max(self.spilled.get(addr, 0), disk)
                self.paused[addr] = self.paused.get(addr, 0) + (w.get("status") == "paused")
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def fit_once(client, files: list[str], info: dict, args) -> dict:
    from dask_ps import LogisticRegression
    from dask_ps.io import read_libsvm, read_sparse_parquet
    from dask_ps.state._malloc import highest_rss, reset_peak_rss

    n_features = info["spec"]["n_features"]
    if args.format == "parquet":
        X, y = read_sparse_parquet(files)
    else:
        X, y = read_libsvm(files, n_features=n_features, zero_based=False, blocksize="64MiB")
    rows = int(X.shape[0])
    nnz = sum(info["file_nnz"][:len(files)])  # files are the first ones, in order
    assert rows == sum(info["file_rows"][:len(files)])
    limits = {a: w["memory_limit"] for a, w in
              worker_info(client).items()}
    model = LogisticRegression(solver="ftrl", max_iter=args.epochs, random_state=0,
                               client=client, progress=False)
    client.run(reset_peak_rss, forget=True)
    with PeakMemory(client, args.sample_s) as mem:
        t0 = time.perf_counter()
        model.fit(X, y)
        wall = time.perf_counter() - t0
    out = dict(rows=rows, nnz=int(nnz), files=len(files), partitions=int(X.numblocks[0]),
               fit_s=wall,
               nnz_per_s_per_epoch=nnz * args.epochs / wall,
               cost_per_sample_us=1e6 * wall / (rows * args.epochs),
               peak_memory_bytes=mem.peak, memory_limit_bytes=limits,
               highest_rss_bytes=client.run(highest_rss),
               peak_under_limit=all(mem.peak.get(a, 0) < lim for a, lim in limits.items()),
               spilled_to_disk_bytes=mem.spilled, paused_samples=mem.paused,
               peak_under_pause=all(mem.peak.get(a, 0) < args.pause * lim
                                    for a, lim in limits.items()),
               loss=[h.get("loss") for h in model.history_])
    times = [h["time"] for h in model.history_ if "epoch" in h and "time" in h]
    if times:  # the training loop's clock starts once the data is read and encoded
        out["read_and_encode_s"] = wall - times[-1]
    if len(times) == args.epochs:  # seconds since the fit started, at the end of each epoch
        out["nnz_per_s_each_epoch"] = (nnz / np.diff([0.0] + times)).tolist()
    # per-epoch figures, when the estimator records them (time, bytes in memory/on disk)
    extra = [{k: v for k, v in h.items() if k not in ("epoch", "loss")} for h in model.history_]
    if any(extra):
        out["history_extra"] = extra
    return out


def _files_for_memory(client, files: list[str], info: dict, args) -> list[str]:
    """The first ``files`` whose rows take ``args.memory_ratio`` x the cluster's memory once
    read (bytes per row measured on the first file, read here)."""
    from dask.sizeof import sizeof

    from dask_ps.io import read_libsvm, read_sparse_parquet

    if args.format == "parquet":
        X, y = read_sparse_parquet(files[:1])
    else:
        X, y = read_libsvm(files[:1], n_features=info["spec"]["n_features"], zero_based=False)
    X, y = X.compute(scheduler="sync"), y.compute(scheduler="sync")
    per_row = (sizeof(X) + sizeof(y)) / X.shape[0]
    cluster = sum(w["memory_limit"] for w in worker_info(client).values())
    want = args.memory_ratio * cluster / per_row
    rows = np.cumsum(info["file_rows"][:len(files)])
    k = int(np.searchsorted(rows, want)) + 1
    if k > len(files):
        raise SystemExit(f"--memory-ratio {args.memory_ratio}: needs {want:,.0f} rows "
                         f"({per_row:.0f} B each in memory), the data has {rows[-1]:,}")
    print(f"memory ratio {args.memory_ratio}: {per_row:.0f} B per row in memory, cluster "
          f"{cluster / 2**30:.2f} GiB: the first {k} files ({rows[k - 1]:,} rows, "
          f"{rows[k - 1] * per_row / 2**30:.2f} GiB in memory)", flush=True)
    return files[:k]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--disk-gb", type=float, help="size of the large dataset on disk")
    size.add_argument("--rows", type=int, help="rows of the large dataset")
    p.add_argument("--format", choices=["parquet", "libsvm"], default="parquet")
    p.add_argument("--features", type=int, default=24, help="log2 of the feature count")
    p.add_argument("--nnz", type=int, default=30, help="features drawn per row")
    p.add_argument("--chunk-rows", type=int, default=500_000)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--small-ratio", type=float, default=10.0)
    p.add_argument("--memory-ratio", type=float, default=None,
                   help="train the large run on the first files whose rows take about this "
                        "many times the cluster's memory (workers x limit) once read (the "
                        "bytes per row in memory measured on the first file); default: all")
    p.add_argument("--memory-limit", default="8GiB",
                   help="per worker, e.g. 8GiB ('auto': RAM / workers; leave room for the "
                        "other processes of the machine)")
    p.add_argument("--target", type=float, default=0.45,
                   help="managed memory (share of the limit) above which Dask spills; the "
                        "block cache (dask-ps.block-cache, 0.1) and the shards come on top, "
                        "and the process must stay below the spill (0.75) and pause (0.85) "
                        "thresholds, where Dask would spill from (and block) its event loop")
    p.add_argument("--pause", type=float, default=0.85,
                   help="Dask's pause threshold (share of the limit); the peak must stay below")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sample-s", type=float, default=0.5)
    p.add_argument("--dir", default=None, help="where the data goes (default: a temp dir, "
                                               "deleted at the end)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the summary here")
    p.add_argument("--generate-only", action="store_true",
                   help="write the dataset (into --dir) and stop")
    args = p.parse_args(argv)

    import dask
    from distributed import Client, LocalCluster

    n_features = 2 ** args.features
    if args.rows is None:
        gb = 0.05 if args.disk_gb is None else args.disk_gb
        per_row = _bytes_per_row(args.format, n_features, args.nnz)
        args.rows = int(gb * 1e9 / per_row)
        print(f"{per_row:.1f} bytes per row on disk ({args.format}): {args.rows:,} rows "
              f"for {gb} GB", flush=True)
    args.chunk_rows = min(args.chunk_rows, max(1, args.rows // 40))  # >= 40 files: 1/10 is 4
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="lr_scale_")
        args.dir = tmp.name
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    summary = dict(args=vars(args), machine=dict(cpus=os.cpu_count(),
                                                 ram_bytes=_ram_bytes()))
    memory = {"distributed.worker.memory.target": args.target,
              "distributed.worker.memory.spill": 0.75,
              "distributed.worker.memory.pause": args.pause,
              "distributed.worker.memory.terminate": 0.95}
    try:
        with dask.config.set(memory), LocalCluster(n_workers=args.workers, threads_per_worker=1,
                          memory_limit=args.memory_limit, dashboard_address=":0",
                          local_directory=str(root / "_dask")) as cluster, \
                Client(cluster) as client:
            info = ensure_data(root, args.rows, args)
            summary["data"] = info
            if args.generate_only:
                print(f"data: {info['bytes'] / 2**30:.2f} GiB in {info['files']} files, "
                      f"written in {info.get('write_s', 0):.0f} s", flush=True)
                return 0
            print(f"data: {args.rows:,} rows, {info['nnz']:,} non-zeros, "
                  f"{info['bytes'] / 1e9:.2f} GB in {info['files']} files "
                  f"(written in {info.get('write_s', 0):.0f} s)", flush=True)
            runs = {}
            large = _files(root, args.format, 1.0)
            if args.memory_ratio is not None:
                large = _files_for_memory(client, large, info, args)
                summary["memory_ratio"] = args.memory_ratio
            for name, files in (("small", large[:max(1, round(len(large) / args.small_ratio))]),
                                ("large", large)):
                r = fit_once(client, files, info, args)
                runs[name] = r
                peaks = ", ".join(f"{v / 2**30:.2f}" for v in r["peak_memory_bytes"].values())
                lim = ", ".join(f"{v / 2**30:.2f}" for v in r["memory_limit_bytes"].values())
                spilled = sum(r["spilled_to_disk_bytes"].values())
                highest = ", ".join(f"{(v or 0) / 2**30:.2f}"
                                    for v in r["highest_rss_bytes"].values())
                last = (r.get("history_extra") or [{}])[-1]
                print(f"  {name}: {last.get('source_reads')} blocks read from "
                      f"{r['files']} files ({last.get('source_bytes', 0) / 1e9:.2f} GB), "
                      f"max reads per block {last.get('max_reads_per_block')}, incoming "
                      f"transfers {last.get('incoming_transfers')}, at the end "
                      f"{last.get('bytes_in_memory', 0) / 2**30:.2f} GiB in memory and "
                      f"{last.get('bytes_on_disk', 0) / 2**30:.2f} GiB on disk", flush=True)
                each = r.get("nnz_per_s_each_epoch")
                if each:
                    print(f"  {name}: read and encoded in {r.get('read_and_encode_s', 0):.0f} "
                          f"s; M nnz/s in each epoch of training: "
                          + ", ".join(f"{v / 1e6:.2f}" for v in each), flush=True)
                print(f"{name}: {r['rows']:,} rows, fit {r['fit_s']:.1f} s, "
                      f"{r['nnz_per_s_per_epoch'] / 1e6:.2f} M nnz/s per epoch, "
                      f"{r['cost_per_sample_us']:.3f} us per sample-epoch, peak GiB per "
                      f"worker [{peaks}] of [{lim}] (pause at {args.pause:.0%}: "
                      f"{'below' if r['peak_under_pause'] else 'REACHED'}; paused samples "
                      f"{sum(r['paused_samples'].values())}; the kernel's high-water mark "
                      f"[{highest}]), spilled {spilled / 2**30:.2f} GiB",
                      flush=True)
            summary["runs"] = runs
            ratio = runs["large"]["cost_per_sample_us"] / runs["small"]["cost_per_sample_us"]
            summary["cost_per_sample_ratio_large_over_small"] = ratio
            print(f"cost per sample, large / small: {ratio:.2f} (flat = 1.0)")
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=1, default=str))
        if tmp is not None:
            tmp.cleanup()
    return 0


def _ram_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


if __name__ == "__main__":
    sys.exit(main())
