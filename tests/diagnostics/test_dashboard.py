"""The /dask-ps dashboard page on a real LocalCluster: over HTTP, and drawn by Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest

import dask_ps
from dask_ps.cluster import worker_info
from dask_ps.diagnostics import install, log_checkpoint, log_recovery
from dask_ps.diagnostics.dashboard import CLOCK_COLOR, LOSS_COLOR, SHARD_COLORS, SOURCES

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def dash():
    """``(client, page_url)``: 2 workers x 1 thread, dashboard on, metrics read every 0.25 s."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", worker_dashboard_address=None) as cluster, \
            Client(cluster) as client:
        url = install(client, interval=0.25)
        yield client, url


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.status == 200, url
        return resp.read()


def get_json(url: str):
    return json.loads(get(url))


def wait_for(predicate, timeout: float, what: str):
    """Poll ``predicate()`` until it returns a true value (returned), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def read_a9a(client, data):
    from dask_ps.io import read_libsvm

    X, y = read_libsvm(str(data / "lr_a9a" / "a9a"), n_features=123, blocksize="1MiB")
    return client.persist([X, y])


def test_page_shows_live_metrics_of_a_fit(dash, data):
    client, url = dash
    X, y = read_a9a(client, data)
    # many short clocks: a fit that lasts seconds, for the poller to see it running
    est = dask_ps.LogisticRegression(max_iter=20, clocks_per_epoch=128, random_state=0,
                                     progress=False)
    errors = []

    def fit():
        try:
            est.fit(X, y)
        except BaseException as exc:
            errors.append(exc)

    th = threading.Thread(target=fit)
    th.start()
    workers = set(worker_info(client))

    def live():
        m = get_json(f"{url}/metrics.json")
        # pushes ride with the next clock's pull: wait until both have reached each shard
        busy = [s for s in m["shards"] if s["pull_calls"] > 0 and s["bytes_pushed"] > 0
                and s["job"]]
        placed = m["clocks"] and all(c["worker"] for c in m["clocks"])
        return m if len(busy) == 2 and placed else None

    try:
        m = wait_for(live, 120, "two shards with calls and the clocks of a running job")
        html = get(url).decode()  # while the fit runs
    finally:
        th.join(180)
    assert not errors, errors
    shards = m["shards"]
    # the 124 rows of w (123 features + intercept), split over 2 shards: FTRL's z and n, and
    # the count column of the per-row mean
    assert sorted(s["keys"] for s in shards) == [62, 62]
    assert all(s["nbytes"] == 62 * 8 * 3 for s in shards)
    assert {s["worker"] for s in shards} == workers
    assert all(s["bytes_pulled"] > 0 and s["bytes_pushed"] > 0 and s["worker_memory"] > 0
               for s in shards)
    assert {c["worker"] for c in m["clocks"]} == workers  # one participant per worker
    assert all(c["clock"] >= 0 and c["lag"] >= 0 for c in m["clocks"])
    for s in shards:  # the page carries the same rows in its embedded data
        assert s["worker"] in html
    assert "dask_ps parameter server" in html and "dask-ps/data/shards.json" in html

    # the loss curve of the fit is the estimator's history
    fit = get_json(f"{url}/data/loss.json")
    assert fit["epoch"] == list(range(1, 21))
    np.testing.assert_allclose(fit["loss"], [h["loss"] for h in est.history_], rtol=1e-9)
    assert all(h["bytes"] > 0 and h["time"] > 0 for h in est.history_)
    # rates: some sample saw calls per second on some shard
    tp = get_json(f"{url}/data/throughput.json")
    assert all(len(t) == len(c) for t, c in zip(tp["t"], tp["calls_per_s"]))
    for name in SOURCES:  # every data source answers with equal-length columns
        cols = get_json(f"{url}/data/{name}.json")
        assert len({len(v) for v in cols.values()}) <= 1, name


def echo_task(ps, n):
    keys = np.arange(0, 1000, 7)
    for _ in range(n):
        ps.pull("w", keys)
        ps.push("w", keys, np.ones(keys.shape[0], np.float32))
        ps.clock()
    return n


def test_counters_on_the_page_match_the_shards(dash):
    client, url = dash
    with dask_ps.PSModel(client) as model:
        model.add_table("w", shape=(1000,))
        model.run(echo_task, [30, 30], consistency="ssp", staleness=1)
        want = {s["shard"]: s for s in model.stats()}
        polls = get_json(f"{url}/metrics.json")["polls"]
        # three more polls after the job: one may have been under way, reading the shards
        # before the job ended; the next has the final counters, and the one after that
        # also a rate of zero (a rate is the change between two polls)
        m = wait_for(lambda: (lambda m: m if m["polls"] >= polls + 3 else None)(
            get_json(f"{url}/metrics.json")), 30, "three polls")
        rows = [s for s in m["shards"] if s["model"] == model.uid]
        assert len(rows) == 2
        for r in rows:
            for c in ("pull_calls", "push_calls", "keys_pulled", "keys_pushed", "bytes_pulled",
                      "bytes_pushed"):
                assert r[c] == want[r["shard"]][c], c
            assert r["pull_calls"] > 0 and r["pull_calls_per_s"] == 0.0  # idle now
        assert sum(r["keys"] for r in rows) == 1000


def loss_step(ps, part):
    """A user's step: its partition's loss, reported once per partition and epoch."""
    ps.pull("w", np.arange(4))
    ps.push("w", np.arange(4), np.ones(4, np.float32))
    ps.clock()
    ps.report(epoch=part.epoch, loss=1.0 / (part.epoch + 1) + part.index)


def loss_task(ps, item):
    """A user's task reporting losses without an epoch: its 1st, 2nd, 3rd report."""
    for k in range(3):
        ps.pull("w", np.arange(4))
        ps.clock()
        ps.report(loss=float(item + k))
    return item


