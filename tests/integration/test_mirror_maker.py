"""MirrorMaker 2 (Kafka 4.3.1, dedicated mode) between Ottla and Apache Kafka, the
reference: the way off one machine onto a Kafka cluster, and back for a local copy.

Ottla -> Kafka: a topic's partition count and configs, its committed records with keys,
headers and timestamps, partition by partition in order, and not the records of an aborted
transaction (the source consumers read_committed). A consumer group drains the source while
MirrorMaker 2 runs and stops; the checkpoint connector translates its offsets and syncs them
to the target (`sync.group.offsets.enabled`); records produced afterwards (an aborted
transaction among them) are read by the group resumed on the target: nothing lost, and
records read twice only as MirrorMaker 2 documents (a translated offset rounds back to an
offset sync, emitted at least every offset.lag.max records), counted: 0 in both directions,
offsets 100/100/100 translated to 100/100/100. Kafka -> Ottla: the same in the other direction.

MirrorMaker 2 must run while the group still reads the source: a group whose offsets are
far behind the newest offset sync when the checkpoint task first sees them is translated
coarsely (its store keeps few old syncs); a first version of this test had the group stop
after the copy and got offsets 75-89 translated to 1, with Kafka as the source as well.

Checked to fail when Ottla's read_committed Fetch lists no aborted transactions: the aborted
transaction's records were copied to Kafka."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.clients import (
    create_topic,
    idempotent_producer,
    open_transaction_on,
    produce_all,
    read_all,
    transactional_producer,
)
from tests.reference.connect import MirrorMaker, mirror_properties, wait_until
from tests.reference.kafka import run_java

PARTITIONS = 3
COPY_TIMEOUT = 180.0
# Non-default configs MirrorMaker 2 carries over with the topic.
TOPIC_CONFIGS = {"retention.ms": "86400000", "max.message.bytes": "300000", "cleanup.policy": "delete"}

Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]

@pytest.fixture
def mirror_makers(tmp_path) -> Iterator[list[MirrorMaker]]:
    started: list[MirrorMaker] = []
    yield started
    for mm in started:
        mm.kill()

def record_of(message: Message) -> Record:
    return (message.key(), message.value(), tuple(message.headers() or ()), message.timestamp()[1])

def read_partitions(bootstrap: str, topic: str, *, group: str | None = None, timeout: float = 30
                    ) -> dict[int, list[Record]]:
    """Every committed record of `topic` by partition, to the end: from offset 0, or with
    `group` from the group's committed offsets (committing what it read)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True, "log_level": 3})
    if group is None:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    else:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        consumer.assign(committed)
    got: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                        continue
                    raise AssertionError(str(message.error()))
                at_end.discard(message.partition())
                got[message.partition()].append(record_of(message))
        if group is not None:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got

def commit_quietly(consumer: Consumer, offsets: list[TopicPartition]) -> bool:
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
        return True
    except KafkaException as exc:
        if exc.args[0].retriable():
            return False
        raise


def produce_source(producer: Producer, topic: str, transactions: tuple[tuple[bool, int], ...], first: int
                   ) -> dict[int, list[Record]]:
    """Transactions (commit?, records) of keyed records with headers and explicit
    timestamps, numbered from `first`; returns the committed records by partition, in order."""
    expected: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
    base_ts = 1_700_000_000_000
    number = first
    for commit, count in transactions:
        producer.begin_transaction()
        for _ in range(count):
            partition = number % PARTITIONS
            record: Record = (b"k%d" % number, b"v%d" % number, (("h", b"%d" % number), ("src", b"ottla")),
                              base_ts + number)
            producer.produce(topic, key=record[0], value=record[1], headers=list(record[2]),
                             partition=partition, timestamp=record[3])
            if commit:
                expected[partition].append(record)
            number += 1
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    return expected


def copied_count(bootstrap: str, topic: str) -> int:
    return sum(len(r) for r in read_partitions(bootstrap, topic, timeout=10).values())


def topic_state(bootstrap: str, topic: str) -> tuple[int, dict[str, str]] | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    if topic not in metadata.topics or metadata.topics[topic].error is not None:
        return None
    (future,) = admin.describe_configs([ConfigResource("TOPIC", topic)]).values()
    configs = {name: entry.value for name, entry in future.result(10).items()}
    return len(metadata.topics[topic].partitions), configs

def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}

