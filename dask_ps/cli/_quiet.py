"""Bad input is reported once: the workers of a cluster the command line starts leave out of
their log the "Compute Failed" block (key, task, exception, traceback) of a task that failed
on the user's data, which the command line reports in its one ``dask-ps: error:`` line.

A failure is the user's data's when the task raised a :class:`~dask_ps.DataError` (or a
subclass, such as a reader's ``LineError``) from dask_ps's own code; every other failure (a
bug) is logged as before, with its traceback. ``--debug`` installs nothing.
"""

from __future__ import annotations

import logging
import os
import re

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


class QuietDataErrors(WorkerPlugin):
    """Worker plugin: the worker's ``distributed.worker`` logger drops the "Compute Failed"
    records of :func:`is_data_error` failures."""

    name = "dask-ps-quiet-data-errors"

    def setup(self, worker) -> None:
        logger = logging.getLogger("distributed.worker")
        if not any(isinstance(f, _DataErrorFilter) for f in logger.filters):
            logger.addFilter(_DataErrorFilter())
