"""Algorithms written against the PSModel API, as scikit-learn estimators."""

from .gbdt import GBDTClassifier, GBDTRegressor
from .logistic import LogisticRegression
from .mf import MatrixFactorization

__all__ = ["GBDTClassifier", "GBDTRegressor", "LogisticRegression", "MatrixFactorization"]
