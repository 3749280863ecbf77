"""Fetch: whole batches from each partition, with long polling.

Data goes from the segment files into the response as it is on disk, and a large range
is not even read: the answer holds the range of the file (storage/file_slice.py), which
the connection sends with sendfile (broker/network/file_sender.py), so an answer of up
to fetch.max.bytes costs the broker no more memory than a short one, as in Kafka.
read_committed stops at the last stable offset and lists the aborted transactions in
the returned range; read_uncommitted stops at the high watermark and lists none (some
clients misbehave if they get one).

A response holds at most min(max_bytes, fetch.max.bytes) of records, and always the
first batch found whole (Kafka's rule), so a consumer never stalls on a big batch.

If less than `min_bytes` is available the request waits until an append to one of
its partitions brings enough, or `max_wait` passes.

Fetch sessions (KIP-227, broker/fetch_sessions.py): a request of a session reads every
partition of the session, and its answer names only the partitions with news.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.views import ZERO_UUID

from ..client_quotas import CONSUMER_BYTE_RATE
from ..fetch_sessions import INVALID_SESSION_ID, TOPIC_ID_VERSION, FetchContext, TopicKey, Wanted
from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.fetch import (
        AbortedTransaction,
        FetchableTopicResponse,
        FetchRequest,
        FetchResponse,
        PartitionData,
    )
    from ottla.storage.log_manager import Topic

READ_COMMITTED = 1


def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse | Awaitable[FetchResponse]:
    """The response, when the partitions have what the request asks for (or it asks not
    to wait); else an awaitable of it, which waits for appends. Answering at once
    without a coroutine lets the connection serve the request inline, as it is read,
    instead of through its worker task, a hop through the event loop that is a good part
    of a short request's cost."""
    context = _context(ctx, request)
    if context.error:
        # The whole request is refused: the client starts over with a full request.
        return {"error_code": context.error, "session_id": INVALID_SESSION_ID, "responses": []}
    deadline = time.monotonic() + request.max_wait.total_seconds()
    topics = _resolve(ctx, context.wanted)
    answers, size, errors = _collect(ctx, request, context.wanted, topics)
    if _answer_now(ctx, request, size, errors, deadline):
        return _answer(ctx, context, answers, size)
    return _long_poll(ctx, request, context, topics, deadline)


async def _long_poll(ctx: RequestContext, request: FetchRequest, context: FetchContext,
                     topics: dict[TopicKey, Topic | None], deadline: float) -> FetchResponse:
    """Wait for appends to the request's partitions until they bring min_bytes, or
    max_wait passes. It looks again before it first waits: the connection's worker
    starts this later than the first look, and an append in between wakes no one."""
    while True:
        answers, size, errors = _collect(ctx, request, context.wanted, topics)
        if _answer_now(ctx, request, size, errors, deadline):
            return _answer(ctx, context, answers, size)
        await ctx.services.waiters.wait([(topic.name, w.partition) for w in context.wanted
                                         if (topic := topics[w.topic]) is not None], deadline - time.monotonic())


def _answer_now(ctx: RequestContext, request: FetchRequest, size: int, errors: bool, deadline: float) -> bool:
    return (size >= request.min_bytes or errors or deadline - time.monotonic() <= 0
            or ctx.services.stopping)


def _answer(ctx: RequestContext, context: FetchContext, answers: list[tuple[Wanted, PartitionData]],
            fetched: int) -> FetchResponse:
    """The response of `answers`, which hold `fetched` bytes of records."""
    services = ctx.services
    throttle = services.quotas.throttle_ms(CONSUMER_BYTE_RATE, ctx.session.user, ctx.header.client_id or "", fetched,
                                           count_when_over=False)
    if throttle:
        # As Kafka: a fetch over its quota is answered empty, with the time to wait;
        # nothing of it counts, and a session's partitions are read again next time.
        ctx.throttle_ms = throttle
        return {"error_code": ErrorCode.none, "throttle_time": throttle, "responses": [],
                "session_id": context.session_id if context.incremental else INVALID_SESSION_ID}
    answers = services.fetch_sessions.answer(context, answers, int(time.time() * 1000))
    return {"error_code": ErrorCode.none, "session_id": context.session_id, "responses": _by_topic(answers)}


