"""One global rule that turns table rows (numeric and categorical columns) into hashed sparse
features: the :class:`HashingEncoder`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from ..exceptions import DataError
from . import _hashing_kernels as _k
from .parquet import check_finite

__all__ = ["HashingEncoder"]

NUMERIC_MODES = ("log_bucket", "value")
_MISSING = 0x6D697373696E67  # "missing": the token of an empty field, mixed with the column's seed
_VALUE = 0x76616C7565  # "value": the one feature of a numeric column in "value" mode


def _column_seed(name: str, seed: int) -> np.uint64:
    buf = np.frombuffer(name.encode("utf-8"), np.uint8)
    return np.uint64(_k.hash_bytes(buf, 0, buf.shape[0], np.uint64(seed)))


def index_dtype(n_features: int, nnz: int) -> np.dtype:
    """int32 when ``n_features`` and ``nnz`` allow, else int64: the readers' CSR indices."""
    return np.dtype(np.int32 if max(n_features, nnz) <= np.iinfo(np.int32).max else np.int64)


def csr_rows(tokens: np.ndarray, values: np.ndarray, n_features: int,
             indptr: np.ndarray | None = None, nnz: int | None = None) -> sp.csr_matrix:
    """A canonical CSR matrix (sorted indices, repeats summed) of ``tokens % n_features``
    (uint64, (n, k)) with ``values`` (n, k) in the output dtype; or, given ``indptr`` and
    ``nnz``, the rows an encoding kernel already built in ``tokens`` (the indices) and
    ``values`` (1-d)."""
    if indptr is None:
        n, k = tokens.shape
        indptr = np.empty(n + 1, np.int64)
        indices = np.empty(n * k, index_dtype(n_features, n * k))
        out = np.empty(n * k, values.dtype)
        nnz = _k.rows_to_csr(tokens, values, n_features, indptr, indices, out)
        tokens, values = indices, out
    X = sp.csr_matrix((values[:nnz], tokens[:nnz], indptr.astype(tokens.dtype, copy=False)),
                      shape=(indptr.shape[0] - 1, n_features))
    X.has_canonical_format = True
    return X


def too_large(values: np.ndarray, dtype: np.dtype) -> tuple[int, str] | None:
    """``(row, what is wrong)`` of the first finite value of ``values`` (a column) that
    ``dtype`` holds as infinity (``1e308`` in float32), row 0-based, or None."""
    big = np.abs(values) > np.finfo(dtype).max if dtype.kind == "f" else np.zeros(0, bool)
    if not big.any():
        return None
    i = int(np.argmax(big))
    return i, (f"{values[i].item()!r} is too large for {dtype} (X's dtype); scale the "
               f"column, or read with dtype=numpy.float64")


def column_names(value, what: str) -> tuple:
    """``value``, a column name or a sequence of them, as a tuple of str (a single string is
    one column, not its characters).

    Raises
    ------
    TypeError
        ``value`` is neither (e.g. a number), naming ``what``.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    try:
        return tuple(str(c) for c in value)
    except TypeError:
        raise TypeError(f"{what} must be a column name or a list of them, got "
                        f"{value!r}") from None


def cross_pairs(value) -> tuple:
    """``value``, one pair of column names or a sequence of pairs, as a tuple of pairs of str.

    Raises
    ------
    ValueError
        An element that is not a pair of names.
    """
    if value is None:
        return ()
    value = tuple(value)
    if len(value) == 2 and all(isinstance(c, str) for c in value):
        value = (value,)  # one pair, not a list of pairs
    pairs = []
    for pair in value:
        if isinstance(pair, str) or len(tuple(pair)) != 2:
            raise ValueError(f"crosses must be pairs of column names, such as "
                             f"[('shop', 'city')], got {pair!r}")
        pairs.append(tuple(str(c) for c in pair))
    return tuple(pairs)


def _text_type(typ) -> pa.DataType:
    """What a categorical column is cast to before its values are hashed as bytes: binary
    columns (also fixed-size, or dictionaries of them) to ``large_binary`` as they are, so
    that bytes that are not UTF-8 hash too (and UTF-8 bytes as the same text would); the
    others to ``large_string`` (numbers as pyarrow writes them). Both have the same layout,
    int64 offsets and a data buffer."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    binary = (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
              or pa.types.is_fixed_size_binary(typ))
    return pa.large_binary() if binary else pa.large_string()


