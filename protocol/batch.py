"""The v2 record batch, as raw bytes with a parsed 61-byte header.

The broker never decodes records on its produce or fetch path: everything it needs
(offsets, producer id/epoch/sequence, transactional and control flags, timestamps,
the CRC) is in the header. Batches stay bytes from the socket to the file and back.

Layout (big-endian), offsets in bytes:

     0 baseOffset int64            -- assigned by the broker, outside the CRC
     8 batchLength int32           -- bytes after this field
    12 partitionLeaderEpoch int32  -- set by the broker, outside the CRC
    16 magic int8 (2)
    17 crc uint32                  -- CRC-32C of bytes 21..end
    21 attributes int16            -- 0-2 compression, 3 timestamp type, 4 transactional,
                                      5 control, 6 delete horizon
    23 lastOffsetDelta int32
    27 baseTimestamp int64
    35 maxTimestamp int64
    43 producerId int64
    51 producerEpoch int16
    53 baseSequence int32
    57 recordCount int32
    61 records...

Record iteration (`iter_records`) exists for the few readers that need records:
dump-log, compaction and tests.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import crc32c

from .compression import EXPANSION_LIMIT, compress, decompress
from .varint import read_varint, write_varint

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# baseOffset + batchLength: the part of the header needed to walk a log.
LOG_OVERHEAD = 12
OFFSET_AND_LENGTH = struct.Struct(">qi")
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAGIC_OFFSET = 16
# The one header field a log reader needs besides offset and length, read on its own.
LAST_OFFSET_DELTA_OFFSET = 23
LAST_OFFSET_DELTA = struct.Struct(">i")
# The only record batch format the broker stores (v2).
CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
# What iter_records lets a compressed batch expand to unless told: 16 x Kafka's default
# max.message.bytes (see compression.py).
DEFAULT_MAX_DECOMPRESSED = EXPANSION_LIMIT * 1024 * 1024
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1


class InvalidBatch(Exception):
    """A batch that must be refused. `corrupt` tells CORRUPT_MESSAGE (bytes damaged:
    length or CRC) from INVALID_RECORD (well-formed bytes that break a rule)."""

    def __init__(self, message: str, corrupt: bool) -> None:
        super().__init__(message)
        self.corrupt = corrupt


class BatchHeader(NamedTuple):
    """A named tuple: parsed straight from the struct's tuple, with no Python call (a
    Produce parses one or two)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def parse(cls, buf: bytes | memoryview, offset: int = 0) -> BatchHeader:
        return tuple.__new__(cls, HEADER.unpack_from(buf, offset))

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap from Int32.MAX to 0.
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    with memoryview(batch) as view:  # a view: slicing bytes would copy the whole batch
        return crc32c.crc32c(view[ATTRIBUTES_OFFSET:])


def crc_is_valid(batch: bytes | memoryview, header: BatchHeader) -> bool:
    return compute_crc(batch) == header.crc


def validate_produced_batch(records: bytes | memoryview, max_message_bytes: int,
                            crc: int | None = None) -> BatchHeader:
    """Check one batch received in a Produce request, from its header alone.

    Produce v3+ carries exactly one v2 batch per partition. Raises InvalidBatch or
    BatchTooLarge; returns the parsed header. `crc`: the batch's compute_crc when it was
    computed beforehand (a large batch's, in a worker thread); the checks and their
    order are the same either way."""
    size = len(records)
    # Bytes that end before the batch they announce hold no batch at all for Kafka
    # (INVALID_RECORD: "at least one record batch"); a length too small to be a batch
    # is a damaged one (CORRUPT_MESSAGE).
    if size < LOG_OVERHEAD:
        raise InvalidBatch(f"{size} bytes hold no record batch", corrupt=False)
    declared = OFFSET_AND_LENGTH.unpack_from(records)[1] + LOG_OVERHEAD
    if declared > size:
        raise InvalidBatch(f"the batch's {declared} bytes run past the {size} bytes sent", corrupt=False)
    if size < HEADER_SIZE:
        raise InvalidBatch(f"{size} bytes is shorter than a batch header", corrupt=True)
    header = BatchHeader.parse(records)
    if header.magic != CURRENT_MAGIC:
        raise InvalidBatch(f"magic {header.magic}: only v2 record batches are accepted", corrupt=False)
    if declared != size:  # `declared` is header.size
        if declared < HEADER_SIZE:
            raise InvalidBatch(f"batch length {header.batch_length} does not match the {size} bytes sent", corrupt=True)
        raise InvalidBatch("produce requests carry exactly one record batch per partition", corrupt=False)
    if size > max_message_bytes:
        raise BatchTooLarge(size, max_message_bytes)
    if crc is None:
        crc = compute_crc(records)
    if crc != header.crc:
        raise InvalidBatch(f"CRC mismatch: header says {header.crc}, bytes give {crc}", corrupt=True)
    # Kafka's LogValidator.validateBatch, with its messages. The records themselves are
    # checked by protocol.records.validate_records.
    if header.record_count <= 0:
        raise InvalidBatch(f"Invalid reported count for record batch: {header.record_count}", corrupt=False)
    if header.last_offset_delta != header.record_count - 1:
        raise InvalidBatch(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] and count of records "
            f"{header.record_count}",
            corrupt=False,
        )
    # The flags read off the attributes here, not through the properties: this runs for
    # every produced batch.
    attributes = header.attributes
    if attributes & CONTROL_FLAG:
        raise InvalidBatch("Clients are not allowed to write control records", corrupt=False)
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidBatch(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id}",
            corrupt=False,
        )
    if attributes & COMPRESSION_MASK > 4:
        raise InvalidBatch(f"unknown compression codec {attributes & COMPRESSION_MASK}", corrupt=False)
    return header


