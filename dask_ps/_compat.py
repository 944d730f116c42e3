"""Every private ``distributed`` (and scikit-learn) API dask_ps touches, in one place.

Each function here reaches into something that ``distributed`` does not document as public
(an attribute of a worker, a scheduler handler, an internal class). They are pinned by
``tests/test_compat.py`` against the installed version, so that a Dask upgrade that changes
one of them fails there, with the name of the API, instead of somewhere deep in a fit.
The package pins ``distributed`` to the versions these were checked with (pyproject.toml).
"""

from __future__ import annotations

import functools

__all__ = ["ProxyRPC", "actor_address", "actor_execute", "current_worker", "desire_keys",
           "executing_keys", "failed_task_log", "in_memory", "local_cluster_keeping_nannies",
           "machine_memory", "managed_in_memory",
           "memory_fractions", "memory_limit", "scheduler_workers", "set_spill_offset",
           "sklearn_param_validation", "spilled_bytes", "transfer_counters", "worker_actors",
           "worker_loop", "worker_store"]


def current_worker():
    """The Dask worker running this code, or None outside workers (public API, wrapped so
    that callers need no try/except)."""
    from distributed import get_worker

    try:
        return get_worker()
    except ValueError:
        return None


def in_own_process(worker) -> bool:
    """Whether ``worker`` runs in a process of its own, started by a Dask nanny
    (``Worker.nanny``: the nanny's address), rather than as a thread of another program's
    process (``LocalCluster(processes=False)``: the user's process; ``dask worker --no-nanny``
    counts as not, too)."""
    return getattr(worker, "nanny", None) is not None


def failed_task_log(record) -> tuple[str, str] | None:
    """``(exception, traceback)`` of a worker's "Compute Failed" log record, as texts, or
    None for another record. That record is the ``logger.error`` of ``Worker.execute`` on
    the ``distributed.worker`` logger; its arguments are the task's key, its state, the
    task, ``repr`` of the exception and the formatted traceback (``traceback.format_tb``)."""
    args = record.args
    if not (isinstance(record.msg, str) and record.msg.startswith("Compute Failed")
            and isinstance(args, tuple) and len(args) == 5):
        return None
    return str(args[3]), str(args[4])


def local_cluster_keeping_nannies():
    """``distributed.LocalCluster`` whose nannies are never closed behind the user's back.

    A ``SpecCluster`` told that a worker left schedules, ``distributed.deploy.
    lost-worker-timeout`` (15 s) later, the close of that worker's nanny if no worker of the
    same name is registered at that moment (``SpecCluster._update_worker_status``). The
    nanny restarts its worker meanwhile, and the timer is not cancelled when it registers
    again. So a nanny is closed for good, and its worker never comes back, when its restart
    takes longer than the timeout (a loaded machine), or when the same worker is lost a
    second time and the first loss's timer falls in the second restart's gap (measured:
    a kill 14.6 s after a first kill of the same worker leaves 1 of 2 workers). A fit's
    recovery counts on the nanny's restart. This class keeps the scheduler's list of
    workers as ``Cluster`` does and leaves a lost worker to its nanny, which restarts it or,
    failing that, closes itself; a cluster without nannies (``processes=False``) is left as
    ``SpecCluster`` does it.
    """
    return _local_cluster_keeping_nannies()


@functools.cache
def _local_cluster_keeping_nannies():
    from distributed import LocalCluster, Nanny
    from distributed.deploy.cluster import Cluster

    class LocalClusterKeepingNannies(LocalCluster):
        __doc__ = local_cluster_keeping_nannies.__doc__

        def _update_worker_status(self, op, msg):
            cls = (self.new_spec or {}).get("cls")
            if op == "remove" and isinstance(cls, type) and issubclass(cls, Nanny):
                Cluster._update_worker_status(self, op, msg)  # (no delayed close)
            else:
                super()._update_worker_status(op, msg)

    return LocalClusterKeepingNannies


def worker_actors(worker) -> dict:
    """The actor instances living in ``worker``, by key (``Worker.state.actors``): a task
    on a shard's own worker calls the shard object directly instead of through a socket."""
    return worker.state.actors


def worker_loop(worker):
    """The asyncio event loop of ``worker`` (``Worker.loop.asyncio_loop``)."""
    return worker.loop.asyncio_loop


def actor_address(actor) -> str:
    """Address of the worker holding a resolved :class:`distributed.Actor` handle."""
    return actor._address


def ProxyRPC():
    """distributed's ``ProxyRPC``: actor calls relayed by the scheduler, for clients that do
    not connect to workers directly."""
    from distributed.actor import ProxyRPC as proxy

    return proxy


async def actor_execute(rpc, address: str, key: str, function: str, args: list) -> dict:
    """Call method ``function`` of actor ``key`` on ``address`` through the worker's
    ``actor_execute`` handler (what distributed's own actor proxies send); returns the
    handler's answer, ``{"status": "OK", "result": ...}`` or ``{"status": "error",
    "exception": ...}``."""
    return await rpc(address).actor_execute(actor=key, function=function, args=args,
                                            kwargs={})


