"""Every group and transaction request whose write to `__consumer_offsets` or
`__transaction_state` fails (the admin endpoint's disk_error fault on those topics) is
answered with Kafka's NOT_COORDINATOR, on a connection that stays open; nothing it
would have changed is changed, and a restart rebuilds from the log what the broker
described before.

Evidence: with the records replayed before the append in coordinator/writes.py's
`write` (memory changed before the log), the LeaveGroup of a Stable group's last member
empties the group though its record was refused, the member's next OffsetCommit is
answered UNKNOWN_MEMBER_ID and the test fails there; on 6820359, before the
coordinators had that rule, the broker closed the connection at the first refused
write, a SyncGroup.
"""

from __future__ import annotations

import struct
from typing import Any

from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic
from tests.wire import WireClient, request

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS = 15, 16, 18, 22, 24, 25
END_TXN, TXN_OFFSET_COMMIT, DELETE_GROUPS, OFFSET_DELETE, DESCRIBE_TRANSACTIONS = 26, 28, 42, 47, 65
CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE = 68, 69
NOT_COORDINATOR = ErrorCode.not_coordinator


def _subscription(topic: str) -> bytes:
    """A consumer-protocol subscription (version 0) to one topic."""
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


class Client:
    """One connection, and the requests of this test in Kafka's wire format."""

    def __init__(self, wire: WireClient, topic: str) -> None:
        self.wire = wire
        self.topic = topic

    def join(self, group: str, member: str = "") -> Any:
        return self.wire.call(request(JOIN_GROUP, 5, group_id=group, session_timeout=60_000,
                                      rebalance_timeout=60_000, member_id=member, group_instance_id=None,
                                      protocol_type="consumer",
                                      protocols=[{"name": "range", "metadata": _subscription(self.topic)}]))

    def sync(self, group: str, member: str, generation: int, assignment: bytes) -> Any:
        return self.wire.call(request(SYNC_GROUP, 3, group_id=group, generation_id=generation, member_id=member,
                                      group_instance_id=None,
                                      assignments=[{"member_id": member, "assignment": assignment}]))

    def stable_group(self, group: str) -> str:
        """A classic group of one member, Stable at generation 1: the member's id."""
        member = self.join(group).member_id
        joined = self.join(group, member)
        assert (joined.error_code, joined.generation_id, joined.leader) == (ErrorCode.none, 1, member)
        assert self.sync(group, member, 1, b"assigned").error_code == ErrorCode.none
        return member

    def heartbeat(self, group: str, member: str, generation: int) -> Any:
        return self.wire.call(request(HEARTBEAT, 3, group_id=group, generation_id=generation, member_id=member,
                                      group_instance_id=None))

    def leave(self, group: str, member: str) -> Any:
        return self.wire.call(request(LEAVE_GROUP, 3, group_id=group,
                                      members=[{"member_id": member, "group_instance_id": None}]))

    def commit(self, group: str, member: str, generation: int, offset: int, version: int = 8) -> ErrorCode:
        """OffsetCommit (v9 for a member of a consumer group)."""
        answer = self.wire.call(request(OFFSET_COMMIT, version, group_id=group, member_id=member,
                                        generation_id_or_member_epoch=generation, group_instance_id=None, topics=[
                                            {"name": self.topic, "partitions": [
                                                {"partition_index": 0, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]))
        return answer.topics[0].partitions[0].error_code

    def consumer_heartbeat(self, group: str, member: str, epoch: int) -> Any:
        fields: dict[str, Any] = {"rebalance_timeout": 60_000, "subscribed_topic_names": [self.topic],
                                  "topic_partitions": []} if epoch == 0 else {"topic_partitions": None}
        return self.wire.call(request(CONSUMER_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch,
                                      **fields))

    def init_producer_id(self, txn_id: str) -> Any:
        return self.wire.call(request(INIT_PRODUCER_ID, 4, transactional_id=txn_id, transaction_timeout=60_000,
                                      producer_id=-1, producer_epoch=-1))

    def add_partition(self, txn_id: str, producer: Any, partition: int) -> ErrorCode:
        answer = self.wire.call(request(ADD_PARTITIONS, 3, v3_and_below_transactional_id=txn_id,
                                        v3_and_below_producer_id=producer.producer_id,
                                        v3_and_below_producer_epoch=producer.producer_epoch,
                                        v3_and_below_topics=[{"name": self.topic, "partitions": [partition]}]))
        return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

    def add_offsets(self, txn_id: str, producer: Any, group: str) -> ErrorCode:
        return self.wire.call(request(ADD_OFFSETS, 3, transactional_id=txn_id, producer_id=producer.producer_id,
                                      producer_epoch=producer.producer_epoch, group_id=group)).error_code

    def txn_commit(self, txn_id: str, producer: Any, group: str, offset: int) -> ErrorCode:
        answer = self.wire.call(request(TXN_OFFSET_COMMIT, 3, transactional_id=txn_id, group_id=group,
                                        producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
                                        generation_id=-1, member_id="", group_instance_id=None, topics=[
                                            {"name": self.topic, "partitions": [
                                                {"partition_index": 0, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]))
        return answer.topics[0].partitions[0].error_code

    def end_txn(self, txn_id: str, producer: Any, commit: bool) -> ErrorCode:
        return self.wire.call(request(END_TXN, 3, transactional_id=txn_id, producer_id=producer.producer_id,
                                      producer_epoch=producer.producer_epoch, committed=commit)).error_code

    def view(self, classic: list[str], consumer: list[str], txn_ids: list[str]) -> dict[str, Any]:
        """What the broker describes of these groups, their offsets and these
        transactions."""
        described = self.wire.call(request(DESCRIBE_GROUPS, 5, groups=classic, include_authorized_operations=False))
        consumers = self.wire.call(request(CONSUMER_DESCRIBE, 1, group_ids=consumer,
                                           include_authorized_operations=False))
        offsets = self.wire.call(request(OFFSET_FETCH, 8, require_stable=False, groups=[
            {"group_id": g, "topics": None} for g in classic + consumer]))
        listed = self.wire.call(request(LIST_GROUPS, 5, states_filter=[], types_filter=[]))
        transactions = self.wire.call(request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=txn_ids))
        return {
            "groups": {g.group_id: (g.error_code, g.group_state, g.protocol_type, g.protocol_data, sorted(
                (m.member_id, m.member_assignment) for m in g.members)) for g in described.groups},
            "consumer groups": {g.group_id: (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, sorted(
                (m.member_id, m.member_epoch, [(t.topic_name, sorted(t.partitions))
                                               for t in m.assignment.topic_partitions]) for m in g.members))
                                for g in consumers.groups},
            "offsets": {g.group_id: (g.error_code, sorted((t.name, p.partition_index, p.committed_offset)
                                                          for t in g.topics for p in t.partitions))
                        for g in offsets.groups},
            "listed": sorted((g.group_id, g.group_state, g.group_type) for g in listed.groups),
            "transactions": {t.transactional_id: (t.error_code, t.transaction_state, t.producer_id, t.producer_epoch,
                                                  sorted((x.topic, sorted(x.partitions)) for x in t.topics))
                             for t in transactions.transaction_states},
        }


def test_requests_whose_writes_fail_are_answered_not_coordinator_and_change_nothing(fresh_broker, topic_name):
    broker = fresh_broker(admin_port=0, group_initial_rebalance_delay_ms=0)
    create_topic(broker.bootstrap, topic_name, 2)
    classic = ["leaving", "syncing", "offsets-only", "newcomer"]
    consumer = ["consumers", "consumers-empty"]
    txn_ids = ["open", "idle", "unknown"]
    with WireClient(broker.bootstrap) as wire:
        client = Client(wire, topic_name)
        leaving = client.stable_group("leaving")
        assert client.commit("leaving", leaving, 1, 5) == ErrorCode.none
        syncing = client.stable_group("syncing")
        assert client.commit("offsets-only", "", -1, 7) == ErrorCode.none
        joined = client.consumer_heartbeat("consumers", "m1", 0)
        assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
        assert client.commit("consumers", "m1", 1, 11, version=9) == ErrorCode.none
        assert client.consumer_heartbeat("consumers-empty", "e1", 0).error_code == ErrorCode.none
        assert client.consumer_heartbeat("consumers-empty", "e1", -1).error_code == ErrorCode.none
        open_txn = client.init_producer_id("open")
        assert client.add_partition("open", open_txn, 0) == ErrorCode.none
        # "idle" had a transaction, committed (DescribeTransactions of an Empty one has a
        # start time of -1, which the wire client cannot read).
        idle = client.init_producer_id("idle")
        assert client.add_partition("idle", idle, 1) == ErrorCode.none
        assert client.end_txn("idle", idle, commit=True) == ErrorCode.none
        assert client.add_offsets("open", open_txn, "offsets-only") == ErrorCode.none
        assert client.txn_commit("open", open_txn, "offsets-only", 8) == ErrorCode.none
        before = client.view(classic, consumer, txn_ids)
        assert before["groups"]["leaving"][1] == "Stable" and before["transactions"]["open"][1] == "Ongoing"
        assert before["transactions"]["idle"][1] == "CompleteCommit"

        # A new generation of "syncing" is joined (that writes nothing); its assignment
        # is what the failing disk will refuse.
        rejoined = client.join("syncing", syncing)
        assert (rejoined.error_code, rejoined.generation_id) == (ErrorCode.none, 2)

        for topic in ("__consumer_offsets", "__transaction_state"):
            broker.admin.add_fault(kind="disk_error", topic=topic, count=1_000_000)
        # Each answer comes on the same connection: none of them closes it.
        assert client.sync("syncing", syncing, 2, b"next").error_code == NOT_COORDINATOR
        assert client.join("consumers-empty").error_code == NOT_COORDINATOR  # it would become a classic group
        assert client.heartbeat("leaving", leaving, 1).error_code == ErrorCode.none  # writes nothing
        left = client.leave("leaving", leaving)
        assert (left.error_code, list(left.members)) == (NOT_COORDINATOR, [])
        assert client.commit("leaving", leaving, 1, 99) == NOT_COORDINATOR
        assert client.commit("newcomer", "", -1, 1) == NOT_COORDINATOR
        assert client.txn_commit("open", open_txn, "offsets-only", 9) == NOT_COORDINATOR
        deleted = wire.call(request(DELETE_GROUPS, 2, groups_names=["offsets-only"]))
        assert deleted.results[0].error_code == NOT_COORDINATOR
        offsets_deleted = wire.call(request(OFFSET_DELETE, 0, group_id="offsets-only", topics=[
            {"name": topic_name, "partitions": [{"partition_index": 0}]}]))
        assert offsets_deleted.error_code == NOT_COORDINATOR
        assert client.consumer_heartbeat("consumers", "m2", 0).error_code == NOT_COORDINATOR
        assert client.consumer_heartbeat("consumers", "m1", -1).error_code == NOT_COORDINATOR
        assert client.consumer_heartbeat("brand-new", "n1", 0).error_code == NOT_COORDINATOR
        assert client.init_producer_id("unknown").error_code == NOT_COORDINATOR
        assert client.init_producer_id("idle").error_code == NOT_COORDINATOR  # an epoch bump
        assert client.init_producer_id("open").error_code == NOT_COORDINATOR  # fencing the open transaction
        assert client.add_partition("open", open_txn, 1) == NOT_COORDINATOR
        assert client.add_partition("idle", idle, 0) == NOT_COORDINATOR
        assert client.add_offsets("idle", idle, "leaving") == NOT_COORDINATOR
        assert client.end_txn("open", open_txn, commit=True) == NOT_COORDINATOR
        assert client.end_txn("open", open_txn, commit=False) == NOT_COORDINATOR
        assert wire.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")).error_code \
            == ErrorCode.none

        during = client.view(classic, consumer, txn_ids)
        # As in Kafka, the group whose assignment was refused rebalances (nothing of it is
        # in the log); everything else is as it was.
        assert during["groups"].pop("syncing")[1] == "PreparingRebalance"
        assert during == {**before, "groups": {g: d for g, d in before["groups"].items() if g != "syncing"},
                          "listed": [g if g[0] != "syncing" else ("syncing", "PreparingRebalance", "classic")
                                     for g in before["listed"]]}
        broker.admin.clear_faults()
    assert "coordinator write failed: nothing changed" in broker.log()
    assert "handler failed" not in broker.log()

    broker.restart()
    with WireClient(broker.bootstrap) as wire:
        assert Client(wire, topic_name).view(classic, consumer, txn_ids) == before