def timestamp_outside(header: BatchHeader, now_ms: int, before_max_ms: int, after_max_ms: int) -> int | None:
    """The first of the batch's base and max timestamps outside [now - before_max_ms,
    now + after_max_ms] (message.timestamp.before/after.max.ms; -1 is no timestamp),
    None if both are within. Kafka checks each record; a producer's batch spans
    milliseconds."""
    low = now_ms - before_max_ms
    high = now_ms + after_max_ms
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
            return timestamp
    return None


class BatchTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"batch of {size} bytes exceeds max.message.bytes ({limit})")


def with_offset_and_epoch(batch: bytes | memoryview, base_offset: int, leader_epoch: int) -> list:
    """The batch as chunks for os.writev, with baseOffset and partitionLeaderEpoch
    replaced. Neither is covered by the CRC, so the batch stays valid; the record bytes
    are not copied."""
    # The prefix replaces the fields before magic: baseOffset, batchLength, leader epoch.
    return [_OFFSET_LENGTH_EPOCH.pack(base_offset, len(batch) - LOG_OVERHEAD, leader_epoch),
            memoryview(batch)[MAGIC_OFFSET:]]


_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")


# maxTimestamp's place in the header: after attributes, lastOffsetDelta, baseTimestamp.
MAX_TIMESTAMP_OFFSET = 35


def with_log_append_time(batch: bytes | memoryview, now_ms: int) -> bytes:
    """The batch as a LogAppendTime topic stores it (Kafka's setMaxTimestamp): the
    timestamp type bit set and maxTimestamp the broker's clock; consumers then read
    every record's timestamp as that. The CRC is computed again."""
    out = bytearray(batch)
    attributes = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_FLAG
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">q", out, MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out))
    return bytes(out)


def recompressed(batch: bytes | memoryview, header: BatchHeader, codec: int, level: int | None,
                 max_decompressed: int) -> bytes:
    """The batch with its records section in `codec` (0: uncompressed), as a topic with
    compression.type stores it; every header field but attributes, length and CRC kept
    (offsets, sequences, timestamps). Raises DecompressionError."""
    view = memoryview(batch)
    records = decompress(header.compression, view[HEADER_SIZE:header.size], max_decompressed)
    section = compress(codec, records, level)
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    after_crc = struct.pack(">h", attributes) + bytes(view[ATTRIBUTES_OFFSET + 2:HEADER_SIZE]) + section
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", header.base_offset, len(after_crc) + 9, header.partition_leader_epoch, CURRENT_MAGIC,
                       crc) + after_crc


def build_batch(
    records: list[bytes],
    *,
    base_offset: int = 0,
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    partition_leader_epoch: int = 0,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """An uncompressed batch from already-encoded records (see `encode_record`). The
    offset span and max timestamp default to what the records say; compaction keeps a
    rewritten batch's original ones."""
    body = b"".join(records)
    count = len(records)
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        timestamp,
        timestamp if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) + body
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + after_crc


# --- records ---------------------------------------------------------------------------


# The signed varint of every value from -64 to 63 is one byte: looked up (index value +
# 64) rather than encoded, since most record fields (deltas, key and value lengths, the
# header count, -1 for null) are that small.
_SMALL_VARINT = tuple(write_varint(n) for n in range(-64, 64))
_NULL = _SMALL_VARINT[-1 + 64]
_NO_HEADERS = _SMALL_VARINT[64]
# A coordinator's records (records_batch) have values of 64 bytes and more, whose
# lengths and record sizes are two-byte varints: the signed varints of 0 to _LENGTHS - 1
# are looked up too (about 40 KiB), sparing two calls a record.
_LENGTHS = 1024
_LENGTH_VARINT = tuple(write_varint(n) for n in range(_LENGTHS))


