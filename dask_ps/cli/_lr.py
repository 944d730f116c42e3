"""``dask-ps train lr`` and ``fm``: LIBSVM or click tables (CSV/Parquet) to
:class:`~dask_ps.LogisticRegression` and :class:`~dask_ps.FactorizationMachineClassifier`.
"""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING

from ..exceptions import OptionError
from . import _options as opt
from ._algorithms import (
    CHECKPOINT,
    CONSISTENCY,
    Algorithm,
    Dataset,
    Loaded,
    Param,
    TestSet,
    _count,
    _n_threads,
    _nnz,
    add_zero_based,
    check_named_columns,
    check_test_classes,
    check_weight_option,
    checked_classes,
    class_lines,
    feature_ids,
    label_classes,
    label_column,
    read_test,
    read_train_test,
    weight_of,
)

if TYPE_CHECKING:
    import numpy as np

# --- logistic regression ----------------------------------------------------------------------

def _lr_data_options(g) -> None:
    g.add_argument("--format", choices=["libsvm", "csv", "parquet"], default="libsvm",
                   help="input format (default libsvm); csv/parquet: a click table with a "
                        "header, features hashed (dask_ps.io.read_ctr / encode_ctr)")
    g.add_argument("--label", help="csv/parquet: the label column (default: read_ctr's, "
                                   "'Label')")
    g.add_argument("--numeric", type=opt.columns, help="csv/parquet: columns forced numeric, "
                   "comma-separated (default: inferred from the header and the values, "
                   "dask_ps.io.infer_encoder)")
    g.add_argument("--categorical", type=opt.columns,
                   help="csv/parquet: columns forced categorical")
    g.add_argument("--exclude", type=opt.columns,
                   help="csv/parquet: columns that are not features (e.g. an id)")
    g.add_argument("--hash-features", type=opt.POSITIVE_INT,
                   help="csv/parquet: hashed feature columns (default 2**20)")
    g.add_argument("--sep", type=opt.separator,
                   help="csv: field delimiter, one character (default ','; '\\t' for a tab)")
    g.add_argument("--n-features", type=opt.POSITIVE_INT,
                   help="libsvm: feature columns (default: the largest index seen)")
    add_zero_based(g)
    g.add_argument("--blocksize", type=opt.size, help="bytes per data partition, e.g. 64MiB "
                   "(default: two partitions per worker, at most 64MiB each)")


def _lr_meta(args) -> dict:
    """How LR data is read, from the options (saved with the model)."""
    fmt = args.format
    if fmt == "libsvm":
        for name in ("label", "weight", "numeric", "categorical", "exclude", "hash_features",
                     "sep"):
            if getattr(args, name) is not None:
                raise OptionError(f"--{name.replace('_', '-')} applies to --format csv|parquet")
        return {"format": fmt, "n_features": args.n_features}
    if args.n_features is not None:
        raise OptionError("--n-features applies to --format libsvm (csv/parquet: "
                          "--hash-features)")
    if args.zero_based is not None:
        raise OptionError("--zero-based applies to --format libsvm")
    if fmt == "parquet" and args.sep is not None:
        raise OptionError("--sep applies to --format csv")
    check_weight_option(args, fmt, args.label or "Label", ("--numeric", args.numeric),
                        ("--categorical", args.categorical))
    # the encoder is inferred from the training files' header when the data is loaded
    return {"format": fmt, "label": args.label, "weight": args.weight, "encoder": None,
            "sep": args.sep,
            "numeric": args.numeric, "categorical": args.categorical,
            "exclude": args.exclude, "hash_features": args.hash_features}


def _ctr_encoder(path: str, meta: dict) -> str:
    """The JSON of the encoder :func:`~dask_ps.io.infer_encoder` makes from the training
    files' header and values, with the column options of ``meta`` as overrides."""
    from ..io import infer_encoder

    kw = {"label": meta["label"]} if meta.get("label") else {}
    if meta.get("sep"):
        kw["sep"] = meta["sep"]
    if meta.get("hash_features"):
        kw["n_features"] = meta["hash_features"]
    exclude = (*(meta.get("exclude") or ()), *([meta["weight"]] if meta.get("weight") else []))
    return infer_encoder(path, numeric=meta.get("numeric"),
                         categorical=meta.get("categorical"), exclude=exclude,
                         format=meta["format"], **kw).to_json()


