"""MatrixFactorization: kernels against Python twins, MovieLens-100k quality, ids, clusters."""

import logging
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_do_not_raise_errors_in_init_or_set_params,
    check_estimator_repr,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

import dask_ps
from dask_ps import MatrixFactorization
from dask_ps.algorithms._mf_kernels import (
    als_gram,
    als_solve_gram,
    als_solve_rows,
    balance_blocks,
    predict_pairs,
    sgd_sweep,
)

pytestmark = [
    pytest.mark.timeout(300),
    # evaluate warns about the test folds' unseen items (u1.test: 32 rows), as predict does;
    # the warning is tested in test_mf_ids.py, the counts it returns here
    pytest.mark.filterwarnings(r"ignore:\d+ rows with a user and \d+ with an item not seen "
                               r"at fit. (scored|left out) by:UserWarning"),
]

NAMES = ["user", "item", "rating", "ts"]
# fewer epochs/factors than the defaults where only behaviour (not quality) is tested
FAST = dict(n_components=8, max_iter=5)


def movielens(data, split):
    folder = data / "mf_movielens100k"
    return (pd.read_csv(folder / f"{split}.base", sep="\t", names=NAMES),
            pd.read_csv(folder / f"{split}.test", sep="\t", names=NAMES))


@pytest.fixture(scope="module")
def u1(data):
    return movielens(data, "u1")


def toy(n_users=30, n_items=20, n=300, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, n_users, n)
    i = rng.integers(0, n_items, n)
    r = np.clip(np.round(3 + rng.normal(size=n)), 1, 5)
    return pd.DataFrame({"user": u, "item": i, "rating": r})


# -- kernels against pure-Python twins ----------------------------------------------------
def sgd_twin(users, items, ratings, P, bu, Q, mu, lr, reg, reg_bias):
    k, sse = P.shape[1], 0.0
    for u, i, r in zip(users, items, ratings):
        e = r - (mu + bu[u] + Q[i, k] + P[u] @ Q[i, :k])
        sse += e * e
        bu[u] += lr * (e - reg_bias * bu[u])
        Q[i, k] += lr * (e - reg_bias * Q[i, k])
        p, q = P[u].copy(), Q[i, :k].copy()
        P[u] = p + lr * (e * q - reg * p)
        Q[i, :k] = q + lr * (e * p - reg * q)
    return sse


def test_sgd_sweep_matches_python_twin():
    """float32 factors (what the fit uses), against the float64 twin: equal to float32
    rounding."""
    rng = np.random.default_rng(1)
    users, items = rng.integers(0, 7, 200), rng.integers(0, 5, 200)
    ratings = rng.integers(1, 6, 200).astype(float)
    P, bu, Q = rng.normal(0, .1, (7, 3)), rng.normal(0, .1, 7), rng.normal(0, .1, (5, 4))
    f = np.float32
    args32 = (users.astype(np.int32), items.astype(np.int32), ratings.astype(f))
    P32, bu32, Q32 = P.astype(f), bu.astype(f), Q.astype(f)
    P_start = P32.copy()
    got = sgd_sweep(*args32, P32, bu32, Q32, f(3.5), f(0.02), f(0.05), f(0.01))
    want = sgd_twin(users, items, ratings, P, bu, Q, 3.5, 0.02, 0.05, 0.01)
    assert got == pytest.approx(want, rel=1e-5)
    for a, b in zip((P32, bu32, Q32), (P, bu, Q)):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert np.abs(P32 - P_start).max() > 1e-3  # the sweep did move the factors


def test_balance_blocks_matches_python_twin_and_balances():
    """Longest processing time first: every item dealt, blocks within the largest item of
    each other (Zipf counts, as popular items are)."""
    rng = np.random.default_rng(3)
    counts = (rng.zipf(1.3, 5000) % 1000).astype(np.int64)
    for n_blocks in (1, 2, 3, 8):
        order = np.argsort(-counts, kind="stable")
        loads, out = np.zeros(n_blocks, np.int64), np.full(counts.shape[0], -1, np.int32)
        balance_blocks(counts, order, loads, out)
        twin_loads, twin = [0] * n_blocks, np.full(counts.shape[0], -1)
        for i in order:
            b = int(np.argmin(twin_loads))
            twin[i] = b
            twin_loads[b] += counts[i]
        np.testing.assert_array_equal(out, twin)
        np.testing.assert_array_equal(loads, np.bincount(out, counts, n_blocks))
        assert out.min() == 0 and out.max() < n_blocks
        assert loads.max() - loads.min() <= counts.max()


