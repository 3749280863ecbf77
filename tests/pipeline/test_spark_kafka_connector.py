"""Spark's own Kafka connector, format("kafka") (spark-sql-kafka-0-10_2.13 4.2.0, the newest
on Maven Central: there is no 4.3.0 for the installed PySpark 4.3.0, see
tests/reference/spark-kafka-pom.xml), against Ottla and against Apache Kafka, the reference,
beside Ottla's own format("ottla"): the same history of committed and aborted transactions
on both brokers reads back as the same rows, offset for offset, in a batch and in a
streaming read with kafka.isolation.level=read_committed; the Kafka sink, batch and
streaming, writes the same records to both. The connector's jars come from
`make spark-kafka` and reach Spark as local jars (spark.jars, tests/pipeline/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession

from tests.clients import create_topic, transactional_producer
from tests.pipeline.conftest import SPARK_KAFKA_LIBS, spark_kafka_jars

PARTITIONS = 2
TRANSACTIONS = 9  # every third one aborted
PER_TRANSACTION = 5


@pytest.fixture
def connector(spark: SparkSession) -> SparkSession:
    """The local session, which must have the connector's jars."""
    jars = spark_kafka_jars()
    if not jars:
        pytest.fail(f"Spark's Kafka connector is not in {SPARK_KAFKA_LIBS}: run `make spark-kafka` "
                    "(`make test` does it first)", pytrace=False)
    loaded = spark.sparkContext.getConf().get("spark.jars", "")
    missing = [jar for jar in jars if jar not in loaded]
    if missing:
        pytest.fail(f"the SparkSession was started without {missing}", pytrace=False)
    return spark


def _transaction(producer: Producer, topic: str, tag: str, t: int, commit: bool) -> list[tuple[int, bytes, bytes]]:
    records = [(i % PARTITIONS, b"k%d" % i, b"%s-%d-%d" % (tag.encode(), t, i)) for i in range(PER_TRANSACTION)]
    producer.begin_transaction()
    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition, headers=[("t", b"%d" % t)])
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)  # the aborted records are in the log, not dropped unsent
        producer.abort_transaction(30)
    return records


def mixed_history(bootstrap: str, topic: str, tag: str, transactions: int = TRANSACTIONS) -> list[tuple[int, bytes]]:
    """Transactions over both partitions of a new `topic`, every third aborted; returns
    the committed (partition, value)s in the order they were written."""
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = transactional_producer(bootstrap, f"{topic}-{tag}")
    committed: list[tuple[int, bytes]] = []
    for t in range(transactions):
        records = _transaction(producer, topic, tag, t, commit=t % 3 != 2)
        if t % 3 != 2:
            committed += [(partition, value) for partition, _, value in records]
    return committed


def by_partition(pairs: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for partition, value in pairs:
        out[partition].append(value)
    return out


def rows(df: DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    """The frame's rows as tuples of `columns`, in (partition, offset) order."""
    return [tuple(row) for row in df.orderBy("partition", "offset").select(*columns).collect()]


def kafka_batch(spark: SparkSession, bootstrap: str, topic: str, isolation: str = "read_committed") -> DataFrame:
    return (spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("includeHeaders", "true")
            .option("kafka.isolation.level", isolation)
            .load())


RECORD = ("partition", "offset", "key", "value", "headers")


def test_batch_read_committed_as_on_kafka(connector, broker, kafka_reference, topic_name):
    """format("kafka") with read_committed returns exactly the committed records, at the
    same offsets and with the same keys and headers as on Kafka, and format("ottla") the
    same on Ottla; read_uncommitted returns the aborted records too, alike on both."""
    committed = mixed_history(broker.bootstrap, topic_name, "b")
    assert mixed_history(kafka_reference.bootstrap, topic_name, "b") == committed

    on_ottla = rows(kafka_batch(connector, broker.bootstrap, topic_name), *RECORD)
    on_kafka = rows(kafka_batch(connector, kafka_reference.bootstrap, topic_name), *RECORD)

    assert on_ottla == on_kafka
    assert by_partition([(r[0], r[3]) for r in on_ottla]) == by_partition(committed)
    ottla_source = (connector.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic_name).load())
    assert rows(ottla_source, "partition", "offset", "key", "value") == [r[:4] for r in on_ottla]

    uncommitted = rows(kafka_batch(connector, broker.bootstrap, topic_name, "read_uncommitted"), *RECORD)
    assert uncommitted == rows(kafka_batch(connector, kafka_reference.bootstrap, topic_name, "read_uncommitted"),
                               *RECORD)
    assert len(uncommitted) == TRANSACTIONS * PER_TRANSACTION


def stream_once(spark: SparkSession, bootstrap: str, topic: str, checkpoint: str) -> list[list[tuple[Any, ...]]]:
    """One availableNow run of a read_committed format("kafka") stream (at most 4 records
    a micro-batch) from its checkpoint; the rows of each micro-batch."""
    batches: list[list[tuple[Any, ...]]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches.append(rows(batch, "partition", "offset", "value"))

    stream = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "4")
              .option("kafka.isolation.level", "read_committed")
              .load())
    query = stream.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert not query.isActive, "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return batches


