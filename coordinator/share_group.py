"""A share group's membership (KIP-932): its members, the group epoch, and the
assignment Kafka's share assignor (SimpleAssignor) gives them.

Share groups have no revocation step: a partition may be consumed by several members
at once (the share-partition hands each record to one of them), so a member gets its
target assignment at once, with the assignment epoch, at its next heartbeat.

The assignor, as Kafka 4.3's SimpleHomogeneousAssignmentBuilder: every subscribed
partition goes to ceil(members / partitions) members (one, while there are at least as
many partitions as members), and each member gets a balanced share of those slots;
partitions a member already has stay with it where the balance allows.

Membership is kept in memory only (see docs/share-groups.md): after a restart a share
group is known again (empty) from its share-partitions in `__share_group_state`, and
its members join again (their heartbeats get UNKNOWN_MEMBER_ID and they rejoin).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError

from .assignors import Assignment
from .group import Group, GroupType
from .writes import Records

# A member leaving (ShareGroupHeartbeat member epoch -1).
LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    last_heartbeat: float = 0.0


@dataclass
class ShareGroup(Group):
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # The subscribed topics' (name, id, partitions) the epoch was computed for.
    subscribed_metadata: frozenset[tuple[str, uuid.UUID, int]] = frozenset()
    protocol_type: str | None = "share"

    @property
    def type(self) -> GroupType:
        return GroupType.SHARE

    @property
    def state_name(self) -> str:
        """Kafka's ShareGroupState names."""
        return "Stable" if self.members else "Empty"

    def member(self, member_id: str) -> ShareMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def subscribed_topics(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    # --- what the other group APIs ask of every group --------------------------------------

    def _not_consumer_group(self) -> KafkaError:
        return KafkaError(ErrorCode.group_id_not_found, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int | None = None) -> None:
        raise self._not_consumer_group()

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> None:
        raise self._not_consumer_group()

    def validate_delete(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.non_empty_group, f"Share group {self.group_id} is not empty.")

    def topics_in_use(self) -> set[str]:
        return self.subscribed_topics()

    def tombstones(self) -> Records:
        return []  # no record of a share group's membership is written


def simple_assignment(members: list[str], subscriptions: dict[str, frozenset[uuid.UUID]],
                      partition_counts: dict[uuid.UUID, int],
                      previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's SimpleAssignor for members that may subscribe to different topics: per
    topic, its partitions are shared by the members subscribed to it."""
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for topic_id in sorted(partition_counts, key=str):
        subscribers = [m for m in members if topic_id in subscriptions.get(m, frozenset())]
        partitions = list(range(partition_counts[topic_id]))
        if not subscribers or not partitions:
            continue
        sharing = -(-len(subscribers) // len(partitions))  # ceil: members per partition
        slots = len(partitions) * sharing
        # Member i may hold `quota[i]` partitions: the slots spread as evenly as they go.
        quota = {m: slots // len(subscribers) + (1 if i < slots % len(subscribers) else 0)
                 for i, m in enumerate(subscribers)}
        holders: dict[int, list[str]] = {p: [] for p in partitions}
        for m in subscribers:  # keep what members had, within the balance
            for p in sorted(previous.get(m, {}).get(topic_id, frozenset())):
                if p in holders and len(holders[p]) < sharing and quota[m] > 0 and m not in holders[p]:
                    holders[p].append(m)
                    quota[m] -= 1
        for p in partitions:  # then fill the free slots, the emptiest partitions first
            while len(holders[p]) < sharing:
                candidates = [m for m in subscribers if quota[m] > 0 and m not in holders[p]]
                if not candidates:
                    break
                chosen = max(candidates, key=lambda m: quota[m])
                holders[p].append(chosen)
                quota[chosen] -= 1
        for p, ms in holders.items():
            for m in ms:
                result[m].setdefault(topic_id, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in result.items()}
