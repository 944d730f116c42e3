"""Ids of users and items: :class:`IdMapping` (sorted distinct ids and their dense codes) and
:func:`id_values` (the one rule for the ids of a typed column)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from ..exceptions import DataError
from ._id_codes import (
    arrow_text,
    hashed_codes,
    id_array,
    integer_text,
    missing_apart,
    refuse_missing,
)

__all__ = ["IdMapping", "id_values"]


class IdMapping:
    """Sorted distinct ids (int64 or str) and their dense codes ``0..n-1``.

    Parameters
    ----------
    ids : array-like of int or str
        Distinct ids (sorted here).

    Raises
    ------
    DataError (a ValueError)
        Repeated ids, or a missing one (None, NaN, ``pd.NA``; not made the id ``"None"`` or
        ``"nan"``): naming its position.

    Examples
    --------
    >>> m = IdMapping(["b", "a", "c"])
    >>> m.codes(["c", "a", "x"]).tolist(), m.ids_of([0, 2]).tolist(), len(m)
    ([2, 0, -1], ['a', 'c'], 3)
    >>> IdMapping.from_json(m.to_json()) == m
    True
    """

    def __init__(self, ids) -> None:
        ids = np.asarray(id_array(ids))  # a NaN in a list of str: not made "nan"
        refuse_missing(ids, "ids")
        ids = ids.astype(np.int64) if ids.dtype.kind in "iub" else ids.astype(str)
        ids = np.sort(ids)
        if ids.size > 1 and (ids[1:] == ids[:-1]).any():
            raise DataError(f"repeated id {ids[1:][ids[1:] == ids[:-1]][0].item()!r}")
        self.ids = ids

    @classmethod
    def from_sorted(cls, ids, name: str = "ids") -> "IdMapping":
        """The mapping of ``ids`` already sorted and distinct (e.g. a fitted model's
        ``user_ids_``), taken as they are: checked (one vectorised comparison of neighbours),
        not sorted again.

        Parameters
        ----------
        ids : int64 or str array (n,)
            Strictly increasing ids.
        name : str, default "ids"
            What ``ids`` are, for the error (``"user_ids_"``).

        Raises
        ------
        DataError (a ValueError)
            An id that repeats the one before it or is smaller: naming it, its position and
            the one before (a repeated id would get wrong codes from the hash lookup); a
            missing id (None, NaN, ``pd.NA``), naming its position.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise DataError(f"{name} must be 1-d, got shape {ids.shape}")
        if ids.shape[0] < 2:
            refuse_missing(ids, name)
        else:
            try:  # a missing id fails the comparison (NaN) or raises (None, pd.NA)
                with np.errstate(invalid="ignore"):
                    rising = ids[1:] > ids[:-1]
                ordered = bool(rising.all())
            except TypeError:
                refuse_missing(ids, name)
                raise
            if not ordered:
                refuse_missing(ids, name)
                k = int(np.argmin(rising)) + 1
                how = "repeats" if ids[k] == ids[k - 1] else "is smaller than"
                raise DataError(f"{name}[{k}] = {ids[k].item()!r} {how} {name}[{k - 1}] = "
                                f"{ids[k - 1].item()!r}: the ids must be sorted and distinct")
        mapping = cls.__new__(cls)
        mapping.ids = ids
        return mapping

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __eq__(self, other) -> bool:
        return (isinstance(other, IdMapping) and self.ids.dtype.kind == other.ids.dtype.kind
                and np.array_equal(self.ids, other.ids))

    def __repr__(self) -> str:
        return f"IdMapping({len(self)} {'int64' if self.is_integer else 'str'} ids)"

    @property
    def is_integer(self) -> bool:
        return self.ids.dtype.kind == "i"

    def codes(self, values) -> np.ndarray:
        """The dense code of each id in ``values``.

        Parameters
        ----------
        values : array-like, pandas Series or pyarrow array, any shape
            Ids to look up. With string ids, every other value is compared as ``str``
            (NumPy's ``astype(str)``); with integer ids, a string that is a decimal integer
            within int64 is that integer (``"12"`` and ``"012"`` are 12; ``"bob"``,
            ``"12.5"``, ``" 12"``, ``"+12"`` are unknown), and values that are neither
            integers nor strings are unknown.

        Returns
        -------
        codes : int64 ndarray, the shape of ``values``
            ``0 .. len(self) - 1``; -1 for an id not in the mapping and for a missing value
            (None, NaN, ``pd.NA``, NaT, a pyarrow null: never the id ``"None"`` or
            ``"nan"``).

        Notes
        -----
        String values go through a pyarrow hash lookup (:mod:`~dask_ps.io._id_codes`)
        unless they are few for many ids (then a binary search); integer values through a
        pandas hash index built once per mapping and process, as do strings looked up in
        integer ids once pyarrow parses them (:func:`~._id_codes.integer_text`).
        """
        values = id_array(values)
        text = arrow_text(values)  # None for numbers and for missing values
        if text is not None and self.is_integer:  # "12" is the id 12 (read_ratings' rule)
            ints, ok = integer_text(text)
            found = np.where(ok, self._index().get_indexer(ints), -1).astype(np.int64)
            return found.reshape(getattr(values, "shape", -1))
        if text is not None and self.ids.dtype.kind == "U" and 8 * len(text) >= len(self):
            if "_arrow" not in self.__dict__:  # a hash lookup unless few values for many ids
                self.__dict__["_arrow"] = pa.array(self.ids, pa.string())
            return hashed_codes(text, self._arrow).reshape(getattr(values, "shape", -1))
        found = missing_apart(values, self.codes)
        if found is not None:
            return found
        values = np.asarray(values)
        if self.is_integer:
            if values.dtype.kind not in "iub":
                return np.full(values.shape, -1, np.int64)
            # pandas' hash table (built once per mapping and process): ~10x searchsorted's
            found = self._index().get_indexer(values.astype(np.int64, copy=False).ravel())
            return found.astype(np.int64, copy=False).reshape(values.shape)
        values = values.astype(str)
        at = np.searchsorted(self.ids, values)
        found = at < len(self)
        found[found] = self.ids[at[found]] == values[found]
        return np.where(found, at, -1).astype(np.int64)

    def _index(self) -> pd.Index:
        index = self.__dict__.get("_hashed")
        if index is None:
            index = self.__dict__["_hashed"] = pd.Index(self.ids)
        return index

    def __getstate__(self) -> dict:
        return {"ids": self.ids}  # not the hash tables: built again where used

    def ids_of(self, codes) -> np.ndarray:
        """The ids of codes (IndexError for a code out of range)."""
        return self.ids[np.asarray(codes, dtype=np.int64)]

    def to_json(self) -> str:
        return json.dumps({"kind": "int64" if self.is_integer else "str",
                           "ids": self.ids.tolist()})

    @classmethod
    def from_json(cls, text: str) -> IdMapping:
        spec = json.loads(text)
        return cls(np.array(spec["ids"], dtype=np.int64 if spec["kind"] == "int64" else str))


