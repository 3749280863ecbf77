"""A read-process-write processor, run as its own process by the exactly-once test.

Consumes `input` (read_committed, in group `group`), writes "processed:<value>" to
`output` and commits the consumed offsets inside the same transaction every `batch`
messages, pausing `pace` seconds after each commit so that a kill lands mid-stream.
Exits once it has had partitions but no new input for IDLE seconds (default 5). The
tests kill it with SIGKILL at random moments and start it again, or kill the broker
under it. With PROTOCOL `consumer` the consumer uses KIP-848's group protocol.

Both clients keep the bootstrap address when the broker is gone
(`metadata.recovery.strategy=none`): librdkafka 2.16's default re-bootstrap decommissions
the only broker, and a `send_offsets_to_transaction` whose group coordinator was that
broker then waits forever, past its timeout (librdkafka issues #5511 and #5456).

    python -m tests.integration.eos_processor BOOTSTRAP INPUT OUTPUT GROUP TXN_ID \
        [PROTOCOL [IDLE [BATCH [PACE [TXN_TIMEOUT_MS]]]]]
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition


def rewind(consumer: Consumer) -> None:
    """Seek every assigned partition back to the group's committed offset (its start
    when nothing is committed yet)."""
    for tp in consumer.committed(consumer.assignment(), 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str, protocol: str = "classic",
         idle: float = 5.0, batch: int = 100, pace: float = 0.02,
         transaction_timeout_ms: int = 60000) -> None:
    idle, batch, pace = float(idle), int(batch), float(pace)
    config = {
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 7, "debug": "cgrp,fetch,eos",
        "metadata.recovery.strategy": "none",
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"  # the session timeout is the broker's then
    else:
        config["session.timeout.ms"] = 6000
    consumer = Consumer(config)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                         "transaction.timeout.ms": int(transaction_timeout_ms),
                         "log_level": 3, "metadata.recovery.strategy": "none"})
    producer.init_transactions(60)
    consumer.subscribe([source])
    last_input = time.monotonic()
    pending = 0
    producer.begin_transaction()
    while time.monotonic() - last_input < idle:
        if not consumer.assignment():
            last_input = time.monotonic()  # idle only counts once the group gave us work
        for message in consumer.consume(batch - pending, 0.5):
            if message.error():
                continue
            producer.produce(sink, key=message.key(), value=b"processed:" + message.value())
            pending += 1
            last_input = time.monotonic()
        if pending >= batch or (pending and time.monotonic() - last_input > 1):
            try:
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                print(f"committed {pending}", flush=True)
            except KafkaException as exc:
                # What an application does when a commit fails under it (the broker died
                # mid-transaction, its coordinator aborted the transaction on a timeout):
                # abort, and go back to the group's committed offsets, so the aborted
                # batch is read and processed again. A fatal error (fenced) ends the
                # process with exit 3 and its supervisor starts it again.
                if not exc.args[0].txn_requires_abort():
                    raise
                producer.abort_transaction(30)
                rewind(consumer)
                print(f"aborted {pending}", flush=True)
            pending = 0
            time.sleep(pace)
            producer.begin_transaction()
    producer.abort_transaction(30)
    consumer.close()


if __name__ == "__main__":
    try:
        main(*sys.argv[1:11])
    except KafkaException as exc:
        print(f"fatal {exc}", file=sys.stderr, flush=True)
        sys.exit(3)
