"""Raw text, one document per line, into document-term counts: a tokenizer, a vocabulary built
over the whole input, and the CSR matrix of counts."""

from __future__ import annotations

from functools import lru_cache

import dask.array as da
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from .._cluster_workers import compute
from ._blocks import OBJECTS, box, each, open_paths, plan, read, select, start_lines
from ._csv import LineError
from ._sniff import compressed
from .bow import _vocabulary, check_unique_terms

__all__ = ["read_text", "tokenize"]

DEFAULT_SEPARATOR = r"[^\p{L}\p{N}]+"

#: Strings on which a separator must find no empty match: each split restarts the search at
#: the end of the previous match, as at the start of a text, so these cover every context an
#: empty match can depend on (text start/end, word boundary, newline, letter, digit, space).
_PROBES = ["", "a", "A", "1", "é", " ", ".", "_", "\n", "\t", "a b", "ab", " a", "a ", "a\nb",
           "a.b", ". ."]


@lru_cache(maxsize=64)
def check_separator(separator) -> str:
    """``separator`` if it is a valid RE2 pattern that never matches the empty string.

    pyarrow's regex split makes no progress on an empty match (it would spin forever), so
    ``""``, ``r"\\s*"``, ``r"\\b"`` or ``"$"`` are refused here, before any text is read.

    Raises
    ------
    ValueError
        Not a str, not valid RE2 syntax, or a pattern matching the empty string.
    """
    if not isinstance(separator, str):
        raise ValueError(f"separator must be a str (an RE2 regular expression), got "
                         f"{type(separator).__name__} {separator!r}")
    probes = pa.array(_PROBES, pa.string())
    try:
        pc.match_substring_regex(probes, pattern=separator)
    except pa.ArrowInvalid as exc:
        raise ValueError(f"separator {separator!r} is not a valid RE2 regular expression: "
                         f"{exc}") from None
    found = pc.extract_regex(probes, pattern=f"(?P<dask_ps_separator>{separator})")
    empty = [p for p, m in zip(_PROBES, found.to_pylist()) if m is not None
             and m["dask_ps_separator"] == ""]
    if empty:
        raise ValueError(f"separator {separator!r} matches the empty string (e.g. in "
                         f"{empty[0]!r}); it must match at least one character, such as "
                         f"r\"\\s+\" rather than r\"\\s*\"")
    return separator


