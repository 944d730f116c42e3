"""Which fit a checkpoint version holds, for a resume and a recovery of a fit:
:func:`fit_differences` (the one test of "is this version this fit's"), and a resume's
refusals, before anything is restored: :func:`check_resumable` (another fit's tables) and
:func:`check_not_past` (a version of a longer fit). Used by
:func:`~dask_ps.model.recovery.run_clocks` (which re-exports them).
"""

from __future__ import annotations

from typing import Callable

from ..exceptions import OptionError
from . import format as ck
from ._format_tables import differences_said, spec_differences

__all__ = ["RENAMED_FIT_KEYS", "check_not_past", "check_resumable", "fit_differences"]

#: Keys of a checkpoint's fit identity (``extra["fit"]``) that earlier versions wrote under
#: a parameter's old name, and their name now: FactorizationMachineClassifier's ``k``
#: (renamed ``n_components``, see :mod:`dask_ps.algorithms._renamed`).
RENAMED_FIT_KEYS = {"k": "n_components"}


def check_resumable(model, info: ck.CheckpointInfo, fit_id: dict | None = None,
                    driver_differs: Callable | None = None) -> None:
    """Refuse to resume ``model``'s fit from checkpoint ``info`` when it holds other tables
    than the fit made (:func:`fit_differences`). Checked before anything is restored: the
    model and the checkpoint are left as they are.

    Raises
    ------
    OptionError
        Naming the checkpoint, each table that differs and how (the checkpoint's, this
        fit's).
    """
    said = fit_differences(model, info, fit_id, driver_differs)
    if said:
        raise OptionError(f"resume: checkpoint {info.url!r} version {info.version} {said}; "
                          f"resume with the same data and parameters, or use another "
                          f"checkpoint folder")


def fit_differences(model, info: ck.CheckpointInfo, fit_id: dict | None = None,
                    driver_differs: Callable | None = None) -> str | None:
    """Why checkpoint ``info`` holds another fit than ``model``'s: another set of tables, or
    a table of other rows, columns, dtype, partitioner or update rule (another feature
    count, rank, number of topics or classes, solver...); or, with ``fit_id`` (what the fit
    says of itself, e.g. its estimator and hashed width: see :func:`run_clocks`), a
    checkpoint's that differs; or, with ``driver_differs`` (``driver_differs(saved) -> str
    or None``, ``saved`` the driver state the checkpoint keeps, None when it keeps none),
    what it says. E.g. ``"holds another fit: table 'w': rows 21 (this fit's: 11)"``; None
    when it holds this fit. The one test of "which version is this fit's", for a resume
    and a recovery alike (:func:`~dask_ps.model._versions.newest_own`)."""
    # scratch tables (add_table(checkpoint=False)) are not compared: a restore empties them
    tables = {n: t for n, t in info.attrs.get("tables", {}).items() if n not in model._scratch}
    specs = model.saved_specs
    said = []
    theirs = info.attrs.get("extra", {}).get("fit")
    if theirs is not None:  # keys an earlier version wrote under a parameter's old name
        theirs = {RENAMED_FIT_KEYS.get(k, k): v for k, v in theirs.items()}
    if fit_id is not None and theirs is not None:
        # what the checkpoint records (one written before a field was recorded lacks it)
        said += differences_said({k: (theirs[k], v) for k, v in fit_id.items()
                                  if k in theirs and theirs[k] != v})
    if sorted(tables) != sorted(specs):
        said += differences_said({"tables": (sorted(tables), sorted(specs))})
    for name, spec in specs.items():
        if name in tables:
            diff = spec_differences(spec, tables[name])
            if diff:
                said.append(f"table {name!r}: " + ", ".join(differences_said(diff)))
    if driver_differs is not None and (
            driver := driver_differs(info.attrs.get("extra", {}).get("driver"))):
        said.append(driver)
    return f"holds another fit: {'; '.join(said)}" if said else None


def check_not_past(info: ck.CheckpointInfo, n_clocks: int, unit: str = "clock",
                   limit: str = "n_clocks") -> None:
    """Refuse to resume a run of ``n_clocks`` from checkpoint ``info`` taken after more
    clocks: its tables are those of the longer run, which a run of ``n_clocks`` cannot
    return (its results, ``history_`` and ``n_iter_`` would say ``n_clocks``).

    Parameters
    ----------
    info : CheckpointInfo
    n_clocks : int
    unit : str, default "clock"
        What a clock is to the user (e.g. "epoch"), for the message.
    limit : str, default "n_clocks"
        The parameter that sets ``n_clocks`` (e.g. "max_iter"), for the message.

    Raises
    ------
    OptionError
        Naming the checkpoint, its clock and ``limit``.
    """
    if info.clock > n_clocks:
        raise OptionError(f"resume: checkpoint {info.url!r} version {info.version} is at "
                          f"{unit} {info.clock}, past the {_count(n_clocks, unit)} of "
                          f"this fit ({limit}): its tables are those of "
                          f"{_count(info.clock, unit)}, which "
                          f"a fit of {n_clocks} cannot return; set {limit}={info.clock} or "
                          f"more to go on from it, or fit afresh (resume=False, or another "
                          f"checkpoint folder)")


def _count(n: int, unit: str) -> str:
    """``"1 epoch"``, ``"3 epochs"``."""
    return f"{n} {unit}{'' if n == 1 else 's'}"
