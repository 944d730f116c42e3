"""Pieces of :mod:`dask_ps.cluster`: its checks of cluster options (before anything
starts), the start of a local cluster whose workers ignore Ctrl-C, and the record of a batch
system's failed job submissions."""

from __future__ import annotations

import logging
import os
import shlex

from .exceptions import OptionError

#: Least ``memory`` (and ``ps_memory``) a worker is given: a Dask worker process with dask_ps
#: loaded takes about 150 MB before any data, and its nanny restarts it past 95% of its limit
#: (``--memory 1KB`` restarted every worker until the wait for them timed out).
MIN_WORKER_MEMORY = 256 * 2**20


def _check_memory(option: str, value, jobqueue: bool) -> None:
    """Refuse a memory size that is not one (``--memory 4 GB``? ``lots``) or is below
    :data:`MIN_WORKER_MEMORY`; Dask's own forms for a local worker pass: ``auto``, ``0``
    (no limit) and a fraction of the machine's memory such as ``0.5``."""
    from dask.utils import parse_bytes

    text = str(value).strip()
    if not jobqueue:
        if text.lower() == "auto":
            return
        try:
            if float(text) <= 1:
                return
        except ValueError:
            pass
    try:
        n = parse_bytes(text)
    except ValueError:
        raise OptionError(f"{option} {text!r} is not a size such as 4GB") from None
    if n < MIN_WORKER_MEMORY:
        raise OptionError(f"{option} {text}: a worker needs at least "
                          f"{MIN_WORKER_MEMORY >> 20} MiB (a Dask worker process alone takes "
                          f"about 150 MB)")


def _check_address(address: str) -> None:
    """Refuse a scheduler address Dask cannot parse (no port, an unknown scheme)."""
    from distributed.comm import get_address_host_port, parse_address

    try:
        get_address_host_port(address)
    except ValueError as exc:
        if parse_address(address, strict=False)[0] not in ("inproc", "ucx"):  # no host:port
            raise OptionError(f"--scheduler-address {address!r}: not an address such as "
                              f"tcp://host:8786 ({exc})") from None


def _check_scheduler_file(path: str) -> None:
    """Refuse a missing scheduler file (the client would wait for it forever) and a file
    that is not one: a JSON object with a string ``address``."""
    import json

    where = f"--scheduler-file {path}"
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}: no such file"
                                + (" (a directory)" if os.path.isdir(path) else ""))
    try:
        with open(path, "rb") as f:
            info = json.loads(f.read(1 << 20))
    except UnicodeDecodeError:
        raise OptionError(f"{where}: not a Dask scheduler file (not UTF-8 text)") from None
    except ValueError as exc:
        raise OptionError(f"{where}: not a Dask scheduler file (not JSON: {exc})") from None
    if not (isinstance(info, dict) and isinstance(info.get("address"), str)):
        raise OptionError(f"{where}: not a Dask scheduler file (no JSON 'address')")


#: Seconds a Ctrl-C during a local cluster's start waits for the start to end (so that the
#: cluster it made is closed, not left half started) before it is raised anyway.
START_STOP_WAIT = 20.0


