"""The algorithms ``dask-ps train`` knows: one :class:`Algorithm` entry each in
:data:`ALGORITHMS` (its estimator, its flags, its datasets, how it reads data and scores).

A new algorithm (lda, fm) is one more entry: the estimator's class name, a
:class:`Param` per estimator parameter the command line exposes, its reader and its test
report. Flags default to nothing, so an option not given leaves the estimator's own default.
"""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from . import _options as opt


@dataclass(frozen=True)
class Param:
    """A command-line flag for estimator parameter ``param``; ``kwargs`` go to argparse."""

    flag: str
    param: str
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Dataset:
    """A public dataset under ``$DASK_PS_DATA/<folder>``; ``options`` are the data options
    it implies (e.g. ``{"n_features": 123}``)."""

    folder: str
    train: str
    test: str
    url: str
    options: dict = field(default_factory=dict)


class Loaded(NamedTuple):
    """Training data read onto the cluster, for :func:`dask_ps.cli._run.train`."""

    fit_args: tuple  # estimator.fit(*fit_args)
    test: Any  # what ``Algorithm.score`` takes, or None
    meta: dict  # how the data was read (saved with the model; evaluate reads alike)
    units: float  # work per pass over the data (e.g. non-zeros), counted before the fit
    summary: str  # "1,234 rows x 56 features (4 partitions)"


@dataclass(frozen=True)
class Algorithm:
    """One ``dask-ps train ALGORITHM`` entry.

    Attributes
    ----------
    name, summary : str
    estimator : str
        Class name exported by :mod:`dask_ps`.
    params : tuple of Param
    datasets : dict of str to Dataset
    data_options : callable(argparse group)
        Adds the algorithm's data flags (besides --train, --test, --dataset).
    load : callable(args, client) -> Loaded
        Runs with ``client`` as the current client.
    load_test : callable(path, meta, args) -> test data
        For ``dask-ps evaluate``: read ``path`` as the training data was (``meta``).
    score : callable(estimator, test) -> list of str
        The lines printed about the test data (the first starts with ``test:``).
    export : callable(estimator, meta) -> (tables, description)
        For ``dask-ps export``: pandas tables of the weights and a JSON-able description.
    unit : str
        What ``Loaded.units`` counts ("non-zeros", "ratings").
    check : callable(args)
        Refuses contradictory data options before a cluster starts (ValueError).
    """

    name: str
    summary: str
    estimator: str
    params: tuple
    datasets: dict
    data_options: Callable
    load: Callable
    load_test: Callable
    score: Callable
    export: Callable
    unit: str
    check: Callable = lambda args: None

    @property
    def cls(self):
        import dask_ps

        return getattr(dask_ps, self.estimator)


def estimator_default(cls, param: str) -> str:
    """The default of ``param`` as its docstring or signature gives it, for --help."""
    default = inspect.signature(cls).parameters[param].default
    if default is not None:
        return repr(default) if isinstance(default, str) else str(default)
    doc = inspect.getdoc(cls) or ""
    m = re.search(rf"^{re.escape(param)}\b[^\n]*\n((?:[ ]{{4}}[^\n]*\n?)+)", doc, re.M)
    if m:
        d = re.search(r"Default:? (.+?)\.(?:\s|$)", " ".join(m.group(1).split()))
        if d:
            return d.group(1).replace("``", "").strip()
    return "not set"


def add_params(parser: argparse.ArgumentParser, algo: Algorithm) -> None:
    g = parser.add_argument_group("model", f"{algo.estimator} parameters (defaults: the "
                                           f"estimator's)")
    for p in algo.params:
        kwargs = dict(p.kwargs)
        if kwargs.get("action") is None and "choices" not in kwargs:
            kwargs.setdefault("metavar", p.flag.lstrip("-").upper().replace("-", "_"))
        kwargs["help"] = (kwargs.get("help", "") + f" (default: "
                          f"{estimator_default(algo.cls, p.param)})").strip()
        g.add_argument(p.flag, dest=p.param, default=argparse.SUPPRESS, **kwargs)


# --- shared -----------------------------------------------------------------------------------

def _n_workers(client) -> int:
    from ..cluster import worker_info

    return len(worker_info(client))


def _n_threads(client) -> int:
    from ..cluster import worker_info

    return sum(int(w.get("nthreads", 1)) for w in worker_info(client).values())


