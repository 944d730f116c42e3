"""Batch-system options of :class:`dask_ps.cluster.ClusterSpec` (no batch system needed): the
walltime each system's job script gets, the directives --job-extra may not repeat, and the
checks made before anything starts (and the dashboard address, checked when the spec is
made). The job scripts are dask-jobqueue's own."""

from __future__ import annotations

import os

import pytest

from dask_ps._cluster_parts import _jobqueue_kwargs
from dask_ps.cli import main
from dask_ps.cluster import JOBQUEUE_SYSTEMS, ClusterSpec
from dask_ps.exceptions import OptionError

dask_jobqueue = pytest.importorskip("dask_jobqueue")


@pytest.fixture
def commands(tmp_path, monkeypatch):
    """sbatch, qsub and bsub on PATH (never run: nothing is submitted here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "qsub", "bsub"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _script(spec: ClusterSpec) -> list[str]:
    """The lines of the job script dask-jobqueue writes for ``spec``'s data jobs."""
    cls = getattr(dask_jobqueue, JOBQUEUE_SYSTEMS[spec.mode]).job_cls
    job = cls(scheduler="tcp://127.0.0.1:8786", name="w",
              **_jobqueue_kwargs(spec, spec.walltime, spec.memory or "2GB", []))
    return job.job_script().splitlines()


@pytest.mark.parametrize("mode, walltime, line", [
    # bsub -W takes [hour:]minute: 01:00:00 was passed as is
    ("lsf", "01:00:00", "#BSUB -W 01:00"),
    ("lsf", "04:00:00", "#BSUB -W 04:00"),
    ("lsf", "1-12:00:00", "#BSUB -W 36:00"),
    ("lsf", "00:00:30", "#BSUB -W 00:01"),  # rounded up to a minute
    ("lsf", "90", "#BSUB -W 01:30"),  # minutes, as Slurm reads it
    # PBS and SGE take [[H:]M:]S, no days
    ("pbs", "1-00:00:00", "#PBS -l walltime=24:00:00"),
    ("pbs", "01:00:00", "#PBS -l walltime=01:00:00"),
    ("sge", "2-12", "#$ -l h_rt=60:00:00"),
    ("sge", "30:00", "#$ -l h_rt=00:30:00"),
    ("slurm", "1-00:00:00", "#SBATCH -t 1-00:00:00"),  # Slurm's own form: as given
])
def test_each_batch_system_gets_the_walltime_in_its_form(commands, mode, walltime, line):
    spec = ClusterSpec(mode=mode, walltime=walltime)
    spec.check()
    assert line in _script(spec)


@pytest.mark.parametrize("mode, extra, clash, option", [
    # sbatch takes the last --mem: the job got 1 GB while the worker's limit stayed ~1.9 GiB
    ("slurm", "--mem=1G", "--mem", "--memory"),
    ("slurm", "--mem-per-cpu 1G", "--mem-per-cpu", "--memory"),
    ("slurm", "-t 10", "-t", "--walltime"),
    ("slurm", "--time=5", "--time", "--walltime"),
    ("slurm", "--cpus-per-task=8", "--cpus-per-task", "--cores"),
    ("pbs", "-l walltime=2:00:00", "walltime", "--walltime"),
    ("pbs", "-l select=1:ncpus=8:mem=4gb", "mem", "--memory"),
    ("sge", "-l h_rt=2:00:00", "h_rt", "--walltime"),
    ("lsf", "-M 1000", "-M", "--memory"),
    ("lsf", "-W 30", "-W", "--walltime"),
])
def test_a_job_extra_repeating_a_directive_is_refused(commands, mode, extra, clash, option):
    with pytest.raises(OptionError) as info:
        ClusterSpec(mode=mode, job_extra=["--qos=long" if mode == "slurm" else "-V",
                                          extra]).check()
    assert str(info.value) == (
        f"--job-extra {extra!r}: {clash} is set by {option} already (the job script would "
        f"have both, and the worker follows {option}): give it with {option}")


@pytest.mark.parametrize("mode, extra, kwargs", [
    ("slurm", "--qos=long", {}),
    ("slurm", "-p debug", {}),  # no --queue: the job script has no -p of its own
    ("slurm", "--account=proj", {}),
    ("sge", "-l h_vmem=16G", {}),  # SGE's memory: the way to ask for it
    ("pbs", "-q short", {}),
    ("lsf", "-R 'rusage[mem=1000]'", {}),
])
def test_a_job_extra_of_its_own_passes(commands, mode, extra, kwargs):
    spec = ClusterSpec(mode=mode, job_extra=[extra], **kwargs)
    spec.check()
    assert any(line.endswith(extra) for line in _script(spec))


