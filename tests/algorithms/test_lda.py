"""LatentDirichletAllocation on the PS: planted topics, count invariants after every
iteration, determinism, inputs, bad input, the scikit-learn contract."""

import pickle
import re

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

import dask_ps
from dask_ps import LatentDirichletAllocation, PSModel, partition
from dask_ps.algorithms._lda_eval import heldout_split, perplexity
from dask_ps.algorithms._lda_steps import TABLE, table_counts
from dask_ps.algorithms._lda_train import assignments
from dask_ps.algorithms.epoch_loop import EpochLoop
from dask_ps.algorithms.lda import train
from dask_ps.exceptions import DataError

pytestmark = pytest.mark.timeout(300)


def planted(n_docs=120, n_topics=3, words_per_topic=8, length=40, seed=0):
    """Documents drawn from ``n_topics`` topics on disjoint blocks of words (each document
    mostly one topic): (counts CSR (n_docs, V) int64, the topic of each word)."""
    rng = np.random.default_rng(seed)
    V = n_topics * words_per_topic
    rows = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, 0.2))
        z = rng.choice(n_topics, length, p=theta)
        words = z * words_per_topic + rng.integers(0, words_per_topic, length)
        rows.append(np.bincount(words, minlength=V))
    return sp.csr_matrix(np.array(rows, np.int64)), np.repeat(np.arange(n_topics),
                                                             words_per_topic)


def fit_local(X, **kw):
    params = dict(n_components=3, max_iter=30, client="local", random_state=0, progress=False)
    params.update(kw)
    return LatentDirichletAllocation(**params).fit(X)


# -- what it learns ------------------------------------------------------------------------
def test_recovers_planted_topics_in_process():
    X, topic_of = planted()
    lda = fit_local(X)
    top = lda.top_words(5)
    assert top.shape == (3, 5)
    # each learned topic's top words come from one planted topic, and all three are found
    found = {int(np.bincount(topic_of[row]).argmax()) for row in top}
    assert found == {0, 1, 2}
    for row in top:
        assert len(set(topic_of[row].tolist())) == 1
    assert lda.components_.shape == (3, X.shape[1])
    np.testing.assert_allclose(lda.components_.sum(), X.sum() + lda.topic_word_prior_ * 3 * 24)
    theta = lda.transform(X)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.isfinite(lda.score(X)) and 1 < lda.perplexity(X) < X.shape[1]
    h = [r for r in lda.history_ if "loss" in r]
    assert [r["epoch"] for r in h] == list(range(1, 31))
    assert h[-1]["loss"] < h[0]["loss"]  # the log-likelihood rose
    assert all(k in h[-1] for k in ("log_likelihood", "time", "epoch_time", "bytes"))
    np.testing.assert_allclose(h[-1]["loss"] * lda.n_tokens_, -h[-1]["log_likelihood"])
    assert lda.n_tokens_ == X.sum() and lda.n_iter_ == 30
    assert list(lda.get_feature_names_out()) == [f"latentdirichletallocation{k}"
                                                 for k in range(3)]


def test_evaluate_every_thins_the_loglik():
    X, _ = planted(n_docs=30)
    lda = fit_local(X, max_iter=7, evaluate_every=3)
    assert [r["epoch"] for r in lda.history_ if "loss" in r] == [3, 6, 7]
    lda = fit_local(X, max_iter=3, evaluate_every=0)
    assert not any("loss" in r for r in lda.history_)


# -- the invariants the issue names ----------------------------------------------------------
def _counts_from_assignments(model, data, V, K):
    dense = np.zeros((V, K), np.int64)
    for words, z in assignments(model, data):
        np.add.at(dense, (words, z), 1)
    return dense


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_counts_equal_the_assignments_after_every_iteration(where, request):
    X, _ = planted(n_docs=90, seed=1)
    V, K = X.shape[1], 4
    client = "local" if where == "local" else request.getfixturevalue("client2")
    seen = []
    with PSModel(client) as model, partition(X, client=client, n_partitions=3) as data:
        def check(record):
            nwk = np.concatenate(model.map_shards(TABLE, table_counts, key_range=True))
            nwk = nwk.reshape(V, K)
            assert nwk.sum() == X.sum()
            np.testing.assert_array_equal(nwk, _counts_from_assignments(model, data, V, K))
            seen.append(record["epoch"])
        loop = EpochLoop(model, "lda", 4, callbacks=[check], progress=False)
        offsets = np.concatenate(([0], np.cumsum(data.n_rows)[:-1])).tolist()
        nwk, history, info = train(model, data, n_words=V, n_topics=K, alpha=0.1, beta=0.01,
                                   max_iter=4, row_offsets=offsets, random_state=3, loop=loop)
    assert seen == [1, 2, 3, 4]
    assert info["n_tokens"] == X.sum() and nwk.sum() == X.sum()


