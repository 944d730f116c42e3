"""MatrixFactorization's fitted model: the attributes' dtypes and layout, and what a fit
holds in memory."""

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
    model = MatrixFactorization(solver=solver, rank=4, max_iter=3, random_state=0,
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
