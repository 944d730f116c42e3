"""The scheduler side of the metrics: a plugin that reads every shard's counters once a second.

Shards count their calls, keys and bytes in plain integers (``Shard.counters``), at no cost to
a call beyond a few additions. This plugin, running in the scheduler, asks each live shard for
its ``stats`` once per ``interval`` (one small actor call per shard, whatever the call rate),
keeps a short history of them, and turns it into the rates, clocks and staleness that the
dashboard page shows. Fit progress, checkpoints and recoveries come from the events of
:mod:`dask_ps.diagnostics.events`, which the scheduler keeps anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from distributed.diagnostics.plugin import SchedulerPlugin

from .. import _compat
from ..state.consistency import DONE
from ..state.keys import SHARD_PREFIX, TASKS_PREFIX
from .events import CHECKPOINT_TOPIC, FIT_TOPIC, RECOVERY_TOPIC

__all__ = ["PSMetrics", "install", "participant_clocks", "rates"]

logger = logging.getLogger(__name__)

_COUNTERS = ("pull_calls", "push_calls", "keys_pulled", "keys_pushed", "bytes_pulled",
             "bytes_pushed")


def rates(samples) -> dict[str, float]:
    """Per-second rates of the counters between the last two ``stats`` samples (0 before)."""
    if len(samples) < 2:
        return {f"{c}_per_s": 0.0 for c in _COUNTERS}
    (_, a), (_, b) = samples[-2], samples[-1]
    dt = max(b["time"] - a["time"], 1e-9)
    return {f"{c}_per_s": (b[c] - a[c]) / dt for c in _COUNTERS}


def participant_clocks(stats: list[dict]) -> tuple[list[int | None], int | None]:
    """Each participant's clock as the shards of one job know it, and the job's staleness.

    A participant's clock is the largest any shard has seen (ticks reach shards one by one);
    None marks a participant that has finished. The gap is the fastest minus the slowest
    running participant's clock (0 when fewer than two run); under SSP(s) it is at most
    ``s + 1``, as a participant ticks once more before its next pull waits.
    """
    rows = [s["clocks"] for s in stats if s.get("clocks")]
    if not rows:
        return [], None
    n = max(len(r) for r in rows)
    clocks = [max(r[p] for r in rows if p < len(r)) for p in range(n)]
    clocks = [None if c >= DONE else int(c) for c in clocks]
    running = [c for c in clocks if c is not None]
    return clocks, (max(running) - min(running) if running else 0)


class PSMetrics(SchedulerPlugin):
    """Scheduler plugin collecting dask_ps metrics for the dashboard page ``/dask-ps``.

    Parameters
    ----------
    interval : float, default 1.0
        Seconds between two reads of the shards' counters.
    history : int, default 600
        Samples kept per shard (10 minutes at the default interval).
    timeout : float, default 5.0
        Seconds before a shard that does not answer is skipped for this round.

    Notes
    -----
    Install it with :func:`install` (from a client), or list
    ``dask_ps.diagnostics.dashboard`` in the ``distributed.scheduler.http.routes`` setting,
    whose page installs it on first view.
    """

    name = "dask-ps-metrics"
    idempotent = True  # registering again keeps the running collector

    def __init__(self, interval: float = 1.0, history: int = 600, timeout: float = 5.0):
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self.interval = float(interval)
        self.history = int(history)
        self.timeout = float(timeout)
        self.scheduler = None
        self.samples: dict[str, deque] = {}  # shard key -> (worker, stats) samples
        self.slots: dict[str, int] = {}  # shard key -> its series' slot: see throughput()
        self.staleness: dict[str, deque] = {}  # model uid -> (time, staleness, bound)
        self.polls = 0
        self.poll_seconds = 0.0  # wall time spent in polls, all shards at once
        self._task: asyncio.Task | None = None
        self._shard_keys: set[str] = set()

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        # shards created before the plugin; later ones arrive through transition()
        self._shard_keys = {k for k, ts in scheduler.tasks.items()
                            if _is_shard(k) and ts.state == "memory"}
        from .dashboard import add_routes

        add_routes(scheduler)
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loop(self) -> None:
        registered = False
        while True:
            # stop once unregistered or replaced (Scheduler.remove_plugin does not close it)
            current = self.scheduler.plugins.get(self.name)
            registered = registered or current is self
            if registered and current is not self:
                return
            try:
                await self.poll()
            except Exception:  # a bad round must not end the collection
                logger.exception("dask_ps metrics: polling the shards failed")
            await asyncio.sleep(self.interval)

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        # called for every task of the cluster: a prefix test, nothing more
        if _is_shard(key):
            if finish == "memory":
                self._shard_keys.add(key)
            else:
                self._shard_keys.discard(key)

    # -- collection ---------------------------------------------------------------------
    def shard_tasks(self) -> dict[str, str]:
        """Live shard actors: key -> worker address."""
        out = {}
        for key in list(self._shard_keys):
            ts = self.scheduler.tasks.get(key)
            if ts is None or ts.state != "memory" or not ts.who_has:
                self._shard_keys.discard(key)
                continue
            out[key] = next(iter(ts.who_has)).address
        return out

    async def _stats(self, key: str, address: str):
        from distributed.protocol import to_serialize
        from distributed.protocol.serialize import Serialized, deserialize

        async with asyncio.timeout(self.timeout):
            resp = await _compat.actor_execute(self.scheduler.rpc, address, key, "dispatch",
                                               [to_serialize(("stats", (), {}))])
        # the scheduler's connections leave payloads serialised: open them here
        out = resp["result"] if resp["status"] == "OK" else resp["exception"]
        if isinstance(out, Serialized):
            out = deserialize(out.header, out.frames)
        if resp["status"] != "OK":
            raise out
        return out

    async def poll(self) -> None:
        """Read every live shard's counters once."""
        t0 = time.perf_counter()
        shards = self.shard_tasks()
        for key in set(self.samples) - set(shards):
            del self.samples[key]
            self.slots.pop(key, None)  # free for the next new shard
        results = await asyncio.gather(*(self._stats(k, a) for k, a in shards.items()),
                                       return_exceptions=True)
        now = time.time()
        by_model: dict[str, list] = {}
        for (key, address), res in zip(shards.items(), results):
            if isinstance(res, BaseException):
                logger.debug("dask_ps metrics: shard %s on %s: %r", key, address, res)
                continue
            self.samples.setdefault(key, deque(maxlen=self.history)).append((address, res))
            by_model.setdefault(_model_of(key), []).append(res)
        for key in sorted(set(self.samples) - set(self.slots), key=_shard_order):
            self.slots[key] = min(set(range(len(self.slots) + 1)) - set(self.slots.values()))
        for uid, stats in by_model.items():
            _, stale = participant_clocks(stats)
            if stale is not None:
                bound = stats[0].get("staleness_bound")
                self.staleness.setdefault(uid, deque(maxlen=self.history)).append(
                    (now, stale, bound))
        for uid in set(self.staleness) - {_model_of(k) for k in shards}:
            del self.staleness[uid]
        self.polls += 1
        self.poll_seconds += time.perf_counter() - t0

    # -- views ----------------------------------------------------------------------------
    def shards(self) -> list[dict]:
        """One row per live shard: where it is, its size, its totals and current rates."""
        rows = []
        for key, samples in sorted(self.samples.items(), key=lambda kv: _shard_order(kv[0])):
            address, st = samples[-1]
            ws = self.scheduler.workers.get(address)
            tables = st.get("tables", {})
            rows.append(dict(
                model=_model_of(key), shard=st["shard"], worker=address,
                tables=", ".join(tables), keys=sum(t["rows"] for t in tables.values()),
                nbytes=sum(t["nbytes"] for t in tables.values()),
                worker_memory=ws.memory.process if ws is not None else 0,
                job=st.get("job") or "", updated=st["time"],
                **{c: st[c] for c in _COUNTERS}, **rates(samples)))
        return rows

    def throughput(self) -> dict[str, list]:
        """Per live shard, the time series of bytes and calls per second.

        Returns
        -------
        dict of str to list
            One entry per live shard, ordered by model uid then shard index, in the columns
            ``label`` (str, ``"<first 6 characters of the model uid>/<shard index>"``),
            ``slot`` (int), ``t`` (list of float, ms since the epoch), ``bytes_per_s`` and
            ``calls_per_s`` (lists of float, the pulls' and pushes' sum, as long as ``t``).

        Notes
        -----
        A shard's ``slot`` is fixed when the collector first reads the shard: the smallest
        number >= 0 that no other live shard holds (a shard that is gone frees its slot;
        new shards of one poll take theirs in model, shard order). It stays the shard's for
        as long as the shard lives, whatever other shards come or go, so that the page can
        colour the shard's line by it: distinct colours for the first slots, and a line
        that keeps its colour.
        """
        out = dict(label=[], slot=[], t=[], bytes_per_s=[], calls_per_s=[])
        for key, samples in sorted(self.samples.items(), key=lambda kv: _shard_order(kv[0])):
            t, b, c = [], [], []
            for i in range(1, len(samples)):
                r = rates([samples[i - 1], samples[i]])
                t.append(samples[i][1]["time"] * 1000.0)  # ms: bokeh's datetime axis
                b.append(r["bytes_pulled_per_s"] + r["bytes_pushed_per_s"])
                c.append(r["pull_calls_per_s"] + r["push_calls_per_s"])
            out["label"].append(f"{_model_of(key)[:6]}/{samples[-1][1]['shard']}")
            out["slot"].append(self.slots[key])
            out["t"].append(t)
            out["bytes_per_s"].append(b)
            out["calls_per_s"].append(c)
        return out

    def clocks(self) -> list[dict]:
        """One row per participant of each running job: its worker, clock and lag."""
        by_model: dict[str, list] = {}
        for key, samples in self.samples.items():
            by_model.setdefault(_model_of(key), []).append(samples[-1][1])
        rows = []
        for uid, stats in sorted(by_model.items()):
            clocks, _ = participant_clocks(stats)
            job = next((s["job"] for s in stats if s.get("job")), None)
            running = [c for c in clocks if c is not None]
            for p, c in enumerate(clocks):
                ts = self.scheduler.tasks.get(f"{TASKS_PREFIX}{job}-{p}")
                # running: processing_on; finished (result not yet released): who_has
                ws = None if ts is None else ts.processing_on or next(iter(ts.who_has or ()),
                                                                        None)
                rows.append(dict(model=uid, job=job or "", participant=p,
                                 worker=ws.address if ws is not None else "",
                                 clock=c if c is not None else max(running, default=0),
                                 done=c is None,
                                 lag=(max(running) - c) if c is not None else 0))
        return rows

    def staleness_series(self) -> dict[str, list]:
        """Clock gap (fastest minus slowest clock) over time, all models together, with the
        job's staleness bound."""
        points = sorted((t, s, b) for series in self.staleness.values() for t, s, b in series)
        return dict(t=[p[0] * 1000.0 for p in points], staleness=[p[1] for p in points],
                    bound=[p[2] if p[2] is not None else float("nan") for p in points])

    def fit(self) -> dict:
        """The latest fit's per-epoch events: ``name``, and columns ``epoch``, ``loss``, ..."""
        events = [m for _, m in self.scheduler.get_events(FIT_TOPIC)]
        if not events:
            return dict(name="", epoch=[], loss=[], elapsed=[], bytes=[])
        last = events[-1]["fit"]
        mine = [m for m in events if m["fit"] == last]
        return dict(name=mine[-1].get("name", ""), n_epochs=mine[-1].get("n_epochs"),
                    epoch=[m["epoch"] for m in mine], loss=[m["loss"] for m in mine],
                    elapsed=[m.get("elapsed") for m in mine],
                    bytes=[m.get("bytes") for m in mine])

    def events(self, topic: str) -> list[dict]:
        return [m for _, m in self.scheduler.get_events(topic)]

    def snapshot(self) -> dict:
        """Everything the page shows, as one JSON-able dict."""
        return dict(time=time.time(), polls=self.polls, interval=self.interval,
                    shards=self.shards(), clocks=self.clocks(), fit=self.fit(),
                    checkpoints=self.events(CHECKPOINT_TOPIC),
                    recoveries=self.events(RECOVERY_TOPIC))


