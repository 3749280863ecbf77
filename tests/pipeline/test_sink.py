"""The sink against a real broker: the columns of a batch write, and the streaming
sink's exactly-once guarantee across a driver killed between the sink's commit and the
checkpoint's."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import Row
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from tests.clients import consume_partitions, create_topic, read_all
from tests.pipeline.exactly_once import assert_copied_exactly_once, kill_driver, produce_input, start_driver
from tests.pipeline.streaming_copy import start_copy

ON_BOTH = pytest.mark.parametrize("spark", ["local", "cluster"], indirect=True)


@ON_BOTH
def test_batch_write_with_every_column(spark, broker, topic_name):
    other = f"{topic_name}-other"
    create_topic(broker.bootstrap, topic_name, partitions=3)
    create_topic(broker.bootstrap, other, partitions=1)
    schema = StructType([
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())]))),
    ])
    rows = [Row(f"k{i}", b"v%d" % i, topic_name, i % 3, [Row("n", b"%d" % i)]) for i in range(9)]
    rows += [Row(None, b"elsewhere", other, None, None)]
    spark.createDataFrame(rows, schema).write.format("ottla") \
        .option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()

    got = consume_partitions(broker.bootstrap, topic_name, [0, 1, 2], expected=9)
    for partition, messages in got.items():
        assert sorted((m.key(), m.value(), m.headers()) for m in messages) == [
            (b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)]) for i in range(9) if i % 3 == partition]
    [elsewhere] = consume_partitions(broker.bootstrap, other, [0], expected=1)[0]
    assert elsewhere.key() is None and elsewhere.value() == b"elsewhere"


def test_stream_sink_writes_once_when_the_driver_dies_before_the_checkpoint(spark, broker, topic_name, tmp_path):
    """The ledger's own case: every transaction of batch 1 is committed, Spark's
    checkpoint does not say so. (On the cluster the driver is killed in the middle of
    a batch instead: test_cluster_failures.py.)"""
    source, sink = topic_name, f"{topic_name}-copy"
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink, partitions=2)
    expected = produce_input(broker.bootstrap, source, transactions=9)
    checkpoint, held, log = tmp_path / "checkpoint", tmp_path / "held", tmp_path / "driver.log"

    # First run: hold the driver once batch 1's transactions are committed, before
    # Spark writes commits/1 to the checkpoint; then kill it there.
    first = start_driver(["--hold-at-commit", f"1:{held}", broker.bootstrap, source, sink, str(checkpoint), "12"],
                         log)
    deadline = time.monotonic() + 300
    while not held.exists():
        assert first.poll() is None, f"the driver exited early; log:\n{log.read_text()[-5000:]}"
        assert time.monotonic() < deadline, "batch 1 never reached the sink's commit"
        time.sleep(0.2)
    kill_driver(first)
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    written_before_kill = read_all(broker.bootstrap, sink, [0, 1], isolation="read_committed", settle=0.5)
    assert sum(len(v) for v in written_before_kill.values()) > 0

    # Second run, in this process's driver: Spark replays batch 1 from the checkpoint,
    # then goes on to the end.
    query = start_copy(spark, broker.bootstrap, source, sink, str(checkpoint), max_offsets=12)
    assert query.awaitTermination(300)
    batches = [(p["batchId"], p["numInputRows"]) for p in query.recentProgress]
    assert batches[0][0] == 1 and batches[0][1] > 0, batches
    assert_copied_exactly_once(broker.bootstrap, sink, expected)
