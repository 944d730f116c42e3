"""Tests of dask_ps.io.libsvm.read_libsvm (no cluster: dask's synchronous scheduler)."""

from __future__ import annotations

import bz2
import doctest
import gzip
import math
import os
import random
import re
from pathlib import Path

import dask
import fsspec
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file, load_svmlight_files

import dask_ps.io.libsvm as libsvm_module
from dask_ps.io import _libsvm_kernels as K
from dask_ps.io.libsvm import _Err, _parse, read_libsvm

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("DASK_PS_DATA", REPO_ROOT / "../shared/data")).resolve()


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def data_file(rel: str) -> Path:
    path = DATA / rel
    if not path.is_file():
        pytest.fail(f"shared data file {path} is missing; set DASK_PS_DATA to the data folder")
    return path


def assert_same(X, y, X_ref, y_ref):
    """Equal shape, dtype, stored pattern and values (X_ref may be csr_array or matrix)."""
    Xc, yc = dask.compute(X, y)
    assert isinstance(Xc, sp.csr_matrix)
    X_ref = sp.csr_matrix(X_ref)
    assert Xc.shape == X_ref.shape
    assert Xc.dtype == X_ref.dtype
    assert Xc.has_canonical_format
    X_ref.sort_indices()
    np.testing.assert_array_equal(Xc.indptr, X_ref.indptr)
    np.testing.assert_array_equal(Xc.indices, X_ref.indices)
    np.testing.assert_array_equal(Xc.data, X_ref.data)
    assert yc.dtype == np.float64
    np.testing.assert_array_equal(yc, y_ref)


def assert_known_chunks(X, y):
    assert isinstance(X._meta, sp.csr_matrix)
    assert not any(math.isnan(c) for c in X.chunks[0])
    assert X.chunks[0] == y.chunks[0]
    assert sum(X.chunks[0]) == X.shape[0]
    assert X.numblocks[1] == 1


# --------------------------------------------------------------------------------------
# Pure-Python twin of the numba kernel, for small inputs.

