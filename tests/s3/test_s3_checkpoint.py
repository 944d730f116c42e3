"""Checkpoints, saved estimators and online model versions on s3:// (moto's S3 server,
through s3fs), written by the shards' workers of a LocalCluster; and the errors of a missing
bucket or wrong credentials, which name the URL and leave the last good checkpoint as it
was."""

from __future__ import annotations

import contextlib
import errno
import re
import threading

import fsspec
import numpy as np
import pytest

import dask_ps
from dask_ps.algorithms.online import learn_online, version_path
from dask_ps.io import read_libsvm
from dask_ps.model import format as ck
from dask_ps.model._targets import check_store_url
from dask_ps.model._versions import CLAIM
from dask_ps.model._versions import claim as _claim
from dask_ps.saving import load_estimator, save_estimator


def _model(client, n_shards=2, seed=0):
    model = dask_ps.PSModel(client, n_shards=n_shards)
    model.add_table("w", (500, 3), optimizer="adagrad")
    rng = np.random.default_rng(seed)
    model.push("w", np.arange(0, 500, 7), rng.normal(size=(72, 3)))
    return model


def test_round_trip_versions_reshard_and_concurrent_saves(s3_client, s3):
    url = s3.url("run.zarr")
    model = _model(s3_client)
    try:
        assert [model.save(url, clock=c, keep=2).version for c in (1, 2, 3)] == [1, 2, 3]
        assert ck.list_versions(url) == ([2, 3], [])
        again = dask_ps.PSModel.load(s3_client, url, n_shards=3)
        np.testing.assert_array_equal(again.pull("w"), model.pull("w"))
        assert again.checkpoint_info.clock == 3 and again.n_shards == 3
        again.close()
        # two models saving into one folder at once each take a version of their own
        other, out = _model(s3_client, seed=1), {}
        saves = [threading.Thread(target=lambda m=m, k=k: out.__setitem__(
            k, m.save(s3.url("both.zarr"), clock=k).version))
            for k, m in enumerate([model, other])]
        [t.start() for t in saves]
        [t.join() for t in saves]
        assert sorted(out.values()) == [1, 2]
        assert ck.list_versions(s3.url("both.zarr")) == ([1, 2], [])
        for k, m in enumerate([model, other]):
            loaded = dask_ps.PSModel.load(s3_client, s3.url("both.zarr"), version=out[k])
            np.testing.assert_array_equal(loaded.pull("w"), m.pull("w"))
            loaded.close()
        other.close()
    finally:
        model.close()


def test_the_version_claim_is_exclusive_on_s3(s3):
    """fsspec's create-only mode on s3fs is a conditional put (If-None-Match): of saves
    claiming one version at once, one wins."""
    path = s3.url("claims.zarr", "v000001")
    wins, start = [], threading.Barrier(8)

    def claim():
        start.wait()
        wins.append(_claim(path))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(wins) == [False] * 7 + [True]
    assert fsspec.filesystem("s3").exists(f"{path}/{CLAIM}")


#: S3's answers to a conditional put racing another on the same key, by error code (AWS:
#: "retry the upload"; S3's general 409 "OperationAborted": "Please try again")
CONFLICTS = {"ConditionalRequestConflict": "A conflicting operation occurred. If using "
                                           "PutObject you can retry the request.",
             "OperationAborted": "A conflicting conditional operation is currently in "
                                 "progress against this resource. Please try again."}


class _Body:
    """The body of an HTTP response as aiobotocore reads it (``await raw.read()``)."""

    def __init__(self, data: bytes):
        self.data = data

    async def read(self) -> bytes:
        return self.data


