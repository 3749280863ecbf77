"""The connector on the standalone cluster (tests/pipeline/spark_cluster.py) when its
processes fail: a worker killed in the middle of a micro-batch, the driver killed in
the middle of one and the query started again from its checkpoint, speculative copies
of slow tasks, and what a batch write does when a task is retried.

The streaming tests check the output topic with read_committed: every committed input
record exactly once, each key's records in input order (tests/pipeline/exactly_once.py).
To make "the middle of a batch" a moment a test can aim at, the broker holds its answers
to the sink's Produce requests (a `delay` fault, broker/faults.py): the records are in
the log, the task's transaction is open, and the task waits.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable

import pytest
from pyspark import TaskContext
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from ottla.pipeline.cluster import Subscription, bounds
from tests.clients import create_topic, read_all
from tests.pipeline.exactly_once import assert_copied_exactly_once, kill_driver, produce_input, start_driver
from tests.pipeline.streaming_copy import start_copy

WAIT_S = 180.0


def _records_in(bootstrap: str, topic: str) -> int:
    """How many offsets `topic` holds, committed or not (the sum of its high watermarks)."""
    return sum(bounds({"bootstrap.servers": bootstrap}, Subscription(topics=(topic,)), read_committed=False)
               .latest.values())


def _wait_for(condition, what: str, query=None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if query is not None and not query.isActive:
            raise AssertionError(f"the query ended waiting for {what}: {query.exception()}")
        assert time.monotonic() < deadline, f"waited {WAIT_S:g} s for {what}"
        time.sleep(0.1)


def _wait_for_writes_of(batch_began: Callable[[], bool], bootstrap: str, topic: str, alive: Callable[[], str | None],
                        what: str) -> None:
    """Until a batch has begun (`batch_began`) and `topic` holds more records than it
    did before that: the batch's tasks have written and, the broker holding its
    answers, wait. The count to beat is taken before each look at `batch_began`, so it
    never includes the batch's own records. `alive` says why the job is gone, if it is."""
    deadline = time.monotonic() + WAIT_S
    before = None
    while True:
        gone = alive()
        assert gone is None, f"the job ended before {what} wrote: {gone}"
        assert time.monotonic() < deadline, f"{what} never wrote"
        records = _records_in(bootstrap, topic)
        if not batch_began():
            before = records
        elif before is not None and records > before:
            return
        time.sleep(0.05)


@pytest.mark.parametrize("spark", ["cluster"], indirect=True)
def test_stream_sink_writes_once_when_a_worker_dies_mid_batch(spark, spark_cluster, fresh_broker, topic_name,
                                                              tmp_path):
    """A worker and everything below it (its executor JVM and the executor's Python
    workers) are SIGKILLed while the tasks of micro-batch 1 have written records (in
    their open transactions) and wait for the broker; the worker is started again.
    Spark runs the lost task again on the executor that is left (or on the restarted
    worker's new one); that attempt's init_transactions aborts the dead attempt's
    transaction."""
    broker = fresh_broker(admin_port=0)
    source, sink = topic_name, f"{topic_name}-copy"
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink, partitions=2)
    expected = produce_input(broker.bootstrap, source, transactions=12)
    broker.admin.add_fault(kind="delay", api="Produce", topic=sink, count=10_000, delay_ms=2000)
    marks = tmp_path / "marks"
    marks.mkdir()

    query = start_copy(spark, broker.bootstrap, source, sink, str(tmp_path / "checkpoint"), max_offsets=12,
                       mark_dir=str(marks))
    try:
        def later_marks() -> list[list[str]]:
            # <batch>-<partition>-<attempt>-<pid> of the tasks of batch 1 or later.
            return [name.split("-") for name in sorted(p.name for p in marks.iterdir())
                    if int(name.split("-")[0]) >= 1]

        _wait_for_writes_of(lambda: bool(later_marks()), broker.bootstrap, sink,
                            lambda: None if query.isActive else str(query.exception()), "batch 1")
        batch, partition, _attempt, pid = later_marks()[0]
        worker = spark_cluster.worker_of(int(pid))
        assert worker is not None, f"the Python worker {pid} of batch {batch} is not below a worker"
        killed = spark_cluster.kill_worker(worker)
        assert int(pid) in killed
        broker.admin.clear_faults()
        spark_cluster.restart_worker(worker)

        assert query.awaitTermination(WAIT_S), "the query did not finish"
        assert query.exception() is None
    finally:
        if query.isActive:
            query.stop()
    # The killed task ran again: another attempt of the same batch and partition.
    attempts = {name.split("-")[2] for name in (p.name for p in marks.iterdir())
                if name.startswith(f"{batch}-{partition}-")}
    assert len(attempts) >= 2, attempts
    assert_copied_exactly_once(broker.bootstrap, sink, expected)