_NUMBER = re.compile(rb"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def _twin_number(tok: bytes) -> float | None:
    if not _NUMBER.match(tok):
        return None
    v = float(tok)
    return v if math.isfinite(v) else None


def twin_parse(data: bytes, shift: int, reject_zero: bool, max_raw: int):
    """Same contract as ``_parse``: an ``_Err``, or (labels, rows of (index, value), whether
    every line's indices, those of missing values too, are strictly increasing)."""
    labels, rows, ordered = [], [], True
    for lineno, line in enumerate(data.split(b"\n"), 1):
        toks = line.split(b"#", 1)[0].split()
        if not toks:
            continue
        label = _twin_number(toks[0])
        if label is None:
            return _Err(K.E_BAD_LABEL, lineno, toks[0])
        pairs = toks[1:]
        if pairs and pairs[0].startswith(b"qid:"):
            pairs = pairs[1:]
        row, seen = [], {}
        for at, tok in enumerate(pairs):
            idx_s, colon, val_s = tok.partition(b":")
            digits = idx_s[1:] if idx_s.startswith(b"-") else idx_s
            code = None
            if not colon:
                code = K.E_NO_COLON
            elif not idx_s:
                code = K.E_EMPTY_INDEX
            elif not digits or not digits.isdigit():
                code = K.E_BAD_INDEX
            elif idx_s.startswith(b"-"):
                code = K.E_NEG_INDEX
            elif int(digits) == 0 and reject_zero:
                code = K.E_ZERO_INDEX
            elif int(digits) > max_raw:
                code = K.E_BIG_INDEX
            elif (val_s and val_s.lstrip(b"+-").lower() != b"nan"
                  and _twin_number(val_s) is None):
                code = K.E_BAD_VALUE
            if code is not None:
                return _Err(code, lineno, tok)
            seen.setdefault(int(digits), []).append(at)
            if not val_s or val_s.lstrip(b"+-").lower() == b"nan":
                continue  # a missing value (empty or NaN): the pair is left out
            row.append((int(digits) - shift, _twin_number(val_s)))
        repeats = [at for places in seen.values() for at in places[1:]]
        if repeats:  # the first pair that repeats an index of the line
            return _Err(K.E_DUP_INDEX, lineno, pairs[min(repeats)])
        written = list(seen)
        ordered = ordered and all(a < b for a, b in zip(written, written[1:]))
        labels.append(label)
        rows.append(row)
    return labels, rows, ordered


GOOD_NUMBERS = [
    "1", "0", "-0", "+2", "-1", ".5", "5.", "0.1", "1e-3", "1E+30", "1e22", "1e23", "3e37",
    "9007199254740993", "9007199254740992", "12345678901234567890", "0.30000000000000004",
    "2.2250738585072014e-308", "4.9e-324", "1e-400", "1.7976931348623157e308", "000123.4500",
    "0.000000000000000000001234", "123456789e-30", "-7.0E-05", "1.000000000000000000001",
]
BAD_VALUES = ["inf", "-inf", "Infinity", "abc", "1e", "1.2.3", "+", ".", "1e999", "0x10",
              "1_0", "nanx", "na"]
MISSING_VALUES = ["nan", "NaN", "-nan", "+NAN", ""]  # pairs left out, not errors
BAD_PAIRS = ["7", ":1", "x:1", "1.5:2", "-3:1", "+3:1", "-:1"]


def _random_value(rng: random.Random) -> str:
    kind = rng.random()
    v = rng.uniform(-1e3, 1e3) * 10.0 ** rng.randint(-30, 30)
    if kind < 0.3:
        return rng.choice(GOOD_NUMBERS)
    if kind < 0.55:
        return f"{v:.16g}"
    if kind < 0.75:
        return repr(v)
    if kind < 0.9:
        return f"{v:.6g}"
    return str(rng.randint(-10, 10))


def _random_doc(rng: random.Random, n_lines: int, error: bool) -> bytes:
    lines = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.08:
            lines.append(rng.choice(["", "   ", "# only a comment", "\t\r"]))
            continue
        toks = [rng.choice(["+1", "-1", "0", "3", "1.5", "-2e0", _random_value(rng)])]
        if rng.random() < 0.1:
            toks.append(f"qid:{rng.randint(0, 9)}")
        n_pairs = rng.randint(0, 6)
        # distinct indices, sorted or not, on most lines; repeats (an error) on a few
        index = ([rng.randint(0, 40) for _ in range(n_pairs)] if rng.random() < 0.03
                 else rng.sample(range(41), n_pairs))
        if rng.random() < 0.5:
            index.sort()
        for i in index:
            value = rng.choice(MISSING_VALUES) if rng.random() < 0.05 else _random_value(rng)
            toks.append(f"{i}:{value}")
        sep = rng.choice([" ", "  ", "\t", " \t "])
        line = sep.join(toks) + rng.choice(["", " ", "\r", " # c 1:2 x"])
        lines.append(line)
    if error and lines:
        i = rng.randrange(len(lines))
        kind = rng.random()
        if kind < 0.4:
            bad = f"{rng.randint(1, 9)}:{rng.choice(BAD_VALUES)}"
        elif kind < 0.8:
            bad = rng.choice(BAD_PAIRS)
        else:
            bad = None
        if bad is None:
            lines[i] = rng.choice(["abc", "nan", "1e999", "1:1"]) + " 1:1"
        else:
            lines[i] = f"1 2:1 {bad} 3:1"
    text = "\n".join(lines) + rng.choice(["", "\n"])
    return text.encode()


@pytest.mark.parametrize("seed", range(300))
def test_kernel_matches_python_twin(seed):
    rng = random.Random(seed)
    doc = _random_doc(rng, rng.randint(0, 12), error=seed % 3 == 0)
    shift, reject_zero = rng.choice([(0, False), (1, True), (1, False)])
    max_raw = rng.choice([K.NO_LIMIT, 35, 40])
    expected = twin_parse(doc, shift, reject_zero, max_raw)
    got = _parse(doc, shift, reject_zero, max_raw)
    if isinstance(expected, _Err):
        assert got == expected, doc
        return
    assert not isinstance(got, _Err), (got, doc)
    labels, rows, ordered = expected
    n, nnz = int(got.info[K.I_ROWS]), int(got.info[K.I_NNZ])
    assert n == len(rows)
    np.testing.assert_array_equal(got.labels[:n], labels)
    assert got.indptr[0] == 0
    np.testing.assert_array_equal(np.diff(got.indptr[: n + 1]), [len(r) for r in rows])
    flat = [p for r in rows for p in r]
    np.testing.assert_array_equal(got.indices[:nnz], [p[0] for p in flat])
    # Exact: the kernel must agree bit for bit with float().
    assert got.values[:nnz].tobytes() == np.array([p[1] for p in flat], dtype=np.float64).tobytes()
    assert got.info[K.I_NEWLINES] == doc.count(b"\n")
    assert bool(got.info[K.I_CANON]) == ordered


def test_every_good_number_is_exact():
    doc = "\n".join(f"{v} 1:{v}" for v in GOOD_NUMBERS).encode()
    got = _parse(doc, 1, True, K.NO_LIMIT)
    want = [float(v) for v in GOOD_NUMBERS]
    assert got.labels[: len(want)].tobytes() == np.array(want).tobytes()
    assert got.values[: len(want)].tobytes() == np.array(want).tobytes()


@pytest.mark.parametrize("doc", [
    b"1 3:2#c 4:1\n0 5:1.", b"1 007:1.50 9:0 10:00", b"1 2:123456789012345 3:1234567890123456",
    b"1 2:0.000000000000001 3:0.0000000000000001 4:99999999999999.9",
    b"1 2:1.5e3 3:1:2", b"1 2:1 0:1", b"1 41:1", b"1 123456789012345678:1",
    b"1 2:1x", b"1 2:.5 3:-1 4:+1", b"1 2:1\t\r\n 3:4",
])
@pytest.mark.parametrize(("shift", "reject_zero", "max_raw"), [(0, False, K.NO_LIMIT),
                                                              (1, True, 40)])
def test_plain_pairs_as_the_general_path(doc, shift, reject_zero, max_raw):
    """Pairs of digits are read in one walk: the same numbers and errors as every other pair
    (a value past 15 digits, a sign, an exponent, a bad index all leave that walk)."""
    expected = twin_parse(doc, shift, reject_zero, max_raw)
    got = _parse(doc, shift, reject_zero, max_raw)
    if isinstance(expected, _Err):
        assert got == expected
        return
    labels, rows, _ = expected
    nnz = int(got.info[K.I_NNZ])
    flat = [p for r in rows for p in r]
    np.testing.assert_array_equal(got.indices[:nnz], [p[0] for p in flat])
    assert got.values[:nnz].tobytes() == np.array([p[1] for p in flat]).tobytes()


# --------------------------------------------------------------------------------------
# Round trips through sklearn's writer and reader.


def _random_problem(seed, n_rows=300, n_cols=25, empty_last_col=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n_rows, n_cols, density=0.2, format="csr", random_state=rng)
    X.data = (X.data - 0.5) * 10.0 ** rng.integers(-5, 5, X.nnz)
    if empty_last_col:
        X = X.tolil()
        X[:, n_cols - 1] = 0
        X = X.tocsr()
        X.eliminate_zeros()
    y = rng.choice([-1.0, 1.0], n_rows)
    return X, y


@pytest.mark.parametrize("zero_based", [True, False])
@pytest.mark.parametrize("empty_last_col", [False, True])
@pytest.mark.parametrize("give_n_features", [False, True])
def test_round_trip_dump_svmlight_file(tmp_path, zero_based, empty_last_col, give_n_features):
    X, y = _random_problem(7, empty_last_col=empty_last_col)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)
    n_features = X.shape[1] if give_n_features else None
    n_chunks = []
    for blocksize in [64, 1024, "1MiB", None]:
        dtypes = [np.float64] if blocksize == 64 else [np.float32, np.float64]
        for dtype in dtypes:  # float32 is float64 rounded once more, as in sklearn
            for zb in [zero_based, "auto"]:
                Xd, yd = read_libsvm(
                    path, n_features=n_features, zero_based=zb, blocksize=blocksize, dtype=dtype
                )
                X_ref, y_ref = load_svmlight_file(
                    path, n_features=n_features, zero_based=zero_based, dtype=dtype
                )
                assert_known_chunks(Xd, yd)
                assert_same(Xd, yd, X_ref, y_ref)
                expected_cols = X.shape[1] - (empty_last_col and not give_n_features)
                assert Xd.shape == (X.shape[0], expected_cols)
        n_chunks.append(Xd.numblocks[0])
        # %.16g is not always round-trip exact, but it is within a rounding error.
        np.testing.assert_allclose(Xd.compute().toarray()[:, : X.shape[1]],
                                   X.toarray()[:, : expected_cols], rtol=1e-15)
    assert n_chunks[0] > n_chunks[1] > n_chunks[2] == n_chunks[3] == 1


