"""read_ctr on any table with a header: columns told apart, crosses, Parquet, the encoding
kernel against HashingEncoder.transform, and the one missing-value rule of every reader."""

from __future__ import annotations

import re

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dask_ps.io import HashingEncoder, encode_ctr, infer_encoder, read_ctr, read_libsvm

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _compute(X, y):
    return dask.compute(X, y)


def _write(path, text: str):
    path.write_bytes(text.encode())
    return path


def _random_csv(rng, n_rows: int, crlf: bool) -> tuple[str, pd.DataFrame]:
    """A CSV (with quotes, empty fields, blank lines, odd spacing in numbers) and the table
    it holds, as pandas would read it."""
    words = ["a", "b b", "c,d", 'say "hi"', "Zürich", "12", "", "x" * 40, "nan", " -NaN ",
             "nana"]
    rows = []
    for _ in range(n_rows):
        rows.append(dict(
            label=int(rng.integers(0, 2)),
            num=rng.choice(["", "0", "2", "2.5", " 3 ", "1e3", "-7", "nan", "NaN", "0.1",
                            "123456.75", '"4"']),
            cat=rng.choice(words), cat2=rng.choice(words),
            other=rng.choice(["p", "q"])))
    lines = ["label,num,cat,other,cat2"]
    for r in rows:
        def q(v):
            return f'"{v.replace(chr(34), chr(34) * 2)}"' if ("," in v or '"' in v) else v
        lines.append(f"{r['label']},{r['num']},{q(r['cat'])},{r['other']},{q(r['cat2'])}")
        if rng.random() < 0.05:
            lines.append("")
    sep = "\r\n" if crlf else "\n"
    df = pd.DataFrame(rows)
    num = df.num.str.strip().str.strip('"').replace("", None)
    df["num"] = num.astype(float)
    df[["cat", "cat2"]] = df[["cat", "cat2"]].replace(["nan", " -NaN "], None).astype("string")
    return sep.join(lines) + sep, df


@pytest.mark.parametrize("mode", ["log_bucket", "value"])
@pytest.mark.parametrize("crlf", [False, True])
def test_encoding_kernel_equals_transform(tmp_path, mode, crlf):
    """The kernel that encodes CSV blocks gives HashingEncoder.transform's rows exactly."""
    rng = np.random.default_rng(int(crlf) + 2 * (mode == "value"))
    text, df = _random_csv(rng, 700, crlf)
    path = _write(tmp_path / "t.csv", text)
    enc = HashingEncoder(numeric=["num"], categorical=["cat", "cat2"], numeric_mode=mode,
                         crosses=[("cat", "cat2"), ("num", "cat")], n_features=2**12, seed=5)
    X, y = _compute(*read_ctr(path, enc, label="label", blocksize=3000))
    want = enc.transform(df)
    assert X.shape == want.shape and (X != want).nnz == 0
    np.testing.assert_array_equal(X.indptr, want.indptr)
    np.testing.assert_array_equal(y, df.label.to_numpy(float))
    assert X.has_canonical_format and X.indices.dtype == np.int32


def test_numbers_beyond_the_fast_parser_take_the_exact_path(tmp_path):
    """20 significant digits: the block is encoded through pyarrow, with the same rows."""
    enc = HashingEncoder(numeric=["v"], categorical=["c"], n_features=2**16)
    text = "y,v,c\n1,2.5,a\n0,7.0000000000000000001,b\n1,,a\n"
    X, y = _compute(*read_ctr(_write(tmp_path / "slow.csv", text), enc, label="y"))
    df = pd.DataFrame({"y": [1, 0, 1], "v": [2.5, 7.0000000000000000001, None],
                       "c": ["a", "b", "a"]})
    assert (X != enc.transform(df)).nnz == 0 and y.tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("mode", ["log_bucket", "value"])
