"""``python -m dask_ps._warm`` (run by ``make`` after installing) fills the numba caches, so
that a user's first fit in a fresh process loads its kernels instead of compiling them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

# the kernels a logistic-regression or matrix-factorization fit spends its time in (the FM,
# LDA and GBDT kernels are checked by the fresh-process fit below)
HOT = [("dask_ps/algorithms/_logistic_kernels.py", "logistic_grad"),
       ("dask_ps/algorithms/_logistic_kernels.py", "local_steps"),
       ("dask_ps/algorithms/_logistic_kernels.py", "_binary_ftrl_steps"),
       ("dask_ps/algorithms/_logistic_kernels.py", "decision"),
       ("dask_ps/algorithms/_mf_kernels.py", "sgd_sweep"),
       ("dask_ps/state/_kernels.py", "plan_keys"),
       ("dask_ps/state/_kernels.py", "gather_rows"),
       ("dask_ps/kernels/optim.py", "ftrl_step"),
       ("dask_ps/io/_libsvm_kernels.py", "parse_block")]

# a fresh process: tiny fits, then every dask_ps dispatcher's cache hits and misses
_FRESH_FIT = r"""
import json, sys, warnings
import numba, numpy as np, scipy.sparse as sp
warnings.simplefilter("ignore")
from dask_ps import (FactorizationMachineClassifier, GBDTClassifier, GBDTRegressor,
                     LatentDirichletAllocation, LogisticRegression, MatrixFactorization)
X = sp.random(120, 30, density=0.2, format="csr", random_state=1)
y = np.arange(120) % 2
for solver in ("ftrl", "lbfgs"):
    LogisticRegression(client="local", solver=solver, max_iter=2).fit(X, y).predict(X)
R = np.column_stack([np.arange(100) % 9, np.arange(100) % 7, 1 + np.arange(100) % 5])
MatrixFactorization(client="local", n_components=3, max_iter=2).fit(R.astype(float))
FactorizationMachineClassifier(client="local", n_components=3, max_iter=2).fit(X, y).predict(X)
FactorizationMachineClassifier(client="local", n_components=3, max_iter=2,
                               n_hashed_features=2**20).fit(X, y).predict(X)  # keyed
counts = sp.csr_matrix(np.random.default_rng(0).poisson(0.5, (50, 30)).astype(float))
LatentDirichletAllocation(client="local", n_components=4, max_iter=3).fit(counts).transform(counts)
D = np.random.default_rng(0).normal(size=(150, 6))
GBDTClassifier(client="local", n_estimators=3, min_samples_leaf=5).fit(D, D[:, 0] > 0).predict(D)
GBDTRegressor(client="local", n_estimators=3, min_samples_leaf=5).fit(D, D[:, 1]).predict(D)
out = {}
for name, mod in list(sys.modules.items()):
    if not name.startswith("dask_ps"):
        continue
    for attr, f in vars(mod).items():
        if isinstance(f, numba.core.registry.CPUDispatcher) and f.__module__ == name:
            out[f"{name}.{attr}"] = [sum(f.stats.cache_hits.values()),
                                     sum(f.stats.cache_misses.values())]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def warmed():
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run([sys.executable, "-m", "dask_ps._warm", "-q"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_warm_step_leaves_a_cache_index_for_every_hot_kernel(warmed):
    for path, fn in HOT:
        src = REPO / path
        cache = src.parent / "__pycache__"
        index = sorted(cache.glob(f"{src.stem}.{fn}-*.nbi"))
        assert index, f"no numba cache index for {path}:{fn} in {cache}"
        data = [p for p in cache.glob(f"{src.stem}.{fn}-*.nbc")]
        assert data, f"no compiled code cached for {path}:{fn} in {cache}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_fresh_process_fits_without_compiling_after_the_warm_step(warmed):
    proc = subprocess.run([sys.executable, "-c", _FRESH_FIT], cwd=REPO, env=warmed,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    used = {k: v for k, v in stats.items() if v[0] + v[1] > 0}
    assert any(k.endswith(".logistic_grad") for k in used), sorted(used)
    assert any(k.endswith(".sgd_sweep") for k in used), sorted(used)
    for module in ("_fm_kernels", "_lda_kernels", "_gbdt_kernels", "_gbdt_splits"):
        assert any(f".{module}." in k for k in used), (module, sorted(used))
    compiled = {k: v[1] for k, v in used.items() if v[1]}
    assert not compiled, f"compiled in the user's first fit (not warmed): {compiled}"


def test_make_warms_the_caches_after_installing():
    text = (REPO / "Makefile").read_text()
    assert "-m dask_ps._warm" in text
    assert Path(REPO / "dask_ps" / "_warm.py").exists()
