"""The worker side of LDA on the parameter server: tasks over the partitions of a thread.

Each partition's tokens and their sampler state (topic, pushed topic and proposals per token,
an RNG seeded anew for each phase from the seed, the partition and the iteration) live in its
worker-local state (``part.state``) for the whole fit, never re-read, and sent only into a
checkpoint (:func:`store_task`, :func:`restore_task`). The word–topic counts are the PS
table :data:`TABLE` (see :mod:`~dask_ps.algorithms._lda_table`). A task runs all the
partitions of a worker thread (:meth:`~dask_ps.PSModel.run`), one clock per iteration::

    rows of the task's words and the totals (one map_shards, sent at the last clock)
    -> word phase of each partition (emits its delta)
    -> push the deltas (merged with the process's other tasks), clock
    -> the next pull leaves from a background thread (it sends the clock's push first)
    -> doc phase of each partition, while the push and the next pull travel

A job ends after a push, so that between jobs the table counts every token's topic exactly
(Z); the next job starts with the doc phase it skipped, with the totals and the draws it would
have had: where jobs end (checkpoints, callbacks, the pace) changes nothing of the chain.

:func:`setup_task` makes the table count the assignments: partitions that have them push
their counts, then partitions without (the first fit, or assignments lost with their worker)
draw topics — uniformly, or from the counts the table holds and their documents' draws
(:func:`~._lda_table.sample_from_model`) — and push theirs. It initialises a fit, rebuilds
the table after a lost shard (the table is a function of the assignments, as in Angel's
LDA). A resume sets the sampler's state saved with the checkpoint instead
(:func:`restore_task`): it goes on as the uninterrupted fit does.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ..exceptions import DataError, MemoryLimitError
from ..partitions.worker import process_memory
from . import _lda_kernels as kr
from . import _lda_tokens as tk
from ._base import check_numeric_columns
from ._gbdt_data import checksums
from ._lda_eval import doc_loglik, topic_loglik
from ._lda_table import (
    DRAW_SWEEPS,
    delta_entries,
    join_shards,
    sample_from_model,
    select_rows,
    shard_rows,
    token_words,
    topic_counts,
)

__all__ = ["STATE", "TABLE", "TIMES", "as_csr", "assignments_task", "check_table_room",
           "nonzero_flat", "restore_task", "setup_task", "state_width", "store_task",
           "state_totals", "table_counts", "train_task"]

#: Name of the word–topic table (flat, ``word * K + topic``, int32).
TABLE = "nwk"

#: Name of the table that carries the sampler's per-token state into a checkpoint (row
#: ``i``: the ``i``-th token of the corpus in document order; see :func:`store_task`).
STATE = "lda_state"

#: Seconds a :func:`train_task` record holds per iteration (see its docstring).
TIMES = ("wait_s", "word_s", "push_s", "clock_s", "doc_s", "sample_s", "pull_s",
         "cpu_s")


def as_csr(value) -> sp.csr_matrix:
    """A partition's documents as CSR (from scipy.sparse, ``sparse.COO``, a dense array or
    a pandas DataFrame: a dask DataFrame's partition).

    Raises
    ------
    DataError
        A DataFrame with a missing count (NA or NaN), naming its column and row label.
    ValueError
        A DataFrame with columns that hold no numbers, named.
    """
    if sp.issparse(value):
        return value.tocsr()
    if hasattr(value, "to_scipy_sparse"):  # sparse.COO / GCXS
        return value.to_scipy_sparse().tocsr()
    if hasattr(value, "columns") and hasattr(value, "isna"):  # nullable integers, booleans
        check_numeric_columns(value, "LatentDirichletAllocation")  # strings named
        missing = value.isna().to_numpy()
        if missing.any():
            i, j = np.argwhere(missing)[0]
            raise DataError(f"LatentDirichletAllocation: X has a missing count in column "
                            f"{value.columns[j]!r}, row {value.index[i]!r}")
        value = value.to_numpy(dtype=np.float64)
    return sp.csr_matrix(np.asarray(value))


def _tokens(part, cfg: dict) -> dict:
    """The partition's tokens, grouped by document and by word (made once, kept in
    ``part.state``; again after a lost worker)."""
    st = part.state
    if "doc_ptr" not in st:
        X = as_csr(part.load())
        if X.shape[1] != cfg["n_words"]:
            raise ValueError(f"partition {part.index} has {X.shape[1]} terms, the data "
                             f"{cfg['n_words']}")
        _check_token_room(X, part.index, cfg["row_offsets"][part.index])
        doc_ptr, words = tk.tokens_from_counts(X.indptr, X.indices, X.data,
                                               first_row=cfg["row_offsets"][part.index])
        vocab, local = tk.local_vocabulary(words)
        st["word_ptr"], st["word_tok"] = tk.group_by_word(local, vocab.shape[0])
        st["vocab"], st["doc_ptr"] = vocab, doc_ptr
        # the counts and where they are, whatever the partitioning (a resume's fit id)
        st["checksum"] = checksums(X, None, cfg["row_offsets"][part.index])[0]
    return st


#: Bytes that one token takes, at least, while a partition trains: its term (int32), its
#: local term (int32), its place in word order (int64) and its sampler record (16-64 bytes).
TOKEN_BYTES = 40


#: Bytes per topic that a training task takes, at least, whatever its tokens: the word
#: phase's counts, alias table and lists over the topics (49), the doc phase's counts, the
#: totals pulled, their deltas and the moves pushed (8 each).
TOPIC_BYTES = 89

#: Bytes per word–topic cell, at least: on the shards (the int32 table), and in the
#: process that fits (the counts gathered, int32, and ``components_`` made of them, float64).
CELL_BYTES, GATHERED_CELL_BYTES = 4, 12


def check_table_room(model, n_words: int, n_topics: int) -> None:
    """Refuse a fit whose word–topic counts (``n_words * n_topics`` cells) and per-topic
    working arrays could not fit in memory, before any is made: ``n_components=10**8`` on
    a 40 x 30 corpus allocated an 11.2 GiB table, then was killed by the kernel at 22.9 GB.

    Counts, at least, :data:`CELL_BYTES` per cell on the shards (spread evenly), and
    :data:`TOPIC_BYTES` per topic and task thread of each worker, against that worker's
    memory limit; :data:`GATHERED_CELL_BYTES` per cell in this process (plus the shards and
    one task in-process) against what it may use
    (:func:`~dask_ps.partitions.worker.process_memory`). Workers without
    a limit are not checked.

    Raises
    ------
    MemoryLimitError
        A ``ValueError`` and a ``MemoryError``, naming ``n_components``, ``n_words``, the
        bytes needed, where, and what that process may use.
    """
    cells = int(n_words) * int(n_topics)
    per_shard = -(-cells // model.n_shards) * CELL_BYTES
    needs = []  # (bytes, limit, where)
    here = cells * GATHERED_CELL_BYTES
    if model.is_local:
        here += cells * CELL_BYTES + n_topics * TOPIC_BYTES
    else:
        from ..cluster import worker_info

        info = worker_info(model.client)
        for address, w in info.items():
            shards = sum(1 for ref in model.shards if ref.address == address)
            need = shards * per_shard + int(w.get("nthreads", 1)) * n_topics * TOPIC_BYTES
            if w.get("memory_limit"):
                needs.append((need, int(w["memory_limit"]), f"worker {address}"))
    needs.append((here, process_memory(), "this process"))
    for need, limit, where in needs:
        if need > limit:
            raise MemoryLimitError(
                f"LatentDirichletAllocation: n_components={n_topics} topics x n_words="
                f"{n_words} terms need at least {need / 2**30:.1f} GiB in {where} (the "
                f"word-topic counts: {cells * CELL_BYTES / 2**30:.1f} GiB of int32 on the "
                f"shards, {cells * GATHERED_CELL_BYTES / 2**30:.1f} GiB gathered with "
                f"components_ where the fit runs; {TOPIC_BYTES} bytes per topic and task "
                f"for sampling), more than the {limit / 2**30:.1f} GiB it may use: use fewer "
                f"topics (n_components) or terms (the largest term id plus one: number the "
                f"terms from 0 without gaps)")


def _check_token_room(X: sp.csr_matrix, index: int, first_row: int) -> None:
    """Refuse a partition whose tokens could not fit in this worker's memory limit (or the
    machine's memory outside a worker) before they are made: a count of 2^31 had the worker
    killed after ~27 s, one of 2^40 a ``MemoryError`` of 4 TiB.

    Raises
    ------
    DataError
        Naming the partition, its tokens, the memory and its largest count's document and
        term.
    """
    n = float(np.sum(X.data, dtype=np.float64))
    limit = process_memory()
    if not n * TOKEN_BYTES > limit:  # NaN counts: tokens_from_counts names them
        return
    j = int(np.argmax(X.data))
    d = int(np.searchsorted(X.indptr, j, side="right")) - 1
    raise DataError(f"LatentDirichletAllocation: partition {index} holds {n:.4g} tokens, "
                    f"at least {n * TOKEN_BYTES / 2**30:.1f} GiB to train on, more than the "
                    f"{limit / 2**30:.1f} GiB this process may use; its largest count is "
                    f"{X.data[j]:.4g} (document {first_row + d}, term {int(X.indices[j])}): "
                    f"check the counts, or split the documents into more partitions")


def _new_sampler(st: dict, cfg: dict, seed: tuple) -> None:
    n = st["word_tok"].shape[0]
    st["state"] = kr.new_state(n, cfg["n_mh"])
    st["rng"] = np.array([np.random.SeedSequence(seed).generate_state(1, np.uint64)[0]],
                         np.uint64)
    st["moved"] = np.zeros(cfg["n_topics"], np.int64)
    room = kr.delta_capacity(st["word_ptr"], cfg["n_topics"])
    st["delta"] = (np.zeros(st["vocab"].shape[0] + 1, np.int64), np.zeros(room, np.int32),
                   np.zeros(room, np.int32))
    st["keys"], st["values"] = np.zeros(room, np.int64), np.zeros(room, np.int32)
    st["pending_doc"] = False


def _stream(st: dict, cfg: dict, index: int, it: int, phase: int) -> None:
    """Seed the partition's RNG for one phase (0: word, 1: doc) of iteration ``it``: a
    function of ``(seed, partition, iteration, phase)``, not of the draws before, so a
    resumed fit draws what the uninterrupted one does, carrying no RNG state."""
    st["rng"][0] = np.random.SeedSequence(
        (cfg["seed"], index, it, phase)).generate_state(1, np.uint64)[0]


def _push_counts(ps, st: dict, cfg: dict) -> None:
    keys, counts = topic_counts(st["word_ptr"], st["word_tok"],
                                np.ascontiguousarray(st["state"][:, kr.Z]), st["vocab"],
                                cfg["n_topics"])
    if keys.shape[0]:
        ps.push(TABLE, keys, counts)


def _pull(ps, words: np.ndarray, cfg: dict, with_ll: bool):
    """CSR rows of ``words``, the topic totals and (``with_ll``) the word part of the
    log-likelihood, from one ``map_shards`` call."""
    results = ps.map_shards(TABLE, _shard_rows, words, cfg["n_topics"], bool(with_ll),
                            cfg["beta"], key_range=True)
    return join_shards(results, words.shape[0], cfg["n_topics"])


def _shard_rows(key_range, values, slots, words, n_topics, with_ll, beta):
    """Runs next to a shard: see :func:`~._lda_table.shard_rows`."""
    return shard_rows(key_range[0], values.reshape(-1), words, n_topics, with_ll, beta)


class _Rows:
    """The rows of a task's words, and how to cut each partition's out of them."""

    def __init__(self, sts: list[dict]) -> None:
        vocabs = [st["vocab"] for st in sts]
        if len(vocabs) == 1:
            self.words, self.pos = vocabs[0], [None]
        else:
            self.words = np.unique(np.concatenate(vocabs)) if vocabs else \
                np.zeros(0, np.int64)
            self.pos = [np.searchsorted(self.words, v) for v in vocabs]

    def pull(self, ps, cfg: dict, with_ll: bool):
        ptr, topic, count, totals, ll = _pull(ps, self.words, cfg, with_ll)
        rows = [(ptr, topic, count) if pos is None else select_rows(ptr, topic, count, pos)
                for pos in self.pos]
        return rows, totals, ll


def _timed(fn, *args):
    """``(fn(*args), seconds it took)``."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def setup_task(ps, parts: list, cfg: dict) -> list[tuple[int, int, int, bool]]:
    """Make the table count the assignments (two clocks; see the module docstring).

    ``cfg["warm"]``: partitions without assignments draw them from the counts the table
    holds (the other partitions', a checkpoint's or a fitted model's) combined with their
    documents' draws (:func:`~._lda_table.sample_from_model`) instead of uniformly. Returns
    ``(partition, documents, tokens, fresh, checksum)`` per partition, ``checksum`` that of
    its counts (:func:`~._gbdt_data.checksums`).
    """
    sts = [_tokens(p, cfg) for p in parts]
    K, alpha = cfg["n_topics"], cfg["alpha"]
    fresh = []
    for p, st in zip(parts, sts):
        if "state" in st:  # assignments kept on this worker: the table is rebuilt from them
            kr.init_state(st["doc_ptr"], st["state"], cfg["n_mh"], K, alpha, False, st["rng"])
            st["moved"][:] = 0
            st["pending_doc"] = False
            _push_counts(ps, st, cfg)
        else:
            fresh.append((p, st))
    ps.clock()
    if fresh:
        for p, st in fresh:
            _new_sampler(st, cfg, (cfg["seed"], p.index, cfg["generation"]))
        if cfg["warm"]:
            rows, totals, _ = _Rows([st for _, st in fresh]).pull(ps, cfg, False)
            for (_, st), (ptr, topic, count) in zip(fresh, rows):
                z = np.empty(st["state"].shape[0], np.int32)
                sample_from_model(st["doc_ptr"], token_words(st["word_ptr"], st["word_tok"]),
                                  ptr, topic, count, totals, alpha, cfg["beta"],
                                  cfg["n_words"], DRAW_SWEEPS, z, st["rng"])
                st["state"][:, kr.Z] = z
        for _, st in fresh:
            kr.init_state(st["doc_ptr"], st["state"], cfg["n_mh"], K, alpha,
                          not cfg["warm"], st["rng"])
            _push_counts(ps, st, cfg)
    ps.clock()
    fresh_ids = {p.index for p, _ in fresh}
    return [(p.index, st["doc_ptr"].shape[0] - 1, int(st["word_tok"].shape[0]),
             p.index in fresh_ids, st["checksum"]) for p, st in zip(parts, sts)]


