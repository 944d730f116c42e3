"""``history_``'s ``time`` after a resume: the resumed epochs go on from the ``time`` of the
last epoch restored from the checkpoint (it restarted from the new fit's start, going back
at the resume point while ``epoch`` went on), in every family that resumes."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

import dask_ps

pytestmark = pytest.mark.timeout(300)

#: Seconds the first fit's callback sleeps after its epoch 1: its epoch 2 ends after them,
#: so that a resumed epoch's ``time`` counted from the new fit's start would go back.
PAUSE = 2.0

KINDS = ["lr", "lr_eval", "fm", "mf_sgd", "mf_als", "lda", "gbdt"]


def _fit(kind, client, ck, max_iter, **extra):
    """A seeded fit of ``kind`` for ``max_iter`` epochs (rounds, iterations) into checkpoint
    ``ck``, two epochs per checkpoint (so one job runs epochs 3-4 of a resumed fit)."""
    common = dict(random_state=0, client=client, progress=False, checkpoint=ck,
                  checkpoint_every=2, **extra)
    rng = np.random.default_rng(0)
    if kind in ("lr", "lr_eval", "fm"):
        X = sp.random(2000, 30, density=0.2, format="csr", random_state=1)
        y = (np.asarray(X.sum(axis=1)).ravel() > 3.0).astype(int)
        if kind == "fm":
            return dask_ps.FactorizationMachineClassifier(n_components=2, max_iter=max_iter,
                                                          **common).fit(X, y)
        est = dask_ps.LogisticRegression(max_iter=max_iter, **common)
        return est.fit(X, y, eval_set=[(X[:300], y[:300])] if kind == "lr_eval" else None)
    if kind == "lda":
        X = sp.random(200, 40, density=0.3, format="csr", random_state=1, dtype=np.float64)
        X.data = np.ceil(X.data * 5)
        return dask_ps.LatentDirichletAllocation(n_components=3, max_iter=max_iter,
                                                 **common).fit(X)
    if kind == "gbdt":
        X = rng.normal(size=(1000, 5))
        y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
        return dask_ps.GBDTClassifier(n_estimators=max_iter, max_leaf_nodes=4,
                                      **common).fit(X, y)
    users, items = rng.integers(0, 60, 3000), rng.integers(0, 40, 3000)
    R = np.column_stack([users, items, rng.integers(1, 6, 3000)]).astype(float)
    return dask_ps.MatrixFactorization(n_components=4, solver=kind.split("_")[1],
                                       max_iter=max_iter, **common).fit(R)


def _records(est) -> list[dict]:
    return [h for h in est.history_ if "event" not in h]


@pytest.mark.parametrize("kind", KINDS)
def test_a_resumed_fits_time_goes_on_from_the_restored_epochs(kind, client2, tmp_path):
    """Epochs 1-2 (the first fit's, restored) keep their times; epochs 3-4 (this fit's)
    go on from epoch 2's: ``time`` never goes back, each ``epoch_time`` fits between an
    epoch's end and the end of the one before (the restore of the checkpoint before epoch
    3 included), epochs of one job are back to back as before, and the resumed fit's
    epochs add no more than its own wall time."""
    ck = str(tmp_path / "ck")
    first = _fit(kind, client2, ck, 2,
                 callbacks=[lambda r: r["epoch"] == 1 and time.sleep(PAUSE)])
    before = [h["time"] for h in _records(first)]
    assert len(before) == 2 and before[1] >= PAUSE, before
    # a callback makes one job per epoch: LR's stochastic solvers run those anyway (their
    # n_iter_no_change rule looks at each epoch)
    per_epoch = kind.startswith("lr")
    heard: list[dict] = []
    t0 = time.perf_counter()
    resumed = _fit(kind, client2, ck, 4, resume=True,
                   **({"callbacks": [heard.append]} if per_epoch else {}))
    wall = time.perf_counter() - t0
    records = _records(resumed)
    times = [h["time"] for h in records]
    took = [h["epoch_time"] for h in records]
    assert [h["epoch"] for h in records] == [1, 2, 3, 4], records
    assert times[:2] == before  # restored as the first fit recorded them
    assert all(b > a for a, b in zip(times, times[1:])), times
    assert all(d >= t * (1 - 1e-9) for d, t in zip(np.diff(times), took[1:])), (times, took)
    assert 0 < times[3] - times[1] <= wall, (times, wall)
    if per_epoch:  # what the callbacks were given is what history_ holds
        assert [r["time"] for r in heard] == times[2:], (heard, times)
    else:  # epochs 3-4: one job (checkpoint_every=2), back to back
        np.testing.assert_allclose(times[3] - times[2], took[3], rtol=1e-6)
