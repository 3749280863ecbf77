"""The configs of the GROUP config resource (DescribeConfigs, IncrementalAlterConfigs) as
Kafka 4.3.1's GroupConfig defines them: the consumer.*, share.* and streams.* configs,
each one's type, its default (the broker setting it is a synonym of), the lower bound of
its own definition and the bounds the broker's group.*.min/max settings put on it.

`check` is Kafka's GroupConfig.validate: a value that is not a number of its type or
below its definition's bound is "Invalid value ...", one beyond a broker bound names the
bound, as Kafka says it; `effective` is GroupConfig.evaluate: a group's own value kept
within the broker's bounds as they are now (they may have moved since it was set).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ottla.protocol.errors import ErrorCode, KafkaError

from .group import GroupConfig
from .share_config import ShareConfig, share_group_configs

# Kafka's ConfigDef types, as DescribeConfigs numbers them.
BOOLEAN, STRING, INT = 1, 2, 3
SHARE_DEFAULTS = ShareConfig()


@dataclass(frozen=True)
class GroupConfigDefinition:
    name: str
    type: int
    default: str
    # The broker setting whose value is the default (DescribeConfigs' synonym).
    broker_synonym: str | None = None
    at_least: int | None = None
    # (broker setting, its value) bounding the group's value, if any.
    low: tuple[str, int] | None = None
    high: tuple[str, int] | None = None
    # The share configs that are not numbers: share_coordinator's parse-and-check.
    parse: Callable[[str], object] | None = None


def definitions(config: GroupConfig, share: ShareConfig = SHARE_DEFAULTS) -> dict[str, GroupConfigDefinition]:
    """Every GROUP config, in Kafka's order of definition."""
    def bounded(protocol: str, name: str, default: int, at_least: int, low: int | None, high: int | None,
                broker: str | None = None) -> GroupConfigDefinition:
        setting = broker or name
        return GroupConfigDefinition(
            f"{protocol}.{name}", INT, str(default), f"group.{protocol}.{name}", at_least,
            None if low is None else (f"group.{protocol}.min.{setting}", low),
            None if high is None else (f"group.{protocol}.max.{setting}", high))

    c, s = config, share
    shares = share_group_configs()
    out = [
        bounded("consumer", "session.timeout.ms", c.consumer_session_timeout_ms, 1,
                c.consumer_min_session_timeout_ms, c.consumer_max_session_timeout_ms),
        bounded("consumer", "heartbeat.interval.ms", c.consumer_heartbeat_interval_ms, 1,
                c.consumer_min_heartbeat_interval_ms, c.consumer_max_heartbeat_interval_ms),
        bounded("consumer", "assignment.interval.ms", c.consumer_assignment_interval_ms, 0,
                c.consumer_min_assignment_interval_ms, c.consumer_max_assignment_interval_ms),
        bounded("share", "session.timeout.ms", s.session_timeout_ms, 1, s.min_session_timeout_ms,
                s.max_session_timeout_ms),
        bounded("share", "heartbeat.interval.ms", s.heartbeat_interval_ms, 1, s.min_heartbeat_interval_ms,
                s.max_heartbeat_interval_ms),
        bounded("share", "record.lock.duration.ms", s.record_lock_duration_ms, 1000, s.min_record_lock_duration_ms,
                s.max_record_lock_duration_ms),
        bounded("share", "delivery.count.limit", s.delivery_count_limit, 2, s.min_delivery_count_limit,
                s.max_delivery_count_limit),
        bounded("share", "partition.max.record.locks", s.partition_max_record_locks, 100,
                s.min_partition_max_record_locks, s.max_partition_max_record_locks),
        GroupConfigDefinition("share.auto.offset.reset", STRING, shares["share.auto.offset.reset"][0],
                              parse=shares["share.auto.offset.reset"][1]),
        GroupConfigDefinition("share.isolation.level", STRING, shares["share.isolation.level"][0],
                              parse=shares["share.isolation.level"][1]),
        GroupConfigDefinition("share.renew.acknowledge.enable", BOOLEAN, shares["share.renew.acknowledge.enable"][0],
                              parse=shares["share.renew.acknowledge.enable"][1]),
        bounded("share", "assignment.interval.ms", c.share_assignment_interval_ms, 0,
                c.share_min_assignment_interval_ms, c.share_max_assignment_interval_ms),
        bounded("streams", "session.timeout.ms", c.streams_session_timeout_ms, 1,
                c.streams_min_session_timeout_ms, c.streams_max_session_timeout_ms),
        bounded("streams", "heartbeat.interval.ms", c.streams_heartbeat_interval_ms, 1,
                c.streams_min_heartbeat_interval_ms, c.streams_max_heartbeat_interval_ms),
        # Kafka bounds the standby replicas by group.streams.max.standby.replicas only.
        bounded("streams", "num.standby.replicas", c.streams_num_standby_replicas, 0, None,
                c.streams_max_standby_replicas, broker="standby.replicas"),
        bounded("streams", "initial.rebalance.delay.ms", c.streams_initial_rebalance_delay_ms, 0, None, None),
        bounded("streams", "assignment.interval.ms", c.streams_assignment_interval_ms, 0,
                c.streams_min_assignment_interval_ms, c.streams_max_assignment_interval_ms),
    ]
    return {d.name: d for d in out}


