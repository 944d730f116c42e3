"""LatentDirichletAllocation: a resume refuses a checkpoint of another fit; a fit refuses
more topics x terms than memory holds."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from dask_ps import LatentDirichletAllocation
from dask_ps.exceptions import MemoryLimitError, OptionError
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
    # the same terms as a fixed-width array (its padding was hashed: refused), or none
    # named by one side (only the numbers of terms and the counts are compared then)
    resumed = LatentDirichletAllocation(n_components=4, **more).fit(
        X, vocabulary=np.array(vocabulary, dtype="<U10"))
    assert resumed.n_iter_ == 3
    resumed = LatentDirichletAllocation(n_components=4, **dict(more, max_iter=4)).fit(X)
    assert resumed.n_iter_ == 4


def test_more_topics_than_memory_holds_are_refused_before_the_table_is_made():
    """``n_components=10**8`` on a 40 x 30 corpus allocated an 11.2 GiB table, and the
    process was killed by the kernel at 22.9 GB. Refused now before any table or per-topic
    array is made, naming the topics, the terms, the bytes and the memory. (10**15 topics
    need ~100 PB: before the guard, its allocation failed at once with a MemoryError.)"""
    X = sp.csr_matrix(np.random.default_rng(0).poisson(0.5, size=(40, 30)))
    lda = LatentDirichletAllocation(n_components=10**15, max_iter=1, random_state=0,
                                    client="local")
    with pytest.raises(ValueError, match=r"n_components=1000000000000000 topics x n_words="
                                         r"30 terms need at least \d+\.\d GiB in this "
                                         r"process .* more than the \d+\.\d GiB it may use"):
        lda.fit(X)
    assert not hasattr(lda, "components_")


def test_the_table_room_is_checked_on_each_worker(monkeypatch):
    """On a cluster each worker holds its shards of the table and samples with per-topic
    arrays in each thread: a worker's memory limit is checked too, naming it."""
    from types import SimpleNamespace

    from dask_ps.algorithms._lda_steps import check_table_room

    info = {"tcp://a:1": dict(memory_limit=2**30, nthreads=2),
            "tcp://b:1": dict(memory_limit=0, nthreads=2)}  # 0: no limit, not checked
    monkeypatch.setattr("dask_ps.cluster.worker_info", lambda client: info)
    model = SimpleNamespace(is_local=False, n_shards=2, client=None, shards=[
        SimpleNamespace(address=a) for a in info])
    check_table_room(model, 30, 10**5)  # 12 MB of counts, 18 MB per worker to sample
    with pytest.raises(ValueError, match=r"n_components=10000000 topics x n_words=30 terms "
                                         r"need at least 2\.2 GiB in worker tcp://a:1 .* "
                                         r"more than the 1\.0 GiB it may use") as refused:
        check_table_room(model, 30, 10**7)
    # the one type of a model too large for the memory (the command's user error, status 2)
    assert isinstance(refused.value, MemoryLimitError) and isinstance(refused.value, MemoryError)


def test_the_table_room_heeds_an_address_space_limit():
    """Under ``ulimit -v`` (or a container's or Slurm job's cgroup limit) the guard compared
    the table with the machine's RAM: 10**7 topics x 30 terms (3.4 GiB here) passed it, then
    failed in numpy's allocation. What the process may use is now capped by the limit."""
    code = textwrap.dedent("""
        import resource
        import numpy as np, psutil, scipy.sparse as sp
        from dask_ps import LatentDirichletAllocation
        from dask_ps.partitions.worker import process_memory
        vms = psutil.Process().memory_info().vms
        resource.setrlimit(resource.RLIMIT_AS, (vms + 2**31, resource.RLIM_INFINITY))
        assert process_memory() <= 2**31, process_memory()
        X = sp.csr_matrix(np.random.default_rng(0).poisson(0.5, size=(40, 30)))
        try:
            LatentDirichletAllocation(n_components=10**7, max_iter=1, client="local").fit(X)
        except ValueError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"need at least \d+\.\d GiB in this process .* more than the "
                     r"[0-2]\.\d GiB it may use", out.stdout), out.stdout
