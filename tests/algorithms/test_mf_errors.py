"""MatrixFactorization's bad input: a bad rating of a dask dataframe named by its row in the
whole input, X of ids given with the mappings ``users=``/``items=``, and ``recommend``'s
arguments."""

import numpy as np
import pandas as pd
import pytest

from dask_ps import MatrixFactorization
from dask_ps.exceptions import DataError
from dask_ps.io.ids import IdMapping

pytestmark = pytest.mark.timeout(300)

FAST = dict(n_components=4, max_iter=2, random_state=0, progress=False)


def toy(seed=0):
    """300 ratings 1-5 of 30 users and 20 items."""
    rows = np.random.default_rng(seed).integers(0, [30, 20, 5], size=(300, 3)) + [0, 0, 1]
    return pd.DataFrame(rows, columns=["user", "item", "rating"]).astype({"rating": float})


# -- a bad rating of a dask dataframe: its row in the whole input ----------------------------
@pytest.mark.parametrize("where", ["cluster", "local"])
def test_a_bad_rating_of_a_dask_frame_is_named_by_its_row_in_the_whole_input(client2, where):
    """The ratings were checked after the shuffle by user: the row named was a position in a
    shuffled partition (409 for row 1234 of MovieLens, trial 9), without the partition."""
    import dask.dataframe as dd

    client = client2 if where == "cluster" else "local"
    df = toy()
    df.loc[250, "rating"] = np.nan  # 3 partitions of 100 rows: row 50 of partition 2
    msg = "^X column 'rating': rating nan at row 250 is not finite$"
    with pytest.raises(DataError, match=msg):
        MatrixFactorization(client=client, **FAST).fit(df)
    with pytest.raises(DataError, match=msg):
        MatrixFactorization(client=client, **FAST).fit(dd.from_pandas(df, npartitions=3))
    df.loc[130, "rating"] = np.inf  # the first bad row of the input is named
    with pytest.raises(DataError, match="^X column 'rating': rating inf at row 130 is not "
                                        "finite$"):
        MatrixFactorization(client=client, **FAST).fit(dd.from_pandas(df, npartitions=3))


def test_a_bad_rating_of_a_dask_array_is_named_by_its_row(client2):
    import dask.array as da

    R = toy().to_numpy(float)
    R[170, 2] = np.nan
    with pytest.raises(DataError, match="^X column 'rating': rating nan at row 170 is not "
                                        "finite$"):
        MatrixFactorization(client=client2, **FAST).fit(da.from_array(R, chunks=(70, 3)))


@pytest.mark.parametrize("where", ["cluster", "local"])
def test_evaluate_names_a_bad_row_of_a_dask_input_by_its_row_in_the_whole_input(client2,
                                                                                where):
    """evaluate named "row 50 ... (row counted within partition 2 of X)" where fit names
    row 250 of the input; the first bad row of the input is named (an earlier partition's
    too), for a dask dataframe and a dask array."""
    import dask.array as da
    import dask.dataframe as dd

    model = MatrixFactorization(client=client2 if where == "cluster" else "local",
                                **FAST).fit(toy())
    df = toy(1)
    df.loc[250, "rating"] = np.nan  # 3 partitions of 100 rows: row 50 of partition 2
    for X in (dd.from_pandas(df, npartitions=3), da.from_array(df.to_numpy(), chunks=(100, 3))):
        with pytest.raises(DataError, match=r"^X column 'rating': rating nan at row 250 is "
                                            r"not finite$"):
            model.evaluate(X)
    df = df.astype({"item": float})
    df.loc[130, "item"] = 1.5  # an earlier bad row, of another column
    with pytest.raises(DataError, match=r"^X column 'item': id 1.5 at row 130 is not an "
                                        r"integer$"):
        model.evaluate(dd.from_pandas(df, npartitions=3))
    assert model.evaluate(dd.from_pandas(toy(1), npartitions=3))["n_ratings"] == 300


