"""More partitions on disk than the process may open files (issue 12 point 6, its second
half): the broker starts, serves every partition, and restarts after a kill -9. Before,
each segment held its files open for good, and a start-up over such a data directory
failed with EMFILE every time."""

from __future__ import annotations

import os

from tests.clients import create_topic, idempotent_producer, produce_all, read_all

LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "launchers", "low_fd_limit.py")
FD_LIMIT = 300  # low_fd_limit.LIMIT
PARTITIONS = 150  # x 3 files each: well over the 300 descriptors the broker may have


def test_more_partitions_than_descriptors_start_serve_and_restart(fresh_broker, topic_name):
    broker = fresh_broker(launcher=LAUNCHER)
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic_name, p, None, b"v%d" % p) for p in range(PARTITIONS)])
    assert len(os.listdir(f"/proc/{broker.process.pid}/fd")) < FD_LIMIT
    broker.kill()
    broker.start()  # before: EMFILE
    got = read_all(broker.bootstrap, topic_name, list(range(PARTITIONS)), isolation="read_committed")
    assert got == {p: [b"v%d" % p] for p in range(PARTITIONS)}
    produce_all(producer, [(topic_name, p, None, b"w%d" % p) for p in range(PARTITIONS)])
    got = read_all(broker.bootstrap, topic_name, list(range(PARTITIONS)), isolation="read_committed")
    assert got == {p: [b"v%d" % p, b"w%d" % p] for p in range(PARTITIONS)}