def test_streaming_read_committed_as_on_kafka(connector, broker, kafka_reference, topic_name, tmp_path):
    """A read_committed stream stops where a transaction is still open (the last stable
    offset), and once it commits, the next run from the checkpoint reads the rest: every
    committed record once, in order, at the same offsets as on Kafka."""
    results = {}
    for name, bootstrap in (("ottla", broker.bootstrap), ("kafka", kafka_reference.bootstrap)):
        committed = mixed_history(bootstrap, topic_name, "s", transactions=6)
        open_producer = transactional_producer(bootstrap, f"{topic_name}-open")
        open_producer.begin_transaction()
        for i in range(3):
            open_producer.produce(topic_name, value=b"open-%d" % i, partition=0)
        open_producer.flush(30)
        after = transactional_producer(bootstrap, f"{topic_name}-after")
        late = _transaction(after, topic_name, "late", 0, commit=True)

        checkpoint = str(tmp_path / f"checkpoint-{name}")
        first = stream_once(connector, bootstrap, topic_name, checkpoint)
        open_producer.commit_transaction(30)
        second = stream_once(connector, bootstrap, topic_name, checkpoint)
        results[name] = (first, second)

        # Partition 0 stops at the open transaction; partition 1 has no open one.
        first_values = [(p, v) for batch in first for p, _, v in batch]
        assert sorted(first_values) == sorted(committed + [(p, v) for p, _, v in late if p == 1])
        everything = first_values + [(p, v) for batch in second for p, _, v in batch]
        expected = committed + [(0, b"open-%d" % i) for i in range(3)] + [(p, v) for p, _, v in late]
        assert by_partition(everything) == by_partition(expected)
        assert all(len(batch) <= 4 for batch in first + second)

    assert results["ottla"] == results["kafka"]


def sink_frame(spark: SparkSession) -> DataFrame:
    """Records with keys, headers and explicit partitions, in one Spark partition so that
    each topic partition is written in this order."""
    data = [(b"k%d" % i, b"v%d" % i, i % PARTITIONS, [("n", b"%d" % i)]) for i in range(40)]
    schema = "key binary, value binary, partition int, headers array<struct<key: string, value: binary>>"
    return spark.createDataFrame(data, schema).coalesce(1)


def write_batch(frame: DataFrame, bootstrap: str, topic: str) -> None:
    frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic) \
        .option("includeHeaders", "true").save()


def test_kafka_sink_batch_and_streaming_as_on_kafka(connector, broker, kafka_reference, topic_name, tmp_path):
    """The Kafka sink writes the same records at the same offsets on both brokers: a batch
    write, then a streaming copy (availableNow, from a read_committed format("kafka")
    stream) of it; format("ottla") reads Ottla's copy the same."""
    results = {}
    for name, bootstrap in (("ottla", broker.bootstrap), ("kafka", kafka_reference.bootstrap)):
        source, copy = f"{topic_name}-src", f"{topic_name}-copy"
        create_topic(bootstrap, source, partitions=PARTITIONS)
        create_topic(bootstrap, copy, partitions=PARTITIONS)
        write_batch(sink_frame(connector), bootstrap, source)

        stream = (connector.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", source)
                  .option("startingOffsets", "earliest")
                  .option("includeHeaders", "true")
                  .option("kafka.isolation.level", "read_committed")
                  .load()
                  .selectExpr("key", "value", "partition", "headers"))
        query = (stream.writeStream.format("kafka")
                 .option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", copy)
                 .option("checkpointLocation", str(tmp_path / f"sink-{name}"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        assert not query.isActive and query.exception() is None, query.exception()

        written = rows(kafka_batch(connector, bootstrap, source), *RECORD)
        copied = rows(kafka_batch(connector, bootstrap, copy), *RECORD)
        assert [(p, v) for p, _, _, v, _ in written] == sorted(
            ((i % PARTITIONS, b"v%d" % i) for i in range(40)), key=lambda pv: (pv[0], int(pv[1][1:])))
        assert copied == written
        results[name] = written
        if name == "ottla":
            ottla_copy = connector.read.format("ottla").option("kafka.bootstrap.servers", bootstrap) \
                .option("subscribe", copy).load()
            assert rows(ottla_copy, "partition", "offset", "key", "value") == [r[:4] for r in copied]

    assert results["ottla"] == results["kafka"]
