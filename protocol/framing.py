"""The 4-byte size prefix in front of every Kafka request and response.

A frame is `int32 size` followed by `size` bytes. The size is checked before a single
byte of the body is buffered, so a hostile or broken client cannot make the broker
allocate more than `socket.request.max.bytes`.
"""

from __future__ import annotations

import struct
from typing import Callable

SIZE = struct.Struct(">i")
SIZE_BYTES = SIZE.size

# Kafka's `socket.request.max.bytes` default: 100 MiB.
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024


class FrameError(Exception):
    """The stream can no longer be trusted to be split into frames: close the connection."""


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int,
               max_name: str = "socket.request.max.bytes") -> int:
    """The body size announced by a 4-byte prefix, or FrameError when it is unacceptable
    (`max_name`: the setting that bounds it, for the message)."""
    (size,) = SIZE.unpack_from(prefix)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes exceeds {max_name} ({max_bytes})")
    return size


class FrameReader:
    """Splits a byte stream, fed chunk by chunk, into frame bodies.

    A frame that arrives whole inside one chunk comes out as a read-only view of that
    chunk, uncopied (most requests). One that spans chunks is copied, chunk by chunk as
    they arrive, into a buffer of the frame's exact size allocated at its size prefix
    (as Kafka's MemoryPool allocates a receive's buffer), and comes out as a read-only
    view of that buffer. One allocation per frame: a buffer grown chunk by chunk left the
    allocator fragmented after a burst of large frames (memory the process could not
    give back), and keeping the chunks until the frame is complete cost a Python object
    per chunk: a client sending its frame a byte per packet would have held hundreds of
    bytes of them per byte counted in the request memory."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_name = "socket.request.max.bytes"  # the setting max_bytes comes from
        self._prefix = bytearray()  # a size prefix split across chunks
        self._gather = bytearray()  # the frame being received, allocated at its full size
        self._received = 0  # bytes of it received so far
        self._size = -1  # the size of the frame being gathered, -1 when none
        self.backlog = b""  # bytes not fed yet (see feed's may_start)

    @property
    def pending(self) -> int:
        """Bytes held or promised: a frame begun counts whole from its size prefix on
        (as Kafka's MemoryPool allocates a receive's buffer at its size), a split size
        prefix, and what `feed` was told not to start on."""
        return max(self._size, 0) + len(self._prefix) + len(self.backlog)

    def feed(self, data: bytes | memoryview, may_start: Callable[[int], bool] | None = None) -> list[memoryview]:
        """The frames `data` completes. Raises FrameError for an unacceptable size.

        `may_start(size)` is asked at each new frame's size prefix; False keeps that
        prefix and the rest of `data` in `backlog`, for the caller to feed again once it
        may (a connection over its memory bound). A frame already begun is finished."""
        end = len(data)
        if self._size < 0 and not self._prefix and end > SIZE_BYTES:
            # Most reads hold exactly one whole request: the loop below, taken straight.
            size = int.from_bytes(data[:SIZE_BYTES], "big", signed=True)
            if size == end - SIZE_BYTES and size <= self.max_bytes:
                if may_start is not None and not may_start(size):
                    self.backlog = bytes(data)
                    return []
                return [memoryview(data)[SIZE_BYTES:]]
        frames: list[memoryview] = []
        view = memoryview(data)
        pos = 0
        while pos < end:
            if self._size >= 0:
                take = min(self._size - self._received, end - pos)
                self._gather[self._received : self._received + take] = view[pos : pos + take]
                self._received += take
                pos += take
                if self._received == self._size:
                    frames.append(memoryview(self._gather).toreadonly())
                    self._gather = bytearray()
                    self._received = 0
                    self._size = -1
                continue
            if self._prefix or end - pos < SIZE_BYTES:
                take = min(SIZE_BYTES - len(self._prefix), end - pos)
                self._prefix += view[pos : pos + take]
                pos += take
                if len(self._prefix) < SIZE_BYTES:
                    break
                prefix = bytes(self._prefix)
                self._prefix.clear()
            else:
                prefix = bytes(view[pos : pos + SIZE_BYTES])
                pos += SIZE_BYTES
            size = frame_size(prefix, self.max_bytes, self.max_name)
            if may_start is not None and not may_start(size):
                # The prefix goes back in front of the rest, read again on the next feed.
                self.backlog = prefix + bytes(view[pos:])
                break
            if end - pos >= size:
                frames.append(view[pos : pos + size])
                pos += size
            else:
                self._size = size
                self._gather = bytearray(size)
        return frames
