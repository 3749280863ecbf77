"""Producers for the crash-loop test, each run as its own process while the broker is
killed and restarted under it. Each writes what the broker acknowledged to a file, one
line per fact, flushed at once:

    idempotent  -> "ack <partition> <value>"      for every delivered message
    txn         -> "commit <txn>" / "abort <txn>" once commit/abort returned

    python -m tests.integration.crash_producers idempotent BOOTSTRAP TOPIC OUT STOPFILE
    python -m tests.integration.crash_producers txn BOOTSTRAP TOPIC OUT STOPFILE NAME
"""

from __future__ import annotations

import os
import sys
import time

from confluent_kafka import KafkaException, Producer

PARTITIONS = 3
TXN_SIZE = 20


def idempotent(bootstrap: str, topic: str, out_path: str, stop_file: str) -> None:
    out = open(out_path, "a", buffering=1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 120000, "log_level": 0})

    def delivered(err, msg) -> None:
        if err is None:
            out.write(f"ack {msg.partition()} {msg.value().decode()}\n")

    n = 0
    while not os.path.exists(stop_file):
        for _ in range(50):
            try:
                producer.produce(topic, value=f"i-{n}".encode(), partition=n % PARTITIONS, on_delivery=delivered)
            except BufferError:
                producer.poll(0.1)
                continue
            n += 1
        producer.poll(0.02)
    producer.flush(120)


def transactional(bootstrap: str, topic: str, out_path: str, stop_file: str, name: str) -> None:
    out = open(out_path, "a", buffering=1)
    config = {"bootstrap.servers": bootstrap, "transactional.id": f"crash-{name}", "linger.ms": 5,
              "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "log_level": 0}

    def fresh() -> Producer:
        while True:
            producer = Producer(config)
            try:
                producer.init_transactions(30)
                return producer
            except KafkaException:
                time.sleep(0.5)

    producer = fresh()
    txn = 0
    while not os.path.exists(stop_file):
        txn_id = f"{name}-{txn}"
        try:
            producer.begin_transaction()
            for i in range(TXN_SIZE):
                producer.produce(topic, value=f"t-{txn_id}-{i}".encode(), partition=i % PARTITIONS)
            producer.commit_transaction(30)
            out.write(f"commit {txn_id}\n")
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                    out.write(f"abort {txn_id}\n")
                except KafkaException:
                    producer = fresh()
            else:
                # Fatal, or an outcome we cannot learn: a new producer fences the old
                # one; this transaction ends up fully committed or fully aborted.
                producer = fresh()
        txn += 1


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    (idempotent if mode == "idempotent" else transactional)(*args)
