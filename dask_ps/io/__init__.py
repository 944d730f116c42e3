"""Data readers: LIBSVM/svmlight text into dask arrays of scipy.sparse CSR blocks."""

from .libsvm import read_libsvm

__all__ = ["read_libsvm"]
