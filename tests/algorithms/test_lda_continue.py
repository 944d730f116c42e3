"""LatentDirichletAllocation: partial_fit and checkpoint/resume (training continued from the
fitted or saved topics), and the per-iteration timing records."""

import numpy as np
import pytest
import scipy.sparse as sp
from test_lda import planted

from dask_ps import LatentDirichletAllocation
from dask_ps.algorithms._lda_steps import TIMES

pytestmark = pytest.mark.timeout(900)


def lda(client="local", **kw):
    params = dict(n_components=3, max_iter=30, client=client, random_state=0, progress=False)
    params.update(kw)
    return LatentDirichletAllocation(**params)


def _planted_topic_of_each_topic(model, topic_of):
    return [int(np.bincount(topic_of[row]).argmax()) for row in model.top_words(5)]


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_partial_fit_continues_from_the_fitted_topics(where, request):
    X, topic_of = planted(seed=7)
    client = "local" if where == "local" else request.getfixturevalue("client2")
    model = lda(client).fit(X)
    before = _planted_topic_of_each_topic(model, topic_of)
    assert sorted(before) == [0, 1, 2]
    # another pass over the same documents: the counts before are not kept (else counted twice)
    model.set_params(max_iter=5, stream_decay=0).partial_fit(X)
    # the topics keep their numbers: topic k still holds the same planted topic's words
    assert _planted_topic_of_each_topic(model, topic_of) == before
    h = [r for r in model.history_ if "loss" in r]
    assert [r["epoch"] for r in h] == list(range(1, 36)) and model.n_iter_ == 35
    fresh = lda(client, max_iter=5).fit(X)
    first_fresh = [r for r in fresh.history_ if "loss" in r][0]["loss"]
    # warm: its first iteration is far better than a fresh fit's first
    assert h[30]["loss"] < first_fresh - 0.1
    assert h[-1]["loss"] == pytest.approx(h[29]["loss"], rel=0.03)
    # the table counts the new assignments alone (not the old counts too)
    np.testing.assert_allclose(model.components_.sum(),
                               X.sum() + model.topic_word_prior_ * model.components_.size)


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_partial_fit_keeps_the_counts_before_as_the_prior(where, request):
    """stream_decay=1 (the default): a batch's counts are added to the model's (streaming
    Gibbs sampling); 0.5 keeps half of them, rounded; the loss is of the batch's tokens given
    the counts kept. Before, each batch's counts replaced the model's."""
    X, topic_of = planted(seed=7)
    X1, X2 = X[:60], X[60:]
    client = "local" if where == "local" else request.getfixturevalue("client2")
    for decay in (1.0, 0.5):
        model = lda(client, max_iter=20, stream_decay=decay).fit(X1)
        counts = np.rint(model.components_ - model.topic_word_prior_).astype(np.int64)
        before = _planted_topic_of_each_topic(model, topic_of)
        model.set_params(max_iter=5).partial_fit(X2)
        kept = np.rint(counts * decay).sum()
        got = np.rint(model.components_ - model.topic_word_prior_)
        assert got.sum() == kept + X2.sum() and (got >= 0).all()
        if decay == 1.0:  # every count of the fit is still there (none taken back)
            assert (got >= 0).all() and got.sum() == X.sum()
        assert _planted_topic_of_each_topic(model, topic_of) == before
        h = [r for r in model.history_ if "loss" in r][20:]
        assert len(h) == 5 and all(np.isfinite(r["loss"]) for r in h)
        # the loss is per token of X2 given the counts kept: about that of a fresh fit's
        # end (3 planted topics on 8 words each: log 8 ~ 2.08 for the words alone)
        assert 1.5 < h[-1]["loss"] < 4.0, h[-1]["loss"]


def test_a_stream_of_small_batches_learns_more_when_its_counts_are_kept():
    """Eight batches of 12 documents: keeping every batch's counts (stream_decay=1) gives
    topics of ~96 documents, replacing them (0) those of the last 12: lower held-out
    perplexity with the former."""
    X, _ = planted(n_docs=160, n_topics=4, words_per_topic=30, length=30, seed=11)
    held_out, stream = X[:64], X[64:]
    perplexity = {}
    for decay in (0.0, 1.0):
        model = lda(n_components=4, max_iter=10, stream_decay=decay)
        for b in range(8):
            model.partial_fit(stream[12 * b: 12 * (b + 1)])
        perplexity[decay] = model.perplexity(held_out)
    assert perplexity[1.0] < 0.97 * perplexity[0.0], perplexity


def test_partial_fit_unfitted_is_fit_and_checks_its_input():
    X, _ = planted(n_docs=40, seed=8)
    a = lda(max_iter=5).partial_fit(X)
    b = lda(max_iter=5).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    with pytest.raises(ValueError, match="features"):
        a.partial_fit(np.ones((3, X.shape[1] + 1)))
    with pytest.raises(ValueError, match="integer counts: document 1, term 2 has count 0.5"):
        bad = np.zeros((3, X.shape[1]))
        bad[1, 2] = 0.5
        a.partial_fit(bad)
    with pytest.raises(ValueError, match="fitted model has 3 topics"):
        a.set_params(n_components=4).partial_fit(X)


