"""LogisticRegression with 64-bit feature keys (a wide model): weights in hashed PS tables,
``coef_`` sparse; against the same data remapped onto a narrow dense space."""

import numpy as np
import pytest
import scipy.sparse as sp

import dask_ps
from dask_ps.algorithms import LogisticRegression
from dask_ps.algorithms._logistic_data import WIDE_FEATURES, KeyedWeights

pytestmark = pytest.mark.timeout(300)

N_WIDE = 2**63 - 1  # the widest CSR matrix scipy holds: keys in [0, 2**63 - 1)


def _pair(n=3000, d=300, nnz=6, seed=0, n_classes=2):
    """The same rows twice: on columns [0, d) and on d sorted random keys in [2**33, 2**63
    - 1) (a monotone map keeps every block's local column order), and labels."""
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.integers(0, d, (n, nnz)), axis=1)
    Xn = sp.csr_matrix((rng.random(n * nnz).astype(np.float32), cols.ravel(),
                        np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    Xn.sum_duplicates()
    z = Xn @ rng.normal(size=(d, n_classes)) + rng.normal(size=(n, n_classes))
    y = z.argmax(axis=1) if n_classes > 2 else (z[:, 0] > np.median(z[:, 0])).astype(int)
    keys = np.sort(rng.choice(2**62 - 2**33, d, replace=False) + 2**33) * 2
    assert keys[-1] < N_WIDE
    Xw = sp.csr_matrix((Xn.data, keys[Xn.indices], Xn.indptr), shape=(n, N_WIDE))
    return Xn, Xw, y, keys


@pytest.mark.parametrize("kw", [dict(solver="ftrl"), dict(solver="adagrad"),
                                dict(solver="sgd"), dict(solver="ftrl", step_on="server"),
                                dict(solver="ftrl", penalty="l1", C=0.05)])
def test_wide_fit_equals_the_narrow_fit_of_the_same_data(client2, kw):
    Xn, Xw, y, keys = _pair()
    common = dict(max_iter=3, random_state=0, checkpoint=None, table_dtype="float64",
                  client=client2, **kw)
    narrow = LogisticRegression(**common).fit(Xn, y)
    wide = LogisticRegression(**common).fit(Xw, y)
    assert sp.isspmatrix_csr(wide.coef_) and wide.coef_.shape == (1, N_WIDE)
    assert wide.coef_.dtype == np.float64 and wide.coef_.indices.dtype == np.int64
    assert wide.n_features_in_ == N_WIDE
    dense = narrow.coef_[0]
    np.testing.assert_array_equal(wide.coef_.indices, keys[np.flatnonzero(dense)])
    np.testing.assert_allclose(wide.coef_.data, dense[dense != 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wide.intercept_, narrow.intercept_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wide.predict_proba(Xw), narrow.predict_proba(Xn),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose([h["loss"] for h in wide.history_],
                               [h["loss"] for h in narrow.history_], rtol=1e-10)


def test_wide_float32_table_predicts_as_the_float64_one(client2):
    """The wide default table dtype (float32, memory per key) changes the weights by its
    rounding only."""
    Xn, Xw, y, _ = _pair()
    common = dict(max_iter=3, random_state=0, checkpoint=None, client=client2)
    narrow = LogisticRegression(**common).fit(Xn, y)
    wide = LogisticRegression(**common).fit(Xw, y)  # table_dtype: float32 by default
    np.testing.assert_allclose(wide.predict_proba(Xw), narrow.predict_proba(Xn), atol=1e-4)
    assert np.abs(wide.predict_proba(Xw) - narrow.predict_proba(Xn)).max() > 0  # not float64


def test_wide_multiclass_and_dask_input(client2):
    import dask.array as da

    Xn, Xw, y, _ = _pair(n_classes=3)
    common = dict(max_iter=2, random_state=0, checkpoint=None, table_dtype="float64",
                  client=client2)
    narrow = LogisticRegression(**common).fit(Xn, y)
    wide = LogisticRegression(**common).fit(Xw, y)
    assert wide.coef_.shape == (3, N_WIDE)
    np.testing.assert_allclose(wide.predict_proba(Xw), narrow.predict_proba(Xn), atol=1e-12)
    dX = da.from_array(Xw, chunks=(1000, -1), asarray=False)
    np.testing.assert_allclose(wide.predict_proba(dX).compute(), wide.predict_proba(Xw),
                               atol=1e-12)
    np.testing.assert_array_equal(wide.predict(dX).compute(), narrow.predict(Xn))


def test_wide_partial_fit_continues_like_the_narrow_one(client2):
    Xn, Xw, y, _ = _pair()
    common = dict(random_state=0, checkpoint=None, table_dtype="float64", client=client2)
    narrow, wide = LogisticRegression(**common), LogisticRegression(**common)
    for _ in range(2):
        narrow.partial_fit(Xn, y, classes=[0, 1])
        wide.partial_fit(Xw, y, classes=[0, 1])
    np.testing.assert_allclose(wide.predict_proba(Xw), narrow.predict_proba(Xn), atol=1e-12)
    assert len(wide.history_) == 2


def test_wide_model_saves_loads_and_resumes(client2, tmp_path):
    """Estimator file round trip (sparse coef_, the keyed PS state) and the zarr checkpoint of
    the hashed table: a fit resumed from epoch 2 equals the straight 4-epoch fit."""
    from dask_ps.saving import load_estimator, save_estimator

    _, Xw, y, _ = _pair()
    kw = dict(random_state=0, table_dtype="float64", client=client2, solver="adagrad")
    full = LogisticRegression(max_iter=4, checkpoint=str(tmp_path / "a"), **kw).fit(Xw, y)
    LogisticRegression(max_iter=2, checkpoint=str(tmp_path / "b"), **kw).fit(Xw, y)
    resumed = LogisticRegression(max_iter=4, checkpoint=str(tmp_path / "b"), resume=True,
                                 **kw).fit(Xw, y)
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3, 4]
    np.testing.assert_allclose(resumed.predict_proba(Xw), full.predict_proba(Xw), atol=1e-12)

    save_estimator(full, str(tmp_path / "m.npz"))
    loaded, _ = load_estimator(str(tmp_path / "m.npz"))
    assert sp.isspmatrix_csr(loaded.coef_) and loaded.coef_.shape == (1, N_WIDE)
    assert (loaded.coef_ != full.coef_).nnz == 0
    np.testing.assert_array_equal(loaded.predict_proba(Xw), full.predict_proba(Xw))
    assert isinstance(loaded._ps_state_.W, KeyedWeights)
    loaded.set_params(client=client2)
    loaded.partial_fit(Xw, y)  # warm start from the loaded keyed state
    full.partial_fit(Xw, y)
    np.testing.assert_allclose(loaded.predict_proba(Xw), full.predict_proba(Xw), atol=1e-12)


def test_keyed_weights_round_trip_through_coef():
    kw = KeyedWeights(np.array([3, 2**40, 2**62, 2**63 - 1]),
                      np.array([[1.0, 0.0], [0.0, 2.0], [-1.5, 0.5], [0.25, -0.25]]))
    coef, b = kw.to_coef(2**63 - 1)
    assert coef.shape == (2, 2**63 - 1) and coef.nnz == 4
    np.testing.assert_array_equal(b, [0.25, -0.25])
    np.testing.assert_array_equal(coef.indices, [3, 2**62, 2**40, 2**62])
    back = KeyedWeights.from_coef(coef, b)
    np.testing.assert_array_equal(back.keys, kw.keys)
    np.testing.assert_array_equal(back.W, kw.W)
    np.testing.assert_array_equal(back.local(np.array([3, 4, 2**62, 2**63 - 2])), [0, 4, 2, 4])


def test_a_block_reads_only_the_rows_of_the_keys_it_touches():
    """table_rows of a keyed model: the rows of the keys a block meets (a row of zeros for
    those it does not hold, only when it meets one), not the model's whole table."""
    from dask_ps.algorithms._logistic_data import table_rows

    rng = np.random.default_rng(0)
    keys = np.sort(rng.choice(2**62, 10**4, replace=False))
    kw = KeyedWeights(keys, rng.normal(size=(keys.shape[0], 3)))
    full = np.vstack([kw.W, np.zeros((1, 3))])  # the model's table, as margins read it
    indices = np.r_[keys[[7, 3, 7, 9000]], 5, keys[3], 2**62 + 1]
    place, rows = table_rows(indices, kw)
    assert rows.shape == (4, 3) and place.dtype == np.int64  # 3 keys held, 1 zero row
    np.testing.assert_array_equal(rows[place], full[kw.local(indices)])
    np.testing.assert_array_equal(place, [1, 0, 1, 2, 3, 0, 3])  # in key order
    place, rows = table_rows(keys[[5, 5, 2]].astype(np.uint64), kw)
    np.testing.assert_array_equal(rows[place], kw.W[[5, 5, 2]])
    assert rows.shape == (2, 3)
    place, rows = table_rows(np.zeros(0, np.int64), kw)
    assert place.shape == (0,) and rows.shape == (0, 3)
    dense = rng.normal(size=(20, 2))  # a dense table is read as it is
    place, rows = table_rows(np.array([4, 1]), dense)
    assert rows is dense and place.tolist() == [4, 1]


def test_wide_bad_keys_are_named(client2):
    n = 4
    y = np.array([0, 1, 0, 1])
    neg = sp.csr_matrix((np.ones(n), np.array([1, 2**40, -7, 5]), np.arange(n + 1)),
                        shape=(n, N_WIDE))
    with pytest.raises(ValueError, match=r"column key -7 at row 2 is negative.*2\*\*63"):
        LogisticRegression(client=client2, checkpoint=None).fit(neg, y)
    # a uint64 key of 2**63 or more: scipy reads it as a negative int64
    big = sp.csr_matrix((np.ones(n), np.array([1, 2**63 + 9, 3, 5], dtype=np.uint64),
                         np.arange(n + 1)), shape=(n, N_WIDE))
    with pytest.raises(ValueError, match=r"row 1 is negative.*uint64 key of 2\*\*63"):
        LogisticRegression(client=client2, checkpoint=None).fit(big, y)
    out = sp.csr_matrix((np.ones(n), np.array([1, 2**33 + 1, 3, 5]), np.arange(n + 1)),
                        shape=(n, 2**33))
    with pytest.raises(ValueError, match=r"column key 8589934593 at row 1 is not below "
                                         r"n_features = 8589934592"):
        LogisticRegression(client=client2, checkpoint=None).fit(out, y)
    assert WIDE_FEATURES == 2**32


@pytest.mark.parametrize("estimator", ["LogisticRegression", "FactorizationMachineClassifier"])
@pytest.mark.parametrize("width", [16, 2**26])
def test_narrow_bad_column_indices_are_named_in_fit_and_predict(client2, estimator, width):
    """scipy builds a CSR of any indices without checking them: one outside [0, width) was
    dropped by the fit, or read as the intercept's row (index == width), and read past the
    weights in a prediction. Refused at every width, naming the row, in numpy and dask
    input, in fit and in predict."""
    import dask
    import dask.array as da

    cls = getattr(dask_ps, estimator)
    n = 8
    y = np.array([0, 1] * 4)
    good = sp.csr_matrix((np.ones(n), np.arange(n) % 5, np.arange(n + 1)), shape=(n, width))
    model = cls(client=client2, checkpoint=None, max_iter=1, random_state=0).fit(good, y)
    for bad_index, message in [(width, rf"column key {width} at row 3 is not below "
                                       rf"n_features = {width}"),
                               (-1, r"column key -1 at row 3 is negative")]:
        indices = np.arange(n) % 5
        indices[3] = bad_index
        bad = sp.csr_matrix((np.ones(n), indices, np.arange(n + 1)), shape=(n, width))
        with pytest.raises(ValueError, match=message):
            cls(client=client2, checkpoint=None, max_iter=1).fit(bad, y)
        # a partition made bad (dask's from_array slices rows first, which drops the key)
        dX = da.from_delayed(dask.delayed(bad), shape=bad.shape, dtype=bad.dtype,
                             meta=sp.csr_matrix((0, width)))
        with pytest.raises(ValueError, match=message):
            cls(client=client2, checkpoint=None, max_iter=1).fit(dX, da.from_array(y, chunks=8))
        with pytest.raises(ValueError, match=message):
            model.predict_proba(bad)


@pytest.mark.parametrize("penalty", ["l2", "l1"])
def test_lbfgs_on_63_bit_keys_is_the_narrow_fit(client2, penalty):
    """"lbfgs" (OWL-QN for l1) was refused from WIDE_FEATURES columns; keyed, it solves over
    the keys the data touches: on 40 random keys below 2**62 the same model as on the 40
    columns side by side, and a dask prediction of the same probabilities."""
    import warnings

    import dask.array as da
    from sklearn.exceptions import ConvergenceWarning

    Xn, _, y, _ = _pair(n=600, d=40)
    keys = np.sort(np.random.default_rng(3).choice(2**62, 40, replace=False))
    Xw = sp.csr_matrix((Xn.data, keys[Xn.indices], Xn.indptr), shape=(600, N_WIDE))
    common = dict(solver="lbfgs", penalty=penalty, C=0.5, max_iter=50, random_state=0,
                  checkpoint=None, client=client2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        narrow = LogisticRegression(**common).fit(Xn, y)
        wide = LogisticRegression(**common).fit(Xw, y)
    dense = narrow.coef_[0]
    assert sp.isspmatrix_csr(wide.coef_) and wide.coef_.shape == (1, N_WIDE)
    np.testing.assert_array_equal(wide.coef_.indices, keys[np.flatnonzero(dense)])
    np.testing.assert_allclose(wide.coef_.data, dense[dense != 0], rtol=1e-9)
    np.testing.assert_allclose(wide.intercept_, narrow.intercept_, rtol=1e-9)
    dX = da.from_array(Xw, chunks=(300, -1), asarray=False)
    np.testing.assert_allclose(wide.predict_proba(dX).compute(), narrow.predict_proba(Xn),
                               rtol=1e-9)


@pytest.mark.parametrize("name", ["lr", "fm"])
def test_a_keyed_model_builds_its_table_once_per_fitted_coef(monkeypatch, name):
    """A keyed model's lookup table (KeyedWeights.from_coef: 0.2-0.6 s at 10^6 keys) is built
    at the first prediction and reused until a fit or another coef_ (or intercept_,
    factors_) replaces the arrays it came from; predicting leaves the estimator's attributes
    as they were (scikit-learn's check_dict_unchanged); pickles, clones and copies carry no
    table."""
    import copy
    import pickle

    from sklearn.base import clone

    from dask_ps.algorithms import FactorizationMachineClassifier

    _, Xw, y, _ = _pair(n=400, d=50)
    kw = dict(max_iter=1, random_state=0, checkpoint=None, client="local")
    model = (LogisticRegression(**kw) if name == "lr"
             else FactorizationMachineClassifier(n_components=3, **kw)).fit(Xw, y)
    assert sp.issparse(model.coef_)
    built = []
    original = KeyedWeights.from_coef.__func__

    def counted(cls, coef, intercept):
        built.append(coef.shape)
        return original(cls, coef, intercept)

    monkeypatch.setattr(KeyedWeights, "from_coef", classmethod(counted))
    bare = len(pickle.dumps(model))
    before = model.decision_function(Xw)
    attributes = dict(model.__dict__)
    model.predict(Xw), model.predict_proba(Xw)
    np.testing.assert_array_equal(model.decision_function(Xw), before)
    assert len(built) == 1
    assert model.__dict__ == attributes
    assert len(pickle.dumps(model)) == bare  # the table is not pickled
    for twin in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        np.testing.assert_array_equal(twin.decision_function(Xw), before)
    assert len(built) == 3  # each copy built its own
    assert not hasattr(clone(model), "_tables")

    model.coef_ = model.coef_ * 2.0  # another object: the table is rebuilt from it
    doubled = model.decision_function(Xw)
    assert len(built) == 4 and not np.allclose(doubled, before)
    np.testing.assert_array_equal(doubled, pickle.loads(pickle.dumps(model)).decision_function(Xw))
    model.partial_fit(Xw, y)  # a fit drops the table
    again = model.decision_function(Xw)
    assert len(built) == 6
    np.testing.assert_array_equal(again, pickle.loads(pickle.dumps(model)).decision_function(Xw))


def test_lbfgs_from_keyed_features_holds_and_sends_only_the_touched_keys(client2):
    """An "lbfgs" model of KEYED_FEATURES columns or more is keyed, as a factorization
    machine is: its fit builds no array over the width in the driver and its sparse coef_
    predicts on a dask array from the weights of the keys present. At 2**30 columns the dense
    coef_ (8 GiB) went to every worker at the first prediction and the nanny killed them.
    The same rows on a narrow dense space give the same model; a warm start continues it."""
    import tracemalloc
    import warnings

    import dask.array as da
    from conftest import compute_without_large_graph
    from sklearn.exceptions import ConvergenceWarning

    from dask_ps.algorithms.fm import KEYED_FEATURES  # the rule of every keyed model

    width = 2**28  # a dense coef_ of 2 GiB
    assert width >= KEYED_FEATURES
    Xn, _, y, _ = _pair(n=600, d=40)
    keys = np.sort(np.random.default_rng(1).choice(width, 40, replace=False))
    Xw = sp.csr_matrix((Xn.data, keys[Xn.indices], Xn.indptr), shape=(600, width))
    dX = da.from_array(Xw, chunks=(300, -1), asarray=False)
    common = dict(solver="lbfgs", max_iter=30, random_state=0, checkpoint=None,
                  client=client2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        narrow = LogisticRegression(**common).fit(Xn, y)
        tracemalloc.start()
        try:
            wide = LogisticRegression(**common).fit(dX, da.from_array(y, chunks=300))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert sp.isspmatrix_csr(wide.coef_) and wide.coef_.shape == (1, width)
    assert peak < 2**26, peak  # the driver's fit: nothing near the 2 GiB dense vector
    dense = narrow.coef_[0]
    np.testing.assert_array_equal(wide.coef_.indices, keys[np.flatnonzero(dense)])
    np.testing.assert_allclose(wide.coef_.data, dense[dense != 0], rtol=1e-9)
    np.testing.assert_allclose(wide.intercept_, narrow.intercept_, rtol=1e-9)
    proba = compute_without_large_graph(wide.predict_proba(dX))
    np.testing.assert_allclose(proba, narrow.predict_proba(Xn), rtol=1e-9)
    assert wide.score(dX, y) == narrow.score(Xn, y)
    # warm starts: from the keyed weights, and (a keyed start into a dense table) FTRL's
    wide.set_params(warm_start=True, max_iter=200).fit(Xw, y)
    narrow.set_params(warm_start=True, max_iter=200).fit(Xn, y)
    np.testing.assert_allclose(wide.intercept_, narrow.intercept_, rtol=1e-9)
    hashed = LogisticRegression(solver="lbfgs", n_hashed_features=KEYED_FEATURES,
                                client="local", max_iter=200).fit(Xn, y)
    assert sp.issparse(hashed.coef_)
    optimum = hashed.coef_.toarray()
    hashed.set_params(solver="ftrl", warm_start=True, max_iter=1).fit(Xn, y)
    cold = LogisticRegression(solver="ftrl", n_hashed_features=KEYED_FEATURES,
                              client="local", max_iter=1).fit(Xn, y)
    assert sp.issparse(hashed.coef_) and sp.issparse(cold.coef_)  # keyed, as every solver
    assert (np.abs(hashed.coef_.toarray() - optimum).max() < 0.2
            < np.abs(cold.coef_.toarray() - optimum).max())


@pytest.mark.parametrize("width", [2**24, 2**31])
@pytest.mark.parametrize("kw", [dict(solver="ftrl"), dict(solver="sgd"),
                                dict(solver="adagrad", step_on="server")])
def test_a_stochastic_fit_from_keyed_features_holds_only_the_touched_keys(client2, kw, width):
    """From KEYED_FEATURES columns a stochastic solver's fit is keyed, as "lbfgs"'s is: its
    table stays on the shards and the driver gathers the touched rows by key, not an array
    over the width (FTRL at 2**28 columns: a 2 GiB coef_ and a driver peak of 2.6 GB). The
    table is dense at 2**24 columns and hashed at 2**31, where a dense one exceeds
    DENSE_TABLE_BYTES (FTRL's worker step asked for 24 GiB: numpy's MemoryError). The same
    rows on 40 columns side by side give the same model, and its warm start continues it."""
    import tracemalloc

    import dask.array as da
    from conftest import compute_without_large_graph

    from dask_ps.algorithms import _stochastic_fit
    from dask_ps.algorithms._logistic_data import KEYED_FEATURES
    from dask_ps.state.optimizers import Average
    from dask_ps.state.table import dense_table_bytes

    assert KEYED_FEATURES <= width < WIDE_FEATURES  # keyed result, not a wide input
    dense_bytes = dense_table_bytes(width + 1, 3, "float64", Average())
    assert (dense_bytes > _stochastic_fit.DENSE_TABLE_BYTES) == (width == 2**31)
    Xn, _, y, _ = _pair(n=600, d=40)
    keys = np.sort(np.random.default_rng(1).choice(width, 40, replace=False))
    Xw = sp.csr_matrix((Xn.data, keys[Xn.indices], Xn.indptr), shape=(600, width))
    common = dict(max_iter=3, random_state=0, checkpoint=None, client=client2, **kw)
    narrow = LogisticRegression(**common).fit(Xn, y)
    tracemalloc.start()
    try:
        wide = LogisticRegression(**common).fit(Xw, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**26, peak  # nothing near the 2 GiB dense vector
    assert sp.isspmatrix_csr(wide.coef_) and wide.coef_.shape == (1, width)
    dense = narrow.coef_[0]
    np.testing.assert_array_equal(wide.coef_.indices, keys[np.flatnonzero(dense)])
    np.testing.assert_allclose(wide.coef_.data, dense[dense != 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wide.intercept_, narrow.intercept_, rtol=1e-10, atol=1e-12)
    dX = da.from_array(Xw, chunks=(300, -1), asarray=False)
    np.testing.assert_allclose(compute_without_large_graph(wide.predict_proba(dX)),
                               narrow.predict_proba(Xn), rtol=1e-10, atol=1e-12)
    # a warm start continues from the keyed weights and update-rule state
    wide.set_params(warm_start=True).fit(Xw, y)
    narrow.set_params(warm_start=True).fit(Xn, y)
    dense = narrow.coef_[0]
    np.testing.assert_allclose(wide.coef_.data, dense[dense != 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose([h["loss"] for h in wide.history_],
                               [h["loss"] for h in narrow.history_], rtol=1e-10)


def test_a_dense_coef_over_a_wide_input_predicts_from_its_nonzero_keys(client2, monkeypatch):
    """A dense coef_ of KEYED_FEATURES columns or more (a model saved before stochastic fits
    were keyed there): its prediction on a dask array sent the whole of it to every worker
    (2 GiB at 2**28 columns: 3 GiB workers killed at the first score). Now its non-zero rows
    go, by key, and the margins are those of the dense coef_."""
    import dask.array as da

    from dask_ps.algorithms import _logistic_data as D
    from dask_ps.algorithms import logistic

    width = D.KEYED_FEATURES * 4  # a dense coef_ of 32 MiB
    assert width < D.WIDE_FEATURES
    Xn, _, y, _ = _pair(n=600, d=40)
    keys = np.sort(np.random.default_rng(2).choice(width, 40, replace=False))
    Xw = sp.csr_matrix((Xn.data, keys[Xn.indices], Xn.indptr), shape=(600, width))
    model = LogisticRegression(solver="ftrl", max_iter=3, random_state=0, checkpoint=None,
                               client=client2).fit(Xw, y)
    assert sp.isspmatrix_csr(model.coef_)
    model.coef_ = model.coef_.toarray()  # as saved before
    sent = []
    real = D.dask_margins

    def spy(X, coef_t, *args, **kwargs):
        sent.append(coef_t)
        return real(X, coef_t, *args, **kwargs)

    monkeypatch.setattr(logistic.D, "dask_margins", spy)
    dX = da.from_array(Xw, chunks=(300, -1), asarray=False)
    np.testing.assert_allclose(model.decision_function(dX).compute(),
                               model.decision_function(Xw), rtol=1e-12)
    [coef_t] = sent
    nonzero = np.flatnonzero(model.coef_[0])
    assert isinstance(coef_t, D.KeyedWeights) and 0 < nonzero.shape[0] <= 40
    np.testing.assert_array_equal(coef_t.keys, np.append(nonzero, width))
