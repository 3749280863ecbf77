"""Clients other than confluent-kafka: kcat (Debian's librdkafka) and kafka-python."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.clients import create_topic

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (.ci/run installs it from apt)")
def test_kcat_produce_then_consume_round_trip(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    lines = [f"line {i}" for i in range(100)]
    subprocess.run([KCAT, "-b", broker.bootstrap, "-t", topic_name, "-P"], input="\n".join(lines) + "\n",
                   text=True, check=True, timeout=60)
    out = subprocess.run([KCAT, "-b", broker.bootstrap, "-t", topic_name, "-C", "-e", "-o", "beginning"],
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == lines


def test_kafka_python_produce_consume_round_trip(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True)
    for i in range(200):
        producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
    consumer.seek_to_beginning()
    got = {0: [], 1: []}
    for message in consumer:
        got[message.partition].append(message.value)
        if sum(len(v) for v in got.values()) == 200:
            break
    consumer.close()
    assert got[0] == [b"v%d" % i for i in range(0, 200, 2)]
    assert got[1] == [b"v%d" % i for i in range(1, 200, 2)]
