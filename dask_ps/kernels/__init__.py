"""Numba kernels shared across the layers: hashing (:mod:`.hashing`) and the update rules'
per-coordinate steps (:mod:`.optim`), importable by the readers, the parameter state and the
algorithms alike (nothing here imports the rest of dask_ps)."""