def test_tiny_blocks_and_long_lines(tmp_path):
    # Lines far longer than the block size leave empty blocks, which add no chunk.
    X, y = _random_problem(3, n_rows=40, n_cols=200)
    path = tmp_path / "long.svm"
    dump_svmlight_file(X, y, str(path))
    Xd, yd = read_libsvm(path, blocksize=128)  # ~625 blocks, lines ~2 kB
    assert_known_chunks(Xd, yd)
    assert all(c > 0 for c in Xd.chunks[0])
    assert_same(Xd, yd, *load_svmlight_file(path, dtype=np.float32))


def test_format_details_against_sklearn(tmp_path):
    text = (
        b"# header comment\r\n"
        b"\r\n"
        b"1 qid:3 1:0.5 4:1e-3   # trailing comment 9:9\r\n"
        b"-1\t2:7 3:-2.5e+1 \r\n"
        b"   \n"
        b"0 5:0\n"            # explicit zero is stored, like sklearn
        b"2 1:1 2:2 3:3 4:4 5:5"  # no final newline
    )
    path = tmp_path / "details.svm"
    path.write_bytes(text)
    for blocksize in [8, 32, None]:
        Xd, yd = read_libsvm(path, blocksize=blocksize, dtype=np.float64)
        assert_same(Xd, yd, *load_svmlight_file(path))
    assert Xd.compute().nnz == 10


