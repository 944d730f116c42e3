"""Errors of remote storage (S3 through s3fs, any fsspec file system) in one line that names
the URL and what is wrong, instead of the file system's traceback.

s3fs turns the service's errors into ``OSError`` subclasses whose message is the service's
alone (``FileNotFoundError("The specified bucket does not exist")``, or the key without its
``s3://``); :func:`storage_error` says which URL. Some it does not map at all (S3's 409
``ConditionalRequestConflict`` or ``OperationAborted``): a plain ``OSError(EIO)`` caused by
botocore's ``ClientError``, which :func:`is_write_conflict` recognises.
"""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager

__all__ = ["WRITE_CONFLICTS", "bucket_of", "check_url", "check_writable", "client_error",
           "file_system", "is_write_conflict", "named_errors", "protocol_error",
           "storage_error", "unreachable", "url_of", "write_conflict_code", "write_error"]

#: Schemes whose first part after ``scheme://`` is a host, not a bucket.
_HOSTS = ("http", "https", "ftp", "sftp", "ssh", "webhdfs", "hdfs")


def url_of(fs, path: str) -> str:
    """``path`` of file system ``fs`` as a user writes it: with its protocol (``s3://b/k``),
    a local path as it is."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem) or "://" in str(path):
        return str(path)
    return fs.unstrip_protocol(path)


def bucket_of(url: str) -> str | None:
    """The bucket (the first part after ``scheme://``) of an object store URL; None for a
    local path, a ``file://``/``memory://`` URL or one of a server (``http://host/...``:
    a host is no bucket)."""
    scheme, sep, rest = str(url).partition("://")
    if not sep or scheme in ("file", "local", "memory", *_HOSTS):
        return None
    return rest.split("/", 1)[0] or None


#: S3's error codes of HTTP 409 for a conditional write racing another, to be retried: the
#: one AWS documents for conditional puts ("a conflicting operation occurred ... retry the
#: upload"), and S3's general 409 ``OperationAborted`` ("A conflicting conditional operation
#: is currently in progress against this resource. Please try again.").
WRITE_CONFLICTS = ("ConditionalRequestConflict", "OperationAborted")


def write_conflict_code(exc: BaseException) -> str | None:
    """S3's error code when ``exc`` is a 409 of :data:`WRITE_CONFLICTS` (see
    :func:`is_write_conflict`), else None. A code of another status is no conflict."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            code = (response.get("Error") or {}).get("Code")
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode", 409)
            if code in WRITE_CONFLICTS and status == 409:
                return code
        exc = exc.__cause__ or exc.__context__
    return None


