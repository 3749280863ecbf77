"""Share groups (KIP-932) against Ottla with confluent-kafka's ShareConsumer: consumers
sharing one partition, ACCEPT / RELEASE / REJECT, the delivery-count limit,
read_committed, acknowledgements across a kill -9 of the broker, and a consumer killed
mid-batch whose records go to another once their lock expires.

The group settings are set as an application sets them, with IncrementalAlterConfigs
on the GROUP resource (share.auto.offset.reset, share.record.lock.duration.ms...).
Every wait polls until what is awaited arrived; its deadline only bounds a failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Consumer, KafkaError, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from ottla.coordinator.share_state_records import decode_key
from ottla.protocol.errors import ErrorCode
from tests.clients import commit_offset, create_topic, transactional_producer
from tests.kafka_tools import kafka_tool, table
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


def test_bad_share_requests_get_kafkas_errors_and_the_broker_serves_on(broker) -> None:
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [b"x"])
    member = str(uuid.uuid4())
    with WireClient(broker.bootstrap) as client:
        def heartbeat(member_id: str, epoch: int, names: list[str] | None = None):
            return client.call(request(76, 1, group_id=group, member_id=member_id, member_epoch=epoch,
                                       rack_id=None, subscribed_topic_names=names))

        assert heartbeat(member, 0).error_message == "SubscribedTopicNames must be set in first request."
        assert heartbeat(member, 3, [topic]).error_code == 69  # GROUP_ID_NOT_FOUND: no such group yet
        joined = heartbeat(member, 0, [topic])
        assert joined.error_code == 0 and joined.member_epoch >= 1
        assert heartbeat("stranger", 3, [topic]).error_code == 25  # UNKNOWN_MEMBER_ID
        assert heartbeat(member, joined.member_epoch + 5).error_code == 110  # FENCED_MEMBER_EPOCH
        assert heartbeat(member, -7).error_code == 42  # INVALID_REQUEST
        topic_id = client.call(request(3, 12, topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                       allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False)).topics[0].topic_id

        def fetch(epoch: int, acks=()):
            return client.call(request(78, 2, group_id=group, member_id=member, share_session_epoch=epoch,
                                       max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                                       topics=[{"topic_id": topic_id, "partitions": [
                                           {"partition_index": 0, "acknowledgement_batches": list(acks)}]}],
                                       forgotten_topics_data=[]))

        def ack_code(response) -> int:
            return response.responses[0].partitions[0].acknowledge_error_code

        assert fetch(1).error_code == 122  # SHARE_SESSION_NOT_FOUND
        assert fetch(0, [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]).error_code == 42
        assert fetch(0).error_code == 0
        assert fetch(7).error_code == 123  # INVALID_SHARE_SESSION_EPOCH
        backwards = {"first_offset": 3, "last_offset": 2, "acknowledge_types": [1]}
        assert ack_code(fetch(1, [backwards])) == 42  # INVALID_REQUEST
        never = {"first_offset": 100, "last_offset": 2**62, "acknowledge_types": [1]}
        assert ack_code(fetch(2, [never])) == 121  # INVALID_RECORD_STATE
        overlapping = [{"first_offset": 0, "last_offset": 5, "acknowledge_types": [1]},
                       {"first_offset": 5, "last_offset": 6, "acknowledge_types": [1]}]
        assert ack_code(fetch(3, overlapping)) == 42
        assert client.call(request(79, 2, group_id=group, member_id=member, share_session_epoch=0,
                                   topics=[])).error_code == 123
        assert heartbeat(member, -1).member_epoch == -1
    produce(broker.bootstrap, topic, [b"still serving"])


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


# --- Kafka's kafka-share-groups tool (DescribeShareGroupOffsets, AlterShareGroupOffsets,
#     DeleteShareGroupOffsets, ListGroups, DeleteGroups) -------------------------------------

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def test_kafka_share_groups_lists_describes_resets_and_deletes(broker) -> None:
    """kafka-share-groups 4.3.1 against Ottla, every command the tool has for a group.
    Broken once by not writing the new start offset of --reset-offsets (the tool said 0,
    the describe after it still said 4 and the consumer got nothing)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    values = [b"t%d" % i for i in range(4)]
    produce(broker.bootstrap, topic, values)
    consumer = share_consumer(broker.bootstrap, group, topic)
    seen: list[bytes] = []
    poll_until([consumer], lambda: len(seen) >= 4, lambda c, m: seen.append(m.value()))
    consumer.commit_sync()

    def tool(*args: str) -> str:
        return kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, *args).stdout

    classic = f"classic-{group}"
    commit_offset(broker.bootstrap, classic, topic, 0, 1)  # a classic group: not a share group
    listed = tool("--list").split()  # ListGroups with the "share" type filter
    assert group in listed and classic not in listed
    members = table(tool("--describe", "--group", group, "--members"))
    assert [(m["#PARTITIONS"], m["ASSIGNMENT"]) for m in members] == [("1", f"{topic}:0")]
    state = tool("--describe", "--group", group, "--state").split()
    assert state[-2:] == ["Stable", "1"]
    offsets = table(tool("--describe", "--group", group))
    assert [(o["TOPIC"], o["PARTITION"], o["START-OFFSET"], o["LAG"]) for o in offsets] == [(topic, "0", "4", "0")]
    # The tool refuses to reset a group with members (NON_EMPTY_GROUP); once it is empty:
    consumer.close()
    reset = table(tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"))
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in reset] == [("0", "0")]
    offsets = table(tool("--describe", "--group", group, "--offsets"))
    assert [(o["START-OFFSET"], o["LAG"]) for o in offsets] == [("0", "4")]
    again = share_consumer(broker.bootstrap, group, topic)
    seen.clear()
    poll_until([again], lambda: len(seen) >= 4, lambda c, m: seen.append(m.value()))
    again.commit_sync()
    again.close()
    assert sorted(seen) == sorted(values)
    assert "Successful" in tool("--delete-offsets", "--group", group, "--topic", topic)
    assert table(tool("--describe", "--group", group, "--offsets")) == []
    assert "was successful" in tool("--delete", "--group", group)
    assert group not in tool("--list").split()


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


