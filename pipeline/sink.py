"""The sink: `df.write.format("ottla")` and `df.writeStream.format("ottla")`.

Rows have the columns of Spark's Kafka sink: `value` (string or binary, required),
`key` (string or binary), `topic` (string; the `topic` option, when given, overrides
it), `partition` (int; otherwise the producer's partitioner chooses) and `headers`
(array of struct<key: string, value: binary>). Other columns are ignored.

Every task produces with the idempotent producer, so a retried produce request never
duplicates a record.

- Batch writes (`df.write`): at least once. Each task produces its rows and flushes;
  what a failed attempt produced stays, and the attempt Spark runs after it (a retry,
  or a speculative copy) produces all the task's rows again, so those rows are there
  twice.
- Streaming writes (`writeStream`): exactly once per micro-batch and task partition.
  See `OttlaStreamWriter` and `pipeline/README.md` for the precise guarantee.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from ottla.pipeline.ledger import BatchLedger, transactional_id
from ottla.pipeline.options import SinkOptions

TIMEOUT_S = 60.0
# Local properties that Spark's micro-batch engine sets on every task of a batch: the
# query's id, which is kept in the checkpoint and so survives restarts (unlike its run
# id), and the batch id.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class Columns:
    """Which of the optional columns the written DataFrame has. `key` and `value` arrive
    as str (a string column, encoded as UTF-8) or bytearray (a binary column)."""

    key: bool
    topic: bool
    partition: bool
    headers: bool

    @classmethod
    def of(cls, schema: StructType, topic_option: str | None) -> Columns:
        types = {field.name: field.dataType for field in schema.fields}
        if "value" not in types:
            raise ValueError("the DataFrame written to Ottla needs a value column")
        headers_type = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))
        expected = {"key": (StringType(), BinaryType()), "value": (StringType(), BinaryType()),
                    "topic": (StringType(),), "partition": (IntegerType(),), "headers": (headers_type,)}
        for name, allowed in expected.items():
            if name in types and not any(_same_type(types[name], t) for t in allowed):
                raise ValueError(f"column {name} has type {types[name].simpleString()}; expected "
                                 f"{' or '.join(t.simpleString() for t in allowed)}")
        if topic_option is None and "topic" not in types:
            raise ValueError("set the topic option or give the DataFrame a topic column")
        return cls(key="key" in types, topic="topic" in types, partition="partition" in types,
                   headers="headers" in types)


def _same_type(actual: object, expected: object) -> bool:
    # Nullability of array elements and struct fields does not matter for writing.
    if isinstance(actual, ArrayType) and isinstance(expected, ArrayType):
        return _same_type(actual.elementType, expected.elementType)
    if isinstance(actual, StructType) and isinstance(expected, StructType):
        return ([(f.name, f.dataType) for f in actual.fields] == [(f.name, f.dataType) for f in expected.fields])
    return actual == expected


@dataclass(frozen=True)
class TaskReport(WriterCommitMessage):
    """What one writer task did, sent back to the driver."""

    task_partition: int
    records: int
    already_committed: bool = False


def _produce_rows(producer: Producer, rows: Iterator[Row], columns: Columns, topic_option: str | None) -> int:
    """Hand every row to the producer; raise the first delivery error after the
    producer has sent everything (flush, or commit_transaction, waits for that)."""
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    count = 0
    for row in rows:
        message = _message(row, columns, topic_option)
        while True:
            try:
                producer.produce(**message, on_delivery=on_delivery)
                break
            except BufferError:
                # The producer's queue is full: let it deliver, then try again.
                producer.poll(0.1)
        count += 1
    remaining = producer.flush(TIMEOUT_S)
    if failures:
        raise KafkaException(failures[0])
    if remaining:
        raise TimeoutError(f"{remaining} records not delivered in {TIMEOUT_S:g} s")
    return count


def _message(row: Row, columns: Columns, topic_option: str | None) -> dict:
    message: dict = {"topic": topic_option or row["topic"], "value": _bytes(row["value"])}
    if message["topic"] is None:
        raise ValueError(f"a row has no topic: {row}")
    if columns.key:
        message["key"] = _bytes(row["key"])
    if columns.partition and row["partition"] is not None:
        message["partition"] = row["partition"]
    if columns.headers and row["headers"]:
        message["headers"] = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"]]
    return message


def _bytes(data: str | bytes | bytearray | None) -> bytes | None:
    if data is None:
        return None
    return data.encode() if isinstance(data, str) else bytes(data)


def _task() -> TaskContext:
    task = TaskContext.get()
    if task is None:
        raise RuntimeError("a Spark writer's write runs only inside a Spark task")
    return task


def _local_property(task: TaskContext, name: str) -> str:
    value = task.getLocalProperty(name)
    if value is None:  # Spark sets both of Ottla's properties on every streaming task
        raise RuntimeError(f"the Spark task has no local property {name}")
    return value


def _producer_config(options: SinkOptions) -> dict:
    return {**options.client_config, "enable.idempotence": True, "acks": "all"}


class OttlaBatchWriter(DataSourceWriter):
    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    def write(self, rows: Iterator[Row]) -> TaskReport:
        producer = Producer(_producer_config(self.options))
        count = _produce_rows(producer, rows, self.columns, self.options.topic)
        return TaskReport(_task().partitionId(), count)


class OttlaStreamWriter(DataSourceStreamWriter):
    """Each task writes its part of a micro-batch in one Kafka transaction, with the
    transactional id of (query id, task partition) and, inside the transaction, the
    ledger entry "batch N is written" (see `pipeline.ledger`).

    A task first calls `init_transactions`, which fences any earlier producer of its id
    (a zombie attempt, or the tasks of a driver that was killed) and ends that
    producer's open transaction, then reads the ledger: if batch N is already committed
    for its partition, the task writes nothing. So when Spark runs batch N again (after a
    driver crash between the sink's commit and the checkpoint's, or a task retry after
    the transaction committed) no record is written twice, provided the replay sends
    each task partition the same rows, which Spark does for a replay of the same
    offsets through deterministic operators.
    """

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    def write(self, rows: Iterator[Row]) -> TaskReport:
        task = _task()
        query_id = _local_property(task, QUERY_ID_PROPERTY)
        batch_id = int(_local_property(task, BATCH_ID_PROPERTY))
        task_partition = task.partitionId()
        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            # An empty task opens no transaction: with nothing written there is
            # nothing that a replay could duplicate.
            return TaskReport(task_partition, 0)
        producer = Producer({**_producer_config(self.options),
                             "transactional.id": transactional_id(query_id, task_partition)})
        ledger = BatchLedger(self.options.client_config, query_id, task_partition)
        try:
            producer.init_transactions(TIMEOUT_S)
            if ledger.committed(batch_id):
                return TaskReport(task_partition, 0, already_committed=True)
            producer.begin_transaction()
            try:
                count = _produce_rows(producer, chain([first], rows), self.columns, self.options.topic)
                ledger.record(producer, batch_id)
                producer.commit_transaction(TIMEOUT_S)
            except BaseException:
                # Abort now rather than leave the transaction open until the retry's
                # init_transactions or the transaction timeout: while it is open, the
                # last stable offset of every partition it wrote to is held back. A
                # fenced producer cannot abort; the original error is the one to see.
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(TIMEOUT_S)
                raise
            return TaskReport(task_partition, count)
        finally:
            ledger.close()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Runs on the driver once every task of the batch has committed, before Spark
        records the batch in its checkpoint: the transactions carry the commit, so there
        is nothing left to do here."""
