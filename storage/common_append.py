"""The common append as one call: an in-sequence batch of a producer the partition knows
(or of no producer id; or the first of a producer's newer epoch), written to the active
segment with no roll and no index entry due. `append_common(log, records, header)`
appends such a batch and answers its AppendResult; any other append answers None,
having changed nothing, and the caller runs PartitionLog.append_batch as always (a
duplicate, a new producer, a sequence out of order, a refusal, a roll, an index entry, a
closed file, a write check: all of them are append_batch's).

`append_common_in_python` is the specification: which appends are common, said in
Python, each then made by append_batch itself. Its twin in C (storage/_common_append.c)
makes the same append in one call, without append_batch's four Python frames (the
producer's check, _write, LogSegment.append); it is used unless it could not be built or
OTTLA_PURE_PYTHON=1 asks for the Python path. tests/unit/test_common_append.py holds
both to append_batch's answers, files and producer state.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ottla.protocol.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, TRANSACTIONAL_FLAG, BatchHeader
from ottla.protocol.errors import ErrorCode, KafkaError

from .batch_write import write_batch
from .log import AppendResult, PartitionLog
from .open_files import OPEN_FILES
from .producer_state import record_batch

_INT32_MAX = 2**31 - 1
_SEQUENCE_SPAN = 2**31

AppendCommon = Callable[[PartitionLog, "bytes | memoryview", BatchHeader], "AppendResult | None"]


def append_common_in_python(log: PartitionLog, records: bytes | memoryview, header: BatchHeader
                            ) -> AppendResult | None:
    """`log.append_batch(records, header)` when the append is the common one, else None."""
    if not _is_common(log, records, header):
        return None
    return log.append_batch(records, header)


def _is_common(log: PartitionLog, records: bytes | memoryview, header: BatchHeader) -> bool:
    if header.producer_id >= 0:
        # ProducerStateManager.check's APPEND, with no refusal, for a producer the
        # partition knows: in its epoch, no duplicate of a cached batch and the last
        # one's next (0 with none cached, never wrapping); in a newer epoch (a
        # transactional producer initialized again), sequence 0.
        entry = log.producer_state.producers.get(header.producer_id)
        first_seq, delta, epoch = header.base_sequence, header.last_offset_delta, header.producer_epoch
        if entry is None or first_seq < 0 or delta < 0:
            return False
        if epoch == entry.epoch and entry.epoch != NO_PRODUCER_EPOCH:
            last_seq = (first_seq + delta) % _SEQUENCE_SPAN
            if any(b.first_seq == first_seq and b.last_seq == last_seq for b in entry.batches):
                return False  # a duplicate
            current = entry.batches[-1].last_seq if entry.batches else NO_SEQUENCE
            if current == _INT32_MAX or first_seq != current + 1:
                return False
        elif not (epoch > entry.epoch and first_seq == 0):
            return False
        if not header.attributes & TRANSACTIONAL_FLAG and entry.current_txn_first_offset >= 0:
            return False
    # PartitionLog._write: no roll, no write check; LogSegment.append: its file open, no
    # index entry due, a pooled segment already open in OPEN_FILES.
    active = log.segments[-1]
    config = log.config
    if (not active.size or active.size + len(records) > config.segment_bytes
            or header.max_timestamp - active.first_timestamp > config.segment_ms or log.write_check is not None):
        return False
    if (active._fd is None or active.bytes_since_index_entry > config.index_interval_bytes
            or active._max_timestamp is None):
        return False
    return not active._pooled or active in OPEN_FILES


try:
    from ._common_append import append_common as _append_common_in_c
    from ._common_append import set_callables as _set_callables
except ImportError:  # installed without a C compiler: the Python path
    _append_common_in_c = None
else:
    # What the C calls, handed over once: the same functions the Python path calls.
    _set_callables(AppendResult, write_batch, record_batch, KafkaError, ErrorCode.kafka_storage_error,
                   OPEN_FILES.touch_open)

append_common: AppendCommon = (
    _append_common_in_c if _append_common_in_c is not None and os.environ.get("OTTLA_PURE_PYTHON", "") in ("", "0")
    else append_common_in_python)
