"""The direct channel to a shard: framing, errors, concurrency, and its use by worker tasks."""

import asyncio
import gc
import os
import signal
import socket
import threading
import time

import numpy as np
import pytest
from conftest import NO_DASHBOARD

import dask_ps
from dask_ps.state.channel import Channel, ChannelServer, SyncChannel
from dask_ps.state.channel_wire import dumps, loads

pytestmark = pytest.mark.timeout(120)


class Target:
    """Stands for a shard: ``dispatch_call`` as the channel server calls it."""

    def __init__(self):
        self.release = asyncio.Event()

    async def dispatch_call(self, method, args, kwargs):
        if method == "echo":
            return args, kwargs
        if method == "fail":
            raise KeyError("table 'x' is not on shard 0")
        if method == "unpicklable":
            return threading.Lock()
        if method == "wait":
            await self.release.wait()
            return "released"
        if method == "release":
            self.release.set()
            return None
        raise AttributeError(method)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def run_connected(test):
    """``await test(channel, server)`` against a fresh server for a :class:`Target`; both are
    closed afterwards."""
    async def main():
        target = Target()  # the server holds only a weak reference: kept alive here
        server = ChannelServer("127.0.0.1", target)
        channel = Channel(server.address)
        try:
            await test(channel, server)
        finally:
            channel.close()
            server.close()

    run(main())


def test_arrays_and_objects_round_trip_whatever_their_size():
    async def test(channel, server):
        rng = np.random.default_rng(0)
        sent = [rng.random(n).astype(dt) for n, dt in ((0, "f4"), (3, "i8"), (70_000, "f8"),
                                                       (3_000_000, "f4"))]
        status, (args, kwargs) = await channel.call("echo", tuple(sent), {"tag": "x" * 100_000})
        assert status == "OK" and kwargs == {"tag": "x" * 100_000}
        for a, b in zip(sent, args):
            assert a.dtype == b.dtype and np.array_equal(a, b)
            if b.size:
                b[0] = 1  # received arrays are writable (pulled values are updated in place)

    run_connected(test)


def test_messages_keep_every_kind_of_array_and_name_no_numpy_rebuild_for_plain_ones():
    rng = np.random.default_rng(0)
    plain = [rng.random((40, 3)), np.arange(7, dtype=np.uint64), np.zeros((0, 3), np.int32),
             np.array(2.5), np.array([True, False])]
    other = [np.asfortranarray(rng.random((4, 3))), rng.random((6, 4))[:, 1],
             np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]), np.array([1 + 2j]),
             np.array(["x", None], dtype=object), np.arange(3).astype("datetime64[s]")]
    frames = dumps(("echo", tuple(plain + other), {}))
    _, got, _ = loads([bytearray(f) for f in frames])
    for a, b in zip(plain + other, got):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        if b.size:
            b[...] = b  # writable, as before
    # plain contiguous arrays travel as (buffer, dtype string, shape): NumPy's reduction
    # (its dtype object and rebuild function per array) is only for the others
    head = bytes(dumps(plain)[0])
    assert b"_frombuffer" not in head and b"dtype" not in head


def test_errors_come_back_as_raised_and_unpicklable_results_as_pickles_error():
    async def test(channel, server):
        status, exc = await channel.call("fail", (), {})
        assert status == "error" and isinstance(exc, KeyError) and "shard 0" in str(exc)
        status, exc = await channel.call("unpicklable", (), {})
        # pickle's own error, marked with the result's type (for the caller's note)
        assert status == "error" and isinstance(exc, TypeError), exc
        assert "cannot pickle '_thread.lock' object" in str(exc)
        assert exc.unpicklable_result == "lock"
        # the connection is still usable afterwards
        assert (await channel.call("echo", (1,), {}))[1] == ((1,), {})

    run_connected(test)


def test_a_waiting_call_does_not_hold_back_later_ones_on_the_connection():
    async def test(channel, server):
        waiting = asyncio.ensure_future(channel.call("wait", (), {}))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert (await channel.call("echo", (2,), {}))[1] == ((2,), {})
        await channel.call("release", (), {})
        assert await waiting == ("OK", "released")

    run_connected(test)


