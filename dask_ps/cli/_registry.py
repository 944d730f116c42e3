"""The algorithms ``dask-ps train`` knows, by name (see :mod:`._algorithms` for an entry)."""

from __future__ import annotations

from ..exceptions import OptionError
from ._algorithms import Algorithm
from ._gbdt import GBDT, GBDT_REGRESSION
from ._lda import LDA
from ._lr import FM, LR
from ._mf import MF

__all__ = ["ALGORITHMS", "by_estimator"]

#: ``dask-ps train`` algorithms by name.
ALGORITHMS = {a.name: a for a in (LR, FM, MF, LDA, GBDT, GBDT_REGRESSION)}


def by_estimator(name: str) -> Algorithm:
    """The entry whose estimator class is ``name`` (for evaluate and export)."""
    for algo in ALGORITHMS.values():
        if algo.estimator == name:
            return algo
    raise OptionError(f"the command line knows no algorithm for {name}")
