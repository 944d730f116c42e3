"""Files read over HTTP(S): a missing file (a 404) and a server that cannot be reached are
two errors, each naming the URL (fsspec's HTTP file system says ``FileNotFoundError(url)``
for both when it asks a file's size)."""

from __future__ import annotations

import functools
import http.server
import socket
import threading

import pytest

from dask_ps.io import (
    read_ctr,
    read_docword,
    read_ldac,
    read_libsvm,
    read_ratings,
    read_sparse_parquet,
    read_text,
    read_vocabulary,
)

READERS = {
    "libsvm": read_libsvm,
    "ctr": lambda url: read_ctr(url, label="y"),
    "ctr parquet": lambda url: read_ctr(url + ".parquet", label="y"),
    "text": read_text,
    "vocabulary": read_vocabulary,
    "ldac": read_ldac,
    "docword": read_docword,
    "ratings": read_ratings,
    "sparse parquet": read_sparse_parquet,
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no request lines in the test's output
        pass


@pytest.fixture
def server(tmp_path):
    """A real HTTP server of ``tmp_path`` on a free local port: its base URL."""
    (tmp_path / "a.libsvm").write_text("1 1:1\n0 2:1\n")
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


def _closed_port() -> int:
    """A local port nothing listens on (bound, then closed: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", list(READERS))
def test_a_missing_file_and_an_unreachable_server_are_told_apart(server, reader):
    """A closed port was reported as an ``OSError`` with aiohttp's words alone ("Connect
    call failed"), and, for a glob's ``?``, as "bucket '127.0.0.1:<port>' does not exist"
    (a host taken for a bucket)."""
    _, base = server
    read = READERS[reader]
    missing = f"{base}/missing.libsvm"
    with pytest.raises(FileNotFoundError) as info:
        read(missing)
    assert not isinstance(info.value, ConnectionError)
    assert missing in str(info.value) and "no such file" in str(info.value)
    down = f"http://127.0.0.1:{_closed_port()}"
    for url in (f"{down}/a.libsvm", f"{down}/*.libsvm", f"{down}/a?.libsvm"):
        with pytest.raises(ConnectionError, match=r"the server could not be reached \(") as info:
            read(url)
        assert url in str(info.value)
        assert "no such file" not in str(info.value) and "bucket" not in str(info.value)


@pytest.mark.timeout(60)
def test_a_glob_matching_nothing_on_a_server_names_no_bucket(server):
    _, base = server
    for url in (f"{base}/*.nope", f"{base}/missing?.libsvm"):
        with pytest.raises(FileNotFoundError) as info:
            read_libsvm(url)
        assert str(info.value) == f"no file matches {url!r}"


@pytest.mark.timeout(60)
def test_a_server_gone_after_the_files_were_planned_is_named_not_missing(server):
    """The arrays are read when computed: a server down by then made fsspec's size
    request (HEAD, then GET) fail, said as "<url>: no such file or folder"."""
    httpd, base = server
    X, y = read_libsvm(f"{base}/a.libsvm")
    assert X.compute().toarray().tolist() == [[1, 0], [0, 1]]
    X, y = read_libsvm(f"{base}/a.libsvm")  # planned while the server is up
    httpd.shutdown()
    httpd.server_close()
    with pytest.raises(ConnectionError, match=rf"^{base}/a\.libsvm: the server could not be "
                                              rf"reached \("):
        X.compute(scheduler="sync")


@pytest.mark.timeout(60)
def test_a_model_url_on_a_server_not_there_is_named_unreachable_by_the_cli(server, capsys):
    """``dask-ps evaluate MODEL``: a model URL whose server refuses connections was said as
    "no such file" (fsspec's HTTP ``info`` raises FileNotFoundError for it); a 404 still is."""
    from dask_ps.cli import main

    _, base = server
    data = f"{base}/a.libsvm"
    for model, said in ((f"{base}/missing.json", "no such file"),
                        (f"http://127.0.0.1:{_closed_port()}/m.json",
                         "the server could not be reached")):
        assert main(["evaluate", model, "--test", data]) == 2
        err = capsys.readouterr().err
        assert f"model '{model}'" in err or f"model {model}" in err
        assert said in err
