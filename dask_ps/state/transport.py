"""How a process reaches the shards: calls per shard, from the task's thread or the loop.

In a Dask worker, a shard living on the same worker is called directly on the worker's event
loop (no pickling, no socket). The others are reached through their direct channels
(:mod:`~dask_ps.state.channel`, authenticated by each channel's secret and over TLS when the
workers' comms are ``tls://``): from a task's own thread with blocking sockets for the
pulls and pushes of a training step (:meth:`Transport.call_many`), from the loop otherwise;
a shard without a channel (UCX, inproc, channels switched off) through the worker's RPC
pool (``actor_execute``, the handler Dask's own actor proxies use). On the client, calls go
through the client's loop and Dask's RPC. Without any Dask client the shards live in this
process, on a private event-loop thread, and are called the same way as a same-worker shard.

Every call has a timeout, so a dead shard raises :class:`ShardUnavailableError` instead of
hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import NamedTuple

from distributed.comm.core import CommClosedError
from distributed.protocol import Serialized, deserialize, serialize

from ..exceptions import KeysNeededError, ShardFunctionRunningError, ShardUnavailableError
from .channel import Channel, ChannelAddress, SyncChannel
from .channel import running_loop as _running_loop
from .channel_security import worker_ssl_context
from .channel_wire import unpicklable_request
from .wire_forms import with_keys

__all__ = ["ShardRef", "Shipped", "Transport", "function_name", "local_loop", "note_function",
           "packed", "refuse_in_shard_function", "running_shard_function", "unship"]


#: Seconds a call through Dask's RPC waits before it asks whether the shard's worker is
#: still in the cluster (and between two such questions).
WATCH_SECONDS = 1.0

#: In a thread running a function next to a shard's rows (``Shard.map_rows``, which holds
#: the shard's lock meanwhile): ``.what``, that function and where it runs.
_in_shard_function = threading.local()


@contextlib.contextmanager
def running_shard_function(what: str):
    """Mark this thread, for the ``with`` block, as running ``what`` next to a shard's rows
    (its lock held): :func:`refuse_in_shard_function` then refuses the model's calls."""
    _in_shard_function.what = what
    try:
        yield
    finally:
        _in_shard_function.what = None


def refuse_in_shard_function() -> None:
    """Raise RuntimeError when this thread runs a function next to a shard's rows: a call of
    the model from there would wait for the lock that function holds (in-process, where
    the shards live in this process; on a cluster the model refuses first)."""
    what = getattr(_in_shard_function, "what", None)
    if what is not None:
        raise RuntimeError(f"a shard function cannot call the model: {what} holds the "
                           f"shard's rows while it runs, so a pull, push or any other call "
                           f"of the model from it would wait for itself; return what it "
                           f"needs and call the model after map_shards")


def packed(obj, on_error: str = "message") -> Serialized:
    """``obj`` as one pickle (protocol 5: NumPy buffers travel as their own frames, not
    copied), ready for Dask's comms. ``on_error="raise"``: an unpicklable ``obj`` raises
    Dask's TypeError (from pickle's) here, not where it is loaded.

    Dask's own ``to_serialize`` walks tuples, lists and dicts and serialises each element on
    its own: ~250 us for a pull's or a push's arguments where this takes ~45 us, and ~100 us
    to load them again where this takes ~40 us.
    """
    return Serialized(*serialize(obj, serializers=("pickle",), iterate_collection=False,
                                 on_error=on_error))


class ShardRef(NamedTuple):
    """Where a shard lives: its index, its worker's address, its actor key (Dask mode) and
    its channel's :class:`~dask_ps.state.channel.ChannelAddress` (with the channel's secret:
    a ShardRef travels through Dask's comms only), if it has one."""

    index: int
    address: str
    key: str
    channel: ChannelAddress | None = None


_local_loop: asyncio.AbstractEventLoop | None = None
_local_lock = threading.Lock()


def local_loop() -> asyncio.AbstractEventLoop:
    """The event loop that hosts in-process shards (started on first use, daemon thread)."""
    global _local_loop
    with _local_lock:
        if _local_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="dask-ps-local-shards",
                             daemon=True).start()
            _local_loop = loop
        return _local_loop