def test_partial_fit_refuses_other_terms_than_the_models():
    """partial_fit(X, vocabulary=...) replaced vocabulary_ with any terms: reversed, the
    top words turned into other words while the topics' columns stayed the model's (a
    new user's run), where learn_online refuses them. The model is left as it was."""
    X, _ = planted(n_docs=40, seed=8)
    terms = [f"w{i}" for i in range(X.shape[1])]
    a = lda(max_iter=3).fit(X, vocabulary=terms)
    before = a.components_.copy()
    with pytest.raises(ValueError, match=rf"^vocabulary= differs from the model's "
                                         rf"vocabulary_: term 0 is 'w{X.shape[1] - 1}' there, "
                                         rf"'w0' in the model \({X.shape[1]} of {X.shape[1]} "
                                         rf"terms differ\); partial_fit goes on with the "
                                         rf"fitted topics"):
        a.partial_fit(X, vocabulary=terms[::-1])
    with pytest.raises(ValueError, match=rf"^vocabulary= has 2 terms, the model's "
                                         rf"vocabulary_ {X.shape[1]}"):
        a.partial_fit(X, vocabulary=["x", "y"])
    np.testing.assert_array_equal(a.components_, before)
    assert a.vocabulary_.tolist() == terms
    a.partial_fit(X, vocabulary=np.array(terms, dtype=object))  # the same terms: goes on
    b = lda(max_iter=3).fit(X)  # fitted without terms: it takes them
    assert b.partial_fit(X, vocabulary=terms).vocabulary_.tolist() == terms


def test_history_records_the_time_of_each_part_of_an_iteration(client2):
    X, _ = planted(n_docs=60, seed=9)
    model = lda(client2, max_iter=6).fit(X)
    steps = [r for r in model.history_ if "event" not in r]
    assert len(steps) == 6
    for r in steps:
        assert all(r[k] >= 0 for k in TIMES)
        # each the slowest task's: the slowest sum is at most the sum of the slowest parts
        assert max(r["word_s"], r["doc_s"]) <= r["sample_s"] <= r["word_s"] + r["doc_s"] + 1e-9


def test_checkpoint_and_resume_continue_the_topics(tmp_path, client2):
    """A resume drew every token's topic anew from the checkpoint's counts (a checkpoint held
    no assignments) and sampled on from the RNG state of its fresh draw: another chain than
    the uninterrupted fit's (on these documents, 64 of 72 cells of components_ differed
    after 16 iterations, resumed after 10). The checkpoint now holds the sampler's state and
    the sampler's draws are seeded per partition and iteration: the resumed fit is the
    uninterrupted one, bit for bit."""
    X, topic_of = planted(seed=10)
    url = str(tmp_path / "lda-ck")
    first = lda(client2, max_iter=10, checkpoint=url, checkpoint_every=5).fit(X)
    topics = _planted_topic_of_each_topic(first, topic_of)
    assert sorted(topics) == [0, 1, 2]
    resumed = lda(client2, max_iter=16, checkpoint=url, checkpoint_every=5,
                  resume=True).fit(X)
    done = [r for r in first.history_ if "loss" in r]
    ran = [r for r in resumed.history_ if "loss" in r]
    assert [r["epoch"] for r in ran] == list(range(1, 17))
    # iterations 1..10 are the saved run's records (from the checkpoint), not run again
    assert [(r["loss"], r["time"]) for r in ran[:10]] == [(r["loss"], r["time"]) for r in done]
    # the uninterrupted fit (without a checkpoint: its jobs end elsewhere, which changes
    # nothing either) gives the same model and losses
    whole = lda(client2, max_iter=16).fit(X)
    np.testing.assert_array_equal(resumed.components_, whole.components_)
    assert [r["loss"] for r in ran] == [r["loss"] for r in whole.history_ if "loss" in r]
    assert _planted_topic_of_each_topic(resumed, topic_of) == topics
    # the table counts the assignments alone, not the restored counts too
    np.testing.assert_allclose(resumed.components_.sum(),
                               X.sum() + resumed.topic_word_prior_ * resumed.components_.size)
    # a fresh fit on the same checkpoint URL without resume starts over
    again = lda(client2, max_iter=3, checkpoint=url, checkpoint_every=5).fit(X)
    assert [r["epoch"] for r in again.history_ if "loss" in r] == [1, 2, 3]