def train_task(ps, parts: list, cfg: dict, first: int, last: int) -> list[dict]:
    """Iterations ``first..last`` (one clock each) over a task's partitions, the end of each
    reported (``ps.report(epoch=it)``, for the history's times).

    The pull of iteration ``it + 1`` leaves right after the clock of iteration ``it``, from a
    background thread, and travels (the push, the barrier, the shards' scans, the rows'
    transfer and their cutting per partition) while this thread runs the doc phase of
    iteration ``it``; the doc phase needs only the totals it already has, and under BSP the
    shards answer with the same counts either way (every push of the clocks before, none of
    later ones), so the model is the same.

    Returns one record per iteration: ``doc_ll`` (the documents' part of log p(w, z) of
    the task's partitions after the iteration's word phase), ``word_ll`` (the rows' and
    totals' part, from task 0 only, on iterations ``cfg["evaluate"]`` says), and seconds of
    the task: ``wait_s`` waiting for the iteration's rows (what the doc phase of the
    iteration before did not hide), ``word_s`` and ``doc_s`` in the two phases,
    ``push_s`` making and queueing the delta, ``clock_s`` in the clock (the process's
    pushes merged and queued) and sending the next pull off, ``sample_s`` (word + doc),
    ``pull_s`` the pull's own seconds (mostly hidden), ``cpu_s`` the thread's CPU seconds
    in the two phases.
    """
    sts = [p.state for p in parts]
    if any("state" not in st for st in sts):
        raise RuntimeError("a partition has no topic assignments: the setup job did not "
                           "run on this worker")
    K, n_mh, alpha, beta, V = (cfg["n_topics"], cfg["n_mh"], cfg["alpha"], cfg["beta"],
                               cfg["n_words"])
    rows_of = _Rows(sts)
    lead = ps.task == 0
    evaluate = cfg["evaluate"]
    records = []
    pool = ThreadPoolExecutor(1, thread_name_prefix="dask-ps-lda-pull")
    try:
        prefetched = None
        for it in range(first, last + 1):
            with_ll = lead and it > first and evaluate(it - 1)
            t0 = time.perf_counter()
            if prefetched is None:
                (rows, nk, word_ll), pull_s = _timed(rows_of.pull, ps, cfg, with_ll)
            else:
                (rows, nk, word_ll), pull_s = prefetched.result()
            t1 = time.perf_counter()
            c1 = time.thread_time()
            if with_ll:
                records[-1]["word_ll"] = word_ll + topic_loglik(nk, V, beta)
            push_s = 0.0
            for p, st, (ptr, topic, count) in zip(parts, sts, rows):
                if st["pending_doc"]:  # skipped at the end of the last job: run as it would
                    _stream(st, cfg, p.index, it - 1, 1)  # have then (its totals, its draws)
                    kr.doc_phase(st["doc_ptr"], st["nk"], st["nk_delta"], st["state"], n_mh,
                                 alpha, beta, V, st["rng"], st["moved"])
                    st["pending_doc"] = False
                if it == last and cfg.get("keeps_state"):  # the topics the snapshot counts
                    st["pushed"] = st["state"][:, kr.Z_PUSHED].copy()  # (store_task)
                _stream(st, cfg, p.index, it, 0)
                nk_delta = st["moved"].copy()
                out_ptr, out_topic, out_value = st["delta"]
                nnz = kr.word_phase(st["word_ptr"], st["word_tok"], ptr, topic, count, nk,
                                    nk_delta, st["state"], n_mh, alpha, beta, V, st["rng"],
                                    out_ptr, out_topic, out_value)
                tp = time.perf_counter()
                if nnz:
                    ps.push(TABLE, *delta_entries(st["vocab"], out_ptr, out_topic, out_value,
                                                  nnz, K, st["keys"], st["values"]))
                push_s += time.perf_counter() - tp
                st["nk"], st["nk_delta"] = nk, nk_delta
            t2 = time.perf_counter()
            c2 = time.thread_time()
            ps.clock()
            if it < last:  # the next rows travel while the doc phase runs
                prefetched = pool.submit(_timed, rows_of.pull, ps, cfg, lead and evaluate(it))
            t3 = time.perf_counter()
            c3 = time.thread_time()
            doc_ll = 0.0
            for p, st in zip(parts, sts):
                if it < last:
                    _stream(st, cfg, p.index, it, 1)
                    doc_ll += kr.doc_phase(st["doc_ptr"], st["nk"], st["nk_delta"],
                                           st["state"], n_mh, alpha, beta, V, st["rng"],
                                           st["moved"])
                else:  # end on a push: the table counts every Z
                    doc_ll += doc_loglik(st["doc_ptr"],
                                         np.ascontiguousarray(st["state"][:, kr.Z]), K, alpha)
                    st["pending_doc"] = True
            t4 = time.perf_counter()
            c4 = time.thread_time()
            word_s = t2 - t1 - push_s
            records.append(dict(doc_ll=doc_ll, wait_s=t1 - t0, word_s=word_s,
                                push_s=push_s, clock_s=t3 - t2, doc_s=t4 - t3,
                                sample_s=word_s + t4 - t3, pull_s=pull_s,
                                cpu_s=c2 - c1 + c4 - c3))
            if it < last:  # its end, for the history (EpochLoop.task_reports)
                ps.report(epoch=it)
        if lead and evaluate(last):
            t0 = time.perf_counter()
            _, nk, word_ll = rows_of.pull(ps, cfg, True)
            records[-1]["word_ll"] = word_ll + topic_loglik(nk, V, beta)
            records[-1]["wait_s"] += time.perf_counter() - t0
        ps.report(epoch=last)  # (its log-likelihood included)
    finally:  # a failed iteration leaves its prefetch to end (or time out) on its own
        pool.shutdown(wait=False, cancel_futures=True)
    return records


