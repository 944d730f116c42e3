"""Synthetic click logs as tables with a header (CSV or Parquet): Zipf-distributed categorical
columns, count columns, missing values, and a planted model with pairwise interactions, so that
a factorization machine has something to find that a linear model cannot."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from ..state._kernels import mix64
from . import _table_kernels as _k

__all__ = ["PlantedCTR", "make_ctr_table", "write_ctr_table"]

TABLE_FORMATS = ("csv", "parquet")
#: A count ``x`` is ``floor(exp(COUNT_MU + COUNT_SIGMA * z))`` with ``z ~ N(0, 1)``, and its
#: effect on the logit is ``beta * (log1p(x) - COUNT_MU) / COUNT_SIGMA``.
COUNT_MU, COUNT_SIGMA = 1.0, 1.5


def _unit(seed: int, *parts: int) -> float:
    """A uniform float in [0, 1) from a hash of ``(seed, *parts)``."""
    h = np.uint64(seed)
    for p in parts:
        h = np.uint64(mix64(h ^ np.uint64(p)))
    return float(h >> np.uint64(11)) / 2.0**53


@dataclass(frozen=True)
class PlantedCTR:
    """The design of a synthetic click log and the model its labels are drawn from.

    Columns: the label ``click`` (0/1), count columns ``n1 .. n{n_numeric}`` (non-negative
    integers, log-normal) and categorical columns ``c1 .. c{n_categorical}`` (tokens of 8 hex
    digits). Categorical column ``c`` has ``cardinality[c]`` values (log-spaced from
    ``min_cardinality`` to ``max_cardinality`` over the columns) drawn by a Zipf law of
    exponent ``zipf`` over their popularity ranks. Every column is missing (an empty field, a
    null) with its own rate, drawn in ``[0, missing]``.

    The label of a row is 1 with probability ``sigmoid(logit)``, where ::

        logit = intercept + sum_c w_c[v_c] + sum_j beta_j t_j
                + sum_{(a, b) in pairs} <u_a[v_a], u_b[v_b]>

    ``v_c`` is the value of categorical column ``c`` (a missing value is a value of its own),
    ``t_j = (log1p(x_j) - 1) / 1.5`` for count ``x_j`` (0 when missing),
    ``w_c[v] ~ N(0, linear_scale^2)``, ``beta_j ~ N(0, numeric_scale^2)`` and the factors
    ``u_c[v] ~ N(0, interaction_scale^2 / k I)`` in ``k = factors`` dimensions: the model of a
    factorization machine (Rendle, ICDM 2010) restricted to ``n_pairs`` column pairs, chosen
    at random among the categorical columns. A linear model on hashed features sees none of
    the interaction part; an FM of ``k`` factors can represent all of it. Every parameter is a
    pure function of ``(seed, column, value)``, so any worker draws the same model.

    Parameters
    ----------
    n_categorical : int, default 24
    n_numeric : int, default 8
    min_cardinality, max_cardinality : int, default 4 and 100_000
    zipf : float, default 1.1
        Exponent of the value popularity (> 0).
    missing : float, default 0.2
        Largest missing rate of a column, in [0, 1).
    factors : int, default 4
    n_pairs : int, optional
        Column pairs with planted interactions (at most ``C (C - 1) / 2``); default 8, or
        every pair of fewer columns.
    linear_scale, numeric_scale, interaction_scale : float, default 0.35, 0.3, 1.2
    intercept : float, default -1.8
    seed : int, default 0

    Raises
    ------
    ValueError
        Sizes out of range.
    """

    n_categorical: int = 24
    n_numeric: int = 8
    min_cardinality: int = 4
    max_cardinality: int = 100_000
    zipf: float = 1.1
    missing: float = 0.2
    factors: int = 4
    n_pairs: int | None = None
    linear_scale: float = 0.35
    numeric_scale: float = 0.3
    interaction_scale: float = 1.2
    intercept: float = -1.8
    seed: int = 0
    pairs: tuple = field(init=False, repr=False)

    def __post_init__(self):
        C = self.n_categorical
        if self.n_pairs is None:
            object.__setattr__(self, "n_pairs", min(8, C * (C - 1) // 2))
        for name, low in (("n_categorical", 1), ("n_numeric", 0), ("min_cardinality", 1),
                          ("max_cardinality", 1), ("factors", 1), ("n_pairs", 0),
                          ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
        if not self.min_cardinality <= self.max_cardinality < 2**31:
            raise ValueError(f"need 1 <= min_cardinality <= max_cardinality < 2**31, got "
                             f"{self.min_cardinality}, {self.max_cardinality}")
        if self.n_pairs > C * (C - 1) // 2:
            raise ValueError(f"n_pairs={self.n_pairs}: {C} categorical columns have only "
                             f"{C * (C - 1) // 2} pairs")
        if not self.zipf > 0 or not 0 <= self.missing < 1:
            raise ValueError(f"need zipf > 0 and 0 <= missing < 1, got {self.zipf}, "
                             f"{self.missing}")
        all_pairs = [(a, b) for a in range(C) for b in range(a + 1, C)]
        rng = np.random.default_rng([int(self.seed), 17])
        pick = rng.choice(len(all_pairs), self.n_pairs, replace=False) if all_pairs else []
        object.__setattr__(self, "pairs", tuple(sorted(all_pairs[i] for i in pick)))

    # -- layout ----------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return "click"

    @property
    def numeric_columns(self) -> list[str]:
        return [f"n{j + 1}" for j in range(self.n_numeric)]

    @property
    def categorical_columns(self) -> list[str]:
        return [f"c{c + 1}" for c in range(self.n_categorical)]

    @property
    def columns(self) -> list[str]:
        """All columns, in file order: label, counts, categorical."""
        return [self.label, *self.numeric_columns, *self.categorical_columns]

    @property
    def pair_names(self) -> list[tuple[str, str]]:
        """The column pairs with planted interactions, by name."""
        cat = self.categorical_columns
        return [(cat[a], cat[b]) for a, b in self.pairs]

    def cardinalities(self) -> np.ndarray:
        """Values of each categorical column, int64 (n_categorical,)."""
        if self.n_categorical == 1:
            return np.array([self.max_cardinality], np.int64)
        return np.round(np.geomspace(self.min_cardinality, self.max_cardinality,
                                     self.n_categorical)).astype(np.int64)

    def missing_rates(self) -> np.ndarray:
        """Missing rate of each count column, then of each categorical column."""
        n = self.n_numeric + self.n_categorical
        return np.array([self.missing * _unit(self.seed, 3, j) for j in range(n)])

    # -- rows -------------------------------------------------------------------------------
    def _draw(self, i: int, rows: int):
        """Chunk ``i``'s raw draws: ranks (rows, C) with 0 = missing, counts (rows, N),
        count_missing (rows, N), labels (rows,) and the planted logits."""
        rng = np.random.default_rng([int(self.seed), 1, int(i)])
        rates = self.missing_rates()
        C, N = self.n_categorical, self.n_numeric
        ranks = np.empty((rows, C), np.int64)
        for c, K in enumerate(self.cardinalities()):
            cdf = np.cumsum(np.arange(1, K + 1, dtype=np.float64) ** -self.zipf)
            ranks[:, c] = np.searchsorted(cdf, rng.random(rows) * cdf[-1], side="right") + 1
            ranks[rng.random(rows) < rates[N + c], c] = 0
        z = rng.standard_normal((rows, N))
        counts = np.floor(np.exp(COUNT_MU + COUNT_SIGMA * z)).astype(np.int64)
        count_missing = rng.random((rows, N)) < rates[:N]
        logits = self._logits(ranks, counts, count_missing)
        labels = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logits))).astype(np.int64)
        return ranks, counts, count_missing, labels, logits

    def _logits(self, ranks, counts, count_missing) -> np.ndarray:
        t = (np.log1p(counts) - COUNT_MU) / COUNT_SIGMA
        starts, w, v, beta = _tables(self)
        pa_, pb_ = (np.array([p[k] for p in self.pairs], np.int64) for k in (0, 1))
        out = np.empty(ranks.shape[0])
        _k.planted_logits(np.ascontiguousarray(ranks), np.ascontiguousarray(t),
                          np.ascontiguousarray(count_missing), beta, starts, w, v, pa_, pb_,
                          self.intercept, out)
        return out

    def _salts(self) -> np.ndarray:
        return np.array([np.uint32(mix64(np.uint64(self.seed) ^ np.uint64(1000 + c))
                                   & np.uint64(0xFFFFFFFF)) for c in range(self.n_categorical)],
                        np.uint32)

    def _tokens(self, ranks) -> np.ndarray:
        salts = self._salts()
        out = np.empty(ranks.shape, np.uint32)
        for c in range(ranks.shape[1]):
            out[:, c] = _tokens_of(ranks[:, c], salts[c])
        return out

    def chunk(self, i: int, rows: int) -> pa.Table:
        """Rows of chunk ``i`` as a pyarrow Table (label int8, counts int64 and tokens string,
        nulls where missing); a pure function of ``(self, i, rows)``."""
        ranks, counts, count_missing, labels, _ = self._draw(i, rows)
        tokens = self._tokens(ranks)
        cols = {self.label: pa.array(labels.astype(np.int8))}
        for j, name in enumerate(self.numeric_columns):
            cols[name] = pa.array(counts[:, j], mask=count_missing[:, j])
        for c, name in enumerate(self.categorical_columns):
            cols[name] = _hex_column(tokens[:, c], ranks[:, c] == 0)
        return pa.table(cols)

    def csv_chunk(self, i: int, rows: int, header: bool = True) -> bytes:
        """Rows of chunk ``i`` as CSV text (the same rows as :meth:`chunk`)."""
        ranks, counts, count_missing, labels, _ = self._draw(i, rows)
        tokens = self._tokens(ranks)
        buf = np.empty(rows * (2 + 21 * self.n_numeric + 9 * self.n_categorical) + 1,
                       np.uint8)
        n = _k.format_csv(labels, counts, count_missing, tokens, ranks == 0, buf)
        head = (",".join(self.columns) + "\n").encode() if header else b""
        return head + buf[:n].tobytes()

    def logit(self, data) -> np.ndarray:
        """The planted logit of each row of ``data`` (a pandas DataFrame or pyarrow Table with
        this design's columns, as generated): the Bayes-optimal score, for oracle metrics.

        Raises
        ------
        ValueError
            A token that no value of its column has.
        """
        table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(
            data, preserve_index=False)
        n = table.num_rows
        counts = np.zeros((n, self.n_numeric), np.int64)
        count_missing = np.zeros((n, self.n_numeric), bool)
        for j, name in enumerate(self.numeric_columns):
            col = table.column(name)
            v = col.to_numpy(zero_copy_only=False).astype(np.float64)
            count_missing[:, j] = ~np.isfinite(v) | col.is_null().to_numpy(
                zero_copy_only=False)
            counts[:, j] = np.where(count_missing[:, j], 0, v).astype(np.int64)
        ranks = np.zeros((n, self.n_categorical), np.int64)
        salts = self._salts()
        for c, (name, K) in enumerate(zip(self.categorical_columns, self.cardinalities())):
            col = table.column(name).to_pandas()
            present = col.notna().to_numpy() & (col.astype(str) != "").to_numpy()
            found = col[present].map(lambda s: int(s, 16)).to_numpy(np.int64)
            every = _tokens_of(np.arange(1, K + 1), salts[c]).astype(np.int64)
            order = np.argsort(every)
            pos = np.searchsorted(every[order], found)
            pos = np.minimum(pos, K - 1)
            if not (every[order][pos] == found).all():
                raise ValueError(f"column {name!r}: a token that no value of the column has")
            ranks[present, c] = order[pos] + 1
        return self._logits(ranks, counts, count_missing)


@functools.lru_cache(maxsize=4)
def _tables(planted: PlantedCTR) -> tuple:
    """``(starts, w, v, beta)``: the planted parameters of ``planted`` (kept for its next
    chunks in this process)."""
    starts, w, v = _k.planted_tables(np.uint64(planted.seed), planted.cardinalities(),
                                     planted.linear_scale, planted.interaction_scale,
                                     int(planted.factors))
    beta = np.array([planted.numeric_scale * _k.unit_normal(np.uint64(planted.seed), 1, j, 0)
                     for j in range(planted.n_numeric)])
    return starts, w, v, beta


def _tokens_of(ranks: np.ndarray, salt) -> np.ndarray:
    ranks = np.ascontiguousarray(ranks, np.int64)
    return _k.tokens(ranks, np.uint32(salt), np.empty(ranks.shape[0], np.uint32))


def _hex_column(tokens: np.ndarray, missing: np.ndarray) -> pa.Array:
    """Tokens as an Arrow string array of 8 hex digits, null where ``missing``."""
    n = tokens.shape[0]
    offsets = np.empty(n + 1, np.int32)
    data = np.empty(8 * n, np.uint8)
    used = _k.hex_strings(np.ascontiguousarray(tokens), np.ascontiguousarray(missing),
                          offsets, data)
    valid = pa.array(~missing).buffers()[1] if missing.any() else None
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data[:used]),
                                       valid, int(missing.sum()))


def _chunk_sizes(n_rows: int, chunk_rows: int) -> list[int]:
    if isinstance(n_rows, bool) or int(n_rows) != n_rows or n_rows < 1:
        raise ValueError(f"n_rows must be a positive integer, got {n_rows!r}")
    if isinstance(chunk_rows, bool) or int(chunk_rows) != chunk_rows or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    full, rest = divmod(int(n_rows), int(chunk_rows))
    return [int(chunk_rows)] * full + ([rest] if rest else [])


def _pandas_chunk(planted: PlantedCTR, i: int, rows: int) -> pd.DataFrame:
    return planted.chunk(i, rows).to_pandas()


def make_ctr_table(n_rows: int, planted: PlantedCTR | None = None, *,
                   chunk_rows: int = 100_000):
    """A synthetic click log (see :class:`PlantedCTR`) as a lazy dask DataFrame, one partition
    per ``chunk_rows`` rows, each generated by its own task from ``(planted.seed, index)``.

    Counts come as float64 with NaN where missing, tokens as strings with None.

    Parameters
    ----------
    n_rows : int
    planted : PlantedCTR, optional
        Default ``PlantedCTR()``.
    chunk_rows : int, default 100_000

    Returns
    -------
    dask.dataframe.DataFrame

    Examples
    --------
    >>> df = make_ctr_table(2_000, PlantedCTR(n_categorical=3, n_numeric=1), chunk_rows=500)
    >>> df.npartitions, list(df.columns)
    (4, ['click', 'n1', 'c1', 'c2', 'c3'])
    >>> first = df.partitions[0].compute()
    >>> first.shape, set(first.click.unique()) <= {0, 1}
    ((500, 5), True)
    """
    import dask.dataframe as dd

    planted = PlantedCTR() if planted is None else planted
    sizes = _chunk_sizes(n_rows, chunk_rows)
    meta = _pandas_chunk(planted, 0, 1).iloc[:0]
    return dd.from_map(_pandas_chunk, [planted] * len(sizes), range(len(sizes)), sizes,
                       meta=meta, enforce_metadata=False)


def _write_table_chunk(planted: PlantedCTR, i: int, rows: int, path: str, fmt: str,
                       storage_options) -> tuple:
    fs, root = url_to_fs(path, **(storage_options or {}))
    with fs.open(root, "wb") as f:
        if fmt == "csv":
            f.write(planted.csv_chunk(i, rows))
        else:
            pq.write_table(planted.chunk(i, rows), f)
    return rows, fs.size(root)


def write_ctr_table(urlpath: str, n_rows: int, planted: PlantedCTR | None = None, *,
                    format: str = "csv", chunk_rows: int = 1_000_000,
                    storage_options: dict | None = None, compute: bool = True):
    """Write a synthetic click log (see :class:`PlantedCTR`), one file per chunk, from the
    workers: ``<urlpath>/part-00000.csv`` (each with the header line; missing values are
    empty fields) or ``part-00000.parquet`` (nulls). The same seed gives the same rows in
    either format and with :func:`make_ctr_table`, whatever the cluster.

    Read back with ``read_ctr(url + "/*.csv", label="click")`` or ``read_ctr(url +
    "/*.parquet", label="click")``: the columns are told apart by the reader.

    Parameters
    ----------
    urlpath : str
        A directory (local or any fsspec URL); created if needed.
    n_rows : int
    planted : PlantedCTR, optional
        Default ``PlantedCTR()``.
    format : {"csv", "parquet"}, default "csv"
    chunk_rows : int, default 1_000_000
    storage_options : dict, optional
    compute : bool, default True
        Write now (with the current scheduler or client), or return the delayed tasks.

    Returns
    -------
    list of (rows, bytes) per file, or the delayed tasks if not ``compute``.

    Raises
    ------
    ValueError
        An unknown format or a bad size.
    """
    if format not in TABLE_FORMATS:
        raise ValueError(f"format must be one of {list(TABLE_FORMATS)}, got {format!r}")
    planted = PlantedCTR() if planted is None else planted
    sizes = _chunk_sizes(n_rows, chunk_rows)
    fs, root = url_to_fs(urlpath, **(storage_options or {}))
    fs.makedirs(root, exist_ok=True)
    write = dask.delayed(_write_table_chunk, pure=True)
    tasks = [write(planted, i, rows, fs.unstrip_protocol(f"{root}/part-{i:05d}.{format}"),
                   format, storage_options) for i, rows in enumerate(sizes)]
    return list(dask.compute(*tasks)) if compute else tasks