def copy_and_check(source: str, target: str, source_alias: str, target_alias: str, mm_list: list[MirrorMaker],
                   work_dir: str) -> dict[str, int]:
    """Produce on `source`, consume half with a group there, mirror to `target`; check the
    copy and resume the group on `target`. Returns counts for the report."""
    topic = f"mm-{uuid.uuid4().hex[:8]}"
    group = f"{topic}-group"
    # Aliases of this run's own: MirrorMaker 2 keeps its connectors' configs in topics named
    # after them on the target, and the session's Kafka outlives an earlier run's Ottla.
    run = uuid.uuid4().hex[:6]
    source_alias, target_alias = f"{source_alias}-{run}", f"{target_alias}-{run}"
    create_topic(source, topic, PARTITIONS, TOPIC_CONFIGS)
    # MirrorMaker 2 runs while the applications still use the source, as in a migration:
    # its checkpoint task translates a group's offsets through the newest offset syncs.
    mm = MirrorMaker(work_dir, mirror_properties(source_alias, source, target_alias, target, topics=topic,
                                                 groups=group, **{"offset.lag.max": "10"}))
    mm_list.append(mm)
    mm.start()
    wait_until(lambda: mm.check_alive() or topic_state(target, topic), COPY_TIMEOUT,
               f"MirrorMaker 2 to create {topic} on the target", mm.log_tail)
    producer = transactional_producer(source, f"mm2-source-{uuid.uuid4().hex[:6]}")
    expected = produce_source(producer, topic, ((True, 300),), 0)
    wait_until(lambda: mm.check_alive() or copied_count(target, topic) >= 300, COPY_TIMEOUT,
               "the first transaction on the target", mm.log_tail)

    # The group drains what the source holds, commits and stops; MirrorMaker 2 keeps running.
    first_part: dict[int, list[Record]] = {}
    consumer = Consumer({"bootstrap.servers": source, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    positions: dict[int, int] = {}
    while any(len(first_part.get(p, [])) < len(expected[p]) for p in range(PARTITIONS)):
        for message in consumer.consume(100, 5):
            assert not message.error(), message.error()
            first_part.setdefault(message.partition(), []).append(record_of(message))
            positions[message.partition()] = message.offset() + 1
    # A freshly started Kafka may still be loading its offsets topic (NOT_COORDINATOR).
    offsets = [TopicPartition(topic, p, offset) for p, offset in positions.items()]
    wait_until(lambda: commit_quietly(consumer, offsets), 60, "the group's commit on the source")
    consumer.close()
    assert expected == first_part
    wait_until(lambda: len(group_offsets(target, group, topic)) == PARTITIONS, COPY_TIMEOUT,
               "the group's offsets on the target", mm.log_tail)

    # More records, an aborted transaction among them, after the group has moved.
    for p, records in produce_source(producer, topic, ((False, 60), (True, 150)), 300).items():
        expected[p] += records
    total = sum(len(records) for records in expected.values())

    def copied() -> bool:
        mm.check_alive()
        state = topic_state(target, topic)
        if state is None:
            return False
        return copied_count(target, topic) >= total

    wait_until(copied, COPY_TIMEOUT, f"{total} records of {topic} on the target", mm.log_tail)
    state = topic_state(target, topic)
    assert state is not None
    partitions, configs = state
    assert partitions == PARTITIONS
    for name, value in TOPIC_CONFIGS.items():
        assert configs[name] == value, (name, configs[name])
    # Keys, values, headers and timestamps, partition by partition, in order; the aborted
    # transaction's 60 records are not there.
    assert read_partitions(target, topic) == expected

    translated = group_offsets(target, group, topic)
    source_offsets = group_offsets(source, group, topic)
    resumed = read_partitions(target, topic, group=group)
    duplicates = 0
    for p in range(PARTITIONS):
        seen = first_part[p] + resumed[p]
        # Nothing lost: the resumed reads start at or before where the group stopped.
        assert resumed[p] == expected[p][len(expected[p]) - len(resumed[p]):]
        assert len(resumed[p]) >= len(expected[p]) - len(first_part[p])
        assert set(seen) == set(expected[p])
        duplicates += len(seen) - len(expected[p])
    # Read again: only records the group had read on the source (the resumed reads are a
    # suffix), as MirrorMaker 2 translates an offset to the newest offset sync at or before
    # it, plus one, and emits a sync at least every offset.lag.max (10) records.
    assert 0 <= duplicates <= 10 * PARTITIONS, duplicates
    return {"records": total, "read_on_source": sum(len(r) for r in first_part.values()),
            "duplicates": duplicates, "source_offsets": source_offsets, "translated": translated}

def test_mirror_maker_copies_ottla_to_kafka(fresh_broker, kafka_reference, mirror_makers, tmp_path):
    """Ottla -> Kafka with MirrorMaker 2: topic, configs, committed records only, and a
    consumer group that moves over."""
    ottla = fresh_broker()
    counts = copy_and_check(ottla.bootstrap, kafka_reference.bootstrap, "ottla", "kafka", mirror_makers,
                            str(tmp_path))
    print("Ottla -> Kafka:", counts)

def test_mirror_maker_copies_kafka_to_ottla(fresh_broker, kafka_reference, mirror_makers, tmp_path):
    """Kafka -> Ottla: a local copy of a cluster's topic, its group positions included."""
    ottla = fresh_broker()
    counts = copy_and_check(kafka_reference.bootstrap, ottla.bootstrap, "kafka", "ottla", mirror_makers,
                            str(tmp_path))
    print("Kafka -> Ottla:", counts)


def high_watermarks(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-watermarks", "log_level": 3})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS))
    except KafkaException:  # not there yet
        return 0
    finally:
        consumer.close()


def values_by_partition(bootstrap: str, topic: str) -> dict[int, list[bytes | None]]:
    return {p: [record[1] for record in records]
            for p, records in read_partitions(bootstrap, topic, timeout=120).items()}


def test_exactly_once_mirror_maker_across_a_kill_of_ottla(fresh_broker, kafka_reference, mirror_makers, tmp_path):
    """MirrorMaker 2 with exactly-once support on the target (KIP-618 on its Kafka side:
    records and source offsets in one transaction; dedicated mode needs its internal REST
    for the fencing) copies Ottla to Kafka; Ottla is killed with kill -9 in the middle of
    the copy and started again on the same data and port, and more records follow. Kafka's
    read_committed copy equals Ottla's topic record for record, partition by partition:
    no duplicate, no gap; Kafka lists the source task's transactional id. A run with
    exactly-once left off (the property set without its cluster prefix, which MirrorMaker 2
    ignores) passed too: a kill of the source only makes the task's consumer reconnect and
    go on from its position, so this holds Ottla to losing nothing acknowledged and serving
    the same offsets after the restart, not MirrorMaker 2's fencing."""
    ottla = fresh_broker()
    topic = f"mm-eos-{uuid.uuid4().hex[:8]}"
    create_topic(ottla.bootstrap, topic, PARTITIONS)
    run = uuid.uuid4().hex[:6]
    mm = MirrorMaker(str(tmp_path), mirror_properties(
        f"ottla-{run}", ottla.bootstrap, f"kafka-{run}", kafka_reference.bootstrap, topics=topic, groups="none",
        **{f"kafka-{run}.exactly.once.source.support": "enabled", "dedicated.mode.enable.internal.rest": "true",
           "listeners": "http://127.0.0.1:0"}))
    mirror_makers.append(mm)
    mm.start()
    wait_until(lambda: mm.check_alive() or topic_state(kafka_reference.bootstrap, topic), COPY_TIMEOUT,
               "MirrorMaker 2 to create the topic on Kafka", mm.log_tail)

    def produce(first: int, count: int) -> None:
        producer = idempotent_producer(ottla.bootstrap, **{"linger.ms": 20})
        produce_all(producer, [(topic, n % PARTITIONS, b"k%d" % n, b"v%d" % n) for n in range(first, first + count)])

    produce(0, 150_000)
    wait_until(lambda: high_watermarks(kafka_reference.bootstrap, topic) > 10_000, COPY_TIMEOUT,
               "the copy to begin", mm.log_tail)
    ottla.kill()
    copied_at_kill = high_watermarks(kafka_reference.bootstrap, topic)
    ottla.start()
    produce(150_000, 20_000)
    wait_until(lambda: mm.check_alive() or len(set(sum(values_by_partition(
        kafka_reference.bootstrap, topic).values(), []))) >= 170_000, COPY_TIMEOUT, "the whole copy", mm.log_tail)
    source = values_by_partition(ottla.bootstrap, topic)
    assert sum(len(v) for v in source.values()) == 170_000
    target = values_by_partition(kafka_reference.bootstrap, topic)
    for p in range(PARTITIONS):
        assert target[p] == source[p], (p, len(target[p]), len(source[p]),
                                        len(target[p]) - len(set(target[p])))
    # The copy was transactional: the source task's transactional id is on Kafka.
    listed = run_java("org.apache.kafka.tools.TransactionsCommand",
                      ["--bootstrap-server", kafka_reference.bootstrap, "list"], timeout=120)
    assert f"ottla-{run}-mm2-MirrorSourceConnector-0" in listed.stdout, listed.stdout + listed.stderr
    print(f"copied before the kill: {copied_at_kill} offsets (records and markers) of 170,000 records")
    print(listed.stdout)


def test_exactly_once_mirror_maker_into_ottla_across_a_kill_of_mirror_maker(fresh_broker, kafka_reference,
                                                                             mirror_makers, tmp_path):
    """MirrorMaker 2 with exactly-once support on Ottla, the target (KIP-618: the source
    task's transactional producer writes the records and the task's source offsets in one
    transaction per poll), copies a Kafka topic. MirrorMaker 2 is killed with kill -9 while
    Ottla holds an open transaction of its task (high watermark past the last stable
    offset; the kill is tried again if that transaction ended first), and a new MirrorMaker
    2 is started on the same configuration. Its task's producer initialises with the same
    transactional id: Ottla fences the dead producer and aborts its open transaction, and
    the task resumes from the source offset committed with the last committed transaction.
    Ottla's read_committed copy equals Kafka's topic record for record, partition by
    partition (exact lists: no duplicate, no gap), and its read_uncommitted view holds the
    aborted records besides. Checked to fail when Ottla's read_committed Fetch lists no
    aborted transactions (the aborted records were read as duplicates)."""
    ottla = fresh_broker()
    topic = f"mm-fence-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_reference.bootstrap, topic, PARTITIONS)
    produced = [0]

    def feed(count: int) -> None:
        first = produced[0]
        produce_all(idempotent_producer(kafka_reference.bootstrap, **{"linger.ms": 20}),
                    [(topic, n % PARTITIONS, b"k%d" % n, b"v%d" % n) for n in range(first, first + count)])
        produced[0] += count

    feed(120_000)
    run = uuid.uuid4().hex[:6]
    properties = mirror_properties(
        f"kafka-{run}", kafka_reference.bootstrap, f"ottla-{run}", ottla.bootstrap, topics=topic, groups="none",
        **{f"ottla-{run}.exactly.once.source.support": "enabled", "dedicated.mode.enable.internal.rest": "true",
           "listeners": "http://127.0.0.1:0",
           # A transaction every 2 s instead of one per poll: the kill is to land inside one.
           f"kafka-{run}->ottla-{run}.transaction.boundary": "interval",
           f"kafka-{run}->ottla-{run}.transaction.boundary.interval.ms": "2000"})
    partitions = list(range(PARTITIONS))

    def start() -> MirrorMaker:
        mm = MirrorMaker(str(tmp_path), properties).start()
        mirror_makers.append(mm)
        return mm

    def open_transaction(mm: MirrorMaker, quiet_since: list[float]) -> list[int]:
        """The partitions where the task's transaction is open; a task that has copied all
        it was given (a fast copy, or a restarted task with little left) opens none again,
        so after 10 s without one it is given more records to copy. Only when the kill
        lands depends on it: what is asserted below is the copy, whatever was produced."""
        mm.check_alive()
        found = topic_state(ottla.bootstrap, topic) is not None and open_transaction_on(
            ottla.bootstrap, topic, partitions)
        if not found and time.monotonic() - quiet_since[0] > 10:
            feed(30_000)
            quiet_since[0] = time.monotonic()
        return found or []

    mm = start()
    for _attempt in range(5):
        quiet_since = [time.monotonic()]
        wait_until(lambda mm=mm, quiet_since=quiet_since: open_transaction(mm, quiet_since),
                   COPY_TIMEOUT, "an open transaction of MirrorMaker 2's task on Ottla", mm.log_tail)
        mm.kill()
        left_open = open_transaction_on(ottla.bootstrap, topic, partitions)
        mm = start()
        if left_open:
            break
    else:
        raise AssertionError("every kill came after the task's transaction had ended")
    records = produced[0]
    source = values_by_partition(kafka_reference.bootstrap, topic)
    wait_until(lambda: mm.check_alive() or sum(map(len, values_by_partition(ottla.bootstrap, topic).values()))
               >= records, COPY_TIMEOUT, "the whole copy", mm.log_tail)
    copied = values_by_partition(ottla.bootstrap, topic)
    for p in partitions:
        assert copied[p] == source[p], (p, len(copied[p]), len(source[p]), len(copied[p]) - len(set(copied[p])))
    assert not open_transaction_on(ottla.bootstrap, topic, partitions), "a transaction was left open"
    uncommitted = read_all(ottla.bootstrap, topic, partitions, isolation="read_uncommitted", timeout=120)
    assert sum(map(len, uncommitted.values())) > records, "no aborted records: the kill missed the transaction"
