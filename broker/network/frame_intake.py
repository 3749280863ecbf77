"""The reading side of a connection: frames out of the byte stream, the frames read and
not yet served, and the limits on them.

A connection holds at most MAX_QUEUED_FRAMES queued requests and one request's worth of
bytes (socket.request.max.bytes) before it stops reading from its socket, and every
connection's requests, by the bytes received until served, count against
queued.max.request.bytes (request_memory.py). Reading resumes once the connection is
back under half its own limits and the broker-wide bound has room.

Before a SASL client has authenticated, what it sends takes nothing from the pool (as
Kafka's SaslServerAuthenticator reads into a buffer of its own): its frames are bounded
by sasl.server.max.receive.size, and so are the bytes it may have queued, so that
unauthenticated sockets cannot hold the memory an authenticated client needs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from ottla.protocol.framing import FrameReader

from .request_memory import RequestMemory

# Stop reading from a client that has this many requests queued: back-pressure.
MAX_QUEUED_FRAMES = 64
# Behind a request being served, read on only this much of the requests pipelined after
# it (queued and half received); the rest waits in the socket. Kafka reads nothing more
# from a connection until its request is answered; a few MiB keep a pipelining producer
# (librdkafka: five 1 MB batches in flight) fed, and bound what a client that queues big
# frames behind a long-polling Fetch holds: eight that queued 4 x 48 MB each and
# vanished held the 256 MiB pool (and its RSS) for as long as their sockets lived, and
# a socket whose client vanished behind unread bytes lives until it is idle.
PIPELINED_BYTES = 4 * 1024 * 1024


class FrameIntake:
    # Slots: _pipeline.c's take reads reader, memory, _pooled, _held and frames at their
    # offsets (compiled_pipeline.TAKE_SLOTS).
    __slots__ = ("reader", "_max_request_bytes", "frames", "_max_queued_bytes", "_queued_bytes", "memory", "_pooled",
                 "_held", "_serving_bytes", "_serving", "transport", "_reading_paused", "_stopped", "_take_backlog")

    def __init__(self, max_request_bytes: int, memory: RequestMemory, take_backlog: Callable[[bytes], None]) -> None:
        self.reader = FrameReader(max_request_bytes)
        self._max_request_bytes = max_request_bytes
        self.frames: deque[memoryview] = deque()
        self._max_queued_bytes = max_request_bytes
        self._queued_bytes = 0  # of the frames in `frames`
        self.memory = memory
        self._pooled = True  # what it holds counts in `memory` (not before SASL authentication)
        self._held = 0  # what this connection counts in `memory`: queued + in hand + being received
        self._serving_bytes = 0  # the request being served: its frame is still held
        self._serving = False  # a request is being served (queued or inline)
        self.transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._stopped = False  # the connection is closing: never resume reading
        # Bytes read while over the broker-wide bound go back through the connection when
        # reading resumes, as if they had just arrived.
        self._take_backlog = take_backlog

    def split(self, data: bytes) -> list[memoryview]:
        """The whole frames `data` completes (FrameError: the stream cannot be framed)."""
        # With the broker-wide pool exhausted no new request starts (but a small one on a
        # connection holding nothing): the bytes wait in the reader's backlog and the
        # connection stops reading (settle).
        # While the pool has room every frame may start (RequestMemory.may_start), and
        # nothing in feed changes that: the question is asked only of a full pool.
        memory = self.memory
        if not self._pooled or not 0 < memory.limit <= memory.used:  # RequestMemory.full, inline: every read
            return self.reader.feed(data)
        return self.reader.feed(data, lambda size: memory.may_start(size, self._held))

    def bound_frames(self, before_authentication: int | None) -> None:
        """Until the client has authenticated, frames are bounded by
        sasl.server.max.receive.size (`before_authentication`; Kafka's
        SaslServerAuthenticator reads them so): a larger size prefix closes the connection
        before a byte of its body is held, the bytes queued are bounded so too, and none
        of it counts in the request memory. None: socket.request.max.bytes bounds them,
        and they count."""
        reader = self.reader
        if before_authentication is not None:
            reader.max_bytes, reader.max_name = before_authentication, "sasl.server.max.receive.size"
            self._max_queued_bytes, self._pooled = before_authentication, False
        else:
            reader.max_bytes, reader.max_name = self._max_request_bytes, "socket.request.max.bytes"
            self._max_queued_bytes, self._pooled = self._max_request_bytes, True

    def queue(self, frames: list[memoryview]) -> None:
        self.frames.extend(frames)
        self._queued_bytes += sum(map(len, frames))

    def settle(self, read_frames: bool) -> None:
        """After a read: account what is held, and stop reading if over a limit."""
        if read_frames or self._held or self.reader.pending:
            self._account()
            if not self.reader.receiving:
                self.memory.finished(self)
            if not self._reading_paused and self._over_limits():
                self._reading_paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]

    def next_frame(self) -> memoryview:
        """The oldest queued frame, taken out of the queue; it stays in the accounts until
        `served` (Kafka releases a request's buffer after its handler): its bytes and what
        decoding it makes are in memory meanwhile."""
        frame = self.frames.popleft()
        self._queued_bytes -= len(frame)
        self._serving_bytes = len(frame)
        self._serving = True
        self.resume_if_room()
        return frame

    def serving(self) -> None:
        """A request read and served inline is not answered yet (it waits: a long poll)."""
        self._serving = True

    def served(self) -> None:
        """The request being served (`next_frame`'s, or one served inline) is answered and
        let go of."""
        self._serving_bytes = 0
        self._serving = False
        self._account()
        self.resume_if_room()

    def stop(self) -> None:
        """The connection is closing: reading never resumes."""
        self._stopped = True

    def drop(self) -> None:
        """The connection is gone: let go of every byte it held."""
        self._stopped = True
        self.frames.clear()
        self._queued_bytes = 0
        self._serving_bytes = 0  # the worker, cancelled, lets go of it
        self.reader = FrameReader(0)  # drops a half-received frame
        self._account()
        self.memory.forget(self)

    def _account(self) -> None:
        """Bring this connection's share of the request memory up to date."""
        held = self._queued_bytes + self._serving_bytes + self.reader.pending if self._pooled else 0
        if held != self._held:
            delta, self._held = held - self._held, held
            self.memory.adjust(delta)

    def _pipelined(self) -> int:
        """Bytes read of the requests behind the one being served (0: none served)."""
        return self._queued_bytes + self.reader.pending if self._serving else 0

    def _over_limits(self) -> bool:
        if (len(self.frames) >= MAX_QUEUED_FRAMES or self._queued_bytes >= self._max_queued_bytes
                or self._pipelined() >= PIPELINED_BYTES):
            # Over its own limits it may wait long (behind a long poll): the request it was
            # finishing with the pool full is another's to finish meanwhile.
            self.memory.finished(self)
            return True
        # Over the broker-wide bound: nothing new starts, and of the requests begun only
        # small ones and one large one at a time (RequestMemory.may_finish) are read on.
        if self.reader.backlog or (self._pooled and not self.memory.may_finish(self, self.reader.receiving)):
            self.memory.pause(self)
            return True
        return False

    def resume_if_room(self) -> None:
        """Read again once this connection is back under its limits."""
        if not self._reading_paused or self._stopped or self.transport is None:
            return
        if (len(self.frames) >= MAX_QUEUED_FRAMES // 2 or self._queued_bytes >= self._max_queued_bytes // 2
                or self._pipelined() >= PIPELINED_BYTES // 2):
            return
        if self._pooled and self.memory.full and (self.reader.backlog or
                                                  not self.memory.may_finish(self, self.reader.receiving)):
            self.memory.pause(self)  # resumed when the pool has room
            return
        self._reading_paused = False
        self.memory.unpause(self)
        self.transport.resume_reading()
        backlog, self.reader.backlog = self.reader.backlog, b""
        if backlog:
            self._take_backlog(backlog)
