"""A coordinator write whose append fails changes nothing (coordinator/writes.py): for
every group and transaction operation that writes, with `__consumer_offsets` and
`__transaction_state` refusing every append (a failing disk, as the broker's disk_error
fault makes it), the operation is answered NOT_COORDINATOR (Kafka's answer to a storage
error), the coordinators' memory is what it was, and it equals what a restart rebuilds
from the log.

Evidence: replaying the records before the append in `writes.write` (memory changed
before the log) makes every case that writes fail (29 of the 39; the others are the
error mapping and a heartbeat, which writes nothing).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from ottla.coordinator.classic_group import ClassicGroup, GroupState
from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.consumer_protocol import HeartbeatRequest
from ottla.coordinator.group import GroupConfig
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.offsets_log import CommittedOffset
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.share_group import ShareGroup
from ottla.coordinator.streams_group import StreamsGroup
from ottla.coordinator.transaction_log import TOPIC as TXN_TOPIC
from ottla.coordinator.transaction_log import TxnState, decode_key, decode_value
from ottla.coordinator.transactions import TransactionCoordinator
from ottla.coordinator.writes import append_error
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import keys_and_values
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

from .test_group_coordinator import join_request

SESSION_S = 10  # the classic members' session (test_group_coordinator's join_request)
CONFIG = GroupConfig(initial_rebalance_delay_ms=0, num_partitions=5, streams_initial_rebalance_delay_ms=0)
TXN_TIMEOUT_MS = 60_000


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FailingDisk:
    """Every write to the coordinators' topics (to `topics`) fails with EIO while
    `failing`."""

    def __init__(self) -> None:
        self.failing = False
        self.topics = (OFFSETS_TOPIC, TXN_TOPIC)

    def __call__(self, topic: str, partition: int) -> None:
        if self.failing and topic in self.topics:
            raise OSError(errno.EIO, "injected disk error")


@dataclass
class Broker:
    """Both coordinators over one data directory, as the broker has them, with groups,
    offsets and transactions in every state the operations below start from."""

    logs: LogManager
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    clock: Clock
    disk: FailingDisk
    leader: str = ""
    follower: str = ""
    producers: dict[str, tuple[int, int]] | None = None

    def beat(self, group_id: str, member_id: str, epoch: int, **fields: Any) -> Any:
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("subscribed_topic_names", ("orders",))
            fields.setdefault("owned", {})
        return self.groups.consumer_heartbeat(HeartbeatRequest(group_id=group_id, member_id=member_id,
                                                               member_epoch=epoch, **fields))

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def classic_group(self, group_id: str, members: int) -> list[str]:
        """A Stable classic group of `members` through JoinGroup and SyncGroup: the
        leader's id first."""
        ids = []
        for _ in range(members):
            result = await self.groups.join(join_request(group_id=group_id))
            ids.append(result.member_id)
        joins = [asyncio.ensure_future(self.groups.join(join_request(m, group_id=group_id))) for m in ids]
        await self.settle()
        self.groups.tick()
        results = [await join for join in joins]
        leader = results[0].leader
        followers = [m for m in ids if m != leader]
        syncs = [asyncio.ensure_future(self.groups.sync(group_id, m, None, 1, None, None, {})) for m in followers]
        await self.settle()
        await self.groups.sync(group_id, leader, None, 1, "consumer", "range",
                               {m: m.encode() for m in ids})
        for sync in syncs:
            await sync
        return [leader, *followers]


