"""What a load, a restore, a recovery or a save of a checkpoint folder reads of a version's
metadata, and what a load, a restore or a recovery says of the versions it skips."""

import collections
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import NO_DASHBOARD

from dask_ps import PSModel
from dask_ps.model.format import TornCheckpointWarning, latest

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


def _two_versions(tmp_path):
    """A local 2-shard model (a dense and a hashed table, adagrad) saved twice in folder
    ``ck``: ``(url, model, info)``, ``info`` the second version's."""
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (50, 2), optimizer="adagrad")
    model.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    model.push("h", [1, 2, 3], np.ones((3, 2)))
    model.save(url)
    return url, model, model.save(url)


def test_a_load_or_restore_of_a_folder_reads_a_versions_metadata_once(tmp_path):
    """The chosen version's zarr.json was read three times (verify, latest's zarr group,
    the restore's check that it had not changed) and its manifest four times (listing,
    verify, latest's format check, the restore's). A version just read from the folder is
    now restored with what was read: each file once. A CheckpointInfo given (read at some
    earlier time) is still read again and compared."""
    url, model, info = _two_versions(tmp_path)
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


def test_a_recovery_or_resume_reads_a_versions_metadata_once(tmp_path):
    """recover(url) read the chosen version's zarr.json twice and its manifest twice: once
    when choosing it (latest: checked against the manifest's checksums, its format, the
    model it holds), again when restoring it (as a CheckpointInfo given, read at some
    earlier time). It is now restored with what was read, as restore(url) restores it; a
    resume too (whose manifests were read once more: the folder listed first, to see
    whether it holds a version at all; that listing is now the one latest chooses from)."""
    from dask_ps.model.recovery import run_clocks

    url, model, _ = _two_versions(tmp_path)
    for what, fn, manifest in [
            ("recover(url)", lambda: model.recover(url), 1),
            ("resume", lambda: run_clocks(model, lambda s, e: [None] * (e - s), 0,
                                          checkpoint=url, resume=True), 1)]:
        opened = _opens(url, fn)
        assert opened.get("v000002/zarr.json") == 1, (what, opened)
        assert opened.get("v000002/manifest.json") == manifest, (what, opened)
        assert opened.get("v000001/manifest.json") == 1, (what, opened)
        assert "v000001/zarr.json" not in opened, (what, opened)
        assert model.checkpoint_info.version == 2, what
    model.close()


def _manifests(opened: dict) -> dict:
    """``{version folder: times its manifest.json was opened}`` in ``opened``."""
    return {p.split("/")[0]: n for p, n in opened.items() if p.endswith("/manifest.json")}


def test_a_save_reads_each_versions_manifest_once(tmp_path):
    """A save listed the folder and read every version's manifest three times: for its
    warning when the newest version holds another model's tables, again in latest (the
    version that warning compares with), again to number the new version; a fit's every
    checkpoint did too. The folder is now listed and its manifests read once, for the
    warning and latest; the new version's number is taken from the folder's names, listed
    anew just before the version is claimed, reading no manifest. A save with ``keep``
    reads them once more, after writing (its pruning sees the folder as it is then)."""
    from dask_ps.model.recovery import run_clocks

    url = str(tmp_path / "ck")
    a = PSModel("local", n_shards=2)
    a.add_table("w", (50, 2), optimizer="adagrad")
    b = PSModel("local", n_shards=2)
    b.add_table("v", (30,), optimizer="adagrad")
    a.save(url)
    a.save(url)
    with pytest.warns(UserWarning, match="two models are writing"):
        b.save(url)  # version 3: another model's, which a's next save warns of
    with pytest.warns(UserWarning, match=r"version 3 holds tables \['v'\], this model "
                                         r"\['w'\]; two models are writing") as seen:
        opened = _opens(url, lambda: a.save(url))
    assert len(seen) == 1 and seen[0].filename == __file__, [str(w.message) for w in seen]
    assert _manifests(opened) == {"v000001": 1, "v000002": 1, "v000003": 1}, opened
    assert latest(url).version == 4 and latest(url).attrs["tables"].keys() == {"w"}
    opened = _opens(url, lambda: a.save(url, keep=10))  # a's newest: no warning
    assert _manifests(opened) == {"v000001": 2, "v000002": 2, "v000003": 2, "v000004": 2,
                                  "v000005": 1}, opened  # the save's own: read by prune
    fit = str(tmp_path / "fit")  # a fit of 2 epochs, keep=None: 3 checkpoints (0, 1, 2)
    opened = _opens(fit, lambda: run_clocks(a, lambda s, e: [None] * (e - s), 2,
                                            checkpoint=fit, keep=None))
    assert _manifests(opened) == {"v000001": 2, "v000002": 1}, opened
    a.close()
    b.close()


