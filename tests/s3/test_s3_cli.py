"""``dask-ps train`` on s3:// data with an s3:// checkpoint, run as a user runs it (a
subprocess, its environment reaching moto's S3 server), continued with ``--resume auto``;
and an s3:// input or checkpoint that cannot be, refused before any cluster starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from dask_ps.cli import main
from dask_ps.model import format as ck


def _svm(rng, rows: int) -> bytes:
    X = rng.normal(size=(rows, 4))
    lines = [f"{int(x[0] + x[1] > 0)} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x))
             for x in X]
    return ("\n".join(lines) + "\n").encode()


def _run(s3, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **s3.env, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "dask_ps.cli", "train", "lr", *args],
                          env=env, capture_output=True, text=True, timeout=280, cwd=REPO)


@pytest.mark.timeout(600)
def test_train_on_s3_with_an_s3_checkpoint_then_resume(s3):
    rng = np.random.default_rng(5)
    fs = fsspec.filesystem("s3")
    for name, rows in [("train/a.svm", 200), ("train/b.svm", 200), ("test.svm", 100)]:
        fs.pipe_file(s3.url(name), _svm(rng, rows))
    common = ["--train", s3.url("train/*.svm"), "--test", s3.url("test.svm"),
              "--n-features", "5", "--workers", "2", "--checkpoint", s3.url("ck"),
              "--checkpoint-every", "1"]
    first = _run(s3, *common, "--max-iter", "2")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert f"last checkpoint: {s3.url('ck')} version 3" in first.stdout  # + the final one
    assert "test: AUC" in first.stdout
    again = _run(s3, *common, "--max-iter", "3", "--resume", "auto")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert f"resumed from checkpoint: {s3.url('ck')} version 3, after epoch 2" in again.stdout
    assert "LogisticRegression(ftrl) 3/3" in again.stdout and " 1/3" not in again.stdout
    assert ck.list_versions(s3.url("ck"))[0][-1] == 4


def test_missing_s3_input_or_checkpoint_bucket_is_refused_before_a_cluster(s3, capsys):
    fsspec.filesystem("s3").pipe_file(s3.url("t.svm"), b"1 1:1\n")
    for args, said in [
            (["--train", "s3://no-such-bucket-4f1/x.svm"],
             "--train s3://no-such-bucket-4f1/x.svm: no such file (bucket "
             "'no-such-bucket-4f1' does not exist)"),
            (["--train", "s3://no-such-bucket-4f1/*.svm"],
             "--train s3://no-such-bucket-4f1/*.svm: no such file (bucket "
             "'no-such-bucket-4f1' does not exist)"),
            (["--train", s3.url("nope.svm")], f"--train {s3.url('nope.svm')}: no such file"),
            (["--train", s3.url("t.svm"), "--checkpoint", "s3://no-such-bucket-4f1/ck"],
             "--checkpoint: checkpoint 's3://no-such-bucket-4f1/ck': bucket "
             "'no-such-bucket-4f1' does not exist")]:
        assert main(["train", "lr", *args, "--workers", "1"]) == 2
        out = capsys.readouterr()
        assert "cluster:" not in out.out
        assert out.err.strip().splitlines()[-1].startswith(f"dask-ps: error: {said}"), out.err


def _saved_lr(s3, rng) -> str:
    """An LR saved by ``dask-ps train --save s3://…`` (in this process), trained on s3://."""
    fs = fsspec.filesystem("s3")
    for name, rows in [("train.svm", 200), ("test.svm", 80)]:
        fs.pipe_file(s3.url(name), _svm(rng, rows))
    model = s3.url("model.npz")
    assert main(["train", "lr", "--train", s3.url("train.svm"), "--n-features", "5",
                 "--workers", "1", "--max-iter", "2", "--save", model]) == 0
    return model


def test_evaluate_and_export_an_s3_model_on_s3_data(s3, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a wrong export into a local folder "s3:" would land here
    model = _saved_lr(s3, np.random.default_rng(6))
    capsys.readouterr()
    assert main(["evaluate", model, "--test", s3.url("test.svm")]) == 0
    assert capsys.readouterr().out.startswith("test: AUC ")
    out = s3.url("export")
    assert main(["export", model, out]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"wrote {out}/coef.parquet", f"wrote {out}/model.json"]
    assert len(lines) == 3 and lines[2].startswith("feature: the LIBSVM feature index")
    assert not (tmp_path / "s3:").exists()
    fs = fsspec.filesystem("s3")
    with fs.open(f"{out}/coef.parquet", "rb") as f:
        assert pd.read_parquet(f).shape == (4, 2)  # the features with a weight
    assert json.loads(fs.cat_file(f"{out}/model.json"))["n_features"] == 5
    # an earlier export is replaced (its CSV tables too); beside other files, refused and
    # nothing replaced; a missing bucket named
    assert main(["export", model, out, "--format", "csv"]) == 0
    assert main(["export", model, out]) == 0
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(out, refresh=True)) == [
        "coef.parquet", "model.json"]
    fs.pipe(f"{out}/notes.txt", b"mine")
    capsys.readouterr()
    assert main(["export", model, out]) == 2
    assert (f"dask-ps: error: {out} holds an earlier export (coef.parquet, model.json) and "
            f"also notes.txt, which are not part of it") in capsys.readouterr().err
    assert main(["export", model, "s3://no-such-bucket-4f1/export"]) == 2
    assert ("dask-ps: error: out 's3://no-such-bucket-4f1/export': bucket "  # (probed)
            "'no-such-bucket-4f1' does not exist") in capsys.readouterr().err
    assert not fs.exists("no-such-bucket-4f1")


