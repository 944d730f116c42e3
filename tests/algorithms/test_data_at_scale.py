"""Training data at scale: read once, spilled by Dask when memory is short, trained where it is."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from conftest import NO_DASHBOARD

from dask_ps import LogisticRegression
from dask_ps.cluster import worker_info
from dask_ps.io import read_libsvm, write_ctr

pytestmark = pytest.mark.timeout(300)

N_FEATURES = 2**16


@pytest.fixture(scope="module")
def ctr_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctr")
    with dask.config.set(scheduler="synchronous"):
        out = write_ctr(str(root), 60_000, N_FEATURES, format="libsvm", chunk_rows=5_000,
                        random_state=2)
    return sorted(str(p) for p in root.glob("*.svm")), sum(o[2] for o in out)


@pytest.fixture(scope="module")
def spill_client(tmp_path_factory):
    """1 worker x 1 thread (like ``client1``, so that the partitions are placed alike) whose
    managed memory spills above ~5 MiB (1 GiB x 0.005); no pause or restart, which a shared,
    loaded machine could trigger on process memory; no block cache, so that training streams
    every partition from Dask's store (memory or local disk) in every epoch."""
    from distributed import Client, LocalCluster

    memory = {"distributed.worker.memory.target": 0.005, "distributed.worker.memory.spill": False,
              "distributed.worker.memory.pause": False,
              "distributed.worker.memory.terminate": False, "dask-ps.block-cache": 0.0}
    with dask.config.set(memory), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, memory_limit="1GiB",
                         local_directory=str(tmp_path_factory.mktemp("spill")),
                         **NO_DASHBOARD, worker_dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def _fit(client, files):
    X, y = read_libsvm(files, n_features=N_FEATURES, zero_based=False, blocksize=None)
    with dask.config.set(scheduler=client.get):
        assert X.numblocks[0] == len(files)
    model = LogisticRegression(solver="ftrl", max_iter=5, random_state=0, client=client)
    return model.fit(X, y)


def test_spilled_fit_reads_each_file_once_and_ends_with_the_same_model(ctr_files, spill_client,
                                                                        client1):
    files, total_bytes = ctr_files
    spilled = _fit(spill_client, files)
    report = spilled.history_[-1]
    assert len([h for h in spilled.history_ if "epoch" in h]) == 5
    # every source file was read exactly once during the 5-epoch fit
    assert report["source_reads"] == len(files) and report["max_reads_per_block"] == 1
    assert report["source_bytes"] == total_bytes
    # Dask spilled part of the partitions to its local disk
    assert report["bytes_on_disk"] > 0, report
    # ~1.3 M non-zeros of float32 values and int32 indices: 10.6 MB in memory; the spilled
    # share may be compressed (lz4)
    assert report["bytes_in_memory"] + report["bytes_on_disk"] > 5 * 2**20

    plain = _fit(client1, files)
    plain_report = plain.history_[-1]
    assert plain_report["bytes_on_disk"] == 0 and plain_report["max_reads_per_block"] == 1
    # BSP with the same seed: the same model with and without spilling, streamed without a
    # block cache (spilled) or with every block cached (plain)
    np.testing.assert_allclose(spilled.coef_, plain.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(spilled.intercept_, plain.intercept_, rtol=1e-9)
    assert [h["loss"] for h in spilled.history_] == pytest.approx(
        [h["loss"] for h in plain.history_], rel=1e-9)


def test_no_data_moves_between_workers_during_fit(ctr_files, client2):
    files, _ = ctr_files
    report = _fit(client2, files).history_[-1]
    # every training task ran where its partitions were, and each file was read once
    assert report["incoming_transfers"] == 0 and report["incoming_transfer_bytes"] == 0
    assert report["source_reads"] == len(files) and report["max_reads_per_block"] == 1


def test_a_partition_on_another_worker_is_fetched_and_counted(client2):
    """After a lost worker, Dask may recompute a partition elsewhere than its task: the task
    fetches it (counted as an incoming transfer) instead of failing."""
    from dask_ps.partitions import Partition
    from dask_ps.partitions.worker import io_counters

    a, b = sorted(worker_info(client2))
    part = client2.submit(lambda: (np.arange(1000.0), np.ones(3)), workers=[a], pure=False)
    part.result()

    def load(key):
        before = io_counters()
        from distributed import get_worker

        X, Y = Partition("test", 0, key, 1000).load()
        here = key in get_worker().data
        after = io_counters(get_worker())
        return X.shape[0], Y.shape[0], here, after["incoming_bytes"] >= 8000, before["reads"]

    assert client2.submit(load, part.key, workers=[a], pure=False).result()[:3] == (1000, 3,
                                                                                     True)
    rows, _, _, counted, _ = client2.submit(load, part.key, workers=[b], pure=False).result()
    assert rows == 1000 and counted
    assert client2.who_has([part])[part.key] == (a,)  # fetched, not moved
