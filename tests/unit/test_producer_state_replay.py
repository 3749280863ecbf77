"""Producer state after a crash, replayed from the batch headers recovery has just read,
is exactly what walking the log again after the snapshot gives (the obvious way, which
start-up still takes when recovery did not read back to the snapshot): last sequences,
epochs, open transactions and their first offsets, and the aborted transactions."""

from __future__ import annotations

import os

import pytest

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record
from ottla.protocol.control import ControlType, EndTxnMarker
from ottla.storage import compaction, log_recovery
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig
from ottla.storage.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager

NOW = 10_000_000
CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=200, segment_ms=10**12)
COMPACTED = LogConfig(cleanup_policy=("compact",), segment_bytes=700, index_interval_bytes=200,
                      min_cleanable_dirty_ratio=0.0, delete_retention_ms=1000, segment_ms=10**12)
IDEMPOTENT, TXN_A, TXN_B = 1, 2, 3


def _append(log: PartitionLog, key: int, producer_id: int = -1, epoch: int = -1, sequence: int = -1,
            transactional: bool = False, count: int = 1) -> None:
    records = [encode_record(b"k%d" % ((key + i) % 7), b"v%d" % (key + i), offset_delta=i) for i in range(count)]
    data = build_batch(records, timestamp=NOW - 5000 + key, producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=sequence, attributes=TRANSACTIONAL_FLAG if transactional else 0)
    log.append_batch(data, BatchHeader.parse(data))


def write_history(log: PartitionLog) -> None:
    """Idempotent batches across an epoch bump, plain batches, two transactional
    producers with committed, aborted and (at the end) open transactions, spread over
    many segments."""
    sequences = {IDEMPOTENT: 0, TXN_A: 0, TXN_B: 0}

    def produce(producer_id: int, epoch: int = 0, count: int = 1, transactional: bool = False) -> None:
        _append(log, log.log_end_offset, producer_id, epoch, sequences[producer_id], transactional, count)
        sequences[producer_id] += count

    for round_ in range(6):
        produce(IDEMPOTENT, count=2)
        _append(log, log.log_end_offset)  # no producer id
        produce(TXN_A, transactional=True)
        produce(TXN_B, transactional=True, count=3)
        produce(TXN_A, transactional=True)
        log.append_marker(TXN_A, 0, EndTxnMarker(ControlType.COMMIT if round_ % 2 else ControlType.ABORT, 5))
        if round_ % 3 == 1:
            log.append_marker(TXN_B, 0, EndTxnMarker(ControlType.ABORT, 5))
    sequences[IDEMPOTENT] = 0
    for _ in range(3):
        produce(IDEMPOTENT, epoch=1)  # a new epoch starts again at sequence 0
    produce(TXN_A, transactional=True)  # left open, as is TXN_B's
    produce(IDEMPOTENT, epoch=1)


def crash(log: PartitionLog) -> None:
    """What a kill -9 leaves: files as written, no snapshot at the log end."""
    log.close_files()


def reopen(log: PartitionLog, config: LogConfig, recovery_point: int, log_start_offset: int = 0) -> PartitionLog:
    return PartitionLog.open(log.directory, "p", 0, config, clean=False, recovery_point=recovery_point,
                             log_start_offset=log_start_offset)


def walked(log: PartitionLog) -> ProducerStateManager:
    """The producer state the obvious way: the newest snapshot, then a walk of the log."""
    recovered = log.producer_state
    log.producer_state = ProducerStateManager(log.directory)
    try:
        log._rebuild_producer_state()
        return log.producer_state
    finally:
        log.producer_state = recovered


def delete_snapshots(directory: str) -> None:
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX):
            os.unlink(os.path.join(directory, name))


def _fail_if_walked(monkeypatch) -> None:
    def walk(self, start):  # type: ignore[no-untyped-def]
        raise AssertionError("the log was walked again")

    monkeypatch.setattr(PartitionLog, "_batches_after", walk)


def assert_same_state(log: PartitionLog, expected: ProducerStateManager) -> None:
    state = log.producer_state
    assert state.producers == expected.producers
    assert state.ongoing_txns == expected.ongoing_txns
    assert log.last_stable_offset == min(expected.ongoing_txns.values(), default=log.log_end_offset)


