"""Data readers into dask arrays of scipy.sparse CSR blocks: LIBSVM/svmlight, CTR tables with
hashed features, bag-of-words and raw text, rating triples, sparse Parquet; and a CTR-like data
generator."""

from .bow import read_docword, read_ldac, read_vocabulary
from .ctr import encode_ctr, read_ctr
from .generate import make_ctr, planted_coef, write_ctr
from .hashing import HashingEncoder
from .libsvm import read_libsvm
from .parquet import read_sparse_parquet
from .ratings import IdMapping, encode_ratings, read_ratings
from .text import read_text, tokenize

__all__ = ["HashingEncoder", "IdMapping", "encode_ctr", "encode_ratings", "make_ctr",
           "planted_coef", "read_ctr", "read_docword", "read_ldac", "read_libsvm",
           "read_ratings", "read_sparse_parquet", "read_text", "read_vocabulary", "tokenize",
           "write_ctr"]
