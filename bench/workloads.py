"""The single-client throughput workloads, and what every workload shares: the job it is
given, the measurement it returns, the producer settings and the client error handling.

Every workload runs in a client process of its own (see bench.client) and uses the same
confluent-kafka settings against every broker: idempotence on, acks=all, linger.ms=5.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# read-committed-consume: the first byte of each value says what the consumer must make of it.
COMMITTED, LAST_COMMITTED, ABORTED = b"c", b"e", b"a"
TXN_SIZE = 1_000  # messages per transaction in the read_committed topic
COMMITTED_PER_ABORTED = 2  # committed transactions between two aborted ones in that topic
PARTITIONER = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the client's partitioner chooses


@dataclass(frozen=True)
class Job:
    bootstrap: str
    topic: str
    messages: int
    size: int
    deadline: float  # time.monotonic() by which the workload must be done


@dataclass(frozen=True)
class Measurement:
    messages: int
    seconds: float
    # Latency workloads: percentiles of the produce-to-acknowledgement time.
    p50_ms: float | None = None
    p99_ms: float | None = None
    # Set when the broker did not honour the workload's contract (it returned aborted
    # records, or dropped offsets): the figure then measures something else, and is shown
    # but compared with nothing.
    invalid: str | None = None

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


class ClientErrors:
    """librdkafka's error_cb: keeps the errors it reports, which are mostly transient
    (a connection refused while retrying), to explain a timeout, and makes a fatal one
    (the idempotent producer's state is lost) stop the workload."""

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        self.errors.append(error)

    def check(self, deadline: float, what: str) -> None:
        fatal = [e for e in self.errors if e.fatal()]
        if fatal:
            raise KafkaException(fatal[0])
        if time.monotonic() > deadline:
            recent = "; ".join(str(e) for e in self.errors[-3:]) or "no client errors"
            raise TimeoutError(f"{what} timed out ({recent})")


def remaining(job: Job) -> float:
    return max(0.0, job.deadline - time.monotonic())


def create_topic(job: Job, name: str, partitions: int = 1, exist_ok: bool = False) -> int:
    """Create a topic; returns how many partitions it has.

    The librdkafka mock cluster serves no CreateTopics (its metadata names no controller
    among its brokers): there a Metadata request for the topic creates it, with as many
    partitions as the mock gives every topic (4), and the caller decides whether that
    will do."""
    admin = AdminClient({"bootstrap.servers": job.bootstrap})
    metadata = admin.list_topics(timeout=max(1.0, remaining(job)))
    if metadata.controller_id not in metadata.brokers:
        return len(admin.list_topics(name, timeout=max(1.0, remaining(job))).topics[name].partitions)
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        try:
            future.result(timeout=max(1.0, remaining(job)))
        except KafkaException as exc:
            if not (exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
    return partitions


class BenchProducer:
    """A confluent-kafka Producer with the benchmark's settings, the errors it reports,
    and produce() that waits while the local queue is full.

    Delivery reports come only for failures unless `on_delivery` is given: a Python
    callback per message would time the client's interpreter, not the broker. flush()
    returning 0 with no failure reported means every message was acknowledged."""

    def __init__(self, job: Job, on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
                 **settings: Any) -> None:
        self.job = job
        self.errors = ClientErrors()
        self.failed: list[KafkaError] = []

        def failures_only(err: KafkaError | None, _msg: Message) -> None:
            self.failed.append(err)  # type: ignore[arg-type]  # only failures are reported

        self.producer = Producer({
            "bootstrap.servers": job.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "delivery.report.only.error": on_delivery is None,
            "on_delivery": on_delivery or failures_only,
            "error_cb": self.errors,
            **settings,
        })

    def produce_many(self, topic: str, values: Iterable[bytes], partition: int = PARTITIONER) -> None:
        """produce() each value, waiting while the local queue is full. The loop is kept
        as tight as it can be: at the client's ceiling, every call in it shows in the figures."""
        produce = self.producer.produce
        for value in values:
            while True:
                try:
                    produce(topic, value, partition=partition)
                    break
                except BufferError:  # the local queue is full until the broker acknowledges more
                    self.producer.poll(0.005)  # short: with no delivery reports to serve it waits it out
                    self.errors.check(self.job.deadline, "produce")

    def flush(self) -> None:
        """flush(), and raise unless every message produced so far was acknowledged."""
        left = self.producer.flush(remaining(self.job))
        if self.failed:
            raise KafkaException(self.failed[0])
        if left:
            self.errors.check(self.job.deadline, f"flush ({left} messages undelivered)")
            raise RuntimeError(f"flush returned with {left} messages undelivered")

    def warm_up(self) -> None:
        """One message to a side topic, flushed, before any timer starts. A new idempotent
        producer sends nothing until it has a producer id, and librdkafka asks for one on
        an internal timer of 500 ms that the first connection usually misses: without the
        warm-up, that wait (0.5 s, at times 1 s, against any broker) would be most of what
        is timed."""
        warmup = f"{self.job.topic}.warmup"
        create_topic(self.job, warmup, exist_ok=True)  # parallel producers share one
        self.produce_many(warmup, [b"warm-up"], partition=0)
        self.flush()


def idempotent_produce(job: Job) -> Measurement:
    """`messages` values of `size` bytes to partition 0 of a new one-partition topic, timed
    from the first produce() to the return of flush()."""
    create_topic(job, job.topic)
    producer = BenchProducer(job)
    producer.warm_up()
    payload = bytes(job.size)  # compression is off, so the content does not matter
    start = time.perf_counter()
    producer.produce_many(job.topic, itertools.repeat(payload, job.messages), partition=0)
    producer.flush()
    return Measurement(job.messages, time.perf_counter() - start)


def _transactions(producer: BenchProducer, job: Job, transactions: list[tuple[list[bytes], bool]]) -> None:
    """One transaction per (values, commit): the values to partition 0, then commit or abort."""
    p = producer.producer
    for values, commit in transactions:
        p.begin_transaction()
        producer.produce_many(job.topic, values, partition=0)
        if commit:
            p.commit_transaction(remaining(job))  # flushes, then EndTxn(commit)
        else:
            # Flushed first: the aborted records are then in the log for readers to skip
            # (abort_transaction() alone would drop those still queued in the client).
            producer.flush()
            p.abort_transaction(remaining(job))
        if producer.failed:
            raise KafkaException(producer.failed[0])


def _transactional_producer(job: Job) -> BenchProducer:
    producer = BenchProducer(job, **{"transactional.id": f"bench-{uuid.uuid4().hex}"})
    producer.producer.init_transactions(remaining(job))
    # Warm-up in a transaction of its own: the first AddPartitionsToTxn and EndTxn also
    # find the transaction coordinator, which is not what is measured.
    producer.producer.begin_transaction()
    producer.warm_up()
    producer.producer.commit_transaction(remaining(job))
    return producer


def transactional_produce(per_transaction: int) -> Callable[[Job], Measurement]:
    def run(job: Job) -> Measurement:
        """`messages` values of `size` bytes to partition 0 of a new topic in transactions of
        `per_transaction` messages, each committed; timed from the first begin_transaction()
        to the return of the last commit_transaction()."""
        create_topic(job, job.topic)
        producer = _transactional_producer(job)
        payload = bytes(job.size)
        plan = [([payload] * min(per_transaction, job.messages - first), True)
                for first in range(0, job.messages, per_transaction)]
        start = time.perf_counter()
        _transactions(producer, job, plan)
        return Measurement(job.messages, time.perf_counter() - start)

    return run


def _consumer(job: Job, errors: ClientErrors, **settings: Any) -> Consumer:
    return Consumer({
        "bootstrap.servers": job.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        # A broker that no longer has offset 0 (the librdkafka mock cluster drops the
        # oldest records of a large partition) is read from its first offset, and the
        # workload reports the figure as not valid, instead of jumping to the end and
        # waiting there until the deadline.
        "auto.offset.reset": "earliest",
        # When the client's queue of fetched messages is over queued.min.messages (100,000)
        # because the broker answers faster than the loop drains it, librdkafka stops
        # fetching for fetch.queue.backoff.ms, by default a whole second. A broker that
        # serves fast then measures slower than one that does not, and the figures jump
        # between two modes from run to run; 10 ms keeps the pause out of the timing.
        "fetch.queue.backoff.ms": 10,
        "error_cb": errors,
        **settings,
    })


def consume_all(job: Job) -> Measurement:
    """Read what idempotent-produce wrote (`messages` records at offsets 0 to messages - 1
    of partition 0) with assign() (no group membership) and no commits, timed from the
    first consume() call to the arrival of the last offset.

    Before the timer starts, the partition's watermarks are asked for: that connects the
    client to the partition's leader. The high watermark is not checked: tansu answers
    ListOffsets(latest) with the last batch's base offset, not the log end offset."""
    errors = ClientErrors()
    consumer = _consumer(job, errors)
    last = job.messages - 1
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(job.topic, 0), timeout=remaining(job))
        consumer.assign([TopicPartition(job.topic, 0, 0)])
        count = 0
        first_offset = offset = -1
        start = time.perf_counter()
        while offset != last:
            errors.check(job.deadline, f"consume ({count} of {job.messages} messages read)")
            # Ask for no more than are left: consume() waits for num_messages or the timeout.
            batch = consumer.consume(num_messages=min(10_000, last - offset), timeout=0.5)
            if batch and first_offset < 0:
                first_offset = batch[0].offset()
            for message in batch:
                if message.error():
                    raise KafkaException(message.error())
                offset = message.offset()
                count += 1
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    invalid = None
    if (first_offset, count) != (0, job.messages):
        invalid = (f"read {count:,} records from offset {first_offset:,} (low watermark {low:,}), expected "
                   f"{job.messages:,} from offset 0")
    return Measurement(count, seconds, invalid=invalid)


def read_committed_consume(job: Job) -> Measurement:
    """Read a partition holding committed and aborted transactions with
    isolation.level=read_committed, timed from the first consume() call to the arrival of
    the last committed record; the rate counts committed records.

    Before the timer starts, one transactional producer writes the topic: `messages`
    committed records in transactions of TXN_SIZE, with an aborted transaction of
    TXN_SIZE after every COMMITTED_PER_ABORTED committed ones, and the last transaction
    committed. Each value's first byte says which kind of transaction it belongs to, so
    the consumer can tell whether the broker hid the aborted records (tansu and the mock
    cluster do not) and delivered every committed one."""
    create_topic(job, job.topic)
    producer = _transactional_producer(job)
    committed_value, aborted_value = COMMITTED + bytes(job.size - 1), ABORTED + bytes(job.size - 1)
    plan: list[tuple[list[bytes], bool]] = []
    for i, first in enumerate(range(0, job.messages, TXN_SIZE)):
        if i and i % COMMITTED_PER_ABORTED == 0:
            plan.append(([aborted_value] * TXN_SIZE, False))
        plan.append(([committed_value] * min(TXN_SIZE, job.messages - first), True))
    plan[-1][0][-1] = LAST_COMMITTED + bytes(job.size - 1)  # tells the consumer it is done
    _transactions(producer, job, plan)

    errors = ClientErrors()
    consumer = _consumer(job, errors, **{"isolation.level": "read_committed"})
    committed = aborted = 0
    try:
        consumer.get_watermark_offsets(TopicPartition(job.topic, 0), timeout=remaining(job))
        consumer.assign([TopicPartition(job.topic, 0, 0)])
        done = False
        start = time.perf_counter()
        while not done:
            errors.check(job.deadline, f"consume ({committed} of {job.messages} committed records read)")
            # As many as are left if the broker hides the aborted records; one that does not
            # waits out the timeout at the end, but its figure is not valid anyway.
            for message in consumer.consume(num_messages=min(10_000, job.messages - committed), timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                kind = message.value()[:1]
                if kind == ABORTED:
                    aborted += 1
                else:
                    committed += 1
                    done = kind == LAST_COMMITTED
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    problems = []
    if aborted:
        problems.append(f"returned {aborted:,} records of aborted transactions")
    if committed != job.messages:
        problems.append(f"returned {committed:,} of the {job.messages:,} committed records")
    return Measurement(committed, seconds, invalid="; ".join(problems) or None)
