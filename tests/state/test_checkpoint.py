"""Zarr checkpoints: exact round trips onto any number of shards, torn writes, format checks."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

import dask_ps
from dask_ps import FTRL, AdaGrad, Adam, PSModel
from dask_ps.exceptions import CheckpointFormatError, CheckpointNotFoundError
from dask_ps.model.format import TornCheckpointWarning, list_versions

pytestmark = pytest.mark.timeout(120)

OPTIMIZERS = {"ftrl": FTRL(alpha=0.1, l1=0.01), "adagrad": AdaGrad(0.2), "adam": Adam(0.01)}


def build(client, n_shards, url=None, seed=0):
    """A model with dense and sparse tables of every stateful optimizer, trained a little."""
    rng = np.random.default_rng(seed)
    model = PSModel(client, n_shards=n_shards)
    for name, opt in OPTIMIZERS.items():
        model.add_table(f"dense_{name}", (1001, 3), "float64", optimizer=opt)
        model.add_table(f"sparse_{name}", (None, 2), partitioner="hash", optimizer=opt,
                        init=("normal", 0.0, 0.1))
    model.add_table("vector", (77,), "float32", optimizer="adagrad")
    for _ in range(3):
        for name in OPTIMIZERS:
            model.push(f"dense_{name}", rng.choice(1001, 400, replace=False),
                       rng.normal(size=(400, 3)))
            keys = rng.integers(-2**62, 2**62, 300)  # includes negative (uint64-like) keys
            model.push(f"sparse_{name}", keys, rng.normal(size=(300, 2)))
        model.push("vector", np.arange(77), rng.normal(size=77))
    return model


def _rows(keys, values, slots):
    return keys.copy(), values.copy(), {k: v.copy() for k, v in slots.items()}


def full_state(model) -> dict:
    """Every table's keys, values and optimizer slots, sorted by key."""
    out = {}
    for name in model.tables:
        parts = model.map_shards(name, _rows)
        keys = np.concatenate([p[0] for p in parts])
        order = np.argsort(keys)
        out[name] = (keys[order], np.concatenate([p[1] for p in parts])[order],
                     {k: np.concatenate([p[2][k] for p in parts])[order] for k in parts[0][2]})
    return out


def assert_same(a: dict, b: dict, slots=True):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name][0], b[name][0], err_msg=name)
        np.testing.assert_array_equal(a[name][1], b[name][1], err_msg=name)
        if slots:
            assert a[name][2].keys() == b[name][2].keys()
            for k in a[name][2]:
                np.testing.assert_array_equal(a[name][2][k], b[name][2][k],
                                              err_msg=f"{name}.{k}")


@pytest.mark.parametrize("n_from, n_to", [(3, 3), (3, 2), (2, 5), (4, 1)])
def test_round_trip_reshards_tables_and_optimizer_state_exactly(n_from, n_to):
    url = f"memory://rt-{n_from}-{n_to}"
    model = build("local", n_from)
    before = full_state(model)
    info = model.save(url, clock=7, data_position={"epoch": 3}, chunk_rows=64)
    assert info.version == 1 and info.attrs["n_shards"] == n_from
    loaded = PSModel.load("local", url, n_shards=n_to)
    assert loaded.n_shards == n_to
    assert loaded.checkpoint_info.clock == 7
    assert loaded.checkpoint_info.data_position == {"epoch": 3}
    assert_same(before, full_state(loaded))
    assert loaded.table("sparse_adam").n_keys == 900
    assert loaded.specs["dense_ftrl"].optimizer == OPTIMIZERS["ftrl"]
    # the pulled weights agree too (FTRL's are computed from z and n at each step)
    keys = np.arange(1001)
    np.testing.assert_array_equal(model.pull("dense_ftrl", keys), loaded.pull("dense_ftrl", keys))
    model.close()
    loaded.close()


@pytest.mark.parametrize("n_from, n_to", [(3, 2), (1, 4)])
def test_a_save_written_in_pieces_of_one_chunk_is_the_same_store(n_from, n_to, monkeypatch):
    """A table is written by writer tasks of at most PIECE_CHUNKS chunks each (a save's
    memory on a worker holding a large shard stays bounded): pieces of one chunk give the
    same arrays as pieces of a whole shard, and load back exactly."""
    from dask_ps.model import checkpoint, key_ranges, writers

    model = build("local", n_from)
    before = full_state(model)
    model.save(f"memory://whole-{n_from}", chunk_rows=64)
    monkeypatch.setattr(writers, "PIECE_CHUNKS", 1)
    monkeypatch.setattr(key_ranges, "_SCAN_KEYS", 7)  # a sparse shard's keys read in slices
    n, c, writers = checkpoint._plan_table(model, model.specs["dense_ftrl"], 64)
    assert (n, c, len(writers)) == (1001, 64, 16)  # one writer per chunk
    n, c, writers = checkpoint._plan_table(model, model.specs["sparse_ftrl"], 64)
    assert n == 900 and len(writers) >= 12  # ~ one per chunk, as the sample splits them
    assert sum(w[6] - w[5] for w in writers) == 900
    model.save(f"memory://pieces-{n_from}", chunk_rows=64)
    whole = zarr.open_group(f"memory://whole-{n_from}/v000001", mode="r")
    pieces = zarr.open_group(f"memory://pieces-{n_from}/v000001", mode="r")
    for name, t in whole.attrs["tables"].items():
        paths = ["values"] + (["keys"] if "sparse" in name else []) + [
            f"slots/{k}" for k in t["slots"]]
        for a in paths:
            np.testing.assert_array_equal(whole[f"{t['path']}/{a}"][:],
                                          pieces[f"{t['path']}/{a}"][:], err_msg=f"{name} {a}")
    loaded = PSModel.load("local", f"memory://pieces-{n_from}", n_shards=n_to)
    assert_same(before, full_state(loaded))
    model.close()
    loaded.close()


def test_a_large_dense_table_is_saved_in_pieces_of_bounded_bytes():
    """A dense (3*10^7,) float32 Adam table on 2 shards (172 MiB of values and moments per
    shard) is written in pieces of at most PIECE_BYTES (64 MiB) each, chunk-aligned and
    covering every row once: 16 chunks of its 2^20 rows were 192 MiB, each shard gathered
    whole (its worker's peak rose by 1.24 GiB during the save, and a 1.5 GiB worker died)."""
    from types import SimpleNamespace

    from dask_ps.model import checkpoint
    from dask_ps.model._format_tables import chunk_rows
    from dask_ps.state.table import Init, TableSpec

    spec = TableSpec.build("w", (30_000_000,), np.dtype("float32"), "range", Adam(0.01),
                           Init("constant", 0.0, 0.0, 0), 2)
    n, c, writers = checkpoint._plan_table(SimpleNamespace(n_shards=2), spec,
                                           chunk_rows(spec))
    assert (n, c) == (30_000_000, 1 << 20)
    row = 3 * 4  # values, m and v: float32 each
    assert max((w[6] - w[5]) * row for w in writers) <= 64 << 20
    assert all(w[5] % c == 0 for w in writers)
    assert sorted((w[5], w[6]) for w in writers)[0][0] == 0
    spans = sorted((w[5], w[6]) for w in writers)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] == n
    assert {w[0] for w in writers} == {0, 1}  # each shard's worker writes its own rows


def test_sparse_keys_are_stored_sorted_in_chunks_of_fixed_size():
    model = build("local", 3)
    model.save("memory://sorted", chunk_rows=50)
    group = zarr.open_group("memory://sorted/v000001", mode="r")
    t = group.attrs["tables"]["sparse_adam"]
    keys = group[f"{t['path']}/keys"][:]
    assert keys.shape == (900,) and np.all(np.diff(keys) > 0)
    assert group[f"{t['path']}/values"].chunks == (50, 2)
    assert group[f"{t['path']}/slots/t"].dtype == np.int64
    json.dumps(dict(group.attrs))  # metadata is plain JSON
    model.close()


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_first_update_after_resume_equals_uninterrupted(opt, kind):
    name = f"{kind}_{opt}"
    url = f"memory://resume-{name}"
    rng = np.random.default_rng(1)
    model = build("local", 3)
    model.save(url)
    keys = (rng.choice(1001, 500, replace=False) if kind == "dense"
            else np.concatenate([model.table(name).to_numpy()[0][:250],
                                 rng.integers(0, 2**40, 250)]))  # old and new keys
    update = rng.normal(size=(500, 3 if kind == "dense" else 2))
    model.push(name, keys, update)
    resumed = PSModel.load("local", url, n_shards=2)
    resumed.push(name, keys, update)
    assert_same({name: full_state(model)[name]}, {name: full_state(resumed)[name]})
    model.close()
    resumed.close()


