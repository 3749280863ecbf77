"""A background task that fails is logged with its traceback, counted in /metrics, and
runs again at its next turn (issue 12 point 13): before, the first exception ended the
task for good, without a line in the log."""

from __future__ import annotations

import os
import time

from tests.clients import create_topic, idempotent_producer, produce_all, read_all

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "20000", "min.cleanable.dirty.ratio": "0.01"}


def _wait(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _fill(producer, topic: str, rounds: int) -> None:
    produce_all(producer, [(topic, 0, b"key-%d" % (i % 10), b"v" * 1000) for i in range(rounds)])


def test_a_failing_compaction_pass_is_logged_counted_and_retried(fresh_broker, topic_name):
    broker = fresh_broker(admin_port=0, log_cleaner_backoff_ms=200)
    # Each pass ends by writing the cleaner checkpoint through a temporary file. A
    # directory in that file's place makes every pass fail with IsADirectoryError, as a
    # disk that refuses writes would.
    blocker = os.path.join(broker.data_dir, "cleaner-offset-checkpoint.tmp")
    os.makedirs(os.path.join(blocker, "in-the-way"))
    create_topic(broker.bootstrap, topic_name, 1, COMPACTED)
    producer = idempotent_producer(broker.bootstrap, **{"batch.size": 4000})
    _fill(producer, topic_name, 200)

    def failures() -> float:
        return broker.admin.metric("ottla_background_task_failures_total", task="compaction")

    _wait(lambda: failures() >= 1, "compaction never ran into the blocked checkpoint")
    # A pass runs only when there is something new to clean: more data, and the task,
    # still alive after its failure, fails again.
    _fill(producer, topic_name, 200)
    _wait(lambda: failures() >= 2, "compaction did not run again after failing: the task died?")
    log = broker.log()
    assert "background task failed" in log and "IsADirectoryError" in log  # with its traceback
    assert "Traceback" in log or '"exception"' in log

    # Once the disk takes writes again, the next pass succeeds and the task goes on.
    os.rmdir(os.path.join(blocker, "in-the-way"))
    os.rmdir(blocker)
    _fill(producer, topic_name, 100)
    _wait(lambda: os.path.exists(os.path.join(broker.data_dir, "cleaner-offset-checkpoint")),
          "compaction did not run again after its failures")
    assert "compacted" in broker.log()
    # The broker served all along.
    values = read_all(broker.bootstrap, topic_name, [0], isolation="read_committed", settle=0.3)[0]
    assert values and all(v == b"v" * 1000 for v in values)