async def open_broker(path: str, group_configs: Callable[[str], Mapping[str, str]] = lambda _: {}) -> Broker:
    logs = LogManager(path, LogConfig())
    logs.load()
    logs.create_topic("orders", 2)
    clock = Clock()
    disk = FailingDisk()
    logs.set_write_check(disk)
    groups = GroupCoordinator(logs, lambda: logs.create_topic(OFFSETS_TOPIC, 5, {"cleanup.policy": "compact"}),
                              CONFIG, group_configs, clock=clock, wall_clock=clock)
    markers = MarkerWriter(logs)
    markers.listeners.append(groups.on_marker)
    transactions = TransactionCoordinator(logs, ProducerIdAllocator(path), markers, num_partitions=5, clock=clock,
                                          call_later=lambda delay, callback: None)
    transactions.open()
    await transactions.load()
    await groups.load()
    broker = Broker(logs, groups, transactions, clock, disk)

    # Classic groups: a Stable one with offsets, a Stable one of one member, an Empty
    # one that only has offsets.
    broker.leader, broker.follower = await broker.classic_group("classic", 2)
    groups.commit_offsets("classic", broker.leader, None, 1, {("orders", 0): CommittedOffset(5)})
    await broker.classic_group("solo", 1)
    groups.commit_offsets("offsets-only", "", None, -1, {("orders", 0): CommittedOffset(7),
                                                         ("orders", 1): CommittedOffset(8)})
    # KIP-848 groups: one with a member, with offsets; one empty.
    joined = broker.beat("consumer", "m1", 0)
    broker.beat("consumer", "m1", joined.member_epoch, owned=joined.assignment)
    groups.commit_offsets("consumer", "m1", None, joined.member_epoch, {("orders", 1): CommittedOffset(11)})
    broker.beat("consumer-empty", "e1", 0)
    broker.beat("consumer-empty", "e1", -1)
    broker.beat("static", "s1", 0, instance_id="pod-1")
    # Transactions: Empty, Ongoing (with a pending offset commit), CompleteCommit.
    producers = broker.producers = {}
    for txn_id in ("txn-empty", "txn-ongoing", "txn-done"):
        producers[txn_id] = transactions.init_producer_id(txn_id, TXN_TIMEOUT_MS)
    pid, epoch = producers["txn-ongoing"]
    transactions.add_partitions("txn-ongoing", pid, epoch, [("orders", 0), (OFFSETS_TOPIC, groups.partition_for("tx"))])
    groups.commit_txn_offsets("tx", pid, epoch, "", None, -1, {("orders", 0): CommittedOffset(3)})
    pid, epoch = producers["txn-done"]
    transactions.add_partitions("txn-done", pid, epoch, [("orders", 1)])
    transactions.end_txn("txn-done", pid, epoch, commit=True)
    return broker


# --- what memory holds, and what a restart rebuilds ----------------------------------------


def groups_view(coordinator: GroupCoordinator) -> dict[str, Any]:
    """Every group and its offsets, as far as `__consumer_offsets` records them."""
    view: dict[str, Any] = {}
    for group_id, group in coordinator.groups.items():
        if isinstance(group, ClassicGroup):
            view[group_id] = ("classic", group.state_name, group.generation, group.protocol_type,
                              group.protocol_name, group.leader_id, sorted(
                                  (m.member_id, m.group_instance_id, m.session_timeout_ms, m.assignment,
                                   m.metadata(group.protocol_name)) for m in group.members.values()))
        elif isinstance(group, StreamsGroup):
            view[group_id] = ("streams", group.group_epoch, group.assignment_epoch, group.metadata_hash,
                              group.assignment_configs, group.topology, dict(group.target),
                              {m.member_id: (m.current(), m.metadata) for m in group.members.values()})
        elif isinstance(group, ShareGroup):
            view[group_id] = ("share", group.group_epoch, group.assignment_epoch, group.metadata_hash,
                              dict(group.target), {m.member_id: (m.member_epoch, m.previous_member_epoch, m.assigned,
                                                                 m.rack_id, m.client_id, m.client_host,
                                                                 m.subscribed_topic_names)
                                                   for m in group.members.values()})
        else:
            assert isinstance(group, ConsumerGroup)
            view[group_id] = ("consumer", group.group_epoch, group.assignment_epoch, dict(group.target),
                              dict(group.static_members), {m.member_id: m.current() for m in group.members.values()},
                              {m.member_id: m.metadata() for m in group.members.values()})
    for group_id, offsets in coordinator.offsets.groups.items():
        view[f"offsets of {group_id}"] = (
            {tp: stored.offset.offset for tp, stored in offsets.committed.items()},
            {pid: {tp: stored.offset.offset for tp, stored in pending.items()}
             for pid, pending in offsets.pending_txn.items() if pending})
    return view


def transactions_in_log(logs: LogManager) -> dict[str, Any]:
    """The latest record of every transactional id in `__transaction_state`, read as a
    restart reads it (without finishing what it finds prepared)."""
    latest: dict[str, Any] = {}
    topic = logs.topic(TXN_TOPIC)
    assert topic is not None
    for log in topic.partitions:
        for _header, batch in log.batches():
            for _, key, value in keys_and_values(batch):
                assert key is not None
                if value is None:
                    latest.pop(decode_key(key), None)
                else:
                    latest[decode_key(key)] = decode_value(value)
    return latest


async def restarted_groups(broker: Broker) -> dict[str, Any]:
    """The groups a restart rebuilds from the log (a second coordinator loading it)."""
    fresh = GroupCoordinator(broker.logs, lambda: None, CONFIG, clock=broker.clock, wall_clock=broker.clock)
    await fresh.load()
    return groups_view(fresh)


