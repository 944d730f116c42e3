"""PSModel: named tables sharded over Dask actors, and the driver that runs tasks on them."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import numbers
import threading
import uuid
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, Callable, Iterable

import numpy as np

from . import checkpointing
from .cluster import worker_info
from .diagnostics.events import watch_job
from .exceptions import ClosedModelError, ShardUnavailableError, WorkerLostError
from .state.client import ProcessClient, WorkerView
from .state.consistency import DONE, Consistency, get_consistency
from .state.optimizers import Optimizer, get_optimizer
from .state.shard import Shard
from .state.table import Init, TableSpec
from .state.transport import ShardRef, Transport, local_loop
from .tables import Table

__all__ = ["PSModel", "Table"]  # Table: re-exported from .tables

DEFAULT_TIMEOUT = 120.0
#: Seconds between checks, while a job runs, that its workers and shards are still alive.
WATCH_INTERVAL = 0.5

# ProcessClients of this process, by (model uid, generation, worker address or "" outside
# workers); the generation changes when lost shards are replaced, so every process reconnects.
_CLIENTS: dict[tuple[str, int, str], ProcessClient] = {}
_LOCAL_SHARDS: dict[str, list[Shard]] = {}
_CLIENTS_LOCK = threading.Lock()


def _current_client():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _forget(uid: str) -> None:
    """Drop this process's state of model ``uid`` (run on every worker at close)."""
    with _CLIENTS_LOCK:
        for key in [k for k in _CLIENTS if k[0] == uid]:
            _CLIENTS.pop(key).transport.close()


