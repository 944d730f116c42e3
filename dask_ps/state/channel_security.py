"""Who may talk to a shard's channel: a per-channel secret checked before any pickle, and TLS.

A shard's :class:`~dask_ps.state.channel.ChannelServer` draws a random 32-byte secret when it
opens. Its :class:`ChannelAddress` (host, port, secret, whether TLS) goes back to the driver as
the result of the actor call that opened it, and from there to the tasks inside the model's
layout (the :class:`~dask_ps.state.transport.ShardRef` of each shard): the secret travels only
over Dask's own comms, through the scheduler, never over the channel itself.

Every connection starts with a mutual challenge-response (HMAC-SHA256, RFC 2104), before
either end reads a single message::

    server -> client   32-byte nonce Ns
    client -> server   32-byte nonce Nc, HMAC(secret, TAG | "client" | Ns | Nc)
    server -> client   HMAC(secret, TAG | "server" | Ns | Nc)

The server checks the client's code (in constant time) and closes the connection on a
mismatch, so a peer without the secret never gets a message unpickled; the client checks the
server's, so a process that took over a dead shard's port cannot feed it pickles either. Fresh
nonces on both sides make a recorded handshake useless.

When the worker's address is ``tls://`` (Dask run with :class:`distributed.Security`), the
channel runs over TLS with the worker's own certificates and Dask's settings (both ends
present certificates signed by the cluster's CA), and the handshake above runs inside it. On
plain ``tcp://`` the handshake authenticates the connection but the bytes that follow are
neither encrypted nor protected against an attacker on the network path: exactly as with
Dask's own plain TCP comms (use TLS on untrusted networks).

TLS runs on :class:`ssl.MemoryBIO` pairs rather than :class:`ssl.SSLSocket`: a channel
connection is read by one thread while replies are written by others, and OpenSSL does not
allow one SSL object to be used by two threads at once. Here the SSL object is touched only
under a lock, and the socket's blocking reads and writes happen outside it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import ssl
import threading
from typing import NamedTuple

from .channel_wire import send_draining

__all__ = ["ChannelAddress", "ChannelAuthError", "HANDSHAKE_TIMEOUT", "channel_endpoint",
           "worker_ssl_context"]

#: Seconds a new connection has to complete the TLS and secret handshakes.
HANDSHAKE_TIMEOUT = 30.0
_TAG = b"dask-ps channel v1|"
_NONCE = 32
_MAC = hashlib.sha256().digest_size
#: Plaintext bytes encrypted per TLS write, and raw bytes read per receive.
_TLS_CHUNK = 1 << 18
#: The largest TLS record's plaintext (RFC 8446, 5.1).
_RECORD = 1 << 14


class ChannelAddress(NamedTuple):
    """How to reach and authenticate to a shard's channel.

    Attributes
    ----------
    host : str
    port : int
    secret : bytes
        32 random bytes, drawn by the channel's server; never printed (see ``repr``).
    tls : bool
        Whether the channel runs over TLS (the worker's comms are ``tls://``).
    """

    host: str
    port: int
    secret: bytes
    tls: bool = False

    @property
    def endpoint(self) -> tuple[str, int]:
        """``(host, port)`` to connect to."""
        return (self.host, self.port)

    def __repr__(self) -> str:
        return (f"ChannelAddress(host={self.host!r}, port={self.port}, secret=<hidden>, "
                f"tls={self.tls})")


class ChannelAuthError(ConnectionRefusedError):
    """A channel handshake failed: the peer does not hold the channel's secret."""


def new_secret() -> bytes:
    """A fresh channel secret (32 bytes from :mod:`secrets`)."""
    return secrets.token_bytes(32)


def _mac(secret: bytes, role: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return hmac.new(secret, _TAG + role + b"|" + server_nonce + client_nonce,
                    hashlib.sha256).digest()


def worker_ssl_context(side: str) -> ssl.SSLContext | None:
    """The TLS context of this Dask worker's comms for the ``"server"`` or ``"client"`` side
    of a connection, or None when this process is not a worker whose address is ``tls://``.

    The contexts come from the worker's :class:`distributed.Security` (certificates, CA,
    minimum TLS version, ciphers), as Dask's own TLS comms use them.
    """
    try:
        from distributed import get_worker
        from distributed.comm import parse_address

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    if parse_address(worker.address)[0] != "tls":
        return None
    security = worker.security
    args = (security.get_listen_args("worker") if side == "server"
            else security.get_connection_args("worker"))
    return args.get("ssl_context")


def channel_endpoint() -> tuple[str, ssl.SSLContext | None] | None:
    """``(host, server TLS context or None)`` to open a channel on in this Dask worker: the
    host of its ``tcp://`` or ``tls://`` address; None outside a worker, with another comm
    (UCX, inproc), or when ``dask-ps.channel`` is false (Dask's comms only, then)."""
    import dask

    if not dask.config.get("dask-ps.channel", True):
        return None
    try:
        from distributed import get_worker
        from distributed.comm import get_address_host, parse_address

        address = get_worker().address
    except (ImportError, ValueError):  # not in a Dask worker: in-process objects
        return None
    scheme = parse_address(address)[0]
    if scheme == "tcp":
        return get_address_host(address), None
    if scheme == "tls":
        context = worker_ssl_context("server")
        return None if context is None else (get_address_host(address), context)
    return None


# -- the secret handshake, on anything with blocking recv_into / sendall ------------------------
def _recv_exactly(conn, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = conn.recv_into(view[got:])
        if k == 0:
            raise ConnectionResetError("the connection was closed during the channel handshake")
        got += k
    return bytes(buf)


def accept(conn, secret: bytes) -> None:
    """Server side of the handshake on a blocking connection.

    Raises
    ------
    ChannelAuthError
        The client's code does not match: the caller must close the connection.
    OSError
        The connection failed or timed out.
    """
    server_nonce = secrets.token_bytes(_NONCE)
    conn.sendall(server_nonce)
    answer = _recv_exactly(conn, _NONCE + _MAC)
    client_nonce, code = answer[:_NONCE], answer[_NONCE:]
    if not hmac.compare_digest(code, _mac(secret, b"client", server_nonce, client_nonce)):
        raise ChannelAuthError("a connection without the channel's secret was refused")
    conn.sendall(_mac(secret, b"server", server_nonce, client_nonce))


def _client_answer(secret: bytes, server_nonce: bytes) -> tuple[bytes, bytes]:
    client_nonce = secrets.token_bytes(_NONCE)
    return client_nonce, client_nonce + _mac(secret, b"client", server_nonce, client_nonce)


def _check_server(secret: bytes, server_nonce: bytes, client_nonce: bytes, code: bytes,
                  endpoint) -> None:
    if not hmac.compare_digest(code, _mac(secret, b"server", server_nonce, client_nonce)):
        raise ChannelAuthError(f"the shard channel at {endpoint} does not hold its secret: "
                               f"another process answers on that port")


def _refused(endpoint) -> ChannelAuthError:
    return ChannelAuthError(f"the shard channel at {endpoint} closed the connection during "
                            f"the handshake: the secret did not match, or the shard is closing")


def connect(conn, secret: bytes, endpoint) -> None:
    """Client side of the handshake on a blocking connection.

    Raises
    ------
    ChannelAuthError
        The server refused our code (the connection closed) or its own code is wrong.
    OSError
        The connection failed or timed out.
    """
    server_nonce = _recv_exactly(conn, _NONCE)
    client_nonce, answer = _client_answer(secret, server_nonce)
    conn.sendall(answer)
    try:
        code = _recv_exactly(conn, _MAC)
    except ConnectionResetError:
        raise _refused(endpoint) from None
    _check_server(secret, server_nonce, client_nonce, code, endpoint)


async def connect_async(conn, secret: bytes, endpoint) -> None:
    """:func:`connect` on a connection with ``async`` ``recv_into`` / ``sendall``."""
    async def recv_exactly(n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = await conn.recv_into(view[got:])
            if k == 0:
                raise ConnectionResetError("the connection was closed during the channel "
                                           "handshake")
            got += k
        return bytes(buf)

    server_nonce = await recv_exactly(_NONCE)
    client_nonce, answer = _client_answer(secret, server_nonce)
    await conn.sendall(answer)
    try:
        code = await recv_exactly(_MAC)
    except ConnectionResetError:
        raise _refused(endpoint) from None
    _check_server(secret, server_nonce, client_nonce, code, endpoint)


# -- connections: plain sockets on an event loop, and TLS over memory BIOs -------------------
class AsyncSocket:
    """A non-blocking socket used from an event loop, with ``async`` ``recv_into`` and
    ``sendall`` (the interface the channel's asyncio readers and writers use)."""

    def __init__(self, loop, sock: socket.socket) -> None:
        self.loop, self.sock = loop, sock

    def recv_into(self, buf):
        return self.loop.sock_recv_into(self.sock, buf)

    def sendall(self, data):
        return self.loop.sock_sendall(self.sock, data)

    def close(self) -> None:
        self.sock.close()


class _TLSState:
    """An SSL object between two memory BIOs, touched only under its lock; no I/O."""

    def __init__(self, context: ssl.SSLContext, server_side: bool) -> None:
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=server_side)
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()  # keeps the encrypted bytes in order on the wire

    def handshake_step(self) -> tuple[bool, bytes]:
        """Whether the TLS handshake is done, and the bytes to send meanwhile."""
        with self.lock:
            try:
                self.obj.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            return done, self.outgoing.read()

    def read(self, buf) -> int | None:
        """Plaintext into ``buf``: its length, 0 at the end, None when more bytes are needed."""
        with self.lock:
            try:
                return self.obj.read(len(buf), buf)
            except ssl.SSLWantReadError:
                return None
            except ssl.SSLZeroReturnError:
                return 0

    def feed(self, data: bytes) -> None:
        with self.lock:
            if data:
                self.incoming.write(data)
            else:
                self.incoming.write_eof()

    def encrypt(self, data) -> bytes:
        """``data`` as TLS records (with anything the SSL object had left to send first).

        Written one record's worth at a time, each drained at once: a memory BIO that grows
        by large writes is reallocated and copied over and over (8 MB took ~200 ms that way,
        ~4 ms like this)."""
        view = memoryview(data).cast("B")
        out = []
        with self.lock:
            for start in range(0, max(view.nbytes, 1), _RECORD):
                self.obj.write(view[start:start + _RECORD])
                out.append(self.outgoing.read())
        return b"".join(out)


def _pieces(data):
    view = memoryview(data).cast("B")
    for start in range(0, max(view.nbytes, 1), _TLS_CHUNK):
        yield view[start:start + _TLS_CHUNK]


class TLSSocket:
    """TLS on a blocking socket, socket-like (``recv_into``, ``sendall``, ``settimeout``,
    ``shutdown``, ``close``): one thread may read while others write.

    Parameters
    ----------
    sock : socket.socket
        Connected, blocking (a timeout is allowed).
    context : ssl.SSLContext
    server_side : bool
    """

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_side: bool) -> None:
        self.sock = sock
        self.family = sock.family
        self._tls = _TLSState(context, server_side)

    def handshake(self) -> None:
        """Run the TLS handshake (within the socket's timeout); raises ``ssl.SSLError`` or
        ``OSError``."""
        while True:
            done, out = self._tls.handshake_step()
            if out:
                self.sock.sendall(out)
            if done:
                return
            data = self.sock.recv(_TLS_CHUNK)
            if not data:
                raise ConnectionResetError("the connection was closed during the TLS handshake")
            self._tls.feed(data)

    def recv_into(self, buf) -> int:
        while True:
            n = self._tls.read(buf)
            if n is not None:
                return n
            self._tls.feed(self.sock.recv(_TLS_CHUNK))

    def sendall(self, data, drain=None, timeout: float | None = None) -> None:
        """Encrypt and send ``data``; with ``drain``, as
        :func:`~dask_ps.state.channel_wire.send_draining` does."""
        with self._tls.send_lock:
            for piece in _pieces(data):
                if drain is None:
                    self.sock.sendall(self._tls.encrypt(piece))
                else:
                    send_draining(self.sock, self._tls.encrypt(piece), drain, timeout)

    def settimeout(self, timeout) -> None:
        self.sock.settimeout(timeout)

    def setsockopt(self, *args) -> None:
        self.sock.setsockopt(*args)

    def shutdown(self, how) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()


class AsyncTLSSocket:
    """TLS on a non-blocking socket used from one event loop: :class:`AsyncSocket`'s
    interface."""

    def __init__(self, loop, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.loop, self.sock = loop, sock
        self._tls = _TLSState(context, server_side=False)

    async def handshake(self) -> None:
        while True:
            done, out = self._tls.handshake_step()
            if out:
                await self.loop.sock_sendall(self.sock, out)
            if done:
                return
            data = await self.loop.sock_recv(self.sock, _TLS_CHUNK)
            if not data:
                raise ConnectionResetError("the connection was closed during the TLS handshake")
            self._tls.feed(data)

    async def recv_into(self, buf) -> int:
        while True:
            n = self._tls.read(buf)
            if n is not None:
                return n
            self._tls.feed(await self.loop.sock_recv(self.sock, _TLS_CHUNK))

    async def sendall(self, data) -> None:
        for piece in _pieces(data):  # one loop, one writer at a time (the caller's lock)
            await self.loop.sock_sendall(self.sock, self._tls.encrypt(piece))

    def close(self) -> None:
        self.sock.close()


async def open_async(loop, address: ChannelAddress, context: ssl.SSLContext | None):
    """Connect to ``address`` from ``loop`` and run the handshakes; the connection
    (:class:`AsyncSocket` or :class:`AsyncTLSSocket`).

    Raises
    ------
    ChannelAuthError, ssl.SSLError, OSError
    """
    sock = socket.socket(socket.AF_INET6 if ":" in address.host else socket.AF_INET,
                         socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await loop.sock_connect(sock, address.endpoint)
        if address.tls:
            conn = AsyncTLSSocket(loop, sock, _need(context, address))
            await conn.handshake()
        else:
            conn = AsyncSocket(loop, sock)
        await connect_async(conn, address.secret, address.endpoint)
    except BaseException:
        sock.close()
        raise
    return conn


def open_blocking(address: ChannelAddress, context: ssl.SSLContext | None, timeout: float):
    """Connect to ``address`` with blocking sockets and run the handshakes; the connection
    (a socket or a :class:`TLSSocket`), with ``timeout`` set.

    Raises
    ------
    ChannelAuthError, ssl.SSLError, OSError
    """
    sock = socket.create_connection(address.endpoint, timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = sock
        if address.tls:
            conn = TLSSocket(sock, _need(context, address), server_side=False)
            conn.handshake()
        connect(conn, address.secret, address.endpoint)
    except BaseException:
        sock.close()
        raise
    return conn


def serve_handshake(conn: socket.socket, secret: bytes, context: ssl.SSLContext | None):
    """Server side of a new connection: TLS (with ``context``), then the secret; the
    connection to read requests from (blocking, no timeout).

    Raises
    ------
    ChannelAuthError, ssl.SSLError, OSError
        The caller closes ``conn``.
    """
    conn.settimeout(HANDSHAKE_TIMEOUT)
    out = conn
    if context is not None:
        out = TLSSocket(conn, context, server_side=True)
        out.handshake()
    accept(out, secret)
    conn.settimeout(None)
    return out


def _need(context, address: ChannelAddress) -> ssl.SSLContext:
    if context is None:
        raise ChannelAuthError(f"the shard channel at {address.endpoint} uses TLS and this "
                               f"process has no TLS context")
    return context
