"""KIP-1071's streams group protocol: StreamsGroupHeartbeat and the changes time makes
(session expiry, a revocation that outlasts the member's rebalance timeout).

A heartbeat does what Kafka's GroupMetadataManager.streamsGroupHeartbeat does, in its
order:
1. check the request (Kafka's messages), then find or create the member and check its
   epoch (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH);
2. a joining member brings the topology: the first one sets the group's (a record of
   its own); one declaring another topology is refused, as Kafka 4.3.1 refuses
   topology updates;
3. update the member's metadata; the group epoch moves when the membership, a member's
   metadata or the topics the topology reads (their partition counts: the metadata
   hash) change;
4. configure the topology against the topics (streams_topology.py): statuses, the
   internal topics the broker is to create;
5. if the group epoch is ahead of the assignment epoch, assign the tasks of a
   configured topology (streams_assignor.py; none while it is not);
6. move the member one step towards its target (streams_group.reconcile).
Like the consumer protocol, it works on a copy of the group and returns the records of
what changed with its answer (writes.py); the registry appends and replays them.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ottla.protocol.errors import ErrorCode, KafkaError

from .group import GroupConfig, expired_members
from .group_resource_configs import GroupSettings
from .streams_assignor import AssignmentMember, assign
from .streams_group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    MemberState,
    StreamsGroup,
    StreamsMember,
    reconcile,
)
from .streams_group_records import MemberMetadata, TaskAssignment, Tasks, Topology
from .streams_topology import (
    STATUS_ASSIGNMENT_DELAYED,
    STATUS_SHUTDOWN_APPLICATION,
    ConfiguredTopology,
    configure,
    validate_topology,
)
from .writes import CoordinatorResult, Records

INITIAL_DELAY_DETAIL = "Assignment delayed due to the configured initial rebalance delay."
SHUTDOWN_DETAIL = ("A KafkaStreams instance encountered a fatal error and requested a shutdown for the entire "
                   "application.")


@dataclass(frozen=True)
class StreamsHeartbeatRequest:
    """What a StreamsGroupHeartbeat asks. None: unchanged since the last heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active_tasks: Tasks | None = None
    standby_tasks: Tasks | None = None
    warmup_tasks: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    # Whether the request carried task offsets and end offsets (Kafka 4.3.1 refuses them).
    task_offsets: bool = False
    task_end_offsets: bool = False
    client_id: str = ""
    client_host: str = ""


@dataclass
class StreamsHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    statuses: list[tuple[int, str]] = field(default_factory=list)
    assignment: TaskAssignment | None = None  # None: unchanged, not sent
    # Internal topics the broker is to create: name -> (partitions, configs).
    to_create: dict[str, tuple[int, tuple[tuple[str, str], ...]]] = field(default_factory=dict)


def validate(request: StreamsHeartbeatRequest) -> None:
    """Kafka's checks of a heartbeat's fields, before anything is looked up, in Kafka
    4.3.1's order: first what it does not serve yet (GroupCoordinatorService's
    throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures: static membership,
    task offsets, warm-up tasks, source topic regular expressions), then the fields."""

    def invalid(message: str) -> KafkaError:
        return KafkaError(ErrorCode.invalid_request, message)

    if request.instance_id is not None:
        raise invalid("Static membership is not yet supported.")
    if request.task_offsets:
        raise invalid("TaskOffsets are not supported yet.")
    if request.task_end_offsets:
        raise invalid("TaskEndOffsets are not supported yet.")
    if request.warmup_tasks and any(request.warmup_tasks.values()):
        raise invalid("WarmupTasks are not supported yet.")
    if request.topology is not None and any(s.source_topic_regex for s in request.topology.subtopologies):
        raise invalid("Regular expressions for source topics are not supported yet.")
    if not request.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not request.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise invalid("RackId can't be empty.")
    epoch = request.member_epoch
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        # Kafka's order (GroupCoordinatorService): the task lists, null or not empty,
        # before the topology.
        if request.active_tasks is None or any(request.active_tasks.values()):
            raise invalid("ActiveTasks must be empty when (re-)joining.")
        if request.standby_tasks is None or any(request.standby_tasks.values()):
            raise invalid("StandbyTasks must be empty when (re-)joining.")
        if request.warmup_tasks is None or any(request.warmup_tasks.values()):
            raise invalid("WarmupTasks must be empty when (re-)joining.")
        if request.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
        # (Kafka 4.3.1 does not check the process id: null or blank, the member joins.)
        validate_topology(request.topology)
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    lists = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if any(t is not None for t in lists) and any(t is None for t in lists):
        raise invalid("If one task-type is non-null, all must be non-null.")
    if epoch != 0 and request.topology is not None:
        raise invalid("Topology can only be provided when (re-)joining.")


