"""Online learning on a stream of mini-batches: progressive validation in history_, model
versions saved every N batches and loaded while training goes on, bad streams."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from dask_ps import (
    FactorizationMachineClassifier,
    GBDTClassifier,
    LatentDirichletAllocation,
    LogisticRegression,
    learn_online,
)
from dask_ps.algorithms.online import last_version, version_path
from dask_ps.io import HashingEncoder, PlantedCTR
from dask_ps.saving import load_estimator

PLANTED = PlantedCTR(n_categorical=6, n_numeric=2, max_cardinality=100, n_pairs=4,
                     interaction_scale=2.0, linear_scale=0.4, seed=5)
ENCODER = HashingEncoder(numeric=tuple(PLANTED.numeric_columns),
                         categorical=tuple(PLANTED.categorical_columns), n_features=2**12)


def stream(n_batches, rows=2000):
    """Mini-batches of a click log, generated one at a time (as files arriving)."""
    for i in range(n_batches):
        table = PLANTED.chunk(i, rows)
        yield ENCODER.transform(table), table["click"].to_numpy()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(client="local", random_state=0, checkpoint=None),
    lambda: FactorizationMachineClassifier(client="local", n_components=4, random_state=0,
                                           checkpoint=None)])
def test_stream_with_progressive_validation_and_versions(make, tmp_path):
    loaded = {}

    def serve(record):  # a server loads the newest version while training continues
        if record["batch"] == 5:
            est, _ = load_estimator(version_path(tmp_path, 3))
            X, y = next(stream(1))
            loaded["history"], loaded["proba"] = est.history_, est.predict_proba(X)

    est = learn_online(make(), stream(8), classes=[0, 1], version_every=3,
                       versions=str(tmp_path), on_batch=serve)
    h = est.history_
    assert [r["batch"] for r in h] == list(range(1, 9)) and all(r["rows"] == 2000 for r in h)
    assert np.isnan(h[0]["progressive_log_loss"]) and "progressive_auc" not in h[0]
    pv = np.array([r["progressive_log_loss"] for r in h[1:]])
    assert np.isfinite(pv).all() and pv[-3:].mean() < pv[0] < np.log(2) + 0.05
    assert all(0.5 < r["progressive_auc"] <= 1 for r in h[1:])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["version-000003.npz",
                                                          "version-000006.npz"]
    assert [r.get("version") for r in h] == [None, None, version_path(tmp_path, 3), None,
                                             None, version_path(tmp_path, 6), None, None]
    # version 3 holds three batches and predicts
    assert [r["batch"] for r in loaded["history"]] == [1, 2, 3]
    p = loaded["proba"]
    assert p.shape == (2000, 2) and np.allclose(p.sum(axis=1), 1) and np.isfinite(p).all()
    # the last version continues as the running model did after its batch
    v6, _ = load_estimator(version_path(tmp_path, 6))
    assert len(v6.history_) == 6


def test_progressive_loss_is_the_model_before_the_batch():
    """The record's progressive loss is the log-loss of the model as it stood before the
    batch, on that batch."""
    from sklearn.metrics import log_loss

    batches = list(stream(3, rows=1000))
    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    learn_online(est, batches[:2], classes=[0, 1])
    want = log_loss(batches[2][1], est.predict_proba(batches[2][0]), labels=[0, 1])
    learn_online(est, batches[2:], classes=[0, 1])
    assert est.history_[-1]["progressive_log_loss"] == pytest.approx(want, rel=1e-12)
    assert est.history_[-1]["batch"] == 1  # batches count per call


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_restart_on_a_versions_folder_numbers_on_and_never_overwrites(where, tmp_path):
    """Issue r12: restarted on its folder (from its last version, after a crash), the learner
    numbered from 1 again: version-000002.npz was overwritten by a model of 8 batches while
    the stale version-000006.npz still sorted newest."""
    import fsspec

    folder = str(tmp_path / "v") if where == "local" else f"memory://r12-{tmp_path.name}/v"
    fs, root = fsspec.core.url_to_fs(folder)
    names = lambda: sorted(p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))  # noqa
    assert last_version(folder) == 0  # no folder yet
    make = lambda: LogisticRegression(client="local", random_state=0, checkpoint=None)  # noqa
    learn_online(make(), stream(6, rows=300), classes=[0, 1], version_every=2,
                 versions=folder)
    assert names() == ["version-000002.npz", "version-000004.npz", "version-000006.npz"]
    v2, _ = load_estimator(version_path(folder, 2))
    est, _ = load_estimator(version_path(folder, 6))
    fs.pipe(f"{root}/version-000005.npz.tmp-1", b"")  # an interrupted save: not a version
    fs.pipe(f"{root}/notes.txt", b"")
    assert last_version(folder) == 6
    est = learn_online(est, stream(4, rows=300), classes=[0, 1], version_every=2,
                       versions=folder)
    assert [r.get("version") for r in est.history_[6:]] == [
        None, version_path(folder, 8), None, version_path(folder, 10)]
    assert [r["batch"] for r in est.history_[6:]] == [1, 2, 3, 4]
    newest = [n for n in names() if n.startswith("version-") and n.endswith(".npz")][-1]
    assert newest == "version-000010.npz" and last_version(folder) == 10
    assert len(load_estimator(version_path(folder, 10))[0].history_) == 10
    again, _ = load_estimator(version_path(folder, 2))  # the old version is untouched
    assert len(again.history_) == 2
    np.testing.assert_array_equal(again.coef_, v2.coef_)
    # a restart from an older version still writes after the newest
    learn_online(v2, stream(2, rows=300), classes=[0, 1], version_every=2, versions=folder)
    assert last_version(folder) == 12
    assert len(load_estimator(version_path(folder, 12))[0].history_) == 4


def test_a_version_written_meanwhile_is_not_overwritten(tmp_path):
    """Another learner wrote the next version's file after this one started: refused, and
    the batch's record names no version."""
    from pathlib import Path

    def other_writer(record):
        if record["batch"] == 1:
            Path(version_path(tmp_path, 2)).write_bytes(b"theirs")

    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    with pytest.raises(FileExistsError, match=r"^batch 2 of the stream was learnt \(the "
                       r"estimator in memory holds it: go on with it from batch 3\); its "
                       r"version could not be saved: .*version-000002\.npz exists already"):
        learn_online(est, stream(2, rows=300), classes=[0, 1], version_every=2,
                     versions=str(tmp_path), on_batch=other_writer)
    assert Path(version_path(tmp_path, 2)).read_bytes() == b"theirs"
    assert "version" not in est.history_[-1]


