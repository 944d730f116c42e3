"""Logistic regression's view of the data: labels encoded once per partition, margins.

Partitions of ``(X, y)`` (see :func:`dask_ps.partitions.partition`) are encoded where they
live by :func:`encode_part`: ``X`` as canonical CSR (its columns hashed when asked), ``y`` as
one target column per output. Predictions run on blocks of rows (:func:`margins`), for NumPy,
scipy and dask inputs alike.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np
import scipy.sparse as sp

from ..exceptions import NOT_A_CLASS, DataError
from ..partitions.inputs import broadcast_large
from ..partitions.inputs import check_columns as check_keys
from ._logistic_kernels import decision
from ._weights import check_part

__all__ = ["KEYED_FEATURES", "WIDE_FEATURES", "KeyedWeights", "TableCache", "as_scipy",
           "check_classes", "check_dask_X", "check_dask_width", "classes_of", "dask_margins",
           "encode_part", "fit_classes", "hash_columns", "labels_of", "margins",
           "proba_from_margins", "table_rows"]

#: Models of a stochastic solver of at least this many features (columns after hashing) keep
#: their weights in a hashed PS table, keyed by the column index (any key in
#: [0, 2**63 - 1)), instead of a dense one (their ``coef_``, a scipy CSR matrix, is keyed
#: from :data:`KEYED_FEATURES`, as every model's).
WIDE_FEATURES = 2**32
#: Models of at least this many columns (after hashing: ``n_hashed_features`` when given)
#: hold only the rows training touched — a factorization machine (hashed tables), a logistic
#: regression ("lbfgs": the solver's active rows; a stochastic solver: the touched rows of
#: its table, gathered by key) — and give ``coef_`` (and ``factors_``) as sparse matrices of
#: those keys, never a dense array over the width, and predict from their
#: :class:`KeyedWeights`. A rule on the width alone: known before the fit,
#: the same on every machine (see :class:`~.fm.FactorizationMachineClassifier`'s ``factors_``
#: for the measurements). Below it a dense model is at most 8 MiB per column of weights (72
#: MiB for a factorization machine of ``k=8``); above it dense arrays grew with the width,
#: not the data: an "lbfgs" model of 2**30 hashed columns made an 8 GiB ``coef_`` that
#: its prediction on a dask array sent to every worker, killing 3 GiB workers. It includes
#: :data:`WIDE_FEATURES`.
KEYED_FEATURES = 2**20


class KeyedWeights(NamedTuple):
    """Weights of a wide model, row by key: ``keys`` int64 (m,), ascending and distinct (the
    intercept's key ``n_features`` last when present); ``W`` float64 (m, K), the weights of
    those keys (every other key's are zero)."""

    keys: np.ndarray
    W: np.ndarray

    @classmethod
    def from_coef(cls, coef: sp.csr_matrix, intercept: np.ndarray) -> "KeyedWeights":
        """From a sparse ``coef_`` (K, n_features) and ``intercept_`` (K,)."""
        coef = coef.tocsr()
        # the keys of K sorted runs (one per output) merged by a stable sort, deduplicated
        # by an adjacent-difference mask, each value's place from the same sort. Measured
        # (2 loaded cores), 10^6 keys: 0.2-0.6 s for a factorization machine's 9 x 10^6
        # values (k=8), 12 ms for one output; np.unique and a searchsorted per output took
        # 1.8-2 s and 0.56 s
        idx = coef.indices.astype(np.int64, copy=False)
        order = np.argsort(idx, kind="stable")
        first = np.ones(idx.shape[0], bool)
        np.not_equal(idx[order[1:]], idx[order[:-1]], out=first[1:])
        keys = np.append(idx[order[first]], coef.shape[1])
        place = np.empty(idx.shape[0], np.int64)
        place[order] = np.cumsum(first) - 1
        W = np.zeros((keys.shape[0], coef.shape[0]))
        W[place, np.repeat(np.arange(coef.shape[0]), np.diff(coef.indptr))] = coef.data
        W[-1] = intercept
        return cls(keys, W)

    def to_coef(self, n_features: int) -> tuple[sp.csr_matrix, np.ndarray]:
        """``coef_`` as CSR (K, n_features) float64 with int64 sorted column indices (the
        non-zero weights only) and ``intercept_`` (K,) float64 (zero when its key is
        absent)."""
        bias = self.keys.shape[0] > 0 and self.keys[-1] == n_features
        keys, W = (self.keys[:-1], self.W[:-1]) if bias else (self.keys, self.W)
        intercept = self.W[-1].copy() if bias else np.zeros(self.W.shape[1])
        r, c = np.nonzero(W.T)  # row-major over (K, m): per output, keys ascending
        coef = sp.csr_matrix((W.T[r, c], keys[c], np.searchsorted(r, np.arange(W.shape[1] + 1))),
                             shape=(W.shape[1], n_features))
        return coef, intercept

    def local(self, indices: np.ndarray) -> np.ndarray:
        """Positions of column ``indices`` in ``keys``, ``len(keys)`` for keys not held (a
        row of zeros appended to ``W`` by :func:`margins`)."""
        m = self.keys.shape[0]
        pos = np.searchsorted(self.keys, indices)
        held = pos < m
        held[held] = self.keys[pos[held]] == indices[held]
        return np.where(held, pos, m)


class TableCache:
    """The table a fitted keyed model predicts from, built on first use and kept while the
    fitted arrays it was built from stay the same objects.

    A keyed model's ``coef_`` (and ``factors_``) are sparse matrices; margins read the
    :class:`KeyedWeights` of the keys they hold, which :meth:`KeyedWeights.from_coef` builds
    by a sort of every stored value: 0.2-0.6 s for a factorization machine of 10^6 keys
    (k=8), 15 ms for logistic regression's one output, formerly paid at every
    ``decision_function``. The estimators make a new cache at every fit (the old table goes
    with the old arrays) and rebuild it when ``coef_``, ``intercept_`` or ``factors_`` is
    another object (assigned, or restored from a file); a change made inside those arrays
    in place is not seen.

    The cache pickles and deep-copies empty (:meth:`__reduce__`): a pickled or cloned
    estimator carries no second copy of its weights, and the copy builds its own table.
    """

    __slots__ = ("_entry",)

    def __init__(self) -> None:
        self._entry: tuple[tuple, Any] | None = None  # (the sources, their table), one object

    def __reduce__(self):
        return type(self), ()

    def get(self, sources: tuple, build: Callable[[], Any]) -> Any:
        """The table of ``sources`` (the fitted arrays, compared by identity): the one built
        last if they are the same objects, else ``build()``, kept in its place.

        Parameters
        ----------
        sources : tuple
            The arrays the table is made of, e.g. ``(coef_, intercept_)``. The cache holds
            them, so an object compared is never a freed one's successor at the same address.
        build : callable
            ``build() -> table``, called without arguments.

        Returns
        -------
        object
            What ``build`` returned for these sources.
        """
        entry = self._entry  # read once: a thread building meanwhile replaces it whole
        if entry is not None and len(entry[0]) == len(sources) and all(
                a is b for a, b in zip(entry[0], sources)):
            return entry[1]
        self._entry = None  # the old table may go before the new one is built
        table = build()
        self._entry = (sources, table)
        return table


def as_scipy(X, name: str = "X"):
    """pydata ``sparse`` arrays as scipy CSR; anything else unchanged.

    Raises
    ------
    ValueError
        A pydata array that is not 2-D, or whose fill value (the value of the entries it
        does not store) is not 0, naming ``name``.
    """
    if not hasattr(X, "to_scipy_sparse"):
        return X
    if X.ndim != 2:
        raise ValueError(f"{name} is a {X.ndim}-D sparse array of shape {X.shape}: expected "
                         f"2-D (n_samples, n_features)")
    fill = np.asarray(X.fill_value).item()
    if not (fill == 0):  # NaN too
        raise ValueError(f"{name} is a sparse array whose fill value is {fill!r}: only a fill "
                         f"value of 0 is taken (the entries it does not store are 0)")
    return X.to_scipy_sparse().tocsr()


def labels_of(part, start: int = 0) -> np.ndarray:
    """The distinct labels of an ``(X, y)`` partition whose first row is row ``start`` of
    the whole data, checked by :func:`classes_of`."""
    y = part[1]
    y = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    return classes_of(y.ravel(), start)[0]


def classes_of(y: np.ndarray, start: int = 0, name: str = "y") -> tuple:
    """``(classes, counts)`` of a partition's labels ``y`` (n,), checked by
    :func:`check_classes`, whose error names the first row holding the offending label as
    ``name[row]``, the row in the whole data (``start``: the partition's first).

    Raises
    ------
    DataError
        ``"y holds 0.7 (first at y[237]), not a class: ..."``.
    """
    classes, first, counts = _unique(y, name, return_index=True, return_counts=True)

    def where(value) -> str | None:
        same = classes == value
        if not np.any(same) and value != value:  # NaN
            same = classes != classes
        hit = np.flatnonzero(same)
        return f"at {name}[{start + int(first[hit[0]])}]" if hit.size else None

    check_classes(classes, name, where)
    return classes, counts


def _unique(y: np.ndarray, name: str, **kwargs):
    """``np.unique(y, **kwargs)``; labels of kinds that do not compare (numbers and strings
    in one object array) raise a DataError naming ``name`` and one label of each kind,
    instead of numpy's "'<' not supported between instances"."""
    try:
        return np.unique(y, **kwargs)
    except TypeError:
        seen: dict = {}
        for v in np.asarray(y, dtype=object).ravel():
            seen.setdefault(isinstance(v, str), v)
            if len(seen) == 2:
                break
        kinds = " and ".join(repr(v) for v in seen.values()) if len(seen) == 2 else "labels"
        raise DataError(f"{name} mixes labels that do not compare ({kinds}): labels must be "
                        f"all numbers or all strings") from None


def check_classes(labels: np.ndarray, what: str, where=None) -> None:
    """Refuse distinct ``labels`` that are not classes (scikit-learn's "continuous" targets:
    numbers that are not whole, such as a click probability 0.7).

    Parameters
    ----------
    labels : ndarray of shape (n_classes,)
        The distinct labels.
    what : str
        What holds them, for the message (e.g. ``"logs/*.csv: label column 'click'"``).
    where : callable, optional
        ``where(label) -> str | None`` names the first row holding a label, e.g. ``"at
        logs/b.csv, line 7"``; the message gives it for the offending value.

    Raises
    ------
    DataError
        ``"<what> holds 0.7 (first at logs/b.csv, line 7), not a class: ..."``, naming one
        offending value (a ``ValueError``, as scikit-learn's check raises); a missing label
        (NaN) first, as ``"<what> holds a missing label (NaN) (first at ...): ..."``.
    """
    from sklearn.utils.multiclass import check_classification_targets

    labels = np.asarray(labels)
    if labels.dtype.kind == "f":
        missing = np.isnan(labels)
        bad = labels[missing] if missing.any() else \
            labels[~np.isfinite(labels) | (labels != np.round(labels))]
        if bad.shape[0]:
            first = None if where is None else where(bad[0].item())
            at = "" if first is None else f" (first {first})"
            if missing.any():
                raise DataError(f"{what} holds a missing label (NaN){at}: every row needs a "
                                f"label (drop or fill the rows without one)")
            raise DataError(f"{what} holds {bad[0].item()!r}{at}, not a class: {NOT_A_CLASS}")
    with warnings.catch_warnings():  # distinct labels are all unique: not a sign of numbers
        warnings.filterwarnings("ignore", "The number of unique classes", UserWarning)
        check_classification_targets(labels)


def fit_classes(found: list, classes=None, fitted: np.ndarray | None = None) -> np.ndarray:
    """The classes of a fit or ``partial_fit`` call, checked against the labels of ``y``.

    scikit-learn's ``partial_fit`` convention (``SGDClassifier``): ``classes``, when given,
    are the classes and must include every label ``y`` holds; a model fitted already keeps
    its classes; otherwise the classes are the labels of ``y``.

    Parameters
    ----------
    found : list of ndarray
        The distinct labels of each partition of ``y`` (:func:`labels_of`).
    classes : array-like, optional
        The ``classes`` argument of the call.
    fitted : ndarray (n_classes,), optional
        The ``classes_`` of the model a warm start continues.

    Returns
    -------
    ndarray (n_classes,)
        Sorted and distinct: ``fitted``, else ``classes``, else the labels of ``y``, of
        their dtype (bool, int or str labels give classes of that dtype, as scikit-learn's).

    Raises
    ------
    ValueError
        ``y`` holds labels outside ``fitted`` or ``classes`` (naming them), or labels or
        ``classes`` that are not classes (:func:`check_classes`).
    """
    if fitted is None and classes is None:
        labels = _unique(np.concatenate(found), "y") if found else np.asarray([])
        check_classes(labels, "y")
        return labels
    if fitted is not None:
        allowed, said = fitted, (f"outside the fitted classes {fitted.tolist()}: a warm start "
                                 f"(warm_start=True or partial_fit) keeps the classes of the "
                                 f"first fit")
    else:
        allowed = np.unique(np.asarray(classes))
        check_classes(allowed, "classes")
        said = (f"that are not in classes={allowed.tolist()}: classes must include every "
                f"label y can hold (scikit-learn's partial_fit convention)")
    outside = np.setdiff1d(np.unique(np.concatenate(found)) if found else [], allowed)
    if outside.size:
        raise ValueError(f"y has labels {outside.tolist()} {said}")
    return allowed


def targets(codes: np.ndarray, n_out: int) -> np.ndarray:
    """One column per class (one-vs-rest), or one column "is class 1" for two classes."""
    cols = np.arange(n_out) if n_out > 1 else np.array([1])
    return (codes[:, None] == cols).astype(np.float64)


def hash_columns(X: sp.csr_matrix, n_buckets: int) -> sp.csr_matrix:
    """Feature hashing: column ``j`` goes to bucket ``splitmix64(j) >> 32 mod n_buckets``;
    values of columns sharing a bucket are summed (Weinberger et al., ICML 2009, unsigned)."""
    from ..kernels.hashing import hash_shard

    buckets = hash_shard(X.indices.astype(np.int64), n_buckets)
    # sum_duplicates works in place: the caller's data and indptr must not be shared
    out = sp.csr_matrix((X.data.copy(), buckets, X.indptr.copy()), shape=(X.shape[0], n_buckets))
    out.sum_duplicates()
    return out


def encode_part(part, classes: np.ndarray, n_out: int, n_buckets: int | None = None,
                where: str = "X", start: int = 0) -> tuple:
    """``(X as CSR with sorted indices, targets (n, n_out))`` of an ``(X, y)`` partition,
    its columns hashed into ``n_buckets`` when given; of an ``(X, y, sample_weight)`` one,
    the weights (float64 (n,), checked by :func:`~._weights.check_part`) third. ``X``
    keeps float32 values (the readers' dtype: half the memory and spill of float64; the
    kernels compute in float64 all the same, and float32 to float64 is exact); other
    dtypes become float64.
    ``start``: the partition's first row in the whole data (errors name rows from it).

    Raises
    ------
    ValueError
        Infinite features (naming the row and column), a label outside ``classes``, a
        column key outside [0, n_features) (:func:`check_keys`), or a negative or
        non-finite sample weight (naming its row).
    """
    X, y, *sw = part
    if hasattr(X, "to_numpy"):  # pandas
        X = X.to_numpy(dtype=np.float64)
    if hasattr(X, "to_scipy_sparse"):  # pydata sparse
        X = X.to_scipy_sparse()
    X = X.tocsr() if hasattr(X, "tocsr") else X
    dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
    if type(X) is not sp.csr_matrix or X.dtype != dtype:
        # not for a CSR matrix of that dtype: scipy's constructor copies arrays that are
        # views of a larger buffer, as a partition moved between workers is (its arrays
        # view the received message): ~0.19 s of copying on the receiving worker in the
        # first fit of a 10^6 x 2^22 CTR set, for no use
        X = sp.csr_matrix(X, dtype=dtype)
    # canonical: sorted, distinct columns per row (per-sample kernels). sum_duplicates
    # works in place and X may be the caller's (or Dask's) data: a copy only when it must
    # change (the readers' and make_ctr's blocks are canonical already); nothing downstream
    # writes into X
    if not X.has_canonical_format:  # scipy's check, O(nnz), cached on X
        X = X.copy()
        X.sum_duplicates()
    bad = ~np.isfinite(X.data)
    if bad.any():
        p = int(np.argmax(bad))
        row = int(np.searchsorted(X.indptr, p, side="right") - 1)
        raise DataError(f"{where}: value {X.data[p]} at row {start + row}, column "
                        f"{X.indices[p]} is not finite")
    check_keys(X, where, first_row=start)
    if n_buckets is not None:
        X = hash_columns(X, n_buckets)
    y = (y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)).ravel()
    codes = np.searchsorted(classes, y)
    bad = (codes >= classes.shape[0]) | (classes[np.minimum(codes, classes.shape[0] - 1)] != y)
    if bad.any():  # y, of the data ``where`` names
        label, row = y[np.argmax(bad)], start + int(np.argmax(bad))
        raise DataError(f"{'y' if where == 'X' else where + ': y'}: label "
                        f"{getattr(label, 'item', lambda: label)()!r} at row {row} is not "
                        f"among the classes {classes.tolist()}")
    if sw:
        return X, targets(codes, n_out), check_part(sw[0], start, X.shape[0])
    return X, targets(codes, n_out)


def margins(X, coef_t, intercept: np.ndarray, n_buckets=None) -> np.ndarray:
    """``X coef_t + intercept``, shape (n, n_outputs), for a dense or sparse block (its columns
    hashed into ``n_buckets`` first, when given). ``coef_t``: (n_features, n_outputs), or the
    :class:`KeyedWeights` of a wide model (its intercept row unused)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if n_buckets is not None:
        X = hash_columns(X, n_buckets)
    indices, coef_t = table_rows(X.indices, coef_t)
    out = np.empty((X.shape[0], coef_t.shape[1]))
    decision(X.indptr, indices, X.data, coef_t, intercept, out)
    return out


def table_rows(indices: np.ndarray, coef_t) -> tuple[np.ndarray, np.ndarray]:
    """Column ``indices`` of a block and the dense table whose rows they index: a dense
    ``coef_t`` (n_features, K) and ``indices`` as given; for the :class:`KeyedWeights` of a
    wide (or keyed) model, the rows of ``W`` the block touches, in key order, a row of zeros
    last for the keys it does not hold (when it meets any), and each index's place among
    them (int64).

    The keyed table is the block's, not the model's: copying the whole ``W`` with a row of
    zeros appended cost every block O(keys) (72 MB at 10^6 keys of a factorization machine
    of k=8, whose products then ran over all of them). What remains per block is a bitmap
    over the keys' places (one byte each) besides the block's own O(nnz) work."""
    if not isinstance(coef_t, KeyedWeights):
        return indices, coef_t
    m = coef_t.keys.shape[0]
    pos = coef_t.local(indices.astype(np.int64, copy=False))  # m: a key not held
    seen = np.zeros(m + 1, bool)
    seen[pos] = True
    used = np.flatnonzero(seen)  # ascending: the place m, when met, last
    place = np.empty(m + 1, np.int64)  # only the pages of the places met are touched
    place[used] = np.arange(used.shape[0])
    rows = np.zeros((used.shape[0], coef_t.W.shape[1]))
    held = used[:-1] if seen[m] else used
    rows[:held.shape[0]] = coef_t.W[held]
    return place[pos], rows


def binary_margins(X, coef_t, intercept, n_buckets=None) -> np.ndarray:
    return margins(X, coef_t, intercept, n_buckets)[:, 0]


def finite_block(X, estimator: str, n_features: int | None = None, block_info=None,
                 allow_nan: bool = False):
    """``X``, a chunk of a dask ``X`` given to a fitted estimator, after checking its values
    are finite, as scikit-learn checks NumPy input ("Input X contains NaN"); dask input
    otherwise gave NaN margins and probabilities silently; and its column keys
    (:func:`check_keys`). ``allow_nan``: NaN passes (a missing value), infinity does not.

    Raises
    ------
    ValueError
        Naming the first value that is not finite (infinite, with ``allow_nan``), its row in
        the whole ``X`` (from ``block_info``, given by ``map_blocks``) and its column.
    """
    first = block_info[0]["array-location"][0][0] if block_info else 0
    if n_features is not None and X.shape[1] != n_features:  # a chunk unlike its array
        raise ValueError(f"{estimator}: a chunk of X from row {first} has {X.shape[1]} "
                         f"columns, the model {n_features}")
    if sp.issparse(X):
        check_keys(sp.csr_matrix(X), "X", first_row=first)
    data = X.data if sp.issparse(X) else np.asarray(X)
    bad, what = (np.isinf, "infinity") if allow_nan else (
        lambda v: ~np.isfinite(v), "NaN or infinity")
    if data.dtype.kind == "f" and bad(data).any():
        dense = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
        if sp.issparse(dense):
            j = int(np.flatnonzero(bad(dense.data))[0])
            r = int(np.searchsorted(dense.indptr, j, side="right")) - 1
            c, value = int(dense.indices[j]), dense.data[j]
        else:
            r, c = (int(i) for i in np.argwhere(bad(dense))[0])
            value = dense[r, c]
        raise ValueError(f"{estimator}: X holds {value} at row {first + r}, column {c}: "
                         f"its values must be {'finite or NaN' if allow_nan else 'finite'} "
                         f"(Input X contains {what})")
    return X


def proba_from_margins(z: np.ndarray) -> np.ndarray:
    """Class probabilities from margins: ``[1 - p, p]`` of the sigmoid for one column, else
    the one-vs-rest sigmoids normalised in log space (finite, in [0, 1], rows summing to 1
    however negative every margin is, e.g. -800)."""
    if z.ndim == 1:
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # a sigmoid that never overflows
        return np.column_stack([1.0 - p, p])
    log_p = -np.logaddexp(0.0, -z)  # log sigmoid(z), exact for any z
    log_p -= log_p.max(axis=1, keepdims=True)
    p = np.exp(log_p)
    return p / p.sum(axis=1, keepdims=True)


def take_classes(idx: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return classes[idx]


def check_dask_X(X, y, estimator: str):
    """scikit-learn's checks of ``validate_data`` for dask input: ``X`` 2-D with rows, ``y``
    1-D (a column is raveled with scikit-learn's ``DataConversionWarning``). Returns ``y``.

    Raises
    ------
    ValueError
        ``X`` is not 2-D or has a known number of rows that is 0; ``y`` is not 1-D.
    """
    if len(X.shape) != 2:
        raise ValueError(f"Expected 2D array, got a dask array of shape {X.shape}")
    if isinstance(X.shape[0], numbers.Integral) and X.shape[0] == 0:  # sklearn's words
        raise ValueError(f"Found array with 0 sample(s) (shape={tuple(X.shape)}) while a "
                         f"minimum of 1 is required by {estimator}.")
    shape = getattr(y, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] == 1:
        import warnings

        from sklearn.exceptions import DataConversionWarning

        warnings.warn("A column-vector y was passed when a 1d array was expected. Please "
                      "change the shape of y to (n_samples, ), for example using ravel().",
                      DataConversionWarning, stacklevel=3)
        return y[:, 0] if hasattr(y, "ndim") else y.iloc[:, 0]
    if shape is not None and len(shape) != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {tuple(shape)} "
                         f"instead.")
    return y


def check_dask_width(X, n_features: int, estimator: str) -> None:
    """Refuse a dask array ``X`` to predict from, when its graph is built, unless it is 2-D
    with ``n_features`` columns (scikit-learn checks in-memory ``X`` alike).

    Raises
    ------
    ValueError
        Naming ``X``'s shape, the estimator and ``n_features``.
    """
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X has shape {X.shape}, but {estimator} is expecting {n_features} "
                         f"features as input")


def dask_margins(X, coef_t, intercept: np.ndarray, n_buckets, n_features: int,
                 estimator: str, block=None):
    """:func:`margins` of a dask array or dataframe ``X``, chunk by chunk: a dask array of
    shape (n,) for one output column, else (n, K). ``coef_t`` as in :func:`margins`;
    ``block(X, coef_t, intercept, n_buckets)``, when given, the margins (n,) of a chunk by
    another model over the same table (the factorization machine's).

    Raises
    ------
    ValueError
        ``X`` is not 2-D with ``n_features`` columns.
    """
    if hasattr(X, "to_dask_array"):
        X = X.to_dask_array(lengths=True)
    check_dask_width(X, n_features, estimator)
    X = X.rechunk({1: -1})
    X = X.map_blocks(finite_block, estimator, n_features, dtype=X.dtype, meta=X._meta)
    n_out = 1 if block else (coef_t.W if isinstance(coef_t, KeyedWeights) else coef_t).shape[1]
    coef_t, intercept = broadcast_large(coef_t, intercept)
    if n_out == 1:  # functions of arrays only: no estimator in the graph
        return X.map_blocks(block or binary_margins, coef_t, intercept, n_buckets,
                            drop_axis=1, dtype=np.float64, meta=np.empty((0,)))
    return X.map_blocks(margins, coef_t, intercept, n_buckets,
                        chunks=(X.chunks[0], (n_out,)), dtype=np.float64,
                        meta=np.empty((0, 0)))
