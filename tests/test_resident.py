"""Objects resident next to the data (Residents): one per worker holding partitions, built
there from its Partition handles, called directly with per-worker arguments."""

import numpy as np
import pytest

from dask_ps.partitions import partition
from dask_ps.partitions.resident import Residents

pytestmark = pytest.mark.timeout(180)


class _Rows:
    """Sums its tasks' rows, after adding what the driver sends to what it holds."""

    def __init__(self, tasks, offset):
        self.tasks, self.offset, self.held = tasks, offset, 0.0

    def where(self):
        from distributed import get_worker

        try:
            return get_worker().address
        except ValueError:
            return "local"

    def add(self, x):
        self.held += x
        return [self.held + self.offset + sum(float(p.load().sum()) for p in parts)
                for parts in self.tasks]

    def fail(self, x):
        raise ValueError(f"bad {x}")


@pytest.mark.parametrize("where", ["local", "client2"])
def test_each_worker_holding_partitions_gets_one_object_built_from_its_handles(where, request):
    client = where if where == "local" else request.getfixturevalue(where)
    X = np.arange(60.0).reshape(30, 2)
    with partition(X, client=client, n_partitions=6) as data, \
            Residents(data, _Rows, 1000.0) as res:
        n = len(res.workers)
        assert n == (1 if where == "local" else 2)
        assert sorted(res.workers) == sorted(set(data.workers))
        if where != "local":  # each object lives on its worker
            assert res.call("where", [()] * n) == res.workers
        # per-worker arguments, results in worker order; state kept between calls
        res.call("add", [(float(i),) for i in range(n)])
        out = res.call("add", [(float(i),) for i in range(n)])
        for i, (sums, tasks) in enumerate(zip(out, res.tasks)):
            for s, idx in zip(sums, tasks):
                rows = sum(X[j * 5:(j + 1) * 5].sum() for j in idx)
                assert s == pytest.approx(2.0 * i + 1000.0 + rows)
        assert sum(len(i) for ts in res.tasks for i in ts) == 6
        with pytest.raises(ValueError, match="bad 7"):
            res.call("fail", [(7,)] * n)
        with pytest.raises(ValueError, match="argument tuples"):
            res.call("add", [(1.0,)] * (n + 1))
