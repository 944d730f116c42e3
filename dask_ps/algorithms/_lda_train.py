"""The driver's side of LDA training on the parameter server: the functional core
:func:`train` of :class:`.lda.LatentDirichletAllocation` (the word–topic table, the first
draw, the jobs of iterations, a redraw after a resume or a recovery) and the assignments
gathered from the workers (:mod:`._lda_steps` holds the workers' side).
"""

from __future__ import annotations

import numpy as np

from ..model import PSModel
from ..partitions import Partitions
from ._gbdt_data import set_checksums
from ._lda_eval import prior_loglik
from ._lda_steps import (
    TABLE,
    TIMES,
    assignments_task,
    check_table_room,
    nonzero_flat,
    setup_task,
    table_counts,
    train_task,
)
from .epoch_loop import EpochLoop

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
    their documents' draws instead of uniformly (the draw of a recovery and a resume,
    :func:`~._lda_table.sample_from_model`), so the topics keep their numbers, and the
    table keeps ``rint(decay * init_counts)``, the new assignments added (the earlier
    documents' counts are the prior of this fit's: streaming Gibbs sampling, Gao, Chen &
    Zhu, "Streaming Gibbs Sampling for LDA Model", 2016): the sampler sees them, the
    returned counts include them, and ``loss`` is minus the log-likelihood of this fit's
    tokens given them (``log p(w, z)`` of all the counts minus that of the kept counts
    alone). ``loop.fit_id`` gets
    ``n_words``, ``n_topics`` and ``counts``, the checksum of the documents' counts (see
    :func:`~dask_ps.model.recovery.check_resumable`).

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

    expected = {"next": 1}

    def epochs(first: int, last: int) -> list[dict]:
        if first != expected["next"]:  # the table was restored from a checkpoint (resume)
            redraw()
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
        expected["next"] = last + 1
        return out

    def redraw() -> None:
        """Assignments drawn anew from the table's counts (a checkpoint's) and their
        documents' draws; the table then counts the new ones (and the prior counts)."""
        counts = np.concatenate(model.map_shards(TABLE, table_counts, key_range=True))
        keys = np.flatnonzero(counts).astype(np.int64)
        cfg["generation"] += 1
        setup(dict(cfg, warm=True, redraw=True))
        model.push(TABLE, keys, -counts[keys])
        if prior is not None:
            model.push(TABLE, *prior)

    def rebuild() -> None:
        cfg["generation"] += 1
        if prior is not None:  # the tables were made anew, empty
            model.push(TABLE, *prior)
        setup(dict(cfg, warm=True))

    history = loop.run(epochs, on_recover=data.locate, rebuild=rebuild)
    nwk = np.concatenate(model.map_shards(TABLE, table_counts, key_range=True))
    return nwk.reshape(n_words, n_topics), history, info


def assignments(model: PSModel, data: Partitions) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every partition's tokens as ``(word ids, topics)``, from the workers (tests)."""
    return [p for task in model.run(lambda ps, parts: assignments_task(ps, parts, {}), data)
            for p in task]
