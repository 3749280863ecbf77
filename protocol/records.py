"""The records inside a v2 batch, checked as Kafka's LogValidator does on append.

A batch's CRC only proves its bytes arrived as sent; the records section can still be
garbage a client wrote, and a consumer that trips on it (librdkafka's "Read underflow")
is stuck at that offset for good. So before a produced batch is appended, its records
are walked once, from the (decompressed) records section, without building record
objects: per record its length varint, attributes, timestamp delta (a varlong),
offset delta, key, value and headers, as DefaultRecord.readFrom reads them.

Each record (big-endian layout, varints zigzag-encoded):

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | (headerKeyLength varint | headerKey | headerValueLength varint | value)*

What is refused, with Kafka's messages (all INVALID_RECORD; Kafka raises them from the
record iterator, without per-record errors):
- a varint longer than 5 bytes (10 for the timestamp delta), or records that run past
  the section: "Found invalid record structure";
- a record whose fields do not fill exactly its declared length: "Invalid record size";
- a negative header count, or more headers than bytes left; a negative header key size;
- bytes left over after `recordCount` records: "Incorrect declared batch size, records
  still remaining in file".
Two rules are stricter than Kafka, because Ottla stores a batch exactly as received and
cannot rewrite it as Kafka does: each record's offset delta must be its index (Kafka
rebuilds a compressed batch whose inner offsets are not 0..n-1, and stores an
uncompressed one as sent), and a key or value length below -1 is refused (Kafka reads any
negative length as null; librdkafka refuses to read it).

A record without a key on a compacted topic is a per-record error (Produce v8+ carries
`record_errors` with the record's index), as in Kafka; the response lists the first
1,000 of them (Kafka lists every one: a 1 MB compressed batch of keyless records would
get an answer a hundred times its size).

The walk is the produce hot path. It runs in C (`_records.c`, built as an optional
extension, many times faster than the Python walk below) and falls
back to the Python walk where no C compiler was at hand; the Python walk also gives the
message when C finds a batch invalid. The Produce handler goes further: one C call
(`accept_produced`) makes every check it makes of a partition's batch, header, CRC,
limits, timestamps and this walk, and answers the parsed header; its Python twin,
`accept_produced_in_python`, is built from the Python checks, which stay the reference
(OTTLA_PURE_PYTHON=1 runs them alone).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from .batch import (
    DEFAULT_MAX_DECOMPRESSED,
    HEADER_SIZE,
    BatchHeader,
    BatchTooLarge,
    InvalidBatch,
    iter_records,
    timestamp_outside,
    validate_produced_batch,
)
from .compression import DecompressionError, decompress

try:
    from ._records import accept_produced as _accept_produced_in_c
    from ._records import keys_and_values as _keys_and_values_in_c
    from ._records import set_header_type as _set_header_type
    from ._records import walk as _walk_in_c
    from ._records import walk_listing as _walk_listing_in_c
except ImportError:  # installed without a C compiler: the Python walk alone
    _walk_in_c = _walk_listing_in_c = _keys_and_values_in_c = _accept_produced_in_c = None
else:
    _set_header_type(BatchHeader)

# How many records without a key a refusal lists (see above).
MAX_LISTED_RECORD_ERRORS = 1000


class InvalidRecords(Exception):
    """The records of a batch break a rule: INVALID_RECORD. `record_errors` holds
    (index in the batch, message) pairs when the error is per record."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.record_errors = record_errors or []


_STRUCTURE = "Found invalid record structure"
# The value of each one-byte zigzag varint, looked up rather than computed.
_ZIGZAG = tuple((raw >> 1) ^ -(raw & 1) for raw in range(128))


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """What the walk learned, for callers that need more than a yes/no."""

    count: int
    missing_keys: tuple[int, ...]  # indexes of the first MAX_LISTED_RECORD_ERRORS records whose key is null
    null_keys: int = 0  # how many records have a null key, listed or not