def _parse(d: GroupConfigDefinition, text: str) -> object:
    def invalid(reason: str) -> KafkaError:
        return KafkaError(ErrorCode.invalid_config, f"Invalid value {text} for configuration {d.name}: {reason}")

    if d.parse is not None:
        try:
            return d.parse(text)
        except ValueError as exc:
            raise invalid(str(exc)) from None
    try:
        number = int(text.strip())
    except ValueError:
        raise invalid("Not a number of type INT") from None
    if not -2**31 <= number < 2**31:
        raise invalid("Not a number of type INT")
    if d.at_least is not None and number < d.at_least:
        raise invalid(f"Value must be at least {d.at_least}")
    return number


def check(defined: Mapping[str, GroupConfigDefinition], values: Mapping[str, str]) -> None:
    """Kafka's GroupConfig.validate of a group's configs as they would be: INVALID_CONFIG
    with Kafka's message for the first fault, in Kafka's order (every value parsed
    first, then the broker's bounds, then each session timeout above its heartbeat
    interval)."""
    parsed = {name: _parse(defined[name], text) for name, text in values.items()}
    for name, d in defined.items():
        value = parsed.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if d.low is not None and value < d.low[1]:
            raise KafkaError(ErrorCode.invalid_config, f"{name} must be greater than or equal to {d.low[0]}")
        if d.high is not None and value > d.high[1]:
            raise KafkaError(ErrorCode.invalid_config, f"{name} must be less than or equal to {d.high[0]}")
    for protocol in ("consumer", "share", "streams"):
        session, heartbeat = f"{protocol}.session.timeout.ms", f"{protocol}.heartbeat.interval.ms"
        session_ms = parsed.get(session, int(defined[session].default))
        heartbeat_ms = parsed.get(heartbeat, int(defined[heartbeat].default))
        if session_ms <= heartbeat_ms:  # type: ignore[operator]
            raise KafkaError(ErrorCode.invalid_config, f"{session} must be greater than {heartbeat}")


def effective(defined: Mapping[str, GroupConfigDefinition], values: Mapping[str, str], name: str) -> int:
    """A group's number config as the coordinator uses it (GroupConfig.evaluate): its own
    value kept within the broker's bounds of now, else the broker's setting."""
    d = defined[name]
    try:
        value = int(values[name])
    except (KeyError, ValueError):
        return int(d.default)
    if d.low is not None:
        value = max(value, d.low[1])
    if d.high is not None:
        value = min(value, d.high[1])
    return value


class GroupSettings:
    """What the group coordinator reads of a group's configs: a number config's effective
    value for one group (`settings(group_id, "streams.session.timeout.ms")`)."""

    def __init__(self, config: GroupConfig, group_configs: Callable[[str], Mapping[str, str]]) -> None:
        self.config = config
        self.defined = definitions(config)
        self.group_configs = group_configs

    def __call__(self, group_id: str, name: str) -> int:
        return effective(self.defined, self.group_configs(group_id), name)


@functools.cache
def share_group_definitions(share: ShareConfig) -> tuple[dict[str, GroupConfigDefinition],
                                                         dict[str, tuple[str, Callable[[str], object]]]]:
    """The GROUP configs' definitions and the share.* ones' parsers for these broker
    settings, built once rather than at every ShareFetch and ShareAcknowledge that reads
    a share group's settings (ShareCoordinator.settings)."""
    return definitions(GroupConfig(), share), share_group_configs()
