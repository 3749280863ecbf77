"""Share groups (KIP-932) against Ottla with confluent-kafka's ShareConsumer: consumers
sharing one partition, ACCEPT / RELEASE / REJECT, the delivery-count limit,
read_committed, acknowledgements across a kill -9 of the broker, and a consumer killed
mid-batch whose records go to another once their lock expires.

The group settings are set as an application sets them, with IncrementalAlterConfigs
on the GROUP resource (share.auto.offset.reset, share.record.lock.duration.ms...).
Every wait polls until what is awaited arrived; its deadline only bounds a failure.
The share group requests themselves, the group's state and its administration are in
test_share_group_requests.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.clients import create_topic, transactional_producer
from tests.kafka_tools import kafka_tool
from tests.reference.kafka import ReferenceUnavailable, java_command
from tests.wire import WireClient, request

DEADLINE = 90.0  # seconds a wait may take before the test fails


def set_group_configs(bootstrap: str, group: str, **configs: object) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), str(value), incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers: list[ShareConsumer], done, on_message=None) -> None:
    """Poll the consumers in turn until `done()`; `on_message(consumer, message)` sees
    every record (explicit acknowledgements are made there)."""
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, "the share consumers did not get what was awaited"
        for consumer in consumers:
            for message in consumer.poll(0.5) or []:
                assert message.error() is None, message.error()
                if on_message is not None:
                    on_message(consumer, message)


def new_names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"share-{suffix}", f"sg-{suffix}"


def test_two_consumers_sharing_one_partition_get_every_record_once(broker) -> None:
    """Broken once by acquiring without locking the records to the member (records
    went to both consumers)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    values = [b"r%d" % i for i in range(300)]
    produce(broker.bootstrap, topic, values)
    consumers = [share_consumer(broker.bootstrap, group, topic) for _ in range(2)]
    seen: list[tuple[int, bytes]] = []
    poll_until(consumers, lambda: len(seen) >= len(values), lambda c, m: seen.append((id(c), m.value())))
    for consumer in consumers:
        consumer.commit_sync()
    # Both members hold the one partition (Kafka's share assignor shares it). One consumer
    # may have had every record before the other joined: the wait is for the join.
    deadline = time.monotonic() + DEADLINE
    while True:
        with WireClient(broker.bootstrap) as client:
            described = client.call(request(77, 1, group_ids=[group], include_authorized_operations=False)).groups[0]
        if len(described.members) == 2 or time.monotonic() > deadline:
            break
        for consumer in consumers:
            assert not consumer.poll(0.2)  # nothing more to get
    assert described.error_code == 0 and described.group_state == "Stable" and described.assignor_name == "simple"
    assert len(described.members) == 2
    assert all([p.partitions for p in m.assignment.topic_partitions] == [(0,)] for m in described.members)
    for consumer in consumers:
        consumer.close()
    assert sorted(v for _, v in seen) == sorted(values)  # every record, none twice
    # Accepted: a new consumer of the group gets nothing of them, only what comes next.
    produce(broker.bootstrap, topic, [b"after"])
    late = share_consumer(broker.bootstrap, group, topic)
    got: list[bytes] = []
    poll_until([late], lambda: bool(got), lambda c, m: got.append(m.value()))
    late.close()
    assert got == [b"after"]