def _lr_check_inputs(args) -> None:
    """Before a cluster starts: the header of the first ``--train`` file (and of
    ``--test``'s) holds ``--label`` and the columns the options name (``--weight``: the
    training file's; DataError naming the file and listing its columns); a Parquet feature
    column is of a type that hashes."""
    from ..io import HashingEncoder
    from ..io.ctr import check_header

    meta = _lr_meta(args)
    if meta["format"] == "libsvm":
        return
    if meta.get("weight"):  # (the encoder's inference would say only "not among")
        check_named_columns(args.train, meta["format"], meta.get("sep"),
                            [("--weight", meta["weight"])])
    with warnings.catch_warnings():  # said once, when the data is read (_lr_meta_encoded)
        warnings.simplefilter("ignore", UserWarning)
        encoder = HashingEncoder.from_json(_ctr_encoder(args.train, meta))
    if args.test:
        kw = {"label": meta["label"]} if meta.get("label") else {}
        if meta.get("sep"):
            kw["sep"] = meta["sep"]
        check_header(args.test, encoder, format=meta["format"], **kw)


def _lr_read(path: str, meta: dict, blocksize=None, n_features=None, test: bool = False):
    """``X, y, w`` of one click table as ``meta`` says (the first pass runs on the current
    client); ``w``: the weights of column ``meta["weight"]`` (in ``X``'s chunks), or None
    (no ``--weight``; a ``test`` file without the column). LIBSVM: read by
    :func:`~._algorithms.read_train_test` and :func:`~._algorithms.read_test`."""
    from ..io import HashingEncoder, read_ctr

    fmt = meta["format"]
    encoder = HashingEncoder.from_json(meta["encoder"])
    kw = {"label": meta["label"]} if meta.get("label") else {}
    if fmt == "csv":
        if meta.get("sep"):
            kw["sep"] = meta["sep"]
        if blocksize:
            kw["blocksize"] = blocksize
    weight = weight_of(path, meta, test)
    read = read_ctr(path, encoder, format=fmt, weight=weight, **kw)
    return read if weight else (*read, None)


def _lr_meta_encoded(args) -> dict:
    """:func:`_lr_meta` plus, for click tables, the encoder inferred from ``--train``."""
    meta = _lr_meta(args)
    if meta["format"] != "libsvm":
        meta["encoder"] = _ctr_encoder(args.train, meta)
    return meta


def _refuse_third_class(labels: np.ndarray, found: list, what: str, where) -> None:
    """Refuse labels of more than two classes (a binary classifier's), naming the rarest
    class, its count and ``where(class)`` the first row holding it
    (:func:`~._algorithms.first_row_of`), from the blocks' ``found``
    (:func:`~._algorithms.label_classes`).

    Raises
    ------
    DataError
        ``"<what> holds 3 classes [-1.0, 0.0, 1.0] (... binary): -1.0 in 1 row, first at
        logs/b.csv, line 7"``.
    """
    from ..exceptions import DataError

    counts = {c: 0 for c in labels.tolist()}
    for classes, n, _ in found:
        for c, k in zip(classes.tolist(), n.tolist()):
            counts[c] += k
    rare = min(counts, key=counts.get)
    raise DataError(f"{what} holds {labels.shape[0]} classes {labels.tolist()}; the "
                    f"factorization machine is binary (two classes): {rare!r} in "
                    f"{counts[rare]:,} row{'s' if counts[rare] != 1 else ''}, first "
                    f"{where(rare)}")


def _lr_load(args, client) -> Loaded:
    import dask

    from ..cluster import compute

    meta, X, y, w, test = read_train_test(args, client, _lr_meta_encoded, _lr_read)
    y_read = y  # its graph names the blocks of its chunks, the persisted one's does not
    X, y, w = client.persist([X, y, w]) if w is not None else (*client.persist([X, y]), None)
    threads = _n_threads(client)
    if X.numblocks[0] < threads <= X.shape[0]:  # dask_ps.partition cuts and spreads them
        print(f"note: {args.train} gave {_count(X.numblocks[0], 'partition')} for {threads} "
              f"worker threads (a compressed or small file is read as one block): split into "
              f"{threads} after reading", flush=True)

    # counted now: a fit may release the persisted input once it has encoded it (watched:
    # workers paused at their memory limit from the start left a plain compute waiting forever)
    nnz, found = compute(
        dask.delayed([dask.delayed(_nnz)(b) for b in X.to_delayed().ravel()]),
        dask.delayed([dask.delayed(label_classes)(b) for b in y.to_delayed().ravel()]),
        what=f"counting the non-zeros of {args.train}")
    units = float(sum(nnz))
    # labels that are not classes (0/0.7), or one class, are the data's fault: say where
    labels, where = checked_classes(found, y_read, args.train, meta)
    if args.algorithm == "fm" and labels.shape[0] > 2:
        _refuse_third_class(labels, found, f"{args.train}: {label_column(meta)}", where)
    parts = _count(max(X.numblocks[0], min(threads, X.shape[0])), "partition")
    summary = f"{X.shape[0]:,} rows x {X.shape[1]:,} features ({parts})" + (
        f", weighted by column {meta['weight']!r}" if w is not None else "")
    return Loaded((X, y), test, meta, units, summary,
                  {} if w is None else {"sample_weight": w})


