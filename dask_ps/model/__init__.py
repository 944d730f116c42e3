"""The PSModel API: named tables sharded over Dask actors, jobs that pull, push and clock,
checkpoints and recovery (see :class:`PSModel`)."""

from .core import PSModel
from .table import Table

__all__ = ["PSModel", "Table"]
