"""A keyed factorization machine (2**20 columns or more, after hashing): sparse ``coef_`` and
``factors_`` holding the features training touched, never a dense array over the width.
Against the dense FM of the same rows on the same keys (a factor row starts at a draw of its
key, so only the same keys give the same fit), the margins without a cluster, the 2**24
case's memory and file, warm starts, files, checkpoints, online versions and the command
line."""

import os
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import compute_without_large_graph
from sklearn.datasets import load_svmlight_file

from dask_ps import FactorizationMachineClassifier, learn_online
from dask_ps.algorithms._fm_model import block_margins
from dask_ps.algorithms._logistic_data import hash_columns
from dask_ps.algorithms.fm import KEYED_FEATURES, FMState, fm_margins, fm_table
from dask_ps.saving import load_estimator, save_estimator

pytestmark = pytest.mark.timeout(300)

N_WIDE = 2**63 - 1  # the widest CSR matrix scipy holds


@pytest.fixture(scope="module")
def a9a(data):
    """The first 2000 rows of a9a (123 binary features), labels 0/1, and the rows of the
    test file a9a.t (some of them hold features those 2000 rows do not)."""
    X, y = load_svmlight_file(str(data / "lr_a9a" / "a9a"), n_features=123)
    Xt, _ = load_svmlight_file(str(data / "lr_a9a" / "a9a.t"), n_features=123)
    return X[:2000].tocsr(), (y[:2000] > 0).astype(int), Xt.tocsr()


def _pair(a9a, how):
    """``(keyed X, parameters, dense X, y)``: the same rows (a9a's 2000, then a9a.t's) on
    the same keys, the first as a keyed model sees them (2**63 - 1 columns, or hashed into
    2**20 buckets), the second on just enough columns for a dense model."""
    X, y, Xt = a9a
    X = sp.vstack([X, Xt], format="csr")
    if how == "wide":
        Xk = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], N_WIDE))
        return Xk, {}, X, y
    Xh = hash_columns(X, KEYED_FEATURES)
    narrow = Xh[:, :Xh.indices.max() + 1]
    assert narrow.shape[1] < KEYED_FEATURES  # a dense model of the same buckets
    return X, dict(n_hashed_features=KEYED_FEATURES), narrow, y


