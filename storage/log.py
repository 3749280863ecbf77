"""One partition: a log of segments, its offsets and its producers.

There is one append path for client batches (`append_batch`) and one for
transaction markers (`append_marker`); both assign offsets, write the bytes with one
`writev`, index them, and update producer state. Reads (`read`) locate a position
through the offset index and return whole batches, bounded by the high watermark or,
for read_committed, by the last stable offset.

Ottla is a single replica, so the high watermark is the log end offset: a batch is
committed as soon as it is written.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator
from itertools import pairwise
from typing import NamedTuple

from ottla.protocol.batch import BatchHeader, iter_records
from ottla.protocol.compression import EXPANSION_LIMIT
from ottla.protocol.control import ControlType, EndTxnMarker, marker_batch_with_header, parse_marker
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger

from .directories import DirectorySync
from .file_slice import FileSlice
from .log_config import LogConfig
from .log_recovery import abort_entries_lost, recover_segments
from .producer_state import DUPLICATE, ProducerStateManager, record_batch
from .segment import LogSegment, ReadSlice, indexes_missing, recover_interrupted_cleaning, segment_file_name
from .txn_index import AbortedTxn

LOG_SUFFIX = ".log"
# Positions remembered for where consumers will read next (one per consumer, roughly).
_READ_POSITIONS_KEPT = 16

_log = get_logger("ottla.log")
_ABORT = ControlType.ABORT  # read once: off its class, some hundreds of instructions a read


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    duplicate: bool = False
    # A duplicate's cached batch timestamp: Kafka answers it as the log append time.
    timestamp: int = -1


class FetchResult(NamedTuple):
    """What PartitionLog.read answers: a tuple, made by tuple's own constructor there, at
    every Fetch of every partition (a frozen dataclass's __init__ cost about 7.5k
    instructions of a Fetch's, its fields set one by one through object.__setattr__)."""

    records: bytes | FileSlice | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None


class PartitionLog:
    leader_epoch = 0  # a single broker never changes leader

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        # The segments oldest first, and beside them their base offsets: lookups bisect
        # the offsets, and a segment's neighbour is found by position, never by
        # searching the list. Both change only through `segments =`, `roll`,
        # `delete_oldest_segments` and `replace_segment`.
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.producer_state = ProducerStateManager(directory)
        # Called as on_append(topic, partition) after every write (the broker wakes
        # long-polling fetches with it), or only for a partition in `appends_wanted` if
        # given: a Python call less an append to a partition no one waits on.
        self.on_append: Callable[[str, int], None] | None = None
        self.appends_wanted: Container[tuple[str, int]] | None = None
        # --fsync (LogManager.fsync_on_ack): records become readable once fsynced, as
        # Kafka's high watermark moves once the in-sync replicas have them; and
        # on_flushed(topic, partition) is called when they do (waking long-polling fetches).
        self.visible_when_flushed = False
        self.on_flushed: Callable[[str, int], None] | None = None
        # Called as on_roll(log, base_offset) after a roll: the broker flushes everything
        # below the new segment in a worker thread, as Kafka's roll schedules "flush-log".
        self.on_roll: Callable[[PartitionLog, int], None] | None = None
        # Fault injection's disk (LogManager.set_write_check): called as
        # write_check(topic, partition) before every write; the OSError it raises fails
        # the write as the disk's own would, before a byte is written. None: no fault set.
        self.write_check: Callable[[str, int], None] | None = None
        self.truncated_bytes = 0  # cut off torn tails at start-up, for the log line
        self.checked_bytes = 0  # read and checked at start-up
        # Everything below this offset has been fsynced: Kafka's recovery point.
        self.flushed_offset = 0
        self.unflushed_messages = 0
        self.last_flush_ms = time.time() * 1000
        # Changes to directory entries, and those the last flush made durable.
        self.directories = DirectorySync(directory)
        self._read_positions: OrderedDict[int, tuple[LogSegment, int]] = OrderedDict()

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        os.makedirs(directory, exist_ok=True)
        log = cls(directory, topic, partition, config)
        log.directories.created()
        log.segments = [LogSegment(directory, 0)]
        return log

    @classmethod
    def open(cls, directory: str, topic: str, partition: int, config: LogConfig, *, clean: bool,
             recovery_point: int, log_start_offset: int) -> PartitionLog:
        """Open an existing partition. After an unclean shutdown every segment from the
        recovery point on is checked batch by batch and a torn tail is cut off."""
        log = cls(directory, topic, partition, config)
        # One listing of the directory serves every question below (with 10,000
        # partitions, each further listdir or stat of a partition costs ~0.1 s).
        names = os.listdir(directory)
        if recover_interrupted_cleaning(directory, names):
            names = os.listdir(directory)
        present = set(names)
        bases = sorted(
            int(name[: -len(LOG_SUFFIX)]) for name in names
            if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit()
        )
        # Checked before the segments open (which creates missing index files empty).
        indexes_lost = {base for base in bases if indexes_missing(directory, base, present)}
        log.segments = [LogSegment(directory, base, has_txn_index=segment_file_name(base, ".txnindex") in present)
                        for base in bases] or [LogSegment(directory, 0)]
        recovered = recover_segments(log.segments, config.index_interval_bytes, indexes_lost, clean, recovery_point)
        log.segments, last_header, checked = recovered.segments, recovered.last_header, recovered.checked
        log.truncated_bytes += recovered.truncated_bytes
        log.checked_bytes += recovered.checked_bytes
        log.log_end_offset = last_header.last_offset + 1 if last_header else log.segments[0].base_offset
        log.log_start_offset = max(log_start_offset, log.segments[0].base_offset)
        log.flushed_offset = log.log_end_offset if clean else min(recovery_point, log.log_end_offset)
        if not clean:
            # A torn tail may have taken ABORT markers whose .txnindex entries were
            # written: they must not hide the records written at those offsets next.
            log.active.txn_index.truncate_to(log.log_end_offset)
        log._rebuild_producer_state(names, checked, reindex_from=log.flushed_offset)
        return log

    def _rebuild_producer_state(self, names: list[str] | None = None,
                                checked: list[tuple[LogSegment, int, BatchHeader]] | None = None,
                                reindex_from: int | None = None) -> None:
        """Load the newest snapshot and replay the log after it. `names`: the
        directory's listing, if the caller has it. `checked`: (segment, position,
        header) of the batches recovery has just read, up to the log end: if they reach
        back to the snapshot, they are replayed instead of walking the log again (the
        second walk was 23 % of a start after kill -9 at 10,000 partitions).
        `reindex_from`: the recovery point after a crash; an ABORT marker from there on
        whose .txnindex entry is missing gets it written again."""
        state = self.producer_state
        start = state.load_snapshot(self.log_end_offset, names)
        if (reindex_from is not None and start is not None and start > reindex_from
                and abort_entries_lost(
                    checked if checked and checked[0][2].base_offset <= reindex_from
                    else self._batches_after(reindex_from), reindex_from, start)):
            # A snapshot newer than the recovery point (a roll's, the checkpoint's) can be
            # on disk while the .txnindex entries of markers before it are not (a power
            # loss in the middle of a flush, or the kernel writing back the log and not
            # the index): replaying from it would never meet those markers. Replay from
            # one at or before the recovery point instead (newer ones are dropped), or
            # from the log start, as Kafka rebuilds the index of every segment it recovers.
            state.producers.clear()
            state.ongoing_txns.clear()
            start = state.load_snapshot(reindex_from)
        if start is None:
            start = self.log_start_offset
        if start >= self.log_end_offset:
            return  # the snapshot is at the log end (a clean shutdown wrote it there)
        # Every batch before the first checked one ends before it, so if that one
        # starts at or before the snapshot, the checked batches hold all to replay.
        batches: Iterable[tuple[LogSegment, int, BatchHeader]] = (
            checked if checked and checked[0][2].base_offset <= start else self._batches_after(start))
        for segment, position, header in batches:
            if header.last_offset < start or not header.has_producer_id:
                continue
            state.record(header, header.base_offset)
            if header.is_control:
                marker = parse_marker(segment.pread(header.size, position))
                # A marker's .txnindex entry is written right after it, so replay only
                # closes the transaction in memory; but a kill -9 between the two, past
                # the recovery point, leaves the marker without its entry, and
                # read_committed readers would get the aborted records. Kafka rebuilds
                # the index of what recovery checks; here what is missing is added.
                missing = (reindex_from is not None and header.base_offset >= reindex_from
                           and not segment.txn_index.has_entry(header.producer_id, header.base_offset))
                self._finish_txn(header.producer_id, header.producer_epoch, marker, header.base_offset,
                                 segment, write_index=missing)

    def _batches_after(self, start: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, position, header) of every batch from the one holding `start` on,
        walking the segments."""
        for i, segment in enumerate(self.segments):
            next_base = self._next_segment_base(i)
            if next_base is not None and next_base <= start:
                continue
            begin = 0
            if segment.base_offset < start:
                found = segment.position_of(start)
                if found is None:
                    continue
                begin = found[0]
            for position, header in segment.walk(begin):
                yield segment, position, header

    # --- the segment list -----------------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (read only: change them through the methods)."""
        return self._segments

    @segments.setter
    def segments(self, segments: list[LogSegment]) -> None:
        self._segments = list(segments)
        self._base_offsets = [segment.base_offset for segment in self._segments]

    def replace_segment(self, old: LogSegment, new: LogSegment) -> None:
        """Put `new` (same base offset: compaction's cleaned copy) in place of `old`."""
        i = self._segment_index(old.base_offset)
        assert i >= 0 and self._segments[i] is old and new.base_offset == old.base_offset
        self._segments[i] = new

    def _next_segment_base(self, i: int) -> int | None:
        """The base offset of the segment after the `i`th, None after the active one."""
        return self._base_offsets[i + 1] if i + 1 < len(self._base_offsets) else None

    # --- offsets -------------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def high_watermark(self) -> int:
        """The end of what consumers may read: the log end, or with --fsync the end of
        what is fsynced. Readable before durable, a record a power loss then took could
        have been consumed and its offset committed: the group would skip whatever is
        written at that offset next, and an exactly-once pipeline would keep the output
        of an input that is gone."""
        if self.visible_when_flushed:
            return max(min(self.flushed_offset, self.log_end_offset), self.log_start_offset)
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        return self.high_watermark if first_unstable is None else min(first_unstable, self.high_watermark)

    # --- appending -----------------------------------------------------------------------

    def append_batch(self, records: bytes | memoryview, header: BatchHeader,
                     from_coordinator: bool = False) -> AppendResult:
        """Append a validated batch, applying the idempotence rules when it carries a
        producer id. A coordinator's own transactional records (offsets committed in a
        transaction) carry no sequence: only the producer's epoch is checked."""
        track_sequence = True
        state = self.producer_state
        has_producer_id = header.producer_id >= 0
        if has_producer_id:
            if from_coordinator:
                state.check_epoch(header)
                track_sequence = False
            else:
                verdict, duplicate = state.check(header, self.log_end_offset)
                if verdict is DUPLICATE:
                    assert duplicate is not None
                    if duplicate.last_offset >= self.flushed_offset and self.on_append is not None:
                        # The original is written but maybe not yet fsynced (its own
                        # request still waits for --fsync's group commit): reported as
                        # a write, so that this acknowledgement waits for that fsync too.
                        self.on_append(self.topic, self.partition)
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate=True,
                                        timestamp=duplicate.timestamp)
        base_offset = self.log_end_offset
        self._write(records, header, base_offset)
        if has_producer_id:
            record_batch(state, header, base_offset, track_sequence)
        # Built as a tuple: the named tuple's own __new__ (with its defaults) is a Python call.
        return tuple.__new__(AppendResult, (base_offset, base_offset + header.last_offset_delta, False, -1))

    def append_marker(self, producer_id: int, producer_epoch: int, marker: EndTxnMarker) -> int:
        """Write a COMMIT or ABORT control batch for a producer and close its transaction
        here. Returns the marker's offset."""
        entry = self.producer_state.producers.get(producer_id)
        if entry is not None and marker.coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker from coordinator epoch {marker.coordinator_epoch} < {entry.coordinator_epoch}",
            )
        batch, header = marker_batch_with_header(marker, producer_id, producer_epoch, int(time.time() * 1000))
        offset = self.log_end_offset
        self._write(batch, header, offset)
        record_batch(self.producer_state, header, offset, True)
        # The segment written to, off the list, and write_index by position: the `active` and
        # `segments` properties and a keyword would each cost a Python call, at every marker.
        self._finish_txn(producer_id, producer_epoch, marker, offset, self._segments[-1], True)
        return offset

    def _finish_txn(self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, marker_offset: int,
                    segment: LogSegment, write_index: bool) -> None:
        first = self.producer_state.complete_txn(producer_id, producer_epoch, marker.coordinator_epoch)
        if marker.type is _ABORT and first is not None and write_index:
            # The last stable offset right after the marker (as Kafka records it), worked
            # out from the marker's offset so that replay writes what the append did.
            first_unstable = self.producer_state.first_unstable_offset()
            lso = marker_offset + 1 if first_unstable is None else min(first_unstable, marker_offset + 1)
            segment.txn_index.append(AbortedTxn(producer_id, first, marker_offset, lso))

    def _write(self, records: bytes | memoryview, header: BatchHeader, base_offset: int) -> None:
        size = len(records)
        last_offset = base_offset + header.last_offset_delta
        max_timestamp = header.max_timestamp
        config = self.config
        active = self._segments[-1]
        try:
            # A full active segment, or one older than segment.ms, rolls first.
            if active.size and (active.size + size > config.segment_bytes
                                or max_timestamp - active.first_timestamp > config.segment_ms):
                active = self.roll()
            if self.write_check is not None:
                self.write_check(self.topic, self.partition)
            active.append(records, size, base_offset, last_offset, max_timestamp, config.index_interval_bytes,
                          self.leader_epoch)
        except OSError as exc:
            raise KafkaError(ErrorCode.kafka_storage_error, f"write failed: {exc}") from exc
        self.log_end_offset = last_offset + 1
        unflushed = self.unflushed_messages = self.unflushed_messages + header.record_count
        if unflushed >= config.flush_messages:
            self.flush()
        if self.on_append is not None and (self.appends_wanted is None
                                           or (self.topic, self.partition) in self.appends_wanted):
            self.on_append(self.topic, self.partition)

    def roll(self) -> LogSegment:
        """Close the active segment for writing and start a new one at the log end."""
        self.active.seal_time_index()
        segment = LogSegment(self.directory, self.log_end_offset)
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)
        # Kafka snapshots producer state at every roll, named by the new base offset. A
        # snapshot only shortens the next recovery (it is written aside and renamed, so a
        # failed one leaves nothing torn): a full disk must not fail the roll for it.
        try:
            self.producer_state.write_snapshot(self.log_end_offset)
        except OSError as exc:
            _log.warning("producer state snapshot not written", topic=self.topic, partition=self.partition,
                         error=str(exc))
        if self.on_roll is not None:
            self.on_roll(self, segment.base_offset)
        return segment

    # --- durability ------------------------------------------------------------------------

    def directory_stamps(self) -> tuple[int, int]:
        """The latest changes to (this partition's directory, the data directory's entry
        for it), for `mark_flushed` once a flush of `unflushed_files` has synced them.
        Files are created only in the unflushed segments (the active one, or one
        recovery checks), so only those are asked."""
        first = max(self._segment_index(self.flushed_offset), 0)
        return self.directories.latest([self.producer_state.directory_stamp,
                                        *(segment.directory_stamp for segment in self._segments[first:])])

    def directories_unsynced(self) -> bool:
        return self.directories.unsynced(self.directory_stamps())

    def unflushed_files(self, below: int | None = None) -> list[int]:
        """Descriptors (duplicated: the caller closes them) of every file written since the
        last flush (in the segments below offset `below` only, if given: a rolled
        segment's flush leaves the new active one), and of the directories whose entries
        changed since (a new segment: its fsynced data is lost with its name), for an
        fsync that may run in another thread."""
        fds: list[int] = []
        # Segments are flushed oldest first, so the unflushed ones are a suffix: the one
        # holding the recovery point and every later one.
        first = max(self._segment_index(self.flushed_offset), 0)
        end = len(self._segments) if below is None else self._segment_index(below - 1) + 1
        try:
            for segment in self._segments[first:end]:
                for fd in segment.file_descriptors():
                    fds.append(os.dup(fd))
            fds += self.directories.descriptors(self.directory_stamps())
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def flush(self) -> None:
        """fsync what was written since the last flush and move the recovery point."""
        end = self.log_end_offset
        stamps = self.directory_stamps()
        for fd in self.unflushed_files():
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.mark_flushed(end, stamps)

    def mark_flushed(self, offset: int, directory_stamps: tuple[int, int] = (0, 0)) -> None:
        """After an fsync of `unflushed_files`: everything below `offset` is durable, and
        the directory entries as of `directory_stamps` (taken before the files were)."""
        moved = offset > self.flushed_offset
        self.flushed_offset = max(self.flushed_offset, offset)
        self.directories.synced(directory_stamps)
        # Kafka's count (log end offset - recovery point): a rolled segment's flush, or
        # appends during the fsync, leave the records after `offset` to flush.messages.
        self.unflushed_messages = max(self.log_end_offset - self.flushed_offset, 0)
        self.last_flush_ms = time.time() * 1000
        if moved and self.visible_when_flushed and self.on_flushed is not None:
            self.on_flushed(self.topic, self.partition)

    # --- the head of the log --------------------------------------------------------------

    def delete_oldest_segments(self, segments: list[LogSegment]) -> None:
        """Delete a prefix of closed segments (retention) and move the log start offset
        past them."""
        if not segments:
            return
        assert segments == self.segments[: len(segments)] and len(segments) < len(self.segments)
        for segment in segments:
            segment.delete()
        self.directories.changed()
        del self._segments[: len(segments)]
        del self._base_offsets[: len(segments)]
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.forget_read_positions()

    def forget_read_positions(self) -> None:
        """Segments were replaced or removed: remembered read positions may be stale."""
        self._read_positions.clear()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make `offset` the log start offset (-1: the high watermark).
        Returns the new log start offset."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"offset {offset} is outside [0, {self.high_watermark}]")
        self.log_start_offset = max(self.log_start_offset, offset)
        whole = [s for s, after in pairwise(self.segments) if after.base_offset <= self.log_start_offset]
        self.delete_oldest_segments(whole)
        return self.log_start_offset

    # --- reading -------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, read_committed: bool, min_one: bool,
             in_place: bool = False) -> FetchResult:
        """Whole batches from the one holding `offset`, up to the high watermark (or the
        LSO for read_committed), within `max_bytes` (or one batch if `min_one`).
        `in_place`: a large range may come back as a FileSlice (LogSegment.read)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")
        # high_watermark's and last_stable_offset's, in place: at every Fetch of every partition
        # their calls and min() were most of a partition at the log end's cost.
        high_watermark = self.high_watermark if self.visible_when_flushed else self.log_end_offset
        ongoing = self.producer_state.ongoing_txns  # producer id -> its transaction's first offset
        lso = high_watermark
        if ongoing:
            first_unstable = min(ongoing.values())
            if first_unstable < high_watermark:
                lso = first_unstable
        upper = lso if read_committed else high_watermark
        records = aborted = None
        if offset < upper:
            located = self._locate(offset)
            if located is not None:
                segment, position = located
                got = segment.read(position, max_bytes, upper, min_one, in_place)
                if got is not None:
                    records = got.data
                    self._remember_position(got, segment)
                    if read_committed:
                        aborted = self.aborted_between(offset, got.next_offset - 1)
        return tuple.__new__(FetchResult, (records, high_watermark, lso, self.log_start_offset,
                                           (aborted or []) if read_committed else None))

    def batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, bytes) of every batch holding offsets >= `start_offset`, oldest first.
        For loading internal topics and for tools, not for the fetch path. The first
        segment is entered where its offset index points, so a reader that stops and
        comes back at the next offset (coordinator loading) does not walk it again."""
        first = max(self._segment_index(start_offset), 0)
        for i, segment in enumerate(self.segments[first:]):
            start = 0
            if i == 0:
                found = segment.position_of(start_offset)
                if found is None:
                    continue  # the offset is past this segment's batches
                start = found[0]
            for position, header in segment.walk(start):
                if header.last_offset >= start_offset:
                    yield header, segment.pread(header.size, position)

    def _segment_index(self, offset: int) -> int:
        """Index in `segments` of the segment whose range holds `offset` (-1: before all)."""
        return bisect_right(self._base_offsets, offset) - 1

    def _locate(self, offset: int) -> tuple[LogSegment, int] | None:
        """The segment and file position of the batch holding `offset`."""
        i = self._segment_index(offset)
        if i < 0:
            return None
        remembered = self._read_positions.get(offset)
        # A remembered position is good while its segment is still the one holding the
        # offset (compaction and retention replace or remove segments).
        if remembered is not None and remembered[0] is self._segments[i] and remembered[1] < remembered[0].size:
            return remembered
        for segment in self._segments[i:]:
            found = segment.position_of(offset)
            if found is not None:
                return segment, found[0]
            # The offset lies past this segment's last batch: the next segment holds it.
        return None

    def _remember_position(self, got: ReadSlice, segment: LogSegment) -> None:
        if got.next_position >= segment.size:
            return  # the next read starts in the next segment (or waits for data)
        positions = self._read_positions
        positions[got.next_offset] = (segment, got.next_position)
        positions.move_to_end(got.next_offset)
        while len(positions) > _READ_POSITIONS_KEPT:
            positions.popitem(last=False)

    def aborted_between(self, first: int, last: int) -> list[AbortedTxn]:
        """The aborted transactions (.txnindex entries) overlapping [first, last]: what a
        read_committed Fetch returns beside its records, and what tools mark aborted."""
        # An entry sits in the segment of its marker, so no segment before the one holding
        # `first` can have one that reaches it; later ones can (a long transaction).
        aborted: list[AbortedTxn] = []
        for segment in self.segments[max(self._segment_index(first), 0):]:
            aborted.extend(segment.txn_index.overlapping(first, last))
        return aborted

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp`."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            found = segment.first_batch_reaching(timestamp)
            if found is None:
                continue
            position, header = found
            if header.is_control or header.compression not in (0, 1):
                return max(header.base_offset, self.log_start_offset), header.max_timestamp
            records = iter_records(segment.pread(header.size, position),
                                   EXPANSION_LIMIT * self.config.max_message_bytes)
            for record in records:
                if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                    return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best = None
        for segment in self.segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best[1]):
                best = (segment, segment.max_timestamp)
        if best is None:
            return None
        found = self.offset_for_timestamp(best[1])
        return found

    # --- life cycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Clean close: indexes written (the active segment's max timestamp as its time
        index's last entry, as a roll leaves it), producer state snapshotted at the log
        end, and all of it flushed (with the snapshot's directory entry): the clean
        shutdown marker written after it vouches for every file, and a power loss after
        it must not take what it vouches for."""
        self.active.seal_time_index()
        self.producer_state.write_snapshot(self.log_end_offset)
        self.flush()
        for segment in self.segments:
            segment.close()

    def close_files(self) -> None:
        """Let go of every file descriptor, writing nothing (the partition is being
        deleted): the log and all three indexes of each segment."""
        for segment in self.segments:
            try:
                segment.close()
            except OSError:
                pass

