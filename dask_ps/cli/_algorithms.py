"""What an algorithm of ``dask-ps train`` is: an :class:`Algorithm` entry (its estimator, its
flags, its datasets, how it reads data and scores), and the helpers entries share. The entries
live in ``_lr`` (lr, fm), ``_mf``, ``_lda``; :mod:`._registry` lists them.

A new algorithm is one more entry: the estimator's class name, a
:class:`Param` per estimator parameter the command line exposes, its reader and its test
report. Flags default to nothing, so an option not given leaves the estimator's own default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ..exceptions import DataError
from . import _options as opt
from ._params import Param

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Dataset:
    """A public dataset under ``$DASK_PS_DATA/<folder>``: its ``train`` file, its ``test``
    file (None: it has none, ``--test`` may name one), where to download them; ``options``
    are the data options it implies (e.g. ``{"n_features": 123}``), ``paths`` the data
    options naming more of its files (e.g. ``{"vocab": "vocab.txt"}``)."""

    folder: str
    train: str
    test: str | None
    url: str
    options: dict = field(default_factory=dict)
    paths: dict = field(default_factory=dict)


class Loaded(NamedTuple):
    """Training data read onto the cluster, for :func:`dask_ps.cli._run.train`."""

    fit_args: tuple  # estimator.fit(*fit_args)
    test: Any  # what ``Algorithm.score`` takes, or None
    meta: dict  # how the data was read (saved with the model; evaluate reads alike)
    units: float  # work per pass over the data (e.g. non-zeros), counted before the fit
    summary: str  # "1,234 rows x 56 features (4 partitions)"
    fit_kwargs: dict = {}  # estimator.fit(*fit_args, **fit_kwargs)


@dataclass(frozen=True)
class Algorithm:
    """One ``dask-ps train ALGORITHM`` entry.

    Attributes
    ----------
    name, summary : str
    estimator : str
        Class name exported by :mod:`dask_ps`.
    params : tuple of Param
    datasets : dict of str to Dataset
    data_options : callable(argparse group)
        Adds the algorithm's data flags (besides --train, --test, --dataset).
    load : callable(args, client) -> Loaded
        Runs with ``client`` as the current client.
    load_test : callable(path, meta, args) -> test data
        For ``dask-ps evaluate``: read ``path`` as the training data was (``meta``).
    score : callable(estimator, test) -> (int, list of str)
        The test data's rows (ratings, documents) and the lines printed about them (the
        first starts with ``test:``); none of no rows (refused: :func:`~._run.say_scores`).
    export : callable(estimator, meta) -> (tables, description)
        For ``dask-ps export``: pandas tables of the weights and a JSON-able description.
    unit : str
        What ``Loaded.units`` counts ("non-zeros", "ratings").
    check : callable(args)
        Refuses contradictory data options before a cluster starts (OptionError).
    check_inputs : callable(args)
        Checks the input files' headers against the data options (a label or column
        that is not there), after the files are looked up and before a cluster starts.
    report : callable(estimator, args) -> list of str
        Lines printed about the fitted model after the training history (e.g. LDA's top
        words), test data or not.
    files : tuple of str
        The data options (``args`` attributes) naming an input file besides ``--train``
        and ``--test`` (e.g. LDA's ``vocab``): looked up, like them, before a cluster starts.
    weighted : bool
        Whether ``--weight COLUMN`` (sample weights, ``fit(..., sample_weight=...)``) applies;
        refused up front for the others.
    empty : str
        What an empty ``--train`` or ``--test`` (every file of 0 bytes, or no rows read) is
        refused with, after its path (``"no rows"``; mf: ``"no ratings"``, lda: ``"no
        documents"``).
    passes : str
        What one pass of the fit is called in the output (``"epoch"``; gbdt: ``"round"``,
        lda: ``"iteration"``).
    fit_passes : callable(estimator) -> (str, str), optional
        Where the passes depend on the estimator's parameters (lr's ``--solver lbfgs``: its
        passes are function evaluations): what one pass of its fit is called, and a note
        said beside their number once it is fitted (``"5 L-BFGS iterations"``; else "").
        Default: ``(passes, "")``; see :meth:`passes_for`.
    """

    name: str
    summary: str
    estimator: str
    params: tuple
    datasets: dict
    data_options: Callable
    load: Callable
    load_test: Callable
    score: Callable
    export: Callable
    unit: str
    check: Callable = lambda args: None
    check_inputs: Callable = lambda args: None
    report: Callable = lambda est, args: []
    files: tuple = ()
    weighted: bool = False
    empty: str = "no rows"
    passes: str = "epoch"
    fit_passes: Callable | None = None

    def passes_for(self, est) -> tuple[str, str]:
        """What one pass of estimator ``est``'s fit is called in the output, and the note
        said beside their number (:attr:`fit_passes`; "" before the fit)."""
        return self.fit_passes(est) if self.fit_passes else (self.passes, "")

    def data_format(self, args) -> str | None:
        """The format the parsed options read: the ``format`` of the data options as
        :attr:`check` returns them (lr, fm, gbdt: ``--format``, default libsvm; lda: ldac
        or docword), or None (mf)."""
        meta = self.check(args)
        return meta.get("format") if isinstance(meta, dict) else None

    @property
    def cls(self):
        import dask_ps

        return getattr(dask_ps, self.estimator)


# --- shared -----------------------------------------------------------------------------------

def _n_workers(client) -> int:
    from ..cluster import worker_info

    return len(worker_info(client))


def _n_threads(client) -> int:
    from ..cluster import worker_info

    return sum(int(w.get("nthreads", 1)) for w in worker_info(client).values())


def _blocksize(urlpath: str, n_workers: int) -> int:
    """Two partitions per worker, between 256 KiB and 64 MiB."""
    import fsspec

    total = sum(f.fs.size(f.path) for f in fsspec.open_files(urlpath))
    return int(min(max(total // (2 * max(1, n_workers)) + 1, 2**18), 2**26))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _nnz(block) -> int:
    return int(block.nnz)


#: The ``--consistency`` flag of every algorithm.
CONSISTENCY = dict(choices=["bsp", "ssp", "asp"], help="consistency model of the clocks")

#: The checkpoint and recovery flags of every algorithm (its estimator's parameters of these
#: names); ``--resume auto`` continues from ``--checkpoint``; ``--checkpoint none`` is
#: ``checkpoint=None``.
CHECKPOINT = (
    Param("--checkpoint", "checkpoint",
          dict(metavar="URL", type=opt.checkpoint_url,
               help="checkpoint folder reachable from every worker; auto: snapshots in a "
                    "temporary folder deleted after the fit; none (any case): no "
                    "checkpoint (a folder named none: ./none)")),
    Param("--checkpoint-every", "checkpoint_every", dict(type=opt.POSITIVE_INT)),
    Param("--max-recoveries", "max_recoveries", dict(type=opt.NON_NEGATIVE_INT)),
)


#: Bytes per block of LIBSVM test data (read_libsvm's default).
TEST_BLOCKSIZE = "32MiB"

#: ``--zero-based``: the LIBSVM index base, as ``zero_based`` of scikit-learn's
#: ``load_svmlight_file`` and :func:`~dask_ps.io.read_libsvm` take it.
ZERO_BASED = {"auto": "auto", "true": True, "false": False}


#: ``notes["dtype"]`` of :func:`~dask_ps.io.libsvm.read_libsvm_inputs` (no option sets dtype)
FLOAT32 = "dask-ps reads feature values as float32 (no option widens them): scale the feature"


def add_zero_based(g) -> None:
    """``dask-ps train``'s ``--zero-based`` (lr, fm, gbdt: wherever LIBSVM is read)."""
    g.add_argument("--zero-based", choices=list(ZERO_BASED),
                   help="libsvm: whether feature indices start at 0 (true) or 1 (false); "
                        "auto (default): zero-based when --train holds an index 0, as "
                        "scikit-learn's load_svmlight_file zero_based='auto'; --test is read "
                        "with --train's base")


def read_train_test(args, client, meta_of, read):
    """``meta, X, y, w, test`` of ``--train`` and ``--test`` (read now, so that its lines
    are checked before training) as ``meta_of(args)`` says, by ``read(path, meta,
    blocksize, n_features, test)`` returning ``X, y, w`` (``w``: the sample weights of
    ``meta["weight"]``, or None); csv and libsvm in two partitions per worker by default.
    LIBSVM is read by :func:`read_libsvm_train_test` (``read`` is for tables)."""
    import numpy as np

    from ..io._blocks import files_named

    meta = meta_of(args)
    blocksize = args.blocksize
    if blocksize is None and meta["format"] != "parquet":
        blocksize = _blocksize(args.train, _n_workers(client))
    if meta["format"] == "libsvm":
        X, y, test = read_libsvm_train_test(args, meta, blocksize)
        return meta, X, y, None, test
    X, y, w = read(args.train, meta, blocksize)
    if isinstance(X.shape[0], (int, np.integer)) and not X.shape[0]:  # a frame's is lazy
        raise DataError(f"{files_named(args.train)}: no rows")
    meta["n_features"] = int(X.shape[1])
    test = read_test(read, args.test, meta) if args.test else None
    return meta, X, y, w, test


class TestSet(NamedTuple):
    """Test data as a reader made it (``X``, ``y``, ``w`` lazy) and where it comes from, so
    that a label scoring refuses is named by file and line (:func:`check_test_classes`);
    ``w``: the test file's sample weights (its column ``meta["weight"]``), or None."""

    X: Any
    y: Any
    path: str
    meta: dict
    w: Any = None


def read_test(read, path: str, meta: dict, zero_based: str | None = None) -> TestSet:
    """Test data ``path`` read as the training data was (``read`` as in
    :func:`read_train_test`, for tables; the weight column is optional in test files;
    LIBSVM: :func:`read_libsvm_test`, with ``zero_based``)."""
    if meta["format"] == "libsvm":
        return TestSet(*read_libsvm_test(path, meta, zero_based), path, meta)
    X, y, w = read(path, meta, n_features=meta.get("n_features"), test=True)
    return TestSet(X, y, path, meta, w)


def read_libsvm_train_test(args, meta: dict, blocksize) -> tuple:
    """``X, y, test`` of LIBSVM ``--train`` and ``--test`` (a :class:`TestSet` or None),
    read as :func:`sklearn.datasets.load_svmlight_files` reads files together: one width,
    the largest index of both unless ``--n-features`` (or ``--dataset``) gives it, known
    before the fit from the readers' one first pass over both. The index base is
    ``--zero-based``'s, by default the training data's (index 0 anywhere in it:
    zero-based), and the test data is read with it: an index 0 in a test file of a
    one-based training set is refused, naming its line (it would shift every feature).
    Sets ``meta["n_features"]`` and ``meta["zero_based"]`` (saved with the model: evaluate
    reads alike).

    Raises
    ------
    DataError
        A bad line of either file (file, line, token), an index beyond ``--n-features``
        naming the option, no rows in ``--train``.
    """
    from ..io._blocks import files_named
    from ..io.libsvm import read_libsvm_inputs

    n = meta.get("n_features")
    given = f"--n-features {n}" + (f" (--dataset {args.dataset}'s)"
                                   if getattr(args, "dataset", None) else "")
    option = getattr(args, "zero_based", None) or "auto"
    notes = {"width": f"from {given}; without it the width is the largest index of "
                      f"--train and --test",
             "zero": "--train has no feature index 0, so it is read one-based, and --test "
                     "with it; --zero-based true reads both zero-based" if option == "auto"
                     else f"--zero-based {option}", "dtype": FLOAT32}
    inputs = [(args.train, blocksize), *([(args.test, TEST_BLOCKSIZE)] if args.test else [])]
    where: dict = {}
    read, base = read_libsvm_inputs(inputs, n, ZERO_BASED[option], base_inputs=1,
                                    notes=notes, where=where)
    _say_zero(where, "--train" + (" and --test" if args.test else ""))
    (X, y), test = read[0], read[1:]
    if not X.shape[0]:
        raise DataError(f"{files_named(args.train)}: no rows")
    meta.update(n_features=int(X.shape[1]), zero_based=not base)
    return X, y, (TestSet(*test[0], args.test, meta) if test else None)


def _say_zero(where: dict, what: str) -> None:
    """A note that ``zero_based="auto"`` read ``what`` zero-based, naming the first index 0
    (``where["zero"]`` of :func:`~dask_ps.io.libsvm.read_libsvm_inputs`; one stray 0 in a
    one-based file shifts every feature by one); nothing when it read one-based."""
    if "zero" in where:
        path, line = where["zero"]
        print(f"note: {what} read as zero-based: feature index 0 at {path}, line {line} "
              f"(--zero-based auto; --zero-based false refuses it)", flush=True)


def _based(zero: bool) -> str:
    return "zero-based" if zero else "one-based"


def read_libsvm_test(path: str, meta: dict, zero_based: str | None = None) -> tuple:
    """``X, y`` of LIBSVM test data ``path`` for a model trained on ``meta["n_features"]``
    features read with index base ``meta["zero_based"]`` (a model saved without it, before
    it was recorded: decided from ``path``, ``"auto"``), or ``zero_based`` when given
    (``dask-ps evaluate --zero-based``: ``"auto"``, ``"true"``, ``"false"``). Every line
    is checked now, before scoring: an index beyond the model's width is refused (rather
    than dropped, as LIBLINEAR's predict does: a feature the model never saw), naming the
    width. A ``zero_based`` of ``"true"`` or ``"false"`` other than the model's base is
    followed (the user's choice) and noted: every index is then one column off.

    Raises
    ------
    DataError
        A bad line (file, line, token; the model's width or base when they refuse it).
    """
    from ..io.libsvm import read_libsvm_inputs

    n = meta["n_features"]
    notes = {"width": f"the model's width: it was trained on {n:,} features",
             "zero": "the model was trained on one-based data" if zero_based is None
                     else f"--zero-based {zero_based}", "dtype": FLOAT32}
    base = meta.get("zero_based", "auto") if zero_based is None else ZERO_BASED[zero_based]
    trained = meta.get("zero_based")
    if isinstance(base, bool) and isinstance(trained, bool) and base != trained:
        print(f"note: the model was trained on {_based(trained)} LIBSVM data; --zero-based "
              f"{zero_based} reads {path} {_based(base)}: each feature index is read one "
              f"column off the training data's (leave --zero-based out to read it as the "
              f"training data was read)", flush=True)
    read, _ = read_libsvm_inputs([(path, TEST_BLOCKSIZE)], n, base, scan=True, notes=notes)
    return read[0]


#: The formats whose indices ``dask-ps export`` numbers as their files do: format ->
#: (what an index is, what it counts, True zero-based / False one-based / None the data's
#: ``meta["zero_based"]``). UCI docword numbers its words from 1, LDA-C its terms from 0.
_INDEXED = {"libsvm": ("the LIBSVM feature index", "feature", None),
            "docword": ("the UCI docword wordID", "word", False),
            "ldac": ("the LDA-C term id", "term", True)}


def feature_ids(columns, meta: dict, table: str, hashed: int | None = None) -> tuple:
    """``(ids, words)``: the features of column indices ``columns`` of ``X`` (an int array;
    -1, a GBDT leaf's "no feature", is kept) as the training data numbered them, and what
    they are (``model.json``'s ``"feature"``, LDA's ``"term"``; ``dask-ps export`` says
    ``feature: WORDS`` or ``term: WORDS``): a one-based file's indices are the columns + 1
    (UCI docword; LIBSVM by ``meta["zero_based"]``, set by :func:`read_libsvm_train_test`);
    a zero-based file's (LDA-C; LIBSVM), the columns; a LIBSVM model saved before the base
    was recorded keeps the columns and says so. Hashed features (``hashed``: the model's
    ``n_hashed_features``) and a table's columns (CSV, Parquet: ``table`` says what they
    are) keep the column index."""
    import numpy as np

    columns = np.asarray(columns)
    if hashed:
        return columns, (f"the hashed column, 0 to {hashed - 1:,} (the input's features "
                         f"hashed into n_hashed_features = {hashed:,} columns)")
    if meta.get("format") not in _INDEXED:
        return columns, table if meta.get("format") else (
            "the column of X, from 0 (the model records no training file: it was fitted "
            "from Python)")
    index, noun, zero = _INDEXED[meta["format"]]
    base = meta.get("zero_based") if zero is None else zero
    if base is False:
        return (np.where(columns >= 0, columns + 1, columns),
                f"{index}, one-based as the training data numbers it (column j of X is "
                f"{noun} j + 1)")
    if base is True:
        return columns, (f"{index}, zero-based as the training data numbers it (= the column "
                         f"of X)")
    return columns, ("the column of X, from 0; the model file does not record the index base "
                     "of its LIBSVM training data (saved before it was): if that data was "
                     "one-based, its feature j is column j - 1")


def file_columns(urlpath: str, fmt: str, sep: str | None = None, header: bool = True
                 ) -> list[str]:
    """The columns of the first file of ``urlpath`` (a CSV header, or ``"0"``, ``"1"``, ...
    without one; a Parquet schema), read without a cluster."""
    from ..io._blocks import open_paths, plan
    from ..io._csv import header_names, numbered_names
    from ..io.parquet import footer

    fs, paths = open_paths(urlpath)
    if fmt == "parquet":
        return list(footer(fs, paths[0])[1].names)
    comp = plan(fs, paths[:1], None, "infer")[0].compression
    return (header_names if header else numbered_names)(fs, paths[0], sep or ",", comp)


def check_named_columns(urlpath: str, fmt: str, sep: str | None, wanted) -> list[str]:
    """The columns of the first file of ``urlpath`` (:func:`file_columns`), after checking
    that they hold each column of ``wanted`` (``(option, column)`` pairs): DataError
    naming the file, the column, the option that named it and the file's columns."""
    from ..exceptions import DataError
    from ..io._blocks import open_paths

    names = file_columns(urlpath, fmt, sep)
    for option, c in wanted:
        if c not in names:  # as the reader says it, once the cluster has read the file
            raise DataError(f"{open_paths(urlpath)[1][0]}: no column {c!r}, named by "
                            f"{option} (columns: {names})")
    return names


def weight_of(path: str, meta: dict, test: bool) -> str | None:
    """The weight column to read from ``path``: ``meta["weight"]``, but for test data only
    when its first file has that column (scored unweighted otherwise)."""
    weight = meta.get("weight")
    if weight and test and weight not in file_columns(path, meta["format"], meta.get("sep"),
                                                      meta.get("header", True)):
        return None
    return weight


def check_weight_option(args, fmt: str, label: str | None, *named: tuple) -> None:
    """Refuse ``--weight`` naming the ``label`` or a column other options name as a
    feature (``named``: ``(option, columns)`` pairs). (``--format libsvm``: refused with
    the other table options.)

    Raises
    ------
    OptionError
    """
    from ..exceptions import OptionError

    weight = getattr(args, "weight", None)
    if weight is None or fmt == "libsvm":
        return
    if weight == label:
        raise OptionError(f"--weight {weight}: the --label column cannot be the weights")
    for option, cols in named:
        if weight in (cols or ()):
            raise OptionError(f"--weight {weight}: also named by {option}; the weight column "
                              f"is not a feature")


def label_column(meta: dict) -> str:
    """What holds the labels, for messages: ``"the label field"`` (LIBSVM) or ``"label
    column 'click'"``."""
    if meta["format"] == "libsvm":
        return "the label field"
    return f"label column {meta.get('label') or 'Label'!r}"


def checked_classes(found: list, y, path: str, meta: dict) -> tuple:
    """``(labels, where)``: the distinct labels of the blocks' ``found``
    (:func:`label_classes`) of a classifier's training labels ``y`` as the reader made
    them, and :func:`first_row_of` them.

    Raises
    ------
    DataError
        A label that is not a class, named by the file and line of its first row
        (:func:`~dask_ps.algorithms._logistic_data.check_classes`), or a single class.
    """
    import numpy as np

    from ..algorithms._logistic_data import check_classes

    what = f"{path}: {label_column(meta)}"
    labels = np.unique(np.concatenate([f[0] for f in found]))
    where = first_row_of(found, y, path, meta)
    check_classes(labels, what, where)
    if labels.shape[0] == 1:
        raise DataError(f"{what} holds one class only, {labels.tolist()[0]!r}: a classifier "
                        f"needs samples of at least 2 classes")
    return labels, where


def check_test_classes(y: np.ndarray, test: TestSet) -> None:
    """Refuse test labels ``y`` (computed) that are not classes (0.7: scikit-learn's
    metrics failed on them, a bug's traceback), naming the file and line of the first, as
    for the training labels; the blocks are read again on this error path only.

    Raises
    ------
    DataError
        ``"t.svm: the label field holds 0.5 (first at t.svm, line 51), not a class: ..."``.
    """
    import numpy as np

    from ..algorithms._logistic_data import check_classes

    labels = np.unique(y)
    try:
        check_classes(labels, test.path)
    except DataError:
        check_classes(labels, f"{test.path}: {label_column(test.meta)}",
                      first_row_of(block_classes(test.y), test.y, test.path, test.meta))
        raise


def label_classes(y) -> tuple:
    """``(classes, counts, first row of each)`` of a block of labels (an array's chunk or
    a frame's partition)."""
    import numpy as np

    classes, first, counts = np.unique(np.asarray(y), return_index=True, return_counts=True)
    return classes, counts, first


def block_classes(y) -> list:
    """:func:`label_classes` of every block of ``y`` (an array's chunks, a frame's
    partitions), computed on the current client (never waiting on paused workers forever)."""
    import dask

    from ..cluster import compute

    blocks = y.to_delayed()
    blocks = blocks.ravel() if hasattr(blocks, "ravel") else blocks
    # (compute: watched on a client; dask's own scheduler in evaluate, which has none)
    return compute(dask.delayed([dask.delayed(label_classes)(b) for b in blocks]),
                   what="reading the labels")[0]


def first_row_of(found: list, y, urlpath: str, meta: dict):
    """``where(label) -> str | None``: where the first row holding ``label`` lies, from the
    blocks' ``found`` (:func:`label_classes`) of ``y`` as the reader made it (not
    persisted): ``"at <file>, line <n>"`` (a CSV header is line 1, blank and comment lines
    count), ``"at <file>, row group <g>, row <r>"`` for Parquet, or, when ``y``'s chunks
    are not the reader's blocks (``chunk_sources`` of :mod:`dask_ps.io._blocks`; a
    frame's partitions are not) or a block cannot be read again, ``"in data row <n> (the
    header not counted)"`` over the files in order; None for a label no block holds.

    Cheap, and only when an error names a row: the lines before each block come from the
    reader's first pass (in ``y``'s graph); ``row_origin`` reads the one block holding the
    row again to find its line (blank and comment lines are no rows)."""
    def where(value) -> str | None:
        import numpy as np

        from ..io._blocks import chunk_sources, open_paths, row_origin
        from ..io._line_kernels import CSV, SVM

        def at(classes) -> int | None:  # the position of value in classes (NaN: a NaN)
            same = np.flatnonzero(classes != classes if value != value else classes == value)
            return int(same[0]) if same.size else None

        hit = next(((i, first[at(classes)]) for i, (classes, _, first) in enumerate(found)
                    if at(classes) is not None), None)
        if hit is None:
            return None
        i, first = hit
        sources = chunk_sources(y)
        if sources is not None:
            csv = meta["format"] == "csv"
            try:
                return "at " + row_origin(open_paths(urlpath)[0], sources[i], int(first),
                                          CSV if csv else SVM, int(csv))
            except (OSError, ValueError, IndexError):  # the file changed since: as before
                pass
        before = sum(int(counts.sum()) for _, counts, _ in found[:i])
        return f"in data row {before + int(first) + 1:,} (the header not counted)"

    return where


def class_lines(classes, y, proba, sample_weight=None) -> list[str]:
    """The test line (and warnings) of a classifier's test labels and probabilities (and
    the rows' weights: weighted metrics)."""
    import numpy as np

    from . import metrics_line

    line, warnings = metrics_line(classes, np.asarray(y), np.asarray(proba),
                                  None if sample_weight is None else np.asarray(sample_weight))
    return [f"warning: {w}" for w in warnings] + [line]
