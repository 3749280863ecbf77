"""The share coordinator's broker-wide settings (Kafka's group.share.* and
share.coordinator.* properties): their defaults, and the bounds a group's own share.*
configs must keep to. A module of its own, light to import: broker/config.py takes
its defaults from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShareConfig:
    """The broker's group.share.* settings, Kafka's defaults and bounds."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = 5
    min_delivery_count_limit: int = 2
    max_delivery_count_limit: int = 10
    partition_max_record_locks: int = 2_000
    min_partition_max_record_locks: int = 100
    max_partition_max_record_locks: int = 4_000
    max_size: int = 200
    state_topic_partitions: int = 50
    max_share_sessions: int = 2_000
