"""Progress of a fit: a progress bar (terminal or Jupyter) and the per-epoch history.

Dask's own progress bars follow task keys; a fit's progress is epochs reported by its tasks
while one Dask task per worker runs the whole job, so the bar here is driven by those reports
(see :meth:`WorkerView.report`). In Jupyter it is an HTML ``<progress>`` element updated in
place through IPython's display machinery; elsewhere one line on stderr rewritten with ``\\r``.
"""

from __future__ import annotations

import html
import math
import numbers
import queue
import sys
import threading
import time
import uuid
from typing import TextIO

from .events import FIT_TOPIC, emit_many

__all__ = ["FitMonitor", "JobReports", "ProgressBar", "in_notebook", "interactive"]


def in_notebook() -> bool:
    """Whether this process is a Jupyter (IPython) kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def interactive() -> bool:
    """Whether a person is likely watching: a Jupyter kernel, or stderr is a terminal."""
    return in_notebook() or bool(getattr(sys.stderr, "isatty", lambda: False)())


def _duration(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


class ProgressBar:
    """A progress bar of ``total`` steps, drawn in Jupyter or on a terminal stream.

    Parameters
    ----------
    total : int or None
        Number of steps; None shows a count without a bar.
    desc : str
        Label in front of the bar.
    unit : str, default "epoch"
    enabled : bool, optional
        Default: :func:`interactive`.
    stream : file, optional
        Terminal output; default ``sys.stderr``. Giving one forces the text form.
    width : int, default 30
        Characters of the text bar.
    """

    def __init__(self, total: int | None, desc: str = "", unit: str = "epoch",
                 enabled: bool | None = None, stream: TextIO | None = None,
                 width: int = 30) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.enabled = interactive() if enabled is None else bool(enabled)
        self.notebook = stream is None and in_notebook()
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.n = 0
        self.postfix = ""
        self.start = time.perf_counter()
        self._handle = None
        self._closed = False
        if self.enabled:
            self._draw()

    def update(self, n: int, **postfix) -> None:
        """Show ``n`` steps done and the ``postfix`` values (e.g. ``loss=0.31``)."""
        self.n = n
        self.postfix = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                 for k, v in postfix.items())
        if self.enabled:
            self._draw()

    def text(self) -> str:
        """The bar as one line of text."""
        elapsed = _duration(time.perf_counter() - self.start)
        units = f"{self.unit}s"
        if self.total:
            frac = min(1.0, self.n / self.total)
            full = int(round(frac * self.width))
            bar = "#" * full + "-" * (self.width - full)
            count = f"|{bar}| {self.n}/{self.total} {units}"
        else:
            count = f"{self.n} {units}"
        tail = f" [{elapsed}{', ' + self.postfix if self.postfix else ''}]"
        return f"{self.desc + ': ' if self.desc else ''}{count}{tail}"

    def _html(self) -> str:
        bar = (f'<progress value="{self.n}" max="{self.total}" style="width: 20em"></progress>'
               if self.total else "")
        return f"<div><code>{html.escape(self.text())}</code> {bar}</div>"

    def _draw(self) -> None:
        if self.notebook:
            from IPython.display import HTML, display

            if self._handle is None:
                self._handle = display(HTML(self._html()), display_id=True)
            else:
                self._handle.update(HTML(self._html()))
            return
        self.stream.write("\r" + self.text())
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self._closed:
            return
        self._closed = True
        if self.enabled:
            self._draw()
            if not self.notebook:
                self.stream.write("\n")
                self.stream.flush()


#: Seconds between two dashboard events of a fit whose epochs are L-BFGS evaluations
#: (``FitMonitor(event_interval=...)``): one event per evaluation, a scheduler round trip
#: from the driver's threads while the next evaluation runs, cost ~1.5 ms of an a9a
#: evaluation's ~5 ms (the driver's main thread waiting for the GIL; load 4.6).
EVENT_INTERVAL = 0.1


class FitMonitor:
    """Collects a fit's per-epoch reports: history entries, progress bar, dashboard events.

    Tasks report ``ps.report(epoch=e, loss=...)`` (:meth:`task_report`), as often as they
    like; once every task has reported a later epoch (or at :meth:`close`), the monitor
    records epoch ``e``'s ``loss`` (the sum of its reported losses divided by ``n_rows``, or
    their mean), the seconds since the fit started and the bytes moved during the epoch (the
    growth of each process's ``bytes_moved`` between its reports of the epoch before and
    ``e``, summed over processes: a clock's push still in flight at a report counts in the
    next epoch). It updates the progress bar and logs a ``"dask_ps.fit"`` event for the
    dashboard from a thread of its own, never in the callback. Epochs the driver computes
    itself (:meth:`epoch_done`, e.g. L-BFGS evaluations) take their bytes from the shards'
    counters.

    Parameters
    ----------
    model : PSModel
        Its ``stats()`` give the bytes moved; its ``client`` receives the events.
    name : str
        Shown by the bar and the dashboard (e.g. ``"LogisticRegression(ftrl)"``).
    n_epochs : int or None
        Length of the bar.
    n_tasks : int
        Tasks of the job that report.
    n_rows : int, optional
        Divisor of the summed losses of an epoch's task reports; default: their number (the
        mean of the reported losses).
    progress : bool, optional
        Show a progress bar; default: when :func:`interactive`.
    unit : str, default "epoch"
    event_interval : float, default 0
        At most one dashboard event per this many seconds: an epoch recorded sooner after
        the last event is sent only if no later one comes within the interval (the last
        epoch is always sent; :attr:`entries` keep every epoch). An event is a round trip
        to the scheduler from this process: L-BFGS, whose evaluations take a few
        milliseconds, sends one per :data:`EVENT_INTERVAL` (see :meth:`record`).
    shard_bytes : bool, default True
        Read the shards' counters now, where :meth:`epochs_done` measures the first epoch's
        bytes from (a call to every shard). False for a monitor fed by :meth:`task_report`
        alone: it can then start where no call may wait, e.g. in a report's callback.

    Attributes
    ----------
    entries : dict of int to dict
        Per epoch: ``epoch``, ``loss``, ``time`` (s since the start), ``bytes``.
    streamed : dict of int to float
        The epochs of the last :meth:`epochs_done` that every task of its job reported
        (:meth:`stream`): when the last report came (``time.perf_counter``), the epoch's
        end as the driver heard it.
    """

    def __init__(self, model, name: str, n_epochs: int | None, n_tasks: int = 1,
                 n_rows: int | None = None, progress: bool | None = None,
                 unit: str = "epoch", event_interval: float = 0.0,
                 shard_bytes: bool = True) -> None:
        self.model = model
        self.event_interval = float(event_interval)
        self.name = name
        self.n_epochs = n_epochs
        self.n_tasks = n_tasks
        self.n_rows = None if n_rows is None else max(1, n_rows)
        self.fit_id = uuid.uuid4().hex[:12]
        self.entries: dict[int, dict] = {}
        self.bar = ProgressBar(n_epochs, name, unit=unit, enabled=progress)
        # epoch -> [reports, summed loss, {process: bytes}, reports with a loss]
        self._partial: dict[int, list] = {}
        self._latest: dict = {}  # task -> the latest epoch it reported
        self._counts: dict = {}  # task -> its loss reports without an epoch so far
        self._lock = threading.Lock()  # reports (an event thread) against close
        self._process_bytes: dict[str, int] = {}  # bytes_moved at the last complete epoch
        self._queue: queue.Queue = queue.Queue()
        self._streamed: dict[int, float] = {}  # the running job's epochs reported: when
        self._unshown: set[int] = set()  # those of them reported without a loss
        self.streamed: dict[int, float] = {}  # those of the last job (epochs_done)
        self._job_count = False  # a stream's count of tasks is the job's (job_tasks)
        self._from = -math.inf  # reports of epochs before this are late: ignored
        self._start = time.perf_counter()
        # the shards' total, at the start or last epoch_done
        self._bytes = self._moved() if shard_bytes else 0
        self._thread = threading.Thread(target=self._work, name="dask-ps-fit-monitor",
                                        daemon=True)
        self._thread.start()

    def _moved(self) -> int:
        return sum(s["bytes_pulled"] + s["bytes_pushed"] for s in self.model.stats())

    def task_report(self, msg: dict) -> None:
        """A task's report (the ``callback`` of :meth:`PSModel.run`); quick, never blocks.

        Only a report with a number ``loss`` counts, or, for :meth:`stream`, one with an
        ``epoch`` (the end of the task's epoch, e.g. ``fit_partitions(report_epochs=True)``:
        its loss is the driver's, recorded by :meth:`epochs_done` at that end). Its epoch is
        ``epoch``, or, without one, the number of the task's loss reports so far (1, 2,
        ...). A task may report an epoch several times (e.g. once per partition); it
        reports epoch ``e`` before ``e + 1``.
        """
        loss = msg.get("loss")
        has_loss = isinstance(loss, numbers.Real) and not isinstance(loss, bool)
        task = msg.get("task", 0)
        with self._lock:
            if not has_loss and (self._from == -math.inf or msg.get("epoch") is None):
                return
            if msg.get("epoch") is not None:
                e = int(msg["epoch"])
            else:
                e = self._counts[task] = self._counts.get(task, 0) + 1
            if e < self._from:  # recorded by epochs_done already (a report come late)
                return
            part = self._partial.setdefault(e, [0, 0.0, {}, 0])
            part[0] += 1
            if has_loss:
                part[1] += float(loss)
                part[3] += 1
            if "process" in msg:  # the tasks of a process share its count: keep the largest
                p = msg["process"]
                part[2][p] = max(part[2].get(p, 0), int(msg.get("bytes_moved", 0)))
            self._latest[task] = max(e, self._latest.get(task, e))
            if self._from > -math.inf and part[0] >= self.n_tasks:  # (stream: once a task)
                self._complete(e + 1)
            elif len(self._latest) >= self.n_tasks:  # every task is past the epochs below
                self._complete(min(self._latest.values()))

    def _complete(self, below: float) -> None:
        """Record the reported epochs before ``below``, in order (holding the lock)."""
        for e in sorted(k for k in self._partial if k < below):
            _, total, processes, count = self._partial.pop(e)
            moved = sum(b - self._process_bytes.get(p, 0) for p, b in processes.items())
            self._process_bytes.update(processes)
            self._streamed[e] = time.perf_counter()
            if not count:  # its end alone: recorded with the driver's loss (epochs_done)
                self._unshown.add(e)
                continue
            loss = total / (count if self.n_rows is None else self.n_rows)
            self._queue.put((e, loss, self._streamed[e], moved))

    def stream(self, first: int, n_tasks: int | None = None, n_rows: float | None = None):
        """Record the epochs of a job starting at epoch ``first`` as its ``n_tasks`` tasks
        report them (``ps.report(epoch=e, loss=...)``, each its loss summed over its rows;
        ``n_rows``: their total, or total weight), not only once the job has ended: returns
        the ``callback`` for :meth:`PSModel.run` (:meth:`task_report`). The job's
        :meth:`epochs_done` then records only the epochs not reported by every task yet,
        and later reports of its epochs are ignored. An epoch the tasks report without a
        loss (``ps.report(epoch=e)``: its end) is recorded by :meth:`epochs_done`, with the
        driver's loss, at the time the last task reported it (:attr:`streamed`).
        ``n_tasks``: default, the job's (:meth:`PSModel.run` tells it: :meth:`job_tasks`)."""
        with self._lock:
            self._job_count = n_tasks is None
            self.n_tasks = math.inf if n_tasks is None else int(n_tasks)  # (until told)
            self.n_rows = n_rows if n_rows else None
            self._partial.clear()
            self._latest.clear()
            self._counts.clear()
            self._streamed.clear()
            self._unshown.clear()
            self._from = int(first)
        return self.task_report

    def job_tasks(self, n_tasks: int) -> None:
        """The job whose reports :meth:`stream` awaits has ``n_tasks`` tasks: the count of a
        stream given none (:class:`JobReports` tells it as the job starts)."""
        with self._lock:
            if self._job_count:
                self.n_tasks = int(n_tasks)

    def epoch_done(self, epoch: int, loss: float) -> None:
        """Record an epoch (or iteration) whose loss the driver computed itself, between
        two jobs: its bytes are the growth of the shards' counters since the last one."""
        self.epochs_done(epoch, [loss])

    def record(self, epoch: int, loss: float, nbytes: int, at: float | None = None) -> None:
        """Record an epoch (or evaluation) whose loss and bytes moved the driver knows itself
        (e.g. an L-BFGS evaluation that talks to the workers, not to the shards): no call to
        the shards. ``at``: when it ended (``time.perf_counter``); default now."""
        at = time.perf_counter() if at is None else float(at)
        self._queue.put((int(epoch), float(loss), at, nbytes))

    def epochs_done(self, first: int, losses: list[float]) -> list[int]:
        """Record epochs ``first, first + 1, ...`` run by one job, with their ``losses``: the
        growth of the shards' counters since the last record is split evenly among them.
        Returns the bytes of each. After :meth:`stream`: only the epochs its tasks did not
        all report with a loss (the others were recorded as they came), those they all
        reported at the time the last report came (:attr:`streamed`: when, by
        ``time.perf_counter``)."""
        at = time.perf_counter()
        total = self._moved()
        moved, self._bytes = total - self._bytes, total
        n = max(1, len(losses))
        share = [moved // n + (1 if i < moved % n else 0) for i in range(n)]
        with self._lock:  # (epochs the job's tasks reported were recorded as they came)
            self._from = int(first) + len(losses)
            self._partial.clear()
            for i, loss in enumerate(losses):
                e = int(first) + i
                if e not in self._streamed or e in self._unshown:
                    self._queue.put((e, float(loss), self._streamed.get(e, at), share[i]))
            self.streamed, self._streamed = self._streamed, {}
            self._unshown.clear()
        return share

    def _work(self) -> None:
        pending = None  # the latest entry not sent as an event yet (``event_interval``)
        last = -math.inf  # when the last event was sent
        while True:
            try:
                items = [self._queue.get(timeout=None if pending is None else max(
                    0.0, last + self.event_interval - time.perf_counter()))]
            except queue.Empty:  # no later epoch within the interval: send this one
                items = [False]
            # what else is waiting (a job's epochs all arrive at its end: 100 GBDT rounds)
            # is handled at once and its events sent in one round trip
            while items[-1] and not self._queue.empty():
                items.append(self._queue.get_nowait())
            batch = []
            for item in items:
                if not item:
                    if pending is not None:
                        batch.append(pending)
                        pending, last = None, time.perf_counter()
                    continue
                epoch, loss, at, moved = item
                entry = dict(epoch=epoch, loss=loss, time=at - self._start, bytes=moved)
                self.entries[epoch] = entry
                self.bar.update(epoch, loss=loss)
                pending = entry
                if time.perf_counter() - last >= self.event_interval:
                    batch.append(pending)
                    pending, last = None, time.perf_counter()
            self._events(batch)
            if items[-1] is None:
                return

    def _events(self, entries: list[dict]) -> None:
        """Log ``entries`` as ``"dask_ps.fit"`` events (one round trip), if the fit runs on
        a cluster."""
        if not entries or getattr(self.model, "client", None) is None:
            return
        try:
            shards = " ".join(r.address for r in self.model.shards)
            emit_many(FIT_TOPIC, [dict(fit=self.fit_id, name=self.name, epoch=e["epoch"],
                                       n_epochs=self.n_epochs, loss=e["loss"],
                                       elapsed=e["time"], bytes=e["bytes"], shards=shards)
                                  for e in entries], client=self.model.client)
        except Exception:  # the dashboard is best effort; the fit goes on
            pass

    def annotate(self, history: list[dict], key: str = "epoch") -> list[dict]:
        """Add ``time`` and ``bytes`` of the recorded entries to ``history`` (in place),
        matching ``entry[key]``; entries never reported get NaN. Returns ``history``."""
        for h in history:
            entry = self.entries.get(h[key], {})
            h["time"] = entry.get("time", float("nan"))
            h["bytes"] = entry.get("bytes", float("nan"))
        return history

    def close(self) -> None:
        """Record the epochs reported so far, then stop the thread and the bar."""
        if not self._thread.is_alive():
            return
        with self._lock:
            if self._from == -math.inf:  # (a streamed job's epochs: all tasks' or none)
                self._complete(math.inf)
        self._queue.put(None)
        self._thread.join()
        self.bar.close()

    def __enter__(self) -> "FitMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JobReports:
    """What the driver of a :meth:`PSModel.run` job does with its tasks' reports: call
    ``callback(msg)`` (the caller's, if any) and, on a cluster, feed the reports holding a
    number ``loss`` to the dashboard page's loss curve, through a :class:`FitMonitor` of the
    job (:meth:`FitMonitor.task_report`: per epoch, the mean of the reported losses; started
    at the first such report, without a call to the shards). A ``callback`` that is a
    monitor's own ``task_report`` (a fit that watches its job itself) feeds the curve alone,
    and is told the job's number of tasks (:meth:`FitMonitor.job_tasks`).

    Parameters
    ----------
    model : PSModel
    name : str
        The fit's name on the page.
    n_tasks : int
        Tasks of the job.
    callback : callable or None
    """

    def __init__(self, model, name: str, n_tasks: int, callback) -> None:
        self.model, self.name, self.n_tasks, self.callback = model, name, n_tasks, callback
        self.monitor: FitMonitor | None = None
        own = getattr(callback, "__self__", None)  # a monitor's stream (task_report)?
        self.feeds = getattr(model, "client", None) is not None and not isinstance(
            own, FitMonitor)
        if isinstance(own, FitMonitor):  # it waits for every task of the job
            own.job_tasks(n_tasks)

    def handler(self):
        """The callable for :func:`~.events.watch_job`: this object, or None when it has
        nothing to do (no callback and no cluster)."""
        return self if self.feeds or self.callback is not None else None

    def __call__(self, msg: dict) -> None:
        if self.feeds and "loss" in msg:
            if self.monitor is None:
                self.monitor = FitMonitor(self.model, self.name, None, n_tasks=self.n_tasks,
                                          progress=False, shard_bytes=False)
            self.monitor.task_report(msg)
        if self.callback is not None:
            self.callback(msg)

    def close(self) -> None:
        """Record the job's last epochs (after its end: no more reports come)."""
        if self.monitor is not None:
            self.monitor.close()