# dropping CAP_DAC_OVERRIDE makes root obey a folder's permissions, as any other user does
_AS_USER = ["setpriv", "--bounding-set=-dac_override"] if os.geteuid() == 0 else []
_READ_ONLY_STREAM = """
import sys, numpy as np
from dask_ps import LogisticRegression, learn_online
rng = np.random.default_rng(0)
seen = []
def batches():
    for _ in range(2):
        seen.append(1)
        yield rng.normal(size=(50, 5)), rng.integers(0, 2, 50)
est = LogisticRegression(solver="ftrl", max_iter=1, checkpoint=None)
try:
    learn_online(est, batches(), version_every=1, versions=sys.argv[1])
except PermissionError as exc:
    print(exc, "|", len(seen), hasattr(est, "history_"))
"""


@pytest.mark.skipif(_AS_USER and not shutil.which("setpriv"), reason="needs setpriv as root")
def test_a_versions_folder_that_cannot_be_written_is_refused_before_any_batch(tmp_path):
    """A read-only versions folder: refused before the first batch is even made (it was
    refused at the first save, after that batch was learnt)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        out = subprocess.run([*_AS_USER, sys.executable, "-c", _READ_ONLY_STREAM, str(folder)],
                             capture_output=True, text=True, timeout=240,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    finally:
        folder.chmod(0o755)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (f"versions '{folder}': the folder '{folder}' is not "
                                  f"writable (Permission denied); no batch was learnt | 0 "
                                  f"False")
    assert list(folder.iterdir()) == []


def test_a_version_that_cannot_be_saved_says_its_batch_was_learnt(tmp_path):
    """The folder fails at the second version (here: its temporary file's name is taken by
    a folder; likewise a folder made read-only, a full disk): the error says batch 2 was
    learnt, so a restart does not learn it twice; its record names no version."""
    def block(record):
        if record["batch"] == 1:
            (tmp_path / f"version-000002.npz.tmp-{os.getpid()}").mkdir()

    est = LogisticRegression(solver="ftrl", max_iter=1, random_state=0, checkpoint=None)
    with pytest.raises(IsADirectoryError) as info:
        learn_online(est, stream(3, rows=100), classes=[0, 1], version_every=1,
                     versions=str(tmp_path), on_batch=block)
    assert info.value.__notes__ == [
        f"batch 2 of the stream was learnt (the estimator in memory holds it: go on with it "
        f"from batch 3); its version could not be saved: {info.value}"]
    assert [(r["batch"], r.get("version")) for r in est.history_] == [
        (1, version_path(tmp_path, 1)), (2, None)]


def test_an_on_batch_error_names_its_batch():
    est = LogisticRegression(solver="ftrl", max_iter=1, random_state=0, checkpoint=None)
    with pytest.raises(ZeroDivisionError, match=r"^batch 2 of the stream was learnt; its "
                                                r"on_batch\(record\) raised: division by "
                                                r"zero$") as info:
        learn_online(est, stream(3, rows=100), on_batch=lambda r: r["batch"] == 2 and 1 / 0)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert [r["batch"] for r in est.history_] == [1, 2]
    with pytest.raises(OSError) as info:  # not made from one message: a note
        learn_online(est, stream(1, rows=100), on_batch=lambda r: exec("raise OSError(5, 'x')"))
    assert info.value.__notes__ == ["batch 1 of the stream was learnt; its on_batch(record) "
                                    "raised (the error above)"]


def test_a_stream_without_rows_warns_and_leaves_the_estimator_unfitted():
    """Nothing learnt: a UserWarning (was only a log record), and an estimator not fitted
    before stays so (no history_, NotFittedError), as partial_fit refuses empty data."""
    from sklearn.exceptions import NotFittedError

    empty = (np.empty((0, 5)), np.empty(0))
    est = LogisticRegression(solver="ftrl", max_iter=1, checkpoint=None)
    with pytest.warns(UserWarning, match=r"^learn_online: no batch of the stream \(2 batches"
                                         r"\) had rows: LogisticRegression learnt nothing "
                                         r"and is not fitted$"):
        assert learn_online(est, [empty, empty]) is est
    assert not hasattr(est, "history_")
    with pytest.raises(NotFittedError):
        est.predict(np.ones((2, 5)))
    learn_online(est, [(np.eye(5), np.array([0, 1, 0, 1, 1]))])
    with pytest.warns(UserWarning, match=r"\(0 batches\) had rows: LogisticRegression learnt "
                                         r"nothing$"):
        learn_online(est, [])
    assert len(est.history_) == 1


def test_bad_streams_are_refused(tmp_path):
    est = LogisticRegression(client="local", checkpoint=None)
    with pytest.raises(ValueError, match="version_every and versions go together"):
        learn_online(est, stream(1), version_every=2)
    for bad in (0, True, 1.5, "2"):  # (True was taken as 1)
        with pytest.raises(ValueError, match="version_every must be an integer >= 1"):
            learn_online(est, stream(1), version_every=bad, versions=str(tmp_path))
    a_file = tmp_path / "train.csv"  # (was os.makedirs' bare FileExistsError)
    a_file.write_text("click\n1\n")
    with pytest.raises(NotADirectoryError, match=f"versions='{a_file}' is a file: versions "
                                                 f"go in a folder"):
        learn_online(est, stream(1), version_every=1, versions=str(a_file))
    assert a_file.read_text() == "click\n1\n"
    # the same as a file:// URL, or under a file, or with a parameter no version can hold:
    # refused before the first batch (they failed at the first save, version_every in)
    with pytest.raises(NotADirectoryError, match=f"versions='file://{a_file}' is a file"):
        learn_online(est, stream(1), version_every=1, versions=f"file://{a_file}")
    with pytest.raises(OSError, match=f"versions='{a_file}/v': the folder cannot be made"):
        learn_online(est, stream(1), version_every=1, versions=f"{a_file}/v")

    def taken(n):
        for i, batch in enumerate(stream(n)):
            seen.append(i)
            yield batch

    seen = []
    with pytest.raises(TypeError, match="parameter callbacks: a function cannot be saved"):
        learn_online(LogisticRegression(client="local", checkpoint=None,
                                        callbacks=[lambda record: None]),
                     taken(3), version_every=2, versions=str(tmp_path / "cb"))
    assert seen == []
    with pytest.raises(ValueError, match="batch 1 of the stream is a ndarray, not an"):
        learn_online(est, [np.zeros(3)])
    with pytest.raises(ValueError, match="^LogisticRegression has no partial_fit: "
                                         "partial_fit needs a stochastic solver"):
        learn_online(LogisticRegression(solver="lbfgs", client="local"), stream(1))
    with pytest.raises(ValueError, match="^GBDTClassifier has no partial_fit: learn_online "
                                         "needs an estimator that learns batch by batch"):
        learn_online(GBDTClassifier(client="local"), stream(1))
    # a classifier's stream of (X, y) given to an LDA: its labels are no vocabulary (LDA
    # streams are tests/algorithms/test_online_lda.py's)
    with pytest.raises(ValueError, match="^batch 1 of the stream's second item is not a "
                                         "vocabulary"):
        learn_online(LatentDirichletAllocation(n_components=3, client="local"), stream(1))
    with pytest.raises(ValueError, match="^batches='train.csv' is a path: learn_online reads "
                                         r"no files; .*\(read_ctr\(f, label=..., "
                                             r"encoder=encoder\) for f in files\), the "
                                             r"encoder fixed once"):
        learn_online(est, "train.csv")
    # a list of files: its first item was "a str, not an (X, y) pair"
    with pytest.raises(ValueError, match=r"^batch 1 of the stream is a path, 'day1\.csv': "
                                         r"learn_online reads no files; .*\(read_ctr\(f, "
                                         r"label=..., encoder=encoder\) for f in files\)"):
        learn_online(est, ["day1.csv", "day2.csv"])


def _ctr_files(folder):
    """A CSV batch of 200 rows and one that holds only its header (a quiet hour), in the
    folder (local or fsspec URL)."""
    import fsspec

    from dask_ps.io import read_ctr

    full, empty = f"{folder}/hour1.csv", f"{folder}/hour2.csv"
    with fsspec.open(full, "w") as f:
        f.write("click,price,shop\n" + "".join(f"{i % 2},{i},s{i % 5}\n" for i in range(200)))
    with fsspec.open(empty, "w") as f:
        f.write("click,price,shop\n")
    return (read_ctr(full, label="click", n_features=2**10),
            read_ctr(empty, label="click", n_features=2**10))


def test_batches_partial_fit_takes_are_learnt(tmp_path, caplog):
    """Issue r05: a header-only file as a batch raised "Found array with 0 sample(s)"; a dask
    DataFrame batch "int() argument must be ... not 'Scalar'"; a dask array of unknown chunk
    sizes "cannot convert float NaN to integer". The empty batch is skipped (logged, no
    record, no version), the others are learnt with their row counts."""
    import logging

    import dask.dataframe as dd
    import pandas as pd

    full, empty = _ctr_files(f"memory://online-{tmp_path.name}")
    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    with caplog.at_level(logging.INFO, logger="dask_ps.algorithms.online"):
        learn_online(est, [full, empty, full], version_every=1, versions=str(tmp_path))
    assert [(r["batch"], r["rows"]) for r in est.history_] == [(1, 200), (3, 200)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["version-000001.npz",
                                                          "version-000003.npz"]
    assert "batch 2 of the stream (file /online-" in caplog.text
    assert "hour2.csv) has no rows: skipped" in caplog.text
    # each learnt batch is logged (INFO) with its record's figures, the skipped one is not
    learnt = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    third = est.history_[1]
    assert len(learnt) == 2 and "hour1.csv) learnt: rows 200, progressive_log_loss nan" in \
        learnt[0] and f"version {tmp_path / 'version-000001.npz'}" in learnt[0]
    assert f"progressive_log_loss {third['progressive_log_loss']:.4g}, " in learnt[1]
    assert f"progressive_auc {third['progressive_auc']:.4g}, version" in learnt[1]

    df = pd.DataFrame({"a": np.random.default_rng(0).random(100), "click": np.arange(100) % 2})
    ddf = dd.from_pandas(df, npartitions=2)
    X, y = full
    ddf0 = dd.from_pandas(df.iloc[:0], npartitions=1)

    def unknown(n):  # the first n rows of the file's batch, of unknown chunk sizes
        return (X.map_blocks(lambda b: b[:n], chunks=((np.nan,), X.chunks[1]), dtype=X.dtype),
                y.map_blocks(lambda b: b[:n], chunks=((np.nan,),), dtype=y.dtype))

    for batch, none in [((ddf[["a"]], ddf.click), (ddf0[["a"]], ddf0.click)),
                        (unknown(100), unknown(0))]:
        est = LogisticRegression(client="local", random_state=0, checkpoint=None)
        learn_online(est, [batch, batch, none])
        assert [(r["batch"], r["rows"]) for r in est.history_] == [(1, 100), (2, 100)]
        assert np.isfinite(est.history_[1]["progressive_log_loss"])


def test_classes_must_include_every_label_of_the_stream():
    """scikit-learn's partial_fit rule: a 0/1 stream given classes=[-1, 1] trained a
    3-class model (classes_ [-1 0 1]) instead of being refused."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 5))
    y = (X[:, 0] > 0).astype(int)
    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    with pytest.raises(ValueError, match=r"^batch 1 of the stream: y has labels \[0\] that "
                                         r"are not in classes=\[-1, 1\]"):
        learn_online(est, [(X, y)], classes=[-1, 1])
    assert not hasattr(est, "classes_")


