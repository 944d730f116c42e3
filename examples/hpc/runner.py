"""Logistic regression on a9a inside one Slurm allocation, with dask-jobqueue's SLURMRunner:
every task of the job runs this script; task 0 becomes the scheduler, task 1 runs the code
below (the client), the others are workers. Nothing runs on the login node, and the whole
cluster ends with the job.

    sbatch -n 4 -c 1 --mem-per-cpu=2G -t 00:20:00 \\
           --wrap "srun --exact python examples/hpc/runner.py [--interface ib0]"

The same from the command line: ``srun --exact dask-ps train lr --dataset a9a --cluster
slurm-runner``. Data: ``$DASK_PS_DATA/lr_a9a/{a9a,a9a.t}`` (default ``../shared/data`` beside
the repository), on a file system every node sees.

On failure: a worker task that dies takes its shard with it and the fit fails with an error
(there is no spare capacity in the allocation to recover on, and Slurm does not restart the
step); the job ends with a non-zero status. A walltime ends every task at once.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--interface", help="network interface of scheduler and workers (e.g. ib0)")
    p.add_argument("--scheduler-file", default="scheduler-{job_id}.json",
                   help="on a shared file system (default: the current folder)")
    args = p.parse_args()

    from a9a_fit import fit_and_score  # beside this script
    from dask_jobqueue.slurm import SLURMRunner
    from distributed import Client

    net = {"interface": args.interface} if args.interface else {}
    t0 = time.perf_counter()
    # Tasks 0 and 2.. stay inside SLURMRunner(...) until task 1 leaves the `with` block,
    # then exit; only task 1 runs the body.
    with SLURMRunner(scheduler_file=args.scheduler_file,
                     scheduler_options={"dashboard_address": ":0", **net},
                     worker_options={"nthreads": 1, **net}) as runner:
        with Client(runner) as client:
            fit_and_score(client, runner.n_workers, t0)


if __name__ == "__main__":
    main()
