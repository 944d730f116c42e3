"""The package's shape: imports point downwards, no import cycle, modules of a readable size."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "dask_ps"

#: Layers, lowest first: a module imports only from its own layer or those below.
LAYERS = [
    ("dask_ps._compat", "dask_ps.exceptions", "dask_ps.kernels", "dask_ps.state.keys"),
    ("dask_ps.state", "dask_ps.io", "dask_ps.cluster", "dask_ps._cluster_parts",
     "dask_ps._cluster_scheduler", "dask_ps._cluster_workers"),
    ("dask_ps.diagnostics", "dask_ps.partitions"),
    ("dask_ps.view", "dask_ps.model"),
    ("dask_ps.algorithms", "dask_ps.saving", "dask_ps._saved_data"),
    ("dask_ps.cli",),
    ("dask_ps",),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict, deferred: bool = True) -> set[str]:
    """dask_ps modules ``name`` imports, with their packages: all of them, or (``deferred``
    False) those imported when the module loads (not inside functions)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = set()  # imports under ``if TYPE_CHECKING:`` never run
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for b in node.body for n in ast.walk(b)}
        if not deferred and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            typing_only |= {id(n) for b in node.body for n in ast.walk(b)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t in modules:
                found.add(t)
                while "." in t:  # importing a module runs its packages' __init__ first
                    t = t.rsplit(".", 1)[0]
                    found.add(t)
    found.discard(name)
    return found


def _layer(name: str) -> int:
    best = None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (i, len(prefix))
    assert best is not None, f"{name} is in no layer of tests/test_layers.py"
    return best[0]


MODULES = _modules()
GRAPH = {n: _imports(n, p, MODULES) for n, p in MODULES.items()}
LOADS = {n: _imports(n, p, MODULES, deferred=False) for n, p in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_downwards(name):
    up = [t for t in GRAPH[name] if _layer(t) > _layer(name)
          and not (name.startswith(t + ".") or t == "dask_ps")]
    assert not up, f"{name} (layer {_layer(name)}) imports from above: {up}"


def test_no_import_cycle():
    """Between modules as they load (a package's __init__ counts as a module); imports
    deferred into functions still obey the layers above."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(LOADS[n]):
            if n.startswith(m + ".") or m.startswith(n + "."):
                continue  # a module and its own package, or a package and its modules
            if state.get(m) == 1:
                cycle = stack[stack.index(m):] + [m]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(LOADS):
        if n not in state:
            visit(n)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_readable(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= 620, f"{name} has {lines} lines: split it by concept"
