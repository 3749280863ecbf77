"""Records inside a produced batch are checked before they are appended (issue 12,
point 4): a batch whose CRC is right but whose records are garbage is refused with
INVALID_RECORD and never reaches the log, so consumers, ListOffsets by timestamp and
the cleaner never meet it; a keyless record on a compacted topic gets a per-record
error (Produce v8+)."""

from __future__ import annotations

import os
import struct
import time

import crc32c

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all
from tests.wire import WireClient, request

PRODUCE, LIST_OFFSETS = 0, 2
MiB = 1024 * 1024
RECORD_CRC_THREADS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "launchers", "record_crc_threads.py")


def _produce(client: WireClient, topic: str, batch: bytes, version: int = 9):
    response = client.call(request(PRODUCE, version, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    return response.responses[0].partition_responses[0]


def _with_records_section(section: bytes, count: int) -> bytes:
    """An uncompressed batch with a valid CRC around whatever `section` is."""
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, count - 1, now, now, -1, -1, -1, count) + section
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def _offset_for_timestamp(client: WireClient, topic: str, timestamp: int) -> tuple[int, int]:
    response = client.call(request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]))
    partition = response.topics[0].partitions[0]
    return partition.error_code, partition.offset


def test_a_batch_with_a_valid_crc_and_garbage_records_is_refused(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    good = [encode_record(b"k%d" % i, b"v%d" % i, offset_delta=i) for i in range(3)]
    damaged = {
        "garbage": (bytes(range(200)), 3),
        "one record fewer than counted": (b"".join(good[:2]), 3),
        "bytes after the last record": (b"".join(good) + b"\x00\x00", 3),
        "offsets out of order": (good[1] + good[0] + good[2], 3),
    }
    with WireClient(broker.bootstrap) as client:
        for name, (section, count) in damaged.items():
            answer = _produce(client, topic_name, _with_records_section(section, count))
            assert answer.error_code == ErrorCode.invalid_record, name
            assert answer.base_offset == -1 and answer.error_message, name
        # Nothing was appended: the next good batch is at offset 0, and the same
        # connection goes on being served.
        assert _produce(client, topic_name, _with_records_section(b"".join(good), 3)).base_offset == 0
        assert _offset_for_timestamp(client, topic_name, 0) == (ErrorCode.none, 0)

    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, b"k", b"after")])
    got = consume_partitions(broker.bootstrap, topic_name, [0], 4)
    assert [m.value() for m in got[0]] == [b"v0", b"v1", b"v2", b"after"]


def test_a_keyless_record_on_a_compacted_topic_gets_a_per_record_error(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config={"cleanup.policy": "compact"})
    batch = build_batch([encode_record(b"k0", b"v0"), encode_record(None, b"v1", offset_delta=1),
                         encode_record(b"k2", b"v2", offset_delta=2)], timestamp=int(time.time() * 1000))
    message = f"Compacted topic cannot accept message without key in topic partition {topic_name}-0"
    with WireClient(broker.bootstrap) as client:
        answer = _produce(client, topic_name, batch, version=9)
        assert answer.error_code == ErrorCode.invalid_record
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [(1, message)]
        assert answer.error_message.startswith("One or more records have been rejected due to 1 record errors")
        # Before v8 the same refusal, without the per-record list.
        assert _produce(client, topic_name, batch, version=7).error_code == ErrorCode.invalid_record
        keyed = build_batch([encode_record(b"k%d" % i, b"v", offset_delta=i) for i in range(3)],
                            timestamp=int(time.time() * 1000))
        assert _produce(client, topic_name, keyed).error_code == ErrorCode.none


def test_a_large_batch_has_its_crc_checked_in_a_worker_thread(fresh_broker, topic_name, tmp_path):
    """A batch of more than 1 MiB has its CRC-32C computed off the event loop (a few ms
    for 8 MiB on this machine), and a damaged one is still CORRUPT_MESSAGE with nothing
    appended. Four records of 1 MiB: their walk stays on the loop, only the CRC moves."""
    threads_file = tmp_path / "crc-threads"
    broker = fresh_broker(env={"OTTLA_TEST_CRC_THREADS_FILE": str(threads_file)}, launcher=RECORD_CRC_THREADS)
    create_topic(broker.bootstrap, topic_name, 1, config={"max.message.bytes": str(8 * MiB)})
    good = build_batch([encode_record(b"k%d" % i, bytes(MiB), offset_delta=i) for i in range(4)],
                       timestamp=int(time.time() * 1000))
    damaged = bytearray(good)
    damaged[-1] ^= 1
    with WireClient(broker.bootstrap) as client:
        answer = _produce(client, topic_name, bytes(damaged))
        assert answer.error_code == ErrorCode.corrupt_message and "CRC mismatch" in answer.error_message
        assert answer.base_offset == -1
        # Nothing of the damaged batch was appended: the good one is at offset 0.
        answer = _produce(client, topic_name, good)
        assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 0)
    names = threads_file.read_text().split()
    assert len(names) == 2 and all(name.startswith("ottla-worker") for name in names), names
