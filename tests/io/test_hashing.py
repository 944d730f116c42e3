"""HashingEncoder: the one encoding rule of CTR tables (no cluster)."""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dask_ps.io.hashing as hashing_module
from dask_ps.io import HashingEncoder
from dask_ps.io import _hashing_kernels as _hk

MASK = 2**64 - 1


def twin_mix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def twin_bytes(data: bytes, seed: int) -> int:
    h = 0xCBF29CE484222325 ^ seed
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK
    return twin_mix64(h)


def twin_row(enc: HashingEncoder, row: dict) -> dict:
    """Pure-Python twin of HashingEncoder on one row: {index: value}."""
    out: dict = {}
    for name in enc.columns:
        seed = twin_bytes(name.encode(), enc.seed)
        missing = twin_mix64(seed ^ 0x6D697373696E67)
        v = row.get(name)
        value = 1.0
        if name in enc.numeric:
            ok = v is not None and math.isfinite(v)
            if not ok:
                h = missing
            elif enc.numeric_mode == "value":
                h, value = twin_mix64(seed ^ 0x76616C7565), v
            else:
                code = 3 + math.floor(math.log(v) ** 2) if v > 2 else math.floor(v)
                h = twin_mix64(twin_mix64(code & MASK) ^ seed)
        else:
            h = twin_bytes(v.encode(), seed) if v else missing
        j = h % enc.n_features
        out[j] = out.get(j, 0.0) + value
    return out


ROWS = [
    {"a": 0.0, "b": 2.0, "c": "x", "d": "Zürich"},
    {"a": -1.0, "b": 3.0, "c": "", "d": "y"},
    {"a": None, "b": 1e6, "c": None, "d": "a much longer category value"},
    {"a": 2.5, "b": float("nan"), "c": "x", "d": "x"},
    {"a": 7.0, "b": 150.0, "c": "12345678", "d": "x"},
]


@pytest.mark.parametrize("mode", ["log_bucket", "value"])
@pytest.mark.parametrize("n_features", [7, 2**20, 2**40])
def test_matches_pure_python_twin(mode, n_features):
    enc = HashingEncoder(numeric=["a", "b"], categorical=["c", "d"], n_features=n_features,
                         numeric_mode=mode, seed=17)
    X = enc.transform(pd.DataFrame(ROWS), dtype=np.float64)
    assert X.shape == (len(ROWS), n_features) and X.has_canonical_format
    for i, row in enumerate(ROWS):
        got = dict(zip(X[i].indices.tolist(), X[i].data.tolist()))
        assert got == twin_row(enc, row), i


@pytest.mark.parametrize("n_columns", [40, 70])  # rows sorted by rank, or by buckets
@pytest.mark.parametrize("n_features", [7, 2**20])
def test_wide_rows_match_the_twin(n_columns, n_features):
    rng = np.random.default_rng(n_columns)
    names = [f"c{i}" for i in range(n_columns)]
    enc = HashingEncoder(categorical=names, n_features=n_features, seed=2)
    rows = [{c: str(rng.integers(0, 50)) if rng.random() < 0.9 else "" for c in names}
            for _ in range(30)]
    X = enc.transform(pd.DataFrame(rows))
    assert X.has_canonical_format
    for i, row in enumerate(rows):
        got = dict(zip(X[i].indices.tolist(), X[i].data.tolist()))
        assert got == twin_row(enc, row), i


@pytest.mark.parametrize("m", [0, 1, 2, 31, 32, 64])
def test_sort_distinct_sorts(m):
    keys = np.random.default_rng(m).choice(2**40, m, replace=False).astype(np.uint64)
    out = np.zeros(m, np.uint64)
    _hk.sort_distinct(keys, m, out)
    np.testing.assert_array_equal(out, np.sort(keys))


