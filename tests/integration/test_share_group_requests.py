"""Share groups (KIP-932) at the level of their requests and their state: Kafka's error
answers to bad requests, a ShareFetch that names any group, the group configs checked
as Kafka checks them, kafka-share-groups' every command, the state a deleted topic
leaves in `__share_group_state`, state writes that fail, and the web console's pages.
The consumers themselves are in test_share_groups.py, whose helpers these tests use."""

from __future__ import annotations

import time
import urllib.request
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from ottla.coordinator.share_state_records import decode_key
from ottla.protocol.errors import ErrorCode
from tests.clients import commit_offset, create_topic
from tests.integration.test_share_groups import (
    DEADLINE,
    described_members,
    new_names,
    poll_until,
    produce,
    set_group_configs,
    share_consumer,
)
from tests.kafka_tools import kafka_tool, table
from tests.wire import WireClient, request


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


def test_a_share_session_outlives_its_members_place_in_the_group(fresh_broker) -> None:
    """Kafka 4.3.1 ends a share session only by its final epoch, the member's next epoch
    0 or the close of its connection (ShareSessionCache, SharePartitionManager.newContext
    and acknowledgeSessionUpdate): a member whose group session expired (its heartbeats
    late, as under callgrind) or that left by heartbeat still acknowledges through its
    session, at the next epoch or the final one. Broken before this test: Ottla dropped
    the session with the member, and a ShareConsumer's commit_sync() got
    SHARE_SESSION_NOT_FOUND (then waited, sending nothing)."""
    broker = fresh_broker(group_share_session_timeout_ms=1000, group_share_heartbeat_interval_ms=500)
    topic, group = new_names()
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, [b"expired", b"leaving"])
    expired, leaving = str(uuid.uuid4()), str(uuid.uuid4())
    with WireClient(broker.bootstrap) as client:
        def heartbeat(member: str, epoch: int):  # type: ignore[no-untyped-def]
            return client.call(request(76, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                                       subscribed_topic_names=[topic] if epoch == 0 else None))

        topic_id = heartbeat(expired, 0).assignment.topic_partitions[0].topic_id
        partition = [{"partition_index": 0, "acknowledgement_batches": []}]

        def fetch(member: str, epoch: int):  # type: ignore[no-untyped-def]
            return client.call(request(78, 2, group_id=group, member_id=member, share_session_epoch=epoch,
                                       max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=1, batch_size=1,
                                       share_acquire_mode=1, topics=[{"topic_id": topic_id, "partitions": partition}],
                                       forgotten_topics_data=[]))

        def acknowledge(member: str, epoch: int, offset: int) -> int:
            batch = {"first_offset": offset, "last_offset": offset, "acknowledge_types": [1]}
            return client.call(request(79, 2, group_id=group, member_id=member, share_session_epoch=epoch,
                                       is_renew_ack=False, topics=[{"topic_id": topic_id, "partitions": [
                                           {"partition_index": 0, "acknowledgement_batches": [batch]}]}])).error_code

        assert fetch(expired, 0).error_code == 0
        assert heartbeat(leaving, 0).error_code == 0
        assert fetch(leaving, 0).error_code == 0
        # It leaves (or, on a loaded machine, its 1 s group session has run out already):
        assert heartbeat(leaving, -1).error_code in (0, ErrorCode.unknown_member_id)
        assert acknowledge(leaving, -1, 1) == 0  # its final epoch: the session closes
        assert acknowledge(leaving, 1, 1) == ErrorCode.share_session_not_found
        deadline = time.monotonic() + DEADLINE
        while expired in described_members(broker.bootstrap, group)[2]:
            assert time.monotonic() < deadline, "the member's group session did not expire"
            time.sleep(0.2)
        assert acknowledge(expired, 1, 0) == 0
        assert fetch(expired, 2).error_code == 0
        assert acknowledge(expired, -1, 0) == 0


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
