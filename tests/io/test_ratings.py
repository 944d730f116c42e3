"""read_ratings / encode_ratings / IdMapping."""

from __future__ import annotations

import doctest

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dask_ps.io.ratings as ratings_module
from dask_ps.io import IdMapping, encode_ratings, read_ratings


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture
def udata(data):
    return data / "mf_movielens100k" / "u.data"


def test_movielens_u_data(udata):
    df, users, items = read_ratings(udata, blocksize="256KiB")
    assert df.npartitions == 8
    assert len(users) == 943 and len(items) == 1682
    assert users.is_integer and users.ids.tolist() == list(range(1, 944))
    pdf = df.compute()
    assert list(pdf.columns) == ["user", "item", "rating", "timestamp"]
    assert pdf.shape == (100_000, 4)
    assert pdf["user"].dtype == np.int64 and pdf["rating"].dtype == np.float64
    assert pdf["rating"].value_counts().sort_index().tolist() == [6110, 11370, 27145, 34174,
                                                                    21201]
    ref = pd.read_csv(udata, sep="\t", names=["u", "i", "r", "t"])
    np.testing.assert_array_equal(users.ids_of(pdf["user"]), ref["u"])
    np.testing.assert_array_equal(items.ids_of(pdf["item"]), ref["i"])
    np.testing.assert_array_equal(pdf["timestamp"], ref["t"])
    assert (pdf["user"].min(), pdf["user"].max(), pdf["item"].max()) == (0, 942, 1681)


def test_the_mapping_is_global(udata, tmp_path):
    # the base and test folds share one mapping only when read together
    df, users, items = read_ratings(str(udata.parent / "u1.*"), blocksize="128KiB")
    assert len(users) == 943 and len(items) == 1682
    base, users_b, items_b = read_ratings(udata.parent / "u1.base")
    assert len(items_b) == 1650  # PROVENANCE.md


def test_string_ids_parquet_and_dataframes(tmp_path):
    pdf = pd.DataFrame({"who": ["bob", "al", "bob", "cy"], "what": [10, 2, 2, 7],
                        "stars": [4.5, 3.0, 1.0, 5.0]})
    pdf.to_parquet(tmp_path / "r.parquet")
    df, users, items = read_ratings(tmp_path / "r.parquet", user="who", item="what",
                                    rating="stars")
    assert users.ids.tolist() == ["al", "bob", "cy"] and items.ids.tolist() == [2, 7, 10]
    out = df.compute()
    assert out["user"].tolist() == [1, 0, 1, 2] and out["item"].tolist() == [2, 0, 0, 1]
    assert list(out.columns) == ["user", "item", "rating"]
    # the same from a dask dataframe in two partitions
    df2, users2, items2 = encode_ratings(dd.from_pandas(pdf, npartitions=2), user="who",
                                         item="what", rating="stars")
    assert users2 == users and items2 == items
    pd.testing.assert_frame_equal(df2.compute().reset_index(drop=True), out)
    # ids that are integers in one block and strings in another become strings
    path = tmp_path / "mixed.csv"
    path.write_text("u,i,r\n" + "1,5,1\n" * 30 + "x7,5,2\n")
    df, users, items = read_ratings(path, user="u", item="i", rating="r", header=True,
                                    blocksize=64)
    assert users.ids.tolist() == ["1", "x7"] and items.is_integer
    assert df.compute()["user"].tolist() == [0] * 30 + [1]


def test_errors_name_file_and_line(tmp_path):
    path = tmp_path / "r.tsv"
    for bad, reason in [("3\t\t4\t1", "column 'item' is empty"),
                        ("3\t4\tfive\t1", "column 'rating' (field 3): 'five' is not a "
                                           "finite number"),
                        ("3\t4\t5", "expected 4 fields, got 3"),
                        ("3\t4\t5\t1.5", "column 'timestamp' (field 4): 1.5 is not an "
                                         "integer (int64)"),
                        ("3\t4\t5\t1e30", "column 'timestamp' (field 4): 1e+30 is not an "
                                          "integer (int64)")]:
        lines = ["1\t2\t3\t100"] * 50
        lines[39] = bad
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError) as info:
            read_ratings(path, blocksize=100)
        assert str(info.value) == f"{path}, line 40: {reason}"
    with pytest.raises(ValueError, match=r"columns \['score'\] are not among"):
        read_ratings(path, rating="score", header=False, names=["user", "item", "r", "t"])
    # with a header, timestamps first: the line counts the header
    path.write_text("t,user,item,rating\n100,1,2,3\n\n7.25,1,3,4\n")
    with pytest.raises(ValueError) as info:
        read_ratings(path, sep=",", header=True, timestamp="t", blocksize=None)
    assert str(info.value) == f"{path}, line 4: column 't' (field 1): 7.25 is not an integer " \
                              f"(int64)"


