"""The group coordinator: every group by id, the request each group API makes of it,
and the groups' start-up from `__consumer_offsets`.

Three pieces, as Kafka's coordinator has them:
- the registry here, which finds a group (or makes one), asks the group whether a
  request is allowed, and routes it;
- the membership protocol of the group's type (classic_protocol.py for JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup);
- the offsets store (offset_store.py), which owns `__consumer_offsets`: committed and
  transactional offsets, the appends, and the replay of every record, which hands the
  groups' own records to the registry (`_replay_group_record`).

A group has a type (group.py): classic groups (classic_protocol.py), KIP-848
consumer groups (consumer_protocol.py, ConsumerGroupHeartbeat) and KIP-1071 streams
groups (streams_protocol.py, StreamsGroupHeartbeat) live side by side. An
empty group of one type becomes a group of the other when a member of the other
protocol joins it (Kafka's conversions of empty groups); a member of one protocol
cannot join a group of the other that has members.

Every change follows writes.py's rule: its records are appended to the group's
partition and then replayed, as a restart replays them, so a write that fails changes
nothing and memory is what the log says; errors are raised (KafkaError) and the request
handlers turn them into error codes.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger
from ottla.storage.log_manager import LogManager

from .classic_group import ClassicGroup, GroupState, JoinRequest, JoinResult, SyncResult
from .classic_protocol import ClassicProtocol
from .consumer_group import ConsumerGroup
from .consumer_group_records import GROUP_METADATA, ConsumerGroupKey
from .consumer_protocol import ConsumerProtocol, HeartbeatRequest, HeartbeatResult, validate
from .group import Group, GroupConfig, GroupType
from .group_resource_configs import GroupSettings
from .offset_store import OffsetStore, TopicPartition
from .offsets_log import CommittedOffset, GroupKey, decode_group_value
from .share_group import ShareGroup
from .share_group_records import GROUP_METADATA as SHARE_GROUP_METADATA
from .share_group_records import ShareGroupKey
from .streams_group import StreamsGroup
from .streams_group_records import GROUP_METADATA as STREAMS_GROUP_METADATA
from .streams_group_records import StreamsGroupKey
from .streams_protocol import StreamsHeartbeatRequest, StreamsHeartbeatResult, StreamsProtocol
from .streams_protocol import validate as validate_streams_heartbeat
from .writes import CoordinatorResult, Records

log = get_logger("ottla.groups")
# Read once for heartbeat: on Python 3.11 a member read off its enum class goes through
# EnumType.__getattr__'s slot, hundreds of instructions.
_PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE


def _still_loading(group_id: str) -> KafkaError:
    return KafkaError(ErrorCode.coordinator_load_in_progress,
                      f"the __consumer_offsets partition of group {group_id!r} is still loading")


def _no_classic_member(group_id: str) -> KafkaError:
    # A SyncGroup, Heartbeat or LeaveGroup for a consumer group: none of its members
    # speaks the classic protocol, and Kafka 4 answers so.
    return KafkaError(ErrorCode.unknown_member_id, f"group {group_id!r} has no member of the classic protocol")


class GroupCoordinator:
    def __init__(self, logs: LogManager, create_offsets_topic: Callable[[], None], config: GroupConfig,
                 group_configs: Callable[[str], Mapping[str, str]] = lambda _: {},
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time) -> None:
        """`group_configs`: a group's own configs (the GROUP config resource), which
        override the broker's settings within their bounds (group_resource_configs.py)."""
        self.clock = clock
        self.settings = settings = GroupSettings(config, group_configs)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore(logs, create_offsets_topic, config.num_partitions, config.max_metadata_bytes,
                                   wall_clock, self._replay_group_record, self._offsets_replayed)
        self.classic = ClassicProtocol(config, self._register, self.offsets.write, clock, wall_clock)
        self.consumer = ConsumerProtocol(config, lambda: logs.topics, self.groups, clock, settings)
        self.streams = StreamsProtocol(config, lambda: {n: len(t.partitions) for n, t in logs.topics.items()},
                                       self.groups, clock, settings)

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition that holds the group's records."""
        return self.offsets.partition_for(group_id)

    def open(self) -> None:
        """Note what `load` has to read; until it has, the groups of each partition not
        loaded are answered COORDINATOR_LOAD_IN_PROGRESS."""
        self.offsets.open()

    async def load(self) -> int:
        """Rebuild groups and offsets from `__consumer_offsets` (beside the serving loop,
        see coordinator/loading.py); returns how many groups."""
        await self.offsets.load()
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup):
                self.consumer.restored(group)
            elif isinstance(group, StreamsGroup):
                self.streams.restored(group)
        return len(self.groups)

    def _replay_group_record(self, key: GroupKey | ConsumerGroupKey | StreamsGroupKey | ShareGroupKey,
                             value: bytes | None) -> None:
        """Apply a group's own record (the store replays the offsets): at start-up and
        after every append, the one way groups come, change and go."""
        group = self.groups.get(key.group)
        if isinstance(key, ShareGroupKey):  # its share-partitions are the share coordinator's
            if key.type == SHARE_GROUP_METADATA and value is None:
                if isinstance(group, ShareGroup):
                    self._remove(key.group)
            elif isinstance(group, ShareGroup):
                group.replay(key, value)
            elif value is not None:
                group = self.groups[key.group] = ShareGroup(key.group)
                group.replay(key, value)
            return
        if isinstance(key, StreamsGroupKey):
            if key.type == STREAMS_GROUP_METADATA and value is None:
                if isinstance(group, StreamsGroup):
                    self._remove(key.group)
            elif isinstance(group, StreamsGroup):
                group.replay(key, value)
            elif value is not None:
                group = self.groups[key.group] = StreamsGroup(key.group)
                group.replay(key, value)
            return
        if isinstance(key, GroupKey):
            if value is None:
                if isinstance(group, ClassicGroup):
                    self._remove(key.group)
            elif isinstance(group, ClassicGroup):
                group.replay(decode_group_value(value), self.clock())
            else:
                self.groups[key.group] = ClassicGroup.restore(key.group, decode_group_value(value), self.clock())
            return
        if key.type == GROUP_METADATA and value is None:
            if isinstance(group, ConsumerGroup):
                self._remove(key.group)
            return
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return  # a tombstone of a group already gone
            group = self.groups[key.group] = ConsumerGroup(key.group)
        group.replay(key, value)

    def _remove(self, group_id: str) -> None:
        """A group's record is gone. Offsets committed for it (kept when a group changes
        type) still belong to a group: an empty classic one, as in Kafka."""
        del self.groups[group_id]
        self._offsets_replayed(group_id)

    def _offsets_replayed(self, group_id: str) -> None:
        """Offsets committed outside any membership belong to a group all the same: an
        empty classic one (Kafka's simple consumer group), made by their replay."""
        if group_id not in self.groups and group_id in self.offsets.groups:
            self._new_classic_group(group_id)

    def _require_loaded(self, group_id: str) -> None:
        if self.offsets.loading(group_id):
            raise _still_loading(group_id)

    def _new_classic_group(self, group_id: str) -> ClassicGroup:
        group = self.groups[group_id] = ClassicGroup(group_id)
        return group

    def _register(self, group: Group) -> None:
        self.groups[group.group_id] = group

    def _classic_group(self, group_id: str) -> ClassicGroup | None:
        """The group a classic-protocol request names, or None if there is none."""
        if self.offsets.loading(group_id):  # _require_loaded, inline: a call less a heartbeat
            raise _still_loading(group_id)
        group = self.groups.get(group_id)
        if group is None or group.__class__ is ClassicGroup:
            return group
        raise _no_classic_member(group_id)

    # --- membership (classic protocol) ---------------------------------------------------

    async def join(self, request: JoinRequest) -> JoinResult:
        """JoinGroup. Raises KafkaError for what stops the request before it reaches
        the group; the group's own answers (MEMBER_ID_REQUIRED...) are in the result."""
        if not request.group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "empty group id")
        self._require_loaded(request.group_id)
        current = self.groups.get(request.group_id)
        if current is not None and current.type in (GroupType.SHARE, GroupType.STREAMS):
            raise KafkaError(ErrorCode.inconsistent_group_protocol,
                             f"group {request.group_id!r} is a {current.type.value} group")
        if isinstance(current, ConsumerGroup):
            if current.members:
                # Kafka 4 would take the classic member into the consumer group (a
                # mixed group); Ottla refuses it, as Kafka does for protocols the
                # group cannot serve.
                raise KafkaError(ErrorCode.inconsistent_group_protocol,
                                 f"group {request.group_id!r} is a consumer group with members")
            # An empty consumer group becomes a classic one, if the join is not refused:
            # its records go first.
            self.classic.joinable(request, None)
            self.offsets.write(request.group_id, CoordinatorResult(current.tombstones(), None))
        return await self.classic.join(request, self._classic_group(request.group_id))

    # --- membership (consumer protocol, KIP-848) -------------------------------------------

    def consumer_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat; errors are raised, with Kafka's messages."""
        validate(request, self.consumer.assignors)
        group_id = request.group_id
        self._require_loaded(group_id)
        if request.member_epoch < 0:
            group = self.groups.get(group_id)
            if not isinstance(group, ConsumerGroup):
                raise KafkaError(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
            return self.offsets.write(group_id, self.consumer.leave(group, request))
        group, replaced = self._consumer_group(group_id, request.member_epoch == 0)
        result = self.consumer.heartbeat(group, request)
        if replaced:
            # A group converted from an empty classic group: the classic group's records
            # go in the same batch (a new group comes with the replay of its records).
            result = CoordinatorResult(replaced + result.records, result.response, result.then)
        return self.offsets.write(group_id, result)

    def _consumer_group(self, group_id: str, create: bool) -> tuple[ConsumerGroup, Records]:
        """The consumer group of that id; a member joining (epoch 0) creates it, or turns
        an empty classic group into one. A new group is not registered here (the replay
        of its records makes it); with it come the records that remove the classic group
        it replaces."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group, []
        if group is None and not create:
            raise KafkaError(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
        tombstones: Records = []
        if group is not None and not isinstance(group, ClassicGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if group is not None:
            if not create or group.members or group.pending_members:
                # Kafka would upgrade a classic group of consumers online; Ottla only
                # converts empty ones, and answers this as Kafka answers a group it
                # cannot upgrade.
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group")
            if group.generation > 0:  # it has a GroupMetadata record: it goes
                tombstones = group.tombstones()
        return ConsumerGroup(group_id), tombstones

    # --- membership (streams protocol, KIP-1071) -------------------------------------------

    def streams_heartbeat(self, request: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        """StreamsGroupHeartbeat; errors are raised, with Kafka's messages."""
        validate_streams_heartbeat(request)
        group_id = request.group_id
        self._require_loaded(group_id)
        group = self.groups.get(group_id)
        replaced: Records = []
        if not isinstance(group, StreamsGroup):
            if request.member_epoch != 0 or (group is not None and not (
                    isinstance(group, ClassicGroup) and not group.members and not group.pending_members)):
                raise KafkaError(ErrorCode.group_id_not_found,
                                 f"Streams group {group_id} not found." if group is None else
                                 f"Group {group_id} is not a streams group.")
            # A new group, or an empty classic one (offsets only) that becomes a
            # streams group: the classic group's record goes in the same batch.
            if isinstance(group, ClassicGroup) and group.generation > 0:
                replaced = group.tombstones()
            group = StreamsGroup(group_id)
        if request.member_epoch < 0:
            result = self.streams.leave(group, request)
        else:
            result = self.streams.heartbeat(group, request)
        if replaced:
            result = CoordinatorResult(replaced + result.records, result.response, result.then)
        return self.offsets.write(group_id, result)

    def describe_streams_group(self, group_id: str) -> StreamsGroup:
        """StreamsGroupDescribe: GROUP_ID_NOT_FOUND for no group or one of another type."""
        self._require_loaded(group_id)
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup):
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Group {group_id} not found." if group is None else
                             f"Group {group_id} is not a streams group.")
        return group

    def describe_consumer_group(self, group_id: str) -> ConsumerGroup:
        """ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for no group or one of another type."""
        self._require_loaded(group_id)
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Group {group_id} not found." if group is None else
                             f"Group {group_id} is not a consumer group.")
        return group

    def topic_names(self) -> dict[object, str]:
        """topic id -> name, for answers that carry both."""
        return {t.topic_id: name for name, t in self.offsets.logs.topics.items()}

    async def sync(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        return await self.classic.sync(self._classic_group(group_id), member_id, group_instance_id, generation,
                                       protocol_type, protocol_name, assignments)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation: int) -> None:
        """Heartbeat: returns if the member is current and the group not rebalancing,
        raises KafkaError otherwise. (It writes nothing, as in Kafka.) Every member's
        commonest request, so _classic_group's look-up is made here, two Python calls
        fewer than through it and a protocol method."""
        offsets = self.offsets
        # OffsetStore.loading's own first test, made here: while nothing loads (always,
        # once started) that is a call fewer.
        if offsets.loading_partitions and offsets.loading(group_id):
            raise _still_loading(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.unknown_member_id, "no such group")
        if group.__class__ is not ClassicGroup:
            raise _no_classic_member(group_id)
        member = group.members.get(member_id)
        # A dynamic member of this generation: what check_member would return. Anything
        # else (a static member's fencing, an unknown member, another generation) goes
        # through it, for its error.
        if member is None or generation != group.generation or group_instance_id is not None:
            member = group.check_member(member_id, group_instance_id, generation)
        member.last_heartbeat = self.classic.clock()
        if group.state is _PREPARING_REBALANCE:
            raise KafkaError(ErrorCode.rebalance_in_progress, "the group is rebalancing")

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """LeaveGroup: an error code per member; what fails the whole request raises."""
        return self.classic.leave(self._classic_group(group_id), members)

    def tick(self) -> list[tuple[str, str]]:
        """Expire members whose session ran out and finish rebalances whose window
        closed. Returns the (group, member) pairs expired. A change whose records
        cannot be written is not made, and is tried again at the next tick."""
        expired = []
        for group in list(self.groups.values()):
            if self.offsets.loading(group.group_id):
                continue  # its members' sessions start over once it is loaded
            # Each membership protocol keeps its own timers.
            if isinstance(group, ClassicGroup):
                expired += [(group.group_id, member_id) for member_id in self.classic.tick(group)]
            elif isinstance(group, ConsumerGroup):
                for member_id in self.consumer.expired(group):
                    try:
                        self.offsets.write(group.group_id, self.consumer.fence(group, member_id))
                    except KafkaError as exc:
                        log.warning("group member not fenced: its records cannot be written", group=group.group_id,
                                    member=member_id, error=exc.code.name)
                        continue
                    expired.append((group.group_id, member_id))
            elif isinstance(group, StreamsGroup):
                delayed = self.streams.delay_over(group)
                if delayed is not None:
                    try:
                        self.offsets.write(group.group_id, delayed)
                    except KafkaError as exc:
                        log.warning("streams group not assigned: its records cannot be written", group=group.group_id,
                                    error=exc.code.name)
                for member_id in self.streams.expired(group):
                    try:
                        self.offsets.write(group.group_id, self.streams.fence(group, member_id))
                    except KafkaError as exc:
                        log.warning("group member not fenced: its records cannot be written", group=group.group_id,
                                    member=member_id, error=exc.code.name)
                        continue
                    expired.append((group.group_id, member_id))
        return expired

    # --- offsets -------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                       offsets: dict[TopicPartition, CommittedOffset],
                       api_version: int | None = None) -> dict[TopicPartition, ErrorCode]:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "empty group id")
        if self.offsets.loading(group_id):  # _require_loaded, inline: a call less a commit
            raise _still_loading(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                raise KafkaError(ErrorCode.illegal_generation, f"group {group_id!r} has no generation {generation}")
            # A consumer outside any membership commits: the replay of its commit
            # creates the group, a classic one, as Kafka does.
            group = ClassicGroup(group_id)
        group.validate_offset_commit(member_id, instance_id, generation, api_version)
        return self.offsets.write(group_id, self.offsets.commit(group_id, offsets))

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           instance_id: str | None, generation: int,
                           offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, ErrorCode]:
        """Offsets that take effect when the producer's transaction commits."""
        if self.offsets.loading(group_id):  # _require_loaded, inline: a call less a commit
            raise _still_loading(group_id)
        group = self.groups.get(group_id)
        if group is not None:
            group.validate_txn_offset_commit(member_id, instance_id, generation)
        elif generation >= 0:
            # No group, as Kafka's OffsetMetadataManager: a generation names none of its.
            # Outside any generation, Kafka's empty classic group takes the commit as is,
            # so none is built here (a dataclass of many fields).
            raise KafkaError(ErrorCode.illegal_generation, f"group {group_id!r} has no generation {generation}")
        return self.offsets.write(group_id, self.offsets.commit(group_id, offsets), producer_id, producer_epoch)

    def on_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction's end in `__consumer_offsets` is replayed (the broker registers
        the offset store's `on_marker` itself as the markers' listener)."""
        self.offsets.on_marker(topic, partition, producer_id, committed)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool,
                      member_id: str | None = None,
                      member_epoch: int = -1) -> dict[TopicPartition, tuple[CommittedOffset | None, ErrorCode]]:
        if self.offsets.loading(group_id):  # _require_loaded, inline: a call less a fetch
            raise _still_loading(group_id)
        # OffsetFetch v9 from a member of a consumer group: its epoch must be current. A
        # fetch that names no member has nothing to check (validate_offset_fetch's own
        # first test, made before isinstance, two Python calls through ABCMeta).
        if member_id or member_epoch >= 0:
            group = self.groups.get(group_id)
            if isinstance(group, (ConsumerGroup, StreamsGroup)):
                group.validate_offset_fetch(member_id, member_epoch)
        return self.offsets.fetch(group_id, partitions, require_stable)

    # --- admin ---------------------------------------------------------------------------

    def list_groups(self, states: set[str], types: set[str]) -> list[Group]:
        """ListGroups: the groups in any of `states` and of any of `types` (Kafka's names,
        any case; an empty filter lets everything through)."""
        if self.offsets.loading():
            # Kafka lists nothing rather than a part while a partition loads.
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "__consumer_offsets is still loading")
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return [g for g in self.groups.values()
                if (not wanted_states or g.state_name.lower() in wanted_states)
                and (not wanted_types or g.type.value in wanted_types)]

    def describe(self, group_id: str) -> ClassicGroup | None:
        """DescribeGroups, which describes classic groups only: a group of another type
        is answered as one that does not exist, as Kafka does."""
        self._require_loaded(group_id)
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def all_groups(self) -> Mapping[str, Group]:
        """Every group by id, of any type, as memory holds it now, read-only: what the web
        console shows, during a load too (where `list_groups` refuses, as Kafka does)."""
        return MappingProxyType(self.groups)

    def group(self, group_id: str) -> Group | None:
        """The group of this id, of any type, as memory holds it now."""
        return self.groups.get(group_id)

    def count_by_state(self) -> Counter[str]:
        return Counter(g.state_name for g in self.groups.values())

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups, for one group: raises KafkaError if it cannot be deleted."""
        self._require_loaded(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        group.validate_delete()
        self.offsets.write(group_id, self.offsets.delete_group(group_id, group.tombstones()))

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        self._require_loaded(group_id)
        group = self.groups.get(group_id)
        if group is None or group.type is GroupType.SHARE:  # a share group has no committed offsets
            raise KafkaError(ErrorCode.group_id_not_found, f"no group {group_id!r}")
        # Offsets of topics the live members consume cannot be deleted under them.
        in_use = group.topics_in_use()
        codes = {tp: ErrorCode.group_subscribed_to_topic if tp[0] in in_use else ErrorCode.none for tp in partitions}
        self.offsets.write(group_id, self.offsets.delete(
            group_id, [tp for tp, code in codes.items() if code is ErrorCode.none]))
        return codes
