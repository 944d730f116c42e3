"""Where a model's shards live: placing them on workers, finding lost ones, replacing them.

A shard is a Dask actor pinned to one worker. The driver keeps the actor's future referenced
for the shard's whole life (Dask releases an actor whose future is dropped). When a worker
leaves, its shards are lost for good (Dask cannot move an actor): :func:`replace_shards` puts
new, empty ones on the live workers holding fewest shards, and the caller restores their rows
(see :mod:`dask_ps.model.recovery`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import distributed

from .. import _compat
from ..cluster import worker_info
from ..exceptions import NoShardWorkerError, WorkerLostError
from ..state.keys import SHARD_PREFIX
from ..state.shard import Shard
from ..state.transport import ShardRef
from . import connection

if TYPE_CHECKING:
    from .core import PSModel

__all__ = ["check_alive", "live_workers", "lost_shards", "place_shards", "replace_shards",
           "shard_workers"]


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


def place_shards(model: PSModel, n_shards: int | None) -> list[ShardRef]:
    """Create the model's shards round-robin over its shard workers.

    Raises
    ------
    ValueError
        No worker (offering the model's resource).
    TimeoutError
        The shards were not created within the model's timeout (at least
        :data:`PLACE_TIMEOUT`).
    """
    workers = shard_workers(model, live_workers(model))
    if not workers:
        raise ValueError(f"no worker offers resource {model._resources!r}" if model._resources
                         else "the cluster has no workers")
    n = int(n_shards or len(workers))
    model._futures = [
        model._client.submit(Shard, i, n, actor=True, workers=[workers[i % len(workers)]],
                             allow_other_workers=False, key=f"{SHARD_PREFIX}{model.uid}-{i}")
        for i in range(n)
    ]
    wait = max(model.timeout, PLACE_TIMEOUT)
    try:
        distributed.wait(model._futures, timeout=wait)
    except distributed.TimeoutError:
        for f in model._futures:
            f.cancel()
        raise TimeoutError(
            f"the {n} shard(s) were not placed on the cluster within {wait:g} s: "
            f"creating a shard takes a worker thread, and none was free. A fit inside a Dask "
            f"task whose fellow tasks hold every worker thread waits for ever: use client="
            f"'local' (or no client) there, or more worker threads") from None
    actors = model._client.gather(model._futures)
    channels = [a.open_channel() for a in actors]
    return [ShardRef(i, _compat.actor_address(a), f.key, c.result(timeout=model.timeout))
            for i, (a, f, c) in enumerate(zip(actors, model._futures, channels))]


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
    connection.forget(model.uid)
    try:
        model._client.run(connection.forget, model.uid)
    except Exception:  # a worker leaving meanwhile keeps only stale, unused clients
        pass
    return placed
