"""String ids to codes by a hash lookup in pyarrow (``IdMapping.codes`` of string ids): no
NumPy unicode copy and no ``searchsorted`` (~5x faster on 10^7 ids); missing ids refused,
missing values looked up coded -1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import DataError


def arrow_text(values) -> pa.Array | pa.ChunkedArray | None:
    """``values`` (a pyarrow array of strings, a NumPy unicode array, an object array of
    str, any shape: flattened) as pyarrow strings compared as NumPy's ``astype(str)`` would
    compare them (trailing NULs dropped), or None for anything else (numbers, bytes,
    missing values: left to ``astype(str)``)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) \
                or values.null_count:
            return None
        text = pc.cast(values, pa.string())
    else:
        a = np.asarray(values).ravel()
        if a.dtype.kind == "U":
            text = pa.array(a, pa.string())
        elif a.dtype.kind == "O" and pd.api.types.infer_dtype(a, skipna=False) == "string":
            try:  # str only (an np.str_ too); a lone surrogate does not encode
                text = pa.array(a, pa.string())
            except (pa.ArrowException, UnicodeError):
                return None
        else:
            return None
    if pc.any(pc.ends_with(text, "\x00")).as_py():  # as NumPy's strings drop them
        text = pc.utf8_rtrim(text, characters="\x00")
    return text


def hashed_codes(text: pa.Array | pa.ChunkedArray, ids: pa.Array) -> np.ndarray:
    """int64 position of each of ``text`` in the distinct strings ``ids``, -1 for none."""
    found = pc.index_in(text, value_set=ids).fill_null(-1)
    return np.asarray(found.to_numpy(), dtype=np.int64)


def missing_of(values: np.ndarray) -> np.ndarray | None:
    """Boolean mask (``values``' shape) of the missing values (None, NaN, ``pd.NA``, NaT) of
    a NumPy array, or None when it holds none; vectorised, only where a kind can hold one
    (float, complex, object, dates)."""
    if values.dtype.kind not in "fcOmM":
        return None
    if values.dtype.kind == "O" and pd.api.types.infer_dtype(values, skipna=False) == "string":
        return None  # all str: ~4x faster than pd.isna on 10^7 ids
    missing = np.asarray(pd.isna(values), bool)
    return missing if missing.any() else None


def refuse_missing(ids: np.ndarray, name: str) -> None:
    """DataError naming the position of the first missing id (:func:`missing_of`) of
    ``ids``."""
    missing = missing_of(ids)
    if missing is not None:
        k = int(np.argmax(missing.ravel()))
        value = ids.ravel()[k]
        value = value.item() if isinstance(value, np.generic) else value
        raise DataError(f"{name}[{k}] is missing ({value!r}): an id must be a number or a "
                        f"string")


def id_array(values):
    """Ids (``IdMapping``) or ``values`` to look up (``IdMapping.codes``): a pyarrow array
    as it is, else a NumPy array; as objects a pandas nullable integer array or Series
    holding a missing value (its ints and ``pd.NA``: NumPy makes them floats, which match no
    integer id) and a list of strings holding a NaN (NumPy makes it the string "nan")."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    out = np.asarray(values)
    if out.dtype.kind == "f" and pd.api.types.is_integer_dtype(getattr(values, "dtype", None)):
        out = values.to_numpy(dtype=object)
    elif out.dtype.kind == "U" and not hasattr(values, "dtype") and (out == "nan").any():
        objects = np.asarray(values, dtype=object)
        out = out if missing_of(objects) is None else objects
    return out


def missing_apart(values, lookup) -> np.ndarray | None:
    """int64 codes of ``values`` (a NumPy or pyarrow array) holding missing values (None,
    NaN, ``pd.NA``, NaT; pyarrow nulls): -1 for each of those (an id not in any mapping,
    never the id ``"None"`` or ``"nan"``), ``lookup(present values)`` for the others (those
    of a nullable integer array as int64); None when none is missing."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if not values.null_count:
            return None
        missing = np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), bool)
        present = values.drop_null()
    else:
        missing = missing_of(values)
        if missing is None:
            return None
        present = values[~missing]
        if present.dtype.kind == "O" and pd.api.types.infer_dtype(present) == "integer":
            try:  # e.g. pd.array([1, None], "Int64"): ints once its NA is apart
                present = present.astype(np.int64)
            except OverflowError:
                pass
    out = np.full(missing.shape, -1, np.int64)
    out[~missing] = lookup(present)
    return out


#: A decimal integer as an id is written: ``-7``, ``007``, and ``7.0`` or ``7.`` (an
#: integral float, as pandas writes one: :func:`~.ids.id_values` takes those as integers);
#: not ``+7``, `` 7``, ``7.5``, ``7e0``, ``0x7``.
INTEGER = r"^-?[0-9]+(\.0*)?$"
#: A decimal number (``12``, ``-1.5``, ``.5``, ``1e3``, ``+7``; not ``nan``, ``inf``).
NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_INT64_MAX, _INT64_MIN = str(2**63 - 1), str(2**63)  # digits of the largest magnitudes


def integer_text(text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, ok)`` of pyarrow strings: int64 ``values`` (0 where not ``ok``) and a
    boolean mask ``ok`` of the strings that are decimal integers (:data:`INTEGER`) within
    int64; vectorised (pyarrow compute: exact, no float on the way), a null is not ``ok``.

    Examples
    --------
    >>> values, ok = integer_text(pa.array(["12", "007", "bob", "12.5", " 12", None, "3.0",
    ...                                     "9223372036854775807", "9223372036854775808"]))
    >>> values[ok].tolist(), ok.nonzero()[0].tolist()
    ([12, 7, 3, 9223372036854775807], [0, 1, 6, 7])
    """
    ok = pc.fill_null(pc.match_substring_regex(text, INTEGER), False)
    if pc.any(pc.match_substring(text, ".")).as_py():  # the regex's replace: when needed
        text = pc.replace_substring_regex(text, r"\.0*$", "")  # 7.0 as 7
    if (pc.max(pc.binary_length(text)).as_py() or 0) > 18:  # else every integer fits
        digits = pc.utf8_ltrim(text, characters="-0")  # magnitude (ok: -?[0-9]+)
        size = pc.binary_length(digits)
        limit = pc.if_else(pc.starts_with(text, "-"), _INT64_MIN, _INT64_MAX)
        fits = pc.or_(pc.less(size, 19),
                      pc.and_(pc.equal(size, 19), pc.less_equal(digits, limit)))
        ok = pc.and_(ok, pc.fill_null(fits, False))
    values = pc.cast(pc.if_else(ok, text, "0"), pa.int64())
    return (np.asarray(values.to_numpy(zero_copy_only=False), np.int64),
            np.asarray(ok.to_numpy(zero_copy_only=False), bool))


def number_text(text: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Boolean mask of the pyarrow strings that are decimal numbers (:data:`NUMBER`)."""
    found = pc.fill_null(pc.match_substring_regex(text, NUMBER), False)
    return np.asarray(found.to_numpy(zero_copy_only=False), bool)