async def assert_memory_is_the_log(broker: Broker) -> None:
    assert groups_view(broker.groups) == await restarted_groups(broker)
    assert broker.transactions.transactions == transactions_in_log(broker.logs)


# --- the operations --------------------------------------------------------------------

Operation = Callable[[Broker], Awaitable[Any]]


async def join_converting_an_empty_consumer_group(b: Broker) -> Any:
    return await b.groups.join(join_request(group_id="consumer-empty"))


async def leave_the_last_members(b: Broker) -> Any:
    return b.groups.leave("classic", [(b.leader, None), (b.follower, None)])


async def commit_offsets_as_a_member(b: Broker) -> Any:
    return b.groups.commit_offsets("classic", b.leader, None, 1, {("orders", 0): CommittedOffset(99)})


async def commit_offsets_for_a_new_group(b: Broker) -> Any:
    return b.groups.commit_offsets("newcomer", "", None, -1, {("orders", 0): CommittedOffset(1)})


async def commit_offsets_as_a_consumer_group_member(b: Broker) -> Any:
    epoch = b.groups.describe_consumer_group("consumer").members["m1"].member_epoch
    return b.groups.commit_offsets("consumer", "m1", None, epoch, {("orders", 1): CommittedOffset(99)})


async def commit_txn_offsets(b: Broker) -> Any:
    pid, epoch = b.producers["txn-ongoing"]  # type: ignore[index]
    return b.groups.commit_txn_offsets("tx", pid, epoch, "", None, -1, {("orders", 1): CommittedOffset(4)})


async def commit_txn_offsets_for_a_new_group(b: Broker) -> Any:
    pid, epoch = b.producers["txn-ongoing"]  # type: ignore[index]
    return b.groups.commit_txn_offsets("tx-newcomer", pid, epoch, "", None, -1, {("orders", 1): CommittedOffset(4)})


async def delete_a_group(b: Broker) -> Any:
    return b.groups.delete_group("offsets-only")


async def delete_an_empty_consumer_group(b: Broker) -> Any:
    return b.groups.delete_group("consumer-empty")


async def delete_offsets(b: Broker) -> Any:
    return b.groups.delete_offsets("offsets-only", [("orders", 0)])


async def consumer_heartbeat_joining(b: Broker) -> Any:
    return b.beat("consumer", "m2", 0)


async def consumer_heartbeat_creating_a_group(b: Broker) -> Any:
    return b.beat("brand-new", "n1", 0)


async def consumer_heartbeat_converting_an_empty_classic_group(b: Broker) -> Any:
    return b.beat("offsets-only", "n1", 0)


async def consumer_heartbeat_leaving(b: Broker) -> Any:
    return b.beat("consumer", "m1", -1)


async def consumer_heartbeat_static_member_leaving_for_a_while(b: Broker) -> Any:
    return b.beat("static", "s1", -2, instance_id="pod-1")


def keep_classic_members_alive(b: Broker, *group_ids: str) -> None:
    for group_id in group_ids:
        group = b.groups.groups[group_id]
        assert isinstance(group, ClassicGroup)
        for member in group.members:
            b.groups.heartbeat(group_id, member, None, group.generation)


async def classic_sessions_expiring(b: Broker) -> Any:
    """The last member of a group expires: the group's empty generation cannot be
    written, so the member stays (and the next tick tries again)."""
    b.clock.now += SESSION_S + 1
    keep_classic_members_alive(b, "classic")  # a member leaving a group of two writes nothing
    return b.groups.tick()


async def consumer_sessions_expiring(b: Broker) -> Any:
    b.clock.now += CONFIG.consumer_session_timeout_ms / 1000 + 1
    keep_classic_members_alive(b, "classic", "solo")
    return b.groups.tick()


async def init_producer_id_new(b: Broker) -> Any:
    return b.transactions.init_producer_id("txn-new", TXN_TIMEOUT_MS)


async def init_producer_id_bumping_the_epoch(b: Broker) -> Any:
    return b.transactions.init_producer_id("txn-done", TXN_TIMEOUT_MS)


async def init_producer_id_fencing_an_open_transaction(b: Broker) -> Any:
    return b.transactions.init_producer_id("txn-ongoing", TXN_TIMEOUT_MS)


async def add_partitions_starting_a_transaction(b: Broker) -> Any:
    pid, epoch = b.producers["txn-empty"]  # type: ignore[index]
    return b.transactions.add_partitions("txn-empty", pid, epoch, [("orders", 1)])


async def add_partitions_to_an_open_transaction(b: Broker) -> Any:
    pid, epoch = b.producers["txn-ongoing"]  # type: ignore[index]
    return b.transactions.add_partitions("txn-ongoing", pid, epoch, [("orders", 1)])


