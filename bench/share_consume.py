"""Share consumers (KIP-932): CONSUMERS confluent-kafka ShareConsumers, each in a process
of its own, in one share group on a one-partition topic, together deliver and
acknowledge `messages` records; the rate counts records delivered and acknowledged.

The records are produced first, and the group set to share.auto.offset.reset=earliest.
Then the consumers start, subscribe and poll (implicit acknowledgement: a poll
acknowledges, with the ShareFetch it sends, what the previous poll returned) until
together they have received every record; each then commit_sync()s what it still holds.

The clock starts when the first records reach a consumer, and those records are not
counted: what comes before them is the group's join, which a broker may answer with the
partition only at the heartbeat after it (Kafka does: a heartbeat interval, 5 s by
default, that is not the throughput being measured), and the first ShareFetch's round
trip. It stops when the last commit_sync() returns. (A consumer's first poll cannot be
held back until the others have joined: librdkafka fetches for a share consumer in the
background once it has the partition.)

The workload checks what it measured: every record delivered exactly once (a broker
that delivers a record to two consumers, or twice, or loses one, gets a figure that is
not valid).
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.sharedctypes
import queue
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from .workloads import BenchProducer, Job, Measurement, create_topic, remaining

POLL_SECONDS = 0.05  # short: a consumer with nothing to do sees the end within this
SHARE_GROUP_HEARTBEAT = 76  # the API a broker serving share groups lists in ApiVersions


def _serves_share_groups(bootstrap: str) -> bool:
    """Whether the broker lists ShareGroupHeartbeat in its ApiVersions: a broker that does
    not (noida-db, tansu, the mock) would leave the consumers polling until the workload's
    timeout, minutes of a run for an answer known at once."""
    from tests.wire import WireClient, request

    client = WireClient(bootstrap)
    try:
        answer = client.call(request(18, 3, client_software_name="bench", client_software_version="1"))
    finally:
        client.close()
    return any(key.api_key == SHARE_GROUP_HEARTBEAT for key in answer.api_keys)


@dataclass(frozen=True)
class _Consumed:
    offsets: bytes  # one byte per offset: how many times this consumer received it
    first: float  # time.monotonic() when its first records arrived (inf: none came)
    first_count: int  # how many came then
    done: float  # time.monotonic() when its last commit_sync() returned


def _set_earliest(job: Job, group: str) -> None:
    """share.auto.offset.reset=earliest for the group, as an application sets it."""
    admin = AdminClient({"bootstrap.servers": job.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=max(1.0, remaining(job)))


def _consumer_process(job: Job, group: str, index: int, total: multiprocessing.sharedctypes.Synchronized,
                      events: multiprocessing.Queue) -> None:
    """Puts ("done", _Consumed) or ("failed", reason)."""
    try:
        consumer = ShareConsumer({"bootstrap.servers": job.bootstrap, "group.id": group})
        consumer.subscribe([job.topic])
        try:
            seen = bytearray(job.messages)
            first, first_count = float("inf"), 0
            while total.value < job.messages:
                if time.monotonic() > job.deadline:
                    raise TimeoutError(f"{total.value:,} of {job.messages:,} records received")
                messages = consumer.poll(POLL_SECONDS)
                if not messages:
                    continue
                for message in messages:
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    offset = message.offset()
                    if 0 <= offset < job.messages:
                        seen[offset] = min(seen[offset] + 1, 255)
                if first_count == 0:
                    first, first_count = time.monotonic(), len(messages)
                with total.get_lock():
                    total.value += len(messages)
            consumer.commit_sync()
            events.put(("done", _Consumed(bytes(seen), first, first_count, time.monotonic())))
        finally:
            consumer.close()
    except Exception as exc:
        events.put(("failed", f"share consumer {index}: {type(exc).__name__}: {exc}"))


def share_consume(consumers: int, window: tuple[Callable[[], None], Callable[[], None]] | None = None
                  ) -> Callable[[Job], Measurement]:
    """`window`: (start, stop), called once the records are produced and once every
    consumer has reported (bench.workload_cpu counts the broker's work between them)."""
    def run(job: Job) -> Measurement:
        if not _serves_share_groups(job.bootstrap):
            raise RuntimeError("the broker does not serve share groups (no ShareGroupHeartbeat in its ApiVersions)")
        create_topic(job, job.topic)
        group = f"bench-share-{uuid.uuid4().hex[:8]}"
        _set_earliest(job, group)
        producer = BenchProducer(job)
        producer.produce_many(job.topic, itertools.repeat(bytes(job.size), job.messages), partition=0)
        producer.flush()
        if window is not None:
            window[0]()
        # spawn: a fresh interpreter per consumer (librdkafka's threads do not survive a fork).
        context = multiprocessing.get_context("spawn")
        events = context.Queue()
        total = context.Value("q", 0)
        processes = [context.Process(target=_consumer_process, args=(job, group, i, total, events), daemon=True)
                     for i in range(consumers)]
        for process in processes:
            process.start()
        consumed: list[_Consumed] = []
        try:
            for _ in processes:
                try:
                    kind, value = events.get(timeout=max(0.1, remaining(job)))
                except queue.Empty:
                    raise TimeoutError("a share consumer process did not report in time") from None
                if kind == "failed":
                    raise RuntimeError(value)
                assert isinstance(value, _Consumed)
                consumed.append(value)
            if window is not None:
                window[1]()
        finally:
            for process in processes:
                process.join(timeout=max(1.0, remaining(job)))
                if process.is_alive():
                    process.kill()
        opening = min(consumed, key=lambda c: c.first)
        end = max(c.done for c in consumed)
        times = [sum(column) for column in zip(*(c.offsets for c in consumed), strict=True)]
        missing = times.count(0)
        repeated = len(times) - missing - times.count(1)
        invalid = None
        if missing or repeated:
            invalid = f"{missing:,} records never delivered, {repeated:,} delivered more than once"
        return Measurement(job.messages - opening.first_count, end - opening.first, invalid=invalid)

    return run
