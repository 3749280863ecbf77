"""Clients other than confluent-kafka: kcat (Debian's librdkafka), kafka-python, aiokafka
and kafkajs."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.clients import create_topic
from tests.system_tools import require


def test_kcat_produce_then_consume_round_trip(broker, topic_name):
    kcat = require("kcat")
    create_topic(broker.bootstrap, topic_name, 1)
    lines = [f"line {i}" for i in range(100)]
    subprocess.run([kcat, "-b", broker.bootstrap, "-t", topic_name, "-P"], input="\n".join(lines) + "\n",
                   text=True, check=True, timeout=60)
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-t", topic_name, "-C", "-e", "-o", "beginning"],
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


def test_kafka_python_consumer_group_commits_and_resumes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(100):
        producer.send(topic_name, value=b"g%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()

    def consume(limit: int) -> list[bytes]:
        consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=f"kp-{topic_name}",
                                 enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=8000)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == limit:
                break
        consumer.commit()
        consumer.close()
        return got

    first = consume(60)
    rest = consume(40)
    assert len(first) == 60 and len(rest) == 40
    assert sorted(first + rest) == sorted(b"g%d" % i for i in range(100))


def test_aiokafka_idempotence_transactions_and_a_read_committed_group(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
        await producer.start()
        for i in range(20):
            await producer.send_and_wait(topic_name, b"i%d" % i, partition=i % 2)
        await producer.stop()
        txn = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"aio-{topic_name}")
        await txn.start()
        async with txn.transaction():
            await txn.send(topic_name, b"committed", partition=0)
        with pytest.raises(RuntimeError):
            async with txn.transaction():
                await (await txn.send(topic_name, b"aborted", partition=0))
                raise RuntimeError("abort this one")
        await txn.stop()
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=f"aio-{topic_name}",
                                    auto_offset_reset="earliest", isolation_level="read_committed")
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < 21:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                got += [m.value for messages in batches.values() for m in messages]
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(scenario())
    assert sorted(got) == sorted([b"i%d" % i for i in range(20)] + [b"committed"])


def test_kafkajs_idempotence_transactions_and_a_read_committed_group(broker, kafkajs):
    out = subprocess.run(["node", kafkajs, broker.bootstrap], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    read = json.loads(out.stdout.strip().splitlines()[-1])
    committed = sorted([f"v{i}" for i in range(50)] + ["committed"])
    assert sorted(read["got"]) == committed
    assert sorted(read["everything"]) == sorted(committed + ["aborted"])
