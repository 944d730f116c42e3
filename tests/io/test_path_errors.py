"""A path or URL the readers, ``save_estimator``, ``load_estimator``, ``write_tables`` and a
checkpoint cannot use, refused naming the parameter and the URL: an empty one ('' was the
current folder to fsspec: a reader read every file there), an unknown protocol (fsspec's
``ValueError: Protocol not known: foo``), a protocol whose package is missing (fsspec's
``ImportError``, naming no URL)."""

from __future__ import annotations

import pytest

from dask_ps import LogisticRegression
from dask_ps.exceptions import OptionError
from dask_ps.io import read_ctr, read_docword, read_ldac, read_libsvm, read_ratings, read_text
from dask_ps.model._targets import check_store_url
from dask_ps.saving import load_estimator, save_estimator, write_tables

READERS = [read_libsvm, read_ldac, read_docword, read_text, read_ratings, read_ctr]
EMPTY = "an empty path; give a file, folder or URL ('.' for the current folder)"
UNKNOWN = ("unknown protocol 'foo://' (fsspec knows file://, s3://, gs://, http(s)://, "
           "hdfs://, memory:// and others; a local path needs none)")


def _no_gcsfs():
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        return
    pytest.skip("gcsfs is installed")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
@pytest.mark.parametrize("path", ["", [""], ["a.svm", " "]])
def test_an_empty_path_is_refused_by_every_reader(reader, path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.svm").write_text("1 1:1\n")  # what '' read: the current folder's files
    with pytest.raises(OptionError, match=rf"^urlpath: {EMPTY}$".replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        reader(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
def test_an_unknown_protocol_is_an_option_error_naming_the_url(reader):
    with pytest.raises(OptionError) as info:
        reader("foo://b/x.svm")
    assert str(info.value) == f"foo://b/x.svm: {UNKNOWN}"
    assert isinstance(info.value, ValueError)  # as fsspec's was


@pytest.mark.timeout(60)
def test_a_missing_package_names_it_and_the_url():
    _no_gcsfs()
    with pytest.raises(ModuleNotFoundError) as info:
        read_libsvm(["a.svm", "gs://b/x.svm"])
    assert info.value.name == "gcsfs"
    assert str(info.value).startswith("gs://b/x.svm: gs:// URLs need the package gcsfs, "
                                      "which is not installed: pip install gcsfs")


@pytest.mark.timeout(60)
def test_save_load_export_and_checkpoint_refuse_an_empty_path_or_unknown_protocol(tmp_path):
    est = LogisticRegression()
    for call, name in [(lambda p: save_estimator(est, p), "path"), (load_estimator, "path"),
                       (lambda p: write_tables(p, {}, {}), "out"),
                       (check_store_url, "checkpoint")]:
        with pytest.raises(OptionError, match=f"^{name}: an empty path"):
            call("")
        with pytest.raises(OptionError) as info:
            call("foo://x")
        assert str(info.value) == f"{name} foo://x: {UNKNOWN}"
    _no_gcsfs()
    with pytest.raises(ModuleNotFoundError, match="pip install gcsfs"):
        save_estimator(est, "gs://b/m.npz")