def test_weights_only_load_starts_the_optimizer_afresh():
    model = build("local", 2)
    model.save("memory://weights-only")
    loaded = PSModel.load("local", "memory://weights-only", optimizer_state=False)
    a, b = full_state(model), full_state(loaded)
    assert_same(a, b, slots=False)
    assert not b["dense_adagrad"][2]["accumulator"].any()
    assert a["dense_adagrad"][2]["accumulator"].any()
    assert not b["sparse_adam"][2]["t"].any()
    model.close()
    loaded.close()


def test_versions_newest_wins_and_keep_prunes():
    model = build("local", 2)
    for i in range(4):
        model.push("vector", [0], [1.0])
        info = model.save("memory://keep", clock=i, keep=2)
    assert info.version == 4
    assert list_versions("memory://keep") == ([3, 4], [])
    loaded = PSModel.load("local", "memory://keep")
    assert loaded.checkpoint_info.version == 4 and loaded.checkpoint_info.clock == 3
    old = PSModel.load("local", "memory://keep", version=3)
    assert old.checkpoint_info.clock == 2
    with pytest.raises(CheckpointNotFoundError, match="no complete version 1"):
        PSModel.load("local", "memory://keep", version=1)
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint at .*: no such folder"):
        PSModel.load("local", "memory://nothing-here")
    for m in (model, loaded, old):
        m.close()


def _two_versions(tmp_path):
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (50_000,), "float32", optimizer="add")
    model.push("w", np.arange(50_000), np.ones(50_000, np.float32))
    model.save(url, chunk_rows=10_000)
    model.push("w", np.arange(50_000), np.ones(50_000, np.float32))
    model.save(url, chunk_rows=10_000)
    model.close()
    return url, tmp_path / "ck" / "v000002" / "t0" / "values" / "c"


def test_a_version_that_is_not_an_integer_is_refused_as_such(tmp_path):
    """load(version="1") said 'has no complete version 1; complete: [1]'."""
    url = str(tmp_path / "ck")
    model = PSModel("local")
    model.add_table("w", (4,))
    model.save(url)
    model.close()
    with pytest.raises(TypeError, match=r"version must be an integer, got '1' \(str\)"):
        PSModel.load("local", url, version="1")
    PSModel.load("local", url, version=np.int64(1)).close()


def test_a_lost_chunk_is_found_and_the_previous_version_loaded(tmp_path):
    url, chunks = _two_versions(tmp_path)
    (chunks / "3" / "0").unlink()
    with pytest.warns(TornCheckpointWarning, match=r"version 2 is damaged \(array "
                                                   r"'t0/values' has 4 of its 5 chunks: "
                                                   r"c/3/0 is missing\)"):
        model = PSModel.load("local", url)
    assert model.checkpoint_info.version == 1 and 2 in model.checkpoint_info.damaged
    np.testing.assert_array_equal(model.pull("w"), np.ones(50_000, np.float32))
    model.close()
    with pytest.raises(CheckpointFormatError, match="version 2 is damaged.*4 of its 5"):
        PSModel.load("local", url, version=2)


def test_a_lost_chunk_beside_a_stray_file_is_named_and_the_version_skipped(tmp_path):
    """verify counted the files under an array's ``c/``: two lost chunks beside two stray
    files (a ``.DS_Store``, a file inside a chunk folder) passed for a sound version, and
    loading took it, the lost chunks' rows silently zeros (zarr's fill value). Now the
    chunk keys the array's shape and chunk shape give are looked for: the missing ones are
    named and the version is skipped as a plain lost chunk is; strays alone are harmless."""
    from dask_ps.model.format import verify

    url, chunks = _two_versions(tmp_path)
    for version in ("v000001", "v000002"):  # strays everywhere
        c = tmp_path / "ck" / version / "t0" / "values" / "c"
        (c / ".DS_Store").write_bytes(b"finder")
        (c / "0" / "junk").write_bytes(b"x")
    assert verify(url, 1) == [] and verify(url, 2) == []
    (chunks / "1" / "0").unlink()
    (chunks / "3" / "0").unlink()
    problem = "array 't0/values' has 3 of its 5 chunks: c/1/0 and c/3/0 are missing"
    assert verify(url, 2) == [problem]
    with pytest.warns(TornCheckpointWarning, match=rf"version 2 is damaged \({problem}\)"):
        model = PSModel.load("local", url)
    assert model.checkpoint_info.version == 1 and 2 in model.checkpoint_info.damaged
    np.testing.assert_array_equal(model.pull("w"), np.ones(50_000, np.float32))
    model.close()
    with pytest.raises(CheckpointFormatError, match=f"version 2 is damaged: {problem}"):
        PSModel.load("local", url, version=2)


def test_an_emptied_chunk_is_named_and_the_version_skipped(tmp_path):
    """A chunk file cut to 0 bytes passed verify, and loading the latest version then failed
    on its checksum instead of falling back to the version before: now it counts as lost."""
    from dask_ps.model.format import verify

    url, chunks = _two_versions(tmp_path)
    (chunks / "2" / "0").write_bytes(b"")
    problem = "array 't0/values' has 4 of its 5 chunks: c/2/0 (0 bytes) is missing"
    assert verify(url, 2) == [problem] and verify(url, 1) == []
    with pytest.warns(TornCheckpointWarning, match=re.escape(f"version 2 is damaged ({problem})")):
        model = PSModel.load("local", url)
    assert model.checkpoint_info.version == 1
    np.testing.assert_array_equal(model.pull("w"), np.ones(50_000, np.float32))
    model.close()


def test_verify_expects_exactly_the_chunks_a_save_writes(tmp_path):
    """The chunk keys verify expects are the files a save writes, for every kind of array:
    dense and sparse tables, 1-d keys, optimizer state, a table of one chunk and an empty
    one (no chunk); and many missing chunks are named by the first few and a count."""
    from dask_ps.model.format import chunk_keys, verify

    url = str(tmp_path / "kinds")
    model = build("local", 2)
    model.add_table("empty", (None, 4), partitioner="hash", optimizer="adagrad")
    model.add_table("one", (10, 3), "float32", optimizer="adam")
    model.save(url, chunk_rows=64)
    model.close()
    root = tmp_path / "kinds" / "v000001"
    manifest = json.loads((root / "manifest.json").read_text())["arrays"]
    assert len(manifest) > 20 and manifest["t7/values"] == [0, 0]
    for array, (n_keys, n_chunks) in manifest.items():
        meta = json.loads((root / array / "zarr.json").read_text())
        on_disk = sorted(str(p.relative_to(root / array)) for p in (root / array).rglob("*")
                         if p.is_file() and p.name != "zarr.json")
        assert sorted(chunk_keys(meta)) == on_disk and len(on_disk) == n_chunks, array
    assert manifest["t6/values"] == [77, 2] and manifest["t6/slots/accumulator"] == [77, 2]
    assert manifest["t8/values"] == [10, 1] and manifest["t8/slots/m"] == [10, 1]
    assert verify(url, 1) == []
    for i in range(10):
        (root / "t0" / "values" / "c" / str(i) / "0").unlink()
    assert verify(url, 1) == ["array 't0/values' has 6 of its 16 chunks: c/0/0, c/1/0, "
                              "c/2/0, c/3/0, c/4/0 and 5 more are missing"]