def test_any_jobs_reported_loss_draws_the_loss_curve(dash):
    """ps.report(loss=...) of a user's own job (fit_partitions, or run on items), with a
    callback or without, reaches the page's loss curve: per epoch, the mean of the losses
    reported for it."""
    client, url = dash
    got = []
    data = dask_ps.partition(np.ones((40, 2)), client=client, n_partitions=4)
    try:
        with dask_ps.PSModel(client) as model:
            model.add_table("w", shape=(4,))
            model.fit_partitions(loss_step, data, epochs=3, callback=got.append)
            fit = get_json(f"{url}/data/loss.json")
            assert fit["name"] == ["loss_step"] * 3, fit
            assert fit["epoch"] == [0, 1, 2]
            # the four partitions' losses, 1 / (epoch + 1) + index, averaged
            np.testing.assert_allclose(fit["loss"], [1 / (e + 1) + 1.5 for e in range(3)])
            assert len(got) == 12 and {m["job"] for m in got} == {got[0]["job"]}  # callback too

            model.run(loss_task, [0, 1])  # no callback, no epoch: each task's k-th report
            fit = get_json(f"{url}/data/loss.json")
            assert fit["name"] == ["loss_task"] * 3 and fit["epoch"] == [1, 2, 3], fit
            np.testing.assert_allclose(fit["loss"], [0.5, 1.5, 2.5])
    finally:
        data.release()


def line_colors(url: str, models) -> dict[str, str] | None:
    """Colour by label of the throughput lines, once they include the 2 shards of each of
    ``models`` (else None)."""
    tp = get_json(f"{url}/data/throughput.json")
    colors = dict(zip(tp["label"], tp["color"]))
    want = {f"{m.uid[:6]}/{i}" for m in models for i in range(2)}
    return colors if want <= set(colors) else None


def test_shard_lines_keep_their_colors_while_others_come_and_go(dash):
    """A shard's line keeps its colour for its life: not its position among the lines, which
    changes when the shards of a model sorted before it go, or of a new one come."""
    client, url = dash
    models = [dask_ps.PSModel(client, n_shards=2) for _ in range(2)]
    first, kept = sorted(models, key=lambda m: m.uid)  # the lines' order: by model uid
    try:
        before = wait_for(lambda: line_colors(url, models), 60, "the 4 shards' lines")
        mine = {k: c for k, c in before.items() if k[:6] in (first.uid[:6], kept.uid[:6])}
        assert len(set(mine.values())) == 4, before  # 4 distinct colours
        freed = {c for k, c in mine.items() if k[:6] == first.uid[:6]}
        first.close()
        gone = wait_for(lambda: (lambda c: c if not any(k[:6] == first.uid[:6] for k in c)
                                 else None)(line_colors(url, [kept])), 60, "lines to go")
        for k, c in mine.items():
            if k[:6] == kept.uid[:6]:
                assert gone[k] == c, (k, before, gone)
        # a new model's lines take free colours (the smallest slots: the freed ones when
        # no other shard appeared meanwhile), and leave the kept model's alone
        new = dask_ps.PSModel(client, n_shards=2)
        models.append(new)
        after = wait_for(lambda: line_colors(url, [kept, new]), 60, "the new model's lines")
        # (another test's closed model may still be listed, then go: only the kept
        # model's lines are compared)
        mine_kept = {k: c for k, c in gone.items() if k[:6] == kept.uid[:6]}
        assert {k: c for k, c in after.items() if k in mine_kept} == mine_kept
        new_colors = {c for k, c in after.items() if k[:6] == new.uid[:6]}
        assert len(new_colors) == 2 and not new_colors & set(mine_kept.values()), after
        if set(gone) == {k for k in mine if k[:6] == kept.uid[:6]}:  # nothing else live
            assert new_colors == freed, (before, after)
        assert set(after.values()) <= set(SHARD_COLORS)
    finally:
        for m in models:
            m.close()


