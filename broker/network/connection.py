"""One client connection: frames in, responses out, in request order.

`data_received` splits the byte stream into frames (checking each size before buffering a byte of it). A request of
up to 64 KiB that cannot wait on anything (all but JoinGroup, SyncGroup and SaslAuthenticate) is served right there
when nothing is ahead of it; the others, and everything after them, are queued for the connection's worker task,
which takes the frames in order, runs the handler, and writes the response. A handler served here that finds it must
wait after all (a Fetch that has to long-poll, a big Produce checked in a thread) returns an awaitable, which the
worker finishes before anything queued behind it. Like Kafka, a connection's requests are processed one at a time,
so responses leave in request order; clients pipeline (librdkafka keeps up to 5 in flight) and the next frames wait,
already read, in the queue.

The parts, as mini-redis separates listener, connection and handler: listener.py accepts; frame_intake.py turns the
byte stream into frames and holds the queued ones within their limits (back-pressure); connection_security.py is
what the listener's security asks (a client certificate's principal, the SASL gate, bare SASL tokens); this module
is the request pipeline: decode -> handle -> encode, in order. The dispatcher (dispatch.py) runs the handler with
what the broker adds around it (faults, the fsync wait, metrics).

A client that closes its end is closed at once, whatever it left queued or waiting (a long-polling Fetch): Kafka
drops such requests too. A connection with no request in hand or queued and no bytes in or out for
connections.max.idle.ms is closed, as Kafka closes idle connections, even halfway through receiving a request.

Anything wrong with a frame that leaves the stream unframeable (bad size, undecodable header, unknown API) closes
this connection with a log line; every other connection carries on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from types import CoroutineType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from ottla.protocol.apis import API_VERSIONS, SUPPORTED, Api
from ottla.protocol.codec import (
    MalformedRequest,
    RequestHeader,
    decode_request,
    encode_response,
    parse_request_header,
    request_class,
)
from ottla.protocol.framing import SIZE_BYTES, FrameError
from ottla.storage.file_slice import FileSlice

from ..handlers import RequestContext, api_versions_fallback
from ..logging import get_logger
from ..security.sasl import Session
from ..security.security_config import PLAINTEXT, ListenerSecurity
from ..services import Services
from . import compiled_pipeline
from .connection_quotas import ConnectionQuotas
from .connection_security import ConnectionSecurity
from .dispatch import Dispatcher
from .file_sender import FileSender, read_slices
from .frame_intake import FrameIntake
from .request_memory import RequestMemory

if TYPE_CHECKING:
    from ..config import Listener

log = get_logger("ottla.connection")

_WRITE_HIGH_WATER = 4 * 1024 * 1024
# Requests up to this size may be served straight from data_received (_serve_inline). Larger ones (big Produce batches)
# go through the worker: next to their own work the hop is nothing, and inline they cost more broker CPU per byte
# (bench/RESULTS.md).
_INLINE_MAX_BYTES = 64 * 1024
# Bytes 0-1 of a request: its API key (the frame's size prefix is already stripped).
_API_KEY_BYTES = slice(0, 2)
# How long a graceful shutdown waits for a connection to answer what it has received.
FINISH_TIMEOUT_SECONDS = 5


class Request(NamedTuple):
    header: RequestHeader
    api: Api
    body: Any


# (api key, version) -> (its Api, its request class), for every pair the API table serves, filled as requests arrive:
# one look-up where each request would otherwise ask the API table, the version range and kio's schema cache in turn.
_SERVED: dict[tuple[int, int], tuple[Api, Any]] = {}


class Connection(asyncio.Protocol):
    # Slots: _pipeline.c's take reads the state that says it is idle at their offsets (compiled_pipeline.TAKE_SLOTS).
    __slots__ = ("services", "quotas", "_admitted", "_host", "session", "security", "_sasl", "dispatcher", "metrics",
                 "listener", "_advertised", "registry", "transport", "peer", "client_id", "_intake", "_in_hand",
                 "_unfinished", "last_active", "_wakeup", "_worker", "_closing", "_drained", "_file_sender", "_muted",
                 "_compiled", "_loop")

    def __init__(self, services: Services, dispatcher: Dispatcher, listener: Listener,
                 registry: set[Connection], max_request_bytes: int, memory: RequestMemory,
                 quotas: ConnectionQuotas, security: ListenerSecurity = PLAINTEXT,
                 mapping_rules: tuple[Any, ...] = ()) -> None:
        self.services = services
        self.quotas = quotas  # max.connections and max.connections.per.ip
        self._admitted = False  # counted in `quotas`
        self._host = ""  # the client's address
        # Who the client is: ANONYMOUS, its certificate's name, or its SASL user.
        self.session = Session(security)
        self.security = ConnectionSecurity(self.session, mapping_rules, services.security_events)
        self._sasl = self.security.uses_sasl  # a SASL listener: frames bounded, requests gated
        self.dispatcher = dispatcher
        self.metrics = dispatcher.metrics
        self.listener = listener  # the one this client connected to: its address is what it is told
        self._advertised = listener.advertised_address  # (a frozen Listener's: the same for good)
        self.registry = registry  # the broker's open connections, to finish at shutdown
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_id: str | None = None
        self._intake = FrameIntake(max_request_bytes, memory, self._take)
        self._in_hand = False  # the worker is serving a request (a long-poll Fetch may wait)
        # A request served inline whose handler still has to wait (records checked in a thread, a Fetch's long poll):
        # the worker finishes it (its awaitable) before anything queued behind it.
        self._unfinished: tuple[RequestContext, Request, Coroutine[Any, Any, Any]] | None = None
        self.last_active = 0.0  # loop time of the last bytes in or out
        self._wakeup: asyncio.Future[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._drained: asyncio.Future[None] | None = None
        # Sends responses holding records left in their files (a Fetch's), on a plaintext listener; made at the first.
        self._file_sender: FileSender | None = None
        # Set while the client is throttled by a quota (KIP-219): its next request waits.
        self._muted: asyncio.Future[None] | None = None
        # _serve_inline's steps in C (compiled_pipeline.py): no SASL, no --fsync.
        self._compiled: Any = None

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream server's transport (uvloop's TCPTransport does not subclass asyncio's).
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._host = peer[0] if peer else ""
        # Not a byte read until max.connections has a slot for it (admitted).
        transport.pause_reading()
        self.quotas.arrived(self, self._host)

    def refused(self) -> None:
        """Over max.connections.per.ip, or too many waiting for a slot: closed unserved."""
        if self.transport is not None:
            self.transport.close()

    def admitted(self) -> None:
        """Counted in max.connections and max.connections.per.ip: served from now on."""
        self._admitted = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.security.uses_tls and not self.security.take_certificate(transport, self.peer):
            return
        transport.resume_reading()
        self.last_active = self._loop.time()
        self._intake.transport = transport
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self._worker = self._loop.create_task(self._work())
        if compiled_pipeline.compiled is not None and not self._sasl and self.dispatcher.group_commit is None:
            self._compiled = compiled_pipeline.compiled.Pipeline(
                compiled_pipeline.ROUTES, self.services, self.peer, self._advertised, self.session,
                self.dispatcher.faults, self.metrics, self, transport, self._loop.time)
        self.registry.add(self)
        self.metrics.connections_opened += 1

    def data_received(self, data: bytes) -> None:
        compiled = self._compiled
        if compiled is None:
            self.metrics.bytes_in += len(data)
            self.last_active = self._loop.time()
            self._take(data)
            return
        # Counted as above and a whole frame of an idle connection served, in C (True: all done; else _take's steps).
        served = compiled.take(data)
        if served is not True:
            self._take(data, served)

    def _take(self, data: bytes, served: Any = None) -> None:
        intake = self._intake
        sasl = self._sasl
        if sasl:
            intake.bound_frames(self.security.frame_bound())
        try:
            frames = intake.split(data) if served is None else [memoryview(data)[SIZE_BYTES:]]  # take split it
        except FrameError as exc:
            self.abort(f"bad frame: {exc}")
            return
        # Served here when the worker waits with nothing queued, and nothing holds the next request back: no request
        # served inline is unfinished, the client reads what we send, no quota throttles it, the connection is open, no
        # answer is sent from files.
        wakeup, sender = self._wakeup, self._file_sender
        if frames and (served is not None or (  # served: take found it so before serving it
                wakeup is not None and not wakeup.done() and not intake.frames
                and self._unfinished is None and self._drained is None and self._muted is None
                and not self._closing and (sender is None or sender.finished is None)
                and not (sasl and self.security.authenticating))):
            frames = self._serve_inline(frames, served)
            if self._unfinished is not None:
                self._wake()
        if frames:
            intake.queue(frames)
            self._wake()
        intake.settle(bool(frames))

    def eof_received(self) -> bool:
        # The client closed its end. Kafka closes the connection then, dropping what it had queued or in hand; so do we
        # (returning False closes the transport, and connection_lost lets go of everything), instead of keeping the
        # socket in CLOSE_WAIT for as long as a long-polling Fetch may wait.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # a reset or a broken pipe, not a close
            self.metrics.connection_errors += 1
            log.info("connection lost", peer=self.peer, client_id=self.client_id, error=str(exc) or type(exc).__name__)
        self._closing = True
        self._compiled = None  # it holds this connection
        self.quotas.left(self, self._host, self._admitted)
        self.registry.discard(self)
        self._intake.drop()
        if self._unfinished is not None and not self._in_hand:
            self._unfinished[2].close()  # never begun: nothing to finish, no one to answer
            self._unfinished = None
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._file_sender is not None:
            self._file_sender.cancel()

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # --- idleness -----------------------------------------------------------------------

    def idle_since(self) -> float | None:
        """The loop time since which this connection has been idle (nothing in or out,
        no request in hand or queued), or None if it is not idle.

        A request half received does not make a connection busy: Kafka closes a
        connection by its last I/O, mid-frame or not, and a client that announces a frame
        and stalls would otherwise hold what it sent for as long as it liked. Nor does
        waiting for the request memory to have room: Kafka's channel muted for memory
        expires by its last I/O too, and otherwise clients holding half-sent frames the
        pool made wait would be closed only one after another, as each got its turn to
        finish (RequestMemory.may_finish) and stalled."""
        if self._in_hand or self._unfinished is not None or self._intake.frames:
            return None
        return self.last_active

    # --- serving at once -----------------------------------------------------------------

    def _serve_inline(self, frames: list[memoryview], served: Any = None) -> list[memoryview]:
        """Serve, right here in data_received, the frames whose handling cannot wait on
        anything; returns the rest (from the first that may wait) for the worker. `served`:
        the first frame as the C path's take served it (or the exception its handler raised).

        Serving them here saves the hop through the worker task, which is a good part of
        a short request's round trip. Order holds: this runs only when the worker has
        nothing queued or in hand, and stops at the first request that has to go to it."""
        dispatcher = self.dispatcher
        compiled = self._compiled
        for i, frame in enumerate(frames):
            # The worker waits for the client to read (_take checked it before the first).
            if i and (self._drained is not None or self._sending_files()):
                return frames[i:]
            if compiled is not None:
                # The steps below, in C; None where they are to run here (compiled_pipeline.py).
                try:
                    if served is None:
                        served = compiled.serve(frame)
                    elif served.__class__ is not tuple:
                        raise served  # the handler's, in take
                except Exception:  # a handler bug must not take the broker down; logged with its header
                    header = parse_request_header(frame)
                    self.client_id = header.client_id
                    self._handler_failed(tuple.__new__(Request, (header, SUPPORTED[header.api_key], None)))
                    return []
                if served is not None:
                    (header, api, body, ctx, response, out), served = served, None
                    self.client_id = header.client_id
                    if out.__class__ is float:  # a coroutine, begun at `out`: the worker finishes it
                        self._unfinished = (ctx, tuple.__new__(Request, (header, api, body)),
                                            dispatcher.served_later(ctx, out, response))
                        self._intake.serving()
                        return frames[i + 1:]
                    if out.__class__ is list:  # several chunks (large values, file slices)
                        self._write(out)
                    elif out is not None and out is not True:
                        raise out  # the encoding or the write failed: raised where _send raises it
                    if ctx.throttle_ms or ctx.deferred is not None or self.session.close_after_response:
                        self._responded(ctx, api)
                    if self.transport is None or self.transport.is_closing():  # _is_open(), inline
                        return []
                    if self._muted is not None:
                        return frames[i + 1:]
                    continue
            if (not 2 <= len(frame) <= _INLINE_MAX_BYTES
                    or not dispatcher.can_handle_now(int.from_bytes(frame[_API_KEY_BYTES], "big", signed=True))):
                return frames[i:]
            request = self._decode(frame)
            if request is None:
                if self._is_open():
                    continue  # answered already (an ApiVersions version we do not speak)
                return []
            ctx = RequestContext(self.services, request.header, self.peer, self._advertised, self.session)
            try:
                response = dispatcher.handle_now(ctx, request.body)
            except Exception:  # a handler bug must not take the broker down
                self._handler_failed(request)
                return []
            if isinstance(response, CoroutineType):
                self._unfinished = (ctx, request, response)
                self._intake.serving()
                return frames[i + 1:]
            self._respond(ctx, request, response)
            if not self._is_open():
                return []
            if self._muted is not None:
                return frames[i + 1:]  # throttled: the rest waits in the worker's queue
        return []

    # --- the worker ----------------------------------------------------------------------

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if self._unfinished is not None and not await self._finish_unfinished():
                    return
                while self._intake.frames:
                    if self._muted is not None:
                        await self._muted
                        continue  # the connection may have closed meanwhile
                    if self._sending_files():
                        await self._files_sent()
                        continue
                    frame = self._intake.next_frame()
                    self._in_hand = True
                    try:
                        if not await self._serve(frame):
                            return
                    finally:
                        self._in_hand = False
                        del frame
                        self._intake.served()
                    if self._drained is not None:
                        await self._drained
                if self._sending_files():
                    await self._files_sent()
                    continue
                if self._closing or self.services.stopping:
                    self.close()
                    return
                self._wakeup = loop.create_future()
                await self._wakeup
                self._wakeup = None
        except asyncio.CancelledError:
            pass

    async def _finish_unfinished(self) -> bool:
        """Await the request `_serve_inline` left unfinished, and answer it. Returns
        False if the connection was closed."""
        assert self._unfinished is not None
        ctx, request, pending = self._unfinished
        self._in_hand = True
        try:
            response = await pending
        except Exception:  # a handler bug must not take the broker down
            self._handler_failed(request)
            return False
        finally:
            self._unfinished = None
            self._in_hand = False
            self._intake.served()
        self._respond(ctx, request, response)
        return self._is_open()

    async def _serve(self, frame: memoryview) -> bool:
        """Handle one request frame. Returns False if the connection was closed."""
        if self.session.raw_tokens:
            return await self._serve_raw_token(frame)
        request = self._decode(frame)
        if request is None:
            return self._is_open()
        ctx = RequestContext(self.services, request.header, self.peer, self._advertised, self.session)
        try:
            response = await self.dispatcher.handle(ctx, request.body, self.close)
        except Exception:  # a handler bug must not take the broker down
            self._handler_failed(request)
            return False
        self._respond(ctx, request, response)
        return self._is_open()

    def _decode(self, frame: memoryview) -> Request | None:
        """The request in `frame`, or None when there is none to handle: the frame was
        answered here (an ApiVersions version we do not speak) or the connection was
        closed because of it."""
        try:
            header = parse_request_header(frame)
        except MalformedRequest as exc:
            self.abort(f"malformed request header: {exc}")
            return None
        self.client_id = header.client_id
        served = _SERVED.get((header.api_key, header.api_version))
        if served is None:
            api = SUPPORTED.get(header.api_key)
            if api is None:
                self.abort(f"unknown api key {header.api_key}", correlation_id=header.correlation_id)
                return None
            if not api.handles(header.api_version):
                if api is API_VERSIONS:
                    # A client newer than us: answer in v0 so it can read which versions we
                    # speak, and retry with one of them.
                    self._send(header.correlation_id, api_versions_fallback())
                    return None
                self.abort(f"{api.name} v{header.api_version} is not supported", correlation_id=header.correlation_id)
                return None
            cls = request_class(header.api_key, header.api_version)
            assert cls is not None, "kio has a schema for every version the API table serves"
            served = _SERVED[header.api_key, header.api_version] = (api, cls)
            compiled_pipeline.add_route(api, cls, header.api_key, header.api_version)
        api, cls = served
        if self._sasl:  # only a SASL listener refuses requests before authentication
            refusal = self.security.refusal(header, api.name)
            if refusal is not None:
                self.abort(refusal, correlation_id=header.correlation_id)
                return None
        try:
            body = decode_request(cls, frame, header.body_offset)
        except MalformedRequest as exc:
            self.abort(f"malformed {api.name} v{header.api_version}: {exc}", correlation_id=header.correlation_id)
            return None
        except Exception:  # a decoder bug: this connection ends, the broker goes on
            log.exception("request could not be decoded", api=api.name, version=header.api_version, peer=self.peer)
            self.abort(f"undecodable {api.name} v{header.api_version}", correlation_id=header.correlation_id)
            return None
        return tuple.__new__(Request, (header, api, body))  # the named tuple, without its Python __new__

    async def _serve_raw_token(self, frame: memoryview) -> bool:
        answer = await self.security.answer_raw_token(frame, self.peer)
        if answer is None:
            self.close()
            return False
        if self._is_open():
            self.transport.write(answer)  # type: ignore[union-attr]
        return self._is_open()

    def _respond(self, ctx: RequestContext, request: Request, response: Any) -> None:
        if response is not None:
            self._send(request.header.correlation_id, response)
        self._responded(ctx, request.api)

    def _responded(self, ctx: RequestContext, api: Api) -> None:
        """After a response: the throttle, the close of a failed authentication, deferred work."""
        if ctx.throttle_ms:
            self._mute(ctx.throttle_ms)
        if self.session.close_after_response:
            self.close()  # a failed authentication: the answer goes out, then the connection
        if ctx.deferred is not None:
            self._run_deferred(ctx, api.name)

    def _mute(self, throttle_ms: int) -> None:
        """A quota throttles the client (client_quotas.py): as Kafka does since
        KIP-219, the answer goes out at once, carrying the throttle time, and the
        client's next request is served only once that time is over."""
        loop = self._loop
        if self._muted is None:
            self._muted = loop.create_future()
        muted = self._muted

        def unmute() -> None:
            if self._muted is muted:
                self._muted = None
                muted.set_result(None)
                self._wake()

        loop.call_later(throttle_ms / 1000, unmute)

    def _handler_failed(self, request: Request) -> None:
        log.exception("handler failed", api=request.api.name, version=request.header.api_version,
                      client_id=request.header.client_id, peer=self.peer)
        self.close()

    def _is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def _run_deferred(self, ctx: RequestContext, api_name: str) -> None:
        """What the handler left for after its response (RequestContext.after_response).
        Synchronous, in this same step of the event loop: nothing runs in between."""
        for work in ctx.deferred or ():
            try:
                work()
            except Exception:  # the response is sent; log, keep serving
                log.exception("work after the response failed", api=api_name, client_id=ctx.header.client_id)

    def _send(self, correlation_id: int, response: object) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self._write(encode_response(correlation_id, response))

    def _write(self, chunks: list[Any]) -> None:
        """Send a response's encoded chunks (codec.encode_response's)."""
        if self.transport is None or self.transport.is_closing():
            return
        self.metrics.bytes_out += sum(map(len, chunks))
        self.last_active = self._loop.time()
        if len(chunks) > 1 and any(chunk.__class__ is FileSlice for chunk in chunks):
            # A Fetch's records left in their files: sent from there (file_sender.py);
            # TLS encrypts bytes, so over TLS they are read into memory now.
            if self.security.uses_tls:
                try:
                    chunks = read_slices(chunks)
                except OSError as exc:  # a ShortSlice, or the disk failed under the read
                    self._files_failed(f"reading a fetch's records failed: {exc}")
                    return
            else:
                self._files().send(chunks)
                return
        if self._sending_files():
            self._files().send(chunks)  # behind the records still being sent: order holds
        elif len(chunks) == 1:
            self.transport.write(chunks[0])  # most responses: one buffer, one send
        else:
            self.transport.writelines(chunks)

    def _files(self) -> FileSender:
        if self._file_sender is None:
            assert self.transport is not None
            self._file_sender = FileSender(self.transport, self._touched, self._files_failed)
        return self._file_sender

    def _sending_files(self) -> bool:
        return self._file_sender is not None and self._file_sender.busy

    async def _files_sent(self) -> None:
        """Wait until the responses being sent from files are out (or dropped)."""
        sender = self._file_sender
        if sender is not None and sender.finished is not None:
            await sender.finished

    def _touched(self) -> None:
        self.last_active = self._loop.time()

    def _files_failed(self, reason: str) -> None:
        """A response could not be sent whole: the frame is broken, so is the connection."""
        log.warning("closing connection", reason=reason, peer=self.peer, client_id=self.client_id)
        self.metrics.connection_errors += 1
        self._intake.frames.clear()
        self._closing = True
        self._intake.stop()
        if self.transport is not None:
            self.transport.abort()

    # --- closing -------------------------------------------------------------------------

    def abort(self, reason: str, correlation_id: int | None = None) -> None:
        """Close this connection because of what the client sent."""
        log.warning("closing connection", reason=reason, peer=self.peer, client_id=self.client_id,
                    correlation_id=correlation_id)
        self.metrics.connection_errors += 1
        self._intake.frames.clear()
        self.close()

    def close(self) -> None:
        self._closing = True
        self._intake.stop()
        if self._file_sender is not None:
            self._file_sender.cancel()  # what is still queued there is dropped, as the worker's queue is
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def finish(self) -> None:
        """Graceful shutdown: answer the requests already received, then close."""
        self._closing = True
        self._intake.stop()
        if self._muted is not None:  # a throttle is not waited out at shutdown
            muted, self._muted = self._muted, None
            muted.set_result(None)
        self._wake()
        if self._worker is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._worker), timeout=FINISH_TIMEOUT_SECONDS)
            except (TimeoutError, asyncio.CancelledError):
                self._worker.cancel()
        self.close()


compiled_pipeline.lay_out_take(Connection)
