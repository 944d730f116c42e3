"""CSV tables as a dask DataFrame (:func:`read_frame`, GBDT's reader), every line checked
as it is parsed, errors naming the file, the line and the column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import NOT_A_CLASS, DataError
from ._blocks import Block, lines_before, open_paths, plan, read, skip_empty_files
from ._csv import (
    LineError,
    _bad_field,
    check_columns,
    check_sep,
    common_header,
    line_of_row,
    line_weights,
    numbered_names,
    numeric_sample,
    read_table,
    sample_table,
    strip_header,
)
from ._weight_column import check_weight_column
from .parquet import label_column, unique_columns

__all__ = ["read_frame"]


def _label_kind(sample: pa.Table, label: str, classes: bool) -> str:
    """How :func:`read_frame` reads the labels: ``"number"`` (float64); for ``classes``,
    ``"whole"`` (read as float64, then int64) when the sample's labels are all whole
    numbers written without a point, ``"text"`` when one is not a number."""
    col = sample.column(label).drop_null()
    if not classes or not len(col):
        return "number"
    try:
        pc.cast(col, pa.int64())
        return "whole"
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    try:
        pc.cast(col, pa.float64())
        return "number"
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return "text"


def _text_features(sample: pa.Table, features: list[str]) -> list[tuple[int, str, str]]:
    """``(row, column, value)`` of the first field that is not a number in each of the
    sample's ``features`` columns (read as numbers) of which at least half the non-empty
    fields are not numbers: a categorical column, where a stray word among numbers is a bad
    line (the parse names it)."""
    import pandas as pd

    found = []
    for name in features:
        if numeric_sample(sample.column(name)):
            continue
        text = pc.utf8_trim(sample.column(name), " \t").to_pandas()
        text = text[text.notna() & (text != "")]
        words = pd.to_numeric(text, errors="coerce").isna() & (text.str.lower() != "nan")
        if words.mean() >= 0.5:
            row = int(words.idxmax())
            found.append((row, name, text[row]))
    return found


def _refuse_text_features(fs, block: Block, sample: pa.Table, names: list[str],
                          features: list[str], header: bool) -> None:
    """Refuse, naming the file, line and column, feature columns read as numbers whose
    first lines hold text (a categorical column not said so), asking whether they are
    categorical. The first line's error without the hint would be the same."""
    found = _text_features(sample, features)
    if not found:
        return
    row, name, value = min(found, key=lambda f: (f[0], names.index(f[1])))
    data, skipped = strip_header(read(fs, block), block, header)
    text = [n for _, n, _ in found]
    raise LineError(block.path, skipped + line_of_row(data, row),
                    f"column {name!r} (field {names.index(name) + 1}): {value!r} is not a "
                    f"number: {'is it' if len(text) == 1 else 'are these'} categorical? use "
                    f"categorical={text!r}")


def _refuse_text_labels(fs, block: Block, sample: pa.Table, names: list[str], label: str,
                        header: bool) -> None:
    """Refuse labels read as numbers (no ``classes``: a regression's) of which one in the
    sample is text, naming its file, line and column as the reader would once it read the
    block (for ``--test``: after the fit); read now, with the sample read anyway."""
    for row, value in enumerate(sample.column(label).to_pylist()):
        problem = None if value is None else _bad_field(value, True, True)
        if problem is not None and problem.startswith("the label"):  # (not inf: the reader's)
            data, skipped = strip_header(read(fs, block), block, header)
            raise LineError(block.path, skipped + line_of_row(data, row),
                            f"column {label!r} (field {names.index(label) + 1}): {problem}")


def _frame_block(block: Block, fs, names: list[str], types: dict, sep: str, header: bool,
                 required: str, whole: bool, classes: bool = False, weight: str | None = None):
    """One partition of :func:`read_frame`: a block's lines as a pandas DataFrame
    (``whole``: the ``required`` labels, read as numbers, become int64; ``classes``:
    labels read as numbers must be whole, a classifier's classes; ``weight``: a column of
    sample weights, checked, :func:`~._csv.line_weights`)."""
    try:
        table, _ = read_table(fs, block, 0, header, names, types, sep, required,
                              nan_missing=True)
        y = table.column(required)
        if whole or (classes and pa.types.is_floating(y.type)):
            frac = pc.not_equal(pc.floor(y), y).to_numpy(zero_copy_only=False)
            if frac.any():
                row = int(np.argmax(frac))
                data, skipped = strip_header(read(fs, block), block, header)
                raise LineError(block.path, skipped + line_of_row(data, row), (
                    f"column {required!r}: {y[row].as_py()!r} is not a whole number, as the "
                    f"classes in the file's first lines are") if whole else (
                    f"column {required!r} holds {y[row].as_py()!r}, not a class: "
                    f"{NOT_A_CLASS}"))
        if weight is not None:
            line_weights(table, weight, lambda: strip_header(read(fs, block), block, header),
                         block.path)
        if whole:
            i = names.index(required)
            table = table.set_column(i, required, pc.cast(y, pa.int64()))
    except LineError as exc:  # the block's own line numbers: count the lines before it now
        raise exc.shifted(lines_before(fs, block)) from None
    return table.to_pandas()