def figure_legends(html: str):
    """The legends right of the plots in a page's embedded Bokeh document, as a dict title ->
    legend attributes, and a function to resolve a reference to another object."""
    import re

    docs = re.search(r'<script type="application/json" id="[^"]*">\s*(.*?)\s*</script>',
                     html, re.S)
    objects = {}

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "id" in node:
                objects.setdefault(node["id"], node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(docs.group(1)))

    def resolve(ref):
        return objects[ref["id"]]

    out = {}
    for obj in objects.values():
        if obj["name"] != "Figure":
            continue
        attrs = obj["attributes"]
        title = resolve(attrs["title"])["attributes"]["text"]
        for legend in map(resolve, attrs.get("right", [])):
            if legend["name"] == "Legend":
                out[title] = legend["attributes"]
    return out, resolve


def test_page_has_a_legend_naming_each_shard_line(dash):
    """Both traffic plots have a legend beside the plot area, whose items BokehJS makes from
    the throughput source's ``label`` column (one per line, updated with the data)."""
    client, url = dash
    legends, resolve = figure_legends(get(url).decode())
    assert set(legends) == {"Bytes pulled + pushed per shard (MB/s)",
                            "Pull + push calls per shard per second"}, legends
    for legend in legends.values():
        (item,) = map(resolve, legend["items"])
        assert item["attributes"]["label"] == {"type": "field", "field": "label"}
        (lines,) = map(resolve, item["attributes"]["renderers"])
        glyph = resolve(lines["attributes"]["glyph"])
        assert glyph["name"] == "MultiLine"
        source = resolve(lines["attributes"]["data_source"])
        assert source["attributes"]["data_url"] == "dask-ps/data/throughput.json"


def remote_checkpoint(path):
    return log_checkpoint(path, 3, nbytes=4096, seconds=0.5, model="m1")


def test_checkpoint_and_recovery_events(dash):
    client, url = dash
    assert client.submit(remote_checkpoint, "file:///tmp/ckpt.zarr", pure=False).result()
    assert log_recovery(1, "tcp://10.0.0.1:1", "tcp://10.0.0.2:2", checkpoint="ckpt.zarr",
                        model="m1", client=client)
    ck = wait_for(lambda: get_json(f"{url}/data/checkpoints.json")["path"], 30, "checkpoint")
    assert ck[-1] == "file:///tmp/ckpt.zarr"
    rec = get_json(f"{url}/data/recoveries.json")
    assert rec["lost_worker"][-1] == "tcp://10.0.0.1:1" and rec["shard"][-1] == 1
    with pytest.raises(TypeError, match="'version'"):
        log_checkpoint("x", version=[1], client=client)


def test_routes_setting_serves_the_page_without_install():
    import dask
    from distributed import LocalCluster

    routes = dask.config.get("distributed.scheduler.http.routes") + [
        "dask_ps.diagnostics.dashboard"]
    with dask.config.set({"distributed.scheduler.http.routes": routes}), \
            LocalCluster(n_workers=0, dashboard_address="127.0.0.1:0",
                         processes=False) as cluster:
        base = f"http://127.0.0.1:{cluster.scheduler.http_server.port}"
        html = get(f"{base}/dask-ps").decode()
        assert "dask_ps parameter server" in html
        assert get_json(f"{base}/dask-ps/metrics.json")["shards"] == []
        assert get(f"{base}/dask-ps/static/js/bokeh.min.js")[:100]
        with pytest.raises(urllib.error.HTTPError, match="404"):
            get(f"{base}/dask-ps/data/nothing.json")


# -- headless Chromium ----------------------------------------------------------------------
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium not found: install Debian's chromium package (.ci/run does)")
    return exe


def color_pixels(img: np.ndarray, hex_color: str, tol: int = 12) -> int:
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img[..., :3].astype(int) - rgb).max(axis=-1) <= tol).sum())


