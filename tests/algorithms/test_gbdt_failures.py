"""GBDT when things go wrong on a real LocalCluster (issue 14): a worker killed during a fit
ends in a recovery (with a checkpoint) or a clear error (without), never a hang; bad input on
a cluster gives the model of one process or a clear error."""

from __future__ import annotations

import os
import re
import signal
import time

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import NO_DASHBOARD, RESTART_WAIT
from sklearn.metrics import accuracy_score

from dask_ps import GBDTClassifier, GBDTRegressor
from dask_ps.cluster import worker_info
from dask_ps.exceptions import RecoveryError
from dask_ps.model._versions import CLAIM

# a hang guard only: the fits take seconds on an idle box, minutes when the box is shared
pytestmark = pytest.mark.timeout(900)


def _toy(n=3000, d=6, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, d))
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)


def _killer(client, after_round: int, killed: dict):
    """A callback that SIGKILLs the worker holding shard 1 once round ``after_round`` ends:
    the next round's job finds a task's worker and a shard gone."""

    def kill(record):
        if record.get("epoch") == after_round and not killed:
            victim = sorted(worker_info(client))[1]  # shards go round-robin: shard 1 there
            killed["victim"] = victim
            killed["at"] = time.monotonic()
            os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
        return False

    return kill


@pytest.mark.slow
def test_a_killed_worker_ends_the_fit_with_a_clear_error_or_a_recovery(client3, tmp_path):
    X, y = _toy()
    n = X.shape[0]
    # dask input: Dask recomputes the lost partitions from their source
    Xd, yd = da.from_array(X, chunks=(n // 6, -1)), da.from_array(y, chunks=n // 6)
    # every worker holds rows (max_workers=None): the killed one loses partitions too
    # best-first (split_share < 1): each round's gain floor comes from the round before,
    # across jobs (one per round here: callbacks) and the recovery
    kw = dict(n_estimators=6, max_leaf_nodes=15, random_state=0, n_shards=3, max_workers=None,
              split_share=0.3)
    ref = GBDTClassifier(client="local", **kw).fit(X, y)

    # no checkpoint: a RecoveryError naming the loss, soon after it (not a hang)
    killed: dict = {}
    with pytest.raises(RecoveryError):
        GBDTClassifier(client=client3, callbacks=[_killer(client3, 2, killed)],
                       **kw).fit(Xd, yd)
    assert killed, "the callback never ran"
    assert time.monotonic() - killed["at"] < 300
    client3.wait_for_workers(3, timeout=RESTART_WAIT)  # the nanny restarts it

    # a checkpoint: the fit recovers, the shards are set up again, the same trees come out
    killed = {}
    est = GBDTClassifier(client=client3, callbacks=[_killer(client3, 2, killed)],
                         checkpoint=str(tmp_path / "ck"), **kw).fit(Xd, yd)
    assert killed, "the callback never ran"
    events = [h for h in est.history_ if h.get("event") == "recovery"]
    assert len(events) == 1 and events[0]["lost_shards"] == [1], est.history_
    assert est.n_estimators_ == 6
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))
    client3.wait_for_workers(3, timeout=RESTART_WAIT)


def test_resume_goes_on_from_the_checkpoint_with_the_same_trees(client2, tmp_path):
    X, y = _toy()
    # best-first: the resumed rounds need the gain floor of the round before, too
    kw = dict(max_leaf_nodes=15, min_samples_leaf=5, random_state=0, split_share=0.1,
              client=client2)
    ck = str(tmp_path / "ck")
    GBDTClassifier(n_estimators=3, checkpoint=ck, **kw).fit(X, y)
    grown = []
    resumed = GBDTClassifier(n_estimators=6, checkpoint=ck, resume=True,
                             callbacks=[lambda r: grown.append(r["epoch"]) and False],
                             **kw).fit(X, y)
    assert grown == [4, 5, 6]  # rounds 1-3 came from the checkpoint
    whole = GBDTClassifier(n_estimators=6, **kw).fit(X, y)
    assert resumed.n_estimators_ == 6
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))
    # fewer rounds than the checkpoint holds: its first ones, nothing grown
    grown.clear()
    fewer = GBDTClassifier(n_estimators=4, checkpoint=ck, resume=True,
                           callbacks=[lambda r: grown.append(r["epoch"]) and False],
                           **kw).fit(X, y)
    assert fewer.n_estimators_ == 4 and grown == []
    np.testing.assert_array_equal(fewer.predict_proba(X),
                                  GBDTClassifier(n_estimators=4, **kw).fit(X, y).predict_proba(X))
    # other data, or an eval set its eval losses are not of: a clear error, and the
    # checkpoint is left as it was
    versions = sorted(os.listdir(ck))
    with pytest.raises(ValueError, match=r"holds no version of this fit: .*holds another "
                                         r"fit: rows 3000 \(this fit's: 2000\)"):
        GBDTClassifier(n_estimators=8, checkpoint=ck, resume=True, **kw).fit(X[:2000],
                                                                               y[:2000])
    with pytest.raises(ValueError, match=r"another fit.*eval_rows None \(this fit's: 500\)"):
        GBDTClassifier(n_estimators=8, checkpoint=ck, resume=True, **kw).fit(
            X, y, eval_set=[(X[:500], y[:500])])
    assert sorted(os.listdir(ck)) == versions
    # with the same eval set: goes on, as a whole fit with it
    ev, ck2 = [(X[:500], y[:500])], str(tmp_path / "ck2")
    GBDTClassifier(n_estimators=3, checkpoint=ck2, **kw).fit(X, y, eval_set=ev)
    resumed = GBDTClassifier(n_estimators=5, checkpoint=ck2, resume=True, **kw).fit(
        X, y, eval_set=ev)
    whole = GBDTClassifier(n_estimators=5, **kw).fit(X, y, eval_set=ev)
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))
    # a checkpoint that stopped early goes on when this fit does not stop early
    ck3 = str(tmp_path / "ck3")
    stopped = GBDTClassifier(n_estimators=60, early_stopping_rounds=1, learning_rate=1.0,
                             checkpoint=ck3, **kw).fit(X, y, eval_set=ev)
    assert len(stopped.history_) < 60, "the fit did not stop early: no case"
    again = GBDTClassifier(n_estimators=len(stopped.history_) + 3, learning_rate=1.0,
                           checkpoint=ck3, resume=True, **kw).fit(X, y, eval_set=ev)
    assert again.n_estimators_ == len(stopped.history_) + 3


