"""dask_ps: a parameter server on Dask for machine learning on huge, sparse data."""

from .algorithms import LogisticRegression, MatrixFactorization
from .exceptions import ClosedModelError, ShardUnavailableError, UnknownTableError
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
                    Consistency,
                    Init,
                    Optimizer,
                    WorkerView,
)

__version__ = "0.1.0.dev0"

__all__ = ["ASP", "BSP", "FTRL", "SGD", "SSP", "AdaGrad", "Adam", "Add", "ClosedModelError",
           "Consistency", "Init", "LogisticRegression", "Optimizer", "PSModel",
           "ShardUnavailableError", "Table", "UnknownTableError", "WorkerView", "__version__"]
__all__ += ["MatrixFactorization"]