def test_a_closed_server_fails_pending_and_later_calls_with_oserror():
    async def test(channel, server):
        assert (await channel.call("echo", (), {}))[0] == "OK"  # connected, whatever the load
        waiting = asyncio.ensure_future(channel.call("wait", (), {}))
        await asyncio.sleep(0.05)
        server.close()
        with pytest.raises(OSError, match="connection to shard channel .* lost"):
            await waiting
        with pytest.raises(OSError):
            await channel.call("echo", (), {})

    run_connected(test)


def test_a_thread_may_have_several_requests_out_and_gets_each_its_own_reply():
    """SyncChannel: requests sent before the first reply (a large pull's pieces) are matched
    to their replies by id, whatever order the replies come in; the connection is the
    thread's until its last reply, then another thread's."""
    def several(address):
        channel = SyncChannel(address)
        try:
            waiting = channel.start("wait", (), {}, timeout=30)  # answered last
            echo = channel.start("echo", (2,), {"k": np.arange(100_000)}, timeout=30)
            release = channel.start("release", (), {}, timeout=30)
            other = []
            helper = threading.Thread(target=lambda: other.append(
                channel.finish(channel.start("echo", (3,), {}, timeout=30))))
            helper.start()
            assert channel.finish(waiting) == ("OK", "released")
            status, (args, kwargs) = channel.finish(echo)
            assert status == "OK" and args == (2,)
            np.testing.assert_array_equal(kwargs["k"], np.arange(100_000))
            assert not other  # the helper waits for this thread's last reply
            assert channel.finish(release) == ("OK", None)
            helper.join(30)
            assert other == [("OK", ((3,), {}))]
            with pytest.raises(ConnectionResetError, match="not out"):
                channel.finish(echo)  # answered already: the connection is dropped
            assert channel.finish(channel.start("echo", (4,), {}, timeout=30)) == (
                "OK", ((4,), {}))
        finally:
            channel.close()

    async def test(channel, server):
        await asyncio.to_thread(several, server.address)

    run_connected(test)


class EchoInThread:
    """Answers every request in the connection's thread, in order, as a shard answers pulls
    (the server reads nothing more while it sends a reply)."""

    def call_in_thread(self, method, args, kwargs):
        return args


def _small_buffers(sock) -> None:
    raw = getattr(sock, "sock", sock)  # under TLS, its socket
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        raw.setsockopt(socket.SOL_SOCKET, opt, 1 << 16)


@pytest.mark.parametrize("tls", [False, True])
def test_requests_sent_back_to_back_while_their_replies_fill_the_connection_finish(tls):
    """A caller sends several large requests before reading a reply (a big pull's pieces) to
    a server that answers each from the connection's thread. Once the replies fill the
    connection, the server reads no more and the caller's send waited for ever: a hashed
    pull of 2 x 10^7 keys from a remote shard hung until its timeout. The caller reads the
    replies that arrive while it sends (connection buffers made small here, so that a few
    MB are enough)."""
    from distributed import Security

    sec = Security.temporary() if tls else None
    server_ctx = sec.get_listen_args("worker")["ssl_context"] if tls else None
    client_ctx = sec.get_connection_args("worker")["ssl_context"] if tls else None
    payloads = [np.full(250_000, float(i)) for i in range(8)]  # 2 MB each way, each

    async def main():
        target = EchoInThread()
        server = ChannelServer("127.0.0.1", target, server_ctx)
        sync = SyncChannel(server.address, client_ctx)
        try:
            def go():
                sync.finish(sync.start("echo", (), {}, 30))  # connected
                _small_buffers(sync._sock)
                for conn in list(server._conns):
                    _small_buffers(conn)
                rids = [sync.start("echo", (p,), {}, 30) for p in payloads]
                return [sync.finish(rid) for rid in rids]

            results = await asyncio.to_thread(go)
        finally:
            sync.close()
            server.close()
        for (status, (got,)), want in zip(results, payloads):
            assert status == "OK"
            np.testing.assert_array_equal(got, want)

    run(main())


