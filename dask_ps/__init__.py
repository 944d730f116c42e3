"""dask_ps: a parameter server on Dask for machine learning on huge, sparse data."""

from .algorithms import LogisticRegression, MatrixFactorization
from .diagnostics import plot_history
from .exceptions import (
                         CheckpointFormatError,
                         CheckpointNotFoundError,
                         ClosedModelError,
                         RecoveryError,
                         ShardUnavailableError,
                         UnknownTableError,
                         WorkerLostError,
)
from .model import PSModel, Table
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
                    WorkerView,
)
from .state.checkpoint import CheckpointInfo, TornCheckpointWarning

__version__ = "0.1.0.dev0"

__all__ = ["ASP", "BSP", "FTRL", "SGD", "SSP", "AdaGrad", "Adam", "Add", "Average",
           "ClosedModelError", "Consistency", "Init", "LogisticRegression", "Optimizer", "PSModel",
           "ShardUnavailableError", "Table", "UnknownTableError", "WorkerView", "__version__",
           "plot_history"]
__all__ += ["CheckpointFormatError", "CheckpointInfo", "CheckpointNotFoundError",
            "RecoveryError", "TornCheckpointWarning", "WorkerLostError"]
__all__ += ["MatrixFactorization"]
