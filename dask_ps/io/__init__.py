"""Data readers into dask arrays of scipy.sparse CSR blocks: LIBSVM/svmlight, CTR tables with
hashed features, bag-of-words and raw text, rating triples, sparse Parquet; and generators of
CTR-like data.

Missing values and infinities: one rule for every reader of feature values
------------------------------------------------------------------------------
* **Missing is absent where the model allows it.** A missing feature value — an empty field,
  a null, or NaN (``nan`` in text, any case and sign) — is left out: LIBSVM drops the pair
  (``3:nan`` is as if ``3:`` were not written); a CTR table's column gives its "missing"
  feature (:class:`HashingEncoder`, the token that stands for "no value" of that column).
* **Infinity is always an error**: ``inf``, ``-Infinity``, or a number too large for float64
  (``1e400``), naming the file and line (text), or the file, row group or partition and row
  (tables), and the column or token.
* **Labels are required**: a missing, NaN or infinite label is an error, named the same way.
* Readers whose numbers are counts or ratings (:func:`read_docword`, :func:`read_ldac`,
  :func:`read_ratings`) refuse NaN too: there a value cannot be left out of its row.
"""

from .bow import read_docword, read_ldac, read_vocabulary
from .ctr import encode_ctr, infer_encoder, read_ctr
from .generate import make_ctr, planted_coef, write_ctr
from .generate_table import PlantedCTR, make_ctr_table, write_ctr_table
from .hashing import HashingEncoder
from .ids import IdMapping
from .libsvm import read_libsvm
from .parquet import read_sparse_parquet
from .ratings import encode_ratings, read_ratings
from .text import read_text, tokenize

__all__ = ["HashingEncoder", "IdMapping", "PlantedCTR", "encode_ctr", "encode_ratings",
           "infer_encoder", "make_ctr", "make_ctr_table", "planted_coef", "read_ctr",
           "read_docword", "read_ldac", "read_libsvm", "read_ratings", "read_sparse_parquet",
           "read_text", "read_vocabulary", "tokenize", "write_ctr", "write_ctr_table"]
