"""What ``dask-ps train`` prints about a run as it goes: the data read, the fit's passes,
checkpoints and recoveries as they happen (batch logs), the history and the rate line.

Each algorithm names its passes (:meth:`~._algorithms.Algorithm.passes_for`: "epoch",
"round", "iteration"; lr's L-BFGS: "evaluation"); every line here says them through
:func:`passes_of`.
"""

from __future__ import annotations

import math
import numbers
import statistics
import time


def say(text: str) -> None:
    """Print one line of the command's output, now (a batch log shows it as it happens)."""
    print(text, flush=True)


def passes_of(n: int | None, passes: str) -> str:
    """``"3 rounds"``, ``"1 epoch"``: ``n`` passes of an algorithm that calls one ``passes``;
    ``n`` None: the plural alone (``"rounds"``)."""
    plural = passes + ("es" if passes.endswith("s") else "s")
    if n is None:
        return plural
    return f"{n:,} {passes if n == 1 else plural}"


def first_passes(n: int, passes: str) -> str:
    """``"rounds 1-3"``, ``"round 1"``: the first ``n`` passes, named as a range."""
    return f"{passes} 1" if n == 1 else f"{passes_of(None, passes)} 1-{n:,}"


def read_line(path: str, seconds: float, summary: str, compiled: bool | None = False) -> str:
    """The line saying how long reading ``--train`` took, until its partitions are held by
    the workers, and what it holds (:attr:`~._algorithms.Loaded.summary`).

    Parameters
    ----------
    compiled : bool or None, default False
        Whether the read compiled numba kernels, on a worker or here, not finding them in
        their on-disk cache (a fresh clone, a changed source:
        :func:`~dask_ps.kernels.compiled.compiled_kernels`): then the time is said to
        include it (reading a9a took 45 s so, 5-7 s with the kernels cached, on a loaded
        2-core machine); False or None (unknown): nothing is said.
    """
    cold = " (includes compiling numba kernels: their cache was cold)" if compiled else ""
    return f"read {path} onto the workers in {seconds:.1f} s{cold}: {summary}"


class Events:
    """Prints the fit's passes, checkpoints and recoveries as they happen (batch logs);
    ``passes``: what the algorithm calls one pass."""

    def __init__(self, client, passes: str = "epoch") -> None:
        from ..diagnostics import CHECKPOINT_TOPIC, FIT_TOPIC, RECOVERY_TOPIC

        self.client, self.passes = client, passes
        self.checkpoints: list[str] = []
        self.restored = 0  # passes a resumed fit took from its checkpoint
        self.shards = ""
        self.topics = {FIT_TOPIC: self._fit, CHECKPOINT_TOPIC: self._checkpoint,
                       RECOVERY_TOPIC: self._recovery}
        for topic, handler in self.topics.items():
            client.subscribe_topic(topic, handler)

    def _fit(self, event) -> None:
        m = event[1]
        if m.get("shards") and m["shards"] != self.shards:  # at the start, after a recovery
            self.shards = m["shards"]
            say("shards: " + ", ".join(f"{i} on {a}" for i, a in
                                       enumerate(self.shards.split())))
        of = f"/{m['n_epochs']}" if m.get("n_epochs") else ""
        say(f"[{m['elapsed']:7.1f} s] {m['name']} {m['epoch']}{of}: loss {m['loss']:.6g}")

    def _checkpoint(self, event) -> None:
        m = event[1]
        if m.get("resumed_clock") is not None:
            self.restored = m["resumed_clock"]
            say(resumed_line(m["path"], m["version"], self.restored, self.passes))
            return
        self.checkpoints.append(f"{m['path']} version {m['version']}")
        took = f" in {m['seconds']:.2f} s" if m.get("seconds") is not None else ""
        say(f"checkpoint written: {m['path']} version {m['version']}{took}")

    @staticmethod
    def _recovery(event) -> None:
        m = event[1]
        say(f"recovery: shard {m['shard']} lost with worker {m['lost_worker']}, recreated on "
            f"{m['new_worker']} from {m.get('checkpoint')}")

    def close(self) -> None:
        for topic in self.topics:
            try:
                self.client.unsubscribe_topic(topic)
            except Exception:  # the client may be gone already
                pass