def test_an_s3_model_in_a_missing_bucket_or_refused_is_named(s3, capsys, s3_denied_later):
    model = _saved_lr(s3, np.random.default_rng(7))
    capsys.readouterr()
    for command in [["evaluate", "s3://no-such-bucket-4f1/m.npz", "--test", s3.url("test.svm")],
                    ["export", "s3://no-such-bucket-4f1/m.npz", s3.url("out")]]:
        assert main(command) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            "dask-ps: error: model s3://no-such-bucket-4f1/m.npz: no such file (bucket "
            "'no-such-bucket-4f1' does not exist)")
    with s3_denied_later():
        assert main(["evaluate", model, "--test", s3.url("test.svm")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"dask-ps: error: model {model!r}: access denied"), err


def test_an_s3_checkpoint_folder_given_as_a_model_is_said_to_be_one(s3, capsys):
    fsspec.filesystem("s3").pipe_file(s3.url("ck/v1/meta.json"), b"{}")
    for command in [["evaluate", s3.url("ck"), "--test", s3.url("ck/v1/meta.json")],
                    ["export", s3.url("ck"), s3.url("out")]]:
        assert main(command) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"dask-ps: error: {s3.url('ck')}: a folder, not a model file written by "
            f"save_estimator (dask-ps train --save); a checkpoint folder is continued with "
            f"resume=True (--resume auto), not loaded")


def test_no_credentials_is_a_user_error_before_a_cluster(s3, capsys, monkeypatch):
    """Was "unexpected NoCredentialsError: Unable to locate credentials (a bug of dask_ps?
    please report it ...)", status 1."""
    import s3fs

    url = s3.url("t.svm")
    fsspec.filesystem("s3").pipe_file(url, b"1 1:1\n")
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        for fmt in [[], ["--format", "csv", "--label", "click"]]:
            assert main(["train", "lr", "--train", url, *fmt, "--workers", "1"]) == 2
            out = capsys.readouterr()
            assert "cluster:" not in out.out and "Traceback" not in out.err
            assert out.err.strip().splitlines()[-1].startswith(
                f"dask-ps: error: {url}: no credentials to read bucket "), out.err
    finally:
        monkeypatch.undo()
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.mark.timeout(120)
def test_no_credentials_to_write_is_one_line_before_a_cluster(s3, capsys, monkeypatch,
                                                              tmp_path):
    """``--save``, ``--checkpoint`` and ``export`` to s3:// without credentials: "unexpected
    NoCredentialsError: Unable to locate credentials (a bug of dask_ps? ...)", status 1,
    ``--save`` after the whole training (the model lost), export at its end. Now the probe
    written before the cluster starts (before the model is read) says it, naming the
    option and the URL."""
    import s3fs

    monkeypatch.chdir(tmp_path)
    Path("good.svm").write_text("1 1:1\n0 2:1\n")
    Path("m.npz").write_bytes(b"PK")  # (not read)
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = s3.bucket.split("/")[0]
    try:
        for argv, head in [
                (["train", "lr", "--train", "good.svm", "--save", s3.url("m.npz")],
                 f"--save {s3.url('m.npz')!r}"),
                (["train", "lr", "--train", "good.svm", "--checkpoint", s3.url("ck")],
                 f"--checkpoint: checkpoint {s3.url('ck')!r}"),
                (["export", "m.npz", s3.url("exp")], f"out {s3.url('exp')!r}")]:
            assert main(argv) == 2
            out = capsys.readouterr()
            assert "cluster:" not in out.out and "Traceback" not in out.err, out.err
            assert out.err.strip().splitlines() == [
                f"dask-ps: error: {head}: no credentials to write to bucket {bucket!r} "
                f"(Unable to locate credentials); set them (e.g. AWS_ACCESS_KEY_ID and "
                f"AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws)"], out.err
    finally:
        monkeypatch.undo()
        s3fs.S3FileSystem.clear_instance_cache()
