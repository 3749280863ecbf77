"""The 4-byte size prefix in front of every Kafka request and response.

A frame is `int32 size` followed by `size` bytes. The size is checked before a single
byte of the body is buffered, so a hostile or broken client cannot make the broker
allocate more than `socket.request.max.bytes`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

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
    they arrive, into one buffer that grows with what has arrived, and comes out as a
    read-only view of that buffer. The buffer follows the bytes received, never the size
    the prefix announces: a client that announces 100 MiB and sends one byte holds one
    byte, not a zeroed 100 MiB buffer (issue 40: three such prefixes took 300 MiB of
    memory). One growing buffer, not the chunks kept apart: a client sending its frame a
    byte per packet would have held hundreds of bytes of Python objects per byte counted
    in the request memory."""

    # Slots: broker/network/_pipeline.c reads _size, _prefix, backlog and max_bytes at their offsets.
    __slots__ = ("max_bytes", "max_name", "_prefix", "_gather", "_size", "backlog")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_name = "socket.request.max.bytes"  # the setting max_bytes comes from
        self._prefix = bytearray()  # a size prefix split across chunks
        self._gather = bytearray()  # what has arrived of the frame being received
        self._size = -1  # the size of the frame being gathered, -1 when none
        self.backlog = b""  # bytes not fed yet (see feed's may_start)

    @property
    def pending(self) -> int:
        """Bytes held: what has arrived of a frame begun, a split size prefix, and what
        `feed` was told not to start on."""
        return len(self._gather) + len(self._prefix) + len(self.backlog)

    @property
    def receiving(self) -> int:
        """The size of the frame being received, 0 when none is begun."""
        return max(self._size, 0)

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
                take = min(self._size - len(self._gather), end - pos)
                self._gather += view[pos : pos + take]
                pos += take
                if len(self._gather) == self._size:
                    frames.append(memoryview(self._gather).toreadonly())
                    self._gather = bytearray()
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
        return frames
