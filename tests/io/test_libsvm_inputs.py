"""Tests of dask_ps.io.libsvm.read_libsvm_inputs: several LIBSVM inputs (training and test
data) read with one index base and one width, as sklearn's load_svmlight_files reads files
(no cluster: dask's synchronous scheduler)."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_files

from dask_ps.exceptions import DataError
from dask_ps.io.libsvm import read_libsvm_inputs


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _write(path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def pair(tmp_path):
    """A one-based training file (largest index 4) and a test file reaching index 9."""
    train = _write(tmp_path / "tr.svm", ["1 1:0.5 4:1", "-1 2:2", "1 3:1.5 4:0.25"])
    test = _write(tmp_path / "te.svm", ["-1 2:1 9:3", "1 1:1"])
    return train, test


def test_the_width_is_the_largest_index_of_all_inputs_as_sklearn(pair):
    """read alone, the training file is 4 wide and the test file refused (index 9 beyond
    it) or 9 wide: read together both are 9 wide, and equal to load_svmlight_files'."""
    (X, y), (Xt, yt) = read_libsvm_inputs([(p, None) for p in pair])[0]
    ref = load_svmlight_files(list(pair), zero_based=False)
    assert X.shape == (3, 9) and Xt.shape == (2, 9)
    for got, want in zip((X, y, Xt, yt), ref):
        got = got.compute()
        np.testing.assert_array_equal(got.toarray() if sp.issparse(got) else got,
                                      want.toarray() if sp.issparse(want) else want)


def test_the_base_is_decided_by_all_inputs_by_default_or_by_the_first(tmp_path, pair):
    """Index 0 in the test file only: over all inputs (sklearn's "auto") every input is
    zero-based; with base_inputs=1 the training file decides (one-based) and the test
    file's 0 is refused, naming file, line, token and the caller's note."""
    train, _ = pair
    test = _write(tmp_path / "tz.svm", ["-1 2:1", "1 0:1 5:1"])
    read, base = read_libsvm_inputs([(train, None), (test, None)])
    assert base == 0 and read[0][0].shape == (3, 6)
    np.testing.assert_array_equal(read[0][0].compute().toarray()[0], [0, .5, 0, 0, 1, 0])
    with pytest.raises(DataError) as info:
        read_libsvm_inputs([(train, None), (test, None)], base_inputs=1,
                           notes={"zero": "the training data is one-based"})
    assert str(info.value) == (f"{test}, line 2: feature index 0 in one-based input "
                               f"(zero_based=False): '0:1' (the training data is one-based)")
    # a zero-based training file: the test file is read zero-based too
    zero = _write(tmp_path / "z.svm", ["1 0:1 3:1", "-1 1:1"])
    read, base = read_libsvm_inputs([(zero, None), (pair[1], None)], base_inputs=1)
    assert base == 0 and read[1][0].shape == (2, 10)
    assert read[1][0].compute().toarray()[1, 1] == 1


def test_scan_refuses_an_index_beyond_a_known_width_now_with_the_note(pair):
    """Base and width known: the first pass only counts rows, and an index beyond the
    width is found when the arrays are computed; scan=True finds it now, and the message
    says the caller's note on where the width comes from."""
    _, test = pair
    read, _ = read_libsvm_inputs([(test, None)], 4, False)  # no error yet
    with pytest.raises(DataError, match="beyond n_features=4"):
        read[0][0].compute()
    with pytest.raises(DataError) as info:
        read_libsvm_inputs([(test, None)], 4, False, scan=True,
                           notes={"width": "the model's width"})
    assert str(info.value) == (f"{test}, line 1: feature index beyond n_features=4 "
                               f"(one-based): '9:3' (the model's width)")


def test_blocks_of_every_input_keep_their_own_line_numbers(tmp_path):
    """Several blocks per input (a small blocksize): an error in the second input is named
    by its line in that file, not counted on from the first input's lines."""
    lines = [f"{i % 2} {1 + i % 7}:1" for i in range(40)]
    train = _write(tmp_path / "a.svm", lines)
    test = _write(tmp_path / "b.svm", lines[:25] + ["1 3:x"] + lines[:5])
    with pytest.raises(DataError, match=rf"^{test}, line 26: value is not a finite number"):
        read_libsvm_inputs([(train, 64), (test, 64)])
    (X, _), (Xt, _) = read_libsvm_inputs([(train, 64), (train, 100)])[0]
    assert X.numblocks[0] > Xt.numblocks[0] > 1
    np.testing.assert_array_equal(X.compute().toarray(), Xt.compute().toarray())


def test_where_names_the_first_index_0_that_made_auto_read_zero_based(tmp_path, pair):
    """One stray index 0 in a one-based file reads it all zero-based (every feature shifted
    by one), as sklearn does; ``where`` says which line did it (the first pass noted it)."""
    train, _ = pair
    lines = [f"{1 - 2 * (i % 2)} {i % 7 + 1}:1 9:2" for i in range(40)]
    lines[11] = "1 3:1 # 0:1 in a comment is no index"
    lines[22] = "-1 # a comment line"
    lines[30] = "1 2:nan 5:1 0:1"  # line 31, in a later block
    stray = _write(tmp_path / "stray.svm", lines + ["1 0:2"])
    where = {}  # an integer dtype: its first pass stores the blocks, and notes no line
    assert read_libsvm_inputs([(stray, 100)], dtype=np.int8, where=where)[1] == 0
    assert where == {"zero": (stray, 31)}
    for n_features in (None, 12):
        where = {}
        _, base = read_libsvm_inputs([(stray, 100), (train, None)], n_features,
                                     where=where)
        assert base == 0 and where == {"zero": (stray, 31)}
        where = {}  # decided by the first input, index 0 in the second only
        _, base = read_libsvm_inputs([(train, None), (stray, 100)], n_features,
                                     base_inputs=0, where=where)
        assert base == 0 and where == {"zero": (stray, 31)}
    where = {}  # one-based, or zero-based as asked: nothing to say
    assert read_libsvm_inputs([(train, None)], where=where)[1] == 1 and where == {}
    assert read_libsvm_inputs([(stray, 100)], zero_based=True, where=where)[1] == 0
    assert where == {}
