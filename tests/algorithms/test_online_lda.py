"""learn_online with LatentDirichletAllocation: a stream of document batches scored by their
progressive perplexity under the topics before them, versions saved and loaded while the
stream goes on, batches read from LDA-C files on a cluster, bad streams refused."""

import logging

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from test_lda import planted

from dask_ps import LatentDirichletAllocation, LogisticRegression, learn_online
from dask_ps.algorithms.online import version_path
from dask_ps.exceptions import DataError
from dask_ps.saving import load_estimator

pytestmark = pytest.mark.timeout(600)

TERMS = np.array([f"w{j}" for j in range(24)])  # planted()'s 3 topics x 8 words


def lda(client="local", **kw):
    params = dict(n_components=3, max_iter=3, client=client, random_state=0, progress=False)
    params.update(kw)
    return LatentDirichletAllocation(**params)


def docs(i, n_docs=40):
    """Batch ``i`` of the stream: new documents of the same planted topics."""
    return planted(n_docs=n_docs, seed=100 + i)[0]


def batch_records(est):
    return [r for r in est.history_ if "batch" in r]


def test_a_stream_of_documents_scores_each_batch_before_learning_it(tmp_path, caplog):
    """Progressive perplexity falls as the topics form; versions are written every 3 batches
    and load (and score) while the stream goes on; batches come as CSR, (X, vocabulary)
    pairs as the readers return them (or lists), dense and dask arrays, lists of rows; a
    batch without a token is skipped."""
    loaded = {}

    def serve(record):
        if record["batch"] == 4:
            est, _ = load_estimator(version_path(tmp_path, 3))
            loaded["batches"] = [r["batch"] for r in batch_records(est)]
            loaded["perplexity"] = est.perplexity(docs(20))
            loaded["top"] = est.top_words(3)
            loaded["theta"] = est.transform(docs(20))

    def stream():
        for i in range(9):
            X = docs(i)
            if i == 1:
                yield X, TERMS  # as read_ldac / read_text return a batch
            elif i == 2:
                yield [X.toarray(), TERMS]  # a list of a matrix and its terms: a pair too
            elif i == 3:
                yield da.from_array(X, chunks=(15, 24)), None
            elif i == 4:
                yield sp.csr_matrix((7, 24))  # documents without a token
            elif i == 5:
                yield X.toarray().tolist()  # a list of documents' rows: X
            else:
                yield X

    with caplog.at_level(logging.INFO, logger="dask_ps.algorithms.online"):
        est = learn_online(lda(), stream(), vocabulary=list(TERMS), version_every=3,
                           versions=str(tmp_path), on_batch=serve)
    assert "batch 5 of the stream holds no token (7 documents): skipped" in caplog.text
    learnt = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert len(learnt) == 8  # the batch without a token is not
    last = batch_records(est)[-1]
    assert learnt[-1] == (f"learn_online: batch 9 of the stream learnt: rows 40, tokens 1600, "
                          f"progressive_perplexity {last['progressive_perplexity']:.4g}, "
                          f"version {version_path(tmp_path, 9)}")
    h = batch_records(est)
    assert [r["batch"] for r in h] == [1, 2, 3, 4, 6, 7, 8, 9]
    assert all(r["rows"] == 40 and r["tokens"] == 40 * 40 for r in h)
    # the batch's keys go into its last iteration's record: 3 iterations a batch
    assert [r["epoch"] for r in h] == [3, 6, 9, 12, 15, 18, 21, 24] and est.n_iter_ == 24
    assert np.isnan(h[0]["progressive_perplexity"])
    assert np.isnan(h[0]["progressive_log_likelihood"])
    pp = np.array([r["progressive_perplexity"] for r in h[1:]])
    ll = np.array([r["progressive_log_likelihood"] for r in h[1:]])
    np.testing.assert_allclose(pp, np.exp(-ll / (40 * 40)), rtol=1e-12)
    # the topics form over the stream: the last batches' perplexity is well below the
    # second batch's (the first scored), itself below a uniform model's 24 terms
    assert pp[0] < 24 and pp[-3:].mean() < 0.75 * pp[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "version-000003.npz", "version-000006.npz", "version-000009.npz"]
    assert [r.get("version") for r in h] == [
        None, None, version_path(tmp_path, 3), None, version_path(tmp_path, 6), None, None,
        version_path(tmp_path, 9)]
    assert loaded["batches"] == [1, 2, 3] and np.isfinite(loaded["perplexity"])
    assert set(loaded["top"].ravel()) <= set(TERMS)
    np.testing.assert_allclose(loaded["theta"].sum(axis=1), 1)
    np.testing.assert_array_equal(est.vocabulary_, TERMS)
    # a version goes on where the stream left it: a restart on the folder numbers on
    v6, _ = load_estimator(version_path(tmp_path, 6))
    assert [r["batch"] for r in batch_records(v6)] == [1, 2, 3, 4, 6]
    learn_online(v6, (docs(i) for i in range(9, 11)), version_every=2,
                 versions=str(tmp_path))
    again = batch_records(v6)[-2:]
    assert [r["batch"] for r in again] == [1, 2]
    assert again[-1]["version"] == version_path(tmp_path, 11)
    assert all(r["progressive_perplexity"] < pp[0] for r in again)
    np.testing.assert_array_equal(load_estimator(again[-1]["version"])[0].vocabulary_, TERMS)


