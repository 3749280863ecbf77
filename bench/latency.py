"""Produce latency at a fixed rate: RATE messages a second with linger.ms=0, so that each
message leaves as soon as it is produced and its latency is the broker's answer time
plus the client's, not a batching delay. The figures are the 50th and 99th percentiles.

Each message's latency is librdkafka's own (Message.latency(): from produce() to the
acknowledgement's arrival in the client's broker thread), which does not depend on when
the Python loop gets round to serving the delivery report.
"""

from __future__ import annotations

import statistics
import time

from confluent_kafka import KafkaError, KafkaException, Message

from .workloads import BenchProducer, Job, Measurement, create_topic

RATE = 5_000  # messages per second


def produce_latency(job: Job) -> Measurement:
    """`messages` values of `size` bytes to partition 0 of a new topic, message i sent at
    start + i / RATE."""
    create_topic(job, job.topic)
    latencies: list[float] = []
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, message: Message) -> None:
        if err is not None:
            failures.append(err)
        else:
            latencies.append(message.latency())

    producer = BenchProducer(job, on_delivery=on_delivery, **{"linger.ms": 0})
    producer.warm_up()
    latencies.clear()  # the warm-up message's
    payload = bytes(job.size)
    p = producer.producer
    start = time.monotonic()
    for i in range(job.messages):
        due = start + i / RATE
        while (wait := due - time.monotonic()) > 0:
            p.poll(wait)  # serves delivery reports meanwhile; returns early if it served one
        producer.produce_many(job.topic, (payload,), partition=0)
    producer.flush()
    seconds = time.monotonic() - start
    if failures:
        raise KafkaException(failures[0])
    if len(latencies) != job.messages:
        raise RuntimeError(f"{len(latencies)} delivery reports for {job.messages} messages")
    # Falling behind the schedule means the broker could not keep up with RATE messages a
    # second: the percentiles would then not be those at RATE.
    achieved = job.messages / seconds
    if achieved < 0.95 * RATE:
        raise RuntimeError(f"reached only {achieved:,.0f} of {RATE:,} messages a second")
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return Measurement(job.messages, seconds, p50_ms=cuts[49] * 1000, p99_ms=cuts[98] * 1000)
