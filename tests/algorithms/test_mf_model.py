"""MatrixFactorization's fitted model: the attributes' dtypes and layout, and what a fit
holds in memory."""

import mmap

import numpy as np
import pandas as pd
import pytest

from dask_ps import MatrixFactorization

pytestmark = pytest.mark.timeout(300)


def toy(n_users=30, n_items=20, n=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user": rng.integers(0, n_users, n),
                         "item": rng.integers(0, n_items, n),
                         "rating": np.clip(np.round(3 + rng.normal(size=n)), 1, 5)})


@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_the_factors_and_biases_are_float64_for_every_solver(solver):
    """SGD's ``item_factors_`` and ``item_bias_`` were float32 (its item table's dtype)
    beside float64 user factors, while the docstring says float64: every solver's are now
    float64, C-contiguous, with the trained values (SGD's float32 rows widened exactly)."""
    df = toy()
    model = MatrixFactorization(solver=solver, n_components=4, max_iter=3, random_state=0,
                                client="local").fit(df)
    for name, shape in (("user_factors_", (30, 4)), ("item_factors_", (20, 4)),
                        ("user_bias_", (30,)), ("item_bias_", (20,))):
        value = getattr(model, name)
        assert (value.dtype, value.shape) == (np.float64, shape), name
        assert value.flags.c_contiguous, name
    assert isinstance(model.global_mean_, float)
    if solver == "sgd":  # trained in float32: widening loses nothing
        for value in (model.item_factors_, model.item_bias_, model.user_factors_):
            np.testing.assert_array_equal(value.astype(np.float32).astype(np.float64), value)
    assert model.predict(df).dtype == np.float64
    items, scores = model.recommend(model.user_ids_[0], n=3)
    assert scores.dtype == np.float64


#: Run in a fresh interpreter (an earlier test's freed heap could serve the table's
#: calloc with pages already written): a fit of ``train`` with a checkpoint URL, printing
#: the bytes of the table "user" in memory at the end of each epoch and after the fit, the
#: table's size, and whether the last checkpoint holds the users the fit ended with.
HELD_SCRIPT = """
import json, sys
import numpy as np, pandas as pd
from dask_ps import PSModel, partition
from dask_ps.algorithms import _mf_data
from dask_ps.algorithms._mf_train import train
from dask_ps.algorithms.epoch_loop import EpochLoop
from dask_ps.io.ids import IdMapping
from dask_ps.state._malloc import untouched_bytes

solver, n_users, rank, url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def written(keys, values, slots):
    whole = values if values.base is None else values.base
    return whole.nbytes - untouched_bytes([whole])

rng = np.random.default_rng(0)
n = 2 * n_users
df = pd.DataFrame({"user": rng.integers(0, n_users, n), "item": rng.integers(0, 50, n),
                   "rating": np.clip(np.round(3 + rng.normal(size=n)), 1, 5)})
users, items = IdMapping(np.unique(df.user)), IdMapping(np.unique(df.item))
frame = _mf_data.coded_frame(df.user.to_numpy(), df.item.to_numpy(),
                             df.rating.to_numpy(float), users, items)
model = PSModel("local")
held = []
loop = EpochLoop(model, "mf", 2, checkpoint=url, progress=False, callbacks=[
    lambda record: held.append(sum(model.map_shards("user", written)))])
with partition(frame, client="local", by="user") as raw:
    data = raw.map(_mf_data.to_part)
kw = dict(learning_rate=0.01, decay=1.0) if solver == "sgd" else dict(reg=0.1)
with data:
    factors, bias, _, _ = train(model, data, n_users=len(users), n_items=len(items), mu=3.0,
                                solver=solver, n_components=rank, max_iter=2, init_std=0.1,
                                loop=loop, **kw)
after = sum(model.map_shards("user", written))
size = model.table("user").pull().nbytes
model.close()
saved = PSModel.load("local", url)
rows = saved.pull("user", np.arange(len(users)))
saved.close()
same = bool(np.allclose(rows, np.column_stack([factors, bias]), rtol=1e-6, atol=1e-7))
print(json.dumps(dict(held=held, after=after, size=size, same=same)))
"""


# tables of 35-38 MB (above glibc's largest mmap threshold: fresh pages, untouched until
# written)
@pytest.mark.parametrize("solver, n_users, rank", [("sgd", 40_000, 255), ("als", 170_000, 31)])
def test_a_checkpointed_fit_holds_the_users_once_between_saves(tmp_path, solver, n_users,
                                                               rank):
    """With a checkpoint URL the users' rows lived twice for the whole fit: in the
    partitions' state and in the PS table "user" that carries them into checkpoints, written
    at the first save and kept (1M users, rank 64, SGD in process: peak RSS 1970 MiB against
    1598 without a checkpoint). The table is now emptied after each save and restore, its
    memory freed: no page of it is in memory during the epochs after a save, nor after the
    fit; the checkpoint still holds the users' rows (a resume goes on from them:
    test_mf_resume.py)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", HELD_SCRIPT, solver, str(n_users), str(rank),
                          str(tmp_path / "ck")], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["size"] > 2**25 and got["same"], got
    # (the first and last pages are shared with the allocator's headers)
    assert len(got["held"]) == 2 and max(got["held"] + [got["after"]]) <= 2 * mmap.PAGESIZE, got
