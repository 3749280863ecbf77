"""Per-topic log settings, under Kafka's topic config names.

`TOPIC_CONFIGS` is the one table of them: the topic config name, the LogConfig field it
sets, the broker property that gives its default (`log.segment.bytes` for
`segment.bytes`...), how its text is parsed and checked. CreateTopics, AlterConfigs,
IncrementalAlterConfigs and DescribeConfigs all work from it, and so do the broker's
command-line defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from ottla.protocol.errors import ErrorCode, KafkaError

DELETE, COMPACT = "delete", "compact"
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    cleanup_policy: tuple[str, ...] = (DELETE,)
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    # Kafka leaves flushing to the OS by default: an acknowledged batch is in the page
    # cache, which survives a process crash.
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    def with_topic_configs(self, configs: dict[str, str | None]) -> "LogConfig":
        """A copy with topic configs (Kafka names, text values) applied. INVALID_CONFIG
        names the config for an unknown name or a bad value."""
        changes = {}
        for name, text in configs.items():
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                raise KafkaError(ErrorCode.invalid_config, f"unknown topic config {name!r}")
            changes[definition.attribute] = definition.parse_checked(text)
        return replace(self, **changes)

    def value_text(self, name: str) -> str:
        """The current value of a topic config, as Kafka shows it."""
        value = getattr(self, TOPIC_CONFIGS[name].attribute)
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    attribute: str
    broker_property: str
    parse: Callable[[str], Any]
    doc: str

    def parse_checked(self, text: str | None) -> Any:
        if text is None:
            raise KafkaError(ErrorCode.invalid_config, f"{self.name} needs a value")
        try:
            return self.parse(text)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config, f"invalid value {text!r} for {self.name}: {exc}") from None


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        return value

    return parse


def _policy(text: str) -> tuple[str, ...]:
    parts = tuple(sorted({p.strip() for p in text.split(",") if p.strip()}))
    if not parts or any(p not in (DELETE, COMPACT) for p in parts):
        raise ValueError("must be delete, compact or both")
    return parts


def _ratio(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")
    return value


TOPIC_CONFIGS: dict[str, TopicConfig] = {
    c.name: c
    for c in (
        TopicConfig("cleanup.policy", "cleanup_policy", "log.cleanup.policy", _policy,
                    "delete old segments, compact to the latest value per key, or both"),
        TopicConfig("retention.ms", "retention_ms", "log.retention.ms", _int_at_least(-1),
                    "delete closed segments older than this (-1: keep forever)"),
        TopicConfig("retention.bytes", "retention_bytes", "log.retention.bytes", _int_at_least(-1),
                    "delete the oldest closed segments beyond this size (-1: no limit)"),
        TopicConfig("segment.bytes", "segment_bytes", "log.segment.bytes", _int_at_least(14),
                    "roll a segment at this size"),
        TopicConfig("segment.ms", "segment_ms", "log.roll.ms", _int_at_least(1),
                    "roll a segment this long after its first batch"),
        TopicConfig("delete.retention.ms", "delete_retention_ms", "log.cleaner.delete.retention.ms",
                    _int_at_least(0), "how long compaction keeps tombstones"),
        TopicConfig("min.compaction.lag.ms", "min_compaction_lag_ms", "log.cleaner.min.compaction.lag.ms",
                    _int_at_least(0), "records younger than this are not compacted"),
        TopicConfig("max.compaction.lag.ms", "max_compaction_lag_ms", "log.cleaner.max.compaction.lag.ms",
                    _int_at_least(1), "records older than this are compacted whatever the dirty ratio"),
        TopicConfig("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "log.cleaner.min.cleanable.ratio",
                    _ratio, "compact once this share of the log is dirty"),
        TopicConfig("max.message.bytes", "max_message_bytes", "message.max.bytes", _int_at_least(0),
                    "largest record batch accepted"),
        TopicConfig("index.interval.bytes", "index_interval_bytes", "log.index.interval.bytes", _int_at_least(0),
                    "log bytes between offset index entries"),
        TopicConfig("flush.messages", "flush_messages", "log.flush.interval.messages", _int_at_least(1),
                    "fsync after this many messages"),
        TopicConfig("flush.ms", "flush_ms", "log.flush.interval.ms", _int_at_least(0),
                    "fsync when the oldest unflushed message is this old"),
    )
}