def test_the_server_closes_when_its_shard_is_freed():
    async def main():
        target = Target()
        server = ChannelServer("127.0.0.1", target)
        del target
        gc.collect()
        await asyncio.sleep(0.05)  # the close is scheduled on the loop
        assert server._closed
        with pytest.raises(OSError):
            await Channel(server.address).call("echo", (), {})

    run(main())


def transport_paths(ps, item):
    transport = ps._client.transport
    ps.push("w", [item], [1.0])
    ps.clock()
    return sorted(transport.channels), ps.pull("w", [0, 1, 2, 3]).tolist()


def test_worker_tasks_reach_remote_shards_through_their_channels(client2):
    with dask_ps.PSModel(client2) as model:
        model.add_table("w", shape=(4,))
        assert all(r.channel is not None for r in model.shards)
        addrs = [s.address for s in model.shards]
        out = model.run(transport_paths, [0, 1], workers=addrs)
        assert [o[0] for o in out] == [[1], [0]]  # the other worker's shard
        assert [o[1] for o in out] == [[1.0, 1.0, 0.0, 0.0]] * 2


def _set_channel(flag):
    import dask

    dask.config.set({"dask-ps.channel": flag})


def test_without_channels_tasks_use_dask_rpc_with_the_same_results(client2):
    client2.run(_set_channel, False)
    try:
        with dask_ps.PSModel(client2) as model:
            model.add_table("w", shape=(4,))
            assert all(r.channel is None for r in model.shards)
            addrs = [s.address for s in model.shards]
            out = model.run(transport_paths, [0, 1], workers=addrs)
            assert [o[0] for o in out] == [[], []]
            assert [o[1] for o in out] == [[1.0, 1.0, 0.0, 0.0]] * 2
    finally:
        client2.run(_set_channel, True)


def _pull_from_dead_shard(ps, item):
    import time

    from dask_ps.exceptions import ShardUnavailableError

    ps.pull("w", np.arange(100))  # both shards answer: the channel is connected
    open(item + ".ready", "w").close()
    deadline = time.time() + 60
    while not os.path.exists(item):  # the driver kills the other worker now
        time.sleep(0.05)
        assert time.time() < deadline
    t0 = time.perf_counter()
    try:
        ps.pull("w", np.arange(60, 70))  # rows 50..99 live on shard 1
    except ShardUnavailableError as exc:
        with open(item + ".tmp", "w") as f:
            f.write(f"{time.perf_counter() - t0}\n{exc}")
        os.replace(item + ".tmp", item + ".out")  # the driver never reads half a file
        raise


@pytest.mark.slow
def test_a_task_calling_a_killed_shard_worker_gets_shard_unavailable_at_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, **NO_DASHBOARD,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        model = dask_ps.PSModel(client, timeout=60)
        model.add_table("w", shape=(100,))
        survivor, victim = model.shards[0].address, model.shards[1].address
        flag = str(tmp_path / "killed")
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(model.run, _pull_from_dead_shard, [flag], consistency="asp",
                              workers=[survivor])
            deadline = time.time() + 60  # the first pull may compile numba kernels first
            while not os.path.exists(flag + ".ready") and not job.done():
                assert time.time() < deadline
                time.sleep(0.05)
            pid = client.run(os.getpid, workers=[victim])[victim]
            os.kill(pid, signal.SIGKILL)
            open(flag, "w").close()
            # the task's error, or the driver's own watch noticing the lost worker first
            with pytest.raises((dask_ps.ShardUnavailableError, dask_ps.WorkerLostError),
                               match=r"shard 1|shards \[1\]"):
                job.result(timeout=90)
            deadline = time.time() + 30  # the task's side, written when its pull failed
            while not os.path.exists(flag + ".out"):
                assert time.time() < deadline
                time.sleep(0.05)
        with open(flag + ".out") as f:
            seconds, message = f.read().split("\n", 1)
        assert message.startswith("shard 1 on") and "unavailable: pull failed" in message
        # the closed connection tells at once (~0.1 s idle), not after the model's 60 s
        # timeout: half of it is the margin for a loaded machine
        assert float(seconds) < 30
        model.close()
