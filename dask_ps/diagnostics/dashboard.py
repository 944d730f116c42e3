"""The ``/dask-ps`` page of the Dask dashboard: shards, traffic, clocks, loss, checkpoints.

A module exposing ``routes``, as distributed's own pages do: list it in the scheduler's
``distributed.scheduler.http.routes`` setting, or let :func:`dask_ps.diagnostics.install`
add the routes to a running scheduler. The page is a standalone Bokeh document whose data
sources poll small JSON endpoints once a second (Bokeh's ``AjaxDataSource``), so it needs no
Bokeh server session; the numbers come from the :class:`~.collector.PSMetrics` plugin.

Routes (relative to the dashboard's prefix):

* ``dask-ps``: the page;
* ``dask-ps/data/<source>.json``: the columns of one of its data sources;
* ``dask-ps/metrics.json``: everything at once, for scripts;
* ``dask-ps/static/...``: BokehJS, served from the installed bokeh (no CDN needed).
"""

from __future__ import annotations

import json
import math

from bokeh.core.properties import field
from bokeh.embed import file_html
from bokeh.layouts import column, row
from bokeh.models import (
    AjaxDataSource,
    ColumnDataSource,
    DataTable,
    Div,
    Legend,
    LegendItem,
    NumberFormatter,
    SingleIntervalTicker,
    TableColumn,
)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure
from bokeh.resources import Resources
from bokeh.util.paths import static_path
from distributed.http.utils import RequestHandler
from tornado import web

from .collector import PSMetrics, get_plugin
from .events import CHECKPOINT_TOPIC, RECOVERY_TOPIC

__all__ = ["CLOCK_COLOR", "LOSS_COLOR", "SHARD_COLORS", "add_routes", "page", "routes",
           "shard_color", "source_data"]

#: Colour of the loss curve (tests look for it in screenshots).
LOSS_COLOR = "#d62728"
CLOCK_COLOR = "#9467bd"
#: Colours of the shards' traffic lines, by the series' slot (see :func:`shard_color`).
SHARD_COLORS = tuple(Category10_10)
POLL_MS = 1000
WIDTH = 640


# -- data sources ---------------------------------------------------------------------------
def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _columns(rows: list[dict], names: list[str]) -> dict[str, list]:
    return {n: [_clean(r.get(n)) for r in rows] for n in names}


SHARD_COLUMNS = ["model", "shard", "worker", "tables", "keys", "nbytes", "worker_memory",
                 "pull_calls", "push_calls", "bytes_pulled", "bytes_pushed",
                 "pull_calls_per_s", "push_calls_per_s", "bytes_pulled_per_s",
                 "bytes_pushed_per_s"]
CLOCK_COLUMNS = ["model", "participant", "worker", "clock", "lag", "done"]
CHECKPOINT_COLUMNS = ["time", "model", "path", "version", "nbytes", "seconds"]
RECOVERY_COLUMNS = ["time", "model", "shard", "lost_worker", "new_worker", "checkpoint"]


def shard_color(slot: int) -> str:
    """The colour of the traffic lines of the shard in ``slot``.

    Parameters
    ----------
    slot : int
        The shard's slot, >= 0, from :meth:`.PSMetrics.throughput`: the smallest not held by
        another live shard when the collector first read the shard, and kept by it.

    Returns
    -------
    str
        ``SHARD_COLORS[slot % 10]``, a ``"#rrggbb"`` colour. A line keeps its colour for as
        long as its shard lives, whatever other lines come or go; two live shards share one
        only if their slots differ by a multiple of 10, which needs more than 10 shards
        alive at some time.
    """
    return SHARD_COLORS[slot % len(SHARD_COLORS)]


