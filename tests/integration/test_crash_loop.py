"""The broker killed with SIGKILL at random moments under an idempotent producer and two
transactional producers, ten times. Afterwards: no acknowledged record is missing, none is
duplicated, order holds per partition, every transaction whose commit was acknowledged is
fully visible to read_committed and every other one is fully visible or fully invisible."""

from __future__ import annotations

import collections
import os
import random
import subprocess
import sys
import time

from tests.clients import create_topic, read_all

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

    # --- the idempotent producer: everything acknowledged, once, in order ---
    acked = collections.defaultdict(list)
    for line in outputs["idem"].read_text().splitlines():
        _, partition, value = line.split()
        acked[int(partition)].append(value)
    stored = read_all(broker.bootstrap, idem_topic, [0, 1, 2], isolation="read_uncommitted")
    total_acked = sum(len(v) for v in acked.values())
    assert total_acked > 1000, "the producer hardly produced: the test would prove nothing"
    for partition, values in stored.items():
        decoded = [v.decode() for v in values]
        assert len(decoded) == len(set(decoded)), f"duplicates in partition {partition}"
        numbers = [int(v.split("-")[1]) for v in decoded]
        assert numbers == sorted(numbers), f"order broken in partition {partition}"
        missing = set(acked[partition]) - set(decoded)
        assert not missing, f"{len(missing)} acknowledged records missing from partition {partition}"

    # --- the transactional producers: all or nothing ---
    committed_ack = set()
    for name in ("a", "b"):
        for line in outputs[name].read_text().splitlines():
            kind, txn = line.split()
            if kind == "commit":
                committed_ack.add(txn)
    visible = read_all(broker.bootstrap, txn_topic, [0, 1, 2], isolation="read_committed")
    everything = read_all(broker.bootstrap, txn_topic, [0, 1, 2], isolation="read_uncommitted")
    by_txn_visible = collections.Counter()
    for values in visible.values():
        for v in values:
            by_txn_visible[v.decode().rsplit("-", 1)[0][2:]] += 1
    written = {v.decode().rsplit("-", 1)[0][2:] for values in everything.values() for v in values}
    assert committed_ack, "no transaction was committed: the test would prove nothing"
    for txn in committed_ack:
        assert by_txn_visible[txn] == 20, f"committed transaction {txn} shows {by_txn_visible[txn]} of 20"
    for txn in written - committed_ack:
        assert by_txn_visible[txn] in (0, 20), f"transaction {txn} is partly visible: {by_txn_visible[txn]}"
    for values in visible.values():
        decoded = [v.decode() for v in values]
        assert len(decoded) == len(set(decoded)), "a committed record is duplicated"
    print(f"crash loop: {CYCLES} kills, {total_acked} acknowledged idempotent records, "
          f"{len(committed_ack)} committed transactions, {len(written - committed_ack)} others, 0 violations")