def test_equal_rows_equal_features_in_any_batch_and_input_type():
    enc = HashingEncoder.criteo(n_features=2**18)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({**{f"I{i}": rng.integers(-1, 1000, 200).astype(float)
                          for i in range(1, 14)},
                       **{f"C{i}": rng.choice(["a", "b", "", "c8f2e1"], 200)
                          for i in range(1, 27)}})
    X = enc.transform(df)
    parts = [enc.transform(pa.Table.from_pandas(df.iloc[a:b])) for a, b in [(0, 1), (1, 77),
                                                                              (77, 200)]]
    import scipy.sparse as sp

    assert (sp.vstack(parts) != X).nnz == 0
    assert (enc.transform(df.iloc[::-1]) != X[::-1]).nnz == 0


def test_each_column_gives_one_feature_and_collisions_sum():
    enc = HashingEncoder(numeric=["n"], categorical=["c", "d"], n_features=1)
    X = enc.transform(pd.DataFrame({"n": [1.0], "c": ["p"], "d": [None]}))
    assert X.toarray().tolist() == [[3.0]]


def test_json_round_trip_and_seed_changes_hashes():
    enc = HashingEncoder.criteo(n_features=1000, numeric_mode="value", seed=3)
    text = enc.to_json()
    assert json.loads(text)["kind"] == "HashingEncoder"
    assert HashingEncoder.from_json(text) == enc
    df = pd.DataFrame({c: ["v"] if c.startswith("C") else [5.0] for c in enc.columns})
    other = HashingEncoder.criteo(n_features=1000, numeric_mode="value", seed=4)
    assert (enc.transform(df) != other.transform(df)).nnz > 0
    with pytest.raises(ValueError, match="not the JSON of a HashingEncoder"):
        HashingEncoder.from_json('{"numeric": ["a"]}')


def test_errors():
    with pytest.raises(ValueError, match="numeric_mode"):
        HashingEncoder(numeric=["a"], numeric_mode="raw")
    with pytest.raises(ValueError, match="at least one"):
        HashingEncoder()
    with pytest.raises(ValueError, match="'a' is listed twice"):
        HashingEncoder(numeric=["a"], categorical=["a"])
    with pytest.raises(ValueError, match="n_features"):
        HashingEncoder(numeric=["a"], n_features=0)
    enc = HashingEncoder(numeric=["a"], categorical=["b"])
    with pytest.raises(ValueError, match="part 3: column 'b' is missing"):
        enc.transform(pd.DataFrame({"a": [1.0]}), where="part 3")
    with pytest.raises(ValueError, match="numeric column 'a'"):
        enc.transform(pd.DataFrame({"a": ["x"], "b": ["y"]}))
    with pytest.raises(TypeError, match="pyarrow Table or a pandas DataFrame"):
        enc.transform([[1, 2]])


def test_a_single_string_is_one_column_and_one_pair_one_cross():
    """HashingEncoder(numeric="price") took the characters p, r, i, c, e as columns;
    crosses=("shop", "city") failed with "too many values to unpack"."""
    enc = HashingEncoder(numeric="price", categorical="shop", crosses=("price", "shop"))
    assert enc.numeric == ("price",) and enc.categorical == ("shop",)
    assert enc.crosses == (("price", "shop"),)
    assert enc == HashingEncoder(numeric=["price"], categorical=["shop"],
                                 crosses=[("price", "shop")])
    assert HashingEncoder.from_json(enc.to_json()) == enc
    with pytest.raises(ValueError, match=r"cross \('shop', 'citty'\): 'citty' is not a listed "
                                         r"column \(they are \['price', 'shop'\]\)"):
        HashingEncoder(numeric="price", categorical="shop", crosses=[("shop", "citty")])
    with pytest.raises(ValueError, match="must be pairs of column names"):
        HashingEncoder(categorical=["a", "b", "c"], crosses=[("a", "b", "c")])
    with pytest.raises(TypeError, match="numeric must be a column name or a list"):
        HashingEncoder(numeric=3)


def test_docstring_examples():
    result = doctest.testmod(hashing_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
