"""``dask-ps`` on bad cluster options, missing files and Ctrl-C: one line, status 2 (130
when interrupted), and no cluster started for what can be checked before."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import NO_DASHBOARD, REPO

from dask_ps.cli import STOP_GRACE, main


@pytest.fixture
def tr(tmp_path):
    rng = np.random.default_rng(0)
    lines = [f"{y} {1 + y}:1 {rng.integers(3, 9)}:0.5" for y in rng.integers(0, 2, 50)]
    path = tmp_path / "tr.svm"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _ldac(path, n_docs=300, n_terms=40, seed=0):
    """An LDA-C file: each document counts a few of ``n_terms`` terms."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n_docs):
        ids = np.sort(rng.choice(n_terms, 6, replace=False))
        lines.append("6 " + " ".join(f"{i}:{rng.integers(1, 5)}" for i in ids))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("address, reason", [
    ("notaurl", "missing port number in address 'notaurl'"),
    ("tcp://host", "missing port number in address 'host'"),
    ("tcp://host:port", "invalid literal for int() with base 10: 'port'"),
    ("foo://host:8786", "unknown address scheme 'foo'"),
])
def test_a_scheduler_address_that_is_none_names_the_option(tr, capsys, address, reason):
    assert main(["train", "lr", "--train", tr, "--scheduler-address", address]) == 2
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"dask-ps: error: --scheduler-address {address!r}: not an address such as "
        f"tcp://host:8786 ({reason}")
    assert "cluster:" not in out.out