def _arrays_read(opened: dict) -> dict:
    """``{array: times its zarr.json was opened}`` of the arrays (not the group) in
    ``opened``."""
    return {p[:-len("/zarr.json")]: n for p, n in opened.items()
            if p.endswith("/zarr.json") and p.count("/") > 1}


def _two_tables(client) -> PSModel:
    model = PSModel(client, n_shards=2)
    model.add_table("w", (5000, 2), optimizer="adagrad")
    model.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    model.push("w", np.arange(5000), np.ones((5000, 2)))
    model.push("h", np.arange(3000), np.ones((3000, 2)))
    return model


#: The arrays of :func:`_two_tables`' version 2: each one's zarr.json read once.
_ONCE = {f"v000002/{a}": 1 for a in ["t0/values", "t0/slots/accumulator", "t1/keys",
                                     "t1/values", "t1/slots/accumulator"]}


def test_a_load_or_restore_reads_each_arrays_metadata_once(tmp_path):
    """Each array's zarr.json was read by latest's verify, then opened again by every
    reader task: twice by a load, three times by a restore or a recovery (its check, then
    its load), once more per task on a cluster. The arrays are now opened once, in the
    client, with the metadata latest read and checked against the manifest, and passed to
    the tasks; a version given that latest did not read (save's) reads each one once."""
    url = str(tmp_path / "ck")
    model = _two_tables("local")
    model.save(url, chunk_rows=500)
    saved = model.save(url, chunk_rows=500)
    for what, fn in [("load", lambda: PSModel.load("local", url).close()),
                     ("restore(url)", lambda: model.restore(url)),
                     ("recover(url)", lambda: model.recover(url)),
                     ("restore(save's info)", lambda: model.restore(saved))]:
        assert _arrays_read(_opens(url, fn)) == _ONCE, what
    read = _opens(url, lambda: model.restore(latest(url)))  # latest's read, restore's none
    assert _arrays_read(read) == _ONCE, read
    assert model.restore(latest(url)).arrays.keys() == {a[len("v000002/"):] for a in _ONCE}
    model.close()


def test_a_save_or_export_opens_each_array_in_the_client_alone(tmp_path):
    """Every writer task opened each array of its table again (reading its zarr.json): a
    save on 2 shards (2 writer tasks per table) opened each zarr.json 4 times, an export 3.
    Each array is now opened once, as it is created in the client, and passed to the tasks:
    a save looks for its zarr.json once as it creates it (zarr's check that no array is
    there yet) and reads it once for the manifest's checksum; an export only looks."""
    url, exported = str(tmp_path / "ck"), str(tmp_path / "export")
    model = _two_tables("local")
    model.save(url, chunk_rows=500)
    opened = _arrays_read(_opens(url, lambda: model.save(url, chunk_rows=500)))
    assert {a: n for a, n in opened.items() if a in _ONCE} == {a: 2 for a in _ONCE}, opened
    opened = _opens(exported, lambda: model.export(exported))
    assert {p: n for p, n in opened.items() if p in ("w/zarr.json", "h/keys/zarr.json",
                                                      "h/values/zarr.json")} == {
        "w/zarr.json": 1, "h/keys/zarr.json": 1, "h/values/zarr.json": 1}, opened
    model.close()


