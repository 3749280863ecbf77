"""The 4-byte size prefix in front of every Kafka request and response.

A frame is `int32 size` followed by `size` bytes. The size is checked before a single
byte of the body is buffered, so a hostile or broken client cannot make the broker
allocate more than `socket.request.max.bytes`.
"""

from __future__ import annotations

import struct

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
    chunk, uncopied (most requests). One that spans chunks is gathered in a buffer the
    reader keeps and reuses, then copied out once complete: allocating a fresh buffer
    per frame costs more (page faults on every large request) than that copy."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_name = "socket.request.max.bytes"  # the setting max_bytes comes from
        self._prefix = bytearray()  # a size prefix split across chunks
        self._gather = bytearray()  # the part of a frame received so far
        self._size = -1  # the size of the frame being gathered, -1 when none
        self.backlog = b""  # bytes not fed yet (see feed's start_new)

    @property
    def pending(self) -> int:
        """Bytes held for later: the part of a frame received so far, and what `feed`
        was told not to start on."""
        return len(self._gather) + len(self._prefix) + len(self.backlog)

    def feed(self, data: bytes | memoryview, start_new: bool = True) -> list[memoryview]:
        """The frames `data` completes. Raises FrameError for an unacceptable size.

        With `start_new` False, a frame already begun is finished but no new one is
        started: the rest of `data` is kept in `backlog`, for the caller to feed again
        once it may (a connection over its memory bound)."""
        frames: list[memoryview] = []
        view = memoryview(data)
        pos, end = 0, len(data)
        while pos < end:
            if not start_new and self._size < 0 and not self._prefix:
                self.backlog = bytes(view[pos:])
                break
            if self._size >= 0:
                take = min(self._size - len(self._gather), end - pos)
                self._gather += view[pos : pos + take]
                pos += take
                if len(self._gather) == self._size:
                    frames.append(memoryview(bytes(self._gather)))
                    self._gather.clear()
                    self._size = -1
                continue
            if self._prefix or end - pos < SIZE_BYTES:
                take = min(SIZE_BYTES - len(self._prefix), end - pos)
                self._prefix += view[pos : pos + take]
                pos += take
                if len(self._prefix) < SIZE_BYTES:
                    break
                size = frame_size(self._prefix, self.max_bytes, self.max_name)
                self._prefix.clear()
            else:
                size = frame_size(view[pos : pos + SIZE_BYTES], self.max_bytes, self.max_name)
                pos += SIZE_BYTES
            if end - pos >= size:
                frames.append(view[pos : pos + size])
                pos += size
            else:
                self._size = size
        return frames
