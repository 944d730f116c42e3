"""Blocks of local files are memory maps (``read_array``): they must hold exactly the bytes that
fsspec's ``read_block`` gives (``read``), wherever the block boundaries fall."""

from __future__ import annotations

import fsspec
import numpy as np
import pytest

from dask_ps.io._blocks import Block, find_newline, lines_before, plan, read, read_array


@pytest.mark.parametrize("seed", range(6))
def test_read_array_is_read(tmp_path, seed):
    rng = np.random.default_rng(seed)
    lines = [b"x" * int(n) for n in rng.integers(0, 40, int(rng.integers(0, 60)))]
    text = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
    path = tmp_path / "f.txt"
    path.write_bytes(text)
    fs = fsspec.filesystem("file")
    size = int(rng.integers(1, 50))
    blocks = plan(fs, [str(path)], size, None)
    blocks += [Block(str(path), len(text) + 3, 10, None)]  # past the end
    got = [read_array(fs, b) for b in blocks]
    assert [g.tobytes() for g in got] == [read(fs, b) for b in blocks]
    assert b"".join(g.tobytes() for g in got) == text  # every line once
    mem = fsspec.filesystem("memory")  # other filesystems: read's bytes
    with mem.open("/blocks_test.txt", "wb") as f:
        f.write(text)
    for b in plan(mem, ["/blocks_test.txt"], size, None):
        assert read_array(mem, b).tobytes() == read(mem, b)


@pytest.mark.parametrize("seed", range(4))
def test_lines_before_a_block_are_the_lines_of_the_blocks_before_it(tmp_path, seed):
    """Counted from the file on an error path: the newlines that ``read`` gave the blocks
    before, wherever the boundaries fall (on a newline, after one, in a line)."""
    rng = np.random.default_rng(seed)
    lines = [b"x" * int(n) for n in rng.integers(0, 9, 80)]
    path = tmp_path / "f.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fs = fsspec.filesystem("file")
    for size in range(1, 30):
        seen = 0
        for b in plan(fs, [str(path)], size, None):
            assert lines_before(fs, b, step=7) == seen, (size, b.offset)
            seen += read(fs, b).count(b"\n")


def test_find_newline():
    for data in [b"", b"ab", b"a\nb\n", b"x" * 70000 + b"\n"]:
        arr = np.frombuffer(data, np.uint8)
        for start in (0, 1, 2, 69999, 70000):
            assert find_newline(arr, start) == data.find(b"\n", start)


def test_source_paths_name_the_files_a_reader_reads(tmp_path):
    """What learn_online names in an error about a batch read from files."""
    import pandas as pd

    from dask_ps.io import read_ctr, read_libsvm
    from dask_ps.io._blocks import source_paths

    frame = pd.DataFrame({"click": [0, 1] * 20, "shop": ["a", "b", "c", "d"] * 10})
    for name in ("b.csv", "a.csv"):
        frame.to_csv(tmp_path / name, index=False)
    frame.to_parquet(tmp_path / "p.parquet", row_group_size=10)
    (tmp_path / "s.svm").write_text("1 3:1\n0 2:1\n")
    X, y = read_ctr(str(tmp_path / "*.csv"), label="click", n_features=64, blocksize=100)
    assert source_paths(X) == [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    assert source_paths(y[:5]) == source_paths(X)
    X, _ = read_ctr(str(tmp_path / "p.parquet"), label="click", n_features=64)
    assert source_paths(X) == [str(tmp_path / "p.parquet")]
    X, _ = read_libsvm(str(tmp_path / "s.svm"))
    assert source_paths(X) == [str(tmp_path / "s.svm")]
    import dask.array as da

    assert source_paths(np.zeros(3)) == [] and source_paths(da.zeros(3)) == []
