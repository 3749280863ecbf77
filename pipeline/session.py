"""A local Spark session with `format("ottla")` registered: for the example job, the
tests, and a developer's machine. A cluster job builds its own session and calls
`ottla.pipeline.register(spark)`."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from ottla import pipeline
def local_session(app_name: str, cores: int = 2, shuffle_partitions: int = 2) -> SparkSession:
    # Spark's Python workers must run the interpreter that has pyspark, confluent-kafka
    # and this package: the current one. Binding to the loopback address avoids
    # Spark's host-name lookup, which picks an unreachable address on some machines.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder
             .master(f"local[{cores}]")
             .appName(app_name)
             .config("spark.ui.enabled", "false")
             # Spark's default of 200 shuffle partitions means 200 tasks, and in a
             # streaming write 200 transactions, per micro-batch: far too many locally.
             .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    return spark
