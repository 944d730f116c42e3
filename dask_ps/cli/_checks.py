"""The checks ``dask-ps`` makes of its files before any cluster starts (inputs that name no
file, that are empty or not the format asked for, a model that is not there, a save that
could not be written, test data of no row), and the error of test data of no rows."""

from __future__ import annotations

from ..exceptions import DataError, OptionError


def check_files(urlpath: str, option: str, blocksize: int | None = None) -> None:
    """Fail before any cluster starts if ``urlpath`` names no file (or a missing one), or
    if ``blocksize`` (``--blocksize``, of text input) cuts it into too many small blocks
    (:func:`~dask_ps.io._blocks.plan`'s rule)."""
    from ..io._blocks import plan
    from ..io._storage import url_of

    fs, paths = _opened(urlpath, option)
    absent = [p for p in paths if not fs.isfile(p)]
    if absent:
        why = " (a directory)" if fs.isdir(absent[0]) else _no_bucket(fs, urlpath)
        raise FileNotFoundError(f"{option} {url_of(fs, absent[0])}: no such file{why}")
    if blocksize is not None:
        try:
            plan(fs, paths, blocksize, "infer")
        except ValueError as exc:
            raise OptionError(f"--blocksize {blocksize}: {exc}") from None


def check_contents(urlpath: str, option: str, libsvm: bool, header_flag: bool = False,
                   empty: str = "no rows") -> None:
    """Fail before any cluster starts on what the files' sizes and the first KiB of the
    first file tell (nothing more is read: data may be large, or remote): every file of
    ``--train`` empty (``"<file>: no rows"``, or ``empty``'s words, as the readers say
    it once the cluster has read them; the file named as a bad line names it,
    :func:`~dask_ps.io._blocks.files_named`; ``--test``: :func:`no_test_rows`), or given
    as LIBSVM (``libsvm``) a first file that is not, with the hint of the format it looks
    like (:func:`~dask_ps.io._sniff.other_format`; ``header_flag``: the command has
    ``--no-header``).

    Raises
    ------
    DataError
        ``"data.tsv, line 1: not a LIBSVM line (a label, then index:value pairs): '1\\t0.6'
        (is this a table of fields separated by '\\t'? ...)"``.
    """
    from ..io._blocks import files_named
    from ..io._sniff import compressed, first_line, other_format

    fs, paths = _opened(urlpath, option)
    if all(fs.size(p) == 0 for p in paths):  # as the readers say it, and say_scores
        raise (no_test_rows(urlpath, empty, paths) if option == "--test"
               else DataError(f"{files_named(urlpath, paths)}: {empty}"))
    if not libsvm:
        return
    try:
        with fs.open(paths[0], "rb", compression="infer") as f:
            head = f.read(1024)
    except (OSError, EOFError, ValueError):  # unreadable here: the reader will say why
        return
    if compressed(head):  # the command takes no compression: only the renaming is said
        raise DataError(f"{paths[0]}: not LIBSVM text{compressed(head, option=False)}")
    hint = other_format(head, header_flag)
    if hint and head.startswith(b"PAR1"):
        raise DataError(f"{paths[0]}: not LIBSVM text{hint}")
    if hint:
        line = first_line(head)[:60].decode("utf-8", "replace")
        raise DataError(f"{paths[0]}, line {_line_of(head)}: not a LIBSVM line (a label, "
                        f"then index:value pairs): {line!r}{hint}")


def check_test_rows(urlpath: str, fmt: str, header: bool, empty: str) -> None:
    """Fail before any cluster starts if test data ``urlpath`` holds no data row, where its
    reader (a dataframe's) tells it only once the rows are scored, after the fit, or (CTR
    CSV) once the cluster has started. Only as much is read as finds a first row: a text
    file's header line, then blocks up to one holding anything but whitespace (the
    dataframe readers' rule: a block of whitespace alone is no rows; such a line among
    rows is theirs to refuse; CTR CSV: anything but empty lines); a Parquet file's footer (its
    ``num_rows``). The check passes as soon as one file has a row, and for a file it
    cannot read (the reader will say why).

    Parameters
    ----------
    urlpath : str
        ``--test``: a file, folder or glob, local or an fsspec URL (compressed as the
        names say).
    fmt : str
        ``"csv"``: GBDT's tables (:func:`~dask_ps.io._frame.read_frame`); ``"ctr"``: CTR
        CSV tables (:func:`~dask_ps.io.ctr.read_ctr`, whose first pass counts the rows only
        once the cluster has started), where only empty lines are no rows, as that reader
        counts them: a line of spaces or tabs is a row to it (of too few fields, refused
        when read); ``"ratings"`` (:func:`~dask_ps.io.ratings.read_ratings`: Parquet when
        every file is, else text); ``"parquet"``: any Parquet (GBDT's tables, CTR tables).
        Other formats are not looked at: their readers count rows in a first pass, before
        the fit (LIBSVM, LDA's formats).
    header : bool
        Whether each text file's first line is a header.
    empty : str
        What no rows are called (``"no rows"``; mf: ``"no ratings"``).

    Raises
    ------
    DataError
        No file holds a row: :func:`no_test_rows`, as the readers say it once scored
        (``"--test /data/t.csv: no rows to score the model on"``).
    """
    if fmt not in ("csv", "ctr", "ratings", "parquet"):
        return
    fs, paths = _opened(urlpath, "--test")
    parquet = fmt == "parquet" or fmt == "ratings" and all(
        p.endswith((".parquet", ".parq")) for p in paths)
    blank = b"\r\n" if fmt == "ctr" else None  # (None: any whitespace)
    if not any(_parquet_rows(fs, p) if parquet else _text_rows(fs, p, header, blank)
               for p in paths):
        raise no_test_rows(urlpath, empty, paths)


