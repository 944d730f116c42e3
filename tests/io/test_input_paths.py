"""What the readers make of a path that is not a plain file: a folder (its files, as
pandas' and pyarrow's read_parquet read one), a compressed file whose name does not say so,
a vocabulary that is not UTF-8 or names several files."""

from __future__ import annotations

import bz2
import functools
import gzip

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dask_ps.exceptions import DataError
from dask_ps.io import read_ctr, read_libsvm, read_text, read_vocabulary
from dask_ps.io._sniff import compressed


def _folder(tmp_path, name: str, files: dict) -> str:
    root = tmp_path / name
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return str(root)


@pytest.mark.timeout(120)
def test_a_folder_is_read_as_its_files_but_hidden_ones_on_a_cluster(tmp_path, client1):
    """A folder raised "[Errno 21] Is a directory" (IsADirectoryError) from every reader,
    and ``dask-ps train --train folder`` said "no such file (a directory)"."""
    svm = _folder(tmp_path, "svm", {"b.svm": b"0 2:3\n", "a.svm": b"1 1:2\n",
                                    "sub/c.svm": b"1 3:1\n", "_SUCCESS": b"",
                                    ".a.svm.crc": b"\x00\x01", "_tmp/d.svm": b"bad line\n",
                                    ".hidden/e.svm": b"bad\n"})
    X, y = read_libsvm(svm)
    assert X.compute().toarray().tolist() == [[2, 0, 0], [0, 3, 0], [0, 0, 1]]
    assert y.compute().tolist() == [1, 0, 1]  # a.svm, b.svm, sub/c.svm: sorted
    assert read_libsvm(svm + "/")[0].shape == (3, 3)
    table = _folder(tmp_path, "csv", {"p0.csv": b"click,a\n1,x\n", "p1.csv": b"click,a\n0,y\n",
                                      "_SUCCESS": b""})
    X, y = read_ctr(table, label="click", n_features=64)
    assert y.compute().tolist() == [1, 0] and X.compute().nnz == 2
    (tmp_path / "pq").mkdir()
    for i in range(2):
        pq.write_table(pa.table({"click": [i, 1 - i], "a": [1.0, 2.0]}),
                       tmp_path / "pq" / f"part-{i}.parquet")
    (tmp_path / "pq" / "_SUCCESS").write_bytes(b"")
    X, y = read_ctr(str(tmp_path / "pq"), label="click", format="parquet", n_features=64)
    assert y.compute().tolist() == [0, 1, 1, 0]
    X, terms = read_text(_folder(tmp_path, "txt", {"a.txt": b"the cat\n", "b.txt": b"a dog\n"}))
    assert X.shape[0] == 2 and sorted(terms) == ["a", "cat", "dog", "the"]


def test_a_folder_without_files_is_named(tmp_path):
    empty = _folder(tmp_path, "e", {"_SUCCESS": b"", ".x.crc": b"", "_logs/a.svm": b"1 1:1\n"})
    with pytest.raises(FileNotFoundError, match=rf"^folder '{empty}' holds no file \(names "
                                                rf"starting with '\.' or '_' are skipped\)$"):
        read_libsvm(empty)
    (tmp_path / "none").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no file"):
        read_ctr(str(tmp_path / "none"), label="click")


@pytest.mark.parametrize("pack, codec, ext", [
    (functools.partial(gzip.compress, mtime=0), "gzip", ".gz"),
    (functools.partial(gzip.compress, mtime=13), "gzip", ".gz"),  # a CR in the header
    (bz2.compress, "bz2", ".bz2")], ids=["gzip", "gzip-cr", "bz2"])
def test_a_compressed_file_whose_name_does_not_say_so_is_named(tmp_path, pack, codec, ext):
    """It was read as text: "label is not a finite number: '\\x1f\\x8b...'" (LIBSVM), "its
    first line is not delimited text (it holds NUL bytes): a binary file (e.g. Parquet...)"
    (CSV), "not UTF-8 text (invalid start byte at byte 1)" (text), a bare
    UnicodeDecodeError (vocabulary). gzip's header holds the time it was made: a byte of it
    that was a CR made the LIBSVM error give the lone-CR hint (old Mac line ends) instead
    (CI, once in about 60 runs); mtime=13 puts one there, mtime=0 none."""
    hint = (f"(it is {codec}-compressed, but its name does not end in {ext}: rename it to end "
            f"in {ext}, or give compression='{codec}')")
    svm = tmp_path / "a.svm"
    svm.write_bytes(pack(b"1 1:2\n0 2:3\n"))
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(ValueError, match=rf"^{svm}, line 1: .*{_re(hint)}$"):
            read_libsvm(str(svm))
        assert read_libsvm(str(svm), compression=codec)[1].compute().tolist() == [1, 0]
        csv = tmp_path / "a.csv"
        csv.write_bytes(pack(b"click,a\n1,x\n"))
        with pytest.raises(DataError, match=rf"^{csv}: not delimited text {_re(hint)}$"):
            read_ctr(str(csv), label="click")
        txt = tmp_path / "a.txt"
        txt.write_bytes(pack(b"the cat\n"))
        with pytest.raises(ValueError, match=rf"^{txt}, line 1: not UTF-8 text .*{_re(hint)}$"):
            read_text(str(txt))[0].compute()
        with pytest.raises(ValueError, match=rf"^{txt}, line 1: not UTF-8 text .*rename it to "
                                             rf"end in {ext}\)$"):
            read_vocabulary(str(txt))  # it takes no compression=
    assert compressed(b"BZh is a word\n") == "" and compressed(b"1 1:2\n") == ""


def _re(text: str) -> str:
    import re

    return re.escape(text)


