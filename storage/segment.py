"""One segment of a partition: a `.log` file of record batches and its indexes.

The `.log` holds batches byte for byte as the producer sent them, with the broker's
baseOffset and partitionLeaderEpoch written into the first 16 bytes. The file is named
after the segment's base offset, 20 digits, zero padded, as Kafka names it.

Reads never load a segment: a position comes from the sparse offset index, and from
there batch headers are walked with `os.pread` until the wanted offset.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

from ottla.protocol.batch import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    LAST_OFFSET_DELTA,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    OFFSET_AND_LENGTH,
    BatchHeader,
    compute_crc,
)

from .batch_write import write_batch
from .directories import directory_changed, open_or_create
from .file_slice import FileSlice
from .index import OffsetIndex, TimeIndex
from .open_files import OPEN_FILES
from .txn_index import TransactionIndex

# How much to read at once when walking batch headers.
_WALK_WINDOW = 64 * 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class Recovered:
    """What recovering a segment found: its last good batch, the bytes cut off after it,
    the bytes it had to check, and (position, header) of each good batch it checked, in
    order (start-up replays producer state from them instead of reading them again);
    None if there were more than it was asked to keep."""

    last: BatchHeader | None
    truncated: int
    checked: int
    batches: list[tuple[int, BatchHeader]] | None


@dataclass(frozen=True, slots=True)
class ReadSlice:
    """Whole batches read from a segment: their bytes (or, read in place, the range of the
    file holding them), and where the next read starts."""

    data: bytes | FileSlice
    next_offset: int
    next_position: int


# The files of a segment, by kind.
SEGMENT_FILE_KINDS = (".log", ".index", ".timeindex", ".txnindex")
# Compaction writes a segment's cleaned copy under CLEANED, renames it to SWAP once it is
# complete, then renames it over the live file.
CLEANED = ".cleaned"
SWAP = ".swap"


def recover_interrupted_cleaning(directory: str, names: list[str]) -> bool:
    """At start-up, before the segments are opened: drop what an unfinished compaction
    pass wrote, and finish the renames of a pass that was swapping (its files are
    complete and were fsynced before they were named .swap). `names` lists the
    directory; returns whether anything in it changed."""
    changed = False
    for name in names:
        if name.endswith(CLEANED):
            os.unlink(os.path.join(directory, name))
            changed = True
        elif name.endswith(SWAP):
            path = os.path.join(directory, name)
            os.replace(path, path[: -len(SWAP)])
            changed = True
    return changed


class LogSegment:
    def __init__(self, directory: str, base_offset: int, suffix: str = "", has_txn_index: bool = True) -> None:
        """`suffix` names a segment being built beside the live one (compaction writes
        `<base>.log.cleaned` and its indexes, then swaps them in). `has_txn_index`
        False: the caller knows there is no `.txnindex` file, so none is looked for."""
        self.directory = directory
        self.base_offset = base_offset

        def path(kind: str) -> str:
            # Not os.path.join: four of them per segment were 5 % of a start of 10,000
            # partitions.
            return f"{directory}/{base_offset:020d}{kind}{suffix}"

        self.log_path = path(".log")
        # A live segment's files count against the process's budget of open files (they
        # are closed when it is least recently used, and reopened on use); a compacted
        # copy being built is written by one pass and closed, outside the budget.
        self._pooled = suffix == ""
        self._fd: int | None
        self._fd, created = open_or_create(self.log_path, os.O_RDWR | os.O_APPEND)
        self.size = os.fstat(self._fd).st_size
        # A new segment's directory entries are synced by the next flush (directories.py).
        self._created_stamp = directory_changed() if created else 0
        self.offset_index = OffsetIndex(path(".index"), base_offset)
        self._time_index_path = path(".timeindex")
        self._time_index: TimeIndex | None = None  # read on first use: see `time_index`
        self.txn_index = TransactionIndex(path(".txnindex"), exists=has_txn_index)
        self.bytes_since_index_entry = 0
        # The largest timestamp in the segment and the last offset of the batch holding
        # it (what a time index entry records), as (timestamp, offset); None after
        # `load_state` until asked for (see `max_timestamp`). And the first batch's
        # timestamp (segment.ms rolls the segment that long after its first batch, as
        # Kafka does).
        self._max_timestamp: tuple[int, int] | None = (-1, -1)
        self._last_batch = (-1, -1)  # (max timestamp, last offset) of the last batch, for load_state
        self.first_timestamp = -1
        if self._pooled:
            OPEN_FILES.touch(self)

    @property
    def time_index(self) -> TimeIndex:
        """The `.timeindex`, read from its file on first use (Kafka's LazyIndex does the
        same). Only timestamp lookups (ListOffsets, the web console), time-based
        retention and compaction, appends and recovery need it: reading every
        segment's at start-up was 12 % of a clean start of 10,000 partitions."""
        if self._time_index is None:
            self._time_index = TimeIndex(self._time_index_path, self.base_offset)
        return self._time_index

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp in the segment. After `load_state` it comes from the
        time index's last entry (or the last batch, if its timestamp is larger), so
        asking for it reads the time index."""
        return self._max_timestamp_and_offset()[0]

    def _max_timestamp_and_offset(self) -> tuple[int, int]:
        if self._max_timestamp is None:
            entry = self.time_index.last_entry()
            self._max_timestamp = self._last_batch if self._last_batch[0] > entry[0] else entry
        return self._max_timestamp

    @property
    def fd(self) -> int:
        """The `.log` file's descriptor, reopened if the budget closed it; each use makes
        this the most recently used segment."""
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND)
        if self._pooled:
            OPEN_FILES.touch(self)
        return self._fd

    def release_files(self) -> None:
        """Close every file of the segment, to be reopened on its next use."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.offset_index.release()
        if self._time_index is not None:
            self._time_index.release()
        self.txn_index.close()

    # --- writing -------------------------------------------------------------------------

    def append(self, batch: bytes | memoryview, size: int, base_offset: int, last_offset: int, max_timestamp: int,
               index_interval_bytes: int, leader_epoch: int | None = None) -> int:
        """Write one batch of `size` bytes and index it. Returns its position. With a
        `leader_epoch`, the batch is written with `base_offset` and it in its header (an
        append: batch_write.py); without, as it is (compaction's kept batches)."""
        position = self.size
        # The `fd` property written out (a Python call less a batch): reopened if the
        # budget closed it, and made the most recently used.
        fd = self._fd
        if fd is None:
            fd = self.fd
        elif self._pooled:
            # A segment whose files are open is counted in OPEN_FILES: touch_open makes it
            # the most recently used with no Python call.
            try:
                OPEN_FILES.touch_open(self)
            except KeyError:
                OPEN_FILES.touch(self)
        written = os.write(fd, batch) if leader_epoch is None else write_batch(fd, batch, base_offset, leader_epoch)
        if written != size:
            # A short write leaves a torn batch; cut it off so the file stays a clean log.
            os.ftruncate(self.fd, position)
            raise OSError(f"short write to {self.log_path}: {written} of {size} bytes")
        self.size += size
        current = self._max_timestamp
        if position and self.bytes_since_index_entry <= index_interval_bytes and current is not None:
            # Most batches: no index entry, nothing that can fail, and no call
            # (_index_batch's rule, for a batch that gets no entry).
            if max_timestamp > current[0]:
                self._max_timestamp = (max_timestamp, last_offset)
            self.bytes_since_index_entry += size
            return position
        # What _index_batch changes, to put back if its index writes fail; the indexes
        # change only when this batch gets an entry (most batches do not).
        before = self.bytes_since_index_entry, self._max_timestamp, self.first_timestamp
        indexed = self.bytes_since_index_entry > index_interval_bytes
        entries = (len(self.offset_index), len(self.time_index)) if indexed else None
        try:
            self._index_batch(position, size, base_offset, last_offset, max_timestamp, index_interval_bytes)
        except OSError:
            # The disk took the batch but not its index entry (a full disk): take the
            # batch back out, so that what was refused is not in the log and the log and
            # its indexes agree. Shrinking files needs no space.
            self.bytes_since_index_entry, self._max_timestamp, self.first_timestamp = before
            os.ftruncate(self.fd, position)
            self.size = position
            if entries is not None:
                self.offset_index.keep_first(entries[0])
                self.time_index.keep_first(entries[1])
            raise
        return position

    def _index_batch(self, position: int, size: int, base_offset: int, last_offset: int, max_timestamp: int,
                     index_interval_bytes: int) -> None:
        """The index upkeep of one batch written (or found by recovery) at `position`,
        by Kafka's rule (LogSegment.append): once more than `index_interval_bytes` of log
        have been written since the last entry, the batch gets an offset index entry
        (its last offset -> its position) and the time index an entry (the segment's max
        timestamp so far -> the last offset of the batch holding it) if that max grew.
        The first batch of a segment gets none (a lookup before the first entry starts
        at position 0). Kafka's own tools check the files against this rule
        (kafka-dump-log --verify-index-only: an entry's offset must be its batch's last
        offset), and small batches cost no index write each."""
        if position == 0:
            self.first_timestamp = max_timestamp
        if max_timestamp > self._max_timestamp_and_offset()[0]:
            self._max_timestamp = (max_timestamp, last_offset)
        if self.bytes_since_index_entry > index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.append(*self._max_timestamp_and_offset())
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size

    def seal_time_index(self) -> None:
        """The segment's max timestamp as the time index's last entry, as Kafka writes it
        when a segment stops being active (a roll, a clean shutdown, a compacted copy):
        the entries in between are sparse, and a segment loaded later takes its max
        timestamp (retention by time, ListOffsets' max timestamp) from the last one."""
        timestamp, offset = self._max_timestamp_and_offset()
        if timestamp >= 0:
            self.time_index.append(timestamp, offset)

    def fsync(self) -> None:
        os.fsync(self.fd)

    @property
    def directory_stamp(self) -> int:
        """When a file of this segment was last created: 0 if all were there."""
        stamp = max(self._created_stamp, self.offset_index.directory_stamp, self.txn_index.directory_stamp)
        if self._time_index is not None:
            stamp = max(stamp, self._time_index.directory_stamp)
        return stamp

    def file_descriptors(self) -> list[int]:
        """The open files of the segment: the log and its indexes (not a time index
        never read: nothing was written to it)."""
        fds = [self.fd, self.offset_index.fd]
        if self._time_index is not None:
            fds.append(self._time_index.fd)
        if self.txn_index.fd is not None:
            fds.append(self.txn_index.fd)
        return fds

    # --- reading -------------------------------------------------------------------------

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.fd, size, position)

    def walk(self, start_position: int = 0, end_position: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start_position`, read in windows."""
        end = self.size if end_position is None else end_position
        position = start_position
        while position + HEADER_SIZE <= end:
            window = os.pread(self.fd, min(_WALK_WINDOW, end - position), position)
            at = 0
            while at + HEADER_SIZE <= len(window):
                header = BatchHeader.parse(window, at)
                if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                    return  # garbage: the caller (recovery) decides what to do
                if position + at + header.size > end:
                    return
                yield position + at, header
                at += header.size
            if at == 0:
                # One header did not fit in a window read short of `end`: a torn tail.
                return
            position += at

    def position_of(self, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the batch holding `offset`, or None past the end."""
        _, start = self.offset_index.lookup(offset)
        for position, header in self.walk(start):
            if header.last_offset >= offset:
                return position, header.base_offset
        return None

    def read(self, position: int, max_bytes: int, max_offset: int, min_one: bool,
             in_place: bool = False) -> ReadSlice | None:
        """Whole batches from `position` holding offsets below `max_offset`, at most
        `max_bytes` of them, except that with `min_one` the first batch is returned
        even when it alone is larger (KIP-74: a consumer must always make progress).

        `in_place`: more than a walk window of them comes back as a FileSlice, the range
        of the file, found by walking the batch headers a window at a time, instead of
        as bytes read (Fetch: the connection sends it from the file)."""
        if position >= self.size:
            return None
        fd = self.fd
        end = self.size
        # Into memory, all that may be returned is read at once and walked there; in
        # place, the batch headers are walked a window at a time.
        window_size = min(max(max_bytes, HEADER_SIZE), end - position)
        if in_place:
            window_size = min(window_size, _WALK_WINDOW)
        window = b""
        window_start = position
        at = 0  # whole batches found, in bytes from `position`
        batch_size = 0
        next_offset = -1
        while position + at + LOG_OVERHEAD <= end:
            if at + HEADER_SIZE > max_bytes and not (at == 0 and min_one):
                break  # no batch is smaller than its header
            here = position + at - window_start
            if here + LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA.size > len(window):
                # The next header is not (wholly) in the window: read a window from it.
                window_start = position + at
                # After a batch larger than a window the next is likely large too: its
                # header alone is read, not a window of its records.
                size = HEADER_SIZE if at and batch_size > _WALK_WINDOW else window_size
                window = os.pread(fd, min(size, end - window_start), window_start)
                window_size = _WALK_WINDOW
                here = 0
                if LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA.size > len(window):
                    break  # a torn tail: recovery's business, not a reader's
            base_offset, length = OFFSET_AND_LENGTH.unpack_from(window, here)
            batch_size = length + LOG_OVERHEAD
            if (base_offset >= max_offset or batch_size < HEADER_SIZE or position + at + batch_size > end
                    or (at + batch_size > max_bytes and not (at == 0 and min_one))):
                break
            (last_delta,) = LAST_OFFSET_DELTA.unpack_from(window, here + LAST_OFFSET_DELTA_OFFSET)
            at += batch_size
            next_offset = base_offset + last_delta + 1
        if at == 0:
            return None
        if window_start == position and at <= len(window):  # all in the first window
            return ReadSlice(window[:at] if at < len(window) else window, next_offset, position + at)
        if in_place:
            try:
                return ReadSlice(FileSlice(fd, position, at), next_offset, position + at)
            except OSError as exc:
                # No descriptor left for the slice (many answers in flight at once, each
                # holding some): this one is read into memory, as before, and served.
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
        return ReadSlice(os.pread(fd, at, position), next_offset, position + at)

    def first_batch_reaching(self, timestamp: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose max timestamp is >= `timestamp`,
        found through the time index."""
        start_offset = self.time_index.lookup(timestamp)
        _, start = self.offset_index.lookup(start_offset)
        for position, header in self.walk(start):
            if header.max_timestamp >= timestamp:
                return position, header
        return None

    # --- recovery and truncation ---------------------------------------------------------

    def recover(self, index_interval_bytes: int, from_offset: int | None = None, keep: int = 0) -> Recovered:
        """Check every batch (length and CRC), rebuild the indexes, cut the file after the
        last good batch, and return the headers of the good batches if there are at most
        `keep` of them.

        With `from_offset` (the recovery point: everything before it was flushed, indexes
        included), the check starts at the batch of the last index entry at or before it
        (or right after that batch, when it ends before the recovery point), so recovery
        costs what was written since the last flush, not the segment's size."""
        entry_offset, position = self.base_offset, 0
        if from_offset is not None and from_offset > self.base_offset:
            entry_offset, position = self.offset_index.lookup(from_offset)
        file_size = os.fstat(self.fd).st_size
        next_offset, bytes_since_index_entry = self.base_offset, 0
        last: BatchHeader | None = None  # the last good batch
        if position > 0:
            # An entry names the last offset of the batch at its position (files Ottla
            # wrote before it followed Kafka's rule name the first). A batch wholly
            # before the recovery point was flushed, its entries with it: the check
            # starts after it; one holding the recovery point is checked itself. An
            # entry that does not lead to a batch holding its offset means the index
            # cannot be trusted: the whole segment is checked.
            head = os.pread(self.fd, HEADER_SIZE, position)
            found = BatchHeader.parse(head) if len(head) == HEADER_SIZE else None
            if (found is None or not found.base_offset <= entry_offset <= found.last_offset
                    or position + found.size > file_size):
                position = 0
            elif found.last_offset < from_offset:  # type: ignore[operator]  # position > 0: there is one
                position += found.size
                next_offset, bytes_since_index_entry, last = found.last_offset + 1, found.size, found
            else:
                next_offset = found.base_offset
        if position == 0:
            self.offset_index.start_rebuild(0)
            self.time_index.start_rebuild(0)
        else:
            # Keeps the entries made up to the batch we resume at: the offset index's
            # for that batch, and the time index's, whose last then holds the max
            # timestamp of everything before the check.
            self.offset_index.start_rebuild(self.offset_index.entries_before(entry_offset + 1))
            self.time_index.start_rebuild(self.time_index.entries_before(entry_offset + 1))
            self.first_timestamp = BatchHeader.parse(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        self._max_timestamp = self.time_index.last_entry()
        self.bytes_since_index_entry = bytes_since_index_entry
        checked_from = valid_end = position
        batches: list[tuple[int, BatchHeader]] | None = []
        while position + HEADER_SIZE <= file_size:
            head = os.pread(self.fd, HEADER_SIZE, position)
            header = BatchHeader.parse(head)
            # A garbage length either runs past the file or fails the CRC below. The CRC
            # does not cover the base offset: offsets must keep growing.
            if header.magic != CURRENT_MAGIC or header.size < HEADER_SIZE or header.base_offset < next_offset:
                break
            if position + header.size > file_size:
                break
            batch = os.pread(self.fd, header.size, position)
            if compute_crc(batch) != header.crc:
                break
            self._index_batch(position, header.size, header.base_offset, header.last_offset,
                              header.max_timestamp, index_interval_bytes)
            if batches is not None:
                if len(batches) < keep:
                    batches.append((position, header))
                else:
                    batches = None
            position += header.size
            valid_end = position
            last = header
            next_offset = header.last_offset + 1
        # The max timestamp as the last time index entry, as a roll or a clean shutdown
        # leaves it: a segment that is not the last one is never walked again.
        self.seal_time_index()
        self.offset_index.finish_rebuild()
        self.time_index.finish_rebuild()
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        return Recovered(last, truncated, file_size - checked_from, batches)

    def load_state(self) -> BatchHeader | None:
        """After a clean shutdown: restore the in-memory counters from the indexes and the
        last batch, without scanning. Returns the last batch's header."""
        _, start = self.offset_index.last_entry()
        last = self._last_batch_from(start)
        # A roll or a clean shutdown left the segment's max timestamp as the time index's
        # last entry (seal_time_index); the last batch is checked as well, as the entry
        # is written after it. Both are looked at when first asked for.
        self._max_timestamp = None
        self._last_batch = (last.max_timestamp, last.last_offset) if last is not None else (-1, -1)
        if self.size >= HEADER_SIZE:
            self.first_timestamp = BatchHeader.parse(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        self.bytes_since_index_entry = self.size - (start if len(self.offset_index) else 0)
        return last

    def _last_batch_from(self, start: int) -> BatchHeader | None:
        """The header of the last whole batch from `start` on, as `walk` would end.
        Batches are hopped over by their lengths and only the last header is parsed:
        parsing each one (walk) was a fifth of the time 10,000 partitions of 10
        batches took to load after a clean shutdown (cProfile)."""
        end = self.size
        last: tuple[bytes, int] | None = None  # the window holding the last header, and where
        position = start
        while position + HEADER_SIZE <= end:
            window = os.pread(self.fd, min(_WALK_WINDOW, end - position), position)
            at = 0
            while at + HEADER_SIZE <= len(window):
                _, length = OFFSET_AND_LENGTH.unpack_from(window, at)
                if length < HEADER_SIZE - LOG_OVERHEAD or position + at + length + LOG_OVERHEAD > end:
                    return BatchHeader.parse(*last) if last else None  # garbage or a torn tail
                last = (window, at)
                at += length + LOG_OVERHEAD
            position += at
        return BatchHeader.parse(*last) if last else None

    def truncate_to(self, offset: int) -> None:
        """Remove every batch with base offset >= `offset`."""
        found = self.position_of(offset)
        if found is None:
            return
        position, base = found
        if base < offset:
            position = self._end_of_batch_at(position)
        os.ftruncate(self.fd, position)
        self.size = position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)

    def _end_of_batch_at(self, position: int) -> int:
        _, length = OFFSET_AND_LENGTH.unpack(os.pread(self.fd, LOG_OVERHEAD, position))
        return position + length + LOG_OVERHEAD

    # --- life cycle ----------------------------------------------------------------------

    def close(self) -> None:
        self.release_files()
        if self._pooled:
            OPEN_FILES.forget(self)

    def delete(self) -> None:
        self.close()
        os.unlink(self.log_path)
        self.offset_index.delete()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._time_index_path)  # not read for that
        self.txn_index.delete()


def indexes_missing(directory: str, base_offset: int, present: set[str]) -> bool:
    """A non-empty segment whose offset or time index file is gone (not among the
    `present` names): rebuild them."""
    if all(segment_file_name(base_offset, kind) in present for kind in (".index", ".timeindex")):
        return False
    return os.path.getsize(os.path.join(directory, segment_file_name(base_offset, ".log"))) > 0
