"""The share coordinator (KIP-932): share groups' membership (ShareGroupHeartbeat) and
their share-partitions, with `__share_group_state`, the topic that keeps those durable.

Share groups live in the group coordinator's registry beside classic and consumer
groups (one namespace of group ids, one ListGroups), but this module owns what is
theirs: members and assignment (share_group.py) and the record state of every
share-partition (share_partition.py).

Every share-partition's records go to the partition of `__share_group_state` that
Kafka's share coordinator uses: abs(hashCode("group:topicId:partition")) % partitions.
Changes follow writes.py: the records are appended, then replayed into memory (the same
replay the start-up load does); an append that fails changes nothing.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger
from ottla.protocol.records import keys_and_values
from ottla.storage.log import PartitionLog
from ottla.storage.log_manager import LogManager, topic_id_text

from .assignors import Assignment
from .group import Group
from .group_resource_configs import effective, share_group_definitions
from .loading import replay
from .share_config import ShareConfig, duration_ms
from .share_group import LEAVE_GROUP_MEMBER_EPOCH, ShareGroup, ShareMember, metadata_hash, simple_assignment
from .share_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ShareCurrentAssignment,
    ShareGroupKey,
    ShareMemberMetadata,
    encode_assignment_epoch,
    encode_current_assignment,
    encode_group_metadata,
    encode_member_metadata,
    encode_target_assignment,
)
from .share_group_records import encode_key as encode_group_key
from .share_partition import ACKNOWLEDGED, ARCHIVED, AckBatch, Acquired, LogBatch, SharePartition
from .share_state_records import SNAPSHOT, TOPIC, UPDATE, ShareStateKey, decode_key, decode_value, encode_key
from .transaction_log import partition_for
from .writes import CoordinatorResult, Records, append_error, write

log = get_logger("ottla.share")
T = TypeVar("T")
SharePartitionKey = tuple[str, uuid.UUID, int]

# Kafka's share.coordinator.state.topic.* settings.
STATE_TOPIC_CONFIGS = {"cleanup.policy": "delete", "min.insync.replicas": "1"}
# Bytes an acquisition reads from the log at a time: it takes batches until it has the
# records it may acquire (share.partition.max.record.locks in flight at most, the last
# batch whole), and a read of the request's whole max_bytes (50 MiB by default) would
# mostly be thrown away.
READ_CHUNK = 256 * 1024


@dataclass(frozen=True)
class GroupSettings:
    """One share group's settings: its GROUP configs over the broker's defaults."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: str
    read_committed: bool
    renew_enabled: bool


@dataclass
class HeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None



