"""One client connection: frames in, responses out, in request order.

`data_received` splits the byte stream into frames (checking each size before
buffering a byte of it). A request of up to 64 KiB that cannot wait on anything (all
but a long-polling Fetch and a group's JoinGroup/SyncGroup) is served right there when
nothing is ahead of it; the others, and everything after them, are queued for the
connection's worker task, which takes the frames in order, runs the handler, and
writes the response. Like Kafka, a connection's requests are processed one at a time,
so responses leave in request order; clients pipeline (librdkafka keeps up to 5 in
flight) and the next frames wait, already read, in the queue.

Anything wrong with a frame that leaves the stream unframeable (bad size, undecodable
header, unknown API) closes this connection with a log line; every other connection
carries on.

Each request also meets the fault hook (broker/faults.py: one attribute test when no
fault is set) and is counted in broker/metrics.py (a few increments and a perf_counter
pair; nothing per record).
"""

from __future__ import annotations

import asyncio
from collections import deque
from time import perf_counter
from typing import TYPE_CHECKING

from ottla.protocol.apis import API_VERSIONS, SUPPORTED
from ottla.protocol.codec import MalformedRequest, decode_request, encode_response, parse_request_header, request_class
from ottla.protocol.framing import FrameError, FrameReader

from .faults import ERROR
from .handlers import HANDLERS, MAY_WAIT, RequestContext, api_versions_fallback
from .logging import get_logger

if TYPE_CHECKING:
    from .config import Listener
    from .server import Broker

log = get_logger("ottla.connection")

# Stop reading from a client that has this many requests queued: back-pressure.
_MAX_QUEUED_FRAMES = 64
_WRITE_HIGH_WATER = 4 * 1024 * 1024
# Requests up to this size may be served straight from data_received (_serve_inline).
# Larger ones (big Produce batches) go through the worker: the hop costs them nothing
# that shows, and serving them inline measured slower (more broker CPU per byte).
_INLINE_MAX_BYTES = 64 * 1024


