"""``dask-ps train gbdt`` and ``gbdt-regression``: LIBSVM or tables (CSV/Parquet) to
:class:`~dask_ps.GBDTClassifier` and :class:`~dask_ps.GBDTRegressor`.
"""

from __future__ import annotations

import argparse

from ..exceptions import DataError, OptionError
from . import _options as opt
from ._algorithms import (
    CHECKPOINT,
    Algorithm,
    Dataset,
    Loaded,
    Param,
    TestSet,
    _count,
    add_zero_based,
    block_classes,
    check_named_columns,
    check_test_classes,
    check_weight_option,
    checked_classes,
    class_lines,
    feature_ids,
    file_columns,
    read_test,
    read_train_test,
    weight_of,
)

# --- gradient-boosted trees -------------------------------------------------------------------

def _gbdt_data_options(g) -> None:
    g.add_argument("--format", choices=["libsvm", "csv", "parquet"],
                   help="input format (default libsvm); csv/parquet: a table, one column the "
                        "label, the others the features")
    g.add_argument("--label", help="csv/parquet: the label column (default: the first)")
    g.add_argument("--categorical", type=opt.columns,
                   help="csv/parquet: categorical feature columns, comma-separated")
    g.add_argument("--sep", type=opt.separator,
                   help="csv: field delimiter, one character (default ','; '\\t' for a tab)")
    g.add_argument("--header", action=argparse.BooleanOptionalAction,
                   help="csv: the first line names the columns (default yes; --no-header: "
                        "columns are 0, 1, ...)")
    g.add_argument("--n-features", type=opt.POSITIVE_INT,
                   help="libsvm: feature columns (default: the largest index seen)")
    add_zero_based(g)
    g.add_argument("--blocksize", type=opt.size, help="bytes per data partition (default: "
                   "two partitions per worker, at most 64MiB each)")


def _gbdt_meta(args) -> dict:
    fmt = args.format or "libsvm"
    table = ("label", "weight", "categorical", "sep", "header")
    if fmt == "libsvm":
        for name in table:
            if getattr(args, name) is not None:
                raise OptionError(f"--{name} applies to --format csv|parquet")
        return {"format": fmt, "n_features": args.n_features}
    for name in ("n_features", "zero_based"):
        if getattr(args, name) is not None:
            raise OptionError(f"--{name.replace('_', '-')} applies to --format libsvm")
    if fmt == "parquet" and (args.sep is not None or args.header is not None):
        raise OptionError("--sep and --header apply to --format csv")
    sep = args.sep or None  # a tab given as --sep '\t' is one already (opt.separator)
    check_weight_option(args, fmt, args.label, ("--categorical", args.categorical))
    # a classifier's labels keep the file's type (classes); a regression's are numbers
    return {"format": fmt, "label": args.label, "weight": args.weight,
            "categorical": args.categorical, "sep": sep,
            "header": args.header is not False,
            "classes": getattr(args, "algorithm", "gbdt") != "gbdt-regression"}


def _gbdt_check_inputs(args) -> None:
    """Before a cluster starts: the header of the first ``--train`` file (and of
    ``--test``'s) holds ``--label`` and the ``--categorical`` columns, and the training
    file's ``--weight`` (DataError naming the option, the file and its columns; they were
    found only once the cluster had read the files); the weight is not the first column
    when that is the label; a Parquet file's schema (its footer) as the reader checks it
    (:func:`~dask_ps.io.parquet.check_table_schema`: e.g. a text feature column not named
    by ``--categorical``). Headerless CSV files name their columns by position: not
    checked here."""
    from ..io._blocks import open_paths
    from ..io.parquet import check_table_schema, footer, table_schema

    meta = _gbdt_meta(args)
    if meta["format"] == "libsvm" or not (meta["format"] == "parquet" or meta["header"]):
        return
    wanted = [("--label", meta["label"])] if meta["label"] else []
    wanted += [("--categorical", c) for c in meta["categorical"] or ()]
    for url in filter(None, (args.train, args.test)):
        weight = meta["weight"] if url == args.train else None
        names = check_named_columns(url, meta["format"], meta["sep"],
                                    wanted + ([("--weight", weight)] if weight else []))
        fs, paths = open_paths(url)
        if weight and not meta["label"] and names[:1] == [weight]:
            raise OptionError(f"--weight {weight}: the first column, the label without "
                              f"--label")
        if meta["format"] == "parquet":
            check_table_schema(paths[0], table_schema(footer(fs, paths[0])[1]), meta["label"],
                               meta["categorical"] or (), meta["classes"],
                               weight if weight in names else None)