def source_data(plugin: PSMetrics, name: str) -> dict[str, list]:
    """The columns of data source ``name`` of the page.

    Parameters
    ----------
    plugin : PSMetrics
        The collector whose numbers the page shows.
    name : str
        One of :data:`SOURCES`.

    Returns
    -------
    dict of str to list
        Columns of equal length (JSON-able: NaN and inf become None); ``throughput`` has a
        row per live shard, with its ``label`` and line ``color`` (:func:`shard_color`).

    Raises
    ------
    KeyError
        An unknown source name.
    """
    if name == "shards":
        rows = plugin.shards()
        for r in rows:
            r["mb_per_s"] = (r["bytes_pulled_per_s"] + r["bytes_pushed_per_s"]) / 1e6
        return _columns(rows, SHARD_COLUMNS + ["mb_per_s"])
    if name == "throughput":
        data = plugin.throughput()
        data["mb_per_s"] = [[b / 1e6 for b in series] for series in data.pop("bytes_per_s")]
        data["color"] = [shard_color(slot) for slot in data["slot"]]
        return data
    if name == "clocks":
        rows = plugin.clocks()
        data = _columns(rows, CLOCK_COLUMNS)
        data["label"] = [f"{r['participant']}: {r['worker']}" + (" (done)" if r["done"] else "")
                         for r in rows]
        return data
    if name == "staleness":
        data = plugin.staleness_series()
        # a participant at clock c may pull once the slowest is at c - s, and ticks to c + 1
        # before its next pull waits: the gap between clocks reaches s + 1
        data["bound"] = [None if _clean(b) is None else b + 1 for b in data["bound"]]
        return data
    if name == "loss":
        fit = plugin.fit()
        return dict(epoch=fit["epoch"], loss=fit["loss"], elapsed=fit["elapsed"],
                    name=[fit["name"]] * len(fit["epoch"]))
    if name == "checkpoints":
        return _columns(plugin.events(CHECKPOINT_TOPIC), CHECKPOINT_COLUMNS)
    if name == "recoveries":
        return _columns(plugin.events(RECOVERY_TOPIC), RECOVERY_COLUMNS)
    raise KeyError(f"unknown data source {name!r}")


SOURCES = ("shards", "throughput", "clocks", "staleness", "loss", "checkpoints", "recoveries")


# -- the page -------------------------------------------------------------------------------
def _source(plugin: PSMetrics, name: str) -> AjaxDataSource:
    # relative URL: the page lives at <prefix>dask-ps, whatever the dashboard's prefix
    return AjaxDataSource(data_url=f"dask-ps/data/{name}.json", polling_interval=POLL_MS,
                          mode="replace", method="GET", data=source_data(plugin, name))


def _table(source: ColumnDataSource, cols: list[tuple], height: int) -> DataTable:
    fmt = NumberFormatter(format="0,0.[00]")
    return DataTable(source=source, width=2 * WIDTH, height=height, index_position=None,
                     columns=[TableColumn(field=f, title=t, formatter=fmt) if num else
                              TableColumn(field=f, title=t) for f, t, num in cols])


def _shard_lines(fig, ys: str, source: AjaxDataSource) -> None:
    """A line per shard on ``fig``, and a legend naming them right of the plot area (BokehJS
    makes its items from the ``label`` column, as the data updates)."""
    lines = fig.multi_line(xs="t", ys=ys, line_color="color", line_width=2, source=source)
    # legend_field="label" would put the legend inside the plot area, over the lines
    fig.add_layout(Legend(items=[LegendItem(label=field("label"), renderers=[lines])],
                          label_text_font_size="8pt", glyph_width=14, spacing=0, padding=4,
                          margin=4, label_standoff=4, border_line_color=None), "right")


