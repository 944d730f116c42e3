"""What the benchmark scripts share: where the real data is (and one line when it is not
there), the peers (the ``bench`` extra's libraries, skipped with one line when not
installed), and the generated CTR-like set."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import numpy as np


def data_root() -> Path:
    """``$DASK_PS_DATA``, default ``../shared/data`` beside the repository."""
    return Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))


def data_file(*parts: str) -> Path:
    """``data_root() / parts``, or exit with one line naming the missing file and
    ``DASK_PS_DATA`` (no traceback) when it is not there."""
    path = data_root().joinpath(*parts)
    if not path.is_file():
        env = os.environ.get("DASK_PS_DATA")
        where = f"DASK_PS_DATA={env}" if env else f"DASK_PS_DATA unset: default {data_root()}"
        sys.exit(f"{path} not found ({where}); point DASK_PS_DATA at the folder holding "
                 f"{parts[0]}/")
    return path


#: How to install the peers: the ``bench`` extra (never a dependency of dask_ps itself).
BENCH_EXTRA = "pip install -e '.[bench]'"


def peer(module: str, name: str | None = None):
    """The peer library ``module`` imported, or None after printing ``"<name> not installed
    (pip install -e '.[bench]'): skipped"`` (``name`` defaults to ``module``)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        print(f"{name or module} not installed ({BENCH_EXTRA}): skipped", flush=True)
        return None


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
