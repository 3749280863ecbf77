"""Throughput of the pipeline's example job (pipeline/examples/revenue.py) on Spark
`local[2]` and on a standalone cluster of two one-core workers on this machine
(tests/pipeline/spark_cluster.py), against one Ottla broker.

    python -m bench.spark_revenue [--orders 200000] [--runs 3]

Writes ORDERS order events (examples/orders.py, in transactions of 1,000, every fourth
aborted) to a topic of 2 partitions, then for each mode starts a SparkSession, runs
the job once and RUNS times more in the same session, and prints the session's start, the first run (executors and
Python workers start on the way) and the median of the others, with its rate in
committed orders read per second. One Python process holds one SparkContext at a time,
so the modes run one after the other, not interleaved. Needs the `spark` extra
(`make .venv/.installed-test`); not part of `make bench`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from ottla.pipeline.examples.orders import create_topic, make_orders, produce_orders
from ottla.pipeline.examples.revenue import run
from ottla.pipeline.session import local_session, spark_session
from ottla.testing import running_broker
from tests.pipeline.spark_cluster import APP_CONF, StandaloneCluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="spark-revenue-"))
    cluster = StandaloneCluster(base / "cluster").start()
    try:
        with running_broker() as broker:
            create_topic(broker.bootstrap, "orders", 2)
            create_topic(broker.bootstrap, "revenue", 2)
            start = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
            committed = produce_orders(broker.bootstrap, "orders", make_orders(args.orders, 50, start, seed=1),
                                       per_transaction=1000)
            print(f"{args.orders} orders, {len(committed)} committed", flush=True)
            modes = {"local[2]": lambda: local_session("bench-revenue"),
                     "cluster, 2 workers x 1 core": lambda: spark_session("bench-revenue", cluster.master_url,
                                                                          conf=APP_CONF)}
            for mode, make in modes.items():
                began = time.monotonic()
                spark = make()
                session_start = time.monotonic() - began
                runs = []
                for _ in range(args.runs + 1):
                    began = time.monotonic()
                    run(spark, broker.bootstrap, "orders", "revenue", str(base / "revenue.parquet"))
                    runs.append(time.monotonic() - began)
                spark.stop()
                warm = statistics.median(runs[1:])
                print(f"{mode}: session start {session_start:.1f} s, first run {runs[0]:.1f} s, then "
                      f"{', '.join(f'{r:.1f}' for r in runs[1:])} s: median {warm:.1f} s = "
                      f"{len(committed) / warm:,.0f} committed orders/s", flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