class Connection(asyncio.Protocol):
    def __init__(self, broker: "Broker", listener: "Listener") -> None:
        self.broker = broker
        self.listener = listener  # the one this client connected to: its address is what it is told
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_id: str | None = None
        self._reader = FrameReader(broker.config.socket_request_max_bytes)
        self._frames: deque[memoryview] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closing = False
        self._drained: asyncio.Future[None] | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self._worker = asyncio.get_running_loop().create_task(self._work())
        self.broker.connections.add(self)
        self.broker.metrics.connections_opened += 1

    def data_received(self, data: bytes) -> None:
        self.broker.metrics.bytes_in += len(data)
        try:
            frames = self._reader.feed(data)
        except FrameError as exc:
            self.abort(f"bad frame: {exc}")
            return
        if frames and self._worker_idle():
            frames = self._serve_inline(frames)
        if frames:
            self._frames.extend(frames)
            self._wake()
            if len(self._frames) >= _MAX_QUEUED_FRAMES and not self._reading_paused:
                self._reading_paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        # The client finished sending; answer what it already sent, then close.
        self._closing = True
        self._wake()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # a reset or a broken pipe, not a close
            self.broker.metrics.connection_errors += 1
            log.info("connection lost", peer=self.peer, client_id=self.client_id, error=str(exc) or type(exc).__name__)
        self._closing = True
        self.broker.connections.discard(self)
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

    # --- serving at once -----------------------------------------------------------------

    def _worker_idle(self) -> bool:
        """Nothing is queued or being served, and the client is reading what we send."""
        return (not self._frames and self._wakeup is not None and not self._wakeup.done()
                and self._drained is None and not self._closing)

    def _serve_inline(self, frames: list[memoryview]) -> list[memoryview]:
        """Serve, right here in data_received, the frames whose handling cannot wait on
        anything; returns the rest (from the first that may wait) for the worker.

        Most requests never wait: their handlers are `async` only to share one calling
        convention with those that do (see handlers.MAY_WAIT). Serving them here saves
        the hop through the worker task, which is a good part of a short request's round
        trip. Order holds: this runs only when the worker has nothing queued or in hand,
        and stops at the first request that has to go to it."""
        broker = self.broker
        if broker.faults.armed or broker.group_commit is not None:
            return frames  # a fault may delay a response; --fsync waits for the disk
        for i, frame in enumerate(frames):
            if (self._drained is not None  # the client stopped reading: the worker waits for it
                    or not 2 <= len(frame) <= _INLINE_MAX_BYTES
                    or int.from_bytes(frame[:2], "big", signed=True) in MAY_WAIT):
                return frames[i:]
            serving = self._serve(frame)
            try:
                serving.send(None)
            except StopIteration as done:
                if not done.value:  # the connection was closed
                    return []
                continue
            # A handler outside MAY_WAIT waited: a bug (tests/unit/test_handlers.py guards
            # against it). Close this connection rather than answer out of order.
            serving.close()
            log.error("a request that cannot wait waited; closing the connection", peer=self.peer)
            self.close()
            return []
        return []

    # --- the worker ----------------------------------------------------------------------

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                while self._frames:
                    frame = self._frames.popleft()
                    if self._reading_paused and len(self._frames) < _MAX_QUEUED_FRAMES // 2:
                        self._reading_paused = False
                        self.transport.resume_reading()  # type: ignore[union-attr]
                    if not await self._serve(frame):
                        return
                    if self._drained is not None:
                        await self._drained
                if self._closing or self.broker.stopping:
                    self.close()
                    return
                self._wakeup = loop.create_future()
                await self._wakeup
                self._wakeup = None
        except asyncio.CancelledError:
            pass

    async def _serve(self, frame: memoryview) -> bool:
        """Handle one request frame. Returns False if the connection was closed."""
        try:
            header = parse_request_header(frame)
        except MalformedRequest as exc:
            self.abort(f"malformed request header: {exc}")
            return False
        self.client_id = header.client_id
        api = SUPPORTED.get(header.api_key)
        if api is None:
            self.abort(f"unknown api key {header.api_key}", correlation_id=header.correlation_id)
            return False
        if not api.handles(header.api_version):
            if api is API_VERSIONS:
                # A client newer than us: answer in v0 so it can read which versions we
                # speak, and retry with one of them.
                self._send(header.correlation_id, api_versions_fallback())
                return True
            self.abort(f"{api.name} v{header.api_version} is not supported", correlation_id=header.correlation_id)
            return False
        cls = request_class(header.api_key, header.api_version)
        try:
            request = decode_request(cls, frame, header.body_offset)
        except MalformedRequest as exc:
            self.abort(f"malformed {api.name} v{header.api_version}: {exc}", correlation_id=header.correlation_id)
            return False
        started = perf_counter()
        ctx = RequestContext(self.broker, header, self)
        faults = self.broker.faults
        fault = faults.take(ctx, request) if faults.armed else None
        group_commit = self.broker.group_commit
        appends_before = group_commit.generation if group_commit is not None else 0
        try:
            if fault is not None and fault.kind == ERROR:
                response = faults.error_response(fault, ctx, request)
            else:
                response = await HANDLERS[header.api_key](ctx, request)
            if group_commit is not None and group_commit.generation != appends_before:
                await group_commit.sync()  # --fsync: what we acknowledge is on disk
        except Exception:  # noqa: BLE001 - a handler bug must not take the broker down
            log.exception("handler failed", api=api.name, version=header.api_version, client_id=header.client_id,
                          peer=self.peer)
            self.close()
            return False
        if response is not None and (fault is None or await faults.before_response(fault, self)):
            self._send(header.correlation_id, response)
        if ctx.deferred is not None:
            self._run_deferred(ctx, api.name)
        self.broker.metrics.request_served(header.api_key, perf_counter() - started, response)
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
        self.broker.metrics.bytes_out += sum(map(len, chunks))
        if len(chunks) == 1:
            self.transport.write(chunks[0])  # most responses: one buffer, one send
        else:
            self.transport.writelines(chunks)

    # --- closing -------------------------------------------------------------------------

    def abort(self, reason: str, correlation_id: int | None = None) -> None:
        """Close this connection because of what the client sent."""
        log.warning("closing connection", reason=reason, peer=self.peer, client_id=self.client_id,
                    correlation_id=correlation_id)
        self.broker.metrics.connection_errors += 1
        self._frames.clear()
        self.close()

    def close(self) -> None:
        self._closing = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def finish(self) -> None:
        """Graceful shutdown: answer the requests already received, then close."""
        self._closing = True
        self._wake()
        if self._worker is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._worker), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._worker.cancel()
        self.close()