def _lines(data: bytes, where: str, line0: int) -> pa.Array:
    """The lines of a block (a final newline ends the last line, it adds no empty one)."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    raw = pa.array(lines, pa.binary())
    try:
        return pc.cast(raw, pa.string())
    except pa.ArrowInvalid:
        for i, line in enumerate(lines, start=1):  # error path: find the line
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                packed = compressed(line) if line0 + i == 1 else ""
                raise LineError(where, line0 + i, f"not UTF-8 text ({exc.reason} at byte "
                                                  f"{exc.start}){packed}") from None
        raise


def tokenize(lines, separator: str = DEFAULT_SEPARATOR, lowercase: bool = True,
             min_length: int = 1) -> tuple[pa.Array, np.ndarray]:
    """Split documents into tokens: the runs of text between matches of ``separator``.

    Parameters
    ----------
    lines : pyarrow string array or sequence of str
        One document each.
    separator : str, default ``r"[^\\p{L}\\p{N}]+"``
        An RE2 regular expression; the default splits at anything but letters and digits
        (Unicode classes). ``"[^a-z]+"`` with ``lowercase=True`` gives the tokens of the
        regex ``[a-z]+`` (ASCII words).
    lowercase : bool, default True
        Lower-case (Unicode) before splitting.
    min_length : int, default 1
        Shorter tokens are dropped.

    Returns
    -------
    tokens : pyarrow string array (n_tokens,)
    document : ndarray of int64 (n_tokens,)
        Index of each token's document.

    Raises
    ------
    ValueError
        ``separator`` is not valid RE2 syntax or matches the empty string (``""``,
        ``r"\\s*"``): it would split nowhere, or forever.

    Examples
    --------
    >>> tokens, doc = tokenize(["The cat, the hat!", "", "Öl 42"])
    >>> tokens.to_pylist(), doc.tolist()
    (['the', 'cat', 'the', 'hat', 'öl', '42'], [0, 0, 0, 0, 2, 2])
    """
    check_separator(separator)
    lines = lines if isinstance(lines, pa.Array) else pa.array(list(lines), pa.string())
    if lowercase:
        lines = pc.utf8_lower(lines)
    split = pc.split_pattern_regex(lines, pattern=separator)
    tokens = pc.list_flatten(split)
    doc = pc.list_parent_indices(split).to_numpy().astype(np.int64)
    keep = pc.greater_equal(pc.utf8_length(tokens), max(int(min_length), 1))
    return tokens.filter(keep), doc[keep.to_numpy(zero_copy_only=False)]


def _block_tokens(fs, block, line0, options):
    data = read(fs, block)
    lines = _lines(data, block.path, line0)
    tokens, doc = tokenize(lines, *options)
    return tokens, doc, len(lines), data.count(b"\n")


def _count_chunk(chunk, fs, options):
    """First pass: lines, newlines and (term, count, documents) of a block."""
    try:
        tokens, doc, n_lines, newlines = _block_tokens(fs, chunk[0], 0, options)
    except LineError as err:
        return box((0, 0, None, err))
    codes = pc.dictionary_encode(tokens)
    terms, idx = codes.dictionary, codes.indices.to_numpy().astype(np.int64)
    count = np.bincount(idx, minlength=len(terms))
    pairs = np.unique(doc * len(terms) + idx) if idx.size else idx  # (doc, term) once each
    df = np.bincount(pairs % max(len(terms), 1), minlength=len(terms))
    table = pa.table({"term": terms, "count": count, "df": df})
    return box((n_lines, newlines, table, None))


def _load_chunk(chunk, fs, options, vocab: pa.Array, dtype):
    block, line0, n_lines = chunk[0]
    tokens, doc, _, _ = _block_tokens(fs, block, line0, options)
    ids = pc.index_in(tokens, value_set=vocab).to_numpy(zero_copy_only=False)
    known = ~np.isnan(ids) if ids.dtype.kind == "f" else np.ones(ids.shape, bool)
    X = sp.csr_matrix((np.ones(int(known.sum()), dtype), (doc[known], ids[known].astype(
        np.int64))), shape=(n_lines, len(vocab)))
    X.sum_duplicates()
    return box((X,))


def read_text(urlpath, vocabulary=None, *, separator: str = DEFAULT_SEPARATOR,
              lowercase: bool = True, min_length: int = 1, min_df: int = 1,
              max_df: float = 1.0, max_features: int | None = None,
              blocksize: int | str | None = "32MiB", dtype=np.float32,
              storage_options: dict | None = None,
              compression: str | None = "infer") -> tuple[da.Array, np.ndarray]:
    """Read raw text, one document per line, into term counts and their vocabulary.

    Lines are split into tokens by :func:`tokenize` (vectorised, in pyarrow). Without a
    ``vocabulary``, a first pass (computed now) counts every term over the whole input and
    the vocabulary is the terms kept by ``min_df`` / ``max_df`` / ``max_features``, sorted
    (as scikit-learn's ``CountVectorizer`` sorts its features); the returned array
    tokenizes the blocks again when computed, counting only vocabulary terms. Every line
    is a document (an empty line is an empty row); a final newline adds none.

    Parameters
    ----------
    urlpath : str, os.PathLike or list of them
        Files or fsspec URLs (globs expanded, in sorted order;
        a folder stands for the files under it but those named ``.*`` or ``_*``).
    vocabulary : str, os.PathLike or sequence of str, optional
        Fixed terms (column ``k`` is ``vocabulary[k]``); other tokens are ignored. A str
        or path is a file of terms, one per line (:func:`~dask_ps.io.read_vocabulary`).
    separator, lowercase, min_length
        The tokenizer (see :func:`tokenize`).
    min_df : int, default 1
        Keep terms found in at least this many documents.
    max_df : float, default 1.0
        Keep terms found in at most this fraction of the documents.
    max_features : int, optional
        Keep only the most frequent terms (by total count, ties by term).
    dtype : numpy dtype, default numpy.float32
        Dtype of the counts in ``X``.
    blocksize, storage_options, compression
        As in :func:`~dask_ps.io.read_libsvm`.

    Returns
    -------
    X : dask.array.Array (n_documents, n_terms) of CSR chunks
        Counts.
    vocabulary : ndarray of str (n_terms,)

    Raises
    ------
    ValueError
        A line that is not UTF-8 (naming file and line), bad arguments (a ``separator``
        matching the empty string or not valid RE2 syntax, a ``vocabulary`` that is
        neither a file nor a sequence of str), or a vocabulary with a repeated term (naming
        it and where: :func:`~dask_ps.io.bow.check_unique_terms`).
    FileNotFoundError
        No file at ``urlpath``, or none at a ``vocabulary`` path.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://read_text_demo.txt", "wb") as f:
    ...     _ = f.write(b"The cat and the hat.\\nA cat!\\n")
    >>> X, vocab = read_text("memory://read_text_demo.txt")
    >>> vocab.tolist()
    ['a', 'and', 'cat', 'hat', 'the']
    >>> X.compute().toarray()
    array([[0., 1., 1., 1., 2.],
           [1., 0., 1., 0., 0.]], dtype=float32)
    """
    if int(min_df) != min_df or min_df < 1:
        raise ValueError(f"min_df must be a positive integer, got {min_df!r}")
    if not 0 < max_df <= 1:
        raise ValueError(f"max_df must be in (0, 1], got {max_df!r}")
    if max_features is not None and (int(max_features) != max_features or max_features < 1):
        raise ValueError(f"max_features must be a positive integer, got {max_features!r}")
    check_separator(separator)
    vocabulary = _vocabulary(vocabulary, storage_options)
    if vocabulary is not None:  # a file's terms are checked as it is read
        check_unique_terms(vocabulary)
    options = (separator, bool(lowercase), int(min_length))
    fs, paths = open_paths(urlpath, storage_options)
    blocks = plan(fs, paths, blocksize, compression)
    stats = compute(each(blocks).map_blocks(_count_chunk, fs, options, dtype=object,
                                            meta=OBJECTS),
                    what="the first pass over the text files")[0]
    line0 = start_lines(blocks, [s[1] for s in stats])
    for l0, s in zip(line0, stats):
        if s[3] is not None:
            raise s[3].shifted(l0)
    n_docs = sum(s[0] for s in stats)
    if vocabulary is None:
        vocab = _build_vocabulary([s[2] for s in stats], n_docs, int(min_df), max_df,
                                  max_features)
    else:
        vocab = vocabulary
    keep = [i for i, s in enumerate(stats) if s[0]] or [0]
    rows = tuple(stats[i][0] for i in keep)
    dtype = np.dtype(dtype)
    parts = each([(blocks[i], line0[i], stats[i][0]) for i in keep]).map_blocks(
        _load_chunk, fs, options, pa.array(vocab.tolist(), pa.string()), dtype,
        dtype=object, meta=OBJECTS)
    X = parts.map_blocks(select, 0, new_axis=1, chunks=(rows, (vocab.shape[0],)), dtype=dtype,
                         meta=sp.csr_matrix((0, vocab.shape[0]), dtype=dtype))
    return X, vocab


def _build_vocabulary(tables: list, n_docs: int, min_df: int, max_df: float,
                      max_features: int | None) -> np.ndarray:
    """Merge the blocks' (term, count, df) tables; the kept terms, sorted."""
    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return np.zeros(0, dtype=str)
    merged = pa.concat_tables(tables).group_by("term").aggregate(
        [("count", "sum"), ("df", "sum")])
    term = merged.column("term")
    count = merged.column("count_sum").to_numpy()
    df = merged.column("df_sum").to_numpy()
    keep = (df >= min_df) & (df <= max_df * n_docs)
    term, count = term.filter(pa.array(keep)), count[keep]
    if max_features is not None and len(term) > max_features:
        order = pc.sort_indices(pa.table({"c": -count, "t": term}),
                                sort_keys=[("c", "ascending"), ("t", "ascending")])
        term = term.take(order[:max_features])
    return np.asarray(term.take(pc.sort_indices(term)).to_pylist(), dtype=str)
