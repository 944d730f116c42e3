"""The driver of a GBDT fit on the PS: bins once, the table, then jobs of boosting rounds.

:func:`train` is the functional core of :class:`~dask_ps.GBDTClassifier` and
:class:`~dask_ps.GBDTRegressor`. It surveys the training partitions where they live (their
labels; the bins computed from their sketches on the workers, :mod:`._gbdt_survey`), makes
the histogram table, puts each shard's columns next to it (:func:`~._gbdt_ps.shard_setup`)
and runs the rounds through the estimator's :class:`~.epoch_loop.EpochLoop`: as few jobs as it
allows (one for the whole fit unless callbacks or checkpoints want the driver between rounds),
each running :func:`~._gbdt_ps.boost_task` on every task.
"""

from __future__ import annotations

import base64
import functools
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import CheckpointFormatError, DataError
from ..model import PSModel
from ..model._format_tables import differences_said
from ..partitions import Partitions
from ..partitions.inputs import is_dask
from ._base import checksum
from ._gbdt_bins import BinMapper
from ._gbdt_data import class_shares, eval_survey, set_checksums, weight_totals
from ._gbdt_ensemble import Ensemble
from ._gbdt_kernels import quantization_scale
from ._gbdt_objectives import exact_mean, exact_total, get_objective
from ._gbdt_ps import FitConfig, JobArgs, boost_task, early_stop
from ._gbdt_shard import TABLE, HistLayout, StepRule, shard_setup
from ._gbdt_sketch import sample_rate
from ._gbdt_splits import split_params
from ._gbdt_survey import check_width_room, survey_bins
from ._gbdt_tree import leaf_budget, resolve_split_share
from .epoch_loop import EpochLoop

__all__ = ["ONE_SHARD_BYTES", "ONE_WORKER_CELLS", "FitResult", "one_shard", "train",
           "training_workers"]

#: Below this many bytes of one node's histogram, one shard serves a fit best: a step then
#: sends one message per worker (none from the shard's own), where per-step latency, not
#: bandwidth, decides (LightGBM's example, 28 features: 6.1 s vs 9.6 s for 50 trees on 2
#: workers, measured on a loaded 2-core box).
ONE_SHARD_BYTES = 256 * 1024


def one_shard(n_features: int, max_bins: int) -> bool:
    """Whether a fit of ``n_features`` columns and ``max_bins`` bins gets one shard by
    default (an upper bound of a node's histogram: every column with every bin, 3 float64
    sums per bin, under :data:`ONE_SHARD_BYTES`)."""
    return n_features * (max_bins + 1) * 24 <= ONE_SHARD_BYTES


#: ``max_workers="auto"``: a training set of at most this many rows x features is boosted on
#: one worker, the histogram shard's: a step of a level-wise tree then needs no round trip
#: between workers, which costs more than the second worker saves on so few rows. Measured
#: on a shared 2-core machine, 100 trees of 63 leaves, LocalClusters of 1 and 2 workers x 1
#: thread, two fits each: LightGBM's example (7,000 x 28) 1.22-1.77 s on one worker against
#: 2.74-3.24 s on two (load 5-6); 20,000 x 28 2.2-2.5 against 3.4-4.0 s (load 5-7);
#: 70,000 x 28 (1.96 million) 3.3-3.9 against 3.2-4.7 s (load 2.6-3.2): even.
ONE_WORKER_CELLS = 2_000_000


def training_workers(model: PSModel, max_workers, X, n_features: int) -> list[str] | None:
    """The workers to hold a fit's training rows ``X`` (None: every worker): see the
    estimators' ``max_workers``. The shards' workers come first, in shard order, then the
    other workers by address. ``X``'s rows count only if known without reading it (not a
    dask DataFrame's, nor a dask array's of unknown chunks); "auto" keeps every worker when
    the shards have workers of their own (``shard_resources``)."""
    if model.is_local or max_workers is None:
        return None
    if max_workers == "auto":
        if model._resources is not None:  # the shards' workers are kept for the shards
            return None
        n_rows = None if is_dask(X) and not hasattr(X, "chunks") else \
            getattr(X, "shape", (None,))[0]
        n_rows = int(n_rows) if isinstance(n_rows, numbers.Integral) else None
        if n_rows is None or n_rows * max(1, n_features) > ONE_WORKER_CELLS:
            return None
        max_workers = 1
    order = list(dict.fromkeys(r.address for r in model.shards))
    order += sorted(set(model.client.nthreads()) - set(order))
    return order[: int(max_workers)] if int(max_workers) < len(order) else None