@pytest.mark.timeout(180)
def test_dashboard_address_none_starts_a_cluster_without_a_dashboard(tr, capsys):
    """``--dashboard-address none`` is Dask's ``dashboard_address=None``: the cluster
    starts without a dashboard (no link, no dask_ps page); Dask read "none" as a host name,
    the cluster failed to start and the command ended with 'unexpected RuntimeError ... (a
    bug of dask_ps?)', status 1."""
    assert main(["train", "lr", "--train", tr, "--max-iter", "1", "--workers", "1",
                 "--dashboard-address", "None"]) == 0
    out = capsys.readouterr().out
    assert "dashboard: none (--dashboard-address none)" in out, out
    assert "dask_ps page" not in out and "/status" not in out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("content, reason", [
    (b"label,a,b\n1,2,3\n", "not JSON: Expecting value: line 1 column 1 (char 0)"),
    (b"", "not JSON: Expecting value"),
    (b'{"addr": "tcp://127.0.0.1:8786"}', "no JSON 'address'"),
    (b'["tcp://127.0.0.1:8786"]', "no JSON 'address'"),
    (b'{"address": 8786}', "no JSON 'address'"),
    (b"\x00\xff\xfe\x00", "not"),
])
def test_a_scheduler_file_that_is_none_says_so(tr, tmp_path, capsys, content, reason):
    path = tmp_path / "scheduler.json"
    path.write_bytes(content)
    assert main(["train", "lr", "--train", tr, "--scheduler-file", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"dask-ps: error: --scheduler-file {path}: not a Dask scheduler file ({reason}")


@pytest.mark.timeout(60)
def test_a_scheduler_file_that_is_a_folder(tr, tmp_path, capsys):
    assert main(["train", "lr", "--train", tr, "--scheduler-file", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"dask-ps: error: --scheduler-file {tmp_path}: no such "
                                       f"file (a directory)\n")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("option", ["--scheduler-file", "--scheduler-address"])
def test_a_scheduler_that_is_gone_names_the_option(tr, tmp_path, capsys, option):
    """A scheduler file left by an earlier job (its scheduler is gone) said only "Timed out
    trying to connect to tcp://127.0.0.1:PORT after 3 s", naming neither the file nor that
    it may be stale; and it said so only after ``--timeout`` (Dask retries a refused
    connection until then): nothing listening is now said at once."""
    import json
    import socket

    import dask

    with socket.socket() as sock, dask.config.set({"distributed.comm.timeouts.connect":
                                                   "60s"}):
        sock.bind(("127.0.0.1", 0))  # bound, not listening: the port refuses connections
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        path = tmp_path / "scheduler.json"
        path.write_text(json.dumps({"type": "Scheduler", "id": "x", "address": address}))
        given = str(path) if option == "--scheduler-file" else address
        t0 = time.perf_counter()
        assert main(["train", "lr", "--train", tr, option, given, "--timeout", "60"]) == 2
        seconds = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert err == (f"dask-ps: error: --scheduler-file {path}: the address it gives, {address}: "
                   f"nothing is listening there (connection refused): is its scheduler still "
                   f"running? (the file may be left over from an earlier job) Start it "
                   f"again, or leave out --scheduler-file to use a local cluster\n"
                   if option == "--scheduler-file"
                   else f"dask-ps: error: --scheduler-address {address}: nothing is listening "
                        f"there (connection refused): start the Dask scheduler there first "
                        f"(dask scheduler --port {address.rsplit(':', 1)[1]}), or leave out "
                        f"--scheduler-address to use a local cluster\n"), err
    assert seconds < 30  # (Dask's retries: 60 s)


@pytest.mark.timeout(90)
def test_connect_refuses_an_address_where_nothing_listens_at_once():
    """:func:`dask_ps.cluster.connect` (the Python API) checks as the CLI does."""
    import socket

    from dask_ps.cluster import ClusterSpec, connect

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        t0 = time.perf_counter()
        with pytest.raises(ConnectionRefusedError, match=f"--scheduler-address {address}: "
                           f"nothing is listening there"):
            connect(ClusterSpec(mode="address", address=address, timeout=60))
        assert time.perf_counter() - t0 < 30  # (Dask's retries: 60 s)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["--scheduler-file", "--scheduler-address"])
def test_a_server_that_is_no_scheduler_is_named_not_waited_for(tr, tmp_path, capsys, option):
    """Dask's connect bounds the TCP connection by its timeout, not the handshake: a
    scheduler address where something listens that never answers Dask's protocol (a
    dashboard's HTTP port, another service) made ``dask-ps`` wait for ever whatever
    ``--timeout`` said."""
    import json
    import socket

    with socket.socket() as sock:  # the kernel accepts connections; nothing answers them
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        path = tmp_path / "scheduler.json"
        path.write_text(json.dumps({"type": "Scheduler", "address": address}))
        given = str(path) if option == "--scheduler-file" else address
        t0 = time.perf_counter()
        assert main(["train", "lr", "--train", tr, option, given, "--timeout", "2"]) == 2
        took = time.perf_counter() - t0
    err = capsys.readouterr().err
    where = (f"--scheduler-file {path}: the address it gives, {address}"
             if option == "--scheduler-file" else f"--scheduler-address {address}")
    assert err == (f"dask-ps: error: {where}: a server listens there but does not answer as a "
                   f"Dask scheduler (no reply to Dask's protocol within 4 s): is it the "
                   f"scheduler's address (tcp://host:8786 by default), not its dashboard's or "
                   f"another service's?\n"), err
    assert took < 40


@pytest.mark.timeout(60)
def test_a_worker_address_given_for_the_scheduler_is_named(tr, capsys):
    """A worker's address as ``--scheduler-address`` failed with Dask's ``TypeError:
    Worker.identity() got an unexpected keyword argument 'n_workers'``, a bug's status."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, protocol="tcp",
                      **NO_DASHBOARD) as cluster:
        worker = next(iter(cluster.scheduler.workers))
        assert main(["train", "lr", "--train", tr, "--scheduler-address", worker,
                     "--timeout", "5"]) == 2
    assert capsys.readouterr().err == (
        f"dask-ps: error: --scheduler-address {worker}: a Dask Worker answers there, not a "
        f"scheduler: give the scheduler's address (its workers and clients connect to it, "
        f"tcp://host:8786 by default)\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("content", [None, b'{"foo": 1}'])
def test_a_bad_scheduler_file_is_named_before_the_input_files(tmp_path, capsys, content):
    """The scheduler file was checked after the inputs (14-17 s into a run on a real data
    set): it is checked with the other options, first."""
    path = tmp_path / "scheduler.json"
    if content is not None:
        path.write_bytes(content)
    missing = str(tmp_path / "none.svm")
    assert main(["train", "lr", "--train", missing, "--scheduler-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dask-ps: error: --scheduler-file {path}: "), err


@pytest.mark.timeout(60)
def test_a_missing_vocabulary_fails_before_any_cluster(tmp_path, capsys):
    train = _ldac(tmp_path / "docs.dat")
    missing = str(tmp_path / "none.txt")
    assert main(["train", "lda", "--train", train, "--vocab", missing]) == 2
    out = capsys.readouterr()
    assert out.err == f"dask-ps: error: --vocab {missing}: no such file\n"
    assert "cluster:" not in out.out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", [["evaluate", "MODEL", "--test", "TR"],
                                     ["export", "MODEL", "OUT"]])
def test_a_missing_model_names_the_argument(tr, tmp_path, capsys, command):
    missing = str(tmp_path / "model.npz")
    argv = [{"MODEL": missing, "TR": tr, "OUT": str(tmp_path / "out")}.get(a, a)
            for a in command]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"dask-ps: error: model {missing}: no such file\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(180)
def test_a_failing_sbatch_ends_the_command_at_once_with_its_stderr(tr, tmp_path):
    """The batch system refuses the jobs (here a fake ``sbatch`` failing as one without a
    Slurm configuration does): its stderr, status 2, no traceback, no wait for workers."""
    pytest.importorskip("dask_jobqueue")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text("#!/bin/sh\necho 'sbatch: error: fetch_config: DNS SRV lookup failed' "
                      ">&2\necho 'sbatch: fatal: Could not establish a configuration source' "
                      ">&2\nexit 1\n")
    sbatch.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dask_ps.cli", "train", "lr", "--train", tr,
                           "--cluster", "slurm", "--interface", "lo", "--timeout", "150"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=170)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "dask-ps: error: sbatch failed: sbatch: error: fetch_config: DNS SRV lookup failed / "
        "sbatch: fatal: Could not establish a configuration source"], proc.stderr[-3000:]
    assert time.monotonic() - t0 < 150  # not the wait for workers


def _start_train_lda(tmp_path, *args, env=None, stdout=subprocess.DEVNULL):
    """``dask-ps train lda --seed 0 *args`` in a session of its own (its process group: a
    terminal's Ctrl-C goes to the whole group), stderr to ``tmp_path / "stderr.txt"``;
    returns the process (stdout as text when piped) and that file's path."""
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dask_ps.cli", "train", "lda", "--seed", "0", *args],
            cwd=REPO, stdout=stdout, stderr=err_file, text=True, start_new_session=True,
            env=env)
    return proc, stderr


def _dask_ps(argv, path, timeout=120):
    """``python -m dask_ps.cli argv`` with ``PATH`` set to ``path``; and its wall time."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dask_ps.cli", *argv], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PATH": str(path)},
                          timeout=timeout)
    return proc, time.monotonic() - t0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("system, command, name", [("pbs", "qsub", "PBS"),
                                                   ("sge", "qsub", "Grid Engine (SGE)"),
                                                   ("lsf", "bsub", "LSF")])
def test_a_batch_system_without_its_command_is_refused_at_once(tr, tmp_path, system, command,
                                                                name):
    """--cluster pbs on a machine without qsub (a login node without the module loaded)
    waited the whole --timeout, then failed with an AssertionError (pbs, sge) or a bare
    "Exit code: 127" (lsf): one line naming the command, status 2, before any cluster."""
    pytest.importorskip("dask_jobqueue")
    empty = tmp_path / "bin"
    empty.mkdir()
    proc, wall = _dask_ps(["train", "lr", "--train", tr, "--cluster", system, "--interface",
                           "lo", "--timeout", "600"], empty)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"dask-ps: error: --cluster {system}: {command}: command not found on PATH (is {name} "
        f"installed here, or its module loaded? The jobs are submitted from this machine)"]
    assert "cluster:" not in proc.stdout and wall < 100  # not the 600 s wait for workers


@pytest.mark.timeout(120)
def test_a_submit_command_that_cannot_run_ends_the_wait_at_once(tr, tmp_path):
    """qsub on PATH, but it cannot be started (here a script whose interpreter is missing):
    dask-jobqueue's FileNotFoundError was not recorded as a failed submission, so the
    command waited the whole --timeout for the workers, then closing the cluster failed with
    ``AssertionError: Status.created``. Now: the reason at once, status 2."""
    pytest.importorskip("dask_jobqueue")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qsub = bin_dir / "qsub"
    qsub.write_text("#!/nonexistent/interpreter\n")
    qsub.chmod(0o755)
    proc, wall = _dask_ps(["train", "lr", "--train", tr, "--cluster", "pbs", "--interface",
                           "lo", "--timeout", "600"], f"{bin_dir}{os.pathsep}/bin")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "dask-ps: error: qsub failed: cannot run qsub (No such file or directory)"], \
        proc.stderr[-3000:]
    assert wall < 100  # not the 600 s wait for the workers


@pytest.mark.timeout(300)
def test_ctrl_c_stops_the_run_with_one_line(tmp_path):
    """SIGINT to the process group, as a terminal's Ctrl-C sends it: the driver stops the
    run and closes the cluster; the worker processes print no traceback. The iterations
    are long enough (~1 s) for the signal to come while the tasks compute: stopped, the job
    waits for them to end before the shards are released and the workers closed (else
    the workers log each task cancelled with them, or its calls to shards gone)."""
    train = _ldac(tmp_path / "docs.dat", n_docs=40000, n_terms=2000)
    proc, stderr = _start_train_lda(tmp_path, "--train", train, "--topics", "50", "--max-iter",
                                    "1000000", stdout=subprocess.PIPE)
    try:
        seen = []
        for line in proc.stdout:  # until the first iteration is done
            seen.append(line)
            if line.startswith("["):
                break
        else:
            raise AssertionError("".join(seen) + stderr.read_text()[-3000:])
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = stderr.read_text()
    assert proc.returncode == 130, err[-3000:]
    lines = err.splitlines()  # (the second form when closing took over STOP_GRACE s)
    assert len(lines) == 1 and lines[0] in (
        "dask-ps: error: interrupted", f"dask-ps: error: interrupted (still stopping after "
        f"{STOP_GRACE:g} s: its processes were killed)"), err[-3000:]


def _signal_while_workers_start(tmp_path, hang: bool, signum=signal.SIGINT, group=None,
                                up: bool = False) -> tuple[int, str, list[int]]:
    """``dask-ps train lda`` on a local cluster, ``signum`` the moment a worker process has
    imported distributed and started its watch of the driver (a second thread), before its
    worker, let alone a worker plugin, runs (with ``up``: once both workers listen, their
    servers up, as the start ends): to the process group (``group``; default: not ``hang``, as a
    terminal's Ctrl-C) or to the driver alone; with ``hang``, whose workers never come up (a
    preload module that sleeps at import), 2 s later. Returns the status, stderr and the
    worker processes' masks of blocked signals then (Linux's ``/proc/PID/status``)."""
    import psutil

    env = dict(os.environ)
    if hang:
        (tmp_path / "dask_ps_test_hang.py").write_text("import time\ntime.sleep(3600)\n")
        env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]),
                   DASK_DISTRIBUTED__WORKER__PRELOAD='["dask_ps_test_hang"]')
    train = _ldac(tmp_path / "docs.dat")
    proc, stderr = _start_train_lda(tmp_path, "--train", train, "--topics", "3", "--workers",
                                    "2", env=env)
    try:
        driver = psutil.Process(proc.pid)
        deadline = time.monotonic() + 200
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                workers = [c for c in driver.children() if "spawn_main" in " ".join(c.cmdline())]
                masks = [_blocked_signals(c.pid) for c in workers]
                if up and len(workers) == 2 and all(
                        any(k.status == psutil.CONN_LISTEN for k in c.net_connections("tcp"))
                        for c in workers):
                    break  # both workers' servers listen
                if not up and any(c.num_threads() > 1 for c in workers):
                    break  # a worker process runs its first thread: its worker is not up
            except (psutil.Error, OSError):  # a process gone meanwhile
                pass
            time.sleep(0.005)
        else:
            raise AssertionError(f"no worker process came: {stderr.read_text()[-3000:]}")
        if hang:
            time.sleep(2)  # well into the start that never ends
        if (not hang) if group is None else group:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        proc.wait(timeout=STOP_GRACE + 150)
    finally:
        try:  # the driver and any worker process left (sleeping in its preload)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return proc.returncode, stderr.read_text(), masks


def _blocked_signals(pid: int) -> int:
    """The mask of the signals process ``pid`` blocks (bit ``n - 1``: signal ``n``)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1], 16) for line in f if line.startswith("SigBlk:"))


