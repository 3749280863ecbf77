"""The web console (issue 17): how long each page takes at 1,000 topics and 10,000
partitions, and what the console costs the produce/fetch path.

    python -m bench.web_console [--rounds 5] [--records 500000] [--skip-pages | --skip-cost]

Pages: a broker with 1,000 topics of 10 partitions, records in 500 of them, 202
transactional ids (100 committed, 100 aborted, one open, one after 1,500 transactions),
200 consumer groups with committed offsets; each page is asked for REQUESTS times over HTTP, one at a time,
and the median and the slowest are reported (the time from sending the request to the
last byte of the answer, on the same machine).

Cost: produce (idempotent, acks=all) and consume (read_committed) with confluent-kafka,
in interleaved rounds against three brokers: without the admin endpoint (so no
console), with the console idle (nobody has it open), and with it open (the Broker page's
charts polling every 2 s and a Messages live tail every second, as a browser does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from ottla.protocol.apis import CREATE_TOPICS
from ottla.testing import BrokerProcess
from ottla.tools.client import Cluster, check
from tests.clients import commit_offset, transactional_producer

TOPICS = 1000
PARTITIONS_PER_TOPIC = 10
REQUESTS = 20
GROUPS = 200
TXN_IDS = 200
BUSY_TRANSACTIONS = 1500  # of one id, one after the other
# Topics whose 10 partitions get 100 records each. Not all 1,000: with unflushed data in
# thousands of partitions the broker's checkpoint opens a duplicate descriptor for every
# file of each at once and fails with EMFILE at this machine's 20,000-descriptor limit
# (broker/durability.flush_in_background; outside the console, noted in RESULTS.md). The
# pages' cost does not depend on it: they read the rows they show.
TOPICS_WITH_RECORDS = 50


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    with Cluster(bootstrap, client_id="bench-web-console") as cluster:
        for start in range(0, len(names), 500):
            answer = cluster.call(CREATE_TOPICS, timeout=120_000, validate_only=False, topics=[
                {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
                for name in names[start:start + 500]])
            for result in answer.topics:
                check(result.error_code, f"creating {result.name}", result.error_message)


def populate(broker: BrokerProcess) -> Producer:
    """1,000 topics of 10 partitions with records, transactions, groups. Returns the
    producer whose transaction stays open (so that the pages show one)."""
    names = [f"topic-{i:04d}" for i in range(TOPICS)]
    create_topics(broker.bootstrap, names, PARTITIONS_PER_TOPIC)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "log_level": 3})
    for name in names[:TOPICS_WITH_RECORDS]:
        for partition in range(PARTITIONS_PER_TOPIC):
            for i in range(100):
                producer.produce(name, key=b"key-%d" % i, value=b'{"n": %d, "pad": "%s"}' % (i, b"x" * 80),
                                 partition=partition)
        producer.poll(0)
    producer.flush(120)
    for t in range(TXN_IDS):
        txn = transactional_producer(broker.bootstrap, f"txn-{t:03d}")
        txn.begin_transaction()
        for i in range(5):
            txn.produce(names[t], value=b"in a transaction %d" % i, partition=0)
        txn.flush(30)
        txn.commit_transaction(30) if t % 2 == 0 else txn.abort_transaction(30)
        del txn  # its connections close with it
    for g in range(GROUPS):
        commit_offset(broker.bootstrap, f"group-{g:03d}", names[g], 0, 5)
    busy = transactional_producer(broker.bootstrap, "txn-busy")  # a long history in __transaction_state
    for _ in range(BUSY_TRANSACTIONS):
        busy.begin_transaction()
        busy.produce(names[1], value=b"busy", partition=1)
        busy.commit_transaction(30)
    del busy
    opener = transactional_producer(broker.bootstrap, "txn-open", **{"transaction.timeout.ms": 900_000})
    opener.begin_transaction()
    opener.produce(names[0], value=b"open", partition=0)
    opener.flush(30)
    return opener


PAGES = [
    ("Topics (first page of 1,000)", "topics"),
    ("Topics, searched", "topics?q=topic-05"),
    ("Topics, last page", "topics?page=19"),
    ("Topic (10 partitions)", "topic?name=topic-0500"),
    ("Messages (50 rows)", "messages?topic=topic-0000&partition=0&limit=50"),
    ("Messages (500 rows, the most one page shows)", "messages?topic=topic-0000&partition=0&limit=500"),
    ("Messages from a timestamp", "messages?topic=topic-0000&partition=0&timestamp=0"),
    ("Transactions (202 ids)", "transactions"),
    ("Transaction with its history", "transaction?id=txn-open"),
    ("Transaction after 1,500 transactions (history scan of 5,000 offsets)", "transaction?id=txn-busy"),
    ("Producers (topics with producer state)", "producers"),
    ("Producers of a topic", "producers?topic=topic-0000"),
    ("Consumer groups (200)", "groups"),
    ("Consumer group", "group?id=group-000"),
    ("Broker", "broker"),
    ("Charts' counters (polled every 2 s)", "stats"),
]
# Not a console page: the Prometheus scrape of the same endpoint, whose gauges name each
# of the 10,000 partitions.
SCRAPE = ("/metrics scrape (10,000 partitions)", "/metrics")


def time_pages(admin_url: str) -> list[tuple[str, float, float, int]]:
    rows = []
    for label, path in [*PAGES, SCRAPE]:
        url = f"{admin_url}{path}" if path.startswith("/") else f"{admin_url}/console/{path}"
        timings = []
        size = 0
        for _ in range(REQUESTS):
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=30) as response:
                body = response.read()
            timings.append(time.perf_counter() - started)
            size = len(body)
        rows.append((label, statistics.median(timings) * 1000, max(timings) * 1000, size))
    return rows


# --- the produce/fetch path ------------------------------------------------------------------


def produce_and_consume(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    """(produce msgs/s, consume msgs/s) for `records` records of 100 bytes."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "log_level": 3})
    value = b"v" * 100
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produced = records / (time.perf_counter() - started)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    while got < records:
        got += sum(1 for m in consumer.consume(10000, 5) if not m.error())
    consumed = records / (time.perf_counter() - started)
    consumer.close()
    return produced, consumed