@pytest.mark.parametrize("scheduler", ["cluster", "sync", "threads"])
def test_predict_on_dask_names_a_bad_id_by_its_row_in_the_whole_input(client2, scheduler):
    """Lazy: the row is counted when the result is computed, from within the task that finds
    it (on the cluster too); was "row 50 ... (row counted within partition 2 of X)"."""
    import dask.array as da
    import dask.dataframe as dd

    model = MatrixFactorization(client=client2, **FAST).fit(toy())
    df = toy(1).astype({"item": float})
    df.loc[250, "item"] = 1.5  # 3 partitions of 100 rows: row 50 of partition 2
    how = {} if scheduler == "cluster" else dict(scheduler=scheduler)
    frame = dd.from_pandas(df, npartitions=3)
    array = da.from_array(df.to_numpy(), chunks=(100, 3))  # columns named by position
    for X, col in ((frame, "'item'"), (array, r"1 \(item\)")):
        with pytest.raises(DataError, match=rf"^X column {col}: id 1.5 at row 250 is not an "
                                            r"integer$"):
            model.predict(X).compute(**how)
    df.loc[130, "user"] = np.nan  # an earlier bad row, of another column: named first
    for X, col in ((dd.from_pandas(df, npartitions=3), "'user'"),
                   (da.from_array(df.to_numpy(), chunks=(100, 3)), r"0 \(user\)")):
        with pytest.raises(DataError, match=rf"^X column {col}: id nan at row 130 is not an "
                                            r"integer$"):
            model.predict(X).compute(**how)
    good = model.predict(dd.from_pandas(toy(1), npartitions=3)).compute(**how)
    np.testing.assert_allclose(good.to_numpy(), model.predict(toy(1)))


# -- users= and items=: X holds their codes -------------------------------------------------
USERS, ITEMS = IdMapping([10, 20, 30]), IdMapping([100, 200])
CODES = pd.DataFrame({"user": [0, 1, 2, 0], "item": [0, 1, 0, 1], "rating": [3.0, 4, 5, 1]})
ADVICE = "with users= and items=, X holds the codes that read_ratings gives"


@pytest.mark.parametrize("col, value, row, shown, param", [
    ("item", 100, 0, "100", "items= \\(0..1\\)"),  # an id (was: "table 'item': key 100")
    ("user", 30, 2, "30", "users= \\(0..2\\)"),  # was: a bare IndexError
    ("user", 3, 3, "3", "users= \\(0..2\\)"),
    ("user", -1, 1, "-1", "users= \\(0..2\\)"),
    ("user", "b", 0, "'b'", "users= \\(0..2\\)"),  # was: invalid literal for int()
])
def test_ids_instead_of_codes_are_refused_naming_column_row_and_mapping(client2, col, value,
                                                                         row, shown, param):
    import dask.dataframe as dd

    X = CODES.astype({col: str}) if isinstance(value, str) else CODES.copy()
    X.loc[row, col] = value
    msg = f"^X column '{col}': {shown} at row {row} is not a code of {param}: {ADVICE}"
    with pytest.raises(DataError, match=msg):
        MatrixFactorization(client=client2, **FAST).fit(X, users=USERS, items=ITEMS)
    with pytest.raises(DataError, match=msg):
        MatrixFactorization(client=client2, **FAST).fit(dd.from_pandas(X, npartitions=2),
                                                        users=USERS, items=ITEMS)
    if not isinstance(value, str):  # an array: the column by position
        j = ("user", "item").index(col)
        with pytest.raises(DataError, match=f"^X column {j} \\({col}\\): {shown} at row {row}"):
            MatrixFactorization(client=client2, **FAST).fit(X.to_numpy(float), users=USERS,
                                                            items=ITEMS)


def test_codes_of_the_mappings_train_in_pandas_and_dask(client2):
    import dask.dataframe as dd

    for X in (CODES, dd.from_pandas(CODES, npartitions=2)):
        m = MatrixFactorization(client=client2, **FAST).fit(X, users=USERS, items=ITEMS)
        assert m.user_ids_.tolist() == [10, 20, 30] and m.item_ids_.tolist() == [100, 200]
        assert m.user_factors_.shape == (3, 4)


# -- recommend's arguments ------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    return MatrixFactorization(client="local", **FAST).fit(toy())


@pytest.mark.parametrize("user, shown", [([1, 2], "list \\[1, 2\\]"),
                                         (np.array([1]), "ndarray array\\(\\[1\\]\\)")])
def test_recommend_refuses_more_than_one_user_naming_the_parameter(fitted, user, shown):
    """Was: numpy's "only 0-dimensional arrays can be converted to Python scalars"."""
    with pytest.raises(TypeError, match=f"^user must be one user id \\(an int or a str\\), got "
                                        f"{shown}; call recommend for each user$"):
        fitted.recommend(user)


