"""Records inside a batch, checked as Kafka's LogValidator does: a table of well-formed
and damaged record sections, each built by hand."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import crc32c
import pytest

from ottla.protocol import records
from ottla.protocol.batch import BatchHeader, build_batch, encode_record, iter_records, recompressed, records_batch
from ottla.protocol.records import InvalidRecords, validate_records, walk_records, walk_records_in_python
from ottla.protocol.varint import write_varint

from .extensions import compiled_extension


def _c_walk():
    """protocol/_records.c (extensions.py: where no C compiler exists, the tests of the C
    walk are skipped and those of the Python walk run)."""
    return compiled_extension("_records")


def record(body: bytes) -> bytes:
    """A record with an explicit body (everything after the length)."""
    return write_varint(len(body)) + body


def body(*, ts: bytes = b"\x00", offset_delta: int = 0, key: bytes = b"\x01", value: bytes = b"\x02v",
         headers: bytes = b"\x00") -> bytes:
    return b"\x00" + ts + write_varint(offset_delta) + key + value + headers


GOOD = [encode_record(b"k", b"v" * 300, offset_delta=0, headers=[("h", b"1"), ("n", None)]),
        encode_record(None, None, offset_delta=1, timestamp_delta=-5),
        encode_record(b"", b"x" * 70_000, offset_delta=2, timestamp_delta=2**40)]

DAMAGED = [
    # name, records section, record count, message starts with
    ("one record fewer than counted", b"".join(GOOD[:2]), 3, "Found invalid record structure"),
    ("one record more than counted", b"".join(GOOD), 2, "Incorrect declared batch size"),
    ("trailing garbage", b"".join(GOOD) + b"\x00", 3, "Incorrect declared batch size"),
    ("length past the end", write_varint(500) + body(), 1, "Invalid record size"),
    ("negative length", write_varint(-3) + body(), 1, "Invalid record size"),
    ("fields shorter than the length", write_varint(len(body()) + 2) + body() + b"\x00\x00", 1,
     "Invalid record size: expected to read"),
    ("fields longer than the length", write_varint(len(body()) - 1) + body(), 1, "Invalid record size"),
    ("varint of six bytes", record(b"\x00\x00" + b"\xff" * 5 + b"\x01" + b"\x01\x01\x00"), 1,
     "Found invalid record structure"),
    ("timestamp varlong of eleven bytes", record(b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x01\x01\x00"), 1,
     "Found invalid record structure"),
    ("offset delta out of order", record(body(offset_delta=1)), 1, "Record 0 has offset delta 1"),
    ("key length below -1", record(body(key=write_varint(-2))), 1, "Record 0 has key length -2"),
    ("value length below -1", record(body(value=write_varint(-7))), 1, "Record 0 has value length -7"),
    ("negative header count", record(body(headers=write_varint(-1))), 1, "Found invalid number of record headers -1"),
    ("header count beyond the bytes", record(body(headers=write_varint(1_000_000))), 1,
     "Found invalid number of record headers. 1000000"),
    ("negative header key size", record(body(headers=write_varint(1) + write_varint(-1) + write_varint(-1))), 1,
     "Invalid negative header key size -1"),
    ("header value past the record", record(body(headers=write_varint(1) + write_varint(0) + write_varint(40))), 1,
     "Found invalid record structure"),
    ("bytes that are no records", bytes(range(256)) * 4, 5, ""),
]


def test_well_formed_records_pass_and_agree_with_the_full_decoder():
    data = b"".join(GOOD)
    summary = walk_records(data, 0, len(data), 3, keys_required=True)
    assert summary.count == 3 and summary.missing_keys == (1,)
    batch = build_batch(GOOD, timestamp=0)
    assert [r.key for r in iter_records(batch)] == [b"k", None, b""]


# Around the sizes where a varint takes a second byte (a signed one from 64, so one
# record body of 64 bytes or more has a two-byte length).
_SIZES = [0, 1, 20, 40, 56, 57, 58, 62, 63, 64, 65, 127, 128, 1000, 1010, 1017, 1018, 1019, 1020, 1023, 1024,
          8191, 8192, 70_000]


def test_records_encode_across_the_one_byte_varint_boundary():
    for size in _SIZES:
        for key, value in ((b"k" * size, b"v"), (b"k", b"v" * size), (b"k" * size, None), (None, b"v" * size)):
            encoded = [encode_record(key, value, offset_delta=d, timestamp_delta=d * 3 - 100) for d in (0, 63, 64)]
            batch = build_batch(encoded, timestamp=1_000)
            decoded = list(iter_records(batch))
            assert [(r.key, r.value, r.offset, r.timestamp) for r in decoded] == [
                (key, value, d, 1_000 + d * 3 - 100) for d in (0, 63, 64)], size


def test_a_coordinators_batch_is_the_records_it_holds_built_one_by_one():
    # records_batch encodes every record in one call; it must make the batch the
    # general path makes, and one every reader decodes back.
    # One record (its own path: a coordinator's usual batch) and many, and the header
    # it answers beside the batch, which is the batch's own.
    for size in _SIZES:
        many = [(b"key" * (size // 3 + 1), b"v" * size), (b"k" * size, None), (b"", b"")] * 23  # offsets past 63
        for written in (many, many[:1], many[1:2], many[2:3], [(b"k" * (size + 1000), b"v" * size)],
                        [(b"k", b"v" * (size + 1000))]):
            batch, header = records_batch(written, timestamp=5, producer_id=7, producer_epoch=2, attributes=0x10)
            assert batch == build_batch([encode_record(k, v, offset_delta=i) for i, (k, v) in enumerate(written)],
                                        timestamp=5, producer_id=7, producer_epoch=2, attributes=0x10), size
            assert header == BatchHeader.parse(batch), size
            assert [(r.key, r.value, r.offset) for r in iter_records(batch)] == [
                (k, v, i) for i, (k, v) in enumerate(written)]


@pytest.mark.parametrize("name,section,count,message", DAMAGED, ids=[d[0] for d in DAMAGED])
def test_damaged_records_are_refused(name, section, count, message):
    # The C walk and the Python walk agree; the Python one says why.
    assert _c_walk().walk(section, 0, len(section), count) == -1
    for walk in (walk_records, walk_records_in_python):
        with pytest.raises(InvalidRecords) as refused:
            walk(section, 0, len(section), count)
        assert str(refused.value).startswith(message)


def test_the_c_walk_counts_null_keys_and_reads_any_buffer():
    data = b"".join(GOOD)
    for buffer in (data, memoryview(data), bytearray(data)):
        assert _c_walk().walk(buffer, 0, len(data), 3) == 1
    framed = b"xx" + data + b"yy"
    assert _c_walk().walk(framed, 2, 2 + len(data), 3) == 1
    assert _c_walk().walk(framed, 2, 3 + len(data), 3) == -1
    assert _c_walk().walk(data, 0, len(data) + 1, 3) == -1  # an end past the buffer is refused, not read
    assert walk_records_in_python(data, 0, len(data), 3, keys_required=True).missing_keys == (1,)


def test_a_batch_captured_from_librdkafka_passes():
    path = os.path.join(os.path.dirname(__file__), "..", "data", "confluent_idempotent_batch.bin")
    with open(path, "rb") as f:
        batch = f.read()
    header = BatchHeader.parse(batch)
    validate_records(batch, header, compacted=False, topic_partition="t-0")


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_checked_after_decompression(codec):
    good = _rebuild(codec, b"".join(GOOD), 3)
    validate_records(good, BatchHeader.parse(good), compacted=False, topic_partition="t-0")
    bad = _rebuild(codec, b"".join(GOOD) + b"\x00", 3)
    with pytest.raises(InvalidRecords, match="Incorrect declared batch size"):
        validate_records(bad, BatchHeader.parse(bad), compacted=False, topic_partition="t-0")


def _rebuild(codec: int, section: bytes, count: int) -> bytes:
    """A batch of `count` records whose records section is `section` compressed with `codec`."""
    packed = {1: gzip.compress, 2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
              3: lambda d: bytes(cramjam.lz4.compress(d)), 4: lambda d: bytes(cramjam.zstd.compress(d))}[codec](section)
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, 0, 0, -1, -1, -1, count) + packed
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def test_a_keyless_record_on_a_compacted_topic_is_a_per_record_error():
    batch = build_batch([encode_record(b"k", b"v"), encode_record(None, b"v", offset_delta=1),
                         encode_record(None, b"v", offset_delta=2)], timestamp=0)
    with pytest.raises(InvalidRecords) as refused:
        validate_records(batch, BatchHeader.parse(batch), compacted=True, topic_partition="logs-0")
    message = "Compacted topic cannot accept message without key in topic partition logs-0"
    assert refused.value.record_errors == [(1, message), (2, message)]
    assert str(refused.value) == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=2, message='{message}')]"
    )
    validate_records(batch, BatchHeader.parse(batch), compacted=False, topic_partition="logs-0")


@pytest.mark.parametrize("codec", [0, 1, 4], ids=["none", "gzip", "zstd"])
def test_keys_and_values_agree_with_the_full_decoder(codec, monkeypatch):
    """What coordinators replay their topics with: the C reader and its fallback (whole
    records decoded by iter_records) give the same (offset, key, value) triples."""
    plain = build_batch(GOOD, timestamp=0, base_offset=500)
    batch = recompressed(plain, BatchHeader.parse(plain), codec, None, 1 << 20) if codec else plain
    expected = [(r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value))
                for r in iter_records(batch)]
    assert expected[1] == (501, None, None) and expected[2][1] == b""
    assert records.keys_and_values(batch) == expected
    monkeypatch.setattr(records, "_keys_and_values_in_c", None)
    assert records.keys_and_values(batch) == expected


# A reader needs each record's offset delta, not their order (the produce walk checks that).
UNREADABLE = [d for d in DAMAGED if d[0] != "offset delta out of order"]


@pytest.mark.parametrize("name,section,count,message", UNREADABLE, ids=[d[0] for d in UNREADABLE])
def test_the_c_key_reader_refuses_what_it_cannot_read(name, section, count, message):
    assert _c_walk().keys_and_values(section, 0, len(section), count) is None
    assert _c_walk().keys_and_values(section, 0, len(section) + 1, count) is None  # never past the buffer