def _is_shard(key) -> bool:
    return isinstance(key, str) and key.startswith(SHARD_PREFIX)


def _model_of(key: str) -> str:
    """The model uid in a shard key ``dask-ps-shard-<uid>-<index>``."""
    return key[len(SHARD_PREFIX):].rsplit("-", 1)[0]


def _shard_order(key: str):
    uid, index = key[len(SHARD_PREFIX):].rsplit("-", 1)
    return uid, int(index)


def get_plugin(scheduler) -> PSMetrics | None:
    return scheduler.plugins.get(PSMetrics.name)


def install(client, interval: float = 1.0) -> str:
    """Start collecting dask_ps metrics on ``client``'s scheduler and serve the page.

    Parameters
    ----------
    client : distributed.Client
    interval : float, default 1.0
        Seconds between two reads of the shards' counters.

    A collector already running on the scheduler is kept (with its interval); unregister it
    first (``client.unregister_scheduler_plugin("dask-ps-metrics")``) to change it.

    Returns
    -------
    str
        The page's URL (``<dashboard>/dask-ps``), or ``""`` if the scheduler has no
        dashboard server.

    Raises
    ------
    ImportError
        When bokeh (needed for the page) is not installed here.
    """
    import bokeh  # noqa: F401  (the page needs it; fail here, not in the scheduler)

    client.register_plugin(PSMetrics(interval), name=PSMetrics.name)
    link = client.dashboard_link or ""
    return link.rsplit("/", 1)[0] + "/dask-ps" if link else ""