def eval_pair(eval_set) -> tuple:
    """The ``(X, y)`` of an estimator's ``eval_set``: one pair, or a list of one.

    Raises
    ------
    ValueError
        Not one pair of two items, or an ``X`` of no rows (:func:`check_eval_rows`; a dask
        ``X`` of unknown chunk sizes is checked once partitioned, by :func:`train`).
    """
    if isinstance(eval_set, tuple) and len(eval_set) == 2:
        eval_set = [eval_set]
    if len(eval_set) != 1:
        raise ValueError(f"eval_set must hold one (X, y) pair, got {len(eval_set)}")
    pair = eval_set[0]
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ValueError(f"eval_set must hold one (X, y) pair, got a "
                         f"{type(pair).__name__}" + (f" of {len(pair)} items"
                                                     if hasattr(pair, "__len__") else ""))
    n_rows = pair[0].shape[0] if hasattr(pair[0], "shape") else len(pair[0])
    if isinstance(n_rows, (int, np.integer)):  # (a dask set's may be unknown yet)
        check_eval_rows(n_rows)
    return tuple(pair)


def check_eval_rows(n_rows) -> None:
    """Refuse an ``eval_set`` of ``n_rows`` 0, in memory or dask alike: its eval loss would
    read 0 every round and early stopping would compare zeros (a ValueError naming
    ``eval_set``)."""
    if n_rows == 0:
        raise eval_rows_error()


def eval_rows_error() -> ValueError:
    """:func:`check_eval_rows`' error (also for a dask ``eval_set`` whose chunks turn out to
    have no rows when partitioned)."""
    return ValueError("eval_set X has no rows (0 samples): its eval loss would read 0 every "
                      "round and early stopping would compare zeros; give an eval set with "
                      "rows, or no eval_set")


#: Most of a worker's memory limit one shard's block of the histogram table may take: the
#: worker also holds its partitions and their rows' bins.
TABLE_SHARE = 0.5


def check_table_memory(model: PSModel, layout: HistLayout, n_outputs: int, n_leaves: int,
                       n_hist: int) -> None:
    """Refuse a histogram table whose block per shard (a slot per node of a step, per
    output) exceeds :data:`TABLE_SHARE` of the smallest worker memory limit, before it is
    made: many classes times many leaves and bins would otherwise end in a killed worker.

    Raises
    ------
    DataError
        Naming the bytes per shard, their factors and what to lower.
    """
    from ..partitions.worker import smallest_limit

    if model.client is None:  # shards in this process: no worker limit to compare with
        return
    limit = smallest_limit(model.client)
    per_shard = layout.block * layout.ncols * 8
    if limit <= 0 or per_shard <= TABLE_SHARE * limit:
        return
    gib = 2.0 ** 30
    raise DataError(f"the histogram table would take {per_shard / gib:.2f} GiB per shard "
                    f"({n_outputs} trees per round x {n_leaves} leaves x {n_hist} bins of all "
                    f"columns, over {layout.n_shards} shard(s)), more than "
                    f"{TABLE_SHARE:.0%} of a worker's {limit / gib:.2f} GiB: lower "
                    f"max_leaf_nodes or max_bins, use fewer classes, or give the workers more "
                    f"memory")


#: What a GBDT fit whose loss diverged should change (:class:`~dask_ps.DivergenceError`).
DIVERGENCE_ADVICE = ("scale the labels (a squared error of labels near 1e154 or more "
                     "overflows float64) or lower learning_rate")


#: :func:`check_quantization` warns when the labels' median absolute deviation spans fewer
#: gradient quantization steps than this.
COARSE_STEPS = 16