def test_short_integers_and_line_ends_equal_transform(tmp_path, mode):
    """Digit strings of 1 to 8 digits take the kernel's branch-free integer parse (and, below
    1024, a table of buckets), the others the general parser; fields end on a separator, a
    newline, CRLF or the end of the bytes, closer to it than a word of 8 bytes or not."""
    rng = np.random.default_rng(7)
    numbers = ["0", "7", "1023", "1024", "1025", "00042", "12345678", "99999999", "100000000",
               "123456789012", "-5", "+3", " 8", "8 ", "3.0", "1e2", "", "0000000000001"]
    cats = ["", "a", "abcdefg", "abcdefgh", "abcdefghi", "x" * 17]
    rows = [dict(y=int(rng.integers(0, 2)), n=rng.choice(numbers), c=rng.choice(cats),
                 m=rng.choice(numbers)) for _ in range(300)]
    ends = rng.choice(["\n", "\r\n"], len(rows))
    text = "y,n,c,m\n" + "".join(f"{r['y']},{r['n']},{r['c']},{r['m']}{e}"
                                  for r, e in zip(rows, ends))
    df = pd.DataFrame(rows)
    for col in ("n", "m"):
        df[col] = df[col].str.strip().replace("", None).astype(float)
    df["c"] = df["c"].astype("string")
    enc = HashingEncoder(numeric=["n", "m"], categorical=["c"], numeric_mode=mode,
                         crosses=[("n", "c")], n_features=2**16, seed=3)
    want = enc.transform(df)
    for tail in ("", "\n"):  # the last line without or with its newline
        body = text.rstrip("\r\n") + tail
        for blocksize in (None, 997):
            X, y = _compute(*read_ctr(_write(tmp_path / "ints.csv", body), enc, label="y",
                                      blocksize=blocksize))
            assert (X != want).nnz == 0 and X.has_canonical_format
            np.testing.assert_array_equal(X.indptr, want.indptr)
            np.testing.assert_array_equal(y, df.y.to_numpy(float))


@pytest.mark.parametrize("extra", [b"0,5,b\n0,6,c\n", b""])
def test_file_changed_after_it_was_opened(tmp_path, extra):
    """More rows than the first pass counted (the kernel stops at the arrays' end; the block
    ends at the first line end after its bytes then), or fewer."""
    path = tmp_path / "grown.csv"
    head, rows = b"y,n,c\n", b"1,2,a\n" * 50
    path.write_bytes(head + rows)
    X, y = read_ctr(path, label="y", n_features=64)
    path.write_bytes(head + (rows + extra if extra else rows[:-12]))
    want = 51 if extra else 48
    with pytest.raises(ValueError, match=rf"grown\.csv: {want} rows after line 0, 50 when the "
                                         r"file was opened; did it change since\?"):
        _compute(X, y)


# -- columns told apart -------------------------------------------------------------------------
def test_columns_are_inferred_from_the_header_and_values(tmp_path):
    text = ("id,click,price,zip,city,empty\n"
            "1,1,3.5,0421,Oslo,\n2,0,,1200,Lima,\n3,1,nan,0421,,\n")
    path = _write(tmp_path / "log.csv", text)
    enc = infer_encoder(path, label="click", exclude=["id"])
    assert enc.numeric == ("price", "zip") and enc.categorical == ("city", "empty")
    enc2 = infer_encoder(path, label="click", categorical=["zip", "id"],
                         crosses=[("city", "zip")], n_features=2**10)
    assert enc2.numeric == ("price",) and enc2.categorical == ("id", "zip", "city", "empty")
    X, y = _compute(*read_ctr(path, label="click", exclude=["id"], n_features=2**10))
    assert X.shape == (3, 2**10) and y.tolist() == [1.0, 0.0, 1.0]
    assert (X != HashingEncoder(numeric=("price", "zip"), categorical=("city", "empty"),
                                n_features=2**10).transform(pd.read_csv(path))).nnz == 0
    # rows 2 and 3 share a missing price (empty and nan): the same price feature
    with pytest.raises(ValueError, match=r"label column 'clack' is not among"):
        read_ctr(path, label="clack")
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not among"):
        read_ctr(path, label="click", categorical=["nope"])
    with pytest.raises(ValueError, match="either an encoder"):
        read_ctr(path, enc, label="click", exclude=["id"])


def test_criteo_header_keeps_the_criteo_encoder(data):
    tiny = data / "ctr_criteo" / "train.tiny.csv"
    assert infer_encoder(tiny) == HashingEncoder.criteo()
    enc = infer_encoder(tiny, exclude=["Id", "C3"])
    assert "C3" not in enc.columns and "Id" not in enc.columns and len(enc.columns) == 38


