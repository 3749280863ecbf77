"""Deleting a topic lets go of all of its files (issue 12 point 7): before, only each
segment's .log was closed and its three index files stayed open, so a test suite that
creates and deletes a topic per test ran the broker out of descriptors."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from tests.clients import idempotent_producer, produce_all
from tests.process_stats import open_descriptors


def _wait(futures: dict) -> None:
    for future in futures.values():
        future.result(30)


def test_create_and_delete_cycles_leave_no_descriptor_open(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    producer = idempotent_producer(broker.bootstrap)
    pid = broker.process.pid

    def cycle(i: int) -> None:
        name = f"{topic_name}-{i}"
        _wait(admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=30))
        produce_all(producer, [(name, p, None, b"x") for p in range(2)])  # every file is in use
        _wait(admin.delete_topics([name], operation_timeout=30))

    cycle(0)  # connections and caches settle
    baseline = open_descriptors(pid)
    for i in range(1, 101):
        cycle(i)
    # 100 cycles of 2 partitions, each with a .log, .index, .timeindex (and a .txnindex
    # once used): a leak of even one file per partition would show as 200 or more.
    assert open_descriptors(pid) <= baseline + 10
