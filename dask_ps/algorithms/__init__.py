"""Algorithms written against the PSModel API, as scikit-learn estimators."""

from .logistic import LogisticRegression
from .mf import MatrixFactorization

__all__ = ["LogisticRegression", "MatrixFactorization"]
