"""Responses with records left in their files (Fetch's FileSlices), sent with sendfile.

A Fetch answer's records stay in the segment files (storage/file_slice.py) until they
go out: the kernel copies them from the page cache to the socket, and the broker holds
no more than the answer's framing, however large the answer. Kafka serves Fetch the
same way (FileRecords.writeTo, sendfile). Neither event loop does it for us: asyncio's
loop.sendfile takes a whole file, and uvloop's transports have none (loop.sendfile
raises NotImplementedError there). So a response holding a slice is sent here, one
piece after another, in order:

- bytes (framing, and everything behind a slice, other responses included) go to the
  transport, as any response's do;
- a slice waits until the transport has written everything before it (its buffer is
  empty), then goes with os.sendfile straight on the socket, as much as the socket
  takes; when it takes no more (EAGAIN) the rest waits until the socket is writable.

While something is being sent here, the connection passes every response through here
too, so pipelined responses keep their order. The socket is used through a descriptor
of our own (a dup): the loop refuses to watch a transport's descriptor for us, and if
the transport closes its own, ours never names some other file meanwhile.

Failures end the connection, as a failed send of any response does: the client has
gone (EPIPE, ECONNRESET), or a slice was found shorter than it was (its file truncated
since: the frame's size is already out, and what is left of it cannot be made good).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ottla.storage.file_slice import FileSlice


class FileSender:
    # Slots: _pipeline.c's take reads finished at its offset (compiled_pipeline.TAKE_SLOTS).
    __slots__ = ("_transport", "_loop", "_touched", "_failed", "_queue", "_sent", "_socket", "_watching", "finished")

    def __init__(self, transport: asyncio.Transport, touched: Callable[[], None],
                 failed: Callable[[str], None]) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._touched = touched  # bytes went out: the connection is not idle
        self._failed = failed  # the connection must end (the reason)
        self._queue: deque[bytes | FileSlice] = deque()
        self._sent = 0  # of the slice at the head of the queue
        self._socket = -1  # our descriptor on the socket, while sending
        self._watching = False  # for the socket to be writable
        # Set while something is queued here; done when all of it is sent (or dropped).
        self.finished: asyncio.Future[None] | None = None

    @property
    def busy(self) -> bool:
        return self.finished is not None

    def send(self, chunks: Iterable[bytes | FileSlice]) -> None:
        """Queue a response's chunks behind what is being sent, and send what can be."""
        self._queue.extend(chunks)
        if self.finished is None:
            self.finished = self._loop.create_future()
            try:
                self._socket = os.dup(self._transport.get_extra_info("socket").fileno())
            except OSError as exc:  # out of descriptors (EMFILE)
                self._fail(f"no descriptor to send a fetch's records: {exc}")
                return
        self._pump()

    def _pump(self) -> None:
        queue = self._queue
        transport = self._transport
        if transport.is_closing():
            self.cancel()  # the connection is going: connection_lost follows
            return
        while queue:
            piece = queue[0]
            if piece.__class__ is not FileSlice:
                transport.write(piece)  # type: ignore[arg-type]
                queue.popleft()
                continue
            assert isinstance(piece, FileSlice)
            if transport.get_write_buffer_size():
                self._watch()  # what the transport holds goes first
                return
            try:
                sent = os.sendfile(self._socket, piece.fd, piece.position + self._sent, piece.size - self._sent)
            except BlockingIOError:
                self._watch()
                return
            except OSError as exc:
                self._fail(f"sending a fetch's records failed: {exc}")
                return
            if sent == 0:
                self._fail(f"a fetch's records were cut short: {piece.size - self._sent} bytes of "
                           f"{piece.size} no longer in the file (truncated while the answer was sent)")
                return
            self._touched()
            self._sent += sent
            if self._sent == piece.size:
                queue.popleft().close()  # type: ignore[union-attr]
                self._sent = 0
        self._end()

    def _watch(self) -> None:
        if not self._watching:
            self._loop.add_writer(self._socket, self._pump)
            self._watching = True

    def _fail(self, reason: str) -> None:
        self.cancel()
        self._failed(reason)

    def cancel(self) -> None:
        """Drop whatever is still queued (the connection is closing)."""
        for piece in self._queue:
            if isinstance(piece, FileSlice):
                piece.close()
        self._queue.clear()
        self._sent = 0
        self._end()

    def _end(self) -> None:
        if self._watching:
            self._loop.remove_writer(self._socket)
            self._watching = False
        if self._socket >= 0:
            os.close(self._socket)
            self._socket = -1
        finished, self.finished = self.finished, None
        if finished is not None and not finished.done():
            finished.set_result(None)


def read_slices(chunks: list[Any]) -> list[Any]:
    """`chunks` with their FileSlices read into memory (for TLS, which encrypts bytes);
    OSError, every slice closed, if one was cut short (its file truncated since it was
    taken) or the disk failed under the read."""
    read = []
    try:
        for chunk in chunks:
            if chunk.__class__ is FileSlice:
                piece = chunk
                try:
                    chunk = piece.read()
                finally:
                    piece.close()
            read.append(chunk)
    except OSError:
        for chunk in chunks:
            if chunk.__class__ is FileSlice:
                chunk.close()
        raise
    return read
