"""The group coordinator without a broker: the classic protocol's state machine on a
clock the test moves, the checks a group makes of offset commits and deletions, and
what a restart brings back from `__consumer_offsets`."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

import pytest

from ottla.coordinator.classic_group import ClassicGroup, GroupState, JoinRequest
from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.group import GroupConfig, GroupType
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.offsets_log import TOPIC, CommittedOffset
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

SESSION_MS = 10_000
CONFIG = GroupConfig(initial_rebalance_delay_ms=3000, num_partitions=5)


def error_of(call: Callable[[], object]) -> ErrorCode:
    """The error code a coordinator call is answered with: the KafkaError it raises,
    NONE if it returns."""
    try:
        call()
    except KafkaError as exc:
        return exc.code
    return ErrorCode.none


def subscription(*topics: str) -> bytes:
    """A consumer-protocol subscription (version 0): the topics, no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def join_request(member_id: str = "", group_id: str = "g", instance_id: str | None = None,
                 topics: tuple[str, ...] = ("orders",)) -> JoinRequest:
    return JoinRequest(group_id=group_id, member_id=member_id, group_instance_id=instance_id, client_id="app",
                       client_host="127.0.0.1", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                       protocol_type="consumer", protocols=[("range", subscription(*topics))],
                       require_known_member_id=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    """A coordinator over a data directory that can be reopened, as a restart does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.clock = Clock()
        self.logs: LogManager | None = None
        self.coordinator = asyncio.run(self.open())

    async def open(self) -> GroupCoordinator:
        if self.logs is not None:
            self.logs.close()
        logs = self.logs = LogManager(self.path, LogConfig())
        logs.load()
        coordinator = GroupCoordinator(logs, lambda: logs.create_topic(TOPIC, 5, {"cleanup.policy": "compact"}),
                                       CONFIG, clock=self.clock)
        await coordinator.load()
        self.coordinator = coordinator
        return coordinator

    def group(self, group_id: str = "g") -> ClassicGroup:
        group = self.coordinator.groups[group_id]
        assert isinstance(group, ClassicGroup)
        return group

    async def new_member(self, **kwargs) -> str:
        """The member id a first JoinGroup hands out (MEMBER_ID_REQUIRED, KIP-394)."""
        result = await self.coordinator.join(join_request(**kwargs))
        assert result.error == ErrorCode.member_id_required
        return result.member_id

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def stable_group(self, *topics: str) -> tuple[str, str]:
        """Two members through JoinGroup and SyncGroup: (leader, follower)."""
        ids = [await self.new_member(topics=topics or ("orders",)) for _ in range(2)]
        joins = [asyncio.ensure_future(self.coordinator.join(join_request(m, topics=topics or ("orders",))))
                 for m in ids]
        await self.settle()
        self.clock.now += CONFIG.initial_rebalance_delay_ms / 1000
        self.coordinator.tick()
        results = [await join for join in joins]
        leader = results[0].leader
        follower = next(m for m in ids if m != leader)
        follower_sync = asyncio.ensure_future(self.coordinator.sync("g", follower, None, 1, None, None, {}))
        await self.settle()
        await self.coordinator.sync("g", leader, None, 1, "consumer", "range", {leader: b"L", follower: b"F"})
        assert (await follower_sync).assignment == b"F"
        return leader, follower


@pytest.fixture
def harness(tmp_path):
    harness = Harness(str(tmp_path))
    yield harness
    assert harness.logs is not None
    harness.logs.close()


async def test_a_new_group_waits_out_the_initial_delay_then_the_leader_assigns(harness):
    coordinator = harness.coordinator
    first, second = await harness.new_member(), await harness.new_member()
    joins = [asyncio.ensure_future(coordinator.join(join_request(m))) for m in (first, second)]
    await harness.settle()
    assert harness.group().state is GroupState.PREPARING_REBALANCE
    coordinator.tick()
    assert not any(j.done() for j in joins)  # group.initial.rebalance.delay.ms has not passed

    harness.clock.now += 3
    coordinator.tick()
    leader_join, follower_join = [await j for j in joins]
    assert (leader_join.error, leader_join.generation, leader_join.leader) == (ErrorCode.none, 1, first)
    assert [m for m, _, _ in leader_join.members] == [first, second]
    assert follower_join.members == [] and follower_join.protocol_name == "range"
    assert harness.group().state is GroupState.COMPLETING_REBALANCE

    follower_sync = asyncio.ensure_future(coordinator.sync("g", second, None, 1, None, None, {}))
    await harness.settle()
    assert not follower_sync.done()
    leader_sync = await coordinator.sync("g", first, None, 1, "consumer", "range", {first: b"A", second: b"B"})
    assert (leader_sync.error, leader_sync.assignment) == (ErrorCode.none, b"A")
    assert (await follower_sync).assignment == b"B"
    assert harness.group().state is GroupState.STABLE


async def test_heartbeats_say_who_is_stale_and_when_to_rejoin(harness):
    coordinator = harness.coordinator
    leader, follower = await harness.stable_group()
    assert error_of(lambda: coordinator.heartbeat("g", leader, None, 1)) == ErrorCode.none
    assert error_of(lambda: coordinator.heartbeat("g", leader, None, 0)) == ErrorCode.illegal_generation
    assert error_of(lambda: coordinator.heartbeat("g", "stranger", None, 1)) == ErrorCode.unknown_member_id
    assert error_of(lambda: coordinator.heartbeat("nowhere", leader, None, 1)) == ErrorCode.unknown_member_id
    # A classic heartbeat naming a group of KIP-848's protocol: none of its members speaks
    # the classic one (Kafka 4's answer).
    coordinator.groups["kip848"] = ConsumerGroup("kip848")
    assert error_of(lambda: coordinator.heartbeat("kip848", leader, None, 1)) == ErrorCode.unknown_member_id

    assert coordinator.leave("g", [(follower, None), ("stranger", None)]) == [ErrorCode.none,
                                                                              ErrorCode.unknown_member_id]
    assert error_of(lambda: coordinator.heartbeat("g", leader, None, 1)) == ErrorCode.rebalance_in_progress
    rejoin = await coordinator.join(join_request(leader))
    assert (rejoin.error, rejoin.generation, [m for m, _, _ in rejoin.members]) == (ErrorCode.none, 2, [leader])


async def test_an_expired_session_empties_the_group_and_a_restart_brings_back_its_generation(harness):
    coordinator = harness.coordinator
    leader, follower = await harness.stable_group()
    harness.clock.now += SESSION_MS / 1000 / 2
    assert error_of(lambda: coordinator.heartbeat("g", leader, None, 1)) == ErrorCode.none
    harness.clock.now += SESSION_MS / 1000 / 2 + 1
    assert coordinator.tick() == [("g", follower)]
    assert harness.group().state is GroupState.PREPARING_REBALANCE
    harness.clock.now += SESSION_MS / 1000
    assert coordinator.tick() == [("g", leader)]
    group = harness.group()
    assert (group.state, group.generation, group.members) == (GroupState.EMPTY, 2, {})

    await harness.open()
    group = harness.group()
    assert (group.state, group.generation) == (GroupState.EMPTY, 2)


async def test_a_restart_brings_back_a_stable_group_with_its_assignments_and_offsets(harness):
    leader, follower = await harness.stable_group()
    harness.coordinator.commit_offsets("g", leader, None, 1, {("orders", 0): CommittedOffset(42)})

    coordinator = await harness.open()
    group = harness.group()
    assert (group.state, group.generation, group.leader_id, group.protocol_name) == (
        GroupState.STABLE, 1, leader, "range")
    assert {m.member_id: m.assignment for m in group.members.values()} == {leader: b"L", follower: b"F"}
    assert error_of(lambda: coordinator.heartbeat("g", follower, None, 1)) == ErrorCode.none
    (offset, code), = coordinator.fetch_offsets("g", [("orders", 0)], True).values()
    assert (offset.offset, code) == (42, ErrorCode.none)


async def test_a_static_member_that_rejoins_fences_its_old_id(harness):
    coordinator = harness.coordinator
    first = asyncio.ensure_future(coordinator.join(join_request(instance_id="pod-1")))
    await harness.settle()
    old_id = harness.group().static_members["pod-1"]
    again = asyncio.ensure_future(coordinator.join(join_request(instance_id="pod-1")))
    await harness.settle()
    assert (await first).error == ErrorCode.fenced_instance_id
    harness.clock.now += 3
    coordinator.tick()
    result = await again
    assert result.error == ErrorCode.none and result.member_id != old_id
    assert error_of(lambda: coordinator.heartbeat("g", old_id, "pod-1", 1)) == ErrorCode.fenced_instance_id
    assert coordinator.leave("g", [(old_id, "pod-1")]) == [ErrorCode.fenced_instance_id]


async def test_offset_commits_are_checked_against_the_membership(harness):
    coordinator = harness.coordinator
    offsets = {("orders", 0): CommittedOffset(1)}
    with pytest.raises(KafkaError) as raised:
        coordinator.commit_offsets("", "", None, -1, offsets)
    assert raised.value.code == ErrorCode.invalid_group_id
    with pytest.raises(KafkaError) as raised:
        coordinator.commit_offsets("g", "m", None, 3, offsets)
    assert raised.value.code == ErrorCode.illegal_generation
    # A consumer outside any membership commits for a group: an empty classic group.
    assert coordinator.commit_offsets("simple", "", None, -1, offsets) == {("orders", 0): ErrorCode.none}
    assert coordinator.groups["simple"].type is GroupType.CLASSIC

    member = await harness.new_member()
    join = asyncio.ensure_future(coordinator.join(join_request(member)))
    await harness.settle()
    harness.clock.now += 3
    coordinator.tick()
    await join
    with pytest.raises(KafkaError) as raised:  # generation 1 has no assignment yet
        coordinator.commit_offsets("g", member, None, 1, offsets)
    assert raised.value.code == ErrorCode.rebalance_in_progress
    with pytest.raises(KafkaError) as raised:
        coordinator.commit_txn_offsets("g", 7, 0, "stranger", None, 1, offsets)
    assert raised.value.code == ErrorCode.unknown_member_id
    # TxnOffsetCommit before v3 names no member: nothing to check.
    assert coordinator.commit_txn_offsets("g", 7, 0, "", None, -1, offsets) == {("orders", 0): ErrorCode.none}


def test_transactional_commits_to_a_group_that_does_not_exist(harness):
    coordinator = harness.coordinator
    offsets = {("orders", 0): CommittedOffset(1)}
    # As Kafka 4.3.1's OffsetMetadataManager.validateTransactionalOffsetCommit: a
    # generation names none of a group that does not exist...
    for member_id, generation in (("m", 1), ("", 0)):
        with pytest.raises(KafkaError) as raised:
            coordinator.commit_txn_offsets("nobody", 7, 0, member_id, None, generation, offsets)
        assert raised.value.code == ErrorCode.illegal_generation
    # ...and outside any generation its empty classic group takes the commit, a member
    # named or not (ClassicGroup.validateOffsetCommit).
    for member_id in ("m", ""):
        assert coordinator.commit_txn_offsets("nobody", 7, 0, member_id, None, -1, offsets) == {
            ("orders", 0): ErrorCode.none}
    # So does an OffsetCommit outside any generation: the member it names is not looked for.
    assert coordinator.commit_offsets("nobody-else", "m", None, -1, offsets) == {("orders", 0): ErrorCode.none}


async def test_deletions_refuse_live_members_and_subscribed_topics(harness):
    coordinator = harness.coordinator
    leader, follower = await harness.stable_group("orders")
    coordinator.commit_offsets("g", leader, None, 1, {("orders", 0): CommittedOffset(1),
                                                       ("audit", 0): CommittedOffset(2)})
    assert error_of(lambda: coordinator.delete_group("g")) == ErrorCode.non_empty_group
    assert error_of(lambda: coordinator.delete_group("nowhere")) == ErrorCode.group_id_not_found
    assert coordinator.delete_offsets("g", [("orders", 0), ("audit", 0)]) == {
        ("orders", 0): ErrorCode.group_subscribed_to_topic, ("audit", 0): ErrorCode.none}
    assert list(coordinator.fetch_offsets("g", None, False)) == [("orders", 0)]

    coordinator.leave("g", [(leader, None), (follower, None)])
    assert harness.group().state is GroupState.EMPTY
    assert error_of(lambda: coordinator.delete_group("g")) == ErrorCode.none
    assert "g" not in coordinator.groups

    coordinator = await harness.open()
    assert "g" not in coordinator.groups
    assert coordinator.fetch_offsets("g", None, False) == {}


async def test_groups_are_listed_by_state_and_type(harness):
    coordinator = harness.coordinator
    await harness.stable_group()
    coordinator.commit_offsets("simple", "", None, -1, {("orders", 0): CommittedOffset(1)})
    assert [g.group_id for g in coordinator.list_groups(set(), set())] == ["g", "simple"]
    assert [g.group_id for g in coordinator.list_groups({"STABLE"}, {"Classic"})] == ["g"]
    assert coordinator.list_groups(set(), {"consumer"}) == []
    assert coordinator.count_by_state() == {"Stable": 1, "Empty": 1}