@contextlib.contextmanager
def _conflicts(first: int, code: str = "ConditionalRequestConflict", status: int = 409):
    """The next ``first`` claim writes (PutObject of a key ending in :data:`CLAIM`) of this
    process's s3fs client are answered S3's 409 ``code`` (of :data:`CONFLICTS`), as AWS
    answers a conditional put racing another (or HTTP ``status``). moto never answers so:
    the answer is made at the client's botocore ``before-send`` event, and from there on
    botocore parses it and s3fs translates it as they would AWS's. Yields the URLs so
    answered."""
    from aiobotocore.awsrequest import AioAWSResponse

    client = fsspec.filesystem("s3").s3
    answered = []
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>'
            f'{CONFLICTS[code]}</Message><RequestId>T0</RequestId><HostId>H0</HostId>'
            f'</Error>').encode()

    def conflict(request, **_):
        if len(answered) >= first or not request.url.split("?")[0].endswith(CLAIM):
            return None  # sent to the server
        answered.append(request.url)
        return AioAWSResponse(request.url, status, {"content-type": "application/xml"},
                              _Body(body))

    client.meta.events.register("before-send.s3.PutObject", conflict)
    try:
        yield answered
    finally:
        client.meta.events.unregister("before-send.s3.PutObject", conflict)


def test_s3fs_gives_a_409_conflict_as_a_plain_oserror(s3):
    """What the claim has to recognise: s3fs maps no 409, so a conditional put's conflict is
    an OSError(EIO) caused by botocore's ClientError of code ConditionalRequestConflict."""
    from botocore.exceptions import ClientError

    fs = fsspec.filesystem("s3")
    with _conflicts(1) as answered, pytest.raises(OSError) as err:
        with fs.open(s3.url("x", CLAIM), "xb") as f:
            f.write(b"x")
    assert len(answered) == 1 and type(err.value) is OSError
    assert err.value.errno == errno.EIO
    cause = err.value.__cause__
    assert isinstance(cause, ClientError)
    assert cause.response["Error"]["Code"] == "ConditionalRequestConflict"
    assert cause.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert not fs.exists(s3.url("x", CLAIM))  # nothing reached the server


def test_a_claim_s3_answers_409_conflict_is_tried_again(s3_client, s3):
    """S3 may answer two conditional puts racing on one key 409 ConditionalRequestConflict
    ("retry the upload"): the claim tries again (it failed the save)."""
    url, model = s3.url("conflict.zarr"), _model(s3_client)
    try:
        with _conflicts(1) as answered:
            assert model.save(url, clock=1).version == 1
        assert len(answered) == 1 and answered[0].endswith(f"/conflict.zarr/v000001/{CLAIM}")
        assert ck.list_versions(url) == ([1], [])
        loaded = dask_ps.PSModel.load(s3_client, url)
        np.testing.assert_array_equal(loaded.pull("w"), model.pull("w"))
        assert loaded.checkpoint_info.clock == 1
        loaded.close()
    finally:
        model.close()


def test_a_claim_s3_answers_409_operation_aborted_is_tried_again_not_another_status(
        s3_client, s3):
    """S3 may also answer a conditional write racing another 409 OperationAborted ("A
    conflicting conditional operation is currently in progress against this resource.
    Please try again."): s3fs gives an OSError(EBUSY) caused by it, which failed the save;
    the claim tries again. The same code with another status is no conflict: not retried."""
    from dask_ps.io._storage import is_write_conflict

    fs, url, model = fsspec.filesystem("s3"), s3.url("aborted.zarr"), _model(s3_client)
    try:
        for status, retried in ((409, True), (400, False)):
            with _conflicts(1, "OperationAborted", status), pytest.raises(OSError) as err:
                with fs.open(s3.url("x", str(status), CLAIM), "xb") as f:
                    f.write(b"x")
            assert is_write_conflict(err.value) is retried, status
            assert err.value.__cause__.response["Error"]["Code"] == "OperationAborted"
        with _conflicts(1, "OperationAborted") as answered:
            assert model.save(url, clock=1).version == 1
        assert len(answered) == 1 and answered[0].endswith(f"/aborted.zarr/v000001/{CLAIM}")
        with _conflicts(100, "OperationAborted", 400) as answered, \
                pytest.raises(OSError, match=rf"^checkpoint '{url}'"):
            model.save(url, clock=2)
        assert len(answered) == 1  # not tried again
        assert ck.list_versions(url)[0] == [1]
        loaded = dask_ps.PSModel.load(s3_client, url)
        np.testing.assert_array_equal(loaded.pull("w"), model.pull("w"))
        loaded.close()
    finally:
        model.close()


