"""read_text / tokenize / read_ldac / read_docword: corpora into document-term counts."""

from __future__ import annotations

import doctest
import re

import dask
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

import dask_ps.io.bow as bow_module
import dask_ps.io.text as text_module
from dask_ps.io import read_docword, read_ldac, read_text, read_vocabulary, tokenize


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def assert_same_csr(A, B):
    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    B.sort_indices()
    assert A.shape == B.shape and A.has_canonical_format
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


# --------------------------------------------------------------------------------------
# Raw text.


def test_lee_token_counts_as_in_provenance(data):
    path = data / "lda_lee" / "lee_background.cor"
    X, vocab = read_text(path, separator="[^a-z]+", blocksize="64KiB")
    assert X.numblocks[0] > 4
    Xc = X.compute()
    assert Xc.shape == (300, 7002)  # 300 documents, 7,002 distinct tokens
    assert Xc.sum() == 60_302  # lowercase alphabetic tokens
    assert (np.diff(Xc.indptr) > 0).all()
    # the same matrix as scikit-learn's CountVectorizer with the same token rule
    text = path.read_text().splitlines()
    cv = CountVectorizer(token_pattern="[a-z]+", lowercase=True, dtype=np.float32)
    assert_same_csr(Xc, cv.fit_transform(text))
    assert vocab.tolist() == cv.get_feature_names_out().tolist()
    # one block or many: the same
    X1, vocab1 = read_text(path, separator="[^a-z]+", blocksize=None)
    assert_same_csr(X1.compute(), Xc)
    assert vocab1.tolist() == vocab.tolist()


def test_vocabulary_limits_match_scikit_learn(data):
    path = data / "lda_lee" / "lee_background.cor"
    text = path.read_text().splitlines()
    for kwargs in [dict(min_df=5), dict(max_df=0.5), dict(max_features=300),
                   dict(min_df=2, max_df=0.9, max_features=1000)]:
        X, vocab = read_text(path, separator="[^a-z]+", blocksize="32KiB", **kwargs)
        k = kwargs.pop("max_features", None)
        cv = CountVectorizer(token_pattern="[a-z]+", dtype=np.float32, **kwargs)
        ref = cv.fit_transform(text)
        terms = cv.get_feature_names_out()
        if k is not None:
            # scikit-learn breaks ties in the count arbitrarily; ours: by term
            counts = np.asarray(ref.sum(axis=0)).ravel()
            keep = sorted(sorted(zip(-counts, terms))[:k], key=lambda t: t[1])
            terms = np.array([t for _, t in keep])
            cv = CountVectorizer(token_pattern="[a-z]+", dtype=np.float32, vocabulary=terms)
            ref = cv.fit_transform(text)
        assert vocab.tolist() == terms.tolist(), kwargs
        assert_same_csr(X.compute(), ref)


