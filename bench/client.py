"""The client workloads, each run in a process of its own:

    python -m bench.client WORKLOAD --bootstrap HOST:PORT --topic T --messages N --size S --timeout SECONDS

prints one JSON line, {"messages": ..., "bytes": ..., "seconds": ...}, and exits 0; on a
failure it prints the reason to stderr and exits 1. The benchmark runs the client in a
subprocess so that the process measuring and managing the brokers does not share a GIL
with it: a client is timed as a user would run it, alone in its process.

A workload is an entry of WORKLOADS. Its `topic` names the data it works on within a
round: a workload that writes a topic creates it, and the workloads after it in the
table that give the same `topic` read what it wrote. A transactional produce would be
added as Workload("transactional-produce", "transactional", produce_transactional) and
a read_committed consume as Workload("read-committed-consume", "transactional", ...).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


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
    bytes: int  # payload bytes: message values only, without keys, headers or batch overhead
    seconds: float


@dataclass(frozen=True)
class Workload:
    name: str
    topic: str
    run: Callable[[Job], Measurement]


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


def _remaining(job: Job) -> float:
    return max(0.0, job.deadline - time.monotonic())


def create_topics(job: Job, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": job.bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1) for name in names])
    for future in futures.values():
        future.result(timeout=max(1.0, _remaining(job)))


def _flush(producer: Producer, errors: ClientErrors, failed: list[KafkaError], job: Job) -> None:
    """flush(), and raise unless every message queued so far was acknowledged."""
    remaining = producer.flush(_remaining(job))
    if failed:
        raise KafkaException(failed[0])
    if remaining:
        errors.check(job.deadline, f"flush ({remaining} messages undelivered)")
        raise RuntimeError(f"flush returned with {remaining} messages undelivered")


def idempotent_produce(job: Job) -> Measurement:
    """`messages` values of `size` bytes to partition 0 of a new one-partition topic, timed
    from the first produce() to the return of flush().

    Before the timer starts, one message goes to a side topic and is flushed. A new
    idempotent producer sends nothing until it has a producer id, and librdkafka asks
    for one on an internal timer of 500 ms that the first connection usually misses:
    without the warm-up, that wait (0.5 s, at times 1 s, against either broker) would be
    most of what is timed."""
    warmup = f"{job.topic}.warmup"
    create_topics(job, job.topic, warmup)
    errors = ClientErrors()
    failed: list[KafkaError] = []
    producer = Producer({
        "bootstrap.servers": job.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        # Delivery reports only for failures: a Python callback per message would time
        # the client's interpreter, not the broker. flush() returning 0 with no failure
        # reported means every message was acknowledged.
        "delivery.report.only.error": True,
        "on_delivery": lambda err, _msg: failed.append(err),
        "error_cb": errors,
    })
    producer.produce(warmup, value=b"warm-up", partition=0)
    _flush(producer, errors, failed, job)
    payload = bytes(job.size)  # compression is off, so the content does not matter
    start = time.perf_counter()
    for _ in range(job.messages):
        while True:
            try:
                producer.produce(job.topic, value=payload, partition=0)
                break
            except BufferError:  # the local queue is full until the broker acknowledges more
                producer.poll(0.005)  # short: with no delivery reports to serve it waits it out
                errors.check(job.deadline, "produce")
    _flush(producer, errors, failed, job)
    return Measurement(job.messages, job.messages * job.size, time.perf_counter() - start)


def consume_all(job: Job) -> Measurement:
    """Read the topic's partition 0 from offset 0 until `messages` messages are in, with
    assign() (no group membership) and no commits, timed from the first consume() call.

    Before the timer starts, the partition's watermarks are asked for: that connects the
    client to the partition's leader, and checks that the topic holds exactly `messages`
    records, at offsets 0 to messages - 1."""
    errors = ClientErrors()
    consumer = Consumer({
        "bootstrap.servers": job.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        # When the client's queue of fetched messages is over queued.min.messages (100,000)
        # because the broker answers faster than the loop drains it, librdkafka stops
        # fetching for fetch.queue.backoff.ms, by default a whole second. A broker that
        # serves fast then measures slower than one that does not, and the figures jump
        # between two modes from run to run; 10 ms keeps the pause out of the timing.
        "fetch.queue.backoff.ms": 10,
        "error_cb": errors,
    })
    try:
        watermarks = consumer.get_watermark_offsets(TopicPartition(job.topic, 0), timeout=_remaining(job))
        if watermarks != (0, job.messages):
            raise RuntimeError(f"the topic's watermarks are {watermarks}, expected (0, {job.messages})")
        consumer.assign([TopicPartition(job.topic, 0, 0)])
        count = nbytes = 0
        last_offset = -1
        start = time.perf_counter()
        while count < job.messages:
            errors.check(job.deadline, f"consume ({count} of {job.messages} messages read)")
            # Ask for no more than are left: consume() waits for num_messages or the timeout.
            for message in consumer.consume(num_messages=min(10000, job.messages - count), timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                nbytes += len(message.value())
                last_offset = message.offset()
                count += 1
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    # Reading `messages` messages and ending on the last offset means none was skipped
    # or read twice.
    if last_offset != job.messages - 1:
        raise RuntimeError(f"read {count} messages ending at offset {last_offset}, expected {job.messages} "
                           f"ending at {job.messages - 1}")
    return Measurement(count, nbytes, seconds)


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("idempotent-produce", "idempotent", idempotent_produce),
    Workload("consume", "idempotent", consume_all),
]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client", description="Run one benchmark workload.")
    parser.add_argument("workload", choices=list(WORKLOADS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--timeout", type=float, required=True, help="seconds the whole workload may take")
    args = parser.parse_args(argv)
    job = Job(args.bootstrap, args.topic, args.messages, args.size, time.monotonic() + args.timeout)
    try:
        result = WORKLOADS[args.workload].run(job)
    except Exception as exc:  # one line for the benchmark to show, not a traceback
        print(f"{args.workload} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"messages": result.messages, "bytes": result.bytes, "seconds": result.seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