def assignments_task(ps, parts: list, cfg: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each partition's tokens as ``(global word, topic)`` int64/int32 arrays, in word
    order (for tests of the count invariants)."""
    out = []
    for p in parts:
        st = p.state
        counts = np.diff(st["word_ptr"])
        words = np.repeat(st["vocab"], counts)
        out.append((words, st["state"][st["word_tok"], kr.Z].astype(np.int32)))
    return out


def state_width(n_mh: int) -> int:
    """Columns of a token's row in the table :data:`STATE`: its topic, the topic the
    snapshot of its last word phase counted it at, its ``n_mh`` pending proposals."""
    return 2 + int(n_mh)


def _token_rows(part, cfg: dict, n: int) -> np.ndarray:
    first = cfg["token_offsets"][part.index]
    return np.arange(first, first + n, dtype=np.int64)


def store_task(ps, parts: list, cfg: dict) -> None:
    """Write each partition's sampler state into the table :data:`STATE` (empty: emptied
    after each save), before a checkpoint saves it: per token its topic ``Z``, the topic the
    snapshot of the last word phase counted (``pushed``: with ``Z``, the partition's moves
    the snapshot's totals lack) and the proposals the next phase consumes (the word
    proposals of the doc phase a job ends without, or, before the first iteration, the doc
    proposals), at the token's row in corpus order (``cfg["token_offsets"]``)."""
    M = cfg["n_mh"]
    for p in parts:
        st = p.state
        n = st["state"].shape[0]
        if n == 0:
            continue
        rows = np.empty((n, state_width(M)), np.int32)
        rows[:, 0] = st["state"][:, kr.Z]
        if st["pending_doc"]:
            rows[:, 1] = st["pushed"]
            rows[:, 2:] = st["state"][:, kr.PROP + M:kr.PROP + 2 * M]
        else:  # before the first iteration: nothing moved yet
            rows[:, 1] = st["state"][:, kr.Z]
            rows[:, 2:] = st["state"][:, kr.PROP:kr.PROP + M]
        ps.push(STATE, _token_rows(p, cfg, n), rows)
    ps.clock()


