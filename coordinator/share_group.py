"""A share group's membership (KIP-932): its members, the group epoch, and the
assignment Kafka's share assignor (SimpleAssignor) gives them.

Share groups have no revocation step: a partition may be consumed by several members
at once (the share-partition hands each record to one of them), so a member gets its
target assignment at once, with the assignment epoch, at its next heartbeat.

The assignor, as Kafka 4.3's SimpleHomogeneousAssignmentBuilder: every subscribed
partition goes to ceil(members / partitions) members (one, while there are at least as
many partitions as members), and each member gets a balanced share of those slots;
partitions a member already has stay with it where the balance allows.

Membership is kept in `__consumer_offsets` as Kafka keeps it (share_group_records.py):
the group's epoch and metadata hash, each member's metadata, the target assignment and
each member's current assignment. `replay` of those records is the one way a share
group changes, while the broker serves and when a restart rebuilds it. What is not in
the log: each member's last heartbeat (its session starts again at a restart).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError

from .assignors import Assignment
from .group import Group, GroupType
from .share_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ShareGroupKey,
    decode_assignment_epoch,
    decode_current_assignment,
    decode_group_metadata,
    decode_member_metadata,
    decode_target_assignment,
    encode_key,
)
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
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    last_heartbeat: float = 0.0  # memory only


@dataclass
class ShareGroup(Group):
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # metadata_hash() of the subscribed topics the epoch was computed for.
    metadata_hash: int = 0
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

    def replay(self, key: ShareGroupKey, value: bytes | None) -> None:
        """Apply one of the group's records: the one way it changes, at start-up and
        after every append."""
        kind, member_id = key.type, key.member or ""
        if kind == GROUP_METADATA and value is not None:
            self.group_epoch, self.metadata_hash = decode_group_metadata(value)
        elif kind == TARGET_ASSIGNMENT_METADATA and value is not None:
            self.assignment_epoch = decode_assignment_epoch(value)
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = decode_target_assignment(value)
        elif kind == MEMBER_METADATA:
            if value is None:
                self.members.pop(member_id, None)
            else:
                m = decode_member_metadata(value)
                member = self.members.setdefault(member_id, ShareMember(member_id))
                member.rack_id, member.client_id, member.client_host = m.rack_id, m.client_id, m.client_host
                member.subscribed_topic_names = m.subscribed_topic_names
        elif kind == CURRENT_MEMBER_ASSIGNMENT and value is not None:
            a = decode_current_assignment(value)
            member = self.members.setdefault(member_id, ShareMember(member_id))
            member.member_epoch, member.previous_member_epoch = a.member_epoch, a.previous_member_epoch
            member.assigned = a.assigned
        # ShareGroupPartitionMetadata and ShareGroupStatePartitionMetadata: not used.

    def member_tombstones(self, member_id: str) -> Records:
        """The records that remove a member, in Kafka's order."""
        return [(encode_key(ShareGroupKey(kind, self.group_id, member_id)), None)
                for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)]

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
        """The records that delete the group: its members', then its own."""
        records = [r for member_id in self.members for r in self.member_tombstones(member_id)]
        return records + [(encode_key(ShareGroupKey(kind, self.group_id)), None)
                          for kind in (TARGET_ASSIGNMENT_METADATA, GROUP_METADATA)]


def metadata_hash(metadata: frozenset[tuple[str, uuid.UUID, int]]) -> int:
    """A stable int64 of the subscribed topics' (name, id, partition count): a change of
    it bumps the group epoch (Kafka's MetadataHash, computed otherwise)."""
    if not metadata:
        return 0
    digest = hashlib.blake2b(repr(sorted(metadata, key=str)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


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
