"""A batch whose index entry cannot be written is taken back out of the segment (a full
disk: the log took the bytes, its index did not): the log, its indexes in memory and
their files agree afterwards, and the next append goes on from the same place."""

from __future__ import annotations

import os

import pytest

from ottla.protocol.batch import BatchHeader
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.index import OffsetIndex, TimeIndex
from ottla.storage.log import PartitionLog
from tests.unit.test_log import CONFIG, batch, fill, values


@pytest.mark.parametrize("failing", [OffsetIndex, TimeIndex])
def test_a_batch_whose_index_entry_fails_is_taken_back_out(tmp_path, monkeypatch, failing):
    log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, CONFIG)
    fill(log, 5)
    segment = log.segments[-1]
    before = (log.high_watermark, segment.size, len(segment.offset_index), len(segment.time_index),
              os.path.getsize(segment.log_path))

    def no_space(self, *fields):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    # More bytes since the last offset index entry than the interval, and a newer
    # timestamp: this batch gets an entry in both indexes.
    segment.bytes_since_index_entry = CONFIG.index_interval_bytes + 1
    monkeypatch.setattr(failing, "_write", no_space)
    data = batch(100, 3, timestamp=9_999)
    with pytest.raises(KafkaError) as refused:
        log.append_batch(data, BatchHeader.parse(data))
    assert refused.value.code == ErrorCode.kafka_storage_error
    monkeypatch.undo()
    after = (log.high_watermark, segment.size, len(segment.offset_index), len(segment.time_index),
             os.path.getsize(segment.log_path))
    assert after == before
    # The index files hold exactly the entries in memory.
    assert os.path.getsize(segment.offset_index.path) == len(segment.offset_index) * OffsetIndex.ENTRY.size
    assert os.path.getsize(segment.time_index.path) == len(segment.time_index) * TimeIndex.ENTRY.size

    # Space again: the same batch is appended where the refused one would have gone,
    # and it all reopens the same.
    log.append_batch(data, BatchHeader.parse(data))
    assert log.high_watermark == before[0] + 3
    expected = values(log.read(0, 1 << 20, read_committed=False, min_one=True).records)
    log.close()
    reopened = PartitionLog.open(str(tmp_path / "p-0"), "p", 0, CONFIG, clean=False, recovery_point=0,
                                 log_start_offset=0)
    assert reopened.high_watermark == before[0] + 3
    assert values(reopened.read(0, 1 << 20, read_committed=False, min_one=True).records) == expected
    assert expected[-1] == (before[0] + 2, b"value-000102")


@pytest.mark.parametrize("index_class", [OffsetIndex, TimeIndex])
def test_keep_first_drops_later_entries_in_memory_and_on_disk(tmp_path, index_class):
    index = index_class(str(tmp_path / "x.index"), 100)
    for i in range(5):
        index.append(*((100 + i * 10, i * 100) if index_class is OffsetIndex else (1000 + i, 100 + i * 10)))
    index.keep_first(2)
    assert len(index) == 2
    index.close()
    assert len(index_class(str(tmp_path / "x.index"), 100)) == 2