def test_unsorted_indices_are_read_and_sorted(tmp_path):
    path = tmp_path / "unsorted.svm"
    path.write_bytes(b"1 3:1 1:2 4:0.5\n-1 2:1\n1 4:1 2:1\n")
    for kwargs in [{}, {"n_features": 4, "zero_based": False}]:
        Xc = read_libsvm(path, blocksize=12, **kwargs)[0].compute()
        np.testing.assert_array_equal(Xc.toarray(), [[2, 0, 1, 0.5], [0, 1, 0, 0],
                                                     [0, 1, 0, 1]])
        np.testing.assert_array_equal(Xc.indptr, [0, 3, 4, 6])
        np.testing.assert_array_equal(Xc.indices, [0, 2, 3, 1, 1, 3])
        assert Xc.has_canonical_format
    got = _parse(path.read_bytes(), 1, True, K.NO_LIMIT)
    assert not isinstance(got, _Err) and not got.info[K.I_CANON]


@pytest.mark.parametrize(("line", "token"), [
    (b"1 3:1 3:2 9:1", b"3:2"),  # in order but repeated (read as 3.0 before)
    (b"1 9:1 3:1 9:2", b"9:2"),  # out of order
    (b"1 5:1 3:1 5:2 3:2", b"5:2"),  # the first pair that repeats an earlier index
    (b"1 qid:3 3:nan 3:1 # 3:1", b"3:1"),  # a missing value's index too
    (b"1 3:1 003:2", b"003:2"),
    (b"1 7:1 " + b" ".join(b"%d:1" % i for i in range(600, 8, -1)) + b" 7:1e-300",
     b"7:1e-300"),  # a long line; a value of the exact slow path
])
@pytest.mark.parametrize("known", [False, True])
def test_a_repeated_index_is_an_error_naming_file_line_and_pair(tmp_path, line, token,
                                                                known):
    """A repeated index on a line was summed (``1 3:1 3:2`` read 3.0); sklearn refuses it.
    Refused now by the first pass, or, with ``n_features`` and the base given, when the
    arrays are computed."""
    lines = [b"1 1:1 2:0.5 9:1"] * 30
    lines[10] = line
    path = tmp_path / "good.svm"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert _parse(line, 1, True, K.NO_LIMIT) == _Err(K.E_DUP_INDEX, 1, token)
    index = int(token.split(b":")[0])
    kwargs = {"n_features": 700, "zero_based": False} if known else {}
    with pytest.raises(ValueError, match=rf"good\.svm, line 11: feature index {index} "
                                         rf"repeated on the line: '{token.decode()}'\Z"):
        dask.compute(*read_libsvm(path, blocksize=64, **kwargs))  # a block after line 1's


def test_base_is_decided_for_the_whole_input(tmp_path):
    # Index 0 appears only in the last block of the second file: every block is zero-based.
    a, b = tmp_path / "a.svm", tmp_path / "b.svm"
    a.write_bytes(b"".join(b"1 1:1 %d:2\n" % (i % 9 + 2) for i in range(50)))
    b.write_bytes(b"".join(b"-1 3:1\n" for _ in range(50)) + b"1 0:4 2:1\n")
    Xd, yd = read_libsvm([a, b], blocksize=64)
    assert Xd.numblocks[0] > 4
    assert_same(Xd, yd, *_sklearn_concat(load_svmlight_files([a, b], dtype=np.float32)))
    assert Xd.shape == (101, 11)
    Xd, _ = read_libsvm(a, blocksize=64)  # alone, a is one-based
    assert Xd.shape == (50, 10)
    np.testing.assert_array_equal(Xd.compute()[:, 0].toarray().ravel(), np.ones(50))


