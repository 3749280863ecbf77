"""The partition log without a broker: appends, rolls, index lookups across segments,
reads, recovery of a torn tail."""

from __future__ import annotations

import os

import pytest

from ottla.protocol.batch import BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.index import TimeIndex
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig
from ottla.storage.retention import expired_segments

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, max_message_bytes=100_000)


def batch(first_value: int, count: int, timestamp: int) -> bytes:
    records = [encode_record(None, b"value-%06d" % (first_value + i), offset_delta=i) for i in range(count)]
    return build_batch(records, timestamp=timestamp)


def fill(log: PartitionLog, batches: int, per_batch: int = 3) -> None:
    for i in range(batches):
        data = batch(i * per_batch, per_batch, timestamp=1_000 + i)
        log.append_batch(data, BatchHeader.parse(data))


def values(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    pos = 0
    while pos < len(data):
        header = BatchHeader.parse(data, pos)
        out += [(r.offset, r.value) for r in iter_records(data[pos:pos + header.size])]
        pos += header.size
    return out


@pytest.fixture
def log(tmp_path) -> PartitionLog:
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, CONFIG)
    fill(log, 200)
    return log


def test_the_log_rolls_into_segments_named_by_base_offset(log):
    assert len(log.segments) > 5
    names = sorted(n for n in os.listdir(log.directory) if n.endswith(".log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    assert log.log_end_offset == 600


def test_index_lookups_find_every_offset_in_every_segment(log):
    for segment in log.segments:
        assert len(segment.offset_index) >= 1
    for offset in range(0, 600):
        got = log.read(offset, 100, read_committed=False, min_one=True)
        first = values(got.records)[0]
        # The read starts at the batch holding the offset.
        assert first[0] <= offset < first[0] + 3
        assert first[1] == b"value-%06d" % first[0]


def test_a_read_returns_whole_batches_within_max_bytes(log):
    got = log.read(0, 1000, read_committed=False, min_one=True)
    size = BatchHeader.parse(got.records).size
    assert len(got.records) % size == 0 and len(got.records) <= 1000
    # min_one: a limit smaller than one batch still returns that batch.
    tiny = log.read(30, 10, read_committed=False, min_one=True)
    assert len(tiny.records) == size
    assert log.read(30, 10, read_committed=False, min_one=False).records is None


def test_reading_at_the_end_is_empty_and_past_it_is_out_of_range(log):
    assert log.read(600, 1000, read_committed=False, min_one=True).records is None
    with pytest.raises(KafkaError) as exc:
        log.read(601, 1000, read_committed=False, min_one=True)
    assert exc.value.code == ErrorCode.offset_out_of_range


def test_offset_for_timestamp_uses_the_time_index(log):
    assert log.offset_for_timestamp(1_000 + 150) == (450, 1_150)
    assert log.offset_for_timestamp(0) == (0, 1_000)
    assert log.offset_for_timestamp(10_000) is None


def test_after_a_clean_reopen_each_time_index_is_read_on_first_use_with_the_same_answers(log):
    directory = log.directory
    max_timestamps = [s.max_timestamp for s in log.segments]
    answers = [log.offset_for_timestamp(ts) for ts in (0, 1_000, 1_077, 1_199, 10_000)]
    log.close()
    reopened = PartitionLog.open(directory, "p", 0, CONFIG, clean=True, recovery_point=600, log_start_offset=0)
    assert all(s._time_index is None for s in reopened.segments)
    # A timestamp lookup reads the time indexes of the segments it looks at, no others.
    assert reopened.offset_for_timestamp(1_001) == (3, 1_001)
    assert reopened.segments[0]._time_index is not None and reopened.segments[-1]._time_index is None
    assert [reopened.offset_for_timestamp(ts) for ts in (0, 1_000, 1_077, 1_199, 10_000)] == answers
    assert [s.max_timestamp for s in reopened.segments] == max_timestamps
    assert reopened.max_timestamp_offset() == (597, 1_199)
    reopened.close()
    # Time-based retention reads them too (only the active segment, 1_199 ms old, stays).
    again = PartitionLog.open(directory, "p", 0, CONFIG, clean=True, recovery_point=600, log_start_offset=0)
    assert expired_segments(again, now_ms=1_199 + CONFIG.retention_ms) == again.segments[:-1]
    # A millisecond later every record is past retention, the active segment's too: all go
    # (the broker rolls a new empty segment first, as Kafka does).
    assert expired_segments(again, now_ms=1_200 + CONFIG.retention_ms) == again.segments
    again.close()
    # An append to the active segment reads its time index (for the max timestamp it
    # grows); two small batches stay under index.interval.bytes and add no entry.
    again = PartitionLog.open(directory, "p", 0, CONFIG, clean=True, recovery_point=600, log_start_offset=0)
    active = again.segments[-1]
    assert active._time_index is None
    on_disk = os.path.getsize(active._time_index_path)
    for timestamp in (1_100, 1_300):
        data = batch(900, 1, timestamp=timestamp)
        again.append_batch(data, BatchHeader.parse(data))
    assert active._time_index is not None and active.max_timestamp == 1_300
    assert os.path.getsize(active._time_index_path) == on_disk
    # A segment deleted unread takes its time index file with it.
    oldest = again.segments[0]
    assert oldest._time_index is None
    path = oldest._time_index_path
    again.delete_oldest_segments([oldest])
    assert not os.path.exists(path) and not os.path.exists(oldest.log_path)
    assert again.offset_for_timestamp(1_250) == (601, 1_300)
    # A clean close seals the active segment's time index with its max timestamp.
    again.close()
    assert os.path.getsize(active._time_index_path) == on_disk + TimeIndex.ENTRY.size


def test_reopening_after_a_torn_write_cuts_the_tail(log, tmp_path):
    directory = log.directory
    last = log.segments[-1]
    log.close()
    with open(last.log_path, "ab") as f:
        f.write(batch(9999, 3, 5)[:40])  # a batch cut off mid-write
    os.unlink(last.offset_index.path)
    reopened = PartitionLog.open(directory, "p", 0, CONFIG, clean=False, recovery_point=last.base_offset,
                                 log_start_offset=0)
    assert reopened.log_end_offset == 600
    assert reopened.truncated_bytes == 40
    assert values(reopened.read(597, 1000, False, True).records)[-1] == (599, b"value-000599")
    fill(reopened, 1)
    assert reopened.log_end_offset == 603


def test_clean_reopen_keeps_offsets_and_indexes(log):
    directory = log.directory
    index_sizes = [len(s.offset_index) for s in log.segments]
    log.close()
    reopened = PartitionLog.open(directory, "p", 0, CONFIG, clean=True, recovery_point=600, log_start_offset=0)
    assert reopened.log_end_offset == 600
    assert [len(s.offset_index) for s in reopened.segments] == index_sizes


def test_a_damaged_segment_in_the_middle_cuts_the_log_there(log):
    directory = log.directory
    second = log.segments[1]
    log.close()
    with open(second.log_path, "r+b") as f:
        f.seek(second.size // 2)
        f.write(b"\xff" * 40)  # inside some batch: its CRC fails (or its base offset goes wrong)
    reopened = PartitionLog.open(directory, "p", 0, CONFIG, clean=False, recovery_point=0, log_start_offset=0)
    assert len(reopened.segments) == 2
    last = values(reopened.read(reopened.log_end_offset - 1, 1000, False, True).records)[-1]
    assert last[0] == reopened.log_end_offset - 1 < 600
    assert last[1] == b"value-%06d" % last[0]
    assert sorted(n for n in os.listdir(directory) if n.endswith(".log")) == \
        [f"{s.base_offset:020d}.log" for s in reopened.segments]


def test_the_last_batch_found_by_hopping_is_the_last_one_walking_finds(log):
    # load_state hops over batches by their lengths; walk parses each: the slow, obvious
    # version. From every indexed position, and with a torn tail and garbage at the end.
    segments = log.segments
    for segment in segments:
        for position in [0, *segment.offset_index.positions]:
            walked = [header for _, header in segment.walk(position)]
            assert segment._last_batch_from(position) == (walked[-1] if walked else None)
    active = segments[-1]
    whole = active.size
    with open(active.log_path, "ab") as f:
        f.write(batch(0, 3, timestamp=5)[:40])  # a torn batch
    active.size = os.path.getsize(active.log_path)
    assert active._last_batch_from(0) == [h for _, h in active.walk(0)][-1]
    assert active._last_batch_from(0).last_offset == log.log_end_offset - 1
    os.truncate(active.log_path, whole)
    with open(active.log_path, "ab") as f:
        f.write(bytes(80))  # garbage: a zero length
    active.size = os.path.getsize(active.log_path)
    assert active._last_batch_from(0) == [h for _, h in active.walk(0)][-1]
    assert active._last_batch_from(0).last_offset == log.log_end_offset - 1


@pytest.mark.parametrize("damage", ["as written", "extra entries", "entries missing", "entries changed"])
def test_recovery_leaves_index_files_that_match_the_log(log, damage):
    # Recovery rebuilds the indexes in memory and writes a file only where it differs
    # from them: whatever state a crash left the files in, they end up as the log says.
    # The files as a clean shutdown leaves them (the active segment's max timestamp as
    # its time index's last entry, as a roll leaves the others).
    directory = log.directory
    segments = log.segments
    log.close()
    expected = {}
    for segment in segments:
        for path in (segment.offset_index.path, segment.time_index.path):
            with open(path, "rb") as f:
                expected[path] = f.read()
    for path, data in expected.items():
        assert len(data) >= 16
        changed = {"as written": data, "extra entries": data + data[-12:] * 2,
                   "entries missing": data[: len(data) // 2], "entries changed": b"\xff" * 8 + data[8:]}[damage]
        with open(path, "wb") as f:
            f.write(changed)
    reopened = PartitionLog.open(directory, "p", 0, CONFIG, clean=False, recovery_point=0, log_start_offset=0)
    assert reopened.log_end_offset == 600
    for path, data in expected.items():
        with open(path, "rb") as f:
            assert f.read() == data, (damage, path)
    for offset in range(0, 600, 7):
        first = values(reopened.read(offset, 100, read_committed=False, min_one=True).records)[0]
        assert first[0] <= offset < first[0] + 3


def test_index_entries_follow_kafkas_rule(log):
    # What kafka-dump-log --verify-index-only checks, and LogSegment.append's rule: an
    # offset index entry names the last offset of the batch at its position, and is made
    # once more than index.interval.bytes have been written since the previous one (none
    # for a segment's first batch); a time index entry, made with it, names the max
    # timestamp so far and the last offset of the batch holding it, and the last one of
    # a closed segment is the segment's max timestamp.
    log.close()
    for segment in log.segments:
        batches = list(segment.walk())
        at = {position: header for position, header in batches}
        entries = list(zip(segment.offset_index.relative_offsets, segment.offset_index.positions, strict=True))
        expected_positions, since = [], 0
        for position, header in batches:
            if since > CONFIG.index_interval_bytes:
                expected_positions.append(position)
                since = 0
            since += header.size
        assert [position for _, position in entries] == expected_positions
        for relative, position in entries:
            assert segment.base_offset + relative == at[position].last_offset
        max_so_far: dict[int, int] = {}  # last offset -> max timestamp up to that batch
        highest = -1
        for _, header in batches:
            highest = max(highest, header.max_timestamp)
            max_so_far[header.last_offset] = highest
        times = list(zip(segment.time_index.timestamps, segment.time_index.relative_offsets, strict=True))
        assert times, "a closed segment has at least its max timestamp"
        for timestamp, relative in times:
            assert max_so_far[segment.base_offset + relative] == timestamp
        assert times[-1][0] == highest


def test_time_lookups_scan_past_sparse_entries(tmp_path):
    # Timestamps that go back and forth (CreateTime from several producers): a lookup
    # still finds the first batch reaching the timestamp, before and after a reopen.
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, CONFIG)
    stamps = [1_000 + (i * 37) % 101 for i in range(120)]
    for i, stamp in enumerate(stamps):
        data = batch(i * 3, 3, timestamp=stamp)
        log.append_batch(data, BatchHeader.parse(data))

    def slow(target: int) -> tuple[int, int] | None:
        for i, stamp in enumerate(stamps):
            if stamp >= target:
                return i * 3, stamp
        return None

    for target in range(990, 1_110, 3):
        assert log.offset_for_timestamp(target) == slow(target), target
    directory = log.directory
    log.close()
    reopened = PartitionLog.open(directory, "p", 0, CONFIG, clean=True, recovery_point=360, log_start_offset=0)
    for target in range(990, 1_110, 3):
        assert reopened.offset_for_timestamp(target) == slow(target), target
    assert max(s.max_timestamp for s in reopened.segments) == max(stamps)


@pytest.mark.parametrize("interval", [0, 256])
def test_recovery_resumes_inside_a_segment_of_many_record_batches(tmp_path, interval):
    # After a crash, recovery resumes at the offset index entry before the recovery
    # point: that entry names its batch's last offset; the check goes on from the
    # batch's first offset if the batch holds the recovery point, after it if not,
    # losing nothing either way (interval 0: every batch but the first has an entry,
    # the last one included).
    config = LogConfig(index_interval_bytes=interval)
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, config)
    fill(log, 60, per_batch=7)
    segment = log.segments[-1]
    assert len(log.segments) == 1 and len(segment.offset_index) > 3
    directory = log.directory
    log.close_files()  # as a kill -9 leaves it: no seal, no snapshot
    for recovery_point in (0, 100, 203, 413, 419, 420):
        reopened = PartitionLog.open(directory, "p", 0, config, clean=False,
                                     recovery_point=recovery_point, log_start_offset=0)
        assert reopened.log_end_offset == 420 and reopened.truncated_bytes == 0, recovery_point
        assert values(reopened.read(0, 1 << 20, False, True).records) == \
            [(i, b"value-%06d" % i) for i in range(420)]
        reopened.close_files()