def test_a_stream_without_classes_has_its_first_batchs_labels():
    """``partial_fit`` needs ``classes`` on its first call (scikit-learn's rule):
    learn_online without ``classes`` gives it the first batch's labels, as documented; a
    label of the first batch that is no class is still refused as y's, as before."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 5))
    y = np.where(X[:, 0] > 0, "yes", "no")
    est = learn_online(LogisticRegression(client="local", random_state=0, checkpoint=None),
                       [(X, y), (X[:50], y[:50])])
    np.testing.assert_array_equal(est.classes_, ["no", "yes"])
    assert [r["batch"] for r in est.history_] == [1, 2]
    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    with pytest.raises(ValueError, match=r"^batch 1 of the stream: Input y contains NaN"):
        learn_online(est, [(X, np.where(X[:, 0] > 0, 1.0, np.nan))])
    with pytest.raises(ValueError, match=r"^batch 1 of the stream: y holds 0.7 \(first at "
                                         r"y\[2\]\), not a class"):
        learn_online(est, [(X, np.where(X[:, 0] > 0, 1.0, 0.7))])
    assert not hasattr(est, "classes_")


def test_an_error_names_its_batch_and_file(tmp_path):
    """Every error raised while a batch is made, scored or trained on names the batch (and
    its file), keeping its type; the model keeps what it learnt before."""
    from dask_ps.exceptions import DataError

    full, _ = _ctr_files(f"memory://online-{tmp_path.name}")
    X, y = full
    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    with pytest.raises(ValueError, match=r"^batch 2 of the stream \(file /online-.*hour1\.csv"
                                         r"\): y has labels \[2\.0\] outside the model's "
                                         r"classes \[0\.0, 1\.0\]: .*give classes="):
        learn_online(est, [full, (X, y * 2)])
    assert len(est.history_) == 1
    coef = est.coef_.copy()
    with pytest.raises(ValueError, match=r"^batch 1 of the stream \(file .*hour1\.csv\): "
                                         r"classes \[0, 1, 2\] differ from the first call's"):
        learn_online(est, [full], classes=[0, 1, 2])  # partial_fit's refusal
    with pytest.raises(ValueError, match=r"^batch 1 of the stream: X has 5 features, but"):
        learn_online(est, [(np.ones((4, 5)), np.array([0, 1, 0, 1]))])
    np.testing.assert_array_equal(est.coef_, coef)
    with pytest.raises(DataError, match=r"^batch 1 of the stream: LogisticRegression needs "
                                        r"samples of at least 2 classes") as info:
        learn_online(LogisticRegression(client="local"), [(np.eye(3), np.zeros(3))])
    assert isinstance(info.value.__cause__, DataError)

    def failing(kind):
        yield next(stream(1, rows=50))
        raise kind

    with pytest.raises(RuntimeError, match=r"^batch 2 of the stream \(making it\): disk gone"):
        learn_online(LogisticRegression(client="local"), failing(RuntimeError("disk gone")))
    with pytest.raises(OSError) as info:  # not made from one message: a note
        learn_online(LogisticRegression(client="local"), failing(OSError(5, "I/O error")))
    assert info.value.args == (5, "I/O error")
    assert info.value.__notes__ == ["while learn_online processed batch 2 of the stream "
                                    "(making it)"]


def test_on_a_cluster_unknown_chunk_sizes_are_refused_naming_the_batch(tmp_path, client2):
    """partial_fit on a cluster needs known chunk sizes: learn_online says so, naming the
    batch and its file; the other batches of issue r05 are learnt there too."""
    import dask.dataframe as dd
    import pandas as pd

    full, empty = _ctr_files(str(tmp_path))  # files the workers read
    X, y = full
    Xn = X.map_blocks(lambda b: b[:100], chunks=((np.nan,), X.chunks[1]), dtype=X.dtype)
    yn = y.map_blocks(lambda b: b[:100], chunks=((np.nan,),), dtype=y.dtype)
    make = lambda: FactorizationMachineClassifier(client=client2, n_components=2,  # noqa
                                                  checkpoint=None)
    with pytest.raises(ValueError, match=r"^batch 1 of the stream \(file .*hour1\.csv\): "
                                         r"the dask arrays need known chunk sizes"):
        learn_online(make(), [(Xn, yn)])
    ddf = dd.from_pandas(pd.DataFrame({"a": np.arange(100.0) % 7, "c": np.arange(100) % 2}),
                         npartitions=2)
    est = learn_online(make(), [full, empty, full])
    assert [(r["batch"], r["rows"]) for r in est.history_] == [(1, 200), (3, 200)]
    est = learn_online(make(), [(ddf[["a"]], ddf.c)] * 2)
    assert [(r["batch"], r["rows"]) for r in est.history_] == [(1, 100), (2, 100)]


@pytest.mark.timeout(300)
@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
def test_a_stream_with_a_checkpoint_keeps_two_versions_and_leaves_others_alone(tmp_path):
    """Each partial_fit saved 2 checkpoint versions and pruned only its own: a stream of 8
    batches left 16 (trial 9, F11: a disk that fills). The stream's versions are now pruned
    together (keep=2); versions another model saved there, before or amid the stream, stay."""
    from dask_ps import PSModel
    from dask_ps.model.format import latest, list_versions

    url = str(tmp_path / "ck")
    other = PSModel("local", n_shards=1)
    try:
        other.add_table("v", shape=(3,), optimizer="adagrad")
        other.save(url)  # version 1, saved by hand
        est = LogisticRegression(client="local", solver="ftrl", random_state=0,
                                 checkpoint=url)
        learn_online(est, stream(3, rows=300))  # versions 2..5: before and after batch 1,
        assert list_versions(url) == ([1, 4, 5], [])  # after each of the others
        other.save(url)  # version 6, amid the stream
        learn_online(est, stream(5, rows=300))  # versions 7..11
    finally:
        other.close()
    assert list_versions(url) == ([1, 6, 10, 11], [])
    newest = latest(url)  # the stream's last: after its last batch
    assert newest.version == 11 and sorted(newest.attrs["tables"]) == ["w"]
    assert newest.attrs["extra"]["fit"]["estimator"] == "LogisticRegression"
    # a fit from scratch counts its own versions anew: the stream's stay
    est.set_params(max_iter=2).fit(*next(stream(1, rows=300)))
    assert list_versions(url)[0] == [1, 6, 10, 11, 13, 14]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("make", [
    lambda url: LogisticRegression(client="local", solver="ftrl", random_state=0,
                                   checkpoint=url),
    lambda url: FactorizationMachineClassifier(client="local", n_components=4, random_state=0,
                                               checkpoint=url)])
def test_a_stream_saves_one_checkpoint_version_per_batch(make, tmp_path):
    """A partial_fit saved its model before its epoch, a copy of the stream's last version:
    2 versions per batch. It now goes on from that version (not saved again) while the
    model is the one it holds; a model changed since, or that version gone, is saved
    first again."""
    from dask_ps.model.format import latest, list_versions

    url = str(tmp_path / "ck")
    batches = list(stream(5, rows=300))
    est = learn_online(make(url), batches[:1], classes=[0, 1])
    assert latest(url).version == 2  # the first batch: before (the new model) and after
    for n, (X, y) in enumerate(batches[1:4], start=3):
        est.partial_fit(X, y)
        assert latest(url).version == n  # one version per batch
        assert latest(url).attrs["extra"]["results"][0]["loss"] == est.history_[-1]["loss"]
    assert list_versions(url) == ([4, 5], [])
    est.intercept_ = est.intercept_ + 1.0  # the model is not the last version's any more
    est.partial_fit(*batches[4])
    assert list_versions(url) == ([6, 7], [])  # saved before the batch again


def test_batches_of_python_lists_are_learnt():
    """A batch of lists of rows, as scikit-learn's partial_fit takes, raised AttributeError
    "'list' object has no attribute 'shape'" (learn_online counted rows by X.shape)."""
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=(60, 3)).tolist(), (np.arange(60) % 2).tolist())
               for _ in range(2)]
    est = learn_online(LogisticRegression(client="local", random_state=0, checkpoint=None),
                       batches)
    assert [(r["batch"], r["rows"]) for r in est.history_] == [(1, 60), (2, 60)]
    assert np.isfinite(est.history_[1]["progressive_log_loss"])
    empty = learn_online(LogisticRegression(client="local", random_state=0, checkpoint=None),
                         [([], []), batches[0]])
    assert [(r["batch"], r["rows"]) for r in empty.history_] == [(2, 60)]