def _assert_same_model(keyed, dense, Xk, Xd):
    """Sparse and dense ``coef_`` and ``factors_`` hold the same values; the predictions of
    the rows of ``Xk`` and ``Xd`` (columns never trained on among them) agree."""
    d = Xd.shape[1]
    assert sp.isspmatrix_csr(keyed.coef_) and keyed.coef_.shape == (1, keyed.coef_.shape[1])
    assert keyed.coef_.shape[1] >= KEYED_FEATURES
    assert sp.isspmatrix_csc(keyed.factors_) and keyed.factors_.shape[1] == dense.n_components
    assert isinstance(dense.coef_, np.ndarray) and isinstance(dense.factors_, np.ndarray)
    assert keyed.coef_.nnz == np.count_nonzero(dense.coef_)
    assert keyed.factors_.nnz == np.count_nonzero(dense.factors_)
    np.testing.assert_array_equal(keyed.coef_[:, :d].toarray(), dense.coef_)
    np.testing.assert_array_equal(keyed.factors_[:d].toarray(), dense.factors_)
    np.testing.assert_array_equal(keyed.intercept_, dense.intercept_)
    np.testing.assert_allclose(keyed.predict_proba(Xk), dense.predict_proba(Xd),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("how", ["wide", "hashed"])
def test_keyed_fit_equals_the_dense_fit_of_the_same_keys(client2, a9a, how):
    import dask.array as da

    Xk, kw, Xd, y = _pair(a9a, how)
    common = dict(n_components=4, max_iter=3, random_state=0, checkpoint=None, client=client2)
    keyed = FactorizationMachineClassifier(**common, **kw).fit(Xk[:2000], y)
    dense = FactorizationMachineClassifier(**common).fit(Xd[:2000], y)
    _assert_same_model(keyed, dense, Xk, Xd)
    assert [h["loss"] for h in keyed.history_] == [h["loss"] for h in dense.history_]
    assert keyed.factors_.nnz > 100 and keyed.score(Xk[:2000], y) > 0.75
    dX = da.from_array(Xk, chunks=(700, -1), asarray=False)
    np.testing.assert_allclose(keyed.predict_proba(dX).compute(), keyed.predict_proba(Xk),
                               rtol=1e-12, atol=1e-12)


def test_keyed_margins_equal_the_dense_ones():
    """No cluster: sparse coef_ and factors_ of a model with most rows zero (rows held by
    one of them only, columns of X held by neither) give the dense margins."""
    rng = np.random.default_rng(0)
    n, k = 5000, 3
    w, V = rng.normal(size=n), rng.normal(size=(n, k))
    w[rng.random(n) < 0.9], V[rng.random(n) < 0.8] = 0.0, 0.0
    X = sp.random(200, n, density=0.01, random_state=1, format="csr")
    want = fm_margins(X, w, 0.7, V)
    table = fm_table(sp.csr_matrix(w[None]), np.array([0.7]), sp.csc_matrix(V))
    assert table.keys.shape[0] < n // 2 and table.W.shape[1] == k + 1  # keyed: touched rows
    np.testing.assert_allclose(block_margins(X, table, 0.7, None), want, rtol=1e-12,
                               atol=1e-12)
    # hashed columns: the dense twin reads the hashed X
    h = 2**12
    Xh = hash_columns(X, h)
    wide = fm_table(sp.csr_matrix(w[None, :h]), np.array([0.7]), sp.csc_matrix(V[:h]))
    np.testing.assert_allclose(block_margins(X, wide, 0.7, h), fm_margins(Xh, w[:h], 0.7, V[:h]),
                               rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def criteo(data):
    return str(data / "ctr_criteo" / "criteo_sample.txt")


@pytest.mark.parametrize("how", ["n_hashed_features", "read_ctr"])
def test_a_2_24_hashed_fm_is_kilobytes_not_gibibytes(client2, criteo, tmp_path, how):
    """200 real click rows hashed into 2**24 columns, n_components=8: dense, coef_ and
    factors_ were 1.13 GiB, and the saved file as much. Keyed: at most the touched buckets, a
    file of under 300 bytes per touched bucket (0.7 MB here), and the driver never holds
    anything near a dense array (tracemalloc's peak)."""
    from dask_ps.io import read_ctr

    if how == "n_hashed_features":  # the reader's 2**20 columns, hashed by the estimator
        X, y = read_ctr(criteo, label="label")
        kw = dict(n_hashed_features=2**24)
        touched = np.unique(hash_columns(X.compute(), 2**24).indices)
    else:  # hashed into 2**24 columns by the reader
        X, y = read_ctr(criteo, label="label", n_features=2**24)
        kw = {}
        touched = np.unique(X.compute().indices)
    path = str(tmp_path / "fm.npz")
    tracemalloc.start()
    try:
        fm = FactorizationMachineClassifier(n_components=8, max_iter=2, random_state=0,
                                            checkpoint=None, client=client2, **kw).fit(X, y)
        p = fm.predict_proba(X).compute()
        save_estimator(fm, path)
        back, _ = load_estimator(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fm.coef_.shape == (1, 2**24) and fm.factors_.shape == (2**24, 8)
    assert sp.isspmatrix_csr(fm.coef_) and sp.isspmatrix_csc(fm.factors_)
    assert 0 < fm.coef_.nnz <= touched.shape[0] and fm.factors_.nnz <= 8 * touched.shape[0]
    assert np.isin(fm.coef_.indices, touched).all()
    assert np.isin(fm.factors_.indices, touched).all()
    # per touched key: [w, v] (72 B + indices) and the warm start's state (~180 B); the
    # dense file was 1.13 GiB
    size = os.path.getsize(path)
    assert size < 2**20 and size < 300 * touched.shape[0] + 20_000, size
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB"  # a dense factors_ alone: 1 GiB
    np.testing.assert_array_equal(back.predict_proba(X).compute(), p)


def test_keyed_warm_start_and_partial_fit_continue_like_the_dense_ones(client2, a9a):
    Xk, kw, Xd, y = _pair(a9a, "hashed")
    common = dict(n_components=4, max_iter=2, random_state=0, checkpoint=None, client=client2,
                  warm_start=True)
    keyed = FactorizationMachineClassifier(**common, **kw).fit(Xk[:2000], y)
    dense = FactorizationMachineClassifier(**common).fit(Xd[:2000], y)
    keyed.set_params(max_iter=1).fit(Xk[:2000], y)
    dense.set_params(max_iter=1).fit(Xd[:2000], y)
    loss = [h["loss"] for h in keyed.history_]
    assert len(loss) == 3 and loss[2] < loss[1]  # went on from epoch 2 (afresh: ~ loss[0])
    _assert_same_model(keyed, dense, Xk, Xd)
    keyed.partial_fit(Xk[:2000], y)
    dense.partial_fit(Xd[:2000], y)
    assert len(keyed.history_) == 4 and keyed.history_[3]["loss"] < loss[2]
    _assert_same_model(keyed, dense, Xk, Xd)


def test_keyed_model_saves_loads_resumes_and_versions(client2, a9a, tmp_path):
    """The estimator file (CSR coef_, CSC factors_, the keyed state) and a warm start from
    it; a fit resumed from its zarr checkpoint at epoch 2 equals the straight 4-epoch fit;
    online versions of a keyed model stay keyed and small."""
    X, y, _ = a9a
    kw = dict(n_components=4, random_state=0, client=client2, n_hashed_features=2**22)
    full = FactorizationMachineClassifier(max_iter=4, checkpoint=str(tmp_path / "a"),
                                          **kw).fit(X, y)
    FactorizationMachineClassifier(max_iter=2, checkpoint=str(tmp_path / "b"), **kw).fit(X, y)
    resumed = FactorizationMachineClassifier(max_iter=4, checkpoint=str(tmp_path / "b"),
                                             resume=True, **kw).fit(X, y)
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3, 4]
    np.testing.assert_allclose(resumed.predict_proba(X), full.predict_proba(X), atol=1e-12)
    assert (resumed.factors_ != full.factors_).nnz == 0

    save_estimator(full, str(tmp_path / "m.npz"))
    assert os.path.getsize(tmp_path / "m.npz") < 100_000  # dense: 2**22 x 5 x 8 B = 160 MiB
    loaded, _ = load_estimator(str(tmp_path / "m.npz"))
    assert sp.isspmatrix_csr(loaded.coef_) and sp.isspmatrix_csc(loaded.factors_)
    assert (loaded.coef_ != full.coef_).nnz == 0 and (loaded.factors_ != full.factors_).nnz == 0
    np.testing.assert_array_equal(loaded.predict_proba(X), full.predict_proba(X))
    assert isinstance(loaded._ps_state_, FMState)
    loaded.set_params(client=client2)
    loaded.partial_fit(X, y)  # warm start from the loaded keyed state
    full.partial_fit(X, y)
    np.testing.assert_allclose(loaded.predict_proba(X), full.predict_proba(X), atol=1e-12)

    batches = ((X[i:i + 500], y[i:i + 500]) for i in range(0, 2000, 500))
    online = learn_online(FactorizationMachineClassifier(checkpoint=None, **kw), batches,
                          classes=[0, 1], version_every=2, versions=str(tmp_path / "v"))
    version, _ = load_estimator(online.history_[-1]["version"])
    assert sp.isspmatrix_csc(version.factors_) and len(online.history_) == 4
    np.testing.assert_array_equal(version.predict_proba(X), online.predict_proba(X))


def test_predicting_a_dask_array_sends_a_large_keyed_model_once(client2, a9a):
    """A keyed model of 2 * 10^5 keys (14 MiB of [w, v] rows) predicts a dask array without
    Dask's "Sending large graph" warning: its keys and rows go to the workers once, as a
    future, not in every task."""
    import dask.array as da

    X, y, _ = a9a
    fm = FactorizationMachineClassifier(n_components=8, max_iter=1, random_state=0,
                                        checkpoint=None, client=client2,
                                        n_hashed_features=2**24).fit(X, y)
    rng = np.random.default_rng(0)
    keys = np.sort(rng.choice(2**24, 200_000, replace=False))
    fm.coef_ = sp.csr_matrix((rng.normal(size=keys.shape[0]), keys, [0, keys.shape[0]]),
                             shape=(1, 2**24))
    fm.factors_ = sp.csc_matrix((0.1 * rng.normal(size=8 * keys.shape[0]), np.tile(keys, 8),
                                 np.arange(9) * keys.shape[0]), shape=(2**24, 8))
    dX = da.from_array(X, chunks=(500, -1), asarray=False)
    got = compute_without_large_graph(fm.decision_function(dX))
    np.testing.assert_allclose(got, fm.decision_function(X), rtol=1e-12)


def test_command_line_trains_evaluates_and_exports_a_keyed_fm(client2, data, tmp_path,
                                                              capsys):
    """``dask-ps train fm`` of a click table hashed into 2**20 columns saves a keyed model
    (a file of 2 MB, was over 40 MiB); ``evaluate`` scores it from the file; ``export`` writes the
    rows of the features it holds."""
    import json

    import pandas as pd

    from dask_ps.cli import main

    path = tmp_path / "scheduler.json"
    path.write_text(json.dumps({"type": "Scheduler", "address": client2.scheduler.address}))
    train = str(data / "ctr_criteo" / "train.tiny.csv")
    model = str(tmp_path / "fm.npz")
    assert main(["train", "fm", "--format", "csv", "--train", train, "--test", train,
                 "--exclude", "Id", "--hash-features", str(2**20), "--n-components", "4",
                 "--max-iter", "2", "--seed", "0", "--scheduler-file", str(path),
                 "--save", model]) == 0
    scored = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("test: AUC"))
    # ~2 MB for its 2000 rows' keys (and their warm-start state); dense coef_ and factors_
    # alone were 40 MiB
    assert float(scored.split()[2]) > 0.6 and os.path.getsize(model) < 4 * 2**20
    est, _ = load_estimator(model)
    assert sp.isspmatrix_csr(est.coef_) and est.coef_.shape == (1, 2**20)
    assert main(["evaluate", model, "--test", train]) == 0
    assert scored in capsys.readouterr().out.splitlines()  # the same scores, from the file
    assert main(["export", model, str(tmp_path / "out"), "--format", "csv"]) == 0
    coef = pd.read_csv(tmp_path / "out" / "coef.csv")
    factors = pd.read_csv(tmp_path / "out" / "factors.csv")
    np.testing.assert_array_equal(coef["feature"], est.coef_.indices)
    np.testing.assert_array_equal(coef["coef"], est.coef_.data)
    held = np.unique(est.factors_.indices)
    np.testing.assert_array_equal(factors["feature"], held)
    np.testing.assert_allclose(factors[["f0", "f1", "f2", "f3"]].to_numpy(),
                               est.factors_[held].toarray(), rtol=1e-15)
