"""The driver's side of LDA training on the parameter server: the functional core
:func:`train` of :class:`.lda.LatentDirichletAllocation` (the word–topic table, the first
draw, the jobs of iterations, the sampler's state carried through a checkpoint, a rebuild
after a recovery) and the assignments gathered from the workers (:mod:`._lda_steps` holds
the workers' side).
"""

from __future__ import annotations

import numpy as np

from ..model import PSModel
from ..partitions import Partitions
from ._gbdt_data import set_checksums
from ._lda_eval import prior_loglik
from ._lda_steps import (
    STATE,
    TABLE,
    TIMES,
    assignments_task,
    check_table_room,
    nonzero_flat,
    restore_task,
    setup_task,
    state_totals,
    state_width,
    store_task,
    table_counts,
    train_task,
)
from .epoch_loop import EpochLoop, refuse_older_checkpoint

__all__ = ["JOB_SECONDS", "assignments", "train"]

#: Seconds of iterations per job (after a first job of one iteration): what a recovery
#: repeats at most. Each job costs one scheduling round and one extra pull.
JOB_SECONDS = 30.0


def _evaluated(it: int, every: int, last: int) -> bool:
    """Whether the training log-likelihood is computed after iteration ``it``."""
    return every > 0 and (it % every == 0 or it == last)


def train(model: PSModel, data: Partitions, *, n_words: int, n_topics: int, alpha: float,
          beta: float, max_iter: int, row_offsets: list[int], n_mh: int = 1,
          evaluate_every: int = 1, consistency="bsp", staleness=None, random_state: int = 0,
          loop: EpochLoop | None = None, init_counts: np.ndarray | None = None,
          decay: float = 1.0) -> tuple[np.ndarray, list[dict], dict]:
    """Fit LDA by collapsed Gibbs sampling on a PS model; the functional core of
    :class:`.lda.LatentDirichletAllocation` (see it for the parameters).

    ``data`` holds document–term count partitions (CSR, dense or ``sparse.COO``);
    ``row_offsets[i]`` is the number of the first document of partition ``i`` (for error
    messages). ``init_counts`` (int (n_words, n_topics), optional), the word–topic counts of
    a model trained before, continues its training: the first topics of the tokens are
    drawn from ``p(k | w, d) ∝ (n_wk + β) / (n_k + Vβ) · (n_dk + α)`` of those counts and
    their documents' draws instead of uniformly (the draw of a recovery,
    :func:`~._lda_table.sample_from_model`), so the topics keep their numbers, and the
    table keeps ``rint(decay * init_counts)``, the new assignments added (the earlier
    documents' counts are the prior of this fit's: streaming Gibbs sampling, Gao, Chen &
    Zhu, "Streaming Gibbs Sampling for LDA Model", 2016): the sampler sees them, the
    returned counts include them, and ``loss`` is minus the log-likelihood of this fit's
    tokens given them (``log p(w, z)`` of all the counts minus that of the kept counts
    alone). ``loop.fit_id`` gets
    ``n_words``, ``n_topics`` and ``counts``, the checksum of the documents' counts (see
    :func:`~dask_ps.model._fit_checks.check_resumable`).

    Returns
    -------
    nwk : int32 array (n_words, n_topics)
        Word–topic counts of the final assignments, plus the kept ``init_counts``.
    history : list of dict
        Per iteration (see :class:`.lda.LatentDirichletAllocation`'s ``history_``).
    info : dict
        ``n_tokens``, ``n_documents``.

    Raises
    ------
    ValueError
        Counts that are negative, not integers or not finite (naming the document and the
        term), no token at all, or more topics x terms than memory holds (before the table
        is made: :func:`~._lda_steps.check_table_room`).
    """
    loop = loop or EpochLoop(model, f"LatentDirichletAllocation(K={n_topics})", max_iter,
                             unit="iteration", job_seconds=JOB_SECONDS)
    check_table_room(model, n_words, n_topics)
    model.add_table(TABLE, (n_words * n_topics,), "int32")
    cfg = dict(n_words=int(n_words), n_topics=int(n_topics), alpha=float(alpha),
               beta=float(beta), n_mh=int(n_mh), seed=int(random_state),
               row_offsets=[int(r) for r in row_offsets], warm=False, generation=0)
    every, total = int(evaluate_every), int(max_iter)
    cfg["evaluate"] = lambda it: _evaluated(it, every, total)

    def setup(c):
        return model.run(lambda ps, parts: setup_task(ps, parts, c), data)

    prior, prior_ll = None, 0.0  # the counts the table keeps beyond the assignments'
    if init_counts is not None:  # the fresh partitions' warm draw pulls these counts
        first = nonzero_flat(init_counts, n_words, n_topics)
        model.push(TABLE, *first)
        kept = np.rint(first[1] * float(decay)).astype(np.int32)
        if kept.any():
            prior = first[0][kept > 0], kept[kept > 0]
            prior_ll = prior_loglik(*prior, n_words, n_topics, beta)  # the loss: given them
    per_part = [p for task in setup(dict(cfg, warm=init_counts is not None)) for p in task]
    if init_counts is not None and decay != 1.0:  # the table keeps ``kept`` alone of them
        model.push(TABLE, first[0], kept - first[1])
    n_tokens = sum(p[2] for p in per_part)
    info = dict(n_tokens=n_tokens, n_documents=sum(p[1] for p in per_part))
    if n_tokens == 0:
        raise ValueError("the documents hold no token (every count is zero)")
    # what a checkpoint to resume from must hold: the table is flat (V * K rows), and its
    # rows are these terms' (the counts' checksum: the same documents, columns in place)
    sums = set_checksums([dict(checksums=(p[4], 0)) for p in per_part], "counts")
    loop.fit_id = dict(loop.fit_id or {}, n_words=int(n_words), n_topics=int(n_topics),
                       counts=sums["counts_features"])

    sampler = None  # (store, restore) of the sampler's state: what a resume goes on with
    held = [False]  # the table STATE holds rows (between a store or restore and release)
    if loop.checkpoint not in (None, "auto"):  # (a partial_fit's too: one set of tables)
        sampler = _sampler_state(model, data, cfg, per_part, held)
        if loop.resume:
            refuse_older_checkpoint(loop.checkpoint, TABLE, STATE,
                                    ("the word-topic counts", "the token assignments"),
                                    "2026-12-07")

    def release() -> None:
        if held[0]:
            model.empty_table(STATE)
            held[0] = False

    def epochs(first: int, last: int) -> list[dict]:
        release()  # after a save or a restore
        per_task = model.run(lambda ps, parts: train_task(ps, parts, cfg, first, last), data,
                             consistency=consistency, staleness=staleness,
                             callback=loop.task_reports())
        out = []
        for e in range(last - first + 1):
            recs = [t[e] for t in per_task]
            rec = {key: max(r[key] for r in recs) for key in TIMES}
            word = [r["word_ll"] for r in recs if "word_ll" in r]
            if word:
                ll = sum(r["doc_ll"] for r in recs) + word[0] - prior_ll
                rec.update(loss=-ll / n_tokens, log_likelihood=ll)
            out.append(rec)
        return out

    def rebuild() -> None:
        cfg["generation"] += 1
        held[0] = False  # every table was made anew, empty
        if prior is not None:
            model.push(TABLE, *prior)
        setup(dict(cfg, warm=True))

    history = loop.run(epochs, on_recover=data.locate, rebuild=rebuild, driver_state=sampler)
    release()  # after the last save
    nwk = np.concatenate(model.map_shards(TABLE, table_counts, key_range=True))
    return nwk.reshape(n_words, n_topics), history, info


