"""Ottla's connector for Spark: `format("ottla")` for batch and streaming reads and
writes of Kafka topics, on PySpark's Python Data Source API and confluent-kafka.

    from ottla import pipeline
    pipeline.register(spark)
    spark.readStream.format("ottla").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "orders").load()

See pipeline/README.md for the options and the sink's exactly-once guarantee.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from ottla.pipeline.datasource import OttlaDataSource


def register(spark: SparkSession) -> None:
    """Make `format("ottla")` known to this Spark session."""
    spark.dataSource.register(OttlaDataSource)
