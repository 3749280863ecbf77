"""The broker killed with SIGKILL at random moments under an idempotent producer and two
transactional producers, ten times. Afterwards: no acknowledged record is missing, none is
duplicated, order holds per partition, every transaction whose commit was acknowledged is
fully visible to read_committed and every other one is fully visible or fully invisible."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

from tests.clients import create_topic
from tests.integration.crash_producers import check

CYCLES = 10
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_kill_9_loop_loses_and_duplicates_nothing(fresh_broker, tmp_path, topic_name):
    broker = fresh_broker(log_segment_bytes=256 * 1024, transaction_abort_timed_out_transaction_cleanup_interval_ms=500)
    idem_topic, txn_topic = f"{topic_name}-idem", f"{topic_name}-txn"
    create_topic(broker.bootstrap, idem_topic, 3)
    create_topic(broker.bootstrap, txn_topic, 3)
    stop = tmp_path / "stop"
    outputs = {name: tmp_path / f"{name}.out" for name in ("idem", "a", "b")}

    def spawn(*args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tests.integration.crash_producers", *args], cwd=ROOT,
                                stderr=open(tmp_path / "producers.log", "a"))

    producers = [
        spawn("idempotent", broker.bootstrap, idem_topic, str(outputs["idem"]), str(stop)),
        spawn("txn", broker.bootstrap, txn_topic, str(outputs["a"]), str(stop), "a"),
        spawn("txn", broker.bootstrap, txn_topic, str(outputs["b"]), str(stop), "b"),
    ]
    rng = random.Random(20261122)
    try:
        for _ in range(CYCLES):
            time.sleep(rng.uniform(0.5, 2.5))
            broker.kill()
            broker.start()
        time.sleep(3)
    finally:
        stop.touch()
        for p in producers:
            try:
                p.wait(150)
            except subprocess.TimeoutExpired:
                p.kill()
    assert all(p.returncode == 0 for p in producers), [p.returncode for p in producers]

    verdict = check(broker.bootstrap, idem_topic, txn_topic, str(outputs["idem"]),
                    [str(outputs["a"]), str(outputs["b"])])
    assert verdict.acknowledged > 1000, "the producer hardly produced: the test would prove nothing"
    assert verdict.committed, "no transaction was committed: the test would prove nothing"
    assert verdict.lost == 0, f"{verdict.lost} acknowledged records missing"
    assert verdict.duplicated == 0, f"{verdict.duplicated} records duplicated"
    assert verdict.out_of_order == 0, "order broken within a partition"
    assert verdict.committed_not_whole == 0, "a committed transaction is not wholly visible"
    assert verdict.partial == 0, "a transaction is partly visible"
    print(f"crash loop: {CYCLES} kills, {verdict.acknowledged} acknowledged idempotent records, "
          f"{verdict.committed} committed transactions, {verdict.others} others, 0 violations")