def read_frame(urlpath, label: str | None = None, *, categorical=(), classes: bool = False,
               sep: str = ",", header: bool = True, blocksize: int | str | None = "64MiB",
               storage_options: dict | None = None, compression: str | None = "infer",
               weight: str | None = None):
    """A CSV table as a dask DataFrame, one partition per block, whose every line is checked
    as it is parsed (when the frame is computed).

    Feature columns are float64 (an empty field or ``nan`` is NaN, see :mod:`dask_ps.io`);
    those named in ``categorical`` are strings. The label is required on every line: a
    finite number, float64; or, with ``classes``, as written: int64 when the labels of the
    first :data:`SAMPLE_BYTES` of the first file are all whole numbers written without a
    point (a later ``1.0`` is class 1), strings when one of them is not a number.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (a glob is expanded, matches in sorted order;
        a folder stands for the files under it but those named ``.*`` or ``_*``).
    label : str, optional
        The label column; default the first.
    categorical : sequence of str, default ()
        Feature columns read as strings.
    classes : bool, default False
        The labels are classes (a classifier's): their type follows the file's first lines.
    sep : str, default ","
    header : bool, default True
        Whether every file starts with a line of column names (all must agree); without,
        the columns are named ``"0"``, ``"1"``, ...
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.
    weight : str, optional
        A column of sample weights (not ``label``, not ``categorical``): float64, required on
        every line, a finite, non-negative number; returned as ``w``.

    Returns
    -------
    frame : dask.dataframe.DataFrame
        Every column, in the files' order.
    label : str
        The label column's name.
    w : dask.dataframe.Series of float64
        Only with ``weight``: the frame's weight column (its partitions, as
        ``fit(X, y, sample_weight=w)`` takes them with ``X`` a frame of the same partitions).

    Raises
    ------
    ValueError
        Files all of 0 bytes (naming the first: one among others is left out, with a
        ``UserWarning`` naming it), an empty first line, headers that differ, a ``label``
        or ``categorical`` column the files lack, a bad line in the first file's sample,
        or a feature column (not ``categorical``) of which at least half the sample's
        fields are words (a :class:`LineError` naming the first, asking whether the columns
        are categorical), or (no ``classes``) a label of the sample that is text (a
        :class:`LineError` naming it);
        when computed, a
        :class:`LineError` ``"<file>, line <n>: ..."`` (lines of the file, 1-based, the
        header being line 1) naming the first bad line of a block: a wrong number of
        fields, a feature that is not a number or is infinite (naming the column), a label
        that is empty or not a finite number, or (``classes``) not a whole number when the
        sample's are, or a number that is not whole (``0.7``: not a class), or (``weight``)
        a weight that is empty, not a number, NaN, infinite or negative (naming the
        column). From this call, a ``weight`` column that is the label, categorical or
        absent.
    FileNotFoundError
        No file matches ``urlpath``.
    """
    import dask.dataframe as dd

    check_sep(sep)
    fs, paths = open_paths(urlpath, storage_options)
    paths = skip_empty_files(fs, paths)[0]  # 0 bytes: no header, no rows (all: refused)
    blocks = plan(fs, paths, blocksize, compression)
    names = common_header(fs, blocks, sep) if header else \
        numbered_names(fs, paths[0], sep, blocks[0].compression)
    unique_columns(paths[0], names)
    check_columns(paths[0], names, sep)
    label = label_column(paths[0], names, label, categorical)
    check_weight_column(weight, label, names, paths[0])
    if weight is not None and weight in categorical:
        raise DataError(f"weight column {weight!r} is categorical: weights are numbers")
    types = {n: pa.string() if n in categorical else pa.float64() for n in names}
    sample = sample_table(fs, paths[0], names, header, sep, blocks[0].compression)
    kind = _label_kind(sample, label, classes)
    if not classes:
        _refuse_text_labels(fs, blocks[0], sample, names, label, header)
    _refuse_text_features(fs, blocks[0], sample, names, [
        n for n in names if n != label and n != weight and n not in categorical], header)
    if kind == "text":
        types[label] = pa.string()
    meta = pa.schema([(n, pa.int64() if n == label and kind == "whole" else t)
                      for n, t in types.items()]).empty_table().to_pandas()
    frame = dd.from_map(_frame_block, blocks, fs=fs, names=names, types=types, sep=sep,
                        header=header, required=label, whole=kind == "whole",
                        classes=classes, weight=weight, meta=meta,
                        label="read-frame", enforce_metadata=False)
    return (frame, label) if weight is None else (frame, label, frame[weight])
