"""read_ctr / encode_ctr: Criteo CSV into hashed sparse features, and into LogisticRegression."""

from __future__ import annotations

import doctest
import re

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

import dask_ps.io.ctr as ctr_module
from dask_ps import LogisticRegression
from dask_ps.exceptions import DataError
from dask_ps.io import HashingEncoder, encode_ctr, infer_encoder, read_ctr
from dask_ps.io.ctr import check_header

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _synchronous():
    """Readers compute in this process (memory:// files are per process); cluster tests pass
    their client explicitly."""
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture
def tiny(data):
    return data / "ctr_criteo" / "train.tiny.csv"


def _compute(X, y):
    return dask.compute(X, y)


def test_codes_identical_for_1_and_4_partitions(tiny):
    X1, y1 = read_ctr(tiny, blocksize=None)
    X4, y4 = read_ctr(tiny, blocksize=130_000)
    assert X1.numblocks[0] == 1 and X4.numblocks[0] == 4
    assert X4.chunks[0] == tuple(c for c in X4.chunks[0] if c) and sum(X4.chunks[0]) == 1999
    (A, a), (B, b) = _compute(X1, y1), _compute(X4, y4)
    assert A.shape == (1999, 2**20) and A.nnz == B.nnz
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)
    np.testing.assert_array_equal(a, b)
    assert a.sum() == 418  # positives, PROVENANCE.md
    # every row has one feature per column (39), fewer only where two collide
    per_row = np.diff(A.indptr)
    assert per_row.max() == 39 and (per_row >= 37).all()
    # a dask dataframe, partitioned differently, gives the same codes
    df = dd.read_csv(tiny, blocksize=100_000,
                     dtype={**{f"C{i}": "string" for i in range(1, 27)},
                            **{f"I{i}": "float64" for i in range(1, 14)}})
    assert df.npartitions == 5
    C, c = _compute(*encode_ctr(df))
    assert (C != A).nnz == 0 and np.array_equal(c, a)


def test_criteo_tiny_auc_on_two_workers(tiny, client2):
    X, y = read_ctr(tiny, blocksize=130_000)
    n = 1600  # time order: train on the first 80 %, test on the last 20 %
    model = LogisticRegression(solver="ftrl", max_iter=5, random_state=0, client=client2)
    model.fit(X[:n], y[:n])
    proba, yt = client2.compute([model.predict_proba(X[n:]), y[n:]], sync=True)
    auc = roc_auc_score(yt, proba[:, 1])
    assert auc >= 0.65, auc
    assert model.n_features_in_ == 2**20


def test_float_written_integers_and_tsv_without_header(tmp_path):
    enc = HashingEncoder(numeric=["I1"], categorical=["C1"], n_features=2**16)
    (tmp_path / "a.csv").write_text("label,I1,C1\n1,260,ab\n0,260.0,ab\n1,,\n")
    X, y = _compute(*read_ctr(tmp_path / "a.csv", enc, label="label"))
    assert (X[0] != X[1]).nnz == 0 and X[2].nnz == 2 and (X[2] != X[0]).nnz > 0
    (tmp_path / "b.tsv").write_text("1\t260\tab\n0\t260\tab\n")
    Xb, yb = _compute(*read_ctr(tmp_path / "b.tsv", enc, label="label", sep="\t",
                                header=False, names=["label", "I1", "C1"]))
    assert (Xb[0] != X[0]).nnz == 0 and yb.tolist() == [1.0, 0.0]


def test_parquet_through_dask_dataframe(tmp_path, tiny):
    pdf = pd.read_csv(tiny, dtype={f"C{i}": "string" for i in range(1, 27)})
    (tmp_path / "pq").mkdir()
    for i, (a, b) in enumerate([(0, 500), (500, 1200), (1200, 1999)]):
        pdf.iloc[a:b].to_parquet(tmp_path / "pq" / f"part{i}.parquet")
    df = dd.read_parquet(tmp_path / "pq")
    assert df.npartitions == 3
    X, y = _compute(*encode_ctr(df))
    A, a = _compute(*read_ctr(tiny))
    assert (X != A).nnz == 0 and np.array_equal(y, a)


