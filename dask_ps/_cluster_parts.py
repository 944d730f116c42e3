"""Pieces of :mod:`dask_ps.cluster`: its checks of cluster options (before anything
starts), the start of a local cluster whose workers ignore Ctrl-C, the record of a batch
system's failed job submissions, and the watch of its jobs' states while their workers are
awaited."""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import time

from ._cluster_workers import MIN_WORKER_MEMORY, WORKER_BASE_MEMORY
from .exceptions import OptionError


def _check_memory(option: str, value, jobqueue: bool) -> None:
    """Refuse a memory size that is not one (``--memory 4 GB``? ``lots``), that is negative
    in any spelling (``-1``, ``-1GB``, ``-0.5``: it failed as "Nanny failed to start"), zero
    as a size (``0GB``; a job's ``0``) or below :data:`MIN_WORKER_MEMORY` (a fraction of the
    machine's memory too); Dask's own forms for a local worker pass: ``auto``, ``0`` (no
    limit) and a fraction of the machine's memory such as ``0.5``.

    Raises
    ------
    OptionError
        Naming ``option`` and the value.
    """
    import math

    from dask.utils import parse_bytes

    text = str(value).strip()
    forms = "a size such as 4GB" + ("" if jobqueue else ", a fraction of this machine's "
                                    "memory such as 0.5, or auto")
    if not jobqueue and text.lower() == "auto":
        return
    try:  # a plain number: bytes, or (up to 1) a fraction for Dask's local workers
        number = float(text)
    except ValueError:
        number = None
    try:
        if number is not None and not math.isfinite(number):
            raise ValueError(text)
        n = number if number is not None else parse_bytes(text)
    except (ValueError, OverflowError):
        raise OptionError(f"{option} {text!r} is not {forms}") from None
    if n < 0 or text.startswith("-"):  # (-0 too)
        raise OptionError(f"{option} {text}: a memory limit must be positive, not negative; "
                          f"give {forms}")
    if n == 0 and not jobqueue and number is not None:
        return  # Dask's spelling of no limit for a local worker (--memory 0), as before
    if n == 0:
        raise OptionError(f"{option} {text}: a memory limit must be positive, not zero "
                          f"(Dask's spelling of no limit at all); give {forms}")
    if not jobqueue and number is not None and number <= 1:
        from distributed.system import MEMORY_LIMIT

        n = int(number * MEMORY_LIMIT)
        text = f"{text} ({n >> 20} MiB of this machine's {MEMORY_LIMIT >> 20} MiB)"
    if n < MIN_WORKER_MEMORY:
        raise OptionError(f"{option} {text}: a worker needs at least "
                          f"{MIN_WORKER_MEMORY >> 20} MiB (a worker process of dask_ps takes "
                          f"about {WORKER_BASE_MEMORY >> 20} MiB before any data, and Dask "
                          f"pauses it at 80% of its limit)")


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


def _check_interface(interface: str, mode: str) -> None:
    """Refuse a network interface this machine does not have (Dask's scheduler or workers
    would fail to start with a traceback), naming those it has."""
    import socket

    import psutil

    have = sorted(psutil.net_if_addrs())
    if interface not in have:
        where = {"local": "this machine", "slurm-runner": "this node"}.get(
            mode, "this machine, where the scheduler runs")
        raise OptionError(f"--interface {interface}: no such network interface on {where} "
                          f"({socket.gethostname()}); it has {', '.join(have)}")


def _unreachable(spec, exc: OSError) -> OSError:
    """``exc`` (no scheduler answered) naming the option that gave the scheduler: a
    scheduler file may be left over from an earlier run."""
    if spec.mode == "file":
        text = (f"--scheduler-file {spec.scheduler_file}: no scheduler answers at the "
                f"address it gives ({exc}); is its scheduler still running? (the file may be "
                f"left over from an earlier job)")
    else:
        text = (f"--scheduler-address {spec.address}: no scheduler answers ({exc}); is it "
                f"running, and reachable from here?")
    return (TimeoutError if isinstance(exc, TimeoutError) or "Timed out" in str(exc)
            else OSError)(text)


#: The batch systems of ``--cluster``, as their users know them.
SYSTEM_NAMES = {"slurm": "Slurm", "pbs": "PBS", "sge": "Grid Engine (SGE)", "lsf": "LSF"}