def test_crosses_add_one_feature_per_pair_and_round_trip_json():
    enc = HashingEncoder(numeric=["n"], categorical=["a", "b"], crosses=[("a", "b"), ("n", "b")],
                         n_features=2**30)
    df = pd.DataFrame({"n": [1.0, 1.0, 1.0], "a": ["x", "x", "y"], "b": ["p", "q", "p"]})
    X = enc.transform(df)
    assert (np.diff(X.indptr) == 5).all()
    plain = HashingEncoder(numeric=["n"], categorical=["a", "b"], n_features=2**30)
    P = plain.transform(df)
    extra = [set(X[i].indices) - set(P[i].indices) for i in range(3)]
    assert all(len(e) == 2 for e in extra)
    assert len(extra[0] & extra[1]) == 0  # (x, p) and (1, p) against (x, q) and (1, q)
    assert len(extra[0] & extra[2]) == 1  # the (n, b) cross (1, p) is shared
    assert HashingEncoder.from_json(enc.to_json()) == enc
    with pytest.raises(ValueError, match="listed twice"):
        HashingEncoder(categorical=["a", "b"], crosses=[("a", "b"), ("b", "a")])
    with pytest.raises(ValueError, match="'c' is not a listed column"):
        HashingEncoder(categorical=["a", "b"], crosses=[("a", "c")])
    with pytest.raises(ValueError, match="must pair two different columns"):
        HashingEncoder(categorical=["a", "b"], crosses=[("a", "a")])


def test_parquet_files_are_read_by_row_group(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"click": rng.integers(0, 2, 900).astype(np.int8),
                       "count": pd.array(rng.integers(0, 50, 900), dtype="Int64"),
                       "site": rng.choice(["a", "b", None], 900),
                       "flag": rng.random(900) < 0.5})
    df.loc[::7, "count"] = pd.NA
    (tmp_path / "pq").mkdir()
    for i in range(2):
        pq.write_table(pa.Table.from_pandas(df.iloc[450 * i: 450 * (i + 1)],
                                            preserve_index=False),
                       tmp_path / "pq" / f"part{i}.parquet", row_group_size=200)
    X, y = read_ctr(str(tmp_path / "pq" / "*.parquet"), label="click", n_features=2**12)
    assert X.chunks[0] == (200, 200, 50, 200, 200, 50)
    X, y = _compute(X, y)
    enc = infer_encoder(str(tmp_path / "pq" / "*.parquet"), label="click", n_features=2**12)
    assert enc.numeric == ("count",) and enc.categorical == ("site", "flag")
    assert (X != enc.transform(df)).nnz == 0 and np.array_equal(y, df.click.to_numpy(float))


# -- the one rule for missing values and infinities -----------------------------------------------
def test_nan_text_is_missing_in_a_csv_feature_column(tmp_path):
    enc = HashingEncoder(numeric=["n"], categorical=["c"], n_features=2**20)
    text = "y,n,c\n1,,a\n1,nan,a\n1,NaN,a\n1,-nan,a\n1,2,a\n"
    X, _ = _compute(*read_ctr(_write(tmp_path / "m.csv", text), enc, label="y"))
    for r in (1, 2, 3):
        assert (X[r] != X[0]).nnz == 0
    assert (X[4] != X[0]).nnz > 0


def test_infinite_values_are_refused_naming_row_and_column(tmp_path):
    df = pd.DataFrame({"y": [1.0, 0.0, 1.0], "n": [1.0, np.nan, -np.inf], "c": ["a", "b", "c"]})
    enc = HashingEncoder(numeric=["n"], categorical=["c"])
    X, y = encode_ctr(df, enc, label="y")
    with pytest.raises(ValueError, match=r"partition 0: column 'n', row 3: -inf is not a "
                                         r"finite number"):
        _compute(X, y)
    df.loc[2, "n"] = 4.0
    _compute(*encode_ctr(df, enc, label="y"))  # NaN alone is a missing value
    df.loc[1, "y"] = np.inf
    with pytest.raises(ValueError, match=r"partition 0: label column 'y' is empty or not a "
                                         r"finite number in row 2"):
        _compute(*encode_ctr(df, enc, label="y"))
    path = tmp_path / "inf.parquet"
    pq.write_table(pa.table({"y": [1.0, 0.0], "n": [np.inf, 1.0], "c": ["a", "b"]}), path)
    X, y = read_ctr(path, enc, label="y")
    with pytest.raises(ValueError, match=r"inf\.parquet, row group 1: column 'n', row 1: inf"):
        _compute(X, y)


