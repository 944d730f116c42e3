"""``dask-ps train mf``: ratings to :class:`~dask_ps.MatrixFactorization`.
"""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING

from ..exceptions import DataError
from . import _options as opt
from ._algorithms import CHECKPOINT, CONSISTENCY, Algorithm, Dataset, Loaded, Param, _count

if TYPE_CHECKING:
    import numpy as np

# --- matrix factorization ---------------------------------------------------------------------

def _mf_data_options(g) -> None:
    g.add_argument("--sep", type=opt.separator,
                   help="field delimiter, one character (default: tab, ',' for .csv files)")
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


def _mf_meta(args) -> dict:
    return {"format": "ratings", "sep": args.sep, "header": args.header, "names": args.names,
            "user": args.user_column, "item": args.item_column, "rating": args.rating_column}


def _mf_kwargs(meta: dict) -> dict:
    """read_ratings's keyword arguments of the data options in ``meta``."""
    kw = {k: meta[k] for k in ("sep", "names") if meta.get(k)}
    for key in ("user", "item", "rating"):
        if meta.get(key):
            kw[key] = meta[key]
    return dict(kw, header=bool(meta.get("header")))


def _mf_check_inputs(args) -> None:
    """Before a cluster starts: the user, item and rating columns are among those of
    ``--train``'s first file (and ``--test``'s), from its header or --names (DataError
    naming the file and its columns); OptionError for a column option on a text file read
    without --header or --names (its fields are user, item, rating[, timestamp])."""
    from ..exceptions import OptionError
    from ..io.ratings import HeaderlessColumnError, check_ratings_columns

    kw = _mf_kwargs(_mf_meta(args))
    for option, path in (("--train", args.train), ("--test", args.test)):
        if not path:
            continue
        try:
            check_ratings_columns(path, **kw)
        except HeaderlessColumnError as err:
            given = ", ".join(f"--{k}-column {v}" for k, v in err.renamed.items())
            what = "names a header column" if len(err.renamed) == 1 else "name header columns"
            raise OptionError(
                f"{given} {what}, but {option} {err.path} is read without a header: pass "
                f"--header for a file that starts with its column names, or --names to name "
                f"the fields of a headerless file (default user,item,rating,timestamp)"
            ) from None


def _mf_read(path: str, meta: dict, blocksize=None):
    from ..io import read_ratings

    kw = _mf_kwargs(meta)
    if blocksize:
        kw["blocksize"] = blocksize
    df, users, items = read_ratings(path, **kw)
    return df.map_partitions(_with_ids, users.ids, items.ids,
                             meta=_with_ids(df._meta, users.ids, items.ids))


def _mf_load(args, client) -> Loaded:
    from ..cluster import compute

    meta = _mf_meta(args)
    df = _mf_read(args.train, meta, args.blocksize)
    test = _mf_read(args.test, meta) if args.test else None
    df = client.persist(df)
    n = int(compute(df.map_partitions(len).sum(),
                    what=f"counting the ratings of {args.train}")[0])
    if not n:
        from ..io._blocks import files_named

        raise DataError(f"{files_named(args.train)}: no ratings")
    return Loaded((df,), test, meta, float(n),
                  f"{n:,} ratings ({_count(df.npartitions, 'partition')})")


def _mf_load_test(path: str, meta: dict, args):
    return _mf_read(path, meta)


def _mf_score(est, test) -> tuple[int, list[str]]:
    from ..cluster import compute

    n = int(compute(test.map_partitions(len).sum(), what="counting the test ratings")[0])
    if not n:  # (est.evaluate refuses none)
        return 0, []
    with warnings.catch_warnings():  # evaluate's warning about unseen ids: counted below
        warnings.filterwarnings("ignore", r"\d+ rows with a user and \d+ with an item not "
                                "seen at fit", UserWarning)
        r = est.evaluate(test)
    return n, [f"test: RMSE {r['rmse']:.4f}  MAE {r['mae']:.4f}  ({r['n_ratings']:,} ratings; "
            f"unseen: {_count(r['n_unseen_users'], 'user')}, "
            f"{_count(r['n_unseen_items'], 'item')})"]


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
            "n_components": int(est.user_factors_.shape[1]),
            "tables": {"users": "id, bias b_u, factors p_u (f0..)",
                       "items": "id, bias b_i, factors q_i (f0..)"},
            "data": meta}
    return tables, desc


MF = Algorithm(
    name="mf", summary="matrix factorisation of ratings (user, item, rating[, timestamp])",
    estimator="MatrixFactorization",
    params=(
        Param("--solver", "solver", dict(choices=["sgd", "als"])),
        Param("--n-components", "n_components", dict(type=opt.POSITIVE_INT,
                                                     help="latent factors"), ("--rank",)),
        Param("--reg", "reg", dict(type=opt.NON_NEGATIVE, help="L2 strength of the factors")),
        Param("--reg-bias", "reg_bias", dict(type=opt.NON_NEGATIVE)),
        Param("--reg-fixed", "reg_fixed", dict(type=opt.NON_NEGATIVE,
                                               help="als: L2 strength not scaled by ratings")),
        Param("--reg-bias-fixed", "reg_bias_fixed", dict(type=opt.NON_NEGATIVE)),
        Param("--learning-rate", "learning_rate", dict(type=opt.POSITIVE)),
        Param("--decay", "decay", dict(type=opt.POSITIVE)),
        Param("--max-iter", "max_iter", dict(type=opt.POSITIVE_INT,
                                             help="epochs (sgd) or iterations (als)")),
        Param("--init-std", "init_std", dict(type=opt.NON_NEGATIVE)),
        Param("--consistency", "consistency", CONSISTENCY),
        Param("--staleness", "staleness", dict(type=opt.NON_NEGATIVE_INT)),
        Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
        Param("--clip", "clip", dict(action=argparse.BooleanOptionalAction)),
        Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
        *CHECKPOINT,
    ),
    datasets={"movielens100k": Dataset(
        "mf_movielens100k", "u1.base", "u1.test",
        "https://grouplens.org/datasets/movielens/100k/")},
    data_options=_mf_data_options, load=_mf_load, load_test=_mf_load_test, score=_mf_score,
    export=_mf_export, unit="ratings", check_inputs=_mf_check_inputs, empty="no ratings")
