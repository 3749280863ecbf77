"""KIP-848 consumer groups without a broker: the assignors, the reconciliation state
machine, and the coordinator's heartbeat protocol on a clock the test moves, with what
a restart brings back from `__consumer_offsets`."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import uuid

import pytest

from ottla.coordinator.assignors import AssignmentSpec, range_, uniform
from ottla.coordinator.classic_group import ClassicGroup
from ottla.coordinator.consumer_group import ConsumerGroup, ConsumerMember, MemberState, reconcile
from ottla.coordinator.consumer_group_records import (
    ConsumerGroupKey,
    CurrentAssignment,
    MemberMetadata,
    decode_current_assignment,
    decode_key,
    decode_member_metadata,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
)
from ottla.coordinator.consumer_protocol import HeartbeatRequest, HeartbeatResult
from ottla.coordinator.group import GroupConfig, GroupType
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.offsets_log import TOPIC, CommittedOffset
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

from .test_group_coordinator import Clock, error_of, join_request

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
CONFIG = GroupConfig(num_partitions=5, consumer_session_timeout_ms=45_000, consumer_max_size=3,
                     streams_initial_rebalance_delay_ms=0)


def _count(assignment: dict) -> int:
    return sum(len(ps) for ps in assignment.values())


# --- assignors ---------------------------------------------------------------------------


def test_uniform_spreads_evenly_and_moves_only_what_it_must():
    members = {m: frozenset({T1}) for m in "abc"}
    first = uniform(AssignmentSpec(members, {T1: 6}, {}))
    assert sorted(_count(a) for a in first.values()) == [2, 2, 2]
    assert sorted(p for a in first.values() for p in a[T1]) == list(range(6))

    # A fourth member: one partition moves to it (2, 2, 1, 1), nothing else does.
    second = uniform(AssignmentSpec({**members, "d": frozenset({T1})}, {T1: 6}, first))
    assert sorted(_count(a) for a in second.values()) == [1, 1, 2, 2]
    moved = sum(len(first[m][T1] - second[m].get(T1, frozenset())) for m in "abc")
    assert moved == 1
    # One leaves: its partitions go to the others, who keep theirs.
    third = uniform(AssignmentSpec({m: frozenset({T1}) for m in "abd"}, {T1: 6}, second))
    for m in "abd":
        assert second[m].get(T1, frozenset()) <= third[m][T1]
    assert sorted(p for a in third.values() for p in a[T1]) == list(range(6))


def test_uniform_gives_each_partition_to_a_subscriber_when_subscriptions_differ():
    spec = AssignmentSpec({"a": frozenset({T1}), "b": frozenset({T1, T2})}, {T1: 4, T2: 4}, {})
    result = uniform(spec)
    assert T2 not in result["a"]
    assert sorted(result["a"].get(T1, frozenset()) | result["b"].get(T1, frozenset())) == [0, 1, 2, 3]
    assert result["b"][T2] == frozenset(range(4))
    assert abs(_count(result["a"]) - _count(result["b"])) <= 4


def test_range_gives_contiguous_ranges_in_member_order():
    spec = AssignmentSpec({"b": frozenset({T1}), "a": frozenset({T1}), "c": frozenset({T1})}, {T1: 7}, {})
    result = range_(spec)
    assert result["a"][T1] == {0, 1, 2}
    assert result["b"][T1] == {3, 4}
    assert result["c"][T1] == {5, 6}


# --- reconciliation -----------------------------------------------------------------------


def test_a_partition_is_revoked_from_its_owner_before_another_member_gets_it():
    group = ConsumerGroup("g")
    a = ConsumerMember("a", member_epoch=1, assigned={T1: frozenset(range(6))})
    b = ConsumerMember("b", member_epoch=0)
    group.put_member(a)
    group.put_member(b)
    target = {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4, 5})}}

    # b first: its partitions are still a's, so it reaches epoch 2 with nothing yet.
    b = reconcile(b, 2, target["b"], {}, group.partition_epoch)
    assert (b.state, b.member_epoch, b.assigned) == (MemberState.UNRELEASED_PARTITIONS, 2, {})
    group.put_member(b)

    # a must give up 3-5 first, keeping its epoch while it does.
    a = reconcile(a, 2, target["a"], {T1: frozenset(range(6))}, group.partition_epoch)
    assert (a.state, a.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    assert a.assigned == {T1: frozenset({0, 1, 2})} and a.pending_revocation == {T1: frozenset({3, 4, 5})}
    group.put_member(a)
    assert reconcile(a, 2, target["a"], {T1: frozenset(range(6))}, group.partition_epoch) is a  # still owns them
    assert reconcile(b, 2, target["b"], {}, group.partition_epoch).assigned == {}

    # a no longer reports them: it moves to epoch 2; then b gets them.
    a = reconcile(a, 2, target["a"], {T1: frozenset({0, 1, 2})}, group.partition_epoch)
    assert (a.state, a.member_epoch, a.previous_member_epoch) == (MemberState.STABLE, 2, 1)
    group.put_member(a)
    b = reconcile(b, 2, target["b"], {}, group.partition_epoch)
    assert (b.state, b.member_epoch, b.assigned) == (MemberState.STABLE, 2, {T1: frozenset({3, 4, 5})})


def test_a_member_in_an_unknown_state_must_start_over():
    member = ConsumerMember("a", member_epoch=3, state=MemberState.UNKNOWN, assigned={T1: frozenset({0})})
    with pytest.raises(KafkaError) as raised:
        reconcile(member, 3, {T1: frozenset({0})}, {T1: frozenset({0})}, lambda t, p: -1)
    assert raised.value.code == ErrorCode.fenced_member_epoch


# --- the heartbeat protocol ---------------------------------------------------------------


class Harness:
    """A coordinator over a data directory that can be reopened, as a restart does."""

    def __init__(self, path: str, config: GroupConfig = CONFIG) -> None:
        self.path = path
        self.config = config
        self.clock = Clock()
        self.logs: LogManager | None = None
        # The groups' own configs (the GROUP config resource), as the broker keeps them.
        self.group_configs: dict[str, dict[str, str]] = {}
        self.coordinator = self.reopen()

    def reopen(self) -> GroupCoordinator:
        if self.logs is not None:
            self.logs.close()
        logs = self.logs = LogManager(self.path, LogConfig())
        logs.load()
        if logs.topic("orders") is None:
            logs.create_topic("orders", 6)
        self.coordinator = GroupCoordinator(
            logs, lambda: logs.create_topic(TOPIC, 5, {"cleanup.policy": "compact"}), self.config,
            lambda group_id: self.group_configs.get(group_id, {}), clock=self.clock)
        asyncio.run(self.coordinator.load())
        return self.coordinator

    def beat(self, member_id: str, epoch: int, owned: dict | None = None, **fields):
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("subscribed_topic_names", ("orders",))
            owned = {} if owned is None else owned
        fields.setdefault("group_id", "g")
        try:
            return self.coordinator.consumer_heartbeat(
                HeartbeatRequest(member_id=member_id, member_epoch=epoch, owned=owned, **fields))
        except KafkaError as exc:  # as the handler answers it
            return HeartbeatResult(exc.code, exc.message)

    def group(self) -> ConsumerGroup:
        group = self.coordinator.groups["g"]
        assert isinstance(group, ConsumerGroup)
        return group

    @property
    def orders(self) -> uuid.UUID:
        return self.logs.topic("orders").topic_id


@pytest.fixture
def harness(tmp_path) -> Harness:
    return Harness(str(tmp_path))


def test_members_join_share_the_partitions_and_reconcile_through_their_heartbeats(harness):
    first = harness.beat("m1", 0)
    assert (first.error, first.member_epoch) == (ErrorCode.none, 1)
    assert first.assignment == {harness.orders: frozenset(range(6))}
    assert harness.group().type is GroupType.CONSUMER and harness.group().state_name == "Stable"

    second = harness.beat("m2", 0)
    assert second.member_epoch == 2 and second.assignment == {}  # its partitions are still m1's
    assert harness.group().state_name == "Reconciling"
    revoke = harness.beat("m1", 1, owned=first.assignment)
    assert revoke.member_epoch == 1 and len(revoke.assignment[harness.orders]) == 3
    kept = revoke.assignment
    done = harness.beat("m1", 1, owned=kept)
    assert done.member_epoch == 2
    given = harness.beat("m2", 2, owned={})
    assert given.assignment == {harness.orders: frozenset(range(6)) - kept[harness.orders]}
    assert harness.group().state_name == "Stable"


def test_epochs_members_and_fields_are_checked_as_kafka_checks_them(harness):
    harness.beat("m1", 0)
    assert harness.beat("m1", 5).error == ErrorCode.fenced_member_epoch
    assert harness.beat("ghost", 1).error == ErrorCode.unknown_member_id
    assert harness.beat("m1", 1, group_id="nowhere").error == ErrorCode.group_id_not_found
    assert harness.beat("m1", -1, group_id="nowhere").error == ErrorCode.group_id_not_found
    assert harness.beat("", 1).error == ErrorCode.invalid_request
    assert harness.beat("m9", -3).error == ErrorCode.invalid_request
    assert harness.beat("m9", 0, rebalance_timeout_ms=-1).error == ErrorCode.invalid_request
    assert harness.beat("m9", 0, owned={harness.orders: frozenset({1})}).error == ErrorCode.invalid_request
    assert harness.beat("m9", 0, subscribed_topic_regex="orders(").error == ErrorCode.invalid_regular_expression
    assert harness.beat("m9", 0, subscribed_topic_regex="x" * 5000).error == ErrorCode.invalid_request
    assert harness.beat("m9", 0, subscribed_topic_names=("t",) * 10_001).error == ErrorCode.invalid_request
    assert harness.beat("m9", 0, server_assignor="sticky").error == ErrorCode.unsupported_assignor
    assert harness.beat("m9", -2).error == ErrorCode.invalid_request  # a static leave needs the instance id
    harness.beat("m2", 0)
    harness.beat("m3", 0)
    assert harness.beat("m4", 0).error == ErrorCode.group_max_size_reached  # consumer_max_size 3
    # Nothing of this disturbed the members.
    assert sorted(harness.group().members) == ["m1", "m2", "m3"]


def test_a_static_member_keeps_its_partitions_while_away_and_gets_them_back(harness):
    joined = harness.beat("a1", 0, instance_id="app-1")
    harness.beat("b1", 0, instance_id="app-2")
    harness.beat("a1", joined.member_epoch, owned=joined.assignment, instance_id="app-1")
    a = harness.beat("a1", harness.group().members["a1"].member_epoch,
                     owned=harness.group().members["a1"].assigned, instance_id="app-1")
    mine = a.assignment or harness.group().members["a1"].assigned
    epoch_before = harness.group().group_epoch

    assert harness.beat("a1", -2, instance_id="app-1").member_epoch == -2
    assert harness.beat("a2", 0, instance_id="app-2").error == ErrorCode.unreleased_instance_id
    assert harness.beat("zz", 3, instance_id="app-1").error == ErrorCode.fenced_instance_id
    assert harness.beat("zz", 3, instance_id="app-9").error == ErrorCode.unknown_member_id
    back = harness.beat("a2", 0, instance_id="app-1")  # a new member id for the same instance
    assert back.error == ErrorCode.none
    assert back.assignment == mine
    assert harness.group().group_epoch == epoch_before
    assert "a1" not in harness.group().members


def test_a_silent_member_is_removed_after_the_session_timeout_and_its_partitions_move(harness):
    harness.beat("m1", 0)
    second = harness.beat("m2", 0)
    harness.clock.now += 30
    harness.beat("m2", second.member_epoch, owned={})
    harness.clock.now += 20  # m1: 50 s without a heartbeat; m2: 20 s
    assert harness.coordinator.tick() == [("g", "m1")]
    result = harness.beat("m2", harness.group().members["m2"].member_epoch, owned={})
    assert result.assignment == {harness.orders: frozenset(range(6))}


def test_a_groups_own_consumer_configs_set_its_session_and_heartbeat_interval(harness):
    """consumer.session.timeout.ms and consumer.heartbeat.interval.ms on the GROUP
    resource are the group's, over the broker's settings, as in Kafka. (Seen failing
    with the broker's settings read instead: m1 expired at 50 s.)"""
    harness.group_configs["g"] = {"consumer.session.timeout.ms": "55000", "consumer.heartbeat.interval.ms": "7000"}
    assert harness.beat("m1", 0).heartbeat_interval_ms == 7000
    second = harness.beat("m2", 0)
    harness.clock.now += 30
    harness.beat("m2", second.member_epoch, owned={})
    harness.clock.now += 20  # m1: 50 s without a heartbeat, within the group's 55 s
    assert harness.coordinator.tick() == []
    harness.clock.now += 6
    assert harness.coordinator.tick() == [("g", "m1")]


def test_a_regex_subscription_picks_up_topics_created_later(harness):
    first = harness.beat("m1", 0, subscribed_topic_names=None, subscribed_topic_regex="ord.*")
    assert first.assignment == {harness.orders: frozenset(range(6))}
    harness.logs.create_topic("ordinals", 2)
    harness.logs.create_topic("other", 2)
    harness.clock.now += 1  # heartbeats look at the topics again once a second
    nxt = harness.beat("m1", first.member_epoch, owned=first.assignment)
    ordinals = harness.logs.topic("ordinals").topic_id
    assert nxt.assignment == {harness.orders: frozenset(range(6)), ordinals: frozenset({0, 1})}
    assert nxt.member_epoch == first.member_epoch + 1


def test_offset_commits_of_a_consumer_group_check_the_member_epoch(harness):
    joined = harness.beat("m1", 0)
    offsets = {("orders", 0): CommittedOffset(5)}
    commit = harness.coordinator.commit_offsets
    assert commit("g", "m1", None, joined.member_epoch, offsets, 9) == {("orders", 0): ErrorCode.none}
    for member, epoch, version, code in [("m1", 0, 9, ErrorCode.stale_member_epoch),
                                         ("ghost", 1, 9, ErrorCode.unknown_member_id),
                                         ("", -1, 9, ErrorCode.unknown_member_id),
                                         ("m1", 1, 8, ErrorCode.unsupported_version)]:
        with pytest.raises(KafkaError) as raised:
            commit("g", member, None, epoch, offsets, version)
        assert raised.value.code == code
    with pytest.raises(KafkaError) as raised:
        harness.coordinator.commit_txn_offsets("g", 7, 0, "m1", None, 0, offsets)
    assert raised.value.code == ErrorCode.stale_member_epoch
    assert harness.coordinator.commit_txn_offsets("g", 7, 0, "m1", None, 1, offsets) == {
        ("orders", 0): ErrorCode.none}
    with pytest.raises(KafkaError) as raised:
        harness.coordinator.fetch_offsets("g", None, False, "m1", 0)
    assert raised.value.code == ErrorCode.stale_member_epoch


def test_empty_groups_change_type_and_members_of_the_other_protocol_are_refused(harness):
    coordinator = harness.coordinator
    # A group with offsets only (a classic one) becomes a consumer group, offsets kept.
    coordinator.commit_offsets("g", "", None, -1, {("orders", 1): CommittedOffset(3)})
    assert isinstance(coordinator.groups["g"], ClassicGroup)
    joined = harness.beat("m1", 0)
    assert isinstance(coordinator.groups["g"], ConsumerGroup)
    assert coordinator.fetch_offsets("g", [("orders", 1)], False)[("orders", 1)][0].offset == 3
    # A classic member cannot join it while it has members, nor speak for one of them...
    assert error_of(lambda: asyncio.run(coordinator.join(join_request()))) == ErrorCode.inconsistent_group_protocol
    assert error_of(lambda: coordinator.heartbeat("g", "m1", None, 1)) == ErrorCode.unknown_member_id
    assert error_of(lambda: coordinator.leave("g", [("m1", None)])) == ErrorCode.unknown_member_id
    # ...and can once it is empty: it becomes a classic group again.
    harness.beat("m1", -1)
    assert harness.group().state_name == "Empty"
    result = asyncio.run(coordinator.join(join_request()))
    assert result.error == ErrorCode.member_id_required
    assert isinstance(coordinator.groups["g"], ClassicGroup)
    # A consumer member cannot join a classic group that has members (one is joining).
    assert harness.beat("m2", 0).error == ErrorCode.group_id_not_found
    assert joined.member_epoch == 1
    # After a restart the offsets are still there.
    harness.reopen()
    assert harness.coordinator.fetch_offsets("g", [("orders", 1)], False)[("orders", 1)][0].offset == 3


def test_a_restart_rebuilds_the_group_from_its_records(harness):
    first = harness.beat("m1", 0, instance_id="app-1")
    second = harness.beat("m2", 0, server_assignor="range")
    harness.beat("m1", first.member_epoch, owned=first.assignment, instance_id="app-1")
    before = harness.group()
    snapshot = (before.group_epoch, before.assignment_epoch, dict(before.target),
                {m.member_id: (m.member_epoch, m.state, m.assigned, m.pending_revocation, m.instance_id,
                               m.server_assignor, m.subscribed_topic_names) for m in before.members.values()})

    harness.reopen()
    after = harness.group()
    assert (after.group_epoch, after.assignment_epoch, dict(after.target),
            {m.member_id: (m.member_epoch, m.state, m.assigned, m.pending_revocation, m.instance_id,
                           m.server_assignor, m.subscribed_topic_names) for m in after.members.values()}) == snapshot
    assert after.static_members == {"app-1": "m1"}
    # Members rebuilt from the log and not heard from yet are not expired by a tick that
    # comes before `restored` (as one can while the broker still loads the other
    # partitions of __consumer_offsets).
    for member in after.members.values():
        member.last_heartbeat = 0.0
    assert harness.coordinator.tick() == []
    assert list(harness.group().members) == ["m1", "m2"]
    # The members carry on where they were, and a leave is kept over a restart too.
    assert harness.beat("m2", second.member_epoch, owned={}).error == ErrorCode.none
    harness.beat("m2", -1)
    harness.reopen()
    assert list(harness.group().members) == ["m1"]
    # Deleting the (emptied) group tombstones all of it.
    harness.beat("m1", -1, instance_id="app-1")
    assert error_of(lambda: harness.coordinator.delete_group("g")) == ErrorCode.none
    harness.reopen()
    assert "g" not in harness.coordinator.groups


def test_a_change_whose_records_cannot_be_written_is_not_made(harness):
    harness.beat("m1", 0)
    before = (harness.group().group_epoch, dict(harness.group().members), dict(harness.group().target))

    def disk_full(topic, partition):
        raise OSError(errno.ENOSPC, "the disk is full")

    harness.logs.set_write_check(disk_full)
    assert harness.beat("m2", 0).error == ErrorCode.not_coordinator
    assert harness.beat("m1", -1).error == ErrorCode.not_coordinator
    assert (harness.group().group_epoch, harness.group().members, harness.group().target) == before
    harness.logs.set_write_check(None)
    assert harness.beat("m2", 0).error == ErrorCode.none
    harness.reopen()
    assert sorted(harness.group().members) == ["m1", "m2"]


def test_partitions_of_a_deleted_topic_need_no_revocation(harness):
    harness.logs.create_topic("extra", 2)
    first = harness.beat("m1", 0, subscribed_topic_names=("orders", "extra"))
    extra = harness.logs.topic("extra").topic_id
    assert first.assignment[extra] == frozenset({0, 1})
    harness.logs.delete_topic("extra")
    harness.clock.now += 1
    # The member still reports them (its metadata is behind): it moves on all the same.
    moved = harness.beat("m1", first.member_epoch, owned=first.assignment)
    assert moved.member_epoch == first.member_epoch + 1
    assert moved.assignment == {harness.orders: frozenset(range(6))}
    assert harness.group().state_name == "Stable"


def test_records_are_written_in_kafkas_formats():
    # ConsumerGroupMetadataKey (type 3): the group id; the value: version 0, Epoch, no tagged fields.
    assert encode_key(ConsumerGroupKey(3, "g")) == bytes.fromhex("0003 0001 67")
    assert encode_epoch(5) == bytes.fromhex("0000 00000005 00")
    member_key = encode_key(ConsumerGroupKey(8, "g", "m"))
    assert member_key == bytes.fromhex("0008 0001 67 0001 6d")
    assert decode_key(member_key) == ConsumerGroupKey(8, "g", "m")
    assert decode_key(bytes.fromhex("0001 0001 67 0001 74 00000000")) is None  # an offset commit's key

    current = CurrentAssignment(2, 1, 0, {T1: frozenset({0, 1})}, {})
    encoded = encode_current_assignment(current)
    assert encoded == bytes.fromhex("0000 00000002 00000001 00 02") + T1.bytes + bytes.fromhex(
        "03 00000000 00000001 00 01 00")
    assert decode_current_assignment(encoded) == current

    metadata = MemberMetadata(None, None, "c", "h", ("t",), None, 30_000, "uniform")
    encoded = encode_member_metadata(metadata)
    assert encoded == bytes.fromhex("0000 00 00 0263 0268 02 0274 00 00007530 08") + b"uniform" + b"\x00"
    assert decode_member_metadata(encoded) == metadata


def test_a_refused_join_does_not_convert_an_empty_consumer_group(harness):
    """The conversion and the join are one change: a JoinGroup refused (here, its
    session timeout) leaves the consumer group and its records as they were. (Checked:
    without the `joinable` check before the conversion, the group is classic after.)"""
    harness.beat("m1", 0)
    harness.beat("m1", -1)
    refused = dataclasses.replace(join_request(), session_timeout_ms=1)
    assert error_of(lambda: asyncio.run(harness.coordinator.join(refused))) == ErrorCode.invalid_session_timeout
    assert isinstance(harness.coordinator.groups["g"], ConsumerGroup)
    harness.reopen()
    assert isinstance(harness.coordinator.groups["g"], ConsumerGroup)
