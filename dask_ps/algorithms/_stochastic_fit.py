"""The driver's part of a stochastic solver of logistic regression ("ftrl", "adagrad", "sgd"):
the weight table (dense or hashed), a warm start into it, the epochs and the weights gathered
at the end. The steps over one partition are :mod:`._stochastic`'s; the functional core that
chooses between this and L-BFGS (:mod:`._lbfgs`) is :func:`.logistic.train`.
"""

from __future__ import annotations

import numpy as np

from ..state.optimizers import FTRL, SGD, AdaGrad, Average
from ..state.table import dense_table_bytes
from . import _logistic_data as D
from ._stochastic import (
    Rule,
    epoch_losses,
    gather_rows,
    gather_sparse_rows,
    nonzero_rows,
    server_step,
    worker_step,
)

__all__ = ["DENSE_TABLE_BYTES", "SOLVERS", "stochastic_fit"]

#: The solvers: the update rule of each stochastic one, built from (learning rate, l1).
SOLVERS = {"ftrl": lambda lr, l1: FTRL(alpha=lr, beta=1.0, l1=l1, l2=0.0),
           "adagrad": lambda lr, l1: AdaGrad(learning_rate=lr, eps=1e-10),
           "sgd": lambda lr, l1: SGD(learning_rate=lr), "lbfgs": None}
#: A stochastic solver's table is dense (a row per column) while it and its rule's state
#: would hold at most this many bytes, else hashed (the touched keys' rows; the same model).
#: FTRL (worker step, float64) on 10^5 rows touching 2 x 10^6 random columns, 2 workers:
#: dense 0.7-0.8 s against hashed 1.2-1.4 s at 2**20 columns, both 1.7-1.8 s at 2**24, 2.9 s
#: and 1.36 GB per worker against 1.9 s and 0.70 GB at 2**26, 9.0 s and 3.9 GB against 2.1 s
#: and 0.76 GB at 2**28; at 2**31 the dense one could not be allocated (24 GiB).
DENSE_TABLE_BYTES = 2**30


def stochastic_fit(model, data, loop, *, name: str, shape: tuple, n_rows: int, weight: float,
                   solver: str, step_on: str, penalty, C: float, fit_intercept: bool,
                   batch_size: int, learning_rate: float, tol: float, consistency, staleness,
                   random_state: int, clocks_per_epoch: int, early_stopping: bool,
                   n_iter_no_change: int, validation_fraction: float, init, evaluate,
                   table_dtype: str, collect: bool) -> tuple:
    """The epochs of a stochastic ``solver`` on table "w" of ``model``, for
    :func:`.logistic.train` (its parameters; ``shape`` (n_features + 1, n_outputs), ``n_rows``
    the training rows, ``weight`` the rows the loss counts: their total weight).

    Returns
    -------
    W : ndarray (n_features + 1, n_outputs) or KeyedWeights, or None (``collect=False``)
    history : list of dict
    n_iter : int
    state : ndarray or None
        The update rule's state rows in the worker step's layout (``TrainState.state``).
    """
    n_features, n_outputs = shape[0] - 1, shape[1]
    wide = n_features >= D.WIDE_FEATURES
    lam = 1.0 / C
    steps = max(1, n_rows // batch_size)
    rule = Rule(SOLVERS[solver](learning_rate, lam / weight * steps if penalty == "l1"
                                else 0.0), n_outputs)
    local = step_on == "worker"
    ncols, optimizer = (rule.ncols, Average()) if local else (n_outputs, rule.optimizer)
    hashed = wide or dense_table_bytes(shape[0], ncols, table_dtype,
                                       optimizer) > DENSE_TABLE_BYTES
    layout = dict(partitioner="hash") if hashed else {}
    table = model.add_table("w", (None if hashed else shape[0], ncols), table_dtype,
                            optimizer=optimizer, **layout)

    def fill():  # the table before the first epoch: as created, or the warm start's
        if init is None:
            return
        keyed = isinstance(init.W, D.KeyedWeights)  # wide, or a keyed "lbfgs" fit's
        keys, W0 = (init.W.keys, init.W.W) if keyed else (np.arange(shape[0]), init.W)
        # the update rule's state of the same solver (either step keeps it in the worker
        # step's layout), else the rule started at the weights
        same = init.solver == solver and init.state.shape[1] == rule.width
        start = rule.rebase(init.state, W0) if same else rule.from_weights(W0)
        if hashed:  # a hashed table's absent rows are zero already: no rows made for them
            held = nonzero_rows(start)
            keys, start = keys[held], start[held]
        if local:
            table.push(keys, np.column_stack([start, np.ones(keys.shape[0])]))
        else:  # set, not pushed: a push of the weights is a gradient step of the rule
            table.set_rows(keys, *rule.to_server(start))

    fill()
    cfg = dict(name=name, n_features=n_features, n_outputs=n_outputs, batch_size=batch_size,
               optimizer=rule.optimizer, learning_rate=learning_rate, seed=random_state,
               clocks_per_epoch=clocks_per_epoch, fit_intercept=fit_intercept,
               validation_fraction=validation_fraction if early_stopping else 0.0,
               rows_per_task=n_rows / max(1, len(data.tasks())),
               l2=lam / weight if penalty == "l2" else 0.0, weight_scale=n_rows / weight)
    kernel = worker_step if local else server_step

    def step(ps, part):
        return kernel(ps, part, cfg)

    def epochs(first: int, last: int) -> list[dict]:
        out = []
        for results in model.fit_partitions(step, data, epochs=last - first + 1,
                                            first_epoch=first, consistency=consistency,
                                            staleness=staleness, seed=random_state,
                                            callback=loop.task_reports(), report_epochs=True):
            out.append(epoch_losses(np.sum(results, axis=0), early_stopping))
        return out

    def stop(records):  # scikit-learn's rule (SGDClassifier's n_iter_no_change)
        watched = [r["validation_loss" if early_stopping else "loss"] for r in records]
        best, stale = np.inf, 0
        for v in watched:
            stale = stale + 1 if v > best - tol else 0
            best = min(best, v)
        return stale >= n_iter_no_change

    def to_weights(rows):
        return rule.weights(rows[:, :-1]) if local else rows

    history = loop.run(epochs, stop=stop, on_recover=data.locate, restart=fill,
                       evaluate=None if evaluate is None else (lambda e: evaluate(e, to_weights)))
    n_iter = sum(1 for h in history if "loss" in h)
    if not collect:
        return None, history, n_iter, None
    # the rule's state: the worker step's rows; a server step's weights and slots
    width, slots = (rule.width, ()) if local else (n_outputs, rule.server_slots)
    keyed = n_features >= D.KEYED_FEATURES  # (wide included)
    if hashed:
        keys, rows = gather_sparse_rows(table, width, slots)
        if not keyed:  # a narrow model of many outputs: rows by offset, as a dense table's
            full = np.zeros((shape[0], rows.shape[1]))
            full[keys] = rows
            rows = full
    elif keyed:  # a dense table's touched rows, by key: no array over the width here
        keys, rows = gather_rows(table, width, keyed=True, slots=slots)
    else:
        rows = gather_rows(table, width, slots=slots)
    state = rows if local else rule.from_server(rows)
    W = rule.weights(rows) if local else rows[:, :n_outputs]
    if keyed:
        W = D.KeyedWeights(keys, W)
    return W, history, n_iter, state