def _as_table(data) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if hasattr(data, "columns") and hasattr(data, "iloc"):  # pandas
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"expected a pyarrow Table or a pandas DataFrame, got {type(data).__name__}")


@dataclass(frozen=True)
class HashingEncoder:
    """Feature hashing of table rows into ``n_features`` sparse columns (the hashing trick).

    Every column listed gives exactly one feature per row:

    * a **categorical** column, the pair (column name, value as text): its index is
      ``h(value, seed=h(name)) mod n_features`` with ``h`` a 64-bit FNV-1a hash finished
      with SplitMix64, value 1.0;
    * a **numeric** column in ``"log_bucket"`` mode (the default, the binning of the Criteo
      winners, Juan et al. 2014): the pair (column name, bucket) with value 1.0, where the
      bucket of ``v`` is ``floor(v)`` for ``v <= 2`` (``-2**63`` for any number below
      that) and ``3 + floor(ln(v)**2)`` above;
    * a numeric column in ``"value"`` mode: the feature (column name) with value ``v`` (one
      too large for ``X``'s dtype, such as ``1e308`` in float32, is an error).

    * a **cross** of two listed columns ``(a, b)``: the pair of their tokens (value 1.0), so a
      linear model can weigh each combination of values (Rendle's FM learns them instead).

    A missing value (null, NaN or empty string) is the token "missing" of its column, a
    feature of its own (value 1.0); an infinite number is an error (see
    :mod:`dask_ps.io` for the rule every reader follows). Features that collide in a row are
    summed. The rule uses nothing but the row, so equal rows get equal features whatever the
    partitioning, and the hash is the same on every machine and Python version. Non-string
    categorical values (e.g. integers from Parquet) are hashed as the text pyarrow casts them
    to ("123"); binary values as their bytes (a UTF-8 ``b"Oslo"`` as ``"Oslo"``). A list,
    struct or map column cannot be a feature.

    The encoder is a frozen value: store it with a model as JSON (:meth:`to_json`,
    :meth:`from_json`) and encode new data with the same one.

    Parameters
    ----------
    numeric : str or tuple of str, default ()
        Numeric columns (a single string is one column).
    categorical : str or tuple of str, default ()
        Categorical columns (a single string is one column).
    crosses : tuple of (str, str), default ()
        Pairs of listed columns whose combinations are features too (one pair alone is
        taken too); ``(a, b)`` and ``(b, a)`` are the same cross (listed once).
    n_features : int, default 2**20
        Number of hashed features (columns of the output), 1 <= n_features <= 2**62.
    numeric_mode : {"log_bucket", "value"}, default "log_bucket"
        How numeric columns are encoded (see above).
    seed : int, default 0
        Hash seed, 0 <= seed < 2**64.

    Raises
    ------
    ValueError
        An unknown ``numeric_mode``, no columns, a column listed twice, a cross of columns
        that are not listed (or of a column with itself, or listed twice), or
        ``n_features`` or ``seed`` out of range.

    References
    ----------
    Weinberger et al., "Feature hashing for large scale multitask learning", ICML 2009;
    Juan, Zhuang, Chin, "3 Idiots' approach for display advertising challenge" (Criteo, 2014),
    github.com/ycjuan/kaggle-2014-criteo (the log-squared binning of integer features).

    Examples
    --------
    >>> import pandas as pd
    >>> enc = HashingEncoder(numeric=("age",), categorical=("city",), n_features=2**10)
    >>> df = pd.DataFrame({"age": [31.0, None, 31.0], "city": ["Oslo", "Lima", "Oslo"]})
    >>> X = enc.transform(df)
    >>> X.shape, X.nnz, (X[0] != X[2]).nnz
    ((3, 1024), 6, 0)
    >>> HashingEncoder.from_json(enc.to_json()) == enc
    True
    """

    numeric: tuple = field(default=())
    categorical: tuple = field(default=())
    crosses: tuple = field(default=())
    n_features: int = 2**20
    numeric_mode: str = "log_bucket"
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "numeric", column_names(self.numeric, "numeric"))
        object.__setattr__(self, "categorical",
                           column_names(self.categorical, "categorical"))
        if self.numeric_mode not in NUMERIC_MODES:
            raise ValueError(f"numeric_mode must be one of {list(NUMERIC_MODES)}, "
                             f"got {self.numeric_mode!r}")
        cols = self.columns
        if not cols:
            raise ValueError("HashingEncoder needs at least one numeric or categorical column")
        if len(set(cols)) != len(cols):
            dup = next(c for c in cols if cols.count(c) > 1)
            raise ValueError(f"column {dup!r} is listed twice")
        crosses = cross_pairs(self.crosses)
        seen = set()
        for a, b in crosses:
            unknown = [c for c in (a, b) if c not in cols]
            if unknown:
                raise ValueError(f"cross ({a!r}, {b!r}): {unknown[0]!r} is not a listed "
                                 f"column (they are {list(cols)})")
            if a == b:
                raise ValueError(f"cross ({a!r}, {b!r}) must pair two different columns")
            if frozenset((a, b)) in seen:
                raise ValueError(f"cross ({a!r}, {b!r}) is listed twice")
            seen.add(frozenset((a, b)))
        object.__setattr__(self, "crosses", crosses)
        if isinstance(self.n_features, bool) or not (
                int(self.n_features) == self.n_features and 1 <= self.n_features <= 2**62):
            raise ValueError(f"n_features must be an integer in [1, 2**62], "
                             f"got {self.n_features!r}")
        if not (int(self.seed) == self.seed and 0 <= self.seed < 2**64):
            raise ValueError(f"seed must be an integer in [0, 2**64), got {self.seed!r}")
        object.__setattr__(self, "n_features", int(self.n_features))
        object.__setattr__(self, "seed", int(self.seed))

    @classmethod
    def criteo(cls, n_features: int = 2**20, **kwargs) -> HashingEncoder:
        """The Criteo layout: numeric I1..I13, categorical C1..C26."""
        return cls(numeric=tuple(f"I{i}" for i in range(1, 14)),
                   categorical=tuple(f"C{i}" for i in range(1, 27)),
                   n_features=n_features, **kwargs)

    @property
    def columns(self) -> tuple:
        """Numeric then categorical column names."""
        return self.numeric + self.categorical

    def arrow_types(self) -> dict:
        """The pyarrow type each column is parsed as (float64 or string)."""
        return {**{c: pa.float64() for c in self.numeric},
                **{c: pa.string() for c in self.categorical}}

    def to_json(self) -> str:
        """The encoder as a JSON object (for checkpoints)."""
        return json.dumps(dict(asdict(self), kind="HashingEncoder"))

    @classmethod
    def from_json(cls, text: str) -> HashingEncoder:
        """The encoder :meth:`to_json` wrote.

        Raises
        ------
        ValueError
            JSON that does not describe a HashingEncoder.
        """
        spec = json.loads(text)
        if not isinstance(spec, dict) or spec.pop("kind", None) != "HashingEncoder":
            raise ValueError("not the JSON of a HashingEncoder")
        return cls(**spec)

    def column_seeds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per column: its seed, "missing" token and "value" token; per cross: its seed
        (uint64 arrays), as the encoding kernels take them."""
        seeds = np.array([_column_seed(c, self.seed) for c in self.columns], np.uint64)
        missing = np.array([_k.mix64(s ^ np.uint64(_MISSING)) for s in seeds], np.uint64)
        value = np.array([_k.mix64(s ^ np.uint64(_VALUE)) for s in seeds], np.uint64)
        cross = np.array([_column_seed(f"{a}\x1f{b}", self.seed) for a, b in self.crosses],
                         np.uint64)
        return seeds, missing, value, cross

    def cross_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Each cross's two columns, as positions in :attr:`columns` (int64 arrays)."""
        pos = {c: i for i, c in enumerate(self.columns)}
        return (np.array([pos[a] for a, _ in self.crosses], np.int64),
                np.array([pos[b] for _, b in self.crosses], np.int64))

    @property
    def width(self) -> int:
        """Features per row before collisions: one per column and per cross."""
        return len(self.columns) + len(self.crosses)

    def hashes(self, data, where: str = "data") -> np.ndarray:
        """The 64-bit hash of each (row, column), then of each cross: uint64 array
        (n_rows, n_columns + n_crosses).

        Raises
        ------
        DataError
            A listed column missing from ``data``, a numeric column that is not numeric, or
            an infinite number, naming ``where``, the column (and the row, 1-based).
        """
        table = _as_table(data)
        n = table.num_rows
        out = np.empty((self.width, n), np.uint64)
        for j, name in enumerate(self.columns):
            if name not in table.column_names:
                raise DataError(f"{where}: column {name!r} is missing (has "
                                f"{table.column_names})")
            col = table.column(name)
            seed = _column_seed(name, self.seed)
            missing = np.uint64(_k.mix64(seed ^ np.uint64(_MISSING)))
            if name in self.numeric:
                v = self._numbers(col, where, name)
                valid = np.isfinite(v)
                check_finite(v, where, name)
                if self.numeric_mode == "value":
                    token = np.uint64(_k.mix64(seed ^ np.uint64(_VALUE)))
                    out[j] = np.where(valid, token, missing)
                else:
                    v0 = np.where(valid, v, 0.0)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        big = 3.0 + np.floor(np.log(np.maximum(v0, 1.0)) ** 2)
                    low = np.floor(np.maximum(v0, _k.LOWEST_BUCKET))
                    codes = np.where(v0 > 2, big, low).astype(np.int64)
                    _k.hash_codes(codes, valid, seed, missing, out[j])
            else:
                arr = pc.cast(col, _text_type(col.type)).combine_chunks()
                offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:
                                                                     arr.offset + n + 1]
                data_buf = arr.buffers()[2]
                buf = (np.frombuffer(data_buf, np.uint8) if data_buf is not None
                       else np.zeros(0, np.uint8))
                valid = arr.is_valid().to_numpy(zero_copy_only=False) & (
                    np.diff(offsets) > 0)
                _k.hash_strings(buf, offsets, valid, seed, missing, out[j])
        out = np.ascontiguousarray(out.T)
        if self.crosses:
            a, b = self.cross_columns()
            _k.hash_crosses(out, a, b, self.column_seeds()[3], len(self.columns))
        return out

    def _numbers(self, col, where: str, name: str) -> np.ndarray:
        """A numeric column as float64; integers beyond 2^53 rounded, as a CSV reads them
        (arrow's safe cast refused them as not numbers: hashed ids in Parquet)."""
        try:
            return pc.cast(col, pa.float64(), safe=not pa.types.is_integer(col.type)
                           ).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DataError(f"{where}: numeric column {name!r} has values that are not "
                            f"numbers ({exc})") from exc

    def transform(self, data, dtype=np.float32, where: str = "data") -> sp.csr_matrix:
        """Hashed features of the rows of ``data``.

        Parameters
        ----------
        data : pyarrow.Table or pandas.DataFrame
            Has every listed column (others are ignored).
        dtype : numpy dtype, default numpy.float32
        where : str
            Names the data in error messages (file, partition).

        Returns
        -------
        scipy.sparse.csr_matrix of shape (n_rows, n_features)
            Sorted, summed indices (int32 when ``n_features`` allows, else int64).

        Raises
        ------
        ValueError
            See :meth:`hashes`.
        """
        table = _as_table(data)
        h = self.hashes(table, where)
        n, k = h.shape
        values = np.ones((n, k), dtype=np.float64)
        if self.numeric_mode == "value" and self.numeric:
            v = np.column_stack([self._numbers(table.column(c), where, c)
                                 for c in self.numeric])
            v = np.where(np.isfinite(v), v, 1.0)  # a missing value is the indicator 1.0
            for j, name in enumerate(self.numeric):
                bad = too_large(v[:, j], np.dtype(dtype))
                if bad:
                    raise DataError(f"{where}: column {name!r}, row {bad[0] + 1}: {bad[1]}")
            values[:, :len(self.numeric)] = v
        return csr_rows(h, values.astype(dtype), self.n_features)
