"""What a model file's ``extra["data"]`` (how ``dask-ps train --save`` read the training
data) must hold for ``dask-ps evaluate`` to read test data the same way: checked by
:mod:`dask_ps.saving` when a model is saved and when it is loaded."""

from __future__ import annotations

__all__ = ["DATA_FORMATS", "data_keys", "data_problem"]


#: The training data formats ``dask-ps train --save`` records as ``extra["data"]["format"]``,
#: by estimator: how ``dask-ps evaluate`` reads test data.
_TABLES = ("libsvm", "csv", "parquet")
DATA_FORMATS = {"LogisticRegression": _TABLES, "FactorizationMachineClassifier": _TABLES,
                "GBDTClassifier": _TABLES, "GBDTRegressor": _TABLES,
                "LatentDirichletAllocation": ("ldac", "docword"),
                "MatrixFactorization": ("ratings",)}


def data_keys(name: str, fmt: str) -> tuple:
    """``(key, types, what)`` of each entry ``dask-ps evaluate`` reads test data with that
    ``extra["data"]`` of an estimator ``name`` trained on ``fmt`` data must hold (``types``:
    of its value, None for any)."""
    if fmt == "libsvm":
        return (("n_features", (int,), "the training data's width"),)
    if fmt not in ("csv", "parquet"):
        return ()
    if name in ("LogisticRegression", "FactorizationMachineClassifier"):
        return (("encoder", (str,), "the JSON of the HashingEncoder the training table's "
                                    "columns were hashed with"),)
    keys = (("label", None, "the label column"),
            ("features", (list,), "the feature columns, in order"))
    if fmt == "csv":
        keys += (("sep", (str, type(None)), "the field delimiter"),
                 ("header", (bool,), "whether the files start with column names"))
    return keys


def data_problem(extra: dict, name: str, estimator=None) -> str | None:
    """What is wrong with ``extra["data"]`` (how the training data was read) for estimator
    ``name``, or None: absent is fine; else a dict whose ``format`` is one of
    ``DATA_FORMATS`` and which holds what test data of that format is read with
    (:func:`data_keys`: e.g. a table model's ``encoder``; a GBDT table's ``categories``
    of each ``categorical`` column, those of its ``categories_``; its ``columns``, if
    given, a list of str holding its ``label`` and ``features``)."""
    if "data" not in extra:
        return None
    data = extra["data"]
    if not isinstance(data, dict):
        return f"extra.data is a {type(data).__name__}, not a JSON object"
    known = DATA_FORMATS.get(name, sorted({f for v in DATA_FORMATS.values() for f in v}))
    if "format" in data and data["format"] not in known:
        return (f"extra.data.format {data['format']!r} is not a format {name} is trained on "
                f"({', '.join(known)})")
    for key, types, what in data_keys(name, data.get("format")):
        if key not in data:
            return (f"extra.data has no {key!r} ({what}): {data['format']} test data is "
                    f"read with it (dask-ps train --save writes it; was the file edited?)")
        value = data[key]
        if types is not None and (not isinstance(value, types) or (
                isinstance(value, bool) and bool not in types)):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            return (f"extra.data.{key} is {shown}, not "
                    f"{' or '.join('null' if t is type(None) else t.__name__ for t in types)} "
                    f"({what})")
        if key == "encoder":
            from .io.hashing import HashingEncoder

            try:
                HashingEncoder.from_json(value)
            except (ValueError, TypeError) as exc:  # (JSON's errors are ValueErrors)
                return f"extra.data.encoder is not {what} ({type(exc).__name__}: {exc})"
    if name.startswith("GBDT") and data.get("format") in ("csv", "parquet"):
        # the training file's columns in order (evaluate reads a test file whose header
        # setting differs by position); absent from models saved before it was written
        columns = data.get("columns")
        if columns is not None and not (
                isinstance(columns, list) and all(isinstance(c, str) for c in columns)
                and all(c in columns for c in [data.get("label"), *data["features"]])):
            return (f"extra.data.columns is {str(columns)[:60]}, not the training file's "
                    f"columns in order (a list holding extra.data.label and "
                    f"extra.data.features)")
        # test data's categories are these: set to others, test values turn missing
        cats, fitted = data.get("categories"), getattr(estimator, "categories_", None)
        for c in data.get("categorical") or ():
            held = cats.get(c) if isinstance(cats, dict) and isinstance(c, str) else None
            if not isinstance(held, list):
                return (f"extra.data.categories holds no list of the categories of column "
                        f"{c!r} (extra.data.categorical): the test data's categories would "
                        f"be read from the test data (was the file edited?)")
            if isinstance(fitted, dict) and c in fitted and list(fitted[c]) != held:
                return (f"extra.data.categories of column {c!r} are not the model's "
                        f"categories_ of it: {str(held)[:60]}, {str(list(fitted[c]))[:60]}")
    return None
