"""Diagnostics: the dashboard page, events, progress bars and plots of fits.

* :func:`install` starts the metrics plugin on a cluster's scheduler and serves the
  ``/dask-ps`` page of its dashboard (see :mod:`.dashboard` for the routes setting instead).
* :func:`log_checkpoint` and :func:`log_recovery` record events the page shows; tasks send
  values to their driver with ``ps.report(...)`` (see :mod:`.events` for the topics).
* :func:`plot_history` draws an estimator's ``history_`` with matplotlib.

Nothing here imports bokeh or matplotlib until it is used.
"""

from .collector import PSMetrics, install
from .events import (
    CHECKPOINT_TOPIC,
    FIT_TOPIC,
    RECOVERY_TOPIC,
    TASK_TOPIC,
    emit,
    log_checkpoint,
    log_recovery,
)
from .plot import plot_history
from .progress import FitMonitor, ProgressBar

__all__ = ["CHECKPOINT_TOPIC", "FIT_TOPIC", "FitMonitor", "PSMetrics", "ProgressBar",
           "RECOVERY_TOPIC", "TASK_TOPIC", "emit", "install", "log_checkpoint", "log_recovery",
           "plot_history"]
