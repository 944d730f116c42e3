"""What a load or a restore of a checkpoint folder reads of a version's metadata, and what it
says of the versions it skips."""

import collections
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from dask_ps import PSModel
from dask_ps.model.format import TornCheckpointWarning

pytestmark = pytest.mark.timeout(120)

#: Files opened under a folder while :data:`_WATCH` names it (an audit hook: every ``open``,
#: by zarr's LocalStore and fsspec alike, in this process).
_OPENED: collections.Counter = collections.Counter()
_WATCH: list[str] = []


def _audit(event, args):
    if _WATCH and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path.startswith(_WATCH[0]):
            _OPENED[os.path.relpath(path, _WATCH[0])] += 1


sys.addaudithook(_audit)  # a hook cannot be removed: it counts only while _WATCH is set


def _opens(folder: str, fn) -> dict:
    """``{file under folder: times opened}`` while ``fn()`` runs."""
    _OPENED.clear()
    _WATCH[:] = [folder]
    try:
        fn()
    finally:
        _WATCH.clear()
    return dict(_OPENED)


def test_a_load_or_restore_of_a_folder_reads_a_versions_metadata_once(tmp_path):
    """The chosen version's zarr.json was read three times (verify, latest's zarr group,
    the restore's check that it had not changed) and its manifest four times (listing,
    verify, latest's format check, the restore's). A version just read from the folder is
    now restored with what was read: each file once. A CheckpointInfo given (read at some
    earlier time) is still read again and compared."""
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (50, 2), optimizer="adagrad")
    model.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    model.push("h", [1, 2, 3], np.ones((3, 2)))
    model.save(url)
    info = model.save(url)
    for what, fn in [("load", lambda: PSModel.load("local", url).close()),
                     ("restore(url)", lambda: model.restore(url))]:
        opened = _opens(url, fn)
        assert opened.get("v000002/zarr.json") == 1, (what, opened)
        assert opened.get("v000002/manifest.json") == 1, (what, opened)
        assert opened.get("v000001/manifest.json") == 1, (what, opened)  # listed only
        assert "v000001/zarr.json" not in opened, (what, opened)
    opened = _opens(url, lambda: model.restore(info))  # given: read again, to compare
    assert opened.get("v000002/zarr.json") == 1 and opened.get("v000002/manifest.json") == 1, \
        opened
    model.close()


def _damage(url: str, version: int, how: str) -> None:
    """Damage array t0/values of ``version``: flip a byte of its last chunk (its checksum
    fails when loaded) or delete that chunk (found before loading)."""
    chunk = sorted(p for p in (Path(url) / f"v{version:06d}" / "t0" / "values" / "c").rglob("*")
                   if p.is_file())[-1]
    if how == "lost":
        chunk.unlink()
        return
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk.write_bytes(bytes(raw))


@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
@pytest.mark.parametrize("how, found", [
    ("checksum", r"table 'w': array 'values', rows 200\.\.300 are damaged"),
    ("lost", r"array 't0/values' has 2 of its 3 chunks")], ids=["checksum", "lost"])
def test_restore_of_a_folder_says_every_version_it_skipped_in_one_warning(tmp_path, how, found):
    """The newest version damaged, the one before it another model's: restore(url) warned
    twice, a TornCheckpointWarning "version 3 is damaged; skipped, using version 2" (which
    was not used) and a UserWarning "version 2 holds tables ['v']; skipped, using version
    1". It warns once now, naming each version skipped and why, and the version used;
    whether the damage is found while loading (a checksum) or before (a lost chunk)."""
    url = str(tmp_path / "ck")
    a = PSModel("local", n_shards=2)
    a.add_table("w", (300, 2), optimizer="adagrad")
    b = PSModel("local", n_shards=2)
    b.add_table("v", (30,), optimizer="adagrad")
    a.push("w", np.arange(300), np.ones((300, 2)))
    a.save(url, clock=1, chunk_rows=100)  # version 1: a's
    sound = a.pull("w")
    b.save(url)  # version 2: b's
    a.push("w", np.arange(300), np.ones((300, 2)))
    a.save(url, clock=3, chunk_rows=100)  # version 3: a's, damaged
    _damage(url, 3, how)
    a.push("w", np.arange(300), np.ones((300, 2)))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        info = a.restore(url)
    said = [(w.category, str(w.message)) for w in seen]
    assert info.version == 1 and a.checkpoint_info.version == 1, said
    np.testing.assert_array_equal(a.pull("w"), sound)
    assert len(said) == 1, said
    category, message = said[0]
    assert category is TornCheckpointWarning, said
    assert re.match(rf"checkpoint folder {re.escape(repr(url))}: version 3 is damaged "
                    rf"\(.*{found}.*\); version 2 holds tables \['v'\], not the model's "
                    rf"\['w'\]: it is another model's checkpoint; skipped, using version 1, "
                    rf"the newest sound version of this model$", message), message
    assert seen[0].filename == __file__
    assert info.damaged.keys() == {3}
    a.close()
    b.close()


def test_load_of_a_folder_says_torn_and_damaged_versions_in_one_warning(tmp_path):
    """A torn newest version, then one whose checksum fails when loaded: load(url) warned
    "versions [3] are incomplete; skipped, using version 2", then "version 2 is damaged;
    skipped, using version 1". Once now, naming both."""
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (300, 2), optimizer="adagrad")
    model.push("w", np.arange(300), np.ones((300, 2)))
    model.save(url, clock=1, chunk_rows=100)
    sound = model.pull("w")
    model.save(url, clock=2, chunk_rows=100)
    model.save(url, clock=3, chunk_rows=100)
    _damage(url, 2, "checksum")
    (Path(url) / "v000003" / "manifest.json").unlink()  # torn: its writer died
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loaded = PSModel.load("local", url)
    said = [str(w.message) for w in seen]
    assert loaded.checkpoint_info.version == 1 and loaded.checkpoint_info.torn == [3], said
    np.testing.assert_array_equal(loaded.pull("w"), sound)
    assert len(said) == 1 and seen[0].category is TornCheckpointWarning, said
    assert re.match(rf"checkpoint {re.escape(repr(url))}: versions \[3\] are incomplete "
                    rf"\(torn writes\), version 2 is damaged \(.*rows 200\.\.300 are "
                    rf"damaged.*\); skipped, using version 1$", said[0]), said
    assert seen[0].filename == __file__
    loaded.close()
    model.close()