def test_numbers_beyond_int64_or_float32_are_bucketed_or_named(tmp_path):
    """±1e308 (finite) in a log-bucketed column: every number below -2**63 has the lowest
    bucket, in the kernel and in transform alike, without numpy's "invalid value encountered
    in cast" (an error under this suite's filterwarnings). In "value" mode a number that
    float32 cannot hold is refused, naming the line (CSV) or the row and column."""
    path = tmp_path / "huge.csv"
    path.write_bytes(b"click,price\n1,-1e308\n0,-1e19\n1,1e308\n0,-20000000000000000000\n")
    enc = HashingEncoder(numeric=["price"])
    X, _ = _compute(*read_ctr(path, enc, label="click"))
    T = enc.transform(pa.table({"price": [-1e308, -1e19, 1e308, -2e19]}))
    assert (X != T).nnz == 0 and X.nnz == 4
    assert X.indices[0] == X.indices[1] == X.indices[3] != X.indices[2]
    value = HashingEncoder(numeric=["price"], numeric_mode="value")
    with pytest.raises(ValueError) as info:
        _compute(*read_ctr(path, value, label="click"))
    too_large = "is too large for float32 (X's dtype); scale the column, or read with " \
                "dtype=numpy.float64"
    assert str(info.value) == f"{path}, line 2: column 'price': -1e+308 {too_large}"
    df = pd.DataFrame({"click": [1, 0], "price": [2.0, 1e300]})
    with pytest.raises(ValueError) as info:
        _compute(*encode_ctr(df, value, label="click"))
    assert str(info.value) == f"partition 0: column 'price', row 2: 1e+300 {too_large}"
    X64, _ = _compute(*read_ctr(path, value, label="click", dtype=np.float64))
    assert X64.data.tolist() == [-1e308, -1e19, 1e308, -2e19]


def test_nan_value_in_libsvm_is_an_absent_pair(tmp_path):
    path = _write(tmp_path / "m.svm", "1 1:0.5 2:nan 3:2\n0 2:NaN\n1 3:-nan 1:1\n")
    X, y = _compute(*read_libsvm(path, n_features=3))
    assert X.toarray().tolist() == [[0.5, 0.0, 2.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    assert X.nnz == 3 and y.tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match=r"m2\.svm, line 2: value is not a finite number: "
                                         r"'2:inf'"):
        read_libsvm(_write(tmp_path / "m2.svm", "1 1:1\n0 2:inf\n"))
    with pytest.raises(ValueError, match=r"m3\.svm, line 1: label is not a finite number: "
                                         r"'nan'"):
        read_libsvm(_write(tmp_path / "m3.svm", "nan 1:1\n"))


def test_a_tab_separated_file_read_as_csv_names_the_delimiter(tmp_path):
    from dask_ps.io._frame import read_frame

    path = tmp_path / "t.tsv"
    path.write_text("y\ta\tb\n0\t1.5\t2\n1\t0.3\t1\n")
    hint = (r"one column, 'y\\ta\\tb', read with the delimiter ',': .* is that the "
            r"delimiter\? \(use sep='\\t'\)$")  # Python's words: no "--sep" of dask-ps
    with pytest.raises(ValueError, match=hint):
        read_frame(str(path))
    with pytest.raises(ValueError, match=hint):
        read_ctr(str(path), label="y")
    with pytest.raises(ValueError, match=hint):  # said "columns ['y', 'a'] are not among"
        read_ctr(str(path), HashingEncoder(numeric=["a"], categorical=["b"]), label="y")
    frame, label = read_frame(str(path), sep="\t")
    assert label == "y" and list(frame.columns) == ["y", "a", "b"]
    parquet = tmp_path / "t.parquet"
    pd.DataFrame({"y": [0, 1], "a": [1.5, 0.3]}).to_parquet(parquet)
    with pytest.raises(ValueError, match=r"t\.parquet: its first line is not delimited text "
                                         r".*\(e\.g\. Parquet: use format='parquet'\)"):
        read_ctr(str(parquet), label="y", format="csv")


def test_columns_named_twice_are_refused_naming_file_and_column(tmp_path):
    """A header 'click,price,click,shop' took the label from the second 'click', and
    'shop,shop' dropped one column, silently; Parquet raised pyarrow's KeyError. Now both
    formats refuse them, with or without an encoder, as GBDT's reader does."""
    from dask_ps.io._frame import read_frame
    from dask_ps.io.parquet import read_table_parquet

    label = _write(tmp_path / "dup.csv", "click,price,click,shop\n1,1,0,a\n0,2,1,a\n")
    feature = _write(tmp_path / "dup2.csv", "click,price,shop,shop\n1,1,a,x\n1,1,b,x\n")
    enc = HashingEncoder(numeric=["price"], categorical=["shop"], n_features=64)
    for path, twice in [(label, "click"), (feature, "shop")]:
        message = rf"{path}: columns named twice: \['{twice}'\] \(columns: "
        with pytest.raises(ValueError, match=message):
            read_ctr(path, label="click", n_features=64)
        with pytest.raises(ValueError, match=message):
            read_ctr(path, enc, label="click")
        with pytest.raises(ValueError, match=message):
            read_frame(str(path), "click")  # GBDT's reader: the same check, the same words
    pq_path = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([1, 0]), pa.array(["a", "b"]),
                                         pa.array(["x", "y"])], names=["click", "shop", "shop"]),
                   pq_path)
    message = rf"{pq_path}: columns named twice: \['shop'\] \(columns: \['click', 'shop', 'shop'\]"
    with pytest.raises(ValueError, match=message):
        read_ctr(pq_path, label="click")
    with pytest.raises(ValueError, match=message):
        read_ctr(pq_path, HashingEncoder(categorical=["shop"]), label="click")
    with pytest.raises(ValueError, match=message):
        read_table_parquet(str(pq_path), "click", categorical=["shop"])