def _varint(data: bytes | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """The slow path: a zigzag varint of up to `max_bytes` bytes at `pos`."""
    raw = shift = 0
    for i in range(max_bytes):
        byte = data[pos + i]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + i + 1
        shift += 7
    raise InvalidRecords(_STRUCTURE + ": varint is too long")


def walk_records(data: bytes | memoryview, pos: int, end: int, count: int,
                 keys_required: bool = False) -> RecordsSummary:
    """Check that `data[pos:end]` holds exactly `count` well-formed records numbered
    0..count-1. Raises InvalidRecords. With `keys_required`, the summary lists the
    records without a key."""
    if _walk_in_c is not None:
        if keys_required:
            null_keys, listed = _walk_listing_in_c(data, pos, end, count, MAX_LISTED_RECORD_ERRORS)
            if null_keys >= 0:
                return RecordsSummary(count, tuple(listed), null_keys)
        else:
            null_keys = _walk_in_c(data, pos, end, count)
            if null_keys >= 0:
                return RecordsSummary(count, (), null_keys)
    # Invalid, or keys to list: the Python walk says which rule, or which records.
    return walk_records_in_python(data, pos, end, count, keys_required)


def walk_records_in_python(data: bytes | memoryview, pos: int, end: int, count: int,
                           keys_required: bool = False) -> RecordsSummary:
    """The walk in Python, with Kafka's message for each rule."""
    zigzag = _ZIGZAG
    missing_keys: list[int] = []
    null_keys = 0
    i = 0
    try:
        while i < count:
            # The varints are inlined: one byte (values -64..63), two bytes, else _varint.
            b = data[pos]
            if b < 0x80:
                size = zigzag[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                size = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                size, pos = _varint(data, pos, 5)
            body_end = pos + size
            if size < 0 or body_end > end:
                raise InvalidRecords(
                    f"Invalid record size: expected {size} bytes in record payload, but instead the buffer "
                    f"has only {end - pos} remaining bytes."
                )
            start = pos
            pos += 1  # attributes: unused in v2 records
            if data[pos] < 0x80:  # timestampDelta: any varlong
                pos += 1
            elif data[pos + 1] < 0x80:
                pos += 2
            else:
                pos = _varint(data, pos, 10)[1]
            b = data[pos]  # offsetDelta: must be the record's index (stricter than Kafka)
            if b < 0x80:
                delta = zigzag[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                delta = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                delta, pos = _varint(data, pos, 5)
            if delta != i:
                raise InvalidRecords(f"Record {i} has offset delta {delta}: the records of a batch must be numbered "
                                     f"0..{count - 1} in order")
            b = data[pos]  # key
            if b < 0x80:
                length = zigzag[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos, 5)
            if length >= 0:
                pos += length
            elif length == -1:
                null_keys += 1
                if keys_required and len(missing_keys) < MAX_LISTED_RECORD_ERRORS:
                    missing_keys.append(i)
            else:
                raise InvalidRecords(f"Record {i} has key length {length}")
            b = data[pos]  # value
            if b < 0x80:
                length = zigzag[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos, 5)
            if length >= 0:
                pos += length
            elif length != -1:
                raise InvalidRecords(f"Record {i} has value length {length}")
            if data[pos] == 0:  # no headers, by far the commonest
                pos += 1
            else:
                pos = _skip_headers(data, pos, body_end)
            if pos != body_end:
                raise InvalidRecords(
                    f"Invalid record size: expected to read {size} bytes in record payload, but instead read "
                    f"{pos - start}"
                )
            i += 1
    except IndexError:
        raise InvalidRecords(_STRUCTURE) from None
    if pos != end:
        raise InvalidRecords("Incorrect declared batch size, records still remaining in file")
    return RecordsSummary(count, tuple(missing_keys), null_keys)


def _skip_headers(data: bytes | memoryview, pos: int, body_end: int) -> int:
    count, pos = _varint(data, pos, 5)
    if count < 0:
        raise InvalidRecords(f"Found invalid number of record headers {count}")
    if count > body_end - pos:
        raise InvalidRecords(f"Found invalid number of record headers. {count} is larger than the remaining "
                             f"size of the buffer")
    for _ in range(count):
        length, pos = _varint(data, pos, 5)
        if length < 0:
            raise InvalidRecords(f"Invalid negative header key size {length}")
        pos += length
        length, pos = _varint(data, pos, 5)
        if length >= 0:
            pos += length
        elif length != -1:
            raise InvalidRecords(f"Invalid header value size {length}")
        if pos > body_end:
            raise InvalidRecords(_STRUCTURE)
    return pos


def record_error_summary(record_errors: list[tuple[int, str]], total: int | None = None) -> str:
    """The top-level message Kafka gives a batch refused for per-record errors (`total`
    of them, when more than `record_errors` lists)."""
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in record_errors[:3])
    total = len(record_errors) if total is None else total
    return (f"One or more records have been rejected due to {total} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]")


def validate_records(batch: bytes | memoryview, header: BatchHeader, *, compacted: bool,
                     topic_partition: str, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> None:
    """Check the records of a produced batch whose header `validate_produced_batch`
    accepted: their structure, and on a compacted topic that each has a key (compaction
    keys on it). Raises InvalidRecords, or InvalidBatch (CORRUPT_MESSAGE) for compressed
    records that do not decompress within `max_decompressed` bytes."""
    if header.compression:
        try:
            data = decompress(header.compression, memoryview(batch)[HEADER_SIZE : header.size], max_decompressed)
        except DecompressionError as exc:
            raise InvalidBatch(str(exc), corrupt=True) from exc
        summary = walk_records(data, 0, len(data), header.record_count, keys_required=compacted)
    else:
        summary = walk_records(batch, HEADER_SIZE, header.size, header.record_count, keys_required=compacted)
    if summary.missing_keys:
        message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
        errors = [(index, message) for index in summary.missing_keys]
        raise InvalidRecords(record_error_summary(errors, summary.null_keys), errors)


def keys_and_values(batch: bytes | memoryview) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of a whole batch: all a coordinator replaying
    its internal topic reads. In C, without building the records; `iter_records`, which
    builds them, stands in where the extension is not built."""
    header = BatchHeader.parse(batch)
    if _keys_and_values_in_c is None:
        return [(r.offset, _bytes(r.key), _bytes(r.value)) for r in iter_records(batch)]
    if header.compression:
        data = decompress(header.compression, memoryview(batch)[HEADER_SIZE : header.size], DEFAULT_MAX_DECOMPRESSED)
        found = _keys_and_values_in_c(data, 0, len(data), header.record_count)
    else:
        found = _keys_and_values_in_c(batch, HEADER_SIZE, header.size, header.record_count)
    if found is None:
        raise InvalidRecords(_STRUCTURE)
    base = header.base_offset
    return [(base + delta, key, value) for delta, key, value in found]


def _bytes(field: bytes | memoryview | None) -> bytes | None:
    return None if field is None else bytes(field)


# --- the Produce handler's check in one call ----------------------------------------------

# accept_produced(batch, max_message_bytes, segment_bytes, keys_required,
# check_timestamps, before_max_ms, after_max_ms) -> BatchHeader | None
AcceptProduced = Callable[[bytes | None, int, int, bool, bool, int, int], BatchHeader | None]


def accept_produced_in_python(batch: bytes | memoryview | None, max_message_bytes: int, segment_bytes: int,
                              keys_required: bool, check_timestamps: bool, before_max_ms: int,
                              after_max_ms: int) -> BatchHeader | None:
    """The twin of `_records.accept_produced`, from the Python checks it stands in for:
    the batch's header when every check the Produce handler makes of a batch passes
    (validate_produced_batch, segment.bytes, the CreateTime bounds against the clock,
    and, uncompressed, the record walk, keyed with `keys_required`), None when any
    fails. The handler then runs those checks itself, for the refusal's error and
    message; a compressed batch's records are left to it too (they decompress first)."""
    if batch is None:
        return None
    try:
        header = validate_produced_batch(batch, max_message_bytes)
    except (InvalidBatch, BatchTooLarge):
        return None
    if header.size > segment_bytes:
        return None
    if check_timestamps and timestamp_outside(header, int(time.time() * 1000), before_max_ms,
                                              after_max_ms) is not None:
        return None
    if not header.compression:
        try:
            summary = walk_records_in_python(batch, HEADER_SIZE, header.size, header.record_count, keys_required)
        except InvalidRecords:
            return None
        if summary.missing_keys:
            return None
    return header


# What the Produce handler calls (None: it makes the checks itself, the reference):
# the C check, unless OTTLA_PURE_PYTHON=1 (compiled_codec.PURE_PYTHON_VARIABLE) asks
# for the Python path throughout.
accept_produced: AcceptProduced | None = (
    _accept_produced_in_c if os.environ.get("OTTLA_PURE_PYTHON", "") in ("", "0") else None)
