"""Records of the `__transaction_state` topic, in Kafka's TransactionLog format.

Key   (TransactionLogKey):   version int16 (0), transactionalId string (int16 length).
Value (TransactionLogValue): version int16, then for v0 (fixed-width) or v1 (flexible,
compact strings and arrays, tagged fields):
    ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
    TransactionStatus int8, TransactionPartitions [Topic string, PartitionIds [int32]],
    TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
    v1 tags: 0 PreviousProducerId int64, 1 NextProducerId int64,
             2 ClientTransactionVersion int16.
A null value (tombstone) removes a transactional id. Ottla writes v1, reads both.
The states, and which may follow which (`transition`), are Kafka's TransactionState.
The partition of a transactional id is abs(Java String.hashCode(id)) % partitions.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

from ottla.protocol.varint import read_uvarint, write_uvarint

TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TAIL = struct.Struct(">qq")  # last update, start
_VALUE_HEAD = struct.Struct(">hqhib")  # version, then _HEAD's fields
_NULL_ARRAY = b"\x00"  # a compact array's length + 1: 0 is null
_EMPTY_ARRAY = b"\x01"
_NO_TAGS = b"\x00"


class TxnState(enum.IntEnum):
    """Kafka's TransactionState ids, as stored in TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


class TxnRecord(NamedTuple):
    """One value of the transaction log: the state of a transactional id.

    Immutable, as the state it records: a transition makes a new record (the
    coordinator's `transition`), which is appended to the log before it replaces the
    current one, so no one ever sees a state that is not in the log. A named tuple:
    built with no Python call (a frozen dataclass's `__init__` sets its ten fields one
    `object.__setattr__` at a time, about 16k instructions, at every change of a
    transaction). The coordinator makes its records with `tuple.__new__`: the named
    tuple's own `__new__` is a Python call."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


# Which state may follow which (Kafka's TransactionState.validPreviousStates, inverted).
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE,
                               TxnState.PREPARE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                                 TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.COMPLETE_ABORT}),
    # Transaction version 2 may abort with no transaction open (the coordinator's _end_txn_v2).
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD,
                                         TxnState.PREPARE_EPOCH_FENCE, TxnState.PREPARE_ABORT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD,
                                        TxnState.PREPARE_EPOCH_FENCE, TxnState.PREPARE_ABORT}),
    # A step in memory only (the coordinator's fence of an open transaction): never
    # written, so never replayed.
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset(),
}


def transition(current: TxnRecord, target: TxnState, now_ms: int, **changes: Any) -> TxnRecord:
    """The record that follows `current` in state `target`, with `changes`; `current`
    is left as it is. IllegalTransition if `target` may not follow its state."""
    if target not in TRANSITIONS[current.state]:
        raise IllegalTransition(f"{current.state.kafka_name} -> {target.kafka_name}")
    # Built from a copy of the fields rather than by _replace, a Python call that makes
    # a dict (a transition is made at every change of a transaction).
    values = [*current]
    values[_STATE] = target
    values[_LAST_UPDATE_MS] = now_ms
    for name, value in changes.items():
        index = _CHANGEABLE.get(name)
        if index is None:
            raise TypeError(f"TxnRecord has no field {name!r} a transition may change")
        values[index] = value
    return tuple.__new__(TxnRecord, values)


def following(current: TxnRecord, record: TxnRecord) -> TxnRecord:
    """`record`, made whole by its caller, as the record that follows `current`:
    `transition`'s check without its keywords (each about 1.4k instructions on Python
    3.11, seven at a new producer session). IllegalTransition if its state may not
    follow `current`'s."""
    if record.state not in TRANSITIONS[current.state]:
        raise IllegalTransition(f"{current.state.kafka_name} -> {record.state.kafka_name}")
    return record


class IllegalTransition(Exception):
    pass


# What a transition may change besides the state and the time of the update it sets:
# each field's place in the record.
_CHANGEABLE = {name: index for index, name in enumerate(TxnRecord._fields)
               if name not in ("state", "last_update_ms")}
_STATE = TxnRecord._fields.index("state")
_LAST_UPDATE_MS = TxnRecord._fields.index("last_update_ms")


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapped to int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@lru_cache(maxsize=4096)
def partition_for(key: str, partitions: int) -> int:
    """Kafka's Utils.abs(hashCode) % n; Utils.abs maps Int.MIN_VALUE to 0. Cached: the
    same few transactional ids and groups ask on every request."""
    h = java_string_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partitions


# --- encoding ---------------------------------------------------------------------------


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


# The key of a transactional id, as every change of its transaction writes it again.
encoded_key = lru_cache(maxsize=4096)(encode_key)


def _compact_string(text: str) -> bytes:
    raw = text.encode()
    return write_uvarint(len(raw) + 1) + raw