def test_resume_refuses_another_eval_set_of_as_many_rows(client2, tmp_path):
    """The fit id kept the eval set's row count only: a resume with another eval set of as
    many rows went on with early-stopping losses of the first. Now the eval set's labels and
    features are fingerprinted where they live (in the pass that checks them): another set
    is refused naming what differs, the checkpoint untouched; the same set resumes, as
    NumPy or as a dask array of other partitions."""
    X, y = _toy()
    kw = dict(max_leaf_nodes=15, random_state=0, client=client2)
    ck = str(tmp_path / "ck")
    A = (X[:500], y[:500])
    GBDTClassifier(n_estimators=3, checkpoint=ck, **kw).fit(X, y, eval_set=[A])
    versions = sorted(os.listdir(ck))
    flipped = y[:500].copy()
    flipped[::7] = 1 - flipped[::7]
    for other, differs in (((X[:500], flipped), "eval_labels"),
                           ((X[500:1000], y[:500]), "eval_features")):
        with pytest.raises(ValueError, match=rf"another fit.*{differs} '[0-9a-f]{{16}}' "
                                             rf"\(this fit's: '[0-9a-f]{{16}}'\)") as err:
            GBDTClassifier(n_estimators=5, checkpoint=ck, resume=True, **kw).fit(
                X, y, eval_set=[other])
        assert "eval_rows" not in str(err.value)
    assert sorted(os.listdir(ck)) == versions
    grown = []
    resumed = GBDTClassifier(n_estimators=5, checkpoint=ck, resume=True,
                             callbacks=[lambda r: grown.append(r["epoch"]) and False],
                             **kw).fit(X, y, eval_set=[A])
    assert grown == [4, 5]
    whole = GBDTClassifier(n_estimators=5, **kw).fit(X, y, eval_set=[A])
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))
    Ad = (da.from_array(A[0], chunks=(130, -1)), da.from_array(A[1], chunks=130))
    again = GBDTClassifier(n_estimators=6, checkpoint=ck, resume=True, **kw).fit(
        X, y, eval_set=[Ad])
    assert again.n_estimators_ == 6


def test_resume_refuses_other_training_data_of_the_same_shape(client2, tmp_path):
    """The fit id knew the training data by its rows, features and bins only: a resume on
    other rows of the same shape whose bins came out the same (other labels, a nudged
    value, the rows reversed) went on with trees grown on the first data. Now it knows them
    by the checksums of their labels and features, taken in the survey: other data is
    refused naming what differs, the checkpoint untouched; the same data resumes, as NumPy
    or as a dask array cut at other rows."""
    X, y = _toy()
    kw = dict(max_leaf_nodes=15, random_state=0, client=client2, max_workers=None)
    ck = str(tmp_path / "ck")
    GBDTClassifier(n_estimators=3, checkpoint=ck, **kw).fit(X, y)
    versions = sorted(os.listdir(ck))
    flipped = y.copy()
    flipped[::7] = 1 - flipped[::7]
    nudged = X.copy()
    nudged[1234, 3] = np.nextafter(nudged[1234, 3], 9.0)  # the bins stay the same
    cases = (((X, flipped), ["train_labels"]), ((nudged, y), ["train_features"]),
             ((X[::-1], y[::-1]), ["train_features", "train_labels"]))
    for (Xo, yo), differs in cases:
        with pytest.raises(ValueError, match="holds no version of this fit: .*holds another "
                                             "fit") as err:
            GBDTClassifier(n_estimators=5, checkpoint=ck, resume=True, **kw).fit(Xo, yo)
        said = str(err.value)
        for key in differs:
            assert re.search(rf"{key} '[0-9a-f]{{16}}' \(this fit's: '[0-9a-f]{{16}}'\)",
                             said), said
        assert "checksum" in said and "training data" in said, said
        assert not re.search(r"(: |; )(rows|bins) ", said), said
    assert sorted(os.listdir(ck)) == versions
    rows = ((1000, 2000),)
    Xd, yd = da.from_array(X, chunks=(*rows, (6,))), da.from_array(y, chunks=rows)
    resumed = GBDTClassifier(n_estimators=5, checkpoint=ck, resume=True, **kw).fit(Xd, yd)
    whole = GBDTClassifier(n_estimators=5, **kw).fit(X, y)
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))