CASES = ["no snapshot", "snapshot past the recovery point", "torn tail", "damaged segment in the middle",
         "log start moved"]


@pytest.mark.parametrize("case", CASES)
def test_replay_from_recovery_gives_the_state_a_walk_gives(tmp_path, monkeypatch, case):
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, CONFIG)
    write_history(log)
    live = log.producer_state
    aborted = log.aborted_between(0, log.log_end_offset)
    end = log.log_end_offset
    assert len(log.segments) > 5 and live.ongoing_txns.keys() == {TXN_A, TXN_B} and len(aborted) >= 4
    crash(log)
    recovery_point, log_start = 0, 0
    if case != "snapshot past the recovery point":
        delete_snapshots(log.directory)
    else:
        # Rolls wrote snapshots; the recovery point lies before the newest one.
        recovery_point = log.segments[-3].base_offset
    if case == "torn tail":
        with open(log.segments[-1].log_path, "ab") as f:
            f.write(b"\x00" * 30)
    if case == "damaged segment in the middle":
        middle = log.segments[len(log.segments) // 2]
        with open(middle.log_path, "r+b") as f:
            f.seek(middle.size - 10)
            f.write(b"\xff" * 4)
    if case == "log start moved":
        log_start = log.segments[2].base_offset + 1
    _fail_if_walked(monkeypatch)
    recovered = reopen(log, CONFIG, recovery_point, log_start)
    monkeypatch.undo()
    assert recovered.log_end_offset <= end
    if case == "damaged segment in the middle":
        # Its last batch goes, and every later segment.
        assert middle.base_offset < recovered.log_end_offset < log.segments[len(log.segments) // 2 + 1].base_offset
    assert_same_state(recovered, walked(recovered))
    if case in ("no snapshot", "torn tail"):
        # Every batch was replayed: the state is the one the broker had before the crash.
        assert recovered.log_end_offset == end
        assert_same_state(recovered, live)
    assert recovered.aborted_between(0, recovered.log_end_offset) == [
        a for a in aborted if a.last_offset < recovered.log_end_offset]


def test_a_compacted_log_replays_the_same(tmp_path, monkeypatch):
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, COMPACTED)
    write_history(log)
    log.append_marker(TXN_A, 0, EndTxnMarker(ControlType.COMMIT, 5))
    log.append_marker(TXN_B, 0, EndTxnMarker(ControlType.COMMIT, 5))
    _append(log, log.log_end_offset, IDEMPOTENT, 1, 4)
    log.roll()
    plan = compaction.plan(log, 0, NOW)
    assert plan is not None and compaction.swap(log, plan, compaction.clean(plan))
    crash(log)
    delete_snapshots(log.directory)
    _fail_if_walked(monkeypatch)
    recovered = reopen(log, COMPACTED, 0)
    monkeypatch.undo()
    assert recovered.producer_state.producers[IDEMPOTENT].last_seq == 4
    assert_same_state(recovered, walked(recovered))


@pytest.mark.parametrize("case", ["snapshot before the recovery point", "more batches than recovery keeps"])
def test_when_recovery_did_not_read_all_to_replay_the_log_is_walked(tmp_path, monkeypatch, case):
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, CONFIG)
    write_history(log)
    live = log.producer_state
    crash(log)
    recovery_point = 0
    if case == "snapshot before the recovery point":
        snapshots = sorted(n for n in os.listdir(log.directory) if n.endswith(SNAPSHOT_SUFFIX))
        for name in snapshots[1:]:
            os.unlink(os.path.join(log.directory, name))
        recovery_point = log.segments[-1].base_offset
        assert int(snapshots[0][: -len(SNAPSHOT_SUFFIX)]) < recovery_point
    else:
        delete_snapshots(log.directory)
        monkeypatch.setattr(log_recovery, "REPLAY_HEADERS_KEPT", 10)
    walks = []
    original = PartitionLog._batches_after
    monkeypatch.setattr(PartitionLog, "_batches_after",
                        lambda self, start: walks.append(start) or original(self, start))
    recovered = reopen(log, CONFIG, recovery_point)
    assert walks
    monkeypatch.undo()
    assert_same_state(recovered, walked(recovered))
    if case == "more batches than recovery keeps":
        assert_same_state(recovered, live)