def resumed_line(path: str, version: int, done: int, passes: str = "epoch") -> str:
    """The line of a fit resumed from checkpoint ``path`` ``version`` after ``done`` passes
    (each called ``passes``)."""
    where = f"resumed from checkpoint: {path} version {version}"
    if not done:
        return f"{where}, before {passes} 1"
    return (f"{where}, after {passes} {done} ({first_passes(done, passes)} "
            f"{'is' if done == 1 else 'are'} not run again)")


def rate_line(history: list[dict], units: float, unit: str, wall: float,
              restored: int = 0, passes: str = "epoch", note: str = "") -> str:
    """Wall time and throughput of this run's passes (``passes``: what the algorithm calls
    one, "epoch", "round", "iteration"), the first pass (numba compiles there on a cold
    cache) left out of the rate; a record's ``time`` counts from the start of the fit's
    epoch loop, so the wall time ``wall`` of the whole ``fit`` is split into the passes'
    seconds (from the loop's start to the last one's end) and the rest (placing the data,
    surveying it, starting the shards, before the first pass; collecting the model after
    the last: measured as the difference). The first ``restored`` pass records
    came from a checkpoint (``--resume``): they are not this run's, and only their number
    is said (this run's ``time`` goes on from the last one's: its seconds count from
    there). ``note`` is said beside the number of passes (``"6 evaluations, 5 L-BFGS
    iterations, 2.01 s"``: :meth:`~._algorithms.Algorithm.passes_for`)."""
    def word(n):
        return passes_of(n, passes)

    def times_of(records):
        return [h["time"] for h in records
                if isinstance(h.get("time"), float) and math.isfinite(h["time"])]

    records = [h for h in history if "event" not in h]
    since = max(times_of(records[:restored]), default=0.0)  # where this run's times start
    times = [t - since for t in times_of(records[restored:])]
    n = len(times)
    line = f"train wall {wall:.2f} s"
    if n and 0 <= times[-1] <= wall:
        beside = f", {note}," if note else ""
        line += (f" ({word(n)}{beside} {times[-1]:.2f} s; the other {wall - times[-1]:.2f} "
                 f"s: placing the data and starting the shards before, collecting the model "
                 f"after)")
    more = (f"; {first_passes(restored, passes)} restored from the checkpoint" if restored
            else "")
    if n == 0 and restored:  # the checkpoint held the whole fit: nothing ran
        return (f"{line}; no {passes} run: {first_passes(restored, passes)} (all of this "
                f"fit's) restored from the checkpoint")
    if n < 2:
        return (f"{line}; {word(n or 1)} over {units:,.0f} {unit}{more}; no rate: a first "
                f"{passes} includes compiling numba kernels when their cache is cold")
    first, rest = times[0], times[-1] - times[0]
    if rest <= 0:
        return f"{line}; {word(n)} over {units:,.0f} {unit}{more}"
    return (f"{line}; first {passes} {first:.2f} s (includes compiling numba kernels when "
            f"their cache is cold), then {per_second(units * (n - 1) / rest, unit)} "
            f"({word(n - 1)} over {units:,.0f} {unit}{more})")


def per_second(rate: float, unit: str) -> str:
    """``rate`` ``unit`` per second, two decimals, in millions (``"1.25 M rows/s"``) from
    0.1 M/s, in thousands (``"3.40 k rows/s"``) from 0.1 k/s, else as it is (``"42.50
    rows/s"``): in the largest of the three where it is at least 0.1, so that a small
    file's rate shows its digits (it read ``0.00 M rows/s``)."""
    for scale, prefix in ((1e6, "M "), (1e3, "k ")):
        if rate >= 0.1 * scale:
            return f"{rate / scale:.2f} {prefix}{unit}/s"
    return f"{rate:.2f} {unit}/s"


