"""The examples in the docstrings run and print what they say."""

import doctest

import pytest

import dask_ps.algorithms.fm
import dask_ps.algorithms.lda
import dask_ps.io.ids
import dask_ps.io.libsvm
import dask_ps.io.ratings
import dask_ps.model.checkpoint
import dask_ps.model.core
import dask_ps.partitions.placing

MODULES = [dask_ps.algorithms.fm, dask_ps.algorithms.lda, dask_ps.model.core,
           dask_ps.model.checkpoint, dask_ps.io.ids, dask_ps.io.libsvm,
           dask_ps.io.ratings, dask_ps.partitions.placing]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    """Run in this process's threads: a distributed client left as the default by an earlier
    test of the same process (a cluster whose workers have no ``memory://`` files) would
    otherwise compute the examples' dask collections (seen once: the ``memory://`` examples
    of io.libsvm and io.ratings failed after HPC tests, and passed on rerun)."""
    import dask

    with dask.config.set(scheduler="threads"):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_help_shows_the_history_fields_not_a_private_pointer():
    """``help(LogisticRegression)`` and ``help(MatrixFactorization)`` hold the fields of
    ``history_`` (they pointed at a private function, ``_base.history_fields``)."""
    import dask_ps

    for cls in (dask_ps.LogisticRegression, dask_ps.MatrixFactorization,
                dask_ps.GBDTClassifier, dask_ps.GBDTRegressor):
        doc = cls.__doc__
        assert "history_fields" not in doc, cls.__name__
        assert "``epoch_time``" in doc, cls.__name__
    for cls in (dask_ps.LogisticRegression, dask_ps.MatrixFactorization):
        assert "(seconds since the fit started" in cls.__doc__, cls.__name__
