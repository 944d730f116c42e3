"""MatrixFactorization: one id rule for every input form (NumPy, pandas, dask dataframes and
arrays), and ``recommend`` following ``cold_start`` as ``predict`` does."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from dask_ps import MatrixFactorization
from dask_ps.exceptions import DataError

pytestmark = pytest.mark.timeout(300)

FAST = dict(n_components=4, max_iter=3, random_state=0, progress=False)


def toy(n_users=30, n_items=20, n=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user": rng.integers(0, n_users, n),
                         "item": rng.integers(0, n_items, n),
                         "rating": np.clip(np.round(3 + rng.normal(size=n)), 1, 5)})


# -- float ids: one rule for pandas and dask ------------------------------------------------
def test_integral_float_ids_are_integers_in_pandas_and_dask(client2):
    import dask.dataframe as dd

    df = toy().astype({"user": float})
    a = MatrixFactorization(client=client2, **FAST).fit(df)
    b = MatrixFactorization(client=client2, **FAST).fit(dd.from_pandas(df, npartitions=3))
    for m in (a, b):
        assert m.user_ids_.dtype == np.int64
        np.testing.assert_array_equal(m.user_ids_, np.unique(df.user).astype(np.int64))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every training id is known
            assert m.evaluate(df)["n_unseen_users"] == 0


@pytest.mark.parametrize("value, row, what", [
    (1.2, 250, "is not an integer"),
    # whole, but not an int64: the NumPy path cast it to int64 (a wrapped, wrong id), the
    # dask path failed in its encoding with "invalid literal for int()"
    (1e300, 120, "does not fit in int64")])
def test_a_bad_float_id_is_refused_naming_column_and_row(client2, value, row, what):
    """Not ids turned into strings ('2', '1.2') in the dask path: the row is the one in the
    whole dataframe, in the pandas path's words."""
    import dask.dataframe as dd

    df = toy().astype({"user": float})
    df.loc[row, "user"] = value
    msg = re.escape(f"X column 'user': id {value:g} at row {row} {what}")
    ddf = dd.from_pandas(df, npartitions=3)  # 100 rows a partition
    for X in (df, ddf, ddf.to_dask_array(lengths=True)):  # the array: by position
        with pytest.raises(DataError, match=msg):
            MatrixFactorization(client=client2, **FAST).fit(X)
    model = MatrixFactorization(client=client2, **FAST).fit(toy())
    with pytest.raises(DataError, match=f"^{msg}$"):  # lazy: the row counted when computed
        model.predict(ddf).compute()
    with pytest.raises(DataError, match=f"^{msg}$"):  # evaluate: as fit, in the whole input
        model.evaluate(ddf)


@pytest.mark.parametrize("convert_string", [False, True])
def test_numbers_and_strings_in_one_column_are_refused(client2, convert_string):
    """Ids 1 and "1" are not one user (as strings) nor two: the column is refused."""
    import dask
    import dask.dataframe as dd

    df = toy().astype({"user": object})
    df.loc[7, "user"] = str(df.user[0])
    msg = f"X column 'user': ids mix numbers and strings: {df.user[0]!r} at row 0 and " \
          f"'{df.user[0]}' at row 7"
    with pytest.raises(DataError, match=msg):
        MatrixFactorization(client=client2, **FAST).fit(df)
    with dask.config.set({"dataframe.convert-string": convert_string}):
        ddf = dd.from_pandas(df, npartitions=3)
        if convert_string:  # dask made every id a string before dask_ps sees them
            assert MatrixFactorization(client=client2, **FAST).fit(ddf).user_ids_.dtype.kind \
                == "U"
        else:
            with pytest.raises(DataError, match=msg):
                MatrixFactorization(client=client2, **FAST).fit(ddf)
    ints = MatrixFactorization(client=client2, **FAST).fit(toy().astype({"user": object}))
    assert ints.user_ids_.dtype == np.int64  # an object column of integers: integer ids


# -- dask arrays ------------------------------------------------------------------------------
def test_a_dask_array_is_read_like_a_numpy_array(client2):
    import dask.array as da

    R = toy().to_numpy(float)
    ref = MatrixFactorization(client=client2, **FAST).fit(R)
    model = MatrixFactorization(client=client2, **FAST).fit(da.from_array(R, chunks=(70, 3)))
    np.testing.assert_array_equal(model.user_ids_, ref.user_ids_)
    np.testing.assert_array_equal(model.item_ids_, ref.item_ids_)
    assert abs(model.evaluate(R)["rmse"] - ref.evaluate(R)["rmse"]) < 0.1
    pred = model.predict(da.from_array(R[:, :2], chunks=(70, 1)))
    assert isinstance(pred, da.Array) and pred.dtype == np.float64
    np.testing.assert_allclose(pred.compute(), model.predict(R), rtol=1e-12)
    assert model.evaluate(da.from_array(R, chunks=(70, 3))) == pytest.approx(model.evaluate(R))
    with pytest.raises(ValueError, match="dask array X must have shape \\(n, 3\\) \\(user, "
                                         "item, rating\\), got shape \\(300, 2\\)"):
        MatrixFactorization(client=client2, **FAST).fit(da.from_array(R[:, :2]))
    with pytest.raises(TypeError, match="dask dataframe .* or a dask array .* got Series"):
        import dask.dataframe as dd

        MatrixFactorization(client=client2, **FAST).fit(dd.from_pandas(toy().user, 2))


