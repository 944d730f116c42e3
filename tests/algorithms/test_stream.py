"""A stream of partial_fit calls into a checkpoint (algorithms/_stream.py): whether the
stream's newest version still holds the model is known without reading the model whole, and
every change of the model, the parameters or the estimator object is still seen."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps import LogisticRegression
from dask_ps.algorithms._stream import SAMPLES, StateMark
from dask_ps.model.format import latest, list_versions

pytestmark = pytest.mark.timeout(300)


def _batches(n, rows=300, d=20, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        X = sp.random(rows, d, density=0.3, format="csr", random_state=rng)
        out.append((X, (np.asarray(X[:, :3].sum(axis=1)).ravel() > 0.4).astype(int)))
    return out


def _stream(url, d=20):
    """An estimator two batches into a stream: versions 1 (before batch 1), 2, 3."""
    est = LogisticRegression(client="local", solver="ftrl", random_state=0, checkpoint=url)
    for X, y in _batches(2, d=d):
        est.partial_fit(X, y, classes=[0, 1])
    assert latest(url).version == 3
    return est


class Counted:
    """A fitted attribute that counts how often it is pickled (e.g. to be hashed)."""

    pickled = 0

    def __reduce__(self):
        Counted.pickled += 1
        return Counted, ()


def test_a_stream_does_not_pickle_the_model_to_know_its_last_version_holds_it(tmp_path):
    """Each partial_fit hashed the pickled fitted attributes twice (after its batch, and
    before the next one's, to compare): O(model size) per batch, ~0.8 s at 4.3M keys. A
    mark of each attribute's identity, shape, dtype and a few values replaces the hash;
    the stream still saves one version per batch."""
    url = str(tmp_path / "ck")
    est = _stream(url)
    est.extra_ = Counted()  # a new attribute: the next call saves before its batch
    X, y = _batches(1, seed=1)[0]
    est.partial_fit(X, y)
    assert list_versions(url) == ([4, 5], [])
    Counted.pickled = 0
    for n, (X, y) in enumerate(_batches(3, seed=2), start=6):
        est.partial_fit(X, y)
        assert latest(url).version == n  # one version per batch
    assert Counted.pickled == 0


@pytest.mark.parametrize("edit", [
    lambda est: setattr(est, "coef_", est.coef_ * 2.0),  # another object
    lambda est: est.intercept_.__iadd__(1.0),  # in place, a small array: every value
    lambda est: est.coef_.__setitem__((0, 0), 5.0),  # in place, a sampled value
    lambda est: est._ps_state_.state.__imul__(0.5),  # the update rule's state, in place
    lambda est: delattr(est, "n_iter_"),
    lambda est: est.set_params(progress=False),  # the version was written under others
], ids=["coef_ assigned", "intercept_ in place", "coef_ value in place", "state in place",
        "attribute deleted", "set_params"])
def test_a_model_changed_between_batches_is_saved_before_the_next_one(tmp_path, edit):
    url = str(tmp_path / "ck")
    est = _stream(url, d=SAMPLES + 100)  # coef_ (1, 4196): sampled, not read whole
    edit(est)
    X, y = _batches(1, d=SAMPLES + 100, seed=1)[0]
    est.partial_fit(X, y)
    assert list_versions(url) == ([4, 5], [])  # the model as edited, then after the batch


@pytest.mark.parametrize("twin", [lambda est: pickle.loads(pickle.dumps(est)), copy.deepcopy],
                         ids=["pickled", "deep-copied"])
def test_a_copy_of_a_streaming_estimator_pickles_and_saves_its_model_first(tmp_path, twin):
    """An estimator mid-stream pickles and copies (its record of the last version holds
    weak references); the copy's arrays are other objects, so its first batch saves its
    model before training, as a stream's first batch does."""
    url = str(tmp_path / "ck")
    est = _stream(url)
    other = twin(est)
    X, y = _batches(1, seed=1)[0]
    other.partial_fit(X, y)
    assert list_versions(url) == ([4, 5], [])


def test_a_failed_batch_leaves_the_stream_saving_one_version_per_batch(tmp_path):
    """A partial_fit that fails puts the attributes back (the same objects): the stream's
    newest version still holds the model and the next batch saves one version."""
    url = str(tmp_path / "ck")
    est = _stream(url)
    X, y = _batches(1, seed=1)[0]
    with pytest.raises(ValueError, match="X has 5 features"):
        est.partial_fit(X[:, :5], y)
    est.partial_fit(X, y)
    assert latest(url).version == 4 and list_versions(url) == ([3, 4], [])


def test_a_state_mark_sees_reassignment_shape_and_sampled_values_of_wide_arrays():
    """O(SAMPLES) per array whatever its size: a change in place of the values it samples
    (a scaled array, its first or last value) is seen; a pickled mark holds nothing."""
    rng = np.random.default_rng(0)
    est = LogisticRegression()
    est.coef_ = sp.random(1, 2**22, density=0.01, format="csr", random_state=0)
    est.w_ = rng.normal(size=(2**20, 2))
    est.n_features_in_ = 2**22
    mark = StateMark(est)
    assert mark.holds(est) and not StateMark().holds(est)
    assert not pickle.loads(pickle.dumps(mark)).holds(est)
    for change, undo in [
            (lambda: est.coef_.data.__imul__(2.0), lambda: est.coef_.data.__imul__(0.5)),
            (lambda: est.w_.__setitem__((-1, -1), 7.0), None),
            (lambda: setattr(est, "w_", est.w_.copy()), None),
            (lambda: setattr(est, "w_", est.w_.reshape(2, -1)), None),
            (lambda: setattr(est, "n_features_in_", 5), None)]:
        mark = StateMark(est)
        change()
        assert not mark.holds(est)
        if undo is not None:
            undo()
            assert mark.holds(est)  # (values compared, not a count of changes)