def _lr_load_test(path: str, meta: dict, args):
    return read_test(_lr_read, path, meta, getattr(args, "zero_based", None))


def _lr_score(est, test: TestSet) -> tuple[int, list[str]]:
    import numpy as np

    from ..cluster import compute

    # (watched on a client; dask's own scheduler in evaluate, which has none)
    y, proba, w = compute(test.y, est.predict_proba(test.X), test.w,
                          what=f"scoring {test.path}")
    y = np.asarray(y)
    if not y.shape[0]:
        return 0, []
    check_test_classes(y, test)
    return y.shape[0], class_lines(est.classes_, y, proba, w)


def _nonzero_rows(M) -> tuple[np.ndarray, np.ndarray]:
    """``(features int64 (m,), values (m, K))`` of the rows of ``M`` (n_features, K) holding
    a non-zero value, ascending: a dense array, or a keyed model's sparse ``coef_.T`` or
    ``factors_`` (through :class:`~dask_ps.algorithms._logistic_data.KeyedWeights`, never
    a dense array over ``n_features``)."""
    import numpy as np
    import scipy.sparse as sp

    from ..algorithms._logistic_data import KeyedWeights

    if sp.issparse(M):
        kw = KeyedWeights.from_coef(M.T.tocsr(), np.zeros(M.shape[1]))
        return kw.keys[:-1], kw.W[:-1]  # the last: from_coef's intercept row
    keep = np.flatnonzero((M != 0).any(axis=1))
    return keep.astype(np.int64), M[keep]


def _lr_export(est, meta: dict):
    import pandas as pd

    keep, coef = _nonzero_rows(est.coef_.T)  # of (n_features, n_outputs)
    ids, feature = _feature_ids(keep, est, meta)
    names = ["coef"] if coef.shape[1] == 1 else [f"coef_{c}" for c in est.classes_.tolist()]
    table = pd.DataFrame({"feature": ids, **{n: coef[:, j] for j, n in enumerate(names)}})
    desc = {"model": "logistic regression", "estimator": type(est).__name__,
            "classes": est.classes_.tolist(), "intercept": est.intercept_.tolist(),
            "n_features": int(est.n_features_in_),
            "n_hashed_features": est.n_hashed_features,
            "columns": {n: (f"weights of class {c!r} (the positive class)" if len(names) == 1
                            else f"one-vs-rest weights of class {c!r}")
                        for n, c in zip(names, est.classes_.tolist()[-len(names):])},
            "rows": "features with a non-zero weight", "feature": feature, "data": meta}
    return {"coef": table}, desc


def _feature_ids(columns, est, meta: dict) -> tuple:
    """:func:`~._algorithms.feature_ids` of LR's and FM's columns ``columns``."""
    return feature_ids(columns, meta, "the hashed column of the click table (data.encoder), "
                                      "from 0", est.n_hashed_features)


def _lr_passes(est) -> tuple[str, str]:
    """:attr:`~._algorithms.Algorithm.fit_passes` of LR: ``--solver lbfgs`` (L-BFGS, or
    OWL-QN with ``--penalty l1``) records one pass per function evaluation, one at the
    starting point and one or more per iteration (``--max-iter 5`` made 6 on a9a), so the
    note says the iterations once fitted (``n_iter_``); the stochastic solvers' passes are
    epochs."""
    if est.get_params()["solver"] != "lbfgs":
        return "epoch", ""
    n_iter = getattr(est, "n_iter_", None)
    if n_iter is None:
        return "evaluation", ""
    method = "OWL-QN" if est.get_params()["penalty"] == "l1" else "L-BFGS"
    n = int(n_iter[0])
    return "evaluation", f"{n:,} {method} iteration{'' if n == 1 else 's'}"


