"""Reproducible installs: `make` and `.ci/run` install pinned versions from one constraints
file that pins the whole dependency closure; `make test-latest` tries the newest versions."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from conftest import REPO
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CONSTRAINTS = REPO / "requirements" / "constraints.txt"


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{CONSTRAINTS.name}: {line!r} is not an exact pin"
        out[canonicalize_name(name)] = version
    return out


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in (extras or {""}))


def closure(root: str, extras: set[str]) -> set[str]:
    """Every distribution ``root[extras]`` needs here, by installed metadata."""
    seen: set[str] = set()
    todo = [(root, extras)]
    while todo:
        name, ex = todo.pop()
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            if not _applies(req, ex):
                continue
            key = canonicalize_name(req.name)
            if key not in seen:
                seen.add(key)
                todo.append((req.name, set(req.extras)))
    return seen


def test_the_constraints_pin_every_dependency_of_the_test_install():
    pinned = pins()
    needed = closure("dask-ps", {"test"}) - {"dask-ps"}  # the test extra names dask-ps[hpc]
    assert {"dask", "distributed", "numpy", "numba", "pytest"} <= needed
    missing = sorted(needed - set(pinned))
    assert not missing, f"{CONSTRAINTS.name} does not pin {missing}: run `make constraints`"


def test_the_pins_satisfy_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pinned = pins()
    env = {"python_version": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    for text in project["dependencies"] + project["optional-dependencies"]["test"]:
        req = Requirement(text)
        if req.marker is not None and not Marker(str(req.marker)).evaluate(env):
            continue
        if canonicalize_name(req.name) == "dask-ps":  # an extra of this project, not a pin
            continue
        version = pinned[canonicalize_name(req.name)]
        assert req.specifier.contains(version, prereleases=True), (text, version)


def _dry_run(*targets: str) -> str:
    """The commands ``make`` would run for ``targets`` from scratch (nothing is run)."""
    proc = subprocess.run(["make", "-n", "-B", *targets], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.timeout(120)
def test_make_installs_from_the_constraints_and_test_latest_without():
    pinned = [line for line in _dry_run(".venv/.installed").splitlines()
              if re.search(r"pip install .*-e", line)]
    assert pinned and all("-c requirements/constraints.txt" in line for line in pinned)
    # .ci/run goes through `make test`, hence the pinned install
    assert "make test" in (REPO / ".ci" / "run").read_text()
    latest = [line for line in _dry_run(".venv-latest/.installed").splitlines()
              if re.search(r"pip install .*-e", line)]
    assert latest and not any("-c " in line for line in latest)
    assert all("--upgrade" in line for line in latest)