def check_quantization(y_sample: np.ndarray, bound: float, n_train: int) -> None:
    """Warn when a regression's gradients are too coarse for most rows.

    Gradients are quantized in steps of 2**-17 to 2**-16 of the largest ``|y - mean|`` (exact
    integer sums, :func:`._gbdt_kernels.quantization_scale`): a few extreme labels make the
    step larger than the spread of the others, whose gradients then round to a few steps
    or to 0 (one ``y = 1e9`` among labels of order 1). HistGradientBoosting and LightGBM sum
    floats and do not lose them. Checked on a sample of the labels
    (:data:`._gbdt_data.LABEL_SAMPLE` per partition): their median absolute deviation
    against the step. Measured on 4,000 rows: the ``1e9`` spike 1e-4 steps; log-normal
    labels 1,200-2,400 (sigma 1), 56-108 (sigma 2), 1-4 (sigma 3: warned); labels that are
    mostly one value (deviation 0) are fitted exactly and do not warn.

    Warns
    -----
    UserWarning
        The deviation is above 0 and below :data:`COARSE_STEPS` steps, naming the largest
        ``|y - mean|``, the step and the deviation.
    """
    if not bound > 0 or y_sample.size == 0:
        return
    step = 1.0 / quantization_scale(n_train, bound)
    mad = float(np.median(np.abs(y_sample - np.median(y_sample))))
    if 0 < mad < COARSE_STEPS * step:
        warnings.warn(f"y has extreme values: the largest |y - mean| is {bound:.4g}, so the "
                      f"gradients are quantized in steps of {step:.3g}, and the labels' "
                      f"median absolute deviation ({mad:.3g}) is {mad / step:.2g} steps: "
                      f"most rows' gradients are coarse and the fit will be too; clip or "
                      f"transform y (e.g. log1p), or drop the extreme rows", UserWarning,
                      stacklevel=4)


@dataclass
class FitResult:
    """What :func:`train` returns."""

    ensemble: Ensemble
    mapper: BinMapper
    classes: np.ndarray | None
    history: list = field(default_factory=list)
    best_round: int | None = None
    hist_bytes: float = 0.0


def _eval_assignment(data: Partitions, eval_data: Partitions | None) -> dict:
    """Eval partitions per task: each to a task on the worker holding it (round-robin over
    that worker's tasks), else round-robin over all tasks."""
    if eval_data is None:
        return {}
    tasks = data.tasks()
    refs = eval_data.refs()
    out: dict = {}
    for j, ref in enumerate(refs):
        mine = [t for t, (w, _) in enumerate(tasks) if w == eval_data.workers[j]]
        t = mine[j % len(mine)] if mine else j % len(tasks)
        out.setdefault(t, []).append(ref)
    return out


