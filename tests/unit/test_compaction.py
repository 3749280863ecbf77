"""Compaction of one partition, without a broker: the plan, the cleaning, the swap, and
the files a crash can leave behind."""

from __future__ import annotations

import os

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.control import ControlType, EndTxnMarker
from ottla.storage import compaction
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig

NOW = 10_000_000
CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=600, min_cleanable_dirty_ratio=0.0,
                   delete_retention_ms=1000, segment_ms=10**12)


def append(log: PartitionLog, key: bytes, value: bytes | None, timestamp: int = NOW - 5000, **batch) -> None:
    data = build_batch([encode_record(key, value)], timestamp=timestamp, **batch)
    log.append_batch(data, BatchHeader.parse(data))


def contents(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for h, b in log.batches() if not h.is_control for r in iter_records(b)]


def compact(log: PartitionLog, now: int = NOW) -> None:
    plan = compaction.plan(log, 0, now)
    assert plan is not None
    assert compaction.swap(log, plan, compaction.clean(plan))


def test_compaction_keeps_the_latest_value_of_each_key_and_offsets_never_change(tmp_path):
    log = PartitionLog.create(str(tmp_path / "c-0"), "c", 0, CONFIG)
    for round_ in range(5):
        for key in (b"a", b"b", b"c"):
            append(log, key, b"%s%d" % (key, round_))
    append(log, b"z", b"last")
    before = contents(log)
    end = log.active.base_offset  # the active segment is never touched

    compact(log)

    after = contents(log)
    latest = {}
    for offset, key, value in before:
        if offset < end:
            latest[key] = (offset, key, value)
    assert after == sorted(latest.values()) + [r for r in before if r[0] >= end]
    assert len(after) < len(before)
    assert log.log_end_offset == 16
    # Reads through the rebuilt indexes still find every kept offset.
    for offset, _key, value in after:
        got = log.read(offset, 1000, read_committed=False, min_one=True)
        assert any(r.offset == offset and r.value == value for r in iter_records(got.records))


def test_tombstones_stay_until_delete_retention_then_go(tmp_path):
    log = PartitionLog.create(str(tmp_path / "c-0"), "c", 0, CONFIG)
    append(log, b"gone", b"v1")
    append(log, b"kept", b"v1")
    append(log, b"gone", None, timestamp=NOW - 100)  # a fresh tombstone
    for _ in range(8):
        append(log, b"filler", b"x" * 100)
    compact(log)
    assert (2, b"gone", None) in contents(log)

    compact(log, now=NOW + 5000)  # past delete.retention.ms
    assert all(key != b"gone" for _, key, _ in contents(log))
    assert (1, b"kept", b"v1") in contents(log)


def test_records_of_aborted_transactions_are_dropped_and_markers_kept(tmp_path):
    log = PartitionLog.create(str(tmp_path / "c-0"), "c", 0, CONFIG)
    append(log, b"k", b"committed")
    append(log, b"k", b"aborted", producer_id=7, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL_FLAG)
    log.append_marker(7, 0, EndTxnMarker(ControlType.ABORT, 0))
    for _ in range(8):
        append(log, b"filler", b"x" * 100)
    compact(log)
    assert (0, b"k", b"committed") in contents(log)
    assert all(value != b"aborted" for _, _, value in contents(log))
    assert any(h.is_control for h, _ in log.batches())


def test_a_crash_mid_compaction_leaves_a_consistent_log(tmp_path):
    directory = str(tmp_path / "c-0")
    log = PartitionLog.create(directory, "c", 0, CONFIG)
    for round_ in range(4):
        for key in (b"a", b"b"):
            append(log, key, b"%s%d" % (key, round_) + b"y" * 100)
    before = contents(log)
    plan = compaction.plan(log, 0, NOW)
    cleaned = compaction.clean(plan)  # the cleaned copies are complete, named .swap
    first = plan.segments[0]
    # Crash during the swap: one .swap renamed into place, the others not.
    os.replace(os.path.join(directory, f"{first.base_offset:020d}.log.swap"), first.log_path)
    log.close()
    # ...and an unfinished pass's leftover.
    with open(os.path.join(directory, "00000000000000099999.log.cleaned"), "wb") as f:
        f.write(b"partial")

    reopened = PartitionLog.open(directory, "c", 0, CONFIG, clean=False, recovery_point=0, log_start_offset=0)
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith(".cleaned") or n.endswith(".swap")]
    after = contents(reopened)
    assert after == [r for r in before if r[0] in {o for o, _, _ in after}]
    assert {k: v for _, k, v in after} == {k: v for _, k, v in before}
    assert reopened.log_end_offset == 8 and len(cleaned) == len(plan.segments)