def restore_task(ps, parts: list, cfg: dict, clock: int, nk: np.ndarray) -> None:
    """Set each partition's sampler state from the table :data:`STATE` (restored from a
    checkpoint of iteration ``clock``; see :func:`store_task`): its topics and proposals,
    and, after iteration 1 or later, the doc phase the job skipped, pending with the totals
    it had, ``nk`` (the snapshot's, see :func:`state_totals`) plus the partition's moves the
    snapshot lacks.

    Raises
    ------
    ValueError
        A restored topic outside ``0..n_components-1``, naming the partition and token.
    """
    M, K = cfg["n_mh"], cfg["n_topics"]
    for p in parts:
        st = p.state
        n = st["state"].shape[0]
        rows = ps.pull(STATE, _token_rows(p, cfg, n)).astype(np.int32) if n else \
            np.zeros((0, state_width(M)), np.int32)
        bad = (rows < 0) | (rows >= K)
        if bad.any():
            i = int(np.argwhere(bad)[0][0])
            raise ValueError(f"LatentDirichletAllocation: the checkpoint's sampler state "
                             f"holds topic {int(rows[bad][0])} for token {i} of partition "
                             f"{p.index}, not one of the {K} topics")
        st["state"][:, kr.Z] = st["state"][:, kr.Z_PUSHED] = rows[:, 0]
        st["moved"][:] = 0
        st["pending_doc"] = clock > 0
        if clock > 0:
            st["state"][:, kr.PROP + M:kr.PROP + 2 * M] = rows[:, 2:]
            st["nk"] = np.asarray(nk, np.int64).copy()
            st["nk_delta"] = _moves(rows, K)
        else:
            st["state"][:, kr.PROP:kr.PROP + M] = rows[:, 2:]


