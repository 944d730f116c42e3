"""Bag-of-words corpora into document-term CSR: LDA-C (Blei's lda-c) and UCI docword files."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from .._cluster_workers import compute
from ..exceptions import DataError
from . import _libsvm_kernels as _k
from ._blocks import OBJECTS, box, decompress_errors, each, open_paths, plan, read, start_lines
from ._csv import LineError, line_of_row, parse_block, strip_header
from ._sniff import compressed, libsvm_line
from ._storage import named_errors, url_of
from .libsvm import _read_svm

__all__ = ["check_unique_terms", "read_docword", "read_ldac", "read_vocabulary"]


def read_vocabulary(urlpath, storage_options: dict | None = None) -> np.ndarray:
    """Terms, one per line (line k, 0-based, is term id k), surrounding whitespace stripped.

    The one reader of a vocabulary file. A leading UTF-8 byte order mark (what some
    Windows editors save) is dropped: it is no part of the first term.

    Returns
    -------
    ndarray of str, shape (n_terms,)

    Raises
    ------
    OSError
        No file at ``urlpath`` (``FileNotFoundError``, naming a missing bucket), refused
        access (``PermissionError``): one line ``vocabulary '<url>': ...``
        (:func:`~._storage.storage_error`).
    DataError
        A blank line before the last term (``"<file>, line <n>: a blank line in the
        vocabulary ..."``): every line is the term of its id; bytes that are not UTF-8
        (naming the line); ``urlpath`` naming more than one file (a glob or folder); a
        term on two lines (naming the term and both lines: :func:`check_unique_terms`).
    """
    fs, paths = open_paths(urlpath, storage_options, "vocabulary")
    if len(paths) > 1:
        more = ", ..." if len(paths) > 2 else ""
        raise DataError(f"vocabulary {str(urlpath)!r} names {len(paths)} files "
                        f"({url_of(fs, paths[0])}, {url_of(fs, paths[1])}{more}); a "
                        f"vocabulary is one file of terms")
    with named_errors(url_of(fs, paths[0]), "vocabulary"), \
            fs.open(paths[0], "rb", compression="infer") as f:
        data = f.read().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM is no part of term 0
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        packed = compressed(data[:16], option=False)
        raise LineError(url_of(fs, paths[0]), data.count(b"\n", 0, exc.start) + 1,
                        f"not UTF-8 text ({exc.reason}){packed}") from None
    while lines and not lines[-1].strip():  # a final newline adds no term
        lines.pop()
    terms = np.array([t.strip() for t in lines], dtype=str)
    blank = np.flatnonzero(terms == "")
    if blank.size:  # an empty term prints as nothing; dropped, later ids would shift
        raise LineError(url_of(fs, paths[0]), int(blank[0]) + 1,
                        f"a blank line in the vocabulary ({blank.size} in all): line k is the "
                        f"term of id k - 1, so each line must hold a term (an empty term "
                        f"cannot be shown among a topic's words, and leaving the line out "
                        f"would give every later term the id before its own)")
    check_unique_terms(terms, url_of(fs, paths[0]))
    return terms


def check_unique_terms(terms: np.ndarray, path: str | None = None) -> None:
    """Refuse a vocabulary holding a term twice: two columns (ids) of one term, whose
    counts a topic's words would show apart. The one check of the readers' vocabularies
    (:func:`read_text`'s ``vocabulary=``, :func:`read_vocabulary`'s files).

    Raises
    ------
    DataError
        Naming the term and its first two places: ``"the vocabulary has a repeated term
        'cat' (positions 3 and 8, counted from 0)"``, or, of the file ``path`` (a line per
        term), a :class:`~._csv.LineError` ``"<path>, line 9: repeated term 'cat' (line 4
        holds it already): ..."``.
    """
    terms = np.asarray(terms)
    order = np.argsort(terms, kind="stable")  # a term's places ascending: pairs (before, after)
    same = np.flatnonzero(terms[order][1:] == terms[order][:-1])
    if not same.size:
        return
    k = int(np.argmin(order[same + 1]))  # the repeat met first, and its term's place before
    first, again = int(order[same[k]]), int(order[same[k] + 1])
    term = str(terms[again])
    if path is None:
        raise DataError(f"the vocabulary has a repeated term {term!r} (positions {first} and "
                        f"{again}, counted from 0): each term is one column")
    raise LineError(path, again + 1, f"repeated term {term!r} (line {first + 1} holds it "
                                     f"already): line k is the term of id k - 1, and each "
                                     f"term must have one id")


def _vocabulary(vocabulary, storage_options) -> np.ndarray | None:
    """The ``vocabulary`` argument of the readers: None, a file of terms or the terms."""
    if vocabulary is None:
        return None
    if isinstance(vocabulary, str) or hasattr(vocabulary, "__fspath__"):
        try:
            return read_vocabulary(vocabulary, storage_options)
        except FileNotFoundError as exc:
            if not str(exc).endswith(": no such file or folder"):  # a missing bucket
                raise
            raise FileNotFoundError(f"vocabulary {str(vocabulary)!r}: no such file (a str is "
                                    f"a file of terms; give the terms as a list)") from None
    terms = np.asarray(vocabulary, dtype=object)
    if terms.ndim != 1 or not all(isinstance(t, str) for t in terms.tolist()):
        raise ValueError(f"vocabulary must be a sequence of str or a file path (one term a "
                         f"line), got {type(vocabulary).__name__} {vocabulary!r:.80}")
    return terms.astype(str)


def _as_counts(X: sp.csr_matrix, dtype, where) -> sp.csr_matrix:
    """Counts must be positive integers that ``dtype`` holds (not ``1e39`` in float32);
    ``where(row, reason)`` names the row's place for errors."""
    with np.errstate(over="ignore"):  # a count beyond dtype's range: refused below
        out = X.astype(dtype)
    bad = (X.data <= 0) | (X.data != np.floor(X.data))
    beyond = np.isinf(out.data) if out.dtype.kind in "fc" else np.zeros(0, bool)
    if bad.any() or beyond.any():
        k = int(np.argmax(bad | beyond)) if beyond.size else int(np.argmax(bad))
        row = int(np.searchsorted(X.indptr, k, side="right")) - 1
        what = "is not a positive integer" if bad[k] else (
            f"is too large for {out.dtype} (X's dtype: at most {np.finfo(out.dtype).max:.8g}); "
            f"read with dtype=numpy.float64")
        raise where(row, f"count {X.data[k]:g} of term {X.indices[k]} {what}")
    return out


