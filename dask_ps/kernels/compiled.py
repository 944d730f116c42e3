"""Which of dask_ps's numba kernels this process compiled: :func:`compiled_kernels`.

Every kernel is a module-level ``numba.njit(cache=True)`` dispatcher of a ``dask_ps`` module.
A dispatcher asked for a signature it does not hold yet first tries its on-disk cache (a hit:
loaded in milliseconds) and, on a miss, compiles (seconds; numba counts it in
``dispatcher.stats.cache_misses``). The misses of a process before and after a step, e.g.
on every worker around ``dask-ps train``'s read (:func:`compiled_kernels` through
``Client.run``), say whether that step compiled kernels, which on a cold cache (a fresh
clone, a changed source file) takes most of a small read's time.
"""

from __future__ import annotations

import sys

__all__ = ["compiled_kernels"]


def compiled_kernels() -> dict[str, int]:
    """The dask_ps kernels this process has compiled so far (cache misses), by name.

    Only modules already imported are looked at, and numba is not imported when no module
    has imported it (then nothing was compiled): every imported dask_ps module's attributes
    are checked, about 2.4 ms in a process holding ~2,300 modules.

    Returns
    -------
    dict of str to int
        ``"dask_ps.io._libsvm_kernels.parse_block"``: the number of signatures compiled
        (not loaded from the on-disk cache) in this process; kernels never compiled here
        are left out (empty: none, or ``NUMBA_DISABLE_JIT``, under which nothing compiles).
    """
    if "numba" not in sys.modules:
        return {}
    from numba.core.registry import CPUDispatcher

    out = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "dask_ps" or name.startswith("dask_ps.")):
            continue
        for attr, f in list(vars(module).items()):  # (type(), not isinstance: 20x faster)
            if type(f) is CPUDispatcher and f.__module__ == name:
                misses = sum(f.stats.cache_misses.values())
                if misses:
                    out[f"{name}.{attr}"] = misses
    return out
