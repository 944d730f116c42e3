"""``weight=`` of the table readers (read_ctr, read_frame, read_table_parquet) and of
encode_ctr: the weights in X's chunks or partitions, every bad value named by file, line
(row group, row) and column."""

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dask_ps import DataError
from dask_ps.io import read_ctr
from dask_ps.io._frame import read_frame
from dask_ps.io.parquet import read_table_parquet


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="sync"):
        yield


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"click": rng.integers(0, 2, n),
                         "price": np.round(rng.normal(size=n), 3),
                         "w": np.round(rng.uniform(0, 2, n), 3),
                         "shop": rng.choice(["a", "b"], n)})


def test_read_ctr_weights_come_in_the_chunks_of_x_and_are_no_feature(tmp_path):
    df = _frame(3000)
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    parquet = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), parquet, row_group_size=700)
    for path, kw in ((csv, {"blocksize": "16KiB"}), (parquet, {})):
        X, y, w = read_ctr(str(path), label="click", weight="w", n_features=128, **kw)
        assert X.numblocks[0] > 1 and w.chunks == (X.chunks[0],) and w.dtype == np.float64
        np.testing.assert_array_equal(w.compute(), df["w"].to_numpy())
        X0, y0 = read_ctr(str(path), label="click", exclude="w", n_features=128, **kw)
        assert (X.compute() != X0.compute()).nnz == 0  # w is not hashed
        np.testing.assert_array_equal(y.compute(), y0.compute())


def test_frame_readers_give_the_weight_column_of_the_frame(tmp_path):
    df = _frame(50)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    for read, path in ((read_frame, "t.csv"), (read_table_parquet, "t.parquet")):
        frame, label, w = read(str(tmp_path / path), "click", categorical=["shop"], weight="w")
        assert label == "click" and w.npartitions == frame.npartitions
        np.testing.assert_array_equal(w.compute().to_numpy(), df["w"].to_numpy())
        assert frame.compute()["w"].dtype == np.float64


@pytest.mark.parametrize("value, reason", [
    ("", "column 'w' (the sample weight) is empty"),
    ("nan", "column 'w' (the sample weight) is NaN"),
    ("-0.5", "column 'w' (the sample weight) holds -0.5, a negative number"),
    ("inf", "column 'w' (field 3): "),
    ("x", "column 'w' (field 3): "),
])
def test_a_bad_csv_weight_is_named_by_file_line_and_column(tmp_path, value, reason):
    lines = ["click,price,w,shop"] + [f"{i % 2},{i}.5,1,a" for i in range(30)]
    lines[21] = f"1,2.5,{value},b"
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    where = f"{path}, line 22: {reason}"
    with pytest.raises(DataError, match=f"^{where}".replace("(", r"\(").replace(")", r"\)")):
        read_ctr(str(path), label="click", weight="w", n_features=64)[2].compute()
    with pytest.raises(DataError, match=f"^{where}".replace("(", r"\(").replace(")", r"\)")):
        read_frame(str(path), "click", categorical=["shop"], weight="w")[2].compute()


@pytest.mark.parametrize("value, reason", [
    (None, "is empty"), (float("nan"), "is NaN"), (-2.0, "holds -2.0, a negative number"),
    (float("inf"), "holds inf, not a finite number")])
def test_a_bad_parquet_weight_is_named_by_file_row_group_and_row(tmp_path, value, reason):
    df = _frame(20)
    w = df.pop("w").tolist()
    w[13] = value
    table = pa.Table.from_pandas(df, preserve_index=False).append_column(
        "w", pa.array(w, pa.float64()))  # (None: null, NaN: NaN)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=10)
    where = f"{path}, row group 2: weight column 'w' {reason} in row 4: sample weights must"
    with pytest.raises(DataError) as err:
        read_ctr(str(path), label="click", weight="w", n_features=64)[2].compute()
    assert str(err.value).startswith(where)
    if value is not None and np.isinf(value):
        return  # (read_table_parquet names an infinite feature; the weight is checked first)
    with pytest.raises(DataError) as err:
        read_table_parquet(str(path), "click", categorical=["shop"], weight="w")[2].compute()
    assert str(err.value).startswith(where)


def test_a_weight_column_that_is_the_label_absent_or_a_feature_is_refused(tmp_path):
    df = _frame(10)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet", index=False)
    csv, parquet = str(tmp_path / "t.csv"), str(tmp_path / "t.parquet")
    with pytest.raises(DataError, match="weight column 'click' is the label column"):
        read_ctr(csv, label="click", weight="click")
    with pytest.raises(DataError, match="weight column 'click' is the label column"):
        read_frame(csv, "click", weight="click")
    with pytest.raises(DataError, match=r"columns \['nope'\] are not among"):
        read_ctr(csv, label="click", weight="nope")
    with pytest.raises(DataError, match=f"{parquet}: weight column 'nope' is not among"):
        read_table_parquet(parquet, "click", categorical=["shop"], weight="nope")
    with pytest.raises(DataError, match=f"{parquet}: weight column 'shop' is string"):
        read_table_parquet(parquet, "click", weight="shop", categorical=())
    encoder = read_ctr(csv, label="click", n_features=64)[0]  # (w hashed: a feature)
    from dask_ps.io import infer_encoder

    enc = infer_encoder(csv, "click", n_features=64)
    assert "w" in enc.columns and encoder.shape[1] == 64
    with pytest.raises(ValueError, match="weight column 'w' is a feature of the encoder"):
        read_ctr(csv, enc, label="click", weight="w")


def test_encode_ctr_weights_equal_read_ctr_of_the_same_rows(tmp_path):
    import dask.dataframe as dd

    from dask_ps.io import encode_ctr

    df = _frame(500, seed=3)
    df.to_csv(tmp_path / "t.csv", index=False)
    X0, y0, w0 = read_ctr(str(tmp_path / "t.csv"), label="click", weight="w", n_features=128)
    for frame in (df, dd.from_pandas(df, npartitions=3)):
        X, y, w = encode_ctr(frame, label="click", weight="w", n_features=128)
        assert w.chunks == (X.chunks[0],) and w.dtype == np.float64
        assert (X.compute() != X0.compute()).nnz == 0  # w is not hashed, by either
        np.testing.assert_array_equal(y.compute(), y0.compute())
        np.testing.assert_array_equal(w.compute(), w0.compute())


def test_encode_ctr_refuses_a_bad_weight_column_as_read_ctr_does():
    from dask_ps.io import encode_ctr
    from dask_ps.io.hashing import HashingEncoder

    df = _frame(10)
    with pytest.raises(DataError, match="weight column 'click' is the label column"):
        encode_ctr(df, label="click", weight="click")
    with pytest.raises(DataError, match="^dataframe: weight column 'nope' is not among"):
        encode_ctr(df, label="click", weight="nope")
    enc = HashingEncoder(numeric=["price", "w"], categorical=["shop"], n_features=64)
    with pytest.raises(ValueError, match="weight column 'w' is a feature of the encoder"):
        encode_ctr(df, enc, label="click", weight="w")
    df.loc[6, "w"] = -1.5
    with pytest.raises(DataError, match=r"^partition 0: weight column 'w' holds -1.5, a "
                       r"negative number in row 7: sample weights must"):
        encode_ctr(df, label="click", weight="w", n_features=64)[2].compute()
