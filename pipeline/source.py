"""The source: `spark.read.format("ottla")` and `spark.readStream.format("ottla")`.

The driver plans, the executors read. Planning turns offsets into `OffsetRange`s, one
Spark input partition per topic partition and range, from the broker's current bounds
(`cluster.bounds`). Each executor task then reads its range with a consumer of its own,
created inside `read()`: clients hold sockets and threads and cannot be pickled, which
is how Spark ships the reader to executors.

A streaming query keeps its offsets in Spark's checkpoint only (the JSON of
`offsets.to_json`): a restarted query resumes from the end of the last planned batch,
and nothing is committed to a consumer group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ottla.pipeline import offsets
from ottla.pipeline.cluster import PartitionBounds, bounds
from ottla.pipeline.offsets import DataLossError, PartitionOffsets
from ottla.pipeline.options import SourceOptions

# The schema of Spark's Kafka source (there, headers need includeHeaders=true; here they
# are always present, null for a record without headers, as in Spark).
SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])

# Kafka's own timestamp type ids, which Spark's source reports: -1 none, 0 CreateTime,
# 1 LogAppendTime.
TIMESTAMP_TYPES = {TIMESTAMP_NOT_AVAILABLE: -1, TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# How long one poll waits before the reader looks at the consumer's position again.
POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets [start, end) of one topic partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int


def ranges(start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRange]:
    return [OffsetRange(topic, partition, start[(topic, partition)], stop)
            for (topic, partition), stop in sorted(end.items()) if start[(topic, partition)] < stop]


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[tuple]:
    """The records of one range, as rows of `SCHEMA`, in offset order.

    The loop ends on the consumer's position, not on seeing offset `end - 1`: under
    read_committed, aborted records and transaction markers are never delivered, so
    offsets have gaps and the last offsets of a range may never show up, yet the
    consumer's position moves past them. A record at or past `end` (the consumer may
    fetch beyond the range) ends the range too."""
    topic, partition = offset_range.topic, offset_range.partition
    consumer = Consumer({
        **options.client_config,
        # librdkafka insists on a group id; it is never joined or committed to.
        "group.id": "ottla-spark-source",
        "enable.auto.commit": False,
        "isolation.level": "read_committed" if options.read_committed else "read_uncommitted",
        # A planned offset that is gone must surface as an error (failOnDataLoss), not
        # be silently replaced by another one.
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
    })
    try:
        consumer.assign([TopicPartition(topic, partition, offset_range.start)])
        position = offset_range.start
        last_progress = time.monotonic()
        while position < offset_range.end:
            message = consumer.poll(POLL_INTERVAL_S)
            error = message.error() if message is not None else None
            if message is not None and error is None:
                offset = message.offset()
                assert offset is not None, "a consumed message has its offset"
                if offset >= offset_range.end:
                    break
                yield _row(message)
                position = offset + 1
                last_progress = time.monotonic()
            elif error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET:
                position = _skip_lost_offsets(consumer, offset_range, position, options.fail_on_data_loss)
            elif error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            else:
                # Nothing delivered: the position may still have moved past markers
                # and aborted records.
                reached = consumer.position([TopicPartition(topic, partition)])[0].offset
                if reached > position:
                    position = reached
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > options.poll_timeout_s:
                    raise TimeoutError(f"{topic}-{partition}: no progress past offset {position} of the range "
                                       f"[{offset_range.start}, {offset_range.end}) in {options.poll_timeout_s:g} s")
    finally:
        consumer.close()


def _row(message: Message) -> tuple:
    kind, millis = message.timestamp()
    timestamp = EPOCH + timedelta(milliseconds=millis) if kind != TIMESTAMP_NOT_AVAILABLE else None
    return (message.key(), message.value(), message.topic(), message.partition(), message.offset(),
            timestamp, TIMESTAMP_TYPES[kind], message.headers())


def _skip_lost_offsets(consumer: Consumer, offset_range: OffsetRange, position: int, fail: bool) -> int:
    """The consumer's offset is no longer in the partition: fail, or go on from what is
    left of the range. Returns the new position."""
    tp = TopicPartition(offset_range.topic, offset_range.partition)
    low, high = consumer.get_watermark_offsets(tp, timeout=30)
    if fail:
        raise DataLossError(f"{tp.topic}-{tp.partition}: offset {position} of the planned range "
                            f"[{offset_range.start}, {offset_range.end}) is gone; the partition now holds "
                            f"[{low}, {high}) (set failOnDataLoss=false to skip lost records)")
    if low >= offset_range.end or position >= high:
        return offset_range.end
    resume = max(position, low)
    consumer.assign([TopicPartition(tp.topic, tp.partition, resume)])
    return resume


class OttlaBatchReader(DataSourceReader):
    """A bounded read: startingOffsets (default earliest) to endingOffsets (default
    latest, that is the LSO under read_committed), resolved once, when Spark plans."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[OffsetRange]:
        current = bounds(self.options.client_config, self.options.subscription, self.options.read_committed)
        start = offsets.resolve(self.options.starting_offsets, "startingOffsets", current.earliest, current.latest)
        end = offsets.resolve(self.options.ending_offsets, "endingOffsets", current.earliest, current.latest)
        return ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        # With no range to read, Spark still runs one task, on a bare InputPartition.
        if not isinstance(partition, OffsetRange):
            return iter(())
        return read_range(self.options, partition)


class OttlaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of offset ranges. The reader object lives on the driver for the
    whole query (Spark keeps one Python planner process per source); only `read()`
    runs on executors."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        # Trigger.AvailableNow: the latest offsets when the query started, which no
        # micro-batch may pass, so that the query ends.
        self.target: PartitionOffsets | None = None

    def _bounds(self) -> PartitionBounds:
        return bounds(self.options.client_config, self.options.subscription, self.options.read_committed)

    def initialOffset(self) -> dict:
        current = self._bounds()
        return offsets.to_json(offsets.resolve(self.options.starting_offsets, "startingOffsets",
                                               current.earliest, current.latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._bounds().latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        current = self._bounds()
        begin = offsets.continue_from(offsets.from_json(start), current.earliest, current.latest,
                                      self.options.fail_on_data_loss)
        available = current.latest
        if self.target is not None:
            # Partitions that appeared after the query started wait for the next run.
            available = {tp: max(begin[tp], min(latest, self.target.get(tp, begin[tp])))
                         for tp, latest in current.latest.items()}
        # Spark passes ReadAllAvailable instead of the default limit when a trigger
        # wants everything; only ReadMaxRows (maxOffsetsPerTrigger) limits a batch.
        if isinstance(limit, ReadMaxRows):
            return offsets.to_json(offsets.limit(begin, available, limit.max_rows))
        return offsets.to_json(available)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        planned_end = offsets.from_json(end)
        # The same rule as latestOffset: new partitions from their earliest offset,
        # truncated ones from their earliest again (or a DataLossError).
        begin = offsets.continue_from(offsets.from_json(start), self._bounds().earliest, planned_end,
                                      self.options.fail_on_data_loss)
        return ranges(begin, planned_end)

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        if not isinstance(partition, OffsetRange):  # Spark hands back what partitions() planned
            raise TypeError(f"not an Ottla offset range: {partition!r}")
        return read_range(self.options, partition)
