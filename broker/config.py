"""Broker settings, under Kafka's property names and with Kafka's defaults.

`PROPERTIES` is the one table of what can be configured: the command line offers each
entry as `--<kafka.name> VALUE` (and `--override name=value`), and `BrokerConfig`
holds the parsed values under Python names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from storage.log import LogConfig


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
    Property("log.segment.bytes", "log_segment_bytes", int, "roll a segment at this size"),
    Property("log.index.interval.bytes", "log_index_interval_bytes", int, "log bytes between index entries"),
    Property("message.max.bytes", "message_max_bytes", int, "largest record batch accepted"),
    Property("socket.request.max.bytes", "socket_request_max_bytes", int, "largest request frame accepted"),
    Property("log.flush.offset.checkpoint.interval.ms", "checkpoint_interval_ms", int,
             "how often recovery points are written"),
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


@dataclass(frozen=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    data_dir: str = "./data"
    log_level: str = "info"
    log_format: str = "console"
    node_id: int = 1

    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    log_segment_bytes: int = 1024 * 1024 * 1024
    log_index_interval_bytes: int = 4096
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 100 * 1024 * 1024
    checkpoint_interval_ms: int = 60_000
    transaction_max_timeout_ms: int = 15 * 60 * 1000
    transaction_state_partitions: int = 50
    transaction_timeout_check_ms: int = 10_000
    offsets_topic_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    offset_metadata_max_bytes: int = 4096

    @property
    def advertised(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    def log_config(self) -> LogConfig:
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            max_message_bytes=self.message_max_bytes,
        )

    def with_kafka_properties(self, values: dict[str, str]) -> "BrokerConfig":
        """A copy with Kafka-named properties applied. Raises ValueError naming the key
        for an unknown key or an invalid value."""
        changes = {}
        for key, text in values.items():
            prop = BY_KAFKA_NAME.get(key)
            if prop is None:
                raise ValueError(f"unknown broker property {key!r}")
            try:
                changes[prop.attribute] = prop.parse(text)
            except ValueError as exc:
                raise ValueError(f"invalid value for {key}: {exc}") from None
        return replace(self, **changes)
