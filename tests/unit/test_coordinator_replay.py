"""The coordinators change state only by replaying the records they wrote
(coordinator/writes.py): after a random sequence of operations on every coordinator
(transactions, the v2 transactions Produce v12 starts, producer ids, plain and
transactional offset commits with their markers, classic groups, KIP-848 groups), what
memory holds is what a restart rebuilds from the log, and every answer given on the way
is what memory holds.

Two comparisons, after every operation:
- the answers: what an operation told its client (a producer id and epoch, an
  assignment, a member epoch, the committed offsets) is what the coordinator holds
  right after; the offsets are checked against an account kept here of every commit,
  transactional commit and marker;
- the restart: every few operations and at the end, each coordinator's persisted
  state (tests/unit/test_coordinator_write_failures.py's views: groups and offsets
  through a second coordinator loading the log, transactional ids as the log has
  them, the producer id block) equals memory.

Evidence, each seen failing: with the commit branch of OffsetStore._replay_marker
emptied (a committed transaction's offsets vanish), 5 of the 6 seeds fail on the
account of offsets; with ClassicGroup.replay not taking the assignments of its record,
every seed fails on a SyncGroup's answer; with TransactionCoordinator.replay ignoring
tombstones, every seed fails on an expired transactional id still in memory.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import pytest

from ottla.coordinator.classic_group import ClassicGroup, GroupState
from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.offsets_log import CommittedOffset
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.share_config import ShareConfig
from ottla.coordinator.share_coordinator import STATE_TOPIC_CONFIGS, ShareCoordinator
from ottla.coordinator.share_group import ShareGroup
from ottla.coordinator.share_state_records import TOPIC as SHARE_STATE_TOPIC
from ottla.coordinator.streams_group import StreamsGroup
from ottla.coordinator.transaction_log import TxnState
from ottla.protocol.errors import ErrorCode, KafkaError

from .test_coordinator_write_failures import (
    TXN_TIMEOUT_MS,
    Broker,
    groups_view,
    open_broker,
    restarted_groups,
    transactions_in_log,
)
from .test_group_coordinator import join_request

OPERATIONS = 300
TRANSACTIONAL_IDS = ("txn-empty", "txn-ongoing", "txn-done", "t0", "t1")
SIMPLE_GROUPS = ("offsets-only", "tx", "s0")
CLASSIC_GROUPS = ("classic", "solo", "c0")
STREAMS_GROUPS = ("streams", "st0", "st-delayed")
# A streams group with an initial rebalance delay of its own: its target assignment is
# computed by the tick that finds the delay over, or by the first heartbeat after it.
GROUP_CONFIGS = {"st-delayed": {"streams.initial.rebalance.delay.ms": "10000"}}
SHARE_GROUPS = ("share", "sh0")
CONSUMER_GROUPS = ("consumer", "consumer-empty", "static", "k0")
PARTITIONS = (("orders", 0), ("orders", 1))

TopicPartition = tuple[str, int]


class Offsets:
    """The offsets the coordinator's answers promised, kept apart from it: per group,
    the committed offset of each partition with the step that wrote it; per producer,
    its open transaction's offsets. A marker settles a transaction's offsets in the
    group's partition, as Kafka does: a plain commit written after them wins."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.committed: dict[str, dict[TopicPartition, tuple[int, int]]] = {}
        self.pending: dict[int, dict[str, dict[TopicPartition, tuple[int, int]]]] = {}
        for group_id, offsets in broker.groups.offsets.groups.items():
            self.committed[group_id] = {tp: (0, s.offset.offset) for tp, s in offsets.committed.items()}
            for pid, pending in offsets.pending_txn.items():
                self.pending.setdefault(pid, {})[group_id] = {tp: (0, s.offset.offset) for tp, s in pending.items()}
        broker.transactions.markers.listeners.append(self.on_marker)

    def on_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        if topic != OFFSETS_TOPIC:
            return
        for group_id, pending in list(self.pending.get(producer_id, {}).items()):
            if self.broker.groups.partition_for(group_id) != partition:
                continue
            del self.pending[producer_id][group_id]
            if committed:
                current = self.committed.setdefault(group_id, {})
                for tp, (step, offset) in pending.items():
                    if tp not in current or current[tp][0] < step:
                        current[tp] = (step, offset)

    def deleted(self, group_id: str) -> None:
        self.committed.pop(group_id, None)
        for pending in self.pending.values():
            pending.pop(group_id, None)

    def assert_held(self) -> None:
        groups = self.broker.groups
        for group_id in set(self.committed) | set(groups.offsets.groups):
            fetched = groups.offsets.fetch(group_id, None, require_stable=False)
            assert {tp: o.offset for tp, (o, _) in fetched.items() if o is not None} == {
                tp: offset for tp, (_, offset) in self.committed.get(group_id, {}).items()}, group_id
        live_pending = {(pid, group_id): {tp: s.offset.offset for tp, s in pending.items()}
                        for group_id, offsets in groups.offsets.groups.items()
                        for pid, pending in offsets.pending_txn.items() if pending}
        assert live_pending == {(pid, group_id): {tp: offset for tp, (_, offset) in pending.items()}
                                for pid, groups_pending in self.pending.items()
                                for group_id, pending in groups_pending.items() if pending}


