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
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.views import ZERO_UUID

from ..client_quotas import CONSUMER_BYTE_RATE
from ..fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    TOPIC_ID_VERSION,
    FetchContext,
    TopicKey,
    Wanted,
)
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
NO_WAIT = timedelta(0)
# Read once: on Python 3.11 each read of a member off its enum class goes through
# EnumType.__getattr__'s slot (about 860 instructions in Heartbeat's profile).
NO_ERROR = ErrorCode.none
TOPIC_AUTHORIZATION_FAILED = ErrorCode.topic_authorization_failed
UNKNOWN_TOPIC_ID = ErrorCode.unknown_topic_id
UNKNOWN_TOPIC_OR_PARTITION = ErrorCode.unknown_topic_or_partition
READ = Operation.READ
TOPIC = ResourceType.TOPIC


# What the first look settled, for the long poll's later looks: the session's context,
# the wanted partitions, their topics, and when max_wait is over.
Settled = tuple["FetchContext | None", "list[Wanted]", "dict[TopicKey, Topic | None]", float]


def handle(ctx: RequestContext, request: FetchRequest, settled: Settled | None = None
           ) -> FetchResponse | Awaitable[FetchResponse] | None:
    """The response, when the partitions have what the request asks for (or it asks not
    to wait); else an awaitable of it, which waits for appends. Answering at once
    without a coroutine lets the connection serve the request inline, as it is read,
    instead of through its worker task, a hop through the event loop that is a good part
    of a short request's cost.

    The long poll looks again through this same function, passing what the first look
    `settled` (the session is settled once, the topics found once); then None means
    wait for appends and look again. Each partition is read and answered here (the
    partitions named by topic name before v13, by topic id from then on; kio reads the
    all-zero id as None, which names no topic either), in loops, not in helpers per
    step, and the read's result unpacked in place with its arguments passed by position:
    each Python call and frame, keyword argument (about 1.4k instructions) and attribute
    read through a property is a good part of what a partition costs."""
    services = ctx.services
    if settled is None:
        by_id = ctx.header.api_version >= TOPIC_ID_VERSION
        wanted: list[Wanted] = []
        add_wanted = wanted.append
        for t in request.topics:
            key = (t.topic_id or ZERO_UUID) if by_id else t.topic
            for p in t.partitions:
                add_wanted((key, p.partition, p.fetch_offset, p.partition_max_bytes))
        context: FetchContext | None = None
        if request.session_id != INVALID_SESSION_ID or request.session_epoch != FINAL_EPOCH:
            # Before v7 the id and epoch read as none and final: such a request, like every
            # Fetch of librdkafka's, is a full one outside any session, with nothing to settle.
            context = _context(ctx, request, wanted, by_id)
            if context.error:
                # The whole request is refused: the client starts over with a full request.
                return {"error_code": context.error, "session_id": INVALID_SESSION_ID, "responses": []}
            wanted = context.wanted
        logs = services.logs
        topics: dict[TopicKey, Topic | None] = {}
        for w in wanted:
            key = w[0]  # the topic's name or id
            if key not in topics:
                if by_id:
                    topics[key] = logs.topic_by_id(key) if isinstance(key, uuid.UUID) else None
                else:
                    topics[key] = logs.topics.get(key) if isinstance(key, str) else None
        deadline: float | None = None
    else:
        context, wanted, topics, deadline = settled
    read_committed = request.isolation_level == READ_COMMITTED
    # As Kafka: the response holds at most the smaller of the client's max_bytes and
    # the broker's fetch.max.bytes, except that the first batch found is returned whole
    # even when it alone is larger (min_one below), so no consumer stalls on a batch
    # bigger than its limits.
    # (Comparisons, not min() and max(): each builtin call costs about 750 instructions.)
    budget = request.max_bytes
    broker_max = services.config.fetch_max_bytes
    if broker_max < budget:
        budget = broker_max
    quotas = services.quotas
    quota_set = CONSUMER_BYTE_RATE in quotas.byte_rate_keys
    if quota_set:
        # A consumer_byte_rate quota caps it at what the quota lets through in its window.
        window_bytes = quotas.window_bytes(CONSUMER_BYTE_RATE, ctx.session.user, ctx.header.client_id or "")
        if window_bytes is not None and window_bytes < budget:
            budget = window_bytes
    size = 0
    errors = False
    unreadable = () if services.authorizer is None else {
        key for key, topic in topics.items() if topic is not None and not ctx.allowed(READ, TOPIC, topic.name)}
    answers: list[tuple[Wanted, PartitionData]] = []
    add = answers.append
    for w in wanted:
        topic_key, partition, fetch_offset, max_bytes = w
        topic = topics[topic_key]
        if topic_key in unreadable:
            add((w, _error(partition, TOPIC_AUTHORIZATION_FAILED)))
            errors = True
            continue
        if topic is None:
            add((w, _error(partition, UNKNOWN_TOPIC_ID if ctx.version >= TOPIC_ID_VERSION
                           else UNKNOWN_TOPIC_OR_PARTITION)))
            errors = True
            continue
        partition_logs = topic.partitions
        if not 0 <= partition < len(partition_logs):
            add((w, _error(partition, UNKNOWN_TOPIC_OR_PARTITION)))
            errors = True
            continue
        if budget < max_bytes:
            max_bytes = budget if budget > 0 else 0
        try:
            # (offset, max_bytes, read_committed, min_one, in_place): a large range may
            # come back as a FileSlice, sent with sendfile.
            records, high_watermark, last_stable_offset, log_start_offset, aborted = partition_logs[partition].read(
                fetch_offset, max_bytes, read_committed, size == 0, True)
        except KafkaError as exc:
            # Kafka's read error (OFFSET_OUT_OF_RANGE...) carries no offsets either.
            add((w, _error(partition, exc.code, aborted=None)))
            errors = True
            continue
        if records is None:
            records = b""  # Kafka sends empty records, never null: older librdkafka rejects null
        else:
            n = len(records)
            size += n
            budget -= n
        add((w, {
            "partition_index": partition,
            "error_code": NO_ERROR,
            "high_watermark": high_watermark,
            "last_stable_offset": last_stable_offset,
            "log_start_offset": log_start_offset,
            # (No comprehension, a Python frame, for read_committed's usual empty list.)
            "aborted_transactions": None if aborted is None else [
                {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted
            ] if aborted else [],
            # preferred_read_replica is left to its default, -1 (no other replica) in
            # every version that has it (v11+): named, it would also send each partition
            # of a v4-v10 answer through the builder's Python check of the names a
            # version lacks.
            "records": records,
        }))
    if size < request.min_bytes and not errors and not services.stopping:
        if deadline is None:
            if request.max_wait > NO_WAIT:
                # As Kafka's delayed fetch, max_wait counts from the first look that found too little.
                return _long_poll(ctx, request, (context, wanted, topics,
                                                 time.monotonic() + request.max_wait.total_seconds()))
        elif deadline > time.monotonic():
            return None  # a later look only (deadline comes with `settled`): the long poll waits again
    if quota_set:
        throttle = quotas.throttle_ms(CONSUMER_BYTE_RATE, ctx.session.user, ctx.header.client_id or "", size,
                                      count_when_over=False)
        if throttle:
            # As Kafka: a fetch over its quota is answered empty, with the time to wait;
            # nothing of it counts, and a session's partitions are read again next time.
            ctx.throttle_ms = throttle
            return {"error_code": NO_ERROR, "throttle_time": throttle, "responses": [],
                    "session_id": context.session_id if context is not None and context.incremental
                    else INVALID_SESSION_ID}
    session_id = INVALID_SESSION_ID
    if context is not None:
        answers = services.fetch_sessions.answer(context, answers, int(time.time() * 1000))
        session_id = context.session_id
    # The topic entries: a run of partitions of one topic makes one entry, as Kafka
    # builds them. A topic is named (v0-v12) or identified (v13+) as the request did:
    # only the field this version has.
    responses: list[FetchableTopicResponse] = []
    partitions: list[PartitionData] = []
    last: TopicKey | None = None
    for w, answer in answers:
        topic_key = w[0]
        if topic_key != last:
            partitions = []
            responses.append({"topic": topic_key, "partitions": partitions} if isinstance(topic_key, str)
                             else {"topic_id": topic_key, "partitions": partitions})
            last = topic_key
        partitions.append(answer)
    return {"error_code": NO_ERROR, "session_id": session_id, "responses": responses}


async def _long_poll(ctx: RequestContext, request: FetchRequest, settled: Settled) -> FetchResponse:
    """Wait for appends to the request's partitions until they bring min_bytes, or
    max_wait passes. It looks again before it first waits: the connection's worker
    starts this later than the first look, and an append in between wakes no one."""
    _, wanted, topics, deadline = settled
    while True:
        answer = handle(ctx, request, settled)
        if answer is not None:
            # (With `settled`, handle answers or says to wait: it makes no other poll.)
            return cast("FetchResponse", answer)
        await ctx.services.waiters.wait([(topic.name, partition) for key, partition, _, _ in wanted
                                         if (topic := topics[key]) is not None], deadline - time.monotonic())


def _context(ctx: RequestContext, request: FetchRequest, wanted: list[Wanted], by_id: bool) -> FetchContext:
    """The request's partitions settled against its fetch session (v7+)."""
    # (Most requests forget nothing: no comprehension, a Python frame, for them.)
    forgotten: list[tuple[TopicKey, int]] = [((t.topic_id or ZERO_UUID) if by_id else t.topic, partition)
                                             for t in request.forgotten_topics_data
                                             for partition in t.partitions] if request.forgotten_topics_data else []
    return ctx.services.fetch_sessions.context(ctx.version, request.session_id, request.session_epoch, wanted,
                                               forgotten, int(time.time() * 1000))


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
        "records": b"",  # preferred_read_replica: its default, -1 (as in handle)
    }
