"""The estimators' parameter defaults as ``dask-ps train ALGORITHM --help`` prints them.

:func:`source_default` reads them from the estimators' source with :mod:`ast`, importing
nothing: a ``--help`` loads none of the estimators, distributed, numba or scikit-learn
(importing them took ~3 s and ~340 MB). :func:`estimator_default` reads them from the
imported class: the fallback where the source does not tell (:class:`Unresolved`), and
the reference the tests compare with. Both apply one rule (:func:`shown`,
:func:`doc_default`): the signature's default, or for a ``None`` default what the
docstring's entry of the parameter says (``Default: X.``), else ``"not set"``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

__all__ = ["Unresolved", "doc_default", "estimator_default", "shown", "source_default"]

#: The package's folder (``dask_ps/``), whose source is read.
PACKAGE = Path(__file__).resolve().parent.parent


class Unresolved(Exception):
    """The source does not tell the default without running it (see
    :func:`source_default`)."""


def shown(default) -> str:
    """A default as ``--help`` prints it: ``'auto'``, ``0.001``, ``True``."""
    return repr(default) if isinstance(default, str) else str(default)


#: A default in a numpydoc entry: ``Default: X.``, ``default X.``, ``; default X.``, the
#: type line's ``, default X`` (at a sentence's start, after ``;`` or ``,``: not "by
#: default" inside a sentence), or ``(default X)``.
_DEFAULT = re.compile(r"(?:^|[.;,]\s*)[Dd]efault:? (.+?)(?:\.(?:\s|$)|$)"
                      r"|\([Dd]efault:? ([^)]+)\)")

#: An entry that refers to another estimator's: ``As in :class:`~dask_ps.LogisticRegression`.``
#: (or ``As for``).
_AS_IN = re.compile(r"^As (?:in|for) :class:`~?dask_ps\.(\w+)`")


def _entry(doc: str, param: str) -> tuple[str, str] | None:
    """``(type, text)`` of the numpydoc entry of ``param`` in the (cleaned) docstring
    ``doc``: its line ``name : type`` (a group ``a, b, c`` of names, on several lines if
    need be) and its indented text, joined on one line."""
    names, kind = [], None
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if not line or line[0].isspace():
            continue
        head, sep, typ = line.partition(" : ")
        names += [n.strip() for n in head.split(",") if n.strip()]
        if head.rstrip().endswith(",") and not sep:  # the group goes on next line
            continue
        found, names = param in names, []
        if not found:
            continue
        kind = typ
        body = []
        for text in lines[i + 1:]:
            if text and not text.startswith("    "):
                break
            body.append(text.strip())
        return kind, " ".join(" ".join(body).split())
    return None


def doc_default(doc: str, param: str, refer=None) -> str:
    """What the numpydoc entry of ``param`` in the (cleaned) docstring ``doc`` says its
    default is (``Default: X.``, ``default X.``, ``(default X)``, or the type line's
    ``default X``), else ``"not set"``. An entry ``As in (or for)
    :class:`~dask_ps.Other```. says ``refer("Other")`` when ``refer`` is given."""
    found = _entry(doc, param)
    if found is None:
        return "not set"
    kind, text = found
    m = _AS_IN.match(text)
    if m and refer is not None:
        return refer(m.group(1))
    for part in (text, kind):
        d = _DEFAULT.search(part)
        if d:
            return (d.group(1) or d.group(2)).replace("``", "").strip()
    return "not set"


def estimator_default(cls, param: str) -> str:
    """The default of ``param`` as the imported estimator class ``cls`` gives it: its
    signature's, or for None its docstring's (:func:`doc_default`)."""
    default = inspect.signature(cls).parameters[param].default
    if default is not None:
        return shown(default)
    import dask_ps

    return doc_default(inspect.getdoc(cls) or "", param,
                       lambda other: estimator_default(getattr(dask_ps, other), param))


def source_default(estimator: str, param: str) -> str:
    """:func:`estimator_default` of the class ``estimator`` of the package, read from its
    source without importing it.

    The class is the one module of the package defining ``class <estimator>`` at its top
    level; its ``__init__`` its own, or the first one of its bases defined in the package
    (bases imported from elsewhere must be mixins, ``...Mixin``, which define none); a
    default a literal, or a module-level name bound to one (followed through the
    package's ``from ... import``); the docstring a string, or an f-string of such names
    (``__doc__ = f"..."``).

    Raises
    ------
    Unresolved
        Anything else (no or several such classes, a class decorated otherwise than by
        :data:`DOC_ONLY_DECORATORS`, an ``__init__`` taking ``**kwargs`` or from an unknown
        base, a computed default or docstring): then ask :func:`estimator_default`,
        importing the class.
    """
    node, path = _find_class(estimator)
    init, init_path = _init_of(node, path)
    default = _value(_param_default(init, param), init_path)
    if default is not None:
        return shown(default)
    return doc_default(_class_doc(node, path), param,
                       lambda other: source_default(other, param))


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.lru_cache(maxsize=None)
def _find_class(name: str) -> tuple[ast.ClassDef, Path]:
    pattern = re.compile(rf"^class {re.escape(name)}\b", re.M)
    found = []
    for p in sorted(PACKAGE.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        if f"class {name}" in text and pattern.search(text):
            found.append(p)
    if len(found) != 1:
        raise Unresolved(f"class {name}: defined in {len(found)} modules of {PACKAGE}")
    kind, node, path = _binding(name, found[0])
    if kind != "class":
        raise Unresolved(f"class {name}: not a class statement at the top of {found[0]}")
    return node, path


def _module_path(importer: Path, level: int, module: str | None) -> Path | None:
    """The file of the module ``from <level dots><module> import`` names in ``importer``;
    None for a module outside the package."""
    if level:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
    elif module and module.split(".")[0] == PACKAGE.name:
        base = PACKAGE.parent
    else:
        return None
    target = base.joinpath(*module.split(".")) if module else base
    if target.with_suffix(".py").is_file():
        return target.with_suffix(".py")
    if (target / "__init__.py").is_file():
        return target / "__init__.py"
    raise Unresolved(f"{importer}: no module {'.' * level}{module or ''}")


#: Class decorators that change only the docstring's ``history_`` section
#: (:func:`~dask_ps.algorithms._base.history_doc`): neither the defaults nor the parameters'
#: entries the help reads, so a class they decorate is still read from its source.
DOC_ONLY_DECORATORS = frozenset({"history_doc"})


def _binding(name: str, path: Path) -> tuple[str, object, Path | None]:
    """What the top level of module ``path`` binds ``name`` to, last binding first:
    ``("class", ClassDef, path)``, ``("value", expression, path)`` (followed through
    imports from the package) or ``("external", module name, None)``."""
    for stmt in reversed(_tree(path).body):
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            if any(not (isinstance(d, ast.Name) and d.id in DOC_ONLY_DECORATORS)
                   for d in stmt.decorator_list):
                raise Unresolved(f"{path}: class {name} is decorated")
            return "class", stmt, path
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in stmt.targets):
            return "value", stmt.value, path
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and stmt.target.id == name and stmt.value is not None):
            return "value", stmt.value, path
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    source = _module_path(path, stmt.level, stmt.module)
                    if source is None:
                        return "external", stmt.module, None
                    return _binding(alias.name, source)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import)) and \
                any(n == name for n in _names(stmt)):
            break
    raise Unresolved(f"{path}: no top-level binding of {name} to read")


def _names(stmt) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return [stmt.name]


def _init_of(node: ast.ClassDef, path: Path) -> tuple[ast.FunctionDef, Path]:
    """The ``__init__`` the class ``node`` of module ``path`` runs, and its module."""
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            return stmt, path
    for base in node.bases:
        if not isinstance(base, ast.Name):
            raise Unresolved(f"{path}: class {node.name} has a base {ast.unparse(base)}")
        kind, found, where = _binding(base.id, path)
        if kind == "class":
            return _init_of(found, where)
        if kind != "external" or not base.id.endswith("Mixin"):
            raise Unresolved(f"{path}: the base {base.id} of {node.name} is not read")
    raise Unresolved(f"{path}: class {node.name} has no __init__ to read")


def _param_default(init: ast.FunctionDef, param: str) -> ast.expr:
    args = init.args
    positional = args.posonlyargs + args.args
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]],
                        args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)
                    if d is not None)
    if param not in defaults:
        raise Unresolved(f"{init.name}: no default of {param} in its signature")
    return defaults[param]


def _value(expr: ast.expr, path: Path):
    """The value of ``expr`` in module ``path``: a literal, a name bound to one, or an
    f-string of those."""
    if isinstance(expr, ast.Name):
        kind, found, where = _binding(expr.id, path)
        if kind != "value":
            raise Unresolved(f"{path}: {expr.id} is not a value to read")
        return _value(found, where)
    if isinstance(expr, ast.JoinedStr):
        parts = []
        for part in expr.values:
            if isinstance(part, ast.FormattedValue):
                if part.conversion != -1 or part.format_spec is not None:
                    raise Unresolved(f"{path}: a formatted f-string field")
                parts.append(str(_value(part.value, path)))
            else:
                parts.append(str(_value(part, path)))
        return "".join(parts)
    try:
        return ast.literal_eval(expr)
    except ValueError:
        raise Unresolved(f"{path}: {ast.unparse(expr)} is not a literal") from None


def _class_doc(node: ast.ClassDef, path: Path) -> str:
    """The cleaned docstring of the class ``node`` (as :func:`inspect.getdoc` gives it)."""
    doc = ast.get_docstring(node)
    if doc is not None:
        return doc
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__doc__"
                                                for t in stmt.targets):
            value = _value(stmt.value, path)
            if isinstance(value, str):
                return inspect.cleandoc(value)
    raise Unresolved(f"{path}: class {node.name} has no docstring to read")
