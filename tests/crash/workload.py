"""The harness's workload and what a crash state must still hold of it.

Real clients run against a broker whose file-system operations are recorded: an
idempotent producer (acks=all), a transactional producer committing and aborting, a
consumer group committing offsets, and a raw idempotent producer whose batches the
checks send again. Each notes the CLOCK_MONOTONIC time at which each acknowledgement
reached it (a delivery callback, a commit returning), which is after the broker sent
it, so a crash placed at that time certainly follows the acknowledgement.

`check` starts Ottla on a crash state and lists what it lost or broke, in the terms
of docs/durability.md.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.clients import create_topic, read_all, transactional_producer
from tests.wire import WireClient, request

PLAIN, TXN, RAW = "plain", "txn", "raw"
GROUP = "crash-group"
TRANSACTIONAL_ID = "crash-txn"
# Small segments, so that the workload rolls them (new files, new directory entries).
TOPIC_CONFIG = {"segment.bytes": "8192"}
BROKER_PROPERTIES = {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
    # The periodic checkpoint (recovery points, snapshots) within the workload, too.
    "log.flush.offset.checkpoint.interval.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
}


def now() -> int:
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the shim's clock


@dataclass
class Transaction:
    values: list[tuple[int, bytes]]  # (partition, value)
    commit: bool
    ended_ns: int | None = None  # when commit_transaction/abort_transaction returned


@dataclass
class Acks:
    """What the clients were told, with when."""

    produced: list[tuple[int, int, bytes]] = field(default_factory=list)  # (time, partition, value) of PLAIN
    transactions: list[Transaction] = field(default_factory=list)
    commits: list[tuple[int, dict[int, int]]] = field(default_factory=list)  # (time, {partition: offset})
    # (time, batch, base offset) of RAW partition 0, with their producer id.
    raw: list[tuple[int, bytes, int]] = field(default_factory=list)
    sent_plain: set[bytes] = field(default_factory=set)

    def times(self) -> list[int]:
        return sorted([t for t, _, _ in self.produced] + [t.ended_ns for t in self.transactions if t.ended_ns]
                      + [t for t, _ in self.commits] + [t for t, _, _ in self.raw])


def prepare(broker: BrokerProcess) -> None:
    """Before the recording: the topics (the caller then shuts the broker down cleanly,
    so that the recorded start removes the clean-shutdown marker)."""
    for topic, partitions in ((PLAIN, 2), (TXN, 2), (RAW, 1)):
        create_topic(broker.bootstrap, topic, partitions, TOPIC_CONFIG)


def run(bootstrap: str, scale: int = 1) -> Acks:
    """The workload, all four clients at once; `scale` multiplies its length."""
    acks = Acks()
    lock = threading.Lock()
    failures: list[BaseException] = []

    def guarded(body):
        def target() -> None:
            try:
                body()
            except BaseException as exc:  # reported by run
                failures.append(exc)
        return threading.Thread(target=target)

    def idempotent() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 2, "log_level": 3})

        def delivered(err, msg) -> None:
            if err is None:
                with lock:
                    acks.produced.append((now(), msg.partition(), msg.value()))

        for i in range(300 * scale):
            value = b"plain-%06d-" % i + b"x" * 80
            acks.sent_plain.add(value)
            producer.produce(PLAIN, value=value, partition=i % 2, on_delivery=delivered)
            if i % 10 == 9:
                producer.flush(30)
        assert producer.flush(60) == 0

    def transactional() -> None:
        producer = transactional_producer(bootstrap, TRANSACTIONAL_ID)
        for i in range(24 * scale):
            txn = Transaction([(j % 2, b"txn-%04d-%d" % (i, j)) for j in range(4)], commit=i % 3 != 2)
            acks.transactions.append(txn)
            producer.begin_transaction()
            for partition, value in txn.values:
                producer.produce(TXN, value=value, partition=partition)
            if txn.commit:
                producer.commit_transaction(30)
            else:
                producer.flush(30)
                producer.abort_transaction(30)
            txn.ended_ns = now()

    def group() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "log_level": 3})
        consumer.subscribe([PLAIN])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 200 * scale and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            seen += 1
            if seen % 25 == 0:
                committed = consumer.commit(asynchronous=False)
                acks.commits.append((now(), {tp.partition: tp.offset for tp in committed if tp.offset >= 0}))
        consumer.close()

    def raw() -> None:
        with WireClient(bootstrap) as client:
            producer_id = client.call(request(22, 4, transactional_id=None, transaction_timeout=60000,
                                              producer_id=-1, producer_epoch=-1)).producer_id
            for sequence in range(60 * scale):
                batch = build_batch([encode_record(None, b"raw-%04d" % sequence)], timestamp=int(time.time() * 1000),
                                    producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
                answer = _produce(client, batch)
                assert answer.error_code == ErrorCode.none, answer
                acks.raw.append((now(), batch, answer.base_offset))
                time.sleep(0.01)

    threads = [guarded(body) for body in (idempotent, transactional, group, raw)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return acks


def _produce(client: WireClient, batch: bytes):
    response = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": RAW, "partition_data": [{"index": 0, "records": batch}]}]))
    return response.responses[0].partition_responses[0]


# --- checking a crash state --------------------------------------------------------------------


@dataclass
class Findings:
    violations: list[str] = field(default_factory=list)
    # Acknowledged records not found (the default mode's unflushed tail).
    lost: int = 0


def check(data_dir: str, acks: Acks, crash_ns: int, properties: dict[str, str], *,
          require_acknowledged: bool = True) -> Findings:
    """Start Ottla on the crash state in `data_dir` and check it against what the clients
    had been told by `crash_ns`. With `require_acknowledged` (--fsync) every such
    acknowledgement must hold; without, what is missing is counted as lost, and only
    what no crash may do (duplicates, records out of order or never sent, a partly
    visible transaction, an aborted one visible) is a violation."""
    found = Findings()
    broker = BrokerProcess(data_dir, properties, log_path=data_dir + ".broker.log")
    try:
        try:
            broker.start(timeout=120)
        except RuntimeError as exc:
            found.violations.append(f"Ottla did not start on the crash state: {str(exc)[-2000:]}")
            return found
        if not _recovered(broker):
            found.violations.append("the recovered logs were not flushed within 60 s of the start")
            return found
        _check_raw_duplicate(broker.bootstrap, acks, crash_ns, found, require_acknowledged)
        _fence(broker.bootstrap)
        _check_plain(broker.bootstrap, acks, crash_ns, found, require_acknowledged)
        _check_raw(broker.bootstrap, acks, crash_ns, found, require_acknowledged)
        _check_transactions(broker.bootstrap, acks, crash_ns, found, require_acknowledged)
        _check_offsets(broker.bootstrap, acks, crash_ns, found, require_acknowledged)
    finally:
        broker.kill()
    return found


def _recovered(broker: BrokerProcess) -> bool:
    """Wait for the flush that follows recovery: with --fsync what recovery kept is
    readable once fsynced again (PartitionLog.high_watermark)."""
    deadline = time.monotonic() + 60
    while "clean_start=True" not in broker.log() and "recovered logs flushed" not in broker.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _lost(found: Findings, require: bool, what: str, count: int = 1) -> None:
    if require:
        found.violations.append(what)
    found.lost += count


def _check_raw_duplicate(bootstrap: str, acks: Acks, crash_ns: int, found: Findings, require: bool) -> None:
    """The last acknowledged raw batch, sent again, must not be appended again (the
    reads after this find it once): the producer state survived the crash. Without
    --fsync the batch may be lost, and then sent again it is new: only a second copy
    (which the reads find) is wrong."""
    acked = [entry for entry in acks.raw if entry[0] <= crash_ns]
    if not acked:
        return
    _, batch, offset = acked[-1]
    with WireClient(bootstrap) as client:
        answer = _produce(client, batch)
    if require and answer.error_code == ErrorCode.none and answer.base_offset != offset:
        found.violations.append(f"a duplicate of the acknowledged raw batch at {offset} was appended again at "
                                f"{answer.base_offset}")


def _fence(bootstrap: str) -> None:
    """What the application does when it comes back: a new producer with its
    transactional id, which aborts any transaction the crash left open."""
    producer = transactional_producer(bootstrap, TRANSACTIONAL_ID)
    producer.flush(5)


def _check_plain(bootstrap: str, acks: Acks, crash_ns: int, found: Findings, require: bool) -> None:
    got = read_all(bootstrap, PLAIN, [0, 1], isolation="read_uncommitted", settle=0.5)
    for partition, values in got.items():
        _check_sequence(found, f"{PLAIN}-{partition}", values, acks.sent_plain)
        present = set(values)
        missing = [v for t, p, v in acks.produced if t <= crash_ns and p == partition and v not in present]
        if missing:
            _lost(found, require, f"{len(missing)} acknowledged records of {PLAIN}-{partition} lost, "
                  f"first {missing[0][:12]!r}", len(missing))


def _check_sequence(found: Findings, where: str, values: list[bytes], sent: set[bytes]) -> None:
    """Each record once, in the order produced, and nothing never sent."""
    strange = [v for v in values if v not in sent]
    if strange:
        found.violations.append(f"{where}: {len(strange)} records never sent, first {strange[0][:40]!r}")
    if len(set(values)) != len(values):
        found.violations.append(f"{where}: duplicates")
    if values != sorted(values):
        found.violations.append(f"{where}: out of order")


def _check_raw(bootstrap: str, acks: Acks, crash_ns: int, found: Findings, require: bool) -> None:
    values = read_all(bootstrap, RAW, [0], isolation="read_uncommitted", settle=0.5)[0]
    sent = {b"raw-%04d" % i for i in range(len(acks.raw))}  # (the workload ends with all acknowledged)
    _check_sequence(found, RAW, values, sent)
    acked = sum(1 for t, _, _ in acks.raw if t <= crash_ns)
    kept = sum(1 for v in values if int(v[4:]) < acked)
    if kept < acked:
        _lost(found, require, f"{acked - kept} acknowledged raw batches lost", acked - kept)


def _check_transactions(bootstrap: str, acks: Acks, crash_ns: int, found: Findings, require: bool) -> None:
    got = read_all(bootstrap, TXN, [0, 1], isolation="read_committed", settle=1.0)
    visible = {(p, v) for p, values in got.items() for v in values}
    sent = {v for txn in acks.transactions for _, v in txn.values}
    for partition, values in got.items():
        _check_sequence(found, f"{TXN}-{partition}", values, sent)
    for txn in acks.transactions:
        shown = [pv for pv in txn.values if pv in visible]
        name = txn.values[0][1][:8].decode()
        if not txn.commit and shown:
            found.violations.append(f"aborted transaction {name} visible to read_committed")
        elif shown and len(shown) != len(txn.values):
            # Without --fsync a marker may be in the unflushed tail of one partition and
            # not of another (as on a Kafka node without replicas): counted as lost there.
            _lost(found, require, f"transaction {name} partly visible: {len(shown)} of {len(txn.values)}",
                  len(txn.values) - len(shown))
        elif txn.commit and not shown and txn.ended_ns is not None and txn.ended_ns <= crash_ns:
            _lost(found, require, f"acknowledged committed transaction {name} not visible", len(txn.values))


def _check_offsets(bootstrap: str, acks: Acks, crash_ns: int, found: Findings, require: bool) -> None:
    acked = [offsets for t, offsets in acks.commits if t <= crash_ns]
    if not acked:
        return
    expected: dict[int, int] = {}
    for offsets in acked:
        expected.update(offsets)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "log_level": 3})
    try:
        committed = consumer.committed([TopicPartition(PLAIN, p) for p in expected], timeout=30)
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in committed}
    finally:
        consumer.close()
    for tp in committed:
        if tp.offset < expected[tp.partition]:
            _lost(found, require, f"committed offset of {PLAIN}-{tp.partition} went back from "
                  f"{expected[tp.partition]} to {tp.offset}")
        if require and tp.offset > ends[tp.partition]:
            # The group read records the crash took (they were readable before they
            # were durable): it would skip the records written at those offsets next.
            found.violations.append(f"committed offset {tp.offset} of {PLAIN}-{tp.partition} is past the "
                                    f"log end {ends[tp.partition]}")


def data_dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