def _blocksize(urlpath: str, n_workers: int) -> int:
    """Two partitions per worker, between 256 KiB and 64 MiB."""
    import fsspec

    total = sum(f.fs.size(f.path) for f in fsspec.open_files(urlpath))
    return int(min(max(total // (2 * max(1, n_workers)) + 1, 2**18), 2**26))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _nnz(block) -> int:
    return int(block.nnz)


# --- logistic regression ----------------------------------------------------------------------

def _lr_data_options(g) -> None:
    g.add_argument("--format", choices=["libsvm", "csv", "parquet"], default="libsvm",
                   help="input format (default libsvm); csv/parquet: a click table with a "
                        "header, features hashed (dask_ps.io.read_ctr / encode_ctr)")
    g.add_argument("--label", help="csv/parquet: the label column (default: read_ctr's, "
                                   "'Label')")
    g.add_argument("--numeric", type=opt.columns, help="csv/parquet: numeric columns, "
                   "comma-separated (with --categorical; default: the Criteo layout)")
    g.add_argument("--categorical", type=opt.columns, help="csv/parquet: categorical columns")
    g.add_argument("--hash-features", type=opt.POSITIVE_INT,
                   help="csv/parquet: hashed feature columns (default 2**20)")
    g.add_argument("--sep", help="csv: field delimiter (default ',')")
    g.add_argument("--n-features", type=opt.POSITIVE_INT,
                   help="libsvm: feature columns (default: the largest index seen)")
    g.add_argument("--blocksize", type=opt.size, help="bytes per data partition, e.g. 64MiB "
                   "(default: two partitions per worker, at most 64MiB each)")


def _lr_meta(args) -> dict:
    """How LR data is read, from the options (saved with the model)."""
    fmt = args.format
    if fmt == "libsvm":
        for name in ("label", "numeric", "categorical", "hash_features", "sep"):
            if getattr(args, name) is not None:
                raise ValueError(f"--{name.replace('_', '-')} applies to --format csv|parquet")
        return {"format": fmt, "n_features": args.n_features}
    if args.n_features is not None:
        raise ValueError("--n-features applies to --format libsvm (csv/parquet: "
                         "--hash-features)")
    if fmt == "parquet" and args.sep is not None:
        raise ValueError("--sep applies to --format csv")
    encoder = None
    if args.numeric or args.categorical:
        from ..io import HashingEncoder

        kw = {"n_features": args.hash_features} if args.hash_features else {}
        encoder = HashingEncoder(numeric=tuple(args.numeric or ()),
                                 categorical=tuple(args.categorical or ()), **kw).to_json()
    elif args.hash_features:
        from ..io import HashingEncoder

        encoder = HashingEncoder.criteo(n_features=args.hash_features).to_json()
    return {"format": fmt, "label": args.label, "encoder": encoder, "sep": args.sep}


def _lr_read(path: str, meta: dict, blocksize=None, n_features=None):
    """``X, y`` of one input as ``meta`` says (the first pass runs on the current client)."""
    from ..io import HashingEncoder, encode_ctr, read_ctr, read_libsvm

    fmt = meta["format"]
    if fmt == "libsvm":
        return read_libsvm(path, n_features=n_features or meta.get("n_features"),
                           blocksize=blocksize)
    encoder = HashingEncoder.from_json(meta["encoder"]) if meta.get("encoder") else None
    kw = {"label": meta["label"]} if meta.get("label") else {}
    if fmt == "csv":
        if meta.get("sep"):
            kw["sep"] = meta["sep"]
        if blocksize:
            kw["blocksize"] = blocksize
        return read_ctr(path, encoder, **kw)
    import dask.dataframe as dd

    return encode_ctr(dd.read_parquet(path), encoder, **kw)


def _read_train_test(args, client, meta_of, read):
    """``meta, X, y, test`` of ``--train`` and ``--test`` (read now, so that its lines are
    checked before training) as ``meta_of(args)`` says, by ``read(path, meta, blocksize,
    n_features)``; csv and libsvm in two partitions per worker by default."""
    meta = meta_of(args)
    blocksize = args.blocksize
    if blocksize is None and meta["format"] != "parquet":
        blocksize = _blocksize(args.train, _n_workers(client))
    X, y = read(args.train, meta, blocksize)
    meta["n_features"] = int(X.shape[1])
    test = read(args.test, meta, n_features=X.shape[1]) if args.test else None
    return meta, X, y, test


def _lr_load(args, client) -> Loaded:
    import dask

    meta, X, y, test = _read_train_test(args, client, _lr_meta, _lr_read)
    X, y = client.persist([X, y])
    threads = _n_threads(client)
    if X.numblocks[0] < threads <= X.shape[0]:  # dask_ps.partition cuts and spreads them
        print(f"note: {args.train} gave {_count(X.numblocks[0], 'partition')} for {threads} "
              f"worker threads (a compressed file is read as one block): split into "
              f"{threads} after reading", flush=True)

    # counted now: a fit may release the persisted input once it has encoded it
    units = float(sum(dask.compute(*[dask.delayed(_nnz)(b) for b in X.to_delayed().ravel()])))
    parts = _count(max(X.numblocks[0], min(threads, X.shape[0])), "partition")
    summary = f"{X.shape[0]:,} rows x {X.shape[1]:,} features ({parts})"
    return Loaded((X, y), test, meta, units, summary)


def _lr_load_test(path: str, meta: dict, args):
    return _lr_read(path, meta, n_features=meta.get("n_features"))


def _lr_score(est, test) -> list[str]:
    import dask

    X, y = test
    return _class_lines(est.classes_, *dask.compute(y, est.predict_proba(X)))


def _class_lines(classes, y, proba) -> list[str]:
    """The test line (and warnings) of a classifier's test labels and probabilities."""
    from . import metrics_line

    line, warnings = metrics_line(classes, np.asarray(y), np.asarray(proba))
    return [f"warning: {w}" for w in warnings] + [line]


def _lr_export(est, meta: dict):
    import pandas as pd

    coef = est.coef_.T  # (n_features, n_outputs)
    keep = np.flatnonzero((coef != 0).any(axis=1))
    names = ["coef"] if coef.shape[1] == 1 else [f"coef_{c}" for c in est.classes_.tolist()]
    table = pd.DataFrame({"feature": keep.astype(np.int64),
                          **{n: coef[keep, j] for j, n in enumerate(names)}})
    desc = {"model": "logistic regression", "estimator": type(est).__name__,
            "classes": est.classes_.tolist(), "intercept": est.intercept_.tolist(),
            "n_features": int(est.n_features_in_),
            "n_hashed_features": est.n_hashed_features,
            "columns": {n: (f"weights of class {c!r} (the positive class)" if len(names) == 1
                            else f"one-vs-rest weights of class {c!r}")
                        for n, c in zip(names, est.classes_.tolist()[-len(names):])},
            "rows": "features with a non-zero weight (feature = column index of X)",
            "data": meta}
    return {"coef": table}, desc


_CONSISTENCY = dict(choices=["bsp", "ssp", "asp"], help="consistency model of the clocks")

LR = Algorithm(
    name="lr", summary="logistic regression (LIBSVM, or CSV/Parquet click tables)",
    estimator="LogisticRegression",
    params=(
        Param("--solver", "solver", dict(choices=["ftrl", "sgd", "adagrad", "lbfgs"])),
        Param("--penalty", "penalty", dict(choices=["l2", "l1"])),
        Param("--C", "C", dict(type=opt.POSITIVE, help="inverse regularisation strength")),
        Param("--fit-intercept", "fit_intercept", dict(action=argparse.BooleanOptionalAction)),
        Param("--max-iter", "max_iter", dict(type=opt.POSITIVE_INT,
                                             help="epochs, or L-BFGS iterations")),
        Param("--batch-size", "batch_size", dict(type=opt.POSITIVE_INT)),
        Param("--learning-rate", "learning_rate",
              dict(type=opt.POSITIVE, help="step of sgd, adagrad; alpha of ftrl")),
        Param("--tol", "tol", dict(type=opt.POSITIVE)),
        Param("--early-stopping", "early_stopping",
              dict(action=argparse.BooleanOptionalAction)),
        Param("--validation-fraction", "validation_fraction", dict(type=opt.fraction)),
        Param("--n-iter-no-change", "n_iter_no_change", dict(type=opt.POSITIVE_INT)),
        Param("--clocks-per-epoch", "clocks_per_epoch", dict(type=opt.POSITIVE_INT)),
        Param("--consistency", "consistency", _CONSISTENCY),
        Param("--staleness", "staleness", dict(type=opt.NON_NEGATIVE_INT)),
        Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
        Param("--n-hashed-features", "n_hashed_features",
              dict(type=opt.POSITIVE_INT, help="hash the input's columns into this many")),
        Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
        Param("--checkpoint", "checkpoint",
              dict(metavar="URL", help="checkpoint folder reachable from every worker")),
        Param("--checkpoint-every", "checkpoint_every", dict(type=opt.POSITIVE_INT)),
        Param("--max-recoveries", "max_recoveries", dict(type=opt.NON_NEGATIVE_INT)),
    ),
    datasets={"a9a": Dataset(
        "lr_a9a", "a9a", "a9a.t",
        "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a",
        {"n_features": 123})},
    data_options=_lr_data_options, load=_lr_load, load_test=_lr_load_test, score=_lr_score,
    export=_lr_export, unit="non-zeros", check=_lr_meta)


# --- matrix factorization ---------------------------------------------------------------------

def _mf_data_options(g) -> None:
    g.add_argument("--sep", help="field delimiter (default: tab, ',' for .csv files)")
    g.add_argument("--header", action="store_true", help="files start with column names")
    g.add_argument("--names", type=opt.columns,
                   help="columns of headerless files (default user,item,rating,timestamp)")
    g.add_argument("--user-column", help="the user column (default 'user')")
    g.add_argument("--item-column", help="the item column (default 'item')")
    g.add_argument("--rating-column", help="the rating column (default 'rating')")
    g.add_argument("--blocksize", type=opt.size, help="bytes per partition (default 32MiB)")


def _with_ids(df, user_ids: np.ndarray, item_ids: np.ndarray):
    """A partition of codes with the files' ids put back (the model keeps the real ids)."""
    return df.assign(user=user_ids[df["user"].to_numpy()], item=item_ids[df["item"].to_numpy()])


def _mf_read(path: str, meta: dict, blocksize=None):
    from ..io import read_ratings

    kw = {k: meta[k] for k in ("sep", "names") if meta.get(k)}
    for key in ("user", "item", "rating"):
        if meta.get(key):
            kw[key] = meta[key]
    if blocksize:
        kw["blocksize"] = blocksize
    df, users, items = read_ratings(path, header=bool(meta.get("header")), **kw)
    return df.map_partitions(_with_ids, users.ids, items.ids,
                             meta=_with_ids(df._meta, users.ids, items.ids))


def _mf_load(args, client) -> Loaded:
    meta = {"format": "ratings", "sep": args.sep, "header": args.header, "names": args.names,
            "user": args.user_column, "item": args.item_column, "rating": args.rating_column}
    df = _mf_read(args.train, meta, args.blocksize)
    test = _mf_read(args.test, meta) if args.test else None
    df = client.persist(df)
    n = int(df.map_partitions(len).sum().compute())
    return Loaded((df,), test, meta, float(n),
                  f"{n:,} ratings ({_count(df.npartitions, 'partition')})")


def _mf_load_test(path: str, meta: dict, args):
    return _mf_read(path, meta)


def _mf_score(est, test) -> list[str]:
    r = est.evaluate(test)
    return [f"test: RMSE {r['rmse']:.4f}  MAE {r['mae']:.4f}  ({r['n_ratings']:,} ratings; "
            f"unseen: {r['n_unseen_users']:,} users, {r['n_unseen_items']:,} items)"]


def _mf_export(est, meta: dict):
    import pandas as pd

    tables = {}
    for side in ("user", "item"):
        F = getattr(est, f"{side}_factors_")
        tables[f"{side}s"] = pd.DataFrame({
            "id": getattr(est, f"{side}_ids_"), "bias": getattr(est, f"{side}_bias_"),
            **{f"f{k}": F[:, k] for k in range(F.shape[1])}})
    desc = {"model": "biased matrix factorisation r = mu + b_u + b_i + p_u . q_i",
            "estimator": type(est).__name__, "global_mean": est.global_mean_,
            "rating_range": list(est.rating_range_), "clip": est.clip,
            "rank": int(est.user_factors_.shape[1]),
            "tables": {"users": "id, bias b_u, factors p_u (f0..)",
                       "items": "id, bias b_i, factors q_i (f0..)"},
            "data": meta}
    return tables, desc


MF = Algorithm(
    name="mf", summary="matrix factorisation of ratings (user, item, rating[, timestamp])",
    estimator="MatrixFactorization",
    params=(
        Param("--solver", "solver", dict(choices=["sgd", "als"])),
        Param("--rank", "rank", dict(type=opt.POSITIVE_INT, help="latent factors")),
        Param("--reg", "reg", dict(type=opt.NON_NEGATIVE, help="L2 strength of the factors")),
        Param("--reg-bias", "reg_bias", dict(type=opt.NON_NEGATIVE)),
        Param("--learning-rate", "learning_rate", dict(type=opt.POSITIVE)),
        Param("--decay", "decay", dict(type=opt.POSITIVE)),
        Param("--max-iter", "max_iter", dict(type=opt.POSITIVE_INT,
                                             help="epochs (sgd) or iterations (als)")),
        Param("--init-std", "init_std", dict(type=opt.NON_NEGATIVE)),
        Param("--batch-size", "batch_size", dict(type=opt.POSITIVE_INT)),
        Param("--consistency", "consistency", _CONSISTENCY),
        Param("--staleness", "staleness", dict(type=opt.NON_NEGATIVE_INT)),
        Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
        Param("--clip", "clip", dict(action=argparse.BooleanOptionalAction)),
        Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
    ),
    datasets={"movielens100k": Dataset(
        "mf_movielens100k", "u1.base", "u1.test",
        "https://grouplens.org/datasets/movielens/100k/")},
    data_options=_mf_data_options, load=_mf_load, load_test=_mf_load_test, score=_mf_score,
    export=_mf_export, unit="ratings")

# --- gradient-boosted trees -------------------------------------------------------------------

def _gbdt_data_options(g) -> None:
    g.add_argument("--format", choices=["libsvm", "csv", "parquet"],
                   help="input format (default libsvm); csv/parquet: a table, one column the "
                        "label, the others the features")
    g.add_argument("--label", help="csv/parquet: the label column (default: the first)")
    g.add_argument("--categorical", type=opt.columns,
                   help="csv/parquet: categorical feature columns, comma-separated")
    g.add_argument("--sep", help="csv: field delimiter (default ','; '\\t' for a tab)")
    g.add_argument("--header", action=argparse.BooleanOptionalAction,
                   help="csv: the first line names the columns (default yes; --no-header: "
                        "columns are 0, 1, ...)")
    g.add_argument("--n-features", type=opt.POSITIVE_INT,
                   help="libsvm: feature columns (default: the largest index seen)")
    g.add_argument("--blocksize", type=opt.size, help="bytes per data partition (default: "
                   "two partitions per worker, at most 64MiB each)")


def _gbdt_meta(args) -> dict:
    fmt = args.format or "libsvm"
    table = ("label", "categorical", "sep", "header")
    if fmt == "libsvm":
        for name in table:
            if getattr(args, name) is not None:
                raise ValueError(f"--{name} applies to --format csv|parquet")
        return {"format": fmt, "n_features": args.n_features}
    if args.n_features is not None:
        raise ValueError("--n-features applies to --format libsvm")
    if fmt == "parquet" and (args.sep is not None or args.header is not None):
        raise ValueError("--sep and --header apply to --format csv")
    sep = args.sep.replace("\\t", "\t") if args.sep else None
    return {"format": fmt, "label": args.label, "categorical": args.categorical, "sep": sep,
            "header": args.header is not False}


def _gbdt_read(path: str, meta: dict, blocksize=None, n_features=None):
    """``X, y`` of one input as ``meta`` says: LIBSVM as a sparse dask array, a table as a
    dask DataFrame (categorical columns with the categories of the training data)."""
    import dask.dataframe as dd

    from ..io import read_libsvm

    if meta["format"] == "libsvm":
        return read_libsvm(path, n_features=n_features or meta.get("n_features"),
                           blocksize=blocksize)
    if meta["format"] == "csv":
        kw = {"sep": meta["sep"] or ","}
        if not meta["header"]:
            kw["header"] = None
        df = dd.read_csv(path, blocksize=blocksize, **kw)
        if not meta["header"]:
            df.columns = [str(c) for c in df.columns]
    else:
        df = dd.read_parquet(path)
    label = meta.get("label") or str(df.columns[0])
    if label not in df.columns:
        raise ValueError(f"{path}: no label column {label!r} (columns: {list(df.columns)})")
    meta["label"] = label
    X = df.drop(columns=[label])
    for c in meta.get("categorical") or ():
        if c not in X.columns:
            raise ValueError(f"{path}: --categorical names {c!r}, not a column")
        cats = meta.setdefault("categories", {})
        if c not in cats:
            cats[c] = sorted(X[c].dropna().unique().compute().tolist())
        X[c] = X[c].astype("category").cat.set_categories(cats[c])
    return X, df[label]


def _gbdt_load(args, client) -> Loaded:
    meta, X, y, test = _read_train_test(args, client, _gbdt_meta, _gbdt_read)
    X, y = client.persist([X, y])
    n = int(X.shape[0]) if meta["format"] == "libsvm" else int(y.shape[0].compute())
    parts = _count(X.npartitions if hasattr(X, "npartitions") else X.numblocks[0],
                   "partition")
    return Loaded((X, y), test, meta, float(n),
                  f"{n:,} rows x {meta['n_features']:,} features ({parts})")


def _gbdt_load_test(path: str, meta: dict, args):
    return _gbdt_read(path, meta, n_features=meta.get("n_features"))


def _gbdt_score(est, test) -> list[str]:
    # computed apart: a table's labels are a dask-expr collection, predictions an array
    y = np.asarray(test[1].compute())
    if hasattr(est, "classes_"):
        return _class_lines(est.classes_, y, est.predict_proba(test[0]).compute())
    pred = est.predict(test[0]).compute()
    err = np.asarray(pred, np.float64) - np.asarray(y, np.float64)
    return [f"test: l2 {np.mean(err ** 2):.6f}  l1 {np.mean(np.abs(err)):.6f}  "
            f"({err.shape[0]:,} rows)"]


def _gbdt_export(est, meta: dict):
    import pandas as pd

    b = est.booster_
    tree = np.repeat(np.arange(b.tree_start.shape[0] - 1), np.diff(b.tree_start))
    nodes = pd.DataFrame({"tree": tree, "class": b.tree_class[tree],
                          **{k: getattr(b, k) for k in ("feature", "threshold", "default_left",
                                                        "is_cat", "left", "right", "value",
                                                        "gain", "count")}})
    desc = {"model": "gradient-boosted trees: raw score = base_score + sum of the leaf values "
                     "reached (x <= threshold, NaN to default_left, goes left)",
            "estimator": type(est).__name__, "base_score": b.base_score.tolist(),
            "classes": est.classes_.tolist() if hasattr(est, "classes_") else None,
            "n_features": int(est.n_features_in_), "n_rounds": int(est.n_estimators_),
            "tables": {"nodes": "one row per node; left/right: absolute row indices, -1 at "
                                "leaves; categorical splits' category sets are not exported"},
            "data": meta}
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
    Param("--subsample", "subsample", dict(type=opt.fraction)),
    Param("--colsample-bytree", "colsample_bytree", dict(type=opt.fraction)),
    Param("--split-share", "split_share", dict(type=opt.fraction,
                                               help="1: level-wise trees; less: best-first")),
    Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
    Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
    Param("--checkpoint", "checkpoint",
          dict(metavar="URL", help="checkpoint folder reachable from every worker")),
    Param("--checkpoint-every", "checkpoint_every", dict(type=opt.POSITIVE_INT)),
)
_GBDT_DATA = dict(data_options=_gbdt_data_options, load=_gbdt_load,
                  load_test=_gbdt_load_test, score=_gbdt_score, export=_gbdt_export,
                  unit="rows", check=_gbdt_meta)
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

#: ``dask-ps train`` algorithms by name. lda, fm: one entry each when they land.
ALGORITHMS = {a.name: a for a in (LR, MF, GBDT, GBDT_REGRESSION)}


def by_estimator(name: str) -> Algorithm:
    """The entry whose estimator class is ``name`` (for evaluate and export)."""
    for algo in ALGORITHMS.values():
        if algo.estimator == name:
            return algo
    raise ValueError(f"the command line knows no algorithm for {name}")