async def add_offsets_to_txn(b: Broker) -> Any:
    pid, epoch = b.producers["txn-empty"]  # type: ignore[index]
    return b.transactions.add_partitions("txn-empty", pid, epoch, [(OFFSETS_TOPIC, b.groups.partition_for("other"))])


async def end_txn_commit(b: Broker) -> Any:
    pid, epoch = b.producers["txn-ongoing"]  # type: ignore[index]
    return b.transactions.end_txn("txn-ongoing", pid, epoch, commit=True, complete=False)


async def end_txn_abort_bumping_the_epoch(b: Broker) -> Any:
    pid, epoch = b.producers["txn-ongoing"]  # type: ignore[index]
    return b.transactions.end_txn("txn-ongoing", pid, epoch, commit=False, bump_epoch=True, complete=False)


async def transaction_timing_out(b: Broker) -> Any:
    b.clock.now += TXN_TIMEOUT_MS / 1000 + 1
    return b.transactions.abort_timed_out()


async def transactional_ids_expiring(b: Broker) -> Any:
    b.clock.now += 10
    return b.transactions.expire_transactional_ids(expiration_ms=1)


# Requests: answered NOT_COORDINATOR (the handlers put the code in the response).
REQUESTS: list[Operation] = [
    join_converting_an_empty_consumer_group, leave_the_last_members, commit_offsets_as_a_member,
    commit_offsets_for_a_new_group, commit_offsets_as_a_consumer_group_member, commit_txn_offsets,
    commit_txn_offsets_for_a_new_group, delete_a_group, delete_an_empty_consumer_group, delete_offsets,
    consumer_heartbeat_joining, consumer_heartbeat_creating_a_group,
    consumer_heartbeat_converting_an_empty_classic_group, consumer_heartbeat_leaving,
    consumer_heartbeat_static_member_leaving_for_a_while,
    init_producer_id_new, init_producer_id_bumping_the_epoch, init_producer_id_fencing_an_open_transaction,
    add_partitions_starting_a_transaction, add_partitions_to_an_open_transaction, add_offsets_to_txn,
    end_txn_commit, end_txn_abort_bumping_the_epoch,
]
# Changes time makes (session expiry, transaction timeouts and expiry): nothing is done,
# and the next run tries again.
BACKGROUND: list[Operation] = [
    classic_sessions_expiring, consumer_sessions_expiring, transaction_timing_out, transactional_ids_expiring,
]


@pytest.mark.parametrize("operation", REQUESTS + BACKGROUND, ids=lambda op: op.__name__)
async def test_a_write_that_fails_changes_nothing(tmp_path, operation):
    broker = await open_broker(str(tmp_path))
    await assert_memory_is_the_log(broker)
    before_groups = groups_view(broker.groups)
    before_transactions = dict(broker.transactions.transactions)

    broker.disk.failing = True
    if operation in REQUESTS:
        with pytest.raises(KafkaError) as refused:
            await operation(broker)
        assert refused.value.code == ErrorCode.not_coordinator
    else:
        assert await operation(broker) == []  # nothing expired, aborted or forgotten

    await assert_memory_is_the_log(broker)
    assert groups_view(broker.groups) == before_groups
    assert broker.transactions.transactions == before_transactions
    # Once the disk is back, the same broker goes on from there.
    broker.disk.failing = False
    broker.clock.now += 1
    broker.groups.tick()
    await assert_memory_is_the_log(broker)


async def test_a_classic_heartbeat_writes_nothing_and_is_answered_while_the_disk_fails(tmp_path):
    broker = await open_broker(str(tmp_path))
    before = groups_view(broker.groups)
    broker.disk.failing = True
    broker.groups.heartbeat("classic", broker.follower, None, 1)  # no error
    assert groups_view(broker.groups) == before
    await assert_memory_is_the_log(broker)


