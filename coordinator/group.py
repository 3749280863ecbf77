"""What the coordinator knows of every consumer group, whichever membership protocol
it speaks, and the coordinator's settings.

Kafka 4 has two membership protocols: the classic one (JoinGroup/SyncGroup, a member
computes the assignment; classic_group.py and classic_protocol.py) and KIP-848's
consumer protocol (ConsumerGroupHeartbeat, the broker computes it). Groups of both kinds
share one registry (groups.py) and one offsets store (offset_store.py) and are listed
together by ListGroups. What differs between them is how a commit is checked against
the membership, which topics the members consume, and which records describe the group
in `__consumer_offsets`; a group answers those questions itself, so neither the registry
nor the store has to know which protocol it speaks.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from .writes import Records


class GroupType(enum.Enum):
    """The kinds of group, under the names ListGroups reports and filters on."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"


@dataclass(frozen=True)
class GroupConfig:
    """The group coordinator's settings, with Kafka's defaults: the broker's settings
    (broker/config.py) take their defaults from here."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_metadata_bytes: int = 4096
    num_partitions: int = 50
    # KIP-848 consumer groups (Kafka's group.consumer.* settings and defaults).
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_assignment_interval_ms: int = 1_000
    consumer_min_assignment_interval_ms: int = 0
    consumer_max_assignment_interval_ms: int = 15_000
    share_assignment_interval_ms: int = 1_000
    share_min_assignment_interval_ms: int = 0
    share_max_assignment_interval_ms: int = 15_000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # KIP-1071 streams groups (Kafka's group.streams.* settings and defaults).
    streams_session_timeout_ms: int = 45_000
    streams_heartbeat_interval_ms: int = 5_000
    streams_num_standby_replicas: int = 0
    streams_max_size: int = 2**31 - 1
    streams_min_session_timeout_ms: int = 45_000
    streams_max_session_timeout_ms: int = 60_000
    streams_min_heartbeat_interval_ms: int = 5_000
    streams_max_heartbeat_interval_ms: int = 15_000
    streams_max_standby_replicas: int = 2
    # A new streams group waits this long for more members before its first assignment
    # (Kafka's default; broker/development_defaults.py sets 0, as for classic groups).
    streams_initial_rebalance_delay_ms: int = 3_000
    streams_assignment_interval_ms: int = 1_000
    streams_min_assignment_interval_ms: int = 0
    streams_max_assignment_interval_ms: int = 15_000


class Group(abc.ABC):
    """A group as the registry, the offsets APIs and the admin APIs see it."""

    group_id: str
    # The protocol type the members declared ("consumer", "connect", ...), if any.
    protocol_type: str | None

    @property
    @abc.abstractmethod
    def type(self) -> GroupType:
        ...

    @property
    @abc.abstractmethod
    def state_name(self) -> str:
        """Kafka's name for the group's state (ListGroups, DescribeGroups, metrics)."""

    @abc.abstractmethod
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               api_version: int | None = None) -> None:
        """Raise KafkaError unless this member may commit offsets (OffsetCommit of
        `api_version`; None when the caller does not say)."""

    @abc.abstractmethod
    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> None:
        """Raise KafkaError unless this member may commit offsets in a transaction."""

    @abc.abstractmethod
    def validate_delete(self) -> None:
        """Raise KafkaError unless the group may be deleted (DeleteGroups)."""

    @abc.abstractmethod
    def topics_in_use(self) -> set[str]:
        """Topics the live members consume: OffsetDelete must not delete their offsets."""

    @abc.abstractmethod
    def tombstones(self) -> Records:
        """The `__consumer_offsets` records that delete this group's own records."""


class TimedMember(Protocol):
    """What the session timers of the heartbeat-driven protocols (KIP-848 consumer
    groups, KIP-1071 streams groups) read of a member."""

    member_id: str
    last_heartbeat: float
    revocation_deadline: float | None


def expired_members(members: Iterable[TimedMember], now: float, session_seconds: float) -> list[str]:
    """The members to fence: their session expired, or they kept what they must revoke
    past their rebalance timeout. A member rebuilt from the log and not heard from since
    (last_heartbeat 0: a tick can come between its partition's load and `restored`)
    starts its session now."""
    members = list(members)
    for member in members:
        if member.last_heartbeat == 0.0:
            member.last_heartbeat = now
    return [m.member_id for m in members
            if now > m.last_heartbeat + session_seconds
            or (m.revocation_deadline is not None and now > m.revocation_deadline)]
