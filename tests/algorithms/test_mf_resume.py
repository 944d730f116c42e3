"""MatrixFactorization checkpoints: a resume goes on with the saved users and items."""

import numpy as np
import pytest

from dask_ps import MatrixFactorization

pytestmark = pytest.mark.timeout(300)


def ratings(n_users=60, n_items=40, n=2000, seed=0):
    """Seeded (user, item, rating) rows of a planted rank-3 model."""
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(n_users, 3)), rng.normal(size=(n_items, 3))
    u, i = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    r = np.clip(3 + 0.5 * (U[u] * V[i]).sum(1) + rng.normal(0, 0.3, n), 1, 5)
    return np.column_stack([u, i, r])


def losses(model) -> list[float]:
    return [h["loss"] for h in model.history_ if "loss" in h]


@pytest.mark.parametrize("solver", ["als", "sgd"])
def test_a_resume_of_a_finished_fit_returns_the_saved_model(tmp_path, solver):
    """A checkpoint held the item table only: resubmitting a finished fit unchanged (resume
    with nothing left to train) returned ALS's initial, zero user factors (train RMSE 0.84
    -> 1.00 on MovieLens) and SGD's users solved anew from the items, another model. The
    users are now saved with the items; a resume in the middle goes on as the uninterrupted
    fit does."""
    X = ratings()
    kw = dict(solver=solver, n_components=4, random_state=0, client="local")
    ck = str(tmp_path / "ck")
    first = MatrixFactorization(max_iter=4, checkpoint=ck, **kw).fit(X)
    again = MatrixFactorization(max_iter=4, checkpoint=ck, resume=True, **kw).fit(X)
    tol = 1e-12 if solver == "als" else 1e-6  # the rows pass the table as pushed changes
    np.testing.assert_allclose(again.item_factors_, first.item_factors_, rtol=0, atol=tol)
    np.testing.assert_allclose(again.user_factors_, first.user_factors_, rtol=0, atol=tol)
    np.testing.assert_allclose(again.user_bias_, first.user_bias_, rtol=0, atol=tol)
    np.testing.assert_allclose(again.predict(X), first.predict(X), rtol=0, atol=10 * tol)
    assert losses(again) == losses(first)

    half = str(tmp_path / "half")
    MatrixFactorization(max_iter=2, checkpoint=half, **kw).fit(X)
    resumed = MatrixFactorization(max_iter=4, checkpoint=half, resume=True, **kw).fit(X)
    np.testing.assert_allclose(losses(resumed), losses(first), rtol=1e-6)
    np.testing.assert_allclose(resumed.predict(X), first.predict(X), rtol=0, atol=1e-5)


def test_a_checkpoint_of_other_ids_is_refused_naming_them(tmp_path):
    """Only the tables' shapes were compared: a resume onto other items of the same count
    went on silently, item 1000 with the factors item 0 was saved with. The checkpoint now
    records the fit's solver and id sets; other ones are refused before anything is
    restored, naming what differs, and the same fit still resumes."""
    from dask_ps.exceptions import OptionError
    from dask_ps.model import format as ck

    X = ratings(n=600)
    url = str(tmp_path / "ck")
    kw = dict(n_components=3, random_state=0, client="local", checkpoint=url, resume=True)
    MatrixFactorization(max_iter=2, **kw).fit(X)
    versions = ck.list_versions(url)
    other_items = X.copy()
    other_items[:, 1] += 1000
    with pytest.raises(OptionError, match=r"holds another fit: item_ids '[0-9a-f]{64}' "
                                          r"\(this fit's: '[0-9a-f]{64}'\); resume with"):
        MatrixFactorization(max_iter=3, **kw).fit(other_items)
    other_users = X.copy()
    other_users[:, 0] += 500  # the same user count, other users
    with pytest.raises(OptionError, match=r"user_ids '[0-9a-f]{64}' \(this fit's: "):
        MatrixFactorization(max_iter=3, **kw).fit(other_users)
    assert ck.list_versions(url) == versions  # nothing restored nor saved
    resumed = MatrixFactorization(max_iter=3, **kw).fit(X)
    assert [h["epoch"] for h in resumed.history_] == [1, 2, 3]


def test_a_checkpoint_of_the_item_table_alone_is_refused_as_such(tmp_path):
    """A checkpoint written before the users were kept (the item table alone) was refused
    as "tables ['item'] (this fit's: ['item', 'user'])", as if the data or parameters had
    changed; the refusal now says what it is, and nothing is restored or saved."""
    from dask_ps import PSModel
    from dask_ps.exceptions import OptionError
    from dask_ps.model import format as ck

    url = str(tmp_path / "ck")
    old = PSModel("local")
    old.add_table("item", (40, 5), "float32")
    old.save(url, clock=2)
    old.close()
    versions = ck.list_versions(url)
    with pytest.raises(OptionError, match=r"version 1 holds the item factors only: a dask_ps "
                                          r"before 2026-12-06 wrote it"):
        MatrixFactorization(n_components=4, max_iter=4, checkpoint=url, resume=True,
                            client="local").fit(ratings())
    assert ck.list_versions(url) == versions
