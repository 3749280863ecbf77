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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

from ottla.protocol import apis
from ottla.protocol.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.control import ControlType, parse_marker
from ottla.protocol.errors import ErrorCode
from ottla.storage.index import read_offset_index_file, read_time_index_file
from ottla.testing import BrokerProcess
from ottla.tools.admin_cli import _committed_offsets as committed_offsets
from ottla.tools.client import ClientError, Cluster
from ottla.tools.client import check as check_code
from ottla.tools.console import _fetch as fetch_records
from tests.clients import create_topic, transactional_producer
from tests.wire import WireClient, request

from .forked import ForkedBroker

PLAIN, TXN, RAW = "plain", "txn", "raw"
EARLIEST, LATEST = -2, -1  # ListOffsets' timestamps
GROUP = "crash-group"
TRANSACTIONAL_ID = "crash-txn"
# Small segments, so that the workload rolls them (new files, new directory entries).
TOPIC_CONFIG = {"segment.bytes": "8192"}
BROKER_PROPERTIES = {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
    # The periodic checkpoint (a flush, recovery points, snapshots) a few times within the
    # workload (about 1.5 s): without --fsync, what it flushed no crash may take.
    "log.flush.offset.checkpoint.interval.ms": "500",
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
    # Without --fsync: aborted transactions shown whose ABORT marker the crash took (see
    # _check_transactions).
    aborted_shown: int = 0


def check(data_dir: str, acks: Acks, crash_ns: int, properties: dict[str, str], *,
          require_acknowledged: bool = True, flushed: dict[str, set[bytes]] | None = None) -> Findings:
    """Start Ottla on the crash state in `data_dir` and check it against what the clients
    had been told by `crash_ns`. With `require_acknowledged` (--fsync) every such
    acknowledgement must hold; without, what is missing is counted as lost, and only
    what no crash may do (duplicates, records out of order or never sent, a partly
    visible transaction, an aborted one visible, an index entry off its log, an
    acknowledged record lost that was in `flushed`, the values each partition's logs
    held durably at the crash: see flushed_values) is a violation.

    The checks speak the protocol over one client (the tools' Cluster, whose
    read_committed reader skips aborted transactions as the Java consumer does) and read
    each partition to its end as ListOffsets gives it (the high watermark, or the last
    stable offset), waiting for nothing: a crash state costs the broker's start and a
    few dozen requests, which is what lets `make soak` try thousands. The broker is
    forked from a process that has imported it (forked.py)."""
    found = Findings()
    broker = ForkedBroker(data_dir, properties, log_path=data_dir + ".broker.log")
    try:
        try:
            broker.start(timeout=120)
        except RuntimeError as exc:
            found.violations.append(f"Ottla did not start on the crash state: {str(exc)[-2000:]}")
            return found
        if not _recovered(broker):
            found.violations.append("the recovered logs were not flushed within 60 s of the start")
            return found
        try:
            with Cluster(broker.bootstrap, client_id="crash-check") as cluster:
                _check_raw_duplicate(broker.bootstrap, acks, crash_ns, found, require_acknowledged)
                _fence(cluster, found)
                _check_plain(cluster, acks, crash_ns, found, require_acknowledged, flushed or {})
                _check_raw(cluster, acks, crash_ns, found, require_acknowledged, flushed or {})
                _check_transactions(cluster, acks, crash_ns, found, require_acknowledged, flushed or {})
                _check_offsets(cluster, acks, crash_ns, found, require_acknowledged)
        except (ClientError, OSError) as exc:
            found.violations.append(f"a check's request failed: {exc}")
    finally:
        broker.kill()
    _check_indexes(data_dir, found)
    return found


def _recovered(broker: BrokerProcess) -> bool:
    """Wait for the flush that follows recovery: with --fsync what recovery kept is
    readable once fsynced again (PartitionLog.high_watermark)."""
    deadline = time.monotonic() + 60
    while "clean_start=True" not in broker.log() and "recovered logs flushed" not in broker.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
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


# What InitProducerId answers while the coordinator loads or completes a transaction the
# crash left open: a producer retries them.
_RETRIABLE = (ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions, ErrorCode.not_coordinator)


def _fence(cluster: Cluster, found: Findings) -> None:
    """What the application does when it comes back: a new producer with its
    transactional id (InitProducerId, as init_transactions sends it), which completes
    any transaction the crash left prepared and aborts one it left open; answered only
    once that transaction's markers are written, so the reads after it see its end."""
    coordinator = cluster.coordinator(TRANSACTIONAL_ID, 1)
    deadline = time.monotonic() + 30
    while True:
        answer = coordinator.call(apis.INIT_PRODUCER_ID, transactional_id=TRANSACTIONAL_ID,
                                  transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
        if answer.error_code not in _RETRIABLE:
            break
        if time.monotonic() > deadline:
            found.violations.append(f"InitProducerId for {TRANSACTIONAL_ID} still answered "
                                    f"{ErrorCode(answer.error_code).name} after 30 s")
            return
        time.sleep(0.01)
    check_code(answer.error_code, f"InitProducerId for {TRANSACTIONAL_ID}")


def _read(cluster: Cluster, topic: str, partitions: list[int], read_committed: bool) -> dict[int, list[bytes]]:
    """Every value readable in `partitions`, from the log start to the end a reader of
    that isolation level stops at (the high watermark, or the last stable offset)."""
    starts = cluster.list_offsets(topic, partitions, EARLIEST)
    ends = cluster.list_offsets(topic, partitions, LATEST, read_committed)
    got: dict[int, list[bytes]] = {}
    for partition in partitions:
        positions = {partition: starts[partition]}
        values = got.setdefault(partition, [])
        while positions[partition] < ends[partition]:
            before = positions[partition]
            values += [bytes(record.value or b"") for record in
                       fetch_records(cluster, topic, partition, positions, read_committed)
                       if record.offset < ends[partition]]
            if positions[partition] == before:
                raise ClientError(f"Fetch of {topic}-{partition} at {before} returned nothing before the end "
                                  f"{ends[partition]}")
    return got


def flushed_values(durable: Iterable[tuple[str, bytes]]) -> dict[str, set[bytes]]:
    """What each partition's logs (by directory name) hold in the crash state that keeps
    only what was durable (`durable`: its files, State.contents): what had been flushed
    before the crash, which no crash may take, in either mode. For the plain and raw
    partitions their values; for the transactional ones the values of the transactions
    whose ABORT marker is there."""
    values: dict[str, set[bytes]] = {}
    for path, data in durable:
        directory, _, name = path.rpartition("/")
        topic = directory.rpartition("-")[0]
        if not name.endswith(".log") or topic not in (PLAIN, RAW, TXN):
            continue
        got = values.setdefault(directory, set())
        open_txns: dict[int, list[bytes]] = {}  # producer id -> values since its last marker
        for position, size in _batches(data):
            batch = data[position:position + size]
            header = BatchHeader.parse(batch)
            if header.is_control:
                ended = open_txns.pop(header.producer_id, [])
                if topic == TXN and parse_marker(batch).type is ControlType.ABORT:
                    got.update(ended)
                continue
            batch_values = [bytes(record.value or b"") for record in iter_records(batch)]
            if topic == TXN:
                open_txns.setdefault(header.producer_id, []).extend(batch_values)
            else:
                got.update(batch_values)
    return values


def _lost_flushed(found: Findings, where: str, missing: list[bytes], flushed: dict[str, set[bytes]]) -> None:
    """Acknowledged records lost that were flushed before the crash: beyond the unflushed
    tail, a violation in either mode."""
    durable = [v for v in missing if v in flushed.get(where, ())]
    if durable:
        found.violations.append(f"{len(durable)} acknowledged records of {where} lost that had been flushed "
                                f"before the crash, first {durable[0][:12]!r}")


def _check_plain(cluster: Cluster, acks: Acks, crash_ns: int, found: Findings, require: bool,
                 flushed: dict[str, set[bytes]]) -> None:
    got = _read(cluster, PLAIN, [0, 1], read_committed=False)
    for partition, values in got.items():
        _check_sequence(found, f"{PLAIN}-{partition}", values, acks.sent_plain)
        present = set(values)
        missing = [v for t, p, v in acks.produced if t <= crash_ns and p == partition and v not in present]
        if missing:
            _lost(found, require, f"{len(missing)} acknowledged records of {PLAIN}-{partition} lost, "
                  f"first {missing[0][:12]!r}", len(missing))
            _lost_flushed(found, f"{PLAIN}-{partition}", missing, flushed)


def _check_sequence(found: Findings, where: str, values: list[bytes], sent: set[bytes]) -> None:
    """Each record once, in the order produced, and nothing never sent."""
    strange = [v for v in values if v not in sent]
    if strange:
        found.violations.append(f"{where}: {len(strange)} records never sent, first {strange[0][:40]!r}")
    if len(set(values)) != len(values):
        found.violations.append(f"{where}: duplicates")
    if values != sorted(values):
        found.violations.append(f"{where}: out of order")


def _check_raw(cluster: Cluster, acks: Acks, crash_ns: int, found: Findings, require: bool,
               flushed: dict[str, set[bytes]]) -> None:
    values = _read(cluster, RAW, [0], read_committed=False)[0]
    sent = {b"raw-%04d" % i for i in range(len(acks.raw))}  # (the workload ends with all acknowledged)
    _check_sequence(found, RAW, values, sent)
    acked = sum(1 for t, _, _ in acks.raw if t <= crash_ns)
    missing = sorted({b"raw-%04d" % i for i in range(acked)} - set(values))
    if missing:
        _lost(found, require, f"{len(missing)} acknowledged raw batches lost", len(missing))
        _lost_flushed(found, f"{RAW}-0", missing, flushed)


def _check_transactions(cluster: Cluster, acks: Acks, crash_ns: int, found: Findings, require: bool,
                        flushed: dict[str, set[bytes]]) -> None:
    got = _read(cluster, TXN, [0, 1], read_committed=True)
    visible = {(p, v) for p, values in got.items() for v in values}
    sent = {v for txn in acks.transactions for _, v in txn.values}
    for partition, values in got.items():
        _check_sequence(found, f"{TXN}-{partition}", values, sent)
    for txn in acks.transactions:
        shown = [pv for pv in txn.values if pv in visible]
        name = txn.values[0][1][:8].decode()
        if not txn.commit and shown:
            if require or any(value in flushed.get(f"{TXN}-{p}", ()) for p, value in shown):
                found.violations.append(f"aborted transaction {name} visible to read_committed")
            else:
                # Without --fsync a partition may lose a transaction's ABORT marker (the
                # unflushed tail) and keep its records, while __transaction_state keeps
                # the PrepareCommit of the producer's transaction before: the
                # coordinator completes that commit at load and its COMMIT marker, which
                # names no transaction, only the producer and epoch, closes the records
                # left open. Kafka without fsync on one node does the same (transaction
                # version 1: no epoch bump per transaction to fence the late marker).
                found.aborted_shown += 1
        elif shown and len(shown) != len(txn.values):
            # Without --fsync a marker may be in the unflushed tail of one partition and
            # not of another (as on a Kafka node without replicas): counted as lost there.
            _lost(found, require, f"transaction {name} partly visible: {len(shown)} of {len(txn.values)}",
                  len(txn.values) - len(shown))
        elif txn.commit and not shown and txn.ended_ns is not None and txn.ended_ns <= crash_ns:
            _lost(found, require, f"acknowledged committed transaction {name} not visible", len(txn.values))


def _check_offsets(cluster: Cluster, acks: Acks, crash_ns: int, found: Findings, require: bool) -> None:
    acked = [offsets for t, offsets in acks.commits if t <= crash_ns]
    if not acked:
        return
    expected: dict[int, int] = {}
    for offsets in acked:
        expected.update(offsets)
    committed = committed_offsets(cluster.coordinator(GROUP, 0), GROUP)
    ends = cluster.list_offsets(PLAIN, sorted(expected), LATEST)
    for partition, offset in expected.items():
        kept = committed.get((PLAIN, partition), -1)
        if kept < offset:
            _lost(found, require, f"committed offset of {PLAIN}-{partition} went back from {offset} to {kept}")
        if require and kept > ends[partition]:
            # The group read records the crash took (they were readable before they
            # were durable): it would skip the records written at those offsets next.
            found.violations.append(f"committed offset {kept} of {PLAIN}-{partition} is past the "
                                    f"log end {ends[partition]}")


def _check_indexes(data_dir: str, found: Findings) -> None:
    """What the broker left its indexes after recovering the crash state and serving the
    checks: every `.index` entry at a batch of its segment's log, that batch's last
    offset (Kafka's rule, kafka-dump-log --verify-index-only), and every `.timeindex`
    entry within its log's offsets: no index points past the log."""
    for directory in os.scandir(data_dir):
        if not directory.is_dir():
            continue
        for entry in os.scandir(directory.path):
            if not entry.name.endswith(".log"):
                continue
            base = int(entry.name[:-4])
            with open(entry.path, "rb") as f:
                data = f.read()
            batches = {position: BatchHeader.parse(data, position).last_offset for position, _ in _batches(data)}
            log_end = max(batches.values(), default=base - 1)
            stem = entry.path[:-4]
            where = f"{directory.name}/{entry.name[:-4]}"
            if os.path.exists(stem + ".index"):
                for offset, position in read_offset_index_file(stem + ".index", base):
                    if batches.get(position) != offset:
                        found.violations.append(f"{where}.index: entry ({offset}, position {position}) is not at "
                                                f"a batch ending at that offset in the log")
                        break
            if os.path.exists(stem + ".timeindex"):
                for timestamp, offset in read_time_index_file(stem + ".timeindex", base):
                    if not base <= offset <= log_end:
                        found.violations.append(f"{where}.timeindex: entry ({timestamp}, {offset}) is past the "
                                                f"log's last offset {log_end}")
                        break


def _batches(data: bytes) -> Iterator[tuple[int, int]]:
    """(position, size) of every whole batch of a segment file's bytes."""
    position = 0
    while position + HEADER_SIZE <= len(data):
        header = BatchHeader.parse(data, position)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > len(data):
            return
        yield position, header.size
        position += header.size


def data_dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
