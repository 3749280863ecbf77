"""Start-up after a long coordinator history (issue 15), Ottla only.

A data directory is written whose `__transaction_state` holds TRANSACTIONS committed
transactions (Ongoing, PrepareCommit and CompleteCommit records, as the coordinator
writes them, for IDS transactional ids in turn) and whose `__consumer_offsets` holds
COMMITS offset commits (GROUPS groups of 100 partitions each), written straight into
the logs through the storage code. The broker is then started on it (after a clean
shutdown, so only the coordinators have work to do) and timed:

- ready: from the process's start to its "Ottla is ready" line (target: under 1 s);
- produce during the load: one record (acks=all) to an ordinary topic from a new
  producer created right after the ready line, until its acknowledgement;
- loaded: from the process's start to its "Ottla coordinators loaded" line;
- the broker's peak resident memory (VmHWM) over all of it, read once loaded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Producer

from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.offsets_log import CommittedOffset, OffsetKey, encode_offset_key, encode_offset_value
from ottla.coordinator.transaction_log import TOPIC as TXN_TOPIC
from ottla.coordinator.transaction_log import TxnRecord, TxnState, encode_key, encode_value, partition_for
from ottla.coordinator.transactions import INTERNAL_TOPIC_CONFIGS
from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager
from ottla.testing import BrokerProcess

from .peers import peak_resident

TRANSACTIONS = 1_000_000
COMMITS = 1_000_000
IDS = 1_000
GROUPS = 100
PARTITIONS = 50  # of each internal topic: Kafka's defaults
ORDINARY = "bench-ordinary"
READY_TARGET = 1.0
BATCH_RECORDS = 1_000
NOW_MS = 1_700_000_000_000


@dataclass
class LoadResult:
    transactions: int
    commits: int
    records: int
    history_bytes: int
    ready_seconds: float
    produce_seconds: float
    loaded_seconds: float
    rss_bytes: int  # the peak (VmHWM), read once loaded


class _Appender:
    """Records of one internal topic, appended in batches per partition, in order."""

    def __init__(self, logs: LogManager, topic: str) -> None:
        self.logs, self.topic = logs, topic
        self.pending: dict[int, list[bytes]] = {}
        self.records = 0

    def add(self, partition: int, key: bytes, value: bytes) -> None:
        records = self.pending.setdefault(partition, [])
        records.append(encode_record(key, value, offset_delta=len(records)))
        if len(records) == BATCH_RECORDS:
            self.flush(partition)

    def flush(self, partition: int | None = None) -> None:
        for p in [partition] if partition is not None else list(self.pending):
            records = self.pending.pop(p, [])
            if records:
                batch = build_batch(records, timestamp=int(time.time() * 1000))
                log = self.logs.partition(self.topic, p)
                assert log is not None
                log.append_batch(batch, BatchHeader.parse(batch))
                self.records += len(records)


def write_history(data_dir: str, transactions: int, commits: int) -> int:
    """The history above, in a new data directory left after a clean shutdown. Returns
    how many records it holds."""
    logs = LogManager(data_dir, LogConfig())
    logs.load()
    logs.create_topic(TXN_TOPIC, PARTITIONS, INTERNAL_TOPIC_CONFIGS)
    logs.create_topic(OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
    logs.create_topic(ORDINARY, 1)
    txns = _Appender(logs, TXN_TOPIC)
    # Each id's three records, encoded once: what the load costs depends on how many
    # records it reads, not on what they say.
    per_id = []
    for i in range(IDS):
        txn_id = f"bench-txn-{i}"
        ongoing = TxnRecord(i, 0, 60_000, TxnState.ONGOING, frozenset({(ORDINARY, 0)}), NOW_MS, NOW_MS)
        states = [ongoing, ongoing._replace(state=TxnState.PREPARE_COMMIT),
                  ongoing._replace(state=TxnState.COMPLETE_COMMIT, partitions=frozenset(), start_ms=-1)]
        per_id.append((partition_for(txn_id, PARTITIONS), encode_key(txn_id), [encode_value(s) for s in states]))
    for n in range(transactions):
        partition, key, values = per_id[n % IDS]
        for value in values:
            txns.add(partition, key, value)
    txns.flush()
    offsets = _Appender(logs, OFFSETS_TOPIC)
    keys = [(partition_for(f"bench-group-{g}", PARTITIONS),
             encode_offset_key(OffsetKey(f"bench-group-{g}", ORDINARY, p)))
            for g in range(GROUPS) for p in range(100)]
    for n in range(commits):
        partition, key = keys[n % len(keys)]
        offsets.add(partition, key, encode_offset_value(CommittedOffset(n, -1, "", NOW_MS)))
    offsets.flush()
    logs.close()
    return txns.records + offsets.records


def _size(data_dir: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(data_dir) for name in names)


def run_coordinator_load(transactions: int, commits: int, say: Callable[[str], None]) -> LoadResult:
    work = tempfile.mkdtemp(prefix="ottla-coordinator-load-")
    broker = None
    try:
        data_dir = f"{work}/data"
        say(f"coordinator load: writing {transactions:,} transactions and {commits:,} offset commits")
        records = write_history(data_dir, transactions, commits)
        history_bytes = _size(data_dir)
        broker = BrokerProcess(data_dir)
        loaded_at: list[float] = []

        def note_loaded() -> None:
            assert broker is not None
            if broker.coordinators_loaded.wait(600):
                loaded_at.append(time.monotonic())

        started = time.monotonic()
        broker.start(timeout=120, wait_for_coordinators=False)
        ready = time.monotonic() - started
        watcher = threading.Thread(target=note_loaded, daemon=True)
        watcher.start()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        sent = time.monotonic()
        producer.produce(ORDINARY, b"during the load", partition=0)
        if producer.flush(60) != 0:
            raise RuntimeError("the produce during the load was not acknowledged")
        produced = time.monotonic() - sent
        watcher.join()
        if not loaded_at:
            raise RuntimeError("the coordinators did not load within 600 s")
        loaded = loaded_at[0] - started
        assert broker.process is not None
        result = LoadResult(transactions, commits, records, history_bytes, ready, produced, loaded,
                            peak_resident(broker.process.pid))
        say(f"coordinator load: ready after {ready:.2f} s, produce acknowledged in {produced * 1000:.0f} ms, "
            f"loaded after {loaded:.2f} s")
        return result
    finally:
        if broker is not None:
            broker.kill()
        shutil.rmtree(work, ignore_errors=True)


def coordinator_load_lines(result: LoadResult | None) -> list[str]:
    if result is None:
        return []
    verdict = "met" if result.ready_seconds < READY_TARGET else "**missed**"
    return [
        f"Start-up after a long coordinator history: {result.transactions:,} committed transactions "
        f"({IDS:,} transactional ids) and {result.commits:,} offset commits, {result.records:,} records, "
        f"{result.history_bytes / 2**20:,.0f} MiB in the internal topics (bench/coordinator_load.py)", "",
        "| from the process's start | seconds |",
        "|---|---:|",
        f"| ready (target < {READY_TARGET:g} s: {verdict}) | {result.ready_seconds:.2f} |",
        f"| a produce to an ordinary topic, sent at ready, acknowledged | +{result.produce_seconds:.3f} |",
        f"| coordinators loaded | {result.loaded_seconds:.2f} |",
        "",
        f"Resident memory at its peak (VmHWM), read once loaded: {result.rss_bytes / 2**20:.0f} MiB.",
    ]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.coordinator_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=TRANSACTIONS)
    parser.add_argument("--commits", type=int, default=COMMITS)
    args = parser.parse_args()
    outcome = run_coordinator_load(args.transactions, args.commits, lambda line: print(line, flush=True))
    print("\n".join(coordinator_load_lines(outcome)))