def _gbdt_read(path: str, meta: dict, blocksize=None, n_features=None, test: bool = False):
    """``X, y, w`` of one table as ``meta`` says, a dask DataFrame (categorical columns
    with the categories of the training data); ``w`` the dask series of the weight column
    ``meta["weight"]`` (not a feature), or None (no ``--weight``; a ``test`` file without
    the column). LIBSVM: read by :func:`~._algorithms.read_train_test` and
    :func:`~._algorithms.read_test`, as a sparse dask array."""
    from ..cluster import compute
    from ..io._frame import read_frame
    from ..io.parquet import read_table_parquet

    # a csv's features as floats (dask's guess from the first rows could be int, then fail
    # on a decimal later), a classifier's labels as written (classes), a regression's as
    # numbers; bad values named by file and line (csv) or row group and row (parquet)
    # a test file read with a header setting other than the training data's (evaluate
    # --header/--no-header): its columns are the training data's, by position
    named = _by_position(path, meta) if test and meta.get("by_position") else None
    as_read = {v: k for k, v in (named or {}).items()}  # a training column's name here
    weight = weight_of(path, meta, test) if named is None else as_read.get(meta.get("weight"))
    table = dict(categorical=[as_read.get(c, c) for c in meta.get("categorical") or ()],
                 classes=meta.get("classes", True), weight=weight)
    label = as_read.get(meta.get("label"), meta.get("label"))
    if meta["format"] == "csv":
        df, label, *w = read_frame(path, label, sep=meta["sep"] or ",",
                                   header=meta["header"], blocksize=blocksize, **table)
    else:
        df, label, *w = read_table_parquet(path, label, blocksize=blocksize or "64MiB",
                                           **table)
    if named is not None:
        df, label, weight = df.rename(columns=named), named[label], named.get(weight)
    elif not test:  # their order: a test file without the header is read by it
        meta["columns"] = [str(c) for c in df.columns]
    meta["label"] = label
    X = df.drop(columns=[label, *([weight] if weight else [])])
    features = [str(c) for c in X.columns]
    want = meta.setdefault("features", features)
    if sorted(want) != sorted(features) or len(set(features)) < len(features):
        raise DataError(f"{path}: feature columns {features} differ from the training "
                        f"data's {want}")
    if features != want:  # the same columns in another order: taken by name
        X = X[[X.columns[features.index(c)] for c in want]]
    for c in meta.get("categorical") or ():
        if c not in X.columns:
            raise DataError(f"{path}: --categorical names {c!r}, not a column")
        cats = meta.setdefault("categories", {})
        if c not in cats:
            cats[c] = sorted(compute(X[c].dropna().unique(), what=f"reading the categories "
                                     f"of column {c!r} of {path}")[0].tolist())
        X[c] = X[c].astype("category").cat.set_categories(cats[c])
    return X, df[label], (w or [None])[0]


def _training_columns(path: str, meta: dict) -> list[str]:
    """The training file's columns in order: as saved with the model (``meta["columns"]``),
    or, for a model saved before they were, those of headerless training data (numbered
    by position: the label, weight and feature names say the count)."""
    if meta.get("columns"):
        return list(meta["columns"])
    named = [meta["label"], *([meta["weight"]] if meta.get("weight") else []),
             *meta["features"]]
    if meta.get("trained_named") is False and all(c.isdigit() for c in named):
        return [str(i) for i in range(len(named))]
    raise DataError(f"{path}: its columns cannot be matched by position to the training "
                    f"data's (the model does not record where its label column was: saved "
                    f"by an older dask-ps); give the test file the training data's "
                    f"header line")


