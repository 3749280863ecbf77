"""MirrorMaker 2's copy rate from Ottla to Apache Kafka on this machine.

    .venv/bin/python -m bench.mirror_maker [--records 200000] [--size 100]

Ottla and the reference Kafka (tests/reference/kafka.py, `make kafka`) on free ports; MirrorMaker 2
in dedicated mode with the mm2.properties the tests run (tests/reference/connect.py), one
topic of 3 partitions. MirrorMaker 2 is started first and the topic created; then the records
are produced to Ottla (idempotent, acks=all) and the clock runs until Kafka's high
watermarks add up to every record. The rate is records over that time: it includes the
produce, which is several times faster than the copy.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition

from ottla.testing import BrokerProcess
from tests.clients import create_topic, idempotent_producer
from tests.reference.connect import MirrorMaker, mirror_properties, wait_until
from tests.reference.kafka import KafkaBroker

PARTITIONS = 3


def copied(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "log_level": 3})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS))
    except Exception:  # the topic is not there yet
        return 0
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-mm2-")
    ottla = BrokerProcess(f"{work}/ottla").start()
    kafka = KafkaBroker(f"{work}/kafka").start()
    mm = MirrorMaker(work, mirror_properties("ottla", ottla.bootstrap, "kafka", kafka.bootstrap,
                                             topics="bench-mm2", groups="none"))
    try:
        create_topic(ottla.bootstrap, "bench-mm2", PARTITIONS)
        mm.start()
        wait_until(lambda: copied(kafka.bootstrap, "bench-mm2") == 0 and _exists(kafka.bootstrap), 180,
                   "MirrorMaker 2 to create the topic on Kafka", mm.log_tail)
        producer = idempotent_producer(ottla.bootstrap, **{"linger.ms": 20, "batch.size": 262144})
        value = b"x" * args.size
        start = time.monotonic()
        for n in range(args.records):
            while True:
                try:
                    producer.produce("bench-mm2", value=value, key=b"%d" % n, partition=n % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(120)
        produced = time.monotonic() - start
        wait_until(lambda: copied(kafka.bootstrap, "bench-mm2") >= args.records, 900, "the copy", mm.log_tail)
        elapsed = time.monotonic() - start
        print(f"{args.records} records of {args.size} B: produced to Ottla in {produced:.1f} s, "
              f"on Kafka after {elapsed:.1f} s: {args.records / elapsed:,.0f} records/s, "
              f"{args.records * args.size / elapsed / 2**20:.2f} MiB/s of values")
    finally:
        mm.kill()
        kafka.cleanup()
        ottla.cleanup()


def _exists(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return "bench-mm2" in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


if __name__ == "__main__":
    main()
