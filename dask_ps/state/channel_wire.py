"""How a message travels on a shard's channel (:mod:`~dask_ps.state.channel`): its frames
and how both ends write and read them.

A message is a header (request id, frame count, frame sizes) followed by the frames of one
pickle (protocol 5): the first frame is the pickle, the others are the NumPy buffers, sent
from and received into their own memory (no copy in Python on either side). Small frames
travel copied behind the header (one system call); readers take small parts of messages
from a read-ahead buffer and receive large frames straight into their own arrays.
"""

from __future__ import annotations

import io
import pickle
import select
import socket
import struct

import numpy as np

__all__ = ["BlockingReader", "Reader", "dumps", "loads", "send", "send_blocking",
           "unpicklable_request", "unpicklable_result"]

_HEAD = struct.Struct("<QI")  # request id, number of frames
#: Frames up to this size are copied into one buffer with the header (one send); larger ones
#: are sent from, and received into, their own memory.
_SMALL = 1 << 16
_READ_AHEAD = 1 << 16


def _array(buffer, dtype: str, shape: tuple) -> np.ndarray:
    """An array of a message (:class:`_Pickler`): a view of its frame."""
    return np.frombuffer(buffer, dtype).reshape(shape)


class _Pickler(pickle.Pickler):
    """Protocol-5 pickler sending plain contiguous arrays as ``(buffer, dtype str, shape)``:
    NumPy's reduction pickles a dtype object and finds its rebuild function per array (~15 us
    here, half of a pull's or push's pickling; as much to load). Others pickle as usual."""

    def reducer_override(self, obj):
        if (type(obj) is np.ndarray and obj.dtype.kind in "biuf" and obj.dtype.names is None
                and obj.flags.c_contiguous):
            return _array, (pickle.PickleBuffer(obj), obj.dtype.str, obj.shape)
        return NotImplemented


def dumps(obj) -> list:
    """``obj`` as frames: a protocol-5 pickle, then its out-of-band buffers."""
    buffers: list = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return [out.getbuffer()] + [b.raw() for b in buffers]


def _pickle_error(exc: BaseException) -> BaseException:
    """pickle's own error of a failed pickling (Dask's serialisation raises its own from
    it), afresh: no traceback nor context, whose frames hold what failed to pickle."""
    cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
    try:
        return type(cause)(*cause.args)
    except Exception:  # noqa: BLE001 - a type not built from its args
        return TypeError(str(cause))


def unpicklable_result(exc: BaseException, result) -> BaseException:
    """The error to send back, from a shard, for a ``result`` that failed to pickle with
    ``exc``: pickle's own error, marked with the result's type (``unpicklable_result``)
    for the caller's note (see :meth:`~dask_ps.state.transport.Transport.map_rows`)."""
    error = _pickle_error(exc)
    error.unpicklable_result = type(result).__name__
    return error


def unpicklable_request(exc: BaseException, args: tuple, kwargs: dict, dump) -> BaseException:
    """The error to raise, in the caller, for a request ``(method, args, kwargs)`` that
    failed to pickle with ``exc`` (``dump``: how it was pickled): pickle's own error, marked
    (``unpicklable_request``) with ``(where, type name)`` of the first of ``args`` (its
    position) or ``kwargs`` (its name) that does not pickle on its own, or ``(None, None)``,
    for the caller's note (see :meth:`~dask_ps.state.transport.Transport.map_rows`). Only on
    the error path: each is pickled again, alone."""
    error = _pickle_error(exc)
    error.unpicklable_request = (None, None)
    for where, value in [*enumerate(args), *kwargs.items()]:
        try:
            dump(value)
        except Exception:  # noqa: BLE001 - any failure to pickle: this one
            error.unpicklable_request = (where, type(value).__name__)
            break
    return error


def loads(frames: list):
    return pickle.loads(frames[0], buffers=frames[1:])


def _chunks(rid: int, frames: list) -> list:
    """What to write for one message: the header with the small frames copied behind it
    (one system call), and each large frame from its own memory."""
    sizes = [memoryview(f).nbytes for f in frames]
    out = bytearray(_HEAD.pack(rid, len(frames)))
    out += struct.pack(f"<{len(frames)}Q", *sizes)
    chunks = []
    for f, n in zip(frames, sizes):
        if n <= _SMALL:
            out += f
            continue
        if out:
            chunks.append(out)
            out = bytearray()
        chunks.append(memoryview(f).cast("B"))
    if out:
        chunks.append(out)
    return chunks


async def send(conn, rid: int, frames: list) -> None:
    """Write one message on a connection of the event loop (``async`` ``sendall``)."""
    for chunk in _chunks(rid, frames):
        await conn.sendall(chunk)