def _partitions_array(partitions: frozenset[tuple[str, int]]) -> bytes:
    """TransactionPartitions of a non-empty set, by topic."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [write_uvarint(len(by_topic) + 1)]
    for topic, numbers in by_topic.items():
        # The entry: its topic, its partition ids, no tagged fields.
        parts += (_compact_string(topic), write_uvarint(len(numbers) + 1), struct.pack(f">{len(numbers)}i", *numbers),
                  _NO_TAGS)
    return b"".join(parts)


# Read once: each read of a member off its enum class is a slot call on Python 3.11.
_EMPTY = TxnState.EMPTY

# The set a transaction has is written again unchanged when it ends (PrepareCommit or
# PrepareAbort), and the same small sets recur transaction after transaction of a
# producer: their arrays are cached, up to this many partitions a set (the cache's
# memory stays small whatever sets clients make).
_CACHED_SET_SIZE = 16
_cached_partitions_array = lru_cache(maxsize=1024)(_partitions_array)


def encode_value(record: TxnRecord) -> bytes:
    # The fields taken in one unpacking: each read of a named tuple's field by name is
    # a descriptor call of its own, about ten at every change of a transaction.
    (producer_id, producer_epoch, timeout_ms, state, partitions, last_update_ms, start_ms, previous_producer_id,
     next_producer_id, client_transaction_version) = record
    if not partitions:
        # Kafka writes an Empty transaction's partitions as a null array, not an empty one.
        array = _NULL_ARRAY if state == _EMPTY else _EMPTY_ARRAY
    elif len(partitions) <= _CACHED_SET_SIZE:
        array = _cached_partitions_array(partitions)
    else:
        array = _partitions_array(partitions)
    head = _VALUE_HEAD.pack(VALUE_VERSION, producer_id, producer_epoch, timeout_ms, state)
    tail = _TAIL.pack(last_update_ms, start_ms)
    if previous_producer_id == -1 and next_producer_id == -1 and client_transaction_version == 0:
        return head + array + tail + _NO_TAGS
    tags = []
    if previous_producer_id != -1:
        tags.append((0, _I64.pack(previous_producer_id)))
    if next_producer_id != -1:
        tags.append((1, _I64.pack(next_producer_id)))
    if client_transaction_version != 0:
        tags.append((2, _I16.pack(client_transaction_version)))
    out = [head, array, tail, write_uvarint(len(tags))]
    for tag, data in tags:
        out += (write_uvarint(tag), write_uvarint(len(data)), data)
    return b"".join(out)


# What the coordinator writes, encode_value's C twin (coordinator/_transaction_value.c,
# about 4k instructions fewer at every change of a transaction), unless OTTLA_PURE_PYTHON=1
# (compiled_codec.PURE_PYTHON_VARIABLE) asks for the Python path throughout, or the
# extension could not be built. tests/unit/test_transaction_value.py compares both.
value_of: Callable[[TxnRecord], bytes] = encode_value
try:
    from . import _transaction_value  # type: ignore[attr-defined]
except ImportError:  # installed without a C compiler: the Python twin
    pass
else:
    if os.environ.get("OTTLA_PURE_PYTHON", "") in ("", "0"):
        value_of = _transaction_value.encode_value


# --- decoding ---------------------------------------------------------------------------


def decode_key(data: bytes) -> str:
    (version,) = _I16.unpack_from(data)
    if version != KEY_VERSION:
        raise ValueError(f"unknown transaction log key version {version}")
    (length,) = _I16.unpack_from(data, 2)
    return data[4 : 4 + length].decode()


def decode_value(data: bytes) -> TxnRecord:
    (version,) = _I16.unpack_from(data)
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    pos = 2
    producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(data, pos)
    pos += _HEAD.size
    partitions: set[tuple[str, int]] = set()
    count, pos = _length(data, pos, flexible, _I32)
    for _ in range(max(count, 0)):
        length, pos = _length(data, pos, flexible, _I16)
        topic = data[pos : pos + length].decode()
        pos += length
        n, pos = _length(data, pos, flexible, _I32)
        for _ in range(n):
            partitions.add((topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
        if flexible:
            pos = _skip_tags(data, pos)
    last_update, start = _TAIL.unpack_from(data, pos)
    pos += _TAIL.size
    previous_producer_id = next_producer_id = -1
    client_transaction_version = 0
    if flexible:
        count, pos = read_uvarint(data, pos)
        for _ in range(count):
            tag, pos = read_uvarint(data, pos)
            size, pos = read_uvarint(data, pos)
            if tag == 0:
                (previous_producer_id,) = _I64.unpack_from(data, pos)
            elif tag == 1:
                (next_producer_id,) = _I64.unpack_from(data, pos)
            elif tag == 2:
                (client_transaction_version,) = _I16.unpack_from(data, pos)
            pos += size
    return TxnRecord(producer_id, epoch, timeout_ms, TxnState(status), frozenset(partitions), last_update, start,
                     previous_producer_id, next_producer_id, client_transaction_version)


def _length(data: bytes, pos: int, flexible: bool, legacy: struct.Struct) -> tuple[int, int]:
    """A string or array length: a compact one (varint of length + 1) in flexible
    versions, else a fixed-width one."""
    if flexible:
        n, pos = read_uvarint(data, pos)
        return n - 1, pos
    (n,) = legacy.unpack_from(data, pos)
    return n, pos + legacy.size


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        pos += size
    return pos
