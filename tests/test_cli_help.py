"""``dask-ps train ALGORITHM --help`` prints the estimators' defaults read from their source,
importing none of them (it imported distributed, numba and scikit-learn: ~3 s, ~340 MB)."""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dask_ps.cli._params import _Default
from dask_ps.cli._registry import ALGORITHMS

REPO = Path(__file__).resolve().parent.parent

#: Runs the command's main with the arguments given, then says on stderr which of the heavy
#: modules the help loaded.
_HELP = """
import sys
from dask_ps.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("distributed", "numba", "sklearn", "numpy", "dask_ps.algorithms")
print("loaded:", sorted(m for m in heavy if m in sys.modules), file=sys.stderr)
"""


def _help(*argv: str) -> tuple[str, str]:
    env = {**os.environ, "COLUMNS": "100000"}  # one line per option
    proc = subprocess.run([sys.executable, "-c", _HELP, *argv], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def _printed_defaults(out: str) -> dict:
    """``{flag: default}`` of a help's options (an option's help may start on the line
    after its flag)."""
    entries = []
    for line in out.splitlines():
        if line.startswith("  -"):
            entries.append(line)
        elif line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
        else:
            entries.append("")
    return {m.group(1): m.group(2) for m in
            (re.match(r"  (--[\w-]+).*\(default: (.*)\)$", e) for e in entries) if m}


def _expected(cls, param: str) -> str:
    """The default the help should print: the estimator's own (``get_params()``), or for
    None what its docstring says."""
    from dask_ps.cli import _defaults

    value = cls().get_params()[param]
    if value is not None:
        return _defaults.shown(value)
    import dask_ps

    return _defaults.doc_default(inspect.getdoc(cls), param,
                                 lambda other: _expected(getattr(dask_ps, other), param))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_train_help_prints_the_estimators_defaults_without_importing_them(name):
    algo = ALGORITHMS[name]
    out, err = _help("train", name, "--help")
    assert err.strip().splitlines()[-1] == "loaded: []", err
    from dask_ps.cli._defaults import estimator_default

    printed = _printed_defaults(out)
    for p in algo.params:
        assert printed.get(p.flag) == " ".join(_expected(algo.cls, p.param).split()), \
            (name, p.flag)
        assert str(_Default(algo, p.param)) == estimator_default(algo.cls, p.param)


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["evaluate", "--help"],
                                  ["export", "--help"]])
def test_other_helps_import_no_estimator(argv):
    out, err = _help(*argv)
    assert "usage: dask-ps" in out
    assert err.strip().splitlines()[-1] == "loaded: []", err


@pytest.fixture
def defaults(tmp_path, monkeypatch):
    """:mod:`dask_ps.cli._defaults` reading an empty package folder, its ``PACKAGE`` (its
    caches cleared, before and after)."""
    from dask_ps.cli import _defaults

    root = tmp_path / "pkg"
    root.mkdir()
    monkeypatch.setattr(_defaults, "PACKAGE", root)
    for cached in (_defaults._tree, _defaults._find_class):
        cached.cache_clear()
    yield _defaults
    for cached in (_defaults._tree, _defaults._find_class):
        cached.cache_clear()


def test_source_default_follows_bases_names_and_fstring_docs(defaults):
    package = defaults.PACKAGE
    (package / "__init__.py").write_text("")
    (package / "_docs.py").write_text('PARAMS = """\n    b : int, optional\n'
                                      '        The b. Default: three.\n"""\n')
    (package / "_consts.py").write_text("N = 200_000\n")
    (package / "est.py").write_text(
        "from sklearn.base import ClassifierMixin\n"
        "from ._consts import N as COUNT\n"
        "from ._docs import PARAMS\n\n"
        "class _Base:\n"
        "    def __init__(self, a='x', *, b=None, n=COUNT, c=max(1, 2), d=None):\n"
        "        pass\n\n"
        "class Est(ClassifierMixin, _Base):\n"
        '    __doc__ = f"""The est.\n\n    Parameters\n    ----------{PARAMS}"""\n\n'
        "class Other(ClassifierMixin):\n"
        '    """No __init__ of its own nor of a base read here."""\n\n'
        "class Wrapped(dict):\n"
        "    pass\n")
    assert defaults.source_default("Est", "a") == "'x'"
    assert defaults.source_default("Est", "n") == "200000"
    assert defaults.source_default("Est", "b") == "three"
    assert defaults.source_default("Est", "d") == "not set"
    for estimator, param in [("Est", "c"), ("Est", "nope"), ("Other", "a"),
                             ("Wrapped", "a"), ("Missing", "a")]:
        with pytest.raises(defaults.Unresolved):
            defaults.source_default(estimator, param)


def test_an_unreadable_source_falls_back_to_the_imported_estimator(defaults):
    """Where the source does not tell (here: no module of the package defines the class),
    the help imports the estimator and prints its default."""
    algo = ALGORITHMS["lr"]
    with pytest.raises(defaults.Unresolved):
        defaults.source_default(algo.estimator, "tol")
    assert str(_Default(algo, "tol")) == "1e-06"
    assert str(_Default(algo, "max_iter")).startswith("10 epochs")
