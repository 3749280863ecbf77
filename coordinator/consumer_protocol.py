"""KIP-848's consumer group protocol: ConsumerGroupHeartbeat and the changes time makes
(session expiry, a revocation that takes longer than the member's rebalance timeout).

Every heartbeat does what Kafka's GroupMetadataManager does, in its order:
1. find or create the member (static members: `group.instance.id`, replaced by a new
   member id when they come back after leaving with epoch -2), and check its epoch;
2. update its subscription; the group epoch is bumped when a subscription changed or
   the subscribed topics did (a topic created that a regex matches, partitions added);
3. if the group epoch is ahead of the assignment epoch, compute a new target
   assignment with the group's assignor (assignors.py);
4. move the member one step towards its target (consumer_group.reconcile).
The heartbeat works on a copy of the group and returns the records of whatever changed
and its answer (writes.py): the registry appends them to `__consumer_offsets` in one
batch and replays them into the group (consumer_group.ConsumerGroup.replay, as a
restart does), so the group is what clients were told; what the records do not hold
(when a member was last heard from...) is then carried over from the copy.

Subscriptions name topics or give an RE2 regex (Kafka compiles them with RE2/J; here
google-re2), matched against whole topic names; internal topics never match a regex.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

import re2

from ottla.protocol.errors import ErrorCode, KafkaError

from .assignors import ASSIGNORS, Assignment, AssignmentSpec
from .consumer_group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    reconcile,
)
from .group import GroupConfig, expired_members
from .group_resource_configs import GroupSettings
from .writes import CoordinatorResult, Records

T = TypeVar("T")

# What a client may ask of the broker in one subscription (Kafka sets no such bounds;
# these are far beyond any real subscription and keep one member's heartbeat cheap).
MAX_REGEX_LENGTH = 4096
MAX_SUBSCRIBED_TOPICS = 10_000
# How often a heartbeat looks again at the topics a group subscribes to.
METADATA_REFRESH_SECONDS = 1.0
# Regexes whose matches are kept between heartbeats (each costs up to a set of names).
MAX_CACHED_REGEXES = 1_000

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad regex is the client's error, answered as such


class TopicInfo(Protocol):
    topic_id: uuid.UUID
    partitions: list

    @property
    def internal(self) -> bool: ...


@dataclass(frozen=True)
class HeartbeatRequest:
    """What a ConsumerGroupHeartbeat asks, whatever its version. None: unchanged since
    the member's last heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    # v0 lets the coordinator choose the member id; from v1 the client must.
    member_id_required: bool = True
    # Which topics the member's regex may match: those its principal may describe (as
    # Kafka filters regex matches with the authorizer). None: any.
    topic_filter: Callable[[str], bool] | None = field(default=None, compare=False)


@dataclass
class HeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged, not sent


def compile_regex(regex: str) -> re2._Regexp:
    try:
        return re2.compile(regex, _RE2_OPTIONS)
    except re2.error as exc:
        raise KafkaError(ErrorCode.invalid_regular_expression,
                         f"SubscribedTopicRegex {regex!r} is not a valid regular expression: {exc}") from None


