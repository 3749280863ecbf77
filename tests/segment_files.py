"""Read a partition's segment files directly, as Kafka's file formats define them, to
check what a broker left on disk: every batch whole and its CRC-32C right, the offsets
contiguous, and each index entry pointing at a batch of its log."""

from __future__ import annotations

import glob
import os
import struct
from dataclasses import dataclass

import crc32c

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
LENGTH_PREFIX = 12  # baseOffset and batchLength come before the length counts
CRC_END = 21  # the CRC covers everything from attributes on


@dataclass(frozen=True)
class Batch:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def read_batches(log_path: str) -> list[Batch]:
    """Every batch of a .log file; fails on a torn batch, a wrong magic or a bad CRC."""
    with open(log_path, "rb") as f:
        data = f.read()
    batches: list[Batch] = []
    position = 0
    while position < len(data):
        assert len(data) - position >= BATCH_HEADER.size, f"{log_path}: torn batch header at {position}"
        (base, length, _epoch, magic, crc, _attributes, last_delta, _base_ts, max_ts, *_rest) = \
            BATCH_HEADER.unpack_from(data, position)
        end = position + LENGTH_PREFIX + length
        assert end <= len(data), f"{log_path}: batch at {position} ends at {end}, past the file's {len(data)} bytes"
        assert magic == 2, f"{log_path}: magic {magic} at {position}"
        assert crc32c.crc32c(data[position + CRC_END:end]) == crc, f"{log_path}: bad CRC at {position}"
        batches.append(Batch(position, base, base + last_delta, max_ts))
        position = end
    return batches


def check_partition_files(partition_dir: str) -> int:
    """Check every segment of a partition directory; returns the log end offset (the
    last batch's last offset + 1). Offsets run on without a gap or an overlap from the
    first segment to the last; each segment's first batch has the offset its name says;
    offset index entries are (a batch's last offset, that batch's position), time index
    entries (a timestamp, a batch's last offset), both ascending."""
    next_offset: int | None = None
    for log_path in sorted(glob.glob(os.path.join(partition_dir, "*.log"))):
        segment_base = int(os.path.basename(log_path)[:-len(".log")])
        batches = read_batches(log_path)
        if batches:
            assert batches[0].base_offset == segment_base, f"{log_path} starts at {batches[0].base_offset}"
        for batch in batches:
            if next_offset is not None:
                assert batch.base_offset == next_offset, \
                    f"{log_path}: batch at {batch.position} has offset {batch.base_offset}, expected {next_offset}"
            next_offset = batch.last_offset + 1
        by_position = {b.position: b for b in batches}
        last_offsets = {b.last_offset for b in batches}
        stem = log_path[:-len(".log")]
        with open(stem + ".index", "rb") as f:
            index = f.read()
        assert len(index) % 8 == 0, f"{stem}.index: a torn entry ({len(index)} bytes)"
        previous = -1
        for relative, position in struct.iter_unpack(">ii", index):
            batch = by_position.get(position)
            assert batch is not None, f"{stem}.index: position {position} is no batch's start"
            assert batch.last_offset == segment_base + relative, \
                f"{stem}.index: offset {segment_base + relative} is not the last offset of the batch at {position}"
            assert relative > previous, f"{stem}.index: offsets not ascending"
            previous = relative
        if os.path.exists(stem + ".timeindex"):
            with open(stem + ".timeindex", "rb") as f:
                time_index = f.read()
            assert len(time_index) % 12 == 0, f"{stem}.timeindex: a torn entry ({len(time_index)} bytes)"
            last_timestamp = -1
            for timestamp, relative in struct.iter_unpack(">qi", time_index):
                assert segment_base + relative in last_offsets, \
                    f"{stem}.timeindex: offset {segment_base + relative} is no batch's last offset"
                assert timestamp >= last_timestamp, f"{stem}.timeindex: timestamps not ascending"
                last_timestamp = timestamp
    assert next_offset is not None, f"{partition_dir}: no batch at all"
    return next_offset
