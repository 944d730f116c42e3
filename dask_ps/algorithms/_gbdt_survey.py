"""The survey of a GBDT fit: labels and bins from the training partitions, where they live.

Each partition's bin sketch (:func:`._gbdt_sketch.sketch`: its sampled rows' distinct values
per feature) stays on the worker that holds the partition, cut into ranges of features
(:meth:`~._gbdt_sketch.BinSketch.columns`). For each range, one task on a worker merges the
range's pieces of every partition and computes its bins (:func:`._gbdt_bins.bin_mapper`);
only the bins (at most ``max_bins`` edges per feature) and the labels' summaries reach the
driver, which joins the ranges (:meth:`._gbdt_bins.BinMapper.concat`). The bins are those of
the merged sketch of all partitions: the same for any partitioning of the rows, any number
of workers and any number of ranges. (A sample of 200,000 rows of 100 continuous features
is ~400 MB of distinct values; sent to the driver, it was the fit's largest transfer.)

A small sample (at most :data:`ONE_RANGE_ROWS` rows) is one range, merged by one task that
takes the partitions' sketches whole and returns the labels' summaries with the bins: 5
tasks and one wait for LightGBM's example (4 partitions) instead of 28 tasks and two waits:
0.15 -> 0.045 s of a fit of ~1.5 s there (2 workers; the work itself is ~30 ms, the rest
the scheduler's).
"""

from __future__ import annotations

import numpy as np

from ..exceptions import DataError
from ._gbdt_bins import BinMapper, bin_mapper, categorical_mask
from ._gbdt_data import survey
from ._gbdt_sketch import BinSketch

__all__ = ["ONE_RANGE_ROWS", "check_width_room", "group_bounds", "survey_bins", "survey_part"]

#: Sampled rows up to which the bins are computed as one feature range by one task.
ONE_RANGE_ROWS = 20_000

# Bytes per input feature (column of X, empty or not) of the survey, upper bounds of peaks
# measured on 2,000-50,000 rows of 2^20-2^24 columns holding 10,000 non-zeros (peak resident
# memory above the start of a fit of 5 trees): in-process ("local", 1 partition) 61-65;
# LocalCluster(2 workers x 1 thread), one range: the merging worker 70 (2 partitions) and
# 209 (8), the other 8 and 32; ranges: 30-33 (2 partitions), 87-97 (8); the driver 11-18.
#: Bytes per feature where a range's bins are computed, whatever the partitions: the
#: per-feature arrays of :func:`._gbdt_bins.bin_mapper` (start, counts, bins, status,
#: ``column_of``...) and ``feature_importances_``.
FEATURE_BYTES = 48
#: ... and per feature and partition merged there: a partition's NaN counts (int64) as
#: received, and stacked to be summed (:meth:`._gbdt_sketch.BinSketch.merge`).
SKETCH_FEATURE_BYTES = 24
#: Bytes per feature of a partition's sketch on the worker that holds the partition, kept
#: until the bins are made (NaN counts, counted then copied).
OWN_SKETCH_BYTES = 16
#: Bytes per feature in this process after a fit on a cluster: the ranges' bins joined
#: (:meth:`._gbdt_bins.BinMapper.concat`) and ``feature_importances_``.
DRIVER_FEATURE_BYTES = 24
#: Most of a process's memory (or a worker's memory limit) the per-feature arrays may take:
#: the partitions, their bins, the histogram table and the trees need the rest.
WIDTH_SHARE = 0.5


def group_bounds(n_features: int, n_groups: int) -> np.ndarray:
    """Bounds of ``n_groups`` (at most ``n_features``, at least 1) consecutive feature
    ranges of about equal size: int64 array (n_ranges + 1,)."""
    k = max(1, min(int(n_groups), int(n_features)))
    return np.linspace(0, n_features, k + 1).round().astype(np.int64)