def test_the_progressive_perplexity_is_the_topics_before_the_batch():
    """A batch's record is ``score`` and ``perplexity`` of the model as it stood before it."""
    est = learn_online(lda(), [docs(0), docs(1)])
    X = docs(2)
    want_ll, want_pp = est.score(X), est.perplexity(X)
    learn_online(est, [X])
    record = batch_records(est)[-1]
    assert record["batch"] == 1
    assert record["progressive_log_likelihood"] == pytest.approx(want_ll, rel=1e-12)
    assert record["progressive_perplexity"] == pytest.approx(want_pp, rel=1e-12)


def test_the_ap_news_stream_perplexity_falls(data):
    """The AP articles (DASK_PS_DATA) in 5 batches of 450, each scored before it is learnt:
    the topics learnt on the batches before score each new one better, and better when the
    counts of every batch are kept (stream_decay=1: 3783, 3526, 3448, 3301 when written)
    than when each batch's replace them (0: 3783, 3563, 3501, 3431)."""
    from dask_ps.io import read_ldac

    ap = data / "lda_ap"
    X, vocab = read_ldac(str(ap / "ap.dat"), str(ap / "vocab.txt"))
    X = X.compute()
    pp = {}
    for decay in (1.0, 0.0):
        est = learn_online(lda(n_components=10, max_iter=40, stream_decay=decay),
                           (X[i:i + 450] for i in range(0, X.shape[0], 450)),
                           vocabulary=vocab)
        pp[decay] = [r["progressive_perplexity"] for r in batch_records(est)]
        assert est.top_words(3).shape == (10, 3)
    p = pp[1.0]
    assert len(p) == 5 and np.isnan(p[0])
    assert p[1] < vocab.shape[0] and p[4] < 0.93 * p[1] and p[4] < p[3] < p[2] < p[1]
    assert p[4] < 0.98 * pp[0.0][4], pp


def _write_ldac(path, X):
    X = sp.csr_matrix(X)
    lines = []
    for d in range(X.shape[0]):
        row = slice(X.indptr[d], X.indptr[d + 1])
        lines.append(f"{row.stop - row.start} " + " ".join(
            f"{j}:{int(c)}" for j, c in zip(X.indices[row], X.data[row])))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_stream_of_ldac_files_on_a_cluster(tmp_path, client2):
    """Each file read as it comes (read_ldac's (X, vocabulary) with the stream's vocabulary
    file) is learnt on the workers; the versions load and score on the driver."""
    from dask_ps.io import read_ldac

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TERMS) + "\n")
    files = [_write_ldac(tmp_path / f"day{i}.dat", docs(i, n_docs=60)) for i in range(5)]
    versions = tmp_path / "versions"
    est = learn_online(lda(client2, n_shards=2),
                       (read_ldac(f, str(vocab), blocksize=600) for f in files),
                       version_every=2, versions=str(versions))
    h = batch_records(est)
    assert [(r["batch"], r["rows"]) for r in h] == [(b, 60) for b in range(1, 6)]
    pp = [r["progressive_perplexity"] for r in h]
    assert np.isnan(pp[0]) and np.isfinite(pp[1:]).all() and pp[-1] < pp[1] < 24
    v4, _ = load_estimator(version_path(versions, 4))
    np.testing.assert_array_equal(v4.vocabulary_, TERMS)
    assert v4.perplexity(docs(9)) < 24
    # a file of other terms (its own vocabulary) is refused, naming the batch, the file and
    # the first term that differs; the topics stay those of the batches before
    other = tmp_path / "other.txt"
    other.write_text("\n".join(TERMS[::-1]) + "\n")
    before = est.components_.copy()
    with pytest.raises(ValueError, match=r"^batch 1 of the stream \(file .*day0\.dat\): its "
                                         r"vocabulary differs from the model's vocabulary_: "
                                         r"term 0 is 'w23' there, 'w0' in the model"):
        learn_online(est, [read_ldac(files[0], str(other))])
    np.testing.assert_array_equal(est.components_, before)