LONE_CR = ("cannot parse the line; it holds a lone CR (\\r): lines must end in LF or CRLF, "
           "not CR alone (convert the file, e.g. tr '\\r' '\\n')")
OPEN_QUOTE = ("a quoted field opens on it and does not close: quoted fields must not contain "
              "newlines")


@pytest.mark.parametrize("text, categorical, line, reason", [
    # a quoted field across lines, which pyarrow took whole into a text column
    ('y,a,b\n0,"x\ny",1\n1,2,3\n', ["a"], 2, f"expected 3 fields, got 2; {OPEN_QUOTE}"),
    ('y,a,b\n0,1,"x\ny"\n1,2,z\n', ["b"], 2, f"cannot parse the line; {OPEN_QUOTE}"),
    ('y,a,b\n0,1,x\n1,2,"y\n', ["b"], 3, f"cannot parse the line; {OPEN_QUOTE}"),
    # a lone CR, where pyarrow ended a row: one line, two rows
    ("y,a,b\n0,1,2\n1,2,3\r0,4,5\n0,5,6\n", [], 3, LONE_CR),
    ("y,a,b\r\n0,1,2\r\n1,2,3\r0,4,5\r\n0,5,6\r\n", ["a"], 3, LONE_CR),
    ("y,a,b\n0,1,2\n1,2\r3,4\n0,5,6\n", [], 3, LONE_CR),  # said "expected 3 fields, got 2"
    ("y,a,b\n0,1,2\n1,2,3\r0,4,5\n0,x,6\n", [], 3, LONE_CR),  # said line 6 for line 5
])
def test_gbdt_reader_names_a_quoted_newline_or_a_lone_cr_as_read_ctr(tmp_path, text,
                                                                    categorical, line, reason):
    """GBDT's reader (``read_frame``, ``dask-ps train gbdt --format csv``) read a quoted
    field across lines into a text column, and a line holding a lone CR as two rows,
    silently (or named the wrong line, without the cause); now it names them as read_ctr."""
    from dask_ps.io._frame import read_frame

    path = _write(tmp_path / "t.csv", text)
    message = f"{path}, line {line}: {reason}"
    for classes in (True, False):
        with pytest.raises(ValueError) as info:
            read_frame(str(path), "y", categorical=categorical, classes=classes)[0].compute()
        assert str(info.value) == message
    with pytest.raises(ValueError) as info:
        _compute(*read_ctr(path, label="y", n_features=64))
    assert str(info.value) == message


def test_gbdt_reader_names_a_lone_cr_or_quoted_newline_past_its_sample(tmp_path):
    """Past the first MiB (its sample) the lines are checked block by block, when the
    frame is computed; CRLF line ends, quoted fields and a last CR without LF are lines."""
    from dask_ps.io._csv import SAMPLE_BYTES
    from dask_ps.io._frame import read_frame

    n = SAMPLE_BYTES // 10
    rows = [f'{i % 2},{i}.5,"s,{i % 7}"' for i in range(n)]
    good = _write(tmp_path / "good.csv", "y,a,b\r\n" + "\r\n".join(rows) + "\r")
    frame, _ = read_frame(str(good), "y", categorical=["b"], blocksize="256KiB")
    got = frame.compute()
    assert frame.npartitions > 4 and len(got) == n and got["b"].iloc[-1] == f"s,{(n - 1) % 7}"
    for bad, reason in [(f'1,2.5,"s\n{n}"', f"cannot parse the line; {OPEN_QUOTE}"),
                        ("1,2.5,s\r0,3.5,t", LONE_CR)]:
        path = _write(tmp_path / "bad.csv", "y,a,b\n" + "\n".join(rows[:-3] + [bad]
                                                                     + rows[-2:]) + "\n")
        frame, _ = read_frame(str(path), "y", categorical=["b"], blocksize="256KiB")
        with pytest.raises(ValueError) as info:
            frame.compute()
        assert str(info.value) == f"{path}, line {n - 1}: {reason}"