def test_id_mapping():
    m = IdMapping(np.array([30, 10, 20]))
    assert m.codes([10, 30, 11]).tolist() == [0, 2, -1]
    # strings that are decimal integers are those integers (they were all unknown: a test
    # file with one id "bob" scored every user as unseen); others are unknown
    assert m.codes(["10", "010", "10.0", "-0", "bob", "12.5", " 10", "+10", "1e1", "0xa",
                    "99999999999999999999999", ""]).tolist() == [0, 0, 0, -1] + [-1] * 8
    assert IdMapping.from_json(m.to_json()) == m and m != IdMapping(["10", "20", "30"])
    with pytest.raises(ValueError, match="repeated id 'a'"):
        IdMapping(["a", "b", "a"])


def test_from_sorted_refuses_repeated_or_unsorted_ids():
    """from_sorted trusted its ids: a repeated one broke the hash lookup (pandas), an
    unsorted string one gave wrong codes silently (searchsorted)."""
    assert IdMapping.from_sorted(np.array([3, 8, 9])).codes([9, 3, 4]).tolist() == [2, 0, -1]
    assert IdMapping.from_sorted(np.array(["a", "b"])).codes(["b", "c"]).tolist() == [1, -1]
    assert len(IdMapping.from_sorted(np.zeros(0, np.int64))) == 0
    with pytest.raises(ValueError, match=r"^ids\[2\] = 3 repeats ids\[1\] = 3: the ids must "
                                         r"be sorted and distinct$"):
        IdMapping.from_sorted(np.array([1, 3, 3, 5]))
    with pytest.raises(ValueError, match=r"^user_ids_\[2\] = 'b' is smaller than "
                                         r"user_ids_\[1\] = 'c'"):
        IdMapping.from_sorted(np.array(["a", "c", "b"]), "user_ids_")


@pytest.mark.parametrize("ids, at, shown", [
    (["a", None, "b"], 1, "None"),
    ([1.0, np.nan, 2.0], 1, "nan"),
    (np.array(["a", "b", np.nan], dtype=object), 2, "nan"),
    (pd.array(["a", pd.NA], dtype="string"), 1, "<NA>"),
    (pd.Series([None, "x"], dtype=object), 0, "None"),
    (["a", np.nan], 1, "nan"),  # NumPy made a list of str and NaN strings: the id "nan"
    (pd.array([1, None], dtype="Int64"), 1, "<NA>"),
])
def test_id_mapping_refuses_missing_ids(ids, at, shown):
    """A missing id became the id "None", "nan" or "<NA>" (astype(str)); from_sorted raised
    a bare TypeError (None, pd.NA) or called a NaN smaller than its neighbour."""
    want = rf"^ids\[{at}\] is missing \({shown}\): an id must be a number or a string$"
    with pytest.raises(ValueError, match=want):
        IdMapping(ids)
    with pytest.raises(ValueError, match=want):
        IdMapping.from_sorted(np.asarray(ids, dtype=object))
    with pytest.raises(ValueError, match=r"^user_ids_\[0\] is missing \(None\)"):
        IdMapping.from_sorted(np.array([None]), "user_ids_")  # one id: no comparison
    with pytest.raises(ValueError, match=r"^ids\[1\] is missing \(nan\)"):
        IdMapping.from_sorted(np.array([1.0, np.nan, 3.0]))
    # the strings "None" and "nan" stay ids; numbers and strings mixed: as before
    assert IdMapping(["None", "nan"]).codes(["nan", "None"]).tolist() == [1, 0]
    with pytest.raises(TypeError, match="not supported"):
        IdMapping.from_sorted(np.array([1, "a"], dtype=object))


