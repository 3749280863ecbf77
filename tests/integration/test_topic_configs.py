"""Every topic config of Kafka 4, as frameworks and tools set them (issue 20): accepted,
checked, described back with their sources, and acting where they act on one node
(LogAppendTime, the timestamp bounds, compression.type, min.insync.replicas)."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import struct
import subprocess
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KafkaPythonNewTopic
from kafka.errors import InvalidConfigurationError

from ottla.protocol.errors import ErrorCode
from ottla.storage.log_config import TOPIC_CONFIGS
from tests.clients import create_topic
from tests.restarts import RESTARTS, restart
from tests.system_tools import require
from tests.wire import WireClient, request

# What each framework sends when it creates its topics (from their sources):
# Kafka Streams' InternalTopicManager (changelog and repartition topics), Kafka Connect's
# KafkaConfigBackingStore/KafkaOffsetBackingStore/KafkaStatusBackingStore, Debezium's
# KafkaSchemaHistory.
FRAMEWORK_TOPICS = {
    "streams-changelog": {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"},
    "streams-windowed-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "172800000",
                                   "message.timestamp.type": "CreateTime"},
    "streams-repartition": {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                            "message.timestamp.type": "CreateTime"},
    "connect-configs": {"cleanup.policy": "compact"},
    "connect-offsets": {"cleanup.policy": "compact"},
    "connect-status": {"cleanup.policy": "compact"},
    "debezium-schema-history": {"cleanup.policy": "delete", "retention.ms": str(2**63 - 1),
                                "retention.bytes": "-1"},
    "service-defaults": {"compression.type": "lz4", "min.insync.replicas": "1", "retention.ms": "604800000"},
}

# A valid value for every Kafka 4 topic config.
EVERY_KEY = {
    "cleanup.policy": "compact,delete", "compression.type": "zstd", "compression.gzip.level": "5",
    "compression.lz4.level": "9", "compression.zstd.level": "6", "delete.retention.ms": "3600000",
    "file.delete.delay.ms": "1000", "flush.messages": "100000", "flush.ms": "60000",
    "follower.replication.throttled.replicas": "*", "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "0:1", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "86400000", "max.message.bytes": "2097152",
    "message.timestamp.after.max.ms": "7200000", "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.3",
    "min.compaction.lag.ms": "1000", "min.insync.replicas": "1", "preallocate": "true",
    "remote.storage.enable": "false", "retention.bytes": "1073741824", "retention.ms": "86400000",
    "segment.bytes": "104857600", "segment.index.bytes": "1048576", "segment.jitter.ms": "100",
    "segment.ms": "3600000", "unclean.leader.election.enable": "true", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
}


def test_every_kafka_topic_config_is_known():
    assert set(EVERY_KEY) == set(TOPIC_CONFIGS)


def _described(admin: AdminClient, topic: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return future.result(10)


def test_framework_topics_and_every_key_are_created_and_described_back(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    wanted = {f"{topic_name}-{kind}": configs for kind, configs in FRAMEWORK_TOPICS.items()}
    wanted[f"{topic_name}-every-key"] = EVERY_KEY
    futures = admin.create_topics([NewTopic(name, 1, 1, config=configs) for name, configs in wanted.items()])
    for future in futures.values():
        future.result(10)
    for name, configs in wanted.items():
        _assert_described_back(admin, name, configs)


def _assert_described_back(admin: AdminClient, name: str, configs: dict[str, str]) -> None:
    """The topic's configs as DescribeConfigs gives them: what was set, as set, from
    the topic's own config; every other key, the default."""
    described = _described(admin, name)
    assert set(described) >= set(TOPIC_CONFIGS)
    for key, entry in described.items():
        if key in configs:
            expected = ",".join(sorted(configs[key].split(","))) if key == "cleanup.policy" else configs[key]
            assert entry.value == expected, (name, key)
            assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, (name, key)
        else:
            assert entry.source == ConfigSource.DEFAULT_CONFIG.value, (name, key)


