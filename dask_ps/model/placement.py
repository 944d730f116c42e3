"""Where a model's shards live: placing them on workers, finding lost ones, replacing them.

A shard is a Dask actor pinned to one worker. The driver keeps the actor's future referenced
for the shard's whole life (Dask releases an actor whose future is dropped). When a worker
leaves, its shards are lost for good (Dask cannot move an actor): :func:`replace_shards` puts
new, empty ones on the live workers holding fewest shards, and the caller restores their rows
(see :mod:`dask_ps.model.recovery`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import distributed

from .. import _compat
from ..cluster import worker_info
from ..exceptions import MemoryLimitError, NoShardWorkerError, WorkerLostError
from ..state.keys import SHARD_PREFIX
from ..state.shard import Shard
from ..state.table import FIRST_ROWS, TableSpec, dense_table_bytes
from ..state.transport import ShardRef
from . import connection

if TYPE_CHECKING:
    from .core import PSModel

__all__ = ["check_alive", "check_room", "live_workers", "lost_shards", "place_shards",
           "replace_shards", "shard_workers"]


def live_workers(model: PSModel) -> dict:
    """The scheduler's workers, by address, asked now; remembered as seen by the model."""
    info = worker_info(model._client)
    model._seen_workers.update(info)
    return info


def shard_workers(model: PSModel, info: dict) -> list[str]:
    """Addresses (sorted) of the workers of ``info`` that may hold shards: all, or those
    offering the model's ``resources``."""
    res = model._resources
    return sorted(a for a, w in info.items()
                  if res is None or w.get("resources", {}).get(res, 0) > 0)


#: Seconds :func:`place_shards` waits for the shards to be created, at least: a worker's
#: first shard imports the library and loads its kernels (seconds on a slow machine).
PLACE_TIMEOUT = 120.0
#: Seconds between :func:`place_shards`'s looks at whether a worker it placed a shard on
#: left (the shard would wait for it until the timeout).
PLACE_POLL = 1.0
GIB = 2.0**30


def place_shards(model: PSModel, n_shards: int | None) -> list[ShardRef]:
    """Create the model's shards round-robin over its shard workers.

    Raises
    ------
    ValueError
        No worker (offering the model's resource).
    WorkerLostError
        A worker given a shard left the cluster before the shard was created (a loss: a
        fit's set-up or recovery starts again on the workers left).
    TimeoutError
        The shards were not created within the model's timeout (at least
        :data:`PLACE_TIMEOUT`).
    """
    workers = shard_workers(model, live_workers(model))
    if not workers:
        raise ValueError(f"no worker offers resource {model._resources!r}" if model._resources
                         else "the cluster has no workers")
    n = int(n_shards or len(workers))
    where = [workers[i % len(workers)] for i in range(n)]
    model._futures = [
        model._client.submit(Shard, i, n, actor=True, workers=[w], allow_other_workers=False,
                             key=f"{SHARD_PREFIX}{model.uid}-{i}")
        for i, w in enumerate(where)
    ]
    wait = max(model.timeout, PLACE_TIMEOUT)
    deadline = time.monotonic() + wait
    while True:
        try:
            distributed.wait(model._futures, timeout=max(0.01, min(
                PLACE_POLL, deadline - time.monotonic())))
            break
        except distributed.TimeoutError:
            # a shard bound to a worker that left would wait for it for ever
            gone = set(where) - set(live_workers(model))
            if not gone and time.monotonic() < deadline:
                continue
            for f in model._futures:
                f.cancel()
            if gone:
                raise WorkerLostError(gone, [i for i, w in enumerate(where) if w in gone]
                                      ) from None
            raise TimeoutError(
                f"the {n} shard(s) were not placed on the cluster within {wait:g} s: "
                f"creating a shard takes a worker thread, and none was free. A fit inside a "
                f"Dask task whose fellow tasks hold every worker thread waits for ever: use "
                f"client='local' (or no client) there, or more worker threads") from None
    actors = model._client.gather(model._futures)
    channels = [a.open_channel() for a in actors]
    return [ShardRef(i, _compat.actor_address(a), f.key, c.result(timeout=model.timeout))
            for i, (a, f, c) in enumerate(zip(actors, model._futures, channels))]


