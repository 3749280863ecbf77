"""A streaming query run as its own process by the sink's exactly-once test, so that the
test can SIGKILL the whole driver.

Reads INPUT from the earliest offset in micro-batches of at most MAX_OFFSETS offsets
(Trigger.AvailableNow), writes "copied:<value>" with the same key to OUTPUT through the
exactly-once sink, checkpointing in CHECKPOINT. Prints, as its last line, the JSON list
of [batch id, input rows] of the batches this run processed.

    python -m tests.pipeline.streaming_copy BOOTSTRAP INPUT OUTPUT CHECKPOINT MAX_OFFSETS
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import functions as F

from pipeline.session import local_session


def main(bootstrap: str, source: str, sink: str, checkpoint: str, max_offsets: str) -> None:
    spark = local_session("ottla-streaming-copy")
    query = (spark.readStream.format("ottla")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source)
             .option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", max_offsets)
             .load()
             .select("key", F.concat(F.lit(b"copied:"), "value").alias("value"))
             .writeStream.format("ottla")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink)
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()
    print(json.dumps([[p["batchId"], p["numInputRows"]] for p in query.recentProgress]), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