def _sklearn_concat(parts):
    Xs, ys = parts[0::2], parts[1::2]
    return sp.vstack(Xs, format="csr"), np.concatenate(ys)


@pytest.mark.parametrize("text, hint", [
    ("click,a\n1,0.5\n", "(is this a CSV file? use format='csv')"),
    ("1;0.5\n", "(is this a table of fields separated by ';'? use format='csv', sep=';')"),
    ("1\t0.5\t2\n", "(is this a table of fields separated by '\\t'? use format='csv', "
                   "sep='\\t')"),
    (None, "(is this a Parquet file? use format='parquet')"),
])
def test_a_table_read_as_libsvm_is_hinted_in_the_readers_parameters(tmp_path, text, hint):
    """The hint named dask-ps train's options ("dask-ps train reads it with --format csv
    --sep ';'"), meaningless to a caller of read_libsvm; now the table readers' parameters
    (the command line says them as its options)."""
    import pandas as pd

    path = tmp_path / "t.txt"
    if text is None:
        pd.DataFrame({"y": [0, 1], "a": [0.5, 1.5]}).to_parquet(path)
    else:
        path.write_text(text)
    with pytest.raises(ValueError, match=r"^" + re.escape(f"{path}, line 1: ") + r".* "
                                         + re.escape(hint) + "$") as info:
        read_libsvm(path)
    assert "--" not in str(info.value) and "dask-ps" not in str(info.value)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.svm"
    path.write_bytes(b"")
    X, y = read_libsvm(path)
    assert X.shape == (0, 0) and y.shape == (0,)
    X, y = read_libsvm(path, n_features=5)
    assert X.compute().shape == (0, 5)


# --------------------------------------------------------------------------------------
# Real data.


def test_a9a_matches_sklearn():
    path = data_file("lr_a9a/a9a")
    X_ref, y_ref = load_svmlight_file(path, dtype=np.float32)
    for blocksize in ["32MiB", "256KiB"]:
        X, y = read_libsvm(path, blocksize=blocksize)
        assert X.shape == (32_561, 123)
        assert X.dtype == np.float32
        assert_known_chunks(X, y)
        assert_same(X, y, X_ref, y_ref)
        assert X.compute().nnz == 451_592
    assert X.numblocks[0] == 9  # 2.3 MB in 256 KiB blocks
    assert set(np.unique(y.compute())) == {-1.0, 1.0}


def test_reuters_bz2_matches_sklearn():
    path = data_file("lr_reuters_moneyfx/reuters.trn.bz2")
    X, y = read_libsvm(path, n_features=8315, blocksize=1024, dtype=np.float64)
    assert X.numblocks[0] == 1  # a bz2 stream is one block
    assert X.shape == (7770, 8315)
    assert_same(X, y, *load_svmlight_file(path, n_features=8315))


# --------------------------------------------------------------------------------------
# Errors name the file, the line (counted across blocks) and the token.

GOOD_LINE = b"-1 1:0.25 3:1 7:2.5e-1 11:3\n"


def _read_all(*args, **kwargs):
    """read_libsvm and compute both arrays: a bad line is reported by the first pass when
    the reader must parse every line to decide the base or the width, else when the
    blocks are parsed (computed)."""
    return dask.compute(*read_libsvm(*args, **kwargs))


def _file_with_bad_line(tmp_path, bad: bytes, lineno: int, n_lines: int = 400) -> Path:
    lines = [GOOD_LINE] * n_lines
    lines[lineno - 1] = bad + b"\n"
    path = tmp_path / "broken.svm"
    path.write_bytes(b"".join(lines))
    return path


ERROR_CASES = [
    # (bad line, read_libsvm kwargs, token expected in the message, words expected)
    (b"1 1:1 3x1 5:1", {}, "3x1", "malformed pair"),
    (b"1 :1", {}, ":1", "empty feature index"),
    (b"1 a:1", {}, "a:1", "not an integer"),
    (b"1 2:inf", {}, "2:inf", "not a finite number"),
    (b"1 2:1e999", {}, "2:1e999", "not a finite number"),
    (b"1 2:abc", {}, "2:abc", "not a finite number"),
    (b"pos 1:1", {}, "pos", "label"),
    (b"1 -4:1", {}, "-4:1", "negative"),
    (b"1 13:1", {"n_features": 12}, "13:1", "n_features=12"),
    (b"1 12:1", {"n_features": 12, "zero_based": True}, "12:1", "n_features=12"),
    (b"1 0:1", {"zero_based": False}, "0:1", "index 0"),
]


