"""Broker settings, under Kafka's property names and with Kafka's defaults.

Two tables say what can be configured: `PROPERTIES` (settings of the broker itself)
and storage's `TOPIC_CONFIGS`, whose broker properties (`log.segment.bytes`,
`log.retention.ms`, ...) give the defaults of every topic. The command line offers
each as `--<kafka.name> VALUE` and `--override name=value`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from protocol.errors import KafkaError
from storage.log_config import TOPIC_CONFIGS, LogConfig


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


@dataclass(frozen=True, slots=True)
class Property:
    kafka_name: str
    attribute: str
    parse: Callable[[str], Any]
    doc: str


PROPERTIES: tuple[Property, ...] = (
    Property("num.partitions", "num_partitions", int, "partitions of an auto-created topic"),
    Property("auto.create.topics.enable", "auto_create_topics_enable", _bool,
             "create a topic when a client asks for its metadata"),
    Property("socket.request.max.bytes", "socket_request_max_bytes", int, "largest request frame accepted"),
    Property("log.flush.offset.checkpoint.interval.ms", "checkpoint_interval_ms", int,
             "how often recovery points are written"),
    Property("log.retention.check.interval.ms", "retention_check_interval_ms", int,
             "how often segments past their retention are deleted"),
    Property("log.cleaner.backoff.ms", "cleaner_backoff_ms", int, "pause between compaction passes"),
    Property("transaction.max.timeout.ms", "transaction_max_timeout_ms", int,
             "the longest transaction timeout a producer may ask for"),
    Property("transaction.state.log.num.partitions", "transaction_state_partitions", int,
             "partitions of __transaction_state"),
    Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", "transaction_timeout_check_ms", int,
             "how often transactions past their timeout are aborted"),
    Property("offsets.topic.num.partitions", "offsets_topic_partitions", int, "partitions of __consumer_offsets"),
    Property("group.min.session.timeout.ms", "group_min_session_timeout_ms", int, "shortest session timeout allowed"),
    Property("group.max.session.timeout.ms", "group_max_session_timeout_ms", int, "longest session timeout allowed"),
    Property("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", int,
             "how long a new group waits for more members before its first rebalance"),
    Property("offset.metadata.max.bytes", "offset_metadata_max_bytes", int, "largest metadata of a committed offset"),
)
BY_KAFKA_NAME = {p.kafka_name: p for p in PROPERTIES}
# Broker properties that set the default of a topic config: log.segment.bytes -> segment.bytes ...
LOG_DEFAULTS = {c.broker_property: c for c in TOPIC_CONFIGS.values()}


@dataclass(frozen=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    data_dir: str = "./data"
    log_level: str = "info"
    log_format: str = "console"

    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    socket_request_max_bytes: int = 100 * 1024 * 1024
    checkpoint_interval_ms: int = 60_000
    retention_check_interval_ms: int = 300_000
    cleaner_backoff_ms: int = 15_000
    transaction_max_timeout_ms: int = 15 * 60 * 1000
    transaction_state_partitions: int = 50
    transaction_timeout_check_ms: int = 10_000
    offsets_topic_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    offset_metadata_max_bytes: int = 4096
    # Defaults of every topic's log settings (log.segment.bytes, log.retention.ms...).
    log: LogConfig = field(default_factory=LogConfig)

    @property
    def advertised(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    def with_kafka_properties(self, values: dict[str, str]) -> "BrokerConfig":
        """A copy with Kafka-named properties applied. Raises ValueError naming the key
        for an unknown key or an invalid value."""
        changes: dict[str, Any] = {}
        log_changes: dict[str, str | None] = {}
        for key, text in values.items():
            if key in LOG_DEFAULTS:
                log_changes[LOG_DEFAULTS[key].name] = text
                continue
            prop = BY_KAFKA_NAME.get(key)
            if prop is None:
                raise ValueError(f"unknown broker property {key!r}")
            try:
                changes[prop.attribute] = prop.parse(text)
            except ValueError as exc:
                raise ValueError(f"invalid value for {key}: {exc}") from None
        if log_changes:
            try:
                changes["log"] = self.log.with_topic_configs(log_changes)
            except KafkaError as exc:
                raise ValueError(exc.message) from None
        return replace(self, **changes)

    def broker_properties(self) -> dict[str, str]:
        """Every broker property and its current value as text (for DescribeConfigs)."""
        values = {p.kafka_name: _text(getattr(self, p.attribute)) for p in PROPERTIES}
        values.update({name: self.log.value_text(c.name) for name, c in LOG_DEFAULTS.items()})
        return values


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