def test_fixed_vocabulary_empty_lines_and_unicode(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_bytes("Über alles, über 2 Brücken\r\n\r\nzwei BRÜCKEN\n".encode())
    X, vocab = read_text(path)
    assert vocab.tolist() == ["2", "alles", "brücken", "zwei", "über"]
    assert X.compute().toarray().tolist() == [[1, 1, 1, 0, 2], [0] * 5, [0, 0, 1, 1, 0]]
    X, vocab = read_text(path, vocabulary=["über", "zwei"], blocksize=8)
    assert X.compute().toarray().tolist() == [[2, 0], [0, 0], [0, 1]]
    tokens, doc = tokenize(["a-b  c", "xyz"], min_length=2)
    assert tokens.to_pylist() == ["xyz"] and doc.tolist() == [1]


def test_text_errors(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\n" * 50 + b"caf\xe9\n" + b"fine\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 51: not UTF-8"):
        read_text(path, blocksize=64)
    with pytest.raises(ValueError, match="min_df"):
        read_text(path, min_df=0)
    with pytest.raises(ValueError, match="repeated term"):
        read_text(tmp_path / "bad.txt", vocabulary=["a", "a"])


@pytest.mark.timeout(120, method="thread")  # a regression hangs in pyarrow's split (C++)
@pytest.mark.parametrize("separator", ["", r"\s*", r"\b", "$", "(?m)^", "x|", r"[^a-z]*"])
def test_separator_matching_the_empty_string_is_refused_not_spun_on(tmp_path, separator):
    path = tmp_path / "docs.txt"
    path.write_text("the cat\n\nsat\n")
    with pytest.raises(ValueError, match=r"separator .* matches the empty string"):
        read_text(path, separator=separator)
    with pytest.raises(ValueError, match=r"separator .* matches the empty string"):
        tokenize(["hello world"], separator=separator)


def test_invalid_separator_is_named_up_front(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("the cat\n")
    with pytest.raises(ValueError, match=r"separator '\[\(' is not a valid RE2 regular"):
        read_text(path, separator="[(")
    with pytest.raises(ValueError, match="separator must be a str"):
        tokenize(["a b"], separator=None)
    # valid separators with classes, alternation and anchors that consume a character
    assert tokenize(["a1b, c"], separator=r"[\p{N},]+|\s")[0].to_pylist() == ["a", "b", "c"]


def test_vocabulary_str_is_a_file_a_scalar_is_refused(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("the cat\nfoo the\n")
    (tmp_path / "v.txt").write_text("the\nfoo\n")
    with pytest.raises(FileNotFoundError, match=r"vocabulary 'foo': no such file"):
        read_text(path, vocabulary="foo")
    X, vocab = read_text(path, vocabulary=tmp_path / "v.txt")  # as read_ldac / read_docword
    assert vocab.tolist() == ["the", "foo"]
    assert X.compute().toarray().tolist() == [[1, 0], [1, 1]]
    for bad in [5, [["the"]], ["the", 3]]:
        with pytest.raises(ValueError, match="vocabulary must be a sequence of str or a file"):
            read_text(path, vocabulary=bad)


def test_lda_of_a_text_whose_terms_were_all_filtered_away_says_so(tmp_path):
    from dask_ps import LatentDirichletAllocation

    path = tmp_path / "docs.txt"
    path.write_text("the cat\nsat\n")
    X, vocab = read_text(path, min_df=5)
    assert X.shape == (2, 0) and vocab.shape == (0,)
    lda = LatentDirichletAllocation(n_components=2, max_iter=2, client="local", progress=False)
    with pytest.raises(ValueError, match=r"X has 0 feature\(s\) \(terms\), shape \(2, 0\), "
                                         r"while a minimum of 1 is required by "
                                         r"LatentDirichletAllocation"):
        lda.fit(X)  # refused before a cluster starts
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):  # as in memory
        lda.fit(X.compute())


# --------------------------------------------------------------------------------------
# LDA-C and UCI docword.


def test_ap_token_counts_as_in_provenance(data):
    X, vocab = read_ldac(data / "lda_ap" / "ap.dat", data / "lda_ap" / "vocab.txt",
                         blocksize="256KiB")
    assert X.numblocks[0] == 8
    Xc = X.compute()
    assert Xc.shape == (2246, 10_473) and vocab.shape == (10_473,)
    assert Xc.nnz == 302_031 and Xc.sum() == 435_838
    assert (np.diff(Xc.indptr) > 0).all()  # no empty documents
    assert (Xc.sum(axis=0) > 0).all()  # every term id is used
    assert vocab[0] == "i"  # stripped of its trailing space (PROVENANCE.md)
    # against a plain-Python parse of the format
    lines = (data / "lda_ap" / "ap.dat").read_text().split("\n")
    for i in (0, 1000, 2245):
        n, *pairs = lines[i].split()
        row = {int(a): float(b) for a, b in (p.split(":") for p in pairs)}
        assert int(n) == len(row)
        assert dict(zip(Xc[i].indices.tolist(), Xc[i].data.tolist())) == row


def test_docword_round_trip_of_ap(data, tmp_path):
    X, vocab = read_ldac(data / "lda_ap" / "ap.dat", data / "lda_ap" / "vocab.txt")
    Xc = X.compute().tocoo()
    path = tmp_path / "docword.ap.txt"
    order = np.lexsort((Xc.col, Xc.row))
    with open(path, "w") as f:
        f.write(f"{Xc.shape[0]}\n{Xc.shape[1]}\n{Xc.nnz}\n")
        np.savetxt(f, np.column_stack([Xc.row[order] + 1, Xc.col[order] + 1,
                                       Xc.data[order]]), fmt="%d")
    (tmp_path / "vocab.ap.txt").write_text("\n".join(vocab) + "\n")
    D, dvocab = read_docword(path, tmp_path / "vocab.ap.txt", blocksize="256KiB")
    assert D.numblocks[0] > 4 and D.shape == (2246, 10_473)
    assert_same_csr(D.compute(), Xc.tocsr())
    assert dvocab.tolist() == vocab.tolist()
    # shuffled lines: equal slices instead of block-aligned chunks, the same matrix
    lines = path.read_text().splitlines()
    body = np.random.default_rng(0).permutation(lines[3:]).tolist()
    path.write_text("\n".join(lines[:3] + body) + "\n")
    D = read_docword(path, blocksize="256KiB")[0]
    assert_same_csr(D.compute(), Xc.tocsr())


def test_docword_empty_documents_and_errors(tmp_path):
    path = tmp_path / "docword.txt"
    path.write_text("4\n3\n3\n1 1 2\n1 3 1\n4 2 5\n")
    assert read_docword(path)[0].compute().toarray().tolist() == [
        [2, 0, 1], [0, 0, 0], [0, 0, 0], [0, 5, 0]]
    cases = [("1 4 1", "word id 4 is not an integer in [1, 3]"),
             ("5 1 1", "doc id 5 is not an integer in [1, 4]"),
             ("1 1 0", "count 0 is not a positive integer"),
             ("1 1 1.5", "count 1.5 is not a positive integer"),
             ("1 1", "expected 3 fields, got 2")]
    for bad, reason in cases:
        body = ["1 1 1"] * 40
        body[30] = bad
        path.write_text("4\n3\n40\n" + "\n".join(body) + "\n")
        with pytest.raises(ValueError) as info:
            read_docword(path, blocksize=64)
        assert str(info.value) == f"{path}, line 34: {reason}"
    path.write_text("4\n3\n5\n1 1 1\n")
    with pytest.raises(ValueError, match="NNZ = 5, the file has 1"):
        read_docword(path)
    path.write_text("4\nthree\n5\n")
    with pytest.raises(ValueError, match="first three lines"):
        read_docword(path)


def test_ldac_errors_name_file_and_line(tmp_path):
    path = tmp_path / "corpus.dat"
    good = "2 0:1 3:2"
    for bad, reason in [("3 0:1 3:2", "the line says 3 terms but lists 2"),
                        ("2 0:1 3:2.5", "count 2.5 of term 3 is not a positive integer"),
                        ("2 0:1 3:0", "count 0 of term 3 is not a positive integer"),
                        # LDA-C's words, not LIBSVM's (feature index, n_features, label)
                        ("2 0:1 9:1", "term id beyond the vocabulary's 5 terms (ids from 0): "
                                      "'9:1'"),
                        ("0:1 3:2", "the line's first field is not its number of terms N: "
                                    "'0:1'"),
                        ("nan 0:1 3:2", "first field is not its number of terms N: 'nan'"),
                        ("2 0:1 x:2", "term id is not an integer"),
                        ("2 0:1 3:inf", "count is not a finite number"),
                        ("2 0:1 -3:2", "negative term id"),
                        ("2 0:1 3:nan", "the line says 2 terms but lists 1 (a term whose "
                                        "count is NaN is not listed)"),
                        ("2 3:1 3:2", "term id 3 repeated on the line: '3:2'"),
                        # a LIBSVM line (a9a's first): its label is no count of terms
                        ("-1 3:1 4:1", "the line says -1 terms but lists 2: is it a LIBSVM "
                                        "line (a label, then index:value pairs)? An LDA-C "
                                        "line starts with its number of terms"),
                        ("+1 3:1 4:1", "the line says 1 terms but lists 2: is it a LIBSVM")]:
        lines = [good] * 60
        lines[44] = bad
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError, match=rf"corpus\.dat, line 45: .*{re.escape(reason)}"):
            read_ldac(path, ["a", "b", "c", "d", "e"], blocksize=100)


def test_vocabulary_file(tmp_path):
    (tmp_path / "v.txt").write_text(" a \nb\n\n")
    assert read_vocabulary(tmp_path / "v.txt").tolist() == ["a", "b"]


def test_a_utf8_bom_is_no_part_of_the_first_term(tmp_path):
    """A vocabulary saved with a UTF-8 byte order mark (a Windows editor) kept it in term 0:
    '\\ufeffi', shown as 'i' but not equal to the 'i' of the same file saved without it, so
    a model's top words printed it and partial_fit refused the other file's vocabulary."""
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfi\r\nam\r\n")
    (tmp_path / "plain.txt").write_bytes(b"i\nam\n")
    (tmp_path / "c.dat").write_text("2 0:1 1:2\n1 1:1\n")
    assert read_vocabulary(tmp_path / "bom.txt").tolist() == ["i", "am"]
    for reader in (read_ldac, read_text):
        path = tmp_path / ("c.dat" if reader is read_ldac else "plain.txt")
        X, vocab = reader(str(path), str(tmp_path / "bom.txt"))
        assert vocab.tolist() == reader(str(path), str(tmp_path / "plain.txt"))[1].tolist()
    (tmp_path / "d.txt").write_text("2\n2\n3\n1 1 1\n1 2 2\n2 2 1\n")
    assert read_docword(str(tmp_path / "d.txt"), str(tmp_path / "bom.txt"))[1].tolist() == [
        "i", "am"]


@pytest.mark.parametrize("module", [text_module, bow_module])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
