"""The records section of a compressed batch, decompressed within a bound.

A batch's size limit (max.message.bytes) is on its compressed bytes; what they expand to
is up to the sender. 32 KB of zstd can expand to 2 GB of zeros, so decompression never
produces more than a bound the caller gives (by default 16 x max.message.bytes: well
above what any client's batch.size makes, far below what would hurt the broker), and
never holds more than that bound while doing it:

- gzip, zstd and LZ4 (frame format) are decompressed into a buffer of the bound's size,
  which they refuse to overrun; the buffer is an anonymous mapping reused per thread,
  whose pages are handed back to the system after a large batch;
- snappy declares its length up front (a raw block) or per block (the Java client's
  xerial framing), and is refused before decompressing when it declares too much.

Anything that does not decompress, or decompresses to more than the bound, is a
DecompressionError: the produce path answers CORRUPT_MESSAGE.

The decompressors (cramjam's) let go of the GIL while they work, so a large batch can
be decompressed in a thread while the event loop goes on serving (broker/handlers/produce.py).
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections.abc import Callable

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# How far past max.message.bytes a batch's records may expand.
EXPANSION_LIMIT = 16
# The xerial framing of the Java client's snappy: magic, version, compatible version.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
_XERIAL_VERSIONS = b"\x00\x00\x00\x01\x00\x00\x00\x01"  # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024  # the Java client's block size
_INT32 = struct.Struct(">i")
# Scratch buffers larger than this give their pages back after each use.
_KEEP_RESIDENT = 4 * 1024 * 1024


class DecompressionError(ValueError):
    """Compressed records that do not decompress within the bound."""


def decompress(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """The records section of a batch compressed with `codec` (the attributes' 3 bits),
    at most `limit` bytes of it."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return _into_scratch(cramjam.gzip.decompress_into, data, limit)
        if codec == SNAPPY:
            return _snappy(bytes(data), limit)
        if codec == LZ4:
            return _into_scratch(cramjam.lz4.decompress_into, data, limit)
        if codec == ZSTD:
            return _into_scratch(cramjam.zstd.decompress_into, data, limit)
    except DecompressionError:
        raise
    except (cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise DecompressionError(f"{NAMES[codec]} records do not decompress: {exc}") from exc
    raise DecompressionError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed with `codec` as Kafka's own writers frame it: a gzip member, the
    Java client's xerial snappy framing, an LZ4 frame, a zstd frame. `level` None: the
    codec's default (Kafka's -1 for gzip)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=None if level in (None, -1) else level))
    if codec == SNAPPY:
        blocks = [_XERIAL_MAGIC, _XERIAL_VERSIONS]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
            blocks += [_INT32.pack(len(block)), block]
        return b"".join(blocks)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data, level=level))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def _too_large(codec: int, limit: int) -> DecompressionError:
    return DecompressionError(f"{NAMES[codec]} records decompress to more than {limit} bytes")


def _snappy(data: bytes, limit: int) -> bytes:
    # The Java client writes xerial's framing (SnappyOutputStream): a 16-byte header,
    # then blocks each preceded by its int32 length. librdkafka writes one raw block.
    if not data.startswith(_XERIAL_MAGIC):
        if cramjam.snappy.decompress_raw_len(data) > limit:
            raise _too_large(SNAPPY, limit)
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = _XERIAL_HEADER
    while pos < len(data):
        (size,) = _INT32.unpack_from(data, pos)
        block = data[pos + 4: pos + 4 + size]
        if size < 0 or len(block) != size:
            raise DecompressionError("snappy block runs past the batch")
        if len(out) + cramjam.snappy.decompress_raw_len(block) > limit:
            raise _too_large(SNAPPY, limit)
        out += cramjam.snappy.decompress_raw(block)
        pos += 4 + size
    return bytes(out)


_scratch = threading.local()


def _into_scratch(decompress_into: Callable[[bytes, memoryview], int], data: bytes | memoryview, limit: int) -> bytes:
    """Decompress into this thread's scratch buffer of `limit` + 1 bytes; more than
    `limit` (the codec fails to write its whole output) is refused."""
    buffer: mmap.mmap | None = getattr(_scratch, "buffer", None)
    if buffer is None or len(buffer) < limit + 1:
        if buffer is not None:
            buffer.close()
        # An anonymous mapping: pages cost memory only once written.
        buffer = _scratch.buffer = mmap.mmap(-1, limit + 1)
    view = memoryview(buffer)[: limit + 1]
    size = 0
    try:
        try:
            size = decompress_into(bytes(data), view)
        except cramjam.DecompressionError as exc:  # damaged, or more than the buffer holds
            raise DecompressionError(f"records do not decompress within {limit} bytes: {exc}") from exc
        if size > limit:
            raise DecompressionError(f"records decompress to more than {limit} bytes")
        return bytes(view[:size])
    finally:
        view.release()
        if size > _KEEP_RESIDENT or size == 0:
            buffer.madvise(mmap.MADV_DONTNEED)  # give a large (or refused) batch's pages back