def test_overwritten_bytes_fail_their_checksum_naming_table_and_rows(tmp_path):
    url, chunks = _two_versions(tmp_path)
    chunk = chunks / "2" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[100] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    # the array and the chunk's rows are named, not the batch of chunks read at once, and
    # the chunk's file, so that a user can find it (it said only "its chunk 2")
    stored = re.escape(f"stored at {str(chunk)!r}")
    with pytest.raises(CheckpointFormatError, match=r"table 'w': array 'values', rows "
                                                    r"20000\.\.30000 are damaged \(its chunk "
                                                    rf"2, {stored}\): .*checksum"):
        PSModel.load("local", url, version=2)
    chunk.write_bytes(bytes(raw[:50]))  # cut short
    with pytest.raises(CheckpointFormatError, match=r"table 'w': array 'values', rows "
                                                    r"20000\.\.30000 are damaged \(its chunk "
                                                    rf"2, {stored}\)"):
        PSModel.load("local", url, version=2)
    with pytest.warns(TornCheckpointWarning, match=r"version 2 is damaged \(.*rows "
                                                   r"20000\.\.30000 are damaged"):
        model = PSModel.load("local", url)  # the folder's newest sound version
    assert model.checkpoint_info.version == 1
    model.close()


@pytest.mark.parametrize("array, role", [("slots/accumulator", "slots/accumulator"),
                                         ("values", "values")])
def test_a_damaged_chunk_of_a_tables_optimizer_state_is_named(tmp_path, array, role):
    """A bad chunk among the 16 read at once names its array (the values or a slot of the
    update rule's state) and its own rows (it said rows 0..100 of the table)."""
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (100, 3), optimizer="adagrad")
    model.push("w", np.arange(100), np.ones((100, 3)))
    model.save(url, chunk_rows=16)
    model.close()
    chunk = Path(url) / "v000001" / "t0" / array / "c" / "5" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    with pytest.raises(CheckpointFormatError, match=rf"table 'w': array '{role}', rows "
                                                    r"80\.\.96 are damaged \(its chunk 5, "
                                                    rf"stored at {re.escape(repr(str(chunk)))}"):
        PSModel.load("local", url)


def _saved_twice(model, url: str) -> dict:
    """Versions 1 and 2 of an adagrad table "w" (1000 x 2, chunks of 100 rows) saved at
    ``url``; returns version 1's :func:`full_state`."""
    model.add_table("w", (1000, 2), optimizer="adagrad")
    model.push("w", np.arange(1000), np.ones((1000, 2)))
    model.save(url, clock=1, chunk_rows=100)
    good = full_state(model)
    model.push("w", np.arange(1000), np.ones((1000, 2)))
    model.save(url, clock=2, chunk_rows=100)
    return good


def _damage_last_chunk(url: str, array: str, version: int = 1) -> str:
    """Flip bytes in the last chunk of ``array`` of ``version``: its checksum fails."""
    chunk = sorted(p for p in (Path(url) / f"v{version:06d}" / array / "c").rglob("*")
                   if p.is_file())[-1]
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    return str(chunk)


@pytest.mark.parametrize("array, table", [("t6/slots/accumulator", "vector"),
                                          ("t5/keys", "sparse_adam"),
                                          ("t0/values", "dense_ftrl")])
def test_a_failed_restore_leaves_the_model_as_it_was(tmp_path, array, table):
    """A damaged chunk (of the last table's optimizer state, of a sparse table's keys, of
    the first table's values) is found before any table is replaced: values, keys,
    optimizer state and specs stay as they were; the damage is named; a sound checkpoint
    then restores."""
    url = str(tmp_path / "ck")
    model = build("local", 3)
    model.save(url, chunk_rows=100)
    saved = full_state(model)
    model.push("vector", np.arange(77), np.ones(77))  # the live model differs from the save
    model.push("sparse_adam", [3, 4], np.ones((2, 2)))
    before, specs = full_state(model), dict(model.specs)
    chunk = _damage_last_chunk(url, array)
    # the chunk's file named, as its array's chunk key encoding spells it (1-d keys too)
    with pytest.raises(CheckpointFormatError, match=rf"table '{table}': .*rows \d+\.\.\d+ "
                                                    rf"are damaged \(its chunk \d+, stored at "
                                                    rf"{re.escape(repr(chunk))}\)"):
        model.restore(url)
    assert_same(before, full_state(model))
    assert model.specs == specs and model.checkpoint_info is None
    np.testing.assert_array_equal(model.table("sparse_adam").to_numpy()[0],
                                  before["sparse_adam"][0])
    model.save(url, chunk_rows=100)  # a sound version 2 restores over more pushes
    model.push("vector", np.arange(77), np.ones(77))
    assert model.restore(url).version == 2
    assert_same(before, full_state(model))
    assert not np.array_equal(before["vector"][1], saved["vector"][1])
    model.close()


def test_recover_and_resume_fall_back_to_the_newest_version_that_restores(tmp_path):
    """The newest version's data fails its checksums (its metadata is sound, so latest()
    picks it): recover() and a resume restore the version before it, warning which was
    damaged (they raised, though an intact older version was there); restore() of that
    version stays strict."""
    from dask_ps.model.recovery import run_clocks

    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    good = _saved_twice(model, url)
    _damage_last_chunk(url, "t0/values", version=2)
    model.push("w", [0], np.ones((1, 2)))
    from dask_ps.model.format import latest
    with pytest.raises(CheckpointFormatError, match="rows .* are damaged"):
        model.restore(latest(url, version=2))
    with pytest.warns(TornCheckpointWarning, match=r"version 2 is damaged .*skipped, using "
                                                   r"version 1"):
        out = model.recover(url)
    assert out["version"] == 1 and out["clock"] == 1
    assert_same(good, full_state(model))
    model.push("w", [0], np.ones((1, 2)))
    seen = []
    with pytest.warns(TornCheckpointWarning, match="using version 1"):
        run_clocks(model, lambda a, b: seen.append((a, b)) or [None] * (b - a), 3,
                   checkpoint=url, resume=True, job_clocks=lambda c: 1)
    assert seen[0] == (1, 2)  # resumed after clock 1
    model.close()


@pytest.mark.parametrize("edit, where, match", [
    (lambda j: j["attributes"]["tables"]["w"].update(n_rows=200), "group",
     r"100 rows stored for a range table of 200 rows"),
    (lambda j: j["attributes"]["tables"]["w"].update(n_keys=50), "group",
     r"50 rows stored for a range table of 100"),
    (lambda j: j["attributes"]["tables"]["w"].update(slots={}), "group",
     r"optimizer state \[\] stored, its update rule 'adam' keeps \['m', 't', 'v'\]"),
    (lambda j: j["attributes"]["tables"]["w"].update(optimizer={"name": "sgd"}), "group",
     r"update rule 'sgd' keeps \[\]"),
    (lambda j: j.update(data_type="int32"), "values", r"array values is int32 .* says float32"),
    (lambda j: j["attributes"]["tables"]["w"].update(chunk_rows=0), "group",
     r"metadata is damaged: table 'w' has chunk_rows 0"),
    (lambda j: j["attributes"].pop("tables"), "group", r"no 'tables' attribute"),
    (lambda j: j["attributes"]["tables"]["w"].update(name="v"), "group",
     r"described under another name"),
    # refused by the table's own checks, which named no checkpoint (a bare ValueError)
    (lambda j: j["attributes"]["tables"]["w"].update(n_rows=-3), "group",
     r"^checkpoint '.*' version 1: table 'w': shape must be"),
    (lambda j: j["attributes"]["tables"]["w"].update(dtype="|O"), "group",
     r"^checkpoint '.*' version 1: table 'w': dtype must be one of"),
    (lambda j: j["attributes"]["tables"]["w"]["optimizer"].update(learning_rate="x"), "group",
     r"^checkpoint '.*' version 1: Adam.learning_rate must be a finite number, got 'x'"),
    (lambda j: j["attributes"]["tables"]["w"].pop("init"), "group",
     r"^checkpoint '.*' version 1: its metadata is damaged \(KeyError\('init'\)\)"),
    (lambda j: j["attributes"]["tables"]["w"].update(n_rows=200), "group",
     r"^checkpoint '.*' version 1: table 'w': 100 rows stored"),
])
def test_checkpoint_metadata_that_parses_but_lies_is_refused(tmp_path, edit, where, match):
    """Metadata edited but still JSON: rows, keys, optimizer state or dtype that disagree
    with the arrays loaded silently (zeros, a bigger table, Adam's state reset, int32 bits
    read as floats) or failed with a bare KeyError or ZeroDivisionError. (A version written
    since the manifest keeps the metadata's checksums is refused on them first: these
    checks stand for versions written before, whose manifest has none.)"""
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (100, 4), optimizer="adam")
    model.push("w", np.arange(100), np.ones((100, 4)))
    model.save(url)
    manifest = Path(url) / "v000001" / "manifest.json"
    manifest.write_text(json.dumps({k: v for k, v in json.loads(manifest.read_text()).items()
                                    if k != "metadata"}))
    path = Path(url) / "v000001" / ("zarr.json" if where == "group" else "t0/values/zarr.json")
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointFormatError, match=match):
        PSModel.load("local", url, version=1)
    model.close()


