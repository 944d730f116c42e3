#!/usr/bin/env python
"""Core throughput of dask_ps on a LocalCluster of 2 worker processes x 1 thread.

Measures, in one run:

1. pull and push throughput (keys/s, MB/s of payload = key bytes + value bytes) for
   K = 1e3 .. 1e6 distinct random keys of a dense float32 table of 2e6 rows and of a sparse
   hashed table, from a task on worker A against the shard local to A and the remote shard;
2. per-call overhead: a 1-key pull (and push + clock) from the local and the remote shard;
3. bounds for the same bytes: a NumPy copy and a raw Dask worker-to-worker transfer, and the
   ratio ours / raw transfer for the 1e6-key pull + push from the remote shard (targets: 50 %
   dense, 40 % hashed), from the medians of parts 1 and 3, and paired: rounds of (our
   pull + push of each table, then 2 raw transfers), seconds apart, the median of the
   rounds' ratios (the steadier figure on a shared machine);
4. a training-shaped loop (2 tasks, 2 shards, dense float32 table of 1e7 rows, each step
   pull K + push K + clock under ASP) against a local NumPy ceiling and a bare Dask-actor loop
   (targets: >= 50% of the ceiling at K=1e5, >= 25% at K=1e4), in rounds run back to back;
   the ratios reported are medians over the rounds.

Usage::

    python benchmarks/ps_core.py            # ~2-3 minutes
    python benchmarks/ps_core.py --quick    # < 1 minute, fewer repeats and steps
    python benchmarks/ps_core.py --json out.json
    python benchmarks/ps_core.py --breakdown      # + ms per step by dask_ps function
    python benchmarks/ps_core.py --hashed-breakdown   # + where the hashed 1e6-key line goes
    python benchmarks/ps_core.py --no-train --repeat 10   # the headline ratios over 10 runs
    python benchmarks/ps_core.py --tuned-malloc   # A/B: workers without Dask's malloc setting

How each time is taken (all times inside worker tasks use ``time.perf_counter``):

* pull: after the previous push has been delivered, ``t = perf_counter(); ps.pull(...)``.
  Every timed pull happens at a new clock, so under ASP the process snapshot of the previous
  clock is stale and every key is fetched from the shard (no cache hit is timed).
* push: ``ps.push(...); ps.clock(); ps._client.wait(ps.job)``. ``clock`` sends the merged update
  (with the clock tick, to every shard) in the background; ``ProcessClient.wait`` blocks until
  that send has been answered by the shards, i.e. until the update has been applied (ASP
  applies on arrival). The timed push therefore includes validation, planning, serialisation,
  the transfer, the shard's optimizer step and the reply, plus the (empty) tick to the other
  shard that every clock sends.
* raw transfer: see :func:`raw_transfer_times`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

KS = [1_000, 10_000, 100_000, 1_000_000]
DENSE_ROWS = 2_000_000
SPARSE_POOL = 2_200_000  # distinct sparse keys created before timing (>= 1e6 per shard)
TRAIN_ROWS = 10_000_000
TRAIN_KS = [10_000, 100_000]
ITEM_BYTES = 8 + 4  # int64 key + float32 value
#: Targets of the headline ratio (1e6-key remote pull + push vs 2 raw transfers): the PS core
#: issue's for dense tables, issue 17's for hashed ones.
HEADLINE_TARGET = {"dense": 0.5, "sparse": 0.4}
#: Rounds of the paired headline (quick, full).
PAIRED_ROUNDS = {True: 9, False: 15}
MB = 1e6


# --------------------------------------------------------------------------------------------
# helpers (shipped to the workers by value: this file is not importable there)
# --------------------------------------------------------------------------------------------
def _median(xs):
    return float(statistics.median(xs))


def _distinct(rng, n, k, order="random"):
    """``k`` distinct random ints in [0, n), in random order or sorted (``order="sorted"``:
    what ps-lite demands of its callers and what ``np.unique`` of CSR indices gives)."""
    keys = rng.choice(n, size=k, replace=False).astype(np.int64)
    return np.sort(keys) if order == "sorted" else keys


def _core_task(ps, cfg):
    """Part 1 and 2, in one task on worker A: returns the raw timings (seconds)."""
    import time

    import numpy as np

    perf = time.perf_counter
    pc = ps._client  # the ProcessClient of this worker process
    rng = np.random.default_rng(cfg["seed"])
    A = cfg["local_shard"]
    B = 1 - A

    def drain():
        pc.wait(ps.job)  # blocks until the clock's push in flight is answered

    # Sparse key pools: distinct random int64 keys, split by the shard that holds them, all
    # created (first touch) before timing so that timed calls hit existing rows.
    spec = pc.spec("sparse")
    pool = np.unique(rng.integers(0, 2**62, size=cfg["sparse_pool"], dtype=np.int64))
    # in one push (the shards' rows then follow the hash order of planned keys), or in
    # several pushes of random parts (rows created since the last growth of a shard's index
    # are in order of creation, as in a training run that meets new keys as it goes)
    for part in np.array_split(rng.permutation(pool), cfg["pool_batches"]):
        ps.push("sparse", part, np.zeros(part.shape[0], np.float32))
        ps.clock()
        drain()
    plan, _ = spec.partitioner.plan(pool)
    sparse_keys = {s: plan.local[plan.shard_slice(s)].copy() for s in (A, B)}
    starts = pc.spec("dense").partitioner.starts

    def draw(table, shard, k):
        if table == "dense":
            lo, hi = int(starts[shard]), int(starts[shard + 1])
            return lo + _distinct(rng, hi - lo, k, cfg["order"])
        keys = sparse_keys[shard]
        return keys[_distinct(rng, keys.shape[0], k, cfg["order"])]

    def pull_once(table, keys):
        drain()
        t0 = perf()
        v = ps.pull(table, keys)
        t1 = perf()
        assert v.shape == keys.shape and v.dtype == np.float32
        return t1 - t0

    def push_once(table, keys, upd):
        drain()
        t0 = perf()
        ps.push(table, keys, upd)
        ps.clock()
        drain()
        return perf() - t0

    # Warm up: numba kernels (cached, but loaded on first call in this process), connections,
    # the snapshot store, serialisation paths.
    for table in ("dense", "sparse"):
        for shard in (A, B):
            for k in cfg["warm_ks"]:
                for _ in range(2):
                    keys = draw(table, shard, k)
                    pull_once(table, keys)
                    push_once(table, keys, np.ones(k, np.float32))
                    ps.clock()

    out = {"throughput": [], "overhead": {}}
    for table in ("dense", "sparse"):
        for side, shard in (("local", A), ("remote", B)):
            for k in cfg["ks"]:
                reps = cfg["reps"][str(k)]
                upd = np.ones(k, np.float32)
                pulls, pushes = [], []
                for _ in range(reps):
                    keys = draw(table, shard, k)
                    ps.clock()  # new clock: the ASP snapshot of the last clock is stale
                    pulls.append(pull_once(table, keys))
                    pushes.append(push_once(table, keys, upd))
                out["throughput"].append(dict(table=table, side=side, k=k, pull=pulls,
                                              push=pushes))
    # Per-call overhead: 1 key.
    for side, shard in (("local", A), ("remote", B)):
        pulls, pushes = [], []
        for _ in range(cfg["reps_1key"]):
            keys = draw("dense", shard, 1)
            ps.clock()
            pulls.append(pull_once("dense", keys))
            pushes.append(push_once("dense", keys, np.ones(1, np.float32)))
        out["overhead"][side] = dict(pull=pulls, push=pushes)
    drain()
    return out


def _train_task(ps, cfg):
    """Part 4: the training-shaped loop of one task. Returns its own start/stop times."""
    import time

    import numpy as np

    rng = np.random.default_rng(cfg["seed"])
    k, steps, warm = cfg["k"], cfg["steps"], cfg["warm"]
    n = cfg["rows"]
    batches = [_distinct(rng, n, k, cfg["order"]) for _ in range(steps + warm)]  # not timed
    upd = np.full(k, 1e-3, np.float32)
    for i in range(warm):
        ps.pull("big", batches[i])
        ps.push("big", batches[i], upd)
        ps.clock()
    ps._client.wait(ps.job)
    while time.time() < cfg["start_at"]:  # both tasks start the timed loop together
        time.sleep(0.0005)
    w0, t0 = time.time(), time.perf_counter()
    late = w0 - cfg["start_at"]
    for i in range(warm, warm + steps):
        keys = batches[i]
        v = ps.pull("big", keys)
        ps.push("big", keys, upd)
        ps.clock()
    ps._client.wait(ps.job)  # the last push is delivered too
    t1, w1 = time.perf_counter(), time.time()
    assert v.shape == (k,)
    return dict(wall_start=w0, wall_stop=w1, seconds=t1 - t0, keys=k * steps, late_s=late)


def _hashed_task(ps, cfg):
    """--hashed-breakdown: the 1e6-key pull + push of the hashed line again (same pool of
    keys, already in the table), from worker A against the remote shard, ``reps`` times;
    returns the seconds of each pull and push, timed as in :func:`_core_task`."""
    import time

    import numpy as np

    pc = ps._client
    rng = np.random.default_rng(cfg["seed"])
    B = 1 - cfg["local_shard"]
    pool = np.unique(rng.integers(0, 2**62, size=cfg["sparse_pool"], dtype=np.int64))
    plan, _ = pc.spec("sparse").partitioner.plan(pool)
    keys_b = plan.local[plan.shard_slice(B)].copy()
    _collect_timers()  # reset: the pool's plan is not timed
    k = cfg["k"]
    upd = np.ones(k, np.float32)
    out = []
    for _ in range(cfg["reps"]):
        keys = keys_b[_distinct(rng, keys_b.shape[0], k, cfg["order"])]
        ps.clock()
        pc.wait(ps.job)
        t0 = time.perf_counter()
        ps.pull("sparse", keys)
        t1 = time.perf_counter()
        ps.push("sparse", keys, upd)
        ps.clock()
        pc.wait(ps.job)
        out.append((t1 - t0, time.perf_counter() - t1))
    return out


def _paired_task(ps, cfg):
    """One round of the paired headline: a 1e6-key pull + push of the dense and of the hashed
    table from worker A against the remote shard (each after one untimed pull + push, as
    every new task's first call sets up its connections and snapshot store); returns
    ``{table: (pull s, push s)}``, timed as in :func:`_core_task`."""
    import time

    import numpy as np

    pc = ps._client
    rng = np.random.default_rng(cfg["seed"])
    B = 1 - cfg["local_shard"]
    k = cfg["k"]
    pool = np.unique(np.random.default_rng(cfg["pool_seed"]).integers(
        0, 2**62, size=cfg["sparse_pool"], dtype=np.int64))
    plan, _ = pc.spec("sparse").partitioner.plan(pool)
    keys_b = plan.local[plan.shard_slice(B)].copy()
    starts = pc.spec("dense").partitioner.starts
    lo, hi = int(starts[B]), int(starts[B + 1])
    upd = np.ones(k, np.float32)
    out = {}
    for table in ("dense", "sparse"):
        for timed in (False, True):
            keys = (lo + _distinct(rng, hi - lo, k, cfg["order"]) if table == "dense"
                    else keys_b[_distinct(rng, keys_b.shape[0], k, cfg["order"])])
            ps.clock()
            pc.wait(ps.job)
            t0 = time.perf_counter()
            ps.pull(table, keys)
            t1 = time.perf_counter()
            ps.push(table, keys, upd)
            ps.clock()
            pc.wait(ps.job)
            out[table] = (t1 - t0, time.perf_counter() - t1)
    return out


class NumpyShard:
    """The bare actor baseline: half of a dense float32 vector, pull and push by offset."""

    def __init__(self, n):
        self.w = np.zeros(n, np.float32)

    def pull(self, keys):
        return self.w[keys]

    def push(self, keys, upd):
        self.w[keys] += upd


def _actor_loop(a0, a1, cfg):
    """The bare actor loop of one task: per step, pull from both actors, then push to both."""
    import time

    import numpy as np

    rng = np.random.default_rng(cfg["seed"])
    k, steps, warm, n, half = cfg["k"], cfg["steps"], cfg["warm"], cfg["rows"], cfg["half"]
    batches = [_distinct(rng, n, k, cfg["order"]) for _ in range(steps + warm)]
    upd = np.full(k, 1e-3, np.float32)

    def step(keys):
        lo = keys < half
        k0, k1 = keys[lo], keys[~lo] - half
        f0, f1 = a0.pull(k0), a1.pull(k1)
        v = np.empty(keys.shape[0], np.float32)
        v[lo], v[~lo] = f0.result(), f1.result()
        g0, g1 = a0.push(k0, upd[lo]), a1.push(k1, upd[~lo])
        g0.result()
        g1.result()
        return v

    for i in range(warm):
        step(batches[i])
    while time.time() < cfg["start_at"]:
        time.sleep(0.0005)
    w0, t0 = time.time(), time.perf_counter()
    late = w0 - cfg["start_at"]
    for i in range(warm, warm + steps):
        step(batches[i])
    t1, w1 = time.perf_counter(), time.time()
    return dict(wall_start=w0, wall_stop=w1, seconds=t1 - t0, keys=k * steps, late_s=late)


def _make_bytes(nbytes, seed):
    return np.random.default_rng(seed).integers(0, 256, size=nbytes, dtype=np.uint8)


def _consume(x):
    return int(x.nbytes)


def _incoming_log(dask_worker):
    return [dict(keys=list(map(str, e["keys"])), start=e["start"], stop=e["stop"],
                 total=e["total"], who=e["who"])
            for e in dask_worker.transfer_incoming_log]


def _worker_env():
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}


# Per-phase timers for --breakdown: wrap dask_ps functions in the worker processes at run time
# (dask_ps itself is not changed). Each wrapper adds ~1 us per call.
_TIMED = [
    ("dask_ps.state.client", "ProcessClient",
     ["pull", "_fetch", "check_update", "clock", "_plan_updates", "_send", "_send_outbox",
      "wait"]),
    ("dask_ps.state.client", "_Snapshot", ["insert"]),
    ("dask_ps.state.client", "_Meanwhile", ["__call__"]),
    ("dask_ps.state.partition", "_Partitioner", ["plan", "complete"]),
    ("dask_ps.state.partition", "KeyPlan", ["expand"]),
    ("dask_ps.state.shard", "Shard", ["pull", "push", "call_now", "_push", "_gather"]),
    ("dask_ps.state.table", "TableShard", ["gather", "apply", "rows"]),
    ("dask_ps.state.transport", "Transport", ["call", "call_many"]),
    ("dask_ps.state.channel", "Channel", ["call"]),
    ("dask_ps.state.channel", "SyncChannel", ["start", "finish"]),
]


def _install_timers(timed):
    import builtins
    import collections
    import functools
    import importlib
    import inspect
    import threading
    import time

    acc = builtins.__dict__.setdefault("_ps_core_timers", collections.defaultdict(
        lambda: [0, 0.0, 0.0]))

    def where():
        th = threading.current_thread()
        if th is threading.main_thread():
            return "loop"
        return "server" if th.name.startswith("dask-ps-channel") else "task"

    def wrap(cls, name):
        f = getattr(cls, name, None)
        if f is None or getattr(f, "_ps_core_timed", False):
            return
        label = f"{cls.__name__}.{name}"
        if inspect.iscoroutinefunction(f):
            @functools.wraps(f)
            async def w(*a, **kw):
                t = time.perf_counter()
                try:
                    return await f(*a, **kw)
                finally:
                    e = acc[(label, where())]
                    e[0] += 1
                    e[1] += time.perf_counter() - t
        else:
            @functools.wraps(f)
            def w(*a, **kw):
                t, c = time.perf_counter(), time.thread_time()
                try:
                    return f(*a, **kw)
                finally:
                    e = acc[(label, where())]
                    e[0] += 1
                    e[1] += time.perf_counter() - t
                    e[2] += time.thread_time() - c  # this thread's CPU time
        w._ps_core_timed = True
        static = isinstance(inspect.getattr_static(cls, name), staticmethod)
        setattr(cls, name, staticmethod(w) if static else w)

    for module, cls_name, names in timed:
        cls = getattr(importlib.import_module(module), cls_name, None)
        if cls is not None:
            for name in names:
                wrap(cls, name)


def _collect_timers():
    import builtins

    acc = builtins.__dict__.get("_ps_core_timers", {})
    out = [(label, thread, n, t, c) for (label, thread), (n, t, c) in acc.items()]
    acc.clear()
    return out


# --------------------------------------------------------------------------------------------
# driver-side measurements
# --------------------------------------------------------------------------------------------
def numpy_copy_times(nbytes, reps):
    """``np.copyto`` of ``nbytes`` (in cache for small sizes, in memory for large ones)."""
    src = np.random.default_rng(0).integers(0, 256, size=nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        out.append(time.perf_counter() - t0)
    return out


def raw_transfer_times(client, src, dst, nbytes, reps):
    """Seconds to move ``nbytes`` of a NumPy array from worker ``src`` to worker ``dst`` with
    Dask's own worker-to-worker transfer.

    A task pinned on ``src`` makes a uint8 array of ``nbytes`` random bytes (incompressible;
    compression is off here anyway); a task pinned on ``dst`` depends on it, so ``dst``'s
    worker fetches it with ``gather_dep`` -> ``get_data_from_worker``: connect (pooled),
    request, the sender serialises, the bytes cross the loopback socket, the receiver
    deserialises, then the "OK" handshake. The receiving worker logs the start and stop of
    exactly that exchange in ``Worker.transfer_incoming_log``; we read ``stop - start`` there
    (not the logged "duration", which is clamped to >= 1 ms). Task scheduling, the producing
    task and the consuming task are outside that window, so this is the cost of the bytes
    alone: the bound a pull or push of the same payload could reach through Dask's comms.
    """
    from distributed import wait

    keys = []
    for r in range(reps + 1):  # first one is a warm-up
        f = client.submit(_make_bytes, nbytes, r, workers=[src], allow_other_workers=False,
                          pure=False)
        wait(f)
        g = client.submit(_consume, f, workers=[dst], allow_other_workers=False, pure=False)
        assert g.result() == nbytes
        keys.append(str(f.key))
        del f, g
    logs = client.run(_incoming_log, workers=[dst])[dst]
    by_key = {}
    for e in logs:
        for key in e["keys"]:
            by_key[key] = e["stop"] - e["start"]
    missing = [key for key in keys if key not in by_key]
    if missing:
        raise RuntimeError(f"no transfer logged for {missing[:3]}")
    return [by_key[key] for key in keys[1:]]


def numpy_ceiling(k, steps, warm, seed, order):
    """The local ceiling of the training loop: one process, ``v = w[keys]; w[keys] += upd``."""
    rng = np.random.default_rng(seed)
    w = np.zeros(TRAIN_ROWS, np.float32)
    batches = [_distinct(rng, TRAIN_ROWS, k, order) for _ in range(steps + warm)]
    upd = np.full(k, 1e-3, np.float32)
    for i in range(warm):
        v = w[batches[i]]
        w[batches[i]] += upd
    t0 = time.perf_counter()
    for i in range(warm, warm + steps):
        keys = batches[i]
        v = w[keys]
        w[keys] += upd
    dt = time.perf_counter() - t0
    assert v.shape == (k,)
    return dict(seconds=dt, keys=k * steps)


def loop_rate(results):
    """Total keys/s of parallel loops: all keys / (last stop - first start)."""
    wall = max(r["wall_stop"] for r in results) - min(r["wall_start"] for r in results)
    return sum(r["keys"] for r in results) / wall, wall


def _source_hash() -> str:
    """SHA-1 of dask_ps's .py files: which code a result was measured on (no git needed)."""
    import hashlib
    import pathlib

    import dask_ps

    root = pathlib.Path(dask_ps.__file__).parent
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _lead(k, steps):
    """Seconds to give the tasks to draw their keys before the common start."""
    return 1.0 + 2.5e-7 * k * steps


# --------------------------------------------------------------------------------------------
def run(args) -> dict:
    import dask
    from distributed import Client, LocalCluster

    import dask_ps
    from dask_ps.cluster import worker_info

    quick = args.quick
    reps = ({1_000: 15, 10_000: 10, 100_000: 5, 1_000_000: 3} if quick else
            {1_000: 41, 10_000: 25, 100_000: 11, 1_000_000: 7})
    reps_1key = 51 if quick else 301
    train_steps = ({10_000: 150, 100_000: 30} if quick else {10_000: 800, 100_000: 120})
    train_warm = 5
    rounds = args.rounds or (2 if quick else 3)
    t_start = time.perf_counter()
    if args.tuned_malloc:
        # Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also turns
        # off glibc's adaptive mmap threshold: every allocation >= 128 KiB is then a fresh
        # mmap, page-faulted on first touch and unmapped on free. This A/B switch keeps
        # large temporaries on the heap instead.
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 1 << 30,
                         "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 1 << 25})

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, worker_dashboard_address=None)
    client = Client(cluster)
    workers = sorted(worker_info(client))
    A, B = workers
    res = dict(config=dict(quick=quick, tuned_malloc=args.tuned_malloc,
                           key_order=args.key_order, ks=KS,
                           reps={str(k): v for k, v in reps.items()},
                           reps_1key=reps_1key, dense_rows=DENSE_ROWS, sparse_pool=SPARSE_POOL,
                           train_rows=TRAIN_ROWS, train_steps={str(k): v for k, v in
                                                              train_steps.items()},
                           train_rounds=rounds,
                           workers=workers, worker_env=client.run(_worker_env)[A],
                           python=sys.version.split()[0], numpy=np.__version__,
                           machine=platform.machine(), cpus=os.cpu_count(),
                           dask_ps=dask_ps.__version__, dask_ps_sources=_source_hash(),
                           loadavg_start=os.getloadavg()[0]))
    try:
        model = dask_ps.PSModel(client)
        model.add_table("dense", shape=(DENSE_ROWS,), dtype="float32", optimizer="add")
        model.add_table("sparse", shape=(None,), partitioner="hash", optimizer="add")
        local_shard = [r.address for r in model.shards].index(A)
        assert [r.address for r in model.shards][1 - local_shard] == B

        # ---- 1 + 2: pull / push throughput, 1-key overhead ------------------------------
        print(f"[{time.perf_counter() - t_start:5.1f}s] pull/push throughput ...", flush=True)
        cfg = dict(seed=1, local_shard=local_shard, sparse_pool=SPARSE_POOL, ks=KS,
                   reps={str(k): v for k, v in reps.items()}, reps_1key=reps_1key,
                   warm_ks=[1_000, 100_000, 1_000_000], order=args.key_order,
                   pool_batches=args.pool_batches)
        [core] = model.run(_core_task, [cfg], consistency="asp", workers=[A])

        # ---- 3: bounds -------------------------------------------------------------------
        print(f"[{time.perf_counter() - t_start:5.1f}s] bounds (numpy copy, raw transfer) ...",
              flush=True)
        bounds = {}
        for k in [1] + KS:
            nbytes = k * ITEM_BYTES
            r = max(5, reps.get(k, reps_1key // 5))
            bounds[k] = dict(
                nbytes=nbytes,
                numpy_copy=numpy_copy_times(nbytes, max(r, 21)),
                # B -> A, the direction of a pulled value; the other way behaves the same
                raw_transfer=raw_transfer_times(client, B, A, nbytes, r),
            )

        # ---- 3b: the headline ratio, paired ------------------------------------------------
        # Rounds of (ours, then 2 raw transfers), seconds apart: each ratio compares
        # measurements taken under the same load (the machine is shared: the raw transfer
        # alone drifted from 8.5 to 19 ms between runs), the summary takes the median.
        print(f"[{time.perf_counter() - t_start:5.1f}s] paired headline ...", flush=True)
        paired = []
        for r in range(PAIRED_ROUNDS[quick]):
            [ours] = model.run(_paired_task, [dict(cfg, k=KS[-1], seed=500 + r, pool_seed=1)],
                               consistency="asp", workers=[A])
            paired.append(dict(ours=ours, raw=raw_transfer_times(client, B, A,
                                                                 KS[-1] * ITEM_BYTES, 2)))

        # ---- 4: training-shaped loop -------------------------------------------------------
        print(f"[{time.perf_counter() - t_start:5.1f}s] training loops ...", flush=True)
        model.add_table("big", shape=(TRAIN_ROWS,), dtype="float32", optimizer="add")
        half = int(model.specs["big"].partitioner.starts[1])
        actor_futs = [client.submit(NumpyShard, n, actor=True, workers=[w],
                                    allow_other_workers=False)
                      for n, w in ((half, A), (TRAIN_ROWS - half, B))]
        client.gather(actor_futs)
        train = {k: [] for k in ([] if args.no_train else TRAIN_KS)}
        # Rounds of (dask_ps loop, actor loop, NumPy ceiling) back to back, so that each
        # ratio compares runs seconds apart; the summary takes the median over rounds.
        for r in range(0 if args.no_train else rounds):
            for k in TRAIN_KS:
                steps = train_steps[k]
                base = dict(k=k, steps=steps, warm=train_warm, rows=TRAIN_ROWS,
                            order=args.key_order)
                start_at = time.time() + _lead(k, steps)
                ps_res = model.run(_train_task, [dict(base, seed=100 + 10 * r + t,
                                                      start_at=start_at) for t in range(2)],
                                   consistency="asp", workers=[A, B])
                start_at = time.time() + _lead(k, steps)
                actor_res = client.gather([
                    client.submit(_actor_loop, *actor_futs,
                                  dict(base, seed=200 + 10 * r + t, half=half,
                                       start_at=start_at),
                                  workers=[w], allow_other_workers=False, pure=False)
                    for t, w in enumerate((A, B))])
                ceiling = numpy_ceiling(k, steps, train_warm, seed=300 + r,
                                        order=args.key_order)
                train[k].append(dict(ps=ps_res, actor=actor_res, ceiling=ceiling,
                                     loadavg=os.getloadavg()[0]))
        del actor_futs

        # ---- optional: where the time of a training step goes ------------------------------
        breakdown = None
        if args.breakdown and not args.no_train:
            print(f"[{time.perf_counter() - t_start:5.1f}s] breakdown (timers) ...", flush=True)
            breakdown = {}
            client.run(_install_timers, _TIMED)
            for k in TRAIN_KS:
                steps = max(20, train_steps[k] // 4)
                client.run(_collect_timers)
                start_at = time.time() + _lead(k, steps)
                base = dict(k=k, steps=steps, warm=0, rows=TRAIN_ROWS, start_at=start_at,
                            order=args.key_order)
                out = model.run(_train_task, [dict(base, seed=400 + t) for t in range(2)],
                                consistency="asp", workers=[A, B])
                timers = client.run(_collect_timers)
                breakdown[k] = dict(
                    steps=steps, step_ms=[r["seconds"] / steps * 1e3 for r in out],
                    timers={("A" if w == A else "B"): [(lbl, th, n / steps, t / steps * 1e3)
                                                        for lbl, th, n, t, _ in v]
                            for w, v in timers.items()})
        hashed = None
        if args.hashed_breakdown:
            print(f"[{time.perf_counter() - t_start:5.1f}s] hashed breakdown (timers) ...",
                  flush=True)
            reps_h = 3 if quick else 7
            client.run(_install_timers, _TIMED)
            client.run(_collect_timers)
            [times] = model.run(_hashed_task, [dict(cfg, k=KS[-1], reps=reps_h)],
                                consistency="asp", workers=[A])
            timers = client.run(_collect_timers)
            hashed = dict(reps=reps_h, pull_ms=[p * 1e3 for p, _ in times],
                          push_ms=[q * 1e3 for _, q in times],
                          timers={("A" if w == A else "B"): [
                              (lbl, th, n / reps_h, t / reps_h * 1e3, c / reps_h * 1e3)
                              for lbl, th, n, t, c in v] for w, v in timers.items()})
        stats = model.stats()
        model.close()
    finally:
        client.close()
        cluster.close()
    res["elapsed_s"] = time.perf_counter() - t_start
    res["config"]["loadavg_end"] = os.getloadavg()[0]
    res["raw"] = dict(core=core, bounds={str(k): v for k, v in bounds.items()},
                      train={str(k): v for k, v in train.items()}, shard_stats=stats)
    res["raw"]["paired"] = paired
    res["summary"] = summarise(core, bounds, train, paired)
    if breakdown is not None:
        res["breakdown"] = {str(k): v for k, v in breakdown.items()}
    if hashed is not None:
        res["hashed_breakdown"] = hashed
    return res


def summarise(core, bounds, train, paired=()) -> dict:
    rows = []
    for entry in core["throughput"]:
        k = entry["k"]
        nbytes = k * ITEM_BYTES
        raw = _median(bounds[k]["raw_transfer"])
        cp = _median(bounds[k]["numpy_copy"])
        for op in ("pull", "push"):
            t = _median(entry[op])
            # the bound of a local-shard call is a memory copy; of a remote one, a transfer
            bound = cp if entry["side"] == "local" else raw
            rows.append(dict(table=entry["table"], side=entry["side"], op=op, k=k,
                             median_ms=t * 1e3, keys_per_s=k / t, mb_per_s=nbytes / t / MB,
                             bound="numpy copy" if entry["side"] == "local" else "raw transfer",
                             bound_mb_per_s=nbytes / bound / MB, vs_bound=bound / t,
                             vs_raw_transfer=raw / t))
    overhead = {side: {op: _median(v) * 1e6 for op, v in d.items()}
                for side, d in core["overhead"].items()}
    bnd = {k: dict(nbytes=b["nbytes"],
                   numpy_copy_ms=_median(b["numpy_copy"]) * 1e3,
                   numpy_copy_mb_per_s=b["nbytes"] / _median(b["numpy_copy"]) / MB,
                   raw_transfer_ms=_median(b["raw_transfer"]) * 1e3,
                   raw_transfer_mb_per_s=b["nbytes"] / _median(b["raw_transfer"]) / MB)
           for k, b in bounds.items()}
    # The headline ratio: 1e6-key pull + push against the remote dense shard, against raw
    # transfers of the same bytes (one transfer of K*12 bytes per call).
    headline = {}
    for table in ("dense", "sparse"):
        big = next(e for e in core["throughput"]
                   if e["table"] == table and e["side"] == "remote" and e["k"] == KS[-1])
        ours = _median(big["pull"]) + _median(big["push"])
        raw = 2 * _median(bounds[KS[-1]]["raw_transfer"])
        headline[table] = dict(k=KS[-1], ours_s=ours, raw_s=raw, ratio=raw / ours,
                               target=HEADLINE_TARGET[table])
        if paired:  # per round: the 2 raw transfers of the round over ours
            ratios = sorted(sum(p["raw"]) / sum(p["ours"][table]) for p in paired)
            q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            med = _median(ratios)
            headline[table]["paired"] = dict(rounds=len(ratios), median=med, q1=q1, q3=q3,
                                             ratios=ratios,
                                             ours_ms=[sum(p["ours"][table]) * 1e3
                                                      for p in paired],
                                             raw_ms=[sum(p["raw"]) * 1e3 for p in paired])
    trn = {}
    for k, rounds in train.items():
        per = []
        for t in rounds:
            ps_rate, _ = loop_rate(t["ps"])
            actor_rate, _ = loop_rate(t["actor"])
            ceil = t["ceiling"]["keys"] / t["ceiling"]["seconds"]
            per.append(dict(ps=ps_rate, actor=actor_rate, ceiling=ceil,
                            ps_vs_ceiling=ps_rate / ceil, actor_vs_ceiling=actor_rate / ceil,
                            ps_vs_actor=ps_rate / actor_rate))
        med = {key: _median([p[key] for p in per]) for key in per[0]}
        trn[k] = dict(ps_keys_per_s=med["ps"], actor_keys_per_s=med["actor"],
                      ceiling_keys_per_s=med["ceiling"], ps_vs_ceiling=med["ps_vs_ceiling"],
                      actor_vs_ceiling=med["actor_vs_ceiling"], ps_vs_actor=med["ps_vs_actor"],
                      rounds=per, target=0.5 if k >= 100_000 else 0.25,
                      ps_step_ms=[r["seconds"] / (r["keys"] / k) * 1e3
                                  for t in rounds for r in t["ps"]],
                      actor_step_ms=[r["seconds"] / (r["keys"] / k) * 1e3
                                     for t in rounds for r in t["actor"]],
                      max_late_start_s=max(r["late_s"] for t in rounds
                                           for r in t["ps"] + t["actor"]))
    return dict(throughput=rows, overhead_us=overhead,
                bounds={str(k): v for k, v in bnd.items()}, headline=headline,
                train={str(k): v for k, v in trn.items()})


def across_runs(results: list) -> dict:
    """The headline ratios of several runs (:func:`run`'s results, each on a cluster of its
    own), per table: each run's paired median and unpaired ratio, their median over the
    runs, range, and how many runs meet the target. On a shared machine one run's figure
    moves by several points with the minute's load; the spread over runs says how steady a
    line is."""
    out = {}
    for table in results[0]["summary"]["headline"]:
        heads = [r["summary"]["headline"][table] for r in results]
        target = heads[0]["target"]
        entry = dict(target=target, runs=len(heads))
        for kind, values in (("paired", [h["paired"]["median"] for h in heads
                                         if "paired" in h]),
                             ("unpaired", [h["ratio"] for h in heads])):
            if values:
                entry[kind] = dict(ratios=values, median=statistics.median(values),
                                   min=min(values), max=max(values),
                                   met=sum(v >= target for v in values))
        out[table] = entry
    return out


def report_across(across: dict) -> str:
    """:func:`across_runs` as text."""
    lines = [f"Across {next(iter(across.values()))['runs']} runs (each on a cluster of its "
             f"own), the 1e6-key remote pull + push against 2 raw transfers:"]
    for table, e in across.items():
        for kind in ("paired", "unpaired"):
            if kind in e:
                k = e[kind]
                each = ", ".join(f"{v:.1%}" for v in k["ratios"])
                lines.append(f"   {table:6} {kind:8}: median {k['median']:5.1%}, range "
                             f"{k['min']:5.1%}-{k['max']:5.1%}, {k['met']} of {e['runs']} runs "
                             f">= {e['target']:.0%}  ({each})")
    return "\n".join(lines)


def _si(x):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:6.2f}{unit}"
    return f"{x:6.1f} "


def report(res) -> str:
    s = res["summary"]
    lines = []
    add = lines.append
    c = res["config"]
    add(f"dask_ps core benchmark  (LocalCluster 2 procs x 1 thread, {c['cpus']} CPUs, "
        f"python {c['python']}, numpy {c['numpy']}, {'quick' if c['quick'] else 'full'} run, "
        f"{res['elapsed_s']:.0f} s, 1-min load {c['loadavg_start']:.2f} -> "
        f"{c['loadavg_end']:.2f};")
    add(f"  worker env {c['worker_env'] or '{}'}; dask_ps sources {c['dask_ps_sources']})")
    add("")
    add("1. Pull / push from a task on worker A  (payload = 8 B key + 4 B float32 per key; "
        "medians; push = push + clock + delivery;")
    add("   bound = NumPy copy of the payload for the local shard, raw Dask worker-to-worker "
        "transfer of it for the remote one)")
    add(f"{'table':7} {'shard':7} {'op':5} {'K':>8} {'median ms':>10} {'keys/s':>9} "
        f"{'MB/s':>8} {'bound MB/s':>11} {'% bound':>8} {'% raw xfer':>11}")
    for r in s["throughput"]:
        add(f"{r['table']:7} {r['side']:7} {r['op']:5} {r['k']:>8} {r['median_ms']:>10.3f} "
            f"{_si(r['keys_per_s']):>9} {r['mb_per_s']:>8.1f} {r['bound_mb_per_s']:>11.1f} "
            f"{r['vs_bound']:>8.1%} {r['vs_raw_transfer']:>11.1%}")
    add("")
    raw1 = s["bounds"]["1"]["raw_transfer_ms"] * 1e3
    add(f"2. Per-call overhead, 1 key, dense table (median us; raw Dask transfer of 12 bytes: "
        f"{raw1:.0f} us)")
    for side, d in s["overhead_us"].items():
        add(f"   {side:7} pull {d['pull']:8.0f} us    push+clock+delivery {d['push']:8.0f} us")
    add("")
    add("3. Bounds for the same bytes (medians)")
    add(f"{'K':>8} {'bytes':>10} {'numpy copy ms':>14} {'MB/s':>9} {'raw xfer ms':>12} "
        f"{'MB/s':>8}")
    for k, b in s["bounds"].items():
        add(f"{k:>8} {b['nbytes']:>10} {b['numpy_copy_ms']:>14.4f} "
            f"{b['numpy_copy_mb_per_s']:>9.0f} {b['raw_transfer_ms']:>12.3f} "
            f"{b['raw_transfer_mb_per_s']:>8.1f}")
    for table, h in s["headline"].items():
        ok = "MET" if h["ratio"] >= h["target"] else "MISSED"
        add(f"   1e6-key pull+push, remote shard, {table:6}: ours {h['ours_s'] * 1e3:6.1f} ms vs "
            f"2 raw transfers {h['raw_s'] * 1e3:5.1f} ms -> ratio {h['ratio']:5.1%} "
            f"(target >= {h['target']:.0%}: {ok})")
    dense, sparse = s["headline"]["dense"], s["headline"]["sparse"]
    add(f"   sparse / dense time of the 1e6-key pull+push (same run; steadier than either "
        f"ratio on a loaded machine): {sparse['ours_s'] / dense['ours_s']:.2f}x")
    for table, h in s["headline"].items():
        if "paired" not in h:
            continue
        pr = h["paired"]
        ok = "MET" if pr["median"] >= h["target"] else "MISSED"
        add(f"   paired, {table:6}: median ratio {pr['median']:5.1%} (quartiles "
            f"{pr['q1']:5.1%}-{pr['q3']:5.1%}) over {pr['rounds']} rounds of (ours, then 2 raw "
            f"transfers) (target >= {h['target']:.0%}: {ok})")
        add(f"      ours ms {', '.join(f'{x:.1f}' for x in pr['ours_ms'])}; 2 raw transfers "
            f"ms {', '.join(f'{x:.1f}' for x in pr['raw_ms'])}")
    add("")
    if not s["train"]:
        add("4. Training-shaped loop: skipped (--no-train)")
    else:
        add("4. Training-shaped loop: 2 tasks (A, B), 2 shards, dense float32 1e7 rows, per "
            "step pull K + push K + clock (ASP);")
        add(f"   medians over {c.get('train_rounds', 1)} rounds of (dask_ps, actor, ceiling) "
            f"run back to back")
        add(f"{'K':>8} {'ceiling keys/s':>15} {'dask_ps keys/s':>15} {'ratio':>6} "
            f"{'target':>7} {'actor keys/s':>13} {'ratio':>6} {'ps/actor':>9}")
    for k, t in s["train"].items():
        ok = "MET" if t["ps_vs_ceiling"] >= t["target"] else "MISSED"
        add(f"{k:>8} {_si(t['ceiling_keys_per_s']):>15} {_si(t['ps_keys_per_s']):>15} "
            f"{t['ps_vs_ceiling']:>6.1%} {'>=' + format(t['target'], '.0%'):>7} "
            f"{_si(t['actor_keys_per_s']):>13} {t['actor_vs_ceiling']:>6.1%} "
            f"{t['ps_vs_actor']:>8.2f}x  [{ok}]")
    for k, t in s["train"].items():
        add(f"   K={k}: dask_ps/ceiling per round "
            f"{', '.join(format(r['ps_vs_ceiling'], '.1%') for r in t['rounds'])}; "
            f"actor/ceiling "
            f"{', '.join(format(r['actor_vs_ceiling'], '.1%') for r in t['rounds'])}")
        add(f"   K={k}: ms/step per task: dask_ps "
            f"{', '.join(f'{x:.2f}' for x in t['ps_step_ms'])}; actor "
            f"{', '.join(f'{x:.2f}' for x in t['actor_step_ms'])}; ceiling "
            f"{int(k) / t['ceiling_keys_per_s'] * 1e3:.3f}")
        if t["max_late_start_s"] > 0.05:
            add(f"   (warning: a loop started {t['max_late_start_s']:.2f} s after the common "
                f"start; the wall time includes that skew)")
    if "breakdown" in res:
        add("")
        add("5. Where a training step goes (--breakdown; timers wrapped around dask_ps "
            "functions in the workers; ms per step, inclusive; [task] = task thread, "
            "[server] = a shard's channel thread serving the other worker, "
            "[loop] = worker event loop)")
        for k, b in res["breakdown"].items():
            add(f"   K={k}: {b['steps']} steps, ms/step per task (with timers) "
                f"{', '.join(f'{x:.2f}' for x in b['step_ms'])}")
            for w, rows in sorted(b["timers"].items()):
                for lbl, th, calls, ms in sorted(rows, key=lambda r: -r[3]):
                    add(f"     {w} {ms:8.3f} ms  {calls:5.1f} calls  {lbl} [{th}]")
    if "hashed_breakdown" in res:
        h = res["hashed_breakdown"]
        add("")
        add(f"6. Where the hashed 1e6-key remote pull + push goes (--hashed-breakdown; "
            f"{h['reps']} reps; pull ms {', '.join(f'{x:.1f}' for x in h['pull_ms'])}; "
            f"push ms {', '.join(f'{x:.1f}' for x in h['push_ms'])};")
        add("   ms per pull + push, inclusive: wall, and CPU of the calling thread "
            "(CPU is 0 for coroutines); [task] = task thread, [server] = the shard's channel "
            "thread, [loop] = worker event loop)")
        for w, rows in sorted(h["timers"].items()):
            for lbl, th, calls, ms, cpu in sorted(rows, key=lambda r: -r[3]):
                if ms >= 0.1:
                    add(f"     {w} wall {ms:8.2f} ms  cpu {cpu:8.2f} ms  {calls:5.1f} calls  "
                        f"{lbl} [{th}]")
    return "\n".join(lines)


def main(argv=None) -> int:
    import warnings

    warnings.filterwarnings("ignore", message="Port .* is already in use")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer repeats and steps (< 1 min)")
    p.add_argument("--json", metavar="PATH", help="also write all timings and the summary here")
    p.add_argument("--breakdown", action="store_true",
                   help="then time the phases of a training step (dask_ps functions wrapped "
                        "with timers in the workers)")
    p.add_argument("--hashed-breakdown", action="store_true",
                   help="then time the hashed table's 1e6-key remote pull + push again with "
                        "timers (wall and CPU) on the dask_ps functions of both workers")
    p.add_argument("--tuned-malloc", action="store_true",
                   help="A/B: start the workers with MALLOC_TRIM_THRESHOLD_=1GiB and "
                        "MALLOC_MMAP_THRESHOLD_=32MiB instead of Dask's "
                        "MALLOC_TRIM_THRESHOLD_=64KiB")
    p.add_argument("--rounds", type=int, default=0,
                   help="rounds of the training-loop comparison (default 3, 2 with --quick)")
    p.add_argument("--no-train", action="store_true",
                   help="skip part 4 (the training-shaped loops) and --breakdown")
    p.add_argument("--pool-batches", type=int, default=1,
                   help="create the sparse table's keys in this many pushes of random parts "
                        "(default 1: one push)")
    p.add_argument("--key-order", choices=["random", "sorted"], default="random",
                   help="keys of each call in random order (default) or sorted, as ps-lite "
                        "requires and np.unique gives; distinct either way")
    p.add_argument("--repeat", type=int, default=1,
                   help="run it all this many times, each run on a cluster of its own, then "
                        "give the headline ratios across the runs (default 1)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    results = []
    for i in range(args.repeat):
        if args.repeat > 1:
            print(f"\n=== run {i + 1} of {args.repeat} ===", flush=True)
        results.append(run(args))
        print()
        print(report(results[-1]))
    out = results[0]
    if args.repeat > 1:
        out = dict(runs=results, across=across_runs(results))
        print()
        print(report_across(out["across"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
