"""Helpers around the real clients the integration tests drive."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(15)


def idempotent_producer(bootstrap: str, **extra: object) -> Producer:
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    config.update(extra)
    return Producer(config)


def produce_all(producer: Producer, messages: list[tuple[str, int, bytes | None, bytes]]) -> None:
    """Produce (topic, partition, key, value) tuples and wait for every delivery; fail on
    any delivery error."""
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)

    for topic, partition, key, value in messages:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors[:5]


def consume_partitions(bootstrap: str, topic: str, partitions: list[int], expected: int, *,
                       isolation: str = "read_uncommitted", timeout: float = 60, start: int = 0) -> dict[int, list]:
    """Read `expected` messages from offset `start` of `partitions`; {partition: [messages]}."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "log_level": 3,
    })
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    got: dict[int, list] = {p: [] for p in partitions}
    count = 0
    deadline = time.monotonic() + timeout
    try:
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(10000, 0.5):
                if message.error():
                    raise AssertionError(str(message.error()))
                got[message.partition()].append(message)
                count += 1
    finally:
        consumer.close()
    return got


def consume_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first `count` values a new group reads of `topic` from its start; fails the test
    if fewer come."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            values.append(message.value())
            if len(values) == count:
                break
    finally:
        consumer.close()
    assert len(values) == count, f"consumed {len(values)} of {count}"
    return values


def commit_offset(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """Commit `offset` for the group from a consumer outside any membership, as tools do."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def transactional_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
              "log_level": 3}
    config.update(extra)
    producer = Producer(config)
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, partitions: list[int], *, isolation: str, settle: float = 2.0,
             timeout: float = 30) -> dict[int, list[bytes]]:
    """Every message currently readable from `partitions`: reads until the consumer has
    reached the end of each partition (as the isolation level defines it). Where that
    end is the high watermark it stops there at once; where it is not (read_committed
    before an open transaction, or before markers still being written) it waits until
    nothing more arrives for `settle` seconds."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "log_level": 3,
    })
    # The ends are asked over a connection of their own: the consumer's connection has a
    # Fetch waiting (up to fetch.wait.max.ms) in front of any request sent after it, as
    # with Kafka, and one ListOffsets per partition there made reading 150 partitions
    # take over a minute.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED

    def ends() -> dict[int, int]:
        futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                     isolation_level=level, request_timeout=10)
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    assigned = [TopicPartition(topic, p, 0) for p in partitions]
    consumer.assign(assigned)
    got: dict[int, list[bytes]] = {p: [] for p in partitions}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(10000, 0.2)
            for message in messages:
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                        continue
                    raise AssertionError(str(message.error()))
                at_end.discard(message.partition())
                got[message.partition()].append(message.value())
            if messages:
                quiet_since = time.monotonic()
            elif len(at_end) == len(partitions):
                end = ends()
                if all(tp.offset >= end[tp.partition] for tp in consumer.position(assigned)):
                    break
                if time.monotonic() - quiet_since >= settle:
                    break
    finally:
        consumer.close()
    return got


def poll_to_partition_ends(consumer: Consumer, topic: str, seconds: float,
                           done: Callable[[list[TopicPartition]], bool] = lambda assignment: True) -> list[bytes]:
    """The values `consumer` (enable.partition.eof on, subscribed or assigned) reads until
    it has reached the end of every partition assigned to it and `done(assignment)`
    agrees: to the ends, not to a count, so that a record too many shows and a reader
    expecting one more than there is does not wait its whole deadline for it. An error
    other than the end of a partition is raised as the KafkaException the client made
    of it (a refusal's code stays for the caller to check)."""
    got: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + seconds
    while True:
        assert time.monotonic() < deadline, f"the end of {topic} not reached; read {got}"
        message = consumer.poll(0.2)
        if message is not None:
            if message.error() is None:
                got.append(message.value())
                ended.discard(message.partition())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            else:
                raise KafkaException(message.error())
        assignment = consumer.assignment()
        if assignment and ended >= {tp.partition for tp in assignment} and done(assignment):
            return got


def open_transaction_on(bootstrap: str, topic: str, partitions: list[int]) -> list[int]:
    """The partitions of `partitions` holding records of a transaction not yet ended:
    their high watermark (read_uncommitted end) past their last stable offset
    (read_committed end)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})

    def ends(level: IsolationLevel) -> dict[int, int]:
        futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                     isolation_level=level, request_timeout=10)
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    high, stable = ends(IsolationLevel.READ_UNCOMMITTED), ends(IsolationLevel.READ_COMMITTED)
    return [p for p in partitions if high[p] > stable[p]]