def _check_submit_command(mode: str, job_cls: type) -> None:
    """Refuse a batch system whose submit command (``sbatch``, ``qsub``, ``bsub``: that of
    dask-jobqueue's ``job_cls``) is not on ``PATH``: its jobs could never be submitted."""
    import shutil

    command = shlex.split(job_cls.submit_command)[0]
    if shutil.which(command) is None:
        raise OptionError(f"--cluster {mode}: {command}: command not found on PATH (is "
                          f"{SYSTEM_NAMES.get(mode, mode)} installed here, or its module "
                          f"loaded? The jobs are submitted from this machine)")


def walltime_seconds(text: str, option: str = "--walltime") -> int:
    """Seconds of a walltime read as Slurm reads it: ``[D-]HH:MM:SS``, ``HH:MM:SS``,
    ``MM:SS``, ``M`` (minutes), ``D-HH``, ``D-HH:MM``.

    Raises
    ------
    OptionError
        Not a walltime; or zero (Slurm reads ``-t 0`` as no limit: the partition's longest).
    """
    days, dash, clock = str(text).strip().rpartition("-")
    parts = clock.split(":")
    if not (1 <= len(parts) <= 3 and all(p.isdigit() for p in parts)
            and (not dash or days.isdigit())):
        raise OptionError(f"{option} {text!r}: not a walltime such as 01:30:00 "
                          f"([D-]HH:MM:SS)")
    n = [int(p) for p in parts]
    if dash:  # D-H, D-H:M, D-H:M:S
        seconds = int(days) * 86400 + sum(v * u for v, u in zip(n, (3600, 60, 1)))
    else:  # M, M:S, H:M:S
        seconds = sum(v * u for v, u in zip(n, {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}
                                            [len(n)]))
    if seconds == 0:
        raise OptionError(f"{option} {text!r}: a zero walltime (Slurm would read it as no "
                          f"limit); give the jobs' length, e.g. 01:00:00")
    return seconds


