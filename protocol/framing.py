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


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int) -> int:
    """The body size announced by a 4-byte prefix, or FrameError when it is unacceptable."""
    (size,) = SIZE.unpack_from(prefix)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes exceeds socket.request.max.bytes ({max_bytes})")
    return size