def test_bad_lda_streams_are_refused(tmp_path):
    """Each refusal names what is wrong; those about the call come before any batch is made
    and before the versions folder is; the model keeps its topics."""
    seen = []

    def taken(n):
        for i in range(n):
            seen.append(i)
            yield docs(i)

    folder = tmp_path / "v"
    with pytest.raises(ValueError, match=r"^classes=\[0, 1\] is for classifiers: "
                                         r"LatentDirichletAllocation learns documents "
                                         r"without labels"):
        learn_online(lda(), taken(2), classes=[0, 1], version_every=1, versions=str(folder))
    with pytest.raises(ValueError, match="^vocabulary= is for LatentDirichletAllocation"):
        learn_online(LogisticRegression(client="local"), taken(2), vocabulary=TERMS)
    with pytest.raises(ValueError, match=r"^batches='.*ap\.dat' is a path: learn_online "
                                         r"reads no files; .*read_ldac"):
        learn_online(lda(), str(tmp_path / "ap.dat"))
    with pytest.raises(ValueError, match=r"^vocabulary= is not a vocabulary \(a 1-D sequence "
                                         r"of str terms\)"):
        learn_online(lda(), taken(2), vocabulary=np.arange(24))
    # resume=True would resume the checkpoint's finished fit at the first batch (training
    # nothing on it) and be refused by partial_fit at the second: refused up front
    with pytest.raises(ValueError, match=r"^LatentDirichletAllocation\(resume=True\): "
                                         r"learn_online trains each batch from the model "
                                         r"in memory .*set resume=False"):
        learn_online(lda(resume=True, checkpoint=str(tmp_path / "ckpt")), taken(2),
                     version_every=1, versions=str(folder))
    assert seen == [] and not folder.exists() and not (tmp_path / "ckpt").exists()

    est = learn_online(lda(), [docs(0)], vocabulary=TERMS)
    with pytest.raises(ValueError, match=r"^vocabulary= differs from the model's "
                                         r"vocabulary_: term 1 is 'x' there, 'w1' in the "
                                         r"model \(1 of 24 terms differ\)"):
        learn_online(est, taken(1), vocabulary=np.where(TERMS == "w1", "x", TERMS))
    with pytest.raises(ValueError, match=r"^vocabulary= has 23 terms, the model's "
                                         r"vocabulary_ 24"):
        learn_online(est, taken(1), vocabulary=TERMS[:-1])
    assert seen == []
    y = np.zeros(40, dtype=int)
    with pytest.raises(ValueError, match=r"^batch 2 of the stream's second item is not a "
                                         r"vocabulary .*dtype int64.*: a "
                                         r"LatentDirichletAllocation batch is X or "
                                         r"\(X, vocabulary\), without labels"):
        learn_online(est, [docs(1), (docs(2), y)])
    assert [r["batch"] for r in batch_records(est)] == [1, 1]  # the first batch was learnt
    topics, n = est.components_.copy(), len(est.history_)
    with pytest.raises(ValueError, match="^batch 1 of the stream is a tuple of 3 items"):
        learn_online(est, [(docs(1), TERMS, None)])
    with pytest.raises(ValueError, match=r"^batch 1 of the stream's vocabulary differs from "
                                         r"vocabulary=: term 0"):
        learn_online(est, [(docs(1), TERMS[::-1])], vocabulary=TERMS)
    bad = docs(1).toarray()
    bad[3, 5] = -2
    with pytest.raises(DataError, match=r"^batch 1 of the stream: Negative values in data "
                                        r"passed to LatentDirichletAllocation: document 3, "
                                        r"term 5 has count -2"):
        learn_online(est, [bad])
    with pytest.raises(ValueError, match=r"^batch 1 of the stream: X has 25 features"):
        learn_online(est, [np.ones((3, 25))])
    np.testing.assert_array_equal(est.components_, topics)
    assert len(est.history_) == n