def batch_walltime(mode: str, text: str) -> str:
    """A walltime (as :func:`walltime_seconds` reads it) in the form of batch system
    ``mode``: Slurm's as given; ``H:MM:SS`` for PBS (``-l walltime``) and SGE (``-l
    h_rt``), which take no days; ``H:MM`` for LSF (``bsub -W [hour:]minute``), rounded up
    to a minute."""
    seconds = walltime_seconds(text)
    if mode in ("pbs", "sge"):
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if mode == "lsf":
        minutes = -(-seconds // 60)
        return f"{minutes // 60:02d}:{minutes % 60:02d}"
    return text


#: Scheduler directives each batch system's job script gets from a ClusterSpec attribute
#: (dask-jobqueue writes them), by system: (directive names, attribute, always written); a
#: --job-extra repeating one of them would silently win or clash.
_DIRECTIVES = {
    "slurm": [(("--mem", "--mem-per-cpu", "--mem-per-gpu"), "memory", True),
              (("-t", "--time"), "walltime", True),
              (("-c", "--cpus-per-task", "-n", "--ntasks"), "cores", True),
              (("-p", "--partition"), "queue", False), (("-A", "--account"), "account", False)],
    "pbs": [(("mem",), "memory", True), (("select", "ncpus"), "cores", True),
            (("walltime",), "walltime", True),
            (("-q",), "queue", False), (("-A",), "account", False)],
    "sge": [(("h_rt",), "walltime", True), (("-q",), "queue", False),
            (("-P",), "account", False)],
    "lsf": [(("-M",), "memory", True), (("-W",), "walltime", True), (("-n",), "cores", True),
            (("-q",), "queue", False), (("-P",), "account", False)],
}


def _directive_names(directive: str) -> set[str]:
    """The option of a scheduler directive (``--mem=1G``: ``--mem``; ``-t10``: ``-t``), and
    the resources of a ``-l`` one (``-l walltime=1:00:00,mem=2gb``: ``walltime``, ``mem``)."""
    tokens = directive.split()
    if not tokens or not tokens[0].startswith("-"):
        return set()
    first = tokens[0]
    name = first.split("=", 1)[0] if first.startswith("--") else first[:2]
    if name == "-l":
        value = " ".join(tokens[1:]) if len(first) == 2 else first[2:]
        return {name, *re.findall(r"(?:^|[,:\s])(\w+)=", value)}
    return {name}


def _check_job_extra(spec) -> None:
    """Refuse a ``job_extra`` directive that repeats one the job script has already from
    another option (``--job-extra=--mem=1G`` with ``--memory``: sbatch takes the last one,
    while the worker's memory limit stays from ``--memory``)."""
    for directive in spec.job_extra:
        names = _directive_names(str(directive))
        for options, attribute, always in _DIRECTIVES.get(spec.mode, ()):
            clash = sorted(names & set(options))
            if clash and (always or getattr(spec, attribute)):
                option = "--" + attribute
                raise OptionError(
                    f"--job-extra {directive!r}: {clash[0]} is set by {option} already "
                    f"(the job script would have both, and the worker follows {option}): "
                    f"give it with {option}")


def _set(spec, **names: str) -> dict:
    """``{keyword: spec.<attribute>}`` for the attributes that are set."""
    return {k: getattr(spec, a) for k, a in names.items() if getattr(spec, a)}


def _jobqueue_kwargs(spec, walltime: str, memory: str, extra_args: list) -> dict:
    return dict(cores=spec.cores, processes=1, memory=memory,
                walltime=batch_walltime(spec.mode, walltime),
                job_extra_directives=list(spec.job_extra), worker_extra_args=extra_args,
                python=sys.executable,
                **_set(spec, queue="queue", interface="interface", log_directory="log_dir",
                       local_directory="local_directory"),
                **_set(spec, **{"project" if spec.mode in ("sge", "lsf") else "account":
                                "account"}))


def _import_jobqueue(module: str = "dask_jobqueue", keep_sigint: bool = True):
    """Import dask-jobqueue, which replaces the SIGINT handler with ``sys.exit()`` (for its
    runners): a driver keeps its own, so that Ctrl-C still interrupts (status 130, not 0)."""
    import importlib
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ModuleNotFoundError(f"this cluster mode needs dask-jobqueue: pip install "
                                  f"'dask-ps[hpc]' ({exc})", name="dask_jobqueue") from None
    if keep_sigint and main and previous is not None:
        signal.signal(signal.SIGINT, previous)
    return mod


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
                except Exception as exc:  # noqa: BLE001 - recorded, and raised again
                    # dask-jobqueue: RuntimeError when the command's status is not 0,
                    # OSError when it cannot be run, ValueError when its output has no job id
                    from distributed.core import Status

                    self.status = Status.failed  # no job to cancel when the cluster closes
                    error = OptionError(_submit_failure(self.submit_command, exc))
                    errors.append(error)
                    raise error from exc

        Job.__name__ = Job.__qualname__ = job_cls.__name__
        return Job


def _submit_failure(command: str, exc: Exception) -> str:
    """``sbatch failed: <its stderr>`` of dask-jobqueue's error for a failed command (or
    ``qsub failed: cannot run qsub (<the reason>)`` when it could not be started)."""
    if isinstance(exc, OSError):
        return (f"{shlex.split(command)[0]} failed: cannot run {exc.filename or command} "
                f"({exc.strerror or exc})")
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

    from . import _compat

    try:  # no heartbeat cut by the close (its ERROR and traceback in the worker's log)
        client.run(_compat.stop_heartbeats, on_error="ignore")
    except Exception:  # noqa: BLE001 - a worker gone meanwhile: the close goes on
        pass
    n = client.run_on_scheduler(_close)
    deadline = time.monotonic() + timeout
    while (client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.workers))
           and time.monotonic() < deadline):
        time.sleep(0.1)
    return n


#: Seconds between two looks at the batch jobs' states while their workers are awaited.
JOB_POLL = 5.0

#: squeue reasons of a pending job that can never run as asked (Slurm leaves it pending until
#: an administrator changes the configuration), with what to change.
NEVER_RUNS = {
    "PartitionConfig": "it asks for more than its partition has: --cores, --memory, --queue",
    "PartitionTimeLimit": "--walltime is longer than its partition allows",
    "BadConstraints": "its constraints (--job-extra) cannot be met",
    "InvalidAccount": "--account is not valid for this user or partition",
    "InvalidQOS": "its QOS (--job-extra=--qos=...) is not valid here",
}
#: squeue reasons of a job past a per-job limit of its QOS or account (e.g.
#: QOSMaxWallDurationPerJobLimit, AssocMaxCpuPerJobLimit): it can never run either.
_PER_JOB_LIMIT = re.compile(r"^(QOS|Assoc)Max\w*PerJob\w*$")


