"""Algorithms written against the PSModel API, as scikit-learn estimators."""

from .fm import FactorizationMachineClassifier
from .gbdt import GBDTClassifier, GBDTRegressor
from .lda import LatentDirichletAllocation
from .logistic import LogisticRegression
from .mf import MatrixFactorization
from .online import learn_online

__all__ = ["FactorizationMachineClassifier", "GBDTClassifier", "GBDTRegressor",
           "LatentDirichletAllocation", "LogisticRegression",
           "MatrixFactorization", "learn_online"]
