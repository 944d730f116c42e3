"""Task reports, progress bars, per-epoch history and plot_history."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import dask_ps
from dask_ps.diagnostics import ProgressBar, plot_history

pytestmark = pytest.mark.timeout(180)


def reporting_task(ps, item):
    for epoch in range(1, 4):
        ps.pull("w", [0, 1])
        ps.push("w", [0, 1], [1.0, 1.0])
        ps.clock()
        ps.report(epoch=epoch, loss=np.float64(item * epoch), where="task")
    return item


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_run_callback_gets_every_report(where, request):
    client = "local" if where == "local" else request.getfixturevalue("client2")
    got = []
    with dask_ps.PSModel(client) as model:
        model.add_table("w", shape=(10,))
        # a worker's events reach the driver before its task's result: all are in on return
        assert model.run(reporting_task, [1, 2], callback=got.append) == [1, 2]
    assert sorted((m["task"], m["epoch"], m["loss"]) for m in got) == [
        (t, e, float((t + 1) * e)) for t in (0, 1) for e in (1, 2, 3)]
    assert {m["where"] for m in got} == {"task"} and len({m["job"] for m in got}) == 1
    assert all(isinstance(m["loss"], float) for m in got)  # NumPy scalars made plain


def bad_report_task(ps, item):
    ps.report(epoch=1, weights=np.zeros(3))


def test_report_of_an_array_names_the_key():
    with dask_ps.PSModel("local") as model:
        model.add_table("w", shape=(2,))
        with pytest.raises(TypeError, match="'weights' must be a number"):
            model.run(bad_report_task, [0], callback=lambda m: None)


def test_a_failing_callback_does_not_stop_the_job(caplog):
    def callback(msg):
        raise ZeroDivisionError("from the callback")

    with dask_ps.PSModel("local") as model:
        model.add_table("w", shape=(10,))
        assert model.run(reporting_task, [1], callback=callback) == [1]
    assert "callback of job" in caplog.text and "ZeroDivisionError" in caplog.text


def test_a_callback_failing_on_every_report_logs_one_traceback(caplog):
    """A callback of the wrong signature (``lambda **kw: None``) logged a traceback per
    report; now the first, saying how the callback is called, and a count at the end."""
    with dask_ps.PSModel("local") as model:
        model.add_table("w", shape=(10,))
        assert model.run(reporting_task, [1], callback=lambda **kw: None) == [1]
    failed = [r for r in caplog.records if "report callback of job" in r.getMessage()]
    assert [r.levelname for r in failed] == ["ERROR", "WARNING"], caplog.text
    assert "called with one argument, the report, a dict" in failed[0].getMessage()
    assert failed[0].exc_info[0] is TypeError
    assert failed[1].getMessage().endswith("failed 3 times")


def test_progress_bar_text():
    out = io.StringIO()
    bar = ProgressBar(4, "fit", stream=out, enabled=True, width=8)
    bar.update(2, loss=0.51234567)
    assert "fit: |####----| 2/4 epochs [00:00, loss 0.5123]" in out.getvalue()
    bar.close()
    assert out.getvalue().endswith("]\n")
    quiet = io.StringIO()
    ProgressBar(4, stream=quiet, enabled=False).update(1)
    assert quiet.getvalue() == ""
    assert ProgressBar(None, unit="evaluation", enabled=False).text().startswith("0 evaluations")


def binary_data(n=2000, d=30, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    y = (X @ rng.normal(size=d) + 0.1 * rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.mark.filterwarnings("ignore:L-BFGS-B stopped at max_iter=3")  # 3 iterations, on purpose
@pytest.mark.parametrize("solver", ["ftrl", "lbfgs"])
def test_fit_history_and_progress(solver, capsys):
    X, y = binary_data()
    est = dask_ps.LogisticRegression(solver=solver, max_iter=3, client="local", progress=True)
    est.fit(X, y)
    err = capsys.readouterr().err
    hist = est.history_
    if solver == "ftrl":
        assert [h["epoch"] for h in hist] == [1, 2, 3]
        assert "LogisticRegression(ftrl): |" in err and "3/3 epochs" in err
    else:
        assert [h["evaluation"] for h in hist] == list(range(1, len(hist) + 1))
        assert f"{len(hist)} evaluations" in err
    times = [h["time"] for h in hist]
    assert all(t > 0 for t in times) and times == sorted(times)
    assert all(h["bytes"] > 0 for h in hist)  # every epoch pulls and pushes weights
    est.set_params(progress=False).fit(X, y)
    assert capsys.readouterr().err == ""


def test_progress_default_is_off_when_not_interactive(capsys):
    X, y = binary_data()
    assert not sys.stderr.isatty()
    dask_ps.LogisticRegression(max_iter=2, client="local").fit(X, y)
    assert capsys.readouterr().err == ""


def test_plot_history():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y = binary_data()
    est = dask_ps.LogisticRegression(max_iter=4, client="local", progress=False).fit(X, y)
    axes = dask_ps.plot_history(est)
    assert len(axes) == 2
    xs, ys = axes[0].lines[0].get_data()
    assert list(xs) == [1, 2, 3, 4]
    np.testing.assert_allclose(ys, [h["loss"] for h in est.history_])
    assert axes[1].get_ylabel() == "bytes moved"
    plt.close("all")
    with pytest.raises(ValueError, match="not fitted"):
        plot_history(dask_ps.LogisticRegression())
    with pytest.raises(ValueError, match="none of"):
        plot_history(est, keys=("accuracy",))


def test_plot_history_without_matplotlib(monkeypatch):
    X, y = binary_data()
    est = dask_ps.LogisticRegression(max_iter=1, client="local", progress=False).fit(X, y)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # import fails
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_history(est)


def epochs_task(ps, item):
    for epoch in range(1, 4):
        for _ in range(5):
            ps.pull("w", [0, 1])
            ps.push("w", [0, 1], [1.0, 1.0])
            ps.clock()
        ps.report(epoch=epoch, loss=1.0)
    return item


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_monitor_bytes_add_up_to_the_shards_counts(where, request):
    from dask_ps.diagnostics import FitMonitor

    client = "local" if where == "local" else request.getfixturevalue("client2")
    with dask_ps.PSModel(client) as model:
        model.add_table("w", shape=(10,))  # float32: a pull or push of 2 keys moves 24 bytes
        with FitMonitor(model, "test", 3, n_tasks=2, n_rows=4, progress=False) as monitor:
            model.run(epochs_task, [0, 1], callback=monitor.task_report)
        total = sum(s["bytes_pulled"] + s["bytes_pushed"] for s in model.stats())
    entries = [monitor.entries[e] for e in (1, 2, 3)]
    assert [e["loss"] for e in entries] == [0.5, 0.5, 0.5]
    assert all(e["bytes"] >= 24 * 5 for e in entries)  # at least the pulls of 5 clocks
    # what the processes counted is what the shards counted, but for the pushes still in
    # flight at the last report (at most one clock's, 24 bytes, per process)
    n_processes = 1 if where == "local" else 2
    assert 0 <= total - sum(e["bytes"] for e in entries) <= 24 * n_processes


@pytest.mark.parametrize("interval, sent", [(0.0, list(range(1, 21))), (60.0, [1, 20])])
def test_monitor_event_interval(monkeypatch, interval, sent):
    """With ``event_interval``, epochs recorded sooner than it after the last event are not
    sent, but the last one is (at close); the entries keep every epoch."""
    from dask_ps.diagnostics import progress

    class Model:  # the monitor's view of a model on a cluster
        client = object()
        shards = []

        def stats(self):
            return []

    events = []
    monkeypatch.setattr(progress, "emit_many",
                        lambda topic, msgs, client: events.extend(msgs))
    with progress.FitMonitor(Model(), "test", None, progress=False,
                             event_interval=interval) as monitor:
        for e in range(1, 21):
            monitor.record(e, 1.0 / e, 8)
    assert [m["epoch"] for m in events] == sent
    assert events[-1]["loss"] == 1.0 / 20
    assert sorted(monitor.entries) == list(range(1, 21))


def test_monitor_records_an_epoch_once_every_task_is_past_it(monkeypatch):
    """Tasks may report an epoch several times (once per partition): the epoch is recorded
    when every task has reported a later one, with the mean loss; the rest at close."""
    from dask_ps.diagnostics import progress

    class Model:  # the monitor's view of a model on a cluster
        client = object()
        shards = []

    events = []
    monkeypatch.setattr(progress, "emit_many",
                        lambda topic, msgs, client: events.extend(msgs))
    monitor = progress.FitMonitor(Model(), "job", None, n_tasks=2, progress=False,
                                  shard_bytes=False)
    for task, epoch, loss in [(0, 0, 1.0), (0, 0, 3.0), (1, 0, 5.0), (0, 1, 0.5),
                              (1, 0, 7.0), (0, 1, 0.5), (1, 0, "x")]:
        monitor.task_report(dict(task=task, epoch=epoch, loss=loss))
    monitor.task_report(dict(task=0, epoch=2, accuracy=0.9))  # no loss: not counted
    assert sorted(monitor._partial) == [0, 1]  # not recorded: task 1 is still in epoch 0
    monitor.task_report(dict(task=1, epoch=1, loss=1.5))
    monitor.close()
    assert [(m["epoch"], m["loss"]) for m in events] == [(0, 4.0), (1, 2.5 / 3)]


def test_a_backlog_of_epochs_goes_to_the_scheduler_in_order_at_once(client2):
    """A job's epochs arrive together at its end: every one is logged, in order, with the
    same batch time (one round trip), and the fit's events are the monitor's entries."""
    from dask_ps.diagnostics import FIT_TOPIC, FitMonitor

    with dask_ps.PSModel(client2) as model:
        model.add_table("w", shape=(4,))
        with FitMonitor(model, "backlog", 50, progress=False) as monitor:
            monitor.epochs_done(1, [1.0 / e for e in range(1, 51)])
    mine = [m for _, m in client2.get_events(FIT_TOPIC) if m["fit"] == monitor.fit_id]
    assert [m["epoch"] for m in mine] == list(range(1, 51))
    assert [m["loss"] for m in mine] == [monitor.entries[e]["loss"] for e in range(1, 51)]
    assert len({m["time"] for m in mine}) < 50  # batched: not one trip per epoch


def test_emit_many_names_a_bad_value():
    from dask_ps.diagnostics.events import emit_many

    with pytest.raises(TypeError, match=r"event 'x': value of 'loss' must be a number"):
        emit_many("x", [{"loss": 1.0}, {"loss": [1.0]}], client=None)
