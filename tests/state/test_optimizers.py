"""Server-side update rules against NumPy references, on shards in-process and on a cluster."""

import numpy as np
import pytest

import dask_ps
from dask_ps.state.optimizers import get_optimizer


def ref_sgd(w, state, g, lr=0.01):
    return w - lr * g


def ref_adagrad(w, state, g, lr=0.1, eps=1e-10):
    state["acc"] = state.get("acc", np.zeros_like(w)) + g * g
    return w - lr * g / (np.sqrt(state["acc"]) + eps)


def ref_adam(w, state, g, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
    m = state.get("m", np.zeros_like(w))
    v = state.get("v", np.zeros_like(w))
    t = state.get("t", np.zeros(w.shape[0])) + (np.abs(g).sum(axis=1) >= 0)  # touched rows
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    state.update(m=m, v=v, t=t)
    c1 = (1 - b1 ** t)[:, None]
    c2 = (1 - b2 ** t)[:, None]
    return w - lr * (m / c1) / (np.sqrt(v / c2) + eps)


def ref_ftrl(w, state, g, alpha=0.05, beta=1.0, l1=1.0, l2=1.0):
    z = state.get("z", np.zeros_like(w))
    n = state.get("n", np.zeros_like(w))
    sigma = (np.sqrt(n + g * g) - np.sqrt(n)) / alpha
    z = z + g - sigma * w
    n = n + g * g
    state.update(z=z, n=n)
    w = -(z - np.sign(z) * l1) / ((beta + np.sqrt(n)) / alpha + l2)
    return np.where(np.abs(z) <= l1, 0.0, w)


REFS = {"sgd": ref_sgd, "adagrad": ref_adagrad, "adam": ref_adam, "ftrl": ref_ftrl}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(REFS))
@pytest.mark.parametrize("partitioner", ["range", "hash"])
def test_optimizer_matches_numpy_reference(name, partitioner, any_client):
    """Every push touches all rows (so Adam's lazy step counts equal the dense reference)."""
    n_rows, ncols, steps = 40, 3, 25
    rng = np.random.default_rng(1)
    keys = np.arange(n_rows) * (2**40 if partitioner == "hash" else 1)
    with dask_ps.PSModel(any_client, n_shards=3) as model:
        model.add_table("w", shape=(n_rows, ncols), dtype="float64", partitioner=partitioner,
                        optimizer=name)
        w, state = np.zeros((n_rows, ncols)), {}
        for _ in range(steps):
            g = rng.normal(size=(n_rows, ncols)) * 3
            # pushed as two halves of a repeated-key batch: the client must merge them
            perm = rng.permutation(n_rows)
            half = g / 2
            model.push("w", np.concatenate([keys[perm], keys]),
                       np.concatenate([half[perm], half]))
            w = REFS[name](w, state, g)
        np.testing.assert_allclose(model.pull("w", keys), w, rtol=1e-6, atol=1e-9)


def test_ftrl_produces_exact_zeros_with_l1():
    with dask_ps.PSModel(n_shards=2) as model:
        model.add_table("w", shape=(100,), optimizer=dask_ps.FTRL(alpha=0.1, l1=1.0))
        g = np.linspace(-3, 3, 100)
        model.push("w", np.arange(100), g)
        w = model.pull("w")
    # after one step z = g: a weight is exactly zero iff |g| <= l1
    np.testing.assert_array_equal(w == 0, np.abs(g.astype(np.float32)) <= 1.0)
    assert 0 < (w == 0).sum() < 100


def test_unknown_optimizer_lists_valid_names():
    with pytest.raises(ValueError, match="valid names are .*'adagrad'.*'ftrl'"):
        get_optimizer("rmsprop")


def test_float_optimizer_on_int_table_is_refused():
    with dask_ps.PSModel() as model, pytest.raises(ValueError, match="table 'c'.*float"):
        model.add_table("c", shape=(4,), dtype="int64", optimizer="adam")


def _average_task(ps, item):
    keys, delta = item
    ps.pull("m", keys)
    ps.push("m", keys, np.column_stack([delta, np.ones(len(keys))]))
    ps.clock()


@pytest.mark.timeout(120)
def test_average_moves_each_row_by_the_mean_of_its_pushers(any_client):
    """Rows pushed by one task take its whole delta; rows pushed by several, their mean."""
    with dask_ps.PSModel(any_client, n_shards=2) as model:
        model.add_table("m", shape=(6, 3), dtype="float64", optimizer="average")
        items = [(np.array([0, 1, 2]), np.full((3, 2), 3.0)),
                 (np.array([2, 3]), np.full((2, 2), 6.0)),
                 (np.array([2, 3, 5]), np.full((3, 2), 9.0))]
        model.run(_average_task, items, consistency="bsp")
        got = model.pull("m")
    np.testing.assert_allclose(got[:, :2], [[3, 3], [3, 3], [6, 6], [7.5, 7.5], [0, 0], [9, 9]])
    np.testing.assert_allclose(got[:, 2], [1, 1, 3, 2, 0, 1])  # how often each row moved


def test_average_needs_a_count_column():
    with dask_ps.PSModel("local") as model, pytest.raises(ValueError, match="count column"):
        model.add_table("m", shape=(6,), dtype="float64", optimizer="average")


@pytest.mark.parametrize("name", ["add", "sgd", "adagrad", "adam", "ftrl", "average"])
@pytest.mark.parametrize("ncols", [1, 3])
def test_step_on_rows_as_a_bitmap_equals_step_on_the_rows(name, ncols):
    from dask_ps.state import _kernels
    from dask_ps.state.wire_forms import RowBits

    rng = np.random.default_rng(ncols)
    opt = get_optimizer(name)
    rows = np.unique(np.concatenate([np.arange(64, 320), rng.integers(0, 1000, 300)]))
    g = rng.normal(size=(len(rows), ncols))
    if name == "average":
        g[:, -1] = rng.integers(1, 4, len(rows))
    bits = RowBits(_kernels.rows_to_bits(rows, 16), len(rows))
    start = np.tile(np.arange(1000.0)[:, None], (1, ncols))
    out = []
    for use_bits in (False, True):
        w = start.copy()
        slots = {k: np.zeros((1000, width), dt)
                 for k, (width, dt) in opt.slot_layout(ncols, w.dtype).items()}
        opt.init_slots(slots, slice(None))
        for _ in range(3):
            if use_bits:
                opt.step_bits(w, slots, bits, g)
            else:
                opt.step(w, slots, rows, g)
        out.append(w)
    np.testing.assert_array_equal(out[1], out[0])
    assert not np.array_equal(out[0], start)  # the steps did move the rows
