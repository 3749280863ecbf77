"""What a partition remembers about each producer: idempotence and open transactions.

Per producer id: its epoch, the metadata of the last 5 batches it appended (so a retry
of any of them is recognised and answered with its original offsets), the coordinator
epoch of its last marker, and the first offset of its open transaction, if any.

The rules are Kafka's (ProducerStateManager / ProducerAppendInfo):
- a batch equal to a cached one (same epoch, first and last sequence) is a duplicate:
  acknowledged again with its original offsets, not appended;
- a lower epoch is refused (INVALID_PRODUCER_EPOCH);
- a higher epoch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER);
- within an epoch, the first sequence must follow the last one (wrapping from
  Int32.MAX to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER; a producer the partition has
  never seen may start anywhere;
- a non-transactional batch while the producer has a transaction open is refused
  (INVALID_TXN_STATE).
The within-an-epoch rule covers both directions. A sequence ahead of last + 1 is a gap.
A sequence behind it that matches none of the 5 cached batches is a retry of a batch
acknowledged long ago (a producer with more than 5 requests in flight whose first
acknowledgement was lost): it was written once already, so it is refused, never
appended again: Kafka 4's rule, which leaves no duplicate for such a retry.
A refused batch changes no state.

Snapshots (`<offset>.snapshot`) store one entry per producer in Kafka's format:
version int16 (1), CRC-32C uint32 of what follows, then an int32 count of entries of
producerId int64, epoch int16, lastSequence int32, lastOffset int64, offsetDelta int32,
timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64.
"""

from __future__ import annotations

import enum
import os
import struct
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from ottla.protocol.batch import (
    CONTROL_FLAG,
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
)
from ottla.protocol.errors import ErrorCode, KafkaError

from .directories import directory_changed

BATCHES_TO_KEEP = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hI")
_SNAPSHOT_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_KEEP))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


# Sequences wrap from Int32.MAX to 0 (BatchHeader.last_sequence).
_SEQUENCE_SPAN = INT32_MAX + 1