#: The LIBSVM kernel's errors in LDA-C's words (a line is ``N id:count ...``, no label).
_LDAC_REASONS = {
    _k.E_NO_COLON: "malformed pair, expected 'id:count'",
    _k.E_EMPTY_INDEX: "malformed pair, empty term id",
    _k.E_BAD_INDEX: "malformed pair, term id is not an integer",
    _k.E_NEG_INDEX: "negative term id",
    _k.E_BIG_INDEX: "term id beyond the vocabulary's {n_features} terms (ids from 0)",
    _k.E_BAD_VALUE: "count is not a finite number",
    _k.E_BAD_LABEL: "the line's first field is not its number of terms N",
    _k.E_DUP_INDEX: "term id {index} repeated on the line",
}


def _check_ldac(dtype):
    def check(fs, block, line0, X, n_terms):
        def error(row, reason):
            return LineError(block.path, line0 + line_of_row(read(fs, block), row), reason)

        # N counts the terms as written (the parse refused a repeated id)
        written = np.diff(X.indptr)
        bad = n_terms != written
        if bad.any():
            row = int(np.argmax(bad))
            data = read(fs, block)
            line = data.split(b"\n")[line_of_row(data, row) - 1]
            label = libsvm_line(line) and not line.split()[0].isdigit()  # -1, +1, 0.5
            why = (": is it a LIBSVM line (a label, then index:value pairs)? An LDA-C line "
                   "starts with its number of terms" if label else
                   " (a term whose count is NaN is not listed)")
            raise error(row, f"the line says {n_terms[row]:g} terms but lists "
                             f"{written[row]}{why}")
        return _as_counts(X, dtype, error), n_terms.astype(np.int64)
    check.reasons = _LDAC_REASONS
    return check