@pytest.mark.timeout(300)
def test_ctrl_c_while_the_workers_start_stops_with_one_line(tmp_path):
    """The worker processes are born with SIGINT blocked, so the only line is the
    driver's."""
    code, err, masks = _signal_while_workers_start(tmp_path, hang=False)
    assert masks and all(m >> (signal.SIGINT - 1) & 1 for m in masks), masks
    assert code == 130, err[-3000:]
    assert err.splitlines() == ["dask-ps: error: interrupted"], err[-3000:]


@pytest.mark.timeout(300)
def test_ctrl_c_while_the_cluster_start_hangs_still_ends_the_command(tmp_path):
    """Ctrl-C to the driver is not held back until a start that never ends does: the
    command ends with status 130 and its line (the start runs in a thread of its own,
    SIGINT blocked there only)."""
    code, err, _ = _signal_while_workers_start(tmp_path, hang=True)
    assert code == 130, err[-3000:]
    assert err.splitlines()[0].startswith("dask-ps: error: interrupted"), err[-3000:]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("group, up", [(True, False), (False, False), (True, True)],
                         ids=["group", "driver", "group-up"])
def test_sigterm_while_the_workers_start_stops_with_one_line(tmp_path, group, up):
    """SIGTERM (a batch system's walltime or scancel: to the whole process group, or to the
    driver alone) while the local cluster starts, or just after: status 143 and only the
    driver's line. The worker processes are born with SIGTERM blocked too (before, a SIGTERM
    to the group killed the workers once up: the scheduler and nannies could log their loss
    and restarts, with tracebacks, depending on the moment)."""
    code, err, masks = _signal_while_workers_start(tmp_path, hang=False, signum=signal.SIGTERM,
                                                   group=group, up=up)
    assert masks and all(m >> (signal.SIGTERM - 1) & 1 for m in masks), masks  # from birth
    assert code == 143, err[-3000:]
    assert err.splitlines() == ["dask-ps: error: stopped by SIGTERM (a walltime or scancel?)"], \
        err[-3000:]


