"""One client connection: frames in, responses out, in request order.

`data_received` splits the byte stream into frames (checking each size before
buffering a byte of it). A request of up to 64 KiB that cannot wait on anything (all
but JoinGroup, SyncGroup and SaslAuthenticate) is served right there when nothing is
ahead of it;
the others, and everything after them, are queued for the connection's worker task,
which takes the frames in order, runs the handler, and writes the response. A handler
served here that finds it must wait after all (a Fetch that has to long-poll, a big
Produce checked in a thread) returns an awaitable, which the worker finishes before
anything queued behind it. Like Kafka, a connection's requests are processed one at a
time, so responses leave in request order; clients pipeline (librdkafka keeps up to 5
in flight) and the next frames wait, already read, in the queue.

Serving one request reads decode -> handle -> encode: the frame is decoded here, the
dispatcher (broker/network/dispatch.py) runs its handler with what the broker adds around it
(faults, the fsync wait, metrics), and the response is encoded and written here.

A connection holds at most 64 queued requests and one request's worth of bytes
(socket.request.max.bytes) before it stops reading from its socket, and every
connection's queued and half-received requests count against queued.max.request.bytes
(broker/network/request_memory.py). A client that closes its end is closed at once, whatever
it left queued or waiting (a long-polling Fetch): Kafka drops such requests too. A
connection with no request in hand and no bytes in or out for connections.max.idle.ms
is closed, as Kafka closes idle connections.

Anything wrong with a frame that leaves the stream unframeable (bad size, undecodable
header, unknown API) closes this connection with a log line; every other connection
carries on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from inspect import iscoroutine
from typing import TYPE_CHECKING, Any, Coroutine, NamedTuple

from ottla.protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, SUPPORTED, Api
from ottla.protocol.codec import (MalformedRequest, RequestHeader, decode_request, encode_response,
                                  parse_request_header, request_class)
from ottla.protocol.framing import FrameError, FrameReader

from .dispatch import Dispatcher
from ..handlers import RequestContext, api_versions_fallback
from ..logging import get_logger
from .request_memory import RequestMemory
from ..security.sasl import AuthenticationFailed, Session
from ..security.security_config import PLAINTEXT, ListenerSecurity
from ..services import Services
from ..security.tls import certificate_principal

if TYPE_CHECKING:
    from ..config import Listener

log = get_logger("ottla.connection")

# Stop reading from a client that has this many requests queued: back-pressure.
_MAX_QUEUED_FRAMES = 64
_WRITE_HIGH_WATER = 4 * 1024 * 1024
# Requests up to this size may be served straight from data_received (_serve_inline).
# Larger ones (big Produce batches) go through the worker: next to their own work the
# hop is nothing, and inline they cost more broker CPU per byte (bench/RESULTS.md).
_INLINE_MAX_BYTES = 64 * 1024
# Bytes 0-1 of a request: its API key (the frame's size prefix is already stripped).
_API_KEY_BYTES = slice(0, 2)
# What a SASL listener serves before the client has authenticated (and what a client
# sends to authenticate again, KIP-368).
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS.key, SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key})


class Request(NamedTuple):
    header: RequestHeader
    api: Api
    body: Any


class Connection(asyncio.Protocol):
    def __init__(self, services: Services, dispatcher: Dispatcher, listener: "Listener",
                 registry: set["Connection"], max_request_bytes: int, memory: RequestMemory,
                 security: ListenerSecurity = PLAINTEXT, mapping_rules: tuple = ()) -> None:  # type: ignore[type-arg]
        self.services = services
        # Who the client is: ANONYMOUS, its certificate's name, or its SASL user.
        self.session = Session(security)
        self._sasl = security.uses_sasl
        self._mapping_rules = mapping_rules
        self.dispatcher = dispatcher
        self.metrics = dispatcher.metrics
        self.listener = listener  # the one this client connected to: its address is what it is told
        self.registry = registry  # the broker's open connections, to finish at shutdown
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_id: str | None = None
        self._reader = FrameReader(max_request_bytes)
        self._frames: deque[memoryview] = deque()
        self._max_queued_bytes = max_request_bytes
        self._queued_bytes = 0  # of the frames in _frames
        self.memory = memory
        self._held = 0  # what this connection counts in `memory`: queued + half-received
        self._in_hand = False  # the worker is serving a request (a long-poll Fetch may wait)
        # A request served inline whose handler still has to wait (records checked in a
        # thread, a Fetch's long poll): the worker finishes it (its awaitable) before
        # anything queued behind it.
        self._unfinished: tuple[RequestContext, Request, Coroutine[Any, Any, Any]] | None = None
        self.last_active = 0.0  # loop time of the last bytes in or out
        self._wakeup: asyncio.Future[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closing = False
        self._drained: asyncio.Future[None] | None = None
        # Set while the client is throttled by a quota (KIP-219): its next request waits.
        self._muted: asyncio.Future[None] | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.session.security.uses_tls and not self._take_certificate(transport):
            return
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self._worker = self._loop.create_task(self._work())
        self.registry.add(self)
        self.metrics.connections_opened += 1

    def data_received(self, data: bytes) -> None:
        self.metrics.bytes_in += len(data)
        self.last_active = self._loop.time()
        self._take(data)

    def _take(self, data: bytes) -> None:
        try:
            # Over the broker-wide bound a connection that already holds requests
            # starts no new one: the bytes wait in the reader's backlog and it stops
            # reading (below). One that holds none may, so clients that queue big
            # requests and never let them be served cannot starve everyone else.
            frames = self._reader.feed(data, start_new=not self._held or not self.memory.full)
        except FrameError as exc:
            self.abort(f"bad frame: {exc}")
            return
        if frames and self._worker_idle() and not (self._sasl and self.session.needs_authentication):
            frames = self._serve_inline(frames)
            if self._unfinished is not None:
                self._wake()
        if frames:
            self._frames.extend(frames)
            self._queued_bytes += sum(map(len, frames))
            self._wake()
        if frames or self._held or self._reader.pending:
            self._account()
            if not self._reading_paused and self._over_limits():
                self._reading_paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        # The client closed its end. Kafka closes the connection then, dropping what it
        # had queued or in hand; so do we (returning False closes the transport, and
        # connection_lost lets go of everything), instead of keeping the socket in
        # CLOSE_WAIT for as long as a long-polling Fetch may wait.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # a reset or a broken pipe, not a close
            self.metrics.connection_errors += 1
            log.info("connection lost", peer=self.peer, client_id=self.client_id, error=str(exc) or type(exc).__name__)
        self._closing = True
        self.registry.discard(self)
        self._frames.clear()
        self._queued_bytes = 0
        self._reader = FrameReader(0)  # drops a half-received frame
        self._account()
        self.memory.forget(self)
        if self._unfinished is not None and not self._in_hand:
            self._unfinished[2].close()  # never begun: nothing to finish, no one to answer
            self._unfinished = None
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # --- what a connection may hold ------------------------------------------------------

    def _account(self) -> None:
        """Bring this connection's share of the request memory up to date."""
        held = self._queued_bytes + self._reader.pending
        if held != self._held:
            delta, self._held = held - self._held, held
            self.memory.adjust(delta)

    def _over_limits(self) -> bool:
        if len(self._frames) >= _MAX_QUEUED_FRAMES or self._queued_bytes >= self._max_queued_bytes:
            return True
        # Over the broker-wide bound: a request already begun may finish (pausing it
        # halfway would hold its bytes with no way to release them); nothing new starts.
        if self._reader.backlog:
            self.memory.pause(self)
            return True
        return False

    def resume_if_room(self) -> None:
        """Read again once this connection is back under its limits."""
        if not self._reading_paused or self._closing or self.transport is None:
            return
        if (len(self._frames) < _MAX_QUEUED_FRAMES // 2 and self._queued_bytes < self._max_queued_bytes // 2
                and not self.memory.full):
            self._reading_paused = False
            self.memory.forget(self)
            self.transport.resume_reading()
            backlog, self._reader.backlog = self._reader.backlog, b""
            if backlog:
                self._take(backlog)

    def idle_since(self) -> float | None:
        """The loop time since which this connection has been idle (nothing in or out,
        no request in hand or queued), or None if it is not idle."""
        if self._in_hand or self._frames or self._reader.pending:
            return None
        return self.last_active

    # --- serving at once -----------------------------------------------------------------

    def _worker_idle(self) -> bool:
        """Nothing is queued or being served, and the client is reading what we send."""
        return (not self._frames and self._wakeup is not None and not self._wakeup.done()
                and self._drained is None and not self._closing and self._unfinished is None
                and self._muted is None)

    def _serve_inline(self, frames: list[memoryview]) -> list[memoryview]:
        """Serve, right here in data_received, the frames whose handling cannot wait on
        anything; returns the rest (from the first that may wait) for the worker.

        Serving them here saves the hop through the worker task, which is a good part of
        a short request's round trip. Order holds: this runs only when the worker has
        nothing queued or in hand, and stops at the first request that has to go to it."""
        dispatcher = self.dispatcher
        for i, frame in enumerate(frames):
            if (self._drained is not None  # the client stopped reading: the worker waits for it
                    or not 2 <= len(frame) <= _INLINE_MAX_BYTES
                    or not dispatcher.can_handle_now(int.from_bytes(frame[_API_KEY_BYTES], "big", signed=True))):
                return frames[i:]
            request = self._decode(frame)
            if request is None:
                if self._is_open():
                    continue  # answered already (an ApiVersions version we do not speak)
                return []
            ctx = self._context(request.header)
            try:
                response = dispatcher.handle_now(ctx, request.body)
            except Exception:  # noqa: BLE001 - a handler bug must not take the broker down
                self._handler_failed(request)
                return []
            if iscoroutine(response):
                self._unfinished = (ctx, request, response)
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
                while self._frames:
                    if self._muted is not None:
                        await self._muted
                        continue  # the connection may have closed meanwhile
                    frame = self._frames.popleft()
                    self._queued_bytes -= len(frame)
                    self._account()
                    self.resume_if_room()
                    self._in_hand = True
                    try:
                        if not await self._serve(frame):
                            return
                    finally:
                        self._in_hand = False
                    if self._drained is not None:
                        await self._drained
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
        except Exception:  # noqa: BLE001 - a handler bug must not take the broker down
            self._handler_failed(request)
            return False
        finally:
            self._unfinished = None
            self._in_hand = False
        self._respond(ctx, request, response)
        return self._is_open()

    async def _serve(self, frame: memoryview) -> bool:
        """Handle one request frame. Returns False if the connection was closed."""
        if self.session.raw_tokens:
            return await self._serve_raw_token(frame)
        request = self._decode(frame)
        if request is None:
            return self._is_open()
        ctx = self._context(request.header)
        try:
            response = await self.dispatcher.handle(ctx, request.body, self.close)
        except Exception:  # noqa: BLE001 - a handler bug must not take the broker down
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
        if self._sasl and header.api_key not in _BEFORE_AUTHENTICATION and self.session.needs_authentication:
            # Kafka's SaslServerAuthenticator closes the connection, answering nothing.
            reason = "re-authentication is due" if self.session.authenticated else "not authenticated yet"
            self.abort(f"{api.name} request on a SASL listener: {reason}", correlation_id=header.correlation_id)
            return None
        cls = request_class(header.api_key, header.api_version)
        try:
            body = decode_request(cls, frame, header.body_offset)
        except MalformedRequest as exc:
            self.abort(f"malformed {api.name} v{header.api_version}: {exc}", correlation_id=header.correlation_id)
            return None
        except Exception:  # noqa: BLE001 - a decoder bug: this connection ends, the broker goes on
            log.exception("request could not be decoded", api=api.name, version=header.api_version, peer=self.peer)
            self.abort(f"undecodable {api.name} v{header.api_version}", correlation_id=header.correlation_id)
            return None
        return Request(header, api, body)

    def _context(self, header: RequestHeader) -> RequestContext:
        return RequestContext(self.services, header, self.peer, self.listener.advertised_address, self.session)

    # --- security ------------------------------------------------------------------------

    def _take_certificate(self, transport: asyncio.BaseTransport) -> bool:
        """The principal of a client certificate (mutual TLS). False when the
        certificate maps to no principal: the connection is closed, as Kafka does."""
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if der is None:
            return True  # no certificate asked for, or none offered where it is optional
        user = certificate_principal(der, self._mapping_rules)
        if user is None:
            log.warning("closing connection", reason="no ssl.principal.mapping.rules rule maps the client certificate",
                        peer=self.peer)
            transport.close()
            return False
        self.session.user = user
        return True

    async def _serve_raw_token(self, frame: memoryview) -> bool:
        """A SASL token in a bare frame, after a SaslHandshake v0; the answer is a bare
        frame too. A failure closes the connection without an answer (the old way has
        no error to send)."""
        try:
            challenge, _ = self.session.respond_to(bytes(frame), self.services.security_events, self.peer)
        except AuthenticationFailed:
            await asyncio.sleep(self.session.security.failed_auth_delay_ms / 1000)
            self.close()
            return False
        if self._is_open():
            self.transport.write(len(challenge).to_bytes(4, "big") + challenge)  # type: ignore[union-attr]
        return self._is_open()

    def _respond(self, ctx: RequestContext, request: Request, response: Any) -> None:
        if response is not None:
            self._send(request.header.correlation_id, response)
        if ctx.throttle_ms:
            self._mute(ctx.throttle_ms)
        if self.session.close_after_response:
            self.close()  # a failed authentication: the answer goes out, then the connection
        if ctx.deferred is not None:
            self._run_deferred(ctx, request.api.name)

    def _mute(self, throttle_ms: int) -> None:
        """A quota throttles the client (broker/client_quotas.py): as Kafka does since
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
            except Exception:  # noqa: BLE001 - the response is sent; log, keep serving
                log.exception("work after the response failed", api=api_name, client_id=ctx.header.client_id)

    def _send(self, correlation_id: int, response: object) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        chunks = encode_response(correlation_id, response)
        self.metrics.bytes_out += sum(map(len, chunks))
        self.last_active = self._loop.time()
        if len(chunks) == 1:
            self.transport.write(chunks[0])  # most responses: one buffer, one send
        else:
            self.transport.writelines(chunks)

    # --- closing -------------------------------------------------------------------------

    def abort(self, reason: str, correlation_id: int | None = None) -> None:
        """Close this connection because of what the client sent."""
        log.warning("closing connection", reason=reason, peer=self.peer, client_id=self.client_id,
                    correlation_id=correlation_id)
        self.metrics.connection_errors += 1
        self._frames.clear()
        self.close()

    def close(self) -> None:
        self._closing = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def finish(self) -> None:
        """Graceful shutdown: answer the requests already received, then close."""
        self._closing = True
        if self._muted is not None:  # a throttle is not waited out at shutdown
            muted, self._muted = self._muted, None
            muted.set_result(None)
        self._wake()
        if self._worker is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._worker), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._worker.cancel()
        self.close()

