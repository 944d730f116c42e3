"""Progress of a fit: a progress bar (terminal or Jupyter) and the per-epoch history.

Dask's own progress bars follow task keys; a fit's progress is epochs reported by its tasks
while one Dask task per worker runs the whole job, so the bar here is driven by those reports
(see :meth:`WorkerView.report`). In Jupyter it is an HTML ``<progress>`` element updated in
place through IPython's display machinery; elsewhere one line on stderr rewritten with ``\\r``.
"""

from __future__ import annotations

import html
import math
import queue
import sys
import threading
import time
import uuid
from typing import TextIO

from .events import FIT_TOPIC, emit_many

__all__ = ["FitMonitor", "ProgressBar", "in_notebook", "interactive"]


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

    Tasks report ``ps.report(epoch=e, loss=<summed loss of their rows>)``; when every task
    has reported epoch ``e``, the monitor records ``loss`` (the sum over tasks divided by
    ``n_rows``), the seconds since the fit started and the bytes moved during the epoch (the
    growth of each process's ``bytes_moved`` between its reports of epochs ``e - 1`` and
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
        Reports expected per epoch.
    n_rows : int
        Divisor of the summed losses.
    progress : bool, optional
        Show a progress bar; default: when :func:`interactive`.
    unit : str, default "epoch"
    event_interval : float, default 0
        At most one dashboard event per this many seconds: an epoch recorded sooner after
        the last event is sent only if no later one comes within the interval (the last
        epoch is always sent; :attr:`entries` keep every epoch). An event is a round trip
        to the scheduler from this process: L-BFGS, whose evaluations take a few
        milliseconds, sends one per :data:`EVENT_INTERVAL` (see :meth:`record`).

    Attributes
    ----------
    entries : dict of int to dict
        Per epoch: ``epoch``, ``loss``, ``time`` (s since the start), ``bytes``.
    """

    def __init__(self, model, name: str, n_epochs: int | None, n_tasks: int = 1,
                 n_rows: int = 1, progress: bool | None = None, unit: str = "epoch",
                 event_interval: float = 0.0) -> None:
        self.model = model
        self.event_interval = float(event_interval)
        self.name = name
        self.n_epochs = n_epochs
        self.n_tasks = n_tasks
        self.n_rows = max(1, n_rows)
        self.fit_id = uuid.uuid4().hex[:12]
        self.entries: dict[int, dict] = {}
        self.bar = ProgressBar(n_epochs, name, unit=unit, enabled=progress)
        self._partial: dict[int, list] = {}
        self._process_bytes: dict[str, int] = {}  # bytes_moved at the last complete epoch
        self._queue: queue.Queue = queue.Queue()
        self._start = time.perf_counter()
        self._bytes = self._moved()  # the shards' total, at the start or last epoch_done
        self._thread = threading.Thread(target=self._work, name="dask-ps-fit-monitor",
                                        daemon=True)
        self._thread.start()

    def _moved(self) -> int:
        return sum(s["bytes_pulled"] + s["bytes_pushed"] for s in self.model.stats())

    def task_report(self, msg: dict) -> None:
        """A task's report (the ``callback`` of :meth:`PSModel.run`); quick, never blocks."""
        if "epoch" not in msg:
            return
        e = int(msg["epoch"])
        part = self._partial.setdefault(e, [0, 0.0, {}])
        part[0] += 1
        part[1] += float(msg.get("loss", 0.0))
        if "process" in msg:  # the tasks of a process share its count: keep the largest
            p = msg["process"]
            part[2][p] = max(part[2].get(p, 0), int(msg.get("bytes_moved", 0)))
        if part[0] == self.n_tasks:  # epochs complete in order: a task reports e before e+1
            del self._partial[e]
            moved = sum(b - self._process_bytes.get(p, 0) for p, b in part[2].items())
            self._process_bytes.update(part[2])
            self._queue.put((e, part[1] / self.n_rows, time.perf_counter(), moved))

    def epoch_done(self, epoch: int, loss: float) -> None:
        """Record an epoch (or iteration) whose loss the driver computed itself, between
        two jobs: its bytes are the growth of the shards' counters since the last one."""
        self.epochs_done(epoch, [loss])

    def record(self, epoch: int, loss: float, nbytes: int) -> None:
        """Record an epoch (or evaluation) whose loss and bytes moved the driver knows itself
        (e.g. an L-BFGS evaluation that talks to the workers, not to the shards): no call to
        the shards."""
        self._queue.put((int(epoch), float(loss), time.perf_counter(), nbytes))

    def epochs_done(self, first: int, losses: list[float]) -> list[int]:
        """Record epochs ``first, first + 1, ...`` run by one job, with their ``losses``: the
        growth of the shards' counters since the last record is split evenly among them.
        Returns the bytes of each."""
        at = time.perf_counter()
        total = self._moved()
        moved, self._bytes = total - self._bytes, total
        n = max(1, len(losses))
        share = [moved // n + (1 if i < moved % n else 0) for i in range(n)]
        for i, loss in enumerate(losses):
            self._queue.put((int(first) + i, float(loss), at, share[i]))
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
        """Process the reports received so far, then stop the thread and the bar."""
        if not self._thread.is_alive():
            return
        self._queue.put(None)
        self._thread.join()
        self.bar.close()

    def __enter__(self) -> "FitMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
