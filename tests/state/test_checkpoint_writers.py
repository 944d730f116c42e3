"""Saves of several processes into one checkpoint folder at once: each completes, none
deletes another's version while it is being written (prune), and every version left loads."""

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import dask_ps
from dask_ps import PSModel
from dask_ps.model.format import list_versions

pytestmark = pytest.mark.timeout(300)

SAVER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import dask_ps
    url, who, go, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    model = dask_ps.PSModel("local", n_shards=2)
    model.add_table("w", (5000, 8))
    model.push("w", np.arange(5000), np.full((5000, 8), float(who)))
    while not os.path.exists(go):  # both writers start saving together
        time.sleep(0.005)
    print(*(model.save(url, clock=i, keep=2, chunk_rows=250).version for i in range(n)),
          flush=True)
""")


def test_two_processes_saving_into_one_folder_at_once_both_finish(tmp_path):
    """Two processes each saving 25 versions with keep=2 into one folder at once: both
    finish, each version a save of its own, and every version left loads. Pruning deleted
    the other writer's version while it was being written (a torn version, older than the
    newest complete one): its save died writing its chunks or manifest (FileNotFoundError),
    or a prune on a folder the other was filling (OSError: Directory not empty)."""
    url, go, n = str(tmp_path / "ck"), str(tmp_path / "go"), 25
    env = dict(os.environ, PYTHONPATH=str(Path(dask_ps.__file__).parents[1]))
    procs = [subprocess.Popen([sys.executable, "-c", SAVER, url, str(who), go, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              text=True) for who in (1, 2)]
    try:
        time.sleep(3)  # both have imported dask_ps and made their model
        Path(go).touch()
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    versions = [list(map(int, out.split())) for out, _ in outs]
    assert all(len(vs) == n for vs in versions)
    assert not set(versions[0]) & set(versions[1])  # each save a version of its own
    complete, torn = list_versions(url)
    assert torn == [] and 2 <= len(complete) <= 4, (complete, torn)
    for v in complete:
        with PSModel.load("local", url, version=v) as model:
            first = model.pull("w", [0])[0, 0]
        assert first in (1.0, 2.0)


def test_a_torn_version_is_pruned_only_once_its_save_is_over(tmp_path):
    """A torn version older than the newest complete one is deleted by a save's prune only
    when its writer is gone: a process of this machine that ended, or, when its claim names
    another machine (or another process id namespace of this one: a container sharing its
    name), nothing written into it for STALE_SECONDS."""
    from dask_ps.model._versions import CLAIM, STALE_SECONDS, prune, save_over

    url = str(tmp_path / "ck")
    with PSModel("local") as model:
        model.add_table("w", (10,))
        model.save(url)
        live, dead, remote, contained = (tmp_path / "ck" / f"v00000{v}" for v in (2, 3, 4, 5))
        for folder in (live, dead, remote, contained):
            folder.mkdir()
        ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                               capture_output=True, text=True, check=True).stdout.split()[0]
        host = socket.gethostname()
        (live / CLAIM).write_text(f"{host} {os.getppid()}\n")  # a live process
        (dead / CLAIM).write_text(f"{host} {ended}\n")
        (remote / CLAIM).write_text(f"another-host-{host} 1\n")
        (contained / CLAIM).write_text(f"{host} {ended} pid:[1]\n")
        model.save(url, keep=3)  # version 6
        assert list_versions(url) == ([1, 6], [2, 4, 5])  # the ended writer's pruned
        assert not save_over(*_fs(url, remote)) and not save_over(*_fs(url, contained))
        old = time.time() - STALE_SECONDS - 1
        for path in [remote, *remote.rglob("*"), contained, *contained.rglob("*")]:
            os.utime(path, (old, old))
        assert save_over(*_fs(url, remote))
        assert prune(url, 3) == [4, 5]
        assert list_versions(url) == ([1, 6], [2])


def _fs(url, folder):
    import fsspec

    fs, _ = fsspec.core.url_to_fs(url)
    return fs, str(folder)