@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
def test_resume_takes_the_newest_version_of_this_fit_in_a_shared_folder(client2, tmp_path):
    """A GBDT fit saved into a folder where another fit saved since: resume=True raised
    ("the checkpoint holds another fit") though the folder held its own versions, where
    LR, MF and LDA resume from their newest one. GBDT tells its versions by the same test
    now (its trees' fit id among them): it resumes from its newest version, warning which
    versions it skipped and what they hold, to the trees of a whole fit; a fit none of
    whose versions is there is refused naming the folder, nothing saved."""
    from dask_ps.model import format as ck

    X, y = _toy()
    kw = dict(max_leaf_nodes=15, random_state=0, client=client2)
    url = str(tmp_path / "ck")
    GBDTClassifier(n_estimators=3, checkpoint=url, **kw).fit(X, y)
    own = ck.list_versions(url)[0]
    GBDTClassifier(n_estimators=2, checkpoint=url, **kw).fit(X[:2000], y[:2000])  # another
    others = [v for v in ck.list_versions(url)[0] if v not in own][::-1]
    grown = []
    with pytest.warns(UserWarning, match=rf"versions {others[0]} and {others[1]}: each holds "
                                         rf"another fit: rows 2000 \(this fit's: 3000\)"
                                         rf".*skipped, using version "
                                         rf"{own[-1]}, the newest of this fit") as seen:
        resumed = GBDTClassifier(n_estimators=5, checkpoint=url, resume=True,
                                 callbacks=[lambda r: grown.append(r["epoch"]) and False],
                                 **kw).fit(X, y)
    assert __file__ in [w.filename for w in seen]
    assert grown == [4, 5]  # rounds 1-3 came from its own version
    whole = GBDTClassifier(n_estimators=5, **kw).fit(X, y)
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))
    versions = ck.list_versions(url)[0]
    with pytest.raises(ValueError, match=rf"^resume: checkpoint {re.escape(repr(url))} holds "
                                         rf"no version of this fit: .*each holds another fit: "
                                         rf"rows (3000|2000) \(this fit's: 1000\)"):
        GBDTClassifier(n_estimators=5, checkpoint=url, resume=True, **kw).fit(X[:1000],
                                                                                y[:1000])
    assert ck.list_versions(url)[0] == versions  # nothing saved


def test_resume_goes_on_in_other_partitions_and_on_other_shards(client2, tmp_path):
    """The histogram table's size follows the number of partitions and of shards, and the
    checkpoint kept it: a resume of the same data read in other blocks (dask-ps train's
    default: two per worker, so another cluster size) or on other shards was refused as
    "another fit: table 'hist': rows 59071 (this fit's: 59075); resume with the same data
    and parameters". The table is empty between rounds: checkpoints keep the trees only,
    and the resumed fit grows the trees of a whole fit."""
    X, y = _toy()
    kw = dict(max_leaf_nodes=15, random_state=0, client=client2, max_workers=None)
    ck = str(tmp_path / "ck")
    GBDTClassifier(n_estimators=3, checkpoint=ck, **kw).fit(X, y)  # 2 partitions, 1 shard
    grown = []
    Xd, yd = da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700)
    resumed = GBDTClassifier(n_estimators=5, checkpoint=ck, resume=True, n_shards=2,
                             callbacks=[lambda r: grown.append(r["epoch"]) and False],
                             **kw).fit(Xd, yd)
    assert grown == [4, 5]
    whole = GBDTClassifier(n_estimators=5, **kw).fit(X, y)
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))
    for version in os.listdir(ck):  # the trees, no table (and the save's claim of it)
        assert sorted(os.listdir(os.path.join(ck, version))) == [CLAIM, "manifest.json",
                                                                 "zarr.json"]