@pytest.mark.parametrize("sep", [";;", "", "\\t", 9])
def test_a_separator_of_other_than_one_character_is_refused(tmp_path, sep):
    """read_ctr(sep=';;') raised csv's TypeError "delimiter must be a 1-character string"."""
    from dask_ps.io import read_ratings
    from dask_ps.io._frame import read_frame

    path = _write(tmp_path / "t.csv", "y,a\n1,2\n0,3\n")
    message = (r"sep must be one character, such as ',' or '\\t' \(a tab\), got "
               + re.escape(repr(sep)) + "$")
    for call in (lambda: read_ctr(path, label="y", sep=sep),
                 lambda: infer_encoder(path, label="y", sep=sep),
                 lambda: read_frame(str(path), "y", sep=sep),
                 lambda: read_ratings(str(path), sep=sep)):
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("sep, message", [
    ('"', r"""sep cannot be '"': it quotes fields \("a,b" is one field\)"""),
    ("\n", r"sep cannot be '\\n': it ends lines \(one line is one row\)$"),
    ("\r", r"sep cannot be '\\r': it ends lines"),
    ("é", r"sep must be an ASCII character \(the files are split on one byte, and 'é' takes "
          r"2 in UTF-8\), got 'é'$")])
def test_a_one_character_separator_that_cannot_be_says_why(tmp_path, sep, message):
    """Each was refused as "sep must be one character", though it is one."""
    path = _write(tmp_path / "t.csv", "y,a\n1,2\n0,3\n")
    with pytest.raises(ValueError, match=message):
        read_ctr(path, label="y", sep=sep)


# -- guessing the columns' types ------------------------------------------------------------------
def test_a_glob_whose_first_files_hold_a_header_alone_guesses_from_rows(tmp_path):
    """A header-only first file (a quiet hour) made every column categorical."""
    (tmp_path / "logs").mkdir()
    _write(tmp_path / "logs" / "00.csv", "click,price,shop\n")
    _write(tmp_path / "logs" / "01.csv", "click,price,shop")  # not even a newline
    _write(tmp_path / "logs" / "02.csv",
           "click,price,shop\n" + "".join(f"{i % 2},{i * 0.5},s{i % 7}\n" for i in range(50)))
    enc = infer_encoder(str(tmp_path / "logs" / "*.csv"), label="click", n_features=2**12)
    assert enc.numeric == ("price",) and enc.categorical == ("shop",)
    X, y = _compute(*read_ctr(str(tmp_path / "logs" / "*.csv"), label="click",
                              n_features=2**12))
    assert X.shape == (50, 2**12)
    assert (X != enc.transform(pd.read_csv(tmp_path / "logs" / "02.csv"))).nnz == 0


def test_a_byte_that_is_not_utf8_makes_only_its_own_column_categorical(tmp_path):
    """One latin-1 'é' in the first MiB made every column categorical (each price its own
    category: 1000 rows gave 1007 distinct features)."""
    rows = [f"{i % 2},{i * 0.5},shop{i % 7}\n".encode() for i in range(1000)]
    rows[500] = "1,3.5,caf\xe9\n".encode("latin-1")
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"click,price,shop\n" + b"".join(rows))
    enc = infer_encoder(path, label="click", n_features=2**16)
    assert enc.numeric == ("price",) and enc.categorical == ("shop",)
    X, _ = _compute(*read_ctr(path, label="click", n_features=2**16))
    assert len(set(X.indices.tolist())) < 100  # price buckets and 8 shops, not 1000 prices


def test_a_bad_line_in_the_sample_leaves_the_lines_before_it_to_guess_from(tmp_path):
    path = _write(tmp_path / "t.csv", "y,n,c\n1,2.5,a\n0,3,b\n1,4,c,extra\n")
    enc = infer_encoder(path, label="y")
    assert enc.numeric == ("n",) and enc.categorical == ("c",)
    with pytest.raises(ValueError, match=r"t\.csv, line 4: expected 3 fields, got 4"):
        _compute(*read_ctr(path, label="y"))


