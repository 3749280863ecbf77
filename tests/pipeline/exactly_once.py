"""Input and verdict of the exactly-once tests of the streaming sink: an input topic
written in transactions (every third aborted), and the check that the copy holds every
committed input record exactly once, in order per key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.clients import read_all, transactional_producer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
KEYS = 5


def produce_input(bootstrap: str, topic: str, transactions: int) -> list[bytes]:
    """`transactions` transactions of one record per key (key k<i> to partition i % 2
    of `topic`), every third aborted after its records reached the broker. Returns the
    values the copy must hold, "copied:k<i>-t<n>", in input order."""
    producer = transactional_producer(bootstrap, f"{topic}-input")
    expected = []
    for t in range(transactions):
        producer.begin_transaction()
        for i in range(KEYS):
            value = b"k%d-t%d" % (i, t)
            producer.produce(topic, key=b"k%d" % i, value=value, partition=i % 2)
            if t % 3 != 2:
                expected.append(b"copied:" + value)
        if t % 3 != 2:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    return expected


def _key(value: bytes) -> bytes:
    return value.removeprefix(b"copied:").split(b"-")[0]


def assert_copied_exactly_once(bootstrap: str, topic: str, expected: list[bytes]) -> None:
    """`topic` (two partitions), read with read_committed, holds each expected value
    exactly once, and each key's values in the order of the input."""
    written = read_all(bootstrap, topic, [0, 1], isolation="read_committed")
    values = [v for partition in written.values() for v in partition]
    counts = Counter(values)
    twice = sorted(v for v, n in counts.items() if n > 1)
    missing = sorted(set(expected) - set(counts))
    assert not twice and not missing and len(values) == len(expected), (
        f"{len(values)} records for {len(expected)} inputs; duplicated: {twice[:10]}; missing: {missing[:10]}")
    for partition in written.values():
        for key in {_key(v) for v in partition}:
            assert [v for v in partition if _key(v) == key] == [v for v in expected if _key(v) == key]


def start_driver(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """tests/pipeline/streaming_copy.py as a driver process of its own. A session of its
    own (start_new_session), so that killpg takes the Python driver and its JVM together."""
    with open(log, "a") as stderr:
        return subprocess.Popen([sys.executable, "-m", "tests.pipeline.streaming_copy", *args],
                                stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=PROJECT_ROOT,
                                env={**os.environ, **(env or {})}, start_new_session=True)


def kill_driver(driver: subprocess.Popen) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(30)