def test_a_failed_restore_on_a_cluster_leaves_the_model_as_it_was(client2, tmp_path):
    """The check runs in the workers' tasks: a damaged chunk there changes nothing either,
    and recover() (no shard lost) refuses it the same way."""
    url = str(tmp_path / "ck")
    model = PSModel(client2, n_shards=2)
    model.add_table("w", (1000, 4), optimizer="adagrad")
    model.add_table("h", (None, 2), partitioner="hash")
    model.push("w", np.arange(1000), np.ones((1000, 4)))
    model.push("h", [5, 7], np.ones((2, 2)))
    model.save(url, chunk_rows=100)
    model.push("w", [0], np.ones((1, 4)))
    before = full_state(model)
    _damage_last_chunk(url, "t0/values")
    for roll_back in (model.restore, model.recover):
        with pytest.raises(CheckpointFormatError, match=r"table 'w': array 'values', rows "
                                                        r"900\.\.1000 are damaged"):
            roll_back(url)
        assert_same(before, full_state(model))
        assert model.table("h").n_keys == 2
    model.close()


def _compute_failed(client) -> int:
    """Lines "Compute Failed" in the workers' recent logs."""
    return sum("Compute Failed" in msg for logs in client.get_worker_logs(n=500).values()
               for _, msg in logs)


def test_a_newest_version_failing_its_checksum_is_skipped_on_a_cluster(client2, tmp_path):
    """Tester's report: load() of a folder whose newest version has a chunk failing its
    checksum raised (a missing chunk fell back), and a fallback (resume, recover) left
    distributed's "Compute Failed" block in the log and pointed its warning at an internal
    line. Now a folder's damaged newest version is skipped with a TornCheckpointWarning
    naming it and the damage, pointing at this file; the damaged version stays in the store
    unchanged; naming that version still raises; no task fails."""
    from dask_ps.model.format import latest

    url = str(tmp_path / "ck")
    model = PSModel(client2, n_shards=2)
    good = _saved_twice(model, url)
    chunk = Path(_damage_last_chunk(url, "t0/values", version=2))
    damaged = chunk.read_bytes()
    failed = _compute_failed(client2)
    # the chunk named by its file too, as the task on a worker found it
    said = r"version 2 is damaged \(.*table 'w': array 'values', rows 900\.\.1000 are " \
           rf"damaged \(its chunk 9, stored at {re.escape(repr(str(chunk)))}\).*\); " \
           r"skipped, using version 1"
    with pytest.warns(TornCheckpointWarning, match=said) as seen:
        loaded = PSModel.load(client2, url, n_shards=3)
    assert [w.filename for w in seen] == [__file__]
    assert loaded.checkpoint_info.version == 1 and 2 in loaded.checkpoint_info.damaged
    assert_same(good, full_state(loaded))
    loaded.close()
    with pytest.raises(CheckpointFormatError, match=r"rows 900\.\.1000 are damaged"):
        PSModel.load(client2, url, version=2)
    model.push("w", [0], np.ones((1, 2)))
    with pytest.raises(CheckpointFormatError, match=r"rows 900\.\.1000 are damaged"):
        model.restore(latest(url, version=2))
    for roll_back in (model.restore, model.recover):
        with pytest.warns(TornCheckpointWarning, match=said) as seen:
            roll_back(url)
        assert [w.filename for w in seen] == [__file__]
        assert model.checkpoint_info.version == 1
        assert_same(good, full_state(model))
    assert list_versions(url) == ([1, 2], []) and chunk.read_bytes() == damaged
    assert _compute_failed(client2) == failed
    model.close()


@pytest.mark.parametrize("meta, edit", [
    ("zarr.json", lambda j: j["attributes"].update(clock=7)),
    ("zarr.json", lambda j: j["attributes"]["extra"].update(driver={"trees": "A"})),
    ("t0/values/zarr.json", lambda j: j["attributes"].update(note="x")),
])
def test_metadata_changed_since_it_was_written_is_found_and_the_version_skipped(tmp_path, meta,
                                                                               edit):
    """Metadata that still parses but changed after the save (bit rot, an edit: a fit's own
    state, such as a GBDT fit's trees, lives in the attributes, which no check covered) was
    loaded as it read. The manifest now keeps a checksum of every zarr.json: the version is
    reported damaged and the one before it loaded, as for a lost chunk."""
    url, _ = _two_versions(tmp_path)
    path = tmp_path / "ck" / "v000002" / meta
    j = json.loads(path.read_text())
    edit(j)
    path.write_text(json.dumps(j))
    with pytest.warns(TornCheckpointWarning, match=rf"version 2 is damaged \({re.escape(meta)} "
                                                   rf"changed since it was written \(its "
                                                   rf"checksum in the manifest differs\)\); "
                                                   rf"skipped, using version 1"):
        model = PSModel.load("local", url)
    assert model.checkpoint_info.version == 1
    np.testing.assert_array_equal(model.pull("w", np.arange(5)), np.ones(5))
    model.close()


@pytest.mark.parametrize("field, value, why", [
    ("arrays", [], "is malformed (its arrays or metadata fields)"),
    ("arrays", {"t0/values": 3}, "is malformed (its arrays or metadata fields)"),
    ("metadata", [1, 2], "is malformed (its arrays or metadata fields)"),
    ("arrays", None, "is malformed (its arrays or metadata fields)"),
    ("format", None, "is not a manifest (no format field)")])
def test_a_manifest_that_parses_but_is_not_one_is_named_and_its_version_skipped(
        tmp_path, field, value, why):
    """A manifest whose fields have other types (damage that still parses) made the version
    complete, then failed in verify ("AttributeError: 'list' object has no attribute
    'items'") or skipped its checks; that version is skipped for the one before, with a
    warning naming the file and what is wrong with it (it was said a torn write)."""
    url, _ = _two_versions(tmp_path)
    path = tmp_path / "ck" / "v000002" / "manifest.json"
    manifest = dict(json.loads(path.read_text()), **{field: value})
    path.write_text(json.dumps({k: v for k, v in manifest.items() if v is not None}
                               if field == "format" else manifest))
    with pytest.warns(TornCheckpointWarning) as seen:
        model = PSModel.load("local", url)
    assert [str(w.message) for w in seen] == [
        f"checkpoint {url!r}: version 2 is damaged ({path} {why}); skipped, using version 1"]
    assert model.checkpoint_info.version == 1
    np.testing.assert_array_equal(model.pull("w", np.arange(5)), np.ones(5))
    model.close()