def test_changed_trees_in_a_checkpoint_resume_from_the_version_before(tmp_path):
    """A GBDT checkpoint keeps its trees in its version's attributes (zarr.json), which no
    check covered: leaf values changed there (still JSON and base64: bit rot, an edit)
    resumed with the changed trees; trees cut short or lost said numpy's "cannot reshape
    array of size 110 into shape (116,)" or KeyError 'trees'. Now the manifest keeps the
    checksum of the metadata: the resume goes on from the version before, to the trees of a
    whole fit; a checkpoint written before the checksums names its damaged trees."""
    import base64
    import json

    from dask_ps.exceptions import CheckpointFormatError
    from dask_ps.model.format import TornCheckpointWarning

    X, y = _toy()
    kw = dict(max_leaf_nodes=15, random_state=0, client="local")
    ck = tmp_path / "ck"
    GBDTClassifier(n_estimators=4, checkpoint=str(ck), **kw).fit(X, y)
    newest = sorted(ck.iterdir())[-1]
    meta = json.loads((newest / "zarr.json").read_text())
    value = meta["attributes"]["extra"]["driver"]["trees"]["value"]
    doubled = 2 * np.frombuffer(base64.b64decode(value["b64"]), value["dtype"])
    value["b64"] = base64.b64encode(doubled.tobytes()).decode()
    (newest / "zarr.json").write_text(json.dumps(meta))
    with pytest.warns(TornCheckpointWarning, match=f"version {int(newest.name[1:])} is "
                                                   f"damaged \\(zarr.json changed"):
        resumed = GBDTClassifier(n_estimators=6, checkpoint=str(ck), resume=True,
                                 **kw).fit(X, y)
    whole = GBDTClassifier(n_estimators=6, **kw).fit(X, y)
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))

    # written before the manifest kept checksums: the trees' damage is named
    old = tmp_path / "old"
    GBDTClassifier(n_estimators=2, checkpoint=str(old), **kw).fit(X, y)
    _edit_unchecked(old, lambda driver: driver.pop("trees"))
    with pytest.raises(CheckpointFormatError, match=r"the trees of the checkpoint to resume "
                                                    r"from cannot be read \(KeyError: "
                                                    r"'trees'\): it is damaged"):
        GBDTClassifier(n_estimators=3, checkpoint=str(old), resume=True, **kw).fit(X, y)


def _edit_unchecked(folder, edit):
    """Make each version of the checkpoint ``folder`` one written before the manifest kept
    the metadata's checksums, and ``edit(driver)`` its saved driver state (a dict holding
    the trees, in place)."""
    import json

    for version in folder.iterdir():
        manifest = json.loads((version / "manifest.json").read_text())
        del manifest["metadata"]
        (version / "manifest.json").write_text(json.dumps(manifest))
        meta = json.loads((version / "zarr.json").read_text())
        edit(meta["attributes"]["extra"]["driver"])
        (version / "zarr.json").write_text(json.dumps(meta))


def test_trees_of_a_checkpoint_prediction_cannot_walk_are_refused(tmp_path):
    """A checkpoint written before its metadata was checksummed (or edited with the
    checksums recomputed) whose trees name a child outside the tree: the resume walked it
    in the raw scores' kernel, reading other memory (a segmentation fault, or a cycle: a
    hang); now its trees are refused naming the node."""
    import base64

    from dask_ps.exceptions import CheckpointFormatError

    X, y = _toy()
    kw = dict(max_leaf_nodes=15, random_state=0, client="local")
    old = tmp_path / "old"
    GBDTClassifier(n_estimators=2, checkpoint=str(old), **kw).fit(X, y)
    def child_outside(driver):
        left = driver["trees"]["left"]
        a = np.frombuffer(base64.b64decode(left["b64"]), left["dtype"]).copy()
        a[0] = 10**6
        left["b64"] = base64.b64encode(a.tobytes()).decode()

    _edit_unchecked(old, child_outside)
    with pytest.raises(CheckpointFormatError, match=r"the trees of the checkpoint to resume "
                                                    r"from do not fit together \(ValueError: "
                                                    r"the trees are damaged: node 0 \(of tree "
                                                    r"0\) has children outside its tree"):
        GBDTClassifier(n_estimators=3, checkpoint=str(old), resume=True, **kw).fit(X, y)


def test_a_checkpoint_without_trees_is_named_as_such_on_resume(tmp_path):
    """A GBDT checkpoint written by a dask_ps that did not keep the trees (no driver state
    in its metadata) was refused as "holds no version of this fit: versions 3 and 2: each
    holds another fit: no trees (...); resume with the same data and parameters": the
    same data and parameters were given. The resume now names the folder, the versions and
    the field missing (the trees), and says this fit cannot resume from them; nothing is
    saved."""

    X, y = _toy(n=600)
    kw = dict(max_leaf_nodes=7, random_state=0, client="local")
    old = tmp_path / "old"
    GBDTClassifier(n_estimators=2, checkpoint=str(old), **kw).fit(X, y)
    versions = sorted(os.listdir(old))
    _as_written_before(old, "driver")  # no trees, no checksums of metadata
    numbers = sorted((int(v[1:]) for v in versions), reverse=True)
    with pytest.raises(ValueError) as err:
        GBDTClassifier(n_estimators=3, checkpoint=str(old), resume=True, **kw).fit(X, y)
    said = str(err.value)
    assert said.startswith(f"resume: checkpoint {str(old)!r} versions {numbers[0]} and "
                           f"{numbers[1]} lack what this fit keeps beside its tables (field "
                           f"extra.driver of the metadata is missing): no trees (a GBDT "
                           f"checkpoint written by a dask_ps that did not keep them"), said
    assert "fit afresh (resume=False)" in said, said
    assert "holds no version of this fit" not in said and "same data" not in said, said
    assert sorted(os.listdir(old)) == versions  # nothing saved


def _as_written_before(folder, field: str) -> None:
    """Every version of checkpoint ``folder`` as a dask_ps that did not record
    ``extra.<field>`` wrote it: that field gone, and the manifest without the checksums of
    the metadata (which a later dask_ps added)."""
    import json

    for version in folder.iterdir():
        manifest = json.loads((version / "manifest.json").read_text())
        del manifest["metadata"]
        (version / "manifest.json").write_text(json.dumps(manifest))
        meta = json.loads((version / "zarr.json").read_text())
        del meta["attributes"]["extra"][field]
        (version / "zarr.json").write_text(json.dumps(meta))


