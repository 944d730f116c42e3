"""LDA against its peers, in one run: tokens per second and held-out perplexity on AP.

    python benchmarks/lda_peers.py [--topics 20 100] [--iterations 300] [--ours-only]
                                   [--eval-at 100 200 300] [--json out.json] [--quick]

Protocol (issue 13, the same for every system): the AP corpus (``$DASK_PS_DATA/lda_ap``), 10 %
of documents held out (seed 0), vocabulary = terms of the training documents, each held-out
document's tokens shuffled and split in halves, θ from the first half by 200 fixed-point EM
iterations given each model's φ (α = 0.1 pseudo-counts), perplexity over the second halves;
α = 0.1, η = 0.01 everywhere (``dask_ps.algorithms._lda_eval``).

Contenders:

* dask_ps: for now a single-process driver of the sampling kernels that mimics the PS loop —
  2 simulated workers with half the documents each; per clock every worker pulls the rows of
  its words from one table (as CSR), runs the word phase, pushes its delta, runs the doc
  phase. Tokens/s are given per core (tokens per CPU-second of the kernels) and for 2 workers
  in parallel (the slower worker's kernel time each clock; sync excluded). To be replaced by
  ``dask_ps.LatentDirichletAllocation`` on a 2-worker cluster once it exists.
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

from dask_ps.algorithms import _lda_kernels as kr
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
    data = Path(os.environ.get("DASK_PS_DATA",
                               Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    folder = data / "lda_ap"
    vocab = np.array([t.strip() for t in (folder / "vocab.txt").read_text().splitlines()])
    indptr, cols, vals = [0], [], []
    for line in (folder / "ap.dat").read_text().splitlines():
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
        self.doc_ptr, words = kr.tokens_from_counts(X.indptr, X.indices, X.data)
        self.vocab, self.words = kr.local_vocabulary(words)
        self.word_ptr, self.word_tok = kr.group_by_word(self.words, self.vocab.size)
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
        kr.word_topic_counts(w.vocab[w.words].astype(np.int32),
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
        snapshots = [(kr.dense_to_rows(nwk[w.vocab]), nk.copy()) for w in workers]
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
                        help="dask_ps iterations at which to print the perplexity too")
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
        args.tomotopy_iterations, args.gensim_passes, args.sklearn_iterations = 20, 1, 2
    X, vocab = load_ap()
    split = heldout_split(X, 0.1, seed=0)
    train_vocab = vocab[split.terms]
    print(f"AP: {split.train.shape[0]} training documents, {split.train.sum()} tokens, "
          f"{split.terms.size} terms; {split.unseen.shape[0]} held out "
          f"({split.unseen.sum()} tokens scored)", flush=True)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores", flush=True)
    results = {}
    for K in args.topics:
        row = results[K] = {}
        ours = run_dask_ps(split, K, args.iterations, n_mh=args.n_mh,
                           eval_at=set(args.eval_at), seed=args.seed)
        ours["top_words"] = top_words(ours.pop("phi"), train_vocab)
        row["dask_ps"] = ours
        print(f"K={K} dask_ps (kernels, 2 simulated workers, {args.iterations} iterations, "
              f"M={args.n_mh}): {ours['tokens_per_cpu_s'] / 1e6:.2f} M tokens per CPU-s, "
              f"{ours['tokens_per_s_2_workers'] / 1e6:.2f} M tokens/s on 2 workers; "
              f"perplexity {ours['perplexity']:.1f}", flush=True)
        for words in ours["top_words"]:
            print(f"    {words}")
        if args.ours_only:
            continue
        peers = [("tomotopy", lambda: run_tomotopy(split, K, args.tomotopy_iterations)),
                 ("gensim", lambda: run_gensim(split, K, args.gensim_passes)),
                 ("sklearn", lambda: run_sklearn(split, K, args.sklearn_iterations))]
        for name, fn in peers:
            try:
                row[name] = fn()
            except ImportError as e:
                print(f"K={K} {name}: not installed ({e})", flush=True)
                continue
            r = row[name]
            print(f"K={K} {name}: {r['tokens_per_s'] / 1e6:.2f} M tokens/s, "
                  f"fit {r['fit_s']:.1f} s, perplexity {r['perplexity']:.1f}; dask_ps (2 "
                  f"workers) / {name} = {ours['tokens_per_s_2_workers'] / r['tokens_per_s']:.2f}"
                  f"x tokens/s, perplexity ratio "
                  f"{ours['perplexity'] / r['perplexity']:.3f}", flush=True)
            if "loglik_per_token" in r:
                print(f"    {name}: log p(w,z)/token {r['loglik_per_token']:.4f}", flush=True)
            if "tokens_per_cpu_s" in r:
                print(f"    {name}: {r['tokens_per_cpu_s'] / 1e6:.2f} M tokens per CPU-s; "
                      f"dask_ps / {name} per CPU-s = "
                      f"{ours['tokens_per_cpu_s'] / r['tokens_per_cpu_s']:.2f}x", flush=True)
    if len(args.topics) > 1:
        hi = max(args.topics)
        for K in sorted(args.topics)[:-1]:
            ratio = (results[K]["dask_ps"]["tokens_per_cpu_s"]
                     / results[hi]["dask_ps"]["tokens_per_cpu_s"])
            print(f"dask_ps tokens per CPU-s, K={K} / K={hi}: {ratio:.2f}")
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=float))
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
