"""Algorithms written against the PSModel API, as scikit-learn estimators."""

from .logistic import LogisticRegression

__all__ = ["LogisticRegression"]