@pytest.mark.parametrize("lineno", [3, 190, 371])
@pytest.mark.parametrize(("bad", "kwargs", "token", "words"), ERROR_CASES)
def test_error_names_file_line_and_token(tmp_path, bad, kwargs, token, words, lineno):
    path = _file_with_bad_line(tmp_path, bad, lineno)
    blocksize = 2048
    block_of_line = (lineno - 1) * len(GOOD_LINE) // blocksize
    assert block_of_line == {3: 0, 190: 2, 371: 5}[lineno]  # 1st, 3rd and 6th block
    with pytest.raises(ValueError) as info:
        _read_all(path, blocksize=blocksize, **kwargs)
    msg = str(info.value)
    assert "broken.svm" in msg and f"line {lineno}:" in msg and repr(token) in msg, msg
    assert words in msg, msg


@pytest.mark.parametrize("lineno", [3, 190, 371])
@pytest.mark.parametrize(("bad", "token", "words"), [
    (b"1 1:1 3x1 5:1", "3x1", "malformed pair"), (b"1 2:1e999", "2:1e999", "not a finite"),
    (b"pos 1:1", "pos", "label"), (b"1 13:1", "13:1", "n_features=12"),
    (b"1 0:1", "0:1", "index 0")])
def test_known_width_checks_lines_when_they_are_parsed(tmp_path, bad, token, words, lineno):
    # base and width given: the first pass only counts rows; the one parse checks the lines
    path = _file_with_bad_line(tmp_path, bad, lineno)
    X, y = read_libsvm(path, n_features=12, zero_based=False, blocksize=2048)
    assert X.shape == (400, 12) and X.numblocks[0] == 6
    with pytest.raises(ValueError) as info:
        dask.compute(X, y)
    msg = str(info.value)
    assert "broken.svm" in msg and f"line {lineno}:" in msg and repr(token) in msg, msg
    assert words in msg, msg