def encode_record(
    key: bytes | None,
    value: bytes | None,
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
    headers: list[tuple[str, bytes | None]] = (),  # type: ignore[assignment]
) -> bytes:
    small = _SMALL_VARINT
    parts = [
        b"\x00",  # record attributes (unused)
        small[timestamp_delta + 64] if -64 <= timestamp_delta < 64 else write_varint(timestamp_delta),
        small[offset_delta + 64] if -64 <= offset_delta < 64 else write_varint(offset_delta),
    ]
    for field in (key, value):
        if field is None:
            parts.append(_NULL)
        else:
            size = len(field)
            parts.append(small[size + 64] if size < 64 else write_varint(size))
            parts.append(field)
    if not headers:
        parts.append(_NO_HEADERS)
    else:
        parts.append(write_varint(len(headers)))
        for name, hvalue in headers:
            raw = name.encode()
            parts.append(write_varint(len(raw)) + raw)
            parts.append(_NULL if hvalue is None else write_varint(len(hvalue)) + hvalue)
    body = b"".join(parts)
    size = len(body)
    return (small[size + 64] if size < 64 else write_varint(size)) + body


def records_batch(
    records: list[tuple[bytes, bytes | None]],
    *,
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    attributes: int = 0,
) -> bytes:
    """What `build_batch` makes of `encode_record(key, value, offset_delta=i)` for each
    (key, value) of `records` (no headers, one timestamp): a coordinator's batch of its
    own records, encoded in one call (a coordinator writes one at every state change)."""
    lengths = _LENGTH_VARINT
    parts: list[bytes] = []
    for i, (key, value) in enumerate(records):
        key_size = len(key)
        # Attributes 0, timestamp delta 0, the offset delta, the key.
        head = b"\x00\x00" + (lengths[i] if i < _LENGTHS else write_varint(i)) + (
            lengths[key_size] if key_size < _LENGTHS else write_varint(key_size))
        if value is None:
            size = len(head) + key_size + 2  # a null value and no headers
            parts += (lengths[size] if size < _LENGTHS else write_varint(size), head, key, _NULL + _NO_HEADERS)
        else:
            value_size = len(value)
            value_length = lengths[value_size] if value_size < _LENGTHS else write_varint(value_size)
            size = len(head) + key_size + len(value_length) + value_size + 1
            parts += (lengths[size] if size < _LENGTHS else write_varint(size), head, key, value_length, value,
                      _NO_HEADERS)
    count = len(records)
    after_crc = _AFTER_CRC.pack(attributes, count - 1, timestamp, timestamp, producer_id, producer_epoch, NO_SEQUENCE,
                                count) + b"".join(parts)
    return _BEFORE_CRC.pack(0, len(after_crc) + 9, 0, CURRENT_MAGIC, crc32c.crc32c(after_crc)) + after_crc


_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    sequence: int


def iter_records(batch: bytes | memoryview, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
    """Decode every record of a whole batch (not for the produce/fetch path). A
    compressed batch may expand to `max_decompressed` bytes (DecompressionError)."""
    header = BatchHeader.parse(batch)
    data = decompress(header.compression, memoryview(batch)[HEADER_SIZE : header.size], max_decompressed)
    pos = 0
    for _ in range(header.record_count):
        _length, pos = read_varint(data, pos)
        pos += 1  # attributes
        ts_delta, pos = read_varint(data, pos)
        offset_delta, pos = read_varint(data, pos)
        fields: list[bytes | None] = []
        for _field in range(2):
            size, pos = read_varint(data, pos)
            if size < 0:
                fields.append(None)
            else:
                fields.append(data[pos : pos + size])
                pos += size
        header_count, pos = read_varint(data, pos)
        headers = []
        for _h in range(header_count):
            size, pos = read_varint(data, pos)
            name = data[pos : pos + size].decode("utf-8", "replace")
            pos += size
            size, pos = read_varint(data, pos)
            hvalue = None if size < 0 else data[pos : pos + size]
            pos += max(size, 0)
            headers.append((name, hvalue))
        sequence = NO_SEQUENCE if header.base_sequence < 0 else (header.base_sequence + offset_delta) % (INT32_MAX + 1)
        yield Record(
            offset=header.base_offset + offset_delta,
            timestamp=header.base_timestamp + ts_delta,
            key=fields[0],
            value=fields[1],
            headers=tuple(headers),
            sequence=sequence,
        )
