"""Kafka's variable-length integers.

Unsigned varints (7 bits a byte, low bits first) carry the lengths and tag numbers of
flexible message versions; signed ones are zigzag-encoded first (0, -1, 1, -2 ... map
to 0, 1, 2, 3 ...) and carry the fields of v2 records.
"""

from __future__ import annotations


class VarintError(ValueError):
    """Bytes that do not hold a varint: truncated, or longer than 64 bits."""


# Small values, which most lengths, deltas and tag counts are, are one byte: looked up.
_ONE_BYTE = tuple(bytes([n]) for n in range(128))


def write_uvarint(value: int) -> bytes:
    if 0 <= value < 128:
        return _ONE_BYTE[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    """The unsigned varint at `offset`: (value, offset after it)."""
    value = shift = 0
    while True:
        if offset >= len(buf):
            raise VarintError("truncated varint")
        byte = buf[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 63:
            raise VarintError("varint longer than 64 bits")


def write_varint(value: int) -> bytes:
    """A signed (zigzag) varint or varlong."""
    return write_uvarint((value << 1) ^ (value >> 63))


def read_varint(buf: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    """The signed (zigzag) varint at `offset`: (value, offset after it)."""
    raw, offset = read_uvarint(buf, offset)
    return (raw >> 1) ^ -(raw & 1), offset
