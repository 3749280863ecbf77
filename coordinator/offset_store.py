"""Committed offsets, and the `__consumer_offsets` topic that keeps them and the groups'
own records.

Every record of a group goes to the partition abs(hashCode(group id)) % partitions of
`__consumer_offsets` (the rule transactional ids follow in `__transaction_state`). The
store appends its offset records there, and appends for a group's membership protocol
whatever records that protocol keeps about the group (`append_group_records`). At
start-up it replays the topic: offset records rebuild the offsets, every other record
is handed back to the registry, which knows the group types.

It holds, per group:
- the committed offset of each partition, with the position of its record;
- offsets committed inside a producer's open transaction (TxnOffsetCommit), pending
  until the COMMIT or ABORT marker reaches the group's partition.

It knows nothing of members or generations: the registry checks a commit against the
group's membership before it gets here (Kafka splits its coordinator the same way,
into OffsetMetadataManager and GroupMetadataManager).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.control import ControlType, parse_marker
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log import PartitionLog
from ottla.storage.log_manager import LogManager

from .append_errors import coordinator_append_error
from .offsets_log import (
    TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    decode_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
)
from .transaction_log import partition_for

TopicPartition = tuple[str, int]
Records = list[tuple[bytes, bytes | None]]  # (key, value); a None value is a tombstone


@dataclass(frozen=True, slots=True)
class StoredOffset:
    offset: CommittedOffset
    record_offset: int  # where the commit record sits in __consumer_offsets


@dataclass
class GroupOffsets:
    committed: dict[TopicPartition, StoredOffset] = field(default_factory=dict)
    # producer id -> offsets committed in its open transaction.
    pending_txn: dict[int, dict[TopicPartition, StoredOffset]] = field(default_factory=dict)

    def unstable(self) -> set[TopicPartition]:
        """Partitions with an offset waiting for its transaction's end."""
        partitions: set[TopicPartition] = set()
        for pending in self.pending_txn.values():
            partitions |= set(pending)
        return partitions


