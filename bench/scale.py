"""Scale, Ottla only (the peers keep their data in memory, or lose it on a restart):
start-up time with PARTITIONS partitions holding a lot of data, after a clean shutdown
and after a kill -9, and the broker's memory (VmRSS) after writing it all and after a
consumer has read it all.

The run, on a broker with its data directory in a temporary directory:

1. With half the data: write it, stop the broker with SIGTERM, start it (timed: clean
   start), write a tail of TAIL_BYTES, kill -9, start it (timed: recovery).
2. The same on a fresh directory with all the data, plus VmRSS after the writing and
   after one consumer has read every partition from offset 0 to the end.

A start is timed from the process's start to its "Ottla is ready" line. The two
recoveries follow a clean shutdown at the data size and an equal tail written since, so
a broker whose recovery depends on the tail (what was written since the last flush and
checkpoint) recovers in about the same time at both sizes; one that checks all its
data takes twice as long with twice the data.

The data: values of VALUE_SIZE bytes, written by WRITERS producer processes, each
owning an equal share of the partitions and writing CHUNK_BYTES to one partition before
moving to the next, so that the client fills batches of about a megabyte (librdkafka's
batch.size): big batches write the data fast. The data is written with the same client
settings as the other workloads (idempotence, acks=all, linger.ms=5).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ottla.testing import BrokerProcess

from .peers import resident
from .workloads import BenchProducer, ClientErrors, Job, create_topic

PARTITIONS = 1_000
VALUE_SIZE = 1024
WRITERS = 4
CHUNK_BYTES = 1 << 20
TAIL_BYTES = 64 << 20
GIB = 1 << 30
MIB = 1 << 20
START_TIMEOUT = 900.0  # a slow recovery is a figure to report, not a failure, up to this
CLIENT_TIMEOUT = 1800.0  # for one writing or reading pass
PROGRESS_EVERY = 10.0  # seconds between progress lines


@dataclass
class DataSize:
    """What was measured at one data size (the memory figures only at the full size)."""
    data_bytes: int
    write_seconds: float = 0.0
    clean_stop_seconds: float = 0.0
    clean_start_seconds: float = 0.0
    recovery_start_seconds: float = 0.0
    read_seconds: float | None = None
    rss_after_write: int | None = None  # bytes
    rss_after_read: int | None = None


@dataclass
class ScaleResult:
    half: DataSize
    full: DataSize


def free_disk_problem(data_bytes: int) -> str | None:
    """Why the scale run cannot run here, if there is not room for twice the data."""
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < 2 * data_bytes:
        return (f"{free / GIB:.1f} GiB free in {tempfile.gettempdir()}, {2 * data_bytes / GIB:.1f} GiB needed "
                f"(twice the data); --scale-gib sets a smaller size")
    return None


# --- client processes ------------------------------------------------------------------


def _writer_process(bootstrap: str, topic: str, partitions: list[int], per_partition: int,
                    events: multiprocessing.Queue) -> None:
    """Write `per_partition` bytes to each of `partitions`, CHUNK_BYTES at a time; puts
    ("progress", bytes) after each pass over the partitions, then ("done", 0), or
    ("failed", reason)."""
    try:
        job = Job(bootstrap, topic, 0, VALUE_SIZE, time.monotonic() + CLIENT_TIMEOUT)
        producer = BenchProducer(job)
        value = bytes(VALUE_SIZE)
        messages = per_partition // VALUE_SIZE
        chunk = max(1, CHUNK_BYTES // VALUE_SIZE)
        for first in range(0, messages, chunk):
            count = min(chunk, messages - first)
            for partition in partitions:
                producer.produce_many(topic, itertools.repeat(value, count), partition=partition)
            events.put(("progress", count * VALUE_SIZE * len(partitions)))
        producer.flush()
        events.put(("done", 0))
    except Exception as exc:
        events.put(("failed", f"writer: {type(exc).__name__}: {exc}"))


def _reader_process(bootstrap: str, topic: str, expected: int, events: multiprocessing.Queue) -> None:
    """Read every partition from offset 0 until `expected` messages are in; puts
    ("progress", bytes) every 100,000 messages, then ("done", 0), or ("failed", reason)."""
    try:
        deadline = time.monotonic() + CLIENT_TIMEOUT
        errors = ClientErrors()
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "fetch.queue.backoff.ms": 10, "error_cb": errors})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        count = reported = 0
        while count < expected:
            errors.check(deadline, f"reading ({count} of {expected} messages read)")
            for message in consumer.consume(num_messages=min(10_000, expected - count), timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                count += 1
            if count - reported >= 100_000:
                events.put(("progress", (count - reported) * VALUE_SIZE))
                reported = count
        consumer.close()
        events.put(("progress", (count - reported) * VALUE_SIZE))
        events.put(("done", 0))
    except Exception as exc:
        events.put(("failed", f"reader: {type(exc).__name__}: {exc}"))


def _run_clients(targets: list[tuple[Callable[..., None], tuple[Any, ...]]], total: int, what: str,
                 say: Callable[[str], None]) -> float:
    """Run client processes (spawned: librdkafka's threads do not survive a fork) until
    each reports done, printing progress; returns the seconds they took."""
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    processes = [context.Process(target=target, args=(*args, events), daemon=True) for target, args in targets]
    start = last_report = time.monotonic()
    for process in processes:
        process.start()
    done = moved = 0
    try:
        while done < len(processes):
            try:
                kind, value = events.get(timeout=PROGRESS_EVERY)
            except queue.Empty:
                kind, value = "", 0
            if kind == "failed":
                raise RuntimeError(value)
            done += kind == "done"
            moved += value if kind == "progress" else 0
            now = time.monotonic()
            if now - last_report >= PROGRESS_EVERY:
                say(f"{what}: {moved / GIB:.2f} of {total / GIB:.2f} GiB, {moved / MIB / (now - start):.0f} MiB/s")
                last_report = now
            if now - start > CLIENT_TIMEOUT:
                raise TimeoutError(f"{what} took over {CLIENT_TIMEOUT:.0f} s")
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return time.monotonic() - start


def _write(broker: BrokerProcess, topic: str, data_bytes: int, say: Callable[[str], None], what: str) -> float:
    per_partition = data_bytes // PARTITIONS
    shares = [list(range(PARTITIONS))[i::WRITERS] for i in range(WRITERS)]
    targets = [(_writer_process, (broker.bootstrap, topic, share, per_partition)) for share in shares if share]
    return _run_clients(targets, per_partition // VALUE_SIZE * VALUE_SIZE * PARTITIONS, what, say)


def _timed_start(broker: BrokerProcess) -> float:
    started = time.monotonic()
    broker.start(timeout=START_TIMEOUT)  # returns when the broker has printed its ready line
    return time.monotonic() - started


def _timed_stop(broker: BrokerProcess) -> float:
    started = time.monotonic()
    code = broker.stop(timeout=START_TIMEOUT)
    if code != 0:
        raise RuntimeError(f"the broker exited with code {code} on SIGTERM")
    return time.monotonic() - started


def _restarts(broker: BrokerProcess, topic: str, size: DataSize, say: Callable[[str], None], label: str) -> None:
    """Clean stop and timed start; then a tail, kill -9 and timed start."""
    size.clean_stop_seconds = _timed_stop(broker)
    size.clean_start_seconds = _timed_start(broker)
    say(f"{label}: clean stop {size.clean_stop_seconds:.2f} s, start after it {size.clean_start_seconds:.2f} s")
    _write(broker, topic, TAIL_BYTES, say, f"{label}: writing a {TAIL_BYTES // MIB} MiB tail")
    broker.kill()
    size.recovery_start_seconds = _timed_start(broker)
    say(f"{label}: start after kill -9 {size.recovery_start_seconds:.2f} s")


def _measure(data_bytes: int, with_memory: bool, say: Callable[[str], None], label: str) -> DataSize:
    size = DataSize(data_bytes)
    directory = tempfile.mkdtemp(prefix="bench-scale-")
    broker = BrokerProcess(os.path.join(directory, "data"), log_path=os.path.join(directory, "broker.log"))
    try:
        try:
            _timed_start(broker)
            topic = "scale"
            create_topic(Job(broker.bootstrap, topic, 0, VALUE_SIZE, time.monotonic() + 120), topic, PARTITIONS)
            size.write_seconds = _write(broker, topic, data_bytes, say, f"{label}: writing")
            say(f"{label}: written in {size.write_seconds:.1f} s "
                f"({data_bytes / MIB / size.write_seconds:.0f} MiB/s)")
            if with_memory:
                assert broker.process is not None
                size.rss_after_write = resident(broker.process.pid)
                expected = data_bytes // PARTITIONS // VALUE_SIZE * PARTITIONS
                size.read_seconds = _run_clients([(_reader_process, (broker.bootstrap, topic, expected))],
                                                 expected * VALUE_SIZE, f"{label}: reading", say)
                size.rss_after_read = resident(broker.process.pid)
                say(f"{label}: read in {size.read_seconds:.1f} s; broker RSS after writing "
                    f"{size.rss_after_write / MIB:.0f} MiB, after reading {size.rss_after_read / MIB:.0f} MiB")
            _restarts(broker, topic, size, say, label)
        except Exception as exc:
            raise RuntimeError(f"{exc}\nbroker log, last lines:\n{''.join(broker.log().splitlines(True)[-20:])}") \
                from exc
    finally:
        broker.kill()
        shutil.rmtree(directory, ignore_errors=True)
    return size


def run_scale(data_bytes: int, say: Callable[[str], None]) -> ScaleResult:
    """Both data sizes, half first (its directory is gone before the full one is written)."""
    half = _measure(data_bytes // 2, False, say, f"scale {data_bytes / 2 / GIB:.2f} GiB")
    return ScaleResult(half, _measure(data_bytes, True, say, f"scale {data_bytes / GIB:.2f} GiB"))
