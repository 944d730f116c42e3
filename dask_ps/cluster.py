"""Where a run's Dask cluster comes from: a local cluster, an existing scheduler, a batch
system through dask-jobqueue, or one Slurm allocation (``SLURMRunner``); and what the
scheduler knows about its workers (:func:`worker_info`, :class:`PauseWatch`,
:func:`compute_watched`, :func:`wait_watched`, :data:`MIN_WORKER_MEMORY`: their home is
:mod:`dask_ps._cluster_workers`).

:func:`connect` turns a :class:`ClusterSpec` into a :class:`Session` (client, cluster, the
jobs it submitted, start-up times). On batch systems the parameter-server shards must live
on workers that are never retired by design: a worker started with ``--lifetime`` closes
even while it holds a shard's actor, and the shard is lost (measured with Slurm and
dask-jobqueue 0.9). So a jobqueue session can submit two job classes:

* **shard jobs** (``ps_workers``): workers offering the Dask resource :data:`SHARD_RESOURCE`
  (``ps=1``), never given a lifetime, with their own walltime and memory; a model places its
  shards on them with ``PSModel(client, resources=SHARD_RESOURCE)``;
* **data jobs** (``workers``): the rest, optionally adaptive (``adapt(minimum=n,
  maximum=n)`` submits a new job when one is cancelled or ends; ``scale(n)`` does not) and
  optionally recycled with a lifetime (only when the shards are on shard jobs).

dask-jobqueue is an optional dependency (``pip install dask-ps[hpc]``), imported only by the
modes that need it.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from dataclasses import dataclass, field

from ._cluster_parts import (
    _check_address,
    _check_interface,
    _check_job_extra,
    _check_memory,
    _check_scheduler_file,
    _check_submit_command,
    _import_jobqueue,
    _jobqueue_kwargs,
    _JobWatch,
    _set,
    _start_without_stop_signals,
    _SubmitFailures,
    _unreachable,
    close_workers,
    walltime_seconds,
)
from ._cluster_scheduler import (
    _probe_scheduler,
    check_dashboard_address,
    check_dashboard_host,
    dashboard_options,
)
from ._cluster_workers import (
    MIN_WORKER_MEMORY,
    PAUSE_TIMEOUT,
    WORKER_BASE_MEMORY,
    PauseWatch,
    check_client,
    compute,
    compute_watched,
    wait_watched,
    worker_info,
)
from .exceptions import OptionError

__all__ = ["JOBQUEUE_SYSTEMS", "MIN_WORKER_MEMORY", "MODES", "PAUSE_TIMEOUT", "SHARD_RESOURCE",
           "WORKER_BASE_MEMORY", "ClusterSpec", "PauseWatch", "Session", "check_client",
           "close_workers", "compute", "compute_watched", "connect", "wait_watched", "worker_info"]

#: The Dask worker resource that marks parameter-server (shard) workers.
SHARD_RESOURCE = "ps"
#: ``--cluster`` values served by dask-jobqueue, and their cluster classes.
JOBQUEUE_SYSTEMS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
                    "lsf": "LSFCluster"}
#: Every mode of :class:`ClusterSpec`.
MODES = ("local", "address", "file", *JOBQUEUE_SYSTEMS, "slurm-runner")


@dataclass
class ClusterSpec:
    """How to get a cluster; see :func:`connect` and ``dask-ps train --help``.

    Parameters
    ----------
    mode : {"local", "address", "file", "slurm", "pbs", "sge", "lsf", "slurm-runner"}
        A new ``LocalCluster``; an existing scheduler by ``address`` or ``scheduler_file``;
        a dask-jobqueue cluster; or ``SLURMRunner`` (run the same command as every task of
        one Slurm allocation: task 0 the scheduler, task 1 this client, the rest workers).
    workers : int, optional
        local: worker processes (default 2). jobqueue: data jobs (default 2). address/file:
        workers to wait for (default 1). slurm-runner: ignored (the allocation decides).
    cores : int, default 1
        Threads per worker (local, slurm-runner) or cores per job (jobqueue).
    memory : str, optional
        Memory per job (jobqueue, default "2GB") or per worker (local, slurm-runner;
        default: Dask's choice). SGE jobs request no memory from it (the resource's name is
        the site's: ``job_extra=["-l h_vmem=16G"]``, or dask-jobqueue's
        ``jobqueue.sge.resource_spec`` config); their workers' limit is still ``memory``.
    walltime : str, default "01:00:00"
        Data jobs' walltime (jobqueue), read as Slurm reads it (``[D-]HH:MM:SS``, ``MM:SS``,
        ``M`` minutes); PBS and SGE get it as ``HH:MM:SS``, LSF as ``HH:MM`` (rounded up).
    ps_workers : int, default 0
        Shard jobs (jobqueue): workers offering ``SHARD_RESOURCE``, never retired.
    ps_walltime, ps_memory : str, optional
        Shard jobs' walltime and memory; default ``walltime`` and ``memory``. Give shard jobs
        the whole run's length.
    adapt : bool, default False
        Data jobs adaptive (jobqueue): a cancelled or ended job is replaced.
    worker_lifetime : str, optional
        Data jobs close after this long (``--lifetime``, jobqueue, needs ``adapt`` and
        ``ps_workers``: only workers without shards may be retired).
    queue, account : str, optional
        Queue (partition) and account (project on SGE and LSF) of every job.
    job_extra : list of str
        Extra scheduler directives for every job (e.g. ``"--qos=long"``).
    interface : str, optional
        Network interface of the scheduler and workers (e.g. ``"ib0"``, ``"lo"``).
    log_dir : str, optional
        Folder for the jobs' output files (jobqueue).
    local_directory : str, optional
        Workers' scratch folder.
    address, scheduler_file : str, optional
        An existing scheduler (modes "address", "file"); for slurm-runner, where the
        scheduler file is written (default ``scheduler-{job_id}.json`` in the current folder).
    dashboard_address : str, int, list or None, default ":0"
        The new scheduler's dashboard (local, jobqueue, slurm-runner): ``[HOST]:PORT``,
        ``PORT`` or ``HOST`` (port 0 to 65535, 0 a free one), several joined by commas (or
        a list); None for none (as Dask's ``dashboard_address=None``). Checked at
        construction (:func:`~._cluster_scheduler.check_dashboard_address`, as
        ``--dashboard-address``): an address Dask cannot read raises
        :class:`~dask_ps.exceptions.OptionError` (a ValueError) naming it.
    timeout : float, optional
        Seconds to wait for the scheduler and the workers: default 30, or 600 for jobqueue
        (jobs may queue).
    """

    mode: str = "local"
    workers: int | None = None
    cores: int = 1
    memory: str | None = None
    walltime: str = "01:00:00"
    ps_workers: int = 0
    ps_walltime: str | None = None
    ps_memory: str | None = None
    adapt: bool = False
    worker_lifetime: str | None = None
    queue: str | None = None
    account: str | None = None
    job_extra: list = field(default_factory=list)
    interface: str | None = None
    log_dir: str | None = None
    local_directory: str | None = None
    address: str | None = None
    scheduler_file: str | None = None
    dashboard_address: str | int | list | None = ":0"
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.dashboard_address is not None:
            check_dashboard_address(self.dashboard_address)

    def check(self) -> None:
        """Refuse contradictory options, a ``memory`` or ``ps_memory`` that is no size
        or below :data:`MIN_WORKER_MEMORY`, an ``address`` Dask cannot parse, a
        ``scheduler_file`` that is missing or not one (mode "file"), a walltime
        that is none or zero, a ``local_directory`` that is a file or cannot be made (mode
        "local": made here when missing), a
        ``job_extra`` directive repeating one another option sets
        (``--mem=1G`` with ``memory``), an ``interface`` this machine does not have, a
        ``dashboard_address`` whose host is unknown or another machine's (a scheduler
        started here: modes "local" and the batch systems'), and a
        batch system whose submit command (``sbatch``, ``qsub``, ``bsub``) is not on
        ``PATH``, before anything starts.

        Raises
        ------
        OptionError
            Naming the option at fault (a ValueError).
        FileNotFoundError
            ``scheduler_file`` (mode "file") does not exist.
        ImportError
            dask-jobqueue is missing for a jobqueue mode.
        """
        if self.mode not in MODES:
            raise OptionError(f"cluster mode must be one of {list(MODES)}, got {self.mode!r}")
        jobqueue = self.mode in JOBQUEUE_SYSTEMS
        if not jobqueue:
            for name in ("ps_workers", "adapt", "worker_lifetime", "ps_walltime", "ps_memory",
                         "queue", "account", "log_dir"):
                if getattr(self, name):
                    raise OptionError(f"--{name.replace('_', '-')} applies to --cluster "
                                      f"{'|'.join(JOBQUEUE_SYSTEMS)}, not {self.mode}")
            if self.job_extra:
                raise OptionError(f"--job-extra applies to --cluster "
                                  f"{'|'.join(JOBQUEUE_SYSTEMS)}, not {self.mode}")
        if self.worker_lifetime and not self.adapt:
            raise OptionError("--worker-lifetime needs --adapt (a retired data job is replaced "
                              "only by an adaptive cluster)")
        if self.worker_lifetime and not self.ps_workers:
            raise OptionError("--worker-lifetime needs --ps-workers: a worker with a lifetime "
                              "closes even while it holds a shard, so only data workers may "
                              "have one, and the shards must live on shard jobs")
        for name in ("memory", "ps_memory"):
            if getattr(self, name) is not None:
                _check_memory(f"--{name.replace('_', '-')}", getattr(self, name), jobqueue)
        if self.mode == "address" and not self.address:
            raise OptionError("cluster mode 'address' needs --scheduler-address")
        if self.mode == "address":
            _check_address(self.address)
        if self.mode == "file" and not self.scheduler_file:
            raise OptionError("cluster mode 'file' needs --scheduler-file")
        if self.mode == "file":
            _check_scheduler_file(self.scheduler_file)
        if jobqueue:
            walltime_seconds(self.walltime, "--walltime")
            if self.ps_walltime:
                walltime_seconds(self.ps_walltime, "--ps-walltime")
            _check_job_extra(self)
        if self.local_directory and self.mode == "local":  # (Dask's error named no option)
            made = os.path.abspath(self.local_directory)
            while not os.path.exists(made):  # the part that exists: a folder?
                made = os.path.dirname(made)
            if not os.path.isdir(made):
                raise OptionError(f"--local-directory {self.local_directory}: {made} is a "
                                  f"file, not a folder (the workers' scratch folder is made "
                                  f"there when missing)")
            try:  # made now, as the workers would (Dask's error named no option)
                os.makedirs(self.local_directory, exist_ok=True)
            except OSError as err:
                raise OptionError(f"--local-directory {self.local_directory}: no folder can "
                                  f"be made there ({err.strerror or err})") from None
        if self.interface and self.mode not in ("address", "file"):
            _check_interface(self.interface, self.mode)
        if self.dashboard_address is not None and (self.mode == "local" or jobqueue):
            check_dashboard_host(self.dashboard_address)  # (the scheduler starts here)
        if jobqueue:
            job_cls = getattr(_import_jobqueue(), JOBQUEUE_SYSTEMS[self.mode]).job_cls
            _check_submit_command(self.mode, job_cls)

    @property
    def wait_timeout(self) -> float:
        if self.timeout is not None:
            return float(self.timeout)
        return 600.0 if self.mode in JOBQUEUE_SYSTEMS else 30.0

    @property
    def n_workers(self) -> int:
        """Workers to wait for (before the shard jobs, which are added)."""
        if self.workers is not None:
            return self.workers
        return 1 if self.mode in ("address", "file") else 2


class Session:
    """A client on a cluster, and everything :func:`connect` started for it.

    Attributes
    ----------
    client : distributed.Client
    cluster : distributed.deploy.Cluster or None
        The cluster object this process owns (None for an existing scheduler).
    shard_resource : str or None
        The resource shard workers offer (:data:`SHARD_RESOURCE`) when the session has shard
        jobs; a model must then be created with ``resources=shard_resource``.
    times : dict
        Seconds since :func:`connect` was called: ``"scheduler"`` (client connected),
        ``"first_worker"``, ``"all_workers"``.
    description : str
        One line saying what the cluster is.
    """

    def __init__(self, client, cluster=None, description: str = "", ps_jobs=(),
                 runner=None, shard_resource: str | None = None, failures=None) -> None:
        self.client = client
        self.cluster = cluster
        self.description = description
        self.shard_resource = shard_resource
        self.times: dict[str, float] = {}
        self._ps_jobs = list(ps_jobs)
        self._runner = runner
        self._failures = failures  # a jobqueue cluster's _SubmitFailures
        self._watch: _JobWatch | None = None  # and the states of its jobs
        self._closed = False
        atexit.register(self.close)

    def close(self) -> None:
        """Close the client, cancel the shard jobs, close the cluster (idempotent)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            if self._runner is not None:  # the workers first, then the scheduler: no tracebacks
                try:
                    close_workers(self.client)
                except Exception:  # noqa: BLE001  best effort: the scheduler's close ends them
                    pass
            self.client.close()
            if self._runner is not None:  # ends the scheduler, hence every task of the job
                self._runner.__exit__(None, None, None)
        finally:
            try:
                if self._ps_jobs and self.cluster is not None:
                    self.cluster.sync(_close_jobs, self._ps_jobs)
            finally:
                try:
                    if self.cluster is not None:
                        self._close_cluster()
                finally:
                    if self._failures is not None:
                        logging.getLogger("tornado.application").removeFilter(self._failures)

    def _close_cluster(self) -> None:
        from distributed import LocalCluster

        if not isinstance(self.cluster, LocalCluster):
            self.cluster.close()
            return
        # On a loaded machine a worker process that has imported dask_ps (numba, scikit-learn)
        # can take over the nanny's 4 s to exit at close (measured 4.4 s at load 10-13); the
        # nanny then kills it and logs a WARNING. The run is over by then: not a warning for
        # the user of this session's own local cluster.
        nanny = logging.getLogger("distributed.nanny")
        level = nanny.level
        nanny.setLevel(logging.ERROR)
        try:
            self.cluster.close()
        finally:
            nanny.setLevel(level)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


async def _close_jobs(jobs) -> None:
    for job in jobs:
        await job.close()


async def _job_ids(cluster, ps_jobs) -> list[str]:
    """The ids of the jobs a jobqueue cluster and its shard jobs have submitted so far."""
    return [str(job.job_id) for job in [*cluster.workers.values(), *ps_jobs]
            if getattr(job, "job_id", None)]


async def _start_jobs(jobs) -> None:
    for job in jobs:
        await job.start()


def _wait_workers(client, n: int, timeout: float, t0: float, times: dict,
                  failures: list = (), watch: _JobWatch | None = None,
                  report=None) -> None:
    """Wait until ``n`` workers are connected, noting when the first and the last came.

    ``watch`` (a jobqueue cluster's) looks at the jobs' states now and then; ``report`` is
    given a line when they change while a job is pending.

    Raises
    ------
    TimeoutError
        Fewer than ``n`` after ``timeout`` seconds, giving the count (and the jobs' states).
    OptionError
        A job submission failed (``failures``, filled in the background), or a job can never
        start as asked (``watch``).
    """
    deadline = time.perf_counter() + timeout
    while True:
        if failures:
            raise OptionError(str(failures[0]))
        have = len(worker_info(client))
        now = time.perf_counter()
        if have and "first_worker" not in times:
            times["first_worker"] = now - t0
        if have >= n:
            times["all_workers"] = now - t0
            return
        if now > deadline:
            jobs = watch.describe() if watch is not None else None
            raise TimeoutError(f"the scheduler at {client.scheduler.address} has {have} of "
                               f"{n} worker{'s' if n != 1 else ''} after {timeout:g} s"
                               + (f"; {jobs}" if jobs else ""))
        line = watch.check() if watch is not None else None
        if line and report is not None:
            report(f"waiting for workers: {have} of {n} connected; {line}")
        time.sleep(0.1)


def _jobqueue(spec: ClusterSpec, t0: float) -> Session:
    from distributed import Client

    dask_jobqueue = _import_jobqueue()

    cls = getattr(dask_jobqueue, JOBQUEUE_SYSTEMS[spec.mode])
    memory = spec.memory or "2GB"
    data_args = ["--lifetime", spec.worker_lifetime] if spec.worker_lifetime else []
    failures = _SubmitFailures()
    cluster = cls(**_jobqueue_kwargs(spec, spec.walltime, memory, data_args),
                  job_cls=failures.job_class(cls.job_cls),
                  scheduler_options=dashboard_options(spec.dashboard_address))
    logging.getLogger("tornado.application").addFilter(failures)
    ps_jobs = []
    try:
        client = Client(cluster)
        session = Session(client, cluster, shard_resource=SHARD_RESOURCE if spec.ps_workers
                          else None, failures=failures)
        session.times["scheduler"] = time.perf_counter() - t0
        if spec.ps_workers:
            # Shard jobs are this session's own, outside the cluster's scale/adapt plan, so
            # that adapt never retires them: same job class, own walltime and memory, a
            # resource, no lifetime.
            ps_kwargs = _jobqueue_kwargs(spec, spec.ps_walltime or spec.walltime,
                                         spec.ps_memory or memory,
                                         ["--resources", f"{SHARD_RESOURCE}=1"])
            ps_jobs = [cluster.job_cls(scheduler=cluster.scheduler_address, name=f"ps-{i}",
                                       job_name="dask-ps-shard", **ps_kwargs)
                       for i in range(spec.ps_workers)]
            session._ps_jobs = ps_jobs
            cluster.sync(_start_jobs, ps_jobs)
        if spec.adapt:
            cluster.adapt(minimum=spec.n_workers, maximum=spec.n_workers)
        else:
            cluster.scale(spec.n_workers)
        session._watch = _JobWatch(spec.mode, lambda: cluster.sync(_job_ids, cluster, ps_jobs))
        session.description = (
            f"{JOBQUEUE_SYSTEMS[spec.mode]}: {spec.n_workers} data job"
            f"{'s' if spec.n_workers != 1 else ''} ({spec.cores} core, {memory}, walltime "
            f"{spec.walltime}{', adaptive' if spec.adapt else ''}"
            f"{', lifetime ' + spec.worker_lifetime if spec.worker_lifetime else ''})"
            + (f" + {spec.ps_workers} shard job{'s' if spec.ps_workers != 1 else ''} "
               f"(resource {SHARD_RESOURCE}=1, walltime {spec.ps_walltime or spec.walltime})"
               if spec.ps_workers else ""))
        return session
    except BaseException:
        try:
            if ps_jobs:
                cluster.sync(_close_jobs, ps_jobs)
            cluster.close()
        finally:
            logging.getLogger("tornado.application").removeFilter(failures)
        raise


def _runner(spec: ClusterSpec, t0: float) -> Session:
    import signal
    import threading

    from distributed import Client

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    # its scheduler and worker tasks end through the sys.exit() SIGINT handler it installs;
    # the client task (the only one that returns from SLURMRunner) gets the previous one back
    SLURMRunner = _import_jobqueue("dask_jobqueue.slurm", keep_sigint=False).SLURMRunner

    worker = {"nthreads": spec.cores, **_set(spec, interface="interface", memory_limit="memory",
                                            local_directory="local_directory")}
    scheduler = {**dashboard_options(spec.dashboard_address),
                 **_set(spec, interface="interface")}
    # Every task of the allocation runs this: task 0 serves the scheduler and task 2.. a worker
    # until the client (task 1) closes the runner, then they exit (SystemExit, status 0);
    # only task 1 returns from here.
    try:
        runner = SLURMRunner(scheduler_file=spec.scheduler_file or "scheduler-{job_id}.json",
                             scheduler_options=scheduler, worker_options=worker)
    except RuntimeError as exc:  # not in a Slurm job step, or too few tasks
        raise OptionError(f"--cluster slurm-runner: {exc} (run it as srun -n N>=3 dask-ps "
                          f"...)") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    runner.__enter__()
    try:
        client = Client(runner)
    except BaseException:
        runner.__exit__(None, None, None)
        raise
    session = Session(client, None, runner=runner,
                      description=f"SLURMRunner: job {runner.job_id}, {runner.n_workers} "
                                  f"worker task{'s' if runner.n_workers != 1 else ''} "
                                  f"({spec.cores} thread{'s' if spec.cores != 1 else ''} "
                                  f"each)")
    session.times["scheduler"] = time.perf_counter() - t0
    spec.workers = runner.n_workers
    return session


def connect(spec: ClusterSpec, report=None) -> Session:
    """Start or reach the cluster ``spec`` describes and wait for its workers.

    Parameters
    ----------
    spec : ClusterSpec
    report : callable, optional
        Called with one line (``str``) while the workers of Slurm jobs are awaited and a job
        is pending, once and then when the jobs' states change, e.g. ``waiting for workers:
        0 of 2 connected; Slurm jobs 43, 44: 2 pending (Priority)``.

    Returns
    -------
    Session
        Close it (or use it as a context manager) to close the client and stop everything
        it started: the local cluster, or the jobqueue cluster's jobs and shard jobs.

    Raises
    ------
    OptionError
        Contradictory options (:meth:`ClusterSpec.check`), an ``address`` that is not one
        (``tcp://host:8786``), a ``scheduler_file`` that is not a Dask scheduler file,
        an address (given, or a scheduler file's) where a server listens that is not a Dask
        scheduler (a dashboard's HTTP port, a worker: it does not answer Dask's protocol as
        one within ``spec.timeout``),
        slurm-runner outside a Slurm job step (a ValueError), a batch system refusing a
        job (``sbatch failed: <its stderr>``, raised as soon as the submission fails), or
        a Slurm job pending for a reason that never lets it run (``PartitionConfig``, ...:
        raised seconds after its submission, naming the job and the reason).
    FileNotFoundError
        ``scheduler_file`` (mode "file") does not exist.
    TimeoutError
        The scheduler or the workers did not come within ``spec.timeout`` (the message says
        how many came, and the states of Slurm jobs: ``2 pending (Resources)``; for an
        existing scheduler, it names ``--scheduler-file`` or ``--scheduler-address``).
    ConnectionRefusedError
        Nothing listens at the existing scheduler's ``tcp://`` address (given, or a
        scheduler file's): raised at once, not after ``spec.timeout``, naming the option.
    OSError
        The existing scheduler refused the connection, or its host is not known (naming
        the option).
    ImportError
        dask-jobqueue is missing for a jobqueue or slurm-runner mode (``pip install
        dask-ps[hpc]``).
    """
    from distributed import Client

    from ._compat import local_cluster_keeping_nannies

    spec.check()
    t0 = time.perf_counter()
    timeout = spec.wait_timeout
    if spec.mode in ("address", "file"):
        _probe_scheduler(spec, timeout)
        try:
            client = Client(spec.address, scheduler_file=spec.scheduler_file, timeout=timeout)
        except OSError as exc:  # a timeout, a refused connection
            raise _unreachable(spec, exc) from None
        session = Session(client, None, description=f"scheduler at {client.scheduler.address}")
        session.times["scheduler"] = time.perf_counter() - t0
    elif spec.mode == "local":
        kwargs = _set(spec, memory_limit="memory", local_directory="local_directory",
                      interface="interface")
        if spec.dashboard_address is None:  # no dashboard; Dask's HTTP server (health,
            kwargs["scheduler_kwargs"] = dashboard_options(None)  # metrics) on a free port
        cluster = _start_without_stop_signals(lambda: local_cluster_keeping_nannies()(  # notes
            n_workers=spec.n_workers, threads_per_worker=spec.cores,
            dashboard_address=spec.dashboard_address, **kwargs))
        try:
            session = Session(Client(cluster), cluster,
                              description=f"LocalCluster: {spec.n_workers} worker process"
                                          f"{'es' if spec.n_workers != 1 else ''} "
                                          f"x {spec.cores} thread"
                                          f"{'s' if spec.cores != 1 else ''}")
        except BaseException:
            cluster.close()
            raise
        session.times["scheduler"] = time.perf_counter() - t0
    elif spec.mode == "slurm-runner":
        session = _runner(spec, t0)
    else:
        session = _jobqueue(spec, t0)
    try:
        _wait_workers(session.client, spec.n_workers + spec.ps_workers, timeout, t0,
                      session.times, session._failures.errors if session._failures else (),
                      session._watch, report)
    except BaseException:
        session.close()
        raise
    if session._failures is not None:  # a job refused later (adapt) is logged as before
        logging.getLogger("tornado.application").removeFilter(session._failures)
    return session
