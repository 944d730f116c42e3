#!/usr/bin/env python
"""Memory per key of a hashed (sparse) table shard: what a 2·10^8-key model will need.

Fills one shard of a sparse vector table (float32 by default, FTRL state) with N distinct
random int64 keys in batches (as training meets them), then reports, measured:

* the bytes of every array the shard holds (``TableShard.nbytes`` and its parts: keys,
  values, optimizer slots, index), per key held;
* the bytes per key of the row content alone (key + weight + slots), which the issue bounds
  at 24 for float32 FTRL;
* the process's peak resident memory while filling (growth copies included), per key.

Usage::

    python benchmarks/hashed_memory.py                     # N = 10^6 and 10^7
    python benchmarks/hashed_memory.py --keys 30000000 --optimizer ftrl --dtype float32
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np


def fill(n_keys: int, batch: int, dtype: str, optimizer: str, seed: int = 0) -> dict:
    from dask_ps.state.optimizers import get_optimizer
    from dask_ps.state.partition import HashPartitioner
    from dask_ps.state.table import Init, TableShard, TableSpec

    spec = TableSpec("w", None, 1, True, np.dtype(dtype), HashPartitioner(1),
                     get_optimizer(optimizer), Init())
    table = TableShard(spec, 0)
    rng = np.random.default_rng(seed)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    done = 0
    while done < n_keys:
        k = min(batch, n_keys - done)
        table.rows(rng.integers(-2**63, 2**63 - 1, k, dtype=np.int64))
        done += k
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    n = table.n_rows
    parts = {"keys": table._keys.nbytes, "values": table.values.nbytes,
             **{f"slot {k}": v.nbytes for k, v in table.slots.items()}}
    index = getattr(table, "_index", None)
    if index is not None:
        parts["index"] = index.nbytes
    else:  # the layout before issue 17: two int64 arrays of slots
        parts["index"] = table._slot_key.nbytes + table._slot_row.nbytes
    row = 8 + table.values.itemsize * table.values.shape[1] + sum(
        v.itemsize * v.shape[1] for v in table.slots.values())
    return dict(keys=n, dtype=dtype, optimizer=optimizer, row_bytes=row,
                nbytes=table.nbytes, per_key=table.nbytes / n,
                parts={k: v / n for k, v in parts.items()}, peak_rss_per_key=peak / n,
                capacity_rows=table.values.shape[0], seconds=seconds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, nargs="*", default=[10**6, 10**7])
    p.add_argument("--batch", type=int, default=10**6)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--optimizer", default="ftrl")
    args = p.parse_args(argv)
    print(f"sparse vector table, {args.dtype}, optimizer {args.optimizer}, keys inserted in "
          f"batches of {args.batch:,} random int64")
    print(f"{'keys':>12} {'row B/key':>10} {'held B/key':>11} {'peak RSS B/key':>15}  parts "
          f"(B/key)")
    for n in args.keys:
        r = fill(n, args.batch, args.dtype, args.optimizer)
        parts = ", ".join(f"{k} {v:.1f}" for k, v in r["parts"].items())
        print(f"{r['keys']:>12,} {r['row_bytes']:>10} {r['per_key']:>11.1f} "
              f"{r['peak_rss_per_key']:>15.1f}  {parts}  ({r['seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
