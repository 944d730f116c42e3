"""LDA against its peers, in one run: tokens per second and held-out perplexity on AP.

    python benchmarks/lda_peers.py [--topics 20 100] [--iterations 300] [--speed-topics 1000]
                                   [--generated-tokens 10000000] [--generated-topics 100 1000]
                                   [--ours-only] [--kernels] [--json out.json] [--quick]

Protocol (issue 13, the same for every system): the AP corpus (``$DASK_PS_DATA/lda_ap``), 10 %
of documents held out (seed 0), vocabulary = terms of the training documents, each held-out
document's tokens shuffled and split in halves, θ from the first half by 200 fixed-point EM
iterations given each model's φ (α = 0.1 pseudo-counts), perplexity over the second halves;
α = 0.1, η = 0.01 everywhere (``dask_ps.algorithms._lda_eval``).

Contenders:

* dask_ps: ``dask_ps.LatentDirichletAllocation`` on a ``LocalCluster`` of 2 worker processes
  x 1 thread (one shard each), BSP, Dask's statistical profiler of the workers off
  (``--dask-profiler`` keeps it: it walks every thread's stack every 10 ms). Tokens/s =
  training tokens x iterations / wall time of the iterations after the first (which
  includes compiling the numba kernels on a cold cache), from ``history_``, with the
  per-iteration breakdown of the slowest task (waiting for rows, word phase, push, doc
  phase; the pull's own time, overlapped with the doc phase) and the worker processes' CPU
  per iteration against the sampler's; the peak resident memory of each worker process
  during the fit (psutil, polled every 0.1 s). ``--speed-topics`` adds a speed-only run
  (fewer iterations) at a large K. A generated corpus (``make_corpus``: LDA's generative
  model, 10^7 tokens, 30,000 terms, 100 true topics) gives tokens/s and peak memory per
  worker at ``--generated-topics``. ``--kernels`` runs instead the sampling kernels under a
  single-process simulated
  PS loop (2 simulated workers; tokens per CPU-second of the kernels alone).
* tomotopy ``LDAModel`` (collapsed Gibbs, 2 threads, hyper-parameter optimisation off so that
  α stays 0.1), gensim ``LdaMulticore`` (online variational Bayes, 1 extra worker process),
  scikit-learn ``LatentDirichletAllocation`` (batch variational Bayes, ``n_jobs=2``), each if
  installed (``pip install -e ".[bench]"``).

The machine is shared and noisy: read figures as sizes, ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _common import data_file, peer

from dask_ps.algorithms import _lda_kernels as kr
from dask_ps.algorithms import _lda_tokens as tk
from dask_ps.algorithms._lda_eval import (
    doc_loglik,
    heldout_split,
    perplexity,
    phi_from_counts,
    topic_loglik,
    word_loglik,
)

ALPHA, ETA = 0.1, 0.01


def load_ap() -> tuple[sp.csr_matrix, np.ndarray]:
    """The AP corpus: (documents x terms counts, vocabulary)."""
    vocab_file, counts_file = data_file("lda_ap", "vocab.txt"), data_file("lda_ap", "ap.dat")
    vocab = np.array([t.strip() for t in vocab_file.read_text().splitlines()])
    indptr, cols, vals = [0], [], []
    for line in counts_file.read_text().splitlines():
        pairs = line.split()[1:]
        for pair in pairs:
            term, count = pair.split(":")
            cols.append(int(term))
            vals.append(int(count))
        indptr.append(len(cols))
    X = sp.csr_matrix((np.array(vals, np.int32), np.array(cols), np.array(indptr)),
                      shape=(len(indptr) - 1, vocab.size))
    return X, vocab


# -- dask_ps: the kernels under a simulated PS loop -------------------------------------------
class SimulatedWorker:
    """A worker's cached partition: tokens, local vocabulary, per-token state, RNG."""

    def __init__(self, X, n_topics, n_mh, seed):
        self.doc_ptr, words = tk.tokens_from_counts(X.indptr, X.indices, X.data)
        self.vocab, self.words = tk.local_vocabulary(words)
        self.word_ptr, self.word_tok = tk.group_by_word(self.words, self.vocab.size)
        self.state = kr.new_state(words.size, n_mh)
        self.n_mh = n_mh
        self.rng = np.array([seed], np.uint64)
        kr.init_state(self.doc_ptr, self.state, n_mh, n_topics, ALPHA, True, self.rng)
        self.moved = np.zeros(n_topics, np.int64)  # doc-phase moves not yet pushed
        room = kr.delta_capacity(self.word_ptr, n_topics)
        self.delta = (np.zeros(self.vocab.size + 1, np.int64), np.zeros(room, np.int32),
                      np.zeros(room, np.int32))