def _parquet_rows(fs, path: str) -> bool:
    """Whether Parquet file ``path``'s footer counts a row (True if it cannot be read)."""
    from ..io.parquet import footer

    try:
        return footer(fs, path)[0].num_rows > 0
    except (OSError, EOFError, ValueError):  # (DataError: not Parquet) the reader says it
        return True


def _text_rows(fs, path: str, header: bool, blank: bytes | None = None,
               step: int = 1 << 16) -> bool:
    """Whether text file ``path`` (compressed as its name says) holds anything but
    whitespace (or but the bytes ``blank``) after its first line (``header``) or from its
    start (True if it cannot be read)."""
    try:
        with fs.open(path, "rb", compression="infer") as f:
            if header:
                f.readline()
            while chunk := f.read(step):
                if chunk.strip(blank):
                    return True
    except Exception:  # unreadable here (a codec's own error too: lzma.LZMAError is no
        return True  # OSError): the reader will say why, naming the file
    return False


def _line_of(head: bytes) -> int:
    """The 1-based line of :func:`~dask_ps.io._sniff.first_line` in ``head``."""
    from ..io._sniff import first_line

    body = head.removeprefix(b"\xef\xbb\xbf")
    return body[:body.find(first_line(body))].count(b"\n") + 1


def check_model(path: str) -> None:
    """Fail naming the argument if model file ``path`` (a local path or fsspec URL) does not
    exist; a folder or another file is :func:`~dask_ps.saving.load_estimator`'s to name."""
    from ..io._storage import storage_error, unreachable

    fs, paths = _opened(path, "model", folders=False)
    try:
        fs.info(paths[0])  # not fs.exists: it says False for refused access too
    except FileNotFoundError as exc:
        if unreachable(exc) is not None:  # (fsspec's HTTP says so of a server not there)
            raise storage_error(path, exc, "model") from None
        raise FileNotFoundError(f"model {path}: no such file{_no_bucket(fs, path)}") from None
    except OSError as exc:
        raise storage_error(path, exc, "model") from None


def _no_bucket(fs, urlpath: str) -> str:
    """`` (bucket 'b' does not exist)`` when the bucket of ``urlpath`` does not; else ""."""
    from ..io._storage import bucket_of

    bucket = bucket_of(urlpath)
    return f" (bucket {bucket!r} does not exist)" if bucket and not fs.exists(bucket) else ""


def _opened(urlpath: str, option: str, folders: bool = True) -> tuple:
    """:func:`~dask_ps.io._blocks.open_paths`, a glob matching nothing (in a missing
    bucket?) said as ``<option> <urlpath>: no such file``, a folder without files as
    ``<option>: folder '<urlpath>' holds no file ...``. ``folders=False`` (a model's path):
    a folder is left as it is, and a storage error names ``option``. An empty ``urlpath``
    (not the current folder), an unknown protocol or one whose package is missing are
    refused naming ``option`` (:func:`~dask_ps.io._storage.file_system`)."""
    from ..io._blocks import open_paths
    from ..io._storage import file_system

    file_system(urlpath, option)  # an empty path, an unknown protocol, its package missing
    try:
        return open_paths(urlpath, what=option if not folders else "", folders=folders)
    except FileNotFoundError as exc:
        if str(exc).startswith("folder "):  # a folder without files: said by open_paths
            raise FileNotFoundError(f"{option}: {exc}") from None
        _, sep, bucket = str(exc).partition(": bucket ")
        raise FileNotFoundError(f"{option} {urlpath}: no such file"
                                + (f" (bucket {bucket})" if sep else "")) from None


def check_save(path: str) -> None:
    """Fail before any cluster starts if the model could not be saved at ``path``: an empty
    path, an unknown protocol or one whose package is missing, a local folder or a file in
    a folder that does not exist, and wherever an empty file cannot be written and removed
    beside it (:func:`~dask_ps.io._storage.check_writable`: a folder not writable, root's
    ``/proc`` and ``/sys`` included; on an object store a missing bucket or access denied).

    Raises
    ------
    OptionError
        Naming ``--save`` and ``path``.
    OSError
        What the probe met, naming ``--save`` and ``path``.
    """
    import os

    from ..io._storage import check_writable, file_system

    file_system(path, "--save")
    if "://" not in path:
        if os.path.isdir(path):
            raise OptionError(f"--save {path}: a directory; give a file name such as "
                              f"{os.path.join(path, 'model.npz')}")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise OptionError(f"--save {path}: no folder {folder}")
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise OptionError(f"--save {path}: the file is not writable")
    check_writable(path, "--save")


def no_test_rows(urlpath: str, empty: str, paths: list | None = None) -> DataError:
    """The error of test data ``urlpath`` (files ``paths``, if known) of no rows (``empty``),
    of 0 bytes (:func:`check_contents`), of no data row (:func:`check_test_rows`) or once
    read (:func:`say_scores`): ``"--test /data/t.svm: no rows to score the model on"``
    (:func:`~dask_ps.io._blocks.files_named`)."""
    from ..io._blocks import files_named

    return DataError(f"--test {files_named(urlpath, paths)}: {empty} to score the model on")