def test_recommend_takes_one_item_id_as_exclude(fitted):
    """Was: "'numpy.bool' object does not support item assignment"."""
    user = fitted.user_ids_[0]
    items, _ = fitted.recommend(user, n=len(fitted.item_ids_))
    top = items[0]
    for exclude in (top, int(top), [top], {int(top)}):
        got, _ = fitted.recommend(user, n=len(fitted.item_ids_), exclude=exclude)
        assert got.tolist() == items[1:].tolist()
    with pytest.raises(TypeError, match="^exclude must be item ids \\(a 1-d array-like\\) or "
                                        "one item id, got 2 dimensions$"):
        fitted.recommend(user, exclude=[[top]])


@pytest.mark.parametrize("n", [True, False, 0, 2.0])
def test_recommend_refuses_n_that_is_not_a_positive_integer(fitted, n):
    """True was taken as n=1 (the estimators' own integer parameters refuse booleans)."""
    with pytest.raises(ValueError, match=f"^n must be a positive integer, got {n!r}$"):
        fitted.recommend(fitted.user_ids_[0], n=n)


# -- y beside X of (user, item) rows: scikit-learn's rule for its shape ------------------------
def test_ratings_y_of_two_columns_are_refused_and_a_column_is_raveled():
    """A 2-D ``y`` failed in pandas ("Per-column arrays must each be 1-dimensional"), naming
    neither y nor its shape; scikit-learn refuses it and ravels a column with a warning."""
    from sklearn.exceptions import DataConversionWarning

    df = toy()
    X, y = df[["user", "item"]].to_numpy(), df["rating"].to_numpy()
    with pytest.raises(ValueError, match=r"y should be a 1d array, got an array of shape "
                                         r"\(300, 2\) instead"):
        MatrixFactorization(client="local", **FAST).fit(X, np.c_[y, y])
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = MatrixFactorization(client="local", **FAST).fit(X, y[:, None])
    flat = MatrixFactorization(client="local", **FAST).fit(X, y)
    np.testing.assert_array_equal(column.predict(X[:20]), flat.predict(X[:20]))


# -- divergence: one DivergenceError for both solvers, the model kept ---------------------
@pytest.mark.parametrize("params, said", [
    (dict(solver="sgd", init_std=1e300), r"solver='sgd'\): training diverged at epoch 1: "
     r"the item factors drawn with init_std=1e\+300 are not finite in float32; try a "
     r"smaller init_std"),
    (dict(solver="als", init_std=1e308), r"solver='als'\): training diverged at epoch 1: "
     r"the item factors drawn with init_std=1e\+308 are not finite in float64"),
    (dict(solver="sgd", init_std=1e30), r"solver='sgd'\): training diverged at epoch 1: "
     r"the errors or item factors are not finite; try a smaller learning_rate"),
    (dict(solver="als", init_std=1e200), r"solver='als'\): training diverged at epoch 1: "
     r"the user factors are not finite; try a larger reg")])
def test_divergence_of_either_solver_raises_divergence_error_and_keeps_the_model(params,
                                                                                  said):
    """SGD with an init_std past float32 failed in the item table's push ("table 'item':
    update for key 0 (position 0) is not finite"), a plain ValueError naming neither the
    solver nor the divergence, where ALS raises DivergenceError; now both solvers raise it
    (one check, ``_mf_steps.check_finite``), and the fitted model stays as it was."""
    import dask_ps

    df = toy()
    model = MatrixFactorization(solver=params["solver"], client="local", **FAST).fit(df)
    before = {k: np.copy(getattr(model, k)) for k in ("item_factors_", "user_factors_",
                                                      "item_bias_", "user_bias_")}
    with pytest.raises(dask_ps.DivergenceError, match=r"^MatrixFactorization\(" + said):
        model.set_params(**params).fit(df)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(model, k), v)


@pytest.mark.parametrize("solver, dtype, big, advice", [
    ("als", np.float64, 1e308, r"try a larger reg \(now 0.1\)"),
    ("sgd", np.float32, 3e38, r"try a smaller learning_rate \(now 0.06\) or a larger reg")])
