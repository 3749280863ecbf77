"""A partition's segments checked at start-up after an unclean shutdown (the segment
loop of PartitionLog.open), and the one question producer-state replay asks of the
markers recovery met. Kept apart from storage/log.py, which holds the partition's
running life: appends, reads, rolls and flushes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ottla.protocol.batch import BatchHeader
from ottla.protocol.control import ControlType, parse_marker

from .segment import LogSegment

# Batch headers start-up recovery keeps a partition for replaying its producer state
# (about 330 bytes each): a longer unflushed tail is walked again instead.
REPLAY_HEADERS_KEPT = 50_000

# (segment, position, header) of batches, in log order.
Batches = list[tuple[LogSegment, int, BatchHeader]]


@dataclass(slots=True)
class RecoveredSegments:
    segments: list[LogSegment]  # those kept: what followed a damaged one is deleted
    last_header: BatchHeader | None
    # The batches checked up to the log end without a gap, for replaying producer state
    # (None if there were more than REPLAY_HEADERS_KEPT).
    checked: Batches | None
    truncated_bytes: int
    checked_bytes: int


def recover_segments(segments: list[LogSegment], index_interval_bytes: int, indexes_lost: set[int],
                     clean: bool, recovery_point: int) -> RecoveredSegments:
    """Check, segment by segment, what follows the recovery point after a crash (and
    rebuild the indexes of segments that lost them), cutting a torn tail and dropping
    the segments after a damaged one."""
    last_header: BatchHeader | None = None
    checked: Batches | None = []
    truncated_bytes = checked_bytes = 0
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        # After a crash, what follows the recovery point is checked; before it the
        # files were flushed and are trusted, as after a clean shutdown.
        unflushed = not clean and (next_base is None or next_base > recovery_point)
        if unflushed or segment.base_offset in indexes_lost:
            # Only the indexes were lost (clean start): rebuild the whole segment.
            from_offset = recovery_point if not clean and segment.base_offset not in indexes_lost else None
            keep = REPLAY_HEADERS_KEPT - len(checked) if checked is not None else 0
            recovered = segment.recover(index_interval_bytes, from_offset, keep)
            if checked is not None and recovered.batches is not None:
                checked += [(segment, position, header) for position, header in recovered.batches]
            else:
                checked = None
            header = recovered.last or last_header
            truncated_bytes += recovered.truncated
            checked_bytes += recovered.checked
            if recovered.truncated and next_base is not None:
                # A damaged segment in the middle: what follows it can no longer be
                # reached in order. Kafka deletes it too.
                for later in segments[i + 1 :]:
                    truncated_bytes += later.size
                    later.delete()
                segments = segments[: i + 1]
                last_header = header
                break
        else:
            header = segment.load_state() or last_header
            checked = []  # (only the indexes of a segment before it were rebuilt)
        last_header = header
    return RecoveredSegments(segments, last_header, checked, truncated_bytes, checked_bytes)


def abort_entries_lost(batches: Iterable[tuple[LogSegment, int, BatchHeader]], reindex_from: int,
                       snapshot: int) -> bool:
    """Whether an ABORT marker from `reindex_from` (the recovery point) up to
    `snapshot` has no .txnindex entry, in `batches` (from `reindex_from` on)."""
    for segment, position, header in batches:
        if header.base_offset >= snapshot:
            break
        if (header.is_control and header.base_offset >= reindex_from
                and not segment.txn_index.has_entry(header.producer_id, header.base_offset)
                and parse_marker(segment.pread(header.size, position)).type is ControlType.ABORT):
            return True
    return False