def _context(ctx: RequestContext, request: FetchRequest) -> FetchContext:
    """The partitions the request names (by topic name before v13, by topic id from
    then on; kio reads the all-zero id as None, which names no topic either), settled
    against its fetch session, if any (v7+; before, no session: its id and epoch read
    as none and final)."""
    by_id = ctx.version >= TOPIC_ID_VERSION
    wanted = [Wanted((t.topic_id or ZERO_UUID) if by_id else t.topic, p.partition, p.fetch_offset,
                     p.partition_max_bytes)
              for t in request.topics for p in t.partitions]
    forgotten: list[tuple[TopicKey, int]] = [((t.topic_id or ZERO_UUID) if by_id else t.topic, partition)
                                             for t in request.forgotten_topics_data for partition in t.partitions]
    return ctx.services.fetch_sessions.context(ctx.version, request.session_id, request.session_epoch, wanted,
                                               forgotten, int(time.time() * 1000))


def _resolve(ctx: RequestContext, wanted: list[Wanted]) -> dict[TopicKey, Topic | None]:
    """The topic (None if unknown) of each topic name or id among `wanted`."""
    logs = ctx.services.logs
    keys = {w.topic for w in wanted}
    if ctx.version >= TOPIC_ID_VERSION:
        return {key: logs.topic_by_id(key) if isinstance(key, uuid.UUID) else None for key in keys}
    return {key: logs.topic(key) if isinstance(key, str) else None for key in keys}


def _collect(ctx: RequestContext, request: FetchRequest, wanted: list[Wanted],
             topics: dict[TopicKey, Topic | None]) -> tuple[list[tuple[Wanted, PartitionData]], int, bool]:
    """Each wanted partition's answer; the bytes of records they hold; whether any is an error."""
    read_committed = request.isolation_level == READ_COMMITTED
    # As Kafka: the response holds at most the smaller of the client's max_bytes and
    # the broker's fetch.max.bytes, except that the first batch found is returned whole
    # even when it alone is larger (min_one below), so no consumer stalls on a batch
    # bigger than its limits.
    budget = min(request.max_bytes, ctx.services.config.fetch_max_bytes)
    # A consumer_byte_rate quota caps it at what the quota lets through in its window.
    window_bytes = ctx.services.quotas.window_bytes(CONSUMER_BYTE_RATE, ctx.session.user, ctx.header.client_id or "")
    if window_bytes is not None:
        budget = min(budget, window_bytes)
    size = 0
    errors = False
    readable = {key: topic is None or ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name)
                for key, topic in topics.items()}
    answers: list[tuple[Wanted, PartitionData]] = []
    for w in wanted:
        topic = topics[w.topic]
        if not readable[w.topic]:
            answers.append((w, _error(w.partition, ErrorCode.topic_authorization_failed)))
            errors = True
            continue
        if topic is None:
            code = ErrorCode.unknown_topic_id if ctx.version >= TOPIC_ID_VERSION \
                else ErrorCode.unknown_topic_or_partition
            answers.append((w, _error(w.partition, code)))
            errors = True
            continue
        log = topic.partitions[w.partition] if 0 <= w.partition < len(topic.partitions) else None
        if log is None:
            answers.append((w, _error(w.partition, ErrorCode.unknown_topic_or_partition)))
            errors = True
            continue
        try:
            got = log.read(w.fetch_offset, min(w.max_bytes, max(budget, 0)), read_committed, min_one=size == 0,
                           in_place=True)
        except KafkaError as exc:
            # Kafka's read error (OFFSET_OUT_OF_RANGE...) carries no offsets either.
            answers.append((w, _error(w.partition, exc.code, aborted=None)))
            errors = True
            continue
        n = len(got.records) if got.records is not None else 0
        size += n
        budget -= n
        answers.append((w, {
            "partition_index": w.partition,
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
        }))
    return answers, size, errors


def _by_topic(answers: list[tuple[Wanted, PartitionData]]) -> list[FetchableTopicResponse]:
    """Partition answers grouped into topic entries: a run of partitions of one topic
    makes one entry, as Kafka builds them. A topic is named (v0-v12) or identified
    (v13+) as the request did: only the field this version has."""
    responses: list[FetchableTopicResponse] = []
    partitions: list[PartitionData] = []
    last: TopicKey | None = None
    for w, answer in answers:
        topic = w.topic
        if topic != last:
            partitions = []
            responses.append({"topic": topic, "partitions": partitions} if isinstance(topic, str)
                             else {"topic_id": topic, "partitions": partitions})
            last = topic
        partitions.append(answer)
    return responses


def _error(partition: int, code: ErrorCode, aborted: Iterable[AbortedTransaction] | None = ()) -> PartitionData:
    """A partition that is not read: no offsets, as Kafka answers it. Kafka's errors found
    before reading (unknown topic or partition, authorization) carry an empty aborted
    transaction list, those of the read itself none."""
    return {
        "partition_index": partition,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": aborted,
        "preferred_read_replica": -1,
        "records": b"",
    }