def check_width_room(model, data, n_features: int, rate: float) -> None:
    """Refuse a fit whose per-feature arrays could not fit in memory, before any is made.

    The sketches and bins of a fit (:func:`survey_bins`) hold a few dense arrays with an
    entry per column of ``X``, used or not: a CSR of 2^31 columns holding 10,000 non-zeros
    asked ~64 bytes per column in this process and was killed by the kernel at 23.8 GB.
    The bytes per feature (:data:`FEATURE_BYTES`, :data:`SKETCH_FEATURE_BYTES` per
    partition merged, :data:`OWN_SKETCH_BYTES` per partition held, :data:`DRIVER_FEATURE_BYTES`
    on the driver of a fit on a cluster) are compared, where :func:`survey_bins` will make
    them, with :data:`WIDTH_SHARE` of what this process may use
    (:func:`~dask_ps.partitions.worker.process_memory`) and of the smallest worker memory
    limit (:func:`~dask_ps.partitions.worker.smallest_limit`; workers without a limit are not
    checked).

    Parameters
    ----------
    model : PSModel
        The fit's model (its client, or none: in this process).
    data : Partitions
        The training partitions: how many, and on which workers.
    n_features : int
        Columns of ``X``.
    rate : float
        The bin sample's rate (:func:`._gbdt_sketch.sample_rate`): whether the bins are
        computed as one range or as ranges spread over the workers.

    Raises
    ------
    DataError
        Naming ``n_features``, the GiB needed, where, the GiB that process may use, and
        what to do.
    """
    from ..partitions.worker import process_memory, smallest_limit

    d, n_parts = int(n_features), len(data)
    merge = FEATURE_BYTES + SKETCH_FEATURE_BYTES * n_parts  # per feature of a merged range
    here = (process_memory(), "this process", "this process may use")
    if data.is_local:  # sketches, bins and driver: all in this process
        needs = [(d * merge, *here)]
    else:
        needs = [(d * DRIVER_FEATURE_BYTES, *here)]
        limit = smallest_limit(model.client)
        if limit > 0:
            if data.total_rows * rate <= ONE_RANGE_ROWS:  # one task merges every sketch
                worst = d * merge
            else:  # each worker: its partitions' sketches, and its ranges (2 per worker)
                workers = sorted(set(data.workers))
                n_groups = 2 * len(workers)
                nthreads = model.client.nthreads()
                worst = max(d * OWN_SKETCH_BYTES * data.workers.count(w)
                            + -(-d // n_groups) * merge * min(2, int(nthreads.get(w, 1)))
                            for w in workers)
            needs.append((worst, limit, "a worker",
                          "a worker may use (the smallest worker memory limit)"))
    gib = 2.0 ** 30
    for need, room, where, whose in needs:
        if need > WIDTH_SHARE * room:
            raise DataError(
                f"X has n_features={d:,} columns: the bins' per-feature arrays (dense, one "
                f"entry per column, empty or not: ~{need / d:.0f} bytes per column with "
                f"{n_parts} partition(s)) would take {need / gib:.1f} GiB in {where}, more "
                f"than {WIDTH_SHARE:.0%} of the {room / gib:.1f} GiB {whose}: hash the "
                f"columns into fewer features (e.g. sklearn's FeatureHasher, or the column "
                f"index modulo 2**20) or drop the empty columns (X[:, X.getnnz(axis=0) > 0] "
                f"for a scipy.sparse X, and the same columns at predict)")


def survey_part(value, start: int, rate: float, seed: int, categories: dict, classify: bool,
                n_groups: int, checksum: bool = False) -> dict:
    """:func:`._gbdt_data.survey` of one partition, its sketch cut into the feature ranges
    of :func:`group_bounds` (``pieces``, a list of :class:`BinSketch`); ``n_features``."""
    out = survey(value, start, rate, seed, categories, classify, checksum)
    sk = out.pop("sketch")
    b = group_bounds(sk.n_features, n_groups)
    out["n_features"] = sk.n_features
    out["pieces"] = [sk.columns(int(b[g]), int(b[g + 1])) for g in range(b.shape[0] - 1)]
    return out


def _info(found: dict) -> dict:
    return {k: v for k, v in found.items() if k != "pieces"}


def _piece(found: dict, g: int) -> BinSketch:
    return found["pieces"][g]


def _range_bins(lo: int, is_cat: np.ndarray, max_bins: int, min_rows: float,
                *pieces: BinSketch) -> BinMapper:
    """The bins of one feature range from its pieces of every partition."""
    return bin_mapper(BinSketch.merge(pieces), max_bins, is_cat.astype(bool), min_rows,
                      feature_offset=lo)


def _one_range(categorical, max_bins: int, min_rows: float, *found: dict
               ) -> tuple[list[dict], BinMapper]:
    """The labels' summaries and the bins of partitions surveyed as one range (their
    :func:`survey_part` with ``n_groups=1``), in one task."""
    infos = [_info(f) for f in found]
    is_cat = categorical_mask(categorical, _check_width(infos))
    return infos, _range_bins(0, is_cat, max_bins, min_rows, *(f["pieces"][0] for f in found))


def _check_width(infos: list) -> int:
    widths = sorted({i["n_features"] for i in infos})
    if len(widths) != 1:
        raise ValueError(f"the partitions of X have different numbers of features: {widths}")
    return widths[0]


def survey_bins(data, starts: np.ndarray, rate: float, seed: int, categories: dict,
                classify: bool, max_bins: int, categorical, min_rows: float,
                checksum: bool = False) -> tuple[list[dict], BinMapper]:
    """Survey the training partitions ``data`` (:class:`~dask_ps.partitions.Partitions` of
    ``(X, y)``) and compute the bins.

    Parameters
    ----------
    data : Partitions
    starts : int64 array (n_partitions,)
        Global id of each partition's first row (the sample hashes row ids).
    rate, seed : float, int
        Of the bin sample (:func:`._gbdt_sketch.sample_rate`).
    categories : dict
    classify : bool
    max_bins, categorical, min_rows
        As :func:`._gbdt_bins.bin_mapper` takes them.
    checksum : bool, default False
        Also the partitions' :func:`._gbdt_data.checksums`.

    Returns
    -------
    (list of dict, BinMapper)
        Per partition, in order, :func:`._gbdt_data.survey`'s labels summary,
        ``n_rows`` (and ``checksums``); the bins.

    Raises
    ------
    ValueError
        Partitions of different widths; what :func:`._gbdt_data.survey` and
        :func:`._gbdt_bins.bin_mapper` raise.
    """
    if data.is_local:
        found = [survey_part(p.load(), int(starts[i]), rate, seed, categories, classify, 1,
                             checksum) for i, p in enumerate(data.refs())]
        return _one_range(categorical, max_bins, min_rows, *found)
    client = data.client
    workers = sorted(set(data.workers))
    one = data.total_rows * rate <= ONE_RANGE_ROWS
    # else ranges merged concurrently, each a share of the memory
    n_groups = 1 if one else 2 * len(workers)
    where = [dict(workers=[w], allow_other_workers=True, pure=False) for w in data.workers]
    found = [client.submit(survey_part, f, int(starts[i]), rate, seed, categories, classify,
                           n_groups, checksum, **where[i])
             for i, f in enumerate(data.futures)]
    if one:
        infos, mapper = client.submit(_one_range, categorical, max_bins, min_rows, *found,
                                      workers=[workers[0]], allow_other_workers=True,
                                      pure=False).result()
        del found  # the sketches leave the workers' memory
        return infos, mapper
    infos = client.gather([client.submit(_info, f, **where[i]) for i, f in enumerate(found)])
    d = _check_width(infos)
    is_cat = categorical_mask(categorical, d)
    b = group_bounds(d, n_groups)
    ranges = []
    for g in range(b.shape[0] - 1):
        pieces = [client.submit(_piece, f, g, **where[i]) for i, f in enumerate(found)]
        ranges.append(client.submit(_range_bins, int(b[g]), is_cat[b[g]:b[g + 1]], max_bins,
                                    min_rows, *pieces, workers=[workers[g % len(workers)]],
                                    allow_other_workers=True, pure=False))
    mappers = client.gather(ranges)
    del found, ranges  # the sketches leave the workers' memory
    return infos, BinMapper.concat(mappers)
