"""The docstrings' shared sections of :class:`~dask_ps.GBDTClassifier` and
:class:`~dask_ps.GBDTRegressor` (parameters, attributes, notes)."""

__all__ = ["DOC_ATTRS", "DOC_NOTES", "DOC_PARAMS"]

DOC_PARAMS = """
    n_estimators : int, default 100
        Boosting rounds (a round grows one tree, or one per class for more than two classes).
    learning_rate : float, default 0.1
        Shrinkage of every leaf value.
    max_leaf_nodes : int, default 31
        Leaves per tree (LightGBM's ``num_leaves``).
    max_depth : int, optional
        Depth limit (root depth 0); default none.
    min_child_weight : float, default 1e-3
        Least hessian sum in a leaf (LightGBM's ``min_sum_hessian_in_leaf``), weighted by
        ``sample_weight``.
    min_samples_leaf : int, default 20
        Least training rows in a leaf (LightGBM's ``min_data_in_leaf``): rows of positive
        ``sample_weight``, counted unweighted (as HistGradientBoosting counts samples).
    reg_lambda : float, default 0
        L2 regularisation of leaf values: a leaf's value is ``-G / (H + reg_lambda)``.
    min_split_gain : float, default 0
        A split must reduce the loss by more.
    max_bins : int, default 255
        Value bins per feature (quantiles of a sample of ``sample_count`` rows, computed
        once; a missing-value bin comes on top). Up to 255 bins store binned rows as uint8.
    subsample : float in (0, 1], default 1
        Share of rows each round's trees are grown from (bagging; drawn per row from
        ``random_state`` and the round, so the same for any partitioning).
    colsample_bytree : float in (0, 1], default 1
        Share of features each round's trees may split on.
    early_stopping_rounds : int, optional
        With ``eval_set``: stop when the eval loss has not improved for this many rounds,
        and keep the trees of the best round.
    split_share : float in (0, 1] or "auto", default "auto"
        Growth policy. 1: level by level (every node of a level that can split does, best
        gains first when the leaf budget runs out), one histogram push and split query per
        level; less: best-first in batches, each step splitting the best nodes within this
        share of the tree's remaining leaf budget and every node whose gain reaches the one
        the tree before stopped at: nearer LightGBM's leaf-wise trees. "auto": see Notes.
    categorical_features : "from_dtype", None, or array-like of int, bool or str
        Categorical columns: "from_dtype" takes a DataFrame's ``category`` columns (their
        codes); or the columns' indices, a boolean mask, or names. A category of a column
        of an array is an integer from 0 to 2**31 - 1 (a non-integer one is refused);
        negative values (integer or not), NaN and categories unseen at fit are missing.
        Splits follow LightGBM: one-vs-rest up to ``max_cat_to_onehot`` categories, else a
        subset of the categories sorted by gradient statistics (``max_cat_threshold``,
        ``cat_smooth``, ``cat_l2``, ``min_data_per_group``; LightGBM's defaults).
    max_cat_to_onehot, max_cat_threshold, cat_smooth, cat_l2, min_data_per_group
        LightGBM's categorical split parameters (defaults 4, 32, 10, 10, 100).
    importance_type : {"gain", "split"}, default "gain"
        What ``feature_importances_`` adds up per feature.
    sample_count : int, default 200,000
        Rows sampled for the bins (LightGBM's ``bin_construct_sample_cnt``).
    n_shards : int, optional
        Shards of the histogram table; each owns a feature range. Default: one when a
        node's histogram (``n_features * (max_bins + 1)`` bins of 24 bytes) stays under
        256 KiB — a step then costs each worker one message, or none on the shard's own
        worker — else one per worker.
    max_workers : int, None or "auto", default "auto"
        At most this many workers (the shards' first; None: all) hold the training rows and
        boost. "auto": the histogram shard's worker alone for at most
        :data:`~._gbdt_fit.ONE_WORKER_CELLS` rows x features (rows known before reading:
        not a dask DataFrame; not with ``shard_resources``), where a step's round trip
        costs more than a worker saves; else all.
    random_state : int, np.random.RandomState or None, optional
        Seed of the bin sample, row and column sampling (default 0).
    client : distributed.Client or "local", optional
        Default: the current client; "local" (or no client) runs in this process.
    shard_resources : str, optional
        Place the histogram shards only on workers offering this Dask resource (as for
        :class:`~dask_ps.LogisticRegression`). Default: on every worker.
    checkpoint : str, "auto" or None, default None
        Checkpoint URL (see :class:`~dask_ps.LogisticRegression`) of the trees between
        jobs (the histogram table, empty between rounds, is not kept); a task that lost its
        worker-local rows rebuilds them from its partition and the trees so far, so a lost
        worker costs the rounds since the last checkpoint.
    checkpoint_every, max_recoveries, resume, progress
        As for :class:`~dask_ps.LogisticRegression` (rounds, not epochs): ``resume`` goes on
        from the checkpoint's trees (the same estimator, data and eval_set, the sets known by
        the checksums of their labels and features, in any partitions, on any number of
        shards), or keeps the first.
    callbacks : list of callable, optional
        ``cb(record) -> bool`` after every round; True stops the fit. With callbacks the
        fit runs one job per round (a few ms each).
"""