def test_glob_of_files_with_the_same_header(tmp_path, tiny):
    lines = tiny.read_bytes().split(b"\r\n")
    (tmp_path / "p1.csv").write_bytes(b"\r\n".join(lines[:1001]) + b"\r\n")
    (tmp_path / "p2.csv").write_bytes(b"\r\n".join(lines[:1] + lines[1001:]))
    X, y = _compute(*read_ctr(str(tmp_path / "p*.csv"), blocksize=50_000))
    A, a = _compute(*read_ctr(tiny))
    assert (X != A).nnz == 0 and np.array_equal(y, a)
    (tmp_path / "p3.csv").write_bytes(b"Id,label\n1,1\n")
    with pytest.raises(ValueError, match=r"p3\.csv: header .* differs"):
        read_ctr(str(tmp_path / "p*.csv"))


GOOD = b"1,2,a,b"
BAD_CASES = [
    (b",2,a,b", "column 'y' is empty"),
    (b"1,x,a,b", "column 'n' (field 2): 'x' is not a finite number"),
    (b"1,2,a", "expected 4 fields, got 3"),
    (b"1,2,a,b,c", "expected 4 fields, got 5"),
    (b"yes,2,a,b", "column 'y' (field 1): the label 'yes' is not a number: labels read here "
                   "must be numbers, such as 0 and 1; map text classes to numbers first (e.g. "
                   "yes -> 1, no -> 0)"),
    # pyarrow parses these as floats: refused after the parse
    (b"nan,2,a,b", "column 'y' (field 1): 'nan' is not a finite number"),
    (b"-inf,2,a,b", "column 'y' (field 1): '-inf' is not a finite number"),
    (b"1,inf,a,b", "column 'n' (field 2): 'inf' is not a finite number"),
    (b"1,-Infinity,a,b", "column 'n' (field 2): '-Infinity' is not a finite number"),
    (b'1,2,"a,b', "expected 4 fields, got 3; a quoted field opens on it and does not close: "
                  "quoted fields must not contain newlines"),
    (b"1,2,a,b\r1,2,a,b", "cannot parse the line; it holds a lone CR (\\r): lines must end in "
                         "LF or CRLF, not CR alone (convert the file, e.g. tr '\\r' '\\n')"),
    # the lone CR named, not the halves of the line ("expected 4 fields, got 2")
    (b"1,2\r1,2,a,b", "cannot parse the line; it holds a lone CR (\\r): lines must end in "
                     "LF or CRLF, not CR alone (convert the file, e.g. tr '\\r' '\\n')"),
    # inside a categorical field: the kernel hashed "a\rx" as the value, silently
    (b"1,2,a\rx,b", "cannot parse the line; it holds a lone CR (\\r): lines must end in "
                    "LF or CRLF, not CR alone (convert the file, e.g. tr '\\r' '\\n')"),
    (b"1,1e400,a,b", "column 'n' (field 2): '1e400' is not a finite number"),
    # Python's float takes these, pyarrow does not: found by pyarrow itself, line by halves
    (b"1,1_000,a,b", "column 'n' (field 2): CSV conversion error to double: invalid value "
                     "'1_000'"),
    ("1,\uff11,a,b".encode(), "column 'n' (field 2): CSV conversion error to double: invalid "
                              "value '\uff11'"),
]


@pytest.mark.parametrize("lineno", [2, 75, 199])
@pytest.mark.parametrize(("bad", "reason"), BAD_CASES)
def test_errors_name_file_line_and_column(tmp_path, bad, reason, lineno):
    lines = [b"y,n,c,d"] + [GOOD] * 200
    lines[lineno - 1] = bad
    path = tmp_path / "broken.csv"
    path.write_bytes(b"\r\n".join(lines))
    enc = HashingEncoder(numeric=["n"], categorical=["c", "d"])
    X, y = read_ctr(path, enc, label="y", blocksize=256)  # the first pass only counts rows
    assert X.shape[0] == y.shape[0] == 200 and X.numblocks[0] > 1
    with pytest.raises(ValueError) as info:
        _compute(X, y)  # every line is checked when it is parsed: a fit raises before training
    assert str(info.value) == f"{path}, line {lineno}: {reason}"


