"""Producers for the crash-loop test, each run as its own process while the broker is
killed and restarted under it. Each writes what the broker acknowledged to a file, one
line per fact, flushed at once:

    idempotent  -> "ack <partition> <value>"      for every delivered message
    txn         -> "commit <txn>" / "abort <txn>" once commit/abort returned

    python -m tests.integration.crash_producers idempotent BOOTSTRAP TOPIC OUT STOPFILE
    python -m tests.integration.crash_producers txn BOOTSTRAP TOPIC OUT STOPFILE NAME
"""

from __future__ import annotations

import collections
import os
import sys
import time
from dataclasses import dataclass

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



@dataclass
class Verdict:
    """What the broker kept of what the crash producers were told."""

    acknowledged: int = 0  # idempotent records acknowledged
    lost: int = 0  # acknowledged and not in the log
    duplicated: int = 0  # in the log more than once
    out_of_order: int = 0  # partitions whose records are not in production order
    committed: int = 0  # transactions whose commit was acknowledged
    committed_not_whole: int = 0  # of those, not wholly visible to read_committed
    partial: int = 0  # other transactions partly visible
    others: int = 0  # transactions written whose commit was not acknowledged

    @property
    def violations(self) -> int:
        return self.lost + self.duplicated + self.out_of_order + self.committed_not_whole + self.partial


def check(bootstrap: str, idem_topic: str, txn_topic: str, idem_out: str, txn_outs: list[str]) -> Verdict:
    """Read both topics back and hold them against the producers' files."""
    from tests.clients import read_all

    verdict = Verdict()
    acked: dict[int, list[str]] = collections.defaultdict(list)
    with open(idem_out) as f:
        for line in f:
            _, partition, value = line.split()
            acked[int(partition)].append(value)
    verdict.acknowledged = sum(len(v) for v in acked.values())
    stored = read_all(bootstrap, idem_topic, list(range(PARTITIONS)), isolation="read_uncommitted", timeout=120)
    for partition, values in stored.items():
        decoded = [v.decode() for v in values]
        verdict.duplicated += len(decoded) - len(set(decoded))
        numbers = [int(v.split("-")[1]) for v in decoded]
        verdict.out_of_order += numbers != sorted(numbers)
        verdict.lost += len(set(acked[partition]) - set(decoded))

    committed = set()
    for path in txn_outs:
        with open(path) as f:
            for line in f:
                kind, txn = line.split()
                if kind == "commit":
                    committed.add(txn)
    visible = read_all(bootstrap, txn_topic, list(range(PARTITIONS)), isolation="read_committed", timeout=120)
    everything = read_all(bootstrap, txn_topic, list(range(PARTITIONS)), isolation="read_uncommitted", timeout=120)
    shown: collections.Counter[str] = collections.Counter()
    for values in visible.values():
        decoded = [v.decode() for v in values]
        verdict.duplicated += len(decoded) - len(set(decoded))
        for v in decoded:
            shown[v.rsplit("-", 1)[0][2:]] += 1
    written = {v.decode().rsplit("-", 1)[0][2:] for values in everything.values() for v in values}
    verdict.committed = len(committed)
    verdict.committed_not_whole = sum(1 for txn in committed if shown[txn] != TXN_SIZE)
    verdict.others = len(written - committed)
    verdict.partial = sum(1 for txn in written - committed if shown[txn] not in (0, TXN_SIZE))
    return verdict


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    (idempotent if mode == "idempotent" else transactional)(*args)
