"""What the driver asks the broker while it plans a read: which partitions the
subscription covers now, and where each begins and ends.

"Latest" follows the isolation level: under read_committed it is the last stable offset
(LSO), the first offset of the oldest transaction still open, so a planned range never
reaches into records whose fate is undecided; under read_uncommitted it is the high
watermark. An AdminClient is made per call: planning happens once per micro-batch, and
a client held in the reader would have to be kept out of the pickled reader that Spark
sends to the executors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ottla.pipeline.offsets import PartitionOffsets

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Subscription:
    """`subscribe` (a comma-separated list) or `subscribePattern` (a regular expression
    that must match a whole topic name, as in Java). Internal topics (`__...`) never
    match a pattern, as with Kafka's consumers."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class PartitionBounds:
    earliest: PartitionOffsets
    latest: PartitionOffsets


def bounds(client_config: dict[str, str], subscription: Subscription, read_committed: bool) -> PartitionBounds:
    """Earliest and latest offsets of every partition of the subscribed topics. A
    subscribed topic that does not exist has no partitions yet, as with Spark's Kafka
    source: a stream picks it up when it appears (from its earliest offset), and a
    partition that disappears is a matter for failOnDataLoss."""
    admin = AdminClient({**client_config})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    partitions = [TopicPartition(name, p) for name, topic in metadata.topics.items()
                  if subscription.matches(name) and topic.error is None for p in topic.partitions]
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    return PartitionBounds(_offsets(admin, partitions, OffsetSpec.earliest(), isolation),
                           _offsets(admin, partitions, OffsetSpec.latest(), isolation))


def _offsets(admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec,
             isolation: IsolationLevel) -> PartitionOffsets:
    if not partitions:
        return {}
    futures = admin.list_offsets({tp: spec for tp in partitions}, isolation_level=isolation,
                                 request_timeout=TIMEOUT_S)
    return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
