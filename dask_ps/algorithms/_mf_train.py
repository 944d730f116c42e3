"""The training function of :class:`~dask_ps.algorithms.mf.MatrixFactorization` over the
public PSModel + partitions API: the item table, the DSGD block schedule (SGD) or the two-clock
ALS iteration (steps in :mod:`._mf_steps`), the epoch loop and the collected factors."""

from __future__ import annotations

import math

import numpy as np

from ..model import PSModel
from ..partitions import Partitions
from . import _mf_data as data_
from ._mf_kernels import balance_blocks
from ._mf_steps import (
    USERS,
    als_task,
    check_finite,
    final_step,
    set_users_step,
    sgd_task,
    store_users_step,
)
from .epoch_loop import EpochLoop, refuse_older_checkpoint

__all__ = ["check_room", "train"]


def check_room(model: PSModel, *, n_users: int, n_items: int, n_components: int,
               solver: str = "sgd") -> None:
    """Refuse, before the data is partitioned, an ``n_components`` whose factor tables
    cannot fit: ``n_components=10**8`` on 4 ratings was accepted and ran; its factors alone
    take 3.2 GB.

    Counted, with ``d = n_components + 1`` columns (factors and bias):

    * in this process, where the fit collects them: ``user_factors_`` and ``item_factors_``
      (float64, ``(n_users + n_items) * d``), and the item table pulled and its first
      update (twice ``n_items * d`` of the table's dtype: float32 for SGD, float64 for
      ALS); with an in-process model (no client) also the shards of every worker below.
      Against half of the memory available here
      (:func:`~dask_ps.partitions.worker.process_memory`, ``available=True``).
    * on each worker: its share of the item table over the shards (with ALS the Gram
      statistics too, ``n_items * (d * d + d + 1)`` float64: the optimizer state of its
      item step) and of the users' factors over the workers. Against half of the smallest
      worker memory limit (:func:`~dask_ps.partitions.worker.smallest_limit`; workers
      without a limit are not checked).

    Raises
    ------
    MemoryLimitError
        A :class:`MemoryError` naming ``n_components``, the users and items, the bytes
        needed, where, and the memory they exceed: "use a smaller n_components".
    """
    from ..exceptions import MemoryLimitError
    from ..partitions.worker import process_memory, smallest_limit

    d = int(n_components) + 1
    itemsize = 4 if solver == "sgd" else 8
    gram = 8 * n_items * (d * d + d + 1) if solver == "als" else 0
    shards = itemsize * n_items * d + gram  # every shard together
    users = itemsize * n_users * d
    here = 8 * (n_users + n_items) * d + 2 * itemsize * n_items * d
    gib = 2.0 ** 30
    checks = [(here + (shards + users if model.client is None else 0),
               process_memory(available=True) // 2, "half of the {:.1f} GiB available here")]
    if model.client is not None:
        n_workers = max(1, len({r.address for r in model.shards}))
        checks.append((shards // model.n_shards + users // n_workers,
                       smallest_limit(model.client) // 2,
                       "half of a worker's {:.1f} GiB memory limit"))
    for need, room, where in checks:
        if room > 0 and need > room:
            raise MemoryLimitError(
                f"MatrixFactorization({solver}): n_components={n_components} makes the "
                f"factors of {n_users:,} users and {n_items:,} items take {need / gib:.1f} GiB "
                f"({d:,} columns each: factors and bias; float64 where the fit collects "
                f"them{', with the Gram statistics of ALS' if gram else ''}), more than "
                f"{where.format(2 * room / gib)}; use a smaller n_components")


def train(model: PSModel, data: Partitions, *, n_users: int, n_items: int, mu: float,
          solver: str = "sgd", n_components: int = 100, reg: float = 0.05,
          reg_bias: float = 0.01, reg_fixed: float = 0.0, reg_bias_fixed: float = 0.0,
          learning_rate: float = 0.007, decay: float = 1.0, max_iter: int = 20,
          init_std: float = 0.1, consistency="bsp",
          staleness=None, random_state: int = 0, loop: EpochLoop | None = None) -> tuple:
    """Fit biased matrix factorisation on a PS model; the functional core of
    :class:`MatrixFactorization` (see it for the parameters).

    ``data`` holds user-grouped ``(uids, users, items, ratings)`` partitions
    (:func:`~._mf_data.to_part`). SGD runs the DSGD schedule (:func:`~._mf_steps.sgd_task`):
    the items are dealt into one block per task, of about equal ratings, and an epoch has
    one clock per block.

    Returns
    -------
    user_factors : ndarray (n_users, n_components) float64
    user_bias : ndarray (n_users,) float64
    item_rows : ndarray (n_items, n_components + 1)
        Item factors, bias in the last column; of the item table's dtype: float32 (sgd)
        or float64 (als).
    history : list of dict
        ``loss`` is the training RMSE (SGD: errors before each update; ALS: after the user
        step).

    Raises
    ------
    DivergenceError
        Non-finite errors or factors, naming the iteration.

    References
    ----------
    Koren, KDD 2008; Koren, Bell & Volinsky, IEEE Computer 2009; Zhou, Wilkinson, Schreiber &
    Pan, AAIM 2008 (ALS with weighted-λ regularisation); Gemulla, Nijkamp, Haas & Sismanis,
    KDD 2011 (DSGD); Yun, Yu, Hsieh, Vishwanathan & Dhillon, VLDB 2014 (NOMAD).
    """
    d = n_components + 1  # the factors' columns and the bias'
    loop = loop or EpochLoop(model, f"MatrixFactorization({solver})", max_iter)
    dtype = "float32" if solver == "sgd" else "float64"  # SGD: float32 factors and kernel
    table = model.add_table("item", (n_items, d), dtype, init=("normal", 0.0, init_std),
                            seed=int(random_state) % 2**31)
    rows = np.arange(n_items, dtype=np.int64)
    cfg = dict(solver=solver, n_components=n_components, reg=reg, reg_bias=reg_bias,
               reg_fixed=reg_fixed, reg_bias_fixed=reg_bias_fixed, mu=mu, decay=decay,
               learning_rate=learning_rate, init_std=init_std, n_items=n_items,
               n_parts=len(data), seed=int(random_state), dtype=dtype)

    def fill():  # the item table before the first epoch: random factors, zero biases
        drawn = table.pull(rows)
        # an init_std past the dtype draws infinite factors: named as a divergence
        check_finite(cfg, 1, "the item factors", drawn, initial=True)
        delta = np.zeros((n_items, d), dtype)
        delta[:, n_components] = -drawn[:, n_components]
        table.push(rows, delta)

    fill()
    if solver == "sgd":
        counts = np.sum(data.reduce(data_.item_counts, None, n_items), axis=0)

        def epochs(first, last):
            release_users()  # after a save
            _schedule(cfg, counts, len(data.tasks()))  # again after a lost worker
            per_task = model.run(lambda ps, parts: sgd_task(ps, parts, cfg, first, last),
                                 data, consistency=consistency, staleness=staleness,
                                 callback=loop.task_reports())
            return [_rmse([t[e] for t in per_task]) for e in range(last - first + 1)]
    else:
        model.add_table("gram", (n_items, d * d + d + 1), "float64")

        def epochs(first, last):
            release_users()  # after a save
            per_task = model.run(lambda ps, parts: als_task(ps, parts, cfg, first, last), data,
                                 callback=loop.task_reports())
            return [_rmse([t[e] for t in per_task]) for e in range(last - first + 1)]
    users, held = None, [False]  # held: the table USERS holds rows
    if loop.checkpoint not in (None, "auto"):  # a resume restores the users with the items
        # the users' rows go through the table only for a save or a restore: it is emptied
        # (its memory freed) after each, the partitions' state the one copy in between
        model.add_table(USERS, (n_users, d), dtype)

        def store(clock: int) -> dict:
            release_users()  # a save that failed left its rows
            held[0] = True
            model.fit_partitions(lambda ps, part: store_users_step(ps, part, cfg), data)
            return {}

        def restore(saved: dict | None, clock: int) -> None:
            held[0] = True  # as restored from the checkpoint
            model.fit_partitions(lambda ps, part: set_users_step(ps, part, cfg), data)
            release_users()

        users = (store, restore)

    def release_users():
        if held[0]:
            model.empty_table(USERS)
            held[0] = False

    if users is not None and loop.resume:
        refuse_older_checkpoint(loop.checkpoint, "item", USERS,
                                ("the item factors", "the users' factors"),
                                "2026-12-06")

    def recovered():  # after a lost worker: the partitions moved, the tables restored
        data.locate()
        if users is not None and model.checkpoint_info is not None:  # (not a restart)
            users[1](None, model.checkpoint_info.clock)  # every partition's, as saved

    history = loop.run(epochs, on_recover=recovered, restart=fill, driver_state=users)
    release_users()  # after the last save
    # the attributes, filled from the partitions' state as it is (no (n_users, n_components + 1)
    # copy between them)
    collected = model.fit_partitions(lambda ps, part: final_step(ps, part, cfg), data)[0]
    factors, bias = np.zeros((n_users, n_components)), np.zeros(n_users)
    for uids, P, bu in collected:
        factors[uids] = P[:, :n_components]
        bias[uids] = P[:, n_components] if bu is None else bu
    return factors, bias, table.pull(rows), history


def _schedule(cfg: dict, counts: np.ndarray, n_tasks: int) -> None:
    """Set ``cfg``'s DSGD item blocks: one per task, of about equal ratings."""
    if cfg.get("n_blocks") == n_tasks:
        return
    blocks = np.zeros(counts.shape[0], np.int32)
    balance_blocks(counts.astype(np.int64), np.argsort(-counts, kind="stable"),
                   np.zeros(n_tasks, np.int64), blocks)
    cfg.update(n_blocks=n_tasks, blocks=blocks, blocks_id=cfg.get("blocks_id", -1) + 1)


def _rmse(results: list) -> dict:
    """The epoch's training RMSE from the tasks' ``(sse, n, ...)``; SGD's also carry the
    slowest task's seconds in the kernel and in pulls, pushes and clocks."""
    per_task = np.asarray(results, dtype=np.float64).reshape(len(results), -1)
    sse, n = per_task[:, :2].sum(axis=0)
    out = dict(loss=math.sqrt(sse / max(n, 1.0)))
    if per_task.shape[1] == 5:
        out.update(kernel_time=float(per_task[:, 2].max()),
                   exchange_time=float(per_task[:, 3].max()),
                   kernel_cpu_time=float(per_task[:, 4].max()))
    return out