def test_als_kernels_match_numpy_least_squares():
    rng = np.random.default_rng(2)
    n_users, n_items, k, lam, lam_b, mu = 6, 9, 3, 0.3, 0.05, 3.0
    lam0, lam_b0 = 2.0, 1.5  # the fixed parts (reg_fixed, reg_bias_fixed)
    users, items = rng.integers(0, n_users, 80), rng.integers(0, n_items, 80)
    users[:n_users] = np.arange(n_users)
    ratings = rng.integers(1, 6, 80).astype(float)
    F = rng.normal(0, .5, (n_items, k + 1))
    order = np.argsort(users, kind="stable")
    indptr = np.concatenate(([0], np.cumsum(np.bincount(users, minlength=n_users))))
    out = np.empty((n_users, k + 1))
    assert als_solve_rows(indptr, items[order], ratings[order], F, mu, lam, lam_b, lam0, lam_b0,
                          out) == -1
    reg = np.diag([lam] * k + [lam_b])
    fixed = np.diag([lam0] * k + [lam_b0])
    for u in range(n_users):
        m = users == u
        X = np.column_stack([F[items[m], :k], np.ones(m.sum())])
        t = ratings[m] - mu - F[items[m], k]
        want = np.linalg.solve(X.T @ X + m.sum() * reg + fixed, X.T @ t)
        np.testing.assert_allclose(out[u], want, rtol=1e-9, atol=1e-12)
    # the item side, through the accumulated normal equations
    d = k + 1
    G = np.zeros((n_items, d * d + d + 1))
    # the ratings in their own order, read from the block by user
    als_gram(np.argsort(order), indptr, items[order], ratings[order], out, mu, G)
    sol = np.empty((n_items, d))
    assert als_solve_gram(G, lam, lam_b, lam0, lam_b0, sol) == -1
    for i in range(n_items):
        m = items == i
        if not m.any():
            np.testing.assert_array_equal(sol[i], 0.0)
            continue
        X = np.column_stack([out[users[m], :k], np.ones(m.sum())])
        t = ratings[m] - mu - out[users[m], k]
        want = np.linalg.solve(X.T @ X + m.sum() * reg + fixed, X.T @ t)
        np.testing.assert_allclose(sol[i], want, rtol=1e-9, atol=1e-12)


def test_predict_pairs_cold_start_and_clip():
    P, bu = np.array([[1.0, 2.0]]), np.array([0.5])
    Q, bi = np.array([[1.0, 1.0]]), np.array([-0.25])
    out = np.empty(4)
    predict_pairs(np.array([0, -1, 0, -1]), np.array([0, 0, -1, -1]), P, bu, Q, bi, 1.0,
                  -10.0, 10.0, out)
    np.testing.assert_allclose(out, [1 + .5 - .25 + 3, 1 - .25, 1 + .5, 1.0])
    predict_pairs(np.array([0]), np.array([0]), P, bu, Q, bi, 1.0, 1.0, 4.0, out[:1])
    assert out[0] == 4.0


# -- quality on MovieLens-100k (the targets) --------------------------------------
@pytest.mark.parametrize("solver, target, kw", [("sgd", 0.915, {}), ("als", 0.930, {})])
def test_movielens_u1_rmse(u1, solver, target, kw):
    train, test = u1
    model = MatrixFactorization(solver=solver, client="local", random_state=0, **kw).fit(train)
    res = model.evaluate(test)
    assert res["rmse"] <= target, res
    # u1.test has 32 ratings of items absent from u1.base (PROVENANCE.md), and no new users
    assert (res["n_unseen_items"], res["n_unseen_users"], res["n_ratings"]) == (32, 0, 20000)
    assert model.history_[-1]["loss"] < model.history_[0]["loss"]  # the training RMSE


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_movielens_ua_rmse(data, solver):
    train, test = movielens(data, "ua")
    model = MatrixFactorization(solver=solver, client="local", random_state=0).fit(train)
    res = model.evaluate(test)
    assert res["rmse"] <= 0.945 and res["n_unseen_items"] == 2, res


