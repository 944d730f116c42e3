#!/usr/bin/env python
"""Memory of a MatrixFactorization fit: peak resident memory over the data, and a digest of
the result (to check that a change of layout leaves the factors bit-identical).

Each configuration runs in a fresh subprocess: it generates the ratings (the planted model of
``mf_peers.generated``), lets the import and the data settle, then fits in this process
(``client="local"``: the PS shards, the partitions and their state all live here) and
reports

* ``ratings MiB``: the bytes of the ratings as (int64 user, int64 item, float64 rating),
  24 B a rating, the unit of "copies of the ratings";
* ``peak MiB``: the process's highest resident memory during the fit (``VmHWM``, reset
  just before) minus its resident memory just before the fit;
* ``tracemalloc MiB``: the peak of Python and NumPy allocations traced during the fit
  (``--trace``; slower), the same figure without the allocator's slack;
* ``digest``: SHA-256 of the user and item factors and biases and of the history's losses.

Usage::

    python benchmarks/mf_memory.py                   # ALS 1M ratings rank 32, SGD 1M users
    python benchmarks/mf_memory.py --solver als --ratings 1000000 --n-components 32 --epochs 2
    python benchmarks/mf_memory.py --offset 0.1      # ratings float32 does not hold exactly
    PYTHONPATH=/path/to/other/checkout python benchmarks/mf_memory.py   # the same there
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CONFIGS = {  # the two of the issue: ALS on 1M ratings, SGD on 1M users
    "als": dict(solver="als", ratings=1_000_000, users=None, items=None, rank=32, epochs=2),
    "sgd": dict(solver="sgd", ratings=3_000_000, users=1_000_000, items=20_000, rank=64,
                epochs=2),
}


def run(solver: str, ratings: int, users, items, rank: int, epochs: int,
        trace: bool = False, offset: float = 0.0) -> dict:
    """One fit in this process; returns the figures (see the module's docstring)."""
    import gc
    import hashlib
    import tracemalloc

    import numpy as np
    from mf_peers import generated

    from dask_ps import MatrixFactorization
    from dask_ps.state._malloc import peak_rss, release_memory, reset_peak_rss

    train, _ = generated(ratings, users=users, items=items)
    train = train.astype({"user": np.int64, "item": np.int64, "rating": np.float64})
    train["rating"] += offset  # 0.1: ratings that float32 does not hold exactly
    # compile (or load) the kernels and warm the imports on a small fit
    MatrixFactorization(solver=solver, n_components=rank, max_iter=1, client="local",
                        random_state=0).fit(train.iloc[:2000])
    gc.collect()
    release_memory()
    rss0 = reset_peak_rss()
    if trace:
        tracemalloc.start()
    model = MatrixFactorization(solver=solver, n_components=rank, max_iter=epochs, client="local",
                                random_state=0).fit(train)
    traced = tracemalloc.get_traced_memory()[1] if trace else None
    peak = peak_rss()
    h = hashlib.sha256()
    for a in (model.user_factors_, model.user_bias_, model.item_factors_, model.item_bias_,
              np.array([r["loss"] for r in model.history_])):
        h.update(np.ascontiguousarray(a).tobytes())
    mib = 2.0 ** 20
    return dict(solver=solver, ratings=ratings, users=len(model.user_ids_),
                items=len(model.item_ids_), rank=rank, epochs=epochs,
                ratings_mib=ratings * 24 / mib, peak_mib=(peak - rss0) / mib,
                traced_mib=None if traced is None else traced / mib,
                loss=model.history_[-1]["loss"], digest=h.hexdigest()[:16])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--solver", choices=["als", "sgd"], nargs="*", default=["als", "sgd"])
    p.add_argument("--ratings", type=int)
    p.add_argument("--users", type=int)
    p.add_argument("--items", type=int)
    p.add_argument("--n-components", "--rank", dest="rank", type=int,
                   help="MatrixFactorization's n_components (--rank: its old name)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--offset", type=float, default=0.0,
                   help="added to every rating (0.1: ratings not exact in float32)")
    p.add_argument("--trace", action="store_true", help="also tracemalloc's peak (slower)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(run(**json.loads(args.child))))
        return 0
    print(f"{'solver':>6} {'ratings':>10} {'users':>9} {'items':>7} {'rank':>4} "
          f"{'ratings MiB':>11} {'peak MiB':>9} {'traced MiB':>10} {'loss':>9}  digest")
    for solver in args.solver:
        cfg = dict(CONFIGS[solver], trace=args.trace, offset=args.offset)
        cfg.update({k: getattr(args, k) for k in ("ratings", "users", "items", "rank",
                                                   "epochs") if getattr(args, k) is not None})
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.environ.get("PYTHONPATH", ""), here]).strip(os.pathsep))
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)], env=env,
                             capture_output=True, text=True)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        r = json.loads(out.stdout.strip().splitlines()[-1])
        traced = "-" if r["traced_mib"] is None else f"{r['traced_mib']:.0f}"
        print(f"{r['solver']:>6} {r['ratings']:>10,} {r['users']:>9,} {r['items']:>7,} "
              f"{r['rank']:>4} {r['ratings_mib']:>11.0f} {r['peak_mib']:>9.0f} {traced:>10} "
              f"{r['loss']:>9.6f}  {r['digest']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
