"""A table's weight column (``weight=`` of :func:`~dask_ps.io.read_ctr`,
:func:`~dask_ps.io._frame.read_frame`, :func:`~dask_ps.io.parquet.read_table_parquet` and
:func:`~dask_ps.io.encode_ctr`):
every row's sample weight, a finite, non-negative number, checked as the rows are read, each
error naming the file, the line (CSV) or row group and row (Parquet), and the column, as the
label's do. The weights come out in the chunks (or partitions) of ``X``, the form
``fit(X, y, sample_weight=...)`` takes (:func:`dask_ps.algorithms._weights.check_sample_weight`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import DataError

__all__ = ["WEIGHTS_ARE", "check_not_a_feature", "check_weight_column", "first_bad_weight",
           "table_weights"]

#: What every error about a weight ends with.
WEIGHTS_ARE = "sample weights must be finite, non-negative numbers"


def check_weight_column(weight, label, names=None, where: str = "") -> str | None:
    """``weight`` checked against the ``label`` and (given) the columns ``names``.

    Raises
    ------
    ValueError
        ``weight`` is not a string; (:class:`~dask_ps.DataError`) it is the label, or not
        among ``names`` (naming ``where`` and them).
    """
    if weight is None:
        return None
    if not isinstance(weight, str) or not weight:
        raise ValueError(f"weight must be a column name, got {weight!r}")
    if weight == label:
        raise DataError(f"weight column {weight!r} is the label column: the weights must "
                         f"be a column of their own")
    if names is not None and weight not in names:
        raise DataError(f"{where}: weight column {weight!r} is not among {list(names)}")
    return weight


def check_not_a_feature(weight: str | None, columns) -> None:
    """Refuse a ``weight`` column among an encoder's feature ``columns``.

    Raises
    ------
    ValueError
        ``"weight column 'w' is a feature of the encoder: make one without it
        (exclude='w')"``.
    """
    if weight is not None and weight in columns:
        raise ValueError(f"weight column {weight!r} is a feature of the encoder: make one "
                         f"without it (exclude={weight!r})")


def first_bad_weight(col) -> tuple[int, str] | None:
    """``(row, why)`` of the first weight of Arrow column ``col`` (numeric) that is null,
    NaN, infinite or negative, or None; ``why`` as ``"is empty"``."""
    w, null = _values(col)
    bad = null | ~(np.isfinite(w) & (w >= 0))
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    why = ("is empty" if null[i] else "is NaN" if np.isnan(w[i]) else
           f"holds {w[i].item()!r}, a negative number" if w[i] < 0 else
           f"holds {w[i].item()!r}, not a finite number")
    return i, why


def _values(col) -> tuple[np.ndarray, np.ndarray]:
    null = col.is_null().to_numpy(zero_copy_only=False)
    return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), np.asarray(null, bool)


def table_weights(table: pa.Table, weight: str, where: str) -> np.ndarray:
    """The float64 weights of a Parquet table's ``weight`` column (``where``: its file and
    row group).

    Raises
    ------
    DataError
        ``"<where>: weight column 'w' is empty in row 3: ..."``: a column that is missing
        or not numeric, or the first row (1-based) whose weight is null, NaN, infinite or
        negative.
    """
    if weight not in table.column_names:
        raise DataError(f"{where}: weight column {weight!r} is missing")
    col = table.column(weight)
    typ = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ)
            or pa.types.is_boolean(typ)):
        raise DataError(f"{where}: weight column {weight!r} is {typ}, not numeric: "
                        f"{WEIGHTS_ARE}")
    found = first_bad_weight(col)
    if found is not None:
        raise DataError(f"{where}: weight column {weight!r} {found[1]} in row "
                        f"{found[0] + 1}: {WEIGHTS_ARE}")
    return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
