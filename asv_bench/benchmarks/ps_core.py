"""asv: pull / push of a dense float32 table from the client, on 2 worker processes x 1 thread.

The full picture (per-shard throughput from inside tasks, bounds, training loop) is
``benchmarks/ps_core.py`` at the repository root; this keeps one small, trackable number.
"""

import warnings

import numpy as np


class PullPush:
    params = [1_000, 100_000]
    param_names = ["K"]
    timeout = 180
    rows = 2_000_000

    def setup(self, K):
        from distributed import Client, LocalCluster

        import dask_ps

        warnings.filterwarnings("ignore", message="Port .* is already in use")
        self.cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                    dashboard_address=None, worker_dashboard_address=None)
        self.client = Client(self.cluster)
        self.model = dask_ps.PSModel(self.client)
        self.model.add_table("w", shape=(self.rows,), dtype="float32", optimizer="add")
        rng = np.random.default_rng(0)
        self.keys = rng.choice(self.rows, size=K, replace=False).astype(np.int64)  # both shards
        self.updates = np.ones(K, np.float32)
        for _ in range(2):  # warm up numba, connections
            self.model.pull("w", self.keys)
            self.model.push("w", self.keys, self.updates)

    def teardown(self, K):
        self.model.close()
        self.client.close()
        self.cluster.close()

    def time_pull(self, K):
        self.model.pull("w", self.keys)

    def time_push(self, K):
        self.model.push("w", self.keys, self.updates)  # returns once the shards applied it
