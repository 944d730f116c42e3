"""Data partitions: training data cut into parts held by the workers, and streamed to the tasks
that run where they live.

:func:`partition` turns a dask array or dataframe (or NumPy, scipy.sparse, ``sparse.COO``,
pandas, a tuple of such aligned by rows, or a list of futures) into :class:`Partitions`:
each partition is computed (read once) or scattered once, then stays on its worker, cached in
memory or spilled by Dask to local disk. :meth:`dask_ps.PSModel.fit_partitions` runs a step
on every partition, on the worker that holds it, one task per worker thread, the partitions of
a task in a fresh order every epoch; a task sees :class:`Partition` handles, loads one
partition at a time, and keeps what must live across epochs in :attr:`Partition.state`.
"""

from .core import Partitions
from .placing import partition
from .worker import Partition, cache_budget

__all__ = ["Partition", "Partitions", "cache_budget", "partition"]
