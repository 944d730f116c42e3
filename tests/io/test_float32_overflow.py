"""A value finite in float64 but beyond float32's range, read into float32 X (the readers'
default dtype): refused at read time, naming the file, the line (or row) and the value,
rather than cast to inf with NumPy's "overflow encountered in cast" alone."""

from __future__ import annotations

import re
import warnings

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dask_ps.io import read_ldac, read_libsvm
from dask_ps.io.parquet import read_sparse_parquet


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _read_all(*args, **kwargs):
    return dask.compute(*read_libsvm(*args, **kwargs))


@pytest.mark.parametrize("kwargs", [{}, {"n_features": 12, "zero_based": False}])
def test_libsvm_value_beyond_float32_names_file_line_index_value_and_dtype(tmp_path, kwargs):
    """Found on the line that holds it among several blocks, in the first pass (width or
    base unknown) or when the blocks are parsed; float64 and float32's largest are read."""
    path = tmp_path / "big.svm"
    lines = [b"-1 1:2 3:1 7:-4 11:3\n"] * 400
    lines[189] = b"1 1:3 2:1e39 5:1\n"
    path.write_bytes(b"".join(lines))
    advice = "; scale the feature, or read with dtype=numpy.float64"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "overflow encountered in cast" on the way
        with pytest.raises(ValueError) as info:
            _read_all(path, blocksize=2048, **kwargs)
    assert str(info.value) == (
        f"{path}, line 190: value 1e+39 of feature index 2 is too large for float32 (X's "
        f"dtype: at most 3.4028235e+38 in magnitude): '2:1e39'{advice}")
    lines[189] = b"1 1:3 2:1 5:-3.4028236e38\n"  # rounds beyond float32's largest
    path.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=re.escape("line 190: value -3.4028236e+38 of feature "
                                                   "index 5 is too large for float32")):
        _read_all(path, **kwargs)
    with pytest.raises(ValueError, match=r"line 190: .* too large for complex64"):
        _read_all(path, dtype=np.complex64, **kwargs)
    X, _ = _read_all(path, dtype=np.float64, **kwargs)
    assert X[189, 4] == -3.4028236e38
    lines[189] = b"3e39 1:3 2:1 5:-3.4028235e38\n"  # rounds to float32's largest; a label
    path.write_bytes(b"".join(lines))                 # is float64
    X, y = _read_all(path, **kwargs)
    assert X.dtype == np.float32 and X[189, 4] == -np.finfo(np.float32).max
    assert y[189] == 3e39 and np.isfinite(X.data).all()


def test_libsvm_infinite_value_is_still_not_a_finite_number(tmp_path):
    path = tmp_path / "inf.svm"
    path.write_bytes(b"1 1:1e39 2:1e999\n")  # the first error of the line is named
    with pytest.raises(ValueError, match=r"line 1: value 1e\+39 of feature index 1 is too large"):
        _read_all(path)
    path.write_bytes(b"1 1:1e999 2:1e39\n")
    with pytest.raises(ValueError, match=r"line 1: value is not a finite number: '1:1e999'"):
        _read_all(path)


def test_ldac_count_beyond_float32_is_refused(tmp_path):
    path = tmp_path / "corpus.dat"
    lines = ["2 0:1 3:2"] * 60
    lines[44] = "2 0:1 3:1e39"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        read_ldac(path, ["a", "b", "c", "d", "e"], blocksize=100)
    assert str(info.value) == (f"{path}, line 45: count 1e+39 of term 3 is too large for "
                               f"float32 (X's dtype: at most 3.4028235e+38); read with "
                               f"dtype=numpy.float64")
    X, _ = read_ldac(path, ["a", "b", "c", "d", "e"], dtype=np.float64)
    assert X.compute()[44, 3] == 1e39


def test_docword_count_beyond_int64_is_refused_not_wrapped(tmp_path):
    """A count of 1e39 became -9.2e18 (the cast to int64) with "invalid value encountered
    in cast" only."""
    from dask_ps.io import read_docword

    path = tmp_path / "docword.txt"
    path.write_text("2\n3\n2\n1 1 1e39\n2 2 3\n")
    with pytest.raises(ValueError) as info:
        read_docword(path)
    assert str(info.value) == f"{path}, line 4: count 1e+39 is not a positive integer of " \
                              f"at most 2**53"


def test_sparse_parquet_value_beyond_float32_or_infinite_is_refused(tmp_path):
    path = tmp_path / "sp.parquet"
    for values, message in [([[0.5], [2.0, 1e39]], "value 1e+39 of feature index 2 is too "
                             "large for float32 (X's dtype: at most 3.4028235e+38 in "
                             "magnitude); scale the feature, or read with dtype=numpy.float64"),
                            ([[0.5], [np.inf, 1.0]], "value inf of feature index 1 is not "
                             "finite")]:
        pq.write_table(pa.table({
            "label": [1.0, 0.0], "indices": pa.array([[0], [1, 2]], pa.list_(pa.int64())),
            "values": pa.array(values, pa.list_(pa.float64()))}), path)
        X, _ = read_sparse_parquet(path, n_features=3)
        with pytest.raises(ValueError) as info:
            X.compute()
        assert str(info.value) == f"{path}, row group 1, row 2: {message}"
    X, _ = read_sparse_parquet(path, n_features=3, dtype=np.float64)
    with pytest.raises(ValueError, match="value inf of feature index 1 is not finite"):
        X.compute()