def _never_runs(reason: str) -> str | None:
    """What to change for a pending job's squeue ``reason`` that never lets it run, else
    None."""
    if reason in NEVER_RUNS:
        return NEVER_RUNS[reason]
    if _PER_JOB_LIMIT.match(reason):
        return "it exceeds a per-job limit of its QOS or account (--walltime, --cores, --memory)"
    return None


def _slurm_states(job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """``{job id: (state, reason)}`` of the jobs still in Slurm's queue (``squeue``), or
    None when squeue cannot tell."""
    import subprocess

    try:
        proc = subprocess.run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T|%r"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:  # e.g. every job gone: "Invalid job id specified"
        return None
    states = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            states[parts[0]] = (parts[1], parts[2])
    return states


def _summary(job_ids: list[str], states: dict[str, tuple[str, str]]) -> str:
    """``Slurm jobs 43, 44: 1 running, 1 pending (Resources)``."""
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for job in job_ids:
        state, reason = states.get(job, ("no longer queued", ""))
        state = state.lower()
        counts[state] = counts.get(state, 0) + 1
        if state == "pending":
            reasons[reason] = reasons.get(reason, 0) + 1
    parts = []
    for state, k in counts.items():
        part = f"{k} {state}"
        if state == "pending":
            part += (f" ({next(iter(reasons))})" if len(reasons) == 1 else
                     " (" + ", ".join(f"{r}: {m}" for r, m in reasons.items()) + ")")
        parts.append(part)
    shown = ", ".join(job_ids[:6]) + (f" and {len(job_ids) - 6} more" if len(job_ids) > 6
                                      else "")
    return f"Slurm job{'s' if len(job_ids) > 1 else ''} {shown}: {', '.join(parts)}"


class _JobWatch:
    """The states of a jobqueue cluster's jobs while their workers are awaited (Slurm:
    ``squeue``; other systems are not asked).

    Parameters
    ----------
    mode : str
        The ``--cluster`` system.
    job_ids : callable
        Returns the ids (``list`` of ``str``) of the jobs submitted so far.
    poll : float, default :data:`JOB_POLL`
        Seconds between two looks.
    """

    def __init__(self, mode: str, job_ids, poll: float = JOB_POLL) -> None:
        self.mode, self.job_ids, self.poll = mode, job_ids, poll
        self.next = time.monotonic() + poll
        self.said: str | None = None
        self.never: dict[str, str] = {}  # job -> its never-runs reason at the last look

    def describe(self) -> str | None:
        """The jobs' states now (``Slurm jobs 43, 44: 2 pending (PartitionConfig)``), or
        None (not Slurm, no job yet, squeue cannot tell)."""
        return self._look()[0]

    def _look(self) -> tuple[str | None, dict]:
        if self.mode != "slurm":
            return None, {}
        ids = self.job_ids()
        states = _slurm_states(ids) if ids else None
        if states is None:
            return None, {}
        return _summary(ids, states), states

    def check(self) -> str | None:
        """Look at the jobs if :attr:`poll` seconds have passed since the last look.

        Returns
        -------
        str or None
            Their states, when a job is pending and the states differ from those returned
            last (once, then on change); else None.

        Raises
        ------
        OptionError
            A job seen pending at two looks in a row for a reason that never lets it run
            (:data:`NEVER_RUNS`, a per-job limit), naming the job, the reason and what to
            change.
        """
        now = time.monotonic()
        if now < self.next:
            return None
        self.next = now + self.poll
        summary, states = self._look()
        never = {job: reason for job, (state, reason) in states.items()
                 if state == "PENDING" and _never_runs(reason)}
        for job, reason in never.items():
            if self.never.get(job) == reason:
                raise OptionError(
                    f"--cluster {self.mode}: job {job} can never start as asked: Slurm keeps "
                    f"it pending for {reason} ({_never_runs(reason)}; scontrol show job "
                    f"{job} tells more)")
        self.never = never
        pending = any(state == "PENDING" for state, _ in states.values())
        if summary is None or summary == self.said or (not pending and self.said is None):
            return None
        self.said = summary
        return summary