def _install_open_counter(folder: str) -> None:
    """In a worker: count the files opened under ``folder`` (:func:`_worker_opens`)."""
    counts: collections.Counter = collections.Counter()

    def audit(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.fsdecode(args[0])
            if path.startswith(folder):
                counts[os.path.relpath(path, folder)] += 1

    sys.addaudithook(audit)
    sys.modules[__name__]._WORKER_OPENED = counts


def _worker_opens() -> dict:
    counts = sys.modules[__name__]._WORKER_OPENED
    out = dict(counts)
    counts.clear()
    return out


@pytest.mark.timeout(240)
def test_reader_and_writer_tasks_on_a_cluster_read_no_arrays_metadata(tmp_path):
    """On a cluster each reader task opened every array of its table again (a restore on 2
    shards read each zarr.json 5 times), and so did each writer task (a save on 2 shards:
    twice in the workers, beside the client's two): the tasks now take the arrays the
    client opened (or created), pickled with their metadata, and read none."""
    from distributed import Client, LocalCluster

    url = str(tmp_path / "ck")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      **NO_DASHBOARD, worker_dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(_install_open_counter, url)
        model = _two_tables(client)
        model.save(url, chunk_rows=500)
        client.run(_worker_opens)
        client_opened = _opens(url, lambda: model.save(url, chunk_rows=500))
        workers = [_arrays_read(seen) for seen in client.run(_worker_opens).values()]
        assert workers == [{}, {}], workers  # created, then read for the manifest: in here
        client_opened = _arrays_read(client_opened)
        assert {a: n for a, n in client_opened.items() if a in _ONCE} == {
            a: 2 for a in _ONCE}, client_opened
        for what, fn in [("load", lambda: PSModel.load(client, url, n_shards=2).close()),
                         ("restore(url)", lambda: model.restore(url)),
                         ("recover(url)", lambda: model.recover(url))]:
            opened = collections.Counter(_opens(url, fn))
            for seen in client.run(_worker_opens).values():
                opened.update(seen)
            assert _arrays_read(opened) == _ONCE, (what, dict(opened))
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


def _sound_foreign_damaged(tmp_path, how: str):
    """A folder of 3 versions: 1 of model ``a`` (sound), 2 of another model ``b``, 3 of
    ``a`` damaged (``how``: see :func:`_damage`); ``(url, a, b, the rows of version 1)``."""
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
    return url, a, b, sound


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
    url, a, b, sound = _sound_foreign_damaged(tmp_path, how)
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


@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
@pytest.mark.parametrize("how, found", [
    ("checksum", r"table 'w': array 'values', rows 200\.\.300 are damaged"),
    ("lost", r"array 't0/values' has 2 of its 3 chunks")], ids=["checksum", "lost"])
def test_recover_and_resume_of_a_folder_say_every_version_skipped_in_one_warning(
        tmp_path, how, found):
    """The newest version damaged, the one before it another model's: recover(url) warned
    twice, a TornCheckpointWarning "version 3 is damaged; skipped, using version 2" (which
    was not used) and a UserWarning "version 2 holds tables ['v']; skipped, using version
    1"; damage found before loading (a lost chunk) was not said at all. A resume did as
    recover did. Each warns once now, naming each version skipped and why, and the version
    used."""
    from dask_ps.model.recovery import run_clocks

    url, a, b, sound = _sound_foreign_damaged(tmp_path, how)
    start = rf"checkpoint folder {re.escape(repr(url))}: version 3 is damaged \(.*{found}.*\); "
    for what, roll_back, held in [
            ("recover", lambda: a.recover(url)["version"],
             r"version 2 holds tables \['v'\], not the model's \['w'\]: it is another "
             r"model's checkpoint; skipped, using version 1, the newest sound version of "
             r"this model$"),
            ("resume", lambda: run_clocks(a, lambda s, e: [None] * (e - s), 3,
                                          checkpoint=url, resume=True)
             and a.checkpoint_info.version,
             r"version 2 holds another fit: tables \['v'\] \(this fit's: \['w'\]\); "
             r"skipped, using version 1, the newest sound version of this fit$")]:
        a.push("w", np.arange(300), np.ones((300, 2)))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            version = roll_back()
        seen = [w for w in seen if "two models are writing" not in str(w.message)]  # saves
        said = [(w.category, str(w.message)) for w in seen]
        assert version == 1, (what, said)
        if what == "recover":
            np.testing.assert_array_equal(a.pull("w"), sound)
        assert len(said) == 1 and said[0][0] is TornCheckpointWarning, (what, said)
        assert re.match(start + held, said[0][1]), (what, said)
        assert seen[0].filename == __file__, (what, seen[0].filename)
    a.close()
    b.close()