@pytest.mark.parametrize("code", sorted(CONFLICTS))
def test_a_claim_conflicting_at_every_try_says_so_and_keeps_the_checkpoint(s3_client, s3,
                                                                           code):
    """When every try of a claim conflicts, the save gives up after a few, saying so in one
    line (naming the claim's URL and S3's answer), and the earlier versions stay loadable."""
    url, model = s3.url(f"conflicts-{code}.zarr"), _model(s3_client)
    try:
        model.save(url, clock=1)
        with _conflicts(100, code) as answered, pytest.raises(OSError) as err:
            model.save(url, clock=2)
        said = (rf"^checkpoint '{url}': claiming version 2 \('{url}/v000002/\{CLAIM}'\): "
                rf"S3 answered 409 {code} to each of (\d+) tries ")
        assert re.match(said, str(err.value)) and "\n" not in str(err.value)
        tries = int(re.match(said, str(err.value))[1])
        assert 1 < tries == len(answered) < 100  # tried again, but not on and on
        assert ck.list_versions(url) == ([1], [])
        loaded = dask_ps.PSModel.load(s3_client, url)
        np.testing.assert_array_equal(loaded.pull("w"), model.pull("w"))
        assert loaded.checkpoint_info.version == 1
        loaded.close()
        assert model.save(url, clock=3).version == 2  # once the conflicts end
    finally:
        model.close()


def test_a_missing_bucket_or_refused_access_is_named_and_the_checkpoint_kept(
        s3_client, s3, s3_denied_later):
    url, model = s3.url("kept.zarr"), _model(s3_client)
    try:
        model.save(url, clock=1)
        bad = "s3://no-such-bucket-4f1/run.zarr"
        said = r"^checkpoint 's3://no-such-bucket-4f1/run\.zarr': bucket 'no-such-bucket-4f1'"
        with pytest.raises(FileNotFoundError, match=said + " does not exist"):
            check_store_url(bad)
        with pytest.raises(FileNotFoundError, match=said + " does not exist") as err:
            model.save(bad)
        assert err.value.__cause__ is None and err.value.__suppress_context__
        with s3_denied_later():
            for call in (lambda: check_store_url(url), lambda: model.save(url, clock=2),
                         lambda: dask_ps.PSModel.load(s3_client, url)):
                with pytest.raises(PermissionError, match=rf"^checkpoint '{url}': access "
                                                          r"denied \(.*\); check the "):
                    call()
        assert ck.list_versions(url) == ([1], [])
        loaded = dask_ps.PSModel.load(s3_client, url)
        np.testing.assert_array_equal(loaded.pull("w"), model.pull("w"))
        loaded.close()
    finally:
        model.close()


def test_estimator_checkpoint_resume_and_saved_estimator(s3_client, s3):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] > 0).astype(int)
    kw = dict(solver="ftrl", checkpoint=s3.url("fit.zarr"), checkpoint_every=1,
              progress=False, random_state=0)
    first = dask_ps.LogisticRegression(max_iter=2, **kw).fit(X, y)
    assert ck.list_versions(s3.url("fit.zarr"))[0][-1] >= 2
    more = dask_ps.LogisticRegression(max_iter=3, resume=True, **kw).fit(X, y)
    assert more.n_iter_[0] == 3 and len(more.history_) == 3
    np.testing.assert_array_equal([r["loss"] for r in more.history_[:2]],
                                  [r["loss"] for r in first.history_])
    save_estimator(more, s3.url("m", "model.npz"))
    back, _ = load_estimator(s3.url("m", "model.npz"))
    np.testing.assert_array_equal(back.coef_, more.coef_)
    with pytest.raises(FileNotFoundError, match=r"^s3://no-such-bucket-4f1/m\.npz: bucket "
                                                r"'no-such-bucket-4f1' does not exist"):
        save_estimator(more, "s3://no-such-bucket-4f1/m.npz")
    assert not fsspec.filesystem("s3").exists("no-such-bucket-4f1")  # no bucket made


