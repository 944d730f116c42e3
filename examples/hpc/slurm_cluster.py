"""Logistic regression on a9a with workers submitted as Slurm jobs by dask-jobqueue's
SLURMCluster; this script (the driver and the scheduler) runs on the login node or in a
small batch job of its own.

    python examples/hpc/slurm_cluster.py [--workers 2] [--interface ib0] [--queue Q]
                                         [--account A] [--walltime 01:00:00]

Data: ``$DASK_PS_DATA/lr_a9a/{a9a,a9a.t}`` (default ``../shared/data`` beside the
repository), on a file system the jobs see. The same from the command line: ``dask-ps train
lr --dataset a9a --cluster slurm --workers 2``.

On failure: ``adapt(minimum=n, maximum=n)`` submits a new job when one is cancelled or
reaches its walltime (``scale(n)`` would not). A job that held a model shard takes the shard
with it: with ``checkpoint=`` the fit restores it from the last checkpoint on a live worker
and goes on; without, the fit fails. Workers are never given ``--lifetime`` here, because a
worker retiring by lifetime drops its shard too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--interface", help="network interface of scheduler and workers (e.g. ib0)")
    p.add_argument("--queue")
    p.add_argument("--account")
    p.add_argument("--walltime", default="00:30:00")
    p.add_argument("--log-dir", default=os.path.join(tempfile.gettempdir(), "dask-ps-jobs"))
    args = p.parse_args()

    from a9a_fit import fit_and_score  # beside this script
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    t0 = time.perf_counter()
    extra = {k: v for k, v in (("queue", args.queue), ("account", args.account),
                               ("interface", args.interface)) if v}
    with SLURMCluster(cores=1, processes=1, memory="2GB", walltime=args.walltime,
                      python=sys.executable, log_directory=args.log_dir,
                      scheduler_options={"dashboard_address": ":0"}, **extra) as cluster, \
            Client(cluster) as client:
        cluster.adapt(minimum=args.workers, maximum=args.workers)  # replaces lost jobs
        fit_and_score(client, args.workers, t0)


if __name__ == "__main__":
    main()
