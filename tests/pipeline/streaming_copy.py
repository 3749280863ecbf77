"""The streaming query of the sink's exactly-once tests: a copy of INPUT to OUTPUT
through the exactly-once sink. It runs in the test's own SparkSession, or as a driver
process of its own so that a test can SIGKILL it or give it a SparkContext of its own
(speculative execution is a setting of the context).

Reads INPUT from the earliest offset in micro-batches of at most MAX_OFFSETS offsets
(Trigger.AvailableNow) and writes "copied:<value>" with the same key to OUTPUT,
checkpointing in CHECKPOINT.

    python -m tests.pipeline.streaming_copy [--master URL] [--conf KEY=VALUE ...] \\
        [--hold-at-commit BATCH:PATH] BOOTSTRAP INPUT OUTPUT CHECKPOINT MAX_OFFSETS
"""

from __future__ import annotations

import argparse
import os

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import BinaryType

from ottla.pipeline.session import spark_session
from tests.pipeline import held_sink


def marked(mark_dir: str):
    """An identity on `value` that, in each task, leaves a file named
    `<batch id>-<partition>-<attempt>-<pid>` in `mark_dir`: which task ran where, so a
    test can kill the worker that runs a given task, and see that the task ran again.
    (A nested function: cloudpickle sends it to the executors by value, so their Python
    workers need this project's package, not its tests.)"""

    def mark(value):  # no type hints: they would make PySpark look for a pandas UDF
        task = TaskContext.get()
        name = (f"{task.getLocalProperty('streaming.sql.batchId')}-{task.partitionId()}-"
                f"{task.attemptNumber()}-{os.getpid()}")
        path = os.path.join(mark_dir, name)
        if not os.path.exists(path):
            with open(path, "w"):
                pass
        return value

    return F.udf(mark, BinaryType())


def start_copy(spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str,
               max_offsets: int, mark_dir: str | None = None, hold: str | None = None) -> StreamingQuery:
    """The copy query; with `hold` ("<batch id>:<path>") through the sink held at the
    driver's commit of that batch (tests/pipeline/held_sink.py)."""
    rows = (spark.readStream.format("ottla")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max_offsets))
            .load())
    value = F.col("value") if mark_dir is None else marked(mark_dir)("value")
    writer = rows.select("key", F.concat(F.lit(b"copied:"), value).alias("value")).writeStream
    if hold is None:
        writer = writer.format("ottla")
    else:
        held_sink.register(spark)
        batch, _, signal = hold.partition(":")
        writer = writer.format(held_sink.NAME).option("holdBatch", batch).option("holdSignal", signal)
    return (writer
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting, KEY=VALUE")
    parser.add_argument("--hold-at-commit", metavar="BATCH:PATH",
                        help="hold the driver at the sink's commit of BATCH, creating PATH (held_sink.py)")
    for name in ("bootstrap", "source", "sink", "checkpoint"):
        parser.add_argument(name)
    parser.add_argument("max_offsets", type=int)
    args = parser.parse_args()
    spark = spark_session("ottla-streaming-copy", args.master, conf=dict(c.split("=", 1) for c in args.conf))
    query = start_copy(spark, args.bootstrap, args.source, args.sink, args.checkpoint, args.max_offsets,
                       hold=args.hold_at_commit)
    query.awaitTermination()
    # The batches as the test's assertions want them: the id and row count of each.
    for progress in query.recentProgress:
        print(f"batch {progress['batchId']} rows {progress['numInputRows']}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