def is_write_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is S3's 409 ``ConditionalRequestConflict`` or ``OperationAborted``
    (:data:`WRITE_CONFLICTS`): a conditional write (``If-None-Match: *``, fsspec's mode
    ``"xb"``) raced another on the same key, and AWS says to try again. s3fs raises either
    as a plain ``OSError`` whose ``__cause__`` (or an error further down the chain) is
    botocore's ``ClientError`` with that error code; the same code with another HTTP status
    is not one."""
    return write_conflict_code(exc) is not None


#: Errors of a client that could not reach its server, by class name (aiohttp's
#: ``ClientConnectorError``, ``ServerTimeoutError``, ... all derive from the first).
_UNREACHABLE = {"ClientConnectionError", "ClientConnectorError", "ServerTimeoutError"}


def unreachable(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain (itself, its ``__cause__`` or shown ``__context__``,
    ...: as a traceback shows them) saying that a server could not be reached (refused,
    unknown host, timed out), or None.

    fsspec's HTTP file system raises ``FileNotFoundError(url)`` from any error of its
    requests for a file's size, an unreachable server's included: the chain tells them
    apart from a 404 (whose chain holds no connection error)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (ConnectionError, socket.gaierror)) or \
                _UNREACHABLE & {c.__name__ for c in type(exc).__mro__}:
            return exc
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return None


def storage_error(url: str, exc: OSError, what: str = "") -> OSError:
    """An error of ``exc``'s type saying what storage call on ``url`` met, in one line:
    a missing bucket, a missing file, access refused (credentials), a server that could
    not be reached (a ``ConnectionError``, whatever ``exc``'s type: see
    :func:`unreachable`), or the reason given.

    Parameters
    ----------
    url : str
        The URL (or local path) the call was about.
    exc : OSError
        What the file system raised.
    what : str, default ""
        What ``url`` is, e.g. ``"checkpoint"``: the message starts ``checkpoint 's3://…'``.

    Returns
    -------
    OSError
        Of ``exc``'s type (``FileNotFoundError``, ``PermissionError``...), or a
        ``ConnectionError`` for a server that could not be reached, to be raised
        ``from None``.
    """
    head = f"{what} {url!r}" if what else str(url)
    cause = unreachable(exc)
    if cause is not None:
        reason = str(getattr(cause, "strerror", None) or cause)
        return ConnectionError(f"{head}: the server could not be reached ({reason})")
    reason = str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)
    bucket = bucket_of(url)
    if isinstance(exc, FileNotFoundError):
        if bucket and ("bucket does not exist" in reason.lower()
                       or "nosuchbucket" in reason.lower()):
            text = f"{head}: bucket {bucket!r} does not exist ({reason})"
        else:
            text = f"{head}: no such file or folder"
    elif isinstance(exc, PermissionError):
        text = (f"{head}: access denied ({reason}); check the credentials and their "
                f"permissions on {'bucket ' + repr(bucket) if bucket else 'it'}")
    else:
        text = f"{head}: {reason}"
    try:
        return type(exc)(text)
    except TypeError:  # a subclass of another signature
        return OSError(text)


def client_error(url: str, exc: BaseException, what: str = "",
                 write: bool = False) -> OSError | None:
    """An ``OSError`` naming ``url`` for an error of an object store's client that is no
    ``OSError`` (so that callers, and ``dask-ps``, treat it as the storage's, as s3fs's
    mapped errors are), or None for any other error.

    botocore raises ``NoCredentialsError`` (no credentials found: no ``AWS_ACCESS_KEY_ID``,
    no ``~/.aws`` profile) and ``EndpointConnectionError`` (the endpoint refused or is
    unknown) as exceptions of its own; they become ``PermissionError`` (missing or partial
    credentials) and ``ConnectionError`` (the endpoint), any other botocore error an
    ``OSError``, each saying what to do.

    Parameters
    ----------
    url : str
    exc : BaseException
        What the client raised.
    what : str, default ""
        What ``url`` is (``"--save"``): the message starts ``--save 's3://…'``.
    write : bool, default False
        ``url`` was to be written: "no credentials to write to bucket ...", without the
        advice to read a public bucket anonymously.
    """
    names = {c.__name__ for c in type(exc).__mro__}
    if "BotoCoreError" not in names or isinstance(exc, OSError):
        return None
    head = f"{what} {url!r}" if what else str(url)
    bucket = bucket_of(url)
    where = f"bucket {bucket!r}" if bucket else "it"
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}:
        return PermissionError(
            f"{head}: no credentials to {'write to' if write else 'read'} {where} ({exc}); "
            f"set them (e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in "
            f"~/.aws)" + ("" if write else ", or, in Python, read a public bucket "
                                           "anonymously (storage_options={'anon': True})"))
    if "ConnectionError" in names:
        return ConnectionError(f"{head}: the storage cannot be reached ({exc})")
    return OSError(f"{head}: {exc}")


def write_error(url: str, exc: BaseException, what: str = "") -> OSError | None:
    """What writing (or looking before writing) at ``url`` met, in one line naming ``url``
    and ``what`` gave it: :func:`storage_error` for an ``OSError``, :func:`client_error`
    (``write=True``) for an object store client's own (no credentials); None for any other
    error (to be raised as it is)."""
    if isinstance(exc, OSError):
        return storage_error(url, exc, what)
    return client_error(url, exc, what, write=True)


def check_url(url, what: str) -> None:
    """Refuse an empty path or URL (``""``, or one in a list): fsspec reads it as the
    current folder, so a reader would read every file there and a save or export would
    write into it.

    Parameters
    ----------
    url : str, os.PathLike or list of them
        The path(s) given.
    what : str
        The parameter or option that gave it, e.g. ``"urlpath"`` or ``"--train"``.

    Raises
    ------
    OptionError
        ``"urlpath: an empty path; give a file, folder or URL ('.' for the current
        folder)"``.
    """
    from ..exceptions import OptionError

    given = url if isinstance(url, (list, tuple)) else [url]
    if not given or any(isinstance(u, (str, os.PathLike)) and not str(os.fspath(u)).strip()
                        for u in given):
        raise OptionError(f"{what}: an empty path; give a file, folder or URL ('.' for the "
                          f"current folder)")


def protocol_error(url, exc: BaseException, what: str = "") -> Exception | None:
    """What fsspec's refusal ``exc`` of ``url``'s protocol means for the user, naming the
    URL (and ``what`` it is, e.g. ``"--train"``), or None for another error.

    fsspec raises ``ValueError("Protocol not known: foo")`` for an unknown protocol, and an
    ``ImportError`` (``"Please install gcsfs to access Google Storage"``) for a known one
    whose package is missing.

    Returns
    -------
    OptionError or ModuleNotFoundError or None
        An :class:`~dask_ps.OptionError` for an unknown protocol; a
        ``ModuleNotFoundError`` naming the package to install (its ``name``) for a missing
        one (a ``ModuleNotFoundError`` of a package outside dask_ps is a user error to the
        ``dask-ps`` command); to be raised ``from None``.
    """
    from fsspec.registry import known_implementations

    from ..exceptions import OptionError

    head = f"{what} {url!s}" if what else f"{url!s}"
    scheme = str(url).partition("://")[0] if "://" in str(url) else ""
    if isinstance(exc, ImportError):
        missing = getattr(exc.__cause__, "name", None) or exc.name
        if not missing:
            target = known_implementations.get(scheme, {}).get("class", "")
            missing = target.split(".", 1)[0] if target else None
        if not missing or missing.startswith(("fsspec", "dask_ps")):
            return ModuleNotFoundError(f"{head}: {scheme or 'this'}:// URLs need a package "
                                       f"that is not installed ({exc})")
        return ModuleNotFoundError(f"{head}: {scheme}:// URLs need the package {missing}, "
                                   f"which is not installed: pip install {missing} ({exc})",
                                   name=missing)
    if isinstance(exc, ValueError) and str(exc).startswith("Protocol not known"):
        return OptionError(f"{head}: unknown protocol {scheme + '://'!r} (fsspec knows "
                           f"file://, s3://, gs://, http(s)://, hdfs://, memory:// and "
                           f"others; a local path needs none)")
    return None


def file_system(url, what: str = "", storage_options: dict | None = None):
    """``(fs, path)`` of ``url`` (:func:`fsspec.core.url_to_fs`), refusing an empty one
    (:func:`check_url`), an unknown protocol or one whose package is missing
    (:func:`protocol_error`) in one line naming ``url`` and ``what`` gave it.

    Raises
    ------
    OptionError
        An empty ``url``, or an unknown protocol.
    ModuleNotFoundError
        The protocol's package is not installed (its ``name``).
    """
    import fsspec

    check_url(url, what or "url")
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ValueError, ImportError) as exc:
        said = protocol_error(url, exc, what)
        if said is None:
            raise
        raise said from None


def check_writable(url, what: str, folder: bool = False) -> None:
    """Write and remove an empty file where ``url`` is to be written, before any work: what
    its first write would meet, met now. ``os.access`` cannot tell (it says yes to root for
    any folder, ``/proc`` and ``/sys`` included), nor can anything but a request tell an
    object store's bucket and credentials. The one probe of a ``--save`` file, a checkpoint
    folder and ``learn_online``'s versions.

    Parameters
    ----------
    url : str or os.PathLike
        A local path or an fsspec URL: a file to be written (``folder`` False: the probe
        goes in its folder, ``.dask-ps-check-<random>``), or a folder (``folder`` True: the
        probe goes in it or, locally, when it does not exist yet, in its nearest existing
        parent, where it would be made). On an object store the probe is an empty object
        under the same prefix (written with ``pipe_file``, then deleted): no bucket is
        created.
    what : str
        What gives ``url`` (``"--save"``, ``"checkpoint"``...): each message starts
        ``<what> '<url>'``.
    folder : bool, default False

    Raises
    ------
    OptionError
        An empty ``url`` or an unknown protocol (:func:`file_system`).
    ModuleNotFoundError
        The protocol's package is not installed, naming it.
    OSError
        Of the system's error's type: locally naming the folder that is not writable
        (``"--save '/sys/kernel/m.npz': the folder '/sys/kernel' is not writable
        (Permission denied)"``) or where no folder can be made; on an object store what the
        write met (:func:`write_error`: a missing bucket, access denied, no credentials
        as a ``PermissionError``, an endpoint not reached as a ``ConnectionError``); a
        ``NotADirectoryError`` when ``folder`` and a file is where the folder would be.
    """
    import posixpath
    import tempfile
    import uuid

    fs, path = file_system(url, what)
    head = f"{what} {os.fspath(url)!r}"
    if "file" not in ((fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol):
        path = path.rstrip("/")
        probe = f"{path if folder else posixpath.dirname(path) or path}/.dask-ps-check-" \
                f"{uuid.uuid4().hex}"
        try:
            fs.pipe_file(probe, b"")
            fs.rm(probe)
        except Exception as exc:  # noqa: BLE001 - botocore's own (no credentials, endpoint)
            said = write_error(os.fspath(url), exc, what)
            if said is None:
                raise
            raise said from None
        return
    where = os.path.abspath(path) if folder else os.path.dirname(os.path.abspath(path))
    while folder and where != os.path.dirname(where) and not os.path.lexists(where):
        where = os.path.dirname(where)  # (a folder to be made: in its nearest parent)
    if folder and os.path.exists(where) and not os.path.isdir(where):
        raise NotADirectoryError(f"{head}: a file, not a folder" if where == os.path.abspath(
            path) else f"{head}: {where!r} is a file, so no folder can be made under it")
    try:
        handle, probe = tempfile.mkstemp(prefix=".dask-ps-check-", dir=where)
        os.close(handle)
        os.remove(probe)
    except OSError as exc:
        said = (f"the folder {where!r} is not writable" if where == os.path.abspath(path)
                or not folder else f"no folder can be made in {where!r}")
        raise type(exc)(f"{head}: {said} ({exc.strerror or exc})") from None


@contextmanager
def named_errors(url: str, what: str = ""):
    """Within it, the storage's errors about ``url`` come as :func:`storage_error` (one
    line naming ``url``; raised ``from None``): a missing file (``FileNotFoundError``),
    refused access (``PermissionError``), a server that could not be reached
    (``ConnectionError``); and an object store client's own errors as
    :func:`client_error`. Other errors (a corrupt compressed stream's ``OSError``, a
    parser's) go through as they are."""
    try:
        yield
    except (FileNotFoundError, PermissionError) as exc:
        raise storage_error(url, exc, what) from None
    except OSError as exc:
        if unreachable(exc) is None:
            raise
        raise storage_error(url, exc, what) from None
    except Exception as exc:  # noqa: BLE001 - botocore's own (no credentials, endpoint)
        named = client_error(url, exc)
        if named is None:
            raise
        raise named from None