class ConsoleOpen:
    """What a browser with the console open asks: the Broker page's counters every 2 s,
    a Messages page's live tail every second."""

    def __init__(self, admin_url: str, topic: str) -> None:
        self.admin_url = admin_url
        self.topic = topic
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.requests = 0

    def _run(self) -> None:
        offset = 0
        ticks = 0
        while not self.stop.wait(1.0):
            ticks += 1
            tail = f"{self.admin_url}/console/messages/rows?topic={self.topic}&partition=0&offset={offset}&limit=50"
            with urllib.request.urlopen(tail, timeout=10) as response:
                offset = json.loads(response.read())["next"]
            self.requests += 1
            if ticks % 2 == 0:
                urllib.request.urlopen(f"{self.admin_url}/console/stats", timeout=10).read()
                self.requests += 1

    def __enter__(self) -> ConsoleOpen:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def cost_rounds(rounds: int, records: int) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {"without the console": [], "console idle": [],
                                                     "console open": []}
    for r in range(rounds):
        for variant in results:
            properties = {} if variant == "without the console" else {"admin.port": "0"}
            broker = BrokerProcess(tempfile.mkdtemp(prefix="bench-console-") + "/data", properties).start()
            try:
                topic = broker.create_topic(f"cost-{r}", 1)
                if variant == "console open":
                    with ConsoleOpen(broker.admin_url, topic):
                        results[variant].append(produce_and_consume(broker.bootstrap, topic, records))
                else:
                    results[variant].append(produce_and_consume(broker.bootstrap, topic, records))
            finally:
                broker.cleanup()
    return results


def time_all_pages() -> None:
    broker = BrokerProcess(tempfile.mkdtemp(prefix="bench-console-") + "/data", {"admin.port": "0"}).start()
    try:
        started = time.monotonic()
        opener = populate(broker)
        print(f"populated {TOPICS:,} topics, {TOPICS * PARTITIONS_PER_TOPIC:,} partitions in "
              f"{time.monotonic() - started:.0f} s", flush=True)
        print("| page | median | slowest | bytes |\n|---|---:|---:|---:|")
        for label, median, slowest, size in time_pages(broker.admin_url):
            print(f"| {label} | {median:.1f} ms | {slowest:.1f} ms | {size:,} |", flush=True)
        opener.abort_transaction(30)
    finally:
        broker.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_console")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--skip-pages", action="store_true", help="only the produce/fetch cost")
    parser.add_argument("--skip-cost", action="store_true", help="only the pages")
    args = parser.parse_args(argv)
    if not args.skip_pages:
        time_all_pages()
    if args.skip_cost:
        return 0
    results = cost_rounds(args.rounds, args.records)
    print(f"\n| broker ({args.records:,} x 100 B, median of {args.rounds} interleaved rounds) "
          "| produce msgs/s | consume msgs/s |\n|---|---:|---:|")
    for variant, figures in results.items():
        produced = statistics.median(f[0] for f in figures)
        consumed = statistics.median(f[1] for f in figures)
        print(f"| {variant} | {produced:,.0f} | {consumed:,.0f} |")
    print("\nper round (produce / consume msgs/s):")
    for variant, figures in results.items():
        print(f"- {variant}: " + ", ".join(f"{p:,.0f} / {c:,.0f}" for p, c in figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
