"""Errors of remote storage (S3 through s3fs, any fsspec file system) in one line that names
the URL and what is wrong, instead of the file system's traceback.

s3fs turns the service's errors into ``OSError`` subclasses whose message is the service's
alone (``FileNotFoundError("The specified bucket does not exist")``, or the key without its
``s3://``); :func:`storage_error` says which URL. Some it does not map at all (S3's 409
``ConditionalRequestConflict`` or ``OperationAborted``): a plain ``OSError(EIO)`` caused by
botocore's ``ClientError``, which :func:`is_write_conflict` recognises.
"""

from __future__ import annotations

__all__ = ["WRITE_CONFLICTS", "bucket_of", "client_error", "is_write_conflict", "storage_error",
           "url_of", "write_conflict_code"]


def url_of(fs, path: str) -> str:
    """``path`` of file system ``fs`` as a user writes it: with its protocol (``s3://b/k``),
    a local path as it is."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem) or "://" in str(path):
        return str(path)
    return fs.unstrip_protocol(path)


def bucket_of(url: str) -> str | None:
    """The bucket (the first part after ``scheme://``) of an object store URL; None for a
    local path or a ``file://``/``memory://`` URL."""
    scheme, sep, rest = str(url).partition("://")
    if not sep or scheme in ("file", "local", "memory"):
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


def storage_error(url: str, exc: OSError, what: str = "") -> OSError:
    """An error of ``exc``'s type saying what storage call on ``url`` met, in one line:
    a missing bucket, a missing file, access refused (credentials), or the reason given.

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
        Of ``exc``'s type (``FileNotFoundError``, ``PermissionError``...), to be raised
        ``from None``.
    """
    reason = str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)
    head = f"{what} {url!r}" if what else str(url)
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


def client_error(url: str, exc: BaseException) -> OSError | None:
    """An ``OSError`` naming ``url`` for an error of an object store's client that is no
    ``OSError`` (so that callers, and ``dask-ps``, treat it as the storage's, as s3fs's
    mapped errors are), or None for any other error.

    botocore raises ``NoCredentialsError`` (no credentials found: no ``AWS_ACCESS_KEY_ID``,
    no ``~/.aws`` profile) and ``EndpointConnectionError`` (the endpoint refused or is
    unknown) as exceptions of its own; they become ``PermissionError`` (missing or partial
    credentials) and ``ConnectionError`` (the endpoint), any other botocore error an
    ``OSError``, each saying what to do.
    """
    names = {c.__name__ for c in type(exc).__mro__}
    if "BotoCoreError" not in names or isinstance(exc, OSError):
        return None
    bucket = bucket_of(url)
    where = f"bucket {bucket!r}" if bucket else "it"
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}:
        return PermissionError(
            f"{url}: no credentials to read {where} ({exc}); set them (e.g. "
            f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws), or, in "
            f"Python, read a public bucket anonymously (storage_options={{'anon': True}})")
    if "ConnectionError" in names:
        return ConnectionError(f"{url}: the storage cannot be reached ({exc})")
    return OSError(f"{url}: {exc}")