def read_ldac(urlpath, vocabulary=None, *, blocksize: int | str | None = "32MiB",
              dtype=np.float32, storage_options: dict | None = None,
              compression: str | None = "infer") -> tuple[da.Array, np.ndarray | None]:
    """Read an LDA-C corpus (Blei's lda-c format) into a document-term sparse matrix.

    One document per line, ``N id:count id:count ...``: ``N`` is the number of distinct
    terms on the line, ids are 0-based term ids (indices into the vocabulary), counts are
    positive integers. Files are split at line boundaries into blocks (the LIBSVM reader's
    machinery: the text is read twice, a validating first pass now and the parse when the
    array is computed).

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (globs expanded, in sorted order;
        a folder stands for the files under it but those named ``.*`` or ``_*``).
    vocabulary : str, os.PathLike or sequence of str, optional
        The terms: a file with one term per line (line k is term id k), or the terms. It
        fixes the number of columns; by default the largest id plus one.
    dtype : numpy dtype, default numpy.float32
        Dtype of the counts.
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.

    Returns
    -------
    X : dask.array.Array (n_documents, n_terms) of CSR chunks
        Counts; row ``i`` is line ``i`` (blank lines are skipped).
    vocabulary : ndarray of str (n_terms,) or None

    Raises
    ------
    ValueError
        Naming the file and line: a malformed pair, an id beyond the vocabulary or repeated
        on the line, a count that is not a positive integer, ``N`` different from the
        number of terms listed.

    References
    ----------
    D. Blei, lda-c (www.cs.columbia.edu/~blei/lda-c/), the corpus format of its readme.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://read_ldac_demo.dat", "wb") as f:
    ...     _ = f.write(b"2 0:3 2:1\\n1 1:2\\n")
    >>> X, vocab = read_ldac("memory://read_ldac_demo.dat", ["apple", "pear", "plum"])
    >>> X.compute().toarray()
    array([[3., 0., 1.],
           [0., 2., 0.]], dtype=float32)
    """
    vocab = _vocabulary(vocabulary, storage_options)
    X, _ = _read_svm(urlpath, None if vocab is None else vocab.shape[0], True, blocksize,
                     np.float64, storage_options, compression, check=_check_ldac(dtype),
                     out_dtype=np.dtype(dtype))
    return X, vocab


# --------------------------------------------------------------------------------------
# UCI bag-of-words: "D\nW\nNNZ\n" then "docID wordID count" lines, 1-based ids.

_TRIPLE = ["doc", "word", "count"]
_TYPES = {c: pa.float64() for c in _TRIPLE}


def _docword_header(fs, path: str, compression) -> tuple[int, int, int]:
    with named_errors(url_of(fs, path)), decompress_errors(path, compression), \
            fs.open(path, "rb", compression=compression) as f:
        head = [f.readline() for _ in range(3)]
    try:
        d, w, nnz = (int(x) for x in head)
    except ValueError:
        raise DataError(f"{path}: the first three lines must be the numbers of documents, "
                        f"words and non-zeros, got {b''.join(head)[:80]!r}") from None
    return d, w, nnz


def _docword_block(fs, block, line0: int, n_docs: int, n_words: int) -> tuple:
    """``(doc, word, count)`` int64 arrays of one block (ids 0-based) and its newlines."""
    raw = read(fs, block)
    data, skipped = strip_header(raw, block, 3)
    table = parse_block(data, _TRIPLE, _TYPES, " ", block.path, line0 + skipped)
    cols = [table.column(c).to_numpy(zero_copy_only=False) for c in _TRIPLE]
    limits = (n_docs, n_words, 2**53)  # a count above it: not exact, nor an int64 after it
    for name, v, hi in zip(_TRIPLE, cols, limits):
        bad = ~((v >= 1) & (v <= hi) & (v == np.floor(v)))  # NaN (empty field) is bad too
        if bad.any():
            row = int(np.argmax(bad))
            what = "count" if name == "count" else f"{name} id"
            rng = ("a positive integer" + (" of at most 2**53" if v[row] > hi else "")
                   if name == "count" else f"an integer in [1, {int(hi)}]")
            raise LineError(block.path, line0 + skipped + line_of_row(data, row),
                            f"{what} {v[row]:g} is not {rng}")
    doc, word, count = (c.astype(np.int64) for c in cols)
    return doc - 1, word - 1, count, raw.count(b"\n")


def _docword_scan(chunk, fs, n_docs, n_words):
    try:
        doc, _, _, newlines = _docword_block(fs, chunk[0], 0, n_docs, n_words)
    except LineError as err:
        return box((None, err))
    lo, hi = (int(doc.min()), int(doc.max())) if doc.size else (n_docs, -1)
    return box(((lo, hi, int(doc.size), newlines), None))


def _docword_rows(lo: int, hi: int, n_words: int, dtype, *parts) -> sp.csr_matrix:
    """Documents ``lo:hi`` (0-based) from the parsed blocks that may hold them."""
    doc = np.concatenate([p[0] for p in parts] + [np.zeros(0, np.int64)])
    word = np.concatenate([p[1] for p in parts] + [np.zeros(0, np.int64)])
    count = np.concatenate([p[2] for p in parts] + [np.zeros(0, np.int64)])
    keep = (doc >= lo) & (doc < hi)
    X = sp.csr_matrix((count[keep].astype(dtype), (doc[keep] - lo, word[keep])),
                      shape=(hi - lo, n_words))
    X.sum_duplicates()
    return X


