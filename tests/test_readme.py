"""Every ```python block of the README runs, as a user would paste it.

A block runs as a script (``python block.py``) in a fresh folder standing for the repository,
beside a ``../shared/data`` link to the datasets, as the README's paths assume. Outlines
that are not programs are fenced ```text and are not run. A block must run to the end without
an error; what the estimators reach is tested elsewhere.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

README = REPO / "README.md"


def _blocks() -> list[tuple[int, str]]:
    """(line number, code) of every ```python block."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


BLOCKS = _blocks()


def test_the_readme_has_runnable_blocks():
    assert len(BLOCKS) >= 5, "the README's examples are ```python blocks"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_block_runs(line, code, tmp_path, data):
    here = tmp_path / "repo"
    here.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(data)
    (here / "block.py").write_text(code)
    env = dict(os.environ, MPLBACKEND="Agg", DASK_PS_DATA=str(data))
    proc = subprocess.run([sys.executable, "block.py"], text=True, cwd=here, env=env,
                          capture_output=True, timeout=540)
    assert proc.returncode == 0, (f"README.md line {line}: the block fails:\n"
                                  f"{proc.stderr[-3000:]}")
    assert "Traceback" not in proc.stderr, f"README.md line {line}:\n{proc.stderr[-3000:]}"


def test_outlines_are_fenced_as_text():
    """A block that is not a complete program (names defined elsewhere) is ```text: the test
    above runs every ```python block, so none is silently left out."""
    text = README.read_text()
    fences = re.findall(r"^```(\w*)$", text, flags=re.M)
    assert set(fences) <= {"python", "bash", "text", "toml", ""}, set(fences)