def test_known_width_file_changed_after_it_was_opened(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(GOOD_LINE * 100 + b"# comment\n\n")
    X, y = read_libsvm(path, n_features=12, zero_based=False, blocksize=None)
    assert X.shape == (100, 12)
    text = path.read_bytes()  # the same size, one row less: a row becomes a comment
    path.write_bytes(b"#" + text[1:])
    with pytest.raises(ValueError, match=r"a\.svm: 99 rows after line 0, 100 when the file was "
                                         r"opened; did it change since\?"):
        dask.compute(X, y)


def test_error_auto_base_index_beyond_n_features(tmp_path):
    # 12 is fine one-based with n_features=12, but index 0 later makes the input zero-based.
    path = _file_with_bad_line(tmp_path, b"1 12:1", 150)
    text = path.read_bytes() + b"1 0:1\n"
    path.write_bytes(text)
    expected = r"broken\.svm, line 150: .*n_features=12 \(zero-based\): '12:1'"
    with pytest.raises(ValueError, match=expected):
        _read_all(path, n_features=12, blocksize=1024)
    X, _ = read_libsvm(path, n_features=13, blocksize=1024)
    assert X.shape == (401, 13)


def test_error_line_numbers_restart_per_file(tmp_path):
    good = tmp_path / "a_good.svm"
    good.write_bytes(GOOD_LINE * 100)
    bad = tmp_path / "b_bad.svm"
    bad.write_bytes(GOOD_LINE * 60 + b"1 5:x\n")
    with pytest.raises(ValueError, match=r"b_bad\.svm, line 61: .*'5:x'"):
        _read_all(str(tmp_path / "*.svm"), blocksize=256)


def test_bad_arguments(tmp_path):
    path = tmp_path / "ok.svm"
    path.write_bytes(GOOD_LINE)
    with pytest.raises(ValueError, match="zero_based"):
        read_libsvm(path, zero_based="yes")
    with pytest.raises(ValueError, match="n_features"):
        read_libsvm(path, n_features=-1)
    for too_wide in (2**63, 10**30):  # not numba's OverflowError, naming nothing
        with pytest.raises(ValueError, match=r"n_features must be at most 2\*\*63 - 1 "):
            read_libsvm(path, n_features=too_wide)
    with pytest.raises(FileNotFoundError):
        read_libsvm(str(tmp_path / "*.nothing"))


def test_cr_only_line_ends_are_named(tmp_path):
    path = tmp_path / "mac.svm"
    path.write_bytes(GOOD_LINE * 3 + b"1 1:1\r0 2:1\r1 3:1\r")
    for kwargs in [{}, {"n_features": 12, "zero_based": False}]:
        with pytest.raises(ValueError, match=r"mac\.svm, line 4: .*'0'; it holds a lone CR "
                                             r"\(\\r\): lines must end in LF or CRLF"):
            _read_all(path, **kwargs)
    path.write_bytes(b"1 1:1\r\n0 2:1\r\n")  # CRLF is fine
    assert _read_all(path)[0].shape == (2, 2)


@pytest.mark.parametrize("kwargs", [{}, {"n_features": 3, "zero_based": False}])
def test_a_byte_order_mark_opening_the_file_is_skipped(tmp_path, kwargs):
    path = tmp_path / "bom.svm"
    path.write_bytes(b"\xef\xbb\xbf1 1:0.5 3:2\n\xef\xbb\xbf\n-1 2:1\n")
    with pytest.raises(ValueError, match=r"bom\.svm, line 2: label is not a finite number"):
        _read_all(path, **kwargs)  # only at the start of the file
    path.write_bytes(b"\xef\xbb\xbf1 1:0.5 3:2\n-1 2:1\n")
    X, y = _read_all(path, blocksize=None, **kwargs)
    assert X.toarray().tolist() == [[0.5, 0, 2], [0, 1, 0]] and y.tolist() == [1, -1]


def test_an_empty_value_is_missing_as_nan(tmp_path):
    path = tmp_path / "e.svm"
    path.write_bytes(b"1 1:1 3: 2:nan\n0 2:4 5:\n")
    for kwargs in [{}, {"n_features": 5, "zero_based": False}]:
        X, y = _read_all(path, **kwargs)  # a missing value's index counts for the width
        assert X.shape == (2, 5) and X.nnz == 2 and y.tolist() == [1, 0]
        assert X.toarray()[:, :2].tolist() == [[1, 0], [0, 4]]
    with pytest.raises(ValueError, match=r"line 2: feature index beyond n_features=4: .5:."):
        _read_all(path, n_features=4)
    path.write_bytes(b"1 0: 1:2\n")  # index 0 of a missing value makes the input zero-based
    assert _read_all(path)[0].toarray().tolist() == [[0, 2]]


@pytest.mark.parametrize("kwargs", [{}, {"n_features": 12, "zero_based": False}])
def test_an_integer_dtype_refuses_fractions_rather_than_truncating(tmp_path, kwargs):
    path = tmp_path / "broken.svm"
    lines = [b"-1 1:2 3:1 7:-4 11:3\n"] * 400
    lines[189] = b"1 1:3 2:0.5\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=r"broken\.svm, line 190: value 0\.5 is not an integer "
                                         r"of dtype int32"):
        _read_all(path, dtype=np.int32, blocksize=2048, **kwargs)
    lines[189] = b"1 1:3e9\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=r"line 190: value 3000000000\.0 is not an integer of "
                                         r"dtype int32"):
        _read_all(path, dtype=np.int32, **kwargs)
    path.write_bytes(b"1 1:3 2:-2 3:2e3\n0 3:0\n")
    X, _ = _read_all(path, dtype=np.int32, **kwargs)
    assert X.dtype == np.int32 and X.toarray()[:, :3].tolist() == [[3, -2, 2000], [0, 0, 0]]


def test_unknown_compression_is_refused_up_front_naming_the_codecs(tmp_path):
    path = tmp_path / "ok.svm"
    path.write_bytes(GOOD_LINE)
    with pytest.raises(ValueError, match=r"compression must be 'infer', None or one of .*'gzip'"
                                         r".*, not 'rar'"):
        read_libsvm(path, compression="rar", n_features=12, zero_based=False)


# --------------------------------------------------------------------------------------
# File systems, globs, compression.


def test_memory_filesystem():
    X, y = _random_problem(11, n_rows=120)
    fs = fsspec.filesystem("memory")
    with fs.open("/libsvm-test/data.svm", "wb") as f:
        dump_svmlight_file(X, y, f)
    try:
        Xd, yd = read_libsvm("memory://libsvm-test/data.svm", blocksize=500)
        with fs.open("/libsvm-test/data.svm", "rb") as f:
            X_ref, y_ref = load_svmlight_file(f, dtype=np.float32)
        assert Xd.numblocks[0] > 1
        assert_same(Xd, yd, X_ref, y_ref)
    finally:
        fs.rm("/libsvm-test", recursive=True)


