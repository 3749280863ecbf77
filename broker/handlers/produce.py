"""Produce: validate each partition's batch and append it.

Per partition: the topic must exist and not be internal; the batch must be one valid
v2 batch (CRC-32C, lengths, size limits) whose records are well formed (and keyed on a
compacted topic); then the partition log applies the idempotence rules and appends. Each partition gets its own error code; one bad
partition does not fail the others. acks=0 gets no response at all.
"""

from __future__ import annotations

from typing import Any

from ottla.coordinator.internal_topics import ClientAction, check_client_action
from ottla.protocol.batch import BatchTooLarge, InvalidBatch, validate_produced_batch
from ottla.protocol.compression import EXPANSION_LIMIT
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import InvalidRecords, validate_records

from ..logging import get_logger
from .context import RequestContext

log = get_logger("ottla.produce")


def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    if acks not in (0, 1, -1):
        responses = [
            {"name": t.name, "partition_responses": [_error(p.index, ErrorCode.invalid_required_acks)
                                                     for p in t.partition_data]}
            for t in request.topic_data
        ]
        return ctx.respond(responses=responses)
    responses = []
    for topic_data in request.topic_data:
        partitions = [
            _append(ctx, topic_data.name, p.index, p.records, request.transactional_id)
            for p in topic_data.partition_data
        ]
        responses.append({"name": topic_data.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return ctx.respond(responses=responses)


def _append(ctx: RequestContext, topic: str, partition: int, records: bytes | None,
            transactional_id: str | None) -> dict[str, Any]:
    logs = ctx.services.logs
    partition_log = logs.partition(topic, partition)
    if partition_log is None:
        return _error(partition, ErrorCode.unknown_topic_or_partition)
    try:
        check_client_action(topic, ClientAction.APPEND)
    except KafkaError as exc:
        log.warning("produce refused", topic=topic, partition=partition, error=exc.code.name, reason=exc.message,
                    client_id=ctx.header.client_id, peer=ctx.peer)
        return _error(partition, exc.code, exc.message)
    config = partition_log.config
    try:
        if not records:
            raise InvalidBatch("no record batch", corrupt=True)
        header = validate_produced_batch(records, config.max_message_bytes)
        if header.size > config.segment_bytes:
            return _error(partition, ErrorCode.record_list_too_large,
                          f"batch of {header.size} bytes exceeds segment.bytes ({config.segment_bytes})")
        validate_records(records, header, compacted=config.compact, topic_partition=f"{topic}-{partition}",
                         max_decompressed=EXPANSION_LIMIT * config.max_message_bytes)
        if header.is_transactional:
            if transactional_id is None:
                raise InvalidBatch("transactional batch in a request without a transactional id", corrupt=False)
            ctx.services.transactions.verify(transactional_id, header.producer_id, header.producer_epoch,
                                           topic, partition)
        result = partition_log.append_batch(records, header)
    except InvalidBatch as exc:
        code = ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record
        log.warning("produce refused", topic=topic, partition=partition, error=code.name, reason=str(exc),
                    client_id=ctx.header.client_id, peer=ctx.peer)
        return _error(partition, code, str(exc))
    except InvalidRecords as exc:
        log.warning("produce refused", topic=topic, partition=partition, error="INVALID_RECORD", reason=str(exc),
                    client_id=ctx.header.client_id, peer=ctx.peer)
        return _error(partition, ErrorCode.invalid_record, str(exc), exc.record_errors)
    except BatchTooLarge as exc:
        return _error(partition, ErrorCode.message_too_large, str(exc))
    except KafkaError as exc:
        log.info("produce refused", topic=topic, partition=partition, error=exc.code.name, reason=exc.message,
                 client_id=ctx.header.client_id)
        return _error(partition, exc.code, exc.message)
    return {
        "index": partition,
        "error_code": ErrorCode.none,
        "base_offset": result.base_offset,
        "log_append_time": None,
        "log_start_offset": partition_log.log_start_offset,
    }


def _error(partition: int, code: ErrorCode, message: str | None = None,
           record_errors: list[tuple[int, str]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "index": partition,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        # Produce v8+ says which records of the batch were refused.
        "record_errors": [{"batch_index": index, "batch_index_error_message": text} for index, text in record_errors],
        "error_message": message,
    }
