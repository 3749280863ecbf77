"""The share coordinator's broker-wide settings (Kafka's group.share.* and
share.coordinator.* properties): their defaults, and the bounds a group's own share.*
configs must keep to. A module of its own, light to import: broker/config.py takes
its defaults from here."""

from __future__ import annotations

import re
from collections.abc import Callable
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


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration (share.auto.offset.reset's by_duration:), in ms; None if
    it is not one."""
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000
    # Hundreds of digits make an infinite float: no duration Java's Duration can hold
    # (nor its milliseconds a long), so not one, as Kafka refuses it.
    if not total < 2**63:
        return None
    return int(total)


def share_group_configs() -> dict[str, tuple[str, Callable[[str], object]]]:
    """The share groups' GROUP configs that are not numbers: name -> (default,
    parse-and-check). The numbers, bounded by the broker's group.share.* settings, are
    group_resource_configs.definitions' (GroupConfigDefinition, read through effective)."""

    def reset(value: str) -> object:
        if value in ("earliest", "latest") or (value.startswith("by_duration:")
                                               and duration_ms(value[len("by_duration:"):]) is not None):
            return value
        raise ValueError(f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
                         "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")

    def isolation(value: str) -> object:
        if value not in ("read_committed", "read_uncommitted"):
            raise ValueError("must be read_committed or read_uncommitted")
        return value

    def boolean(value: str) -> object:
        if value.lower() not in ("true", "false"):
            raise ValueError("must be true or false")
        return value.lower() == "true"

    return {
        "share.auto.offset.reset": ("latest", reset),
        "share.isolation.level": ("read_uncommitted", isolation),
        "share.renew.acknowledge.enable": ("true", boolean),
    }
