"""GBDTClassifier and GBDTRegressor under scikit-learn's estimator checks (in-process shards)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from dask_ps import GBDTClassifier, GBDTRegressor

pytestmark = pytest.mark.timeout(300)


@parametrize_with_checks([
    GBDTClassifier(n_estimators=5, max_leaf_nodes=7, min_samples_leaf=1, client="local",
                   random_state=0),
    GBDTRegressor(n_estimators=5, max_leaf_nodes=7, min_samples_leaf=1, client="local",
                  random_state=0),
])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)