def test_a_checkpoint_of_another_estimator_is_named_on_resume(tmp_path):
    """A GBDTRegressor resumed from a GBDTClassifier's checkpoint was refused with a raw
    dict ("(the checkpoint's, this fit's) {'classes': (['-1.0', '1.0'], None)}"), and an FM
    resumed from a GBDT's checkpoint with "tables [] (this fit's: ['v', 'w'])" alone: a
    GBDT checkpoint recorded no estimator. Each difference is said as LR's are, the
    estimator among them; a GBDT checkpoint written before the estimator was recorded
    still resumes (a field a checkpoint lacks is not checked)."""

    from dask_ps import FactorizationMachineClassifier

    X, y = _toy(n=600)
    y = 2.0 * y - 1.0
    kw = dict(max_leaf_nodes=7, random_state=0, client="local")
    ck = tmp_path / "ck"
    GBDTClassifier(n_estimators=2, checkpoint=str(ck), **kw).fit(X, y)
    with pytest.raises(ValueError, match=r"each holds another fit: estimator 'GBDTClassifier' "
                                         r"\(this fit's: 'GBDTRegressor'\); classes "
                                         r"\['-1\.0', '1\.0'\] \(this fit's: None\); resume"):
        GBDTRegressor(n_estimators=3, checkpoint=str(ck), resume=True, **kw).fit(X, y)
    with pytest.raises(ValueError, match=r"each holds another fit: estimator 'GBDTClassifier' "
                                         r"\(this fit's: 'FactorizationMachineClassifier'\); "
                                         r"tables \[\] \(this fit's: \['v', 'w'\]\); resume"):
        FactorizationMachineClassifier(max_iter=1, checkpoint=str(ck), resume=True,
                                       client="local").fit(X, y)
    _as_written_before(ck, "fit")  # before the estimator was recorded
    with pytest.raises(ValueError, match=r"each holds another fit: classes \['-1\.0', "
                                         r"'1\.0'\] \(this fit's: None\); resume"):
        GBDTRegressor(n_estimators=3, checkpoint=str(ck), resume=True, **kw).fit(X, y)
    grown = []
    resumed = GBDTClassifier(n_estimators=3, checkpoint=str(ck), resume=True,
                             callbacks=[lambda r: grown.append(r["epoch"]) and False],
                             **kw).fit(X, y)
    assert grown == [3] and resumed.n_estimators_ == 3


def test_a_checkpoint_from_before_eval_rows_resumes_with_an_eval_set_as_it_had():
    """Checkpoints written before the fit id kept ``eval_rows`` tell whether they had an
    eval set by their eval losses: the same presence resumes, another is refused."""
    from dask_ps.algorithms._gbdt_fit import fit_differences

    fit = dict(rows=100, bins="b")
    for had, now in ((True, 50), (False, None), (True, None), (False, 50)):
        saved = dict(fit=fit, eval_losses=[0.5, 0.4] if had else [])
        diff = fit_differences(saved, dict(fit, eval_rows=now))
        assert (diff == {}) == (had == (now is not None)), (had, now, diff)
    assert fit_differences(dict(fit=dict(fit, eval_rows=50), eval_losses=[0.1]),
                           dict(fit, eval_rows=40)) == {"eval_rows": (50, 40)}
    # written before the eval set's checksums were kept: its rows decide, as they did
    now = dict(fit, eval_rows=50, eval_labels="00000000000000aa", eval_features="bb")
    assert fit_differences(dict(fit=dict(fit, eval_rows=50), eval_losses=[0.1]), now) == {}
    assert fit_differences(dict(fit=dict(now, eval_labels="cc"), eval_losses=[0.1]),
                           now) == {"eval_labels": ("cc", "00000000000000aa")}
    # written before the training data's checksums were kept: its rows and bins decide
    now = dict(fit, eval_rows=None, train_labels="00000000000000dd", train_features="ee")
    assert fit_differences(dict(fit=dict(fit, eval_rows=None), eval_losses=[]), now) == {}


def test_eval_checksums_are_of_the_set_not_of_its_partitions():
    """The checksums a resume knows its eval set by: the same for any partitioning, dense
    or sparse, float32 or float64 X; changed by one value, two rows swapped, one label."""
    from dask_ps.algorithms._gbdt_data import checksums

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    X[rng.random(X.shape) < 0.4] = 0.0
    X[3, 2] = np.nan
    y = rng.integers(0, 3, 300)

    def whole(X, y, cuts=()):
        edges = [0, *cuts, X.shape[0]]
        parts = [checksums(X[a:b], y[a:b], a) for a, b in zip(edges[:-1], edges[1:])]
        return tuple(sum(p[i] for p in parts) % 2**64 for i in range(2))

    ref = whole(X, y)
    assert whole(X, y, (1, 100, 101, 250)) == ref == whole(sp.csr_matrix(X), y, (17, 200))
    assert whole(X.astype(np.float32).astype(np.float64), y) == \
        whole(X.astype(np.float32), y)
    other = X.copy()
    other[150, 4] = np.nextafter(other[150, 4], 9.0)
    assert whole(other, y)[0] != ref[0] and whole(other, y)[1] == ref[1]
    assert whole(X[[1, 0, *range(2, 300)]], y)[0] != ref[0]
    flipped = y.copy()
    flipped[299] = (flipped[299] + 1) % 3
    assert whole(X, flipped) == (ref[0], whole(X, flipped)[1]) != ref
    text = np.array(["a", "b", "c"], dtype=object)[y]
    assert whole(X, text, (40,)) == whole(X, text) != whole(X, text[::-1])


