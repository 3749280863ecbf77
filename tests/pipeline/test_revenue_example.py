"""The example job's outputs, Parquet and topic, against the same aggregate computed in
plain Python from the orders that were committed."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest

from ottla.pipeline.examples.orders import make_orders, produce_orders
from ottla.pipeline.examples.revenue import run
from tests.clients import consume_partitions, create_topic


@pytest.mark.parametrize("spark", ["local", "cluster"], indirect=True)
def test_revenue_job_matches_a_pure_python_aggregate(spark, broker, topic_name, tmp_path):
    orders_topic, revenue_topic = topic_name, f"{topic_name}-revenue"
    create_topic(broker.bootstrap, orders_topic, partitions=3)
    create_topic(broker.bootstrap, revenue_topic, partitions=2)
    orders = make_orders(400, customers=6, start=datetime(2026, 1, 5, 10, 0, tzinfo=UTC), seed=3)
    committed = produce_orders(broker.bootstrap, orders_topic, orders)
    assert 0 < len(committed) < len(orders)

    expected: dict[tuple[str, datetime], list[int]] = defaultdict(lambda: [0, 0])
    for order in committed:
        totals = expected[(order.customer, order.minute())]
        totals[0] += 1
        totals[1] += order.amount_cents

    parquet = str(tmp_path / "revenue.parquet")
    run(spark, broker.bootstrap, orders_topic, revenue_topic, parquet)

    # Parquet, read with pyarrow rather than Spark. Spark stores UTC instants; pyarrow
    # gives them back without a zone.
    table = pq.read_table(parquet).to_pylist()
    assert {(r["customer"], r["minute"].replace(tzinfo=UTC)): [r["orders"], r["revenue_cents"]]
            for r in table} == expected
    assert len(table) == len(expected)

    messages = consume_partitions(broker.bootstrap, revenue_topic, [0, 1], expected=len(expected),
                                  isolation="read_committed")
    records = [m for partition in messages.values() for m in partition]
    assert len(records) == len(expected)
    from_topic = {}
    for message in records:
        row = json.loads(message.value())
        assert message.key() == row["customer"].encode()
        from_topic[(row["customer"], datetime.fromisoformat(row["minute"]))] = [row["orders"], row["revenue_cents"]]
    assert from_topic == expected
