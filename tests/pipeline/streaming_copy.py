"""The streaming query of the sink's exactly-once test: it runs first as a driver
process of its own, so that the test can SIGKILL it, then in the test's SparkSession.

Reads INPUT from the earliest offset in micro-batches of at most MAX_OFFSETS offsets
(Trigger.AvailableNow) and writes "copied:<value>" with the same key to OUTPUT through
the exactly-once sink, checkpointing in CHECKPOINT.

    python -m tests.pipeline.streaming_copy BOOTSTRAP INPUT OUTPUT CHECKPOINT MAX_OFFSETS
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from ottla.pipeline.session import local_session


def start_copy(spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str,
               max_offsets: int) -> StreamingQuery:
    return (spark.readStream.format("ottla")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max_offsets))
            .load()
            .select("key", F.concat(F.lit(b"copied:"), "value").alias("value"))
            .writeStream.format("ottla")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start())


def main(bootstrap: str, source: str, sink: str, checkpoint: str, max_offsets: str) -> None:
    spark = local_session("ottla-streaming-copy")
    start_copy(spark, bootstrap, source, sink, checkpoint, int(max_offsets)).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