class OffsetStore:
    def __init__(self, logs: LogManager, create_topic: Callable[[], None], num_partitions: int,
                 max_metadata_bytes: int, wall_clock: Callable[[], float] = time.time) -> None:
        self.logs = logs
        self.create_topic = create_topic
        self.num_partitions = num_partitions
        self.max_metadata_bytes = max_metadata_bytes
        self.wall_clock = wall_clock
        self.groups: dict[str, GroupOffsets] = {}

    # --- __consumer_offsets --------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        topic = self.logs.topic(TOPIC)
        partitions = len(topic.partitions) if topic is not None else self.num_partitions
        return partition_for(group_id, partitions)

    def _log(self, group_id: str) -> PartitionLog:
        if self.logs.topic(TOPIC) is None:
            self.create_topic()
        log = self.logs.partition(TOPIC, self.partition_for(group_id))
        assert log is not None
        return log

    def _append(self, group_id: str, records: Records, producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Append records to the group's partition; returns the first record's offset.
        With a producer id they form a transactional batch, checked against the
        producer's epoch in that partition (stale epochs are refused)."""
        now = int(self.wall_clock() * 1000)
        batch = build_batch(
            [encode_record(k, v, offset_delta=i) for i, (k, v) in enumerate(records)],
            timestamp=now, producer_id=producer_id, producer_epoch=producer_epoch,
            attributes=TRANSACTIONAL_FLAG if producer_id >= 0 else 0,
        )
        try:
            result = self._log(group_id).append_batch(batch, BatchHeader.parse(batch), from_coordinator=True)
        except KafkaError as exc:
            raise coordinator_append_error(exc) from None
        return result.base_offset

    def append_group_records(self, group_id: str, records: Records) -> int:
        """Append records a membership protocol keeps about the group (not offsets)."""
        return self._append(group_id, records)

    def load(self, replay_group_record: Callable[[GroupKey, bytes | None], None]) -> None:
        """Rebuild the offsets from `__consumer_offsets`, handing each group record (key,
        value or None for a tombstone) to `replay_group_record` in log order."""
        topic = self.logs.topic(TOPIC)
        if topic is None:
            return
        for log in topic.partitions:
            # producer id -> (group, tp, offset) written in its open transaction here.
            pending: dict[int, list[tuple[str, TopicPartition, StoredOffset]]] = {}
            for header, batch in log.batches(log.log_start_offset):
                if header.is_control:
                    marker = parse_marker(batch)
                    for group_id, tp, offset in pending.pop(header.producer_id, []):
                        if marker.type is ControlType.COMMIT:
                            self._offsets(group_id).committed[tp] = offset
                    continue
                for record in iter_records(batch):
                    if record.key is None:
                        continue
                    key = decode_key(record.key)
                    if isinstance(key, OffsetKey):
                        tp = (key.topic, key.partition)
                        if header.is_transactional:
                            assert record.value is not None
                            value = StoredOffset(decode_offset_value(record.value), record.offset)
                            pending.setdefault(header.producer_id, []).append((key.group, tp, value))
                        elif record.value is None:
                            self._offsets(key.group).committed.pop(tp, None)
                        else:
                            self._offsets(key.group).committed[tp] = StoredOffset(
                                decode_offset_value(record.value), record.offset)
                    elif key is not None:
                        replay_group_record(key, record.value)
            for producer_id, entries in pending.items():
                for group_id, tp, offset in entries:
                    self._offsets(group_id).pending_txn.setdefault(producer_id, {})[tp] = offset

    def _offsets(self, group_id: str) -> GroupOffsets:
        offsets = self.groups.get(group_id)
        if offsets is None:
            offsets = self.groups[group_id] = GroupOffsets()
        return offsets

    def forget(self, group_id: str) -> None:
        """Drop what is held for a group whose deletion is being replayed (its offsets'
        tombstones precede the group's own, see `delete_group`)."""
        self.groups.pop(group_id, None)

    # --- commits -------------------------------------------------------------------------

    def _accept(self, offsets: dict[TopicPartition, CommittedOffset]) -> tuple[dict, dict]:
        codes: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, o in offsets.items():
            if len(o.metadata.encode()) > self.max_metadata_bytes:
                codes[tp] = ErrorCode.offset_metadata_too_large
            else:
                codes[tp] = ErrorCode.none
                accepted[tp] = o
        return codes, accepted

    @staticmethod
    def _commit_records(group_id: str, offsets: dict[TopicPartition, CommittedOffset]) -> Records:
        return [(encode_offset_key(OffsetKey(group_id, t, p)), encode_offset_value(o)) for (t, p), o in offsets.items()]

    def commit(self, group_id: str, offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit, once the membership allowed it: an error code per partition."""
        codes, accepted = self._accept(offsets)
        if accepted:
            first = self._append(group_id, self._commit_records(group_id, accepted))
            committed = self._offsets(group_id).committed
            for i, (tp, o) in enumerate(accepted.items()):
                committed[tp] = StoredOffset(o, first + i)
        return codes

    def commit_transactional(self, group_id: str, producer_id: int, producer_epoch: int,
                             offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, ErrorCode]:
        """Offsets that take effect when the producer's transaction commits."""
        codes, accepted = self._accept(offsets)
        if accepted:
            try:
                first = self._append(group_id, self._commit_records(group_id, accepted), producer_id, producer_epoch)
            except KafkaError as exc:
                if exc.code == ErrorCode.invalid_producer_epoch:
                    raise KafkaError(ErrorCode.producer_fenced, exc.message) from exc
                raise
            pending = self._offsets(group_id).pending_txn.setdefault(producer_id, {})
            for i, (tp, o) in enumerate(accepted.items()):
                pending[tp] = StoredOffset(o, first + i)
        return codes

    def on_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction ended in a `__consumer_offsets` partition: its offsets take
        effect (commit) or vanish (abort)."""
        if topic != TOPIC:
            return
        for group_id, offsets in self.groups.items():
            pending = offsets.pending_txn.get(producer_id)
            if pending is None or self.partition_for(group_id) != partition:
                continue
            del offsets.pending_txn[producer_id]
            if committed:
                for tp, offset in pending.items():
                    current = offsets.committed.get(tp)
                    # A plain commit written after the transactional one wins.
                    if current is None or current.record_offset < offset.record_offset:
                        offsets.committed[tp] = offset

    # --- reads and deletions -------------------------------------------------------------

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None,
              require_stable: bool) -> dict[TopicPartition, tuple[CommittedOffset | None, ErrorCode]]:
        """OffsetFetch: the committed offset of each partition asked for (all the group
        has, for None); with `require_stable`, UNSTABLE_OFFSET_COMMIT for partitions whose
        offset waits for a transaction's end."""
        offsets = self.groups.get(group_id)
        if offsets is None:
            return {tp: (None, ErrorCode.none) for tp in partitions or []}
        unstable = offsets.unstable() if require_stable else set()
        wanted = partitions if partitions is not None else sorted(offsets.committed)
        result = {}
        for tp in wanted:
            if tp in unstable:
                result[tp] = (None, ErrorCode.unstable_offset_commit)
                continue
            committed = offsets.committed.get(tp)
            result[tp] = (committed.offset if committed else None, ErrorCode.none)
        return result

    def delete(self, group_id: str, partitions: list[TopicPartition]) -> None:
        """OffsetDelete, once the group allowed it: tombstones for the partitions that
        have a committed offset."""
        offsets = self.groups.get(group_id)
        doomed = [tp for tp in partitions if offsets is not None and tp in offsets.committed]
        if not doomed:
            return
        assert offsets is not None
        self._append(group_id, [(encode_offset_key(OffsetKey(group_id, t, p)), None) for t, p in doomed])
        for tp in doomed:
            del offsets.committed[tp]

    def delete_group(self, group_id: str, group_tombstones: Records) -> None:
        """DeleteGroups: one batch with a tombstone for each committed offset, then the
        group's own tombstones (so a replay meets the group's deletion last)."""
        offsets = self.groups.pop(group_id, None)
        committed = offsets.committed if offsets is not None else {}
        tombstones: Records = [(encode_offset_key(OffsetKey(group_id, t, p)), None) for t, p in committed]
        self._append(group_id, tombstones + group_tombstones)