def send_blocking(sock: socket.socket, rid: int, frames: list, drain=None,
                  timeout: float | None = None) -> None:
    """Write one message on a blocking socket (or a
    :class:`~dask_ps.state.channel_security.TLSSocket`).

    With ``drain``, whenever the socket cannot take more and bytes are arriving, ``drain()``
    reads them (a whole message) before the send goes on (:func:`send_draining`):
    ``timeout`` is then the seconds to wait for either (None: for ever).
    """
    for chunk in _chunks(rid, frames):
        if drain is None:
            sock.sendall(chunk)
        elif isinstance(sock, socket.socket):
            send_draining(sock, chunk, drain, timeout)
        else:  # TLS: it encrypts, then sends the same way on its socket
            sock.sendall(chunk, drain, timeout)


def send_draining(sock: socket.socket, data, drain, timeout: float | None) -> None:
    """``sock.sendall(data)``, but whenever ``sock`` cannot take more and bytes are arriving
    on it, ``drain()`` reads them first.

    A caller that sends several requests before it reads the replies (the pieces of a large
    pull) needs it: the peer, blocked sending its reply to an earlier request, reads nothing
    more until that reply is read, and once both directions are full neither end moves. A
    hashed pull of 2 x 10^7 keys from a remote shard (pieces of 20 MB, replies of 10 MB)
    waited so until its timeout.

    Raises
    ------
    TimeoutError
        Neither could go on for ``timeout`` seconds.
    OSError
        From the socket or ``drain``.
    """
    poller = select.poll()
    poller.register(sock, select.POLLOUT | select.POLLIN)
    wait = -1 if timeout is None else max(1, int(timeout * 1000))
    view = memoryview(data).cast("B")
    while view.nbytes:
        events = poller.poll(wait)
        if not events:
            raise TimeoutError(f"a send made no progress within {timeout} s")
        if events[0][1] & select.POLLOUT:
            view = view[sock.send(view):]
        else:  # readable, or closed (drain's read raises then)
            drain()


def _message_buffers():
    """The buffers one message is read into, in order (a generator: the header's, the frame
    sizes', then each frame's); returns ``(request id, frames)``. Shared by both readers."""
    head = bytearray(_HEAD.size)
    yield memoryview(head)
    rid, n_frames = _HEAD.unpack(head)
    raw = bytearray(8 * n_frames)
    yield memoryview(raw)
    frames = []
    for size in struct.unpack(f"<{n_frames}Q", raw):
        # np.empty: no zero-filling of a buffer about to be overwritten
        buf = np.empty(size, np.uint8) if size > _SMALL else bytearray(size)
        yield memoryview(buf)
        frames.append(buf)
    return rid, frames


def _received(got: int) -> int:
    if got == 0:
        raise ConnectionResetError("the connection was closed by its other end")
    return got


class _ReadAhead:
    """A read-ahead buffer: small parts of messages come out of it, large frames are
    received straight into their own arrays (see :meth:`_next_recv`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.view = memoryview(bytearray(_READ_AHEAD))
        self.start = self.end = 0

    def _next_recv(self, out: memoryview, n: int) -> tuple[int, memoryview | None]:
        """Copy what the buffer holds into ``out[n:]``; returns the new ``n`` and, while
        ``out`` is not full, where the next ``recv_into`` goes: ``out`` itself for a large
        remainder, else the (emptied) buffer."""
        k = min(self.end - self.start, out.nbytes - n)
        out[n:n + k] = self.view[self.start:self.start + k]
        self.start += k
        n += k
        if n == out.nbytes:
            return n, None
        if out.nbytes - n >= _READ_AHEAD:
            return n, out[n:]
        self.start = self.end = 0
        return n, self.view

    def _got(self, target: memoryview, n: int, got: int) -> int:
        if target is self.view:
            self.end = got
            return n
        return n + got


class Reader(_ReadAhead):
    """Reads messages from a connection of the event loop (``async`` ``recv_into``)."""

    async def read_into(self, out: memoryview) -> None:
        n, target = self._next_recv(out, 0)
        while target is not None:
            got = _received(await self.sock.recv_into(target))
            n, target = self._next_recv(out, self._got(target, n, got))

    async def message(self) -> tuple[int, list]:
        steps = _message_buffers()
        try:
            while True:
                await self.read_into(steps.send(None))
        except StopIteration as done:
            return done.value


class BlockingReader(_ReadAhead):
    """Reads messages from a blocking socket, or a
    :class:`~dask_ps.state.channel_security.TLSSocket` (a task's or a server thread's)."""

    def read_into(self, out: memoryview) -> None:
        n, target = self._next_recv(out, 0)
        while target is not None:
            got = _received(self.sock.recv_into(target))
            n, target = self._next_recv(out, self._got(target, n, got))

    def message(self) -> tuple[int, list]:
        steps = _message_buffers()
        try:
            while True:
                self.read_into(steps.send(None))
        except StopIteration as done:
            return done.value
