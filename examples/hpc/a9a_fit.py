"""The work shared by the HPC examples: logistic regression on a9a on the current Dask
client, then the test AUC printed. Data: ``$DASK_PS_DATA/lr_a9a/{a9a,a9a.t}`` (default
``../shared/data`` beside the repository), on a file system every worker sees."""

from __future__ import annotations

import os
import time
from pathlib import Path


def fit_and_score(client, n_workers: int, started: float) -> float:
    """Wait (up to 10 minutes: jobs may queue) for ``n_workers``, fit ``LogisticRegression``
    on a9a with them, print and return the test AUC (``started``: ``time.perf_counter()`` at
    the start of the script)."""
    from sklearn.metrics import roc_auc_score

    from dask_ps import LogisticRegression
    from dask_ps.io import read_libsvm

    client.wait_for_workers(n_workers, timeout=600)
    print(f"{n_workers} workers up after {time.perf_counter() - started:.1f} s (dashboard "
          f"{client.dashboard_link})", flush=True)
    root = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    X, y = read_libsvm(str(root / "lr_a9a" / "a9a"), n_features=123, blocksize="1MiB")
    Xt, yt = read_libsvm(str(root / "lr_a9a" / "a9a.t"), n_features=123)
    X, y = client.persist([X, y])
    model = LogisticRegression(random_state=0, progress=False).fit(X, y)
    auc = roc_auc_score(yt.compute(), model.predict_proba(Xt)[:, 1].compute())
    print(f"test: AUC {auc:.4f} ({time.perf_counter() - started:.1f} s in all)", flush=True)
    return auc