def _by_position(path: str, meta: dict) -> dict[str, str]:
    """``{test column: training column}`` for test data ``path`` whose header setting is
    not the training data's (``meta["by_position"]``, set by ``dask-ps evaluate
    --header/--no-header``): column k is the training data's column k (a test file
    without the training's weight column: the training columns but that one).

    Raises
    ------
    DataError
        Another number of columns than the training data's, naming the file and both
        counts; a model that does not record its training columns' order.
    """
    trained = _training_columns(path, meta)
    names = file_columns(path, meta["format"], meta.get("sep"), meta.get("header", True))
    weight = meta.get("weight")
    if weight and len(names) == len(trained) - 1:  # scored unweighted, as by name
        trained = [c for c in trained if c != weight]
    if len(names) != len(trained):
        how = "with a header" if meta.get("header", True) else "without a header"
        raise DataError(f"{path}: {len(names)} columns, while the training data had "
                        f"{len(trained)} ({', '.join(trained[:8])}"
                        f"{', ...' if len(trained) > 8 else ''}): read {how}, unlike the "
                        f"training data, its columns are taken by position, so it must "
                        f"have the training data's columns in their order")
    return dict(zip(names, trained))


def _check_classes(y, y_read, args, meta) -> None:
    """A classifier's labels that are not classes (0/0.7), or a single class, named by the
    file (and the line of the first row holding one), as for LR
    (:func:`~._algorithms.checked_classes`; a table's reader names a decimal label by its
    line itself, ``classes=True``)."""
    checked_classes(block_classes(y), y_read, args.train, meta)


def _gbdt_load(args, client) -> Loaded:
    from ..cluster import compute

    meta, X, y, w, test = read_train_test(args, client, _gbdt_meta, _gbdt_read)
    y_read = y  # its graph names the blocks of its chunks, the persisted one's does not
    X, y, w = client.persist([X, y, w]) if w is not None else (*client.persist([X, y]), None)
    n = int(X.shape[0]) if meta["format"] == "libsvm" else int(compute(
        y.shape[0], what=f"counting the rows of {args.train}")[0])
    if not n:
        from ..io._blocks import files_named

        raise DataError(f"{files_named(args.train)}: no rows")
    if args.algorithm == "gbdt":
        _check_classes(y, y_read, args, meta)
    parts = _count(X.npartitions if hasattr(X, "npartitions") else X.numblocks[0],
                   "partition")
    weighted = f", weighted by column {meta['weight']!r}" if w is not None else ""
    return Loaded((X, y), test, meta, float(n),
                  f"{n:,} rows x {meta['n_features']:,} features ({parts}){weighted}",
                  {} if w is None else {"sample_weight": w})


def _gbdt_load_test(path: str, meta: dict, args):
    return read_test(_gbdt_read, path, meta, getattr(args, "zero_based", None))


def _gbdt_score(est, test: TestSet) -> tuple[int, list[str]]:
    # computed apart: a table's labels are a dask-expr collection, predictions an array
    import numpy as np

    from ..cluster import compute

    what = f"scoring {test.path}"
    y, w = compute(test.y, test.w, what=what)
    y = np.asarray(y)
    w = None if w is None else np.asarray(w, np.float64)
    if not y.shape[0]:  # the estimator refuses an empty X
        return 0, []
    if hasattr(est, "classes_"):
        check_test_classes(y, test)
        return y.shape[0], class_lines(est.classes_, y,
                                       compute(est.predict_proba(test.X), what=what)[0], w)
    pred = compute(est.predict(test.X), what=what)[0]
    err = np.asarray(pred, np.float64) - np.asarray(y, np.float64)
    if w is not None and not w.sum() > 0:
        return y.shape[0], ["test: every weight is zero: no weighted l2, l1"]
    return y.shape[0], [f"test: l2 {np.average(err ** 2, weights=w):.6f}  "
            f"l1 {np.average(np.abs(err), weights=w):.6f}  ({err.shape[0]:,} rows)"
            + ("  (weighted)" if w is not None else "")]


