"""The channel's secret and TLS: a peer without the secret is refused before anything is
unpickled, on either end; a cluster run with distributed.Security trains over TLS channels."""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading

import numpy as np
import pytest
from conftest import NO_DASHBOARD

import dask_ps
from dask_ps.partitions import partition
from dask_ps.partitions.resident import Residents
from dask_ps.state.channel import Channel, ChannelServer, SyncChannel
from dask_ps.state.channel_security import ChannelAuthError

pytestmark = pytest.mark.timeout(180)


class Target:
    async def dispatch_call(self, method, args, kwargs):
        return args, kwargs


class Marker:
    """Unpickling it creates a file: proof that a process ran code sent by the peer."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def message(obj) -> bytes:
    """One channel message (request id 1) carrying ``obj`` pickled."""
    frame = pickle.dumps(obj, protocol=5)
    return struct.pack("<QI", 1, 1) + struct.pack("<Q", len(frame)) + frame


def recv_all(sock: socket.socket) -> bytes:
    """What the peer sends until it closes the connection (or resets it)."""
    got = b""
    while True:
        try:
            data = sock.recv(1 << 16)
        except ConnectionResetError:
            return got
        if not data:
            return got
        got += data


def serving(test):
    """``test(server, loop)`` with a ChannelServer running on an event-loop thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    target = Target()

    async def start():
        return ChannelServer("127.0.0.1", target)

    server = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        test(server, loop)
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def wait_refused(server, n: int) -> None:
    for _ in range(600):  # the server thread counts it right after closing
        if server.refused >= n:
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"{server.refused} connections refused, expected {n}")


@pytest.mark.parametrize("handshake", ["none", "wrong secret"])
def test_a_connection_without_the_secret_is_closed_and_nothing_is_unpickled(tmp_path,
                                                                            handshake):
    marker = tmp_path / "pwned"

    def test(server, loop):
        with socket.create_connection(server.address.endpoint, timeout=30) as sock:
            if handshake == "wrong secret":
                nonce = sock.recv(32)
                assert len(nonce) == 32
                sock.sendall(b"\0" * 32 + b"\1" * 32)  # a client nonce and a bad code
            # then a well-formed request whose unpickling would create the marker file
            try:
                sock.sendall(message(("echo", (Marker(marker),), {})) * 3)
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = recv_all(sock)  # returns once the server has closed the connection
        assert len(reply) <= 32  # at most the server's nonce: no reply to a request
        wait_refused(server, 1)
        assert not marker.exists()
        # the server still answers a client holding the secret
        channel = SyncChannel(server.address)
        try:
            rid = channel.start("echo", (1,), {}, timeout=30)
            assert channel.finish(rid) == ("OK", ((1,), {}))
        finally:
            channel.close()

    serving(test)
    assert not marker.exists()


def test_clients_with_a_wrong_secret_get_an_auth_error(tmp_path):
    def test(server, loop):
        wrong = server.address._replace(secret=b"x" * 32)
        channel = SyncChannel(wrong)
        with pytest.raises(ChannelAuthError, match="secret did not match"):
            channel.start("echo", (), {}, timeout=30)

        async def call():
            return await Channel(wrong).call("echo", (), {})

        with pytest.raises(ChannelAuthError):
            asyncio.run(call())
        wait_refused(server, 2)

    serving(test)


def test_a_client_refuses_a_server_without_the_secret_and_unpickles_nothing(tmp_path):
    """A process that took over a dead shard's port cannot feed the tasks pickles."""
    marker = tmp_path / "pwned"
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def impostor():
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"\2" * 32)
            conn.recv(64)
            conn.sendall(b"\3" * 32 + message(("OK", Marker(marker))))
            recv_all(conn)

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    from dask_ps.state.channel_security import ChannelAddress

    channel = SyncChannel(ChannelAddress("127.0.0.1", port, b"s" * 32))
    with pytest.raises(ChannelAuthError, match="does not hold its secret"):
        channel.start("echo", (), {}, timeout=30)
    channel.close()
    thread.join(30)
    listener.close()
    assert not marker.exists()


def test_the_secret_is_never_printed():
    def test(server, loop):
        address = server.address
        assert len(address.secret) == 32
        assert address.secret.hex() not in repr(address) and "hidden" in repr(address)
        ref = dask_ps.state.transport.ShardRef(0, "tcp://x:1", "k", address)
        assert address.secret.hex() not in repr(ref) and repr(address.secret) not in repr(ref)

    serving(test)


