"""A compacted topic through the broker: latest value per key, tombstones, aborted
transactions, and a consumer reading the result."""

from __future__ import annotations

import time

from tests.clients import create_topic, idempotent_producer, produce_all, read_all, transactional_producer

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "20000", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "2000"}


def _wait_for(broker, text: str, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while broker.log().count(text) < count:
        assert time.monotonic() < deadline, f"{text!r} not logged {count} times"
        time.sleep(0.1)


def test_a_consumer_of_a_compacted_topic_sees_each_keys_latest_value(fresh_broker, topic_name):
    broker = fresh_broker(log_cleaner_backoff_ms=200)
    create_topic(broker.bootstrap, topic_name, 1, COMPACTED)
    producer = idempotent_producer(broker.bootstrap, **{"batch.size": 4000})
    rounds = 20
    produce_all(producer, [(topic_name, 0, b"key-%d" % k, b"round-%d-" % r + b"v" * 100)
                           for r in range(rounds) for k in range(10)])
    produce_all(producer, [(topic_name, 0, b"key-3", None)])  # tombstone: key-3 is deleted
    txn = transactional_producer(broker.bootstrap, f"compact-{topic_name}")
    txn.begin_transaction()
    txn.produce(topic_name, key=b"key-5", value=b"aborted", partition=0)
    txn.flush(30)
    txn.abort_transaction(30)
    # Fill a few segments more so that all of the above is in closed, cleanable segments.
    produce_all(producer, [(topic_name, 0, b"filler-%d" % i, b"f" * 1000) for i in range(60)])
    _wait_for(broker, "compacted")

    def round_values() -> list[bytes]:
        got = read_all(broker.bootstrap, topic_name, [0], isolation="read_committed", settle=0.3)[0]
        return [v for v in got if v is not None and v.startswith(b"round-")]

    # Passes run every log.cleaner.backoff.ms until everything cleanable is clean: then
    # each key appears once, with its last value (key-3 was deleted).
    deadline = time.monotonic() + 30
    while len(round_values()) != 9:
        assert time.monotonic() < deadline, f"not compacted: {len(round_values())} values"
        time.sleep(0.3)
    assert all(v.startswith(b"round-%d-" % (rounds - 1)) for v in round_values())
    uncommitted = read_all(broker.bootstrap, topic_name, [0], isolation="read_uncommitted")[0]
    assert b"aborted" not in uncommitted, "compaction removed the aborted record itself"

    # Once past delete.retention.ms, a later pass drops the tombstone too.
    produce_all(producer, [(topic_name, 0, b"filler-%d" % i, b"g" * 1000) for i in range(60)])
    time.sleep(2.5)
    produce_all(producer, [(topic_name, 0, b"filler-%d" % i, b"h" * 1000) for i in range(60)])
    _wait_for(broker, "compacted", count=2)
    deadline = time.monotonic() + 20
    while None in read_all(broker.bootstrap, topic_name, [0], isolation="read_committed", settle=0.3)[0]:
        assert time.monotonic() < deadline, "the tombstone outlived delete.retention.ms"
        time.sleep(0.5)


def test_a_compacted_topic_refuses_records_without_a_key(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact"})
    producer = idempotent_producer(broker.bootstrap)
    errors = []
    producer.produce(topic_name, value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].name() == "INVALID_RECORD"