def test_a_truncated_manifest_is_named_not_json_not_a_torn_write(tmp_path):
    """A version whose manifest.json is cut short (not valid JSON) was said "incomplete
    (torn writes)"; its manifest is there (written whole, moved into place), damaged: the
    warning names the file and the JSON error's line and column, and the version used
    instead (the older, sound one, as before)."""
    url, _ = _two_versions(tmp_path)
    path = tmp_path / "ck" / "v000002" / "manifest.json"
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    with pytest.raises(json.JSONDecodeError) as err:
        json.loads(path.read_bytes())
    with pytest.warns(TornCheckpointWarning) as seen:
        model = PSModel.load("local", url)
    assert [str(w.message) for w in seen] == [
        f"checkpoint {url!r}: version 2 is damaged ({path} is not valid JSON (truncated or "
        f"damaged): {err.value.msg} at line 1, column {err.value.colno}); skipped, using "
        f"version 1"]
    assert model.checkpoint_info.version == 1 and model.checkpoint_info.torn == [2]
    np.testing.assert_array_equal(model.pull("w", np.arange(5)), np.ones(5))
    model.close()


def test_a_scratch_table_is_not_kept_and_restores_empty(tmp_path):
    """add_table(checkpoint=False): a table whose content between jobs means nothing (a
    GBDT fit's histograms) is not written, a restore empties it on every shard, and a
    resume compares nothing of it: another fit's, of another shape on other shards,
    resumes from the checkpoint."""
    from dask_ps.model.format import latest
    from dask_ps.model.recovery import check_resumable

    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (10, 2), "float64")
    model.add_table("s", (6, 2), "float64", checkpoint=False)
    model.push("w", np.arange(10), np.ones((10, 2)))
    model.push("s", np.arange(6), np.ones((6, 2)))
    assert sorted(model.save(url).attrs["tables"]) == ["w"] and model.tables == ["w", "s"]
    model.push("w", np.arange(10), np.ones((10, 2)))
    model.restore(url)
    np.testing.assert_array_equal(model.pull("w", np.arange(10)), np.ones((10, 2)))
    np.testing.assert_array_equal(model.pull("s", np.arange(6)), np.zeros((6, 2)))
    model.close()
    other = PSModel("local", n_shards=3)
    other.add_table("w", (10, 2), "float64")
    other.add_table("s", (9, 2), "float64", checkpoint=False)
    other.push("s", np.arange(9), np.ones((9, 2)))
    check_resumable(other, latest(url))
    other.restore(url)
    np.testing.assert_array_equal(other.pull("w", np.arange(10)), np.ones((10, 2)))
    np.testing.assert_array_equal(other.pull("s", np.arange(9)), np.zeros((9, 2)))
    other.close()


def test_unreadable_metadata_is_reported_and_skipped(tmp_path):
    url, _ = _two_versions(tmp_path)
    meta = tmp_path / "ck" / "v000002" / "t0" / "values" / "zarr.json"
    meta.write_text(meta.read_text()[:40])
    with pytest.warns(TornCheckpointWarning, match=r"version 2 is damaged \(t0/values/zarr"
                                                   r".json unreadable \(JSONDecodeError"):
        model = PSModel.load("local", url)
    assert model.checkpoint_info.version == 1
    model.close()


def test_newer_format_and_unknown_optimizer_are_refused_clearly():
    import fsspec

    model = build("local", 1)
    model.save("memory://fmt")
    # as a newer writer would: its metadata matches its manifest (here: the manifest keeps
    # no checksums, as before they were kept, so that the edits below stand)
    fs = fsspec.filesystem("memory")
    manifest = json.loads(fs.cat_file("/fmt/v000001/manifest.json"))
    fs.pipe_file("/fmt/v000001/manifest.json", json.dumps(
        {k: v for k, v in manifest.items() if k != "metadata"}).encode())
    group = zarr.open_group("memory://fmt/v000001", mode="r+")
    meta = dict(group.attrs["dask_ps"])
    group.attrs["dask_ps"] = dict(meta, format=99)
    with pytest.raises(CheckpointFormatError, match="format 99 .* reads formats up to 1"):
        PSModel.load("local", "memory://fmt")
    group.attrs["dask_ps"] = meta
    tables = dict(group.attrs["tables"])
    tables["dense_ftrl"] = dict(tables["dense_ftrl"],
                                optimizer={"name": "lion", "learning_rate": 0.1})
    group.attrs["tables"] = tables
    with pytest.raises(CheckpointFormatError, match="unknown optimizer 'lion'"):
        PSModel.load("local", "memory://fmt")
    model.close()


def test_bad_arguments_are_named():
    model = build("local", 1)
    with pytest.raises(ValueError, match="keep must be"):
        model.save("memory://bad", keep=0)
    with pytest.raises(TypeError, match="JSON"):
        model.save("memory://bad", data_position={"epoch": object()})
    with pytest.raises(ValueError, match="dtype must be"):
        model.export("memory://bad-export", dtype="int8")
    model.close()


@pytest.mark.parametrize("clock", [-1, True, 2.5, "3"])
def test_a_clock_that_is_no_training_clock_is_refused_naming_it(clock):
    """``save(clock=-1)`` wrote a version whose clock no fit reaches (and a float or a
    string was cast by int()); now refused before anything is written."""
    model = build("local", 1)
    with pytest.raises(ValueError, match=rf"^clock must be a non-negative integer \(the "
                                         rf"training clock reached\), got {clock!r}"):
        model.save(f"memory://bad-clock-{clock}", clock=clock)
    from dask_ps.model.format import list_versions

    assert list_versions(f"memory://bad-clock-{clock}")[0] == []
    assert model.save(f"memory://bad-clock-{clock}", clock=np.int64(3)).clock == 3
    model.close()


@pytest.mark.parametrize("dtype", ["bogus", "int8", object])
def test_an_export_dtype_numpy_does_not_know_is_named(dtype):
    """``export(dtype="bogus")`` raised NumPy's "data type 'bogus' not understood",
    naming no argument."""
    model = build("local", 1)
    with pytest.raises(ValueError, match=r"^dtype must be float16, float32, float64 or "
                                         r"None, got"):
        model.export("memory://bad-dtype", dtype=dtype)
    model.close()


def test_export_for_serving_is_plain_zarr():
    model = build("local", 3)
    model.export("memory://serve", dtype="float16")
    group = zarr.open_group("memory://serve", mode="r")  # zarr only: no dask_ps needed
    dense = group["dense_adam"][:]
    assert dense.dtype == np.float16 and dense.shape == (1001, 3)
    np.testing.assert_allclose(dense, model.pull("dense_adam", np.arange(1001)), rtol=1e-3,
                               atol=1e-4)
    assert group["vector"].shape == (77,)
    keys, values = model.table("sparse_ftrl").to_numpy()
    np.testing.assert_array_equal(group["sparse_ftrl/keys"][:], keys)
    np.testing.assert_allclose(group["sparse_ftrl/values"][:], values, rtol=1e-3, atol=1e-4)
    assert "slots" not in str(list(group.members(max_depth=None)))
    assert group.attrs["dask_ps_export"]["tables"]["sparse_ftrl"]["sparse"] is True
    model.close()


def test_export_refuses_weights_beyond_the_dtype_before_writing(tmp_path):
    """float16 holds up to 65504: a cast would write 1e5 as inf, silently."""
    model = PSModel("local", n_shards=2)
    model.add_table("w", (4,), optimizer="add")
    model.add_table("h", (None, 2), partitioner="hash")
    model.push("w", np.arange(4), np.array([1e5, -1e6, 0.5, 2.0]))
    model.push("h", [5, 7], np.ones((2, 2)))
    serve = tmp_path / "serve"
    with pytest.raises(ValueError, match=r"export as float16: table 'w' holds 2 values beyond "
                                         r"float16's range \(largest magnitude 1e\+06; float16 "
                                         r"holds up to 65504\), which would be written as "
                                         r"\+-inf: .* nothing was written"):
        model.export(str(serve), dtype="float16")
    assert not serve.exists()
    model.export(str(serve), dtype="float16", tables=["h"])  # the table in range
    model.export(str(serve), dtype="float32")
    assert zarr.open_group(str(serve), mode="r")["w"][1] == -1e6
    model.close()