def train(model: PSModel, data: Partitions, eval_data: Partitions | None, *, objective: str,
          classify: bool, categories: dict, categorical, n_estimators: int,
          learning_rate: float, max_leaf_nodes: int, max_depth, min_child_weight: float,
          min_samples_leaf: int, reg_lambda: float, min_split_gain: float, max_bins: int,
          subsample: float, colsample_bytree: float, split_share,
          early_stopping_rounds, sample_count: int, cat_params: dict, random_state: int,
          loop: EpochLoop, n_features: int) -> FitResult:
    """Fit boosted trees on ``data`` (partitions of ``(X, y)``); see the estimators.

    Raises
    ------
    ValueError
        A single class, labels outside the classes (eval set), non-finite labels or
        infinite features (naming the row, of ``eval_set`` for the eval set's), no
        training rows, eval weights that are all zero (naming ``eval_sample_weight``).
    DataError
        So many features (``n_features``, columns of ``X``) that the bins' per-feature
        arrays would not fit in memory (:func:`._gbdt_survey.check_width_room`), before
        any is made.
    """
    n_train = data.total_rows
    if n_train == 0:
        raise ValueError("X has no rows")
    starts = np.array(data.starts, np.int64)
    rate = sample_rate(n_train, sample_count)
    check_width_room(model, data, n_features, rate)
    # a fit that writes checkpoints knows its training data by their checksums (a resume
    # on other rows of the same shape and bins is refused, fit_differences)
    parts, mapper = survey_bins(data, starts, rate, random_state, categories, classify,
                                max_bins, categorical, min_samples_leaf * rate,
                                checksum=loop.checkpoint is not None)
    weights = weight_totals(parts)
    # rows of weight 0 are no rows: not in the leaf budget, nor the growth policy's count
    n_rows = n_train if weights is None else weights["n_pos"]
    split_share = resolve_split_share(split_share, n_rows)
    max_leaf_nodes = leaf_budget(max_leaf_nodes, n_rows, min_samples_leaf, max_depth)
    w_max = 1.0 if weights is None else weights["w_max"]
    classes, n_classes = None, None
    if classify:
        classes = np.unique(np.concatenate([p["classes"] for p in parts]))
        if classes.shape[0] < 2:
            raise DataError(f"the data contains only one class: {classes.tolist()[0]!r}; "
                            f"a classifier needs samples of at least 2 classes")
        if classes.shape[0] > 2 and 2 * classes.shape[0] > n_train:
            raise DataError(f"y has {classes.shape[0]:,} classes among {n_train:,} rows "
                            f"(e.g. {classes.tolist()[0]!r}), fewer than 2 rows each; a "
                            f"classifier grows a tree per class and round: is y a number "
                            f"to regress (GBDTRegressor), or the wrong column?")
        counts = np.zeros(classes.shape[0])
        for p in parts:
            counts[np.searchsorted(classes, p["classes"])] += p["counts"]
        n_classes = classes.shape[0]
        obj_name = "binary" if n_classes == 2 else "multiclass"
        y_codes = np.repeat(np.arange(n_classes), counts.astype(np.int64))
    else:
        obj_name = objective
        y_mean = exact_mean([p["y_sum"] for p in parts], n_train) if weights is None else \
            float(exact_total([p["y_sum"] for p in parts]) / weights["total"])
        y_min, y_max = min(p["y_min"] for p in parts), max(p["y_max"] for p in parts)
    obj = get_objective(obj_name, n_classes)
    if classify:
        base = obj.base_score(y_codes.astype(np.float64)) if weights is None else \
            obj.prior_score(class_shares(parts, classes, weights["total"]))
        bound = 0.0
    else:
        base = np.array([y_mean])
        bound = max(abs(y_max - base[0]), abs(y_min - base[0]))
        check_quantization(np.concatenate([p["y_sample"] for p in parts]), bound * w_max,
                           n_train)
    eval_id = dict(eval_rows=None, eval_labels=None, eval_features=None)
    if eval_data is not None:  # its features and labels checked, rows named in the set
        check_eval_rows(eval_data.total_rows)  # (a dask set of unknown chunk sizes)
        seen = eval_data.reduce(eval_survey, None, categories, classify, with_start=True)
        # dask weights (in-memory ones were summed by check_sample_weight): before any round
        weight_totals(seen, "eval_sample_weight")
        outside = np.setdiff1d(np.unique(np.concatenate([s["classes"] for s in seen])),
                               classes) if classify else ()
        if len(outside):
            raise ValueError(f"eval_set has the label {outside.tolist()[0]!r}, not one of the "
                             f"classes {classes.tolist()} seen in training")
        # which eval set the eval losses kept for early stopping are of (fit_differences)
        eval_id = dict(eval_rows=int(eval_data.total_rows), **set_checksums(seen, "eval"))
    T = obj.n_outputs
    L = max_leaf_nodes
    layout = HistLayout.make(mapper, model.n_shards, T * max(1, L // 2), T * L,
                             3 * T + 2 + len(data))
    params = split_params(reg_lambda, min_child_weight, min_samples_leaf, min_split_gain,
                          **cat_params)
    check_table_memory(model, layout, T, L, int(mapper.hist_offsets[-1]))
    # scratch: empty between rounds, and its size follows the partitions and shards, which
    # a resume may have others of (a checkpoint keeps the trees, save_driver)
    model.add_table(TABLE, (layout.n_keys, layout.ncols), "float64", optimizer=StepRule(),
                    checkpoint=False)
    def setup_shards() -> None:
        model.map_shards(TABLE, shard_setup, layout, mapper.hist_offsets, mapper.n_bins,
                         mapper.is_categorical, params, float(colsample_bytree), random_state)

    def on_recover() -> None:
        """After a lost worker (with a checkpoint): the partitions back in memory, and the
        recreated shards told their columns again."""
        data.locate()
        if eval_data is not None:
            eval_data.locate()
        setup_shards()

    setup_shards()
    cfg = FitConfig(layout, mapper, obj_name, n_classes, base, n_train, starts, categories,
                    classes, params, learning_rate, reg_lambda, max_leaf_nodes, max_depth,
                    min_samples_leaf, min_child_weight, split_share, subsample, random_state,
                    early_stopping_rounds, len(data), _eval_assignment(data, eval_data),
                    model.uid, w_max)
    ensemble = Ensemble(mapper.n_features, T, base)
    # bounds, floors: the gradient bound and gain floor (LevelGrower) of each round a job
    # starts from
    state = dict(bounds={0: bound}, floors={0: None}, eval_losses=[], stopped=False,
                 bytes=0.0)
    eval_key = "eval_l2" if obj_name == "regression" else "eval_log_loss"
    if classify:
        loop.baseline = float(np.log(n_classes))

    def rounds(first: int, last: int) -> list[dict]:
        if state["stopped"]:
            return []
        # after a recovery the run goes on from its checkpoint's round: what the driver
        # kept of later rounds goes (a failed job's rounds are grown again)
        ensemble.truncate(first - 1)
        del state["eval_losses"][first - 1:]
        best, best_round, stop = early_stop(state["eval_losses"], early_stopping_rounds)
        if stop:
            state["stopped"] = True
            return []
        job = JobArgs(first - 1, last - 1, ensemble, state["bounds"][first - 1], best,
                      best_round, len(data.tasks()), state["floors"][first - 1])
        norm = n_train if weights is None else float(weights["total"])
        # each round shown as it ends (the tasks report their loss sums), not at the job's
        results = model.run(functools.partial(boost_task, cfg=cfg, job=job), data,
                            callback=loop.task_reports(job.n_tasks, norm))
        trees = results[0]["trees"]
        n_done = len(results[0]["rounds"])
        records = []
        for i in range(n_done):
            per_task = np.array([r["rounds"][i] for r in results], np.float64)
            rec = dict(loss=float(per_task[:, 0].sum() / norm),
                       steps=int(per_task[0, 3]), hist_bytes=float(per_task[:, 4].sum()))
            if eval_data is not None:
                n_eval = per_task[:, 2].sum()  # rows, or their weight
                rec[eval_key] = float(per_task[:, 1].sum() / (n_eval if n_eval > 0 else 1))
                state["eval_losses"].append(rec[eval_key])
            for t, tree in enumerate(trees[i]):
                ensemble.add(tree, t)
            records.append(rec)
        if records:  # where the tasks' time went, per task, over the job
            records[-1]["task_seconds"] = [{k: round(v, 4) for k, v in r["timings"].items()}
                                           for r in results]
        state["bounds"][first - 1 + n_done] = results[0]["bound"]
        state["floors"][first - 1 + n_done] = results[0]["gain_floor"]
        state["stopped"] = any(r["stopped"] for r in results)
        return records

    # what the trees are of (the estimator's name is the loop's fit_id, as LR's and FM's)
    fit_id = dict(rows=int(n_train), features=int(mapper.n_features), outputs=int(T),
                  leaves=int(max_leaf_nodes), classes=None if classes is None else
                  [str(c) for c in classes],
                  bins=checksum(mapper.bin_upper, mapper.hist_offsets),
                  **(set_checksums(parts, "train") if loop.checkpoint is not None else {}),
                  # the eval losses kept for early stopping are of this eval set
                  **eval_id)

    # a fit with sample weights is known by their checksums too (None: unweighted)
    for key in ("train_weights", "eval_weights"):
        fit_id.setdefault(key, None)

    def save_driver(clock: int) -> dict:
        """What a checkpoint at ``clock`` keeps of the driver: the trees and the state of
        the round a resumed fit starts from."""
        floor = state["floors"][clock]
        return dict(fit=fit_id, rounds=ensemble.n_rounds,
                    trees={k: _packed(v) for k, v in ensemble.flat().items()},
                    bound=float(state["bounds"][clock]),
                    floor=None if floor is None else _packed(floor),
                    eval_losses=[float(v) for v in state["eval_losses"][:clock]],
                    stopped=bool(state["stopped"]))

    def load_driver(saved: dict | None, clock: int) -> None:
        # the version is this fit's (driver_differences: a resume skips others' versions)
        if saved is None:
            raise CheckpointFormatError("the checkpoint to resume from holds no trees: "
                                        "another estimator wrote it, or a GBDT fit of a "
                                        "dask_ps that did not keep them")
        try:  # a checkpoint written before its metadata was checksummed may be damaged
            kept = int(saved["rounds"])
            trees = {k: _unpacked(v) for k, v in saved["trees"].items()}
            bound, losses = float(saved["bound"]), [float(v) for v in saved["eval_losses"]]
            floor = None if saved["floor"] is None else _unpacked(saved["floor"])
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointFormatError(f"the trees of the checkpoint to resume from cannot "
                                        f"be read ({type(exc).__name__}: {exc}): it is "
                                        f"damaged") from None
        if kept < clock:
            raise CheckpointFormatError(f"the checkpoint is at round {clock} but holds "
                                        f"{kept} rounds of trees")
        try:
            ensemble.load_flat(trees)
        except (IndexError, KeyError, ValueError) as exc:
            raise CheckpointFormatError(f"the trees of the checkpoint to resume from do not "
                                        f"fit together ({type(exc).__name__}: {exc}): it is "
                                        f"damaged") from None
        # a checkpoint past n_estimators (clock is then n_estimators): its first rounds are
        # this fit's, and nothing is left to grow
        ensemble.truncate(clock)
        state["bounds"][clock] = bound
        state["floors"][clock] = floor
        state["eval_losses"][:] = losses[:clock]
        # whether to stop is this fit's call (its early_stopping_rounds, maybe none), made
        # again from the eval losses before the next round
        state["stopped"] = False
        setup_shards()  # as after a recovery: the restored table's shards told their columns

    history = loop.run(rounds, on_recover=on_recover, driver_state=(save_driver, load_driver),
                       rewinds=True,  # a checkpoint past n_estimators: its first trees
                       driver_differs=functools.partial(driver_differences, fit_id=fit_id))
    best_round = None
    if early_stopping_rounds is not None and state["eval_losses"]:
        _, best_round, _ = early_stop(state["eval_losses"], early_stopping_rounds)
        ensemble.truncate(best_round + 1)
    hist_bytes = sum(h.get("hist_bytes", 0.0) for h in history)
    return FitResult(ensemble, mapper, classes, history, best_round,
                     hist_bytes / max(1, sum(1 for h in history if "loss" in h)))


#: The sets a fit id knows by the checksums of their labels and features
#: (:func:`~._gbdt_data.set_checksums`): key prefix, what the set is, what a difference means.
CHECKSUM_SETS = {"train": ("the training data", "other training data (X, y)"),
                 "eval": ("the eval set", "another eval_set")}


def checksum_note(diff: dict) -> str:
    """What the checksum keys among ``diff`` (:func:`fit_differences`) mean, for the error:
    ``" (train_labels: checksum of the training data's labels: other training data (X, y)
    than the checkpoint's)"``; empty when none differs."""
    notes = []
    for prefix, (name, other) in CHECKSUM_SETS.items():
        sums = [k for k in (f"{prefix}_labels", f"{prefix}_features") if k in diff]
        if sums:
            notes.append(f"{' and '.join(sums)}: checksum{'s' if len(sums) > 1 else ''} of "
                         f"{name}'s {' and '.join(k.split('_', 1)[1] for k in sums)}: "
                         f"{other} than the checkpoint's")
    return f" ({'; '.join(notes)})" if notes else ""


def driver_differences(saved: dict | None, fit_id: dict) -> str | None:
    """Why a checkpoint whose driver state is ``saved`` (None: it keeps none) holds another
    GBDT fit than ``fit_id``'s (:func:`fit_differences`), for
    :func:`~dask_ps.model._fit_checks.fit_differences`: a resume or a recovery takes the
    newest version of this fit, as every estimator's does, and a folder holding none is
    refused naming it. None when it is this fit's, or when its fit cannot be read (damage:
    named when its trees are loaded)."""
    if saved is None:
        return ("no trees (a GBDT checkpoint written by a dask_ps that did not keep them, or "
                "another estimator's)")
    try:
        diff = fit_differences(saved, fit_id)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if not diff:
        return None
    # as LR's and FM's fit ids are said: "classes ['0', '1'] (this fit's: None); ..."
    return "; ".join(differences_said(diff)) + checksum_note(diff)


def fit_differences(saved: dict, fit_id: dict) -> dict:
    """``{key: (the checkpoint's, this fit's)}`` where the fit a checkpoint's driver state
    ``saved`` holds differs from this one's ``fit_id`` (empty: it may resume). The training
    data and the eval set are known by their rows and the checksums of their labels and
    features (:func:`~._gbdt_data.checksums`). A checkpoint written before the checksums
    were kept says only the sets' rows (and the training data's bins), and one written
    before ``eval_rows`` only whether it had an eval set (its eval losses): then that must
    match."""
    theirs = dict(saved["fit"])
    if "eval_rows" not in theirs:
        had = bool(saved.get("eval_losses"))
        theirs["eval_rows"] = fit_id.get("eval_rows") if had == (
            fit_id.get("eval_rows") is not None) else ("an eval set" if had else None)
    for key in (f"{p}_{k}" for p in CHECKSUM_SETS for k in ("labels", "features")):
        theirs.setdefault(key, fit_id.get(key))  # not kept then: its rows decide, as they did
    return {k: (theirs.get(k), v) for k, v in fit_id.items() if theirs.get(k) != v}


def _packed(a: np.ndarray) -> dict:
    """An array as JSON (checkpoint attributes): dtype, shape and base64 of its bytes."""
    a = np.ascontiguousarray(a)
    return dict(dtype=a.dtype.str, shape=list(a.shape),
                b64=base64.b64encode(a.tobytes()).decode("ascii"))


def _unpacked(d: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["b64"]), np.dtype(d["dtype"])).reshape(
        d["shape"]).copy()
