"""Control records: the COMMIT and ABORT markers that end a transaction in a partition.

A control batch has the transactional and control attributes, the producer id and
epoch of the transaction, base sequence -1 and one record whose
key   = version int16 (0) + type int16 (ABORT 0, COMMIT 1) and
value = version int16 (0) + coordinatorEpoch int32.
Its CRC is a real CRC-32C: clients that check CRCs reject anything else.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from functools import lru_cache

from .batch import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    coordinator_batch,
    iter_records,
)

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CURRENT_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    type: ControlType
    coordinator_epoch: int


@lru_cache(maxsize=64)
def _marker_key_value(kind: ControlType, coordinator_epoch: int) -> tuple[bytes, bytes]:
    # One of a few (COMMIT or ABORT, at the coordinator's epoch): encoded once, not at
    # every marker of every transaction. Keyed by the fields, which hash in C (the
    # dataclass's __hash__ and __eq__ are Python calls).
    return _KEY.pack(CURRENT_VERSION, kind), _VALUE.pack(CURRENT_VERSION, coordinator_epoch)


def marker_batch_with_header(marker: EndTxnMarker, producer_id: int, producer_epoch: int,
                             timestamp: int) -> tuple[bytes, BatchHeader]:
    """The control batch of `marker` and its header. A marker's batch is one record of
    its key and value with no headers, a coordinator's own kind of batch: made in one
    call of `coordinator_batch` (C where built), which answers the header beside it,
    instead of build_batch's keywords and a parse (the markers of every transaction's
    end, one a partition)."""
    return coordinator_batch([_marker_key_value(marker.type, marker.coordinator_epoch)], timestamp, producer_id,
                             producer_epoch, TRANSACTIONAL_FLAG | CONTROL_FLAG)


def marker_batch(
    marker: EndTxnMarker, *, producer_id: int, producer_epoch: int, timestamp: int
) -> bytes:
    return marker_batch_with_header(marker, producer_id, producer_epoch, timestamp)[0]


def parse_marker(batch: bytes | memoryview) -> EndTxnMarker:
    """The marker carried by a control batch."""
    record = next(iter_records(batch))
    if record.key is None or len(record.key) < _KEY.size:
        raise ValueError("control record without a valid key")
    _version, kind = _KEY.unpack_from(record.key)
    epoch = 0
    if record.value is not None and len(record.value) >= _VALUE.size:
        _v, epoch = _VALUE.unpack_from(record.value)
    return EndTxnMarker(ControlType(kind), epoch)