class Verdict(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"  # acknowledge with the cached offsets, append nothing


# The verdicts as plain names: on Python 3.11 reading a member off its class goes through
# EnumType.__getattr__'s slot, and every append with a producer id reads one.
APPEND, DUPLICATE = Verdict.APPEND, Verdict.DUPLICATE


class ProducerStateManager:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        # "topic-partition", as Kafka names the partition in its error messages.
        self.topic_partition = os.path.basename(os.path.normpath(directory))
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction in this partition.
        self.ongoing_txns: dict[int, int] = {}
        # Whether anything changed since the last snapshot.
        self.changed = False
        # When a snapshot file was last created or deleted (directories.py).
        self.directory_stamp = 0

    # --- the append path -----------------------------------------------------------------

    def check(self, header: BatchHeader, offset: int) -> tuple[Verdict, BatchMetadata | None]:
        """Validate a client batch that would be written at `offset` against the
        producer's state: append it, or answer it as a duplicate with the cached
        metadata. Raises KafkaError (with Kafka's message) if it is refused; a refusal
        changes nothing."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            return APPEND, None
        # The header's fields in one unpacking (each read by name is a descriptor's
        # call), not its properties (last_sequence and the entry's last_seq are written
        # out below: a property is a Python call), and the cached batches looked at only
        # within the epoch: this runs for every batch with a producer id.
        _, _, _, _, _, attributes, delta, _, _, _, epoch, first_seq, _ = header
        batches = entry.batches
        if batches and epoch == entry.epoch:
            last_seq = NO_SEQUENCE if first_seq == NO_SEQUENCE else (first_seq + delta) % _SEQUENCE_SPAN
            for batch in batches:
                if batch.first_seq == first_seq and batch.last_seq == last_seq:
                    return DUPLICATE, batch
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {pid} at offset {offset} in {self.topic_partition} is {epoch}, "
                f"which is smaller than the last seen epoch {entry.epoch}",
            )
        if epoch > entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"Invalid sequence number for new epoch of {self._where(pid, offset)}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {entry.epoch} (current producer epoch)",
                )
        elif entry.epoch != NO_PRODUCER_EPOCH and not (
                # In sequence: the last one's next, wrapping from Int32.MAX to 0.
                first_seq == (current := batches[-1].last_seq if batches else NO_SEQUENCE) + 1
                or (current == INT32_MAX and first_seq == 0)):
            # Ahead of last + 1 (a gap) or behind it and not cached (a retry of a batch
            # already written and forgotten): either way Kafka refuses it. With no batch
            # cached in this epoch (a marker began it) the expected sequence is 0.
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"Out of order sequence number for {self._where(pid, offset)}: {first_seq} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)",
            )
        if not attributes & TRANSACTIONAL_FLAG and entry.current_txn_first_offset >= 0:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                f"Expected transactional write from {self._where(pid, offset)}",
            )
        return APPEND, None

    def _where(self, producer_id: int, offset: int) -> str:
        """Where a refused batch was, as Kafka's messages say it."""
        return f"producer {producer_id} at offset {offset} in partition {self.topic_partition}"

    def check_epoch(self, header: BatchHeader) -> None:
        """The epoch rule alone, for records a coordinator writes for a producer."""
        entry = self.producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"epoch {header.producer_epoch} is older than the current epoch {entry.epoch} "
                f"of producer {header.producer_id}",
            )

    def record(self, header: BatchHeader, base_offset: int, track_sequence: bool = True) -> None:
        """Update the producer's state for a batch written at `base_offset`. Also used to
        replay the log at start-up, where no check is made. `track_sequence` is False for
        a coordinator's own records, which carry no sequence."""
        # The fields read in one unpacking of the header (each read by name is a
        # descriptor's call): this runs for every batch with a producer id.
        _, _, _, _, _, attributes, delta, _, max_timestamp, pid, epoch, first_seq, _ = header
        self.changed = True
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_timestamp = max_timestamp
        if attributes & CONTROL_FLAG:
            return  # the marker's effect is `complete_txn`'s business
        if track_sequence:
            # Built as a tuple (a named tuple's own __new__ is a Python call), and
            # header.last_sequence written out (so is a property).
            entry.batches.append(tuple.__new__(BatchMetadata, (
                first_seq, NO_SEQUENCE if first_seq == NO_SEQUENCE else (first_seq + delta) % _SEQUENCE_SPAN,
                base_offset, base_offset + delta, max_timestamp)))
        if attributes & TRANSACTIONAL_FLAG and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base_offset
            self.ongoing_txns[pid] = base_offset

    def complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int | None:
        """A marker was written: close the producer's open transaction. Returns the
        transaction's first offset, or None if it had none open here."""
        self.changed = True
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch=producer_epoch)
        if producer_epoch > entry.epoch:
            entry.epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing_txns.pop(producer_id, None)
        return first if first >= 0 else None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for `producer.id.expiration.ms` (their last batch's
        timestamp is that old) unless a transaction of theirs is open."""
        expired = [pid for pid, entry in self.producers.items()
                   if entry.current_txn_first_offset < 0 and entry.last_timestamp < now_ms - expiration_ms]
        for pid in expired:
            del self.producers[pid]
        self.changed = self.changed or bool(expired)
        return expired

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns.values()) if self.ongoing_txns else None

    def truncate_to(self, offset: int) -> None:
        """Forget everything at or after `offset` (the log was cut there). Cached batches
        past it are dropped; producers left with nothing are forgotten."""
        for pid in list(self.producers):
            entry = self.producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            entry.batches.clear()
            entry.batches.extend(kept)
            if entry.current_txn_first_offset >= offset:
                entry.current_txn_first_offset = -1
                self.ongoing_txns.pop(pid, None)
            if not entry.batches and entry.current_txn_first_offset < 0:
                del self.producers[pid]

    # --- snapshots -----------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self, names: list[str] | None = None) -> list[int]:
        """The offsets of the snapshot files, oldest first; `names`: the directory's
        listing, if the caller has it."""
        offsets = []
        for name in os.listdir(self.directory) if names is None else names:
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    offsets.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
                except ValueError:
                    continue
        return sorted(offsets)

    def write_snapshot(self, offset: int, keep: int = 2) -> None:
        """Write the state as of `offset` (the log end offset) and keep the newest `keep`."""
        try:
            self.write_snapshot_file(offset, self.encode_snapshot(), keep)
        except OSError:
            self.changed = True
            raise

    def encode_snapshot(self) -> bytes:
        """The snapshot file's bytes for the state now. Marks the state unchanged: a
        caller whose write then fails sets `changed` again."""
        body = bytearray(_SNAPSHOT_COUNT.pack(len(self.producers)))
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            body += _SNAPSHOT_ENTRY.pack(
                entry.producer_id,
                entry.epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                (last.last_offset - last.first_offset) if last else 0,
                entry.last_timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )
        self.changed = False
        return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body

    def write_snapshot_file(self, offset: int, data: bytes, keep: int = 2) -> None:
        """Write encoded snapshot bytes as `<offset>.snapshot` (aside, fsynced, renamed)
        and keep the newest `keep`. Touches only files, never the state: a worker
        thread may run it (the broker's checkpoint does, for thousands of partitions)."""
        path = self.snapshot_path(offset)
        # Named per thread: the event loop (a segment roll) and a checkpoint's worker may
        # write the same offset's snapshot at once.
        tmp = f"{path}.{threading.get_native_id()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            os.unlink(tmp)  # a full disk: leave no half snapshot behind
            raise
        os.replace(tmp, path)
        for old in self.snapshot_offsets()[:-keep]:
            try:
                os.unlink(self.snapshot_path(old))
            except FileNotFoundError:
                pass  # the other writer took it first
        # The rename and the deletions reach the disk with the partition's next flush:
        # until then a power loss may bring back the older snapshots or lose the new one.
        self.directory_stamp = directory_changed()

    def load_snapshot(self, max_offset: int, names: list[str] | None = None) -> int | None:
        """Load the newest valid snapshot at or below `max_offset`. Newer ones (from a log
        that has since been cut) are deleted, corrupt ones skipped. Returns its offset.
        `names`: the directory's listing, if the caller has it."""
        for offset in reversed(self.snapshot_offsets(names)):
            path = self.snapshot_path(offset)
            if offset > max_offset:
                os.unlink(path)
                self.directory_stamp = directory_changed()
                continue
            # Read with os calls: a buffered file object costs five more system calls, once
            # per partition at start-up. A short read fails the checksum like a torn file.
            fd = os.open(path, os.O_RDONLY)
            try:
                data = os.read(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
            entries = _parse_snapshot(data)
            if entries is None:
                continue
            self.producers.clear()
            self.ongoing_txns.clear()
            for entry in entries:
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset >= 0:
                    self.ongoing_txns[entry.producer_id] = entry.current_txn_first_offset
            return offset
        return None


# `record_batch(manager, header, base_offset, track_sequence)` is
# `manager.record(header, base_offset, track_sequence)`: in C (storage/_producer_state.c,
# which makes no Python call for a producer the partition knows) unless it could not be
# built or OTTLA_PURE_PYTHON=1 asks for the Python path; the append path calls it.
# ProducerStateManager.record stays the specification: tests/unit/test_producer_state_record.py
# holds the two to the same state.
RecordBatch = Callable[[ProducerStateManager, BatchHeader, int, bool], None]
try:
    from ._producer_state import record as _record_in_c
    from ._producer_state import set_batch_metadata_type as _set_batch_metadata_type
except ImportError:  # installed without a C compiler: the Python method
    _record_in_c = None
else:
    _set_batch_metadata_type(BatchMetadata)
record_batch: RecordBatch = (
    _record_in_c if _record_in_c is not None and os.environ.get("OTTLA_PURE_PYTHON", "") in ("", "0")
    else ProducerStateManager.record)


def _parse_snapshot(data: bytes) -> list[ProducerEntry] | None:
    if len(data) < _SNAPSHOT_HEAD.size + _SNAPSHOT_COUNT.size:
        return None
    version, crc = _SNAPSHOT_HEAD.unpack_from(data)
    body = data[_SNAPSHOT_HEAD.size :]
    if version != SNAPSHOT_VERSION or crc32c.crc32c(body) != crc:
        return None
    (count,) = _SNAPSHOT_COUNT.unpack_from(body)
    if len(body) != _SNAPSHOT_COUNT.size + count * _SNAPSHOT_ENTRY.size:
        return None
    entries = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first in _SNAPSHOT_ENTRY.iter_unpack(
        body[_SNAPSHOT_COUNT.size :]
    ):
        entry = ProducerEntry(pid, epoch=epoch, coordinator_epoch=coord_epoch,
                              current_txn_first_offset=txn_first, last_timestamp=ts)
        if last_seq != NO_SEQUENCE:
            first_seq = (last_seq - delta) % (INT32_MAX + 1)
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
        entries.append(entry)
    return entries


def read_snapshot_file(path: str) -> list[ProducerEntry] | None:
    """The entries of a snapshot file, or None if it is damaged (for dump-log)."""
    with open(path, "rb") as f:
        return _parse_snapshot(f.read())