def read_docword(urlpath, vocabulary=None, *, blocksize: int | str | None = "32MiB",
                 dtype=np.float32, storage_options: dict | None = None,
                 compression: str | None = "infer") -> tuple[da.Array, np.ndarray | None]:
    """Read a UCI bag-of-words ``docword`` file into a document-term sparse matrix.

    The format of the UCI Machine Learning Repository's "Bag of Words" data set: three
    header lines (numbers of documents D, words W and non-zeros NNZ), then one
    ``docID wordID count`` line per non-zero, ids 1-based. The file is split into blocks
    of lines; output row chunks follow the blocks when the documents are sorted (as UCI
    ships them), and are equal slices of the D documents otherwise. Documents without a
    line are empty rows.

    Parameters
    ----------
    urlpath : str or os.PathLike
        One docword file or fsspec URL (gzip and the like are read as one block).
    vocabulary : str, os.PathLike or sequence of str, optional
        The ``vocab`` file (line k is word id k + 1) or the words.
    dtype : numpy dtype, default numpy.float32
        Dtype of the counts.
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.

    Returns
    -------
    X : dask.array.Array (D, W) of CSR chunks
        Row i is docID i + 1 and column j wordID j + 1 (the file's ids are 1-based, the
        columns from 0).
    vocabulary : ndarray of str (W,) or None

    Raises
    ------
    ValueError
        Naming the file and line: a bad header, a line without three numbers, an id out of
        range, a count that is not a positive integer, fewer or more lines than NNZ, or a
        vocabulary whose length is not W.

    References
    ----------
    D. Newman, "Bag of Words" data set, UCI Machine Learning Repository (2008),
    doi:10.24432/C5ZG6P.
    """
    fs, paths = open_paths(urlpath, storage_options)
    if len(paths) != 1:
        raise DataError(f"read_docword reads one file, {urlpath!r} matches {len(paths)}")
    blocks = plan(fs, paths, blocksize, compression)
    n_docs, n_words, nnz = _docword_header(fs, paths[0], blocks[0].compression)
    vocab = _vocabulary(vocabulary, storage_options)
    if vocab is not None and vocab.shape[0] != n_words:
        raise DataError(f"the vocabulary has {vocab.shape[0]} words, {paths[0]} says "
                        f"W = {n_words}")
    stats = compute(each(blocks).map_blocks(_docword_scan, fs, n_docs, n_words,
                                            dtype=object, meta=OBJECTS),
                    what="the first pass over the docword files")[0]
    # a block that failed reports no newlines; only the first error is raised, and the
    # blocks before it are complete
    newlines = [0 if s is None else s[3] for s, _ in stats]
    line0 = start_lines(blocks, newlines)
    for l0, (_, err) in zip(line0, stats):
        if err is not None:
            raise err.shifted(l0)
    found = sum(s[2] for s, _ in stats)
    if found != nnz:
        raise DataError(f"{paths[0]}: the header says NNZ = {nnz}, the file has {found} "
                        f"lines of counts")
    ranges = [(s[0], s[1]) for s, _ in stats]
    starts = [lo for lo, hi in ranges if hi >= 0]
    ordered = all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]) if a[1] >= 0 <= b[1])
    if ordered and starts:
        cuts = sorted(set([0] + starts[1:] + [n_docs]))
    else:
        cuts = np.linspace(0, n_docs, len(blocks) + 1).round().astype(int).tolist()
    load = dask.delayed(_docword_block, pure=True)
    parsed = [load(fs, b, l0, n_docs, n_words) for b, l0 in zip(blocks, line0)]
    dtype = np.dtype(dtype)
    chunks = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi <= lo:
            continue
        need = [p for p, (a, b) in zip(parsed, ranges) if b >= lo and a < hi]
        rows = dask.delayed(_docword_rows, pure=True)(lo, hi, n_words, dtype, *need)
        chunks.append(da.from_delayed(rows, (hi - lo, n_words), dtype=dtype,
                                      meta=sp.csr_matrix((0, n_words), dtype=dtype)))
    if not chunks:
        return da.from_array(sp.csr_matrix((0, n_words), dtype=dtype)), vocab
    return da.concatenate(chunks), vocab
