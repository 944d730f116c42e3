"""The stochastic solvers' local steps and their averaging on the servers."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

from dask_ps import LogisticRegression, PSModel, partition
from dask_ps.algorithms._logistic_kernels import local_steps, rows_loss
from dask_ps.algorithms._stochastic import Rule, make_blocks
from dask_ps.algorithms.logistic import train
from dask_ps.state.optimizers import FTRL, SGD, AdaGrad

RULES = {"sgd": SGD(0.05), "adagrad": AdaGrad(0.1, eps=1e-10),
         "ftrl": FTRL(alpha=0.1, beta=1.0, l1=0.01, l2=0.0)}


def reference_steps(X, Y, order, batch, optimizer, l2, w, slots):
    """Slow twin of ``local_steps``: dense NumPy gradients, the server's optimizer step."""
    loss = 0.0
    for start in range(0, len(order), batch):
        rows = order[start:start + batch]
        Xb = X[rows].toarray()
        z = Xb @ w[:-1] + w[-1]
        loss += float(np.sum(np.logaddexp(0, z) - Y[rows] * z))
        r = 1 / (1 + np.exp(-z)) - Y[rows]
        g = np.vstack([Xb.T @ r, r.sum(axis=0, keepdims=True)]) / len(rows)
        touched = np.append(np.flatnonzero(np.abs(Xb).sum(axis=0)), w.shape[0] - 1)
        g = g[touched]
        g[:-1] += l2 * w[touched[:-1]]
        optimizer.step(w, slots, touched, g)
    return loss


@pytest.mark.parametrize("solver", sorted(RULES))
@pytest.mark.parametrize("batch", [1, 7, 40])
def test_local_steps_equal_server_steps(solver, batch):
    """A step of the local kernel equals the server-side rule given that step's gradient."""
    rng = np.random.default_rng(0)
    X = sp.random(40, 12, density=0.3, format="csr", random_state=1)
    Y = (rng.random((40, 2)) < 0.4).astype(float)
    optimizer = RULES[solver]
    rule = Rule(optimizer, 2)
    order = rng.permutation(40)
    state = rng.normal(size=(13, rule.width)) * 0.1
    if solver != "sgd":
        state[:, 2:] = np.abs(state[:, 2:])  # accumulators and n are >= 0
    buf, w, s1, s2 = rule.unpack(state)
    names = {"sgd": [], "adagrad": ["accumulator"], "ftrl": ["z", "n"]}[solver]
    ref_w, ref_slots = w.copy(), dict(zip(names, [s1.copy(), s2.copy()]))
    loss = local_steps(X.indptr, X.indices, X.data, Y, np.zeros(0), order, batch, rule.code,
                       rule.hyper, 0.01, True, w, s1, s2, np.zeros((13, 2)),
                       np.empty(13, np.int64), np.full(13, -1, np.int64))
    ref_loss = reference_steps(X, Y, order, batch, optimizer, 0.01, ref_w, ref_slots)
    assert loss == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)
    for got, name in zip([s1, s2], names):
        np.testing.assert_allclose(got, ref_slots[name], rtol=1e-10, atol=1e-12)
    assert rows_loss(X.indptr, X.indices, X.data, Y, np.zeros(0), order, w) > 0


def test_blocks_index_columns_locally_and_hold_out_rows():
    X = sp.random(100, 50, density=0.1, format="csr", random_state=2)
    Y = np.ones((100, 1))
    for bias_key in (50, 2**40):  # dense marks, and hashing for a huge column range
        blocks = make_blocks(X, Y, 3, bias_key, 0.2, 0)
        assert sum(b.Y.shape[0] for b in blocks) == 100
        held = sum(b.held_out.shape[0] for b in blocks)
        assert 5 <= held <= 40
        for b in blocks:
            assert (np.diff(b.keys) > 0).all() and b.keys[-1] == bias_key
            assert b.train.shape[0] + b.held_out.shape[0] == b.Y.shape[0]
        rebuilt = sp.vstack([sp.csr_matrix((b.data, b.keys[b.indices], b.indptr),
                                           shape=(b.Y.shape[0], bias_key))[:, :50]
                             for b in blocks])
        assert (rebuilt != X).nnz == 0


def ctr_like(n, n_features, nnz, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(n_features)[rng.zipf(1.3, size=n * nnz) % n_features]
    X = sp.csr_matrix((np.ones(n * nnz), idx, np.arange(0, n * nnz + 1, nnz)),
                      shape=(n, n_features))
    X.sum_duplicates()
    w = rng.normal(0, 0.5, n_features)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w - 1.0)))).astype(int)
    return X, y


def test_many_tasks_train_about_as_well_as_one():
    """Eight tasks: the servers' per-row mean keeps the frequent rows from overshooting.

    Measured: one epoch, test AUC 0.876 with one task, 0.862 with eight, and 0.811 with eight
    when the servers summed the tasks' changes instead.
    """
    X, y = ctr_like(48_000, 2**14, 20)
    Xt, yt, X, y = X[40_000:], y[40_000:], X[:40_000], y[:40_000]
    aucs = []
    for n_tasks in (1, 8):
        with PSModel("local") as model:
            data = partition((X, y[:, None].astype(float)), client="local",
                             n_partitions=n_tasks)
            W = train(model, data, n_features=2**14, n_outputs=1, max_iter=1, batch_size=1,
                      learning_rate=0.1)[0]
        aucs.append(roc_auc_score(yt, Xt @ W[:-1, 0] + W[-1, 0]))
    assert aucs[0] > 0.85
    assert aucs[1] >= aucs[0] - 0.03


def test_early_stopping_watches_the_validation_loss(data):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(data / "lr_a9a" / "a9a"), n_features=123)
    model = LogisticRegression(max_iter=50, early_stopping=True, n_iter_no_change=2, tol=1.0,
                               client="local", random_state=0).fit(X, y)
    # no epoch improves by 1.0: the best is the first, and two more end the fit
    assert model.n_iter_[0] == 3 and len(model.history_) == 3
    assert all(0 < h["validation_loss"] < 0.7 and h["time"] > 0 for h in model.history_)
    model = LogisticRegression(max_iter=50, early_stopping=True, n_iter_no_change=2,
                               tol=1e-4, client="local", random_state=0).fit(X, y)
    assert 3 <= model.n_iter_[0] < 50
    with pytest.raises(ValueError, match="validation_fraction"):  # scikit-learn's check
        LogisticRegression(validation_fraction=1.5, client="local").fit(X, y)


@pytest.mark.parametrize("touched", [40, 90])
@pytest.mark.parametrize("piece", [7, 30, 64, 10**6])
def test_gather_rows_in_pieces_gives_the_whole_table(monkeypatch, piece, touched):
    """The end of a fit gathers a dense table from its shards in pieces of GATHER_ROWS rows
    (a worker near its memory limit never copies its whole shard at once); whatever the
    piece size, and whether a piece comes as its touched rows or whole (most rows touched),
    every touched row comes back where it belongs and untouched rows are zero."""
    from dask_ps.algorithms import _stochastic

    monkeypatch.setattr(_stochastic, "GATHER_ROWS", piece)
    rng = np.random.default_rng(0)
    with PSModel("local", n_shards=3) as model:
        model.add_table("w", (100, 3))
        keys = rng.choice(100, touched, replace=False)
        values = rng.normal(size=(touched, 3))
        model.push("w", keys, values)
        got = _stochastic.gather_rows(model.table("w"), 2)
    want = np.zeros((100, 2))
    want[keys] = values[:, :2].astype(np.float32)
    np.testing.assert_array_equal(got, want)