def test_missing_values_are_looked_up_as_unknown_ids():
    """A missing value looked up (None, NaN, pd.NA, NaT, a pyarrow null) matched the id
    "None", "nan", "<NA>" or "NaT" (astype(str)): now -1, as an id not in the mapping; the
    strings themselves keep their codes, and the other values of the lookup theirs."""
    m = IdMapping(["<NA>", "NaT", "None", "a", "nan"])
    as_strings = [["a", None, "None"], ["a", np.nan, "nan"], ["a", pd.NA, "<NA>"],
                  ["a", pd.NaT, "NaT"], np.array(["a", None, "None"], dtype=object),
                  pd.Series(["a", None, "None"]), pd.array(["a", None, "<NA>"], "string"),
                  pd.Categorical(["a", None, "nan"]), pa.array(["a", None, "None"]),
                  pa.chunked_array([["a"], [None, "None"]])]
    for values in as_strings:
        got = m.codes(values).tolist()
        assert got[:2] == [3, -1] and got[2] >= 0, (values, got)
    assert m.codes(np.array([None], dtype=object).reshape(1, 1)).tolist() == [[-1]]
    assert m.codes([np.nan, None]).tolist() == [-1, -1]
    assert m.codes(np.array(["NaT", "2020-01-01"], "datetime64[ns]")).tolist() == [-1, -1]
    big = IdMapping([f"u{k}" for k in range(100)] + ["None"])  # few values: the other path
    got = big.codes([None, "None", "u7"])
    assert got[0] == -1 and big.ids_of(got[1:]).tolist() == ["None", "u7"]
    # integer ids: a missing value is unknown, the ints beside it keep their codes
    ints = IdMapping([1, 2, 3])
    for values in ([3, None], pd.array([3, None], "Int64"), pd.Series([3, None], dtype="Int64"),
                   pa.array([3, None]), pa.chunked_array([[3], [None]])):
        assert ints.codes(values).tolist() == [2, -1], values
    assert ints.codes([1.0, np.nan]).tolist() == [-1, -1]  # floats match no int id: as before


