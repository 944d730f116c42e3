"""Errors raised by dask_ps.

They subclass the builtin that fits (``KeyError``, ``OSError``, ``RuntimeError``) so that
code catching builtins keeps working, and they carry the table, shard and key they concern.
"""

from __future__ import annotations

import os
import sys

__all__ = [
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "ClosedModelError",
    "DataError",
    "DivergenceError",
    "KeysNeededError",
    "MemoryLimitError",
    "NoCheckpointToResumeError",
    "NoShardWorkerError",
    "OptionError",
    "RecoveryError",
    "ShardFunctionRunningError",
    "ShardUnavailableError",
    "UnknownTableError",
    "WorkerLostError",
]


class UnknownTableError(KeyError):
    """A table name that the model does not hold.

    Parameters
    ----------
    name : str
        The name that was asked for.
    known : iterable of str
        The tables the model holds.
    """

    def __init__(self, name: str, known) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(f"unknown table {name!r}; the model holds {self.known}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


class ClosedModelError(RuntimeError):
    """A call on a :class:`~dask_ps.PSModel` after :meth:`~dask_ps.PSModel.close`."""


class ShardUnavailableError(OSError):
    """A shard did not answer: its worker died, or the call exceeded its timeout.

    Parameters
    ----------
    shard : int
        Index of the shard.
    address : str
        Address of the worker that held it.
    detail : str
        What failed (the operation and the underlying error).
    """

    def __init__(self, shard: int, address: str, detail: str) -> None:
        self.shard = shard
        self.address = address
        super().__init__(f"shard {shard} on {address} is unavailable: {detail}")


class ShardFunctionRunningError(RuntimeError):
    """A function run next to a shard (:meth:`~dask_ps.PSModel.map_shards`) is still
    running after the model's ``timeout``: the shard is alive, busy with it (it holds the
    shard's rows until it returns), not lost; recovery leaves it alone. Raised to the caller
    of the slow function, and to a call that waited the timeout for it to end.

    Parameters
    ----------
    shard : int
        Index of the shard.
    address : str
        Address of its worker (``"local"`` for in-process shards).
    function : str
        Name of the function still running.
    table : str
        The table it runs on.
    seconds : float
        How long it has been running.
    detail : str, optional
        What waited for it, if not its own caller.
    """

    def __init__(self, shard: int, address: str, function: str, table: str, seconds: float,
                 detail: str = "") -> None:
        self.shard = shard
        self.address = address
        self.function = function
        self.table = table
        self.seconds = seconds
        self.detail = detail
        super().__init__(f"function {function} on table {table!r} is still running on shard "
                         f"{shard} (worker {address}) after {seconds:.3g} s; it holds the "
                         f"shard until it returns (the shard is not lost)"
                         + (f"; {detail}" if detail else "")
                         + "; give the model a larger timeout, or make the function quicker")

    def __reduce__(self):  # travels from the shard's worker to its caller
        return type(self), (self.shard, self.address, self.function, self.table,
                            self.seconds, self.detail)


class WorkerLostError(RuntimeError):
    """Workers a job depended on left the cluster while it ran.

    Parameters
    ----------
    workers : list of str
        Addresses of the lost workers.
    shards : list of int
        Indices of the shards they held (empty for workers holding only data).
    """

    def __init__(self, workers, shards) -> None:
        self.workers = sorted(workers)
        self.shards = sorted(shards)
        held = f", holding shards {self.shards}" if self.shards else " (data only)"
        super().__init__(f"lost worker(s) {self.workers}{held}")


class RecoveryError(RuntimeError):
    """Training could not recover from lost shards or workers.

    Parameters
    ----------
    shards : list of int
        The lost shards.
    checkpoint : str or None
        The last good checkpoint (URL and version), if any.
    detail : str
        Why recovery stopped.
    """

    def __init__(self, shards, checkpoint: str | None, detail: str) -> None:
        self.shards = sorted(shards)
        self.checkpoint = checkpoint
        super().__init__(f"cannot recover lost shard(s) {self.shards}: {detail}; last good "
                         f"checkpoint: {checkpoint or 'none'}")


class NoShardWorkerError(ValueError):
    """No live worker may hold a model's shards: the cluster has no worker, or none offering
    the model's ``resources`` (e.g. every job ended at the same walltime).

    Parameters
    ----------
    resources : str or None
        The resource shard workers must offer, if any.
    what : str
        What could not be placed, e.g. ``"the lost shards"``.
    """

    def __init__(self, resources: str | None, what: str = "the shards") -> None:
        self.resources = resources
        super().__init__(f"no live worker can host {what}"
                         + (f" (none offers resource {resources!r})" if resources else ""))


class DataError(ValueError):
    """The user's data holds what a reader or an estimator refuses: a bad line, field or
    value (an infinite number, a missing label), a row of the wrong width. The message names
    where: file and line (text), file, row group and row (Parquet), or the row and column
    of an array, each counted from 1. Raised by dask_ps's own readers and checks alone, so
    that what reports it (the command line) can tell bad input from a bug."""


#: Why a classifier's label that is not a class (a click probability such as 0.7) is
#: refused: the end of every message that refuses one, a reader's or an estimator's.
NOT_A_CLASS = ("a classifier needs discrete labels such as 0 and 1 (whole numbers), not "
               "continuous values")

#: Why a label read as a number that is text (``yes``) is refused: the end of the message of
#: every reader that reads labels as numbers (CTR files and dataframes, a regression's table):
#: their blocks are read apart, so text classes would have no one numbering.
NOT_A_NUMBER = ("labels read here must be numbers, such as 0 and 1; map text classes to "
                "numbers first (e.g. yes -> 1, no -> 0)")


class OptionError(ValueError):
    """An option the user gave that is contradictory, unsupported, out of range or missing
    where needed: a flag of the ``dask-ps`` command or a key of its ``--config`` file, a
    :class:`~dask_ps.cluster.ClusterSpec` field, an estimator parameter the command passes
    on. The message names the option. Like :class:`DataError` it tells the user's mistake
    from a bug: the command line prints it as one line, a bug with its traceback."""


class MemoryLimitError(MemoryError, ValueError):
    """What was asked does not fit in the memory it was given, refused before the work
    starts (or once a wait is hopeless) with a message naming the sizes and what to change:

    - a model whose tables are larger than the workers' (or this process's) memory allows:
      parameters (``n_components`` of a factorization machine, a matrix factorization or
      LDA) or the data's width (LDA's largest term id plus one, a
      docword's ``W`` or a vocabulary's lines, named with their file and line; a table's
      or a partition's size);
    - a computation whose workers all stayed paused at their memory limit
      (:class:`~dask_ps.cluster.PauseWatch`; the command's ``--memory``).

    A ``MemoryError`` (what it prevents) and a ``ValueError`` (a refused value, as LDA's
    check of its table raised before), so that code catching either keeps working. Like
    :class:`OptionError` it is the user's to fix: the ``dask-ps`` command prints it as one
    line, status 2."""


class NoCheckpointToResumeError(ValueError):
    """``resume=True`` without a checkpoint URL to resume from (``checkpoint`` None or
    ``"auto"``, a temporary folder deleted after each fit). The ``dask-ps`` command tells
    it apart from other refused parameters to name its own flags (``--resume auto``,
    ``--checkpoint URL``)."""


class CheckpointFormatError(ValueError):
    """A checkpoint this dask_ps cannot read: newer format, unknown optimizer or layout."""


class CheckpointNotFoundError(FileNotFoundError):
    """No complete checkpoint version where one was expected."""


class DivergenceError(FloatingPointError, ValueError):
    """Training diverged: the loss grew by orders of magnitude, or weights stopped being
    finite. Raised by every estimator, naming the epoch (or iteration) and what to change
    (a smaller learning rate, a larger regularisation, scaled features). The model keeps its
    state from before the fit.

    Parameters
    ----------
    estimator : str
        The estimator and solver, e.g. ``"LogisticRegression(solver='sgd')"``.
    epoch : int
        The epoch (or iteration) at which divergence was detected, 1-based.
    what : str
        What was seen, e.g. ``"the weights are not finite"``.
    advice : str
        What to change.
    """

    def __init__(self, estimator: str, epoch: int, what: str, advice: str) -> None:
        self.estimator = estimator
        self.epoch = epoch
        super().__init__(f"{estimator}: training diverged at epoch {epoch}: {what}"
                         + (f"; {advice}" if advice else ""))


class KeysNeededError(LookupError):
    """A push named the keys of an earlier pull (a :class:`~dask_ps.state.wire_forms.KeyRef`)
    that the shard no longer holds (forgotten, or the shard was recreated): the caller sends
    the keys themselves instead. Raised before the push changes anything."""


def user_stacklevel() -> int:
    """The ``stacklevel`` of :func:`warnings.warn` that points at the first caller outside
    dask_ps (the user's line, not an internal one), from the function that calls this."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