def test_a_vocabulary_not_utf8_or_of_several_files_is_named(tmp_path):
    """Bytes that are not UTF-8 raised a bare UnicodeDecodeError naming no file; a glob or
    folder of several files silently gave the terms of the first."""
    bad = tmp_path / "vocab.txt"
    bad.write_bytes(b"apple\ncaf\xe9\npear\n")
    with pytest.raises(DataError, match=rf"^{bad}, line 2: not UTF-8 text \(invalid "
                                        rf"continuation byte\)$"):
        read_vocabulary(str(bad))
    folder = _folder(tmp_path, "v", {"a.txt": b"x\n", "b.txt": b"y\n", "c.txt": b"z\n"})
    for given in [folder, folder + "/*.txt"]:
        with pytest.raises(DataError, match=rf"^vocabulary '{_re(given)}' names 3 files "
                                            rf"\({folder}/a\.txt, {folder}/b\.txt, \.\.\.\); "
                                            rf"a vocabulary is one file of terms$"):
            read_vocabulary(given)
    np.testing.assert_array_equal(read_vocabulary(folder + "/a.txt"), ["x"])


def test_a_repeated_term_is_refused_by_read_vocabulary_as_by_read_text(tmp_path):
    """read_text(vocabulary=[...]) refused a repeated term ("the vocabulary has a repeated
    term", naming neither it nor where) while read_vocabulary took it: two ids of one term.
    Both refuse it now with the one check, naming the term and its two places."""
    from dask_ps.io import read_ldac

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("cat\ndog\nemu\n dog\ncat\n")  # spaces around a term are dropped
    said = rf"^{_re(str(vocab))}, line 4: repeated term 'dog' \(line 2 holds it already\)"
    for call in (lambda: read_vocabulary(str(vocab)),
                 lambda: read_text(str(vocab), vocabulary=str(vocab)),
                 lambda: read_ldac(str(vocab), str(vocab))):
        with pytest.raises(DataError, match=said):
            call()
    with pytest.raises(DataError, match=r"^the vocabulary has a repeated term 'b' \(positions "
                                        r"1 and 3, counted from 0\)"):
        read_text(str(vocab), vocabulary=["a", "b", "c", "b", "a"])
    vocab.write_text("cat\ndog\nemu\n")
    np.testing.assert_array_equal(read_vocabulary(str(vocab)), ["cat", "dog", "emu"])


def _hours(tmp_path) -> str:
    """A folder of hourly CSV files as they arrive: rows, a header alone, 0 bytes (made,
    not written yet), rows."""
    return _folder(tmp_path, "hours", {
        "h1.csv": b"click,price,shop\n" + b"".join(b"%d,%d,s%d\n" % (i % 2, i, i % 5)
                                                   for i in range(60)),
        "h2.csv": b"click,price,shop\n", "h3.csv": b"",
        "h4.csv": b"click,price,shop\n1,3,s1\n0,4,s2\n"})


def test_files_of_0_bytes_are_skipped_among_others_and_named(tmp_path):
    """A file of 0 bytes among a folder's files stopped every CSV reader: "no columns (an
    empty file?)" (its missing header); now it is left out with a warning naming it, as a
    file of a header alone reads as no rows. All of 0 bytes: refused, naming the first."""
    from dask_ps.io import infer_encoder
    from dask_ps.io._frame import read_frame

    folder = _hours(tmp_path)
    skipped = rf"^{_re(folder)}/h3\.csv: an empty file \(0 bytes: no header, no rows\): skipped$"
    for given in (folder, folder + "/*.csv", [f"{folder}/h3.csv", f"{folder}/h1.csv"]):
        with pytest.warns(UserWarning, match=skipped):
            X, y = read_ctr(given, label="click", n_features=64)
        assert X.shape[0] == (60 if isinstance(given, list) else 62)
        assert y.compute().shape == (X.shape[0],)
    with pytest.warns(UserWarning, match=skipped):
        assert infer_encoder(folder, label="click").numeric == ("price",)
    with pytest.warns(UserWarning, match=skipped):
        frame, _ = read_frame(folder, "click", categorical=["shop"])
    assert len(frame.compute()) == 62
    only = _folder(tmp_path, "none", {"a.csv": b"", "b.csv": b""})
    for call in (lambda: read_ctr(only, label="click"), lambda: read_frame(only)):
        with pytest.raises(DataError, match=rf"^{_re(only)}/a\.csv: an empty file \(0 bytes\) "
                                            rf"\(as are the 1 other files\): no header"):
            call()


@pytest.mark.timeout(120)
def test_a_stream_of_arriving_files_skips_the_empty_ones_and_goes_on(tmp_path, caplog):
    """learn_online on the files of a folder read one a batch with the stream's encoder: a
    file of 0 bytes (it raised "no columns (an empty file?)", ending the stream) and one of
    a header alone are skipped, each named; the batches after them are learnt."""
    import logging

    from dask_ps import LogisticRegression, learn_online
    from dask_ps.io import infer_encoder

    folder = _hours(tmp_path)
    files = [f"{folder}/h{i}.csv" for i in range(1, 5)]
    encoder = infer_encoder(files[0], label="click", n_features=64)
    est = LogisticRegression(client="local", random_state=0, checkpoint=None)
    with caplog.at_level(logging.WARNING, logger="dask_ps.algorithms.online"), \
            pytest.warns(UserWarning, match=rf"^{_re(files[2])}: an empty file \(0 bytes\): "
                                            rf"read as no rows$"):
        learn_online(est, (read_ctr(f, encoder, label="click") for f in files))
    assert [(r["batch"], r["rows"]) for r in est.history_] == [(1, 60), (4, 2)]
    for b in (2, 3):
        assert f"batch {b} of the stream (file {files[b - 1]}) has no rows: skipped" in \
            caplog.text
