"""The options of `format("ottla")`, with the names of Spark's Kafka source and sink.

Spark hands options over case-insensitively (lower-cased). Every `kafka.`-prefixed
option goes, without the prefix, to the confluent-kafka client, as Spark's connector
passes them to the Java client: `kafka.bootstrap.servers` is required, and
`kafka.isolation.level` picks the source's isolation (read_committed unless told).
Settings the connector depends on (offset handling, transactions) are set by the
connector after the user's and win.

Both option sets are plain frozen data: they travel, pickled, inside the readers and
writers that Spark ships to its executors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ottla.pipeline.cluster import Subscription
from ottla.pipeline.offsets import PartitionOffsets, parse_spec

KAFKA_PREFIX = "kafka."


@dataclass(frozen=True)
class SourceOptions:
    client_config: dict[str, str]
    subscription: Subscription
    starting_offsets: str | PartitionOffsets
    ending_offsets: str | PartitionOffsets
    max_offsets_per_trigger: int | None
    read_committed: bool
    fail_on_data_loss: bool
    poll_timeout_s: float

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> SourceOptions:
        client_config = _client_config(options)
        isolation = client_config.pop("isolation.level", "read_committed")
        if isolation not in ("read_committed", "read_uncommitted"):
            raise ValueError(f"kafka.isolation.level must be read_committed or read_uncommitted, not {isolation!r}")
        max_offsets = options.get("maxoffsetspertrigger")
        if max_offsets is not None and int(max_offsets) <= 0:
            raise ValueError(f"maxOffsetsPerTrigger must be a positive number, not {max_offsets!r}")
        return cls(
            client_config=client_config,
            subscription=_subscription(options),
            # Spark's defaults: a stream starts at the end and sees what arrives next, a
            # batch read takes everything there is.
            starting_offsets=parse_spec(options.get("startingoffsets", "latest" if streaming else "earliest"),
                                        "startingOffsets"),
            ending_offsets=parse_spec(options.get("endingoffsets", "latest"), "endingOffsets"),
            max_offsets_per_trigger=int(max_offsets) if max_offsets is not None else None,
            read_committed=isolation == "read_committed",
            fail_on_data_loss=_boolean(options.get("failondataloss", "true"), "failOnDataLoss"),
            poll_timeout_s=int(options.get("kafkaconsumer.polltimeoutms", "120000")) / 1000,
        )


@dataclass(frozen=True)
class SinkOptions:
    client_config: dict[str, str]
    topic: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        return cls(client_config=_client_config(options), topic=options.get("topic"))


def _client_config(options: Mapping[str, str]) -> dict[str, str]:
    config = {key[len(KAFKA_PREFIX):]: value for key, value in options.items() if key.startswith(KAFKA_PREFIX)}
    if "bootstrap.servers" not in config:
        raise ValueError("option kafka.bootstrap.servers is required")
    return config


def _subscription(options: Mapping[str, str]) -> Subscription:
    topics = options.get("subscribe")
    pattern = options.get("subscribepattern")
    if (topics is None) == (pattern is None):
        raise ValueError("exactly one of the options subscribe and subscribePattern is required")
    if topics is None:
        return Subscription(pattern=pattern)
    names = tuple(t.strip() for t in topics.split(",") if t.strip())
    if not names:
        raise ValueError("option subscribe names no topic")
    return Subscription(topics=names)


def _boolean(text: str, option: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise ValueError(f"{option} must be true or false, not {text!r}")
    return word == "true"
