"""dask_ps: a parameter server on Dask for machine learning on huge, sparse data.

The PSModel API (what every algorithm is written in): :class:`PSModel` (tables, jobs,
functions next to the shards, checkpoints), :class:`WorkerView` (a task's pull, push and
clock), :func:`partition` (data held by the workers, streamed to the tasks that own it).
"""

from .algorithms import (
                         FactorizationMachineClassifier,
                         GBDTClassifier,
                         GBDTRegressor,
                         LatentDirichletAllocation,
                         LogisticRegression,
                         MatrixFactorization,
                         learn_online,
)
from .diagnostics import plot_history
from .exceptions import (
                         CheckpointFormatError,
                         CheckpointNotFoundError,
                         ClosedModelError,
                         DataError,
                         DivergenceError,
                         NoCheckpointToResumeError,
                         NoShardWorkerError,
                         OptionError,
                         RecoveryError,
                         ShardFunctionRunningError,
                         ShardUnavailableError,
                         UnknownTableError,
                         WorkerLostError,
)
from .model import PSModel, Table
from .model.format import CheckpointInfo, TornCheckpointWarning
from .partitions import Partition, Partitions, partition
from .state import (
                         ASP,
                         BSP,
                         FTRL,
                         SGD,
                         SSP,
                         AdaGrad,
                         Adam,
                         Add,
                         Average,
                         Consistency,
                         Init,
                         Optimizer,
)
from .view import WorkerView

__version__ = "0.1.0.dev0"

__all__ = ["ASP", "BSP", "FTRL", "SGD", "SSP", "AdaGrad", "Adam", "Add", "Average",
           "CheckpointFormatError", "CheckpointInfo", "CheckpointNotFoundError",
           "ClosedModelError", "Consistency", "DataError", "DivergenceError",
           "FactorizationMachineClassifier", "GBDTClassifier", "GBDTRegressor", "Init",
           "LatentDirichletAllocation", "LogisticRegression", "MatrixFactorization",
           "NoCheckpointToResumeError", "NoShardWorkerError", "OptionError", "Optimizer",
           "PSModel", "Partition", "Partitions", "RecoveryError", "ShardFunctionRunningError",
           "ShardUnavailableError", "Table", "TornCheckpointWarning", "UnknownTableError",
           "WorkerLostError", "WorkerView", "__version__", "learn_online", "partition",
           "plot_history"]