# -- TLS ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def security():
    from distributed import Security

    return Security.temporary()


def test_tls_channels_carry_large_and_small_messages(security):
    server_ctx = security.get_listen_args("worker")["ssl_context"]
    client_ctx = security.get_connection_args("worker")["ssl_context"]
    rng = np.random.default_rng(0)
    sent = (rng.random(300_000), np.arange(5), "x" * 70_000)  # 2.4 MB: several TLS writes

    async def main():
        target = Target()
        server = ChannelServer("127.0.0.1", target, server_ctx)
        assert server.address.tls
        channel = Channel(server.address, client_ctx)
        sync = SyncChannel(server.address, client_ctx)
        try:
            # several calls in flight on one connection, and a blocking caller beside them
            results = await asyncio.gather(*(channel.call("echo", sent, {"i": i})
                                             for i in range(4)))
            rid = await asyncio.to_thread(sync.start, "echo", sent, {}, 60)
            results.append(await asyncio.to_thread(sync.finish, rid))
            for status, (args, _) in results:
                assert status == "OK"
                assert np.array_equal(args[0], sent[0]) and args[0].flags.writeable
                assert np.array_equal(args[1], sent[1]) and args[2] == sent[2]
            assert [r[1][1] for r in results[:4]] == [{"i": i} for i in range(4)]
            # a process without a TLS context does not try
            with pytest.raises(ChannelAuthError, match="no TLS context"):
                await Channel(server.address).call("echo", (), {})
        finally:
            channel.close()
            sync.close()
            server.close()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_a_plain_peer_sending_pickles_to_a_tls_channel_is_refused(tmp_path, security):
    marker = tmp_path / "pwned"
    server_ctx = security.get_listen_args("worker")["ssl_context"]

    async def main():
        target = Target()
        server = ChannelServer("127.0.0.1", target, server_ctx)
        try:
            def attack():
                with socket.create_connection(server.address.endpoint, timeout=30) as sock:
                    try:
                        sock.sendall(message(("echo", (Marker(marker),), {})))
                    except OSError:
                        pass
                    return recv_all(sock)

            reply = await asyncio.to_thread(attack)
            assert b"OK" not in reply
            for _ in range(600):
                if server.refused:
                    break
                await asyncio.sleep(0.05)
            assert server.refused == 1
        finally:
            server.close()

    asyncio.run(asyncio.wait_for(main(), 120))
    assert not marker.exists()


def _least_squares_task(ps, item):
    X, y = item
    for _ in range(15):
        w = ps.pull("w")
        ps.push("w", np.arange(w.shape[0]), -0.1 * X.T @ (X @ w - y) / X.shape[0])
        ps.clock()
    transport = ps._client.transport
    return sorted(transport.channels), sorted(transport.sync_channels)


def _least_squares_data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6))
    y = X @ np.arange(1.0, 7.0)
    return [(X[:200], y[:200]), (X[200:], y[200:])]


class _Where:
    def __init__(self, tasks):
        self.tasks = tasks

    def where(self):
        from distributed import get_worker

        return get_worker().address


def test_a_cluster_with_tls_trains_over_tls_channels(security):
    from distributed import Client, LocalCluster

    parts = _least_squares_data()
    with dask_ps.PSModel("local") as ref:
        ref.add_table("w", shape=(6,), dtype="float64")
        ref.run(_least_squares_task, parts)
        expected = ref.pull("w")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, security=security,
                      **NO_DASHBOARD, worker_dashboard_address=None) as cluster, \
            Client(cluster, security=security) as client:
        assert all(a.startswith("tls://") for a in client.scheduler_info()["workers"])
        with dask_ps.PSModel(client) as model:
            assert all(r.channel is not None and r.channel.tls for r in model.shards)
            model.add_table("w", shape=(6,), dtype="float64")
            addrs = [r.address for r in model.shards]
            used = model.run(_least_squares_task, parts, workers=addrs)
            # each task reached the other worker's shard through its TLS channel
            assert used == [([1], [1]), ([0], [0])]
            w = model.pull("w")
        # the driver's calls to objects resident next to the data take TLS channels too
        with partition(np.arange(8.0).reshape(4, 2), client=client, n_partitions=2) as data, \
                Residents(data, _Where) as res:
            assert res._channels is not None and all(c.address.tls for c in res._channels)
            assert res.call("where", [()] * len(res.workers)) == res.workers
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    assert np.abs(w - np.arange(1.0, 7.0)).max() < np.abs(np.arange(1.0, 7.0)).max()
