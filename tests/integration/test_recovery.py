"""Start-up recovery: torn tails, lost indexes, damaged or missing snapshots, --fsync."""

from __future__ import annotations

import glob
import os
import struct
import time

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all
from tests.wire import WireClient, request


def _partition_dir(broker, topic: str) -> str:
    return os.path.join(broker.data_dir, f"{topic}-0")


def _produce(client: WireClient, topic: str, batch: bytes):
    response = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    return response.responses[0].partition_responses[0]


def _batches_of(producer_id: int, count: int) -> list[bytes]:
    return [build_batch([encode_record(None, b"s%d" % s)], timestamp=int(time.time() * 1000),
                        producer_id=producer_id, producer_epoch=0, base_sequence=s) for s in range(count)]


def _produce_batches(broker, topic: str, count: int) -> tuple[int, list[bytes], list[int]]:
    """A new idempotent producer id and `count` one-record batches produced with it:
    (producer id, the batches, their offsets)."""
    with WireClient(broker.bootstrap) as client:
        producer_id = client.call(request(22, 4, transactional_id=None, transaction_timeout=60000,
                                          producer_id=-1, producer_epoch=-1)).producer_id
        batches = _batches_of(producer_id, count)
        return producer_id, batches, [_produce(client, topic, b).base_offset for b in batches]


def test_a_segment_torn_in_the_middle_of_a_batch_is_cut_back_at_start_up(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"m%d" % i) for i in range(1000)])
    broker.kill()
    log_file = os.path.join(_partition_dir(broker, topic_name), "00000000000000000000.log")
    size = os.path.getsize(log_file)
    with open(log_file, "ab") as f:  # half a batch, as a crash mid-write leaves it
        f.write(struct.pack(">qi", 1000, 500) + b"\x00" * 100)
    broker.start()
    assert os.path.getsize(log_file) == size
    assert "recovered_bytes_truncated=112" in broker.log()
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"after")])
    got = consume_partitions(broker.bootstrap, topic_name, [0], 1001)
    assert [m.value() for m in got[0]][-2:] == [b"m999", b"after"]
    assert got[0][-1].offset() == 1000


def test_deleted_index_files_are_rebuilt(fresh_broker, topic_name):
    broker = fresh_broker(log_segment_bytes=50_000)
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 10_000}),
                [(topic_name, 0, None, b"x" * 200 + b"%d" % i) for i in range(2000)])
    broker.stop()
    directory = _partition_dir(broker, topic_name)
    before = {name: open(os.path.join(directory, name), "rb").read()
              for name in os.listdir(directory) if name.endswith(".index") or name.endswith(".timeindex")}
    for name in before:
        os.unlink(os.path.join(directory, name))
    broker.start()
    after = {name: open(os.path.join(directory, name), "rb").read() for name in before}
    assert after == before, "rebuilt indexes match the ones Ottla wrote while appending"
    got = consume_partitions(broker.bootstrap, topic_name, [0], 2000)
    assert got[0][-1].value().endswith(b"1999")


def test_a_corrupt_snapshot_is_skipped_and_a_retry_still_gets_its_original_offset(fresh_broker, topic_name):
    broker = fresh_broker(log_segment_bytes=1000)
    create_topic(broker.bootstrap, topic_name, 1)
    producer_id, batches, offsets = _produce_batches(broker, topic_name, 40)
    broker.stop()
    snapshots = sorted(glob.glob(os.path.join(_partition_dir(broker, topic_name), "*.snapshot")))
    assert len(snapshots) == 2, "the two newest snapshots are kept"
    with open(snapshots[-1], "r+b") as f:
        f.seek(8)
        f.write(b"\xde\xad")
    broker.start()
    with WireClient(broker.bootstrap) as client:
        retried = _produce(client, topic_name, batches[-1])
        assert (retried.error_code, retried.base_offset) == (ErrorCode.none, offsets[-1])
        assert _produce(client, topic_name, _batches_of(producer_id, 42)[41]).error_code == \
            ErrorCode.out_of_order_sequence_number


def test_without_any_snapshot_the_log_replay_gives_the_same_state(fresh_broker, topic_name):
    broker = fresh_broker(log_segment_bytes=1000)
    create_topic(broker.bootstrap, topic_name, 1)
    producer_id, batches, offsets = _produce_batches(broker, topic_name, 30)
    broker.stop()
    for snapshot in glob.glob(os.path.join(_partition_dir(broker, topic_name), "*.snapshot")):
        os.unlink(snapshot)
    broker.start()
    with WireClient(broker.bootstrap) as client:
        for batch, offset in zip(batches[-5:], offsets[-5:]):
            retried = _produce(client, topic_name, batch)
            assert (retried.error_code, retried.base_offset) == (ErrorCode.none, offset)


def test_fsync_mode_acknowledges_after_fsync_and_keeps_everything(fresh_broker, topic_name):
    broker = fresh_broker(fsync_on_ack="true")
    create_topic(broker.bootstrap, topic_name, 2)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, i % 2, None, b"d%d" % i) for i in range(5000)])
    broker.kill()
    broker.start()
    got = consume_partitions(broker.bootstrap, topic_name, [0, 1], 5000)
    assert sum(len(v) for v in got.values()) == 5000


def test_recovery_after_kill_9_checks_only_what_followed_the_last_checkpoint(fresh_broker, topic_name):
    broker = fresh_broker(log_flush_offset_checkpoint_interval_ms=300)
    create_topic(broker.bootstrap, topic_name, 1)
    big = [(topic_name, 0, None, b"b" * 1000) for _ in range(20_000)]  # ~20 MB, one segment
    produce_all(idempotent_producer(broker.bootstrap), big)
    checkpoint = os.path.join(broker.data_dir, "recovery-point-offset-checkpoint")
    deadline = time.monotonic() + 20
    while f"{topic_name} 0 20000" not in (open(checkpoint).read() if os.path.exists(checkpoint) else ""):
        assert time.monotonic() < deadline, "no checkpoint at the log end"
        time.sleep(0.1)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"tail-%d" % i) for i in range(100)])
    broker.kill()
    broker.start()
    checked = int(broker.log().rsplit("recovered_bytes_checked=", 1)[1].split()[0])
    assert 0 < checked < 100_000, f"{checked} bytes checked: recovery read more than the unflushed tail"
    got = consume_partitions(broker.bootstrap, topic_name, [0], 20_100)
    assert got[0][-1].value() == b"tail-99" and got[0][-1].offset() == 20_099