def scheduler_workers(client) -> dict[str, dict]:
    """The scheduler's record of every worker, asked now (the scheduler's ``identity``
    handler with ``n_workers=-1``)."""
    return client.sync(scheduler_workers_async, client)


async def scheduler_workers_async(client) -> dict[str, dict]:
    """:func:`scheduler_workers` on the client's loop."""
    return dict((await client.scheduler.identity(n_workers=-1))["workers"])


def worker_store(worker):
    """The mapping of the keys a worker holds (memory, or Dask's spill on local disk), its
    ``SpillBuffer`` ready for a task's thread (:func:`_tolerate_thread_evictions`)."""
    data = worker.data
    _tolerate_thread_evictions(data)
    return data


def _tolerate_thread_evictions(data) -> None:
    """Make the evictions of ``data`` (a ``SpillBuffer``) safe and cheap beside a task that
    reads spilled data (zict's ``Buffer.__getitem__``) or sets the spill offset
    (:func:`set_spill_offset`) in its own thread. distributed's own worker touches its store
    from the event loop only, and with distributed 2026.8 / zict 3.0:

    - the memory monitor (``evict()``, on the event loop) logged
      ``KeyError('evict(): dictionary is empty')`` with its traceback: it checks that the
      memory store is not empty, then evicts its oldest key; the task's thread may evict
      that last key in between, and ``SpillBuffer.evict`` (documented as never raising)
      lets zict's error through. Returned here as -1, distributed's "failed to evict": the
      monitor stops this round and measures again at its next interval.
    - it logged an ``AssertionError`` without message (seen once; the one bare assert on
      that path is ``key not in self.d`` of distributed's ``Slow``): the monitor spills a key
      that the task's thread has just read back into memory but not yet removed from disk.
      zict's ``Buffer`` does both under its lock: the monitor's eviction takes it here too
      (the task's thread releases it while it reads from disk or spills).
    - while one thread spilled the oldest key, another one asking to spill busy-looped:
      zict's ``LRU.evict`` picks the oldest key again and returns at once ("cancelled",
      weight 0) while that key's eviction is in flight, and both the monitor's loop and
      zict's ``evict_until_below_target`` call it again, for as long as the pickling and
      the disk write last (a trial's 640 MB on 2 x 400 MB workers, 2 epochs: 1.5k-3.9k
      calls per worker for ~60 keys spilled, 2-4 % of its CPU, its event loop held for
      0.1-0.25 s). Here (:func:`_one_eviction_per_key`) the event loop's eviction gives
      up instead (zict's "multithreaded race" KeyError: the monitor returns -1, a store's
      ``__setitem__`` stops spilling) and another thread waits for the one in flight.

    No upstream issue found (dask/distributed, dask/zict) at the time of writing.
    """
    if not hasattr(data, "evict") or not hasattr(data, "lock") \
            or getattr(data.evict, "dask_ps_tolerant", False):
        return
    evict = data.evict
    _one_eviction_per_key(data.fast)

    def tolerant_evict() -> int:
        try:
            with data.lock:
                return evict()
        except KeyError:  # emptied by another thread since the monitor's check, or busy
            return -1

    tolerant_evict.dask_ps_tolerant = True
    data.evict = tolerant_evict


def _one_eviction_per_key(lru) -> None:
    """Wrap ``lru.evict`` (zict's ``LRU``, the memory store of a ``SpillBuffer``) so that
    evicting the oldest key while another thread evicts it does not return at once: on an
    event loop it raises KeyError (zict's callers and :func:`_tolerate_thread_evictions`
    stop spilling for now), in another thread it waits for that eviction to end and then
    returns zict's "cancelled" ``(None, None, 0)`` (its caller checks its target again).
    zict's ``LRU.evict`` picks ``next(iter(lru.heavy or lru.order))`` under ``lru.lock``;
    the key picked here is passed to it."""
    import asyncio
    import threading

    evict_key = lru.evict
    in_flight = {}  # key -> the thread evicting it through here
    ended = threading.Condition()

    def evict(*key):
        if key:  # a given key: zict's own handling
            return evict_key(*key)
        me = threading.get_ident()
        with lru.lock:
            try:
                key = next(iter(lru.heavy or lru.order))
            except StopIteration:
                raise KeyError("evict(): dictionary is empty") from None
            owner = in_flight.get(key)
            if owner is None:
                in_flight[key] = me
        if owner is None:
            try:
                return evict_key(key)
            finally:
                with ended:
                    del in_flight[key]
                    ended.notify_all()
        if owner == me:  # re-entered from its own callbacks: zict's answer
            return evict_key(key)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a task's thread: wait, without holding any lock
            with ended:
                while in_flight.get(key) == owner:
                    ended.wait(0.1)
            return None, None, 0
        raise KeyError(f"evict(): {key!r} is being evicted by another thread")

    lru.evict = evict