def test_kafka_python_creates_the_same_topics(broker, topic_name):
    """kafka-python's CreateTopics with configs, described back.

    Checked by breaking it: with CreateTopics keeping no config of the topics it
    creates (see the commit message), the description check fails, where "did not
    raise" passed."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KafkaPythonNewTopic(f"{topic_name}-{kind}", 1, 1, topic_configs=configs)
                             for kind, configs in FRAMEWORK_TOPICS.items()])
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([KafkaPythonNewTopic(f"{topic_name}-bad", 1, 1,
                                                     topic_configs={"no.such.config": "1"})])
    finally:
        admin.close()
    described_by = AdminClient({"bootstrap.servers": broker.bootstrap})
    for kind, configs in FRAMEWORK_TOPICS.items():
        _assert_described_back(described_by, f"{topic_name}-{kind}", configs)
    assert f"{topic_name}-bad" not in described_by.list_topics(timeout=10).topics


@pytest.mark.parametrize("configs,message", [
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms"),
    ({"min.insync.replicas": "0"}, "min.insync.replicas"),
    ({"message.timestamp.type": "WallClock"}, "message.timestamp.type"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"compression.gzip.level": "12"}, "compression.gzip.level"),
    ({"remote.storage.enable": "true"}, "Tiered storage"),
])
def test_bad_configs_get_invalid_config_and_create_nothing(broker, topic_name, configs, message):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_topics([NewTopic(topic_name, 1, 1, config=configs)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG and message in error.str()
    assert topic_name not in admin.list_topics(timeout=10).topics


def _read(bootstrap: str, topic: str, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message)
    consumer.close()
    return got


def test_log_append_time_stamps_each_batch_with_the_brokers_clock(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    before = int(time.time() * 1000)
    for i in range(3):
        producer.produce(topic_name, b"v%d" % i, timestamp=1_000_000 + i,
                         on_delivery=lambda error, message: reports.append((error, message.timestamp())))
    assert producer.flush(10) == 0
    after = int(time.time() * 1000)
    # The acknowledgement carries the append time (Produce's log_append_time).
    for error, (kind, timestamp) in reports:
        assert error is None and kind == 2 and before <= timestamp <= after  # 2: TIMESTAMP_LOG_APPEND_TIME
    for message in _read(broker.bootstrap, topic_name, 3):
        kind, timestamp = message.timestamp()
        assert kind == 2 and before <= timestamp <= after


def test_timestamps_out_of_the_topics_bounds_are_refused(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"message.timestamp.before.max.ms": "60000",
                                                   "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    outcomes = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for value, timestamp in ((b"past", now - 3_600_000), (b"now", now), (b"future", now + 3_600_000)):
        producer.produce(topic_name, value, timestamp=timestamp,
                         on_delivery=lambda error, message: outcomes.append((message.value(), error)))
        producer.flush(10)
    result = dict(outcomes)
    assert result[b"now"] is None
    assert result[b"past"].code() == KafkaError.INVALID_TIMESTAMP
    assert result[b"future"].code() == KafkaError.INVALID_TIMESTAMP
    assert [m.value() for m in _read(broker.bootstrap, topic_name, 1)] == [b"now"]


def _stored_codecs(data_dir: str, topic: str) -> set[int]:
    codecs = set()
    for path in glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log")):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.add(attributes & 0x07)
            pos += 12 + length
    return codecs


@pytest.mark.parametrize("codec,number", [("zstd", 4), ("gzip", 1), ("lz4", 3), ("snappy", 2),
                                          ("uncompressed", 0)])
def test_compression_type_stores_batches_in_the_topics_codec_and_every_client_reads_them(
        broker, topic_name, codec, number, kafkajs):
    create_topic(broker.bootstrap, topic_name, 1, {"compression.type": codec})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "compression.type": "none" if codec != "uncompressed" else "gzip"})
    for i in range(20):
        producer.produce(topic_name, b"value-%02d" % i * 10, key=b"k%d" % i)
    assert producer.flush(10) == 0
    assert _stored_codecs(broker.data_dir, topic_name) == {number}
    expected = [b"value-%02d" % i * 10 for i in range(20)]
    assert [m.value() for m in _read(broker.bootstrap, topic_name, 20)] == expected
    out = subprocess.run([require("kcat"), "-b", broker.bootstrap, "-C", "-t", topic_name, "-o", "beginning",
                          "-e", "-q"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == [v.decode() for v in expected]
    # aiokafka decodes every codec (through cramjam); kafka-python needs extra libraries
    # for all but gzip.
    assert asyncio.run(_aiokafka_read(broker.bootstrap, topic_name, 20)) == expected
    if codec in ("gzip", "uncompressed"):
        # kafkajs and kafka-python read gzip without extra codec packages.
        reader = os.path.join(os.path.dirname(kafkajs), "read_topic.js")
        out = subprocess.run(["node", reader, broker.bootstrap, topic_name, "20"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout.strip().splitlines()[-1])["got"] == [v.decode() for v in expected]
        # consumer_timeout_ms bounds a failure; a pass stops at the 20th record.
        consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=30_000)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(expected):
                break
        consumer.close()
        assert got == expected


async def _aiokafka_read(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    got: list[bytes] = []
    try:
        while len(got) < expected:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
            got += [m.value for messages in batches.values() for m in messages]
    finally:
        await consumer.stop()
    return got


def test_min_insync_replicas_above_one_refuses_acks_all_as_a_one_broker_kafka(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"min.insync.replicas": "2"})
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 3000,
                         "enable.idempotence": False, "retries": 0})
    producer.produce(topic_name, b"x", on_delivery=lambda error, message: errors.append(error))
    producer.flush(10)
    # Kafka's answer, not a timeout: a broker that never answered would fail here.
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors
    relaxed = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    relaxed.send(topic_name, b"acks=1").get(timeout=10)
    relaxed.close()


def _broker_configs(admin: AdminClient, name: str = "1") -> dict:
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, name)]).values()
    return future.result(10)


@pytest.mark.parametrize("how", RESTARTS)
def test_a_dynamic_broker_config_acts_at_once_and_survives_a_restart(fresh_broker, topic_name, how):
    broker = fresh_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(broker.bootstrap, topic_name, 1)
    create_topic(broker.bootstrap, f"{topic_name}-own", 1, {"retention.ms": "1000"})
    (node,) = map(str, admin.list_topics(timeout=10).brokers)
    entry = _broker_configs(admin, node)["log.retention.ms"]
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value and not entry.is_read_only
    assert _broker_configs(admin, node)["num.partitions"].is_read_only
    assert _broker_configs(admin, node)["inter.broker.protocol.version"].value == "4.1-IV1"
    resource = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    # At once: the topic without its own retention.ms takes the new default, the other keeps its own.
    assert _described(admin, topic_name)["retention.ms"].value == "3600000"
    assert _described(admin, f"{topic_name}-own")["retention.ms"].value == "1000"
    entry = _broker_configs(admin, node)["log.retention.ms"]
    assert entry.value == "3600000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    # A static-only key is refused as Kafka refuses it.
    refused = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as error:
        for future in admin.incremental_alter_configs([refused]).values():
            future.result(10)
    assert "Cannot update these configs dynamically" in error.value.args[0].str()
    restart(broker, how)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _described(admin, topic_name)["retention.ms"].value == "3600000"
    assert _broker_configs(admin, node)["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_broker_loggers_change_level_at_run_time(broker, topic_name):
    """BROKER_LOGGER resources, as `kafka-configs --entity-type broker-loggers` sends them
    (confluent-kafka's admin client has no such resource type: raw requests)."""
    DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, BROKER_LOGGER = 32, 44, 8

    with WireClient(broker.bootstrap) as client:
        def loggers() -> dict:
            answer = client.call(request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                         resources=[{"resource_type": BROKER_LOGGER, "resource_name": "1",
                                                     "configuration_keys": None}]))
            (result,) = answer.results
            assert result.error_code == ErrorCode.none, result
            return {c.name: c.value for c in result.configs}

        def alter(name: str, value: str | None, operation: int) -> ErrorCode:
            answer = client.call(request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
                {"resource_type": BROKER_LOGGER, "resource_name": "1",
                 "configs": [{"name": name, "config_operation": operation, "value": value}]}]))
            return answer.responses[0].error_code

        assert loggers()["root"] == "INFO" and loggers()["ottla.topics"] == "INFO"
        assert alter("ottla.topics", "ERROR", 0) == ErrorCode.none
        assert loggers()["ottla.topics"] == "ERROR"
        # ottla.topics' warning for a refused deletion is no longer written.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_topics([f"{topic_name}-missing"]).values():
            with pytest.raises(KafkaException):
                future.result(10)
        assert f"{topic_name}-missing" not in broker.log()
        assert alter("ottla.topics", None, 1) == ErrorCode.none  # DELETE: back to the root's level
        assert loggers()["ottla.topics"] == "INFO"
        assert alter("ottla.topics", "LOUD", 0) == ErrorCode.invalid_config
        assert alter("no.such.logger", "DEBUG", 0) == ErrorCode.invalid_config


