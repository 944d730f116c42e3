"""A direct request/reply channel to a shard: TCP connections that skip Dask's RPC.

Dask's RPC (``actor_execute``) cost ~300 us per round trip here for a few bytes and ~1 ms for
400 kB, where a bare socket costs ~130 us and ~0.6 ms (measured between two worker processes
of a LocalCluster on a 2-core machine). The channel skips what a parameter-server call does
not need: handler lookup, msgpack headers, a pooled connection checked out per call, and, on
the hot path, the event loop. Parameter servers have done this since ps-lite's "van"
(Li et al., OSDI 2014): the data path is a bare socket.

A message is one pickle in frames, its NumPy buffers sent from and received into their own
memory (:mod:`~dask_ps.state.channel_wire`).

* :class:`ChannelServer` (in the shard's worker) reads each connection in a thread of its
  own, in order. Pulls and pushes that need no wait are answered at once from that thread
  (``Shard.call_now``); pulls that must wait for slower clocks are parked there and
  answered by the thread whose push completes the clock (no event-loop round); other calls
  run on the worker's event loop, so they do not hold back the requests behind them.
* :class:`SyncChannel` is the blocking caller used from a task's thread; :class:`Channel`
  the asyncio caller used on an event loop. Replies carry their request's id.

Every connection is authenticated before either end reads a message: a mutual
challenge-response over the channel's secret, and TLS with the worker's certificates when the
worker's comms are ``tls://`` (see :mod:`~dask_ps.state.channel_security`). The channel
serves ``tcp://`` and ``tls://`` workers (see ``Shard.open_channel``); with another comm
(UCX, inproc), shards are reached through Dask's own comms. It listens on the interface of
the worker's address.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import select
import socket
import ssl
import threading
import weakref

from .channel_security import (
    ChannelAddress,
    ChannelAuthError,
    new_secret,
    open_async,
    open_blocking,
    serve_handshake,
)
from .channel_wire import (
    BlockingReader,
    Reader,
    dumps,
    loads,
    send,
    send_blocking,
    unpicklable_request,
    unpicklable_result,
)

__all__ = ["Channel", "ChannelAddress", "ChannelServer", "SyncChannel"]

logger = logging.getLogger(__name__)

def _reply_frames(reply: tuple) -> list:
    try:
        return dumps(reply)
    except Exception as exc:  # an unpicklable result or exception still gets an answer
        if reply[0] == "OK":
            try:
                return dumps(("error", unpicklable_result(exc, reply[1])))
            except Exception:  # noqa: BLE001 - pickle's error itself: the plain answer
                pass
        return dumps(("error", RuntimeError(f"could not send the reply: {exc!r} "
                                            f"(for {reply[1]!r:.200})")))


def _send_reply(conn: socket.socket, lock: threading.Lock, rid: int, frames: list) -> None:
    with lock:
        try:
            send_blocking(conn, rid, frames)
        except OSError:  # the caller is gone; its reader sees the closed connection
            pass


class _Parked:
    """The reply of a parked pull (``Shard.call_now``): sent by whichever thread settles
    it, on the connection the request came from (from a pool thread when that is the
    event loop's, which never waits on a caller's socket)."""

    __slots__ = ("conn", "lock", "rid", "loop")

    def __init__(self, conn, lock: threading.Lock, rid: int, loop) -> None:
        self.conn, self.lock, self.rid, self.loop = conn, lock, rid, loop

    def __call__(self, ok: bool, result) -> None:
        args = (self.conn, self.lock, self.rid,
                _reply_frames(("OK", result) if ok else ("error", result)))
        if running_loop() is self.loop:
            self.loop.run_in_executor(None, _send_reply, *args)
        else:
            _send_reply(*args)


def running_loop():
    """The event loop running in this thread, or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _nodelay(sock: socket.socket) -> None:
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ChannelServer:
    """Serves the calls of a shard's channel on the running event loop.

    Parameters
    ----------
    host : str
        Interface to listen on (the worker's host).
    target : object
        Whose ``dispatch_call(method, args, kwargs)`` coroutine answers requests; held by a
        weak reference, so that a shard released by Dask is freed (and its server closed).
        A target with a ``call_in_thread(method, args, kwargs)`` method instead has every
        request answered by it in the connection's thread, in order (the objects of
        :class:`~dask_ps.partitions.resident.Residents`: no event loop on the way).
    ssl_context : ssl.SSLContext, optional
        Server-side TLS context (the worker's, from its :class:`distributed.Security`);
        without it the channel is plain TCP.

    Attributes
    ----------
    address : ChannelAddress
        Host, port, the channel's secret (32 random bytes drawn here) and whether it uses
        TLS: all a caller needs, to be handed out through Dask's comms only.
    refused : int
        Connections closed because their handshake failed.
    """

    def __init__(self, host: str, target, ssl_context: ssl.SSLContext | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        self._target = weakref.ref(target, self._target_gone)
        self._sock = socket.create_server((host, 0))
        self._sock.setblocking(False)
        self._ssl = ssl_context
        self.address = ChannelAddress(host, self._sock.getsockname()[1], new_secret(),
                                      ssl_context is not None)
        self.refused = 0
        self._conns: set[socket.socket] = set()
        self._tasks: set[asyncio.Task] = set()  # the loop keeps only weak references
        self._closed = False
        self._accepting = self._spawn(self._accept())

    def _spawn(self, coro) -> asyncio.Task:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _target_gone(self, _) -> None:
        try:  # the last reference may drop in any thread
            self.loop.call_soon_threadsafe(self.close)
        except RuntimeError:  # the loop is closed: so are its sockets
            pass

    async def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = await self.loop.sock_accept(self._sock)
            except OSError:  # closed
                return
            _nodelay(conn)
            conn.setblocking(True)
            self._conns.add(conn)
            # the connection's thread runs in the server's context: Dask's get_worker()
            # (a context variable, set where the server was opened) works there too
            threading.Thread(target=contextvars.copy_context().run, args=(self._serve, conn),
                             daemon=True, name="dask-ps-channel").start()

    def _serve(self, conn: socket.socket) -> None:
        """One thread per connection: after the handshakes, it reads the requests in order
        and answers those that need no wait at once (``call_now``: no event-loop round, the
        kernel wakes this thread); the others run on the loop, so that a pull waiting for
        clocks does not hold back the requests behind it. Nothing is unpickled before the
        peer has proved it holds the secret."""
        raw = conn
        try:
            conn = serve_handshake(raw, self.address.secret, self._ssl)
        except (ChannelAuthError, OSError) as exc:  # ssl.SSLError is an OSError
            self.refused += 1
            self._conns.discard(raw)
            raw.close()
            if not self._closed:
                logger.warning("dask_ps channel %s:%d refused a connection: %r",
                               *self.address.endpoint, exc)
            return
        if conn is not raw:  # shut down through its TLS wrapper from now on
            self._conns.add(conn)
            self._conns.discard(raw)
        reader = BlockingReader(conn)
        lock = threading.Lock()  # replies come from this thread and from the loop
        try:
            while True:
                rid, frames = reader.message()
                target = self._target()
                parked = False
                settled: list = []  # replies to parked pulls this request's push settled
                try:
                    if target is None:
                        raise RuntimeError("the shard behind this channel is gone")
                    method, args, kwargs = loads(frames)
                    del frames
                    now = getattr(target, "call_now", None)
                    in_thread = getattr(target, "call_in_thread", None)
                    if now is not None and not args and method in ("pull", "push", "push_pull"):
                        done, out = now(method, kwargs, park=_Parked(conn, lock, rid, self.loop),
                                        settled=settled)
                        if not done:
                            parked = out is None
                            method, kwargs = "pull", out
                    elif in_thread is not None:
                        done, out = True, in_thread(method, args, kwargs)
                    else:
                        done = False
                    reply = ("OK", out) if done else None
                except Exception as exc:
                    reply = ("error", exc)
                if parked:
                    pass  # answered by the thread whose push lets it be served
                elif reply is None:
                    self.loop.call_soon_threadsafe(
                        self._spawn, self._answer(conn, lock, rid, target, method, args, kwargs))
                else:
                    _send_reply(conn, lock, rid, _reply_frames(reply))
                for answer in settled:  # after this caller's reply (see Shard.call_now)
                    answer()
                del target, settled
        except (OSError, RuntimeError):  # closed, or the loop is gone
            pass
        finally:
            self._conns.discard(conn)
            conn.close()

    async def _answer(self, conn, lock, rid: int, target, method, args, kwargs) -> None:
        try:
            reply = ("OK", await target.dispatch_call(method, args, kwargs))
        except Exception as exc:
            reply = ("error", exc)
        del target
        # the socket is blocking (its thread reads it): send from a pool thread, so that the
        # loop never waits on a caller that may itself wait on this loop
        await self.loop.run_in_executor(None, _send_reply, conn, lock, rid, _reply_frames(reply))

    def close(self) -> None:
        """Stop listening and drop every connection (their callers see them closed)."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        self._sock.close()
        for conn in list(self._conns):
            try:  # wakes the thread blocked reading it, and tells the caller
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self._conns.clear()


class _Caller:
    """What both calling ends hold: where the channel is, how to authenticate to it, and the
    connection once open.

    Parameters
    ----------
    address : ChannelAddress
        The shard's :attr:`ChannelServer.address`.
    ssl_context : ssl.SSLContext, optional
        Client-side TLS context, needed when ``address.tls``.
    """

    def __init__(self, address: ChannelAddress, ssl_context: ssl.SSLContext | None = None
                 ) -> None:
        self.address = address
        self._ssl = ssl_context
        self._sock = None  # the connection, opened on the first call


class Channel(_Caller):
    """The calling end of a shard's channel, for one process; used on one event loop.

    Parameters: see :class:`_Caller`.
    """

    def __init__(self, address: ChannelAddress, ssl_context: ssl.SSLContext | None = None
                 ) -> None:
        super().__init__(address, ssl_context)
        self._connecting: asyncio.Lock | None = None
        self._send_lock: asyncio.Lock | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._next = 0
        self._reading: asyncio.Task | None = None

    async def _connect(self, loop) -> socket.socket:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
            self._send_lock = asyncio.Lock()
        async with self._connecting:
            if self._sock is None:
                conn = await open_async(loop, self.address, self._ssl)
                self._sock = conn
                self._reading = loop.create_task(self._read(conn))
        return self._sock

    async def _read(self, sock) -> None:
        reader = Reader(sock)
        try:
            while True:
                rid, frames = await reader.message()
                fut = self._pending.pop(rid, None)
                if fut is not None and not fut.done():  # else: the caller timed out
                    fut.set_result(frames)
        except (OSError, asyncio.CancelledError) as exc:
            self._broken(sock, exc)

    def _broken(self, sock, exc: BaseException) -> None:
        """Fail every call waiting on ``sock``; the next call connects again."""
        if self._sock is sock:
            self._sock = None
        sock.close()
        err = exc if isinstance(exc, OSError) else ConnectionResetError(repr(exc))
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionResetError(
                    f"connection to shard channel {self.address.endpoint} lost: {err!r}"))

    async def call(self, method: str, args: tuple, kwargs: dict) -> tuple[str, object]:
        """Run ``method(*args, **kwargs)`` on the shard: ``("OK", result)`` or
        ``("error", exception raised)``.

        Raises
        ------
        OSError
            The connection failed (the caller turns it into ShardUnavailableError).
        Exception
            The request cannot be pickled: pickle's own error, marked by
            :func:`~.channel_wire.unpicklable_request` (nothing sent).
        """
        try:  # first, before any wait (Transport.map_all counts on it) or pending reply
            frames = dumps((method, args, kwargs))
        except Exception as exc:  # noqa: BLE001 - pickle's error, and what failed
            raise unpicklable_request(exc, args, kwargs, dumps) from None
        loop = asyncio.get_running_loop()
        sock = self._sock if self._sock is not None else await self._connect(loop)
        self._next += 1
        rid = self._next
        fut = loop.create_future()
        self._pending[rid] = fut
        try:
            async with self._send_lock:
                try:
                    await send(sock, rid, frames)
                except BaseException as exc:  # a partial message spoils the stream
                    self._broken(sock, exc)
                    raise
            del frames
            return loads(await fut)
        finally:
            self._pending.pop(rid, None)

    def close(self) -> None:
        """Drop the connection; calls waiting on it fail with ``OSError``."""
        if self._reading is not None:
            self._reading.cancel()
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class SyncChannel(_Caller):
    """The calling end of a shard's channel for blocking calls from a task's thread.

    A thread holds the connection from its first request to its last reply (:meth:`start`
    then :meth:`finish`), so that it can do other work, such as the local shard's part of a
    pull, while the shard answers. It may send several requests before the first reply (the
    pieces of a large pull: the shard works on one while the next travels); replies are
    matched by request id. Threads of one process take turns.

    Parameters: see :class:`_Caller`.
    """

    def __init__(self, address: ChannelAddress, ssl_context: ssl.SSLContext | None = None
                 ) -> None:
        super().__init__(address, ssl_context)
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread whose requests are out
        self._out: set[int] = set()  # ids of the requests not answered yet
        self._early: dict[int, list] = {}  # replies read before their turn, by request id
        self._next = 0
        self._timeout: float | None = None  # the connection's, set at the last call

    def start(self, method: str, args: tuple, kwargs: dict, timeout: float) -> int:
        """Send a request; the caller must then call :meth:`finish` with its id (or
        :meth:`abort`). The thread holds the connection until every request it sent is
        finished.

        Raises
        ------
        OSError
            The connection or the send failed (``TimeoutError`` after ``timeout`` seconds).
        """
        frames = dumps((method, args, kwargs))
        me = threading.get_ident()
        if self._owner != me:
            self._lock.acquire()
            self._owner = me
        try:
            if self._sock is None:
                sock = open_blocking(self.address, self._ssl, timeout)
                self._sock = sock
                self._reader = BlockingReader(sock)
                self._timeout = timeout
            if timeout != self._timeout:  # a system call or two: only when it changes
                self._sock.settimeout(timeout)
                self._timeout = timeout
            self._next += 1
            # replies that arrive while it sends are read meanwhile (see send_draining)
            send_blocking(self._sock, self._next, frames, self._drain, timeout)
            self._out.add(self._next)
            return self._next
        except BaseException:
            self.abort()
            raise

    def _drain(self) -> None:
        """Read one reply that arrives while a request is being sent, for :meth:`finish`."""
        got, frames = self._reader.message()
        if got not in self._out or got in self._early:
            raise ConnectionResetError(f"reply {got} to no request out")
        self._early[got] = frames

    @staticmethod
    def ready(channels: list, timeout: float) -> list[int]:
        """Indices of ``channels`` (each with a request in progress) whose replies have
        started to arrive (or whose connections closed), waiting up to ``timeout`` seconds
        for one, so that a caller can look at the cluster between waits."""
        now = [i for i, c in enumerate(channels) if c._early or c._reader.end > c._reader.start]
        if now:
            return now
        socks = [getattr(c._sock, "sock", c._sock) for c in channels]  # under TLS, its socket
        readable = select.select(socks, [], [], timeout)[0]
        return [i for i, s in enumerate(socks) if s in readable]

    def finish(self, rid: int) -> tuple[str, object]:
        """The reply to request ``rid``: ``("OK", result)`` or ``("error", exception)``.

        Raises
        ------
        OSError
            The connection failed, or no reply came within the call's timeout.
        """
        try:
            if rid not in self._out:
                raise ConnectionResetError(f"request {rid} is not out on this connection")
            frames = self._early.pop(rid, None)
            while frames is None:
                got, frames = self._reader.message()
                if got != rid:  # another of this thread's requests, or a broken stream
                    if got not in self._out or got in self._early:
                        raise ConnectionResetError(f"reply {got} to request {rid}")
                    self._early[got], frames = frames, None
        except BaseException:
            self.abort()
            raise
        self._out.discard(rid)
        if not self._out:
            self._owner = None
            self._lock.release()
        return loads(frames)

    def abort(self) -> None:
        """Drop the connection (a request half sent or a reply half read spoils it; so does
        a request left unanswered) and let the next call connect again."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._out.clear()
        self._early.clear()
        if self._owner == threading.get_ident():
            self._owner = None
            self._lock.release()

    def close(self) -> None:
        """Drop the connection, without waiting for a call in progress: its thread, blocked
        reading, gets an ``OSError`` (the shard unavailable) at once."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
            self._sock = None