def test_where_the_jobs_end_changes_nothing_of_the_chain(client2):
    """A job ended without the doc phase of its last iteration, run by the next job against
    the totals pulled then: a fit with a callback (one job per iteration) drew another chain
    than one without. The skipped doc phase now runs with the totals and draws it would
    have had."""
    X, _ = planted(n_docs=80, seed=12)
    whole = lda(client2, max_iter=8).fit(X)
    stepped = lda(client2, max_iter=8, callbacks=[lambda record: False]).fit(X)
    np.testing.assert_array_equal(stepped.components_, whole.components_)
    assert [r["loss"] for r in stepped.history_] == [r["loss"] for r in whole.history_]


def mixed(n_docs=200, n_topics=5, n_words=60, length=60, seed=0):
    """Counts CSR (n_docs, n_words) of documents mixing topics that share their words: which
    topic a token is of depends on the other words of its document."""
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.3), n_topics)
    rows = np.zeros((n_docs, n_words), np.int64)
    for d in range(n_docs):
        per_topic = rng.multinomial(length, rng.dirichlet(np.full(n_topics, 0.1)))
        for k in np.flatnonzero(per_topic):
            rows[d] += rng.multinomial(per_topic[k], phi[k])
    return sp.csr_matrix(rows)


def test_a_resumed_fit_goes_on_as_the_uninterrupted_one(tmp_path):
    """A resume drew each token's topic from the checkpoint's counts: on AP, resumed after
    iteration 170 at loss 8.59, the first iteration had 9.61 from ``p(k | w)``, about 8.6
    from ``p(k | w, d)``. It now restores the sampler's state: the same losses and model as
    the uninterrupted fit, in-process too, and from the checkpoint a fit saves before its
    first iteration (the doc proposals pending, not the word proposals)."""
    X = mixed(seed=11)
    url = str(tmp_path / "ck")
    kw = dict(n_components=5, doc_topic_prior=0.1, topic_word_prior=0.1, mh_steps=2,
              checkpoint=url, checkpoint_every=10)
    first = lda(max_iter=40, **kw).fit(X)
    resumed = lda(max_iter=45, resume=True, **kw).fit(X)
    whole = lda(max_iter=45, **dict(kw, checkpoint=str(tmp_path / "whole"))).fit(X)
    done = [r["loss"] for r in first.history_ if "loss" in r]
    ran = [r["loss"] for r in resumed.history_ if "loss" in r]
    assert len(ran) == 45 and ran[:40] == done
    assert ran == [r["loss"] for r in whole.history_ if "loss" in r]
    np.testing.assert_array_equal(resumed.components_, whole.components_)
    assert done[0] - done[-1] > 0.3  # the chain had gone a long way: a redraw would show

    import shutil

    from dask_ps.model import format as ck

    start = str(tmp_path / "start")
    lda(max_iter=1, **dict(kw, checkpoint=start, checkpoint_every=1)).fit(X)
    versions = ck.list_versions(start)[0]
    assert len(versions) == 2  # before iteration 1 and after it
    shutil.rmtree(f"{start}/v{versions[-1]:06d}")  # the fit stopped before iteration 1
    assert ck.list_versions(start)[0] == versions[:1]
    again = lda(max_iter=45, resume=True, **dict(kw, checkpoint=start)).fit(X)
    np.testing.assert_array_equal(again.components_, whole.components_)
    assert [r["loss"] for r in again.history_ if "loss" in r] == ran


def test_partial_fits_into_a_checkpoint_keep_two_versions_in_all(tmp_path):
    """Each partial_fit saved its versions and pruned only its own: 2 more per call, never
    pruned (trial 9, F11); the partial_fits going on from a fit now keep 2 in all."""
    import os

    X, _ = planted(seed=7)
    url = str(tmp_path / "ck")
    model = lda(max_iter=2, checkpoint=url, checkpoint_every=1)
    counts = [len(os.listdir(url)) for _ in range(4) if model.partial_fit(X) is model]
    assert counts == [2, 2, 2, 2]
    assert sorted(os.listdir(url)) == ["v000008", "v000009"]


def test_a_checkpoint_of_the_counts_alone_is_refused_as_such(tmp_path):
    """A checkpoint written before LDA kept its token assignments (the word-topic counts
    alone) was refused as "holds another fit: tables ['nwk'] (this fit's: ['lda_state',
    'nwk'])", as if the data or parameters had changed; the refusal now says what it is, and
    nothing is restored or saved."""
    from dask_ps import PSModel
    from dask_ps.exceptions import OptionError
    from dask_ps.model import format as ck

    X, _ = planted(seed=10)
    url = str(tmp_path / "ck")
    old = PSModel("local")
    old.add_table("nwk", (X.shape[1] * 3,), "int32")
    old.save(url, clock=2)
    old.close()
    versions = ck.list_versions(url)
    with pytest.raises(OptionError, match=r"version 1 holds the word-topic counts only: a "
                                          r"dask_ps before 2026-12-07 wrote it, without the "
                                          r"token assignments"):
        lda(max_iter=4, checkpoint=url, resume=True).fit(X)
    assert ck.list_versions(url) == versions
