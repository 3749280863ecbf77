"""Log compaction: keep only the latest record of each key in closed segments.

A pass over one partition, as Kafka's LogCleaner does it:

1. `plan` (on the event loop): the cleanable range runs from the log start to the first
   uncleanable offset: the active segment's base, the LSO (an open transaction's
   records must not be judged yet), and the first segment newer than
   `min.compaction.lag.ms`. It is worth cleaning when the dirty part (after the
   cleaner checkpoint) is at least `min.cleanable.dirty.ratio` of it, or when a dirty
   record is older than `max.compaction.lag.ms`.
2. `clean` (in a worker thread, on file descriptors of its own, so request handling
   never waits): build key -> latest offset over the dirty part, then rewrite every
   segment of the range into `<base>.log.cleaned` (+ indexes), keeping a record only if
   no later record has its key; tombstones (null values) also go once they are older
   than `delete.retention.ms`; records of aborted transactions go; control markers stay.
   Batches keep their base offset and last offset delta: offsets never change.
   The finished files are fsynced and renamed to `.swap`.
3. `swap` (on the event loop): each `.swap` file replaces its live file with a rename,
   and the partition's segment list takes the new segment.

A crash leaves a consistent log: start-up deletes `.cleaned` files (an unfinished pass)
and completes `.swap` renames (a finished pass whose swap was interrupted); see
`segment.recover_interrupted_cleaning`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from ottla.protocol.batch import COMPRESSION_MASK, HEADER_SIZE, BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.compression import EXPANSION_LIMIT

from .directories import fsync_directory
from .log import PartitionLog
from .segment import CLEANED, SEGMENT_FILE_KINDS, SWAP, LogSegment
from .txn_index import AbortedTxn


@dataclass
class CleanPlan:
    log: PartitionLog
    segments: list[LogSegment]  # closed segments to rewrite, oldest first
    first_dirty: int
    end: int  # first offset not cleaned in this pass
    aborted: list[AbortedTxn]
    now_ms: int


def _first_uncleanable(log: PartitionLog, now_ms: int) -> int:
    end = min(log.active.base_offset, log.last_stable_offset)
    lag = log.config.min_compaction_lag_ms
    for segment in log.segments[:-1]:
        if segment.max_timestamp > now_ms - lag:
            return min(end, segment.base_offset)
    return end


def plan(log: PartitionLog, first_dirty: int, now_ms: int) -> CleanPlan | None:
    """What one pass over `log` would clean, or None if it is not worth it yet."""
    if not log.config.compact:
        return None
    end = _first_uncleanable(log, now_ms)
    segments = [s for s, after in pairwise(log.segments) if after.base_offset <= end]
    if not segments:
        return None
    # `segments` is a prefix of log.segments that leaves out at least the active one.
    dirty_segments = [s for s, after in zip(segments, log.segments[1:], strict=False)
                      if after.base_offset > first_dirty]
    if not dirty_segments:
        return None
    total = sum(s.size for s in segments)
    dirty = sum(s.size for s in dirty_segments)
    overdue = any(0 <= s.first_timestamp < now_ms - log.config.max_compaction_lag_ms for s in dirty_segments)
    if dirty / max(total, 1) < log.config.min_cleanable_dirty_ratio and not overdue:
        return None
    aborted = [entry for s in log.segments for entry in s.txn_index.entries]
    return CleanPlan(log, segments, max(first_dirty, log.log_start_offset), end, aborted, now_ms)


# --- the worker thread ---------------------------------------------------------------------


def _batches(path: str) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch of a segment file, read through a descriptor of our
    own: the live segment may be closed or deleted meanwhile."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = 0
        while position + HEADER_SIZE <= size:
            header = BatchHeader.parse(os.pread(fd, HEADER_SIZE, position))
            batch = os.pread(fd, header.size, position)
            yield header, batch
            position += header.size
    finally:
        os.close(fd)


def _is_aborted(header: BatchHeader, aborted: list[AbortedTxn]) -> bool:
    return header.is_transactional and any(
        a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset
        for a in aborted
    )


def clean(p: CleanPlan) -> list[LogSegment]:
    """Write the cleaned copy of every segment of the plan; returns them, closed and
    renamed to `.swap`, in the plan's order."""
    latest: dict[bytes, int] = {}
    for segment in p.segments:
        for header, batch in _batches(segment.log_path):
            if header.last_offset < p.first_dirty or header.is_control or _is_aborted(header, p.aborted):
                continue
            for record in iter_records(batch, _max_decompressed(p.log)):
                if record.key is not None and record.offset < p.end:
                    latest[record.key] = record.offset
    horizon = p.now_ms - p.log.config.delete_retention_ms
    cleaned = []
    for segment in p.segments:
        target = LogSegment(segment.directory, segment.base_offset, suffix=CLEANED)
        # Read (created) now: the copy must have a time index file even if it keeps no
        # batch, for the swap to put it over the live one.
        _ = target.time_index
        for entry in segment.txn_index.entries:
            target.txn_index.append(entry)
        for header, batch in _batches(segment.log_path):
            kept = batch if header.is_control else _filter(header, batch, latest, horizon, p.aborted,
                                                           _max_decompressed(p.log))
            if kept is None:
                continue
            kept_header = BatchHeader.parse(kept)
            target.append(kept, len(kept), kept_header.base_offset, kept_header.last_offset,
                          kept_header.max_timestamp, p.log.config.index_interval_bytes)
        target.seal_time_index()
        target.fsync()
        target.close()
        for kind in SEGMENT_FILE_KINDS:
            path = os.path.join(segment.directory, f"{segment.base_offset:020d}{kind}")
            if os.path.exists(path + CLEANED):
                os.replace(path + CLEANED, path + SWAP)
        cleaned.append(target)
    if p.segments:
        # The .swap names durable before the swap deletes or replaces any original:
        # after a power loss start-up finds each copy either swapped in or as .swap.
        fsync_directory(p.segments[0].directory)
    return cleaned


