"""What the benchmark scripts share: where the real data is, and the generated CTR-like set."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def data_root() -> Path:
    """``$DASK_PS_DATA``, default ``../shared/data`` beside the repository."""
    return Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def add_ctr_arguments(p, rows: int = 1_000_000) -> None:
    """``--rows --features --nnz --quick`` of the generated CTR-like set."""
    p.add_argument("--rows", type=int, default=rows, help="training rows generated")
    p.add_argument("--features", type=int, default=22, help="log2 of the feature count")
    p.add_argument("--nnz", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="200,000 generated rows")


def ctr_set(client, args, dtype=np.float64):
    """``(dX, dy, Xt, yt)``: ``args.rows`` training rows of :func:`dask_ps.io.make_ctr`
    generated and persisted on the workers, and ``rows // 5`` test rows here."""
    from distributed import wait

    from dask_ps.io import make_ctr

    if args.quick:
        args.rows = 200_000
    n, n_test = args.rows, args.rows // 5
    GX, Gy = make_ctr(n + n_test, 2**args.features, args.nnz,
                      chunk_rows=max(1000, n // 10), dtype=dtype)
    dX, dy = client.persist([GX[:n], Gy[:n]])
    wait([dX, dy])
    Xt, yt = client.compute([GX[n:], Gy[n:]], sync=True)
    print(f"CTR-like (make_ctr): {n:,} rows x 2^{args.features} features, {args.nnz} per "
          f"row; test {n_test:,} rows")
    return dX, dy, Xt, yt