def _gbdt_export(est, meta: dict):
    import numpy as np
    import pandas as pd

    b = est.booster_
    tree = np.repeat(np.arange(b.tree_start.shape[0] - 1), np.diff(b.tree_start))
    ids, feature = feature_ids(b.feature, meta, "the position in data.features, from 0")
    nodes = pd.DataFrame({"tree": tree, "class": b.tree_class[tree], "feature": ids,
                          **{k: getattr(b, k) for k in ("threshold", "default_left", "is_cat",
                                                        "left", "right", "value", "gain",
                                                        "count")}})
    desc = {"model": "gradient-boosted trees: raw score = base_score + sum of the leaf values "
                     "reached (x <= threshold, NaN to default_left, goes left)",
            "estimator": type(est).__name__, "base_score": b.base_score.tolist(),
            "classes": est.classes_.tolist() if hasattr(est, "classes_") else None,
            "n_features": int(est.n_features_in_), "n_rounds": int(est.n_estimators_),
            "tables": {"nodes": "one row per node; left/right: absolute row indices, -1 at "
                                "leaves; categorical splits' category sets are not exported"},
            "feature": f"{feature}; -1 at leaves", "data": meta}
    return {"nodes": nodes}, desc


_GBDT_PARAMS = (
    Param("--n-estimators", "n_estimators", dict(type=opt.POSITIVE_INT,
                                                 help="boosting rounds")),
    Param("--learning-rate", "learning_rate", dict(type=opt.POSITIVE)),
    Param("--max-leaf-nodes", "max_leaf_nodes", dict(type=opt.POSITIVE_INT,
                                                     help="leaves per tree (num_leaves)")),
    Param("--max-depth", "max_depth", dict(type=opt.POSITIVE_INT)),
    Param("--min-child-weight", "min_child_weight", dict(type=opt.NON_NEGATIVE)),
    Param("--min-samples-leaf", "min_samples_leaf", dict(type=opt.POSITIVE_INT)),
    Param("--reg-lambda", "reg_lambda", dict(type=opt.NON_NEGATIVE)),
    Param("--min-split-gain", "min_split_gain", dict(type=opt.NON_NEGATIVE)),
    Param("--max-bins", "max_bins", dict(type=opt.POSITIVE_INT)),
    Param("--subsample", "subsample", dict(type=opt.share)),
    Param("--colsample-bytree", "colsample_bytree", dict(type=opt.share)),
    Param("--split-share", "split_share", dict(
        type=opt.share_or_auto, help="1: level-wise trees; less: best-first in batches; "
        "auto: 1 below 100,000 training rows, 0.02 from there")),
    Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
    Param("--max-workers", "max_workers", dict(
        type=opt.workers_or_auto, help="at most this many workers hold the training rows "
        "(auto: one on a small training set, else all)")),
    Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
    *CHECKPOINT,
)
_GBDT_DATA = dict(data_options=_gbdt_data_options, load=_gbdt_load,
                  load_test=_gbdt_load_test, score=_gbdt_score, export=_gbdt_export,
                  unit="rows", passes="round", check=_gbdt_meta,
                  check_inputs=_gbdt_check_inputs,
                  weighted=True)
_LIGHTGBM_EXAMPLE = Dataset(
    "gbdt_lightgbm", "binary.train", "binary.test",
    "https://github.com/microsoft/LightGBM/tree/master/examples/binary_classification",
    {"format": "csv", "sep": "\t", "header": False})

GBDT = Algorithm(name="gbdt", summary="gradient-boosted trees, classification (LIBSVM or "
                 "CSV/Parquet tables)", estimator="GBDTClassifier", params=_GBDT_PARAMS,
                 datasets={"lightgbm": _LIGHTGBM_EXAMPLE}, **_GBDT_DATA)
GBDT_REGRESSION = Algorithm(
    name="gbdt-regression", summary="gradient-boosted trees, regression (squared error)",
    estimator="GBDTRegressor", params=_GBDT_PARAMS,
    datasets={"lightgbm": _LIGHTGBM_EXAMPLE}, **_GBDT_DATA)
