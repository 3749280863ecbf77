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


class OutOfBounds(ValueError):
    """A group config beyond the broker's bound for it: the message is Kafka's whole."""


def _int_in(name: str, low: tuple[str, int], high: tuple[str, int]) -> Callable[[str], object]:
    """A group config that is an int between two broker settings (name, value)."""
    def check(value: str) -> object:
        try:
            number = int(value)
        except ValueError:
            raise ValueError("Not a number of type INT") from None
        if number < low[1]:
            raise OutOfBounds(f"{name} must be greater than or equal to {low[0]}")
        if number > high[1]:
            raise OutOfBounds(f"{name} must be less than or equal to {high[0]}")
        return number
    return check


def share_group_configs(config: ShareConfig) -> dict[str, tuple[str, Callable[[str], object]]]:
    """The GROUP configs of share groups: name -> (default, parse-and-check), with the
    bounds Kafka's GroupConfig takes from the broker's group.share.* settings."""

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

    c = config

    def bounded(name: str, default: int, low: int, high: int, broker: str) -> tuple[str, Callable[[str], object]]:
        # Kafka names the broker settings: group.share.min.<broker>, group.share.max.<broker>.
        return str(default), _int_in(name, (f"group.share.min.{broker}", low), (f"group.share.max.{broker}", high))

    return {
        "share.session.timeout.ms": bounded("share.session.timeout.ms", c.session_timeout_ms,
                                            c.min_session_timeout_ms, c.max_session_timeout_ms,
                                            "session.timeout.ms"),
        "share.heartbeat.interval.ms": bounded("share.heartbeat.interval.ms", c.heartbeat_interval_ms,
                                               c.min_heartbeat_interval_ms, c.max_heartbeat_interval_ms,
                                               "heartbeat.interval.ms"),
        "share.record.lock.duration.ms": bounded("share.record.lock.duration.ms", c.record_lock_duration_ms,
                                                 c.min_record_lock_duration_ms, c.max_record_lock_duration_ms,
                                                 "record.lock.duration.ms"),
        "share.delivery.count.limit": bounded("share.delivery.count.limit", c.delivery_count_limit,
                                              c.min_delivery_count_limit, c.max_delivery_count_limit,
                                              "delivery.count.limit"),
        "share.partition.max.record.locks": bounded("share.partition.max.record.locks",
                                                    c.partition_max_record_locks, c.min_partition_max_record_locks,
                                                    c.max_partition_max_record_locks, "partition.max.record.locks"),
        "share.auto.offset.reset": ("latest", reset),
        "share.isolation.level": ("read_uncommitted", isolation),
        "share.renew.acknowledge.enable": ("true", boolean),
    }