def test_export_replaces_only_an_earlier_export(tmp_path):
    """An export never deletes what is not its own: a folder of other files, a checkpoint
    folder and an export with a file added are refused, named, and left as they were; an
    earlier export is replaced."""
    model = PSModel("local", n_shards=2)
    model.add_table("w", (10,), optimizer="add")
    model.add_table("h", (None, 2), partitioner="hash")
    model.push("h", [5, 7], np.ones((2, 2)))
    folder, ck = tmp_path / "run", tmp_path / "run" / "ck"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    model.save(str(ck))
    with pytest.raises(FileExistsError, match=rf"export target '{folder}' is not empty and is "
                                              rf"not an earlier export .* holds ck, notes.txt"):
        model.export(str(folder))
    model.save(str(ck))
    with pytest.raises(FileExistsError, match=rf"'{ck}' is a checkpoint folder \(versions "
                                              rf"\[1, 2\]\)"):
        model.export(str(ck))
    assert sorted(os.listdir(folder)) == ["ck", "notes.txt"]
    assert list_versions(str(ck)) == ([1, 2], [])
    PSModel.load("local", str(ck)).close()
    with pytest.raises(FileExistsError, match="is a file"):
        model.export(str(folder / "notes.txt"))
    # a save there said only "checkpoint '.../notes.txt': File exists"
    with pytest.raises(NotADirectoryError, match=rf"^checkpoint '{folder / 'notes.txt'}': is a "
                                                 rf"file: a checkpoint is a folder"):
        model.save(str(folder / "notes.txt"))
    assert (folder / "notes.txt").read_text() == "my notes"

    serve = tmp_path / "serve"
    model.export(str(serve))
    model.push("w", [3], [2.0])
    model.export(str(serve), dtype="float16")  # an earlier export: replaced
    group = zarr.open_group(str(serve), mode="r")
    assert group["w"].dtype == np.float16 and group["w"][3] == 2.0
    assert group.attrs["dask_ps_export"]["complete"] is True
    (serve / "README").write_text("served since May")
    with pytest.raises(FileExistsError, match=rf"'{serve}' holds an earlier export and also "
                                              rf"README, which are not part of it"):
        model.export(str(serve))
    assert (serve / "README").read_text() == "served since May" and group["w"][3] == 2.0
    model.close()


def test_round_trip_on_a_cluster_written_by_the_workers(client2, tmp_path):
    url = str(tmp_path / "ck")
    model = build(client2, 3)
    before = full_state(model)
    with pytest.raises(ValueError, match="checkpoint .memory:.* is private to one process"):
        model.save("memory://not-shared")
    with pytest.raises(ValueError, match="^checkpoint nosuch://x: unknown protocol 'nosuch://'"):
        model.save("nosuch://x")
    model.save(url, chunk_rows=100)
    for n in (2, 5):
        loaded = PSModel.load(client2, url, n_shards=n)
        assert_same(before, full_state(loaded))
        loaded.close()
    # in place: roll back after more updates
    model.push("vector", np.arange(77), np.ones(77))
    model.restore(url)
    assert_same(before, full_state(model))
    model.close()


WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    import dask_ps
    url = sys.argv[1]
    model = dask_ps.PSModel("local", n_shards=2)
    model.add_table("w", (100_000,), "float32", optimizer="ftrl", init="ones")
    model.save(url, chunk_rows=100)
    print("saved", flush=True)
    model.push("w", np.arange(100_000), np.ones(100_000))
    model.save(url, chunk_rows=100)  # killed during this one
    print("second saved", flush=True)