def test_a_change_that_overflows_is_named_not_the_factors(solver, dtype, big, advice):
    """An item step whose new rows and old rows are finite but whose change (new - old,
    what is pushed) overflows was reported as "the item factors are not finite"; now the
    factors are checked first and the change is named as what overflowed. (No fit that
    gets there was found: the training errors, squared, overflowed first in every attempt,
    long before the factors came this near the dtype's largest value; so the step's check
    is exercised on rows made so.)"""
    import dask_ps
    from dask_ps.algorithms._mf_steps import check_finite, pushed_change

    cfg = dict(solver=solver, reg=0.1, learning_rate=0.06, dtype=np.dtype(dtype).name)
    new, old = np.array([[big, 1.0]], dtype), np.array([[-big, 0.5]], dtype)
    check_finite(cfg, 3, "the item factors are", new, old)  # both finite: no error
    with pytest.raises(dask_ps.DivergenceError, match=(
            rf"^MatrixFactorization\(solver='{solver}'\): training diverged at epoch 3: the "
            rf"item factors are finite, but their change pushed \(new - old, "
            rf"{np.dtype(dtype).name}\) is not finite; {advice}")):
        pushed_change(cfg, 3, "item factors", new, old)
    small = np.array([[2.0, 1.0]], dtype)  # a change that fits: new - old, in place
    out = pushed_change(cfg, 3, "item factors", small, old)
    assert out is small and out.dtype == dtype
    np.testing.assert_array_equal(out, np.array([[2.0 + big, 0.5]], dtype))


def test_sgd_ratings_past_float32_diverge_naming_the_mean():
    """The SGD kernel's float32 mean of ratings of 1e300 overflowed with a RuntimeWarning
    and was reported as a divergence to cure with a smaller learning rate."""
    import warnings

    import dask_ps

    df = toy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(dask_ps.DivergenceError, match=r"the mean rating 3.*e\+300 in "
                           r"float32 .* is not finite; scale the ratings down or use "
                           r"solver='als'"):
            MatrixFactorization(client="local", **FAST).fit(df.assign(rating=df.rating *
                                                                      1e300))


# -- ratings that are strings: scikit-learn's check_array(..., dtype="numeric") -----------
def test_ratings_of_strings_are_refused_and_numeric_objects_converted():
    """Ratings given as a NumPy array of strings or bytes were converted (``astype``) and
    trained on; scikit-learn's ``check_array(..., dtype="numeric")`` refuses such arrays
    (as the estimators refuse an X of strings), and converts an object array of numbers
    written as strings, as here; strings that are no numbers are refused naming one."""
    import dask.array as da
    from sklearn.utils import check_array

    df = toy()
    X, y = df[["user", "item"]].to_numpy(), df["rating"].to_numpy()
    said = "dtype='numeric' is not compatible with arrays of bytes/strings"
    with pytest.raises(ValueError, match=said):
        check_array(y.astype(str), dtype="numeric", ensure_2d=False)
    for bad in (y.astype(str), y.astype(bytes), y.astype(str).tolist()):
        with pytest.raises(DataError, match=r"^y: ratings have dtype [<|][US]\d+: " + said):
            MatrixFactorization(client="local", **FAST).fit(X, bad)
    text = np.c_[X, y].astype(str)  # string ids are ids, but the ratings are strings too
    for bad in (text, da.from_array(text, chunks=100)):
        with pytest.raises(DataError, match=r"^X column 2 \(rating\): ratings have dtype "
                                            r"<U\d+: " + said):
            MatrixFactorization(client="local", **FAST).fit(bad)
    with pytest.raises(DataError, match=r"^y: ratings must be numbers, got dtype object "
                                        r"\(could not convert string to float: 'a'\)"):
        MatrixFactorization(client="local", **FAST).fit(X, np.array(["a"] * 300, object))
    plain = MatrixFactorization(client="local", **FAST).fit(X, y)
    for ok in (y.astype(str).astype(object), pd.Series(y.astype(str))):
        np.testing.assert_array_equal(check_array(ok, dtype="numeric", ensure_2d=False), y)
        model = MatrixFactorization(client="local", **FAST).fit(X, ok)
        np.testing.assert_array_equal(model.predict(X[:20]), plain.predict(X[:20]))
    with pytest.raises(DataError, match=r"^y: ratings have dtype <U"):
        plain.evaluate(X, y.astype(str))