def share_state_records(bootstrap: str, group: str) -> list[tuple[int, uuid.UUID, int, bool]]:
    """(record type, topic id, partition, tombstone?) of every record of `group` in
    `__share_group_state` (one partition), read with a consumer, in log order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition("__share_group_state", 0, 0)])
    out = []
    deadline = time.monotonic() + DEADLINE
    try:
        while True:
            assert time.monotonic() < deadline, "__share_group_state was not read to its end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return out
            key = decode_key(message.key())
            if key is not None and key.group == group:
                out.append((key.type, key.topic_id, key.partition, message.value() is None))
    finally:
        consumer.close()


def test_a_deleted_topics_share_state_is_tombstoned(fresh_broker) -> None:
    """Deleting a topic deletes its share-partitions' state from `__share_group_state`
    (tombstones, as Kafka's share coordinator writes them), not only from memory. Broken
    once by not telling the share coordinator of the deletion (its records stayed, the
    last one a snapshot)."""
    broker = fresh_broker(share_coordinator_state_topic_num_partitions=1)
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 2)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"t%d" % i for i in range(4)])
    consumer = share_consumer(broker.bootstrap, group, topic)
    seen: list[bytes] = []
    poll_until([consumer], lambda: len(seen) >= 4, lambda c, m: seen.append(m.value()))
    consumer.commit_sync()
    consumer.close()
    before = share_state_records(broker.bootstrap, group)
    partitions = {(topic_id, p) for _, topic_id, p, _ in before}
    assert len(partitions) == 2 and not any(tombstone for *_, tombstone in before)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result()
    after = share_state_records(broker.bootstrap, group)[len(before):]
    # Every share-partition's keys end in tombstones, and the log says nothing after them.
    assert {(topic_id, p) for _, topic_id, p, tombstone in after if tombstone} == partitions
    assert all(tombstone for *_, tombstone in after)


def test_the_web_console_shows_a_share_group_and_its_members(fresh_broker) -> None:
    """The console's group pages list share groups beside the others and show their
    members with what they are assigned, and the records in flight with their holder
    and lock expiry. Broken before this test: the group page took a share member for a
    classic one and failed (HTTP 500)."""
    broker = fresh_broker(admin_port=0)
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"x"])
    consumer = share_consumer(broker.bootstrap, group, topic)
    held: list[int] = []  # offsets the consumer got and holds (acknowledged at its next poll)
    with WireClient(broker.bootstrap) as client:
        deadline = time.monotonic() + DEADLINE
        while True:  # until the consumer has joined
            held += [m.offset() for m in consumer.poll(0.2) or [] if m.error() is None]
            described = client.call(request(77, 1, group_ids=[group], include_authorized_operations=False))
            if described.groups[0].members:
                break
            assert time.monotonic() < deadline, "the share consumer did not join"
    member_id = described.groups[0].members[0].member_id
    listing = urllib.request.urlopen(f"{broker.admin_url}/console/groups?q={group}", timeout=30).read().decode()
    assert group in listing and ">share<" in listing and "Stable" in listing
    # A record acquired and held: the page shows it in flight, with its holder.
    poll_until([consumer], lambda: bool(held), lambda c, m: held.append(m.offset()))
    page = urllib.request.urlopen(f"{broker.admin_url}/console/group?id={group}", timeout=30).read().decode()
    assert member_id in page and topic in page
    flight = page[page.index('id="share-records"'):]
    assert ">acquired<" in flight and member_id in flight and " s<" in flight
    consumer.close()


def test_share_requests_whose_state_writes_fail_change_nothing(fresh_broker) -> None:
    """With every write to `__share_group_state` failing (the admin endpoint's disk_error
    fault), an acquisition and an acknowledgement are answered NOT_COORDINATOR on the
    partition and change nothing: once the disk is back the records come with delivery
    count 1 (the failed acquisition did not count), the acknowledgement can be made
    again, and a restart agrees. Broken once by applying before appending in
    coordinator/writes.py's rule: the refused acquisition had locked the records, and
    the fetch after the disk came back got nothing."""
    broker = fresh_broker(admin_port=0)
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"d0", b"d1", b"d2"])
    member = str(uuid.uuid4())
    accept_all = [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]

    def session(client: WireClient):  # type: ignore[no-untyped-def]
        joined = client.call(request(76, 1, group_id=group, member_id=member, member_epoch=0, rack_id=None,
                                     subscribed_topic_names=[topic]))
        assert joined.error_code == 0
        topic_id = joined.assignment.topic_partitions[0].topic_id

        def fetch(epoch: int, acks=()):  # type: ignore[no-untyped-def]
            answer = client.call(request(78, 2, group_id=group, member_id=member, share_session_epoch=epoch,
                                         max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=100,
                                         batch_size=100, topics=[{"topic_id": topic_id, "partitions": [
                                             {"partition_index": 0, "acknowledgement_batches": list(acks)}]}],
                                         forgotten_topics_data=[]))
            assert answer.error_code == 0, answer
            return answer.responses[0].partitions[0] if answer.responses else None
        return fetch

    with WireClient(broker.bootstrap) as client:
        fetch = session(client)
        broker.admin.add_fault(kind="disk_error", topic="__share_group_state", count=1_000_000)
        refused = fetch(0)
        assert refused.error_code == ErrorCode.not_coordinator and not refused.acquired_records
        broker.admin.clear_faults()
        got = fetch(1)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired_records] == [(0, 2, 1)]
        broker.admin.add_fault(kind="disk_error", topic="__share_group_state", count=1_000_000)
        assert fetch(2, accept_all).acknowledge_error_code == ErrorCode.not_coordinator
        broker.admin.clear_faults()
        assert fetch(3, accept_all).acknowledge_error_code == 0  # still held: acknowledged now
    broker.restart()
    produce(broker.bootstrap, topic, [b"d3"])
    with WireClient(broker.bootstrap) as client:
        fetch = session(client)
        got = fetch(0)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired_records] == [(3, 3, 1)]


def test_a_share_fetch_naming_any_group_creates_nothing(broker) -> None:
    """As Kafka 4.3.1 answers it (side by side): a ShareFetch for a group and partition
    no heartbeat started names no partition and writes no state. Broken once by starting
    share-partitions on fetch (any client could grow __share_group_state without bound)."""
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [b"x"])
    with WireClient(broker.bootstrap) as client:
        topic_id = client.call(request(3, 12, topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                       allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False)).topics[0].topic_id
        answer = client.call(request(78, 2, group_id=group, member_id="made-up", share_session_epoch=0, max_wait=0,
                                     min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
                                     topics=[{"topic_id": topic_id, "partitions": [
                                         {"partition_index": 0, "acknowledgement_batches": []}]}],
                                     forgotten_topics_data=[]))
        assert answer.error_code == 0 and answer.responses == ()
        offsets = client.call(request(90, 1, groups=[{"group_id": group, "topics": None}]))
        assert offsets.groups[0].topics == ()


def test_share_group_configs_are_checked_and_described_as_kafka_does(broker) -> None:
    """IncrementalAlterConfigs and DescribeConfigs of a GROUP: every answer here is the
    one Kafka 4.3.1 gave to the same requests side by side (codes and messages)."""
    group = new_names()[1]
    with WireClient(broker.bootstrap) as client:
        def alter(name: str, value: str) -> tuple[str, str | None]:
            answer = client.call(request(44, 1, resources=[{"resource_type": 32, "resource_name": group, "configs": [
                {"name": name, "config_operation": 0, "value": value}]}], validate_only=False))
            return answer.responses[0].error_code.name, answer.responses[0].error_message

        assert alter("share.record.lock.duration.ms", "1000") == (
            "invalid_config", "share.record.lock.duration.ms must be greater than or equal to "
                              "group.share.min.record.lock.duration.ms")
        assert alter("share.delivery.count.limit", "11") == (
            "invalid_config", "share.delivery.count.limit must be less than or equal to "
                              "group.share.max.delivery.count.limit")
        assert alter("share.auto.offset.reset", "sometimes") == (
            "invalid_config", "Invalid value sometimes for configuration share.auto.offset.reset: Invalid value "
                              "`sometimes` for configuration share.auto.offset.reset. The value must be either "
                              "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
        assert alter("share.nope", "1") == ("invalid_config", "Unknown group config name: share.nope")
        assert alter("share.record.lock.duration.ms", "abc") == (
            "invalid_config", "Invalid value abc for configuration share.record.lock.duration.ms: "
                              "Not a number of type INT")
        assert alter("share.record.lock.duration.ms", "20000") == ("none", None)
        assert alter("share.isolation.level", "read_committed") == ("none", None)
        described = client.call(request(32, 4, resources=[{"resource_type": 32, "resource_name": group,
                                                            "configuration_keys": None}],
                                        include_synonyms=False, include_documentation=False)).results[0]
    configs = {c.name: (c.value, c.config_source, c.config_type) for c in described.configs}
    assert configs["share.record.lock.duration.ms"] == ("20000", 8, 3)  # DYNAMIC_GROUP_CONFIG, INT
    assert configs["share.isolation.level"] == ("read_committed", 8, 2)
    assert configs["share.auto.offset.reset"] == ("latest", 5, 2)  # DEFAULT_CONFIG, STRING