def test_glob_concatenates_in_sorted_order(tmp_path):
    (tmp_path / "part-2.svm").write_bytes(b"2 1:2\n2 2:2\n")  # written first, sorts last
    (tmp_path / "part-1.svm").write_bytes(b"1 1:1\n")
    (tmp_path / "other.txt").write_bytes(b"junk")
    X, y = read_libsvm(str(tmp_path / "part-*.svm"), blocksize=4)
    np.testing.assert_array_equal(y.compute(), [1, 2, 2])
    np.testing.assert_array_equal(X.compute().toarray(), [[1, 0], [2, 0], [0, 2]])
    # '?' and '[...]' were taken literally ("No such file"); a file named so is itself
    for pattern in ("part-?.svm", "part-[12].svm", "part-[!3].svm"):
        X, y = read_libsvm(str(tmp_path / pattern), blocksize=4)
        np.testing.assert_array_equal(y.compute(), [1, 2, 2])
    (tmp_path / "part-9.svm").mkdir()  # a folder matches no glob, as with '*'
    X, y = read_libsvm(str(tmp_path / "part-?.svm"))
    np.testing.assert_array_equal(y.compute(), [1, 2, 2])
    (tmp_path / "part-[1].svm").write_bytes(b"3 1:3\n")
    np.testing.assert_array_equal(read_libsvm(str(tmp_path / "part-[1].svm"))[1].compute(),
                                  [3])
    with pytest.raises(FileNotFoundError, match=r"no file matches .*part-\[89\]\.svm"):
        read_libsvm(str(tmp_path / "part-[89].svm"))


def test_a_glob_learns_file_types_from_its_listing(monkeypatch):
    """'?' and '[...]' globs take the types of what they match from the one listing: on S3,
    a request per matched file (``fs.isdir``) was as many round trips as files."""
    fs = fsspec.filesystem("memory")
    fs.pipe({"/glob-types/part-1.svm": b"1 1:1\n", "/glob-types/part-2.svm": b"2 2:2\n",
             "/glob-types/part-9.svm/inner.svm": b"3 3:3\n"})  # part-9.svm: a folder
    calls = []
    monkeypatch.setattr(type(fs), "isdir", lambda self, path: calls.append(path) or False)
    try:
        X, y = read_libsvm("memory://glob-types/part-?.svm")
        np.testing.assert_array_equal(y.compute(), [1, 2])
        assert [c for c in calls if "part-" in c] == []  # (fsspec may ask about the folder)
    finally:
        monkeypatch.undo()
        fs.rm("/glob-types", recursive=True)


@pytest.mark.parametrize(("suffix", "opener"), [(".gz", gzip.open), (".bz2", bz2.open)])
def test_compressed_files(tmp_path, suffix, opener):
    X, y = _random_problem(5)
    plain = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(plain))
    packed = tmp_path / f"data.svm{suffix}"
    with opener(packed, "wb") as f:
        f.write(plain.read_bytes())
    Xd, yd = read_libsvm(packed, blocksize=64)
    assert Xd.numblocks[0] == 1
    assert_same(Xd, yd, *load_svmlight_file(plain, dtype=np.float32))
    # compression=None must not decompress; gzip bytes are not LIBSVM text.
    with pytest.raises(ValueError):
        _read_all(packed, compression=None)
    Xd, yd = read_libsvm(str(tmp_path / "data.svm*"), blocksize=1024)
    assert Xd.shape == (2 * X.shape[0], X.shape[1])


def test_docstring_examples():
    result = doctest.testmod(libsvm_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


BIG_INDEX = (r"feature index above 9223372036854775806 \(2\*\*63 - 2, the largest that "
             r"leaves room for n_features = index \+ 1 in int64; hash larger keys below it\)")


@pytest.mark.parametrize("index", [b"9223372036854775807", b"99999999999999999999999"])
def test_error_index_too_large_for_int64_without_n_features(tmp_path, index):
    path = _file_with_bad_line(tmp_path, b"1 " + index + b":1", 7)
    with pytest.raises(ValueError, match=f"line 7: {BIG_INDEX}: '{index.decode()}:1'") as info:
        _read_all(path)
    assert "None" not in str(info.value)


def test_indices_up_to_two_to_the_63_minus_two_are_read(tmp_path):
    """Issue 18: indices from ~1e18 (19 digits) were refused as "too large for int64"; the
    limit is now exact, 2**63 - 2 (its n_features, 2**63 - 1, still fits int64)."""
    path = tmp_path / "big.svm"
    path.write_bytes(b"1 0:1 1000000000000000010:2\n0 9223372036854775806:3\n")
    X, y = _read_all(path)
    assert X.shape == (2, 2**63 - 1) and X.indices.dtype == np.int64
    assert X.indices.tolist() == [0, 10**18 + 10, 2**63 - 2]
    np.testing.assert_array_equal(X.data, [1.0, 2.0, 3.0])