class Transport:
    """Runs shard calls for one process.

    Parameters
    ----------
    shards : list of ShardRef
    loop : asyncio.AbstractEventLoop
        The loop the calls run on.
    local : dict of int to Shard
        Shards callable directly (same worker, or in-process mode).
    rpc : callable or None
        ``rpc(address)`` gives an object with an ``actor_execute`` coroutine method.
    timeout : float
        Seconds before a call is declared failed.
    channels : bool
        Reach remote shards through their channels where they have one.
    alive : coroutine function, optional
        ``await alive(address) -> bool``: whether a worker is still in the cluster. A call
        through ``rpc`` that has not been answered after :data:`WATCH_SECONDS` asks it, and
        again every :data:`WATCH_SECONDS`: a shard whose worker left then fails at once
        instead of at the timeout (Dask's connect retries a dead address until then).
    """

    def __init__(self, shards, loop, local, rpc, timeout: float, channels: bool = False,
                 alive=None) -> None:
        self.shards = list(shards)
        self.loop = loop
        self.local = dict(local)
        self._rpc = rpc
        self._alive = alive
        self.timeout = timeout
        remote = [r for r in self.shards
                  if channels and r.channel is not None and r.index not in self.local]
        # TLS channels need this worker's client context; without one, Dask's RPC serves them
        context = worker_ssl_context("client") if any(r.channel.tls for r in remote) else None
        self.channels = {r.index: Channel(r.channel, context) for r in remote
                         if context is not None or not r.channel.tls}
        self.sync_channels = {s: SyncChannel(c.address, context)
                              for s, c in self.channels.items()}
        #: Whether :meth:`call_many` may run: in a worker, every remote shard has a channel
        #: (a worker holding every shard calls them all from the task's thread).
        self.direct = channels and len(self.channels) + len(self.local) == len(self.shards)
        #: Shard indices, remote ones first: their requests leave before the local shard's
        #: work (run inline on this loop) starts, and that work then overlaps their flight.
        self.remote_first = sorted(range(len(self.shards)), key=lambda s: s in self.local)

    async def call(self, s: int, method: str, *args, _timeout: float | None = None, **kwargs):
        """Call ``method`` of shard ``s``; raises what the shard raised, or
        :class:`ShardUnavailableError` when it cannot be reached within ``_timeout`` seconds
        (default: the transport's). A push that named keys the shard no longer holds
        (:class:`~dask_ps.exceptions.KeysNeededError`) is sent again with the keys."""
        try:
            return await self._call(s, method, args, kwargs, _timeout)
        except KeysNeededError:
            args, kwargs = with_keys(args, kwargs)
            return await self._call(s, method, args, kwargs, _timeout)

    async def map_rows(self, s: int, name: str, fn, *args, **kwargs):
        """Shard ``s``'s ``map_rows(name, fn, *args, **kwargs)`` (a function next to its
        rows of table ``name``, see :meth:`~dask_ps.state.shard.Shard.map_rows`), bounded
        by this transport's timeout. What ``fn`` raises reaches the caller as itself, with
        a note naming the function, the table, the shard and its worker."""
        try:
            # the shard bounds its waits (for the clock, for a function before) and the
            # run by ``timeout`` each: its answer comes before ``_timeout``
            return await self.call(s, "map_rows", name, fn, *args, timeout=self.timeout,
                                   _timeout=3 * self.timeout + 5, **kwargs)
        except ShardFunctionRunningError:  # names them already
            raise
        except Exception as exc:
            where = f"on shard {s} (worker {self.shards[s].address}) of table {name!r}"
            kind = getattr(exc, "unpicklable_result", None)  # see unpicklable_result
            request = getattr(exc, "unpicklable_request", None)  # see unpicklable_request
            if request is not None:
                at, kind = request  # the request's args are (name, fn, *args)
                what = ("the function (or what it refers to)" if at == 1 else
                        f"its argument {at - 2}, a {kind}," if isinstance(at, int) and at > 1
                        else "its arguments")
                note_function(exc, fn, f"for shard {s} (worker {self.shards[s].address}) of "
                                       f"table {name!r}: {what} cannot be pickled to reach "
                                       f"the shard", how="pickling")
            elif kind is None:
                note_function(exc, fn, where)
            else:
                note_function(exc, fn, f"{where}: its result, a {kind}, cannot be pickled "
                                       f"to reach the caller", how="returned by")
            raise

    def map_all(self, name: str, fn, *args, shards=None, **kwargs) -> list:
        """:meth:`map_rows` on each of ``shards`` (default: every shard) concurrently, from a
        thread other than the transport's loop; their results in that order. How the library
        runs every function next to the shards (:meth:`~dask_ps.PSModel.map_shards`, the
        key sampling and row gathering of checkpoints and exports): their errors name the
        function, the table, the shard and its worker, and one still running after the
        timeout raises :class:`~dask_ps.exceptions.ShardFunctionRunningError` (busy, not
        lost), never :class:`ShardUnavailableError`. A function or an argument that cannot be
        pickled for a remote shard raises pickle's error before a local shard runs it."""
        shards = range(len(self.shards)) if shards is None else shards

        async def each():
            # the remote calls first: each pickles its request in its first step, so that
            # a function or an argument that cannot be pickled is refused before a local
            # shard runs the function (and perhaps changes its rows)
            calls = {s: asyncio.ensure_future(self.map_rows(s, name, fn, *args, **kwargs))
                     for s in shards if s not in self.local}
            if calls and len(calls) < len(shards):
                await asyncio.sleep(0)
                refused = [c.exception() for c in calls.values() if c.done()
                           and getattr(c.exception(), "unpicklable_request", None)]
                if refused:
                    await asyncio.gather(*calls.values(), return_exceptions=True)
                    raise refused[0]
            calls.update({s: asyncio.ensure_future(self.map_rows(s, name, fn, *args, **kwargs))
                          for s in shards if s in self.local})
            return list(await asyncio.gather(*(calls[s] for s in shards)))

        return self.run(each())

    async def _call(self, s: int, method: str, args: tuple, kwargs: dict,
                    _timeout: float | None):
        ref = self.shards[s]
        timeout = self.timeout if _timeout is None else _timeout
        if s in self.local:
            # In-process: nothing can be lost on the way, and a pull that waits for clocks
            # times out inside the shard (with a message naming the slow participants).
            return await self.local[s].dispatch_call(method, args, kwargs)
        channel = self.channels.get(s)
        if channel is None:  # pickled here, before any wait (see map_all), as a channel does
            try:
                request = packed((method, args, kwargs), on_error="raise")
            except Exception as exc:  # noqa: BLE001 - pickle's error, and what failed
                import cloudpickle  # what Dask's pickling falls back to (and logs nothing)

                raise unpicklable_request(exc, args, kwargs, cloudpickle.dumps) from None
        try:
            async with asyncio.timeout(timeout):  # cheaper than wait_for: no extra task
                if channel is not None:
                    status, result = await channel.call(method, args, kwargs)
                else:
                    resp = await self._watched(s, method, self._rpc(ref.address).actor_execute(
                        actor=ref.key, function="dispatch", args=[request], kwargs={}))
                    status = resp["status"]
                    result = resp["result" if status == "OK" else "exception"]
                    if isinstance(result, Serialized):  # in-process comms pass it through
                        result = deserialize(result.header, result.frames)
        except TimeoutError:  # before OSError, its base class
            raise self._unavailable(s, method, timeout, TimeoutError()) from None
        except ShardUnavailableError:  # its worker left (_watched): an OSError already
            raise
        except (OSError, CommClosedError) as exc:
            raise ShardUnavailableError(s, ref.address, f"{method} failed: {exc!r}") from exc
        if status == "OK":
            return result
        raise result

    async def _watched(self, s: int, method: str, call):
        """Await ``call`` to shard ``s``, failing at once if its worker leaves the cluster
        (see ``alive``)."""
        if self._alive is None:
            return await call
        task = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WATCH_SECONDS)
                if done:
                    return task.result()
                address = self.shards[s].address
                if not await self._alive(address):
                    raise ShardUnavailableError(s, address, f"{method}: its worker left the "
                                                            f"cluster (PSModel.recover "
                                                            f"restores its shards from a "
                                                            f"checkpoint)")
        finally:  # the call's timeout, or the worker gone: the call goes too
            if not task.done():
                task.cancel()

    async def call_all(self, method: str, *args, **kwargs) -> list:
        """The same call on every shard, concurrently; results in shard order."""
        return list(await asyncio.gather(*(self.call(s, method, *args, **kwargs)
                                           for s in range(len(self.shards)))))

    def call_many(self, calls: list, timeout: float, meanwhile=None,
                  arrived=None) -> list:
        """Blocking twin of gathering :meth:`call`, for a task's thread when :attr:`direct`:
        ``calls`` is a list of ``(shard, method, kwargs)``; returns their results in order.
        ``meanwhile``, if given, is an iterator of steps of the caller's own work (each
        ``next()`` does one), advanced once the remote requests are sent, whenever no answer
        is waiting to be read, and run to its end before this returns: the caller's work
        overlaps the shards', and their answers do not wait for it (a shard whose answers
        fill the connection's buffers stops until they are read); ``arrived(i, result)``, if
        given, as the answer of remote call ``i`` is read, while later ones may still be on
        their way.

        Remote shards get their requests first, straight from this thread (no hop to the
        event loop and back); the local shard's calls then run, in this thread too unless a
        pull must wait for slower clocks (then on the loop), while the remote ones are
        answered. A remote shard may get several calls (the pieces of a large pull, see
        :func:`~dask_ps.state.wire_forms.piece_bounds`): all are sent before the first
        reply is read, every shard's first piece before the second ones, so that the
        shards work on one piece while the next travels. (Keeping 2-4 pieces of a pull in
        flight instead, the next sent as an answer is read, changed a 10^6-key pull by -1.5
        to +0.6 ms in 5 alternated runs: not kept.)

        A push that named keys a remote shard no longer holds is sent again with the keys
        (see :meth:`call`); the shard's pulls sent behind it are then sent again too, so
        that they see that push (not its pushes: they were applied).

        Raises
        ------
        ShardUnavailableError
            A remote shard did not answer within ``timeout`` seconds, or its connection
            failed; else the first error a shard raised (after every call is answered).
        RuntimeError
            When called from the loop's own thread, or from a function running next to a
            shard's rows (see :func:`refuse_in_shard_function`).
        """
        if _running_loop() is self.loop:
            raise RuntimeError("dask_ps blocking calls cannot run on the event loop that serves "
                               "them; use the *_async methods from coroutines")
        refuse_in_shard_function()
        results: list = [None] * len(calls)
        errors: list = []
        local = [(i,) + tuple(c) for i, c in enumerate(calls) if c[0] in self.local]
        failed: set = set()  # remote shards whose connection failed
        started = self._start_remote(
            [(i,) + tuple(c) for i, c in enumerate(calls) if c[0] not in self.local],
            timeout, errors, failed)
        waiting = []
        parked = []
        for i, s, method, kwargs in local:
            box = Future()
            try:
                done, out = self.local[s].call_now(method, kwargs, park=_settle(box),
                                                   wait=timeout)
            except Exception as exc:
                errors.append(exc)
                continue
            if done:
                results[i] = out
            elif out is None:  # parked: the thread that completes the clock answers
                parked.append((i, box))
            else:
                waiting.append((i, s, "pull", out))
        fut = self.submit(self._call_local(waiting)) if waiting else None
        self._finish_remote(started, timeout, results, errors, failed, arrived, meanwhile)
        try:
            for _ in meanwhile or ():  # the steps left
                pass
        except Exception as exc:  # raised below, once the local calls are answered too
            errors.append(exc)
        for i, box in parked:
            try:
                results[i] = box.result(timeout + 5)
            except FutureTimeout as exc:  # the builtin TimeoutError: the shard's own too
                if box.done():  # the shard's: it names the participants waited for
                    errors.append(exc)
                else:
                    errors.append(TimeoutError(f"a parked pull got no answer within "
                                               f"{timeout + 5:g} s"))
            except Exception as exc:
                errors.append(exc)
        if fut is not None:
            try:
                for i, result in fut.result():
                    results[i] = result
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return results

    def _start_remote(self, calls: list, timeout: float, errors: list, failed: set) -> list:
        """Send the remote ``(i, shard, method, kwargs)`` calls, a shard's in order, the
        shards taking turns; returns ``(i, shard, method, kwargs, request id)`` of those
        sent. A shard whose connection fails gets no more (it joins ``failed``, its error
        ``errors``)."""
        by_shard: dict[int, list] = {}
        for call in calls:
            by_shard.setdefault(call[1], []).append(call)
        started = []
        for turn in itertools.zip_longest(*by_shard.values()):
            for call in turn:
                if call is None or call[1] in failed:
                    continue
                i, s, method, kwargs = call
                try:
                    started.append(call + (self.sync_channels[s].start(method, (), kwargs,
                                                                       timeout),))
                except OSError as exc:
                    failed.add(s)
                    errors.append(self._unavailable(s, method, timeout, exc))
        return started

    def _finish_remote(self, started: list, timeout: float, results: list, errors: list,
                       failed: set, arrived=None, steps=None) -> None:
        """Read the replies of the ``started`` calls into ``results`` (errors into
        ``errors``; each result to ``arrived(i, result)`` too, if given), sending a push
        again with its keys where the shard asks for them; ``steps`` (see :meth:`call_many`)
        advanced while the next reply has not begun to arrive (a step's error joins
        ``errors`` and ends them)."""
        again: dict[int, list] = {}  # shard -> its pulls sent behind a push sent again
        for i, s, method, kwargs, rid in started:
            if s in failed:
                continue
            channel = self.sync_channels[s]
            while steps is not None and not channel.ready([channel], 0):
                try:
                    next(steps)
                except StopIteration:
                    steps = None
                except Exception as exc:  # the replies are still read
                    errors.append(exc)
                    steps = None
            try:
                status, result = channel.finish(rid)
                if status != "OK" and isinstance(result, KeysNeededError):
                    # at once: the shard's pulls behind it may wait for the tick it carries
                    status, result = channel.finish(channel.start(
                        method, (), with_keys((), kwargs)[1], timeout))
                    again[s] = []
                elif s in again and method == "pull":  # (a push behind was applied: once)
                    again[s].append((i, s, method, kwargs))
                    continue  # its answer did not see the push: the next one counts
            except OSError as exc:
                failed.add(s)
                errors.append(self._unavailable(s, method, timeout, exc))
                continue
            if status == "OK":
                results[i] = result
                if arrived is not None:
                    try:
                        arrived(i, result)
                    except Exception as exc:  # the later replies are still read
                        errors.append(exc)
            else:
                errors.append(result)
        if any(again.values()):
            self._finish_remote(self._start_remote(
                [c for calls in again.values() for c in calls], timeout, errors, failed),
                timeout, results, errors, failed, arrived)

    async def _call_local(self, calls: list) -> list:
        return [(i, await self.local[s].dispatch_call(method, (), kwargs))
                for i, s, method, kwargs in calls]

    def _unavailable(self, s: int, method: str, timeout: float, exc: OSError):
        address = self.shards[s].address
        if isinstance(exc, TimeoutError):
            return ShardUnavailableError(s, address, f"{method} got no answer within "
                                                     f"{timeout:g} s")
        return ShardUnavailableError(s, address, f"{method} failed: {exc!r}")

    def close(self) -> None:
        """Close the channels (from any thread)."""
        for channel in self.sync_channels.values():
            channel.close()
        channels, self.channels = list(self.channels.values()), {}
        for channel in channels:
            try:
                self.loop.call_soon_threadsafe(channel.close)
            except RuntimeError:  # the loop is closed: so are its sockets
                pass

    def submit(self, coro) -> Future:
        """Start ``coro`` on the transport's loop from another thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro):
        """Run ``coro`` on the transport's loop and wait for its result.

        Raises
        ------
        RuntimeError
            When called from the loop's own thread, where waiting would deadlock, or from a
            function running next to a shard's rows (see :func:`refuse_in_shard_function`).
        """
        if _running_loop() is self.loop:
            coro.close()
            raise RuntimeError("dask_ps blocking calls cannot run on the event loop that serves "
                               "them; use the *_async methods from coroutines")
        try:
            refuse_in_shard_function()
        except RuntimeError:
            coro.close()
            raise
        return self.submit(coro).result()


def _settle(box: Future):
    """The ``park`` callable of a local parked pull: settles ``box``."""
    def park(ok: bool, result) -> None:
        if ok:
            box.set_result(result)
        else:
            box.set_exception(result)
    return park


class Shipped:
    """A function that travels by value (cloudpickle), so that functions defined in a user's
    script reach the shards over the direct channels, which use plain pickle."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __reduce__(self):
        import cloudpickle

        return unship, (cloudpickle.dumps(self.fn),)

    def __call__(self, *args):
        return self.fn(*args)


def function_name(fn) -> str:
    """What error messages call ``fn`` (a :class:`Shipped` one by the function it ships):
    its module and qualified name, e.g. ``"mymodule.shard_sum"``, or its ``repr``."""
    fn = fn.fn if isinstance(fn, Shipped) else fn
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else name


def note_function(exc: BaseException, fn, where: str, how: str = "raised by"
                  ) -> BaseException:
    """Add to ``exc`` the note naming a user's function ``fn`` run by the library
    (:func:`function_name`) and ``where`` it ran: ``"{how} function {name} {where}"``. How
    the errors of such functions say whose they are (a ``map_shards`` function's, a job's
    step's or its result's, see :mod:`dask_ps.model._tasks`). Returns ``exc``."""
    exc.add_note(f"{how} function {function_name(fn)} {where}")
    return exc


def unship(blob: bytes):
    import pickle

    return Shipped(pickle.loads(blob))