def test_docstring_examples():
    result = doctest.testmod(ratings_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("first", ["", "\n\n"])  # blank lines before the first rating too
def test_a_headerless_file_without_timestamps_has_three_columns(tmp_path, first):
    path = tmp_path / "r.tsv"
    path.write_text(first + "u7\tm1\t4\nu3\tm1\t5\n\nu7\tm2\t1.5\n")
    df, users, items = read_ratings(path, blocksize=16)
    pdf = df.compute()
    assert list(pdf.columns) == ["user", "item", "rating"]
    assert pdf["user"].tolist() == [1, 0, 1] and pdf["item"].tolist() == [0, 0, 1]
    assert pdf["rating"].tolist() == [4.0, 5.0, 1.5]
    assert users.ids.tolist() == ["u3", "u7"]
    # comma-separated too
    csv = tmp_path / "r.csv"
    csv.write_text("1,10,2\n2,10,3\n")
    assert read_ratings(csv)[0].compute()["rating"].tolist() == [2.0, 3.0]


def test_a_headerless_file_mixing_three_and_four_fields_names_the_line(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("1\t2\t3\n" * 5 + "1\t2\t3\t100\n")
    with pytest.raises(ValueError) as info:
        read_ratings(path)
    assert str(info.value) == f"{path}, line 6: expected 3 fields, got 4"
    # a first line of 5 fields is not guessed: the default 4 columns are expected
    path.write_text("1\t2\t3\t100\t9\n")
    with pytest.raises(ValueError, match="line 1: expected 4 fields, got 5"):
        read_ratings(path)


def test_one_column_for_two_roles_is_refused(tmp_path):
    """user and item (or rating) naming one column trained a model of nothing without a
    word (dask-ps train mf --user-column u --item-column u exited 0)."""
    path = tmp_path / "r.csv"
    path.write_text("u,i,r\n1,2,3\n2,1,4\n")
    with pytest.raises(ValueError, match=rf"{path}: one column cannot be two of user, item "
                                         r"and rating: user='u', item='u'"):
        read_ratings(path, header=True, user="u", item="u", rating="r")
    with pytest.raises(ValueError, match=r"^one column cannot be two of user, item and "
                                         r"rating: user='u', rating='u'"):
        encode_ratings(pd.DataFrame({"u": [1], "i": [2], "r": [3.0]}), user="u", item="i",
                       rating="u")
    df, users, items = read_ratings(path, header=True, user="u", item="i", rating="r")
    assert len(users) == len(items) == 2


def test_dataframe_ids_follow_one_rule_naming_column_and_row():
    """A typed column (not text): integral floats are integers, 1.2 is refused (not every id
    made a string), and so are numbers and strings mixed, in one partition or across two; the
    row is counted in the whole dataframe."""
    pdf = pd.DataFrame({"user": [1.0, 2.0, 2.0, 3.0, 3.0, 4.0], "item": [1, 2, 3, 1, 2, 3],
                        "rating": [1.0, 2.0, 3.0, 4.0, 5.0, 1.0]})
    df, users, _ = encode_ratings(dd.from_pandas(pdf, npartitions=3))
    assert users.ids.tolist() == [1, 2, 3, 4] and users.is_integer
    assert df.compute()["user"].tolist() == [0, 1, 1, 2, 2, 3]
    bad = pdf.assign(user=[1.0, 2.0, 2.0, 3.0, 1.2, 4.0])
    with pytest.raises(ValueError, match="column 'user': id 1.2 at row 4 is not an integer"):
        encode_ratings(dd.from_pandas(bad, npartitions=3))
    with dask.config.set({"dataframe.convert-string": False}):
        mixed = pdf.assign(user=pd.Series([1, 2, 2, 3, "x", "x"], dtype=object))
        for n in (1, 3):  # in one partition, and across partitions
            with pytest.raises(ValueError, match="column 'user': ids mix numbers and strings: "
                                                 "1 at row 0 and 'x' at row 4"):
                encode_ratings(dd.from_pandas(mixed, npartitions=n))


def test_an_empty_timestamp_is_refused_naming_file_line_and_column(tmp_path):
    """An empty timestamp field (``1<TAB>2<TAB>3<TAB>``) was read as a missing value: a NaN
    in the int64 ``timestamp`` column, without a word, where an empty id or rating is
    refused. The column is optional as a whole (absent: no ``timestamp``), not per line."""
    path = tmp_path / "r.tsv"
    lines = ["1\t2\t3\t100"] * 50
    lines[39] = "3\t4\t5\t"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        read_ratings(path, blocksize=100)
    assert str(info.value) == f"{path}, line 40: column 'timestamp' is empty"
    # before a bad timestamp further down the same block, the first bad line is named
    lines[45] = "3\t4\t5\t1.5"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 40: column 'timestamp' is empty"):
        read_ratings(path, blocksize=None)
    lines[39], lines[30] = "1\t2\t3\t100", "3\t4\t5\t"
    with pytest.raises(ValueError, match="line 31: column 'timestamp' is empty"):
        path.write_text("\n".join(lines) + "\n")
        read_ratings(path, blocksize=None)
    # a header naming the column: the line counts the header
    path.write_text("t,user,item,rating\n100,1,2,3\n,1,3,4\n")
    with pytest.raises(ValueError) as info:
        read_ratings(path, sep=",", header=True, timestamp="t")
    assert str(info.value) == f"{path}, line 3: column 't' is empty"
    # a table (Parquet, a dataframe) with a missing timestamp: its column and row
    pdf = pd.DataFrame({"user": [1, 2, 3], "item": [4, 5, 6], "rating": [1.0, 2.0, 3.0],
                        "timestamp": pd.array([100, 101, None], dtype="Int64")})
    pdf.to_parquet(tmp_path / "r.parquet")
    with pytest.raises(ValueError, match=r"^column 'timestamp': missing timestamp at row 2$"):
        read_ratings(tmp_path / "r.parquet")
    with pytest.raises(ValueError, match=r"^column 'timestamp': missing timestamp at row 2$"):
        encode_ratings(dd.from_pandas(pdf, npartitions=2))
    pdf["timestamp"] = [100.0, 7.25, 3.0]
    with pytest.raises(ValueError, match=r"^column 'timestamp': timestamp 7.25 at row 1 is "
                                         r"not an integer \(int64\)$"):
        encode_ratings(pdf)
    pdf["timestamp"] = [100.0, 101.0, 3.0]  # whole floats are timestamps
    assert encode_ratings(pdf)[0].compute()["timestamp"].tolist() == [100, 101, 3]


def test_each_block_is_read_and_parsed_once_per_pass(tmp_path):
    """The first pass read (and parsed) every block three times, once per required column
    (user, item, rating); reading the ratings is once per block and pass: the scan, then
    the load when computed (counted by the io package's read counters)."""
    from dask_ps.io._blocks import source_reads

    path = tmp_path / "once.tsv"
    rng = np.random.default_rng(0)
    path.write_text("".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in zip(
        rng.integers(1, 50, 400), rng.integers(1, 80, 400), rng.integers(1, 6, 400),
        range(1000, 1400))))

    def reads() -> list:
        return sorted(n for (p, _), (n, _) in source_reads().items() if p == str(path))

    df, users, items = read_ratings(path, blocksize="1KiB")
    assert df.npartitions > 3 and reads() == [1] * df.npartitions
    assert df.compute().shape == (400, 4) and reads() == [2] * df.npartitions
    # an empty user, item or rating is still named, by its line, in one parse
    lines = path.read_text().splitlines()
    lines[70] = "\t".join(["3", "", "4", "1"])
    lines[90] = "\t".join(["", "3", "4", "1"])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"^.*, line 91: column 'user' is empty$"):
        read_ratings(path, blocksize=None)


