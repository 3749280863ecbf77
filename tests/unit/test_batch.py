"""The record-batch header codec, on a batch captured from confluent-kafka."""

from __future__ import annotations

import os
import struct

import pytest

from ottla.protocol.batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    BatchTooLarge,
    InvalidBatch,
    build_batch,
    compute_crc,
    crc_is_valid,
    encode_record,
    iter_records,
    validate_produced_batch,
    with_offset_and_epoch,
)
from ottla.protocol.control import ControlType, EndTxnMarker, marker_batch, marker_batch_with_header, parse_marker

CAPTURED = os.path.join(os.path.dirname(__file__), "..", "data", "confluent_idempotent_batch.bin")


@pytest.fixture
def captured() -> bytes:
    with open(CAPTURED, "rb") as f:
        return f.read()


def test_header_of_a_confluent_kafka_batch(captured):
    header = BatchHeader.parse(captured)
    assert header.size == len(captured)
    assert header.magic == 2
    assert header.record_count == 5 and header.last_offset_delta == 4
    assert header.base_timestamp == 1700000000000
    assert header.max_timestamp == 1700000000000 + 4 * 1001  # milliseconds kept exactly
    assert header.has_producer_id and header.producer_epoch == 0 and header.base_sequence == 0
    assert header.last_sequence == 4
    assert not header.is_transactional and not header.is_control
    assert crc_is_valid(captured, header)


def test_records_of_the_captured_batch(captured):
    records = list(iter_records(captured))
    assert [r.key for r in records] == [b"key-%d" % i for i in range(5)]
    assert [r.value for r in records] == [b"value-%d" % i for i in range(5)]
    assert [r.headers for r in records] == [(("h", b"hv%d" % i),) for i in range(5)]
    assert [r.timestamp for r in records] == [1700000000000 + i * 1001 for i in range(5)]
    assert [r.sequence for r in records] == [0, 1, 2, 3, 4]


def test_new_offset_and_leader_epoch_keep_the_crc_valid(captured):
    patched = b"".join(bytes(c) for c in with_offset_and_epoch(captured, 123456789, 7))
    header = BatchHeader.parse(patched)
    assert header.base_offset == 123456789 and header.partition_leader_epoch == 7
    assert patched[16:] == captured[16:]
    assert crc_is_valid(patched, header)
    assert [r.offset for r in iter_records(patched)] == list(range(123456789, 123456794))


def test_build_batch_round_trip():
    records = [encode_record(b"k%d" % i, None if i == 2 else b"v%d" % i, offset_delta=i, timestamp_delta=i * 10,
                             headers=[("a", b"1"), ("b", None)]) for i in range(3)]
    batch = build_batch(records, base_offset=40, timestamp=1_000, producer_id=9, producer_epoch=3,
                        base_sequence=2**31 - 2)
    header = validate_produced_batch(batch, 10_000)
    assert header.base_offset == 40 and header.record_count == 3
    assert header.last_sequence == 0, "sequences wrap from Int32.MAX to 0"
    decoded = list(iter_records(batch))
    assert [r.value for r in decoded] == [b"v0", b"v1", None]
    assert [r.timestamp for r in decoded] == [1000, 1010, 1020]
    assert decoded[0].headers == (("a", b"1"), ("b", None))


def test_validation_refuses_bad_batches(captured):
    corrupt = bytearray(captured)
    corrupt[-1] ^= 1
    with pytest.raises(InvalidBatch) as crc:
        validate_produced_batch(bytes(corrupt), 10_000)
    assert crc.value.corrupt

    # Bytes that stop before the batch they announce hold no batch (INVALID_RECORD, as
    # Kafka's batch iterator finds none); a length too small for a batch is damage.
    with pytest.raises(InvalidBatch) as short:
        validate_produced_batch(captured[:HEADER_SIZE - 1], 10_000)
    assert not short.value.corrupt
    tiny = bytearray(captured)
    tiny[8:12] = (20).to_bytes(4, "big")
    with pytest.raises(InvalidBatch) as damaged:
        validate_produced_batch(bytes(tiny[:32]), 10_000)
    assert damaged.value.corrupt

    with pytest.raises(InvalidBatch) as two:
        validate_produced_batch(captured + captured, 10_000)
    assert not two.value.corrupt, "two batches in one partition is a rule broken, not damage"

    wrong_magic = bytearray(captured)
    wrong_magic[16] = 1
    with pytest.raises(InvalidBatch):
        validate_produced_batch(bytes(wrong_magic), 10_000)

    with pytest.raises(BatchTooLarge):
        validate_produced_batch(captured, 100)


