"""The orderly shutdown of a scheduler-file cluster (no Slurm needed): a ``dask scheduler``
and two ``dask worker --no-nanny`` processes (as examples/hpc/scheduler_file.sbatch starts
them), closed by :func:`dask_ps.cluster.close_workers` and then ``client.shutdown()``, exit
with status 0 and log no error or traceback (``shutdown_noise``). ``client.shutdown()``
alone made the workers' heartbeats and batched streams fail mid-way (tracebacks after a
successful run)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ._slurm import shutdown_noise

pytestmark = pytest.mark.timeout(180)


def test_close_workers_then_scheduler_logs_no_traceback(tmp_path):
    from distributed import Client

    from dask_ps.cluster import close_workers

    sf = tmp_path / "scheduler.json"
    logs = {name: (tmp_path / f"{name}.log").open("w") for name in ("scheduler", "w1", "w2")}
    net = ["--host", "127.0.0.1"]
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                               "--scheduler-file", str(sf), "--port", "0",
                               "--dashboard-address", ":0", *net],
                              stdout=logs["scheduler"], stderr=subprocess.STDOUT)]
    try:
        deadline = time.monotonic() + 60
        while not (sf.exists() and sf.stat().st_size):
            assert time.monotonic() < deadline and procs[0].poll() is None, "no scheduler file"
            time.sleep(0.1)
        procs += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                    "--scheduler-file", str(sf), "--nthreads", "1",
                                    "--memory-limit", "0", "--no-nanny", *net],
                                   stdout=logs[w], stderr=subprocess.STDOUT)
                  for w in ("w1", "w2")]
        with Client(scheduler_file=str(sf), timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
            assert sum(client.gather(client.map(lambda x: x + 1, range(100)))) == 5050
        # not a ``with`` block: distributed leaves dask's config naming the distributed
        # scheduler when shutdown() closes the client inside its own ``with`` block
        client = Client(scheduler_file=str(sf), timeout=30)
        try:
            assert close_workers(client) == 2
            assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.workers)) == 0
            client.shutdown()
        finally:
            client.close()
        assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in logs.values():
            f.close()
    for name in logs:
        text = (tmp_path / f"{name}.log").read_text()
        assert not shutdown_noise(text), f"{name}:\n{text[-3000:]}"
    assert "Reason: scheduler-close-worker" in (tmp_path / "w1.log").read_text()
