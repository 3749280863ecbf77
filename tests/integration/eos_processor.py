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

    python -m tests.integration.eos_processor BOOTSTRAP INPUT OUTPUT GROUP TXN_ID [PROTOCOL [IDLE]]
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str, protocol: str = "classic",
         idle: float = 5.0, batch: int = 100, pace: float = 0.02) -> None:
    idle = float(idle)
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
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            print(f"committed {pending}", flush=True)
            pending = 0
            time.sleep(pace)
            producer.begin_transaction()
    producer.abort_transaction(30)
    consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:8])
