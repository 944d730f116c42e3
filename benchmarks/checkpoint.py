"""Checkpoint throughput: save from N shards, load onto M, against a raw zarr write and read.

    python benchmarks/checkpoint.py [--dense-rows 4194304] [--sparse-keys 1000000] [--quick]

A dense FTRL table (weights float32 + z, n float64) and a sparse Adam table (float32 values,
m and v float64, t int64) on a local cluster of 2 worker processes. Reported: seconds and MB/s
of ``model.save`` (2 shards), ``PSModel.load`` onto 2 and onto 3 shards, and, as the bound, a
single-process zarr write and read of the same bytes. The machine is shared and noisy: read
the figures as sizes.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import zarr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dense-rows", type=int, default=2**22)
    ap.add_argument("--sparse-keys", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.dense_rows, args.sparse_keys = 2**18, 100_000
    from distributed import Client, LocalCluster

    import dask_ps

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        model = dask_ps.PSModel(client)
        rng = np.random.default_rng(0)
        model.add_table("dense", (args.dense_rows,), optimizer="ftrl")
        model.add_table("sparse", (None,), partitioner="hash", optimizer="adam")
        for lo in range(0, args.dense_rows, 2**20):
            keys = np.arange(lo, min(lo + 2**20, args.dense_rows))
            model.push("dense", keys, rng.normal(size=keys.shape[0]))
        keys = rng.integers(0, 2**62, args.sparse_keys)
        for lo in range(0, args.sparse_keys, 2**20):
            model.push("sparse", keys[lo:lo + 2**20], rng.normal(size=keys[lo:lo + 2**20].size))
        nbytes = args.dense_rows * (4 + 16) + model.table("sparse").n_keys * (8 + 4 + 24)
        with tempfile.TemporaryDirectory() as tmp:
            url = f"{tmp}/ck"
            t0 = time.perf_counter()
            model.save(url)
            t_save = time.perf_counter() - t0
            times = {}
            for n in (2, 3):
                t0 = time.perf_counter()
                loaded = dask_ps.PSModel.load(client, url, n_shards=n)
                times[n] = time.perf_counter() - t0
                assert loaded.table("sparse").n_keys == model.table("sparse").n_keys
                loaded.close()
            # the bound: one process writes and reads the same bytes as one array
            raw = np.random.default_rng(1).random(nbytes // 8)
            t0 = time.perf_counter()
            arr = zarr.create_array(f"{tmp}/raw", shape=raw.shape, chunks=(2**19,),
                                    dtype="f8", compressors=None)
            arr[:] = raw
            t_raw_w = time.perf_counter() - t0
            t0 = time.perf_counter()
            _ = arr[:]
            t_raw_r = time.perf_counter() - t0
        mb = nbytes / 1e6
        print(f"checkpoint of {mb:.0f} MB ({args.dense_rows} dense rows FTRL, "
              f"{args.sparse_keys} sparse keys Adam), 2 worker processes")
        print(f"save, 2 shards        {t_save:6.2f} s  {mb / t_save:7.0f} MB/s")
        for n, t in times.items():
            print(f"load onto {n} shards   {t:6.2f} s  {mb / t:7.0f} MB/s")
        print(f"raw zarr write, 1 proc {t_raw_w:6.2f} s  {mb / t_raw_w:7.0f} MB/s")
        print(f"raw zarr read, 1 proc  {t_raw_r:6.2f} s  {mb / t_raw_r:7.0f} MB/s")
        model.close()


if __name__ == "__main__":
    main()