def test_learn_online_from_an_s3_folder_to_an_s3_folder(s3_client, s3):
    rng = np.random.default_rng(4)
    fs = fsspec.filesystem("s3")
    for b in range(4):
        X = rng.normal(size=(200, 4))
        lines = [f"{int(x[0] > 0)} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x))
                 for x in X]
        fs.pipe_file(s3.url("stream", f"hour-{b:02d}.svm"), ("\n".join(lines) + "\n").encode())
    files = sorted(fs.glob(s3.url("stream", "*.svm")))
    batches = (read_libsvm(f"s3://{f}", n_features=5, zero_based=False) for f in files)
    est = dask_ps.LogisticRegression(solver="ftrl", checkpoint=None, progress=False,
                                     random_state=0)
    est = learn_online(est, batches, classes=[0, 1], version_every=2,
                       versions=s3.url("versions"))
    assert [r.get("version") for r in est.history_] == [
        None, version_path(s3.url("versions"), 2), None, version_path(s3.url("versions"), 4)]
    v4, _ = load_estimator(version_path(s3.url("versions"), 4))
    np.testing.assert_array_equal(v4.coef_, est.coef_)


def test_versions_another_process_writes_are_seen(s3):
    """s3fs caches a folder's listing in the process for good: a serving process that had
    listed a checkpoint (or learn_online's versions) never saw a newer version written by
    another process (here another S3FileSystem, as that process's)."""
    import s3fs

    from dask_ps.algorithms.online import last_version

    model = dask_ps.PSModel("local", n_shards=1)
    model.add_table("w", (10,), optimizer="sgd")
    model.save(s3.url("served.zarr"), clock=1)
    fsspec.filesystem("s3").pipe_file(version_path(s3.url("v"), 1), b"1")
    assert ck.list_versions(s3.url("served.zarr")) == ([1], [])
    assert last_version(s3.url("v")) == 1
    other = s3fs.S3FileSystem(skip_instance_cache=True)
    other.copy(s3.url("served.zarr", "v000001"), s3.url("served.zarr", "v000002"),
               recursive=True)
    other.pipe_file(version_path(s3.url("v"), 2), b"2")
    assert ck.list_versions(s3.url("served.zarr")) == ([1, 2], [])
    assert ck.latest(s3.url("served.zarr")).version == 2
    assert last_version(s3.url("v")) == 2
    model.close()


def test_a_save_prunes_a_torn_version_on_s3_only_once_its_writer_is_gone(s3):
    """On S3 the claim of a torn version written on another machine says nothing of its
    writer's life: a save's prune leaves it (it may be a save still writing) until nothing
    was written into it for STALE_SECONDS, told by its objects' LastModified."""
    import time

    from dask_ps.model._versions import prune, save_over

    url = s3.url("torn.zarr")
    fs = fsspec.filesystem("s3")
    with dask_ps.PSModel("local") as model:
        model.add_table("w", (10,))
        model.save(url)
        root = s3.url("torn.zarr", "v000002").removeprefix("s3://")
        fs.pipe(f"{root}/{CLAIM}", b"another-host 1\n")
        fs.pipe(f"{root}/zarr.json", b"{}")
        model.save(url, keep=2)  # version 3: version 2 kept, its writer may be alive
        assert ck.list_versions(url) == ([1, 3], [2])
        assert not save_over(fs, root)
        time.sleep(1.5)  # LastModified: whole seconds
        assert save_over(fs, root, stale=0.0)  # its age is read off the store
        assert prune(url, 2) == []  # under STALE_SECONDS still
    assert ck.list_versions(url) == ([1, 3], [2])
