"""What a load, a restore, a recovery or a resume of a URL holding no complete checkpoint
version says: what is there instead (no such folder, a file, an export, torn versions and
why each is torn). Each said "no complete checkpoint version at ..." alone, and a resume of
a folder whose versions were all torn started over without a word."""

import re
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import dask_ps
from dask_ps import PSModel
from dask_ps.exceptions import CheckpointNotFoundError
from dask_ps.model.format import TornCheckpointWarning
from dask_ps.saving import write_tables

pytestmark = pytest.mark.timeout(120)


def _model() -> PSModel:
    model = PSModel("local", n_shards=2)
    model.add_table("w", (10,), "float32", optimizer="add")
    model.push("w", np.arange(10), np.ones(10, np.float32))
    return model


#: What a version whose manifest.json is ``{not json`` (as :func:`_tear` leaves) is said.
NOT_JSON = ("manifest.json is not valid JSON (truncated or damaged): Expecting property name "
            "enclosed in double quotes at line 1, column 2")


def _tear(folder) -> list[str]:
    """Every version of ``folder`` torn: manifests removed, the newest one's not JSON;
    the version folders' names, newest first."""
    names = sorted((p.name for p in folder.iterdir() if p.name.startswith("v")), reverse=True)
    for name in names:
        (folder / name / "manifest.json").unlink()
    (folder / names[0] / "manifest.json").write_text("{not json")
    return names


def _said(fn) -> str:
    with pytest.raises(CheckpointNotFoundError) as err:
        fn()
    assert isinstance(err.value, FileNotFoundError)
    return str(err.value)


def test_load_restore_and_recover_say_what_is_there_instead_of_a_checkpoint(tmp_path):
    model = _model()
    model.export(str(tmp_path / "export"))
    write_tables(str(tmp_path / "tables"), {"coef": pd.DataFrame({"w": [1.0]})}, {})
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    expected = {
        "missing": r"^no checkpoint at '.*missing': no such folder$",
        "file": r"^no checkpoint at '.*file': it is a file, not a folder \(a checkpoint is "
                r"a folder of versions",
        "export": r"^'.*export' is an export of a model's weights \(PSModel\.export\), not a "
                  r"checkpoint: read its arrays with zarr, e\.g\. zarr\.open_group\('.*'\)"
                  r"\['w'\]\[:\] .*PSModel\.load reads checkpoints only",
        "tables": r"^'.*tables' is an export of a saved model's weights as tables \(dask-ps "
                  r"export: .*read its tables with pandas; dask-ps evaluate takes the model",
        "empty": r"^no complete checkpoint version at '.*empty': the folder holds no versions "
                 r"\(it is empty\)",
        "other": r"the folder holds no versions \(it holds notes\.txt\)",
    }
    for name, pattern in expected.items():
        url = str(tmp_path / name)
        for fn in (lambda: PSModel.load("local", url), lambda: model.restore(url),
                   lambda: model.recover(url)):
            said = _said(fn)
            assert re.search(pattern, said), (name, said)
    assert re.search(r"no complete version 1; complete: \[\], torn: \[\] \(no checkpoint at "
                     r"'.*missing': no such folder\)",
                     _said(lambda: PSModel.load("local", str(tmp_path / "missing"), version=1)))
    model.close()


def test_load_of_a_folder_of_torn_versions_names_each_and_why(tmp_path):
    model = _model()
    for _ in range(5):
        model.save(str(tmp_path / "ck"))
    names = _tear(tmp_path / "ck")  # v000005 not JSON, v000004..v000001 without one
    said = _said(lambda: PSModel.load("local", str(tmp_path / "ck")))
    assert said == (f"no complete checkpoint version at {str(tmp_path / 'ck')!r}: every "
                    f"version is torn (incomplete: its save died, or is still writing) or "
                    f"its manifest.json is damaged: {names[0]}: {NOT_JSON}; {names[1]}, "
                    f"{names[2]}, {names[3]} and 1 more: no manifest.json"), said
    assert said == _said(lambda: model.restore(str(tmp_path / "ck")))
    model.close()


