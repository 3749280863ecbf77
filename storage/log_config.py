"""Per-topic log settings, under Kafka's topic config names.

`TOPIC_CONFIGS` is the one table of them: the topic config name, the LogConfig field it
sets, the broker property that gives its default (`log.segment.bytes` for
`segment.bytes`...), how its text is parsed and checked. CreateTopics, AlterConfigs,
IncrementalAlterConfigs and DescribeConfigs all work from it, and so do the broker's
command-line defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ottla.protocol.errors import ErrorCode, KafkaError

DELETE, COMPACT = "delete", "compact"
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


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
    # How batches are stored: "producer" keeps the producer's codec; any other codec
    # makes the broker store batches in it (recompressing as Kafka does).
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    # CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the
    # broker's clock as it is appended.
    message_timestamp_type: str = CREATE_TIME
    # How far a CreateTime timestamp may lie before or after the broker's clock (Kafka 4's
    # defaults: no bound before, one hour after).
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    # Replicas that must have a write for acks=all; with one replica anything above 1
    # refuses acks=all writes with NOT_ENOUGH_REPLICAS, as a one-broker Kafka does.
    min_insync_replicas: int = 1
    # Accepted, checked and described; with one broker and no remote storage they
    # change nothing (docs/configuration.md: "Topic configs").
    segment_index_bytes: int = 10 * 1024 * 1024
    segment_jitter_ms: int = 0
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    def with_topic_configs(self, configs: Mapping[str, str | None]) -> LogConfig:
        """A copy with topic configs (Kafka names, text values) applied. INVALID_CONFIG
        names the config for an unknown name or a bad value."""
        changes = {}
        for name, text in configs.items():
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
            changes[definition.attribute] = definition.parse_checked(text)
        return replace(self, **changes)

    def value_text(self, name: str) -> str:
        """The current value of a topic config, as Kafka shows it."""
        value = getattr(self, TOPIC_CONFIGS[name].attribute)
        if isinstance(value, tuple):
            return ",".join(value)
        if isinstance(value, bool):
            return str(value).lower()
        return str(value)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    attribute: str
    broker_property: str | None  # the broker property giving its default (None: none has)
    parse: Callable[[str], Any]
    doc: str

    def parse_checked(self, text: str | None) -> Any:
        if text is None:
            raise KafkaError(ErrorCode.invalid_config, f"{self.name} needs a value")
        try:
            return self.parse(text)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config,
                             f"Invalid value {text} for configuration {self.name}: {exc}") from None


def _int_at_least(minimum: int, maximum: int = LONG_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("Not a number of type " + ("INT" if maximum == INT_MAX else "LONG")) from None
        if value < minimum:
            raise ValueError(f"Value must be at least {minimum}")
        if value > maximum:
            raise ValueError(f"Value must be no more than {maximum}")
        return value

    return parse


def _int_between(minimum: int, maximum: int) -> Callable[[str], int]:
    return _int_at_least(minimum, maximum)


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        for choice in choices:
            if value.lower() == choice.lower():
                return choice
        raise ValueError(f"String must be one of: {', '.join(choices)}")

    return parse


def _boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    return value == "true"


def _replica_list(text: str) -> str:
    """`*`, or partition:broker pairs (the throttled replicas' syntax)."""
    value = text.strip()
    if value in ("", "*"):
        return value
    for item in value.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            raise ValueError("must be * or a list of partition:broker pairs")
    return value


def _policy(text: str) -> tuple[str, ...]:
    # In the order given (Kafka keeps a list config as it was set, so an APPEND lands last).
    parts = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not parts or any(p not in (DELETE, COMPACT) for p in parts):
        raise ValueError("must be delete, compact or both")
    return parts


def _ratio(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")
    return value


def _gzip_level(text: str) -> int:
    value = _int_at_least(-1, 9)(text)
    if value == 0:
        raise ValueError("Value must be -1 or between 1 and 9")
    return value


def _remote_storage(text: str) -> bool:
    if _boolean(text):
        raise ValueError("Tiered storage is not enabled on this broker (remote.log.storage.system.enable=false)")
    return False


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
        TopicConfig("compression.type", "compression_type", "compression.type", _one_of(*COMPRESSION_TYPES),
                    "the codec batches are stored in; producer keeps the producer's"),
        TopicConfig("compression.gzip.level", "compression_gzip_level", "compression.gzip.level",
                    _gzip_level, "gzip level when the topic's codec is gzip"),
        TopicConfig("compression.lz4.level", "compression_lz4_level", "compression.lz4.level", _int_between(1, 17),
                    "lz4 level when the topic's codec is lz4"),
        TopicConfig("compression.zstd.level", "compression_zstd_level", "compression.zstd.level",
                    _int_between(-131072, 22), "zstd level when the topic's codec is zstd"),
        TopicConfig("message.timestamp.type", "message_timestamp_type", "log.message.timestamp.type",
                    _one_of(CREATE_TIME, LOG_APPEND_TIME), "the producer's timestamps, or the broker's at append"),
        TopicConfig("message.timestamp.before.max.ms", "message_timestamp_before_max_ms",
                    "log.message.timestamp.before.max.ms", _int_at_least(0),
                    "refuse a CreateTime timestamp earlier than the broker's clock by more than this"),
        TopicConfig("message.timestamp.after.max.ms", "message_timestamp_after_max_ms",
                    "log.message.timestamp.after.max.ms", _int_at_least(0),
                    "refuse a CreateTime timestamp later than the broker's clock by more than this"),
        TopicConfig("min.insync.replicas", "min_insync_replicas", "min.insync.replicas", _int_at_least(1, INT_MAX),
                    "replicas that must have an acks=all write (one broker has one)"),
        TopicConfig("segment.index.bytes", "segment_index_bytes", "log.index.size.max.bytes",
                    _int_at_least(4, INT_MAX), "largest offset index (no effect: Ottla's indexes grow as needed)"),
        TopicConfig("segment.jitter.ms", "segment_jitter_ms", "log.roll.jitter.ms", _int_at_least(0),
                    "random jitter of segment.ms (no effect on one node)"),
        TopicConfig("file.delete.delay.ms", "file_delete_delay_ms", "log.segment.delete.delay.ms", _int_at_least(0),
                    "delay before a deleted segment's files go (Ottla deletes at once)"),
        TopicConfig("preallocate", "preallocate", "log.preallocate", _boolean,
                    "preallocate segment files (no effect)"),
        TopicConfig("unclean.leader.election.enable", "unclean_leader_election_enable",
                    "unclean.leader.election.enable", _boolean, "no effect: one broker is always the leader"),
        TopicConfig("leader.replication.throttled.replicas", "leader_replication_throttled_replicas", None,
                    _replica_list, "no effect: no replication"),
        TopicConfig("follower.replication.throttled.replicas", "follower_replication_throttled_replicas", None,
                    _replica_list, "no effect: no replication"),
        TopicConfig("remote.storage.enable", "remote_storage_enable", None, _remote_storage,
                    "tiered storage (Ottla has none: only false)"),
        TopicConfig("local.retention.ms", "local_retention_ms", "log.local.retention.ms", _int_at_least(-2),
                    "tiered storage's local retention (no effect)"),
        TopicConfig("local.retention.bytes", "local_retention_bytes", "log.local.retention.bytes",
                    _int_at_least(-2), "tiered storage's local retention (no effect)"),
        TopicConfig("remote.log.copy.disable", "remote_log_copy_disable", None, _boolean,
                    "tiered storage (no effect)"),
        TopicConfig("remote.log.delete.on.disable", "remote_log_delete_on_disable", None, _boolean,
                    "tiered storage (no effect)"),
    )
}
