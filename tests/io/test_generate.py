"""make_ctr / write_ctr / read_sparse_parquet: the CTR-like benchmark data."""

from __future__ import annotations

import doctest

import dask
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

import dask_ps.io.generate as generate_module
from dask_ps import LogisticRegression
from dask_ps.cluster import worker_info
from dask_ps.io import make_ctr, planted_coef, read_libsvm, read_sparse_parquet, write_ctr

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def test_deterministic_per_seed():
    a = dask.compute(*make_ctr(3000, 2**16, chunk_rows=1000, random_state=5))
    b = dask.compute(*make_ctr(3000, 2**16, chunk_rows=1000, random_state=5))
    c = dask.compute(*make_ctr(3000, 2**16, chunk_rows=1000, random_state=6))
    assert (a[0] != b[0]).nnz == 0 and np.array_equal(a[1], b[1])
    assert (a[0] != c[0]).nnz > 0
    X = a[0]
    assert isinstance(X, sp.csr_matrix) and X.has_canonical_format and X.dtype == np.float32
    assert X.indices.dtype == np.int32


def test_statistics_match_the_issue_ctr_set():
    """What benchmarks/lr_peers.py needs: 20-40 non-zeros per row, power-law (Zipf-like)
    feature frequencies, labels drawn from the planted logistic model."""
    n, d = 40_000, 2**20
    X, y = dask.compute(*make_ctr(n, d, chunk_rows=10_000))
    assert 20 <= X.nnz / n <= 40
    f = np.sort(np.bincount(X.indices, minlength=d))[::-1]
    # frequency against rank on log-log axes: a straight line of slope about -1, at the head
    # and further down the tail alike
    for lo, hi in ((10, 1000), (100, 10_000)):
        slope = np.log(f[hi] / f[lo]) / np.log(hi / lo)
        assert -1.4 < slope < -0.8, (lo, hi, slope)
    p = 1 / (1 + np.exp(-(X @ planted_coef(np.arange(d)) - 1.0)))
    assert abs(y.mean() - p.mean()) < 0.01 and 0.05 < y.mean() < 0.95


def test_planted_model_is_learnable():
    X, y = dask.compute(*make_ctr(30_000, 2**14, chunk_rows=10_000, random_state=1))
    n = 24_000
    oracle = roc_auc_score(y[n:], X[n:] @ planted_coef(np.arange(2**14), 1))
    model = LogisticRegression(client="local", max_iter=5, random_state=0).fit(X[:n], y[:n])
    auc = roc_auc_score(y[n:], model.predict_proba(X[n:])[:, 1])
    assert oracle > 0.8 and auc > oracle - 0.08, (auc, oracle)


def test_written_on_the_workers_and_read_back(tmp_path, client2):
    X, y = dask.compute(*make_ctr(5000, 2**18, chunk_rows=2000, random_state=3))
    client2.get_task_stream(start=0)  # clear
    for fmt in ("parquet", "libsvm"):
        with dask.config.set(scheduler=client2.get):
            out = write_ctr(str(tmp_path / fmt), 5000, 2**18, format=fmt, chunk_rows=2000,
                            random_state=3)
        assert [o[0] for o in out] == [2000, 2000, 1000]
        assert sum(o[1] for o in out) == X.nnz
    workers = set(worker_info(client2))
    done = [t for t in client2.get_task_stream() if "write_chunk" in t["key"]]
    assert len(done) == 6 and {t["worker"] for t in done} <= workers
    A, a = dask.compute(*read_sparse_parquet(str(tmp_path / "parquet" / "*.parquet")))
    assert A.shape == X.shape and (A != X).nnz == 0 and np.array_equal(a, y)
    B, b = dask.compute(*read_libsvm(str(tmp_path / "libsvm" / "*.svm"), n_features=2**18,
                                     zero_based=False))
    assert (B != X).nnz == 0 and np.array_equal(b, y)


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="n_samples"):
        make_ctr(0)
    with pytest.raises(ValueError, match="zipf"):
        make_ctr(10, zipf=1.0)
    with pytest.raises(ValueError, match="format"):
        write_ctr(str(tmp_path), 10, format="csv")
    (tmp_path / "other.parquet").write_bytes(b"")
    import pandas as pd

    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(ValueError, match="needs the columns label, indices and values"):
        read_sparse_parquet(tmp_path / "other.parquet")


def test_a_feature_index_out_of_range_names_file_row_group_and_row(tmp_path):
    """A key beyond n_features (or negative) in a Parquet file: an error naming the file, the
    row group and the row, not scipy's anonymous "column index exceeds matrix dimensions"."""
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    from dask_ps.io.parquet import sparse_to_table

    X = sp.csr_matrix(np.array([[1, 0, 0], [0, 2, 0], [0, 0, 3]], dtype=np.float32))
    pq.write_table(sparse_to_table(X, np.array([0.0, 1.0, 0.0])), tmp_path / "a.parquet")
    A, a = dask.compute(*read_sparse_parquet(str(tmp_path / "a.parquet")))
    assert A.indices.dtype == np.int32 and (A != X).nnz == 0  # read as written
    with pytest.raises(ValueError, match=r"a\.parquet, row group 1, row 3: feature index 2 "
                                         r"is outside \[0, n_features=2\)"):
        dask.compute(*read_sparse_parquet(str(tmp_path / "a.parquet"), n_features=2))


def test_docstring_examples():
    result = doctest.testmod(generate_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
