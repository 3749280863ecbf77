"""`ottla topics|groups|transactions|produce|consume` against a real broker, the way a
person runs them: as the installed command, in a subprocess. Real clients
(confluent-kafka) make the groups and transactions the tools then describe."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition

from tests.clients import create_topic, idempotent_producer, produce_all, read_all, transactional_producer


def ottla(broker, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ottla.tools.cli", *args, "--bootstrap-server", broker.bootstrap]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_topics_create_list_describe_delete(broker, topic_name):
    created = ottla(broker, "topics", "create", "--topic", topic_name, "--partitions", "3",
                    "--config", "segment.bytes=1048576")
    assert created.stdout.strip() == f"Created topic {topic_name}."
    assert topic_name in ottla(broker, "topics", "list").stdout.split()
    assert "__transaction_state" not in ottla(broker, "topics", "list", "--exclude-internal").stdout

    described = ottla(broker, "topics", "describe", "--topic", topic_name).stdout.splitlines()
    assert described[0].startswith(f"Topic: {topic_name}\tTopicId: ")
    assert "PartitionCount: 3\tReplicationFactor: 1" in described[0]
    assert described[1:] == [f"\tTopic: {topic_name}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1"
                             for p in range(3)]

    again = ottla(broker, "topics", "create", "--topic", topic_name, check=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr

    assert ottla(broker, "topics", "delete", "--topic", topic_name).stdout.strip() == f"Deleted topic {topic_name}."
    assert topic_name not in ottla(broker, "topics", "list").stdout.split()
    missing = ottla(broker, "topics", "describe", "--topic", topic_name, check=False)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_produce_with_keys_and_headers_then_consume_prints_them(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    lines = "".join(f"user-{i}:event {i}\n" for i in range(20))
    produced = ottla(broker, "produce", "--topic", topic_name, "--parse-key", "--key-separator", ":",
                     "--header", "source=cli", "--header", "trace=abc", stdin=lines)
    assert "Produced 20 record(s)" in produced.stderr

    consumed = ottla(broker, "consume", "--topic", topic_name, "--from-beginning", "--max-messages", "20",
                     "--timeout-ms", "10000")
    rows = sorted(consumed.stdout.splitlines())
    assert rows == sorted(f"source:cli,trace:abc\tuser-{i}\tevent {i}" for i in range(20))
    assert "Processed a total of 20 messages" in consumed.stderr

    # Keys are spread as Kafka's partitioner spreads them: the same key, the same
    # partition as librdkafka's murmur2 puts it.
    create_topic(broker.bootstrap, f"{topic_name}-check", partitions=2)
    by_librdkafka = idempotent_producer(broker.bootstrap, partitioner="murmur2_random")
    delivered = {}
    for i in range(20):
        by_librdkafka.produce(f"{topic_name}-check", key=f"user-{i}".encode(), value=b"x",
                              on_delivery=lambda err, msg: delivered.__setitem__(msg.key(), msg.partition()))
    by_librdkafka.flush(30)
    mine = {}
    for partition in range(2):
        out = ottla(broker, "consume", "--topic", topic_name, "--partition", str(partition), "--from-beginning",
                    "--timeout-ms", "1500").stdout
        mine.update({line.split("\t")[1].encode(): partition for line in out.splitlines()})
    assert mine == delivered


def test_consume_is_read_committed_by_default(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    producer = transactional_producer(broker.bootstrap, f"tools-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, key=b"k", value=b"committed-1", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic_name, key=b"k", value=b"aborted", partition=0)
    producer.flush(10)  # in the log before the abort (abort_transaction drops what is unsent)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic_name, key=b"k", value=b"committed-2", partition=0, headers=[("h", b"v")])
    producer.commit_transaction(30)

    committed = ottla(broker, "consume", "--topic", topic_name, "--from-beginning", "--timeout-ms", "2000")
    assert committed.stdout.splitlines() == ["NO_HEADERS\tk\tcommitted-1", "h:v\tk\tcommitted-2"]
    everything = ottla(broker, "consume", "--topic", topic_name, "--from-beginning", "--timeout-ms", "2000",
                       "--isolation-level", "read_uncommitted")
    assert [line.split("\t")[2] for line in everything.stdout.splitlines()] == \
        ["committed-1", "aborted", "committed-2"]

    # An open transaction: read_committed stops before it.
    began = time.time()
    producer.begin_transaction()
    producer.produce(topic_name, value=b"pending", partition=0)
    producer.flush(10)
    pending = ottla(broker, "consume", "--topic", topic_name, "--from-beginning", "--timeout-ms", "1500")
    assert "pending" not in pending.stdout

    listed = ottla(broker, "transactions", "list").stdout.splitlines()
    assert listed[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    row = next(line.split() for line in listed if line.startswith(f"tools-{topic_name} "))
    assert row[3] == "Ongoing"
    described = ottla(broker, "transactions", "describe", "--transactional-id", f"tools-{topic_name}").stdout
    header, values = described.splitlines()
    fields = dict(zip(header.split(), values.split(), strict=False))
    assert fields["TransactionState"] == "Ongoing"
    assert fields["TopicPartitions"] == f"{topic_name}-0"
    # Measured from when the transaction began, which is within what the test waited.
    assert 0 < int(fields["TransactionDurationMs"]) <= (time.time() - began) * 1000 + 1
    producer.abort_transaction(30)
    unknown = ottla(broker, "transactions", "describe", "--transactional-id", "no-such-id", check=False)
    assert unknown.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr


def test_groups_list_and_describe_show_offsets_lag_and_members(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic_name, i % 2, None, b"m%d" % i) for i in range(10)])
    group = f"group-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "client.id": "tools-test", "auto.offset.reset": "earliest", "log_level": 3})
    consumer.subscribe([topic_name])
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 10 and time.monotonic() < deadline:
            seen += len([m for m in consumer.consume(10, 0.5) if not m.error()])
        # Commit 3 of partition 0 and all of partition 1: lags of 2 and 0.
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 3), TopicPartition(topic_name, 1, 5)],
                        asynchronous=False)
        assert group in ottla(broker, "groups", "list").stdout.split()
        described = ottla(broker, "groups", "describe", "--group", group).stdout
        assert f"Consumer group '{group}' is Stable with 1 member(s)." in described
        table = [line.split() for line in described.splitlines()[2:]]
        assert table[0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        rows = {row[2]: row for row in table[1:]}
        assert rows["0"][3:6] == ["3", "5", "2"] and rows["1"][3:6] == ["5", "5", "0"]
        assert rows["0"][8] == "tools-test"
    finally:
        consumer.close()
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0][:1] == [b"m0"]