# -- recommend follows cold_start -------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    return MatrixFactorization(client="local", **FAST).fit(toy())


@pytest.mark.parametrize("user, hint", [("u1", "; the user ids at fit are integers"),
                                        (10**9, "")])
def test_recommend_for_an_unseen_user_follows_cold_start(fitted, user, hint):
    """recommend passed the user's id as the item too (a hack to reuse predict's message,
    which counted "rows"); its messages now name the user and say what it recommends."""
    model = fitted
    model.set_params(cold_start="raise")
    with pytest.raises(ValueError, match=f"user {user!r} was not seen at fit \\(1 rows with an "
                                         f"unseen user, 0 with an unseen item; "
                                         f"cold_start='raise'\\){hint}$"):
        model.predict(pd.DataFrame({"user": [user], "item": [0]}))
    with pytest.raises(ValueError, match=f"^user {user!r} was not seen at fit, nothing to "
                                         f"recommend \\(cold_start='raise'\\){hint}$"):
        model.recommend(user, n=3)
    model.set_params(cold_start="mean")
    with pytest.warns(UserWarning, match=f"^user {user!r} was not seen at fit: "
                                         f"cold_start='mean' ranks the items by mu \\+ b_i"
                                         f"{hint}$") as caught:
        items, scores = model.recommend(user, n=3)
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line
    assert scores.dtype == np.float64
    np.testing.assert_allclose(scores, np.sort(model.global_mean_ + model.item_bias_.astype(
        np.float64))[::-1][:3])
    for mode in ("nan", "drop"):
        model.set_params(cold_start=mode)
        with pytest.warns(UserWarning, match=f"^user {user!r} was not seen at fit: "
                                             f"cold_start='{mode}' recommends nothing{hint}$"):
            items, scores = model.recommend(user, n=3)
        assert items.shape == scores.shape == (0,) and scores.dtype == np.float64
    model.set_params(cold_start="raise")
    items, scores = model.recommend(model.user_ids_[0], n=3)  # a known user: no warning
    assert items.shape == (3,) and scores.dtype == np.float64


def test_a_model_with_repeated_ids_is_refused_naming_the_attribute(fitted):
    """A model whose user_ids_ repeat an id (edited, or saved by broken code) looked its
    users up with wrong codes or pandas' "uniquely valued Index" error; now it names the
    attribute and the position."""
    import copy

    model = copy.copy(fitted)
    ids = fitted.user_ids_.copy()
    ids[5] = ids[4]
    model.user_ids_ = ids
    message = f"^user_ids_\\[5\\] = {ids[4]} repeats user_ids_\\[4\\] = {ids[4]}: "
    with pytest.raises(DataError, match=message):
        model.predict(pd.DataFrame({"user": [ids[6]], "item": [fitted.item_ids_[0]]}))
    with pytest.raises(DataError, match=message):
        model.recommend(ids[6], n=3)


# -- string ids that are integers; evaluate warns as predict does -----------------------------
def test_string_test_ids_that_are_integers_match_a_model_of_integer_ids(fitted):
    """A test file with one id "bob" is read as string ids: every id then missed a model
    fitted with int ids (n_unseen_users 300 of 300, no warning). Now "12" is the id 12 (and
    "bob", "12.5", " 12" unseen), and evaluate warns with the counts as predict does."""
    import dask.dataframe as dd

    model = fitted
    model.set_params(cold_start="mean")
    test = toy(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # seen users and items: no warning
        want = model.evaluate(test)
        as_text = model.evaluate(test.astype({"user": str, "item": str}))
    assert want["n_unseen_users"] == want["n_unseen_items"] == 0
    assert as_text == want
    odd = test.astype({"user": str})
    odd.loc[[3, 7, 8, 9], "user"] = ["bob", "12.5", " 12", "+12"]
    with pytest.warns(UserWarning, match=r"^4 rows with a user and 0 with an item not seen at "
                                         r"fit: scored by cold_start='mean'$") as caught:
        got = model.evaluate(odd)
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line
    assert (got["n_unseen_users"], got["n_unseen_items"], got["n_ratings"]) == (4, 0, 300)
    with pytest.warns(UserWarning, match=r"^4 rows with a user and 0 with an item not seen at "
                                         r"fit: predicted by cold_start='mean'$") as caught:
        pred = model.predict(odd)
    assert len(caught) == 1 and caught[0].filename == __file__
    np.testing.assert_allclose(np.delete(pred, [3, 7, 8, 9]),
                               np.delete(model.predict(test), [3, 7, 8, 9]), rtol=1e-12)
    with pytest.warns(UserWarning, match="^4 rows with a user and 0 with an item"):
        assert model.evaluate(dd.from_pandas(odd, npartitions=3)) == pytest.approx(got)
    model.set_params(cold_start="drop")
    with pytest.warns(UserWarning, match=r"^4 rows with a user and 0 with an item not seen at "
                                         r"fit: left out by cold_start='drop'$"):
        assert model.evaluate(odd)["n_ratings"] == 296
    model.set_params(cold_start="raise")
    with pytest.raises(ValueError, match=r"^user 'bob' was not seen at fit \(4 rows"):
        model.evaluate(odd)
