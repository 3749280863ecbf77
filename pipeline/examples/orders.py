"""Order events for the revenue example, written the way a shop's services would: in
transactions, some of which abort.

    {"order_id": "o-000042", "customer": "c-07", "amount_cents": 1299,
     "event_time": "2026-01-05T10:15:42.123Z"}

    python -m ottla.pipeline.examples.orders --bootstrap 127.0.0.1:9092 --topic orders --count 2000

Every `abort_every`-th transaction is aborted after its records reached the broker, so
the topic really holds aborted records (and their ABORT markers) that a read_committed
reader must skip. Amounts are in cents, integers, so that sums are exact.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int
    event_time: str

    def minute(self) -> datetime:
        """The start of the minute the order belongs to, in UTC."""
        moment = datetime.fromisoformat(self.event_time.replace("Z", "+00:00"))
        return moment.replace(second=0, microsecond=0)


def make_orders(count: int, customers: int, start: datetime, seed: int) -> list[Order]:
    """`count` orders spread over about `count / 20` minutes from `start`."""
    rng = random.Random(seed)
    orders = []
    for i in range(count):
        moment = start + timedelta(milliseconds=i * 3000 + rng.randrange(3000))
        orders.append(Order(order_id=f"o-{i:06d}", customer=f"c-{rng.randrange(customers):02d}",
                            amount_cents=rng.randrange(100, 50_000),
                            event_time=moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")))
    return orders


def produce_orders(bootstrap: str, topic: str, orders: list[Order], per_transaction: int = 7,
                   abort_every: int = 4) -> list[Order]:
    """Write `orders` in transactions of `per_transaction` records, aborting every
    `abort_every`-th; returns the committed orders."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"orders-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(TIMEOUT_S)
    committed: list[Order] = []
    for number, first in enumerate(range(0, len(orders), per_transaction), start=1):
        chunk = orders[first:first + per_transaction]
        producer.begin_transaction()
        for order in chunk:
            producer.produce(topic, key=order.customer.encode(), value=json.dumps(asdict(order)).encode())
        if number % abort_every == 0:
            # Flush first: aborting unsent records would just drop them in the client.
            producer.flush(TIMEOUT_S)
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed.extend(chunk)
    return committed


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic unless it exists: running the generator again adds orders."""
    # The client must outlive the future: a collected client fails its futures.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    try:
        futures[topic].result(TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--customers", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    create_topic(args.bootstrap, args.topic, args.partitions)
    start = datetime.now(UTC).replace(second=0, microsecond=0)
    committed = produce_orders(args.bootstrap, args.topic, make_orders(args.count, args.customers, start, args.seed))
    print(f"{len(committed)} orders committed, {args.count - len(committed)} aborted, in {args.topic}")


if __name__ == "__main__":
    main()
