"""A Spark session with `format("ottla")` registered: for the example job, the tests,
and a developer's machine. A job submitted to a cluster with spark-submit builds its
own session and calls `ottla.pipeline.register(spark)`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from ottla import pipeline


def local_session(app_name: str, cores: int = 2, shuffle_partitions: int = 2) -> SparkSession:
    return spark_session(app_name, f"local[{cores}]", shuffle_partitions)


def spark_session(app_name: str, master: str, shuffle_partitions: int = 2,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session on `master` (`local[N]`, or a cluster's `spark://host:port`) whose
    Python workers run this interpreter: on a cluster of this machine's own (the tests'
    standalone cluster), or one whose workers have the same interpreter at the same path."""
    # Spark's Python workers must run the interpreter that has pyspark, confluent-kafka
    # and this package: the current one. Binding to the loopback address avoids
    # Spark's host-name lookup, which picks an unreachable address on some machines.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder
               .master(master)
               .appName(app_name)
               .config("spark.ui.enabled", "false")
               # Spark's default of 200 shuffle partitions means 200 tasks, and in a
               # streaming write 200 transactions, per micro-batch: far too many here.
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    return spark