DOC_ATTRS = """
    booster_ : Booster
        The trees as flat arrays.
    n_estimators_ : int
        Rounds kept (the best round's with early stopping).
    best_iteration_ : int or None
        With early stopping, the 0-based round of the best eval loss.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names, when fitted on a DataFrame.
    categories_ : dict
        ``{column: categories}`` of a DataFrame's categorical columns.
    feature_importances_ : ndarray (n_features_in_,) float64
        Total split gain (``importance_type="gain"``, in units of the training loss) or
        number of splits per feature, as LightGBM reports them (not normalised).
    history_ : list of dict
        One record per round (``epoch``, 1-based; ``time``, when the round ended (its
        tasks report each round as it ends, also to the progress bar and the dashboard),
        after a resume going on from the restored rounds'; ``epoch_time`` and ``bytes``
        as in :class:`~dask_ps.LogisticRegression`'s ``history_``): ``loss``
        (mean training loss after the round, weighted by ``sample_weight``),
        ``steps`` (histogram pushes and split queries of the round), ``hist_bytes``
        (histogram and scalar bytes pushed by all workers in the round) and, with
        ``eval_set``, ``eval_log_loss`` / ``eval_l2`` (weighted by ``eval_sample_weight``).
        The last round of each job adds
        ``task_seconds``: per task, the seconds its job spent building histograms
        (``hist``: gathering the nodes' rows and adding them up, into a buffer or, with a
        task's one dense partition, straight into the push), writing the rest of the push
        (``push``: its keys, scalars and instructions), sending it and waiting for the shards'
        answers (``query``, one round trip per step), moving rows (``partition``),
        planning steps (``grow``)
        and on the rest, and the CPU seconds of its worker process (``process_cpu``).
"""

DOC_NOTES = """
    Notes
    -----
    Trees are the same for any number of workers, partitions and shards (gradients are
    quantized so sums are exact; bins come from a sample of rows chosen by row id). With
    ``sample_weight``, the quantization step is set by the largest weight's gradients:
    integer weights give the trees of repeated rows with predictions ~1e-6 apart, and
    weights spanning a factor of ``k`` quantize the lightest rows' gradients ``k`` times
    more coarsely relative to their size. Growth:
    level-wise (``split_share=1``) needs one synchronisation per level, best-first (``< 1``)
    more. The default ``"auto"`` is level-wise below 100,000 training rows, where a step's
    latency dominates, and ``0.02`` from there, for accuracy; a step also splits every node
    whose gain reaches the gain at which the tree before ran out of leaves, so batches stay
    large (:func:`~dask_ps.algorithms._gbdt_tree.resolve_split_share`). Measured (100 trees,
    63 leaves, 255 bins): LightGBM's example (7,000 rows) level-wise, test AUC 0.8345 in 8.8
    steps per tree (LightGBM 0.816); 10^6 x 100 ``make_classification`` (800,000 training
    rows), 2 workers x 1 thread: level-wise 0.9481 in 6.1 steps, 24.5 s, 48 MB pushed per
    tree; ``"auto"`` 0.9609 in 22.9 steps, 35.9-38.9 s, 96 MB; LightGBM 34.5-36.3 s (0.9613),
    xgboost.dask (63 leaves) 38.4-44.0 s (0.9611) in the same runs (``gbdt_peers.py``).

    References
    ----------
    G. Ke et al., "LightGBM", NeurIPS 2017; T. Chen and C. Guestrin, "XGBoost", KDD 2016;
    J. Jiang et al., "DimBoost: Boosting Gradient Boosting Decision Tree to Higher
    Dimensions", SIGMOD 2018; Angel's GBDT (github.com/Angel-ML/angel).
"""