def run_dask_ps(split, n_topics, iterations, n_workers=2, n_mh=1, eval_at=(), seed=0,
                log=print) -> dict:
    """Train with the kernels under a simulated BSP PS loop; perplexity at ``eval_at``."""
    train = split.train
    n_words = train.shape[1]
    bounds = np.linspace(0, train.shape[0], n_workers + 1).astype(int)
    workers = [SimulatedWorker(train[a:b], n_topics, n_mh, seed * 1000 + i + 1)
               for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    nwk = np.zeros((n_words, n_topics), np.int32)
    for w in workers:
        tk.word_topic_counts(w.vocab[w.words].astype(np.int32),
                             np.ascontiguousarray(w.state[:, kr.Z]), nwk)
    nk = nwk.sum(axis=0).astype(np.int64)
    n_tokens = int(nk.sum())
    cpu = np.zeros(n_workers)  # kernel CPU seconds per worker
    parallel = 0.0             # sum over clocks of the slowest worker's kernel wall time
    pull = 0.0                 # building the CSR snapshots (the shards' side)
    trace = []
    t_start = time.perf_counter()
    for clock in range(1, iterations + 1):
        t0 = time.process_time()
        snapshots = [(tk.dense_to_rows(nwk[w.vocab]), nk.copy()) for w in workers]
        pull += time.process_time() - t0
        walls, lls = np.zeros(n_workers), 0.0
        pushes = []
        for j, (w, (rows, nk_snap)) in enumerate(zip(workers, snapshots)):
            t0, c0 = time.perf_counter(), time.process_time()
            nk_delta = w.moved.copy()
            nnz = kr.word_phase(w.word_ptr, w.word_tok, *rows, nk_snap, nk_delta, w.state,
                                n_mh, ALPHA, ETA, n_words, w.rng, *w.delta)
            walls[j] += time.perf_counter() - t0
            cpu[j] += time.process_time() - c0
            pushes.append((nnz, nk_delta))
        for w, (nnz, nk_delta) in zip(workers, pushes):  # the shards apply the pushes
            ptr, topic, value = w.delta
            nwk[np.repeat(w.vocab, np.diff(ptr)), topic[:nnz]] += value[:nnz]
            nk += nk_delta
        last = clock == iterations
        if not last:
            for j, (w, (nnz, nk_delta), (_, nk_snap)) in enumerate(zip(workers, pushes,
                                                                       snapshots)):
                t0, c0 = time.perf_counter(), time.process_time()
                lls += kr.doc_phase(w.doc_ptr, nk_snap, nk_delta, w.state, n_mh, ALPHA, ETA,
                                    n_words, w.rng, w.moved)
                walls[j] += time.perf_counter() - t0
                cpu[j] += time.process_time() - c0
        parallel += walls.max()
        if clock in eval_at or last:
            if last:  # the doc phase did not run: the documents' part from Z
                lls = sum(doc_loglik(w.doc_ptr, np.ascontiguousarray(w.state[:, kr.Z]),
                                     n_topics, ALPHA) for w in workers)
            ll = lls + word_loglik(nwk.ravel(), ETA) + topic_loglik(nk, n_words, ETA)
            ppl = perplexity(phi_from_counts(nwk, ETA), split, ALPHA)
            trace.append({"iteration": clock, "loglik_per_token": ll / n_tokens,
                          "perplexity": ppl})
            log(f"  dask_ps K={n_topics} iteration {clock}: log p(w,z)/token "
                f"{ll / n_tokens:.4f}, perplexity {ppl:.1f}")
    total = time.perf_counter() - t_start
    return {"tokens": n_tokens, "iterations": iterations, "n_mh": n_mh,
            "tokens_per_cpu_s": n_tokens * iterations / cpu.sum(),
            "tokens_per_s_2_workers": n_tokens * iterations / parallel,
            "loop_wall_s": total, "snapshot_cpu_s_per_iteration": pull / iterations,
            "perplexity": trace[-1]["perplexity"], "trace": trace,
            "phi": phi_from_counts(nwk, ETA)}


class PeakRSS:
    """Peak resident memory of each worker process during a block, from a thread in every
    worker that reads ``psutil.Process().memory_info().rss`` every ``every`` seconds."""

    def __init__(self, client, every: float = 0.1) -> None:
        self.client, self.every, self.mb = client, every, []

    def __enter__(self):
        self.client.run(_rss_start, self.every)
        return self

    def __exit__(self, *exc) -> None:
        self.mb = sorted(self.client.run(_rss_stop).values())


def _rss_start(every: float, dask_worker=None) -> None:
    import threading

    import psutil

    worker, proc, stop = dask_worker, psutil.Process(), threading.Event()
    worker._lda_bench_rss = [proc.memory_info().rss, stop]

    def poll():
        while not stop.wait(every):
            worker._lda_bench_rss[0] = max(worker._lda_bench_rss[0], proc.memory_info().rss)

    threading.Thread(target=poll, daemon=True).start()


def _rss_stop(dask_worker=None) -> float:
    import psutil

    peak, stop = dask_worker._lda_bench_rss
    stop.set()
    return max(peak, psutil.Process().memory_info().rss) / 2**20


#: Per-iteration seconds of the slowest task in ``history_`` (see LatentDirichletAllocation).
PARTS = ("wait_s", "word_s", "push_s", "clock_s", "doc_s", "pull_s", "cpu_s")


def run_estimator(client, X, n_topics, iterations, n_mh=1, seed=0, log=print, split=None,
                  evaluate_every=None) -> dict:
    """``dask_ps.LatentDirichletAllocation`` on ``client``'s cluster, trained on ``X``; the
    issue's perplexity when ``split`` (whose training documents ``X`` are) is given.

    Tokens/s are over the iterations after the first (which may compile on a cold cache);
    the worker processes' CPU seconds per iteration (psutil, every thread: sampler, pulls,
    shards, Dask's event loop) are set against the sampler's own (``cpu_s``, the phases'
    thread time, summed over the workers) to show the overhead.
    """
    from dask_ps import LatentDirichletAllocation

    if evaluate_every is None:
        evaluate_every = max(1, iterations // 5)
    lda = LatentDirichletAllocation(n_components=n_topics, doc_topic_prior=ALPHA,
                                    topic_word_prior=ETA, max_iter=iterations, mh_steps=n_mh,
                                    evaluate_every=evaluate_every, client=client,
                                    random_state=seed, progress=False)
    cpu0 = client.run(_process_cpu)
    t0 = time.perf_counter()
    with PeakRSS(client) as rss:
        lda.fit(X)
    fit = time.perf_counter() - t0
    cpu = sum(client.run(_process_cpu).values()) - sum(cpu0.values())
    steps = [h for h in lda.history_ if "event" not in h]
    n_tokens = lda.n_tokens_
    rest = steps[-1]["time"] - steps[0]["time"]
    ll = [h for h in steps if "loss" in h]
    for h in ll:
        log(f"  dask_ps K={n_topics} iteration {h['epoch']}: log p(w,z)/token "
            f"{-h['loss']:.4f} at {h['time']:.1f} s")
    out = {"tokens": n_tokens, "iterations": iterations, "n_mh": n_mh, "fit_s": fit,
           "first_iteration_s": steps[0]["time"],
           "tokens_per_s": n_tokens * (len(steps) - 1) / rest,
           "ms_per_iteration": {k: 1e3 * float(np.median([h[k] for h in steps[1:]]))
                                for k in PARTS},
           "worker_cpu_ms_per_iteration": 1e3 * cpu / len(steps),
           "loglik_per_token": -ll[-1]["loss"] if ll else None,
           "peak_rss_mb_per_worker": rss.mb,
           "phi": lda.components_ / lda.components_.sum(axis=1, keepdims=True)}
    if split is not None:
        out["perplexity"] = perplexity(out["phi"], split, ALPHA)
    return out


def _process_cpu() -> float:
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def make_corpus(n_tokens: int, *, n_words: int = 30_000, n_topics: int = 100,
                doc_length: int = 200, seed: int = 0) -> sp.csr_matrix:
    """A document–term count matrix drawn from LDA's generative model (vectorised NumPy):
    ``n_tokens // doc_length`` documents of Poisson(``doc_length``) tokens, θ_d ~ Dir(α),
    φ_k ~ Dir(η) over ``n_words`` terms (α = 0.1, η = 0.01)."""
    rng = np.random.default_rng(seed)
    n_docs = max(1, n_tokens // doc_length)
    phi = rng.dirichlet(np.full(n_words, ETA), size=n_topics)
    theta = rng.dirichlet(np.full(n_topics, ALPHA), size=n_docs)
    lengths = rng.poisson(doc_length, n_docs)
    dk = rng.multinomial(lengths, theta)  # (D, K) tokens of each topic
    docs, words = [], []
    for k in range(n_topics):  # the tokens of topic k, of every document, at once
        per_doc = dk[:, k]
        total = int(per_doc.sum())
        if total:
            docs.append(np.repeat(np.arange(n_docs), per_doc))
            words.append(rng.choice(n_words, total, p=phi[k]))
    d, w = np.concatenate(docs), np.concatenate(words)
    X = sp.csr_matrix((np.ones(d.size, np.int32), (d, w)), shape=(n_docs, n_words))
    X.sum_duplicates()
    return X


# -- peers -----------------------------------------------------------------------------------
def run_tomotopy(split, n_topics, iterations, threads=2, seed=0) -> dict:
    import tomotopy as tp

    model = tp.LDAModel(k=n_topics, alpha=ALPHA, eta=ETA, seed=seed)
    model.optim_interval = 0  # keep α = 0.1 (the protocol)
    train = split.train
    for d in range(train.shape[0]):
        row = train.getrow(d)
        words = np.repeat(row.indices, row.data)
        if words.size:
            model.add_doc([str(t) for t in words])
    t0, c0 = time.perf_counter(), time.process_time()
    model.train(iterations, workers=threads)
    fit, cpu = time.perf_counter() - t0, time.process_time() - c0
    columns = np.array([int(t) for t in model.used_vocabs])
    phi = np.full((n_topics, train.shape[1]), 0.0)
    for k in range(n_topics):
        phi[k, columns] = model.get_topic_word_dist(k)
    return {"fit_s": fit, "tokens_per_s": model.num_words * iterations / fit,
            "tokens_per_cpu_s": model.num_words * iterations / cpu,
            "loglik_per_token": model.ll_per_word,
            "perplexity": perplexity(phi, split, ALPHA), "iterations": iterations}


def run_gensim(split, n_topics, passes, seed=0) -> dict:
    from gensim.models import LdaMulticore

    train = split.train
    corpus = [list(zip(train.getrow(d).indices.tolist(), train.getrow(d).data.tolist()))
              for d in range(train.shape[0])]
    id2word = {i: str(i) for i in range(train.shape[1])}
    t0 = time.perf_counter()
    model = LdaMulticore(corpus, num_topics=n_topics, id2word=id2word, workers=1,
                         passes=passes, alpha=ALPHA, eta=ETA, random_state=seed,
                         eval_every=None)
    fit = time.perf_counter() - t0
    phi = model.get_topics().astype(np.float64)
    return {"fit_s": fit, "tokens_per_s": train.sum() * passes / fit, "passes": passes,
            "perplexity": perplexity(phi / phi.sum(axis=1, keepdims=True), split, ALPHA)}


def run_sklearn(split, n_topics, max_iter, seed=0) -> dict:
    from sklearn.decomposition import LatentDirichletAllocation

    model = LatentDirichletAllocation(n_components=n_topics, doc_topic_prior=ALPHA,
                                      topic_word_prior=ETA, learning_method="batch",
                                      max_iter=max_iter, n_jobs=2, random_state=seed)
    t0 = time.perf_counter()
    model.fit(split.train.astype(np.float64))
    fit = time.perf_counter() - t0
    phi = model.components_ / model.components_.sum(axis=1, keepdims=True)
    return {"fit_s": fit, "tokens_per_s": split.train.sum() * max_iter / fit,
            "max_iter": max_iter, "perplexity": perplexity(phi, split, ALPHA)}


def top_words(phi, vocab, n=8, topics=5):
    return [" ".join(vocab[np.argsort(-phi[k])[:n]]) for k in range(topics)]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--iterations", type=int, default=300, help="dask_ps clocks")
    parser.add_argument("--n-mh", type=int, default=1, help="MH steps per token and phase")
    parser.add_argument("--eval-at", type=int, nargs="*", default=[],
                        help="--kernels: iterations at which to print the perplexity too")
    parser.add_argument("--speed-topics", type=int, nargs="*", default=[1000],
                        help="K of dask_ps speed-only runs (tokens/s; default 1000)")
    parser.add_argument("--speed-iterations", type=int, default=30)
    parser.add_argument("--generated-tokens", type=int, default=10_000_000,
                        help="tokens of the generated corpus (0: skip it)")
    parser.add_argument("--generated-topics", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--generated-iterations", type=int, default=20)
    parser.add_argument("--dask-profiler", action="store_true",
                        help="keep Dask's statistical profiler of the workers on (default: "
                             "off, distributed.worker.profile.enabled=False)")
    parser.add_argument("--kernels", action="store_true",
                        help="dask_ps as the kernels under a simulated PS loop, in-process")
    parser.add_argument("--tomotopy-iterations", type=int, default=200)
    parser.add_argument("--gensim-passes", type=int, default=10)
    parser.add_argument("--sklearn-iterations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="dask_ps's seed")
    parser.add_argument("--ours-only", action="store_true", help="skip the peers")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: K=20, 20 iterations everywhere")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.topics, args.iterations, args.eval_at = [20], 20, []
        args.speed_topics, args.speed_iterations = [100], 5
        args.tomotopy_iterations, args.gensim_passes, args.sklearn_iterations = 20, 1, 2
        args.generated_tokens, args.generated_topics = 200_000, [20, 100]
        args.generated_iterations = 5
    # each missing one prints "<peer> not installed (...): skipped", once
    args.missing_peers = set() if args.ours_only else {
        name for name in ("tomotopy", "gensim") if peer(name) is None}
    X, vocab = load_ap()
    split = heldout_split(X, 0.1, seed=0)
    train_vocab = vocab[split.terms]
    print(f"AP: {split.train.shape[0]} training documents, {split.train.sum()} tokens, "
          f"{split.terms.size} terms; {split.unseen.shape[0]} held out "
          f"({split.unseen.sum()} tokens scored)", flush=True)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores", flush=True)
    results = {}
    cluster = client = None
    if not args.kernels:
        import dask
        from distributed import Client, LocalCluster

        if not args.dask_profiler:  # it samples every thread's stack every 10 ms
            dask.config.set({"distributed.worker.profile.enabled": False})
        print(f"Dask's worker profiler: {'on' if args.dask_profiler else 'off'}", flush=True)
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, worker_dashboard_address=None)
        client = Client(cluster)
    try:
        return _compare(args, split, train_vocab, client, results)
    finally:
        if client is not None:
            client.close()
            cluster.close()


def _breakdown(ours: dict) -> str:
    ms = ours["ms_per_iteration"]
    return (f"per iteration (median, slowest task): waiting for rows {ms['wait_s']:.1f} ms, "
            f"word phase {ms['word_s']:.1f}, push {ms['push_s']:.1f}, clock "
            f"{ms['clock_s']:.1f}, doc phase "
            f"{ms['doc_s']:.1f} ms; the pull took {ms['pull_s']:.1f} ms, overlapped with the "
            f"doc phase; sampler thread CPU {ms['cpu_s']:.1f} ms per worker; worker processes' "
            f"CPU {ours['worker_cpu_ms_per_iteration']:.1f} ms per iteration (both, every "
            f"thread)")


def _ours(args, split, K, iterations, client) -> dict:
    if args.kernels:
        ours = run_dask_ps(split, K, iterations, n_mh=args.n_mh, eval_at=set(args.eval_at),
                           seed=args.seed)
        ours["tokens_per_s"] = ours["tokens_per_s_2_workers"]
        print(f"K={K} dask_ps (kernels, 2 simulated workers, {iterations} iterations, "
              f"M={args.n_mh}): {ours['tokens_per_cpu_s'] / 1e6:.2f} M tokens per CPU-s, "
              f"{ours['tokens_per_s_2_workers'] / 1e6:.2f} M tokens/s on 2 workers; "
              f"perplexity {ours['perplexity']:.1f}", flush=True)
        return ours
    ours = run_estimator(client, split.train, K, iterations, n_mh=args.n_mh, seed=args.seed,
                         split=split)
    print(f"K={K} dask_ps (LatentDirichletAllocation, 2 workers x 1 thread, {iterations} "
          f"iterations, M={args.n_mh}): {ours['tokens_per_s'] / 1e6:.2f} M tokens/s (first "
          f"iteration {ours['first_iteration_s']:.2f} s left out), fit {ours['fit_s']:.1f} s; "
          f"perplexity {ours['perplexity']:.1f}; peak RSS per worker "
          f"{', '.join(f'{m:.0f}' for m in ours['peak_rss_mb_per_worker'])} MB; load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"    {_breakdown(ours)}", flush=True)
    return ours


def _generated(args, client, results) -> None:
    """dask_ps on the generated corpus: tokens/s and peak memory per worker at each K."""
    if not args.generated_tokens:
        return
    t0 = time.perf_counter()
    X = make_corpus(args.generated_tokens, seed=args.seed)
    print(f"generated corpus (make_corpus, LDA's generative model, 100 true topics): "
          f"{X.shape[0]:,} documents x {X.shape[1]:,} terms, {int(X.sum()):,} tokens, "
          f"{X.nnz:,} non-zeros ({time.perf_counter() - t0:.1f} s)", flush=True)
    out = results["generated"] = {"documents": X.shape[0], "terms": X.shape[1],
                                  "tokens": int(X.sum())}
    for K in args.generated_topics:
        ours = run_estimator(client, X, K, args.generated_iterations, n_mh=args.n_mh,
                             seed=args.seed, evaluate_every=args.generated_iterations)
        ours.pop("phi")
        out[K] = ours
        print(f"generated K={K} dask_ps ({args.generated_iterations} iterations): "
              f"{ours['tokens_per_s'] / 1e6:.2f} M tokens/s, fit {ours['fit_s']:.1f} s, "
              f"log p(w,z)/token {ours['loglik_per_token']:.4f}; peak RSS per worker "
              f"{', '.join(f'{m:.0f}' for m in ours['peak_rss_mb_per_worker'])} MB; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        print(f"    {_breakdown(ours)}", flush=True)
    speeds = {K: out[K]["tokens_per_s"] for K in args.generated_topics}
    if len(speeds) > 1:
        lo, hi = min(speeds), max(speeds)
        print(f"generated: dask_ps tokens/s, K={lo} / K={hi}: {speeds[lo] / speeds[hi]:.2f}",
              flush=True)


def _compare(args, split, train_vocab, client, results) -> dict:
    for K in args.topics:
        row = results[K] = {}
        ours = row["dask_ps"] = _ours(args, split, K, args.iterations, client)
        ours["top_words"] = top_words(ours.pop("phi"), train_vocab)
        for words in ours["top_words"]:
            print(f"    {words}")
        if args.ours_only:
            continue
        peers = [("tomotopy", lambda: run_tomotopy(split, K, args.tomotopy_iterations)),
                 ("gensim", lambda: run_gensim(split, K, args.gensim_passes)),
                 ("sklearn", lambda: run_sklearn(split, K, args.sklearn_iterations))]
        for name, fn in peers:
            if name in args.missing_peers:
                continue
            row[name] = fn()
            r = row[name]
            print(f"K={K} {name}: {r['tokens_per_s'] / 1e6:.2f} M tokens/s, "
                  f"fit {r['fit_s']:.1f} s, perplexity {r['perplexity']:.1f}; dask_ps (2 "
                  f"workers) / {name} = {ours['tokens_per_s'] / r['tokens_per_s']:.2f}"
                  f"x tokens/s, perplexity ratio "
                  f"{ours['perplexity'] / r['perplexity']:.3f}", flush=True)
            if "loglik_per_token" in r:
                print(f"    {name}: log p(w,z)/token {r['loglik_per_token']:.4f}", flush=True)
            if "tokens_per_cpu_s" in r and "tokens_per_cpu_s" in ours:
                print(f"    {name}: {r['tokens_per_cpu_s'] / 1e6:.2f} M tokens per CPU-s; "
                      f"dask_ps / {name} per CPU-s = "
                      f"{ours['tokens_per_cpu_s'] / r['tokens_per_cpu_s']:.2f}x", flush=True)
    if not args.kernels:
        _generated(args, client, results)
    for K in args.speed_topics:
        ours = _ours(args, split, K, args.speed_iterations, client)
        ours.pop("phi")
        results.setdefault(K, {})["dask_ps_speed"] = ours
    speeds = {K: r.get("dask_ps", r.get("dask_ps_speed"))["tokens_per_s"]
              for K, r in results.items() if isinstance(K, int)}
    base = 100 if 100 in speeds else min(speeds)
    for K in sorted(speeds):
        if K != base:
            print(f"AP: dask_ps tokens/s at K={base} / at K={K}: "
                  f"{speeds[base] / speeds[K]:.2f}x")
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=float))
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
