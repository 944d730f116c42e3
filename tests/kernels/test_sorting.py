"""The sorting kernels against NumPy: one helper for the sorted distinct keys, used by every
algorithm that needs them (L-BFGS's active columns, MF's item keys)."""

import numpy as np
import pytest

from dask_ps.kernels.sorting import unique_sorted


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 1000])
def test_unique_sorted_is_numpys_unique(dtype, n):
    x = np.random.default_rng(n).integers(0, max(1, n // 3), n).astype(dtype)
    before = x.copy()
    got = unique_sorted(x)
    np.testing.assert_array_equal(got, np.unique(x))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(x, before)  # the input is left as it was


def test_the_algorithms_share_one_helper():
    """L-BFGS and MF import the one helper instead of keeping private copies."""
    from dask_ps.algorithms import _lbfgs, _mf_steps

    assert _lbfgs.unique_sorted is unique_sorted and _mf_steps.unique_sorted is unique_sorted
    assert not hasattr(_lbfgs, "_distinct") and not hasattr(_mf_steps, "_unique_sorted")