def _moves(rows: np.ndarray, n_topics: int) -> np.ndarray:
    """Per topic, the tokens of ``rows`` (of :data:`STATE`) at it less those the snapshot
    counted at it."""
    return (np.bincount(rows[:, 0], minlength=n_topics)
            - np.bincount(rows[:, 1], minlength=n_topics)).astype(np.int64)


def state_totals(key_range, values, slots, n_topics: int, width: int) -> np.ndarray:
    """Runs next to a shard of :data:`STATE` (``key_range=True``): per topic, its tokens at
    it and those the snapshot counted at it, int64 (2, K); summed over the shards, the
    checkpoint's topic totals and what the snapshot's lacked of them (:func:`_moves`)."""
    rows = values.reshape(-1, width)
    return np.stack([np.bincount(rows[:, c], minlength=n_topics) for c in (0, 1)]).astype(
        np.int64)


def table_counts(keys, values, slots):
    """Runs next to a shard (``key_range=True``): its counts, flat (int32 copy)."""
    return values.reshape(-1).copy()


def nonzero_flat(counts: np.ndarray, n_words: int, n_topics: int):
    """``(flat keys int64, counts int32)`` of the non-zero entries of a (V, K) count array
    (``init_counts``, pushed into the flat table).

    Raises
    ------
    ValueError
        ``counts`` is not (n_words, n_topics).
    """
    counts = np.asarray(counts)
    if counts.shape != (n_words, n_topics):
        raise ValueError(f"init_counts must have shape {(n_words, n_topics)}, got "
                         f"{counts.shape}")
    flat = counts.reshape(-1)
    keys = np.flatnonzero(flat).astype(np.int64)
    return keys, flat[keys].astype(np.int32)