def _sampler_state(model: PSModel, data: Partitions, cfg: dict, per_part: list,
                   held: list) -> tuple:
    """``(save, load)`` of :meth:`~.epoch_loop.EpochLoop.run`'s ``driver_state``: the
    sampler's state on the workers, carried into each checkpoint by the table
    :data:`~._lda_steps.STATE` (made here, emptied between saves: ``held[0]`` says it
    holds rows) and set back on the partitions by a resume, so that the resumed fit
    draws what the uninterrupted one does (see :func:`~._lda_steps.store_task`). Sets
    ``cfg``'s ``token_offsets`` (each partition's first token in corpus order) and
    ``keeps_state``."""
    tokens = {p[0]: p[2] for p in per_part}
    cfg["token_offsets"] = np.concatenate(
        [[0], np.cumsum([tokens[i] for i in sorted(tokens)])]).astype(int).tolist()
    cfg["keeps_state"] = True
    width = state_width(cfg["n_mh"])
    model.add_table(STATE, (cfg["token_offsets"][-1], width), "int32")

    def save(clock: int) -> dict:
        if held[0]:  # a save that failed left its rows
            model.empty_table(STATE)
        held[0] = True
        model.run(lambda ps, parts: store_task(ps, parts, cfg), data)
        return {}

    def load(saved, clock: int) -> None:
        held[0] = True  # as restored from the checkpoint
        K = cfg["n_topics"]
        table = np.concatenate(model.map_shards(TABLE, table_counts, key_range=True))
        table = table.reshape(-1, K).sum(axis=0, dtype=np.int64)
        tokens, snapshot = np.sum(model.map_shards(STATE, state_totals, K, width,
                                                   key_range=True), axis=0, dtype=np.int64)
        if not np.array_equal(tokens, table):
            raise ValueError(f"LatentDirichletAllocation: resume at iteration {clock}: the "
                             f"checkpoint's sampler state counts {tokens.tolist()} tokens per "
                             f"topic, its word-topic table {table.tolist()}: not one fit's")
        # the totals the snapshot of the last iteration had: the table's less the moves of
        # that iteration (the partitions' word phases and the doc phases before them)
        nk = table - (tokens - snapshot)
        model.run(lambda ps, parts: restore_task(ps, parts, cfg, clock, nk), data)

    return save, load


def assignments(model: PSModel, data: Partitions) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every partition's tokens as ``(word ids, topics)``, from the workers (tests)."""
    return [p for task in model.run(lambda ps, parts: assignments_task(ps, parts, {}), data)
            for p in task]
