"""Revenue per customer per minute, from a topic of order events (see `orders.py`),
written to Parquet and to an Ottla topic.

    python -m ottla.pipeline.examples.revenue --bootstrap 127.0.0.1:9092 --orders orders \\
        --output-topic revenue --parquet ./revenue.parquet

A batch job: it reads every committed order up to the topic's last stable offset
(read_committed is the source's default, so aborted orders never count), groups by
customer and by the minute of the order's event time, and writes one row per group:
customer, minute (UTC), orders, revenue_cents. Parquet gets the table (overwritten on
every run); the topic gets one record per row, keyed by customer, its value the row as
JSON.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from ottla.pipeline.session import local_session

ORDER_SCHEMA = StructType([
    StructField("order_id", StringType()),
    StructField("customer", StringType()),
    StructField("amount_cents", LongType()),
    StructField("event_time", TimestampType()),
])


def revenue_per_customer_minute(records: DataFrame) -> DataFrame:
    """From the source's rows (binary `value` holding an order as JSON) to one row per
    customer and minute."""
    orders = records.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("order")).select("order.*")
    return (orders
            .groupBy("customer", F.date_trunc("minute", "event_time").alias("minute"))
            .agg(F.count("*").alias("orders"), F.sum("amount_cents").alias("revenue_cents"))
            .orderBy("customer", "minute"))


def run(spark: SparkSession, bootstrap: str, orders_topic: str, output_topic: str, parquet_path: str) -> None:
    records = (spark.read.format("ottla")
               .option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", orders_topic)
               .load())
    # Computed once for both outputs, so they hold the same rows.
    revenue = revenue_per_customer_minute(records).cache()
    revenue.write.mode("overwrite").parquet(parquet_path)
    (revenue
     .select(F.col("customer").alias("key"), F.to_json(F.struct(*revenue.columns)).alias("value"))
     .write.format("ottla")
     .option("kafka.bootstrap.servers", bootstrap)
     .option("topic", output_topic)
     .mode("append")
     .save())
    revenue.unpersist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--orders", default="orders", help="topic of order events")
    parser.add_argument("--output-topic", default="revenue")
    parser.add_argument("--parquet", default="./revenue.parquet")
    args = parser.parse_args()
    spark = local_session("ottla-revenue")
    try:
        run(spark, args.bootstrap, args.orders, args.output_topic, args.parquet)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