def test_release_redelivers_counted_reject_never(broker) -> None:
    """Broken once by not counting the delivery of a released record again (its second
    delivery said 1)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"release-me", b"reject-me"])
    consumer = share_consumer(broker.bootstrap, group, topic, explicit=True)
    deliveries: list[tuple[bytes, int]] = []

    def decide(c: ShareConsumer, m) -> None:
        deliveries.append((m.value(), m.delivery_count()))
        if m.value() == b"reject-me":
            c.acknowledge(m, AcknowledgeType.REJECT)
        elif m.delivery_count() == 1:
            c.acknowledge(m, AcknowledgeType.RELEASE)
        else:
            c.acknowledge(m, AcknowledgeType.ACCEPT)

    poll_until([consumer], lambda: (b"release-me", 2) in deliveries, decide)
    consumer.commit_sync()
    produce(broker.bootstrap, topic, [b"last"])
    poll_until([consumer], lambda: any(v == b"last" for v, _ in deliveries), decide)
    consumer.commit_sync()
    consumer.close()
    assert deliveries == [(b"release-me", 1), (b"reject-me", 1), (b"release-me", 2), (b"last", 1)]


def test_the_delivery_count_limit_archives(broker) -> None:
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_delivery_count_limit=2)
    produce(broker.bootstrap, topic, [b"poison"])
    consumer = share_consumer(broker.bootstrap, group, topic, explicit=True)
    deliveries: list[tuple[bytes, int]] = []

    def release(c: ShareConsumer, m) -> None:
        deliveries.append((m.value(), m.delivery_count()))
        c.acknowledge(m, AcknowledgeType.RELEASE)

    poll_until([consumer], lambda: len(deliveries) >= 2, release)
    consumer.commit_sync()
    produce(broker.bootstrap, topic, [b"next"])
    poll_until([consumer], lambda: any(v == b"next" for v, _ in deliveries),
               lambda c, m: (deliveries.append((m.value(), m.delivery_count())), c.acknowledge(m)))
    consumer.commit_sync()
    consumer.close()
    assert deliveries == [(b"poison", 1), (b"poison", 2), (b"next", 1)]


def test_read_committed_skips_aborted_transactions(broker) -> None:
    """Broken once by not marking aborted batches (the aborted values were delivered)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      share_isolation_level="read_committed")
    producer = transactional_producer(broker.bootstrap, f"txn-{group}")
    for outcome, values in (("commit", [b"c1", b"c2"]), ("abort", [b"a1", b"a2"]), ("commit", [b"c3"])):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value)
        producer.flush(30)
        producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    consumer = share_consumer(broker.bootstrap, group, topic)
    seen: list[bytes] = []
    poll_until([consumer], lambda: b"c3" in seen, lambda c, m: seen.append(m.value()))
    consumer.close()
    assert seen == [b"c1", b"c2", b"c3"]


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
bootstrap, group, topic = sys.argv[1:4]
consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([topic])
while True:
    messages = [m for m in consumer.poll(0.5) or [] if m.error() is None]
    if messages:
        print("held", " ".join(str(m.offset()) for m in messages), flush=True)
        time.sleep(3600)  # holds its records, never acknowledges them
"""


def start_holder(bootstrap: str, group: str, topic: str) -> tuple[subprocess.Popen, list[int]]:
    """A share consumer in a process of its own that acquires records and holds them."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, group, topic], stdout=subprocess.PIPE,
                              text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert holder.stdout is not None
    line = holder.stdout.readline()
    assert line.startswith("held "), f"the holding consumer said {line!r}"
    return holder, [int(o) for o in line.split()[1:]]


