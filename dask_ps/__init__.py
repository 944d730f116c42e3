"""dask_ps: a parameter server on Dask for machine learning on huge, sparse data.

The PSModel API (what every algorithm is written in): :class:`PSModel` (tables, jobs,
functions next to the shards, checkpoints), :class:`WorkerView` (a task's pull, push and
clock), :func:`partition` (data held by the workers, streamed to the tasks that own it).
"""

from __future__ import annotations

#: Where each public name lives. The package imports them when first asked for (PEP 562),
#: so ``import dask_ps`` (and the ``dask-ps`` command's ``--help``) loads none of the
#: estimators, scikit-learn, numba or distributed until a name needs them.
_EXPORTS = {
    "algorithms": ("FactorizationMachineClassifier", "GBDTClassifier", "GBDTRegressor",
                   "LatentDirichletAllocation", "LogisticRegression", "MatrixFactorization",
                   "learn_online"),
    "diagnostics": ("plot_history",),
    "exceptions": ("CheckpointFormatError", "CheckpointNotFoundError", "ClosedModelError",
                   "DataError", "DivergenceError", "MemoryLimitError",
                   "NoCheckpointToResumeError", "NoShardWorkerError", "OptionError",
                   "RecoveryError",
                   "ShardFunctionRunningError", "ShardUnavailableError", "UnknownTableError",
                   "WorkerLostError"),
    "model": ("PSModel", "Table"),
    "model.format": ("CheckpointInfo", "TornCheckpointWarning"),
    "partitions": ("Partition", "Partitions", "partition"),
    "state": ("ASP", "BSP", "FTRL", "SGD", "SSP", "AdaGrad", "Adam", "Add", "Average",
              "Consistency", "Init", "Optimizer"),
    "view": ("WorkerView",),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__version__ = "0.1.0.dev0"

__all__ = ["ASP", "BSP", "FTRL", "SGD", "SSP", "AdaGrad", "Adam", "Add", "Average",
           "CheckpointFormatError", "CheckpointInfo", "CheckpointNotFoundError",
           "ClosedModelError", "Consistency", "DataError", "DivergenceError",
           "FactorizationMachineClassifier", "GBDTClassifier", "GBDTRegressor", "Init",
           "LatentDirichletAllocation", "LogisticRegression", "MatrixFactorization",
           "MemoryLimitError", "NoCheckpointToResumeError", "NoShardWorkerError",
           "OptionError", "Optimizer",
           "PSModel", "Partition", "Partitions", "RecoveryError", "ShardFunctionRunningError",
           "ShardUnavailableError", "Table", "TornCheckpointWarning", "UnknownTableError",
           "WorkerLostError", "WorkerView", "__version__", "learn_online", "partition",
           "plot_history"]


def __getattr__(name: str):
    """A public name, imported from its module the first time it is asked for; or a
    subpackage (``dask_ps.io`` after a mere ``import dask_ps``)."""
    import importlib
    import importlib.util

    module = _HOME.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # asked once: later look-ups find it directly
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
