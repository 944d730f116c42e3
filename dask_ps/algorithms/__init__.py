"""Algorithms written against the PSModel API, as scikit-learn estimators."""

from .fm import FactorizationMachineClassifier
from .lda import LatentDirichletAllocation
from .logistic import LogisticRegression
from .mf import MatrixFactorization
from .online import learn_online

__all__ = ["FactorizationMachineClassifier", "LatentDirichletAllocation", "LogisticRegression",
           "MatrixFactorization", "learn_online"]