def test_a_consumer_killed_mid_batch_has_its_records_delivered_to_another(broker) -> None:
    """The killed consumer's records come back after the lock duration (the shortest
    Kafka allows, 15 s), counted. Broken once by never expiring locks: they still came,
    45 s later, when the killed member's session expired and its records were released;
    broken in both places, nothing came (tests/unit/test_share_partition.py holds the
    lock expiry alone)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms=15000)
    produce(broker.bootstrap, topic, [b"k%d" % i for i in range(5)])
    holder, held = start_holder(broker.bootstrap, group, topic)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert held
    other = share_consumer(broker.bootstrap, group, topic)
    got: dict[int, int] = {}
    poll_until([other], lambda: set(held) <= set(got), lambda c, m: got.setdefault(m.offset(), m.delivery_count()))
    other.close()
    assert all(got[o] == 2 for o in held)


def test_acknowledgements_survive_kill_9_and_held_records_come_back_counted(fresh_broker) -> None:
    """After a kill -9 of the broker, an accepted record is never delivered again, and
    one acquired but not acknowledged is delivered again with its delivery counted.
    Broken once by not replaying `__share_group_state` at start-up (the accepted
    records came back)."""
    broker = fresh_broker()
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"v%d" % i for i in range(10)])
    first = share_consumer(broker.bootstrap, group, topic, explicit=True)
    accepted: list[int] = []

    def accept_first_six(c: ShareConsumer, m) -> None:
        c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 6 else AcknowledgeType.RELEASE)
        if m.offset() < 6:
            accepted.append(m.offset())

    poll_until([first], lambda: len(accepted) >= 6, accept_first_six)
    first.commit_sync()
    first.close()
    holder, held = start_holder(broker.bootstrap, group, topic)
    broker.kill()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    broker.start()
    assert held and min(held) >= 6
    again = share_consumer(broker.bootstrap, group, topic)
    got: dict[int, int] = {}
    poll_until([again], lambda: {6, 7, 8, 9} <= set(got), lambda c, m: got.setdefault(m.offset(), m.delivery_count()))
    again.close()
    assert set(got) == {6, 7, 8, 9}  # none of the accepted ones
    # Offsets 6-9 were released once (delivery 1), the holder took them (delivery 2).
    assert all(got[o] == 3 for o in held)


# --- the Java client 4.3.1's KafkaShareConsumer --------------------------------------------

JAVA_APP = os.path.join(os.path.dirname(os.path.dirname(__file__)), "java", "ShareConsumerCheck.java")


def java_share_consumer(bootstrap: str, topic: str, group: str, mode: str, count: int) -> subprocess.Popen:
    try:
        command = java_command(JAVA_APP, [bootstrap, topic, group, mode, str(count)])
    except ReferenceUnavailable as exc:
        pytest.fail(f"the Java client cannot run: {exc}", pytrace=False)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def deliveries(output: str) -> list[dict[str, str]]:
    """The "record consumer=C offset=O delivery=D value=V" lines of ShareConsumerCheck."""
    return [dict(field.split("=", 1) for field in line.split()[1:])
            for line in output.splitlines() if line.startswith("record ")]


def finished(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0 and out.rstrip().endswith("done"), f"{out[-3000:]}\n{err[-5000:]}"
    return out


def test_java_share_consumers_share_a_partition_and_acknowledge(broker) -> None:
    """Two KafkaShareConsumers on one partition get every record once; then one that
    releases and rejects sees the released record again, counted, and never the
    rejected one."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    values = [f"j{i}".encode() for i in range(200)]
    produce(broker.bootstrap, topic, values)
    got = deliveries(finished(java_share_consumer(broker.bootstrap, topic, group, "accept", len(values))))
    assert sorted(d["value"] for d in got) == sorted(v.decode() for v in values)
    assert all(d["delivery"] == "1" for d in got)

    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [b"release-me", b"reject-me", b"keep"])
    got = deliveries(finished(java_share_consumer(broker.bootstrap, topic, group, "decide", 4)))
    assert [(d["value"], d["delivery"]) for d in got] == [
        ("release-me", "1"), ("reject-me", "1"), ("keep", "1"), ("release-me", "2")]


def test_a_java_consumer_killed_mid_batch_has_its_records_delivered_to_another(broker) -> None:
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [b"h%d" % i for i in range(5)])
    holder = java_share_consumer(broker.bootstrap, topic, group, "hold", 0)
    assert holder.stdout is not None
    held = []
    for line in holder.stdout:
        if line.startswith("holding"):
            break
        held += deliveries(line)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert held
    got = deliveries(finished(java_share_consumer(broker.bootstrap, topic, group, "accept", len(held))))
    assert {(d["offset"], d["delivery"]) for d in got} >= {(d["offset"], "2") for d in held}


# --- Kafka's kafka-console-share-consumer; the broker killed and restarted under consumers ---

CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"


