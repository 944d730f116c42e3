"""``dask-ps train lda``: LDA-C or UCI docword to
:class:`~dask_ps.LatentDirichletAllocation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import DataError
from . import _options as opt
from ._algorithms import (
    CHECKPOINT,
    CONSISTENCY,
    Algorithm,
    Dataset,
    Loaded,
    Param,
    _blocksize,
    _count,
    _n_workers,
    feature_ids,
)

if TYPE_CHECKING:
    import numpy as np

# --- latent Dirichlet allocation --------------------------------------------------------------

def _lda_data_options(g) -> None:
    g.add_argument("--format", choices=["ldac", "docword"],
                   help="ldac: Blei's LDA-C lines 'N id:count ...' (0-based ids); docword: UCI "
                        "bag-of-words (3 header lines, then 'doc word count', 1-based). "
                        "Default: docword when the file name contains 'docword', else ldac")
    g.add_argument("--vocab", metavar="PATH",
                   help="the terms, one per line (line k: term id k; UCI: id k + 1); top "
                        "words and export give the ids as the file numbers them without it")
    g.add_argument("--top-words", type=opt.NON_NEGATIVE_INT, default=10,
                   help="terms printed per topic after training (default 10; 0: none)")
    g.add_argument("--blocksize", type=opt.size, help="bytes per data partition (default: "
                   "two partitions per worker, at most 64MiB each)")


def _lda_meta(args) -> dict:
    fmt = args.format or ("docword" if "docword" in str(args.train).rsplit("/", 1)[-1]
                          else "ldac")
    return {"format": fmt, "vocab": args.vocab}


def _lda_check_inputs(args) -> None:
    """The ``--vocab`` file read before a cluster starts: a blank line among its terms is
    refused naming the file and line (:func:`~dask_ps.io.read_vocabulary`)."""
    if args.vocab:
        from ..io import read_vocabulary

        read_vocabulary(args.vocab)


def _lda_read(path: str, meta: dict, blocksize=None, n_terms=None):
    """``(X, vocabulary)`` of one LDA-C or docword input; ``n_terms`` pads the columns."""
    from ..io import read_docword, read_ldac

    reader = read_docword if meta["format"] == "docword" else read_ldac
    kw = {"blocksize": blocksize} if blocksize else {}
    X, vocab = reader(path, meta.get("vocab"), **kw)
    if n_terms is not None and X.shape[1] != n_terms:
        if X.shape[1] > n_terms:
            last = _term_ids([X.shape[1] - 1], meta)[0][0]  # as the file numbers it
            raise DataError(f"{path}: term ids up to {last}, the model knows {n_terms} terms")
        X = X.map_blocks(_lda_pad, n_terms, dtype=X.dtype,
                         chunks=(X.chunks[0], (n_terms,)), meta=X._meta)
    return X, vocab


def _lda_pad(block, n_terms: int):
    import scipy.sparse as sp

    return sp.csr_matrix((block.data, block.indices, block.indptr),
                         shape=(block.shape[0], n_terms))


def _lda_load(args, client) -> Loaded:
    import numpy as np

    from ..cluster import compute

    meta = _lda_meta(args)
    blocksize = args.blocksize or _blocksize(args.train, _n_workers(client))
    X, vocab = _lda_read(args.train, meta, blocksize)
    meta["n_terms"] = int(X.shape[1])
    _check_terms(args, meta, client)
    test = _lda_read(args.test, meta, n_terms=X.shape[1])[0] if args.test else None
    X = client.persist(X)
    tokens = float(compute(X.map_blocks(_lda_tokens, dtype=np.float64, chunks=(1,), drop_axis=1,
                                        meta=np.zeros(0)).sum(),
                           what=f"counting the tokens of {args.train}")[0])
    if not tokens:
        from ..io._blocks import files_named

        raise DataError(f"{files_named(args.train)}: no tokens (no document counts a term)")
    summary = (f"{X.shape[0]:,} documents x {X.shape[1]:,} terms, {tokens:,.0f} tokens "
               f"({_count(X.numblocks[0], 'partition')})")
    kwargs = {} if vocab is None else {"vocabulary": vocab}
    return Loaded((X,), test, meta, tokens, summary, kwargs)


def _check_terms(args, meta: dict, client) -> None:
    """Refuse, before the fit, a corpus whose number of terms (the largest term id plus
    one, a docword's ``W``, or the ``--vocab`` file's lines) makes the word-topic counts
    of ``--topics`` larger than the workers' memory limits together (int32 each, on the
    shards), or than this process's memory (gathered with ``components_``), naming where
    the number comes from: the file and line of the largest id (LDA-C), the header's line
    (docword), or the vocabulary. What the estimator's finer check
    (:func:`~dask_ps.algorithms._lda_steps.check_table_room`) would refuse without saying
    which line made the table so wide.

    Raises
    ------
    MemoryLimitError
    """
    from .. import LatentDirichletAllocation
    from ..algorithms._lda_steps import CELL_BYTES, GATHERED_CELL_BYTES
    from ..cluster import worker_info
    from ..exceptions import MemoryLimitError
    from ..partitions.worker import process_memory

    n_terms = meta["n_terms"]
    topics = getattr(args, "n_components", None) or LatentDirichletAllocation().n_components
    limits = [int(w["memory_limit"]) for w in worker_info(client).values()
              if w.get("memory_limit")]
    cells = n_terms * topics
    over = [(need, limit, where) for need, limit, where in (
        (cells * CELL_BYTES, sum(limits), f"the {len(limits)} workers' memory limits"),
        (cells * GATHERED_CELL_BYTES, process_memory(), "this process"))
        if limit and need > limit]
    if not over:
        return
    need, limit, where = over[0]
    if meta.get("vocab"):
        source = f"--vocab {meta['vocab']}: {n_terms:,} terms (its lines)"
    elif meta["format"] == "docword":
        source = (f"{_first_file(args.train)}, line 2: W = {n_terms:,} terms (the header's "
                  f"number of words)")
    else:
        source = f"{_largest_id_line(args.train, n_terms - 1)}: term id {n_terms - 1:,}"
    raise MemoryLimitError(
        f"{source} makes {n_terms:,} terms x {topics:,} topics (--topics): their word-topic "
        f"counts need at least {need / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} "
        f"GiB of {where}; number the terms from 0 without gaps (an id indexes the "
        f"vocabulary), or use fewer --topics")


def _first_file(urlpath: str) -> str:
    from ..io._blocks import open_paths

    return open_paths(urlpath)[1][0]


def _largest_id_line(urlpath: str, term: int) -> str:
    """``"<file>, line <n>"`` of the first LDA-C line using term id ``term`` (the largest:
    the files read once more, only to say where), or the files if none is found."""
    import re

    from ..io._blocks import files_named, open_paths

    fs, paths = open_paths(urlpath)
    token = re.compile(rb"(?<![\w.:])%d:" % term)
    for path in paths:
        with fs.open(path, "rb", compression="infer") as f:
            for number, line in enumerate(f, 1):
                if token.search(line):
                    return f"{path}, line {number}"
    return files_named(urlpath, paths)


def _lda_tokens(block) -> np.ndarray:
    import numpy as np

    return np.array([float(block.sum())])


def _lda_load_test(path: str, meta: dict, args):
    return _lda_read(path, meta, n_terms=meta.get("n_terms"))[0]


def _lda_score(est, test) -> tuple[int, list[str]]:
    import scipy.sparse as sp

    from ..cluster import compute

    X = sp.csr_matrix(compute(test, what="reading the test documents")[0])
    if not X.shape[0]:
        return 0, []
    if not X.nnz or not X.sum():  # perplexity is per token
        return X.shape[0], [f"test: no tokens ({X.shape[0]:,} documents, all empty): no "
                            f"perplexity"]
    return X.shape[0], [f"test: perplexity {est.perplexity(X):.2f} ({int(X.sum()):,} tokens, "
            f"{X.shape[0]:,} documents; theta by EM on each whole document)"]


def _lda_report(est, args) -> list[str]:
    lines = []
    last = [h for h in est.history_ if "loss" in h and "event" not in h]
    if last:
        lines.append(f"train: log-likelihood log p(w, z) {last[-1]['log_likelihood']:.6g}, "
                     f"per token {-last[-1]['loss']:.4f}")
    n = getattr(args, "top_words", 10)
    if n:
        top = est.top_words(n)
        if not hasattr(est, "vocabulary_"):  # ids, as the training file numbers them
            top, term = _term_ids(top, _lda_meta(args))
            lines.append(f"top words by term id: {term}")
        for k, words in enumerate(top):
            lines.append(f"topic {k}: " + " ".join(str(w) for w in words))
    return lines


def _term_ids(columns, meta: dict) -> tuple:
    """``(ids, words)`` of term columns ``columns`` of a model without a vocabulary: as its
    training file numbers them (:func:`~._algorithms.feature_ids`: a UCI docword's wordID is
    the column + 1, an LDA-C id the column)."""
    return feature_ids(columns, meta, "the column of X, from 0 (the model file does not say "
                                      "how its training data numbered the terms)")


def _lda_export(est, meta: dict):
    import numpy as np
    import pandas as pd

    if hasattr(est, "vocabulary_"):
        terms = est.vocabulary_
        term = "the term, a word of the model's vocabulary" + (
            f" ({meta['vocab']})" if meta.get("vocab") else "")
    else:
        terms, term = _term_ids(np.arange(est.components_.shape[1]), meta)
    phi = est.components_ / est.components_.sum(axis=1, keepdims=True)
    table = pd.DataFrame({"term": terms, **{f"topic_{k}": phi[k]
                                            for k in range(phi.shape[0])}})
    desc = {"model": "latent Dirichlet allocation (collapsed Gibbs, WarpLDA sampler)",
            "estimator": type(est).__name__, "n_topics": int(phi.shape[0]),
            "doc_topic_prior": est.doc_topic_prior_,
            "topic_word_prior": est.topic_word_prior_,
            "columns": {"term": "the term's word (with a vocabulary) or id: \"term\" says",
                        "topic_k": "p(term | topic k), each topic column sums to 1"},
            "term": term, "data": meta}
    return {"topics": table}, desc


LDA = Algorithm(
    name="lda", summary="latent Dirichlet allocation of documents (LDA-C or UCI docword)",
    estimator="LatentDirichletAllocation",
    params=(
        Param("--topics", "n_components", dict(type=opt.POSITIVE_INT, help="topics K")),
        Param("--alpha", "doc_topic_prior", dict(type=opt.POSITIVE,
                                                 help="document-topic prior")),
        Param("--beta", "topic_word_prior", dict(type=opt.POSITIVE, help="topic-word prior")),
        Param("--max-iter", "max_iter", dict(type=opt.POSITIVE_INT, help="Gibbs iterations")),
        Param("--mh-steps", "mh_steps", dict(type=opt.POSITIVE_INT)),
        Param("--evaluate-every", "evaluate_every", dict(type=opt.NON_NEGATIVE_INT)),
        Param("--consistency", "consistency", CONSISTENCY),
        Param("--staleness", "staleness", dict(type=opt.NON_NEGATIVE_INT)),
        Param("--n-shards", "n_shards", dict(type=opt.POSITIVE_INT)),
        Param("--seed", "random_state", dict(type=opt.NON_NEGATIVE_INT)),
        *CHECKPOINT,
    ),
    # Blei's AP sample (2,246 documents; no test file: --test may name one). lda_lee/ is
    # raw text, which the command does not read (dask_ps.io.read_text does).
    datasets={"ap": Dataset("lda_ap", "ap.dat", None, "http://www.cs.columbia.edu/~blei/lda-c/",
                            paths={"vocab": "vocab.txt"})},
    data_options=_lda_data_options, load=_lda_load, load_test=_lda_load_test,
    score=_lda_score, export=_lda_export, unit="tokens", check=_lda_meta, report=_lda_report,
    check_inputs=_lda_check_inputs,
    files=("vocab",), empty="no documents", passes="iteration")