def biases_only_rmse(train, test, lam_user=15.0, lam_item=10.0, sweeps=10):
    """RMSE of Koren's baseline predictor mu + b_u + b_i (shrunk means, fixed λ)."""
    mu = train.rating.mean()
    bu = pd.Series(0.0, index=train.user.unique())
    bi = pd.Series(0.0, index=train.item.unique())
    for _ in range(sweeps):
        g = (train.rating - mu - train.user.map(bu)).groupby(train.item)
        bi = g.sum() / (g.count() + lam_item)
        g = (train.rating - mu - train.item.map(bi)).groupby(train.user)
        bu = g.sum() / (g.count() + lam_user)
    pred = mu + test.user.map(bu).fillna(0) + test.item.map(bi).fillna(0)
    return float(np.sqrt(np.mean((np.clip(pred, 1, 5) - test.rating) ** 2)))


@pytest.mark.parametrize("fraction", [0.2, 0.05])
def test_als_defaults_beat_biases_only_on_sparse_samples(data, fraction):
    # 20 % / 5 % of MovieLens-100k (seeded), 80/20 split: 16,000 / 4,000 training ratings.
    # With weighted-λ alone (reg_fixed=0) ALS scored 1.0382 / 1.1380 against the baseline's
    # 0.9880 / 1.0499: rows with one or two ratings overfit.
    full = pd.read_csv(data / "mf_movielens100k" / "u.data", sep="\t", names=NAMES)
    sub = full.iloc[np.random.default_rng(0).permutation(len(full))[:int(len(full) * fraction)]]
    cut = int(len(sub) * 0.8)
    train, test = sub.iloc[:cut], sub.iloc[cut:]
    model = MatrixFactorization(solver="als", client="local", random_state=0).fit(train)
    rmse = model.evaluate(test)["rmse"]
    assert rmse < biases_only_rmse(train, test), rmse


def check_one_and_two_workers(u1, clients, solver, tol, bound, **kw):
    train, test = u1
    rmse = [MatrixFactorization(solver=solver, client=c, random_state=0, **kw).fit(train)
            .evaluate(test)["rmse"] for c in clients]
    assert abs(rmse[0] - rmse[1]) <= tol, rmse
    assert max(rmse) <= bound, rmse  # below the biases-only 0.955 (PROVENANCE.md)


