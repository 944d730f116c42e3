"""LatentDirichletAllocation checkpoints: a resume refuses a checkpoint of another fit."""

import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps import LatentDirichletAllocation
from dask_ps.exceptions import OptionError
from dask_ps.model import format as ck

pytestmark = pytest.mark.timeout(300)


def test_a_checkpoint_of_other_terms_or_documents_is_refused(tmp_path):
    """Only the flat table's length (V * K) was compared: a resume onto the corpus with its
    columns reversed went on silently (each term with another's counts), and so did one
    of 40 terms and 3 topics onto a checkpoint of 30 and 4. The checkpoint now records the
    numbers of terms and topics, the vocabulary and a checksum of the counts; another fit
    is refused before anything is restored, naming what differs."""
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(0.5, size=(40, 30)))
    vocabulary = [f"w{j}" for j in range(30)]
    url = str(tmp_path / "ck")
    kw = dict(max_iter=2, random_state=0, client="local", checkpoint=url, resume=True)
    LatentDirichletAllocation(n_components=4, **kw).fit(X, vocabulary=vocabulary)
    versions = ck.list_versions(url)
    more = dict(kw, max_iter=3)
    with pytest.raises(OptionError, match=r"holds another fit: counts '[0-9a-f]{16}' \(this "
                                          r"fit's: '[0-9a-f]{16}'\)"):
        LatentDirichletAllocation(n_components=4, **more).fit(X[:, ::-1],
                                                              vocabulary=vocabulary)
    with pytest.raises(OptionError, match=r"vocabulary '[0-9a-f]{64}' \(this fit's: "):
        LatentDirichletAllocation(n_components=4, **more).fit(X, vocabulary=vocabulary[::-1])
    wide = sp.csr_matrix(rng.poisson(0.5, size=(40, 40)))
    with pytest.raises(OptionError, match=r"n_words 30 \(this fit's: 40\); n_topics 4 "
                                          r"\(this fit's: 3\)"):
        LatentDirichletAllocation(n_components=3, **more).fit(wide, vocabulary=[
            f"w{j}" for j in range(40)])
    assert ck.list_versions(url) == versions  # nothing restored nor saved
    resumed = LatentDirichletAllocation(n_components=4, **more).fit(X, vocabulary=vocabulary)
    assert resumed.n_iter_ == 3
