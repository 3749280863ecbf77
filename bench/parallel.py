"""Parallel producers: PRODUCERS idempotent producers, each in a process of its own, write
together to a topic of PARTITIONS partitions.

Each producer is set up (connected, producer id obtained, the topic's metadata known)
before the clock starts; then all are released at once, and the time runs from the
release to the moment the last one's flush() returns. time.monotonic() is the system's
CLOCK_MONOTONIC on Linux, so the processes' readings are comparable.
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import time
from dataclasses import replace

from .workloads import BenchProducer, Job, Measurement, create_topic, remaining

PRODUCERS = 16
PARTITIONS = 64


def _producer_process(job: Job, index: int, events: multiprocessing.Queue, go: multiprocessing.synchronize.Event
                      ) -> None:
    """Puts ("ready", index), then ("done", monotonic time) or ("failed", reason)."""
    try:
        producer = BenchProducer(job)
        producer.warm_up()
        producer.producer.list_topics(job.topic, timeout=remaining(job))  # the partitioner needs the metadata
        events.put(("ready", index))
        if not go.wait(remaining(job)):
            raise TimeoutError("never released")
        # No partition given: the client's default partitioner spreads keyless messages
        # (sticky: one partition per batch, then the next), as an application's would.
        producer.produce_many(job.topic, itertools.repeat(bytes(job.size), job.messages))
        producer.flush()
        events.put(("done", time.monotonic()))
    except Exception as exc:
        events.put(("failed", f"producer {index}: {type(exc).__name__}: {exc}"))


def _next_event(events: multiprocessing.Queue, job: Job) -> tuple[str, object]:
    try:
        kind, value = events.get(timeout=max(0.1, remaining(job)))
    except queue.Empty:
        raise TimeoutError("a producer process did not report in time") from None
    if kind == "failed":
        raise RuntimeError(value)
    return kind, value


def parallel_produce(job: Job) -> Measurement:
    """`messages` values of `size` bytes in all, split evenly over PRODUCERS processes."""
    partitions = create_topic(job, job.topic, PARTITIONS)
    share = replace(job, messages=job.messages // PRODUCERS)
    # spawn: a fresh interpreter per producer, not a fork of this one (librdkafka's
    # threads do not survive a fork).
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    go = context.Event()
    processes = [context.Process(target=_producer_process, args=(share, i, events, go), daemon=True)
                 for i in range(PRODUCERS)]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            _next_event(events, job)
        start = time.monotonic()
        go.set()
        end = max(float(_next_event(events, job)[1]) for _ in processes)  # type: ignore[arg-type]
    finally:
        for process in processes:
            process.join(timeout=max(1.0, remaining(job)))
            if process.is_alive():
                process.kill()
    invalid = None if partitions == PARTITIONS else f"the topic has {partitions} partitions, not {PARTITIONS}"
    return Measurement(share.messages * PRODUCERS, end - start, invalid=invalid)
