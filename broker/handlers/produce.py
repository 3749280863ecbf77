"""Produce: validate each partition's batch and append it.

Per partition: the topic must exist and not be internal; the batch must be one valid
v2 batch (CRC-32C, lengths, size limits) whose records are well formed (and keyed on a
compacted topic); then the partition log applies the idempotence rules and appends. Each
partition gets its own error code; one bad partition does not fail the others. acks=0
gets no response at all.

Checking the records means walking them, and for a compressed batch decompressing them
first: a few hundred bytes of zstd may expand to 16 MiB, tens of milliseconds of work.
A batch is checked on the event loop when that is cheap: at most INLINE_RECORDS records
and, compressed, at most INLINE_DECOMPRESSED_BYTES once decompressed. Anything more goes
to a worker thread (Services.threads) while the loop goes on serving everyone else. The
thread is not the default because getting the GIL back after it costs the connection up
to the interpreter's switch interval, far more than checking a small batch. The
appends happen back on the loop, in the request's order, once every partition's records
are checked: storage is only ever touched from the loop.

A batch of more than INLINE_CRC_BYTES also has its CRC-32C computed in a worker thread
(crc32c lets go of the GIL), before the request is handled as any other with that CRC
known: every check is made in the same order, so every answer is the same as if it had
been computed on the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from ottla.coordinator.internal_topics import ClientAction, check_client_action
from ottla.protocol.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    BatchTooLarge,
    InvalidBatch,
    compute_crc,
    recompressed,
    timestamp_outside,
    validate_produced_batch,
    with_log_append_time,
)
from ottla.protocol.compression import EXPANSION_LIMIT, GZIP, LZ4, ZSTD, DecompressionError
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import InvalidRecords, accept_produced, validate_records
from ottla.storage.common_append import append_common
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import COMPACT, CREATE_TIME, LOG_APPEND_TIME

from ..client_quotas import PRODUCER_BYTE_RATE
from ..logging import get_logger
from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.produce import (
        PartitionProduceResponse,
        ProduceRequest,
        ProduceResponse,
        TopicProduceResponse,
    )
    from ottla.storage.log_config import LogConfig

log = get_logger("ottla.produce")

# What is checked on the event loop (see above): bounds of the work one check may hold
# the loop for (bench/RESULTS.md has what they cost).
INLINE_RECORDS = 100_000
INLINE_DECOMPRESSED_BYTES = 1024 * 1024
# The same bound in bytes for the CRC-32C of a batch: about 0.3 ms a MiB on the loop.
INLINE_CRC_BYTES = INLINE_DECOMPRESSED_BYTES
# compression.type -> the codec batches are stored in (producer: as they come).
_STORED_CODEC = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# The enum members every Produce names, read once: on Python 3.11 reading a member off
# its class goes through EnumType.__getattr__'s slot, some hundreds of instructions each.
_WRITE, _TOPIC, _TRANSACTIONAL_ID = Operation.WRITE, ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
_NO_ERROR = ErrorCode.none


@final  # no subclass: `type(c) is _Checked` tells it from an answer, for mypy too
@dataclass(slots=True)
class _Checked:
    """A partition's batch whose header is valid, waiting for its records' check (unless
    `records_checked`) and its append."""

    topic: str
    partition: int
    log: PartitionLog
    batch: bytes
    header: BatchHeader
    records_checked: bool


_new_checked = object.__new__

# Per topic, its partitions in the request's order: each a batch to append, or its answer already.
CheckedTopics = list[tuple[str, list["_Checked | PartitionProduceResponse"]]]


def handle(ctx: RequestContext, request: ProduceRequest, crcs: dict[int, int] | None = None
           ) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    """The response, or an awaitable of it when some CRCs or records are checked in a
    thread; None for acks=0, which is answered nothing. `crcs`: the CRC-32C of the
    large batches, by id() of their records (see _handle_after_crcs)."""
    acks = request.acks
    # Without an authorizer every client may do anything: ctx.allowed is not called
    # (a call a partition and one a transactional request, on every Produce).
    restricted = ctx.services.authorizer is not None
    # Kafka refuses the whole request when it carries transactional batches without a
    # transactional id, or one the client may not write.
    if (request.transactional_id is None and _has_transactional_batch(request)) or (
            restricted and request.transactional_id is not None
            and not ctx.allowed(_WRITE, _TRANSACTIONAL_ID, request.transactional_id)):
        responses: list[TopicProduceResponse] = [
            {"name": t.name, "partition_responses": [_error(p.index, ErrorCode.transactional_id_authorization_failed)
                                                     for p in t.partition_data]}
            for t in request.topic_data
        ]
        return {"responses": responses} if acks != 0 else None
    if acks not in (0, 1, -1):
        responses = [
            {"name": t.name, "partition_responses": [_error(p.index, ErrorCode.invalid_required_acks)
                                                     for p in t.partition_data]}
            for t in request.topic_data
        ]
        return {"responses": responses}
    if crcs is None:  # a batch over INLINE_CRC_BYTES: its CRC-32C in a thread first
        for t in request.topic_data:
            for p in t.partition_data:
                if p.records is not None and len(p.records) > INLINE_CRC_BYTES:
                    return _handle_after_crcs(ctx, request)
    # Per topic, per partition: an error already, or a batch to append (and the batches
    # whose records are yet to be checked, in a thread).
    checked: CheckedTopics = []
    in_thread = []
    for topic_data in request.topic_data:
        topic = topic_data.name
        partitions: list[_Checked | PartitionProduceResponse] = []
        for p in topic_data.partition_data:
            c = _check(ctx, topic, p.index, p.records, acks, restricted, crcs)
            partitions.append(c)
            if type(c) is _Checked and not c.records_checked:
                in_thread.append(c)
        checked.append((topic, partitions))
    if in_thread:
        return _append_after_checks(ctx, request, checked, in_thread)
    return _append_all(ctx, request, checked)


async def _handle_after_crcs(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    """The request once the CRC-32C of each batch over INLINE_CRC_BYTES is computed in a
    worker thread. `large` holds those records until the handler has read the CRCs,
    so no other object can take one of their ids meanwhile: a records object that
    would not be found by its id would only have its CRC computed on the loop."""
    large = [p.records for t in request.topic_data for p in t.partition_data
             if p.records is not None and len(p.records) > INLINE_CRC_BYTES]
    threads = ctx.services.threads
    computed = await asyncio.gather(*(threads.run(compute_crc, records) for records in large))
    response = handle(ctx, request, {id(records): crc for records, crc in zip(large, computed, strict=True)})
    if inspect.isawaitable(response):  # some records are checked in a thread too
        return await response
    return response


async def _append_after_checks(ctx: RequestContext, request: ProduceRequest, checked: CheckedTopics,
                               in_thread: list[_Checked]) -> ProduceResponse | None:
    threads = ctx.services.threads
    errors = await asyncio.gather(*(threads.run(_check_records, c, ctx.header.client_id, ctx.peer)
                                    for c in in_thread))
    for c, error in zip(in_thread, errors, strict=True):
        if error is not None:
            _replace(checked, c, error)
        else:
            c.records_checked = True
    return _append_all(ctx, request, checked, after_await=True)


def _replace(checked: CheckedTopics, old: _Checked, new: PartitionProduceResponse) -> None:
    for _, partitions in checked:
        for i, c in enumerate(partitions):
            if c is old:
                partitions[i] = new


def _append_all(ctx: RequestContext, request: ProduceRequest, checked: CheckedTopics,
                after_await: bool = False) -> ProduceResponse | None:
    """Append every checked batch; `after_await`: the checks awaited a thread, so
    partitions may have been deleted meanwhile."""
    transactional_id = request.transactional_id
    if transactional_id is not None and ctx.header.api_version >= 12:
        _add_to_transaction(ctx, transactional_id, checked)
    responses: list[TopicProduceResponse] = []
    for topic, partitions in checked:
        answers: list[PartitionProduceResponse] = []
        for c in partitions:
            answers.append(_append(ctx, c, transactional_id, after_await) if type(c) is _Checked else c)
        responses.append({"name": topic, "partition_responses": answers})
    # producer_byte_rate: the request's records count, appended or not (as in Kafka).
    # With no such quota in force (throttle_ms would answer 0) nothing is counted.
    quotas = ctx.services.quotas
    if PRODUCER_BYTE_RATE in quotas.byte_rate_keys:
        produced = 0
        for t in request.topic_data:
            for p in t.partition_data:
                if p.records is not None:
                    produced += len(p.records)
        ctx.throttle_ms = quotas.throttle_ms(PRODUCER_BYTE_RATE, ctx.session.user, ctx.header.client_id or "",
                                             produced)
    if request.acks == 0:
        return None  # nothing to say; a throttle still holds the connection
    return {"responses": responses, "throttle_time": ctx.throttle_ms}


def _has_transactional_batch(request: ProduceRequest) -> bool:
    for t in request.topic_data:
        for p in t.partition_data:
            records = p.records
            if records and len(records) > ATTRIBUTES_OFFSET + 1 and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG:
                return True
    return False


def _check(ctx: RequestContext, topic: str, partition: int, records: bytes | None,
           acks: int, restricted: bool, crcs: dict[int, int] | None = None) -> _Checked | PartitionProduceResponse:
    """What can be checked at once: the partition, the batch's header and CRC, and its
    records when they are small."""
    # Authorization first: a client that may not write to a topic does not learn whether it exists.
    if restricted and not ctx.allowed(_WRITE, _TOPIC, topic):
        return _error(partition, ErrorCode.topic_authorization_failed)
    logs = ctx.services.logs
    # LogManager.partition written out: a Python call less a partition.
    t = logs.topics.get(topic)
    if t is None or not 0 <= partition < len(t.partitions):
        return _error(partition, ErrorCode.unknown_topic_or_partition)
    partition_log = t.partitions[partition]
    if topic in logs.internal_topics:  # check_client_action refuses only those
        try:
            check_client_action(topic, ClientAction.APPEND, logs.internal_topics)
        except KafkaError as exc:
            log.warning("produce refused", topic=topic, partition=partition, error=exc.code.name, reason=exc.message,
                        client_id=ctx.header.client_id, peer=ctx.peer)
            return _error(partition, exc.code, exc.message)
    config = partition_log.config
    if acks == -1 and config.min_insync_replicas > 1:
        # One broker, one replica: acks=all cannot be met, as on a one-broker Kafka.
        return _error(partition, ErrorCode.not_enough_replicas, log_start_offset=partition_log.log_start_offset,
                      message=f"The size of the current ISR Set(1) is insufficient to satisfy the min.isr requirement "
                      f"of {config.min_insync_replicas} for partition {topic}-{partition}")
    if not records:  # Kafka: INVALID_RECORD
        return _refused_batch(ctx, topic, partition, InvalidBatch("no record batch", corrupt=False))
    header = None
    # A large batch's CRC-32C was computed in a worker thread (_handle_after_crcs).
    crc = crcs.get(id(records)) if crcs else None
    if accept_produced is not None and crc is None:
        # The common case in one C call (protocol/_records.c): every check below, and an
        # uncompressed batch's records; None if any fails, and the checks below say which.
        header = accept_produced(records, config.max_message_bytes, config.segment_bytes,
                                 COMPACT in config.cleanup_policy, config.message_timestamp_type == CREATE_TIME,
                                 config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)
        if (header is not None and not header.attributes & COMPRESSION_MASK and header.record_count <= INLINE_RECORDS
                and _STORED_CODEC.get(config.compression_type, 0) == 0):
            # Built without the dataclass's __init__ (a Python call, its keyword another
            # ~1.4k): every Produce of small uncompressed batches comes this way.
            accepted = _new_checked(_Checked)
            accepted.topic, accepted.partition, accepted.log = topic, partition, partition_log
            accepted.batch, accepted.header, accepted.records_checked = records, header, True
            return accepted
    if header is None:
        try:
            header = validate_produced_batch(records, config.max_message_bytes, crc)
            if header.size > config.segment_bytes:
                return _error(partition, ErrorCode.record_list_too_large,
                              f"batch of {header.size} bytes exceeds segment.bytes ({config.segment_bytes})")
            if config.message_timestamp_type == CREATE_TIME:
                _check_timestamps(header, config)
        except InvalidBatch as exc:
            return _refused_batch(ctx, topic, partition, exc)
        except BatchTooLarge as exc:
            return _error(partition, ErrorCode.message_too_large, str(exc))
        except KafkaError as exc:
            log.info("produce refused", topic=topic, partition=partition, error=exc.code.name, reason=exc.message,
                     client_id=ctx.header.client_id)
            return _error(partition, exc.code, exc.message, log_start_offset=partition_log.log_start_offset)
    checked = _Checked(topic, partition, partition_log, records, header, records_checked=False)
    compression = header.compression
    if header.record_count > INLINE_RECORDS or (compression and header.size > INLINE_DECOMPRESSED_BYTES):
        return checked
    if compression:
        # A compressed batch says nothing of its records' size: decompression within
        # the inline bound finds out. One that fails goes to the thread, which tells a
        # larger batch from a damaged one with the full bound.
        try:
            error = _check_records(checked, ctx.header.client_id, ctx.peer, INLINE_DECOMPRESSED_BYTES, quiet=True)
        except InvalidBatch:
            return checked
    else:
        error = _check_records(checked, ctx.header.client_id, ctx.peer)
    if error is not None:
        return error
    checked.records_checked = True
    return checked


def _check_records(c: _Checked, client_id: str | None, peer: str,
                   max_decompressed: int | None = None, quiet: bool = False) -> PartitionProduceResponse | None:
    """The records' check (in a worker thread when they are large): None when they are
    well formed, else the partition's error response. With `quiet`, records that do not
    decompress within `max_decompressed` raise InvalidBatch instead."""
    config = c.log.config
    bound = max_decompressed or EXPANSION_LIMIT * config.max_message_bytes
    try:
        validate_records(c.batch, c.header, compacted=config.compact, topic_partition=f"{c.topic}-{c.partition}",
                         max_decompressed=bound)
        codec = _STORED_CODEC.get(config.compression_type)
        if codec is not None and codec != c.header.compression:
            # compression.type names a codec: the batch is stored in it, as Kafka stores it.
            level = {GZIP: config.compression_gzip_level, LZ4: config.compression_lz4_level,
                     ZSTD: config.compression_zstd_level}.get(codec)
            try:
                c.batch = recompressed(c.batch, c.header, codec, level, bound)
            except DecompressionError as exc:
                raise InvalidBatch(str(exc), corrupt=True) from exc
            c.header = BatchHeader.parse(c.batch)
            if c.header.size > config.max_message_bytes:
                return _error(c.partition, ErrorCode.message_too_large,
                              f"batch of {c.header.size} bytes in {config.compression_type} exceeds "
                              f"max.message.bytes ({config.max_message_bytes})")
    except InvalidBatch as exc:
        if quiet:
            raise
        return _refused_batch_logged(c.topic, c.partition, exc, client_id, peer)
    except InvalidRecords as exc:
        log.warning("produce refused", topic=c.topic, partition=c.partition, error="INVALID_RECORD",
                    reason=str(exc)[:500], client_id=client_id, peer=peer)
        return _error(c.partition, ErrorCode.invalid_record, str(exc), exc.record_errors,
                      log_start_offset=c.log.log_start_offset)
    return None


def _append(ctx: RequestContext, c: _Checked, transactional_id: str | None,
            after_await: bool) -> PartitionProduceResponse:
    if after_await and ctx.services.logs.partition(c.topic, c.partition) is not c.log:
        # Deleted (or deleted and created again) while its records were being checked.
        return _error(c.partition, ErrorCode.unknown_topic_or_partition)
    header = c.header
    partition_log = c.log
    append_time = -1
    if partition_log.config.message_timestamp_type == LOG_APPEND_TIME:
        append_time = int(time.time() * 1000)
        c.batch = with_log_append_time(c.batch, append_time)
        header = BatchHeader.parse(c.batch)
    # Kafka verifies a transactional batch against its coordinator before the log sees
    # it (KIP-890): a refusal there carries no log start offset, one by the log does.
    log_start_offset = -1
    try:
        if header.attributes & TRANSACTIONAL_FLAG:
            if transactional_id is None:
                raise InvalidBatch("transactional batch in a request without a transactional id", corrupt=False)
            try:
                # KIP-890 part 1: the partition must be in the producer's ongoing transaction.
                ctx.services.transactions.verify(transactional_id, header.producer_id, header.producer_epoch,
                                                 c.topic, c.partition)
            except KafkaError as exc:
                # A partition outside it is INVALID_TXN_STATE for Produce v3-10; from v11
                # on, whose clients know the generic abortable error, Kafka answers
                # TRANSACTION_ABORTABLE (the producer aborts and carries on).
                if exc.code is ErrorCode.invalid_txn_state and ctx.version >= 11:
                    raise KafkaError(ErrorCode.transaction_abortable, exc.message) from None
                raise
        log_start_offset = partition_log.log_start_offset
        # The common append in one call (storage/common_append.py), else append_batch.
        result = append_common(partition_log, c.batch, header) or partition_log.append_batch(c.batch, header)
    except InvalidBatch as exc:
        return _refused_batch(ctx, c.topic, c.partition, exc)
    except KafkaError as exc:
        log.info("produce refused", topic=c.topic, partition=c.partition, error=exc.code.name, reason=exc.message,
                 client_id=ctx.header.client_id)
        return _error(c.partition, exc.code, exc.message, log_start_offset=log_start_offset)
    return {
        "index": c.partition,
        "error_code": _NO_ERROR,
        "base_offset": result.base_offset,
        # Kafka answers a duplicate with its cached batch's timestamp as the append time.
        "log_append_time": result.timestamp if result.duplicate else append_time,
        "log_start_offset": partition_log.log_start_offset,
    }


# What the coordinator's refusal to add a partition becomes in the Produce answer, as
# Kafka's produce path translates it: PRODUCER_FENCED means the same to the client as
# INVALID_PRODUCER_EPOCH, and the coordinator's retriable errors become
# NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh.
_ADD_PARTITION_ERRORS = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
}


def _add_to_transaction(ctx: RequestContext, transactional_id: str, checked: CheckedTopics) -> None:
    """Produce v12 (transaction version 2, KIP-890 part 2): the client sends no
    AddPartitionsToTxn; the broker adds the request's partitions to the transaction
    itself, before any is appended, in one `__transaction_state` record (Kafka sends one
    AddPartitionsToTxn for the request). A partition the coordinator refuses is
    answered with the refusal (put in `checked` in its place)."""
    by_producer: dict[tuple[int, int], list[_Checked]] = {}
    for _, partitions in checked:
        for c in partitions:
            if isinstance(c, _Checked) and c.header.is_transactional:
                by_producer.setdefault((c.header.producer_id, c.header.producer_epoch), []).append(c)
    for (producer_id, producer_epoch), adding in by_producer.items():
        try:
            ctx.services.transactions.add_partitions_implicitly(transactional_id, producer_id, producer_epoch,
                                                                [(c.topic, c.partition) for c in adding])
        except KafkaError as exc:
            answer = _ADD_PARTITION_ERRORS.get(exc.code, exc.code)
            message = exc.message
            if answer is ErrorCode.not_enough_replicas:
                message = f"Unable to add the partition to the transaction. Underlying error: {exc.code.name}"
            log.info("produce refused", transactional_id=transactional_id, error=answer.name, reason=exc.message,
                     client_id=ctx.header.client_id)
            for c in adding:
                _replace(checked, c, _error(c.partition, answer, message))


def _check_timestamps(header: BatchHeader, config: LogConfig) -> None:
    """message.timestamp.before/after.max.ms against the broker's clock, on the batch's
    first and largest timestamps (batch.timestamp_outside)."""
    now = int(time.time() * 1000)
    low = now - config.message_timestamp_before_max_ms
    high = now + config.message_timestamp_after_max_ms
    timestamp = timestamp_outside(header, now, config.message_timestamp_before_max_ms,
                                  config.message_timestamp_after_max_ms)
    if timestamp is not None:
        raise KafkaError(ErrorCode.invalid_timestamp,
                         f"Timestamp {timestamp} of message with offset 0 is out of range. The timestamp should "
                         f"be within [{max(low, 0)}, {high}]")


def _refused_batch(ctx: RequestContext, topic: str, partition: int, exc: InvalidBatch) -> PartitionProduceResponse:
    return _refused_batch_logged(topic, partition, exc, ctx.header.client_id, ctx.peer)


def _refused_batch_logged(topic: str, partition: int, exc: InvalidBatch, client_id: str | None,
                          peer: str) -> PartitionProduceResponse:
    code = ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record
    log.warning("produce refused", topic=topic, partition=partition, error=code.name, reason=str(exc),
                client_id=client_id, peer=peer)
    return _error(partition, code, str(exc))


def _error(partition: int, code: ErrorCode, message: str | None = None,
           record_errors: list[tuple[int, str]] = (),  # type: ignore[assignment]
           log_start_offset: int = -1) -> PartitionProduceResponse:
    """A refused partition. Kafka gives the log start offset with the errors of a batch
    it read against the log (sequence, epoch, transaction state, record and timestamp
    checks, not enough replicas), -1 with the others (unknown partition, sizes, CRC)."""
    return {
        "index": partition,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": log_start_offset,
        # Produce v8+ says which records of the batch were refused.
        "record_errors": [{"batch_index": index, "batch_index_error_message": text} for index, text in record_errors],
        "error_message": message,
    }