def test_bad_input_on_a_cluster_reads_as_in_process(client2):
    """All-NaN and constant columns, a partition with no rows and 10^5 sparse columns on two
    workers: the trees of one process; a single class: the same clear error."""
    X, y = _toy(1200)
    X[:, 2] = np.nan
    X[:, 3] = 7.0
    X[:400, 4] = np.nan  # all-NaN in the first partition only
    chunks = ((0, 400, 400, 400), (6,))
    Xd, yd = da.from_array(X, chunks=chunks), da.from_array(y, chunks=chunks[:1])
    kw = dict(n_estimators=5, max_leaf_nodes=7, random_state=0, max_workers=None)
    model = GBDTClassifier(client=client2, **kw).fit(Xd, yd)
    assert len(model.history_[-1]["task_seconds"]) == 2  # both workers
    ref = GBDTClassifier(client="local", **kw).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), ref.predict_proba(X))
    model.set_params(importance_type="split")
    assert model.feature_importances_[2] == 0 and model.feature_importances_[3] == 0

    rng = np.random.default_rng(0)
    informative = rng.random((2000, 3)) * (rng.random((2000, 3)) < 0.5)
    Xs = sp.hstack([sp.csr_matrix(informative),
                    sp.random(2000, 100_000 - 3, density=2e-4, random_state=rng)], "csr")
    ys = (informative[:, 0] + informative[:, 1] > 0.5).astype(int)
    sparse = GBDTClassifier(client=client2, **kw).fit(Xs, ys)
    assert accuracy_score(ys, sparse.predict(Xs)) > 0.9
    np.testing.assert_array_equal(sparse.predict_proba(Xs),
                                  GBDTClassifier(client="local", **kw).fit(Xs, ys)
                                  .predict_proba(Xs))

    with pytest.raises(ValueError, match="only one class"):
        GBDTClassifier(client=client2, **kw).fit(Xd, da.ones_like(yd))


def test_labels_and_rows_that_skip_scikit_learns_checks_are_named_on_a_cluster(client2):
    """Dask input reaches the workers unchecked: continuous, NaN or 2-d labels and an
    infinite value are refused, naming the row in the whole X, not in its partition. A label
    that is not a class (0.5 among 0/1) said "Unknown label type: continuous (y has 3
    distinct non-integer values, e.g. 0.0)", naming no row (and a whole number): now the
    first row holding it, of y or of eval_set's y, as LogisticRegression names it; still
    'continuous', as scikit-learn's checks want."""
    X, y = _toy(1200)
    chunks = ((400, 400, 400), (6,))
    Xd = da.from_array(X, chunks=chunks)
    kw = dict(n_estimators=3, max_leaf_nodes=7, random_state=0, max_workers=None)
    soft = y.astype(float)
    soft[[1000, 1100]] = 0.5
    with pytest.raises(ValueError, match=r"^y holds 0\.5 \(first at y\[1000\]\), not a class: "
                                         r"a classifier .* not continuous values$"):
        GBDTClassifier(client=client2, **kw).fit(Xd, da.from_array(soft, chunks=400))
    with pytest.raises(ValueError, match=r"^eval_set y holds 0\.5 \(first at eval_set "
                                         r"y\[1000\]\), not a class"):
        GBDTClassifier(client=client2, **kw).fit(Xd, da.from_array(y, chunks=400), eval_set=[
            (Xd, da.from_array(soft, chunks=400))])
    with pytest.raises(ValueError, match=r"^y holds 0\.5 \(first at y\[1000\]\), not a class"):
        GBDTClassifier(client="local", **kw).fit(X, soft)  # in memory: named alike
    yn = y.astype(float)
    yn[1000] = np.nan
    with pytest.raises(ValueError, match=r"y\[1000\] is NaN"):
        GBDTClassifier(client=client2, **kw).fit(Xd, da.from_array(yn, chunks=400))
    with pytest.raises(ValueError, match=r"one label per row: got shape \(400, 2\)"):
        GBDTRegressor(client=client2, **kw).fit(
            Xd, da.from_array(np.column_stack([y, y]), chunks=(400, 2)))
    Xi = X.copy()
    Xi[1034, 2] = np.inf
    with pytest.raises(ValueError, match=r"X\[1034, 2\] = inf is infinite"):
        GBDTClassifier(client=client2, **kw).fit(da.from_array(Xi, chunks=chunks),
                                                 da.from_array(y, chunks=400))


