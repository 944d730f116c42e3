"""The examples in the docstrings run and print what they say."""

import doctest

import pytest

import dask_ps.checkpointing
import dask_ps.io.libsvm
import dask_ps.model


@pytest.mark.parametrize("module", [dask_ps.model, dask_ps.io.libsvm, dask_ps.checkpointing])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
