"""Bad input is reported once: the workers of a cluster the command line starts leave out of
their log the "Compute Failed" block (key, task, exception, traceback) of a task that failed
on the user's data, which the command line reports in its one ``dask-ps: error:`` line.

Nor do they log, once they are closing, "Failed to communicate with scheduler during
heartbeat" with its traceback: a heartbeat in flight when the cluster is closed (the run
over, or stopped by bad input) meets its own closed connection (seen once, in a full run of
the test suite on a loaded machine: a second error line after a bad ``--test`` file's).

A failure is the user's data's when the task raised a :class:`~dask_ps.DataError` (or a
subclass, such as a reader's ``LineError``) from dask_ps's own code; every other failure (a
bug) is logged as before, with its traceback. ``--debug`` installs nothing.
"""

from __future__ import annotations

import logging
import os
import re
import weakref

from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

from .._compat import failed_task_log
from ..exceptions import DataError

__all__ = ["QuietDataErrors", "is_data_error"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _names(cls: type) -> set[str]:
    return {cls.__name__}.union(*(_names(c) for c in cls.__subclasses__()))


def is_data_error(exception: str, traceback: str) -> bool:
    """Whether a task's failure, given as ``repr`` of its exception and its formatted
    traceback, is a :class:`~dask_ps.DataError` raised in dask_ps (its last frame in the
    package)."""
    m = re.match(r"(\w+)\(", exception)
    frames = re.findall(r'File "([^"]+)"', traceback)
    return bool(m and m.group(1) in _names(DataError) and frames
                and os.path.abspath(frames[-1]).startswith(_PACKAGE))


class _DataErrorFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        failed = failed_task_log(record)
        return failed is None or not is_data_error(*failed)


#: Worker states in which a failed heartbeat is the worker's own closing.
_CLOSING = frozenset({Status.closing, Status.closing_gracefully, Status.closed,
                      Status.failed})
_HEARTBEAT = "Failed to communicate with scheduler during heartbeat"


class _ClosingHeartbeatFilter(logging.Filter):
    """Drops the heartbeat failures of ``worker`` once it is closing."""

    def __init__(self, worker) -> None:
        super().__init__()
        self._worker = weakref.ref(worker)

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_HEARTBEAT):
            return True
        worker = self._worker()
        return worker is not None and worker.status not in _CLOSING


class QuietDataErrors(WorkerPlugin):
    """Worker plugin: the worker's ``distributed.worker`` logger drops the "Compute Failed"
    records of :func:`is_data_error` failures, and the heartbeat failures of the worker once
    it is closing."""

    name = "dask-ps-quiet-data-errors"

    def setup(self, worker) -> None:
        logger = logging.getLogger("distributed.worker")
        if not any(isinstance(f, _DataErrorFilter) for f in logger.filters):
            logger.addFilter(_DataErrorFilter())
        for f in [f for f in logger.filters if isinstance(f, _ClosingHeartbeatFilter)]:
            logger.removeFilter(f)  # (a worker of this process before)
        logger.addFilter(_ClosingHeartbeatFilter(worker))