def test_spaces_after_the_commas_of_the_header_and_the_numbers(tmp_path):
    """`click, price, shop`: ' price' was guessed categorical and --numeric price said the
    column is not among [' price', ...]."""
    text = "click, price, shop\n1, 1.5, a\n0, 2, b\n1, , a\n1,\tnan , c\n"
    path = _write(tmp_path / "s.csv", text)
    enc = infer_encoder(path, label="click", n_features=2**12)
    assert enc.numeric == ("price",) and enc.categorical == ("shop",)
    X, y = _compute(*read_ctr(path, label="click", numeric="price", n_features=2**12))
    assert y.tolist() == [1.0, 0.0, 1.0, 1.0]
    df = pd.DataFrame({"price": [1.5, 2.0, None, None], "shop": [" a", " b", " a", " c"]})
    assert (X != enc.transform(df)).nnz == 0
    with pytest.raises(ValueError, match=r"columns \['city'\] are not among \['click', "
                                         r"'price', 'shop'\]"):
        read_ctr(path, label="click", numeric="city")


# -- argument shapes ------------------------------------------------------------------------------
def test_a_single_string_is_one_column_and_one_pair_one_cross(tmp_path):
    text = "click,price,shop,city\n" + "".join(f"{i % 2},{i},s{i % 7},c{i % 3}\n"
                                               for i in range(30))
    path = _write(tmp_path / "g.csv", text)
    full = dict(label="click", numeric=["price"], categorical=["shop"], exclude=["city"],
                crosses=[("shop", "price")], n_features=2**12)
    want = infer_encoder(path, **full)
    got = infer_encoder(path, label="click", numeric="price", categorical="shop",
                        exclude="city", crosses=("shop", "price"), n_features=2**12)
    assert got == want and want.crosses == (("shop", "price"),)
    X, _ = _compute(*read_ctr(path, label="click", numeric="price", exclude="city",
                              crosses=("shop", "price"), n_features=2**12))
    assert (X != _compute(*read_ctr(path, **{**full, "categorical": None}))[0]).nnz == 0
    with pytest.raises(ValueError, match=r"g\.csv: cross \('shop', 'citty'\): column 'citty' "
                                         r"is not among \['click', 'price', 'shop', 'city'\]"):
        read_ctr(path, label="click", crosses=[("shop", "citty")])
    frame = pd.read_csv(path)
    X2, _ = _compute(*encode_ctr(frame, label="click", numeric="price", exclude="city",
                                 crosses=("shop", "price"), n_features=2**12))
    assert (X2 != X).nnz == 0


# -- NaN in categorical text ----------------------------------------------------------------------
@pytest.mark.parametrize("slow", [False, True])
def test_nan_in_a_categorical_csv_field_is_missing_as_a_parquet_null(tmp_path, slow):
    """'NaN' and 'nan' in a categorical CSV field were categories of their own, while a
    Parquet null is the missing feature; both encoding paths (the kernel, and pyarrow for a
    block holding a number beyond the kernel's exact parser) now agree with Parquet."""
    shops = ["a", "", "NaN", "nan", '"nan"', " -NAN ", "nana", "b"]
    price = "7.0000000000000000001" if slow else "7"
    text = "click,price,shop\n" + "".join(f"{i % 2},{price},{s}\n" for i, s in enumerate(shops))
    csv_path = _write(tmp_path / "t.csv", text)
    df = pd.DataFrame({"click": [i % 2 for i in range(len(shops))],
                       "price": [float(price)] * len(shops),
                       "shop": ["a", None, None, None, None, None, "nana", "b"]})
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "t.parquet")
    enc = HashingEncoder(numeric="price", categorical="shop", n_features=2**16)
    X, _ = _compute(*read_ctr(csv_path, enc, label="click"))
    P, _ = _compute(*read_ctr(tmp_path / "t.parquet", enc, label="click"))
    assert (X != P).nnz == 0
    assert all((X[r] != X[1]).nnz == 0 for r in range(1, 6))
    assert (X[6] != X[1]).nnz > 0 and (X[0] != X[1]).nnz > 0