def id_values(col) -> tuple:
    """The one rule for the ids of a typed column (NumPy, pandas; what :func:`encode_ratings`
    and :class:`~dask_ps.MatrixFactorization` take): ``(ids, None)`` with ids int64
    (integers, integral floats, an object column of integers) or str (strings), else
    ``(None, (row, why))``, ``why`` naming the first bad id and ``{row}`` its row: a missing,
    non-finite or non-integral id, or numbers and strings mixed in one column (ids 1 and
    "1" would be one user as strings, two as numbers).

    Raises
    ------
    TypeError
        Ids that are neither numbers nor strings (booleans, dates).
    """
    a = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
    if a.dtype.kind in "OUST" or str(a.dtype) == "string":
        a = np.asarray(a, dtype=object) if a.dtype.kind in "OT" or str(a.dtype) == "string" \
            else a
        missing = np.asarray(pd.isna(a), bool)
        if missing.any():
            return None, (int(np.argmax(missing)), "missing id at row {row}")
        kind = pd.api.types.infer_dtype(a, skipna=False)
        if kind in ("integer", "floating", "mixed-integer-float"):
            a = a.astype(np.int64 if kind == "integer" else np.float64)
        elif kind in ("mixed-integer", "mixed"):
            text = np.fromiter((isinstance(v, str) for v in a), bool, a.shape[0])
            if text.any() and not text.all():
                j = int(np.argmax(text != text[0]))
                return None, (j, f"ids mix numbers and strings: {a[0]!r} at row 0 and "
                                 f"{a[j]!r} at row {{row}} (convert the column to one kind, "
                                 f"e.g. .astype(str))")
            return a.astype(str), None
        else:
            return a.astype(str), None
    if a.dtype.kind in "iu":
        if a.dtype == np.uint64 and a.size and a.max() >= np.uint64(2**63):
            return None, (int(np.argmax(a >= np.uint64(2**63))),
                          f"id {a.max().item()} at row {{row}} does not fit in int64")
        return a.astype(np.int64, copy=False), None
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            i = int(np.argmax(bad))
            return None, (i, f"id {a[i].item()!r} at row {{row}} is not an integer")
        wide = np.abs(a) >= 2.0**63  # the cast would wrap
        if wide.any():
            i = int(np.argmax(wide))
            return None, (i, f"id {a[i].item()!r} at row {{row}} does not fit in int64")
        return a.astype(np.int64), None
    raise TypeError(f"ids must be integers or strings, got dtype {a.dtype}")