def test_bad_eval_set_rows_are_named_as_eval_set_rows_of_the_whole_set(client2):
    """An infinite value or a NaN label in eval_set is named as eval_set's, with its row in
    the whole eval set (not in its partition); the model stays unfitted."""
    X, y = _toy(1200)
    Xd, yd = da.from_array(X, chunks=400), da.from_array(y, chunks=400)
    Xv, yv = _toy(900, seed=1)
    Xi = Xv.copy()
    Xi[700, 3] = -np.inf
    yn = yv.astype(float)
    yn[650] = np.nan
    kw = dict(n_estimators=3, max_leaf_nodes=7, random_state=0, max_workers=None)
    cases = [(GBDTClassifier, Xi, yv, r"^eval_set X\[700, 3\] = -inf is infinite"),
             (GBDTRegressor, Xi, yv, r"^eval_set X\[700, 3\] = -inf is infinite"),
             (GBDTClassifier, Xv, yn, r"^eval_set y\[650\] is NaN"),
             (GBDTRegressor, Xv, yn, r"^eval_set y\[650\] = nan is not finite")]
    for cls, Xe, ye, message in cases:
        model = cls(client=client2, **kw)
        with pytest.raises(ValueError, match=message):
            model.fit(Xd, yd, eval_set=[(da.from_array(Xe, chunks=300),
                                         da.from_array(ye, chunks=300))])
        assert not hasattr(model, "booster_")


def test_in_memory_eval_set_errors_say_eval_set():
    """scikit-learn's checks of an in-memory eval set name no set: the fit says which one;
    an eval set that is not one (X, y) pair is named as such."""
    rng = np.random.default_rng(0)
    X, y = rng.random((300, 4)), rng.integers(0, 2, 300)
    bad = X[:50].copy()
    bad[7, 2] = np.inf
    est = GBDTClassifier(n_estimators=2, client="local")
    with pytest.raises(ValueError, match=r"^eval_set: Input X contains infinity"):
        est.fit(X, y, eval_set=[(bad, y[:50])])
    with pytest.raises(ValueError, match=r"^eval_set X has no rows \(0 samples\)"):
        est.fit(X, y, eval_set=[(X[:0], y[:0])])
    with pytest.raises(ValueError, match=r"^eval_set must hold one \(X, y\) pair, got a "
                                         r"tuple of 3 items"):
        est.fit(X, y, eval_set=[(X, y, None)])
    assert not hasattr(est, "booster_")


def test_a_dask_eval_set_of_other_columns_is_refused_naming_it_before_training():
    """A dask eval set narrower than the training data trained until its first eval, then
    failed in a task with "X has 5 features; the model was fit on 6", naming no set (an
    in-memory one was refused at once, naming it); a dask frame of other columns than the
    training frame's was scored by position. Both are now refused before the fit starts,
    naming eval_set, the model left as it was."""
    import dask.dataframe as dd
    import pandas as pd

    X, y = _toy(600)
    Xv, yv = _toy(300, seed=1)
    model = GBDTClassifier(client="local", n_estimators=2, max_leaf_nodes=7, random_state=0)
    trees = model.fit(X, y).booster_
    narrow = (da.from_array(Xv[:, :5], chunks=100), da.from_array(yv, chunks=100))
    with pytest.raises(ValueError, match=r"^eval_set: X has shape \(300, 5\), but "
                                         r"GBDTClassifier is expecting 6 features as input"):
        model.fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200),
                  eval_set=[narrow])
    assert model.booster_ is trees
    names = [f"x{j}" for j in range(6)]
    frame = dd.from_pandas(pd.DataFrame(X, columns=names), npartitions=2)
    other = dd.from_pandas(pd.DataFrame(Xv, columns=names[::-1]), npartitions=2)
    with pytest.raises(ValueError, match=r"^eval_set: X has other columns than at fit: "
                                         r"\['x5', .*\] vs \['x0', "):
        model.fit(frame, dd.from_pandas(pd.Series(y), npartitions=2),
                  eval_set=[(other, dd.from_pandas(pd.Series(yv), npartitions=2))])
    assert model.booster_ is trees
    wide = dd.from_pandas(pd.DataFrame(np.hstack([Xv, Xv[:, :1]])), npartitions=2)
    with pytest.raises(ValueError, match=r"^eval_set: X has 7 features, but GBDTClassifier is "
                                         r"expecting 6 features as input"):
        model.fit(da.from_array(X, chunks=200), y, eval_set=[(wide, yv)])
    assert model.booster_ is trees