class PSModel(checkpointing.CheckpointMethods):
    """A parameter server: named tables, sharded over Dask actors, updated by server-side rules.

    Parameters
    ----------
    client : distributed.Client or "local", optional
        Cluster to place the shards on. Default: the current Dask client if there is one;
        otherwise, or with ``"local"``, the shards live in this process (no cluster; same
        results under BSP).
    n_shards : int, optional
        Number of shards. Default: one per worker process (one per ``resources`` worker
        when given), or 1 without a cluster. Shards go round-robin over those workers.
    resources : str, optional
        Place shards only on workers offering this resource (e.g. ``"ps"`` for dedicated
        parameter-server workers started with ``--resources ps=1``).
    timeout : float, default 120
        Seconds before a call to a shard, including a pull waiting for slower clocks, fails
        with :class:`~dask_ps.exceptions.ShardUnavailableError` or ``TimeoutError``.

    Raises
    ------
    ValueError
        ``n_shards`` below 1, or no worker offers ``resources``.

    See Also
    --------
    PSModel.add_table, PSModel.run

    Notes
    -----
    The API follows the parameter servers of Li et al. (OSDI 2014; ps-lite) and Angel (Jiang
    et al., 2018): tables pulled and pushed by key, update rules applied on the servers,
    functions run next to the shards; clocks and bounded staleness follow Ho et al. (NIPS 2013).

    Examples
    --------
    >>> import numpy as np, dask_ps
    >>> model = dask_ps.PSModel("local", n_shards=2)   # no cluster: shards in this process
    >>> w = model.add_table("w", shape=(10,), optimizer="add")
    >>> model.push("w", [1, 1, 7], [1.0, 2.0, 5.0])
    >>> model.pull("w", [1, 7, 0])
    array([3., 5., 0.], dtype=float32)
    >>> model.close()
    """

    def __init__(self, client=None, n_shards: int | None = None, *, resources: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        if n_shards is not None and (not isinstance(n_shards, numbers.Integral)
                                     or isinstance(n_shards, bool) or n_shards < 1):
            raise ValueError(f"n_shards must be a positive integer, got {n_shards!r}")
        if not (isinstance(timeout, numbers.Real) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(client, str) and client != "local":
            raise ValueError(f"client must be a distributed.Client, 'local' or None, "
                             f"got {client!r}")
        if client is not None and not isinstance(client, str) and not hasattr(client,
                                                                               "scheduler_info"):
            raise TypeError(f"client must be a distributed.Client, 'local' or None, "
                            f"got {type(client).__name__}")
        self._job: str | None = None
        self.uid = uuid.uuid4().hex[:12]
        self.timeout = float(timeout)
        self.specs: dict[str, TableSpec] = {}
        if isinstance(client, str) and client == "local":
            self._client = None
        else:
            self._client = client if client is not None else _current_client()
        self._futures = []
        self._closed = False
        self._resources = resources
        self._generation = 0
        self._seen_workers: set[str] = set()
        if self._client is None:
            n = int(n_shards or 1)
            _LOCAL_SHARDS[self.uid] = [Shard(i, n) for i in range(n)]
            self.shards = [ShardRef(i, "local", "") for i in range(n)]
        else:
            self.shards = self._place_shards(n_shards, resources)

    # -- placement ------------------------------------------------------------------------
    def _place_shards(self, n_shards, resources) -> list[ShardRef]:
        info = self._workers_info()
        workers = sorted(a for a, w in info.items()
                         if resources is None or w.get("resources", {}).get(resources, 0) > 0)
        if not workers:
            raise ValueError(f"no worker offers resource {resources!r}" if resources
                             else "the cluster has no workers")
        n = int(n_shards or len(workers))
        self._futures = [
            self._client.submit(Shard, i, n, actor=True, workers=[workers[i % len(workers)]],
                                allow_other_workers=False, key=f"dask-ps-shard-{self.uid}-{i}")
            for i in range(n)
        ]
        # The futures stay referenced for the model's life: Dask drops an unreferenced actor.
        actors = self._client.gather(self._futures)
        channels = [a.open_channel() for a in actors]
        return [ShardRef(i, a._address, f.key, c.result(timeout=self.timeout)) for i, (a, f, c)
                in enumerate(zip(actors, self._futures, channels))]

    @property
    def n_shards(self) -> int:
        """Number of shards holding the tables."""
        return len(self.shards)

    @property
    def client(self):
        """The Dask client the shards live on, or None in-process."""
        return self._client

    @property
    def n_workers(self) -> int:
        """Worker processes that tasks may run on (1 in-process)."""
        if self.is_local:
            return 1
        return len(self._workers_info())

    @property
    def is_local(self) -> bool:
        """Whether the shards live in this process (no Dask client)."""
        return self.shards[0].address == "local"

    def _process_client(self) -> ProcessClient:
        if self._closed:
            raise ClosedModelError(f"PSModel {self.uid} is closed")
        address = ""
        if not self.is_local:
            from distributed import get_worker

            try:
                worker = get_worker()
                address = worker.address
            except ValueError:
                worker = None
        key = (self.uid, self._generation, address)
        with _CLIENTS_LOCK:
            pc = _CLIENTS.get(key)
            if pc is None:
                pc = _CLIENTS[key] = ProcessClient(dict(self.specs), self._transport(address))
            pc.specs.update(self.specs)
        return pc

    def _transport(self, address: str) -> Transport:
        if self.is_local:
            return Transport(self.shards, local_loop(), dict(enumerate(_LOCAL_SHARDS[self.uid])),
                             None, self.timeout)
        if address:
            from distributed import get_worker

            worker = get_worker()
            local = {r.index: worker.state.actors[r.key] for r in self.shards
                     if r.address == address and r.key in worker.state.actors}
            return Transport(self.shards, worker.loop.asyncio_loop, local, worker.rpc,
                             self.timeout, channels=True)
        client = self._client or _current_client()
        if client is None:
            raise RuntimeError("this PSModel lives on a Dask cluster: use it in a task or "
                               "with its client active")
        if client.direct_to_workers:
            rpc = client.rpc
        else:
            from distributed.actor import ProxyRPC

            rpc = functools.partial(ProxyRPC, client.scheduler)
        return Transport(self.shards, client.loop.asyncio_loop, {}, rpc, self.timeout)

    def _call_all(self, method: str, *args) -> list:
        pc = self._process_client()
        return pc.transport.run(pc.transport.call_all(method, *args))

    # -- tables ---------------------------------------------------------------------------
    def add_table(self, name: str, shape, dtype="float32", *, partitioner: str = "range",
                  optimizer: str | Optimizer | None = None, init="zeros",
                  seed: int = 0) -> "Table":
        """Create a table on every shard.

        Parameters
        ----------
        name : str
        shape : int or tuple
            ``(n_rows,)`` for a vector, ``(n_rows, ncols)`` for a matrix. For a sparse table
            (``partitioner="hash"``) ``n_rows`` is ignored: any int64/uint64 key is valid
            (use ``(None, ncols)`` or ``(2**63, ncols)``).
        dtype : {"float32", "float64", "int32", "int64"}, default "float32"
        partitioner : {"range", "hash"}, default "range"
            "range": dense rows cut into contiguous blocks. "hash": sparse, rows created on
            first touch; memory proportional to the keys used.
        optimizer : str or Optimizer, optional
            Server-side update rule: "add" (default; pushes are deltas), "sgd", "adagrad",
            "adam", "ftrl", or an instance with hyper-parameters, e.g. ``FTRL(alpha=0.1)``.
        init : "zeros", "ones", float, ("uniform", low, high) or ("normal", mean, std)
            Value of new rows, a pure function of (key, column, seed).
        seed : int, default 0

        Returns
        -------
        Table

        Raises
        ------
        ValueError
            Duplicate name, bad shape/dtype/partitioner/init, unknown optimizer, or a
            float-only optimizer on an integer table.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a table name must be a non-empty string, got {name!r}")
        if self._job is not None:
            raise RuntimeError(f"cannot add table {name!r} while job {self._job!r} runs: "
                               f"add tables before PSModel.run, from the driver")
        if name in self.specs:
            raise ValueError(f"the model already has a table {name!r}")
        opt = get_optimizer(optimizer)
        spec = TableSpec.build(name, shape, dtype, partitioner, opt, Init.parse(init, seed),
                               self.n_shards)
        self._call_all("create_table", spec)
        self.specs[name] = spec
        return Table(self, spec)

    def table(self, name: str) -> "Table":
        """The handle of table ``name``; raises :class:`UnknownTableError` if absent."""
        return Table(self, self._process_client().spec(name))

    @property
    def tables(self) -> list[str]:
        """Names of the tables, in order of creation."""
        return list(self.specs)

    def pull(self, table: str, keys=None) -> np.ndarray:
        """Values of ``keys`` now, outside any job (no clocks); see :meth:`WorkerView.pull`."""
        return self._process_client().pull(table, keys)

    def push(self, table: str, keys, updates) -> None:
        """Apply ``updates`` for ``keys`` now, outside any job, with the table's optimizer."""
        self._process_client().push_now(table, keys, updates)

    def stats(self) -> list[dict]:
        """Per-shard counters (calls, keys, bytes pulled and pushed), table sizes and clocks."""
        return self._call_all("stats")

    # -- jobs -----------------------------------------------------------------------------
    def run(self, fn: Callable[[WorkerView, Any], Any], items: Iterable, *,
            consistency: str | Consistency = "bsp", staleness: int | None = None,
            workers: list[str] | None = None,
            callback: Callable[[dict], None] | None = None) -> list:
        """Run ``fn(ps, item)`` for each item as one task of a job, under one consistency model.

        Each task gets a :class:`~dask_ps.state.client.WorkerView` ``ps`` to pull, push and
        clock. Tasks on the same worker process share one snapshot and one merged push per
        shard per clock. With a cluster, the items are spread round-robin over the workers (or
        placed by ``workers``) and each worker runs its items in threads of one Dask task, so
        a worker of any thread count can host any number of them; without a cluster, they
        run in threads of this process.

        Parameters
        ----------
        fn : callable
            ``fn(ps, item) -> result``. Dask futures in ``items`` are resolved first.
        items : iterable
            One per task (e.g. data partitions).
        consistency : {"bsp", "ssp", "asp"} or Consistency, default "bsp"
        staleness : int, optional
            With ``consistency="ssp"``; default 1.
        workers : list of str, optional
            Worker address for each item.
        callback : callable, optional
            ``callback(msg)`` runs in this process for every ``ps.report(**values)`` of a
            task, as soon as it arrives (a worker's reports travel as events, no round trip);
            ``msg`` holds ``job``, ``task``, ``time`` and the values. Calls are serialised and
            must be quick; their errors are logged, not raised.

        Returns
        -------
        list
            The tasks' results, in the order of ``items``.

        Raises
        ------
        ValueError
            ``workers`` of the wrong length or naming an address outside the cluster.
        Exception
            The first error of a task; the job is then ended, so no task is left waiting.
        """
        items = list(items)
        cons = get_consistency(consistency, staleness)
        self._process_client()  # ClosedModelError on a closed model
        if not items:
            return []
        job = uuid.uuid4().hex[:12]
        with _CLIENTS_LOCK:  # claim the model atomically: two run() calls race otherwise
            if self._job is not None:
                raise RuntimeError(f"job {self._job!r} is already running on this model: one "
                                   f"job at a time (and none from inside a task)")
            self._job = job
        results: list = [None] * len(items)
        shards = None
        try:
            groups = self._task_groups(len(items), workers)
            self._call_all("start_job", job, len(groups), cons)
            with watch_job(self._client, job, callback):
                if self.is_local:
                    done = _run_group(self, job, 0, cons, fn, list(enumerate(items)))
                else:
                    done = self._run_dask(fn, items, job, cons, groups)
            for t, r in done:
                results[t] = r
            return results
        except BaseException:
            # skip shards known dead: each call to one waits for its whole timeout
            shards = [i for i in range(self.n_shards) if i not in self.lost_shards()]
            self.last_failed_clocks = None
            for r in self._call_each("stats", shards=shards, timeout=2.0):
                if isinstance(r, dict) and r.get("clocks") is not None:
                    self.last_failed_clocks = [None if c >= DONE else int(c)
                                               for c in r["clocks"]]
                    break
            raise
        finally:
            # ends the job on the shards; after a failure this wakes tasks still waiting.
            # A dead shard must not mask the error.
            for r in self._call_each("end_job", job, shards=shards,
                                     timeout=10.0 if shards is None else 2.0):
                if isinstance(r, BaseException) and not isinstance(r, ShardUnavailableError):
                    raise r
            self._job = None

    def _call_each(self, method: str, *args, shards=None, timeout: float = 10.0) -> list:
        """``method`` on each of ``shards`` (default all) concurrently, each bounded by
        ``timeout`` seconds; results or exceptions, in order."""
        t = self._process_client().transport
        shards = range(self.n_shards) if shards is None else shards

        async def each():
            return await asyncio.gather(*(t.call(s, method, *args, _timeout=min(
                self.timeout, timeout)) for s in shards), return_exceptions=True)

        return t.run(each())

    def _task_groups(self, n_tasks: int, workers) -> dict[str, list[int]]:
        """Task indices by worker address (one group, "local", without a cluster)."""
        if self.is_local:
            return {"local": list(range(n_tasks))}
        info = self._workers_info()
        if workers is None:
            addrs = sorted(info)
            workers = [addrs[t % len(addrs)] for t in range(n_tasks)]
        if len(workers) != n_tasks:
            raise ValueError(f"workers has {len(workers)} addresses for {n_tasks} items")
        groups: dict[str, list[int]] = {}
        for t, addr in enumerate(workers):
            if addr not in info:
                if addr in self._seen_workers:  # it was here, and left
                    raise WorkerLostError([addr], [r.index for r in self.shards
                                                   if r.address == addr])
                raise ValueError(f"worker {addr} (item {t}) is not in the cluster")
            groups.setdefault(addr, []).append(t)
        return dict(sorted(groups.items()))

    def _run_dask(self, fn, items, job, cons, groups) -> list:
        from distributed import wait

        futs = [
            self._client.submit(_run_group, self, job, pid, cons, fn,
                                [(t, items[t]) for t in tasks], workers=[addr],
                                allow_other_workers=False, pure=False,
                                key=f"dask-ps-tasks-{job}-{pid}")
            for pid, (addr, tasks) in enumerate(groups.items())
        ]
        needed = set(groups) | {r.address for r in self.shards}
        try:
            out, remaining = [], list(futs)
            while remaining:
                for fut in [f for f in remaining if f.done()]:
                    out.extend(self._result(fut, needed))  # the first error ends the job
                    remaining.remove(fut)
                if remaining:
                    # a task pinned to a dead worker would wait forever, and the others at
                    # the next barrier with it: watch the workers instead
                    self._check_alive(needed)
                    try:
                        wait(remaining, timeout=WATCH_INTERVAL, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        pass
            return out
        finally:
            for fut in futs:
                fut.release()

    def _result(self, fut, needed: set[str]):
        """A finished task's result. Its worker may die before we fetch it; Dask would then
        rerun the task, pinned to that worker, and never finish: watch the workers meanwhile."""
        while True:
            try:
                return fut.result(timeout=WATCH_INTERVAL)
            except TimeoutError:
                if fut.status == "error":  # the task's own TimeoutError (the poll's class):
                    fut.result()  # raise it
                self._check_alive(needed)

    def _workers_info(self) -> dict:
        """The scheduler's workers, by address, asked now."""
        info = worker_info(self._client)
        self._seen_workers.update(info)
        return info

    def _live_workers(self) -> set[str]:
        return set(self._workers_info())

    def _check_alive(self, needed: set[str]) -> None:
        gone = needed - self._live_workers()
        if gone:
            raise WorkerLostError(gone, [r.index for r in self.shards if r.address in gone])

    def lost_shards(self) -> list[int]:
        """Indices of the shards whose worker has left the cluster (none in-process)."""
        if self.is_local:
            return []
        live = self._live_workers()
        return [r.index for r in self.shards if r.address not in live]

    # -- functions next to the shards -----------------------------------------------------
    def map_shards(self, table: str, fn: Callable, *args) -> list:
        """``fn(keys, values, slots, *args)`` on each shard's rows of ``table``, in shard order.

        ``keys`` (n,) int64 are global keys; ``values`` (n, ncols) and the ``slots`` arrays
        are the shard's own (a function may update them in place). Only the results travel.
        """
        self._process_client().spec(table)
        return self._call_all("apply", table, fn, *args)

    # -- checkpoints and recovery ---------------------------------------------------------
    def _replace_shards(self, lost: list[int]) -> list[str]:
        """New, empty actors for shards ``lost`` on the live workers holding fewest shards."""
        info = self._workers_info()
        live = sorted(a for a, w in info.items() if self._resources is None
                      or w.get("resources", {}).get(self._resources, 0) > 0)
        if not live:
            raise ValueError("no live worker can host the lost shards"
                             + (f" (resource {self._resources!r})" if self._resources else ""))
        load = {a: 0 for a in live}
        for r in self.shards:
            if r.index not in lost and r.address in load:
                load[r.address] += 1
        self._generation += 1
        placed = []
        for i in lost:
            addr = min(live, key=lambda a: (load[a], a))
            load[addr] += 1
            fut = self._client.submit(Shard, i, self.n_shards, actor=True, workers=[addr],
                                      allow_other_workers=False,
                                      key=f"dask-ps-shard-{self.uid}-{i}-g{self._generation}")
            actor = fut.result(timeout=self.timeout)
            self._futures[i].release()
            self._futures[i] = fut  # kept referenced, as in _place_shards
            channel = actor.open_channel().result(timeout=self.timeout)
            self.shards[i] = ShardRef(i, actor._address, fut.key, channel)
            placed.append(actor._address)
        # every process rebuilds its transport (the generation is part of the client key)
        _forget(self.uid)
        try:
            self._client.run(_forget, self.uid)
        except Exception:  # a worker leaving meanwhile keeps only stale, unused clients
            pass
        return placed

    # -- life -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the shards; later calls raise :class:`ClosedModelError`."""
        if self._closed:
            return
        if self._client is not None and self._client.status == "running":
            try:  # a shard whose worker is gone has no channel left to close: skip it
                lost = set(self.lost_shards())
                self._call_each("close_channel", timeout=2.0,
                                shards=[i for i in range(self.n_shards) if i not in lost])
            except Exception:  # closing must not fail because a worker is leaving
                pass
        self._closed = True
        _forget(self.uid)
        _LOCAL_SHARDS.pop(self.uid, None)
        if self._client is not None and self._client.status == "running":
            try:
                self._client.run(_forget, self.uid)
            except Exception:  # closing must not fail because a worker is already gone
                pass
            for f in self._futures:
                f.release()
        self._futures = []

    def __enter__(self) -> "PSModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        # Tasks get the layout only: the client and the actor futures stay with the driver.
        state = self.__dict__.copy()
        state["_client"], state["_futures"] = None, []
        return state

    def __repr__(self) -> str:
        where = "in-process" if self.is_local else "dask"
        return (f"<PSModel {self.uid}: {self.n_shards} shards ({where}), "
                f"tables {self.tables}{' closed' if self._closed else ''}>")


def _run_group(model: PSModel, job: str, participant: int, cons: Consistency, fn,
               tasks: list) -> list:
    """Run ``fn(ps, item)`` for the ``(index, item)`` pairs of one process, one thread each.

    Threads share the process's snapshot and merged pushes. Returns ``(index, result)`` pairs;
    raises the first error without waiting for the other threads (the driver then ends the
    job, which wakes any thread waiting at a barrier).
    """
    pc = model._process_client()
    for t, _ in tasks:
        pc.join(job, participant, len(tasks), cons, t)

    errors: list[BaseException] = []

    def one(t, item):
        try:
            result = fn(WorkerView(pc, job, t), item)
        except BaseException as exc:
            errors.append(exc)  # list.append is atomic: errors[0] is the first in time
            pc.abort(job, exc)
            raise
        pc.finish(job, t)
        return t, result

    if len(tasks) == 1:
        return [one(*tasks[0])]
    ex = ThreadPoolExecutor(len(tasks), thread_name_prefix="dask-ps-task")
    try:
        # each thread runs in a copy of this task's context: get_worker() works there too
        futs = [ex.submit(contextvars.copy_context().run, one, t, item) for t, item in tasks]
        wait_futures(futs, return_when=FIRST_EXCEPTION)
        if errors:  # the others fail soon after, when the driver ends the job
            raise errors[0]
        return [f.result() for f in futs]
    finally:
        ex.shutdown(wait=False)