def page(plugin: PSMetrics) -> str:
    """The HTML of the page, with the current data embedded (it then updates itself)."""
    src = {name: _source(plugin, name) for name in SOURCES}
    head = Div(text="<h2>dask_ps parameter server</h2><p>Shards, traffic, clocks and loss, "
                    f"updated every {POLL_MS / 1000:g} s from the shards' counters.</p>")
    shards = _table(src["shards"], [
        ("model", "model", False), ("shard", "shard", True), ("worker", "worker", False),
        ("tables", "tables", False), ("keys", "keys", True), ("nbytes", "shard bytes", True),
        ("worker_memory", "worker RSS", True), ("pull_calls", "pulls", True),
        ("push_calls", "pushes", True), ("pull_calls_per_s", "pulls/s", True),
        ("push_calls_per_s", "pushes/s", True), ("mb_per_s", "MB/s", True)], 160)
    tools = "pan,wheel_zoom,box_zoom,reset,hover"
    traffic = figure(title="Bytes pulled + pushed per shard (MB/s)", x_axis_type="datetime",
                     width=WIDTH, height=260, tools=tools)
    calls = figure(title="Pull + push calls per shard per second", x_axis_type="datetime",
                   width=WIDTH, height=260, tools=tools)
    for fig, ys in ((traffic, "mb_per_s"), (calls, "calls_per_s")):
        _shard_lines(fig, ys, src["throughput"])
    clock = figure(title="Clock per worker (participant)", width=WIDTH, height=260,
                   tools=tools, x_axis_label="participant", y_axis_label="clock")
    clock.xaxis.ticker = SingleIntervalTicker(interval=1)
    clock.vbar(x="participant", top="clock", width=0.7, color=CLOCK_COLOR,
               source=src["clocks"])
    clock.text(x="participant", y=0, text="label", angle=math.pi / 2, text_font_size="9pt",
               x_offset=4, source=src["clocks"])
    stale = figure(title="Clock gap, fastest minus slowest (dashed: SSP bound, staleness + 1)",
                   x_axis_type="datetime", width=WIDTH, height=260, tools=tools,
                   y_axis_label="clocks")
    stale.step(x="t", y="staleness", line_width=2, color="#2ca02c", mode="after",
               source=src["staleness"])
    stale.line(x="t", y="bound", line_dash="dashed", color="#7f7f7f", source=src["staleness"])
    loss = figure(title="Loss of the latest fit, per epoch", width=WIDTH, height=260,
                  tools=tools, x_axis_label="epoch", y_axis_label="loss")
    loss.line(x="epoch", y="loss", line_width=3, color=LOSS_COLOR, source=src["loss"])
    loss.scatter(x="epoch", y="loss", size=8, color=LOSS_COLOR, source=src["loss"])
    checkpoints = _table(src["checkpoints"], [
        ("model", "model", False), ("path", "checkpoint", False),
        ("version", "version", False), ("nbytes", "bytes", True),
        ("seconds", "seconds", True)], 120)
    recoveries = _table(src["recoveries"], [
        ("model", "model", False), ("shard", "shard", True),
        ("lost_worker", "lost worker", False), ("new_worker", "new worker", False),
        ("checkpoint", "from checkpoint", False)], 120)
    layout = column(head, Div(text="<b>Shards</b>"), shards, row(traffic, calls),
                    row(clock, stale), row(loss),
                    Div(text="<b>Checkpoints written</b>"), checkpoints,
                    Div(text="<b>Recoveries</b>"), recoveries)
    return file_html(layout, Resources(mode="server", root_url="dask-ps/"),
                     title="dask_ps: parameter server")


# -- handlers -------------------------------------------------------------------------------
async def _plugin(scheduler) -> PSMetrics:
    """The scheduler's metrics plugin; installed (and polled once) on first use."""
    plugin = get_plugin(scheduler)
    if plugin is None:
        plugin = PSMetrics()
        await plugin.start(scheduler)
        scheduler.add_plugin(plugin, name=PSMetrics.name, idempotent=True)
        await plugin.poll()
    return plugin


class PageHandler(RequestHandler):
    async def get(self):
        self.write(page(await _plugin(self.server)))


class DataHandler(RequestHandler):
    async def get(self, name):
        try:
            data = source_data(await _plugin(self.server), name)
        except KeyError as exc:
            raise web.HTTPError(404, reason=str(exc)) from None
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(data))

    post = get  # AjaxDataSource's default method


class MetricsHandler(RequestHandler):
    async def get(self):
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps((await _plugin(self.server)).snapshot(), default=_clean))


routes: list[tuple] = [
    (r"dask-ps", PageHandler, {}),
    (r"dask-ps/data/(\w+)\.json", DataHandler, {}),
    (r"dask-ps/metrics\.json", MetricsHandler, {}),
    (r"dask-ps/static/(.*)", web.StaticFileHandler, {"path": static_path()}),
]


def _has_routes(router) -> bool:
    for rule in getattr(router, "rules", []):
        if rule.target is PageHandler or _has_routes(rule.target):
            return True
    return False


def add_routes(scheduler, prefix: str = "/") -> bool:
    """Serve the page from ``scheduler``'s HTTP server (unless the routes setting did).

    Returns False when the scheduler has no HTTP server.
    """
    app = getattr(scheduler, "http_application", None)
    if app is None:
        return False
    if _has_routes(app.default_router):
        return True
    from distributed.http.utils import get_handlers

    app.add_handlers(".*$", get_handlers(scheduler, [__name__], prefix=prefix))
    return True
