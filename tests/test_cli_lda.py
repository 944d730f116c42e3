"""dask-ps train lda on the real AP corpus (LDA-C, and the same documents as a UCI docword
file): progress, test perplexity, top words; saved, evaluated and exported again."""

import re

import numpy as np
import pytest
from conftest import READ_TOOK
from test_cli import _scheduler_file

from dask_ps.cli import main


def counts(lines):
    import scipy.sparse as sp

    rows, cols, vals = [], [], []
    for d, line in enumerate(lines):
        for pair in line.split()[1:]:
            w, c = pair.split(":")
            rows.append(d), cols.append(int(w)), vals.append(int(c))
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(lines), 10473))


def unigram_perplexity(train_lines, test_lines, beta):
    p = np.asarray(counts(train_lines).sum(axis=0)).ravel() + beta
    test = counts(test_lines)
    return float(np.exp(-test.multiply(np.log(p / p.sum())[None, :]).sum() / test.sum()))


@pytest.mark.timeout(300)
def test_train_lda_on_ap_prints_progress_perplexity_and_top_words(data, client2, tmp_path,
                                                                 capsys):
    from dask_ps.saving import load_estimator

    lines = (data / "lda_ap" / "ap.dat").read_text().splitlines()
    (tmp_path / "train.dat").write_text("\n".join(lines[:2000]) + "\n")
    (tmp_path / "test.dat").write_text("\n".join(lines[2000:]) + "\n")
    vocab = str(data / "lda_ap" / "vocab.txt")
    model = str(tmp_path / "lda.npz")
    argv = ["train", "lda", "--train", str(tmp_path / "train.dat"), "--test",
            str(tmp_path / "test.dat"), "--vocab", vocab, "--topics", "10", "--max-iter", "8",
            "--seed", "1", "--top-words", "6", "--save", model,
            "--scheduler-file", _scheduler_file(client2, tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    progress = [x for x in out if "LatentDirichletAllocation(K=10)" in x and ": loss" in x]
    assert progress and progress[-1].split()[-3] == "8/8:", out
    assert any(x.startswith("training LatentDirichletAllocation on 2,000 documents x 10,473 "
                            "terms") for x in out), out
    rate = next(x for x in out if x.startswith("train wall"))
    assert re.search(r", then [\d.]+ (?:[kM] )?tokens/s \(", rate), rate  # M, k: by the speed
    test = next(x for x in out if x.startswith("test: perplexity"))
    ppl = float(test.split()[2])
    # topics, even after 8 iterations, explain the test documents better than the unigram
    # model of the training documents (4,548 here, with the same smoothing)
    assert 100 < ppl < 0.95 * unigram_perplexity(lines[:2000], lines[2000:], 0.1), test
    topics = [x for x in out if x.startswith("topic ")]
    terms = set((data / "lda_ap" / "vocab.txt").read_text().split())
    assert len(topics) == 10
    for line in topics:
        words = line.split(": ", 1)[1].split()
        assert len(words) == 6 and set(words) <= terms, line
    est, extra = load_estimator(model)
    assert extra["algorithm"] == "lda" and est.vocabulary_.shape == (10473,)
    assert main(["evaluate", model, "--test", str(tmp_path / "test.dat")]) == 0
    assert capsys.readouterr().out.strip() == test
    assert main(["export", model, str(tmp_path / "out"), "--format", "csv"]) == 0
    import pandas as pd

    table = pd.read_csv(tmp_path / "out" / "topics.csv")
    assert table.shape == (10473, 11)
    np.testing.assert_allclose(table.iloc[:, 1:].sum(axis=0), 1.0, rtol=1e-9)
    assert table.term.tolist()[:2] == ["i", "new"]  # a vocabulary: its words, as before
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"term: the term, a word of the model's vocabulary ({vocab})")


def test_train_lda_reads_uci_docword(data, client2, tmp_path, capsys):
    """The first AP documents as a docword file (format from the name, 1-based ids)."""
    lines = (data / "lda_ap" / "ap.dat").read_text().splitlines()[:300]
    rows = []
    for d, line in enumerate(lines):
        for pair in line.split()[1:]:
            w, c = pair.split(":")
            rows.append(f"{d + 1} {int(w) + 1} {c}")
    path = tmp_path / "docword.ap.txt"
    path.write_text(f"{len(lines)}\n10473\n{len(rows)}\n" + "\n".join(rows) + "\n")
    assert main(["train", "lda", "--train", str(path), "--topics", "5", "--max-iter", "3",
                 "--top-words", "3", "--scheduler-file",
                 _scheduler_file(client2, tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    tokens = sum(int(p.split(":")[1]) for line in lines for p in line.split()[1:])
    assert any(f"300 documents x 10,473 terms, {tokens:,} tokens" in x for x in out), out
    read = next(i for i, x in enumerate(out) if x.startswith(f"read {path} onto the workers "))
    assert re.fullmatch(rf"read \S+ onto the workers in {READ_TOOK}: 300 documents x 10,473 "
                        rf"terms, {tokens:,} tokens \(\d+ partitions?\)", out[read]), out[read]
    assert read < next(i for i, x in enumerate(out) if x.startswith("training "))
    topics = [x for x in out if x.startswith("topic ")]
    assert len(topics) == 5 and all(len(x.split(": ")[1].split()) == 3 for x in topics)
    assert all(w.isdigit() for x in topics for w in x.split(": ")[1].split())  # no vocab: ids


def test_a_test_file_of_empty_documents_is_reported_not_a_crash(client2, tmp_path, capsys):
    """A --test file whose documents are all empty ('0' lines) ended a finished training
    with "unexpected ValueError: X holds no token ... (a bug of dask_ps?)", status 1; it is
    now said as an empty test file is (no documents), by train and evaluate alike."""
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(30):
        ids = np.sort(rng.choice(12, 4, replace=False))
        lines.append("4 " + " ".join(f"{i}:{rng.integers(1, 4)}" for i in ids))
    (tmp_path / "train.dat").write_text("\n".join(lines) + "\n")
    (tmp_path / "test.dat").write_text("0\n0\n0\n")
    model = str(tmp_path / "lda.npz")
    assert main(["train", "lda", "--train", str(tmp_path / "train.dat"), "--test",
                 str(tmp_path / "test.dat"), "--topics", "2", "--max-iter", "2",
                 "--top-words", "0", "--save", model,
                 "--scheduler-file", _scheduler_file(client2, tmp_path)]) == 0
    said = "test: no tokens (3 documents, all empty): no perplexity"
    assert said in capsys.readouterr().out.splitlines()
    assert main(["evaluate", model, "--test", str(tmp_path / "test.dat")]) == 0
    assert capsys.readouterr().out.strip() == said


def test_dataset_ap_is_offered_with_its_vocabulary(data, monkeypatch, capsys):
    """lda's --dataset offered no choice ("--dataset {}") although $DASK_PS_DATA holds
    lda_ap/; every dataset of every algorithm names files that are there."""
    from dask_ps.cli import _parser
    from dask_ps.cli._registry import ALGORITHMS
    from dask_ps.cli._run import _resolve_dataset

    monkeypatch.setenv("DASK_PS_DATA", str(data))
    parser = _parser()[1]["lda"]
    assert "--dataset {ap}" in parser.format_help()
    args = parser.parse_args(["--dataset", "ap", "--topics", "3"])
    _resolve_dataset(args, ALGORITHMS["lda"])
    assert (args.train, args.test, args.vocab) == (
        str(data / "lda_ap" / "ap.dat"), None, str(data / "lda_ap" / "vocab.txt"))
    args = parser.parse_args(["--dataset", "ap", "--test", "t.dat", "--vocab", "v.txt"])
    _resolve_dataset(args, ALGORITHMS["lda"])  # no test file of its own: --test is taken
    assert (args.test, args.vocab) == ("t.dat", "v.txt")
    for algo in ALGORITHMS.values():
        for ds in algo.datasets.values():
            for name in (ds.train, ds.test, *ds.paths.values()):
                assert name is None or (data / ds.folder / name).is_file(), (algo.name, name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("vocab, line, n", [("a\nb\n\nc\nd\n", 3, 1),
                                           ("a\n  \nb\n\nc\nd\n\n\n", 2, 2)])
def test_a_vocabulary_with_a_blank_line_is_refused_naming_it(tmp_path, capsys, vocab, line, n):
    """A blank line among the terms of --vocab gave an empty term, printed as nothing among
    a topic's top words ("topic 0: c  b"); now refused naming the file and line, before a
    cluster starts (and by read_vocabulary, which the readers use). Blank lines after the
    last term are still no terms."""
    from dask_ps.exceptions import DataError
    from dask_ps.io import read_vocabulary

    rng = np.random.default_rng(0)
    lines = [f"2 {a}:1 {a + 1}:2" for a in rng.integers(0, 4, 20)]
    (tmp_path / "train.dat").write_text("\n".join(lines) + "\n")
    path = tmp_path / "vocab.txt"
    path.write_text(vocab)
    said = f"{path}, line {line}: a blank line in the vocabulary ({n} in all): line k is the"
    with pytest.raises(DataError, match=f"^{re.escape(said)}"):
        read_vocabulary(str(path))
    assert main(["train", "lda", "--train", str(tmp_path / "train.dat"), "--vocab",
                 str(path), "--topics", "2", "--max-iter", "1"]) == 2
    out = capsys.readouterr()
    assert out.err.startswith(f"dask-ps: error: {said}"), out.err
    assert "cluster:" not in out.out
    path.write_text("a\nb\nc\nd\ne\n\n\n")
    assert read_vocabulary(str(path)).tolist() == ["a", "b", "c", "d", "e"]


def _planted(tmp_path, docword: bool, n_words=12, k=5, n_docs=60, seed=0):
    """A corpus of two planted topics: half the documents draw their tokens from the first
    ``k`` words (ids 1..k of a docword file, 1-based; 0..k-1 of an LDA-C file), the others
    from the rest. Returns the file's path."""
    rng = np.random.default_rng(seed)
    docs = [rng.choice(np.arange(k) if d % 2 else np.arange(k, n_words), 40)
            for d in range(n_docs)]
    counts = [np.bincount(doc, minlength=n_words) for doc in docs]
    if docword:
        rows = [f"{d + 1} {w + 1} {c}" for d, cs in enumerate(counts)
                for w, c in enumerate(cs) if c]
        path = tmp_path / "docword.planted.txt"
        path.write_text(f"{n_docs}\n{n_words}\n{len(rows)}\n" + "\n".join(rows) + "\n")
    else:
        lines = [f"{np.count_nonzero(cs)} " + " ".join(f"{w}:{c}" for w, c in enumerate(cs)
                                                         if c) for cs in counts]
        path = tmp_path / "planted.dat"
        path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.timeout(120)
def test_term_ids_without_vocabulary_are_numbered_as_the_file_does(client1, tmp_path,
                                                                    capsys):
    """Without --vocab, the topics' top words and export's term column gave the columns of X
    (from 0) for a UCI docword file, whose wordIDs start at 1: every id one less than the
    file's. A planted topic in wordIDs 1..5 now prints and exports as 1..5 (and the output
    and model.json say the numbering); an LDA-C file's ids (from 0) are unchanged."""
    import json

    import pandas as pd

    sf = _scheduler_file(client1, tmp_path)
    said = {True: "the UCI docword wordID, one-based as the training data numbers it "
                  "(column j of X is word j + 1)",
            False: "the LDA-C term id, zero-based as the training data numbers it (= the "
                   "column of X)"}
    for docword, planted, rest in ((True, {1, 2, 3, 4, 5}, set(range(6, 13))),
                                   (False, {0, 1, 2, 3, 4}, set(range(5, 12)))):
        path = _planted(tmp_path, docword)
        model = str(tmp_path / f"lda{int(docword)}.npz")
        assert main(["train", "lda", "--train", path, "--topics", "2", "--max-iter", "30",
                     "--seed", "0", "--top-words", "5", "--save", model,
                     "--scheduler-file", sf]) == 0
        out = capsys.readouterr().out.splitlines()
        topics = [x for x in out if x.startswith("topic ")]
        assert out[out.index(topics[0]) - 1] == f"top words by term id: {said[docword]}", out
        tops = sorted((set(map(int, x.split(": ")[1].split())) for x in topics), key=min)
        assert tops[0] == planted and tops[1] <= rest, (docword, topics)
        assert main(["export", model, str(tmp_path / f"out{int(docword)}"), "--format",
                     "csv"]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == f"term: {said[docword]}"
        desc = json.loads((tmp_path / f"out{int(docword)}" / "model.json").read_text())
        assert desc["term"] == said[docword]
        table = pd.read_csv(tmp_path / f"out{int(docword)}" / "topics.csv").set_index("term")
        first = 1 if docword else 0
        assert table.index.tolist() == list(range(first, first + 12))
        topic = table.loc[min(planted)].idxmax()  # the planted topic's column
        assert set(table[topic].nlargest(5).index) == planted
    # a docword test file wider than the model: its ids named as the file numbers them
    wide = tmp_path / "wide" / "docword.wide.txt"
    wide.parent.mkdir()
    wide.write_text("1\n14\n1\n1 14 2\n")
    assert main(["evaluate", str(tmp_path / "lda1.npz"), "--test", str(wide)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{wide}: term ids up to 14, the model knows 12 terms"), "wordID 14 is the last"