def test_kafka_console_share_consumer_releases_then_accepts(broker) -> None:
    """kafka-console-share-consumer 4.3.1: with --release every message comes back with
    its delivery counted; a plain run then accepts them, and a third gets only what
    was produced after. Broken once by taking RELEASE for ACCEPT (the second run got
    nothing)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"m0", b"m1", b"m2"])

    def console(*args: str) -> list[str]:
        # --timeout-ms only ends a run that would wait for ever (the test then fails on
        # what it printed); every run here ends at its --max-messages.
        out = kafka_tool(CONSOLE_SHARE_CONSUMER, broker.bootstrap, "--topic", topic, "--group", group,
                         "--formatter-property", "print.delivery=true", "--timeout-ms", "60000", *args).stdout
        return [line for line in out.splitlines() if line.startswith("Delivery:")]

    assert console("--max-messages", "3", "--release") == ["Delivery:1\tm0", "Delivery:1\tm1", "Delivery:1\tm2"]
    assert console("--max-messages", "3") == ["Delivery:2\tm0", "Delivery:2\tm1", "Delivery:2\tm2"]
    produce(broker.bootstrap, topic, [b"m3"])  # the accepted ones never come again: the next is m3
    assert console("--max-messages", "1") == ["Delivery:1\tm3"]


def test_a_share_consumer_carries_on_across_a_kill_9_of_the_broker(fresh_broker) -> None:
    """The same ShareConsumer, its broker killed and started again under it: it goes on
    as the same member and gets what comes next, and none of what it accepted before.
    Broken once by not replaying `__share_group_state` at start-up (it got a0-a4 again)."""
    broker = fresh_broker()
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"a%d" % i for i in range(5)])
    consumer = share_consumer(broker.bootstrap, group, topic)
    seen: list[tuple[bytes, int]] = []
    poll_until([consumer], lambda: len(seen) >= 5, lambda c, m: seen.append((m.value(), m.delivery_count())))
    consumer.commit_sync()
    broker.kill()
    broker.start()
    produce(broker.bootstrap, topic, [b"b%d" % i for i in range(5)])
    poll_until([consumer], lambda: any(v == b"b4" for v, _ in seen),
               lambda c, m: seen.append((m.value(), m.delivery_count())))
    consumer.close()
    assert seen == [(b"a%d" % i, 1) for i in range(5)] + [(b"b%d" % i, 1) for i in range(5)]


def described_members(bootstrap: str, group: str) -> tuple[int, int, dict[str, tuple[int, list]]]:
    """ShareGroupDescribe: the group epoch, the assignment epoch, and each member's epoch
    and assignment."""
    with WireClient(bootstrap) as client:
        described = client.call(request(77, 1, group_ids=[group], include_authorized_operations=False)).groups[0]
    assert described.error_code == 0, described
    return described.group_epoch, described.assignment_epoch, {
        m.member_id: (m.member_epoch, sorted((str(t.topic_id), sorted(t.partitions))
                                             for t in m.assignment.topic_partitions))
        for m in described.members}


@pytest.mark.parametrize("kill", [False, True], ids=["restart", "kill-9"])
def test_a_share_group_keeps_its_members_epochs_and_assignment_across_a_restart(fresh_broker, kill) -> None:
    """Two ShareConsumers in a group; the broker stopped (or killed with SIGKILL) and
    started again: the group comes back from `__consumer_offsets` with its members,
    their epochs and assignments and the group's epochs, and the same consumers go on
    as those members, together getting every record produced after. Seen failing before
    membership was written (the group came back with no members)."""
    broker = fresh_broker()
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 2)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    consumers = [share_consumer(broker.bootstrap, group, topic) for _ in range(2)]
    deadline = time.monotonic() + DEADLINE
    while True:  # until both have joined and hold their assignment
        for consumer in consumers:
            consumer.poll(0.2)
        before = described_members(broker.bootstrap, group)
        if len(before[2]) == 2 and all(epoch == before[1] and assigned for epoch, assigned in before[2].values()):
            break
        assert time.monotonic() < deadline, f"the share consumers did not both join: {before}"
    if kill:
        broker.kill()
    else:
        broker.stop()
    broker.start()
    assert described_members(broker.bootstrap, group) == before
    values = [b"after-%d" % i for i in range(20)]
    produce(broker.bootstrap, topic, values)
    seen: list[bytes] = []
    poll_until(consumers, lambda: len(seen) >= len(values), lambda c, m: seen.append(m.value()))
    for consumer in consumers:
        consumer.commit_sync()
    # The same members, at the same epochs: none was fenced and joined again.
    assert described_members(broker.bootstrap, group) == before
    for consumer in consumers:
        consumer.close()
    assert sorted(seen) == sorted(values)
