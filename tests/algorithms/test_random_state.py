"""``random_state`` of every estimator: an int, None (seed 0) or a ``np.random.RandomState``
drawn from once per fit, as scikit-learn does; a ``np.random.Generator`` is refused."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import dask_ps as D

pytestmark = pytest.mark.timeout(600)

#: The seed a fit with ``RandomState(0)`` draws (scikit-learn's ``randint(int32 max)``).
DRAWN = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))


def _cases():
    rng = np.random.default_rng(0)
    X = sp.random(300, 20, density=0.3, format="csr", random_state=1)
    y = (np.asarray(X.sum(axis=1)).ravel() > 1.5).astype(int)
    ratings = np.column_stack([rng.integers(0, 30, 600), rng.integers(0, 20, 600),
                               rng.integers(1, 6, 600)]).astype(float)
    counts = sp.csr_matrix(rng.poisson(0.3, (60, 40)).astype(np.float64))
    return {
        "LR": (lambda **kw: D.LogisticRegression(max_iter=2, **kw), (X, y),
               lambda m: m.coef_),
        # the factors are drawn from the seed twice in a fit (their start, and the orders)
        "FM": (lambda **kw: D.FactorizationMachineClassifier(n_components=2, max_iter=2, **kw),
               (X, y), lambda m: m.factors_),
        "MF": (lambda **kw: D.MatrixFactorization(n_components=4, max_iter=2, **kw), (ratings,),
               lambda m: np.concatenate([m.item_factors_.ravel(), m.user_factors_.ravel()])),
        "LDA": (lambda **kw: D.LatentDirichletAllocation(n_components=3, max_iter=3, **kw),
                (counts,), lambda m: m.components_),
        "GBDT": (lambda **kw: D.GBDTClassifier(n_estimators=3, max_leaf_nodes=4,
                                               min_samples_leaf=2, subsample=0.5,
                                               colsample_bytree=0.5, **kw),
                 (X.toarray(), y), lambda m: m.predict_proba(X.toarray())),
    }


CASES = _cases()


def _fit(name, random_state, client="local", **kw):
    make, args, fingerprint = CASES[name]
    est = make(random_state=random_state, client=client, **kw)
    out = fingerprint(est.fit(*args))
    return est, (out.toarray() if sp.issparse(out) else np.asarray(out))


@pytest.mark.parametrize("name", list(CASES))
def test_a_random_state_instance_seeds_the_fit_once(name):
    """``random_state=np.random.RandomState(0)`` was refused by every estimator. Two
    instances of the same seed now fit the same model, the model of the int seed drawn
    from it once (every part of the fit uses that one draw; FM asks for its seed twice),
    and another seed fits another model (the seed matters here)."""
    est, first = _fit(name, np.random.RandomState(0))
    _, again = _fit(name, np.random.RandomState(0))
    _, drawn = _fit(name, DRAWN)
    _, other = _fit(name, 1)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, drawn)
    assert not np.array_equal(first, other)
    assert isinstance(est.get_params()["random_state"], np.random.RandomState)
    assert "_call_seed" not in vars(est)  # the fit's draw is forgotten after it


@pytest.mark.parametrize("name", list(CASES))
def test_an_int_seed_is_the_seed_and_none_is_zero(name):
    make = CASES[name][0]
    assert make(random_state=7)._seed() == 7
    assert make(random_state=np.int64(7))._seed() == 7
    assert make(random_state=2**40)._seed() == 2**40
    assert make(random_state=None)._seed() == 0


def test_the_instance_advances_and_a_clone_copies_its_state():
    """As in scikit-learn: a second fit with the same instance draws another seed (another
    model); ``clone`` deep-copies the instance in its current state, so a clone made before
    a fit fits the same model as it."""
    rs = np.random.RandomState(0)
    est = CASES["MF"][0](random_state=rs, client="local")
    copy = clone(est)
    assert copy.random_state is not rs
    args, fingerprint = CASES["MF"][1:]
    first = fingerprint(est.fit(*args))
    second = fingerprint(est.fit(*args))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(fingerprint(copy.fit(*args)), first)


def test_all_workers_use_the_one_seed(client2):
    """On two worker processes, a RandomState's fit is the fit of the seed drawn from it."""
    for name in ("MF", "LR"):
        _, first = _fit(name, np.random.RandomState(0), client=client2)
        _, drawn = _fit(name, DRAWN, client=client2)
        np.testing.assert_array_equal(first, drawn)


def test_a_resume_with_a_fresh_instance_goes_on_as_the_uninterrupted_fit(tmp_path):
    """The seed is not part of a checkpoint's fit id; a resume with a fresh RandomState of
    the same seed draws the interrupted fit's seed and ends where the uninterrupted fit
    does."""
    args = CASES["MF"][1]
    kw = dict(n_components=4, client="local")
    whole = D.MatrixFactorization(max_iter=4, random_state=np.random.RandomState(0),
                                  checkpoint=str(tmp_path / "whole"), **kw).fit(*args)
    half = str(tmp_path / "half")
    D.MatrixFactorization(max_iter=2, random_state=np.random.RandomState(0), checkpoint=half,
                          **kw).fit(*args)
    resumed = D.MatrixFactorization(max_iter=4, random_state=np.random.RandomState(0),
                                    checkpoint=half, resume=True, **kw).fit(*args)
    np.testing.assert_allclose(resumed.predict(args[0]), whole.predict(args[0]), rtol=0,
                               atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_a_generator_is_refused_naming_it(name):
    """scikit-learn refuses a np.random.Generator; so does every estimator, saying what to
    pass instead, before anything is fitted."""
    make, args, _ = CASES[name]
    est = make(random_state=np.random.default_rng(0), client="local")
    with pytest.raises(ValueError, match=r"'random_state' parameter of \w+ is a "
                                         r"np.random.Generator.*pass an int seed"):
        est.fit(*args)
    assert not any(k.endswith("_") and not k.startswith("_") for k in vars(est))


def test_an_estimator_with_an_instance_is_not_saved_but_says_why(tmp_path):
    """save_estimator stores parameters without pickle: a RandomState is refused naming the
    parameter (set random_state to an int or None to save)."""
    from dask_ps.saving import save_estimator

    est, _ = _fit("MF", np.random.RandomState(0))
    with pytest.raises(TypeError, match="parameter random_state: a RandomState cannot be"):
        save_estimator(est, str(tmp_path / "m.npz"))