def _check_tasks(tasks: Tasks, task_counts: Mapping[str, int]) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks: the tasks a member says it owns must be
    tasks of the configured topology."""
    for subtopology, partitions in tasks.items():
        count = task_counts.get(subtopology)
        if count is None:
            raise KafkaError(ErrorCode.invalid_request, f"Subtopology {subtopology} does not exist in the topology.")
        for p in sorted(partitions):
            if not 0 <= p < count:
                raise KafkaError(ErrorCode.invalid_request, f"Task {p} for subtopology {subtopology} is invalid. "
                                                            f"Number of tasks for this subtopology: {count}")


def _metadata_hash(topology: Topology, partitions_of: Mapping[str, int]) -> int:
    """A 64-bit digest of the partition counts of the topics the topology reads and
    writes: a change of it (a topic created, partitions added) moves the group epoch."""
    names = sorted({t for s in topology.subtopologies
                    for t in (*s.source_topics, *(i.name for i in s.repartition_source_topics),
                              *(i.name for i in s.state_changelog_topics))})
    text = ";".join(f"{n}:{partitions_of.get(n, -1)}" for n in names).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


class StreamsProtocol:
    def __init__(self, config: GroupConfig, partitions_of: Callable[[], Mapping[str, int]],
                 groups: Mapping[str, object], clock: Callable[[], float] = time.monotonic,
                 settings: Callable[[str, str], int] | None = None) -> None:
        """`partitions_of`: the topics that exist, by name, with their partition counts;
        `groups`: the registry's groups by id, where a group's records are replayed;
        `settings(group_id, name)`: a group's streams.* config (the broker's setting
        unless the group has its own, group_resource_configs.py)."""
        self.config = config
        self.settings = settings or GroupSettings(config, lambda _: {})
        self.partitions_of = partitions_of
        self.groups = groups
        self.clock = clock

    def _decided(self, group: StreamsGroup, change: Callable[[StreamsGroup], tuple[Records, object]]
                 ) -> CoordinatorResult:
        working = group.working_copy()
        records, response = change(working)

        def carry_over() -> None:
            live = self.groups.get(group.group_id)
            if isinstance(live, StreamsGroup):
                live.carry_over(working)

        return CoordinatorResult(records, response, carry_over)

    def configured(self, group: StreamsGroup) -> ConfiguredTopology | None:
        if group.topology is None:
            return None
        return configure(group.topology, self.partitions_of())

    # --- the heartbeat -------------------------------------------------------------------

    def heartbeat(self, group: StreamsGroup, request: StreamsHeartbeatRequest
                  ) -> CoordinatorResult:
        return self._decided(group, lambda working: self._heartbeat(working, request))

    def _assignment_configs(self, group: StreamsGroup) -> tuple[tuple[str, str], ...]:
        """What Kafka 4.3.1 keeps of the configs a target assignment was computed with."""
        return (("num.standby.replicas", str(self.settings(group.group_id, "streams.num.standby.replicas"))),)

    def _bump(self, group: StreamsGroup, records: Records) -> None:
        group.group_epoch += 1
        group.assignment_configs = self._assignment_configs(group)
        records.append(group.epoch_record())

    def _heartbeat(self, group: StreamsGroup, request: StreamsHeartbeatRequest
                   ) -> tuple[Records, StreamsHeartbeatResult]:
        now = self.clock()
        records: Records = []
        member_id = request.member_id
        member = group.members.get(member_id)
        new = member is None
        was_empty = not group.members
        if request.member_epoch == 0:
            # As Kafka 4.3.1's throwIfStreamsGroupIsFull: any join to a full group, a
            # member's own rejoin too.
            if len(group.members) >= self.config.streams_max_size:
                raise KafkaError(ErrorCode.group_max_size_reached,
                                 f"The streams group has reached its maximum capacity of "
                                 f"{self.config.streams_max_size} members.")
            self._take_topology(group, request, records)
            member = member or StreamsMember(member_id)
        else:
            member = group.member(member_id)
            if request.member_epoch != member.member_epoch and not (
                    request.member_epoch == member.previous_member_epoch and request.active_tasks is not None
                    and all(ps <= member.assigned.active.get(s, frozenset())
                            for s, ps in request.active_tasks.items())):
                raise KafkaError(ErrorCode.fenced_member_epoch,
                                 f"The streams group member has a member epoch ({request.member_epoch}) other than "
                                 f"the one known by the group coordinator ({member.member_epoch}). "
                                 f"The member must abandon all its partitions and rejoin.")
        assert group.topology is not None  # set by the first member's join

        old = member.metadata
        metadata = MemberMetadata(
            instance_id=request.instance_id if request.instance_id is not None else old.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else old.rack_id,
            client_id=request.client_id, client_host=request.client_host,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else old.rebalance_timeout_ms),
            topology_epoch=request.topology.epoch if request.topology is not None else old.topology_epoch,
            process_id=request.process_id if request.process_id is not None else old.process_id,
            user_endpoint=request.user_endpoint if request.user_endpoint is not None else old.user_endpoint,
            client_tags=request.client_tags if request.client_tags is not None else old.client_tags,
        )
        bump = False
        if new or metadata != old:
            member = replace(member, metadata=metadata)
            records.append(group.member_record(member))
            bump = new or (metadata.process_id, metadata.rack_id, metadata.client_tags) != (
                old.process_id, old.rack_id, old.client_tags)
        member = replace(member, last_heartbeat=now)
        group.members[member_id] = member

        partitions_of = self.partitions_of()
        configured = configure(group.topology, partitions_of)
        group.configured = configured.ready
        if configured.ready:
            for tasks in (request.active_tasks, request.standby_tasks, request.warmup_tasks):
                _check_tasks(tasks or {}, configured.task_counts)
        metadata_hash = _metadata_hash(group.topology, partitions_of)
        if metadata_hash != group.metadata_hash:
            group.metadata_hash = metadata_hash
            bump = True
        if group.assignment_configs != self._assignment_configs(group):
            bump = True  # the group's streams.num.standby.replicas changed: a new target
        if group.group_epoch == 0:
            # Kafka 4.3.1 creates a group at epoch 1 with its (empty) target assignment
            # at that epoch; the first member's join moves the group to epoch 2.
            self._bump(group, records)
            group.assignment_epoch = group.group_epoch
            records.append(group.target_epoch_record())
            bump = True
        if bump:
            self._bump(group, records)
        delayed = self._initial_delay(group, bump and was_empty, now)

        if group.group_epoch > group.assignment_epoch and not delayed:
            self._assign(group, configured, records)

        target = group.target.get(member_id, TaskAssignment())
        reconciled = reconcile(member, group.assignment_epoch, target, request.active_tasks,
                               group.owned_elsewhere(member_id))
        # Compared by value: a member waiting for tasks others still hold gets an equal
        # copy at every heartbeat, which is no change to write.
        moved = reconciled.current() != member.current()
        if moved or new:
            records.append(group.current_assignment_record(reconciled))
        if reconciled.state is MemberState.UNREVOKED_TASKS:
            if moved or reconciled.revocation_deadline is None:
                reconciled = replace(reconciled,
                                     revocation_deadline=now + max(reconciled.metadata.rebalance_timeout_ms, 0) / 1000)
        group.members[member_id] = reconciled

        changed = (new or request.member_epoch == 0 or reconciled.assigned != member.assigned
                   or reconciled.member_epoch != member.member_epoch)
        statuses = list(configured.statuses)
        if delayed:
            statuses.insert(0, (STATUS_ASSIGNMENT_DELAYED, INITIAL_DELAY_DETAIL))
        if request.shutdown_application:
            group.shutdown_requested = True
        if group.shutdown_requested:
            statuses.append((STATUS_SHUTDOWN_APPLICATION, SHUTDOWN_DETAIL))
        return records, StreamsHeartbeatResult(
            member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.settings(group.group_id, "streams.heartbeat.interval.ms"), statuses=statuses,
            assignment=reconciled.assigned if changed else None, to_create=configured.to_create)

    def _initial_delay(self, group: StreamsGroup, joined_empty: bool, now: float) -> bool:
        """Kafka's initial rebalance delay: a member joining an empty group starts it
        (unless it is already running), and until it is over the group's target
        assignment is not computed; its members are told ASSIGNMENT_DELAYED. In memory
        only, as Kafka's timer: after a restart the next heartbeat assigns."""
        delay_ms = self.settings(group.group_id, "streams.initial.rebalance.delay.ms")
        if joined_empty and delay_ms > 0 and (group.assignment_delayed_until is None
                                              or group.assignment_delayed_until <= now):
            group.assignment_delayed_until = now + delay_ms / 1000
        if group.assignment_delayed_until is not None and group.assignment_delayed_until <= now:
            group.assignment_delayed_until = None
        return group.assignment_delayed_until is not None

    def _take_topology(self, group: StreamsGroup, request: StreamsHeartbeatRequest, records: Records) -> None:
        topology = request.topology
        assert topology is not None  # validate() holds joins to it
        if group.topology is None:
            group.topology = topology
            records.append(group.topology_record())
        elif topology != group.topology:
            # Kafka 4.3.1's answer to any other topology, whatever its epoch, members or not.
            raise KafkaError(ErrorCode.invalid_request, "Topology updates are not supported yet.")

    def _assign(self, group: StreamsGroup, configured: ConfiguredTopology, records: Records) -> None:
        members = {m.member_id: AssignmentMember(m.metadata.process_id, group.target.get(m.member_id, m.assigned))
                   for m in group.members.values()}
        if configured.ready:
            assert group.topology is not None  # a configured topology is the group's
            stateful = frozenset(s.subtopology_id for s in group.topology.subtopologies if s.state_changelog_topics)
            standby_replicas = self.settings(group.group_id, "streams.num.standby.replicas")
            targets = assign(members, configured.task_counts, standby_replicas, stateful)
        else:
            targets = {m: TaskAssignment() for m in members}
        for member_id, target in targets.items():
            if group.target.get(member_id) != target:
                group.target[member_id] = target
                records.append(group.target_member_record(member_id))
        group.assignment_epoch = group.group_epoch
        records.append(group.target_epoch_record())

    def delay_over(self, group: StreamsGroup) -> CoordinatorResult | None:
        """Kafka's computeDelayedTargetAssignment: once the initial rebalance delay is
        over, the target assignment for the group epoch is computed without waiting for
        a heartbeat (None: no delay ended)."""
        until = group.assignment_delayed_until
        if until is None or until > self.clock():
            return None

        def change(working: StreamsGroup) -> tuple[Records, None]:
            working.assignment_delayed_until = None
            records: Records = []
            if working.members and working.topology is not None and working.group_epoch > working.assignment_epoch:
                try:
                    configured = configure(working.topology, self.partitions_of())
                except KafkaError:
                    return records, None  # the topology no longer resolves: the next heartbeat says why
                working.configured = configured.ready
                self._assign(working, configured, records)
            return records, None

        return self._decided(group, change)

    # --- leaving, fencing, expiry ----------------------------------------------------------

    def leave(self, group: StreamsGroup, request: StreamsHeartbeatRequest) -> CoordinatorResult:
        """A heartbeat with epoch -1: the member leaves. (Epoch -2, a static member
        leaving for a while, never gets here: Kafka 4.3.1 refuses static members.)"""
        def change(working: StreamsGroup) -> tuple[Records, StreamsHeartbeatResult]:
            working.member(request.member_id)
            return self._fence(working, request.member_id), StreamsHeartbeatResult(
                member_id=request.member_id, member_epoch=request.member_epoch)
        return self._decided(group, change)

    def fence(self, group: StreamsGroup, member_id: str) -> CoordinatorResult:
        return self._decided(group, lambda working: (self._fence(working, member_id), None))

    def _fence(self, group: StreamsGroup, member_id: str) -> Records:
        """A member goes: its tasks are free, and the group epoch moves on."""
        records = group.member_tombstones(member_id)
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self._bump(group, records)
        return records

    def expired(self, group: StreamsGroup) -> list[str]:
        session_timeout_ms = self.settings(group.group_id, "streams.session.timeout.ms")
        return expired_members(group.members.values(), self.clock(), session_timeout_ms / 1000)

    def restored(self, group: StreamsGroup) -> None:
        """A group rebuilt at start-up: its members' sessions (and revocation timeouts)
        start now."""
        now = self.clock()
        for member in group.members.values():
            member.last_heartbeat = now
            if member.state is MemberState.UNREVOKED_TASKS:
                member.revocation_deadline = now + max(member.metadata.rebalance_timeout_ms, 0) / 1000
        try:
            configured = self.configured(group)
        except KafkaError:
            configured = None  # a topology that no longer resolves: NotReady until a heartbeat says why
        group.configured = configured is not None and configured.ready
