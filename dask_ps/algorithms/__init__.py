"""Algorithms written against the PSModel API, as scikit-learn estimators."""

from .lda import LatentDirichletAllocation
from .logistic import LogisticRegression
from .mf import MatrixFactorization

__all__ = ["LatentDirichletAllocation", "LogisticRegression", "MatrixFactorization"]