def test_same_seed_workers_and_partitioning_give_the_same_model(client2):
    X, _ = planted(n_docs=150, seed=2)
    kw = dict(n_components=4, max_iter=15, client=client2, progress=False)
    a = LatentDirichletAllocation(random_state=5, **kw).fit(X)
    b = LatentDirichletAllocation(random_state=5, **kw).fit(X)
    c = LatentDirichletAllocation(random_state=6, **kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert [r["loss"] for r in a.history_ if "loss" in r] == \
        [r["loss"] for r in b.history_ if "loss" in r]
    assert not np.array_equal(a.components_, c.components_)


def test_ssp_trains_as_well_as_bsp(client2):
    X, topic_of = planted(n_docs=150, seed=3)
    kw = dict(n_components=3, max_iter=30, client=client2, random_state=0, progress=False)
    bsp = LatentDirichletAllocation(**kw).fit(X)
    ssp = LatentDirichletAllocation(consistency="ssp", staleness=2, **kw).fit(X)
    assert ssp.components_.sum() == pytest.approx(bsp.components_.sum())
    for row in ssp.top_words(5):
        assert len(set(topic_of[row].tolist())) == 1
    assert ssp.history_[-1]["loss"] == pytest.approx(bsp.history_[-1]["loss"], rel=0.02)


# -- inputs --------------------------------------------------------------------------------
def test_inputs_scipy_numpy_sparse_and_dask_agree():
    import dask.array as da
    import sparse

    X, _ = planted(n_docs=40, seed=4)
    ref = fit_local(X, max_iter=5).components_
    for other in (X.toarray(), sparse.COO.from_scipy_sparse(X), X.astype(np.float32)):
        np.testing.assert_array_equal(fit_local(other, max_iter=5).components_, ref)
    Xd = da.from_array(X.toarray(), chunks=(40, -1))  # one chunk: the same partitioning
    np.testing.assert_array_equal(fit_local(Xd, max_iter=5).components_, ref)
    t = fit_local(X, max_iter=5).transform(da.from_array(X.toarray(), chunks=(15, -1)))
    np.testing.assert_allclose(t.compute(), fit_local(X, max_iter=5).transform(X))


def test_a_dask_dataframe_of_counts_fits_transforms_and_names_bad_columns():
    """Integer, nullable-integer and boolean count columns fit as the same counts as an
    array (nullable ones failed in scipy: "does not support dtype object"); transform,
    score and perplexity take the frame too. A missing count names its column and row; a
    column of strings is named before anything is read."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    X, _ = planted(n_docs=40, seed=4)
    df = pd.DataFrame(X.toarray(), columns=[f"w{j}" for j in range(X.shape[1])])
    for frame in (df, df.astype("Int64"), (df > 0)):
        dfd = dd.from_pandas(frame, npartitions=1)  # one partition: the same partitioning
        model = fit_local(dfd, max_iter=5)
        want = fit_local(sp.csr_matrix(frame.to_numpy(np.int64)), max_iter=5)
        np.testing.assert_array_equal(model.components_, want.components_)
        counts = frame.to_numpy(np.float64)
        np.testing.assert_allclose(model.transform(dd.from_pandas(frame, npartitions=3))
                                   .compute(), model.transform(counts))
        assert model.score(dfd) == pytest.approx(model.score(counts))
        assert model.perplexity(dfd) == pytest.approx(model.perplexity(counts))
    holed = df.astype("Int64")
    holed.iloc[7, 3] = pd.NA
    with pytest.raises(DataError, match="missing count in column 'w3', row 7"):
        fit_local(dd.from_pandas(holed, npartitions=2), max_iter=2)
    with pytest.raises(ValueError, match=r"no numbers: 'w1' \(.*e\.g\. 'a'\)"):
        fit_local(dd.from_pandas(df.assign(w1="a"), npartitions=2), max_iter=2)
    # a bad count after fit: refused by transform, score and perplexity as for arrays
    for bad, what in ((-2, "Negative values"), (np.inf, "finite counts")):
        worse = df.astype(float)
        worse.iloc[25, 2] = bad
        for call in (lambda d: model.transform(d).compute(), model.score, model.perplexity):
            with pytest.raises(DataError, match=f"{what}.*term 2"):
                call(dd.from_pandas(worse, npartitions=2))
    # transform names the document in the whole input: its row in the array, its row in
    # the frame's partition and its index label (it named the row inside the block)
    worse = df.astype(float).set_axis(df.index + 1000)
    worse.iloc[25, 2] = -2
    with pytest.raises(DataError, match="document 25, term 2 has count -2"):
        model.transform(da.from_array(worse.to_numpy(), chunks=(10, -1))).compute()
    with pytest.raises(DataError, match=r"document 5 of partition 1 \(index 1025\), term 2"):
        model.transform(dd.from_pandas(worse, npartitions=2)).compute()


def test_readers_ldac_docword_text(tmp_path, data, client2):
    from dask_ps.io import read_docword, read_ldac, read_text

    lines = (data / "lda_ap" / "ap.dat").read_text().splitlines()[:200]
    (tmp_path / "ap.dat").write_text("\n".join(lines) + "\n")
    X, vocab = read_ldac(str(tmp_path / "ap.dat"), str(data / "lda_ap" / "vocab.txt"),
                         blocksize="16KiB")
    assert X.numblocks[0] > 2
    kw = dict(n_components=5, max_iter=10, client=client2, random_state=0, progress=False)
    a = LatentDirichletAllocation(**kw).fit(X, vocabulary=vocab)
    assert a.top_words(4).dtype.kind == "U" and a.top_words(4).shape == (5, 4)
    Xc = sp.csr_matrix(X.compute())  # CSR chunks: dask's sum does not apply
    assert a.n_tokens_ == int(Xc.sum())
    # the same documents as a UCI docword file
    doc, word = Xc.nonzero()
    body = "\n".join(f"{d + 1} {w + 1} {int(c)}" for d, w, c in zip(doc, word, Xc.data))
    (tmp_path / "docword.txt").write_text(f"{Xc.shape[0]}\n{Xc.shape[1]}\n{Xc.nnz}\n{body}\n")
    Xw, _ = read_docword(str(tmp_path / "docword.txt"), blocksize="64KiB")
    b = LatentDirichletAllocation(**kw).fit(Xw)
    assert b.n_tokens_ == a.n_tokens_
    Xt, terms = read_text(str(data / "lda_lee" / "lee_background.cor"), min_df=2)
    c = LatentDirichletAllocation(**kw).fit(Xt, vocabulary=terms)
    assert c.n_features_in_ == terms.size and set(c.top_words(3).ravel()) <= set(terms)


# -- bad input -------------------------------------------------------------------------------
def test_empty_documents_and_an_all_empty_partition(client2):
    X, _ = planted(n_docs=60, seed=5)
    X = sp.vstack([sp.csr_matrix(X.shape), X]).tocsr()  # the first 60 documents are empty
    X = X.astype(np.int64)
    lda = LatentDirichletAllocation(n_components=3, max_iter=10, client=client2,
                                    random_state=0, progress=False).fit(X)  # 2 partitions
    assert np.isfinite(lda.components_).all()
    theta = lda.transform(X)
    np.testing.assert_allclose(theta[:60], 1 / 3)  # the prior mean
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)


def test_more_topics_than_terms_and_tiny_priors():
    X, _ = planted(n_docs=30, words_per_topic=2, seed=6)  # 6 terms
    lda = fit_local(X, n_components=10, max_iter=10)
    assert lda.components_.shape == (10, 6) and np.isfinite(lda.components_).all()
    assert np.isfinite(lda.transform(X)).all() and np.isfinite(lda.perplexity(X))
    lda = fit_local(X, doc_topic_prior=1e-6, topic_word_prior=1e-6, max_iter=10)
    theta = lda.transform(X)
    assert np.isfinite(theta).all() and np.isfinite(lda.score(X))
    assert all(np.isfinite(r["loss"]) for r in lda.history_ if "loss" in r)


@pytest.mark.parametrize("param", ["topic_word_prior", "doc_topic_prior"])
def test_huge_priors_are_refused_up_front_and_the_largest_fits(param):
    """``topic_word_prior=1e308`` was taken and the fit ended in a DivergenceError (NaN
    loss: V * 1e308 is infinite) after its first iteration. A prior above
    :data:`~dask_ps.algorithms._lda_kernels.MAX_PRIOR` is refused before anything runs,
    naming the parameter and the bound; the largest one taken fits, finite throughout."""
    from dask_ps.algorithms._lda_kernels import MAX_PRIOR

    X, _ = planted(n_docs=30, words_per_topic=2, seed=6)
    for prior in (1e308, float("inf"), MAX_PRIOR * 1.001):
        lda = LatentDirichletAllocation(client="local", progress=False, **{param: prior})
        got = re.escape(repr(prior))
        with pytest.raises(ValueError, match=rf"^The '{param}' parameter of "
                                             rf"LatentDirichletAllocation must be .*\(0.0, "
                                             rf"1e\+15\] or None\. Got {got} instead"):
            lda.fit(X)
        assert not hasattr(lda, "components_")
    lda = fit_local(X, max_iter=5, **{param: MAX_PRIOR})
    assert all(np.isfinite(r["loss"]) for r in lda.history_ if "loss" in r)
    assert np.isfinite(lda.components_).all() and np.isfinite(lda.transform(X)).all()
    # n_kw + β holds the counts exactly: partial_fit takes them back
    counts = np.rint(lda.components_ - lda.topic_word_prior_)
    assert counts.sum() == X.sum() and (counts >= 0).all()
    lda.set_params(max_iter=2).partial_fit(X)


def test_bad_counts_name_the_document_and_term(client2):
    import dask.array as da

    X = np.zeros((6, 5))
    X[3, 2] = -1
    with pytest.raises(ValueError, match="Negative values.*document 3, term 2 has count -1"):
        fit_local(X)
    X[3, 2] = 0.5
    with pytest.raises(ValueError, match="integer counts: document 3, term 2 has count 0.5"):
        fit_local(X)
    # a dask array is checked on the workers, naming the document in the whole matrix
    X = np.ones((8, 4))
    X[6, 1] = 2.5
    with pytest.raises(ValueError, match="document 6, term 1 has count 2.5"):
        LatentDirichletAllocation(n_components=2, max_iter=2, client=client2,
                                  progress=False).fit(da.from_array(X, chunks=(4, -1)))
    # counts whose tokens cannot fit in memory: named before they are made (a worker was
    # killed after ~27 s, or a MemoryError of 4 TiB)
    X = np.ones((8, 4))
    X[5, 3] = 2**40
    with pytest.raises(DataError, match=r"partition \d holds 1.1e\+12 tokens.*document 5, "
                                        r"term 3"):
        fit_local(X)
    X[5, 3] = 2**31 + 5
    with pytest.raises(DataError, match=r"document 5, term 3\): check the counts"):
        LatentDirichletAllocation(n_components=2, max_iter=2, client=client2,
                                  progress=False).fit(da.from_array(X, chunks=(4, -1)))
    with pytest.raises(ValueError, match="no token"):
        fit_local(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fit_local(np.full((2, 2), np.nan))
    with pytest.raises(TypeError, match="vocabulary"):
        fit_local((X, ["a", "b", "c", "d"]))
    with pytest.raises(ValueError, match="vocabulary has 2 terms"):
        LatentDirichletAllocation(n_components=2, max_iter=2, client="local",
                                  progress=False).fit(np.ones((3, 4)), vocabulary=["a", "b"])
    lda = fit_local(np.ones((3, 4)), max_iter=2)
    with pytest.raises(ValueError, match="4 features"):
        lda.transform(np.ones((2, 5)))
    with pytest.raises(ValueError, match="n_components"):
        fit_local(np.ones((3, 4)), n_components=0)
    with pytest.raises(ValueError, match="mh_steps"):
        fit_local(np.ones((3, 4)), mh_steps=8)


# -- the scikit-learn contract ---------------------------------------------------------------
@parametrize_with_checks([LatentDirichletAllocation(n_components=3, max_iter=5, client="local",
                                                    random_state=0, progress=False)])
def test_sklearn_contract(estimator, check):
    check(estimator)


def test_pickles_fitted_and_unfitted_with_a_client(client2):
    X, _ = planted(n_docs=30, seed=7)
    est = LatentDirichletAllocation(n_components=2, max_iter=3, client=client2, progress=False)
    assert pickle.loads(pickle.dumps(est)).client is None
    assert clone(pickle.loads(pickle.dumps(est))).get_params()["n_components"] == 2
    with pytest.raises(NotFittedError):
        est.transform(X)
    est.fit(X, vocabulary=[f"w{i}" for i in range(X.shape[1])])
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.components_, est.components_)
    assert back.top_words(2).tolist() == est.top_words(2).tolist()
    assert isinstance(dask_ps.LatentDirichletAllocation(), LatentDirichletAllocation)


def ap_split(data, n_docs=None):
    """AP's held-out split (issue 13's protocol), optionally of its first documents."""
    from dask_ps.io import read_ldac

    X, vocab = read_ldac(str(data / "lda_ap" / "ap.dat"), str(data / "lda_ap" / "vocab.txt"))
    X = sp.csr_matrix(X.compute())[:n_docs]
    return heldout_split(X, 0.1, seed=0), vocab


def test_ap_beats_the_unigram_model(data):
    split, vocab = ap_split(data)
    lda = fit_local(split.train, n_components=20, doc_topic_prior=0.1, topic_word_prior=0.01,
                    max_iter=40)
    unigram = np.asarray(split.train.sum(axis=0), np.float64) + 0.01
    unigram /= unigram.sum()
    ppl, base = perplexity(lda._phi(), split), perplexity(unigram, split)
    assert ppl < 0.85 * base, (ppl, base)
    words = set(lda.top_words(10, vocab[split.terms]).ravel())
    assert {"soviet", "police", "percent"} <= words
