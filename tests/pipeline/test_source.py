"""The source against a real broker: batch reads see exactly the committed records, and
a streaming query reads in limited micro-batches and resumes from its checkpoint."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.errors import PythonException

from tests.clients import create_topic, idempotent_producer, produce_all, transactional_producer

# Ranges read by executors on two workers, as well as by local[2].
ON_BOTH = pytest.mark.parametrize("spark", ["local", "cluster"], indirect=True)


def _transaction(producer, topic: str, records: list[tuple[int, bytes]], commit: bool) -> None:
    producer.begin_transaction()
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition)
    if commit:
        producer.commit_transaction(30)
    else:
        # Flush first, so that the aborted records are in the log, not dropped unsent.
        producer.flush(30)
        producer.abort_transaction(30)


def _mixed_history(bootstrap: str, topic: str, producer_id: str, tag: str, transactions: int) -> set[bytes]:
    """Transactions over both partitions of `topic`, every third one aborted; returns
    the values that were committed."""
    producer = transactional_producer(bootstrap, producer_id)
    committed: set[bytes] = set()
    for t in range(transactions):
        records = [(i % 2, b"%s-%d-%d" % (tag.encode(), t, i)) for i in range(5)]
        _transaction(producer, topic, records, commit=t % 3 != 2)
        if t % 3 != 2:
            committed |= {value for _, value in records}
    return committed


def _read(spark, bootstrap: str, topic: str, **options: str):
    reader = spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@ON_BOTH
def test_batch_read_returns_exactly_the_committed_records(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    started = datetime.now(UTC).replace(tzinfo=None)
    committed = _mixed_history(broker.bootstrap, topic_name, "src-batch", "c", transactions=9)
    plain = [(topic_name, 0, b"k", b"plain")]
    produce_all(idempotent_producer(broker.bootstrap), plain)

    rows = _read(spark, broker.bootstrap, topic_name).collect()

    assert sorted(r.value for r in rows) == sorted(committed | {b"plain"})
    assert {r.topic for r in rows} == {topic_name}
    for partition in (0, 1):
        offsets = [r.offset for r in rows if r.partition == partition]
        # Aborted records and transaction markers leave gaps.
        assert offsets == sorted(offsets) and offsets[-1] > len(offsets) - 1
    plain_row = next(r for r in rows if r.value == b"plain")
    assert plain_row.key == b"k" and plain_row.timestampType == 0 and plain_row.headers is None
    assert plain_row.timestamp >= started.replace(microsecond=0)

    uncommitted = _read(spark, broker.bootstrap, topic_name, **{"kafka.isolation.level": "read_uncommitted"})
    assert uncommitted.count() == 9 * 5 + 1


def test_batch_read_stops_at_an_open_transaction(spark, broker, topic_name):
    """read_committed ends at the last stable offset: records after a transaction that
    is still open wait, even when they are committed."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    first = transactional_producer(broker.bootstrap, f"{topic_name}-first")
    _transaction(first, topic_name, [(0, b"before")], commit=True)
    open_one = transactional_producer(broker.bootstrap, f"{topic_name}-open")
    open_one.begin_transaction()
    open_one.produce(topic_name, value=b"pending", partition=0)
    open_one.flush(30)
    _transaction(first, topic_name, [(0, b"after")], commit=True)

    assert [r.value for r in _read(spark, broker.bootstrap, topic_name).collect()] == [b"before"]
    open_one.commit_transaction(30)
    assert [r.value for r in _read(spark, broker.bootstrap, topic_name).orderBy("offset").collect()] == [
        b"before", b"pending", b"after"]


def test_batch_read_with_json_offsets_and_lost_offsets(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, b"%d-%d" % (p, i))
                                                         for i in range(10) for p in (0, 1)])
    ranged = _read(spark, broker.bootstrap, topic_name,
                   startingOffsets=f'{{"{topic_name}": {{"0": 3, "1": -2}}}}',
                   endingOffsets=f'{{"{topic_name}": {{"0": 5, "1": 2}}}}')
    assert sorted(r.value for r in ranged.collect()) == [b"0-3", b"0-4", b"1-0", b"1-1"]

    # Offsets past the end of the partition are gone, as after a topic was recreated.
    beyond = {"startingOffsets": f'{{"{topic_name}": {{"0": 20, "1": 0}}}}',
              "endingOffsets": f'{{"{topic_name}": {{"0": 25, "1": 1}}}}'}
    with pytest.raises(PythonException, match="DataLossError"):
        _read(spark, broker.bootstrap, topic_name, **beyond).collect()
    lenient = _read(spark, broker.bootstrap, topic_name, failOnDataLoss="false", **beyond)
    assert [r.value for r in lenient.collect()] == [b"1-0"]

    empty = f"{topic_name}-empty"
    create_topic(broker.bootstrap, empty, partitions=1)
    assert _read(spark, broker.bootstrap, empty).count() == 0


def test_batch_read_by_topic_list_and_pattern(spark, broker, topic_name):
    names = [f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-other"]
    for name in names:
        create_topic(broker.bootstrap, name, partitions=1)
    produce_all(idempotent_producer(broker.bootstrap), [(name, 0, None, name.encode()) for name in names])

    def values(option: str, value: str) -> list[bytes]:
        rows = (spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap)
                .option(option, value).load().collect())
        return sorted(r.value for r in rows)

    assert values("subscribe", f"{names[0]}, {names[1]}") == [n.encode() for n in names[:2]]
    assert values("subscribePattern", f"{topic_name}-(a|b)") == [n.encode() for n in names[:2]]
    # A pattern matches whole names only, as in Java.
    assert values("subscribePattern", f"{topic_name}-o") == []


def _stream(spark, bootstrap: str, topic: str, out: str, checkpoint: str, max_offsets: int):
    return (spark.readStream.format("ottla")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max_offsets))
            .load()
            .select("value", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start())


@ON_BOTH
def test_stream_available_now_in_limited_batches_resumes_from_checkpoint(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    committed = _mixed_history(broker.bootstrap, topic_name, f"{topic_name}-1", "first", transactions=9)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    query = _stream(spark, broker.bootstrap, topic_name, out, checkpoint, max_offsets=12)
    query.awaitTermination(120)
    first_run = [p["numInputRows"] for p in query.recentProgress]
    # 9 transactions of 5 records and their markers: 27 offsets per partition, 54 in
    # all, so at least 5 batches of at most 12 offsets, holding the 30 committed records.
    assert len(first_run) >= 5 and max(first_run) <= 12 and sum(first_run) == len(committed)
    assert sorted(r.value for r in spark.read.parquet(out).collect()) == sorted(committed)

    more = _mixed_history(broker.bootstrap, topic_name, f"{topic_name}-2", "second", transactions=4)
    query = _stream(spark, broker.bootstrap, topic_name, out, checkpoint, max_offsets=12)
    query.awaitTermination(120)
    second_run = [p["numInputRows"] for p in query.recentProgress]
    assert sum(second_run) == len(more) and max(second_run) <= 12
    rows = spark.read.parquet(out).collect()
    assert sorted(r.value for r in rows) == sorted(committed | more)
    assert len({(r.partition, r.offset) for r in rows}) == len(rows)