def test_describe_topic_partitions_pages_with_a_cursor_and_knows_topic_ids(broker, topic_name):
    DESCRIBE_TOPIC_PARTITIONS, METADATA = 75, 3
    create_topic(broker.bootstrap, f"{topic_name}-a", 3)
    create_topic(broker.bootstrap, f"{topic_name}-b", 2)
    with WireClient(broker.bootstrap) as client:
        def page(cursor=None, limit=2):  # type: ignore[no-untyped-def]
            return client.call(request(DESCRIBE_TOPIC_PARTITIONS, 0, response_partition_limit=limit, cursor=cursor,
                                       topics=[{"name": f"{topic_name}-b"}, {"name": f"{topic_name}-a"},
                                               {"name": f"{topic_name}-missing"}]))

        first = page()
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == [
            (f"{topic_name}-a", [0, 1])]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (f"{topic_name}-a", 2)
        second = page({"topic_name": f"{topic_name}-a", "partition_index": 2}, limit=10)
        assert [(t.name, len(t.partitions)) for t in second.topics] == [
            (f"{topic_name}-a", 1), (f"{topic_name}-b", 2), (f"{topic_name}-missing", 0)]
        assert second.topics[2].error_code == ErrorCode.unknown_topic_or_partition
        assert second.next_cursor is None
        topic_id = second.topics[1].topic_id
        # The same topic by its id, through Metadata.
        answer = client.call(request(METADATA, 12, topics=[{"topic_id": topic_id, "name": None}],
                                     allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert answer.topics[0].name == f"{topic_name}-b"
        unknown = client.call(request(METADATA, 12, topics=[{"topic_id": uuid.uuid4(), "name": None}],
                                      allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert unknown.topics[0].error_code == ErrorCode.unknown_topic_id