#: The flags LR and FM share: consistency, shards, hashing, seed, checkpoints.
_CLASSIFIER_RUN = (
    Param("--consistency", "consistency", CONSISTENCY),
    Param("--staleness", "staleness", dict(type=opt.NON_NEGATIVE_INT)),
    Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
    Param("--n-hashed-features", "n_hashed_features",
          dict(type=opt.POSITIVE_INT, help="hash the input's columns into this many")),
    Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
    *CHECKPOINT,
)

def _penalty(text: str) -> str | None:
    """``--penalty``'s value: ``l2``, ``l1``, or ``none`` (``penalty=None``: unregularised,
    as scikit-learn's ``LogisticRegression(penalty=None)``; ``--C`` is then unused)."""
    if text not in ("l2", "l1", "none"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from l2, l1, none)")
    return None if text == "none" else text


LR = Algorithm(
    name="lr", summary="logistic regression (LIBSVM, or CSV/Parquet click tables)",
    estimator="LogisticRegression",
    params=(
        Param("--solver", "solver", dict(choices=["ftrl", "sgd", "adagrad", "lbfgs"])),
        Param("--penalty", "penalty", dict(type=_penalty, metavar="{l2,l1,none}",
                                           help="none: no regularisation (--C unused)")),
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
        *_CLASSIFIER_RUN,
    ),
    datasets={"a9a": Dataset(
        "lr_a9a", "a9a", "a9a.t",
        "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a",
        {"format": "libsvm", "n_features": 123})},
    data_options=_lr_data_options, load=_lr_load, load_test=_lr_load_test, score=_lr_score,
    export=_lr_export, unit="non-zeros", check=_lr_meta, check_inputs=_lr_check_inputs,
    weighted=True, fit_passes=_lr_passes)


# --- factorization machine (LR's data path) ----------------------------------------------------

def _fm_export(est, meta: dict):
    import pandas as pd

    tables, desc = _lr_export(est, meta)
    keep, F = _nonzero_rows(est.factors_)
    tables["factors"] = pd.DataFrame({"feature": _feature_ids(keep, est, meta)[0],
                                      **{f"f{j}": F[:, j] for j in range(F.shape[1])}})
    desc.update(model="factorization machine b + x.w + sum_{j<l} <v_j, v_l> x_j x_l",
                n_components=int(F.shape[1]),
                factors="rows of features with a non-zero factor: v_j (f0..)")
    return tables, desc


FM = Algorithm(
    name="fm", summary="factorization machine, binary (LIBSVM, or CSV/Parquet click tables)",
    estimator="FactorizationMachineClassifier",
    params=(
        Param("--n-components", "n_components",
              dict(type=opt.POSITIVE_INT, help="factors per feature"), ("--k",)),
        Param("--learning-rate", "learning_rate",
              dict(type=opt.POSITIVE, help="alpha of the linear part's FTRL")),
        Param("--l1", "l1", dict(type=opt.NON_NEGATIVE, help="FTRL L1 of the linear part")),
        Param("--l2", "l2", dict(type=opt.NON_NEGATIVE, help="FTRL L2 of the linear part")),
        Param("--factor-solver", "factor_solver", dict(choices=["adagrad", "sgd"])),
        Param("--factor-learning-rate", "factor_learning_rate", dict(type=opt.POSITIVE)),
        Param("--reg-factors", "reg_factors",
              dict(type=opt.NON_NEGATIVE, help="L2 strength of the factors")),
        Param("--init-std", "init_std", dict(type=opt.POSITIVE)),
        Param("--fit-intercept", "fit_intercept", dict(action=argparse.BooleanOptionalAction)),
        Param("--max-iter", "max_iter", dict(type=opt.POSITIVE_INT, help="epochs")),
        Param("--clocks-per-epoch", "clocks_per_epoch", dict(type=opt.POSITIVE_INT)),
        *_CLASSIFIER_RUN,
    ),
    datasets=LR.datasets, data_options=_lr_data_options, load=_lr_load,
    load_test=_lr_load_test, score=_lr_score, export=_fm_export, unit="non-zeros",
    check=_lr_meta, check_inputs=_lr_check_inputs, weighted=True)
