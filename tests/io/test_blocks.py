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


def test_chunk_sources_and_row_origin_name_every_row_by_file_and_line(tmp_path):
    """What ``dask-ps train`` names for a stray label: every row of a reader's chunks at the
    file and line it was written on (a CSV header is line 1; blank and comment lines count),
    in blocks cut inside files, compressed files and Parquet row groups; no sources for an
    array whose chunks are not the reader's blocks."""
    import gzip

    import dask.array as da
    import pandas as pd

    from dask_ps.io import read_ctr, read_libsvm
    from dask_ps.io._blocks import RowGroup, chunk_sources, row_origin
    from dask_ps.io._line_kernels import CSV, SVM

    fs = fsspec.filesystem("file")
    written = []  # (path, line) of every row, in the readers' order
    for name, n in (("a", 25), ("b", 40)):
        lines = ["click,price"]
        for i in range(n):
            lines += [""] * (i % 7 == 3) + [f"{i % 2},{i}"]
        path = str(tmp_path / f"{name}.csv")
        written += [(path, j + 1) for j, line in enumerate(lines) if line and j]
        (tmp_path / f"{name}.csv").write_text("\n".join(lines) + "\n")
    with gzip.open(tmp_path / "c.csv.gz", "wt") as f:
        f.write("click,price\n\n1,5\n0,6\n")
    written += [(str(tmp_path / "c.csv.gz"), 3), (str(tmp_path / "c.csv.gz"), 4)]
    X, y = read_ctr(str(tmp_path / "*.csv*"), label="click", n_features=64, blocksize=64)
    sources = chunk_sources(y)
    assert sources is not None and len(sources) == y.numblocks[0] > 6
    assert chunk_sources(X) == sources
    named = [row_origin(fs, s, r, CSV, 1) for s, n in zip(sources, y.chunks[0])
             for r in range(n)]
    assert named == [f"{p}, line {line}" for p, line in written]

    svm = ["# made by hand", "1 1:1", "", "0 2:1", "  # indented", "1 3:1", "0 1:2"] * 6
    (tmp_path / "s.svm").write_text("\n".join(svm) + "\n")
    X, y = read_libsvm(str(tmp_path / "s.svm"), blocksize=40)
    sources = chunk_sources(y)
    named = [row_origin(fs, s, r, SVM) for s, n in zip(sources, y.chunks[0])
             for r in range(n)]
    assert named == [f"{tmp_path / 's.svm'}, line {j + 1}" for j, line in enumerate(svm)
                     if line and not line.lstrip().startswith("#")]

    pd.DataFrame({"click": [0, 1] * 10, "price": range(20)}).to_parquet(
        tmp_path / "p.parquet", row_group_size=8)
    X, y = read_ctr(str(tmp_path / "p.parquet"), label="click", n_features=64)
    sources = chunk_sources(y)
    assert sources == [RowGroup(str(tmp_path / "p.parquet"), g) for g in range(3)]
    assert row_origin(fs, sources[1], 4, CSV, 1) == f"{tmp_path / 'p.parquet'}, row group 2, " \
                                                     f"row 5"

    X, y = read_libsvm(str(tmp_path / "s.svm"), blocksize=40)
    for other in (y.rechunk(-1), da.concatenate([y, y]), y.persist(), da.zeros(3),
                  np.zeros(3)):
        assert chunk_sources(other) is None


def test_many_tiny_blocks_are_refused_few_are_not(tmp_path):
    """blocksize=1 (a forgotten unit) planned one block, one task, per byte: 150 s for a
    14 kB file. Under 64 KiB at most 1,000 blocks are planned; larger blocks any number."""
    from dask_ps.io._blocks import MAX_SMALL_BLOCKS, MIN_BLOCKSIZE

    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:0.5\n" * 1500)  # 12,000 bytes
    fs = fsspec.filesystem("file")
    with pytest.raises(ValueError, match=rf"blocksize 1 byte cuts {path} into 12,000 blocks, "
                                         rf"one task each: a blocksize under 64 KiB is for "
                                         rf"small inputs, at most 1,000 blocks; give a larger "
                                         rf"one such as '64MiB'"):
        plan(fs, [str(path)], 1, None)
    with pytest.raises(ValueError, match=r"blocksize 8 bytes \('8B'\) cuts .* and 1 more "
                                         r"files into 3,000 blocks"):
        plan(fs, [str(path)] * 2, "8B", None)
    assert len(plan(fs, [str(path)], 12, None)) == MAX_SMALL_BLOCKS  # small, and few
    big = tmp_path / "big.svm"
    with open(big, "wb") as f:  # sparse: no bytes written
        f.truncate(MIN_BLOCKSIZE * (MAX_SMALL_BLOCKS + 1))
    assert len(plan(fs, [str(big)], MIN_BLOCKSIZE, None)) == MAX_SMALL_BLOCKS + 1
    # a file is a block whatever the blocksize: many small files are not refused (1,001
    # one-line files at 32 KiB were: "cuts them into 1,001 blocks")
    one = tmp_path / "one.svm"
    one.write_bytes(b"1 1:0.5\n")
    many = [str(one)] * (MAX_SMALL_BLOCKS + 1)
    assert len(plan(fs, many, "32KiB", None)) == len(plan(fs, many, "64MiB", None)) == 1001
    # refused when the blocksize cuts more than MAX_SMALL_BLOCKS blocks off the files
    assert len(plan(fs, [str(path), str(one)], 12, None)) == 1001  # 999 cut off
    with pytest.raises(ValueError, match="and 1 more files into 2,000 blocks"):
        plan(fs, [str(path)] * 2, 12, None)  # 1,998 cut off


def test_a_truncated_compressed_file_is_named_by_every_reader(tmp_path):
    """A gzip file cut short (a copy interrupted) failed in ``read_ctr``, ``read_ratings``
    and ``read_docword`` as a bare ``EOFError: Compressed file ended before the
    end-of-stream marker was reached``, naming no file (``dask-ps train`` called it "a bug
    of dask_ps?"): reading its header or a sample opened it apart from its blocks. Every
    reader now names the file, as ``read_libsvm`` did (one rule,
    :func:`~dask_ps.io._blocks.decompress_errors`)."""
    import gzip

    import dask

    from dask_ps.exceptions import DataError
    from dask_ps.io import read_ctr, read_docword, read_libsvm, read_ratings

    texts = {"c.csv.gz": "click,price,shop\n" + "1,2.5,a\n0,3,b\n" * 40,
             "r.tsv.gz": "1\t2\t5\t0\n1\t3\t4\t0\n" * 40,
             "d.txt.gz": "3\n5\n4\n1 1 1\n1 2 2\n2 3 1\n3 4 2\n",
             "s.svm.gz": "1 1:1 3:1\n0 2:1\n" * 40}
    for name, text in texts.items():
        packed = gzip.compress(text.encode())
        (tmp_path / name).write_bytes(packed[: len(packed) // 2])
    readers = {"c.csv.gz": lambda p: read_ctr(p, label="click", n_features=64),
               "r.tsv.gz": read_ratings, "d.txt.gz": read_docword, "s.svm.gz": read_libsvm}
    for name, reader in readers.items():
        path = str(tmp_path / name)
        with pytest.raises(DataError, match=rf"^{path}: cannot decompress \(gzip\): "
                                            r"Compressed file ended before"):
            dask.compute(reader(path), scheduler="sync")
