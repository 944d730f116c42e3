"""Numba kernels shared across the layers: hashing (:mod:`.hashing`), the update rules'
per-coordinate steps (:mod:`.optim`), sorts (:mod:`.sorting`) and memory hints
(:mod:`.memory`), importable by the readers, the parameter state and the algorithms alike
(nothing here imports the rest of dask_ps); :mod:`.compiled` says which of dask_ps's
kernels a process compiled (not loaded from their cache)."""
