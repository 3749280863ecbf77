"""More partitions on disk than the process may open files (issue 12 point 6, its second
half): the broker starts, serves every partition, and restarts after a kill -9. Before,
each segment held its files open for good, and a start-up over such a data directory
failed with EMFILE every time."""

from __future__ import annotations

import os
import time

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


def test_a_checkpoint_after_writes_to_more_partitions_than_descriptors(fresh_broker, topic_name):
    """The periodic flush lends its worker thread a duplicate of each written file: all at
    once, 150 dirty partitions needed 450 more descriptors than the 300 allowed, and the
    checkpoint failed with EMFILE every time, its recovery points never moving."""
    broker = fresh_broker(launcher=LAUNCHER, log_flush_offset_checkpoint_interval_ms=500)
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, b"v%d" % p) for p in range(PARTITIONS)])
    path = os.path.join(broker.data_dir, "recovery-point-offset-checkpoint")
    deadline = time.monotonic() + 30
    points: dict[int, int] = {}
    while time.monotonic() < deadline:
        if not os.path.exists(path):  # the first checkpoint is yet to come
            time.sleep(0.2)
            continue
        with open(path) as f:
            lines = f.read().splitlines()[2:]
        points = {int(p): int(o) for t, p, o in (line.split() for line in lines) if t == topic_name}
        if points == dict.fromkeys(range(PARTITIONS), 1):
            break
        time.sleep(0.2)
    assert points == dict.fromkeys(range(PARTITIONS), 1)
    assert "Too many open files" not in broker.log()
