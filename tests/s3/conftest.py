"""A local S3 for the s3:// tests: moto's server on 127.0.0.1, reached through s3fs.

The server (one per test session, i.e. per pytest-xdist process) holds one bucket; each
test writes under a prefix of its own (:func:`s3_url`). Its endpoint and fake credentials
are environment variables (``AWS_ENDPOINT_URL_S3``, which botocore, hence aiobotocore and
s3fs, honour; ``AWS_ACCESS_KEY_ID``...), set in this process for the session and given to
the worker processes of :func:`s3_client`'s cluster (``LocalCluster(env=...)``) and to the
``dask-ps`` subprocesses (:data:`S3Server.env`).

moto and s3fs are test dependencies (``pip install -e ".[test]"``): when they are missing
these tests fail (the fixtures' imports), rather than being skipped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from dataclasses import dataclass

import pytest
from conftest import NO_DASHBOARD

BUCKET = "dask-ps-test"


@dataclass
class S3Server:
    """The running server: its endpoint, bucket, and the environment that reaches it."""

    endpoint: str
    bucket: str
    env: dict

    def url(self, *parts: str) -> str:
        """``s3://<bucket>/<parts...>``."""
        return "/".join([f"s3://{self.bucket}", *parts])


def _clear_s3fs_cache() -> None:
    """Forget the S3FileSystem instances (and their listings) fsspec cached in this process:
    they hold a client of the endpoint they were made with."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 on 127.0.0.1 at a free port, with bucket :data:`BUCKET`, its endpoint and
    fake credentials in this process's environment for the session."""
    import fsspec
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}",
           # no user's ~/.aws files: only the variables above count
           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    _clear_s3fs_cache()
    try:
        fsspec.filesystem("s3").mkdir(BUCKET)
        yield S3Server(env["AWS_ENDPOINT_URL_S3"], BUCKET, env)
    finally:
        _clear_s3fs_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture
def s3(s3_server, request):
    """The server, and a fresh prefix for this test: ``s3.url("x")`` is under it."""
    prefix = f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
    return S3Server(s3_server.endpoint, f"{s3_server.bucket}/{prefix}", s3_server.env)


@pytest.fixture(scope="module")
def s3_client(s3_server):
    """2 worker processes x 1 thread, which reach the S3 server (its environment)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      **NO_DASHBOARD, worker_dashboard_address=None,
                      env=dict(s3_server.env)) as cluster, Client(cluster) as client:
        yield client


@contextlib.contextmanager
def _denied():
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    _clear_s3fs_cache()  # no listing cached from before
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = before
        _clear_s3fs_cache()


@pytest.fixture
def s3_denied(s3_server):
    """While the test runs, the server checks credentials (moto's IAM authentication), which
    the fake ones fail: every request is refused as with wrong credentials."""
    with _denied():
        yield s3_server


@pytest.fixture
def s3_denied_later(s3_server):
    """A context manager: within it, every request is refused as by :func:`s3_denied`."""
    return _denied