def validate(request: HeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Kafka's checks of a heartbeat's fields, before anything is looked up."""

    def invalid(message: str) -> KafkaError:
        return KafkaError(ErrorCode.invalid_request, message)

    if not request.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id.strip():
        raise invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if request.member_id_required or request.member_epoch != 0:
        if not request.member_id.strip():
            raise invalid("MemberId can't be empty.")
    epoch = request.member_epoch
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or any(request.owned.values()):
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if request.subscribed_topic_names is not None and len(request.subscribed_topic_names) > MAX_SUBSCRIBED_TOPICS:
        raise invalid(f"SubscribedTopicNames names more than {MAX_SUBSCRIBED_TOPICS} topics.")
    if request.subscribed_topic_regex is not None:
        if len(request.subscribed_topic_regex) > MAX_REGEX_LENGTH:
            raise invalid(f"SubscribedTopicRegex is longer than {MAX_REGEX_LENGTH} characters.")
        if request.subscribed_topic_regex:  # empty: the member drops its regex
            compile_regex(request.subscribed_topic_regex)
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise KafkaError(ErrorCode.unsupported_assignor,
                         f"ServerAssignor {request.server_assignor} is not supported. "
                         f"Supported assignors: {', '.join(assignors)}.")


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(topic, frozenset()) for topic, ps in owned.items())


class ConsumerProtocol:
    def __init__(self, config: GroupConfig, topics: Callable[[], Mapping[str, TopicInfo]],
                 groups: Mapping[str, object], clock: Callable[[], float] = time.monotonic,
                 settings: Callable[[str, str], int] | None = None) -> None:
        """`groups`: the registry's groups by id, where a group's records are replayed;
        `settings(group_id, name)`: a group's consumer.* config (the broker's setting
        unless the group has its own)."""
        self.config = config
        self.settings = settings or GroupSettings(config, lambda _: {})
        self.groups = groups
        self.topics = topics
        self.clock = clock
        self.assignors = tuple(name for name in config.consumer_assignors if name in ASSIGNORS)
        # regex -> the topic names it matches, while the set of topics is `_regex_names`
        self._regex_names: frozenset[str] = frozenset()
        self._regex_matches: dict[str, frozenset[str]] = {}

    # --- subscriptions -------------------------------------------------------------------

    def _matching(self, regex: str, topics: Mapping[str, TopicInfo]) -> frozenset[str]:
        if len(topics) != len(self._regex_names) or not self._regex_names.issuperset(topics):
            self._regex_names = frozenset(topics)  # topics came or went: match again
            self._regex_matches.clear()
        matches = self._regex_matches.get(regex)
        if matches is None:
            pattern = compile_regex(regex)
            matches = frozenset(n for n in topics if not topics[n].internal and pattern.fullmatch(n) is not None)
            if len(self._regex_matches) >= MAX_CACHED_REGEXES:
                self._regex_matches.clear()
            self._regex_matches[regex] = matches
        return matches

    def subscriptions(self, group: ConsumerGroup) -> tuple[dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, int],
                                                           frozenset[tuple[str, uuid.UUID, int]]]:
        """Each member's subscribed topic ids, the partition counts of those topics, and
        the metadata they were read from (a change of it bumps the group epoch)."""
        topics = self.topics()
        subscriptions: dict[str, frozenset[uuid.UUID]] = {}
        names_used: set[str] = set()
        for member in group.members.values():
            names = {n for n in member.subscribed_topic_names if n in topics}
            if member.subscribed_topic_regex:
                matched = self._matching(member.subscribed_topic_regex, topics)
                may_describe = group.regex_filters.get(member.member_id)
                names |= matched if may_describe is None else {n for n in matched if may_describe(n)}
            names_used |= names
            subscriptions[member.member_id] = frozenset(topics[n].topic_id for n in names)
        counts = {topics[n].topic_id: len(topics[n].partitions) for n in names_used}
        signature = frozenset((n, topics[n].topic_id, len(topics[n].partitions)) for n in names_used)
        return subscriptions, counts, signature

    # --- the heartbeat -------------------------------------------------------------------

    def _decided(self, group: ConsumerGroup,
                 change: Callable[[ConsumerGroup], tuple[Records, T]]) -> CoordinatorResult[T]:
        """Run `change` on a copy of the group: its records and answer. An error it
        raises leaves the group untouched. Once the records are replayed, what they do
        not hold is carried over from the copy to the group (the one the replay made,
        for a new group)."""
        working = group.working_copy()
        records, response = change(working)

        def carry_over() -> None:
            live = self.groups.get(group.group_id)
            if isinstance(live, ConsumerGroup):
                live.carry_over(working)

        return CoordinatorResult(records, response, carry_over)

    def heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest) -> CoordinatorResult[HeartbeatResult]:
        """A heartbeat of a joining or joined member (epoch >= 0)."""
        return self._decided(group, lambda working: self._heartbeat(working, request))

    def _heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest) -> tuple[Records, HeartbeatResult]:
        now = self.clock()
        if request.owned:
            # Partitions of a topic deleted meanwhile count as given up (as in Kafka):
            # a member cannot be asked to revoke what no longer exists.
            existing = {t.topic_id for t in self.topics().values()}
            request = replace(request, owned={t: ps for t, ps in request.owned.items() if t in existing})
        records: Records = []
        member_id = request.member_id or str(uuid.uuid4())
        joining = member_id not in group.members and not (
            request.instance_id is not None and request.instance_id in group.static_members)
        if joining and len(group.members) >= self.config.consumer_max_size:
            raise KafkaError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.consumer_max_size} members.")
        member, new = self._member(group, request, member_id, records)

        updated = replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=((request.subscribed_topic_regex or None)
                                    if request.subscribed_topic_regex is not None else member.subscribed_topic_regex),
            client_id=request.client_id, client_host=request.client_host,
        )
        # As Kafka: a new or changed subscription bumps the group epoch (a different
        # server assignor takes effect at the next bump).
        subscription_changed = new or (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        if new or updated.metadata() != member.metadata():
            records.append(group.member_record(updated))
        group.put_member(updated)
        group.regex_filters[updated.member_id] = request.topic_filter

        resolved = None
        if subscription_changed or group.group_epoch == 0 or now >= group.metadata_refresh_at:
            # The subscribed topics are looked at again when a subscription changed, and
            # at most once a second otherwise (a new topic matching a regex, partitions
            # added), so a large group's heartbeats do not each walk every member.
            resolved = self.subscriptions(group)
            group.metadata_refresh_at = now + METADATA_REFRESH_SECONDS
            if subscription_changed or group.group_epoch == 0 or resolved[2] != group.subscribed_metadata:
                group.subscribed_metadata = resolved[2]
                group.group_epoch += 1
                records.append(group.epoch_record())
        if group.group_epoch > group.assignment_epoch:
            subscriptions, counts, _ = resolved or self.subscriptions(group)
            self._assign(group, subscriptions, counts, records)

        reconciled = reconcile(updated, group.assignment_epoch, group.target.get(member_id, {}), request.owned,
                               group.partition_epoch)
        if reconciled is not updated or new:
            records.append(group.current_assignment_record(reconciled))
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if reconciled is not updated or reconciled.revocation_deadline is None:
                # Each revocation gives the member its rebalance timeout to let go.
                reconciled = replace(reconciled,
                                     revocation_deadline=now + max(reconciled.rebalance_timeout_ms, 0) / 1000)
        elif reconciled.revocation_deadline is not None:
            reconciled = replace(reconciled, revocation_deadline=None)
        reconciled.last_heartbeat = now
        group.put_member(reconciled)

        # The assignment is sent on a full request (joining, or after an error) and
        # whenever it changed.
        full = request.member_epoch == 0 or (
            request.rebalance_timeout_ms != -1 and request.owned is not None
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None))
        changed = reconciled.assigned != member.assigned
        interval_ms = self.settings(group.group_id, "consumer.heartbeat.interval.ms")
        return records, HeartbeatResult(member_id=member_id, member_epoch=reconciled.member_epoch,
                                        heartbeat_interval_ms=interval_ms,
                                        assignment=reconciled.assigned if full or changed else None)

    def _member(self, group: ConsumerGroup, request: HeartbeatRequest, member_id: str,
                records: Records) -> tuple[ConsumerMember, bool]:
        """The member a heartbeat speaks for, and whether it is new to the group."""
        epoch, instance_id = request.member_epoch, request.instance_id
        if instance_id is None:
            if epoch == 0:
                if member_id in group.members:
                    # A member rejoining under its id (after being fenced) starts over: its
                    # old incarnation's partitions are released.
                    group.remove_member(member_id)
                return ConsumerMember(member_id), True
            member = group.member(member_id)
            self._check_epoch(member, epoch, request.owned)
            return member, False
        existing_id = group.static_members.get(instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if epoch == 0:
            if existing is None:
                if member_id in group.members:
                    group.remove_member(member_id)
                return ConsumerMember(member_id, instance_id=instance_id), True
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaError(ErrorCode.unreleased_instance_id,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            # The static member is back: a new member id takes over its partitions and
            # target, with no new group epoch (its subscription is what it was).
            target = group.target.get(existing.member_id, {})
            records += group.member_tombstones(existing.member_id)
            group.remove_member(existing.member_id)
            replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            group.target[member_id] = target
            group.put_member(replacement)
            records += [group.member_record(replacement), group.target_member_record(member_id)]
            return replacement, False
        if existing is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(ErrorCode.fenced_instance_id,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing.member_id}.")
        self._check_epoch(existing, epoch, request.owned)
        return existing, False

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
        if epoch > member.member_epoch:
            raise KafkaError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                             f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                             f"partitions and rejoin.")
        if epoch < member.member_epoch:
            # The answer that moved it to its current epoch may have been lost: its
            # previous epoch is accepted with partitions it had.
            if epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned):
                raise KafkaError(ErrorCode.fenced_member_epoch,
                                 f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                                 f"by the group coordinator ({member.member_epoch}). The member must abandon all "
                                 f"its partitions and rejoin.")

    def _assign(self, group: ConsumerGroup, subscriptions: dict[str, frozenset[uuid.UUID]],
                counts: dict[uuid.UUID, int], records: Records) -> None:
        assignor = ASSIGNORS[group.preferred_assignor(self.assignors[0])]
        target = assignor(AssignmentSpec(subscriptions, counts, group.target))
        for member_id in group.members:
            new = target.get(member_id, {})
            if group.target.get(member_id) != new:
                group.target[member_id] = new
                records.append(group.target_member_record(member_id))
        group.assignment_epoch = group.group_epoch
        records.append(group.target_epoch_record())

    # --- leaving and expiring -------------------------------------------------------------

    def leave(self, group: ConsumerGroup, request: HeartbeatRequest) -> CoordinatorResult[HeartbeatResult]:
        """A heartbeat with epoch -1 (leaving) or -2 (a static member leaving for a while)."""
        return self._decided(group, lambda working: self._leave(working, request))

    def _leave(self, group: ConsumerGroup, request: HeartbeatRequest) -> tuple[Records, HeartbeatResult]:
        instance_id = request.instance_id
        if instance_id is None:
            member = group.member(request.member_id)
        else:
            existing_id = group.static_members.get(instance_id)
            if existing_id is None:
                raise KafkaError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
            if existing_id != request.member_id:
                raise KafkaError(ErrorCode.fenced_instance_id,
                                 f"Static member {request.member_id} with instance id {instance_id} was fenced by "
                                 f"member {existing_id}.")
            member = group.members[existing_id]
        if instance_id is not None and request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It keeps its partitions (nobody else gets them) until it is back or its
            # session expires.
            away = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={},
                           revocation_deadline=None)
            group.put_member(away)
            records: Records = [group.current_assignment_record(away)]
        else:
            records = self._fence(group, member.member_id)
        return records, HeartbeatResult(member_id=request.member_id, member_epoch=request.member_epoch)

    def fence(self, group: ConsumerGroup, member_id: str) -> CoordinatorResult[None]:
        """Remove a member (its session expired, or it held partitions past its
        rebalance timeout)."""
        return self._decided(group, lambda working: (self._fence(working, member_id), None))

    @staticmethod
    def _fence(group: ConsumerGroup, member_id: str) -> Records:
        """A member leaves the group: its partitions are free, and the group epoch moves on."""
        records = group.member_tombstones(member_id)
        group.remove_member(member_id)
        group.group_epoch += 1
        records.append(group.epoch_record())
        return records

    def expired(self, group: ConsumerGroup) -> list[str]:
        """The members to fence: their session expired, or they kept partitions to
        revoke past their rebalance timeout."""
        session_timeout_ms = self.settings(group.group_id, "consumer.session.timeout.ms")
        return expired_members(group.members.values(), self.clock(), session_timeout_ms / 1000)

    def restored(self, group: ConsumerGroup) -> None:
        """A group rebuilt at start-up: its members' sessions (and revocation timeouts)
        start now, and the metadata its epoch saw is what the topics are now."""
        now = self.clock()
        for member in group.members.values():
            member.last_heartbeat = now
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                member.revocation_deadline = now + max(member.rebalance_timeout_ms, 0) / 1000
        group.subscribed_metadata = self.subscriptions(group)[2]


__all__ = ("ConsumerProtocol", "HeartbeatRequest", "HeartbeatResult", "validate")
