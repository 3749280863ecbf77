"""A Spark Connect client of the connector, run by tests/pipeline/test_spark_connect.py
as a process of its own (a Connect session marks its whole Python process as a Connect
client, which the test process's classic sessions must not become).

Registers `format("ottla")` in the Connect session, writes ROWS rows to TOPIC with a
batch write, reads them back with a batch read, copies TOPIC to TOPIC-copy with a
streaming query (Trigger.AvailableNow, exactly-once sink), and prints what it read as
JSON: {"read": [values], "session": "<class of the session>"}.

    python -m tests.pipeline.connect_client sc://127.0.0.1:PORT BOOTSTRAP TOPIC CHECKPOINT ROWS
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ottla import pipeline


def main(url: str, bootstrap: str, topic: str, checkpoint: str, rows: str) -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    pipeline.register(spark)
    (spark.range(int(rows)).select(F.format_string("connect-%d", "id").alias("value"))
     .write.format("ottla").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .mode("append").save())
    read = (spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .load().collect())
    (spark.readStream.format("ottla").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
     .option("startingOffsets", "earliest").load()
     .select("key", "value")
     .writeStream.format("ottla").option("kafka.bootstrap.servers", bootstrap).option("topic", f"{topic}-copy")
     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
     .awaitTermination())
    print(json.dumps({"read": sorted(r.value.decode() for r in read), "session": type(spark).__module__}))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