def print_history(history: list[dict], n: int, passes: str = "epoch") -> None:
    """The last ``n`` rows of the fit's history (0: all), one line each. The pass is named
    as the rest of the output names it, ``passes``: a row numbering it under that name too
    (L-BFGS's ``evaluation``) shows that number only, not its ``epoch`` as well; another
    row shows its ``epoch`` as ``round`` (GBDT) or ``iteration`` (LDA)."""
    def named(h: dict) -> dict:
        if passes == "epoch" or "epoch" not in h:
            return h
        if passes in h:
            return {k: v for k, v in h.items() if k != "epoch"} \
                if h[passes] == h["epoch"] else h
        return {(passes if k == "epoch" else k): v for k, v in h.items()}

    shown = [named(h) for h in (history[-n:] if n else history)]
    say(f"history: last {len(shown)} of {len(history)} rows (--history N for more, 0: all)"
        if len(shown) < len(history) else
        f"history: {len(history)} row{'s' if len(history) != 1 else ''}")
    for h in shown:
        say("  " + "  ".join(f"{k} {history_value(k, v)}" for k, v in h.items()))


#: A list of more numbers than this is shown in a history row by its count, min, median and
#: max (:func:`history_value`).
SHORT_LIST = 8


def history_value(key: str, value) -> str:
    """``value`` of the field ``key`` of a history row as :func:`print_history` shows it, on
    one line (``history_`` itself is not changed): a float to 6 significant digits, or, in a
    field named ``..._at`` (a recovery's ``detected_at``), a Unix time as the local date and
    time; a list of dicts of numbers, one per task (GBDT's ``task_seconds``), as the range
    of each key over the tasks, one number when they agree (``[2 tasks, min..max: hist
    0.0003..0.0012, push 0.0003, ...]``); a list of more than :data:`SHORT_LIST` numbers
    as their count, min, median and max; other lists and dicts item by item, strings
    without quotes (``[tcp://10.0.0.5:40123]``)."""
    if isinstance(value, float):
        if key.endswith("_at") and math.isfinite(value) and value > 1e9:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        return f"{value:.6g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} {history_value(k, v)}" for k, v in value.items()) + "}"
    if not isinstance(value, (list, tuple)):
        return str(value)
    if value and all(isinstance(v, dict) for v in value):
        return _per_task(key, value)
    if len(value) > SHORT_LIST and all(map(_is_number, value)):
        xs = sorted(value)
        return (f"[{len(xs)} values: min {_short(xs[0])}, median "
                f"{_short(statistics.median(xs))}, max {_short(xs[-1])}]")
    return "[" + ", ".join(history_value(key, v) for v in value) + "]"


def _per_task(key: str, rows: list[dict]) -> str:
    """Dicts ``rows``, one per task (or item, for a ``key`` not ``task_...``): each key's
    numbers as their range over the rows, its other values item by item."""
    what = ("task" if key.startswith("task") else "item") + ("s" if len(rows) != 1 else "")
    parts = []
    for k in dict.fromkeys(k for r in rows for k in r):
        values = [r[k] for r in rows if k in r]
        if not all(map(_is_number, values)):
            parts.append(f"{k} {history_value(k, values)}")
        elif min(values) == max(values):
            parts.append(f"{k} {_short(values[0])}")
        else:
            parts.append(f"{k} {_short(min(values))}..{_short(max(values))}")
    ranged = ", min..max" if len(rows) > 1 else ""
    return f"[{len(rows)} {what}{ranged}: " + ", ".join(parts) + "]"


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _short(v) -> str:
    """A number of a summary: 4 significant digits (an int as it is)."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)
