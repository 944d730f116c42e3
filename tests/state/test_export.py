"""PSModel.export's narrowing casts: one cast per value (the writer's); the range check before
it compares the values with the dtype's overflow limit instead of casting them too."""

import tracemalloc

import numpy as np
import pytest
import zarr

from dask_ps import PSModel
from dask_ps.model.export import _SCAN_ROWS, _overflow, overflow_limit

pytestmark = pytest.mark.timeout(120)


def _by_cast(values, dtype):
    """(count, largest magnitude) of the finite values a cast to ``dtype`` makes infinite."""
    with np.errstate(over="ignore"):
        bad = np.isinf(values.astype(dtype)) & np.isfinite(values)
    return int(bad.sum()), float(np.abs(values[bad]).max()) if bad.any() else 0.0


@pytest.mark.parametrize("source, target", [("float64", "float16"), ("float32", "float16"),
                                            ("float64", "float32"), ("int64", "float16"),
                                            ("int32", "float16")])
def test_the_range_check_finds_what_the_cast_makes_infinite(source, target):
    """The limit sits where the cast starts to round to infinity (float16: 65519.99 is
    written as 65504, 65520 as inf); NaN and infinities are not counted."""
    limit = overflow_limit(np.dtype(target))
    rng = np.random.default_rng(0)
    if np.dtype(source).kind == "f":
        edge = np.array([limit, np.nextafter(limit, 0), np.nextafter(limit, np.inf)])
        edge = np.concatenate([edge, -edge, [np.nan, np.inf, -np.inf, 0.0]])
        with np.errstate(over="ignore"):  # a float32 source rounds the edges as it holds them
            spread = rng.normal(0, limit / 3, 5000)
        values = np.concatenate([edge, spread]).astype(source)
    else:
        values = np.concatenate([[65519, 65520, 65521, -65520, -65519],
                                 rng.integers(-70000, 70000, 5000)]).astype(source)
    values = values.reshape(-1, 1)
    found = _overflow(None, values, None, limit)
    assert found == _by_cast(values, np.dtype(target))
    assert found[0] > 0


def test_the_range_check_does_not_cast_the_values():
    """It cast each chunk of rows to the target dtype (a second cast: the writer casts
    again), then tested the cast for infinities: 4 bytes of temporaries per value for
    float16 (3 for float32); two masks now, 2 bytes per value."""
    values = np.random.default_rng(0).normal(0, 100, (2 * _SCAN_ROWS, 8)).astype(np.float32)
    values[-1, -1] = 1e5
    _overflow(None, values[:10], None, overflow_limit(np.float16))  # imports, caches
    tracemalloc.start()
    found = _overflow(None, values, None, overflow_limit(np.float16))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert found == (1, 1e5)
    assert peak < 2.5 * _SCAN_ROWS * values.shape[1]


def test_an_export_writes_each_value_cast_once_and_right(tmp_path):
    """The exported float16 values are the table's cast by NumPy (the one cast), up to the
    edge of float16's range (and below its subnormals); one beyond it is refused and
    nothing is written."""
    model = PSModel("local", n_shards=2)
    edge = [65519.99, -65519.0, 65504.0, 1 / 3, 1e-8, -2.5e-7, 0.0]
    model.add_table("w", (len(edge), 2), "float64", optimizer="add")
    values = np.column_stack([edge, np.arange(len(edge)) * 0.1])
    model.push("w", np.arange(len(edge)), values)
    model.export(str(tmp_path / "ok"), dtype="float16")
    out = zarr.open_group(str(tmp_path / "ok"), mode="r")["w"][:]
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, values.astype(np.float16))
    assert out[0, 0] == 65504 and out[1, 0] == -65504
    model.push("w", [2], np.array([[16.0, 0.0]]))  # 65504 + 16 = 65520: inf
    with pytest.raises(ValueError, match=r"table 'w' holds 1 value beyond float16's range "
                                         r"\(largest magnitude 65520"):
        model.export(str(tmp_path / "bad"), dtype="float16")
    assert not (tmp_path / "bad").exists()
    model.close()