# smaller than the defaults, to stay fast on a loaded 2-core machine
@pytest.mark.parametrize("solver, tol, bound, kw", [
    ("sgd", 0.005, 0.945, dict(n_components=32, max_iter=20, decay=1.0, init_std=0.1,
                                   learning_rate=0.01)),
    ("als", 1e-6, 0.94, dict(n_components=16, max_iter=8)),  # exact method: equal up to rounding
])
def test_one_and_two_workers_agree(u1, client1, client2, solver, tol, bound, kw):
    check_one_and_two_workers(u1, (client1, client2), solver, tol, bound, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("solver, tol, bound", [("sgd", 0.005, 0.92), ("als", 1e-6, 0.93)])
def test_one_and_two_workers_agree_with_defaults(u1, client1, client2, solver, tol, bound):
    check_one_and_two_workers(u1, (client1, client2), solver, tol, bound)


def test_dask_dataframe_input(u1, client2):
    """Partitions shuffled by user on the cluster; ALS is exact, so equal to pandas input."""
    import dask.dataframe as dd

    train, test = u1
    ref = MatrixFactorization(solver="als", client="local", **FAST).fit(train)
    model = MatrixFactorization(solver="als", client=client2, **FAST)
    model.fit(dd.from_pandas(train, npartitions=3))
    with pytest.warns(UserWarning, match="32 with an item not seen at fit"):
        expected = ref.predict(test)
        np.testing.assert_allclose(model.predict(test), expected, atol=1e-8)
    dtest = dd.from_pandas(test, npartitions=2)
    assert model.evaluate(dtest) == pytest.approx(ref.evaluate(test))
    got = model.predict(dtest).compute().to_numpy()  # lazy: no warning
    np.testing.assert_allclose(got, expected, atol=1e-8)


class _Records(logging.Handler):
    """Keeps the records at WARNING and above that reach the loggers it is attached to."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_a_fit_from_a_dask_dataframe_logs_no_warnings(client2):
    """Issue 18: MF fits from a dask dataframe printed 12 WARNING lines of Dask's P2P shuffle
    (logged by the scheduler, in this process for a LocalCluster). 'distributed' does not
    propagate to the root logger, so the handler is attached to it; the workers' own logs are
    read back from them. Python warnings are errors (pyproject's filterwarnings)."""
    import dask.dataframe as dd

    def worker_warnings():
        return sum(level in ("WARNING", "ERROR", "CRITICAL") for logs in
                   client2.get_worker_logs().values() for level, _ in logs)

    handler, before = _Records(), worker_warnings()
    loggers = [logging.getLogger(n) for n in ("distributed", "dask", "dask_ps")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        model = MatrixFactorization(client=client2, random_state=0, **FAST)
        model.fit(dd.from_pandas(toy(), npartitions=3))
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
    assert [f"{r.name}: {r.getMessage()}" for r in handler.records] == []
    assert worker_warnings() == before
    assert model.n_iter_ == FAST["max_iter"]


# -- ids and cold start ---------------------------------------------------------------------
@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_unseen_ids_follow_the_cold_start_rule(solver):
    df = toy()
    model = MatrixFactorization(solver=solver, client="local", random_state=0, **FAST).fit(df)
    mu, u_idx, i_idx = model.global_mean_, 3, 4
    uid, iid = model.user_ids_[u_idx], model.item_ids_[i_idx]
    test = pd.DataFrame({"user": [uid, 999, uid, 999], "item": [iid, iid, 999, 998],
                         "rating": [3.0, 4.0, 5.0, 1.0]})
    with pytest.warns(UserWarning, match="2 rows with a user and 2 with an item not seen"):
        pred = model.predict(test)
    assert np.isfinite(pred).all()
    lo, hi = model.rating_range_
    assert pred[1] == pytest.approx(np.clip(mu + model.item_bias_[i_idx], lo, hi))
    assert pred[2] == pytest.approx(np.clip(mu + model.user_bias_[u_idx], lo, hi))
    assert pred[3] == pytest.approx(mu)
    res = model.evaluate(test)
    assert (res["n_unseen_users"], res["n_unseen_items"], res["n_ratings"]) == (2, 2, 4)
    assert np.isfinite(res["rmse"])


def cold_start_model(cold_start):
    """A small SGD model with one known user and item, and four test rows: a known pair, an
    unseen user, an unseen item, and both unseen."""
    model = MatrixFactorization(client="local", random_state=0, cold_start=cold_start,
                                **FAST).fit(toy())
    uid, iid = model.user_ids_[3], model.item_ids_[4]
    test = pd.DataFrame({"user": [uid, 999, uid, 999], "item": [iid, iid, 999, 998],
                         "rating": [3.0, 4.0, 5.0, 1.0]})
    return model, test


@pytest.mark.parametrize("cold_start", ["nan", "drop"])
def test_cold_start_nan_and_drop_predict_nan_for_unseen_ids(cold_start):
    model, test = cold_start_model(cold_start)
    known = MatrixFactorization(client="local", random_state=0, **FAST).fit(toy())
    with pytest.warns(UserWarning, match=f"2 rows with a user and 2 with an item not seen at "
                                         f"fit: predicted by cold_start='{cold_start}'"):
        pred = model.predict(test)
    assert np.isnan(pred[1:]).all()
    assert pred[0] == known.predict(test.iloc[:1])[0]  # the rule does not touch seen pairs
    res = model.evaluate(test)
    assert (res["n_unseen_users"], res["n_unseen_items"]) == (2, 2)
    if cold_start == "drop":  # the unseen rows are left out of the metrics
        err = pred[0] - 3.0
        assert res["n_ratings"] == 1
        assert res["rmse"] == pytest.approx(abs(err)) and res["mae"] == pytest.approx(abs(err))
        assert model.score(test) == pytest.approx(-abs(err))
    else:  # "nan" scores every row, so the metrics are NaN
        assert res["n_ratings"] == 4 and np.isnan(res["rmse"]) and np.isnan(model.score(test))


def test_cold_start_drop_with_only_unseen_rows_has_nothing_to_evaluate():
    model, test = cold_start_model("drop")
    with pytest.raises(ValueError, match="no ratings to evaluate"):
        model.evaluate(test.iloc[1:])


@pytest.mark.parametrize("rows, first", [([1, 2, 3], "user 999"), ([2], "item 999")])
def test_cold_start_raise_names_the_first_unseen_id(rows, first):
    model, test = cold_start_model("raise")
    test = test.iloc[[0] + rows]
    n_u, n_i = int((test.user == 999).sum()), int(test.item.isin([998, 999]).sum())
    msg = (f"{first} was not seen at fit \\({n_u} rows with an unseen user, {n_i} with an "
           f"unseen item; cold_start='raise'\\)")
    for call in (model.predict, model.evaluate, model.score):
        with pytest.raises(ValueError, match=msg):
            call(test)
    assert np.isfinite(model.predict(test.iloc[:1])).all()  # seen ids still predict
    text = toy().assign(user=lambda d: [f"u{u}" for u in d.user])
    model = MatrixFactorization(client="local", random_state=0, cold_start="raise",
                                **FAST).fit(text)
    with pytest.raises(ValueError, match="user 'new' was not seen"):
        model.predict(pd.DataFrame({"user": ["new"], "item": [0]}))


def test_cold_start_on_a_dask_dataframe_follows_the_rule():
    import dask
    import dask.dataframe as dd

    model, test = cold_start_model("drop")
    dtest = dd.from_pandas(test, npartitions=2)
    with dask.config.set(scheduler="sync"):
        assert np.isnan(model.predict(dtest).compute().to_numpy()[1:]).all()
        assert model.evaluate(dtest)["n_ratings"] == 1
        model.set_params(cold_start="raise")
        with pytest.raises(ValueError, match="cold_start='raise'"):
            model.predict(dtest).compute()


def test_large_and_string_ids_give_the_same_model():
    """Ids ≥ 2**31 and string ids keep their order, so the dense codes and the fit are equal."""
    df = toy()
    big = df.assign(user=df.user + 2**40, item=df.item * 3 + 2**33)
    text = df.assign(user=[f"user-{u:04d}" for u in df.user],
                     item=[f"item-{i:04d}" for i in df.item])
    kw = dict(client="local", random_state=0, **FAST)
    models = [MatrixFactorization(**kw).fit(d) for d in (df, big, text)]
    assert models[1].user_ids_.dtype == np.int64 and models[1].user_ids_.min() >= 2**40
    assert models[2].user_ids_[0] == "user-" + f"{df.user.min():04d}"
    preds = [m.predict(d) for m, d in zip(models, (df, big, text))]
    np.testing.assert_allclose(preds[1], preds[0], rtol=1e-12)
    np.testing.assert_allclose(preds[2], preds[0], rtol=1e-12)
    # a NumPy array of ids ≥ 2**31 (int64 triples) is read by position
    arr = big[["user", "item"]].to_numpy()
    np.testing.assert_allclose(models[1].predict(arr), preds[0], rtol=1e-12)
    items, scores = models[2].recommend("user-" + f"{df.user.iloc[0]:04d}", n=5)
    assert items.shape == (5,) and all(i.startswith("item-") for i in items)
    assert (np.diff(scores) <= 0).all()


@pytest.mark.parametrize("solver", ["sgd", "als"])
def test_rank_above_users_and_items(solver):
    df = pd.DataFrame({"user": [1, 1, 2, 3, 3, 3], "item": [10, 11, 10, 11, 12, 10],
                       "rating": [5.0, 1.0, 4.0, 2.0, 3.0, 5.0]})
    model = MatrixFactorization(solver=solver, n_components=10, max_iter=50, client="local",
                                random_state=0).fit(df)
    assert model.user_factors_.shape == (3, 10) and model.item_factors_.shape == (3, 10)
    assert np.isfinite(model.predict(df)).all()
    assert model.evaluate(df)["rmse"] < 1.0


def test_empty_partitions(client2):
    """One user for two workers: one part is empty and only keeps the clock."""
    import dask.dataframe as dd

    df = pd.DataFrame({"user": [7] * 6, "item": [1, 2, 3, 1, 2, 3],
                       "rating": [5.0, 4.0, 1.0, 5.0, 4.0, 1.0]})
    for solver in ("sgd", "als"):
        model = MatrixFactorization(solver=solver, client=client2, n_components=2, max_iter=30,
                                    random_state=0, **({"learning_rate": 0.05}
                                                       if solver == "sgd" else
                                                       # six ratings: no prior to speak of
                                                       {"reg_fixed": 0, "reg_bias_fixed": 0}))
        model.fit(df.to_numpy())
        assert model.evaluate(df.to_numpy())["rmse"] < 1.0
    # a dask dataframe with an empty partition
    ddf = dd.from_pandas(toy(), npartitions=3)
    ddf = dd.concat([ddf, ddf.partitions[0].head(0, compute=False, npartitions=1)])
    assert ddf.npartitions == 4
    model = MatrixFactorization(solver="als", client=client2, **FAST).fit(ddf)
    assert np.isfinite(model.predict(toy())).all()


# -- errors --------------------------------------------------------------------------------
def test_divergence_names_the_iteration():
    df = toy()
    with pytest.raises(dask_ps.DivergenceError, match=r"diverged at epoch \d+.*not finite"):
        MatrixFactorization(solver="sgd", learning_rate=50.0, client="local", **FAST).fit(df)
    huge = df.assign(rating=df.rating * 1e300)
    with pytest.raises(FloatingPointError, match=r"solver='als'.*at epoch 1\b"):
        MatrixFactorization(solver="als", client="local", **FAST).fit(huge)


def test_bad_input_is_named():
    df = toy()
    with pytest.raises(ValueError, match="no column 'rating' .rating_col."):
        MatrixFactorization(client="local").fit(df.rename(columns={"rating": "stars"}))
    model = MatrixFactorization(rating_col="stars", client="local", **FAST)
    model.fit(df.rename(columns={"rating": "stars"}))  # column names are parameters
    bad = df.copy()
    bad.loc[17, "rating"] = np.nan
    with pytest.raises(ValueError, match="column 'rating'.*at row 17 is not finite"):
        MatrixFactorization(client="local").fit(bad)
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        MatrixFactorization(client="local").fit(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="id 1.5 at row 0 is not an integer"):
        MatrixFactorization(client="local").fit(np.array([[1.5, 1, 3.0]]))
    text = df.assign(user=[f"u{u}" for u in df.user])
    text.loc[3, "user"] = None
    with pytest.raises(ValueError, match="column 'user'.*missing id at row 3"):
        MatrixFactorization(client="local").fit(text)
    with pytest.raises(ValueError, match="'solver' parameter of MatrixFactorization must be"):
        MatrixFactorization(solver="svdpp", client="local").fit(df)
    with pytest.raises(ValueError,
                       match="'n_components' parameter of MatrixFactorization must be"):
        MatrixFactorization(n_components=0, client="local").fit(df)
    with pytest.raises(ValueError, match="reg_fixed and reg_bias_fixed apply to solver='als'"):
        MatrixFactorization(solver="sgd", reg_bias_fixed=1.0, client="local").fit(df)
    with pytest.raises(NotFittedError):
        MatrixFactorization().predict(df)


def test_fit_with_y_and_numpy_triples():
    df = toy()
    kw = dict(client="local", random_state=0, **FAST)
    a = MatrixFactorization(**kw).fit(df[["user", "item"]], df["rating"])
    b = MatrixFactorization(**kw).fit(df[["user", "item", "rating"]].to_numpy(float))
    np.testing.assert_allclose(a.predict(df), b.predict(df.to_numpy()), rtol=1e-12)
    assert a.score(df) == pytest.approx(-a.evaluate(df)["rmse"])


def test_recommend_excludes_and_ranks():
    df = toy()
    model = MatrixFactorization(client="local", random_state=0, **FAST).fit(df)
    user = model.user_ids_[0]
    items, scores = model.recommend(user, n=model.item_ids_.shape[0])
    assert sorted(items) == sorted(model.item_ids_)
    top, _ = model.recommend(user, n=3, exclude=items[:2])
    np.testing.assert_array_equal(top, items[2:5])
    with pytest.warns(UserWarning, match="cold_start='mean'"):
        cold, cold_scores = model.recommend(-1, n=3)  # unseen user: by item bias
    by_bias = np.sort(model.global_mean_ + model.item_bias_)[::-1]
    np.testing.assert_allclose(cold_scores, by_bias[:3])


# -- scikit-learn conventions ----------------------------------------------------------------
def test_scikit_learn_conventions():
    """The checks of ``check_estimator`` that do not feed a generic feature matrix X: MF reads
    (user, item) ids, so the checks fitting on random float features do not apply."""
    name = "MatrixFactorization"
    est = MatrixFactorization(client="local")
    for check in (check_no_attributes_set_in_init, check_parameters_default_constructible,
                  check_get_params_invariance, check_set_params, check_estimator_repr,
                  check_do_not_raise_errors_in_init_or_set_params):
        check(name, est)
    df = toy()
    model = MatrixFactorization(client="local", random_state=0, **FAST).fit(df)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(df), model.predict(df))
    twin = clone(model).fit(df)  # same parameters and seed: the same model
    np.testing.assert_array_equal(twin.predict(df), model.predict(df))


def test_batch_size_is_deprecated():
    """``batch_size`` has no effect since SGD follows the DSGD schedule: a value warns."""
    X = np.array([[0, 0, 4.0], [1, 1, 3.0], [0, 1, 5.0], [1, 0, 2.0]])
    with pytest.warns(FutureWarning, match="batch_size"):
        MatrixFactorization(batch_size=10, n_components=2, max_iter=1, random_state=0).fit(X)

