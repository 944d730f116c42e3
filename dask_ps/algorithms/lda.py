"""Latent Dirichlet allocation on the parameter server: collapsed Gibbs sampling with a
WarpLDA-style Metropolis–Hastings sampler.

The word–topic counts are a PS table (flat ``word * K + topic``, int32, range-partitioned by
word, see :mod:`._lda_table`); each worker keeps its documents' tokens and topic assignments
next to their cached partition (:mod:`._lda_steps`); the sampler is :mod:`._lda_kernels`;
the driver's training loop, :func:`train`, is :mod:`._lda_train`'s.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..exceptions import DataError
from ..partitions.inputs import broadcast_large, check_columns, is_dask
from ._base import (
    COMMON_CONSTRAINTS,
    Interval,
    PSEstimator,
    checksum,
    validate_data,
)
from ._lda_eval import fold_in, heldout_loglik
from ._lda_kernels import MAX_MH, MAX_PRIOR
from ._lda_steps import as_csr
from ._lda_tokens import check_dask_documents
from ._lda_train import JOB_SECONDS, train

__all__ = ["LatentDirichletAllocation", "same_terms", "train"]


def same_terms(terms: np.ndarray, model: np.ndarray, what: str, than: str, advice: str
               ) -> None:
    """Refuse ``terms`` (``what``, str) that are not ``model`` (``than``): the columns
    would be other words than the model's.

    Raises
    ------
    ValueError
        Naming the counts, or the first term that differs and how many do, then ``advice``.
    """
    if terms.shape != model.shape:
        raise ValueError(f"{what} has {terms.shape[0]} terms, {than} {model.shape[0]}: "
                         f"{advice}")
    differ = np.flatnonzero(terms != model)
    if differ.size:
        k = int(differ[0])
        raise ValueError(f"{what} differs from {than}: term {k} is {str(terms[k])!r} there, "
                         f"{str(model[k])!r} in the model ({differ.size} of {terms.size} terms "
                         f"differ); {advice}")


class LatentDirichletAllocation(ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                                PSEstimator):
    """Latent Dirichlet allocation by collapsed Gibbs sampling on a dask_ps parameter server.

    The sampler is WarpLDA's Metropolis–Hastings scheme (Chen et al., 2016): every token
    carries proposals drawn from its document's topics and from its word's topics (an
    alias table), accepted with the exact collapsed conditional (Griffiths & Steyvers,
    2004), so a token costs O(1) whatever the number of topics. The word–topic counts
    ``n_wk`` (int32) live on the PS, range-partitioned by word; each worker keeps its
    documents' tokens and topic assignments next to its cached partition and, once per
    iteration (one clock), pulls the non-zero counts of its words with the topic totals (one
    call per shard), samples, pushes the merged count delta of all its threads, and samples
    the document side while that push travels (see :mod:`dask_ps.algorithms._lda_steps`).

    Parameters
    ----------
    n_components : int, default 10
        Number of topics K.
    doc_topic_prior : float, optional
        α of the symmetric Dirichlet prior of the document–topic distributions, in
        ``(0, 1e15]``. Default ``1 / n_components`` (scikit-learn's default; Griffiths &
        Steyvers use ``50 / n_components``).
    topic_word_prior : float, optional
        β of the topic–word distributions, in ``(0, 1e15]`` (the sampler's products of
        counts and priors stay finite, ``components_`` exact: ``_lda_kernels.MAX_PRIOR``).
        Default ``1 / n_components``.
    max_iter : int, default 300
        Gibbs iterations (passes over the tokens), one PS clock each.
    mh_steps : int, default 1
        Metropolis–Hastings steps per token and phase (1 to 7); 1 is exact per step.
    evaluate_every : int, default 1
        Compute the training log-likelihood every this many iterations (and after the
        last); 0 or less: never. It costs a sum over the shard's counts during the pull
        the next iteration makes anyway.
    max_doc_update_iter : int, default 100
        Fixed-point EM iterations of :meth:`transform`.
    stream_decay : float in [0, 1], default 1.0
        Weight, in :meth:`partial_fit`, of the word–topic counts the model holds (those of
        the fit and the batches before) kept as the prior of the new batch's counts. 1 keeps
        them all: the topics count every token of the stream, as online LDA does in
        scikit-learn and gensim (streaming Gibbs sampling: Gao, Chen & Zhu, "Streaming
        Gibbs Sampling for LDA Model", 2016). 0 keeps none: the batch's counts replace
        them, the topics carried on by its first draw only; for another pass over the same
        documents (which 1 counts twice). Between: each batch's counts fade by this factor
        per later batch (a drifting stream; rounded to whole counts).
    consistency : {"bsp", "ssp", "asp"}, default "bsp"
        Under BSP every iteration samples against the counts of all pushes of the
        iterations before; SSP lets a worker run ``staleness`` iterations ahead of the
        slowest (the counts are then staler; the sampler clamps counts a stale snapshot
        lacks at zero).
    staleness : int, optional
        With ``consistency="ssp"``, default 1.
    n_shards : int, optional
        Shards of the word–topic table; default one per worker.
    random_state : int, np.random.RandomState or None, optional
        Seeds the sampler: the same seed and partitioning give the same model under
        ``consistency="bsp"``, whatever the jobs the iterations run in (checkpoints,
        callbacks). Default: None, seed 0.
    client : distributed.Client or "local", optional
        Default: the current client; "local" (or none) trains in this process.
    shard_resources : str, optional
        Place the table's shards on the workers offering this Dask resource (dedicated PS
        workers, as for :class:`~dask_ps.LogisticRegression`).
    checkpoint : str, optional
        URL (reachable from every worker, e.g. a shared folder or ``s3://``) where the
        word–topic table is saved every ``checkpoint_every`` iterations, through
        :meth:`dask_ps.PSModel.save` (versions, as for
        :class:`~dask_ps.LogisticRegression`), with the sampler's state: per token its
        topic, the topic the table's snapshot counted it at and its ``mh_steps`` pending
        proposals (``2 + mh_steps`` int32 per token, beside the table's 4 bytes per
        word–topic cell). ``"auto"`` snapshots the table alone into a temporary folder;
        recovery needs no checkpoint (see ``max_recoveries``). Default None.
    checkpoint_every : int, default 10
    resume : bool, default False
        Continue from the newest complete version of ``checkpoint``: the table and the
        sampler's state are restored and the iterations after the saved one run, as the
        uninterrupted fit runs them: with the same ``random_state``, partitioning and
        ``consistency="bsp"``, the same ``components_`` and ``history_`` losses (the
        sampler draws from a stream seeded per partition and iteration, so it carries no
        RNG state; with other partitions, the same topics go on with other draws). A
        checkpoint of another fit (another number of topics or terms, another
        ``vocabulary``, or other counts: other documents, or their columns in another
        order) is refused with an :class:`~dask_ps.exceptions.OptionError` naming
        what differs, before anything is restored; so is one written without the
        sampler's state (by dask_ps before this state was saved), as holding other
        tables.
    max_recoveries : int, default 3
        A lost worker or shard is recovered without a checkpoint: the word–topic table is
        rebuilt from the workers' assignments (documents whose assignments were lost draw
        new ones from the counts of the others), and the iterations of the failed job run
        again.
    progress : bool, optional
        Progress bar; default when interactive.
    callbacks : list of callable, optional
        ``cb(record) -> bool`` after each iteration (then one job per iteration); True
        stops the fit.

    Attributes
    ----------
    components_ : ndarray (n_components, n_features) float64
        Topic–word pseudo-counts ``n_kw + β`` (as scikit-learn's, whose rows normalised are
        the topics' word distributions).
    doc_topic_prior_, topic_word_prior_ : float
    n_features_in_ : int
        Vocabulary size V.
    n_iter_ : int
    n_tokens_ : int
        Training tokens of the last ``fit`` or ``partial_fit`` (``components_`` counts
        those of every ``partial_fit`` since the ``fit``).
    history_ : list of dict
        One record per iteration: ``epoch`` (the iteration, 1-based), ``loss`` (minus the
        training log-likelihood log p(w, z) per token), ``log_likelihood`` (log p(w, z);
        after :meth:`partial_fit`, of its tokens given the counts before it),
        ``time`` (seconds since the fit started, at the end of this iteration: when the
        driver heard the last task report it; after a resume, going on from the restored
        iterations', as in :class:`~dask_ps.LogisticRegression`'s), ``epoch_time``
        (seconds from the end of the iteration before, or from the start of its job for a
        job's first), ``bytes``
        (pulled and pushed), and
        the seconds of the slowest task in each part of the iteration: ``wait_s`` (waiting
        for its rows, what the overlap with the doc phase did not hide), ``word_s`` and
        ``doc_s`` (the sampler's two phases), ``push_s`` (making the delta), ``clock_s``
        (the clock: pushes merged and queued, the next pull sent off), ``sample_s`` (word +
        doc), ``pull_s`` (the pull's own time, overlapped with the doc phase), ``cpu_s``
        (the sampling thread's CPU seconds in the two phases); a ``{"event": "recovery",
        ...}`` record per recovery.
    vocabulary_ : ndarray of str (n_features,)
        The terms, when given to :meth:`fit`.

    Notes
    -----
    Each clock costs one ``map_shards`` pull (the shard scans its part of the V·K counts
    and returns the non-zero ones of the words asked for) and one push of the sparse delta
    (flat keys and int32 counts), merged per worker process.

    References
    ----------
    D. Blei, A. Ng, M. Jordan. Latent Dirichlet allocation. JMLR 3, 2003.
    T. Griffiths, M. Steyvers. Finding scientific topics. PNAS 101, 2004.
    J. Chen, K. Li, J. Zhu, W. Chen. WarpLDA: a cache efficient O(1) algorithm for latent
    Dirichlet allocation. PVLDB 9(10), 2016.
    J. Yuan et al. LightLDA: big topic models on modest computer clusters. WWW 2015.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from dask_ps import LatentDirichletAllocation
    >>> X = sp.random(50, 30, density=0.2, format="csr", random_state=0,
    ...               data_rvs=lambda n: np.ones(n))
    >>> lda = LatentDirichletAllocation(n_components=3, max_iter=20, client="local",
    ...                                 random_state=0).fit(X)
    >>> lda.transform(X).sum(axis=1).round(6)[:3]
    array([1., 1., 1.])
    """

    _recovers_without_checkpoint = True  # from the workers' topic assignments

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "doc_topic_prior": [Interval(numbers.Real, 0, MAX_PRIOR, closed="right"), None],
        "topic_word_prior": [Interval(numbers.Real, 0, MAX_PRIOR, closed="right"), None],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "mh_steps": [Interval(numbers.Integral, 1, MAX_MH, closed="both")],
        "evaluate_every": [numbers.Integral],
        "max_doc_update_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "stream_decay": [Interval(numbers.Real, 0, 1, closed="both")],
    }

    def __init__(self, *, n_components=10, doc_topic_prior=None, topic_word_prior=None,
                 max_iter=300, mh_steps=1, evaluate_every=1, max_doc_update_iter=100,
                 stream_decay=1.0, consistency="bsp", staleness=None, n_shards=None,
                 random_state=None, client=None, shard_resources=None, checkpoint=None,
                 checkpoint_every=10, resume=False, max_recoveries=3, progress=None,
                 callbacks=None):
        self.n_components, self.doc_topic_prior = n_components, doc_topic_prior
        self.topic_word_prior, self.max_iter, self.mh_steps = topic_word_prior, max_iter, \
            mh_steps
        self.evaluate_every, self.max_doc_update_iter = evaluate_every, max_doc_update_iter
        self.stream_decay = stream_decay
        self.consistency, self.staleness, self.n_shards = consistency, staleness, n_shards
        self.random_state, self.client = random_state, client
        self.shard_resources = shard_resources
        self.checkpoint, self.checkpoint_every, self.resume = checkpoint, checkpoint_every, \
            resume
        self.max_recoveries, self.progress, self.callbacks = max_recoveries, progress, \
            callbacks

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        # counts: scikit-learn's checks then feed non-negative integers (as to CategoricalNB)
        tags.input_tags.categorical = True
        return tags

    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    # -- input ------------------------------------------------------------------------
    def _documents(self, X, reset: bool, integers: bool | None = None):
        """``X`` checked: a dask collection as it is, anything else as a CSR of counts (integers
        when ``integers``, default ``reset``: training data)."""
        if isinstance(X, tuple):
            raise TypeError("X is a tuple: pass the document-term matrix alone (read_ldac, "
                            "read_docword and read_text return (X, vocabulary); give the "
                            "vocabulary to fit(X, vocabulary=...) or top_words)")
        if is_dask(X):
            check_dask_documents(X, type(self).__name__)
            if reset:
                self.n_features_in_ = int(X.shape[1])
            elif X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} terms, the model "
                                 f"{self.n_features_in_}")
            return X
        if hasattr(X, "to_scipy_sparse"):  # sparse.COO / GCXS
            X = X.to_scipy_sparse()
        X = validate_data(self, X, accept_sparse="csr", reset=reset,
                          dtype=(np.float64, np.float32, np.int64, np.int32))
        X = sp.csr_matrix(X)
        X.sum_duplicates()
        _check_counts(X, integers=reset if integers is None else integers)
        return X

    # -- fit ----------------------------------------------------------------------------
    def fit(self, X, y=None, *, vocabulary=None):
        """Fit the topics to a document–term count matrix.

        Parameters
        ----------
        X : array-like or sparse matrix (n_documents, n_terms)
            Non-negative integer counts: NumPy, scipy.sparse, ``sparse.COO`` or a dask
            array (dense or CSR chunks, as :func:`dask_ps.io.read_ldac`,
            :func:`~dask_ps.io.read_docword` and :func:`~dask_ps.io.read_text` return), or
            a dask DataFrame of count columns (integers, nullable integers or booleans; a
            missing count is a :class:`~dask_ps.exceptions.DataError` naming its column and
            row). In-memory input is scattered to the workers once; a dask collection is
            read once where its partitions are computed. Empty documents are allowed (they
            add nothing).
        y : ignored
        vocabulary : sequence of str (n_terms,), optional
            The terms, kept as ``vocabulary_`` for :meth:`top_words`.

        Raises
        ------
        ValueError
            Bad parameters (a prior above 1e15, naming it); a count that is negative, not
            an integer or not finite (naming the document and the term); no token at all; a
            vocabulary whose length is not the number of terms; ``n_components`` x terms
            beyond memory.
        """
        self._validate()
        return self._fit(self._documents(X, reset=True), vocabulary, None)

    def partial_fit(self, X, y=None, *, vocabulary=None):
        """Continue training from the fitted topics: ``max_iter`` more iterations on ``X``.

        The first topic of each token of ``X`` is drawn from the fitted word–topic counts
        and its document's draws (``p(k | w, d) ∝ components_[k, w] / sum_w components_[k,
        w] · (n_dk + α)``) instead of uniformly,
        then collapsed Gibbs sampling runs on ``X`` with the model's counts, times
        ``stream_decay``, as their prior: the topics keep their numbers, and after the call
        ``components_`` counts ``X``'s tokens and those kept (streaming Gibbs sampling; with
        ``stream_decay=0``, ``X``'s alone: on the same documents the fit then goes on from
        where it was). Assignments are not kept between calls, only the counts they made.
        ``loss`` and ``log_likelihood`` are of ``X``'s tokens given the counts kept.
        Unfitted, this is :meth:`fit`. ``history_`` gets the new iterations appended
        (``epoch`` counting on), ``n_iter_`` counts all of them; ``time`` is since the start
        of this call.

        Parameters
        ----------
        X : array-like or sparse matrix (n_documents, n_features)
            Non-negative integer counts, the same terms as the fitted model.
        y : ignored
        vocabulary : sequence of str (n_features,), optional
            The terms of ``X``'s columns: the model's ``vocabulary_`` (a model fitted
            without one takes it).

        Raises
        ------
        ValueError
            As :meth:`fit`; ``X`` with another number of terms than the model, a
            ``vocabulary`` other than the model's ``vocabulary_`` (naming the first term
            that differs), ``n_components`` changed since the model was fitted, or
            ``resume=True`` on a fitted model (it goes on from the model in memory).

        See Also
        --------
        dask_ps.learn_online : ``partial_fit`` on a stream of batches, each scored first
            (its progressive perplexity), with model versions saved along the way.
        """
        if not hasattr(self, "components_"):
            return self.fit(X, vocabulary=vocabulary)
        self._validate()
        self._refuse_resume()
        X = self._documents(X, reset=False, integers=True)
        if self.n_components != self.components_.shape[0]:
            raise ValueError(f"n_components is {self.n_components}, the fitted model has "
                             f"{self.components_.shape[0]} topics: fit it anew")
        if vocabulary is None:
            vocabulary = getattr(self, "vocabulary_", None)
        elif hasattr(self, "vocabulary_"):  # (its columns' count: _fit checks it)
            same_terms(np.asarray(vocabulary, dtype=str), np.asarray(self.vocabulary_, str),
                       "vocabulary=", "the model's vocabulary_",
                       "partial_fit goes on with the fitted topics, whose columns are the "
                       "model's terms: give X in those columns, or fit anew")
        counts = np.rint(self.components_ - self.topic_word_prior_).clip(0).astype(np.int32)
        before, n_before = self.history_, self.n_iter_
        self._fit(X, vocabulary, np.ascontiguousarray(counts.T))
        for record in self.history_:
            if "epoch" in record:
                record["epoch"] += n_before
        self.history_ = before + self.history_
        self.n_iter_ += n_before
        return self

    def _fit(self, X, vocabulary, init_counts):
        K, V = int(self.n_components), int(X.shape[1])
        if vocabulary is not None:
            vocabulary = np.asarray(vocabulary, dtype=str)
            if vocabulary.shape != (V,):
                raise ValueError(f"vocabulary has {vocabulary.shape[0]} terms, X {V} columns")
        alpha = 1.0 / K if self.doc_topic_prior is None else float(self.doc_topic_prior)
        beta = 1.0 / K if self.topic_word_prior is None else float(self.topic_word_prior)
        with self._model() as model:
            with self._partition(model, X) as data:
                offsets = data.starts
                loop = self._epoch_loop(model, f"LatentDirichletAllocation(K={K})",
                                        self.max_iter, unit="iteration",
                                        continues=init_counts is not None,
                                        job_seconds=JOB_SECONDS, fit_id=dict(
                                            estimator=type(self).__name__,
                                            # compared when both fits name their terms
                                            **({} if vocabulary is None else dict(
                                                vocabulary=checksum(vocabulary)))))
                nwk, history, info = train(
                    model, data, n_words=V, n_topics=K, alpha=alpha, beta=beta,
                    max_iter=self.max_iter, row_offsets=offsets, n_mh=self.mh_steps,
                    evaluate_every=self.evaluate_every, consistency=self.consistency,
                    staleness=self.staleness, random_state=self._seed(), loop=loop,
                    init_counts=init_counts, decay=float(self.stream_decay))
                if history:
                    history[-1].update(data.report())
        self.components_ = nwk.T.astype(np.float64) + beta
        self.doc_topic_prior_, self.topic_word_prior_ = alpha, beta
        self.n_tokens_ = int(info["n_tokens"])
        self.history_ = history
        self.n_iter_ = sum(1 for h in history if "epoch" in h and "event" not in h)
        if vocabulary is not None:
            self.vocabulary_ = vocabulary
        elif hasattr(self, "vocabulary_"):
            del self.vocabulary_
        return self

    def _check_loaded(self) -> None:
        """Refuse fitted state no fit leaves, before it is used (called by
        :func:`~dask_ps.saving.load_estimator`): ``components_`` that is not (n_topics,
        n_features_in_) (:meth:`transform` read past its rows) or holds a value that is not
        positive (a count plus ``topic_word_prior_``).

        Raises
        ------
        ValueError
            Naming the attribute and what is wrong.
        """
        c = getattr(self, "components_", None)
        if c is None:
            return
        n = getattr(self, "n_features_in_", None)
        if not isinstance(c, np.ndarray) or c.ndim != 2 or c.shape[0] < 1 or c.shape[1] != n:
            raise ValueError(f"components_ has shape {np.shape(c)}, not (n_topics, "
                             f"n_features_in_={n})")
        if not (c > 0).all():
            raise ValueError(f"components_ holds {int((c <= 0).sum())} value(s) that are not "
                             f"positive: a fitted model's are counts plus topic_word_prior_")

    # -- the topics -----------------------------------------------------------------------
    def _phi(self) -> np.ndarray:
        return self.components_ / self.components_.sum(axis=1, keepdims=True)

    def transform(self, X):
        """Document–topic distributions θ (rows sum to 1) given the fitted topics.

        θ_d is the fixed point of EM on the document's counts with the topics fixed and
        ``doc_topic_prior_`` pseudo-counts (``max_doc_update_iter`` iterations); an empty
        document gets the prior mean ``1 / n_components``.

        Parameters
        ----------
        X : array-like, sparse matrix, dask array or dask DataFrame (n_documents, n_features)
            Non-negative counts.

        Returns
        -------
        ndarray (n_documents, n_components) float64, or a dask array for a dask ``X`` (of
        unknown row chunks for a DataFrame)
        """
        check_is_fitted(self)
        X = self._documents(X, reset=False)
        phi = self._phi()
        if is_dask(X) and hasattr(X, "map_partitions"):  # a DataFrame: rows of unknown count
            return X.map_partitions(_fold_in_partition,
                                    *broadcast_large(phi, self.doc_topic_prior_),
                                    self.max_doc_update_iter, meta=np.zeros((0, phi.shape[0])))
        if is_dask(X):
            return X.map_blocks(_fold_in_block, *broadcast_large(phi, self.doc_topic_prior_),
                                self.max_doc_update_iter, dtype=np.float64,
                                chunks=(X.chunks[0], (phi.shape[0],)), meta=np.zeros((0, 0)))
        return fold_in(phi, X, self.doc_topic_prior_, self.max_doc_update_iter)

    def score(self, X, y=None) -> float:
        """Log-likelihood of the documents, ``sum_dw c_dw log(θ_d · φ_w)`` with θ from
        :meth:`transform` of the same documents (greater is better)."""
        check_is_fitted(self)
        X = self._documents(X, reset=False)
        if is_dask(X):
            X = as_csr(X.compute())
            _check_counts(X, integers=False)
        theta = fold_in(self._phi(), X, self.doc_topic_prior_, self.max_doc_update_iter)
        return float(heldout_loglik(X.indptr.astype(np.int64), X.indices.astype(np.int32),
                                    X.data.astype(np.float64), theta,
                                    np.ascontiguousarray(self._phi().T)))

    def perplexity(self, X) -> float:
        """``exp(-score(X) / tokens of X)``.

        Raises
        ------
        ValueError
            ``X`` holds no token.
        """
        check_is_fitted(self)
        X = self._documents(X, reset=False)
        if is_dask(X):
            X = as_csr(X.compute())
            _check_counts(X, integers=False)
        n = float(X.sum())
        if n <= 0:
            raise ValueError("X holds no token: its perplexity is undefined")
        return float(np.exp(-self.score(X) / n))

    def top_words(self, n: int = 10, vocabulary=None) -> np.ndarray:
        """The ``n`` most probable terms of each topic.

        Parameters
        ----------
        n : int, default 10
        vocabulary : sequence of str (n_features,), optional
            Default ``vocabulary_`` if fit had one, else the term ids are returned.

        Returns
        -------
        ndarray (n_components, min(n, n_features)) of str (or int64 term ids), most probable
        first
            Without a vocabulary a term id is the column of ``X`` (from 0, as the columns of
            ``components_`` and scikit-learn's convention), whatever the file's numbering:
            column j of :func:`~dask_ps.io.read_docword`'s ``X`` is the UCI file's wordID
            j + 1 (ids from 1), of :func:`~dask_ps.io.read_ldac`'s the LDA-C id j. (``dask-ps
            train lda`` and ``dask-ps export`` print a docword file's own wordIDs.)
        """
        check_is_fitted(self)
        if not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if vocabulary is None:
            vocabulary = getattr(self, "vocabulary_", None)
        n = min(int(n), self.components_.shape[1])
        top = np.argsort(-self.components_, axis=1, kind="stable")[:, :n]
        if vocabulary is None:
            return top.astype(np.int64)
        vocabulary = np.asarray(vocabulary, dtype=str)
        if vocabulary.shape != (self.components_.shape[1],):
            raise ValueError(f"vocabulary has {vocabulary.shape[0]} terms, the model "
                             f"{self.components_.shape[1]}")
        return vocabulary[top]


def _fold_in_block(block, phi, alpha, n_iter, block_info=None):
    """:func:`fold_in` of a dask array's block; a bad count is named by its row in the whole
    array (``block_info``, given by ``map_blocks``)."""
    first = block_info[0]["array-location"][0][0] if block_info else 0
    block = as_csr(block)
    _check_counts(block, integers=False, first_row=first)
    return fold_in(phi, block, alpha, n_iter)


def _fold_in_partition(part, phi, alpha, n_iter, partition_info=None):
    """:func:`fold_in` of a dask DataFrame's partition; a bad count is named by its row in
    the partition (``partition_info``, given by ``map_partitions``) and its index label."""
    block = as_csr(part)
    number = partition_info["number"] if partition_info else "?"
    _check_counts(block, integers=False, index=part.index, partition=number)
    return fold_in(phi, block, alpha, n_iter)


def _check_counts(X: sp.csr_matrix, integers: bool = True, first_row: int = 0,
                  index=None, partition=None) -> None:
    """Raise DataError naming the first document and term whose count is not finite, or
    negative (or, with ``integers``, not an integer). The document is named by its row plus
    ``first_row``; with ``index`` (the pandas index of ``partition``, a dask DataFrame's
    partition), by its row in that partition and its index label. Column indices out of
    the matrix's shape too (:func:`~dask_ps.partitions.inputs.check_columns`)."""
    check_columns(X, "X", first_row=first_row)
    data = X.data
    bad = ~np.isfinite(data)
    what = "LatentDirichletAllocation needs finite counts"
    if not bad.any():
        bad = data < 0
        what = "Negative values in data passed to LatentDirichletAllocation"
    if integers and not bad.any():
        bad = data != np.round(data)
        what = "LatentDirichletAllocation needs integer counts"
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        d = int(np.searchsorted(X.indptr, j, side="right")) - 1
        label = ""
        if index is not None:
            name = index[d].item() if hasattr(index[d], "item") else index[d]
            label = f" of partition {partition} (index {name!r})"
        raise DataError(f"{what}: document {d + first_row}{label}, term "
                        f"{int(X.indices[j])} has count {data[j]:g}")
