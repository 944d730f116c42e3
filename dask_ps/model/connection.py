"""How a process reaches a model's shards: one :class:`ProcessClient` per model and process.

The driver, and every worker process that runs a task of the model, holds one
:class:`~dask_ps.state.client.ProcessClient` per model: the transport to the shards (direct
calls to a shard living in the same process, channels or Dask's RPC to the others), the
snapshot of pulled values its tasks share, and their buffered pushes. They are kept here by
(model uid, shard generation, worker address); the generation changes when lost shards are
replaced, so that every process reconnects to the new ones.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import TYPE_CHECKING

import numpy as np

from .. import _compat
from ..exceptions import ClosedModelError
from ..state.client import ProcessClient
from ..state.shard import Shard
from ..state.transport import Transport, local_loop

if TYPE_CHECKING:
    from .core import PSModel

__all__ = ["call_all", "call_each", "current_client", "forget", "local_shards",
           "process_client"]

# ProcessClients of this process, by (model uid, generation, worker address or "" outside
# workers).
_CLIENTS: dict[tuple[str, int, str], ProcessClient] = {}
# Shards of in-process models (no cluster), by model uid.
_LOCAL_SHARDS: dict[str, list[Shard]] = {}
LOCK = threading.Lock()


def current_client():
    """The current Dask client, or None."""
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def default_cluster():
    """The client a model uses when given none: the current Dask client, or None (shards in
    this process). None inside a Dask worker process too: a fit there runs in a task (as
    joblib's "dask" backend runs each fit of a GridSearchCV), and shards and tasks of its
    own on that cluster would wait for worker threads its fellow fits hold (a deadlock
    when every thread runs one); it trains in its task instead."""
    if _compat.current_worker() is not None:
        return None
    return current_client()


def local_shards(uid: str, n: int) -> list[Shard]:
    """Create the ``n`` in-process shards of model ``uid``."""
    shards = _LOCAL_SHARDS[uid] = [Shard(i, n) for i in range(n)]
    return shards


def forget(uid: str, replaced: bool = False) -> None:
    """Drop this process's connections to model ``uid`` (run on every worker at close, and,
    ``replaced``, when lost shards were replaced): a task still holding one gets a
    :class:`~dask_ps.exceptions.ClosedModelError` at its next call."""
    why = (f"PSModel {uid}: its lost shards were replaced, and this connection to the old "
           f"ones closed (a job started after the recovery connects anew)" if replaced else
           f"PSModel {uid} is closed")
    with LOCK:
        for key in [k for k in _CLIENTS if k[0] == uid]:
            _CLIENTS.pop(key).close(why)


def drop_local(uid: str) -> None:
    """Free the in-process shards of model ``uid``."""
    _LOCAL_SHARDS.pop(uid, None)


def process_client(model: PSModel) -> ProcessClient:
    """This process's :class:`ProcessClient` of ``model`` (created on first use).

    Raises
    ------
    ClosedModelError
        The model is closed, or the Dask client it was made on (in the driver; tasks get
        the model without its client).
    """
    if model._closed:
        raise ClosedModelError(f"PSModel {model.uid} is closed")
    if model._client is not None and model._client.status in ("closing", "closed"):
        raise ClosedModelError(f"PSModel {model.uid}: the Dask client it was made on "
                               f"({model._client.id}) is closed, and its shards went with "
                               f"it: make a new PSModel on a running client")
    address = ""
    if not model.is_local:
        worker = _compat.current_worker()
        address = worker.address if worker is not None else ""
    key = (model.uid, model._generation, address)
    with LOCK:
        pc = _CLIENTS.get(key)
        if pc is None:
            pc = _CLIENTS[key] = ProcessClient(dict(model.specs), _transport(model, address))
        pc.specs.update(model.specs)
    return pc


def _transport(model: PSModel, address: str) -> Transport:
    if model.is_local:
        # every shard local: tasks call them from their own threads (direct), as a worker's
        # tasks call its own shard; a hop to the loop thread per call cost a GBDT fit of
        # LightGBM's example over a second (2.0 s against 3.3 s, medians of 9, load ~6)
        return Transport(model.shards, local_loop(), dict(enumerate(_LOCAL_SHARDS[model.uid])),
                         None, model.timeout, channels=True)
    if address:
        worker = _compat.current_worker()
        actors = _compat.worker_actors(worker)
        local = {r.index: actors[r.key] for r in model.shards
                 if r.address == address and r.key in actors}
        return Transport(model.shards, _compat.worker_loop(worker), local, worker.rpc,
                         model.timeout, channels=True)
    client = model._client or current_client()
    if client is None:
        raise RuntimeError("this PSModel lives on a Dask cluster: use it in a task or "
                           "with its client active")
    if client.direct_to_workers:
        rpc = client.rpc
    else:
        rpc = functools.partial(_compat.ProxyRPC(), client.scheduler)
    async def alive(address: str) -> bool:
        try:
            return address in await _compat.scheduler_workers_async(client)
        except Exception:  # the scheduler is unreachable: let the call's timeout decide
            return True

    return Transport(model.shards, client.loop.asyncio_loop, {}, rpc, model.timeout,
                     alive=alive)


def call_all(model: PSModel, method: str, *args, **kwargs) -> list:
    """``method(*args, **kwargs)`` on every shard, concurrently; their results in shard
    order."""
    pc = process_client(model)
    return pc.transport.run(pc.transport.call_all(method, *args, **kwargs))


def call_each(model: PSModel, method: str, *args, shards=None, timeout: float = 10.0) -> list:
    """``method`` on each of ``shards`` (default all) concurrently, each bounded by
    ``timeout`` seconds; results or exceptions, in order."""
    t = process_client(model).transport
    shards = range(model.n_shards) if shards is None else shards

    async def each():
        return await asyncio.gather(*(t.call(s, method, *args, _timeout=min(
            model.timeout, timeout)) for s in shards), return_exceptions=True)

    return t.run(each())


def set_rows(model: PSModel, name: str, plan, values, slots: dict) -> None:
    """Overwrite (or create) the rows of ``plan``'s keys (a :class:`KeyPlan` of distinct
    keys) on their shards with ``values`` (m, ncols) and optimizer ``slots`` (m, width
    each), given in the keys' order, bypassing the update rule: checkpoint restores and
    warm starts (see :meth:`~dask_ps.state.table.TableShard.set_rows`)."""

    def arrange(x):
        if plan.identity:
            return x
        out = np.empty_like(x)
        out[plan.inverse] = x
        return out

    values, slots = arrange(values), {k: arrange(v) for k, v in slots.items()}
    t = process_client(model).transport

    async def each():
        return await asyncio.gather(*(
            t.call(s, "load_rows", name, plan.local[plan.shard_slice(s)],
                   values[plan.shard_slice(s)],
                   {k: v[plan.shard_slice(s)] for k, v in slots.items()})
            for s in range(model.n_shards) if plan.offsets[s + 1] > plan.offsets[s]))

    t.run(each())