def test_a_job_extra_repeating_a_given_queue_is_refused(commands):
    with pytest.raises(OptionError, match=r"^--job-extra '-p debug': -p is set by --queue"):
        ClusterSpec(mode="slurm", queue="compute", job_extra=["-p debug"]).check()


@pytest.mark.parametrize("walltime", ["00:00:00", "0", "0-0", "00:00"])
def test_a_zero_walltime_is_refused(commands, walltime, capsys):
    """Slurm reads -t 0 as no limit (the partition's longest): it was accepted."""
    for name in ("walltime", "ps_walltime"):
        option = "--" + name.replace("_", "-")
        with pytest.raises(OptionError, match=f"^{option} '{walltime}': a zero walltime"):
            ClusterSpec(mode="slurm", ps_workers=1, **{name: walltime}).check()
    with pytest.raises(SystemExit) as info:
        main(["train", "lr", "--train", "x", "--cluster", "slurm", "--walltime", walltime])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"argument --walltime: '{walltime}': a zero walltime (Slurm would read it as no "
        f"limit); give the jobs' length, e.g. 01:00:00")


def test_the_help_says_sge_jobs_request_no_memory(capsys):
    """--help said "memory per job", but SGE job scripts get no memory request from it."""
    with pytest.raises(SystemExit):
        main(["train", "lr", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "SGE jobs request none from it" in text
    assert "LSF as HH:MM (bsub -W" in text


@pytest.mark.parametrize("inside", ["", "sub/dir"])
def test_a_local_directory_that_is_a_file_is_named(tmp_path, inside):
    """The workers failed with "[Errno 20] Not a directory: '.../dask-scratch-space'",
    naming no option, after the cluster had begun to start."""
    path = tmp_path / "afile"
    path.write_text("x")
    given = str(path / inside) if inside else str(path)
    with pytest.raises(OptionError, match=f"^--local-directory {given}: {path} is a file, "
                                          f"not a folder"):
        ClusterSpec(mode="local", local_directory=given).check()
    ClusterSpec(mode="local", local_directory=str(tmp_path / "new" / "dir")).check()


def test_a_local_directory_that_cannot_be_made_is_named():
    """``--local-directory /proc/nope`` stopped the run with "[Errno 2] No such file or
    directory: '/proc/nope'", naming no option: it is now made (or refused) by the check."""
    with pytest.raises(OptionError, match=r"^--local-directory /proc/dask-ps-nope: no folder "
                                          r"can be made there \(.+\)$"):
        ClusterSpec(mode="local", local_directory="/proc/dask-ps-nope").check()


@pytest.mark.parametrize("address, said", [
    ("foo:bar", r"^dashboard_address 'foo:bar': its port 'bar' is not an integer \(give "
                r"HOST:PORT, :PORT, PORT, or None for no dashboard\)$"),
    (":", r"^dashboard_address ':': its port '' is not an integer"),
    ("a:1:2", r"^dashboard_address 'a:1:2' is not HOST:PORT \(more than one ':'; Dask takes "
              r"no IPv6 host here\), nor None$"),
    (":70000", r"^dashboard_address ':70000': its port 70000 is not in 0 to 65535 \(0: a free "
               r"port\)$"),
    (":8787,x:y", r"^dashboard_address 'x:y' \(of ':8787,x:y'\): its port 'y' is not an "
                  r"integer"),
    ([":8787", 70000], r"^dashboard_address 70000 \(of \[':8787', 70000\]\): its port 70000 "
                       r"is not in 0 to 65535"),
    ("none", r"^dashboard_address 'none' would be a host named 'none': for no dashboard give "
             r"None$")])
def test_a_dashboard_address_dask_cannot_read_is_refused_at_construction(address, said):
    """``ClusterSpec(dashboard_address="foo:bar")`` was taken, and failed once the cluster
    started ("unexpected ValueError"), where ``--dashboard-address foo:bar`` is refused
    while parsing: now the spec refuses it when made, with the same words (one check,
    :func:`dask_ps._cluster_scheduler.check_dashboard_address`), a ValueError."""
    with pytest.raises(OptionError, match=said) as info:
        ClusterSpec(dashboard_address=address)
    assert isinstance(info.value, ValueError)
    for good in (":0", "localhost:8787", "8787", 8787, "host", ":8787,:8788", [8787, ":0"],
                 None):
        assert ClusterSpec(dashboard_address=good).dashboard_address == good
    with pytest.raises(TypeError, match=r"^dashboard_address 1.5: a dashboard address is a "
                                        r"str .* got float$"):
        ClusterSpec(dashboard_address=1.5)


@pytest.mark.parametrize("text", ["foo:bar", ":", "a:1:2", ":70000", "-1", ":8787,x:y"])
def test_the_cli_and_the_spec_refuse_a_dashboard_address_in_the_same_words(text, capsys):
    """``--dashboard-address`` (argparse names the option, the CLI says "none") and
    :class:`ClusterSpec` refuse the same addresses with the same message."""
    from dask_ps._cluster_scheduler import check_dashboard_address

    with pytest.raises(OptionError) as info:
        check_dashboard_address(text, name=None, none="none")
    with pytest.raises(SystemExit):
        main(["train", "lr", "x.svm", "--dashboard-address", text])
    assert f"argument --dashboard-address: {info.value}" in capsys.readouterr().err


@pytest.mark.parametrize("address, said", [
    ("no-such-host.invalid", r"^--dashboard-address 'no-such-host.invalid' is not a known host "
                             r"name here \(.+\); give a host or address of this machine, or "
                             r"only :PORT$"),
    ("192.0.2.1:0", r"^--dashboard-address '192.0.2.1:0': its host '192.0.2.1' \(192.0.2.1\) "
                    r"is not an address of this machine, where the scheduler serves its "
                    r"dashboard \(.+\); give one of its own, or only :PORT$")])
def test_a_dashboard_host_not_of_this_machine_is_refused_before_the_cluster_starts(
        address, said, tmp_path, capsys):
    """``--dashboard-address foo`` (a name that does not resolve) or an address of another
    machine passed the address check and failed as "unexpected RuntimeError: Cluster failed
    to start: [Errno -2] Name or service not known (a bug of dask_ps?)", status 1: now the
    spec's check refuses it, naming the option and the host, and the command says so in
    one line, status 2, before any cluster starts."""
    with pytest.raises(OptionError, match=said):
        ClusterSpec(mode="local", dashboard_address=address).check()
    for good in ("127.0.0.1:0", "localhost", ":0", 0, ":0,localhost:0", None):
        ClusterSpec(mode="local", dashboard_address=good).check()
    ClusterSpec(mode="address", address="tcp://127.0.0.1:8786",
                dashboard_address=address).check()  # (no scheduler started here)
    train = tmp_path / "t.svm"
    train.write_text("1 1:1\n0 2:1\n")
    assert main(["train", "lr", "--train", str(train), "--dashboard-address", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dask-ps: error: --dashboard-address {address!r}"), err
    assert "bug of dask_ps" not in err and "Traceback" not in err


@pytest.fixture
def port_8787_taken():
    """Port 8787 (Dask's default dashboard port) held by a listening socket, as another
    cluster on the machine would hold it (left as it is when something holds it already)."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("", 8787))
            sock.listen(1)
        except OSError:  # taken already
            pass
        yield


@pytest.mark.timeout(120)
def test_no_dashboard_serves_dasks_http_server_on_a_free_port_without_a_warning(
        port_8787_taken, tmp_path):
    """A scheduler without a dashboard still serves Dask's HTTP server (health, metrics):
    Dask's ``dashboard_address=None`` put it on port 8787 and warned "Port 8787 is already
    in use" whenever another cluster held it (dask-jobqueue's and SLURMRunner's schedulers
    of ``--dashboard-address none``; the test suite's own clusters, whose warning pytest
    reported against whichever test first set up a cluster fixture). The keywords of
    :func:`dask_ps._cluster_scheduler.dashboard_options` (and the tests'
    ``NO_DASHBOARD``) put it on a free port, with no dashboard; an address given is kept."""
    import asyncio
    import warnings

    from conftest import NO_DASHBOARD
    from distributed import LocalCluster, Scheduler

    from dask_ps._cluster_scheduler import dashboard_options

    async def start(**options):
        async with Scheduler(**options) as scheduler:
            return scheduler.http_server.port

    assert dashboard_options(":0") == {"dashboard_address": ":0"}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        port = asyncio.run(start(**dashboard_options(None)))
        with LocalCluster(n_workers=0, processes=False, **NO_DASHBOARD) as cluster:
            local_port = cluster.scheduler.http_server.port
    said = [str(w.message) for w in seen if "already in use" in str(w.message)]
    assert said == [] and port != 8787 and local_port != 8787, (said, port, local_port)