def _max_decompressed(log: PartitionLog) -> int:
    """What a batch of this topic may expand to: as much as a produce could (the
    bound of protocol/compression.py)."""
    return EXPANSION_LIMIT * log.config.max_message_bytes


def _filter(header: BatchHeader, batch: bytes, latest: dict[bytes, int], horizon: int,
            aborted: list[AbortedTxn], max_decompressed: int) -> bytes | None:
    """The batch with only the records compaction keeps (the same bytes if it keeps them
    all), or None if it keeps none."""
    if _is_aborted(header, aborted):
        return None
    records = list(iter_records(batch, max_decompressed))
    keep = [
        r for r in records
        if r.key is None
        or (latest.get(r.key, r.offset) <= r.offset and not (r.value is None and r.timestamp < horizon))
    ]
    if len(keep) == len(records) and header.compression == 0:
        return batch
    if not keep:
        return None
    return build_batch(
        [encode_record(r.key, r.value, offset_delta=r.offset - header.base_offset,
                       timestamp_delta=r.timestamp - header.base_timestamp, headers=list(r.headers)) for r in keep],
        base_offset=header.base_offset, timestamp=header.base_timestamp, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        attributes=header.attributes & ~COMPRESSION_MASK,  # written back uncompressed
        partition_leader_epoch=header.partition_leader_epoch,
        # The batch keeps its offset span and max timestamp: the producer's sequences
        # and the time index stay true.
        last_offset_delta=header.last_offset_delta, max_timestamp=header.max_timestamp,
    )


# --- back on the event loop ------------------------------------------------------------------


def swap(log: PartitionLog, p: CleanPlan, cleaned: list[LogSegment]) -> bool:
    """Put the cleaned segments in place of the originals. False (and the cleaned files
    removed) if the log changed under the pass, e.g. retention deleted a segment."""
    if any(s not in log.segments for s in p.segments):
        for segment in cleaned:
            _remove_files(segment.directory, segment.base_offset, SWAP)
        return False
    for original in p.segments:
        original.close()
        for kind in SEGMENT_FILE_KINDS:
            path = os.path.join(original.directory, f"{original.base_offset:020d}{kind}")
            if os.path.exists(path + SWAP):
                os.replace(path + SWAP, path)
            elif kind == ".txnindex" and os.path.exists(path):
                os.unlink(path)
        replacement = LogSegment(original.directory, original.base_offset)
        replacement.load_state()
        log.replace_segment(original, replacement)
    log.directories.changed()  # the renames: synced by the next flush
    log.forget_read_positions()
    return True


def _remove_files(directory: str, base_offset: int, suffix: str) -> None:
    for kind in SEGMENT_FILE_KINDS:
        path = os.path.join(directory, f"{base_offset:020d}{kind}{suffix}")
        if os.path.exists(path):
            os.unlink(path)
