"""``import dask_ps`` and the ``dask-ps`` command's help and argument errors load none of the
heavy packages (distributed, numba, scikit-learn): the package's names are imported when
first asked for, and the command imports the estimators once a command runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

HEAVY = ("distributed", "numba", "sklearn")

#: Prints, as the last line of stdout, the heavy top-level packages loaded so far.
_REPORT = ("import json as _json, sys as _sys\n"
           f"print(_json.dumps(sorted({{m.split('.')[0] for m in _sys.modules}}"
           f" & {set(HEAVY)!r})))\n")


def _run(code: str) -> tuple[subprocess.CompletedProcess, list]:
    proc = subprocess.run([sys.executable, "-c", code + _REPORT], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv, status, where, text", [
    (["--help"], 0, "stdout", "usage: dask-ps"),
    (["train", "--help"], 0, "stdout", "gbdt-regression"),
    (["evaluate", "--help"], 0, "stdout", "usage: dask-ps evaluate"),
    (["train", "nope"], 2, "stderr", "invalid choice: 'nope'"),
    (["train", "lr", "--train", "x.svm", "--no-such-option"], 2, "stderr",
     "unrecognized arguments: --no-such-option"),
    (["train", "lr", "--train", "x.svm", "--max-iter", "0"], 2, "stderr",
     "--max-iter: must be >= 1, got 0"),
    (["train", "fm"], 2, "stderr", "one of the arguments --train --dataset is required"),
])
def test_help_and_argument_errors_load_no_heavy_package(argv, status, where, text):
    """As ``python -m dask_ps.cli ARGV`` runs (its ``__main__``)."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['dask-ps', *{argv!r}]\n"
            "try:\n"
            "    runpy.run_module('dask_ps.cli', run_name='__main__')\n"
            "except SystemExit as exc:\n"
            "    print('status', exc.code)\n")
    proc, heavy = _run(code)
    assert f"status {status}\n" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert text in getattr(proc, where), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert heavy == [], f"dask-ps {' '.join(argv)} imported {heavy}"


def test_import_loads_no_heavy_package_and_every_public_name_resolves():
    code = ("import sys\n"
            "import dask_ps\n"
            f"early = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})\n"
            "assert early == [], early\n"
            "assert len(set(dask_ps.__all__)) == len(dask_ps.__all__)\n"
            "assert set(dask_ps.__all__) <= set(dir(dask_ps)), "
            "set(dask_ps.__all__) - set(dir(dask_ps))\n"
            "for name in dask_ps.__all__:\n"
            "    space = {}\n"
            "    exec(f'from dask_ps import {name} as value', space)\n"
            "    value = space['value']\n"
            "    assert value is getattr(dask_ps, name), name\n"
            "    if name != '__version__':\n"
            "        assert value.__module__.startswith('dask_ps.'), (name, value.__module__)\n"
            "        assert value.__name__ == name, name\n"
            "space = {}\n"
            "exec('from dask_ps import *', space)\n"
            "assert set(dask_ps.__all__) <= set(space), set(dask_ps.__all__) - set(space)\n"
            "assert dask_ps.io.read_libsvm.__module__ == 'dask_ps.io.libsvm'  # a subpackage\n"
            "try:\n"
            "    dask_ps.NoSuchName\n"
            "except AttributeError as exc:\n"
            "    assert \"has no attribute 'NoSuchName'\" in str(exc), exc\n"
            "else:\n"
            "    raise AssertionError('dask_ps.NoSuchName resolved')\n")
    proc, heavy = _run(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert heavy  # the estimators, resolved, did load them
