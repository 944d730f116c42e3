"""Allocator settings and measures of the worker processes (dask_ps.state._malloc)."""

import sys

import numpy as np
import pytest
from conftest import NO_DASHBOARD

from dask_ps.state._malloc import MALLOC_THRESHOLD, malloc_threshold, untouched_bytes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore: Linux only")
def test_untouched_bytes_counts_the_zero_pages_not_yet_written():
    # 64 MiB from calloc: a fresh mapping, not in memory (glibc serves blocks of up to 32 MiB,
    # its largest dynamic mmap threshold, from the heap, where calloc may write the zeros)
    a = np.zeros(2**26 // 8)
    assert untouched_bytes([a]) >= 0.9 * a.nbytes
    # reading maps the kernel's shared zero page: still nothing of the process's own
    # (mincore called these pages resident)
    assert a.sum() == 0.0
    assert untouched_bytes([a]) >= 0.9 * a.nbytes
    a[: a.shape[0] // 2] = 1.0
    assert 0.4 * a.nbytes <= untouched_bytes([a]) <= 0.6 * a.nbytes
    a[a.shape[0] // 2:] = 1.0
    assert untouched_bytes([a]) <= 0.01 * a.nbytes
    assert untouched_bytes([a[::2], np.ones(3)]) == 0  # views and small arrays: not counted


def test_small_workers_keep_less_freed_memory_in_their_allocators():
    assert malloc_threshold(None) == MALLOC_THRESHOLD
    assert malloc_threshold(8 * 2**30) == MALLOC_THRESHOLD
    assert malloc_threshold(2**30) == 8 * 2**20
    assert malloc_threshold(64 * 2**20) == 2**20


def test_workers_freeze_what_they_held_before_dask_ps_once(client2):
    """The first dask_ps call in a worker (here: placing a map's partitions) moves its
    objects to the collector's permanent generation (full collections then walk only newer
    objects); not again later, and not in the driver."""
    import gc

    from dask_ps import partition

    assert set(client2.run(gc.get_freeze_count).values()) == {0}  # a fresh cluster
    parts = partition(np.arange(10.0), client=client2)
    squares = parts.map(np.square)
    first = client2.run(gc.get_freeze_count)
    assert all(n > 1000 for n in first.values()), first
    squares.map(np.sqrt).release()
    later = client2.run(gc.get_freeze_count)
    assert all(later[w] <= first[w] for w in first), (first, later)  # frozen once
    assert gc.get_freeze_count() == 0


def test_workers_that_are_threads_of_the_users_process_leave_it_alone():
    """The workers of a ``LocalCluster(processes=False)`` are threads of this process, the
    user's: dask_ps neither freezes its objects (a user's object later in a cycle would never be
    freed) nor sets its allocator's thresholds. Either, once done, stayed for the rest of the
    process (the test above failed after tests/state/test_transport.py's cluster of threads)."""
    import gc

    from distributed import Client, LocalCluster

    from dask_ps import PSModel, partition
    from dask_ps.state._malloc import tune_malloc

    assert gc.get_freeze_count() == 0
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, **NO_DASHBOARD,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        partition(np.arange(10.0), client=client).map(np.square).release()
        with PSModel(client, n_shards=1) as model:
            model.add_table("w", (4,))
            tuned = model.run(lambda ps, i: tune_malloc(), [0])
    assert tuned == [False]
    assert gc.get_freeze_count() == 0


def test_shards_and_process_clients_made_first_stay_visible_to_the_collector():
    """When a shard (or a process's PS client) is a worker's first dask_ps object, the freeze
    happens before it exists: a frozen shard would never be collected, nor seen by
    ``gc.get_objects`` (the freeze ran inside their constructors before)."""
    from distributed import Client, LocalCluster

    from dask_ps import PSModel

    def visible(dask_worker):
        import gc

        from dask_ps.state.client import ProcessClient
        from dask_ps.state.shard import Shard

        kinds = [type(o).__name__ for o in gc.get_objects()
                 if isinstance(o, (Shard, ProcessClient))]
        return gc.get_freeze_count(), sorted(kinds)

    with LocalCluster(n_workers=1, threads_per_worker=1, **NO_DASHBOARD,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        model = PSModel(client, n_shards=2)
        model.add_table("w", (10,))
        model.run(lambda ps, i: ps.pull("w", np.arange(3)).sum(), [0])
        [(frozen, kinds)] = client.run(visible).values()
        assert frozen > 1000
        assert kinds == ["ProcessClient", "Shard", "Shard"], kinds
        model.close()