class Run:
    """One random sequence of operations against a broker's coordinators."""

    def __init__(self, broker: Broker, seed: int) -> None:
        self.b = broker
        self.rng = random.Random(seed)
        self.step = 0
        self.offsets = Offsets(broker)
        self.producers: dict[str, tuple[int, int]] = dict(broker.producers or {})
        self.issued: set[int] = {pid for pid, _ in self.producers.values()}
        self.member_ids = 0
        self.txn_offset_groups: dict[str, set[str]] = {}  # transactional id -> groups added to its transaction
        # The share coordinator over the same registry, writing membership as the broker
        # wires it (its share-partition state goes to __share_group_state).
        self.shares = ShareCoordinator(
            broker.logs, lambda: broker.logs.create_topic(SHARE_STATE_TOPIC, 1, dict(STATE_TOPIC_CONFIGS)),
            ShareConfig(), broker.groups.groups, broker.groups.offsets.loading,
            write_group=broker.groups.offsets.write, clock=broker.clock, wall_clock=broker.clock)

    def pick(self, choices: Any) -> Any:
        return self.rng.choice(list(choices))

    def new_member_id(self) -> str:
        self.member_ids += 1
        return f"m{self.member_ids}"

    def producer(self) -> str:
        """A transactional id with a producer (one gets a producer first if none has)."""
        if not self.producers:
            self.init_producer_id()
        return self.pick(sorted(self.producers))

    def txn(self, txn_id: str) -> Any:
        return self.b.transactions.transactions.get(txn_id)

    # --- transactions and producer ids ------------------------------------------------

    def init_producer_id(self) -> None:
        txn_id = self.pick(TRANSACTIONAL_IDS)
        pid, epoch = self.b.transactions.init_producer_id(txn_id, TXN_TIMEOUT_MS)
        self.producers[txn_id] = (pid, epoch)
        self.issued.add(pid)
        self.txn_offset_groups[txn_id] = set()
        txn = self.txn(txn_id)
        assert (txn.producer_id, txn.producer_epoch, txn.state) == (pid, epoch, TxnState.EMPTY)

    def add_partitions(self) -> None:
        txn_id = self.producer()
        pid, epoch = self.producers[txn_id]
        partitions = self.rng.sample(PARTITIONS, self.rng.randint(1, 2))
        if self.rng.random() < 0.5:
            self.b.transactions.add_partitions(txn_id, pid, epoch, partitions)
        else:  # Produce v12's implicit add (transaction version 2)
            self.b.transactions.add_partitions_implicitly(txn_id, pid, epoch, partitions)
        txn = self.txn(txn_id)
        assert txn.state is TxnState.ONGOING and set(partitions) <= txn.partitions

    def commit_txn_offsets(self) -> None:
        txn_id = self.producer()
        pid, epoch = self.producers[txn_id]
        group_id = self.pick(SIMPLE_GROUPS + CLASSIC_GROUPS)
        # AddOffsetsToTxn: the group's partition joins the transaction.
        self.b.transactions.add_partitions(txn_id, pid, epoch, [(OFFSETS_TOPIC, self.b.groups.partition_for(group_id))])
        tp = self.pick(PARTITIONS)
        codes = self.b.groups.commit_txn_offsets(group_id, pid, epoch, "", None, -1, {tp: CommittedOffset(self.step)})
        assert codes == {tp: ErrorCode.none}
        self.offsets.pending.setdefault(pid, {}).setdefault(group_id, {})[tp] = (self.step, self.step)

    def end_txn(self) -> None:
        txn_id = self.producer()
        pid, epoch = self.producers[txn_id]
        commit, bump, complete = (self.rng.random() < 0.6, self.rng.random() < 0.5, self.rng.random() < 0.8)
        answer = self.b.transactions.end_txn(txn_id, pid, epoch, commit, bump_epoch=bump, complete=complete)
        self.producers[txn_id] = answer
        self.issued.add(answer[0])
        txn = self.txn(txn_id)
        done = {TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
        prepared = {TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT}
        assert txn.state in (done if complete else done | prepared)
        if txn.state in done:
            assert (txn.producer_id, txn.producer_epoch) == answer

    def complete_prepared(self) -> None:
        for txn_id, txn in list(self.b.transactions.transactions.items()):
            if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self.b.transactions.complete(txn_id)
                assert self.txn(txn_id).state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    def time_out_transactions(self) -> None:
        self.b.clock.now += TXN_TIMEOUT_MS / 1000 + 1
        for txn_id in self.b.transactions.abort_timed_out():
            assert self.txn(txn_id).state is TxnState.COMPLETE_ABORT

    def expire_transactional_ids(self) -> None:
        self.b.clock.now += 1
        for txn_id in self.b.transactions.expire_transactional_ids(expiration_ms=self.rng.choice((1, 30_000))):
            assert txn_id not in self.b.transactions.transactions
            self.producers.pop(txn_id, None)

    # --- offsets ------------------------------------------------------------------------

    def commit_offsets(self) -> None:
        group_id = self.pick(SIMPLE_GROUPS + CLASSIC_GROUPS + CONSUMER_GROUPS)
        group = self.b.groups.group(group_id)
        member_id, generation = "", -1
        if isinstance(group, ClassicGroup) and group.members:
            member_id, generation = self.pick(sorted(group.members)), group.generation
        elif isinstance(group, ConsumerGroup) and group.members:
            member = group.members[self.pick(sorted(group.members))]
            member_id, generation = member.member_id, member.member_epoch
        offsets = {tp: CommittedOffset(self.step) for tp in self.rng.sample(PARTITIONS, self.rng.randint(1, 2))}
        codes = self.b.groups.commit_offsets(group_id, member_id, None, generation, offsets, api_version=9)
        assert set(codes.values()) == {ErrorCode.none}
        for tp in offsets:
            self.offsets.committed.setdefault(group_id, {})[tp] = (self.step, self.step)

    def delete_offsets(self) -> None:
        group_id = self.pick(SIMPLE_GROUPS + CLASSIC_GROUPS + CONSUMER_GROUPS)
        codes = self.b.groups.delete_offsets(group_id, [self.pick(PARTITIONS)])
        for tp, code in codes.items():
            if code is ErrorCode.none:
                self.offsets.committed.get(group_id, {}).pop(tp, None)

    def delete_group(self) -> None:
        group_id = self.pick(SIMPLE_GROUPS + CLASSIC_GROUPS + CONSUMER_GROUPS + STREAMS_GROUPS + SHARE_GROUPS)
        if isinstance(self.b.groups.group(group_id), ShareGroup):
            self.shares.delete_group(group_id)  # as DeleteGroups does: its share-partitions go too
        else:
            self.b.groups.delete_group(group_id)
        self.offsets.deleted(group_id)
        assert self.b.groups.group(group_id) is None

    # --- classic groups -----------------------------------------------------------------

    async def form_classic_group(self) -> None:
        """An empty (or new) classic group gets members: JoinGroup, then SyncGroup."""
        group_id = self.pick(CLASSIC_GROUPS)
        group = self.b.groups.group(group_id)
        if group is not None and (not isinstance(group, ClassicGroup) or group.members):
            return
        ids = [(await self.b.groups.join(join_request(group_id=group_id))).member_id
               for _ in range(self.rng.randint(1, 3))]
        joins = [asyncio.ensure_future(self.b.groups.join(join_request(m, group_id=group_id))) for m in ids]
        await self.b.settle()
        self.b.groups.tick()
        results = [await join for join in joins]
        leader, generation = results[0].leader, results[0].generation
        followers = [asyncio.ensure_future(self.b.groups.sync(group_id, m, None, generation, None, None, {}))
                     for m in ids if m != leader]
        await self.b.settle()
        assigned = {m: f"{m}@{self.step}".encode() for m in ids}
        answers = [await self.b.groups.sync(group_id, leader, None, generation, "consumer", "range", assigned)]
        answers += [await sync for sync in followers]
        group = self.b.groups.group(group_id)
        assert isinstance(group, ClassicGroup) and group.state is GroupState.STABLE
        assert sorted(a.assignment for a in answers) == sorted(m.assignment for m in group.members.values())
        assert {m: group.members[m].assignment for m in ids} == assigned

    def leave_classic_group(self) -> None:
        group_id = self.pick(CLASSIC_GROUPS)
        group = self.b.groups.group(group_id)
        if not isinstance(group, ClassicGroup) or not group.members:
            return
        generation = group.generation
        self.b.groups.leave(group_id, [(m, None) for m in group.members])
        group = self.b.groups.group(group_id)
        assert isinstance(group, ClassicGroup)
        assert (group.state, group.generation, group.members) == (GroupState.EMPTY, generation + 1, {})

    def expire_sessions(self) -> None:
        self.b.clock.now += self.rng.choice((1, 11, 46))
        self.b.groups.tick()
        self.shares.tick()
        for group in self.b.groups.all_groups().values():
            if isinstance(group, ClassicGroup):
                assert group.state in (GroupState.STABLE, GroupState.EMPTY)

    # --- KIP-848 consumer groups ----------------------------------------------------------

    def heartbeat(self) -> None:
        group_id = self.pick(CONSUMER_GROUPS)
        group = self.b.groups.group(group_id)
        members = sorted(group.members) if isinstance(group, ConsumerGroup) else []
        kind = self.rng.random()
        if not members or kind < 0.3:
            instance_id = f"pod-{self.rng.randint(1, 3)}" if self.rng.random() < 0.3 else None
            answer = self.b.beat(group_id, self.new_member_id(), 0, instance_id=instance_id)
        else:
            member = group.members[self.pick(members)]  # type: ignore[union-attr]
            if kind < 0.45:
                answer = self.b.beat(group_id, member.member_id, -1, instance_id=member.instance_id)
                assert member.member_id not in self.b.groups.groups[group_id].members  # type: ignore[attr-defined]
                return
            if kind < 0.55 and member.instance_id is not None:
                answer = self.b.beat(group_id, member.member_id, -2, instance_id=member.instance_id)
            else:
                answer = self.b.beat(group_id, member.member_id, member.member_epoch, instance_id=member.instance_id,
                                     owned=dict(member.assigned))
        live = self.b.groups.describe_consumer_group(group_id).members[answer.member_id]
        assert live.member_epoch == answer.member_epoch
        if answer.assignment is not None:
            assert live.assigned == answer.assignment

    # --- KIP-1071 streams groups ----------------------------------------------------------

    def streams_heartbeat(self) -> None:
        from ottla.coordinator.streams_protocol import StreamsHeartbeatRequest

        from .test_streams_groups import TOPOLOGY

        group_id = self.pick(STREAMS_GROUPS)
        group = self.b.groups.group(group_id)
        members = sorted(group.members) if isinstance(group, StreamsGroup) else []
        kind = self.rng.random()
        if not members or kind < 0.3:
            request = StreamsHeartbeatRequest(group_id, self.new_member_id(), 0, rebalance_timeout_ms=30_000,
                                              topology=TOPOLOGY, active_tasks={}, standby_tasks={}, warmup_tasks={},
                                              process_id=f"process-{self.rng.randint(1, 2)}")
        else:
            member = group.members[self.pick(members)]  # type: ignore[union-attr]
            epoch = -1 if kind < 0.45 else member.member_epoch
            request = StreamsHeartbeatRequest(group_id, member.member_id, epoch, active_tasks=dict(
                member.assigned.active), standby_tasks=dict(member.assigned.standby), warmup_tasks={})
        answer = self.b.groups.streams_heartbeat(request)
        for name, (partitions, configs) in answer.to_create.items():  # as the request handler does
            self.b.logs.create_topic(name, partitions, dict(configs))
        if request.member_epoch >= 0:
            live = self.b.groups.describe_streams_group(group_id).members[answer.member_id]
            assert live.member_epoch == answer.member_epoch
            if answer.assignment is not None:
                assert live.assigned == answer.assignment

    # --- KIP-932 share groups -------------------------------------------------------------

    def share_heartbeat(self) -> None:
        """A member joins, heartbeats or leaves; its answer is what the group holds."""
        group_id = self.pick(SHARE_GROUPS)
        group = self.b.groups.group(group_id)
        members = sorted(group.members) if isinstance(group, ShareGroup) else []
        epoch_before = group.group_epoch if isinstance(group, ShareGroup) else 0
        kind = self.rng.random()
        if not members or kind < 0.3:
            member_id, epoch, topics = self.new_member_id(), 0, ("orders",)
        else:
            member_id = self.pick(members)
            epoch = -1 if kind < 0.45 else group.members[member_id].member_epoch  # type: ignore[union-attr]
            topics = None
        answer = self.shares.heartbeat(group_id, member_id, epoch, None, topics, "client", "/127.0.0.1")
        live = self.b.groups.group(group_id)
        assert isinstance(live, ShareGroup)
        if epoch <= 0:  # a member joining or leaving moves the group epoch on, once
            assert live.group_epoch == epoch_before + 1
        if epoch == -1:
            assert member_id not in live.members
            return
        assert live.members[member_id].member_epoch == answer.member_epoch
        if answer.assignment is not None:
            assert live.members[member_id].assigned == answer.assignment

    # --- the run --------------------------------------------------------------------------

    async def run(self, operations: int) -> None:
        choices = [
            self.init_producer_id, self.add_partitions, self.commit_txn_offsets, self.end_txn,
            self.complete_prepared, self.time_out_transactions, self.expire_transactional_ids,
            self.commit_offsets, self.delete_offsets, self.delete_group, self.form_classic_group,
            self.leave_classic_group, self.expire_sessions, self.heartbeat, self.heartbeat,
            self.streams_heartbeat, self.streams_heartbeat, self.share_heartbeat, self.share_heartbeat,
        ]
        await self.shares.load()
        for self.step in range(1, operations + 1):
            operation = self.rng.choice(choices)
            try:
                result = operation()
                if result is not None:
                    await result
            except KafkaError:
                pass  # refused: an answer too, and nothing changed (test_coordinator_write_failures)
            self.offsets.assert_held()
            if self.step % 25 == 0:
                await self.assert_restart_rebuilds_memory()
        await self.assert_restart_rebuilds_memory()

    async def assert_restart_rebuilds_memory(self) -> None:
        assert groups_view(self.b.groups) == await restarted_groups(self.b)
        assert self.b.transactions.transactions == transactions_in_log(self.b.logs)
        allocator = self.b.transactions.producer_ids
        restarted = ProducerIdAllocator(os.path.dirname(allocator.path))
        assert restarted.allocate() > max(self.issued)  # no id handed out twice


@pytest.mark.parametrize("seed", range(6))
async def test_memory_is_what_a_restart_rebuilds_after_any_operations(tmp_path, seed):
    broker = await open_broker(str(tmp_path), lambda group_id: GROUP_CONFIGS.get(group_id, {}))
    await Run(broker, seed).run(OPERATIONS)
