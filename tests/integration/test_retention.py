"""Topic configs through the admin APIs, retention by time and size, DeleteRecords."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all
from tests.restarts import RESTARTS, restart

DAY_MS = 24 * 3600 * 1000


def _segments(broker, topic: str) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(broker.data_dir, f"{topic}-0")) if f.endswith(".log"))


def _wait(condition, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def _start_offset(broker, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import OffsetSpec
    result = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    return result[TopicPartition(topic, 0)].result(10).offset


@pytest.mark.parametrize("how", RESTARTS)
def test_topic_configs_are_described_altered_and_kept_across_restart(fresh_broker, topic_name, how):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic_name)

    def described() -> dict[str, ConfigEntry]:
        return admin.describe_configs([resource])[resource].result(10)

    configs = described()
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == str(1024 ** 3) and configs["segment.bytes"].is_default

    admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])])[resource].result(10)
    configs = described()
    assert configs["retention.bytes"].value == "1000000"
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["retention.ms"].value == str(7 * DAY_MS)

    bad = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.bytes", "lots", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([bad])[bad].result(10)
        raise AssertionError("an invalid value was accepted")
    except Exception as exc:  # confluent raises KafkaException
        assert "retention.bytes" in str(exc)

    restart(broker, how)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = described()
    assert configs["retention.bytes"].value == "1000000" and configs["cleanup.policy"].value == "compact,delete"


def test_retention_deletes_old_segments_by_time_but_never_the_active_one(fresh_broker, topic_name):
    broker = fresh_broker(log_retention_check_interval_ms=200)
    create_topic(broker.bootstrap, topic_name, 1, {"segment.bytes": "100000", "retention.ms": str(DAY_MS)})
    # Batches must fit in a segment (else RECORD_LIST_TOO_LARGE, as in Kafka).
    producer = idempotent_producer(broker.bootstrap, **{"batch.size": 16384})
    old = int(time.time() * 1000) - 2 * DAY_MS
    errors = []
    for i in range(3000):
        producer.produce(topic_name, value=b"old-%d" % i + b"x" * 100, partition=0, timestamp=old,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors
    produce_all(producer, [(topic_name, 0, None, b"new-%d" % i) for i in range(10)])
    # Every segment before the one holding the new records goes (in one or more passes).
    _wait(lambda: len(_segments(broker, topic_name)) == 1)

    start = _start_offset(broker, topic_name)
    got = consume_partitions(broker.bootstrap, topic_name, [0], 3010 - start, start=start)
    values = [m.value() for m in got[0]]
    assert values[-10:] == [b"new-%d" % i for i in range(10)]
    assert got[0][0].offset() == start
    # The segment holding the new records stays; every segment before it went.
    assert _segments(broker, topic_name)[0] == f"{start:020d}.log"
    assert "retention deleted segments" in broker.log()


@pytest.mark.parametrize("how", RESTARTS)
def test_an_active_segment_whose_records_all_expired_is_rolled_and_deleted(fresh_broker, topic_name, how):
    """As in Kafka (UnifiedLog.deleteSegments): when every record of the partition is
    past retention.ms, active segment included, a new empty segment is rolled at the log
    end and the old ones deleted; the log start offset is the log end offset; it stays
    there across a restart (clean or kill -9), and the next record gets the next offset.

    Checked by breaking it: with the active segment never taken (storage/retention.py's
    `if active and segment.size == 0` made `if active`) the log start offset stays 0
    and the test fails."""
    broker = fresh_broker(log_retention_check_interval_ms=200)
    create_topic(broker.bootstrap, topic_name, 1, {"retention.ms": str(DAY_MS)})
    old = int(time.time() * 1000) - 2 * DAY_MS
    producer = idempotent_producer(broker.bootstrap)
    for i in range(50):
        producer.produce(topic_name, value=b"old-%d" % i, partition=0, timestamp=old)
    assert producer.flush(30) == 0
    # Every record went to the one, active, segment (segment.bytes is 1 GiB); the
    # retention check (every 200 ms) may already have rolled it, and deleted it.
    assert _segments(broker, topic_name) in ([f"{0:020d}.log"], [f"{0:020d}.log", f"{50:020d}.log"],
                                             [f"{50:020d}.log"])
    _wait(lambda: _start_offset(broker, topic_name) == 50)
    assert _segments(broker, topic_name) == [f"{50:020d}.log"]
    restart(broker, how)
    assert _start_offset(broker, topic_name) == 50
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"new")])
    got = consume_partitions(broker.bootstrap, topic_name, [0], 1, start=50)
    assert [(m.offset(), m.value()) for m in got[0]] == [(50, b"new")]


def test_retention_by_size_keeps_at_least_retention_bytes(fresh_broker, topic_name):
    broker = fresh_broker(log_retention_check_interval_ms=200)
    create_topic(broker.bootstrap, topic_name, 1, {"segment.bytes": "100000", "retention.bytes": "300000"})
    produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 16384}),
                [(topic_name, 0, None, b"y" * 1000) for _ in range(1500)])

    def sizes() -> list[int]:
        return [os.path.getsize(os.path.join(broker.data_dir, f"{topic_name}-0", f))
                for f in _segments(broker, topic_name)]

    # Deleted down to the point where one more deletion would go below retention.bytes.
    _wait(lambda: sum(sizes()) - sizes()[0] < 300_000)
    assert sum(sizes()) >= 300_000
    assert _start_offset(broker, topic_name) > 0


def test_delete_records_moves_the_log_start_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"segment.bytes": "20000"})
    produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 8000}),
                [(topic_name, 0, None, b"r%d" % i + b"z" * 200) for i in range(1000)])
    segments_before = len(_segments(broker, topic_name))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    result = admin.delete_records([TopicPartition(topic_name, 0, 700)])
    assert result[TopicPartition(topic_name, 0, 700)].result(10).low_watermark == 700
    assert _start_offset(broker, topic_name) == 700
    assert len(_segments(broker, topic_name)) < segments_before
    got = consume_partitions(broker.bootstrap, topic_name, [0], 300, start=700)
    assert got[0][0].offset() == 700 and got[0][0].value().startswith(b"r700")
