"""Committed offsets, and the `__consumer_offsets` topic that keeps them and the groups'
own records.

Every record of a group goes to the partition abs(hashCode(group id)) % partitions of
`__consumer_offsets` (the rule transactional ids follow in `__transaction_state`). The
store appends there its offset records, and for a group's membership protocol whatever
records that protocol keeps about the group (`write`). Its state is what `replay` makes
of those records (writes.py), at start-up and after every append alike: offset records
rebuild the offsets, every other record is handed to the registry, which knows the
group types. A transaction's end in a partition is replayed too (`_replay_marker`,
Kafka's replayEndTransactionMarker): from the markers listener while the broker runs,
by the loader at start-up.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeVar

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, coordinator_batch
from ottla.protocol.control import ControlType, parse_marker
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import keys_and_values
from ottla.storage.log_manager import LogManager

from .consumer_group_records import GROUP_METADATA as CONSUMER_GROUP_METADATA
from .consumer_group_records import ConsumerGroupKey
from .consumer_group_records import decode_key as decode_consumer_group_key
from .loading import replay
from .offsets_log import (
    TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    decode_key,
    decode_offset_value,
    encode_offset_value,
    offset_key_bytes,
)
from .share_group_records import ShareGroupKey
from .share_group_records import decode_key as decode_share_group_key
from .streams_group_records import GROUP_METADATA as STREAMS_GROUP_METADATA
from .streams_group_records import StreamsGroupKey
from .streams_group_records import decode_key as decode_streams_group_key
from .transaction_log import partition_for
from .writes import CoordinatorResult, Records, append_error, nothing

TopicPartition = tuple[str, int]
T = TypeVar("T")
# Hands a group's own record (key, value or None for a tombstone) to the registry.
GroupRecordReplay = Callable[[GroupKey | ConsumerGroupKey | StreamsGroupKey | ShareGroupKey, bytes | None], None]


class StoredOffset:
    """A committed offset and where its record sits in `__consumer_offsets`. The value
    is decoded when first read: most commits of a long history are replaced before
    anyone reads them."""

    __slots__ = ("_decoded", "_value", "record_offset")

    def __init__(self, value: bytes, record_offset: int) -> None:
        self._value = value
        self._decoded: CommittedOffset | None = None
        self.record_offset = record_offset

    @property
    def offset(self) -> CommittedOffset:
        if self._decoded is None:
            self._decoded = decode_offset_value(self._value)
        return self._decoded


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


def _no_group(key: GroupKey | ConsumerGroupKey | StreamsGroupKey | ShareGroupKey, value: bytes | None) -> None:
    pass


class OffsetStore:
    def __init__(self, logs: LogManager, create_topic: Callable[[], None], num_partitions: int,
                 max_metadata_bytes: int, wall_clock: Callable[[], float] = time.time,
                 replay_group_record: GroupRecordReplay = _no_group,
                 offsets_replayed: Callable[[str], None] = lambda group_id: None) -> None:
        """`replay_group_record` gets the groups' own records as they are replayed, and
        `offsets_replayed` the id of a group whose commit was."""
        self.logs = logs
        self.replay_group_record = replay_group_record
        self.offsets_replayed = offsets_replayed
        self.create_topic = create_topic
        self.num_partitions = num_partitions
        self.max_metadata_bytes = max_metadata_bytes
        self.wall_clock = wall_clock
        self.groups: dict[str, GroupOffsets] = {}
        # producer id -> the groups that may hold offsets of its open transaction (some
        # may not anymore: a group's deletion clears them), so that a marker looks at
        # those groups rather than at every group. Kept by the replay, as `groups`.
        self._pending_groups: dict[int, set[str]] = {}
        # `__consumer_offsets` partitions not loaded yet (see `open`).
        self.loading_partitions: set[int] = set()
        self._opened = False

    # --- __consumer_offsets --------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        topic = self.logs.topics.get(TOPIC)  # LogManager.topic's look-up, without its call
        partitions = len(topic.partitions) if topic is not None else self.num_partitions
        return partition_for(group_id, partitions)

    def append(self, group_id: str, records: Records, producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Append records to the group's partition; returns the first record's offset.
        With a producer id they form a transactional batch, checked against the
        producer's epoch in that partition (stale epochs are refused). A refused append
        raises the error a coordinator answers (writes.append_error)."""
        now = int(self.wall_clock() * 1000)
        batch, header = coordinator_batch(records, now, producer_id, producer_epoch,
                                          TRANSACTIONAL_FLAG if producer_id >= 0 else 0)
        # The group's partition, looked up here (LogManager.topic's look-up without its
        # call, and the topic once, where partition_for and LogManager.partition would
        # each look it up again): at every commit.
        try:
            # The topic made here is refused as an append would be (append_error).
            topic = self.logs.topics.get(TOPIC)
            if topic is None:
                self.create_topic()
                topic = self.logs.topic(TOPIC)
                assert topic is not None
            # from_coordinator given by position: a keyword costs about 1.4k instructions.
            result = topic.partitions[partition_for(group_id, len(topic.partitions))].append_batch(batch, header, True)
        except KafkaError as exc:
            if producer_id >= 0 and exc.code == ErrorCode.invalid_producer_epoch:
                raise KafkaError(ErrorCode.producer_fenced, exc.message) from exc
            raise append_error(exc, f"{TOPIC}-{self.partition_for(group_id)}") from None
        return result.base_offset

    def write(self, group_id: str, result: CoordinatorResult[T], producer_id: int = -1,
              producer_epoch: int = -1) -> T:
        """Append the result's records to the group's partition (in a transactional
        batch of the producer, if one is given), then replay them, then run its `then`:
        writes.write's rule, followed here without the two closures that would carry the
        group and the producer to `append` and `replay` (every commit and rebalance comes
        this way). An append that fails raises before any replay."""
        records = result.records
        if records:
            offset = self.append(group_id, records, producer_id, producer_epoch)
            for i, (key, value) in enumerate(records):
                self.replay(offset + i, producer_id, key, value)
        then = result.then
        if then is not nothing:  # a commit's: a call spared
            then()
        return result.response

    def open(self) -> None:
        """Note the `__consumer_offsets` partitions `load` has to read (none when the
        topic does not exist yet: it is created empty on the first commit)."""
        topic = self.logs.topic(TOPIC)
        self.loading_partitions = set(range(len(topic.partitions))) if topic is not None else set()
        self._opened = True

    def loading(self, group_id: str | None = None) -> bool:
        """Whether the partition holding `group_id` (any partition, for None) is not
        loaded yet."""
        if not self.loading_partitions or group_id is None:
            return bool(self.loading_partitions)
        return self.partition_for(group_id) in self.loading_partitions

    async def load(self) -> None:
        """Rebuild the offsets and the groups from `__consumer_offsets`, one partition at
        a time beside the serving loop (coordinator/loading.py), replaying every record
        and marker in log order."""
        if not self._opened:
            self.open()
        topic = self.logs.topic(TOPIC)
        if topic is None:
            return
        for partition, log in enumerate(topic.partitions):
            def apply(header: BatchHeader, batch: bytes, partition: int = partition) -> None:
                if header.is_control:
                    self._replay_marker(partition, header.producer_id, parse_marker(batch).type is ControlType.COMMIT)
                    return
                producer_id = header.producer_id if header.is_transactional else -1
                for offset, key, value in keys_and_values(batch):
                    if key is not None:
                        self.replay(offset, producer_id, key, value)

            await replay(log, apply)
            self.loading_partitions.discard(partition)

    def replay(self, offset: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        """Apply one record of `__consumer_offsets` (Kafka's CoordinatorShard.replay): at
        `offset` in the log, in a transactional batch of `producer_id` (-1: none). The
        one way the offsets and the groups change."""
        if key[:2] in _OFFSET_KEY_VERSIONS:
            group_id, tp = _offset_key(key[2:])
            if value is None:
                offsets = self.groups.get(group_id)
                if offsets is not None:
                    offsets.committed.pop(tp, None)
                    if not offsets.committed and not offsets.pending_txn:
                        del self.groups[group_id]
                return
            # The group's offsets (`_offsets`, looked up here: a call less at every commit).
            offsets = self.groups.get(group_id)
            if offsets is None:
                offsets = self.groups[group_id] = GroupOffsets()
            if producer_id >= 0:
                offsets.pending_txn.setdefault(producer_id, {})[tp] = StoredOffset(value, offset)
                self._pending_groups.setdefault(producer_id, set()).add(group_id)
            else:
                offsets.committed[tp] = StoredOffset(value, offset)
            self.offsets_replayed(group_id)
            return
        group_key = (decode_key(key) or decode_consumer_group_key(key) or decode_streams_group_key(key)
                     or decode_share_group_key(key))
        if group_key is None or isinstance(group_key, OffsetKey):
            return  # a record type this broker does not use
        if value is None and (isinstance(group_key, GroupKey) or group_key.type in (CONSUMER_GROUP_METADATA,
                                                                                      STREAMS_GROUP_METADATA)):
            # The group's record is gone: deleted (its offsets have their own
            # tombstones, just before) or converted to the other type (its offsets
            # stay). Offsets of its open transactions go.
            offsets = self.groups.get(group_key.group)
            if offsets is not None:
                offsets.pending_txn.clear()
                if not offsets.committed:
                    del self.groups[group_key.group]
        self.replay_group_record(group_key, value)

    def _offsets(self, group_id: str) -> GroupOffsets:
        offsets = self.groups.get(group_id)
        if offsets is None:
            offsets = self.groups[group_id] = GroupOffsets()
        return offsets

    # --- commits -------------------------------------------------------------------------

    def commit(self, group_id: str,
               offsets: dict[TopicPartition, CommittedOffset]) -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
        """The write of an OffsetCommit the membership allowed, or of a TxnOffsetCommit
        (see `write`: in a transactional batch of the producer, its offsets are pending
        until the transaction ends); its answer is an error code per partition."""
        # One pass: each partition's answer, and the record of each accepted offset.
        codes: dict[TopicPartition, ErrorCode] = {}
        records: Records = []
        # A long group id is encoded every time: the cache would hold up to 4,096 of them.
        key_bytes = _offset_key_bytes if len(group_id) <= _CACHED_GROUP_ID_CHARS else offset_key_bytes
        for (topic, partition), o in offsets.items():
            if len(o.metadata.encode()) > self.max_metadata_bytes:
                codes[(topic, partition)] = ErrorCode.offset_metadata_too_large
            else:
                codes[(topic, partition)] = _NONE
                records.append((key_bytes(group_id, topic, partition), encode_offset_value(o)))
        # Made as a tuple: the named tuple's own __new__ is a Python call.
        return tuple.__new__(CoordinatorResult, (records, codes, nothing))

    def on_marker(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """The markers listener: a marker was appended to a partition of a transaction.
        In a `__consumer_offsets` partition it is replayed (a partition still loading
        replays it from the log)."""
        if topic == TOPIC and partition not in self.loading_partitions:
            self._replay_marker(partition, producer_id, committed)

    def _replay_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction of `producer_id` ended in `__consumer_offsets` partition
        `partition` (Kafka's replayEndTransactionMarker): its offsets there take effect
        (commit) or vanish (abort)."""
        candidates = self._pending_groups.get(producer_id)
        if candidates is None:
            return
        for group_id in list(candidates):
            offsets = self.groups.get(group_id)
            pending = None if offsets is None else offsets.pending_txn.get(producer_id)
            if offsets is None or pending is None:
                candidates.discard(group_id)  # its offsets went with the group's deletion
                continue
            if self.partition_for(group_id) != partition:
                continue
            candidates.discard(group_id)
            del offsets.pending_txn[producer_id]
            if committed:
                for tp, offset in pending.items():
                    current = offsets.committed.get(tp)
                    # A plain commit written after the transactional one wins.
                    if current is None or current.record_offset < offset.record_offset:
                        offsets.committed[tp] = offset
            if not offsets.committed and not offsets.pending_txn:
                del self.groups[group_id]
        if not candidates:
            del self._pending_groups[producer_id]

    # --- reads and deletions -------------------------------------------------------------

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None,
              require_stable: bool) -> dict[TopicPartition, tuple[CommittedOffset | None, ErrorCode]]:
        """OffsetFetch: the committed offset of each partition asked for (all the group
        has, for None); with `require_stable`, UNSTABLE_OFFSET_COMMIT for partitions whose
        offset waits for a transaction's end."""
        offsets = self.groups.get(group_id)
        if offsets is None:
            return {tp: (None, ErrorCode.none) for tp in partitions or []}
        # No open transaction of the group, nothing unstable: `unstable` not called.
        unstable = offsets.unstable() if require_stable and offsets.pending_txn else _NOTHING_UNSTABLE
        wanted = partitions if partitions is not None else sorted(offsets.committed)
        result: dict[TopicPartition, tuple[CommittedOffset | None, ErrorCode]] = {}
        committed_offsets = offsets.committed
        for tp in wanted:
            if tp in unstable:
                result[tp] = (None, ErrorCode.unstable_offset_commit)
                continue
            committed = committed_offsets.get(tp)
            result[tp] = (committed.offset if committed else None, _NONE)
        return result

    def delete(self, group_id: str, partitions: list[TopicPartition]) -> CoordinatorResult[None]:
        """The write of an OffsetDelete the group allowed: tombstones for the partitions
        that have a committed offset."""
        offsets = self.groups.get(group_id)
        doomed = [tp for tp in partitions if offsets is not None and tp in offsets.committed]
        return CoordinatorResult([(offset_key_bytes(group_id, t, p), None) for t, p in doomed], None)

    def delete_group(self, group_id: str, group_tombstones: Records) -> CoordinatorResult[None]:
        """The write of a DeleteGroups: one batch with a tombstone for each committed
        offset, then the group's own tombstones (so a replay meets the group's deletion
        last)."""
        offsets = self.groups.get(group_id)
        committed = offsets.committed if offsets is not None else {}
        tombstones: Records = [(offset_key_bytes(group_id, t, p), None) for t, p in committed]
        return CoordinatorResult(tombstones + group_tombstones, None)


# Read once: each read of a member off its enum class is a slot call on Python 3.11.
_NONE = ErrorCode.none
_NOTHING_UNSTABLE: frozenset[TopicPartition] = frozenset()
# An offset commit's key starts with its version, 0 or 1 (the same fields).
_OFFSET_KEY_VERSIONS = (b"\x00\x00", b"\x00\x01")


# The key of a group's partition, as every commit of it writes it again (about 4.4k
# instructions to encode, against a cache's look-up of about 0.7k).
_offset_key_bytes = lru_cache(maxsize=4096)(offset_key_bytes)
# Group ids cached with their keys only up to this long (a client's group id may be 32 KiB).
_CACHED_GROUP_ID_CHARS = 255


@lru_cache(maxsize=65536)
def _offset_key(key_without_version: bytes) -> tuple[str, TopicPartition]:
    """(group id, partition) of an offset commit's key. Cached: a long history commits
    the same few keys again and again."""
    key = decode_key(_OFFSET_KEY_VERSIONS[1] + key_without_version)
    assert isinstance(key, OffsetKey)
    return key.group, (key.topic, key.partition)