@pytest.mark.parametrize("name, values", [
    ("tags", pa.array([["a", "b"], ["c"]] * 3)),
    ("geo", pa.array([{"lat": 1.0}] * 6)),
    ("attrs", pa.array([[("k", 1)]] * 6, type=pa.map_(pa.string(), pa.int64()))),
])
def test_parquet_list_struct_map_columns_are_refused_from_the_schema(tmp_path, monkeypatch,
                                                                     name, values):
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"click": [0, 1] * 3, "price": [0.5] * 6, "shop": list("abcabc"),
                             name: values}), path)
    reads = []
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, *a, **k: reads.append(a) or 1 / 0)
    typ = pq.read_schema(path).field(name).type
    with pytest.raises(ValueError, match=re.escape(
            f"{path}: column {name!r} is {typ}: a list, struct or map column cannot be "
            f"a feature; leave it out (use exclude=[{name!r}])")):
        read_ctr(path, label="click")
    enc = HashingEncoder(numeric=("price", name), n_features=64)
    with pytest.raises(ValueError, match=f"column {name!r} is "):  # a given encoder too
        read_ctr(path, enc, label="click")
    assert reads == []  # refused before any row was read
    monkeypatch.undo()
    X, y = _compute(*read_ctr(path, label="click", exclude=[name], n_features=64))
    assert X.shape == (6, 64) and X.nnz == 12 and y.tolist() == [0, 1] * 3


def test_a_parquet_table_text_column_is_advised_in_python_parameters(tmp_path):
    """read_table_parquet (dask-ps train gbdt's reader) refused a text feature column with
    "name it in --categorical", the command line's option; now categorical=, every text
    column added to those given."""
    from dask_ps.io.parquet import read_table_parquet

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"y": [0.0, 1.0], "c": ["x", "y"], "shop": ["a", "b"],
                             "n": [1.0, 2.0], "city": ["p", "q"]}), path)
    with pytest.raises(ValueError) as info:
        read_table_parquet(path, "y")
    assert str(info.value) == f"{path}: column 'c' is not numeric (string), nor are ['shop', " \
                              f"'city']; use categorical=['c', 'shop', 'city']"
    with pytest.raises(ValueError) as info:
        read_table_parquet(path, "y", categorical=("c", "shop"))
    assert str(info.value) == f"{path}: column 'city' is not numeric (string); use " \
                              f"categorical=['c', 'shop', 'city']"
    frame, _ = read_table_parquet(path, "y", categorical=["c", "shop", "city"])
    assert frame.compute().shape == (2, 5)


def test_parquet_binary_columns_hash_as_their_bytes(tmp_path):
    """Binary values are hashed as bytes: UTF-8 bytes as the same text, others too."""
    raw = [b"Oslo", b"\xff\x00", None, b"Oslo"]
    for typ in (pa.binary(), pa.large_binary()):
        pq.write_table(pa.table({"click": [0, 1, 0, 1], "city": pa.array(raw, typ)}),
                       tmp_path / "b.parquet")
        pq.write_table(pa.table({"click": [0, 1, 0, 1],
                                 "city": ["Oslo", "other", None, "Oslo"]}),
                       tmp_path / "s.parquet")
        Xb, _ = _compute(*read_ctr(tmp_path / "b.parquet", label="click", n_features=2**20))
        Xs, _ = _compute(*read_ctr(tmp_path / "s.parquet", label="click", n_features=2**20))
        assert (Xb[0] != Xs[0]).nnz == 0 and (Xb[2] != Xs[2]).nnz == 0  # "Oslo", missing
        assert (Xb[1] != Xs[1]).nnz and (Xb[1] != Xb[0]).nnz and (Xb[0] != Xb[3]).nnz == 0


def test_parquet_integers_beyond_2_53_are_numbers_as_in_a_csv(tmp_path):
    """An int64/uint64 numeric column (hashed ids) beyond 2^53 reads as a CSV of the same
    values reads (rounded to float64); arrow's safe cast refused it as 'not numbers'."""
    big = [2**53 + 1, 5, 2**62 + 3, 7]
    csv = tmp_path / "t.csv"
    csv.write_text("click,uid\n" + "".join(f"{c},{v}\n" for c, v in zip([0, 1, 0, 1], big)))
    Xc, yc = _compute(*read_ctr(csv, label="click", numeric=["uid"], n_features=2**20))
    for typ in (pa.int64(), pa.uint64()):
        pq.write_table(pa.table({"click": [0, 1, 0, 1], "uid": pa.array(big, typ)}),
                       tmp_path / "t.parquet")
        Xp, yp = _compute(*read_ctr(tmp_path / "t.parquet", label="click", numeric=["uid"],
                                    n_features=2**20))
        assert (Xp != Xc).nnz == 0 and yp.tolist() == yc.tolist() == [0, 1, 0, 1]
    pq.write_table(pa.table({"click": [0, 1], "uid": pa.array([2**64 - 1, 1], pa.uint64())}),
                   tmp_path / "t.parquet")
    Xp, _ = _compute(*read_ctr(tmp_path / "t.parquet", label="click", numeric=["uid"],
                               n_features=2**20))
    assert Xp.shape == (2, 2**20) and Xp.nnz == 2