def test_a_stop_signal_ends_the_command_even_when_its_exit_hangs(tmp_path):
    """Once Ctrl-C or SIGTERM came, the command ends within STOP_GRACE seconds with its
    status and one line, even when something it waits for while stopping never returns
    (in CI, a Ctrl-C'd run once did not end within 120 s)."""
    script = ("import atexit, os, signal, sys, time\n"
              "import dask_ps.cli as cli\n"
              "cli.STOP_GRACE = 1.0\n"
              "signal.signal(signal.SIGINT, cli._on_sigint)\n"
              "atexit.register(time.sleep, 600)  # an exit that hangs\n"
              "try:\n"
              "    os.kill(os.getpid(), signal.SIGINT)\n"
              "    time.sleep(600)\n"
              "except KeyboardInterrupt:\n"
              "    sys.exit(0)  # the hanging exit handler runs now\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "dask-ps: error: interrupted (still stopping after 1 s: its processes were killed)"]


def test_an_earlier_main_call_s_failure_leaves_the_stop_watchdog_s_line(tmp_path):
    """In one process, a failure line printed by an earlier main() call does not silence
    the stop watchdog's line in a later call (its stop state is that call's own)."""
    script = ("import os, signal, sys, time\n"
              "import dask_ps.cli as cli\n"
              "from dask_ps.cli import _run\n"
              "cli.STOP_GRACE = 1.0\n"
              "assert cli.main(['evaluate', 'no-such.npz', '--test', 'te.svm']) == 2\n"
              "def evaluate(args):\n"
              "    try:\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "        time.sleep(600)\n"
              "    finally:\n"
              "        time.sleep(600)  # closing the run hangs\n"
              "_run.evaluate = evaluate\n"
              "cli.main(['evaluate', 'm.npz', '--test', 'te.svm'])\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("dask-ps: error: ") and "no-such.npz" in \
        lines[0], proc.stderr[-3000:]
    assert lines[1] == ("dask-ps: error: interrupted (still stopping after 1 s: its "
                        "processes were killed)"), proc.stderr[-3000:]


@pytest.mark.timeout(420)
def test_libsvm_test_data_for_a_csv_model_says_so(client1, tmp_path, capsys):
    from test_cli import _ctr_csv, _scheduler_file

    train, model = _ctr_csv(tmp_path / "tr.csv"), str(tmp_path / "m.npz")
    assert main(["train", "lr", "--format", "csv", "--train", train, "--label", "click",
                 "--numeric", "price", "--categorical", "shop", "--hash-features", "64",
                 "--max-iter", "2", "--save", model,
                 "--scheduler-file", _scheduler_file(client1, tmp_path)]) == 0
    capsys.readouterr()
    svm = tmp_path / "te.svm"
    svm.write_text("0 1:1 2:0.5\n1 3:1\n")
    assert main(["evaluate", model, "--test", str(svm)]) == 2
    err = capsys.readouterr().err
    # (its one column named first: read_ctr with an encoder said "columns [...] are not
    # among ['0 1:1 2:0.5']")
    assert err.startswith(f"dask-ps: error: {svm}: one column, '0 1:1 2:0.5', read with the "
                          f"delimiter ',': no feature column beside a label") and err.endswith(
        " (this file looks like LIBSVM, '0 1:1 2:0.5', while the model was trained on CSV "
        "data: dask-ps evaluate reads the test data as the training data was read)\n"), err