def test_a_crc_computed_beforehand_is_checked_where_the_batch_s_own_would_be(captured):
    # A large batch's CRC is computed in a worker thread and handed in: a damaged batch
    # whose damage also breaks a later rule (here the control flag) is still CORRUPT_MESSAGE
    # first, and an undamaged one passes.
    assert validate_produced_batch(captured, 10_000, compute_crc(captured)) == validate_produced_batch(captured, 10_000)
    damaged = bytearray(captured)
    damaged[22] |= 0x20  # attributes: the control flag, which clients may not write
    with pytest.raises(InvalidBatch) as crc:
        validate_produced_batch(bytes(damaged), 10_000, compute_crc(damaged))
    assert crc.value.corrupt and "CRC mismatch" in str(crc.value)


def test_control_batch_for_a_commit_marker():
    batch = marker_batch(EndTxnMarker(ControlType.COMMIT, 2), producer_id=3000, producer_epoch=1, timestamp=5)
    header = BatchHeader.parse(batch)
    assert header.is_control and header.is_transactional
    assert header.base_sequence == -1 and header.record_count == 1
    assert header.crc == compute_crc(batch) != 0
    record = next(iter_records(batch))
    assert len(record.key) == 4 and len(record.value) == 6  # as kafka-dump-log shows them
    assert parse_marker(batch) == EndTxnMarker(ControlType.COMMIT, 2)
    assert parse_marker(marker_batch(EndTxnMarker(ControlType.ABORT, 0), producer_id=1, producer_epoch=0,
                                     timestamp=5)).type is ControlType.ABORT
    # The batch build_batch makes of the marker's one record, and its header beside it.
    for kind, epoch in ((ControlType.COMMIT, 2), (ControlType.ABORT, 0), (ControlType.ABORT, 2**31 - 1)):
        marker = EndTxnMarker(kind, epoch)
        built = build_batch([encode_record(struct.pack(">hh", 0, kind), struct.pack(">hi", 0, epoch))], timestamp=5,
                            producer_id=3000, producer_epoch=1, base_sequence=-1,
                            attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG)
        assert marker_batch(marker, producer_id=3000, producer_epoch=1, timestamp=5) == built
        assert marker_batch_with_header(marker, 3000, 1, 5) == (built, BatchHeader.parse(built))


def test_log_append_time_sets_the_type_bit_and_max_timestamp_and_keeps_the_crc_valid():
    from ottla.protocol.batch import (
        TIMESTAMP_TYPE_FLAG,
        BatchHeader,
        build_batch,
        crc_is_valid,
        encode_record,
        with_log_append_time,
    )

    batch = build_batch([encode_record(b"k", b"v", offset_delta=i) for i in range(3)], timestamp=1000,
                        producer_id=7, producer_epoch=0, base_sequence=5)
    stamped = with_log_append_time(batch, 1_700_000_000_000)
    header = BatchHeader.parse(stamped)
    assert header.attributes & TIMESTAMP_TYPE_FLAG and header.max_timestamp == 1_700_000_000_000
    assert header.base_timestamp == 1000 and header.base_sequence == 5 and crc_is_valid(stamped, header)
    assert stamped[61:] == batch[61:]  # the records are untouched


def test_recompression_keeps_every_header_field_but_the_codec():
    from ottla.protocol.batch import BatchHeader, build_batch, crc_is_valid, encode_record, iter_records, recompressed

    batch = build_batch([encode_record(b"k%d" % i, b"v" * 100, offset_delta=i) for i in range(50)], timestamp=1000,
                        producer_id=7, producer_epoch=2, base_sequence=40)
    original = BatchHeader.parse(batch)
    for codec in (1, 2, 3, 4):
        stored = recompressed(batch, original, codec, None, 1 << 24)
        header = BatchHeader.parse(stored)
        assert header.compression == codec and crc_is_valid(stored, header) and len(stored) < len(batch)
        assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count,
                header.last_offset_delta, header.max_timestamp) == (7, 2, 40, 50, 49, original.max_timestamp)
        back = recompressed(stored, header, 0, None, 1 << 24)
        assert [r.value for r in iter_records(back)] == [r.value for r in iter_records(batch)]
