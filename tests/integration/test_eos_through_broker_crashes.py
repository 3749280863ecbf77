"""Exactly-once applications through crashes of the broker under them: two
read-process-write processors in one group (send_offsets_to_transaction), and Kafka
Streams with exactly_once_v2, each while Ottla is killed with SIGKILL and started again
ten times in the middle of their processing.

Every third kill of the processors' run keeps the broker down past their transaction
timeout, so that the restarted coordinator aborts what they had open. Each kill lands
while the applications work: the next one waits until their output has grown since the
broker came back, and every kill must come before the input is all processed.
Afterwards every input record's result is in the output exactly once (read_committed:
the transactions the kills broke were aborted and processed again) and the group's
committed offsets are at the input's end.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.clients import create_topic, idempotent_producer, produce_all, read_all
from tests.integration.test_kafka_streams import HALF, expected_output, first_difference, run_app

CYCLES = 10
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARTITIONS = 4
# The processors' transaction.timeout.ms: every third kill keeps Ottla down longer than
# this, so that the restarted coordinator aborts the transactions left open and the
# processors see their commits fail (they abort and read their input again, or, fenced,
# are started again).
TRANSACTION_TIMEOUT_MS = 3000


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of `topic`'s high watermarks: records written, committed or not, and markers."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watcher-{time.monotonic_ns()}",
                         "log_level": 3})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


class Processors:
    """The read-process-write processors (tests/integration/eos_processor.py), each
    started again when it ends with an error, as a supervisor would: a fatal error
    (fenced, after a timed-out transaction was aborted by the restarted coordinator) ends
    a processor, and its replacement starts from the group's committed offsets."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, count: int, log: str) -> None:
        self.args = [bootstrap, source, sink, group]
        self.log = log
        self.processes = {f"{group}-txn-{i}": self._start(f"{group}-txn-{i}") for i in range(count)}
        self.restarts = 0

    def _start(self, txn_id: str) -> subprocess.Popen:
        # IDLE 20 s: after a restart of the broker, librdkafka's reconnect backoff (up
        # to 10 s) and the group's rebalance may keep a processor from reading for a while.
        with open(self.log, "a") as log:  # the child keeps its own descriptor
            return subprocess.Popen([sys.executable, "-m", "tests.integration.eos_processor", *self.args,
                                     txn_id, "classic", "20", "50", "0.05", str(TRANSACTION_TIMEOUT_MS)],
                                    stdout=log, stderr=log, cwd=ROOT)

    def supervise(self) -> None:
        for txn_id, process in self.processes.items():
            if process.poll() not in (None, 0):
                self.processes[txn_id] = self._start(txn_id)
                self.restarts += 1

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while any(p.poll() is None for p in self.processes.values()) or \
                any(p.returncode != 0 for p in self.processes.values()):
            assert time.monotonic() < deadline, "the processors did not finish"
            self.supervise()
            time.sleep(0.5)

    def aborts(self) -> int:
        with open(self.log) as log:
            return sum(line.startswith("aborted") for line in log)

    def kill(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


def kill_loop(kill: Callable[[], None], written: Callable[[], int], total: int, *,
              step: int, on_wait: Callable[[], None] = lambda: None, seconds: float = 600) -> list[int]:
    """Kill the broker CYCLES times, each once the output has grown by `step` since the
    broker came back; every kill must find the applications mid-way (output below
    `total`). Returns the output's size at each kill."""
    rng = random.Random(20261127)
    at_kills: list[int] = []
    deadline = time.monotonic() + seconds
    start = written()
    for _ in range(CYCLES):
        while (now := written()) < start + step:
            assert time.monotonic() < deadline, f"no progress after kills at {at_kills}"
            on_wait()
            time.sleep(0.2)
        time.sleep(rng.uniform(0, 0.3))
        assert now < total, f"the input was processed before all kills came ({at_kills})"
        kill()
        at_kills.append(now)
        start = written()
    return at_kills


def test_two_processors_are_exactly_once_through_ten_kills_of_ottla(fresh_broker, tmp_path):
    broker = fresh_broker(group_initial_rebalance_delay_ms=0,
                          transaction_abort_timed_out_transaction_cleanup_interval_ms=500)
    source, sink, group = "crash-input", "crash-output", "crash-processors"
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    count = 40_000
    produce_all(idempotent_producer(broker.bootstrap),
                [(source, i % PARTITIONS, b"%d" % i, b"%d" % i) for i in range(count)])

    kills = 0

    def kill_and_restart() -> None:
        nonlocal kills
        kills += 1
        broker.kill()
        if kills % 3 == 0:
            time.sleep(TRANSACTION_TIMEOUT_MS / 1000 + 1)
        broker.start()

    processors = Processors(broker.bootstrap, source, sink, group, 2, str(tmp_path / "processors.log"))
    try:
        at_kills = kill_loop(kill_and_restart, lambda: high_watermarks(broker.bootstrap, sink, PARTITIONS),
                             count, step=1000, on_wait=processors.supervise)
        processors.wait(600)
    finally:
        processors.kill()
    assert len(at_kills) == CYCLES

    got = read_all(broker.bootstrap, sink, list(range(PARTITIONS)), isolation="read_committed")
    values = [v for vs in got.values() for v in vs]
    # Lists, not sets: a duplicate would show.
    assert sorted(values) == sorted(b"processed:%d" % i for i in range(count)), \
        f"{len(values)} results, {len(set(values))} distinct, kills at {at_kills}, " \
        f"{processors.restarts} processor restarts, {processors.aborts()} aborted transactions"
    # The group's committed offsets are at the input's end.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 3})
    try:
        committed = consumer.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == dict.fromkeys(range(PARTITIONS), count // PARTITIONS)


@pytest.mark.parametrize("group_protocol", ["classic", "streams"])
def test_streams_exactly_once_through_ten_kills_of_ottla(fresh_broker, tmp_path, group_protocol):
    """Kafka Streams (tests/java/WordTotals.java: a repartition and a state store) through
    ten kill -9 cycles of Ottla while it works through its first half of input: its output
    is every record's running total exactly once, as the input defines it. With each
    group protocol: classic (the coordinator only keeps offsets and the group's generation)
    and streams (KIP-1071: the broker assigns the tasks, and must bring the group, its
    topology and its members' assignments back from __consumer_offsets after each kill)."""
    ottla = fresh_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=200)

    def kill_and_restart() -> None:
        ottla.kill()
        ottla.start()

    # The output's high watermarks (records, markers and aborted records written again)
    # at which each kill comes: over the first part of the first half, which the app works
    # through slowly, so that the output's growth from the transactions each kill aborts
    # still leaves every kill inside the first half.
    kills = [(HALF * (i + 1) // (2 * CYCLES + 2), kill_and_restart) for i in range(CYCLES)]
    name = f"wt-crash-{time.monotonic_ns()}"
    out, _, app = run_app(ottla.bootstrap, tmp_path, name, kills=kills, group_protocol=group_protocol)

    assert out == expected_output(2 * HALF), first_difference(out, expected_output(2 * HALF))
    assert "STATE ERROR" not in app.states