""")


def test_a_writer_killed_mid_write_leaves_the_previous_version(tmp_path):
    url = str(tmp_path / "ck")
    env = dict(os.environ, PYTHONPATH=str(Path(dask_ps.__file__).parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "saved"
        chunks = tmp_path / "ck" / "v000002" / "t0" / "values" / "c"
        deadline = time.time() + 60
        while not (chunks.is_dir() and len(os.listdir(chunks)) > 20):
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert list_versions(url) == ([1], [2])
    with pytest.warns(TornCheckpointWarning, match=r"versions \[2\] are incomplete"):
        model = PSModel.load("local", url, n_shards=3)
    assert model.checkpoint_info.version == 1 and model.checkpoint_info.torn == [2]
    np.testing.assert_array_equal(model.pull("w"), np.ones(100_000, np.float32))
    # recovery expects the version its own failure tore: reported, not warned
    rec = model.recover(url)
    assert (rec["version"], rec["torn"], rec["lost_shards"]) == (1, [2], [])
    # the next save numbers past the torn version, and pruning removes it
    model.save(url, keep=1)
    assert list_versions(url) == ([3], [])
    model.close()


def test_restore_refuses_a_table_of_the_same_name_but_another_shape_dtype_or_rule(tmp_path):
    """A checkpoint whose table has the model's table's name but other rows, columns, dtype
    or update rule is refused naming the table and each difference, the model left as it
    was (it was taken silently: the model's table became the checkpoint's, and the user's
    next push of the old shape failed). The same tables on another number of shards, and a
    sparse table of any key count, restore."""
    url = str(tmp_path / "other")
    src = PSModel("local", n_shards=2)
    src.add_table("w", (1000, 4), "float64", optimizer="adagrad")
    src.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    src.push("w", np.arange(1000), np.ones((1000, 4)))
    src.push("h", np.arange(50) * 7919, np.ones((50, 2)))
    src.save(url)
    same = PSModel("local", n_shards=3)  # the same tables, another shard count: restores
    same.add_table("w", (1000, 4), "float64", optimizer=AdaGrad(0.5))
    same.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    same.push("h", np.arange(5), np.ones((5, 2)))
    assert same.restore(url).version == 1
    np.testing.assert_array_equal(same.pull("w"), src.pull("w"))
    assert same.table("h").n_keys == 50
    same.close()
    src.close()

    model = PSModel("local", n_shards=2)
    model.add_table("w", (500, 2), "float32")
    model.add_table("h", (None, 2), "float64", partitioner="hash", optimizer="adagrad")
    model.push("w", np.arange(2), np.full((2, 2), 3.0))
    before, specs = model.pull("w"), dict(model.specs)
    with pytest.raises(CheckpointFormatError) as err:
        model.restore(url)
    said = str(err.value)
    for part in ["table 'w'", "rows 1000 (the model's: 500)", "columns 4 (the model's: 2)",
                 "dtype 'float64' (the model's: 'float32')",
                 "optimizer 'adagrad' (the model's: 'add')",
                 "table 'h' has dtype 'float32' (the model's: 'float64')",
                 "nothing was restored"]:
        assert part in said, (part, said)
    assert dict(model.specs) == specs
    np.testing.assert_array_equal(model.pull("w"), before)
    model.push("w", np.arange(2), np.ones((2, 2)))  # the model's own shape still works
    model.close()


@pytest.mark.parametrize("where", ["file", "memory"])
def test_saves_into_one_folder_at_once_each_take_their_own_version(tmp_path, monkeypatch,
                                                                     where):
    """Saves of three models from three threads at once, each having counted the versions
    before any made one: each claims a version of its own (an exclusive create), holding
    its model's rows only. A check then a write (zarr refusing a group that exists) let
    two saves write into one version: rows of both models in it, or a save lost while its
    caller was told the same version as the other."""
    import threading

    from dask_ps.model import _versions as vs
    from dask_ps.model import format as ck

    real, counted, barrier = vs.next_version, threading.local(), threading.Barrier(3)

    def together(u):  # every save's first count is made before any version exists
        v = real(u)
        if not getattr(counted, "done", False):
            counted.done = True
            barrier.wait(timeout=30)
        return v

    monkeypatch.setattr(vs, "next_version", together)
    models = []
    for i in range(3):
        m = dask_ps.PSModel("local", n_shards=2)
        m.add_table("w", (5000,))
        m.push("w", np.arange(5000), np.full(5000, float(i + 1)))
        models.append(m)
    for trial in range(3):
        url = str(tmp_path / f"ck{trial}") if where == "file" else f"memory://race{trial}"
        out = {}

        def save(i):
            try:
                out[i] = models[i].save(url, chunk_rows=100).version
            except Exception as exc:  # noqa: BLE001 - reported below
                out[i] = exc

        counted.done = False
        threads = [threading.Thread(target=save, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(out.values()) == [1, 2, 3], out
        assert ck.list_versions(url) == ([1, 2, 3], [])
        for i, v in out.items():
            loaded = dask_ps.PSModel.load("local", url, version=v)
            np.testing.assert_array_equal(loaded.pull("w"), np.full(5000, float(i + 1)),
                                          err_msg=f"model {i}, version {v}")
            loaded.close()
    for m in models:
        m.close()


def test_a_save_whose_version_was_just_taken_takes_the_next(tmp_path, monkeypatch):
    """Two saves into one folder at once: the second to create its version's group found it
    made by the first (zarr's ContainsGroupError, seen once in 3 runs of two processes);
    it now takes the next number."""
    from dask_ps.model import _versions as vs
    from dask_ps.model import format as ck

    url = str(tmp_path / "ck")
    model = dask_ps.PSModel("local", n_shards=2)
    model.add_table("w", (10,))
    model.push("w", np.arange(10), np.ones(10))
    assert model.save(url).version == 1
    real, calls = vs.next_version, []

    def stale(u):  # the first answer predates the other save's version 1
        calls.append(u)
        return 1 if len(calls) == 1 else real(u)

    monkeypatch.setattr(vs, "next_version", stale)
    info = model.save(url, clock=5)
    assert info.version == 2 and len(calls) == 2
    monkeypatch.undo()
    assert ck.list_versions(url)[0] == [1, 2]
    loaded = dask_ps.PSModel.load("local", url)
    assert loaded.checkpoint_info.clock == 5
    np.testing.assert_array_equal(loaded.pull("w"), np.ones(10))


def test_a_codec_the_checkpoint_names_runs_only_when_dask_ps_writes_it(tmp_path):
    """Security (audit after trial 8 F10): zarr finds an array's codecs by the names in its
    zarr.json, and some run code when decoding (numcodecs' pickle, registered with zarr by
    numcodecs 0.14-0.15): a crafted checkpoint naming one ran it on load. Only the codecs
    dask_ps writes (bytes, crc32c) are decoded now; the version is refused before."""
    from dataclasses import dataclass

    from zarr.abc.codec import BytesBytesCodec
    from zarr.registry import register_codec

    from dask_ps.model.format import _digest

    marker = tmp_path / "ran"

    @dataclass(frozen=True)
    class Runs(BytesBytesCodec):  # stands for a codec that unpickles
        is_fixed_size = True

        @classmethod
        def from_dict(cls, data):
            return cls()

        def to_dict(self):
            return {"name": "test.runs"}

        async def _decode_single(self, chunk, spec):
            marker.write_text("code ran")
            return chunk

        async def _encode_single(self, chunk, spec):
            return chunk

        def compute_encoded_size(self, n, spec):
            return n

    register_codec("test.runs", Runs)
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (100, 4), optimizer="adagrad")
    model.push("w", np.arange(100), np.ones((100, 4)))
    model.save(url)
    root = Path(url) / "v000001"
    path = root / "t0" / "values" / "zarr.json"
    meta = json.loads(path.read_text())
    meta["codecs"].insert(1, {"name": "test.runs"})
    path.write_text(json.dumps(meta))
    manifest = json.loads((root / "manifest.json").read_text())  # as a crafted one would
    manifest["metadata"]["t0/values/zarr.json"] = _digest(path.read_bytes())
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointFormatError, match=r"table 'w'.*array values is encoded "
                                                    r"with \['bytes', 'test.runs', 'crc32c'\]"):
        PSModel.load("local", url, version=1)
    assert not marker.exists()
    model.close()


def _edit_version(url: str, version: int, group=None, manifest=None) -> None:
    """Edit version ``version``'s group metadata (``group(j)`` on its zarr.json) and
    manifest (``manifest(j)``), its checksums recomputed: an edit no checksum finds."""
    from dask_ps.model.format import _digest

    root = Path(url) / f"v{version:06d}"
    if group is not None:
        j = json.loads((root / "zarr.json").read_text())
        group(j)
        (root / "zarr.json").write_text(json.dumps(j))
    m = json.loads((root / "manifest.json").read_text())
    m["metadata"]["zarr.json"] = _digest((root / "zarr.json").read_bytes())
    if manifest is not None:
        manifest(m)
    (root / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("group, manifest, match", [
    (lambda j: j["attributes"]["tables"]["h"]["partitioner"].update(hash="murmur3"), None,
     r"version 1: table 'h': field partitioner.hash is 'murmur3', a hash table's is "
     r"'splitmix64-high32'"),
    (lambda j: j["attributes"]["tables"]["w"]["partitioner"].update(hash="murmur3"), None,
     r"version 1: table 'w': field partitioner.hash is 'murmur3', a range table's is None"),
    (lambda j: j["attributes"]["tables"]["h"]["partitioner"].pop("hash"), None,
     r"version 1: table 'h': field partitioner.hash is None"),
    (None, lambda m: m.update(format=2), r"version 1 \(field format of its manifest.json\) "
                                         r"has format 2 .* reads formats up to 1"),
    (None, lambda m: m.update(format="1"), r"version 1: its metadata is damaged: field "
                                           r"dask_ps.format is 1, field format of its "
                                           r"manifest.json '1'"),
    (lambda j: j["attributes"]["dask_ps"].update(format=0), None,
     r"version 1: its metadata is damaged: field dask_ps.format is 0, field format of its "
     r"manifest.json 1"),
    (lambda j: j["attributes"]["dask_ps"].update(format=True), None,
     r"version 1: its metadata is damaged: field dask_ps.format is True"),
])
def test_a_hash_function_or_format_this_dask_ps_does_not_read_is_refused(client2, tmp_path,
                                                                         group, manifest,
                                                                         match):
    """A checkpoint edited (its checksums recomputed) to name another hash function for a
    table's keys, or another format (in its metadata or its manifest), loaded as if
    written by this dask_ps. Refused, naming the store, the table and the field; a restore
    leaves the model (on a cluster) as it was."""
    url = str(tmp_path / "ck")
    model = PSModel(client2, n_shards=2)
    model.add_table("w", (100, 2), optimizer="adagrad")
    model.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    model.push("w", np.arange(100), np.ones((100, 2)))
    model.push("h", [3, 11], np.ones((2, 2)))
    model.save(url)
    model.push("w", np.arange(100), np.ones((100, 2)))
    before = full_state(model)
    _edit_version(url, 1, group, manifest)
    where = rf"^checkpoint {re.escape(repr(url))} "
    with pytest.raises(CheckpointFormatError, match=where + match):
        PSModel.load(client2, url)
    for roll_back in (model.restore, model.recover):
        with pytest.raises(CheckpointFormatError, match=where + match):
            roll_back(url)
        assert_same(before, full_state(model))
    model.close()


def _own_state(model) -> dict:
    return {name: model.pull(name) for name in model.tables}


@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
def test_restore_of_a_folder_takes_the_newest_version_of_this_model(client2, tmp_path):
    """Two models saving into one folder: restore(url) of the one whose version is not the
    newest raised ("it is another model's checkpoint"). It takes the newest version holding
    its tables now, saying which versions it skipped and what they hold; with none, it is
    refused naming the folder and each version's tables, the model left as it was."""
    url = str(tmp_path / "ck")
    a = PSModel(client2, n_shards=2)
    a.add_table("w", (50, 2), optimizer="adagrad")
    b = PSModel(client2, n_shards=2)
    b.add_table("v", (30,), optimizer="adagrad")
    b.push("v", np.arange(30), np.ones(30))
    a.push("w", np.arange(50), np.ones((50, 2)))
    a.save(url, clock=1)  # version 1: a's
    saved = _own_state(a)
    a.push("w", np.arange(50), np.ones((50, 2)))
    a.save(url, clock=2)  # version 2: a's, newest of a
    newest = _own_state(a)
    b.save(url)  # version 3: b's
    b.save(url)  # version 4: b's
    a.push("w", np.arange(50), np.ones((50, 2)))
    with pytest.warns(UserWarning, match=rf"^checkpoint folder {re.escape(repr(url))}: versions "
                                         r"4 and 3: each holds tables \['v'\], not the model's "
                                         r"\['w'\]: it is another model's checkpoint; skipped, "
                                         r"using version 2, the newest of this model") as seen:
        info = a.restore(url)
    assert [w.filename for w in seen] == [__file__]
    assert info.version == 2 and info.clock == 2 and a.checkpoint_info.version == 2
    np.testing.assert_array_equal(a.pull("w"), newest["w"])
    assert not np.array_equal(saved["w"], newest["w"])
    # b's own newest version is the folder's newest: restored with no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert b.restore(url).version == 4

    c = PSModel(client2, n_shards=2)  # a model none of the versions holds
    c.add_table("w", (50, 3), optimizer="adagrad")
    c.push("w", np.arange(50), np.full((50, 3), 2.0))
    before = _own_state(c)
    with pytest.raises(CheckpointFormatError) as err:
        c.restore(url)
    said = str(err.value)
    for part in [f"checkpoint folder {url!r} holds no version of this model",
                 "versions 4 and 3: each holds tables ['v'], not the model's ['w']",
                 "versions 2 and 1: each holds other tables than the model's: table 'w' has "
                 "columns 2 (the model's: 3)", "nothing was restored"]:
        assert part in said, (part, said)
    np.testing.assert_array_equal(c.pull("w"), before["w"])
    for m in (a, b, c):
        m.close()


@pytest.mark.filterwarnings("ignore:checkpoint folder .* two models are writing:UserWarning")
def test_recover_of_a_shared_folder_says_another_models_version_is_not_damaged(client2,
                                                                            tmp_path):
    """recover(url) of a folder whose newer versions are another model's took this model's
    own, but warned that each of them "is damaged (holds tables ['v'] ...)". It selects the
    model's version as restore(url) does now: another model's versions are said to hold
    another model, a damaged version of its own is still said to be damaged, in one
    TornCheckpointWarning (there were two: "versions 4 and 3 hold ...; skipped, using
    version 2", then "version 2 is damaged"), and the newest sound version of the model is
    restored; a model none of whose versions is there is refused naming the folder, left as
    it was."""
    url = str(tmp_path / "ck")
    a = PSModel(client2, n_shards=2)
    a.add_table("w", (300, 2), optimizer="adagrad")
    b = PSModel(client2, n_shards=2)
    b.add_table("v", (30,), optimizer="adagrad")
    a.push("w", np.arange(300), np.ones((300, 2)))
    a.save(url, clock=1, chunk_rows=100)  # version 1: a's
    sound = _own_state(a)
    a.push("w", np.arange(300), np.ones((300, 2)))
    a.save(url, clock=2, chunk_rows=100)  # version 2: a's, damaged below
    b.save(url)  # versions 3 and 4: b's
    b.save(url)
    _damage_last_chunk(url, "t0/values", version=2)
    a.push("w", np.arange(300), np.ones((300, 2)))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rec = a.recover(url)
    said = [(w.category, str(w.message)) for w in seen]
    assert rec["version"] == 1 and rec["clock"] == 1, said
    np.testing.assert_array_equal(a.pull("w"), sound["w"])
    assert len(said) == 1 and said[0][0] is TornCheckpointWarning and re.match(
        rf"checkpoint folder {re.escape(repr(url))}: version 2 is damaged \(.*rows 200\.\.300 "
        r"are damaged.*\); versions 4 and 3: each holds tables \['v'\], not the model's "
        r"\['w'\]: it is another model's checkpoint; skipped, using version 1, the newest "
        r"sound version of this model$", said[0][1]), said
    assert not any("version 3 is damaged" in m or "version 4 is damaged" in m
                   for _, m in said), said
    assert {w.filename for w in seen} == {__file__}, said

    c = PSModel(client2, n_shards=2)  # a model none of the versions holds
    c.add_table("u", (10,), optimizer="adagrad")
    c.push("u", np.arange(10), np.ones(10))
    before = _own_state(c)
    with pytest.raises(CheckpointFormatError, match=rf"^checkpoint folder "
                                                    rf"{re.escape(repr(url))} holds no version "
                                                    rf"of this model: versions 4 and 3: each "
                                                    rf"holds tables \['v'\]"):
        c.recover(url)
    np.testing.assert_array_equal(c.pull("u"), before["u"])
    for m in (a, b, c):
        m.close()


def test_restore_of_a_version_read_before_the_store_changed_is_refused(client2, tmp_path):
    """restore(info) of a CheckpointInfo read before its version was edited (its checksums
    recomputed: an edit no check of the data finds) used the table descriptions held in
    ``info``: another hash function named in the store was only refused when read again
    from the URL. The version's metadata is read again now and compared: a change is
    refused as "changed since it was read", the model left as it was; read again, the
    edit is named; an unedited version given restores."""
    from dask_ps.model.format import latest

    url = str(tmp_path / "ck")
    model = PSModel(client2, n_shards=2)
    model.add_table("h", (None, 2), partitioner="hash", optimizer="adagrad")
    model.push("h", [3, 11], np.ones((2, 2)))
    saved = model.save(url)
    fresh = model.save(url)
    info = latest(url, version=1)
    model.push("h", [3, 11, 40], np.ones((3, 2)))
    for unedited in (fresh, latest(url, version=2)):  # what save returned, or read back
        assert model.restore(unedited).version == 2
    model.push("h", [3, 11, 40], np.ones((3, 2)))
    before = full_state(model)
    _edit_version(url, 1, lambda j: j["attributes"]["tables"]["h"]["partitioner"].update(
        hash="murmur3"))
    where = rf"^checkpoint {re.escape(repr(url))} version 1"
    for stale in (info, saved):  # read back, and the one save returned
        with pytest.raises(CheckpointFormatError, match=where + r" changed since it was read"):
            model.restore(stale)
        assert_same(before, full_state(model))
    with pytest.raises(CheckpointFormatError, match=where + r": table 'h': field "
                                                           r"partitioner.hash is 'murmur3'"):
        model.restore(latest(url, version=1))
    assert_same(before, full_state(model))
    model.close()


def test_a_newer_manifest_format_names_the_dask_ps_that_wrote_the_manifest(tmp_path):
    """A manifest of a newer format was said to be "written by dask_ps X", X taken from
    the version's metadata, not from the manifest the format came from. The manifest keeps
    the version of dask_ps that wrote it now, named beside its format; a manifest without
    one (written before) names none."""
    url = str(tmp_path / "ck")
    model = PSModel("local", n_shards=2)
    model.add_table("w", (10,), optimizer="adagrad")
    model.save(url)
    manifest = json.loads((Path(url) / "v000001" / "manifest.json").read_text())
    assert manifest["library_version"] == dask_ps.__version__
    assert dask_ps.__version__ != "9.9.9"
    _edit_version(url, 1, manifest=lambda m: m.update(format=2, library_version="9.9.9"))
    with pytest.raises(CheckpointFormatError, match=r"version 1 \(field format of its "
                                                    r"manifest.json\) has format 2 \(written by "
                                                    r"dask_ps 9\.9\.9\); this dask_ps reads "
                                                    r"formats up to 1"):
        PSModel.load("local", url)
    _edit_version(url, 1, manifest=lambda m: m.pop("library_version"))
    with pytest.raises(CheckpointFormatError, match=r"manifest.json\) has format 2 \(written "
                                                    r"by a newer dask_ps\)"):
        PSModel.load("local", url)
    # the metadata's format: the metadata's dask_ps version, as before
    _edit_version(url, 1, lambda j: j["attributes"]["dask_ps"].update(
        format=3, library_version="7.0"), lambda m: m.update(format=1))
    with pytest.raises(CheckpointFormatError, match=r"\(field dask_ps.format\) has format 3 "
                                                    r"\(written by dask_ps 7\.0\)"):
        PSModel.load("local", url)
    model.close()
