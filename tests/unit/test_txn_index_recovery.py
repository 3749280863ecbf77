"""The .txnindex after a crash: what recovery checks, it makes agree with the log, as
Kafka does by rebuilding the index of recovered segments.

An ABORT marker's entry is written right after the marker; a kill -9 in between leaves
the marker without it (read_committed readers would get the aborted records), and a
torn tail can take a marker whose entry was written (its entry would hide whatever is
written at those offsets next)."""

from __future__ import annotations

import os

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record
from ottla.protocol.control import ControlType, EndTxnMarker
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig
from ottla.storage.txn_index import AbortedTxn, read_txn_index_file

CONFIG = LogConfig(index_interval_bytes=100, segment_ms=2**62)  # one segment: markers carry the time now
PRODUCER, EPOCH = 7, 0


def _transactional(log: PartitionLog, sequence: int, count: int = 3) -> None:
    records = [encode_record(None, b"v%d" % (sequence + i), offset_delta=i) for i in range(count)]
    data = build_batch(records, timestamp=1_000, producer_id=PRODUCER, producer_epoch=EPOCH, base_sequence=sequence,
                       attributes=TRANSACTIONAL_FLAG)
    log.append_batch(data, BatchHeader.parse(data))


def _aborted_read(log: PartitionLog) -> list[AbortedTxn]:
    got = log.read(0, 1 << 20, read_committed=True, min_one=True)
    assert got.aborted is not None
    return got.aborted


def _crashed_history(tmp_path) -> tuple[str, str, list[AbortedTxn]]:
    """Committed, aborted, committed and aborted transactions, as a kill -9 leaves the
    files: (partition directory, .txnindex path, the entries as the appends wrote them)."""
    log = PartitionLog.create(str(tmp_path / "t-0"), "t", 0, CONFIG)
    sequence = 0
    for outcome in (ControlType.COMMIT, ControlType.ABORT, ControlType.COMMIT, ControlType.ABORT):
        _transactional(log, sequence)
        sequence += 3
        log.append_marker(PRODUCER, EPOCH, EndTxnMarker(outcome, 0))
    written = list(log.active.txn_index.entries)
    assert [(e.first_offset, e.last_offset) for e in written] == [(4, 7), (12, 15)]
    directory, path = log.directory, log.active.txn_index.path
    log.close_files()  # no snapshot, nothing sealed: a kill -9
    return directory, path, written


def test_a_marker_whose_entry_a_crash_lost_gets_it_back(tmp_path):
    directory, path, written = _crashed_history(tmp_path)
    for damage in ("last entry lost", "last entry torn"):
        with open(path, "r+b") as f:
            f.truncate(34 if damage == "last entry lost" else 34 + 20)
        reopened = PartitionLog.open(directory, "t", 0, CONFIG, clean=False, recovery_point=8, log_start_offset=0)
        assert _aborted_read(reopened) == written, damage
        assert read_txn_index_file(path) == written, damage
        reopened.close_files()


def test_entries_before_the_recovery_point_are_trusted_as_written(tmp_path):
    # What was flushed is not checked: recovery from the log end finds nothing to add.
    directory, path, written = _crashed_history(tmp_path)
    with open(path, "r+b") as f:
        f.truncate(34)
    reopened = PartitionLog.open(directory, "t", 0, CONFIG, clean=False, recovery_point=16, log_start_offset=0)
    assert _aborted_read(reopened) == written[:1]


def test_an_entry_for_a_marker_a_torn_tail_took_is_dropped(tmp_path):
    directory, path, written = _crashed_history(tmp_path)
    log_path = os.path.join(directory, f"{0:020d}.log")
    reopened = PartitionLog.open(directory, "t", 0, CONFIG, clean=True, recovery_point=16, log_start_offset=0)
    marker_position = [p for p, h in reopened.active.walk() if h.base_offset == 15][0]
    reopened.close_files()
    os.truncate(log_path, marker_position + 30)  # the last ABORT marker torn
    reopened = PartitionLog.open(directory, "t", 0, CONFIG, clean=False, recovery_point=8, log_start_offset=0)
    assert reopened.log_end_offset == 15
    assert _aborted_read(reopened) == written[:1]
    # The producer's transaction is open again; it goes on and commits at the offsets the
    # torn marker had: nothing of it reads as aborted.
    _transactional(reopened, 12)
    reopened.append_marker(PRODUCER, EPOCH, EndTxnMarker(ControlType.COMMIT, 0))
    assert _aborted_read(reopened) == written[:1]
    assert read_txn_index_file(path) == written[:1]


def test_a_lost_entry_comes_back_under_a_snapshot_newer_than_the_recovery_point(tmp_path):
    """A power loss in the middle of a flush: the log fsynced with its ABORT markers, the
    .txnindex not yet, and a producer-state snapshot past the markers (a roll's, synced
    when it was written) on disk. Replaying only from that snapshot would never meet the
    markers: recovery replays from a snapshot at or before the recovery point instead
    (found by the crash-consistency harness: aborted transactions visible to
    read_committed in 4 of 200 default-mode states)."""
    directory, path, written = _crashed_history(tmp_path)
    log = PartitionLog.open(directory, "t", 0, CONFIG, clean=True, recovery_point=16, log_start_offset=0)
    log.producer_state.write_snapshot(log.log_end_offset)
    log.close_files()
    with open(path, "r+b") as f:
        f.truncate(0)
    reopened = PartitionLog.open(directory, "t", 0, CONFIG, clean=False, recovery_point=0, log_start_offset=0)
    assert _aborted_read(reopened) == written
    assert read_txn_index_file(path) == written