@dataclass
class ShareCoordinator:
    logs: LogManager
    create_state_topic: Callable[[], None]
    config: ShareConfig
    # The group coordinator's registry: share groups are registered there.
    groups: dict[str, Group]
    group_loading: Callable[[str], bool]
    group_configs: Callable[[str], Mapping[str, str]] = lambda _: {}
    # The group coordinator's write to `__consumer_offsets` (OffsetStore.write): the
    # share groups' membership records go there, replayed into `groups`.
    write_group: Callable[[str, CoordinatorResult[None]], None] = field(kw_only=True)
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    partitions: dict[SharePartitionKey, SharePartition] = field(default_factory=dict)
    _loading: bool = True

    # --- settings ------------------------------------------------------------------------

    def settings(self, group_id: str) -> GroupSettings:
        # A number: the group's own within the broker's bounds of now, as other groups'
        # (effective: Kafka's GroupConfig.evaluate). The others: its own if valid.
        overrides = self.group_configs(group_id)
        defined, choices = share_group_definitions(self.config)

        def value(name: str) -> object:
            default, parse = choices[name]
            try:
                return parse(overrides.get(name, default))
            except ValueError:
                return parse(default)

        return GroupSettings(
            effective(defined, overrides, "share.session.timeout.ms"),
            effective(defined, overrides, "share.heartbeat.interval.ms"),
            effective(defined, overrides, "share.record.lock.duration.ms"),
            effective(defined, overrides, "share.delivery.count.limit"),
            effective(defined, overrides, "share.partition.max.record.locks"),
            str(value("share.auto.offset.reset")),
            value("share.isolation.level") == "read_committed",
            bool(value("share.renew.acknowledge.enable")),
        )

    # --- __share_group_state ---------------------------------------------------------------

    def _state_log(self, key: SharePartitionKey) -> tuple[int, PartitionLog]:
        if self.logs.topic(TOPIC) is None:
            self.create_state_topic()
        topic = self.logs.topic(TOPIC)
        assert topic is not None
        index = partition_for(f"{key[0]}:{topic_id_text(key[1])}:{key[2]}", len(topic.partitions))
        return index, topic.partitions[index]

    def _write(self, key: SharePartitionKey, result: CoordinatorResult[T]) -> T:
        """Append the result's records to the share-partition's partition of
        `__share_group_state`, replay them (as the start-up load does), then apply what
        the result changes outside the log (locks). An append that fails changes nothing."""
        def append(records: list[tuple[bytes, bytes | None]]) -> int:
            index, partition_log = self._state_log(key)
            batch = build_batch([encode_record(k, v, offset_delta=i) for i, (k, v) in enumerate(records)],
                                timestamp=int(self.wall_clock() * 1000))
            try:
                return partition_log.append_batch(batch, BatchHeader.parse(batch), from_coordinator=True).base_offset
            except KafkaError as exc:
                raise append_error(exc, f"{TOPIC}-{index}") from None

        def replay(offset: int, record_key: bytes, value: bytes | None) -> None:
            decoded = decode_key(record_key)
            assert decoded is not None, "a share-state record this coordinator wrote"
            self._replay(decoded, value)
        return write(result, append, replay)

    async def load(self) -> int:
        """Replay `__share_group_state` into the share-partitions; the groups they belong
        to are known again, empty. Returns how many share-partitions."""
        topic = self.logs.topic(TOPIC)
        if topic is not None:
            for partition_log in topic.partitions:
                await replay(partition_log, self._replay_batch)
        for group_id, _, _ in self.partitions:
            if group_id not in self.groups:
                self.groups[group_id] = ShareGroup(group_id)
        now = self.clock()
        for group in self.groups.values():  # members rebuilt from __consumer_offsets
            if isinstance(group, ShareGroup):
                for member in group.members.values():
                    member.last_heartbeat = now  # their sessions start now
        self._loading = False
        return len(self.partitions)

    def _replay_batch(self, header: BatchHeader, batch: bytes) -> None:
        if header.is_control:
            return
        for _, key, value in keys_and_values(batch):
            decoded = decode_key(key) if key is not None else None
            if decoded is not None:
                self._replay(decoded, value)

    def _replay(self, key: ShareStateKey, value: bytes | None) -> None:
        """One record of `__share_group_state`; a tombstone deletes the share-partition."""
        share_key = (key.group, key.topic_id, key.partition)
        if value is None:
            self.partitions.pop(share_key, None)
            return
        sp = self.partitions.get(share_key)
        if sp is None:
            sp = self.partitions[share_key] = SharePartition(*share_key)
        sp.replay(key.type, decode_value(key.type, value))

    def _delete_state(self, key: SharePartitionKey) -> None:
        """Tombstone a share-partition's records (written, then replayed)."""
        records: list[tuple[bytes, bytes | None]] = [(encode_key(ShareStateKey(kind, *key)), None)
                                                     for kind in (SNAPSHOT, UPDATE)]
        self._write(key, CoordinatorResult(records, None))

    @property
    def loading(self) -> bool:
        return self._loading

    def require_loaded(self, group_id: str) -> None:
        if self._loading or self.group_loading(group_id):
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"the coordinator of share group {group_id!r} is still loading")

    # --- membership ------------------------------------------------------------------------

    def share_group(self, group_id: str, create: bool = False, heartbeat: bool = False) -> ShareGroup:
        """The share group of that id (a new one, not registered, with `create`). Kafka
        words "not found" differently for a heartbeat and for ShareGroupDescribe."""
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return group
        if group is None and create:
            return ShareGroup(group_id)
        if group is None:
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Share group {group_id} not found." if heartbeat else f"Group {group_id} not found.")
        raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return isinstance(group, ShareGroup) and member_id in group.members

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: tuple[str, ...] | None, client_id: str, client_host: str) -> HeartbeatResult:
        """ShareGroupHeartbeat, as Kafka's GroupMetadataManager.shareGroupHeartbeat."""
        if not group_id.strip():
            raise KafkaError(ErrorCode.invalid_request, "GroupId can't be empty.")
        if rack_id is not None and not rack_id.strip():
            raise KafkaError(ErrorCode.invalid_request, "RackId can't be empty.")
        if not member_id.strip():
            raise KafkaError(ErrorCode.invalid_request, "MemberId can't be empty.")
        if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise KafkaError(ErrorCode.invalid_request, "MemberEpoch is invalid.")
        if member_epoch == 0 and not subscribed_topic_names:
            raise KafkaError(ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request.")
        self.require_loaded(group_id)
        now = self.clock()
        settings = self.settings(group_id)
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            group = self.share_group(group_id, heartbeat=True)
            group.member(member_id)
            self.remove_member(group, member_id)
            return HeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        group = self.share_group(group_id, create=member_epoch == 0, heartbeat=True)
        member = group.members.get(member_id)
        if member is None:
            if member_epoch != 0:
                raise KafkaError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.max_size:
                raise KafkaError(ErrorCode.group_max_size_reached,
                                 f"The share group has reached its maximum capacity of {self.config.max_size} members.")
            member = ShareMember(member_id)
        elif member_epoch not in (0, member.member_epoch):
            relation = "greater" if member_epoch > member.member_epoch else "smaller"
            raise KafkaError(ErrorCode.fenced_member_epoch,
                             f"The share group member has a {relation} member epoch ({member_epoch}) than the one "
                             f"known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")
        new = member_id not in group.members
        subscribed = member.subscribed_topic_names if subscribed_topic_names is None else tuple(subscribed_topic_names)
        metadata = ShareMemberMetadata(member.rack_id if rack_id is None else rack_id, client_id, client_host,
                                       subscribed)
        records: Records = []
        if new or metadata != ShareMemberMetadata(member.rack_id, member.client_id, member.client_host,
                                                  member.subscribed_topic_names):
            records.append(_record(MEMBER_METADATA, group_id, encode_member_metadata(metadata), member_id))
        subscriptions = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        subscriptions[member_id] = subscribed
        topics = self._metadata({name for names in subscriptions.values() for name in names})
        group_epoch, hashed = group.group_epoch, metadata_hash(topics)
        if new or subscribed != member.subscribed_topic_names or hashed != group.metadata_hash:
            group_epoch += 1
            records.append(_record(GROUP_METADATA, group_id, encode_group_metadata(group_epoch, hashed)))
        assignment_epoch, target = group.assignment_epoch, group.target
        if group_epoch > assignment_epoch:
            target = self._assign(subscriptions, topics, group.target)
            records += [_record(TARGET_ASSIGNMENT_MEMBER, group_id, encode_target_assignment(a), m)
                        for m, a in target.items() if group.target.get(m) != a or m not in group.target]
            assignment_epoch = group_epoch
            records.append(_record(TARGET_ASSIGNMENT_METADATA, group_id, encode_assignment_epoch(assignment_epoch)))
        # Share groups have no revocation: a member is given its target at once.
        full = member_epoch == 0 or subscribed_topic_names is not None
        epoch, assigned, answered = member.member_epoch, member.assigned, None
        if epoch != assignment_epoch or full:
            answered = target.get(member_id, {})
            if new or (epoch, assigned) != (assignment_epoch, answered):
                current = ShareCurrentAssignment(assignment_epoch, epoch, answered)
                records.append(_record(CURRENT_MEMBER_ASSIGNMENT, group_id, encode_current_assignment(current),
                                       member_id))
            epoch, assigned = assignment_epoch, answered

        def heard() -> None:  # the replay made (or moved on) the group and the member
            joined = self.groups[group_id]
            assert isinstance(joined, ShareGroup)
            joined.members[member_id].last_heartbeat = now

        self.write_group(group_id, CoordinatorResult(records, None, heard))
        self._initialize(group_id, assigned, settings)
        return HeartbeatResult(member_id=member_id, member_epoch=epoch,
                               heartbeat_interval_ms=settings.heartbeat_interval_ms, assignment=answered)

    def _metadata(self, names: set[str]) -> frozenset[tuple[str, uuid.UUID, int]]:
        topics = self.logs.topics
        return frozenset((n, topics[n].topic_id, len(topics[n].partitions))
                         for n in names if n in topics and not topics[n].internal)

    def _assign(self, subscriptions: dict[str, tuple[str, ...]], topics: frozenset[tuple[str, uuid.UUID, int]],
                previous: dict[str, Assignment]) -> dict[str, Assignment]:
        ids = {name: topic_id for name, topic_id, _ in topics}
        by_member = {m: frozenset(ids[n] for n in names if n in ids) for m, names in subscriptions.items()}
        counts = {topic_id: partitions for _, topic_id, partitions in topics}
        return simple_assignment(sorted(subscriptions), by_member, counts, previous)

    def _initialize(self, group_id: str, assignment: Assignment, settings: GroupSettings) -> None:
        """Start the share-partitions of an assignment that have no state yet, at the
        offset share.auto.offset.reset says, as Kafka's group coordinator initializes
        them when they are first assigned."""
        for topic_id, partitions in assignment.items():
            for p in partitions:
                self.share_partition(group_id, topic_id, p, settings)

    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int,
                        settings: GroupSettings) -> SharePartition | None:
        """The share-partition, initialized on first use; None if the partition does not exist."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is not None and sp.initialized:
            return sp
        topic = self.logs.topic_by_id(topic_id)
        if topic is None or not 0 <= partition < len(topic.partitions):
            return None
        partition_log = topic.partitions[partition]
        reset = settings.auto_offset_reset
        if reset == "earliest":
            start = partition_log.log_start_offset
        elif reset.startswith("by_duration:"):
            since = int(self.wall_clock() * 1000) - (duration_ms(reset[len("by_duration:"):]) or 0)
            found = partition_log.offset_for_timestamp(since)
            start = found[0] if found is not None else partition_log.high_watermark
        else:
            start = partition_log.high_watermark
        new = sp or SharePartition(group_id, topic_id, partition)  # the replay registers a new one
        self._write(key, new.initialize(start, int(self.wall_clock() * 1000)))
        return self.partitions[key]

    def remove_member(self, group: ShareGroup, member_id: str) -> None:
        """A member leaves (or its session expired): its records are tombstoned, the
        group epoch moves on (the others get their new assignment at their next
        heartbeat), and the records it held go back."""
        left = {name for m in group.members.values() if m.member_id != member_id for name in m.subscribed_topic_names}
        epoch = encode_group_metadata(group.group_epoch + 1, metadata_hash(self._metadata(left)))
        records = group.member_tombstones(member_id) + [_record(GROUP_METADATA, group.group_id, epoch)]
        self.write_group(group.group_id, CoordinatorResult(records, None))
        self.release_member(group.group_id, member_id)

    def release_member(self, group_id: str, member_id: str,
                       only: Iterable[SharePartitionKey] | None = None) -> None:
        settings = self.settings(group_id)
        keys = [k for k in self.partitions if k[0] == group_id] if only is None else list(only)
        for key in keys:
            sp = self.partitions.get(key)
            if sp is not None:
                self._write(key, sp.release_member(member_id, settings.delivery_count_limit,
                                                   int(self.wall_clock() * 1000)))

    def tick(self) -> list[tuple[str, str]]:
        """Expire members whose session ran out, and records whose lock did at the
        delivery-count limit (archived). Returns the (group, member) pairs expired."""
        if self._loading:
            return []
        now = self.clock()
        expired = []
        for group in [g for g in self.groups.values() if isinstance(g, ShareGroup)]:
            timeout = self.settings(group.group_id).session_timeout_ms / 1000
            for member in list(group.members.values()):
                if now - member.last_heartbeat > timeout:
                    try:
                        self.remove_member(group, member.member_id)
                    except KafkaError as exc:
                        log.warning("share group member not removed: its records cannot be written",
                                    group=group.group_id, member=member.member_id, error=exc.code.name)
                        continue
                    expired.append((group.group_id, member.member_id))
        for key, sp in list(self.partitions.items()):
            deadline = sp.next_lock_deadline()
            if deadline is not None and deadline <= now:
                try:
                    self._write(key, sp.expire_locks(now, self.settings(key[0]).delivery_count_limit,
                                                     int(self.wall_clock() * 1000)))
                except KafkaError:
                    pass  # tried again at the next tick; the lock stays expired meanwhile
        return expired

    # --- records -----------------------------------------------------------------------------

    def acquire(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int, max_records: int,
                max_bytes: int, record_limit: bool = False) -> tuple[Acquired, list[bytes | memoryview]]:
        """Acquire records of one share-partition for a member: the ranges and the log
        batches that hold them. Only a share-partition the group started (at an
        assignment, or AlterShareGroupOffsets) gives records, as in Kafka: a ShareFetch
        naming any group and partition creates nothing."""
        settings = self.settings(group_id)
        sp = self.partitions.get((group_id, topic_id, partition))
        topic = self.logs.topic_by_id(topic_id)
        if sp is None or not sp.initialized or topic is None or partition >= len(topic.partitions):
            return Acquired([]), []
        partition_log = topic.partitions[partition]
        read_committed = settings.read_committed
        upper = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
        now = self.clock()

        read: list[LogBatch] = []  # what the acquisition read, to answer with

        def batches(offset: int) -> Iterator[LogBatch]:
            for batch in _read(partition_log, offset, upper, min(max_bytes, READ_CHUNK), read_committed):
                read.append(batch)
                yield batch

        acquired = self._write((group_id, topic_id, partition), sp.acquire(
            member_id, batches, upper, max_records, settings.partition_max_record_locks,
            settings.record_lock_duration_ms / 1000, settings.delivery_count_limit, now,
            int(self.wall_clock() * 1000), partition_log.log_start_offset, record_limit))
        if not acquired.ranges:
            return acquired, []
        return acquired, _covering(partition_log, acquired.ranges, upper, read)

    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                    batches: list[AckBatch]) -> None:
        settings = self.settings(group_id)
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            raise KafkaError(ErrorCode.invalid_record_state,
                             "Batch record not found. The request batch offsets are not found in the cache.")
        self._write(key, sp.acknowledge(member_id, batches, settings.record_lock_duration_ms / 1000,
                                        settings.delivery_count_limit, self.clock(), int(self.wall_clock() * 1000),
                                        settings.renew_enabled))

    def next_lock_deadline(self, keys: Iterable[SharePartitionKey]) -> float | None:
        deadlines = [d for k in keys if k in self.partitions
                     for d in (self.partitions[k].next_lock_deadline(),) if d is not None]
        return min(deadlines, default=None)


    # --- admin: the share-group offsets APIs and DeleteGroups ------------------------------------

    def _empty_share_group(self, group_id: str) -> ShareGroup | None:
        """The share group (None if there is none) that an admin change may touch: it
        must have no members, as Kafka requires."""
        self.require_loaded(group_id)
        group = self.groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        if group is not None and group.members:
            raise KafkaError(ErrorCode.non_empty_group, "The group is not empty.")
        return group

    def describe_offsets(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """A share-partition's start offset and lag (records from the start offset to the
        high watermark not yet acknowledged or archived): (-1, -1) with no state."""
        sp = self.partitions.get((group_id, topic_id, partition))
        topic = self.logs.topic_by_id(topic_id)
        if sp is None or not sp.initialized or topic is None or partition >= len(topic.partitions):
            return -1, -1
        high_watermark = topic.partitions[partition].high_watermark
        done = sum(1 for o, (state, _) in sp.states.items() if state in (ACKNOWLEDGED, ARCHIVED))
        return sp.start_offset, max(high_watermark - sp.start_offset - done, 0)

    def offsets_of(self, group_id: str) -> list[SharePartitionKey]:
        """The share-partitions of a group that have a start offset, in order."""
        return sorted((k for k, sp in self.partitions.items() if k[0] == group_id and sp.initialized),
                      key=lambda k: (str(k[1]), k[2]))

    def alter_offsets(self, group_id: str, starts: list[tuple[uuid.UUID, int, int]]) -> None:
        """AlterShareGroupOffsets: each share-partition starts again at the offset given
        (its records' states forgotten). The group must be empty; one that does not exist
        is created, as Kafka does."""
        group = self._empty_share_group(group_id)
        now_ms = int(self.wall_clock() * 1000)
        for topic_id, partition, start in starts:
            key = (group_id, topic_id, partition)
            sp = self.partitions.get(key) or SharePartition(*key)  # the replay registers a new one
            self._write(key, sp.initialize(start, now_ms, sp.snapshot_epoch + 1))
        if group is None and starts:
            self.groups[group_id] = ShareGroup(group_id)

    def delete_offsets(self, group_id: str, topic_ids: list[uuid.UUID]) -> None:
        """DeleteShareGroupOffsets: the share-partitions of those topics are forgotten."""
        self._empty_share_group(group_id)
        for key in [k for k in self.partitions if k[0] == group_id and k[1] in topic_ids]:
            self._delete_state(key)

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        """A topic is deleted: the state of its share-partitions, in every group, is
        tombstoned in `__share_group_state`, as Kafka's share coordinator does when
        its metadata loses a topic. A write that fails is logged; the records of a
        topic that no longer exists are never delivered from again either way."""
        for key in [k for k in self.partitions if k[1] == topic_id]:
            try:
                self._delete_state(key)
            except KafkaError as exc:
                log.warning("the share state of a deleted topic is not deleted: its tombstone cannot be written",
                            group=key[0], topic_id=str(topic_id), partition=key[2], error=exc.code.name)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups of a share group: it must be empty; its share-partitions go too."""
        group = self._empty_share_group(group_id)
        if group is None:
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._delete_state(key)
        self.write_group(group_id, CoordinatorResult(group.tombstones(), None))
        self.groups.pop(group_id, None)  # a group known from its share-partitions only

def _record(kind: int, group_id: str, value: bytes, member_id: str | None = None) -> tuple[bytes, bytes | None]:
    return encode_group_key(ShareGroupKey(kind, group_id, member_id)), value


def _split(data: bytes) -> list[tuple[BatchHeader, memoryview]]:
    """The whole batches of `data`, as views of it (not copies)."""
    out = []
    view = memoryview(data)
    pos = 0
    while pos + 61 <= len(data):
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        out.append((header, view[pos:pos + header.size]))
        pos += header.size
    return out


def _read(partition_log: PartitionLog, offset: int, upper: int, max_bytes: int,
          read_committed: bool) -> Iterator[LogBatch]:
    """The log's batches from `offset`, below `upper`, read `max_bytes` at a time (at
    least one batch) for as long as the caller takes them; under read_committed, the
    batches of aborted transactions are marked."""
    while offset < upper:
        try:
            got = partition_log.read(max(offset, partition_log.log_start_offset), max_bytes, read_committed,
                                     min_one=True)
        except KafkaError:
            return
        if not got.records:
            return
        aborted = got.aborted or []
        for header, data in _split(bytes(got.records)):
            if header.last_offset < offset:
                continue
            is_aborted = read_committed and header.is_transactional and not header.is_control and any(
                a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset
                for a in aborted)
            yield LogBatch(header, data, is_aborted)
            offset = header.last_offset + 1


def _covering(partition_log: PartitionLog, ranges: list[tuple[int, int, int]], upper: int,
              read: list[LogBatch]) -> list[bytes | memoryview]:
    """The log batches holding the acquired offsets, each once, in offset order: those
    the acquisition read already (`read`, in offset order) and, for offsets acquired
    again (released, or their lock expired), the log's."""
    out: dict[int, bytes | memoryview] = {}
    ends = [batch.header.last_offset for batch in read]
    for first, last, _ in ranges:
        offset = first
        while offset <= last:
            i = bisect.bisect_left(ends, offset)
            if i < len(read) and read[i].header.base_offset <= offset:
                batch: LogBatch | None = read[i]
            else:
                batch = next(_read(partition_log, offset, min(upper, last + 1), 1, False), None)
            if batch is None:
                break
            out.setdefault(batch.header.base_offset, batch.data)
            offset = batch.header.last_offset + 1
    return [out[k] for k in sorted(out)]
