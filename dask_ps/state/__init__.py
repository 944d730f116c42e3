"""Parameter state: tables, partitioners, shards, optimizers, clocks, the process client."""

from .consistency import ASP, BSP, SSP, Consistency
from .optimizers import FTRL, SGD, AdaGrad, Adam, Add, Average, Optimizer
from .table import Init, TableSpec

__all__ = ["ASP", "BSP", "SSP", "SGD", "AdaGrad", "Adam", "Add", "Average", "Consistency", "FTRL",
           "Init", "Optimizer", "TableSpec"]