def test_argument_errors(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("y,n\n1,2\n")
    with pytest.raises(ValueError, match=r"columns \['c'\] are not among \['y', 'n'\]"):
        read_ctr(path, HashingEncoder(numeric=["n"], categorical=["c"]), label="y")
    with pytest.raises(ValueError, match=r"columns \['y', 'n'\] are not among \['0', '1'\]"):
        read_ctr(path, HashingEncoder(numeric=["n"]), label="y", header=False)
    with pytest.raises(FileNotFoundError):
        read_ctr(str(tmp_path / "*.nothing"))
    df = pd.DataFrame({"y": [1.0, None], "n": [1.0, 2.0]})
    X, y = encode_ctr(df, HashingEncoder(numeric=["n"]), label="y")
    with pytest.raises(ValueError, match="partition 0: label column 'y' is empty .* row 2"):
        _compute(X, y)


def test_docstring_examples():
    result = doctest.testmod(ctr_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_sparse_output_types(tiny):
    X, _ = read_ctr(tiny, blocksize=None, dtype=np.float64)
    A = X.compute()
    assert isinstance(A, sp.csr_matrix) and A.dtype == np.float64 and A.has_canonical_format
    assert isinstance(X._meta, sp.csr_matrix)


FIX = "labels read here must be numbers, such as 0 and 1; map text classes to numbers first"


def test_text_labels_in_files_and_dataframes_are_refused_saying_to_map_them(tmp_path):
    """A click log labelled yes/no: every reader names where the first text label is and
    says to map the labels to numbers (the README: text classes in an in-memory y only),
    not that 'yes' is "not a finite number" or the column "not numeric"."""
    df = pd.DataFrame({"click": ["yes", "no", "yes", "no"], "price": [3.5, 2.0, None, 4.0],
                       "shop": list("abac")})
    df.to_csv(tmp_path / "yesno.csv", index=False)
    df.to_parquet(tmp_path / "yesno.parquet", index=False)
    cases = [(tmp_path / "yesno.csv", f"{tmp_path / 'yesno.csv'}, line 2: column 'click' "
                                      f"(field 1): the label 'yes' is not a number: {FIX}"),
             (tmp_path / "yesno.parquet", f"{tmp_path / 'yesno.parquet'}, row group 1: label "
                                          f"column 'click' holds 'yes' in row 1, not a number: "
                                          f"{FIX}")]
    for path, message in cases:
        with pytest.raises(ValueError) as info:
            _compute(*read_ctr(path, label="click"))
        assert str(info.value).startswith(message), str(info.value)
    with pytest.raises(ValueError) as info:
        _compute(*encode_ctr(df.assign(click=["1", "no", "1", "0"]), label="click"))
    assert str(info.value).startswith(f"partition 0: label column 'click' holds 'no' in row "
                                      f"2, not a number: {FIX}")
    _, y = _compute(*encode_ctr(df.assign(click=["1", "0", "1", "0"]), label="click"))
    assert y.tolist() == [1.0, 0.0, 1.0, 0.0]  # numbers written as text are numbers


def test_a_quoted_field_across_lines_is_named_as_the_cause(tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_bytes(b'click,price,shop\n0,2,b\n1,3.5,"a\nb"\n0,2,b\n')
    with pytest.raises(ValueError) as info:
        _compute(*read_ctr(path, label="click"))
    assert str(info.value) == f"{path}, line 3: cannot parse the line; a quoted field opens " \
                              f"on it and does not close: quoted fields must not contain newlines"


def test_a_lone_cr_in_a_categorical_field_is_refused_as_read_frame_refuses_it(tmp_path):
    """read_ctr's kernel took a lone CR inside a categorical field (quoted or not) as a byte
    of the category, silently; read_frame refuses the line. Now read_ctr names the file and
    line in read_frame's words. CRLF lines read as their LF twins."""
    from dask_ps.io._frame import read_frame

    rows = [b"click,price,shop", b"1,3.5,a", b"0,2,b", b"1,,a"]
    enc = HashingEncoder(numeric=["price"], categorical=["shop"], n_features=2**10)
    read = []
    for name, eol in (("lf.csv", b"\n"), ("crlf.csv", b"\r\n")):
        path = tmp_path / name
        path.write_bytes(eol.join(rows) + eol)
        read.append(_compute(*read_ctr(path, enc, label="click")))
    assert (read[0][0] != read[1][0]).nnz == 0 and read[0][0].nnz == 6
    assert read[0][1].tolist() == read[1][1].tolist() == [1.0, 0.0, 1.0]
    for field in (b"b\rx", b'"b\rx"'):
        for eol in (b"\n", b"\r\n"):
            path = tmp_path / "bad.csv"
            path.write_bytes(eol.join(rows[:2] + [b"0,2," + field] + rows[3:]) + eol)
            with pytest.raises(ValueError) as info:
                _compute(*read_ctr(path, enc, label="click"))
            # a CR inside quotes is not a line end: converting it to LF would not help
            why = ("a quoted field on it holds a CR (\\r): quoted fields must not contain "
                   "line breaks (CR or LF)" if field.startswith(b'"') else
                   "it holds a lone CR (\\r): lines must end in LF or CRLF, not CR alone "
                   "(convert the file, e.g. tr '\\r' '\\n')")
            assert str(info.value) == f"{path}, line 3: cannot parse the line; {why}"
            with pytest.raises(ValueError) as frame:
                dask.compute(*read_frame(path, "click", categorical=["shop"]))
            assert str(frame.value) == str(info.value)


@pytest.mark.parametrize("text, reason", [
    (b'1,3,"x\ny"', "a quoted field opens on it and does not close: quoted fields must not "
                    "contain newlines"),
    (b"1,3,x\r0,1,a", "it holds a lone CR (\\r): lines must end in LF or CRLF, not CR alone "
                     "(convert the file, e.g. tr '\\r' '\\n')")])
def test_a_block_of_the_exact_path_names_a_quoted_newline_or_a_lone_cr(tmp_path, text,
                                                                      reason):
    """A block holding a number of 20 digits is parsed by pyarrow, which took these as one
    row of two lines or two rows of one: 'N rows ..., M when the file was opened; did it
    change since?'."""
    path = tmp_path / "slow.csv"
    path.write_bytes(b"y,v,c\n1,2.5,a\n0,7.0000000000000000001,b\n" + text + b"\n1,1,a\n")
    enc = HashingEncoder(numeric=["v"], categorical=["c"], n_features=2**16)
    with pytest.raises(ValueError) as info:
        _compute(*read_ctr(path, enc, label="y"))
    assert str(info.value) == f"{path}, line 4: cannot parse the line; {reason}"


@pytest.mark.parametrize("value", [["a", "b"], ("a",), {"k": 1}, np.array([1, 2])])
def test_encode_ctr_refuses_a_column_of_lists_as_read_ctr_does(value):
    """An object column of lists (tuples, dicts, arrays) was hashed as one value per whole
    list (['a', 'b'] and ['a'] two unrelated categories): refused as read_ctr refuses a
    Parquet list column, inferred or listed; excluded, it is no feature."""
    df = pd.DataFrame({"click": [1, 0, 1, 0], "shop": list("abac"),
                       "tags": [value, value, None, value]})
    refused = r"^dataframe: column 'tags' is \w+<.*>: a list, struct or map column cannot " \
              r"be a feature; leave it out \(use exclude=\['tags'\]\)$"  # Python's words
    for kw in ({}, {"categorical": ["shop", "tags"]}):
        with pytest.raises(ValueError, match=refused):
            encode_ctr(df, label="click", **kw)
    with pytest.raises(ValueError, match=refused):
        encode_ctr(df, HashingEncoder(categorical=["shop", "tags"]), label="click")
    X, _ = _compute(*encode_ctr(df, label="click", exclude=["tags"], n_features=64))
    assert X.nnz == 4
    with pytest.raises(ValueError) as info:  # every such column, in one exclude=
        encode_ctr(df.assign(more=[value] * 4), label="click")
    assert str(info.value).endswith(": a list, struct or map column cannot be a feature (nor "
                                    "can ['more']); leave them out (use exclude=['tags', "
                                    "'more'])")


def test_encode_ctr_names_the_columns_named_twice():
    df = pd.DataFrame([[1, 2.0, "a", "b"]], columns=["click", "price", "shop", "shop"])
    with pytest.raises(ValueError) as info:
        encode_ctr(df, label="click")
    assert str(info.value) == "dataframe: columns named twice: ['shop'] (columns: ['click', " \
                              "'price', 'shop', 'shop'])"


def test_a_column_without_a_name_is_left_out_with_a_warning(tmp_path):
    """pandas' to_csv writes its index as a first column named "": it was a numeric
    feature, silently; now it is left out, with a warning naming the file, the column's
    position and how to use it (listing it keeps it, without a warning)."""
    path = tmp_path / "pdindex.csv"
    pd.DataFrame({"click": [1, 0, 1, 0], "price": [3.5, 2.0, None, 4.0],
                  "shop": list("abac")}).to_csv(path)
    with pytest.warns(UserWarning, match=rf"^{re.escape(str(path))}: column 1 \(''\) has no "
                                         r"name of its own .* name it in the header, or use "
                                         r"numeric=\[''\] or categorical=\[''\]$"):
        enc = infer_encoder(path, label="click")
    assert enc.numeric == ("price",) and enc.categorical == ("shop",)
    with pytest.warns(UserWarning) as said:  # the columns given, and it
        infer_encoder(path, label="click", numeric=["price"], categorical="shop")
    assert str(said[0].message).endswith(
        "; to use it, name it in the header, or use numeric=['price', ''] or "
        "categorical=['shop', '']")
    assert "--" not in str(said[0].message)
    assert infer_encoder(path, label="click", numeric=["", "price"]).numeric == ("", "price")
    read = pd.read_csv(path)  # the index as "Unnamed: 0"
    with pytest.warns(UserWarning, match=r"^dataframe: column 1 \('Unnamed: 0'\) has no name"):
        X, _ = _compute(*encode_ctr(read, label="click", n_features=2**20))
    assert X.nnz == 8  # price and shop: two features a row


def test_an_empty_file_is_named_as_empty(tmp_path):
    """An empty test file said "columns [...] are not among []" (dask-ps evaluate --test
    checks its header with check_header). A file of 0 bytes given alone is refused, naming
    it, unless an encoder gives its columns: then it reads as no rows, as a file of a header
    alone does (a stream's batch of a quiet hour), with a warning naming it."""
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    enc = HashingEncoder(numeric=["price"], n_features=64)
    said = f"{empty}: an empty file (0 bytes): no header to read the columns from, and no rows"
    with pytest.raises(DataError) as info:
        check_header(empty, enc, label="click")
    assert str(info.value) == said
    for call in (lambda: read_ctr(empty, label="click"),
                 lambda: infer_encoder(empty, label="click")):
        with pytest.raises(DataError) as info:
            call()
        assert str(info.value).startswith(said + "; read it as no rows (a batch of a stream")
        assert "encoder=" in str(info.value)
    with pytest.warns(UserWarning, match=rf"^{re.escape(str(empty))}: an empty file \(0 "
                                         rf"bytes\): read as no rows$"):
        X, y = read_ctr(empty, enc, label="click")
    assert X.shape == (0, 64) and y.compute().shape == (0,)
    assert X.compute().shape == (0, 64)


def test_files_without_a_header_have_numbered_columns_as_in_read_frame(tmp_path):
    from dask_ps.io._frame import read_frame

    path = tmp_path / "raw.csv"
    path.write_text("1,2.5,x\n0,3,y\n1,,x\n")
    frame, _ = read_frame(path, header=False, categorical=["2"])  # (x, y: words)
    assert list(frame.columns) == ["0", "1", "2"]
    enc = infer_encoder(path, label="0", header=False, n_features=64)
    assert (enc.numeric, enc.categorical) == (("1",), ("2",))
    check_header(path, enc, label="0", header=False)
    with pytest.raises(ValueError, match=r"columns \['Label'\] are not among \['0', '1', '2'\]"):
        check_header(path, enc, header=False)
    X, y = _compute(*read_ctr(path, label="0", header=False, n_features=64))
    ref, ref_y = _compute(*read_ctr(path, enc, label="0", header=False,
                                    names=["0", "1", "2"]))
    assert X.shape == (3, 64) and y.tolist() == [1, 0, 1] == ref_y.tolist()
    assert (X != ref).nnz == 0


def test_an_empty_parquet_file_reads_as_a_csv_file_of_a_header_alone(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    enc = HashingEncoder(numeric=["a"], n_features=32)
    (tmp_path / "h.csv").write_text("Label,a\n")
    pq.write_table(pa.table({"Label": pa.array([], pa.int64()),
                             "a": pa.array([], pa.float64())}), tmp_path / "e.parquet")
    for name in ["h.csv", "e.parquet"]:
        X, y = read_ctr(tmp_path / name, enc)
        assert X.shape == (0, 32) and y.shape == (0,), name
        Xc, yc = _compute(X, y)
        assert sp.issparse(Xc) and Xc.shape == (0, 32) and yc.shape == (0,), name


def test_read_frame_of_an_empty_parquet_file_reads_as_a_csv_file_of_a_header_alone(tmp_path):
    """GBDT's table readers disagreed on a file without rows: a header-only CSV read as a
    frame of 0 rows, a Parquet file of 0 rows was refused ("no rows") while read_ctr read it
    as 0 rows (and read_sparse_parquet failed in dask's concatenate). All read it as a frame
    (or arrays) of 0 rows now, and the callers say "no rows" as for CSV."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dask_ps.io._frame import read_frame
    from dask_ps.io.parquet import read_sparse_parquet, read_table_parquet

    (tmp_path / "h.csv").write_text("y,a,c\n")
    empty = pa.table({"y": pa.array([], pa.int64()), "a": pa.array([], pa.float64()),
                      "c": pa.array([], pa.string())})
    pq.write_table(empty, tmp_path / "e.parquet")
    pq.write_table(empty, tmp_path / "e2.parquet")
    csv, _ = read_frame(str(tmp_path / "h.csv"), "y", categorical=["c"], classes=True)
    for paths in [tmp_path / "e.parquet", [tmp_path / "e.parquet", tmp_path / "e2.parquet"]]:
        df, label = read_table_parquet(paths, "y", categorical=["c"], classes=True)
        out = df.compute()
        assert label == "y" and out.shape == (0, 3) and df.npartitions == 1
        assert list(out.columns) == list(csv.compute().columns) == ["y", "a", "c"]
        assert out["a"].dtype == np.float64
    # ... and an empty file next to one with rows adds nothing
    pq.write_table(pa.table({"y": [1, 0], "a": [0.5, 1.5], "c": ["u", "v"]}),
                   tmp_path / "f.parquet")
    df, _ = read_table_parquet([tmp_path / "e.parquet", tmp_path / "f.parquet"], "y",
                               categorical=["c"])
    assert df.compute()["a"].tolist() == [0.5, 1.5] and df.npartitions == 1
    # sparse rows too (it failed in dask's concatenate)
    pq.write_table(pa.table({"label": pa.array([], pa.float64()),
                             "indices": pa.array([], pa.list_(pa.int64())),
                             "values": pa.array([], pa.list_(pa.float32()))}),
                   tmp_path / "s.parquet")
    X, y = read_sparse_parquet(tmp_path / "s.parquet", n_features=8)
    Xc, yc = _compute(X, y)
    assert X.shape == Xc.shape == (0, 8) and sp.issparse(Xc) and yc.shape == (0,)
