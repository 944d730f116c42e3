"""The command-line options of the estimators' parameters: a :class:`Param` per parameter
an :class:`~._algorithms.Algorithm` exposes, made into ``dask-ps train ALGORITHM`` options
by :func:`add_params`, each showing the estimator's default in ``--help``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._defaults import Unresolved, estimator_default, source_default

if TYPE_CHECKING:
    from ._algorithms import Algorithm

__all__ = ["Param", "add_params"]


@dataclass(frozen=True)
class Param:
    """A command-line flag for estimator parameter ``param``; ``kwargs`` go to argparse.

    ``aliases`` are older option strings of the same option (same ``dest``), kept so that
    old command lines and ``--config`` files still work: ``--rank`` of ``--n-components``
    (the parameter was renamed). ``--help`` lists them beside the flag; messages name the
    flag.
    """

    flag: str
    param: str
    kwargs: dict = field(default_factory=dict)
    aliases: tuple = ()


class _Default:
    """The estimator's default of a parameter, found when a ``--help`` prints it: read from
    the estimator's source (:func:`~._defaults.source_default`, importing nothing), or,
    where the source does not tell, from the imported estimator. Building the parser
    imports no estimator."""

    def __init__(self, algo: Algorithm, param: str) -> None:
        self.algo, self.param = algo, param

    def __str__(self) -> str:
        try:
            return source_default(self.algo.estimator, self.param)
        except Unresolved:
            return estimator_default(self.algo.cls, self.param)


def add_params(parser: argparse.ArgumentParser, algo: Algorithm) -> None:
    """Add ``algo``'s :class:`Param` options to ``parser`` (a group ``model``): each defaults
    to nothing (absent from the parsed namespace), so the estimator's own default holds."""
    g = parser.add_argument_group("model", f"{algo.estimator} parameters (defaults: the "
                                           f"estimator's)")
    for p in algo.params:
        kwargs = dict(p.kwargs)
        if kwargs.get("action") is None and "choices" not in kwargs:
            kwargs.setdefault("metavar", p.flag.lstrip("-").upper().replace("-", "_"))
        help = kwargs.pop("help", "")
        action = g.add_argument(p.flag, *p.aliases, dest=p.param, default=argparse.SUPPRESS,
                                **kwargs)
        # argparse fills a help's %(name)s from the action's attributes when it prints it
        action.estimator_default = _Default(algo, p.param)
        action.help = f"{help} (default: %(estimator_default)s)".strip()