def _lr(ck, max_iter, **extra):
    X = sp.random(400, 20, density=0.2, format="csr", random_state=1)
    y = (np.asarray(X.sum(axis=1)).ravel() > 2.0).astype(int)
    return dask_ps.LogisticRegression(max_iter=max_iter, random_state=0, client="local",
                                      progress=False, checkpoint=ck, **extra).fit(X, y)


def test_a_resume_of_a_folder_of_torn_versions_says_so_and_starts_over(tmp_path):
    """Every version torn: a TornCheckpointWarning names each and why, and says the fit
    starts from its first epoch; a resume of a folder that does not exist yet (the first
    fit of a resumable run) still says nothing."""
    ck = tmp_path / "ck"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to resume: no warning
        _lr(str(ck), 2, resume=True)
    torn = tmp_path / "ck5"
    shutil.copytree(ck, torn)
    names = _tear(torn)
    with pytest.warns(TornCheckpointWarning) as seen:
        est = _lr(str(torn), 3, resume=True)
    said = [str(w.message) for w in seen if w.category is TornCheckpointWarning]
    assert len(said) == 1, said
    assert said[0] == (
        f"resume: no complete checkpoint version at {str(torn)!r}: every version is torn "
        f"(incomplete: its save died, or is still writing) or its manifest.json is damaged: "
        f"{names[0]}: {NOT_JSON}; {names[1]}: no manifest.json; nothing to resume from: the "
        f"fit starts from its first epoch (the torn versions are left in the folder, this "
        f"fit's versions are saved after them)"), said
    assert [h["epoch"] for h in est.history_ if "event" not in h] == [1, 2, 3]
    assert seen[0].filename == __file__  # pointing at the caller's line
    for name in names:  # left as they were
        assert (torn / name).is_dir()


@pytest.mark.parametrize("damage", ["chunk deleted", "checksum fails"])
def test_a_resume_of_a_folder_of_damaged_versions_says_so_and_starts_over(tmp_path, damage):
    """Every complete version damaged (a chunk deleted: found by the manifest's counts; a
    chunk's bytes changed: found by its checksum when restored): resume=True (the
    command's --resume auto) raised "no complete checkpoint version" (or the checksum's
    CheckpointFormatError) where a folder of torn versions starts over; now a
    TornCheckpointWarning names the damaged versions and says the fit starts from its
    first epoch, the damaged versions left in the folder, the fit's numbered after them."""
    ck = tmp_path / "ck"
    _lr(str(ck), 2)
    names = sorted(p.name for p in ck.iterdir() if p.name.startswith("v"))
    for name in names:
        chunk = sorted(p for p in (ck / name / "t0" / "values" / "c").rglob("*")
                       if p.is_file())[0]
        if damage == "chunk deleted":
            chunk.unlink()
        else:
            data = bytearray(chunk.read_bytes())
            data[len(data) // 2] ^= 0xFF
            chunk.write_bytes(bytes(data))
    with pytest.warns(TornCheckpointWarning) as seen:
        est = _lr(str(ck), 3, resume=True)
    said = [str(w.message) for w in seen if w.category is TornCheckpointWarning]
    versions = [int(n[1:]) for n in names]
    assert len(said) == 1 and said[0].startswith(
        f"resume: checkpoint {str(ck)!r}: versions {', '.join(map(str, versions[:-1]))} and "
        f"{versions[-1]} are damaged ("), said
    assert said[0].endswith(
        "nothing to resume from: the fit starts from its first epoch (the damaged versions "
        "are left in the folder, this fit's versions are saved after them)"), said
    assert "t0" in said[0]  # the damage named
    assert seen[0].filename == __file__  # pointing at the caller's line
    assert [h["epoch"] for h in est.history_ if "event" not in h] == [1, 2, 3]
    after = sorted(p.name for p in ck.iterdir() if p.name.startswith("v"))
    assert after[:len(names)] == names and len(after) > len(names)  # kept, and after them
    assert all((ck / name / "manifest.json").is_file() for name in names)