def test_stream_sink_writes_once_when_the_driver_dies_mid_batch(spark_sessions, spark_cluster, fresh_broker,
                                                               topic_name, tmp_path):
    """The query's driver, a process of its own on the cluster, is SIGKILLed while the
    tasks of batch 1 have written records and wait (2 s) for the broker's answers; the
    query is started again from the same checkpoint in another driver. The dead driver's
    executors exit when they lose it, but a Python worker caught between its records
    and its commit may still commit after the driver is gone: the replay of batch 1
    then finds that task partition in the ledger, and fences the others."""
    spark_sessions.release()  # the cluster's two cores are for the driver below
    broker = fresh_broker(admin_port=0)
    source, sink = topic_name, f"{topic_name}-copy"
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink, partitions=2)
    expected = produce_input(broker.bootstrap, source, transactions=9)
    broker.admin.add_fault(kind="delay", api="Produce", topic=sink, count=10_000, delay_ms=2000)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "driver.log"
    driver = start_driver([*spark_cluster.driver_args(), broker.bootstrap, source, sink, str(checkpoint), "12"], log)
    try:
        # Batch 1 is planned (offsets/1) before its tasks start.
        _wait_for_writes_of((checkpoint / "offsets" / "1").exists, broker.bootstrap, sink,
                            lambda: None if driver.poll() is None else log.read_text()[-5000:], "batch 1")
    finally:
        kill_driver(driver)
    assert not (checkpoint / "commits" / "1").exists()
    broker.admin.clear_faults()

    query = start_copy(spark_sessions.get("cluster"), broker.bootstrap, source, sink, str(checkpoint), max_offsets=12)
    assert query.awaitTermination(WAIT_S), "the restarted query did not finish"
    assert query.exception() is None
    assert query.recentProgress[0]["batchId"] == 1, query.recentProgress[0]
    assert_copied_exactly_once(broker.bootstrap, sink, expected)


def test_speculative_copies_of_a_slow_task_do_not_duplicate_output(spark_sessions, spark_cluster, fresh_broker,
                                                                   topic_name, tmp_path):
    """Speculation is a setting of the SparkContext: the query runs in a driver process
    of its own. Once batch 0 is committed (the executors' Python workers are warm, tasks
    take a fraction of a second), the broker holds its answer to the sink's next Produce
    for 8 s: that task is slow with records in its open transaction, Spark launches a
    speculative copy on the other worker, the copy fences the slow attempt (aborting its
    transaction) and commits, and Spark kills the slow attempt."""
    spark_sessions.release()  # the cluster's two cores are for the driver below
    broker = fresh_broker(admin_port=0)
    source, sink = topic_name, f"{topic_name}-copy"
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink, partitions=2)
    expected = produce_input(broker.bootstrap, source, transactions=15)
    events = tmp_path / "events"
    events.mkdir()
    driver = start_driver([*spark_cluster.driver_args(**{
        "spark.speculation": "true",
        "spark.speculation.interval": "100ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.minTaskRuntime": "500ms",
        # Judge tasks by their run time alone (not their rate of progress).
        "spark.speculation.efficiency.enabled": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }), broker.bootstrap, source, sink, str(tmp_path / "checkpoint"), "12"], tmp_path / "driver.log")
    try:
        _wait_for(lambda: bounds({"bootstrap.servers": broker.bootstrap}, Subscription(topics=(sink,)),
                                 read_committed=True).latest != {(sink, 0): 0, (sink, 1): 0}
                  or driver.poll() is not None, "batch 0 to commit")
        broker.admin.add_fault(kind="delay", api="Produce", topic=sink, count=1, delay_ms=8000)
        output, _ = driver.communicate(timeout=WAIT_S)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, (tmp_path / "driver.log").read_text()[-5000:]
    assert broker.admin.faults() == []  # a task met the delay
    assert output.count("batch ") >= 3, output  # the delay came after batch 0

    # Spark's event log: which task attempts were speculative copies.
    [log] = [f for f in events.rglob("*") if f.is_file() and not f.name.startswith(".")]
    ends = [e for e in map(json.loads, log.read_text().splitlines()) if e["Event"] == "SparkListenerTaskEnd"]
    speculative = [e["Task Info"] for e in ends if e["Task Info"]["Speculative"]]
    assert speculative, f"no speculative task among {len(ends)}; driver output:\n{output}"
    assert_copied_exactly_once(broker.bootstrap, sink, expected)


def _fail_first_attempt_after(rows: int):
    """An identity on strings that, in the first attempt of task 0, fails after `rows`
    rows, a second after the last of them went by (so they reach the broker)."""
    seen = {"rows": 0}

    def check(value):  # no type hints: they would make PySpark look for a pandas UDF
        task = TaskContext.get()
        if task.partitionId() == 0 and task.attemptNumber() == 0:
            seen["rows"] += 1
            if seen["rows"] > rows:
                time.sleep(1)
                raise RuntimeError("the first attempt of task 0 fails here")
        return value

    return F.udf(check, StringType())


@pytest.mark.parametrize("spark", ["cluster"], indirect=True)
def test_batch_write_retried_task_writes_its_rows_again(spark, broker, topic_name):
    """Batch writes are at least once: Spark retries a failed task (spark.task.maxFailures,
    4 on a cluster), and the retry writes all of its rows, including those the failed
    attempt had written."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    # Rows reach the UDF and the writer in batches of 50, and they are 2 KB each so
    # that Spark's 64 KiB stream buffers pass them on at once: the writer has written
    # rows when the UDF fails.
    small_batches = ["spark.sql.execution.arrow.maxRecordsPerBatch",
                     "spark.sql.execution.python.udf.maxRecordsPerBatch"]
    for key in small_batches:
        spark.conf.set(key, "50")
    try:
        rows = spark.range(0, 600, numPartitions=2).select(
            F.concat(F.format_string("row-%04d:", "id"), F.repeat(F.lit("x"), 2000)).alias("value"))
        (rows.select(_fail_first_attempt_after(250)("value").alias("value"))
         .write.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic_name)
         .mode("append").save())
    finally:
        for key in small_batches:
            spark.conf.unset(key)

    written = Counter(v.split(b":")[0] for v in read_all(broker.bootstrap, topic_name, [0],
                                                         isolation="read_committed")[0])
    assert set(written) == {b"row-%04d" % i for i in range(600)}
    twice = sorted(v for v, n in written.items() if n == 2)
    # Task 0 holds rows 0-299: what its first attempt wrote before failing is there twice.
    assert twice and all(v < b"row-0250" for v in twice), twice[-5:]
    assert max(written.values()) == 2