async def test_a_sync_whose_assignment_cannot_be_written_fails_every_member_and_the_group_rebalances(tmp_path):
    """As Kafka: the leader and the followers waiting for their assignment get the
    error, no member is handed an assignment, and the group rebalances; the log, and so a
    restart, still has the generation before."""
    broker = await open_broker(str(tmp_path))
    groups = broker.groups
    logged = await restarted_groups(broker)
    rejoins = [asyncio.ensure_future(groups.join(join_request(m, group_id="classic")))
               for m in (broker.leader, broker.follower)]
    await broker.settle()
    results = [await r for r in rejoins]
    assert {r.generation for r in results} == {2}
    leader = results[0].leader
    follower = next(r.member_id for r in results if r.member_id != leader)
    follower_sync = asyncio.ensure_future(groups.sync("classic", follower, None, 2, None, None, {}))
    await broker.settle()

    broker.disk.failing = True
    leader_sync = await groups.sync("classic", leader, None, 2, "consumer", "range", {leader: b"L", follower: b"F"})
    assert leader_sync.error == ErrorCode.not_coordinator
    assert (await follower_sync).error == ErrorCode.not_coordinator
    group = groups.groups["classic"]
    assert isinstance(group, ClassicGroup)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    assert await restarted_groups(broker) == logged

    # With the disk back, the members rejoin and the next generation is written.
    broker.disk.failing = False
    rejoins = [asyncio.ensure_future(groups.join(join_request(m, group_id="classic"))) for m in (leader, follower)]
    await broker.settle()
    results = [await r for r in rejoins]
    follower_sync = asyncio.ensure_future(groups.sync("classic", follower, None, 3, None, None, {}))
    await broker.settle()
    assert (await groups.sync("classic", leader, None, 3, None, None, {leader: b"L", follower: b"F"})).error \
        == ErrorCode.none
    assert (await follower_sync).assignment == b"F"
    await assert_memory_is_the_log(broker)


async def test_a_complete_record_that_cannot_be_written_leaves_the_transaction_prepared(tmp_path):
    broker = await open_broker(str(tmp_path))
    pid, epoch = broker.producers["txn-ongoing"]  # type: ignore[index]
    broker.transactions.end_txn("txn-ongoing", pid, epoch, commit=True, complete=False)
    broker.disk.failing, broker.disk.topics = True, (TXN_TOPIC,)
    broker.transactions.complete("txn-ongoing")  # the markers are written; CompleteCommit is not
    assert broker.transactions.pending_markers["txn-ongoing"].partitions == frozenset()
    assert broker.transactions.describe("txn-ongoing").state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    await assert_memory_is_the_log(broker)


@pytest.mark.parametrize(("refused", "answered"), [
    (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
    (ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_not_available),
    (ErrorCode.not_enough_replicas, ErrorCode.coordinator_not_available),
    (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
    (ErrorCode.message_too_large, ErrorCode.unknown_server_error),
    (ErrorCode.record_list_too_large, ErrorCode.unknown_server_error),
    (ErrorCode.invalid_producer_epoch, ErrorCode.invalid_producer_epoch),
])
def test_append_errors_are_answered_as_kafkas_coordinators_answer_them(refused, answered):
    assert append_error(KafkaError(refused, "refused"), "__consumer_offsets-0").code == answered


async def test_a_rebalance_nobody_rejoined_ends_empty_only_once_that_is_written(tmp_path):
    """The rebalance window closes with no member rejoined: the group's generation ends
    empty, a write. While it cannot be written the group stays as it is (a rebalance is
    never in the log, in Kafka either), and the next tick after the disk is back ends
    it."""
    broker = await open_broker(str(tmp_path))
    groups = broker.groups
    assert groups.leave("classic", [(broker.follower, None)]) == [ErrorCode.none]  # writes nothing
    group = groups.groups["classic"]
    assert isinstance(group, ClassicGroup) and group.state is GroupState.PREPARING_REBALANCE
    before = groups_view(groups)

    broker.disk.failing = True
    broker.clock.now = group.rebalance_deadline + 1
    with pytest.raises(KafkaError):  # the leader keeps its session: it is told to rejoin
        groups.heartbeat("classic", broker.leader, None, 1)
    assert groups.tick() == []
    assert groups_view(groups) == before

    broker.disk.failing = False
    groups.tick()
    assert (group.state, group.generation, group.members) == (GroupState.EMPTY, 2, {})
    await assert_memory_is_the_log(broker)


async def test_a_commit_whose_offsets_topic_cannot_be_made_is_answered_as_a_refused_write(tmp_path):
    """`__consumer_offsets` is made at the first commit; a storage error making it is the
    coordinator's refused write (NOT_COORDINATOR: look it up again and retry), as an
    append's own, and nothing is remembered."""
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()

    def refused() -> None:
        raise KafkaError(ErrorCode.kafka_storage_error, "the log directory is offline")

    groups = GroupCoordinator(logs, refused, CONFIG, lambda _: {})
    await groups.load()
    with pytest.raises(KafkaError) as raised:
        groups.commit_offsets("nobody", "", None, -1, {("orders", 0): CommittedOffset(5)})
    assert raised.value.code == ErrorCode.not_coordinator
    assert groups.fetch_offsets("nobody", [("orders", 0)], False)[("orders", 0)][0] is None