@pytest.mark.parametrize("cls", [GBDTClassifier, GBDTRegressor])
def test_an_eval_set_of_no_rows_is_refused_naming_it_in_memory_and_dask_alike(client2, cls):
    """A dask eval set of 0 rows trained with an eval loss of 0 every round, early stopping
    comparing zeros (in memory scikit-learn refused it, naming no set): now both, and one
    of unknown length (a filtered dask frame), are refused with the same message naming
    eval_set, before the model changes."""
    import dask.dataframe as dd
    import pandas as pd

    X, y = _toy(1200)
    Xd, yd = da.from_array(X, chunks=400), da.from_array(y, chunks=400)
    Xv, yv = _toy(300, seed=1)
    frame = dd.from_pandas(pd.DataFrame(Xv, columns=[f"x{j}" for j in range(6)]).assign(
        y=yv), npartitions=3)
    frame = frame[frame.x0 > 100]  # no row, known only once computed
    empty = {"memory": (Xv[:0], yv[:0]),
             "dask": (da.from_array(Xv[:0], chunks=(0, 6)), da.from_array(yv[:0], chunks=0)),
             "dask frame": (frame.drop(columns="y"), frame.y)}
    message = r"^eval_set X has no rows \(0 samples\): its eval loss would read 0 every round"
    model = cls(client=client2, n_estimators=4, max_leaf_nodes=7, random_state=0).fit(X, y)
    trees = model.set_params(early_stopping_rounds=1).booster_
    for where, ev in empty.items():
        for data in ((X, y), (Xd, yd)) if where != "dask frame" else ((X, y),):
            with pytest.raises(ValueError, match=message):
                model.fit(*data, eval_set=[ev])
            assert model.booster_ is trees, where
    # a dask array of unknown chunk sizes, refused for X too, is refused naming the set
    keep = da.from_array(Xv, chunks=100)[:, 0] >= 0
    for name, ev in (("X", (da.from_array(Xv, chunks=100)[keep], yv)),
                     ("y", (Xv, da.from_array(yv, chunks=100)[keep]))):
        with pytest.raises(ValueError, match=rf"^eval_set: {name} is a dask array of unknown "
                                             rf"chunk sizes .* call {name}\.compute_chunk_"
                                             rf"sizes\(\) first"):
            model.fit(X, y, eval_set=[ev])
        assert model.booster_ is trees, name


def test_bad_cells_of_dask_input_to_a_fitted_model_are_named_by_their_row_in_the_whole_x(
        client2):
    """predict, predict_proba and score of a dask array (or dataframe) whose third chunk
    holds an infinite value at row 47 named row 7, the row in the chunk (an array's:
    scikit-learn's "Input X contains infinity", no row at all); now row 47. A dataframe's
    score failed on the predictions' unknown length."""
    import dask.dataframe as dd
    import pandas as pd

    X, y = _toy(60)
    bad = X.copy()
    bad[47, 2] = np.inf
    columns = [f"c{j}" for j in range(X.shape[1])]
    kw = dict(n_estimators=2, max_leaf_nodes=4, min_samples_leaf=5, client=client2)
    for cls in (GBDTClassifier, GBDTRegressor):
        model = cls(**kw).fit(X, y)
        framed = cls(**kw).fit(pd.DataFrame(X, columns=columns), y)
        Xd, yd = da.from_array(bad, chunks=(20, 6)), da.from_array(y, chunks=20)
        frame = dd.from_pandas(pd.DataFrame(bad, columns=columns), npartitions=3)
        good = dd.from_pandas(pd.DataFrame(X, columns=columns), npartitions=3)
        assert framed.score(good, y) == pytest.approx(
            framed.score(pd.DataFrame(X, columns=columns), y))
        calls = [model.predict, lambda Z: model.score(Z, yd)]
        calls += [model.predict_proba] if cls is GBDTClassifier else []
        for call in calls:
            with pytest.raises(ValueError, match=r"X holds inf at row 47, column 2"):
                out = call(Xd)
                getattr(out, "compute", lambda: out)()
        calls = [framed.predict, lambda Z: framed.score(Z, y)]
        calls += [framed.predict_proba] if cls is GBDTClassifier else []
        for call in calls:
            with pytest.raises(ValueError, match=r"X\[47, 2\] \(column 'c2'\) = inf is "
                                                 r"infinite"):
                out = call(frame)
                getattr(out, "compute", lambda: out)()


@pytest.mark.parametrize("where", ["cluster", "local"])
def test_a_huge_max_leaf_nodes_is_bounded_by_the_rows(client2, where):
    """Trees are sized for the leaves they can reach (one per min_samples_leaf rows):
    max_leaf_nodes=10**9 asked for 17 TiB of node arrays (MemoryError), and gives the
    trees of max_leaf_nodes = rows / min_samples_leaf."""
    X, y = _toy(600)
    client = client2 if where == "cluster" else "local"
    fits = [GBDTClassifier(n_estimators=3, max_leaf_nodes=leaves, min_samples_leaf=20,
                           random_state=0, client=client).fit(X, y)
            for leaves in (10**9, 600 // 20)]
    assert np.array_equal(fits[0].predict_proba(X), fits[1].predict_proba(X))
    assert fits[0].booster_.count.shape[0] > 3 * 10  # trees of many leaves grew


def test_a_histogram_table_past_the_workers_memory_is_refused_before_it_is_made():
    """300 classes x 31 leaves x 20 columns of 256 bins: 1.6 GiB per shard on a 1 GB worker,
    refused with the factors named (not a killed worker); 3 classes fit."""
    from distributed import Client, LocalCluster

    from dask_ps.exceptions import DataError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 20))
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GB",
                      **NO_DASHBOARD) as cluster, Client(cluster) as client:
        with pytest.raises(DataError, match=r"GiB per shard \(300 trees per round x 31 leaves"
                                            r".*lower max_leaf_nodes or max_bins"):
            GBDTClassifier(n_estimators=1, client=client).fit(X, rng.integers(0, 300, 3000))
        model = GBDTClassifier(n_estimators=1, client=client).fit(X, rng.integers(0, 3, 3000))
        assert model.n_estimators_ == 1