def _start_without_stop_signals(make):
    """``make()`` (which starts a local cluster) in a thread of its own with SIGINT and
    SIGTERM blocked: the cluster's worker processes are born ignoring Ctrl-C and SIGTERM,
    while this thread still takes them at once.

    Ctrl-C in a terminal signals the whole process group, and so does a batch system at a
    walltime or ``scancel`` with SIGTERM (Slurm: every process of the job); the driver alone
    should stop the run and close the cluster, instead of every worker process printing its
    ``KeyboardInterrupt`` traceback, or dying of SIGTERM (and the scheduler and the nannies
    logging their loss, restarts and broken connections). A thread's blocked signals are
    inherited by the threads it starts and by the processes they start (across ``exec``):
    the cluster's event-loop thread, the threads that loop starts to spawn the worker
    processes (and respawn them later), and those processes, keep both blocked for their
    life, from their first instruction on. A worker plugin could only ignore them once the
    worker was up, seconds after the process was born. (The nannies stop their workers by
    a message, then SIGKILL; the driver's :data:`dask_ps.cli.STOP_GRACE` watchdog kills
    them too.)

    A Ctrl-C (or SIGTERM's exception) here while the cluster starts waits up to
    :data:`START_STOP_WAIT` seconds for the start to end, closes the cluster it made, and
    is raised (at once if the start does not end: a start that hangs does not hold it back).

    multiprocessing's resource tracker is started first: the thread that starts it has
    SIGINT and SIGTERM unblocked afterwards (CPython 3.11 unblocks them rather than
    restoring), which would let the cluster's loop thread, the tracker's first user, pass
    them on to the workers.
    """
    import signal
    import threading
    from multiprocessing import resource_tracker

    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks, nor process groups
        return make()
    resource_tracker.ensure_running()
    box: dict = {}
    lock = threading.Lock()

    done = threading.Event()  # (not Thread.join: an interrupted join can end the next one)

    def start():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            made = make()
        except BaseException as exc:  # noqa: BLE001 - passed to the caller
            box["error"] = exc
            done.set()
            return
        with lock:
            abandoned = box.get("abandoned")
            if not abandoned:
                box["made"] = made
        done.set()
        if abandoned:  # the caller was interrupted and gave up waiting: close what was made
            made.close()

    thread = threading.Thread(target=start, name="dask-ps-cluster-start", daemon=True)
    thread.start()
    try:
        done.wait()
    except BaseException:  # Ctrl-C (or SIGTERM's exception) while the cluster starts
        done.wait(START_STOP_WAIT)
        with lock:
            box["abandoned"] = True
            made = box.pop("made", None)
        if made is not None:
            made.close()
        raise
    if "error" in box:
        raise box["error"]
    return box["made"]


class _SubmitFailures(logging.Filter):
    """The failed job submissions of a jobqueue cluster, and a filter of tornado's log
    that drops them.

    ``scale`` and ``adapt`` submit jobs in a callback of the cluster's event loop; a failed
    submit command ends that callback, which tornado logs with a traceback, and the workers
    never come. Jobs of :meth:`job_class` record their failure instead, as an
    :class:`OptionError` naming the command and its stderr (``sbatch failed: ...``), for
    the wait for the workers (:func:`dask_ps.cluster.connect`) to raise at once; the filter
    is on while that wait lasts.
    """

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[OptionError] = []

    def filter(self, record: logging.LogRecord) -> bool:
        failed = record.exc_info[1] if record.exc_info else None
        return not any(failed is e for e in self.errors)

    def job_class(self, job_cls: type) -> type:
        """``job_cls`` whose ``start`` (the job's submission) records its failure."""
        errors = self.errors

        class Job(job_cls):
            async def start(self):
                try:
                    await super().start()
                except RuntimeError as exc:  # dask-jobqueue: the command's status was not 0
                    from distributed.core import Status

                    self.status = Status.failed  # no job to cancel when the cluster closes
                    error = OptionError(_submit_failure(self.submit_command, exc))
                    errors.append(error)
                    raise error from exc

        Job.__name__ = Job.__qualname__ = job_cls.__name__
        return Job


def _submit_failure(command: str, exc: Exception) -> str:
    """``sbatch failed: <its stderr>`` of dask-jobqueue's error for a failed command."""
    text = str(exc)
    stderr = text.split("\nstderr:\n", 1)[-1]
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f"{shlex.split(command)[0]} failed: {' / '.join(lines) or text}"


def close_workers(client, timeout: float = 10.0) -> int:
    """Close every worker of ``client``'s scheduler, and wait until the scheduler has none.

    The orderly first half of shutting a cluster down: each worker closes while its
    scheduler still answers, so it logs no tracebacks. Shutting the scheduler down first
    (``client.shutdown()``) makes every worker's heartbeat and batched stream fail mid-way,
    about 90 lines of ``distributed`` ERRORs and tracebacks per log after a successful run.
    Left are a scheduler's INFO record "Batched Comm Closed" (with a traceback, at times) and,
    for a worker under a nanny, the nanny's "Worker process died unexpectedly" at random (a
    race inside ``distributed``'s nanny; ``dask worker --no-nanny`` has none).

    Parameters
    ----------
    client : distributed.Client
    timeout : float, default 10.0
        Seconds to wait for the workers to leave; the wait then ends without an error (the
        scheduler's own close ends those left).

    Returns
    -------
    int
        How many workers were asked to close.
    """
    import time

    def _close(dask_scheduler) -> int:
        addresses = list(dask_scheduler.workers)
        for address in addresses:
            dask_scheduler.close_worker(address)
        return len(addresses)

    n = client.run_on_scheduler(_close)
    deadline = time.monotonic() + timeout
    while (client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.workers))
           and time.monotonic() < deadline):
        time.sleep(0.1)
    return n
