"""Fetch: whole batches from each partition, with long polling.

Data is read straight from the segment files (the bytes go into the response as they
are on disk). read_committed stops at the last stable offset and lists the aborted
transactions in the returned range; read_uncommitted stops at the high watermark and
lists none (some clients misbehave if they get one).

A response holds at most min(max_bytes, fetch.max.bytes) of records, and always the
first batch found whole (Kafka's rule), so a consumer never stalls on a big batch.

If less than `min_bytes` is available the request waits until an append to one of
its partitions brings enough, or `max_wait` passes. Fetch sessions (KIP-227) are not
kept: session id 0 tells clients to send full requests, which they do.
"""

from __future__ import annotations

import time
from typing import Any

from ottla.protocol.errors import ErrorCode, KafkaError

from ..authorizer import Operation, ResourceType
from .context import RequestContext

READ_COMMITTED = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    max_wait_s = request.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait_s
    wanted = _resolve(ctx, request)
    while True:
        responses, size, errors = _collect(ctx, request, wanted)
        remaining = deadline - time.monotonic()
        if size >= request.min_bytes or errors or remaining <= 0 or services.stopping:
            break
        await services.waiters.wait([(t.name, p.partition) for t, _, parts in wanted if t is not None
                                     for p in parts], remaining)
    return ctx.respond(error_code=ErrorCode.none, session_id=0, responses=responses)


def _resolve(ctx: RequestContext, request: Any) -> list[tuple[Any, Any, Any]]:
    """(topic or None, the request's topic entry, its partitions) per requested topic."""
    logs = ctx.services.logs
    resolved = []
    for fetch_topic in request.topics:
        name = getattr(fetch_topic, "topic", None)
        topic = logs.topic(name) if name is not None else logs.topic_by_id(fetch_topic.topic_id)
        resolved.append((topic, fetch_topic, fetch_topic.partitions))
    return resolved


def _collect(ctx: RequestContext, request: Any, wanted: list) -> tuple[list, int, bool]:
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    # As Kafka: the response holds at most the smaller of the client's max_bytes and
    # the broker's fetch.max.bytes, except that the first batch found is returned whole
    # even when it alone is larger (min_one below), so no consumer stalls on a batch
    # bigger than its limits. v0-v2 have no max_bytes: the broker's limit applies.
    budget = min(getattr(request, "max_bytes", ctx.services.config.fetch_max_bytes),
                 ctx.services.config.fetch_max_bytes)
    size = 0
    errors = False
    responses = []
    for topic, fetch_topic, partitions in wanted:
        results = []
        readable = topic is None or ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name)
        for p in partitions:
            if not readable:
                results.append(_error(p.partition, ErrorCode.topic_authorization_failed))
                errors = True
                continue
            if topic is None:
                code = ErrorCode.unknown_topic_id if getattr(fetch_topic, "topic", None) is None \
                    else ErrorCode.unknown_topic_or_partition
                results.append(_error(p.partition, code))
                errors = True
                continue
            log = topic.partitions[p.partition] if 0 <= p.partition < len(topic.partitions) else None
            if log is None:
                results.append(_error(p.partition, ErrorCode.unknown_topic_or_partition))
                errors = True
                continue
            try:
                got = log.read(p.fetch_offset, min(p.partition_max_bytes, max(budget, 0)), read_committed,
                               min_one=size == 0)
            except KafkaError as exc:
                results.append(_error(p.partition, exc.code, log.high_watermark, log.log_start_offset))
                errors = True
                continue
            n = len(got.records) if got.records is not None else 0
            size += n
            budget -= n
            results.append({
                "partition_index": p.partition,
                "error_code": ErrorCode.none,
                "high_watermark": got.high_watermark,
                "last_stable_offset": got.last_stable_offset,
                "log_start_offset": got.log_start_offset,
                "aborted_transactions": None if got.aborted is None else [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in got.aborted
                ],
                "preferred_read_replica": -1,
                # Kafka sends empty records, never null: older librdkafka rejects null.
                "records": got.records if got.records is not None else b"",
            })
        # A topic is named (v0-v12) or identified (v13+) as the request did: only the
        # field this version has, so building the response needs no lookup of others.
        if hasattr(fetch_topic, "topic_id"):
            responses.append({"topic_id": fetch_topic.topic_id, "partitions": results})
        else:
            responses.append({"topic": fetch_topic.topic, "partitions": results})
    return responses, size, errors


def _error(partition: int, code: ErrorCode, high_watermark: int = -1, log_start_offset: int = -1) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": code,
        "high_watermark": high_watermark,
        "last_stable_offset": -1,
        "log_start_offset": log_start_offset,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