def legend_entries(img: np.ndarray, hex_color: str, margin: int = 4) -> list[tuple]:
    """``(row, column)`` of each legend entry drawn in ``hex_color``: a swatch, a short
    level run of the colour (10 to 18 px) with none of it around (a line's level stretch
    goes on at its ends), and dark text (its label) right of it."""
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    mask = np.abs(img[..., :3].astype(int) - rgb).max(axis=-1) <= 12
    dark = img[..., :3].max(axis=-1) < 150
    out = []
    for y in range(margin, mask.shape[0] - margin):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], mask[y].astype(int), [0]])))
        for a, b in zip(edges[::2], edges[1::2]):
            if not (10 <= b - a <= 18 and a >= margin):
                continue
            box = mask[y - margin:y + margin + 1, a - margin:b + margin].copy()
            box[margin - 2:margin + 3, margin:margin + b - a] = False  # the swatch, 2 px thick
            if not box.any() and dark[y - 6:y + 8, b + 2:b + 62].sum() > 30:
                out.append((y, b))
    return out


def busy_task(ps, item):
    """Pull/push until the driver sets the distributed Event ``stop`` (or ``item[1]`` s pass)."""
    from distributed import Event

    stop, deadline = Event(item[0]), time.time() + item[1]
    # more bytes to shard 0 than to shard 1: their traffic lines must not overlap
    keys = np.concatenate([np.arange(0, 2000), np.arange(2000, 4000, 7)])
    while time.time() < deadline and not (ps.current_clock % 20 == 0 and stop.is_set()):
        ps.pull("w", keys)
        ps.push("w", keys, np.ones(keys.shape[0], np.float32))
        ps.clock()
        time.sleep(0.005)
    return ps.current_clock


def traffic_of(url: str, uid: str, n: int) -> dict | None:
    """The page's throughput source once its lines are the 2 shards of model ``uid`` alone,
    each with ``n`` samples of traffic (a rate above zero); else None.

    The page draws all samples it keeps (``PSMetrics.history``, 150 s at 0.25 s), and the
    job runs until the driver stops it: the source the page fetches later still has them.
    """
    tp = get_json(f"{url}/data/throughput.json")
    if tp["label"] != [f"{uid[:6]}/{i}" for i in range(2)]:
        return None
    return tp if all(sum(v > 0 for v in mb) >= n for mb in tp["mb_per_s"]) else None


@pytest.mark.slow
@pytest.mark.timeout(600)  # headless Chromium took > 120 s to draw at load ~20
def test_chromium_draws_the_plots(dash, data, tmp_path):
    from distributed import Event
    from PIL import Image

    client, url = dash
    X, y = read_a9a(client, data)
    dask_ps.LogisticRegression(max_iter=3, batch_size=256, progress=False).fit(X, y)
    stop = Event("dask-ps-test-stop")
    with dask_ps.PSModel(client) as model:  # traffic while the page is drawn
        model.add_table("w", shape=(4000,))
        th = threading.Thread(target=model.run,
                              args=(busy_task, [(stop.name, 420.0)] * 2),
                              kwargs=dict(consistency="ssp", staleness=2))
        th.start()
        try:
            # what the page draws, not just samples of it: the shards of an idle model (this
            # one before its tasks start, or the fit's until the scheduler forgets them) have
            # rates of zero, lines that lie on each other (the 2nd hides the 1st)
            tp = wait_for(lambda: traffic_of(url, model.uid, 12), 180,
                          "throughput lines of the job's 2 shards, each with 12 busy samples")
            shot = tmp_path / "dask-ps-page.png"
            proc = subprocess.run(
                [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--hide-scrollbars",
                 "--window-size=1400,1500", "--virtual-time-budget=5000",
                 f"--screenshot={shot}", url], capture_output=True, text=True, timeout=400)
        finally:
            stop.set()
            th.join(60)
    assert shot.is_file(), proc.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[:2] == (1500, 1400)
    print(f"screenshot: {shot}")
    # the loss line (3 px wide, 3 epochs) and its markers, the clock bars, the shard lines
    assert color_pixels(img, LOSS_COLOR) > 500
    assert color_pixels(img, CLOCK_COLOR) > 500
    assert len(set(tp["color"])) == 2, tp["color"]  # the lines differ in colour
    assert all(color_pixels(img, c) > 100 for c in tp["color"])
    # the legends: an entry per line on each traffic plot, right of its plot area
    entries = [legend_entries(img, c) for c in tp["color"]]
    assert all(len(e) == 2 for e in entries), entries
    assert (img.reshape(-1, 3) != 255).any(axis=1).mean() > 0.02  # not a blank page