def check_room(model: PSModel, spec: TableSpec) -> None:
    """Refuse table ``spec`` before it is created when the model's tables would not fit in
    its shards' memory: on a cluster, the bytes of every table's shards (see
    :meth:`~dask_ps.state.table.TableSpec.shard_bytes`) on the most loaded worker above the
    fraction of the smallest shard worker's memory limit at which Dask restarts a worker
    (``distributed.worker.memory.terminate``, 95%; a lost shard may be recreated on any of
    them); in-process, all of them above what this process may use
    (:func:`~dask_ps.partitions.worker.process_memory`). Workers without a limit are not
    checked. A sparse table counts its first rows only: it grows with its keys.

    Raises
    ------
    MemoryLimitError
        A :class:`MemoryError` naming the table, its bytes and their factors, the shards,
        the bytes per shard and the memory limit.
    """
    import dask

    from ..partitions.worker import process_memory, smallest_limit

    specs = [*model.specs.values(), spec]
    if model.is_local:
        limit = cap = process_memory()
        room = f"what this process may use, {limit / GIB:.2f} GiB (in-process shards)"
        load = {"this process": sum(s.shard_bytes(r.index) for s in specs
                                    for r in model.shards)}
    else:
        limit = smallest_limit(model._client, {r.address for r in model.shards})
        fraction = dask.config.get("distributed.worker.memory.terminate", 0.95) or 1.0
        cap = int(limit * fraction)
        room = (f"{fraction:.0%} of the smallest shard worker memory limit "
                f"({limit / GIB:.2f} GiB), where Dask restarts a worker")
        load: dict[str, int] = {}
        for r in model.shards:
            load[r.address] = load.get(r.address, 0) + sum(s.shard_bytes(r.index)
                                                            for s in specs)
    where = max(load, key=load.get)
    if limit <= 0 or load[where] <= cap:
        return
    sizes = [spec.shard_bytes(r.index) for r in model.shards]
    row = dense_table_bytes(1, spec.ncols, spec.dtype, spec.optimizer)
    what = (f"{spec.n_rows} rows" if not spec.sparse else
            f"its first {FIRST_ROWS} rows per shard (a hashed table grows with its keys)")
    others = " with the model's other tables" if len(specs) > 1 else ""
    raise MemoryLimitError(
        f"table {spec.name!r} would take {sum(sizes):,} bytes ({sum(sizes) / GIB:.2f} GiB): "
        f"{what} x {spec.ncols} {spec.dtype} columns, with the state of optimizer "
        f"{spec.optimizer.name!r} ({row:,} bytes a row), over "
        f"{model.n_shards} shard(s) of up to {max(sizes):,} bytes; {load[where] / GIB:.2f} "
        f"GiB on {'worker ' if not model.is_local else ''}{where}{others}, more than "
        f"{room}: use fewer rows or columns, a smaller dtype, partitioner='hash' for sparse "
        f"keys, or more workers or memory")


def lost_shards(model: PSModel) -> list[int]:
    """Indices of the shards whose worker has left the cluster (none in-process)."""
    if model.is_local:
        return []
    live = live_workers(model)
    return [r.index for r in model.shards if r.address not in live]


def check_alive(model: PSModel, needed: set[str]) -> None:
    """Raise :class:`WorkerLostError` if a worker of ``needed`` has left the cluster."""
    gone = needed - set(live_workers(model))
    if gone:
        raise WorkerLostError(gone, [r.index for r in model.shards if r.address in gone])


def replace_shards(model: PSModel, lost: list[int]) -> list[str]:
    """New, empty actors for shards ``lost`` on the live workers holding fewest shards;
    returns their addresses. Every process then reconnects (the generation changes).

    Raises
    ------
    NoShardWorkerError
        No live worker can host them (a ValueError).
    """
    live = shard_workers(model, live_workers(model))
    if not live:
        raise NoShardWorkerError(model._resources, "the lost shards")
    load = {a: 0 for a in live}
    for r in model.shards:
        if r.index not in lost and r.address in load:
            load[r.address] += 1
    model._generation += 1
    placed = []
    for i in lost:
        addr = min(live, key=lambda a: (load[a], a))
        load[addr] += 1
        fut = model._client.submit(Shard, i, model.n_shards, actor=True, workers=[addr],
                                   allow_other_workers=False,
                                   key=f"{SHARD_PREFIX}{model.uid}-{i}-g{model._generation}")
        actor = fut.result(timeout=model.timeout)
        model._futures[i].release()
        model._futures[i] = fut  # kept referenced for the shard's life
        channel = actor.open_channel().result(timeout=model.timeout)
        address = _compat.actor_address(actor)
        model.shards[i] = ShardRef(i, address, fut.key, channel)
        placed.append(address)
    connection.forget(model.uid, replaced=True)
    try:
        model._client.run(connection.forget, model.uid, replaced=True)
    except Exception:  # a worker leaving meanwhile keeps only stale, unused clients
        pass
    return placed
