"""Consumer groups with confluent-kafka: rebalances, session expiry, committed offsets,
and the exactly-once read-process-write loop."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition

from tests.clients import create_topic, idempotent_producer, produce_all, read_all, transactional_producer
from tests.wire import WireClient, request

GROUP_SETTINGS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "log_level": 3}


def _consumer(broker, group: str, **extra: object) -> Consumer:
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, **GROUP_SETTINGS}
    config.update(extra)
    return Consumer(config)


def _poll_until(consumers: list[Consumer], condition, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.05)
        if condition():
            return
    raise AssertionError("condition not reached; assignments: "
                         f"{[sorted(tp.partition for tp in c.assignment()) for c in consumers]}")


def _assigned(consumers: list[Consumer]) -> list[list[int]]:
    return [sorted(tp.partition for tp in c.assignment()) for c in consumers]


def test_three_consumers_share_six_partitions_and_a_fourth_triggers_a_rebalance(fresh_broker, topic_name):
    broker = fresh_broker(group_initial_rebalance_delay_ms=500)
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    consumers = [_consumer(broker, group) for _ in range(3)]
    for c in consumers:
        c.subscribe([topic_name])
    _poll_until(consumers, lambda: [len(a) for a in _assigned(consumers)] == [2, 2, 2])
    assert sorted(p for a in _assigned(consumers) for p in a) == list(range(6))

    fourth = _consumer(broker, group)
    fourth.subscribe([topic_name])
    everyone = consumers + [fourth]
    _poll_until(everyone, lambda: sorted(len(a) for a in _assigned(everyone)) == [1, 1, 2, 2])
    assert sorted(p for a in _assigned(everyone) for p in a) == list(range(6))

    with WireClient(broker.bootstrap) as client:
        described = client.call(request(15, 5, groups=[group], include_authorized_operations=False))
        assert described.groups[0].group_state == "Stable"
        assert len(described.groups[0].members) == 4
        listed = client.call(request(16, 4, states_filter=["Stable"]))
        assert group in [g.group_id for g in listed.groups]
    for c in everyone:
        c.close()


_VANISHING_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500, "log_level": 3})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_member_that_vanishes_is_evicted_after_its_session_timeout(fresh_broker, topic_name):
    broker = fresh_broker(group_initial_rebalance_delay_ms=0)
    create_topic(broker.bootstrap, topic_name, 4)
    group = f"g-{topic_name}"
    stays = _consumer(broker, group)
    stays.subscribe([topic_name])
    _poll_until([stays], lambda: len(stays.assignment()) == 4)

    vanisher = subprocess.Popen([sys.executable, "-c", _VANISHING_MEMBER, broker.bootstrap, group, topic_name],
                                stdout=subprocess.PIPE, text=True)
    try:
        _poll_until([stays], lambda: len(stays.assignment()) == 2)
        os.kill(vanisher.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout can tell
        vanisher.wait(10)
        killed_at = time.monotonic()
        _poll_until([stays], lambda: len(stays.assignment()) == 4, timeout=30)
        assert time.monotonic() - killed_at >= 4, "moved before the session timeout could have expired"
        assert "group member session expired" in broker.log()
    finally:
        vanisher.kill()
        stays.close()


def test_cooperative_sticky_rebalances_incrementally(fresh_broker, topic_name):
    broker = fresh_broker(group_initial_rebalance_delay_ms=0)
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    revoked: list[list[int]] = []
    first = _consumer(broker, group, **{"partition.assignment.strategy": "cooperative-sticky"})
    first.subscribe([topic_name], on_revoke=lambda c, parts: revoked.append(sorted(p.partition for p in parts)))
    _poll_until([first], lambda: len(first.assignment()) == 6)
    before = {tp.partition for tp in first.assignment()}

    second = _consumer(broker, group, **{"partition.assignment.strategy": "cooperative-sticky"})
    second.subscribe([topic_name])
    _poll_until([first, second], lambda: [len(a) for a in _assigned([first, second])] == [3, 3])

    kept = {tp.partition for tp in first.assignment()}
    assert kept < before
    # Incremental: the first consumer gave up only the partitions that moved, never all six.
    assert revoked and all(len(r) < 6 for r in revoked)
    assert sorted(p for r in revoked for p in r) == sorted(before - kept)
    first.close()
    second.close()


def test_committed_offsets_survive_a_restart_and_the_group_resumes_after_them(fresh_broker, topic_name):
    broker = fresh_broker(group_initial_rebalance_delay_ms=0)
    create_topic(broker.bootstrap, topic_name, 2)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, i % 2, None, b"m%d" % i) for i in range(100)])
    group = f"g-{topic_name}"
    consumer = _consumer(broker, group)
    consumer.subscribe([topic_name])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 60 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            seen.append(message)
            if len(seen) == 60:
                consumer.commit(message=None, asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=10)}
    consumer.close()
    assert sum(committed.values()) == 60

    broker.kill()
    broker.start()

    resumed = _consumer(broker, group)
    resumed.subscribe([topic_name])
    rest = []
    deadline = time.monotonic() + 30
    while len(rest) < 40 and time.monotonic() < deadline:
        message = resumed.poll(0.2)
        if message is not None and not message.error():
            rest.append(message)
    resumed.close()
    for partition in (0, 1):
        offsets = [m.offset() for m in rest if m.partition() == partition]
        assert offsets == list(range(committed[partition], 50))
    assert {m.value() for m in seen} | {m.value() for m in rest} == {b"m%d" % i for i in range(100)}


def test_an_aborted_transactional_offset_commit_leaves_the_committed_offset_unchanged(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"x") for _ in range(10)])
    group = f"g-{topic_name}"
    consumer = _consumer(broker, group)
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
    producer = transactional_producer(broker.bootstrap, f"offsets-{topic_name}")

    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, 8)], consumer.consumer_group_metadata(), 30)
    with WireClient(broker.bootstrap) as client:
        fetched = client.call(request(9, 7, group_id=group, require_stable=True,
                                            topics=[{"name": topic_name, "partition_indexes": [0]}]))
        assert fetched.topics[0].partitions[0].error_code == 88  # UNSTABLE_OFFSET_COMMIT while pending
    producer.abort_transaction(30)
    assert consumer.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == 3

    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, 9)], consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    assert consumer.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == 9
    consumer.close()


def test_read_process_write_is_exactly_once_across_processor_kills(fresh_broker, tmp_path):
    broker = fresh_broker(group_initial_rebalance_delay_ms=0)
    source, sink, group = "eos-input", "eos-output", "eos-processor"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, sink, 3)
    count = 10_000
    produce_all(idempotent_producer(broker.bootstrap),
                [(source, i % 3, b"%d" % i, b"%d" % i) for i in range(count)])

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.eos_processor", broker.bootstrap, source, sink, group, "eos-txn"],
            stdout=subprocess.PIPE, stderr=open(tmp_path / "processor.log", "a"), text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

    rng = random.Random(7)
    progress = []
    for _ in range(2):
        processor = start()
        # Kill once it has committed something: mid-stream, mid-transaction or not.
        committed = 0
        kill_after = rng.randint(1000, 3000)
        while committed < kill_after:
            line = processor.stdout.readline()
            assert line, f"the processor stopped by itself: exit {processor.wait(30)}, progress {progress}, {committed}"
            committed += int(line.split()[1])
        time.sleep(rng.uniform(0, 0.3))
        processor.kill()  # SIGKILL
        processor.wait(10)
        progress.append(committed)
    processor = start()
    processor.wait(120)
    assert processor.returncode == 0
    assert all(0 < p < count for p in progress), progress

    got = read_all(broker.bootstrap, sink, [0, 1, 2], isolation="read_committed")
    values = [v for vs in got.values() for v in vs]
    # Lists, not sets: a duplicate would show.
    assert sorted(values) == sorted(b"processed:%d" % i for i in range(count)), \
        f"{len(values)} results, {len(set(values))} distinct"