def _reference(lines: list, col: int):
    """The ids of field ``col`` of each line as the original reader coded them: int64 when
    pyarrow casts every one from a string (an integral "1.0" as "1": 1.0 was the string id
    "1.0", now the id 1), else the strings; codes are ranks."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.array([line.split(",")[col] for line in lines])
    try:
        ids = pc.cast(pc.replace_substring_regex(text, r"\.0*$", ""), pa.int64()).to_numpy()
    except pa.ArrowInvalid:
        ids = np.asarray(text.to_pylist(), dtype=str)
    uniq = np.unique(ids)
    return uniq, np.searchsorted(uniq, ids)


@pytest.mark.parametrize("blocksize", [None, "64B"])
def test_integer_ids_come_as_int64_and_code_as_before(tmp_path, blocksize):
    """Integer ids go from pyarrow's parse to the lookup as int64 (no strings, no Python
    objects); a block with an id that is not an integer (or spaces, which pyarrow's
    integers take and its casts do not) is read as strings: the same codes and mappings."""
    big = 2**63 - 1
    plain = [f"{u},{i},{r}" for u, i, r in [
        (5, 10, 4), (-3, 10, 1.5), (big, 0, 2), (7, -(2**63), 5), (42, 10, 0.5)]]
    odd = plain + ["0,0x10,3", "007,0010,3", '5,"12",1']  # pyarrow's integers all
    cases = {"ints": odd, "a string id": plain + ["u9,10,3"],
             "a spaced id": plain + [" 8,10,3"], "an item 1.0": plain + ["8,1.0,3"]}
    cases["odd and strings"] = ["u9,x,3"] + odd  # in two blocks, "007" was "7" and coded -1
    for name, lines in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join(lines) + "\n")
        df, users, items = read_ratings(path, blocksize=blocksize)
        pdf = df.compute()
        for key, mapping, col in (("user", users, 0), ("item", items, 1)):
            uniq, codes = _reference([ln.replace('"', "") for ln in lines], col)
            assert mapping.ids.dtype.kind == uniq.dtype.kind, (name, key)
            np.testing.assert_array_equal(mapping.ids, uniq)
            np.testing.assert_array_equal(pdf[key], codes)
        np.testing.assert_array_equal(pdf["rating"], [float(ln.split(",")[2]) for ln in lines])
    # the parse behind it: int64 id columns, strings for a block with an id "u9"
    from fsspec.implementations.local import LocalFileSystem

    from dask_ps.io._blocks import plan

    fs = LocalFileSystem()
    reader = ratings_module._CSV(fs, ["user", "item", "rating"], {
        "user": pa.string(), "item": pa.string(), "rating": pa.float64()},
        {"user": "user", "item": "item", "rating": "rating", "timestamp": None}, ",", False)
    for name, kind in (("ints", pa.int64()), ("a string id", pa.string())):
        block = plan(fs, [str(tmp_path / f"{name}.csv")], None, None)[0]
        table = reader.table(block, 0)[0]
        assert table.column("user").type == kind and table.column("item").type == kind


def test_a_block_of_string_ids_is_parsed_once(tmp_path, monkeypatch):
    """A block whose first line has an id no integer has a byte of ("u7") goes to the string
    parse directly: it paid a failed int64 parse first (~1/3 of its scan's parse). A block
    the first line does not decide (hexadecimal "0x1f", a quote) keeps the int64 attempt."""
    from fsspec.implementations.local import LocalFileSystem

    from dask_ps.io import _csv
    from dask_ps.io._blocks import plan

    parses = []
    arrow_csv = _csv._arrow_csv
    monkeypatch.setattr(_csv, "_arrow_csv", lambda *a: parses.append(a[2]) or arrow_csv(*a))
    fs = LocalFileSystem()
    reader = ratings_module._CSV(fs, ["user", "item", "rating"], {
        "user": pa.string(), "item": pa.string(), "rating": pa.float64()},
        {"user": "user", "item": "item", "rating": "rating", "timestamp": None}, ",", False)
    ints, strings = pa.int64(), pa.string()
    for first, tried in (("\r\n\nu7,1,3\r\n", [strings]), ("7,m1,3\n", [strings]),
                         ("7,1_000,3\n", [strings]), ("0x1f,7,3\n", [ints]),
                         ("0x1f,ab,3\n", [ints, strings]),  # hexadecimal "ab" fails later
                         ('"u7",1,3\n', [ints, strings])):
        path = tmp_path / "ids.csv"
        path.write_text(first + "8,9,1\n", newline="")
        parses.clear()
        table = reader.table(plan(fs, [str(path)], None, None)[0], 0)[0]
        assert [t["user"] for t in parses] == tried, first
        assert table.column("user").type == tried[-1], first
    types = {"user": ints, "item": ints, "rating": pa.float64()}
    fallback = {**types, "user": strings, "item": strings}
    names = ["user", "item", "rating"]
    assert _csv._first_line_refuses(b"u7,1,3\n", names, types, fallback, ",")
    assert not _csv._first_line_refuses(b"u7,1,3,4\n", names, types, fallback, ",")  # width
    assert not _csv._first_line_refuses(b"u7,1,3\n", names, types, types, ",")  # no fallback


_IDS = ["", " ", "007", "7", "1.5", "None", "b'x'", "True", "a", "a b", "é", "e\u0301", "日本",
        "🙂", "u123", "u1234", "m98765"]


def _plain_codes(ids, values) -> list:
    """The reference: a dict of the ids, each value as str() (bytes decoded, trailing NULs
    dropped, as NumPy's astype(str) does); a missing value (None) is no id: -1."""
    at = {v: k for k, v in enumerate(sorted(ids))}
    return [-1 if v is None else
            at.get((v.decode() if isinstance(v, bytes) else str(v)).rstrip("\x00"), -1)
            for v in values]


@pytest.mark.parametrize("size", [1, 40, 5000])
def test_string_codes_match_a_plain_lookup(size):
    """String-id codes against a dict, for the edge cases (the empty id, numbers as written,
    unicode, ids absent, values that are not str: compared as str(), as NumPy's astype(str)
    does), as NumPy unicode, object and pyarrow arrays, small and large against the
    mapping: a guard for the lookup's speed-ups (the same codes before and after)."""
    rng = np.random.default_rng(size)
    m = IdMapping(_IDS)
    extra = ["", "07", "7 ", "ab", "e", "日", "u12", "m98765\x00", "NONE", "x"]
    pool = np.array(_IDS + extra, dtype=object)
    text = pool[rng.integers(0, pool.shape[0], size)]
    want = _plain_codes(_IDS, text)
    assert m.codes(text.astype(str)).tolist() == want
    assert m.codes(text).tolist() == want
    assert m.codes(text.tolist()).tolist() == want
    assert m.codes(pa.array(text.tolist())).tolist() == want
    assert m.codes(pa.chunked_array([text[:size // 2].tolist(), text[size // 2:].tolist()],
                                    pa.string())).tolist() == want
    assert m.codes(text.astype(str).reshape(size, 1)).tolist() == [[c] for c in want]
    others = np.array([7, 1.5, None, b"x", True, np.str_("a"), "a\x00", 0], dtype=object)
    mixed = others[rng.integers(0, others.shape[0], size)]
    assert m.codes(mixed).tolist() == _plain_codes(_IDS, mixed)
    assert m.codes(np.arange(size)).tolist() == _plain_codes(_IDS, range(size))
    # a large mapping and few values (or many): the same codes either way
    big = np.array([f"u{k}" for k in range(0, 3 * size, 3)])
    values = np.array([f"u{k}" for k in rng.integers(0, 3 * size, size)])
    assert IdMapping(big).codes(values).tolist() == _plain_codes(big, values)
    assert IdMapping(big).codes(values[:1]).tolist() == _plain_codes(big, values[:1])
    assert m.codes(np.array([], dtype=str)).tolist() == []
    assert IdMapping(np.array([], dtype=str)).codes(values).tolist() == [-1] * size


def test_a_header_read_as_ratings_is_pointed_out(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating\n1,2,3\n2,3,4\n")
    with pytest.raises(ValueError, match=r"r\.csv, line 1: column 'rating' \(field 3\): "
                                         r"'rating' is not a finite number \(is line 1 a "
                                         r"header\? pass header=True\)$"):
        read_ratings(str(path))
    df, users, _ = read_ratings(str(path), header=True)
    assert len(df.compute()) == 2 and len(users) == 2
    path.write_text("1,2,x\n")  # a bad rating on line 1 of a file read with its header
    with pytest.raises(ValueError, match=r"line 1: .* not a finite number$"):
        read_ratings(str(path), names=["user", "item", "rating"])


def test_a_ratings_file_of_another_delimiter_is_pointed_out(tmp_path):
    """A comma-separated ratings file without a ``.csv`` name is read with the default tab:
    its one field per line was reported as "expected 4 fields, got 1 (is line 1 a header?
    pass header=True ...)", which points the wrong way; now the delimiter is named."""
    path = tmp_path / "u.data"
    path.write_text("1,2,5,0\n1,3,4,0\n")
    with pytest.raises(ValueError, match=r"u\.data, line 1: expected 4 fields, got 1, read "
                                         r"with the delimiter '\\t'; the line holds ',': is "
                                         r"that the delimiter\? \(use sep=','\)$"):
        read_ratings(str(path))
    df, users, items = read_ratings(str(path), sep=",")
    assert len(df.compute()) == 2 and len(items) == 2
    # a binary file with a header asked for: said as read_ratings tells Parquet, by its name
    pd.DataFrame({"user": [1], "item": [2], "rating": [5.0]}).to_parquet(tmp_path / "r.tsv")
    with pytest.raises(ValueError, match=r"r\.tsv: its first line is not delimited text \(it "
                                         r"holds NUL bytes\): a binary file \(e\.g\. Parquet: "
                                         r"read when named \.parquet or \.parq\), or lines "
                                         r"ending in a lone CR\?$"):
        read_ratings(str(tmp_path / "r.tsv"), header=True)


def test_a_libsvm_file_read_as_ratings_is_pointed_out(tmp_path):
    """A LIBSVM file given as ratings (``dask-ps train mf --train a9a``) was reported as
    "expected 4 fields, got 1 (is line 1 a header? pass header=True)", which points the
    wrong way; now the line is named as LIBSVM's."""
    path = tmp_path / "a9a"
    path.write_text("-1 3:1 11:1 14:1\n+1 5:1 7:1\n")
    with pytest.raises(ValueError, match=r"a9a, line 1: expected 4 fields, got 1: a LIBSVM "
                                         r"line \(a label, then index:value pairs\), where "
                                         r"ratings are lines of user, item, rating and maybe "
                                         r"a timestamp$"):
        read_ratings(str(path))


@pytest.mark.parametrize("blocksize", [None, "1KiB"])
@pytest.mark.parametrize("bad", ["12.5", "99999999999999999999999", "1e3", "+12", "-3.25"])
def test_a_number_among_integer_ids_that_is_not_one_is_refused(tmp_path, blocksize, bad):
    """One id 12.5 (or one beyond int64) among integer ids made every id a string ('1',
    '10', '11', ...: a model no int test data matches); now refused naming the file, line,
    field and id, in whichever block it is. A column with an id that is no number ("bob")
    stays string ids, as written; an integral "7.0" is the id 7 (as a float 7.0 is)."""
    rng = np.random.default_rng(0)
    rows = [f"{u}\t{i}\t{r}" for u, i, r in zip(rng.integers(1, 50, 200),
                                                 rng.integers(1, 80, 200),
                                                 rng.integers(1, 6, 200))]
    for field, key in ((0, "user"), (1, "item")):
        lines = list(rows)
        parts = lines[150].split("\t")
        parts[field] = bad
        lines[150] = "\t".join(parts)
        path = tmp_path / f"{key}.tsv"
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError) as info:
            read_ratings(path, blocksize=blocksize)
        assert str(info.value) == (
            f"{path}, line 151: column {key!r} (field {field + 1}): id {bad!r} is not an "
            f"integer (int64), and every id of the column is a number: a typo? (ids are "
            f"read as strings when some are not numbers, e.g. u12)")
        # one id that is no number, even in another block: string ids, none refused
        parts = lines[0].split("\t")
        parts[field] = "bob"
        path.write_text("\n".join(["\t".join(parts)] + lines[1:]) + "\n")
        df, users, items = read_ratings(path, blocksize=blocksize)
        mapping = users if key == "user" else items
        assert df.npartitions == (1 if blocksize is None else 2)  # "bob" and bad: 2 blocks
        assert not mapping.is_integer and {"bob", bad} <= set(mapping.ids.tolist())
        pdf = df.compute()
        assert mapping.ids_of(pdf[key].to_numpy()[[0, 150]]).tolist() == ["bob", bad]
        # the other column kept its integer ids
        assert (items if key == "user" else users).is_integer


def test_integral_decimal_ids_are_integers(tmp_path):
    """"7.0" (pandas' float ids as text) was the string id "7.0": now the id 7, as the
    estimators take a float 7.0; "007" is 7, as pyarrow's integers read it."""
    path = tmp_path / "r.tsv"
    path.write_text("1\t7.0\t3\n2\t7\t4\n007\t8.\t5\n1\t-0.00\t1\n")
    df, users, items = read_ratings(path)
    assert users.ids.tolist() == [1, 2, 7] and items.ids.tolist() == [0, 7, 8]
    pdf = df.compute()
    assert pdf["user"].tolist() == [0, 1, 2, 0] and pdf["item"].tolist() == [1, 1, 2, 0]


@pytest.mark.parametrize("kw, said", [
    (dict(user="x"), "user='x' names a column"),
    (dict(rating="nosuch"), "rating='nosuch' names a column"),
    (dict(user="item", item="user"), "user='item', item='user' name columns"),
    (dict(timestamp="ts"), "timestamp='ts' names a column"),
])
def test_headerless_columns_are_not_renamed(tmp_path, kw, said):
    """user="x" on a headerless file only renamed field 1 (the option had no effect: even
    rating="nosuch" read field 3, user="item" read the users still); now refused unless
    the file has a header or names= names its fields."""
    from dask_ps.io.ratings import HeaderlessColumnError, check_ratings_columns

    path = tmp_path / "r.tsv"
    path.write_text("1\t10\t3\t100\n2\t20\t4\t101\n")
    want = (f"{path}: {said}, but the file is read without a header (header=False, no "
            f"names=), so its fields are ['user', 'item', 'rating', 'timestamp']: pass "
            f"header=True for a file that starts with its column names, or names= to name "
            f"its fields")
    for call in (read_ratings, check_ratings_columns):
        with pytest.raises(HeaderlessColumnError) as info:
            call(path, **kw)
        assert str(info.value) == want and isinstance(info.value, ValueError)
        assert info.value.renamed == kw
    # names= picks among its names; a name not among them is refused
    df, users, items = read_ratings(path, names=["a", "b", "c", "d"], user="b", item="a",
                                    rating="c", timestamp="d")
    assert users.ids.tolist() == [10, 20] and items.ids.tolist() == [1, 2]
    assert df.compute()["timestamp"].tolist() == [100, 101]
    with pytest.raises(ValueError, match=r"columns \['x'\] are not among \['a', 'b', 'c', "
                                         r"'d'\]"):
        read_ratings(path, names=["a", "b", "c", "d"], user="x", item="a", rating="c")
    # the defaults, and timestamp=None (the 4th field is then not read)
    assert list(read_ratings(path, user="user", timestamp=None)[0].columns) == [
        "user", "item", "rating"]