def machine_memory() -> int:
    """Bytes of memory Dask sizes a worker by by default (``distributed.system.MEMORY_LIMIT``):
    the RAM, capped by a cgroup limit and by ``RLIMIT_RSS``."""
    from distributed.system import MEMORY_LIMIT

    return int(MEMORY_LIMIT)


def memory_limit(worker) -> int | None:
    """The memory limit of ``worker`` in bytes, None (or 0) when unlimited."""
    return worker.memory_manager.memory_limit


def memory_fractions(worker) -> tuple:
    """Dask's ``(target, spill, pause)`` fractions of ``worker``'s memory limit (each a float,
    or False when off)."""
    mm = worker.memory_manager
    return mm.memory_target_fraction, mm.memory_spill_fraction, mm.memory_pause_fraction


def managed_in_memory(worker) -> int | None:
    """Bytes (``sizeof``) of the data ``worker`` holds in memory, as its ``SpillBuffer``
    weighs them; None without spilling (a plain dict store)."""
    fast = getattr(worker.data, "fast", None)
    return None if fast is None else int(fast.total_weight)


def set_spill_offset(worker, nbytes: int) -> bool:
    """Make ``worker``'s ``SpillBuffer`` count ``nbytes`` more than the data it holds when it
    decides to spill (zict's public ``Buffer.offset``, unused by distributed itself), and
    spill now down to that; False without a ``SpillBuffer``."""
    data = worker.data
    if not hasattr(data, "offset") or not hasattr(data, "evict_until_below_target"):
        return False
    _tolerate_thread_evictions(data)
    data.offset = max(0, int(nbytes))
    data.evict_until_below_target()
    return True


def spilled_bytes(worker) -> dict:
    """Pickled size on local disk of each key ``worker`` has spilled (distributed's
    ``SpillBuffer`` keeps it in its slow store's ``weight_by_key``); empty without spill."""
    data = worker.data
    weights = getattr(getattr(data, "_slow_uncached", None), "weight_by_key", {})
    return {k: w.disk for k, w in weights.items()}


def executing_keys(dask_worker) -> list:
    """Keys of the tasks ``dask_worker`` runs now (in a thread of its pool, or seceded from
    it); not those it holds ready, waiting for a thread. (The parameter's name lets
    ``Client.run(executing_keys)`` pass each worker.)"""
    state = dask_worker.state
    return [ts.key for ts in state.executing] + [ts.key for ts in state.long_running]


async def stop_heartbeats(dask_worker, timeout: float = 5.0) -> None:
    """Stop ``dask_worker``'s heartbeats to its scheduler, and let one in flight end first.

    Before a worker is asked to close (:func:`dask_ps.cluster.close_workers`): a heartbeat
    whose reply is cut by the close logs "Failed to communicate with scheduler during
    heartbeat" with a traceback (seen in a batch job's worker log under load). The periodic
    callback (``Worker.periodic_callbacks["heartbeat"]``) is stopped; one heartbeat of our
    own, awaited, then follows any earlier one on the scheduler's side."""
    import asyncio

    dask_worker.periodic_callbacks["heartbeat"].stop()
    try:
        await asyncio.wait_for(dask_worker.heartbeat(), timeout)
    except Exception:  # noqa: BLE001 - a scheduler already going: nothing left to drain
        pass


def in_memory(worker):
    """The part of the worker's store held in memory (the ``SpillBuffer``'s fast store)."""
    data = worker.data
    return getattr(data, "memory", data)


def transfer_counters(worker) -> tuple[int, int]:
    """``(count, bytes)`` of the data this worker has received from other workers so far."""
    count = worker.state.transfer_incoming_count_total
    nbytes = sum(e["total"] for e in worker.transfer_incoming_log)
    return int(count), int(nbytes)


def desire_keys(client, keys: list) -> None:
    """Ask the scheduler for news of ``keys`` (a :class:`distributed.Future` made from a key
    alone waits for them; the client does this itself for the futures it holds when it
    reconnects)."""
    client._send_to_scheduler({"op": "client-desires-keys", "keys": list(keys)})


def lift_restrictions(client, keys: list) -> None:
    """Let the scheduler run ``keys`` on any worker from now on (their worker restrictions
    dropped, through the scheduler's ``set_restrictions`` handler): a task that must run
    again after its worker died would otherwise wait for that address for ever."""
    client.sync(client.scheduler.set_restrictions, worker={k: None for k in keys})


def sklearn_param_validation():
    """scikit-learn's private ``sklearn.utils._param_validation`` (``Interval``,
    ``StrOptions``, ...), behind the ``_parameter_constraints`` checks that its own
    estimators use and that :class:`~dask_ps.algorithms._base.PSEstimator` follows."""
    from sklearn.utils import _param_validation

    return _param_validation
