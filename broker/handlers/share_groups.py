"""Share groups' APIs (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe (membership),
ShareFetch and ShareAcknowledge (records), thin translations to the share coordinator
(coordinator/share_coordinator.py) and the broker's share sessions (share_sessions.py).

ShareFetch first applies the acknowledgements it carries, then acquires records for the
member from every partition of its share session: up to `max_records` (rounded up to
whole batches, unless the request asks for the record-limit mode), within `max_bytes`.
With nothing to give it waits, like Fetch, until an append or the expiry of a lock
brings something, or `max_wait` passes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING

from ottla.coordinator.share_coordinator import HeartbeatResult
from ottla.coordinator.share_group import ShareGroup
from ottla.coordinator.share_partition import AckBatch
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.views import ZERO_UUID

from ..security.authorizer import Operation, ResourceType
from ..share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from .authorized_operations import OMITTED, authorized_operations
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views import alter_share_group_offsets as alter_offsets
    from ottla.protocol.views import delete_share_group_offsets as delete_offsets
    from ottla.protocol.views import describe_share_group_offsets as describe_offsets
    from ottla.protocol.views import share_acknowledge, share_fetch
    from ottla.protocol.views import share_group_describe as describe
    from ottla.protocol.views import share_group_heartbeat as heartbeat

# ShareGroupDescribe's assignor: Kafka's share assignor.
SHARE_ASSIGNOR = "simple"
# Acknowledgement batches one request may carry per partition (Kafka bounds them by the
# request size only; each batch costs a check of every offset it names).
MAX_ACK_BATCHES = 10_000
RECORD_LIMIT = 1  # ShareFetch's share_acquire_mode


# --- membership ----------------------------------------------------------------------------


def handle_heartbeat(ctx: RequestContext, request: heartbeat.ShareGroupHeartbeatRequest
                     ) -> heartbeat.ShareGroupHeartbeatResponse:
    names = request.subscribed_topic_names
    refused = ctx.membership_refused(request.group_id, names)
    if refused is not None:
        return {"error_code": refused, "member_epoch": 0, "heartbeat_interval": 0}
    try:
        result = ctx.services.shares.heartbeat(
            request.group_id, request.member_id, request.member_epoch, request.rack_id,
            None if names is None else tuple(names), ctx.header.client_id or "", "/" + ctx.host)
    except KafkaError as exc:
        result = HeartbeatResult(exc.code, exc.message)
    assignment: heartbeat.Assignment | None = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                           for t, ps in sorted(result.assignment.items())]}
    return {"error_code": result.error, "error_message": result.message, "member_id": result.member_id,
            "member_epoch": result.member_epoch, "heartbeat_interval": result.heartbeat_interval_ms,
            "assignment": assignment}


def _described(group: ShareGroup, names: dict[uuid.UUID, str]) -> describe.DescribedGroup:
    return {
        "error_code": ErrorCode.none,
        "group_id": group.group_id,
        "group_state": group.state_name,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": SHARE_ASSIGNOR,
        "members": [{
            "member_id": m.member_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "assignment": {"topic_partitions": [
                {"topic_id": t, "topic_name": names[t], "partitions": sorted(ps)}
                for t, ps in sorted(m.assigned.items()) if t in names]},
        } for m in group.members.values()],
        "authorized_operations": OMITTED,
    }


def handle_describe(ctx: RequestContext, request: describe.ShareGroupDescribeRequest
                    ) -> describe.ShareGroupDescribeResponse:
    shares = ctx.services.shares
    names = {t.topic_id: name for name, t in ctx.services.logs.topics.items()}
    described: list[describe.DescribedGroup] = []
    for group_id in request.group_ids:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            code, message = ErrorCode.group_authorization_failed, None
        else:
            try:
                shares.require_loaded(group_id)
                group = shares.share_group(group_id)
                if all(ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, n) for n in group.subscribed_topics()):
                    answer = _described(group, names)
                    answer["authorized_operations"] = authorized_operations(
                        ctx, ResourceType.GROUP, group_id, request.include_authorized_operations)
                    described.append(answer)
                    continue
                code = ErrorCode.topic_authorization_failed
                message = "The described group uses topics that the client is not authorized to describe."
            except KafkaError as exc:
                code, message = exc.code, exc.message
        described.append({"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
                          "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                          "authorized_operations": OMITTED})
    return {"groups": described}


# --- records -------------------------------------------------------------------------------


def _ack_batches(batches: Sequence[share_fetch.AcknowledgementBatch]) -> list[AckBatch]:
    if len(batches) > MAX_ACK_BATCHES:
        raise KafkaError(ErrorCode.invalid_request, f"More than {MAX_ACK_BATCHES} acknowledgement batches.")
    return [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]


def _acknowledge(ctx: RequestContext, group_id: str, member_id: str,
                 topics: Iterable[share_fetch.FetchTopic]) -> dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]]:
    """Apply the acknowledgements of each partition: its error, if any."""
    results: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
    logs = ctx.services.logs
    for t in topics:
        # kio reads the all-zero id as None; sessions and answers key partitions by UUID.
        topic_id = t.topic_id or ZERO_UUID
        topic = logs.topic_by_id(topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            key = (topic_id, p.partition_index)
            try:
                if topic is None:
                    raise KafkaError(ErrorCode.unknown_topic_id, None)
                if not ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name):
                    raise KafkaError(ErrorCode.topic_authorization_failed, None)
                if not 0 <= p.partition_index < len(topic.partitions):
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
                ctx.services.shares.acknowledge(group_id, member_id, topic_id, p.partition_index,
                                                _ack_batches(p.acknowledgement_batches))
                results[key] = (ErrorCode.none, None)
            except KafkaError as exc:
                results[key] = (exc.code, exc.message)
    return results


def _partition(index: int, code: ErrorCode = ErrorCode.none, message: str | None = None,
               ack: tuple[ErrorCode, str | None] | None = None, node_id: int = 0, records: bytes = b"",
               acquired: list[tuple[int, int, int]] | None = None) -> share_fetch.PartitionData:
    return {"partition_index": index, "error_code": code, "error_message": message,
            "acknowledge_error_code": int(ack[0]) if ack else 0, "acknowledge_error_message": ack[1] if ack else None,
            "current_leader": {"leader_id": node_id, "leader_epoch": 0}, "records": records,
            "acquired_records": [{"first_offset": f, "last_offset": last, "delivery_count": c}
                                 for f, last, c in acquired or ()]}


def _by_topic(partitions: dict[tuple[uuid.UUID, int], share_fetch.PartitionData]
              ) -> list[share_fetch.ShareFetchableTopicResponse]:
    topics: dict[uuid.UUID, list[share_fetch.PartitionData]] = {}
    for (topic_id, _), answer in partitions.items():
        topics.setdefault(topic_id, []).append(answer)
    return [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]


def _lock_timeout_ms(ctx: RequestContext, group_id: str) -> int:
    return ctx.services.shares.settings(group_id).record_lock_duration_ms


def _fetch_refused(code: ErrorCode, message: str | None = None) -> share_fetch.ShareFetchResponse:
    return {"error_code": code, "error_message": message, "acquisition_lock_timeout": 0, "responses": [],
            "node_endpoints": []}


def _acknowledge_refused(code: ErrorCode, message: str | None = None) -> share_acknowledge.ShareAcknowledgeResponse:
    return {"error_code": code, "error_message": message, "acquisition_lock_timeout": 0, "responses": [],
            "node_endpoints": []}


def _refusal(ctx: RequestContext, group_id: str, member_id: str) -> tuple[ErrorCode, str | None] | None:
    """What both ShareFetch and ShareAcknowledge refuse before any session is looked at."""
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    if not group_id or not member_id:
        return ErrorCode.invalid_request, "GroupId and MemberId must be set."
    if ctx.services.shares.loading:
        return ErrorCode.coordinator_load_in_progress, None
    return None


def handle_share_fetch(ctx: RequestContext, request: share_fetch.ShareFetchRequest
                       ) -> share_fetch.ShareFetchResponse | Awaitable[share_fetch.ShareFetchResponse]:
    group_id, member_id = request.group_id or "", request.member_id or ""
    epoch = request.share_session_epoch
    refusal = _refusal(ctx, group_id, member_id)
    if refusal is not None:
        return _fetch_refused(*refusal)
    shares, sessions = ctx.services.shares, ctx.services.share_sessions
    acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    try:
        if epoch == INITIAL_EPOCH:
            if acks:
                raise KafkaError(ErrorCode.invalid_request, "Acknowledge data present on initial share fetch request.")
            session, old = sessions.open(group_id, member_id, lambda s: not shares.is_member(s.group_id, s.member_id))
            if old is not None:
                shares.release_member(group_id, member_id, [(group_id, t, p) for t, p in old.partitions])
        else:
            session = sessions.current(group_id, member_id, epoch)
    except KafkaError as exc:
        return _fetch_refused(exc.code, exc.message)
    wanted = [(t.topic_id or ZERO_UUID, p.partition_index) for t in request.topics for p in t.partitions]
    answers: dict[tuple[uuid.UUID, int], share_fetch.PartitionData] = {}
    ack_results = _acknowledge(ctx, group_id, member_id, request.topics)
    node_id = ctx.services.node_id
    for key, result in ack_results.items():
        answers[key] = _partition(key[1], ack=result, node_id=node_id)
    lock_ms = _lock_timeout_ms(ctx, group_id)
    if epoch == FINAL_EPOCH:
        shares.release_member(group_id, member_id, [(group_id, t, p) for t, p in session.partitions])
        sessions.close(session)
        return {"error_code": ErrorCode.none, "acquisition_lock_timeout": lock_ms, "responses": _by_topic(answers),
                "node_endpoints": []}
    for key in wanted:
        session.partitions[key] = None
    for t in request.forgotten_topics_data:
        for p in t.partitions:
            session.partitions.pop((t.topic_id or ZERO_UUID, p), None)
    if epoch != INITIAL_EPOCH:
        sessions.advance(session)  # a new session expects 1 next already
    # As Kafka, the answer names only the partitions with records, errors or
    # acknowledgement results, the first request of a session too.
    deadline = time.monotonic() + request.max_wait.total_seconds()
    got = _fetch(ctx, request, session, group_id, member_id, answers)
    if got or request.max_wait.total_seconds() <= 0 or not session.partitions:
        return {"error_code": ErrorCode.none, "acquisition_lock_timeout": lock_ms, "responses": _by_topic(answers),
                "node_endpoints": []}
    return _long_poll(ctx, request, session, group_id, member_id, answers, deadline, lock_ms)


async def _long_poll(ctx: RequestContext, request: share_fetch.ShareFetchRequest, session: ShareSession,
                     group_id: str, member_id: str, answers: dict[tuple[uuid.UUID, int], share_fetch.PartitionData],
                     deadline: float, lock_ms: int) -> share_fetch.ShareFetchResponse:
    services = ctx.services
    while not services.stopping:
        now = time.monotonic()
        if now >= deadline:
            break
        wake = deadline
        lock_deadline = services.shares.next_lock_deadline([(group_id, t, p) for t, p in session.partitions])
        if lock_deadline is not None:
            wake = min(wake, max(lock_deadline, now) + 0.01)
        names = []
        for topic_id, p in session.partitions:
            topic = services.logs.topic_by_id(topic_id)
            if topic is not None:
                names.append((topic.name, p))
        await services.waiters.wait(names, wake - now)
        if services.share_sessions.of_member(group_id, member_id) is not session:
            break  # the session was replaced or closed meanwhile
        if _fetch(ctx, request, session, group_id, member_id, answers):
            break
    return {"error_code": ErrorCode.none, "acquisition_lock_timeout": lock_ms, "responses": _by_topic(answers),
            "node_endpoints": []}


def _fetch(ctx: RequestContext, request: share_fetch.ShareFetchRequest, session: ShareSession, group_id: str,
           member_id: str, answers: dict[tuple[uuid.UUID, int], share_fetch.PartitionData]) -> bool:
    """Acquire records from the session's partitions into `answers`; whether anything
    (records or an error) is worth answering now."""
    services = ctx.services
    records_left = max(request.max_records, 1)
    # ShareFetch v2's acquire mode 1, record-limit: exactly max_records at most (mode 0,
    # batch-optimized, rounds up to whole batches).
    record_limit = request.share_acquire_mode == RECORD_LIMIT
    bytes_left = min(request.max_bytes, services.config.fetch_max_bytes)
    node_id = services.node_id
    news = False
    for topic_id, index in list(session.partitions):
        key = (topic_id, index)
        previous = answers.get(key)
        ack = None if previous is None else (ErrorCode(previous["acknowledge_error_code"]),
                                             previous["acknowledge_error_message"])
        topic = services.logs.topic_by_id(topic_id)
        code = ErrorCode.none
        if topic is None:
            code = ErrorCode.unknown_topic_id
        elif not ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.name):
            code = ErrorCode.topic_authorization_failed
        elif not 0 <= index < len(topic.partitions):
            code = ErrorCode.unknown_topic_or_partition
        if code is not ErrorCode.none:
            answers[key] = _partition(index, code, ack=ack, node_id=node_id)
            session.partitions.pop(key, None)  # as Kafka: a partition in error leaves the session
            news = True
            continue
        if records_left <= 0 or bytes_left <= 0:
            continue
        try:
            acquired, batches = services.shares.acquire(group_id, member_id, topic_id, index, records_left,
                                                        bytes_left, record_limit)
        except KafkaError as exc:
            answers[key] = _partition(index, exc.code, exc.message, ack=ack, node_id=node_id)
            news = True
            continue
        if not acquired.ranges:
            continue
        data = b"".join(batches)
        records_left -= acquired.count
        bytes_left -= len(data)
        answers[key] = _partition(index, ack=ack, node_id=node_id, records=data, acquired=acquired.ranges)
        news = True
    return news


def handle_share_acknowledge(ctx: RequestContext, request: share_acknowledge.ShareAcknowledgeRequest
                             ) -> share_acknowledge.ShareAcknowledgeResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""
    epoch = request.share_session_epoch
    refusal = _refusal(ctx, group_id, member_id)
    if refusal is not None:
        return _acknowledge_refused(*refusal)
    shares, sessions = ctx.services.shares, ctx.services.share_sessions
    if epoch == INITIAL_EPOCH:
        return _acknowledge_refused(ErrorCode.invalid_share_session_epoch)
    try:
        session = sessions.current(group_id, member_id, epoch)
    except KafkaError as exc:
        return _acknowledge_refused(exc.code, exc.message)
    if epoch != FINAL_EPOCH:
        sessions.advance(session)
    node_id = ctx.services.node_id
    results = _acknowledge(ctx, group_id, member_id, request.topics)
    topics: dict[uuid.UUID, list[share_acknowledge.PartitionData]] = {}
    for (topic_id, index), (code, message) in results.items():
        topics.setdefault(topic_id, []).append({"partition_index": index, "error_code": code,
                                                "error_message": message,
                                                "current_leader": {"leader_id": node_id, "leader_epoch": 0}})
    if epoch == FINAL_EPOCH:
        shares.release_member(group_id, member_id, [(group_id, t, p) for t, p in session.partitions])
        sessions.close(session)
    return {"error_code": ErrorCode.none, "acquisition_lock_timeout": _lock_timeout_ms(ctx, group_id),
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
            "node_endpoints": []}


# --- the share-group offsets APIs ----------------------------------------------------------

_NOT_HOSTED = "This server does not host this topic-partition."


def handle_describe_offsets(ctx: RequestContext, request: describe_offsets.DescribeShareGroupOffsetsRequest
                            ) -> describe_offsets.DescribeShareGroupOffsetsResponse:
    """DescribeShareGroupOffsets: each share-partition's start offset (and, from v1, its
    lag). Named topics that do not exist are UNKNOWN_TOPIC_OR_PARTITION; a group that
    does not exist answers no topics, as Kafka does."""
    shares, logs = ctx.services.shares, ctx.services.logs
    names = {t.topic_id: name for name, t in logs.topics.items()}
    groups: list[describe_offsets.DescribeShareGroupOffsetsResponseGroup] = []
    for wanted in request.groups:
        group_id = wanted.group_id
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append({"group_id": group_id, "topics": [], "error_code": ErrorCode.group_authorization_failed})
            continue
        try:
            shares.require_loaded(group_id)
        except KafkaError as exc:
            groups.append({"group_id": group_id, "topics": [], "error_code": exc.code, "error_message": exc.message})
            continue
        if wanted.topics is None:
            asked: list[tuple[str, list[int]]] = []
            for _, topic_id, partition in shares.offsets_of(group_id):
                if topic_id in names:
                    if not asked or asked[-1][0] != names[topic_id]:
                        asked.append((names[topic_id], []))
                    asked[-1][1].append(partition)
        else:
            asked = [(t.topic_name, list(t.partitions)) for t in wanted.topics]
        topics: list[describe_offsets.DescribeShareGroupOffsetsResponseTopic] = []
        for name, partitions in asked:
            topic = logs.topic(name)
            answers: list[describe_offsets.DescribeShareGroupOffsetsResponsePartition] = []
            for p in partitions:
                code, start, lag = ErrorCode.none, -1, -1
                if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
                    code = ErrorCode.topic_authorization_failed
                elif topic is None or not 0 <= p < len(topic.partitions):
                    code = ErrorCode.unknown_topic_or_partition
                else:
                    start, lag = shares.describe_offsets(group_id, topic.topic_id, p)
                answers.append({"partition_index": p, "start_offset": start, "leader_epoch": 0 if start >= 0 else -1,
                                "lag": lag, "error_code": code,
                                "error_message": _NOT_HOSTED if code is ErrorCode.unknown_topic_or_partition else None})
            topics.append({"topic_name": name, "topic_id": topic.topic_id if topic else None, "partitions": answers})
        groups.append({"group_id": group_id, "topics": topics, "error_code": ErrorCode.none})
    return {"groups": groups}


def handle_alter_offsets(ctx: RequestContext, request: alter_offsets.AlterShareGroupOffsetsRequest
                         ) -> alter_offsets.AlterShareGroupOffsetsResponse:
    """AlterShareGroupOffsets: new start offsets for an empty share group's partitions."""
    shares, logs = ctx.services.shares, ctx.services.logs
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "responses": []}
    answers: list[alter_offsets.AlterShareGroupOffsetsResponseTopic] = []
    starts: list[tuple[uuid.UUID, int, int]] = []
    for t in request.topics:
        topic = logs.topic(t.topic_name)
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, t.topic_name)
        partitions: list[alter_offsets.AlterShareGroupOffsetsResponsePartition] = []
        for p in t.partitions:
            code = ErrorCode.none
            if not readable:
                code = ErrorCode.topic_authorization_failed
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                code = ErrorCode.unknown_topic_or_partition
            else:
                starts.append((topic.topic_id, p.partition_index, p.start_offset))
            partitions.append({"partition_index": p.partition_index, "error_code": code,
                               "error_message": _NOT_HOSTED if code is ErrorCode.unknown_topic_or_partition else None})
        answers.append({"topic_name": t.topic_name, "topic_id": topic.topic_id if topic else None,
                        "partitions": partitions})
    try:
        shares.alter_offsets(request.group_id, starts)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "responses": []}
    return {"error_code": ErrorCode.none, "responses": answers}


def handle_delete_offsets(ctx: RequestContext, request: delete_offsets.DeleteShareGroupOffsetsRequest
                          ) -> delete_offsets.DeleteShareGroupOffsetsResponse:
    """DeleteShareGroupOffsets: an empty share group forgets the state of these topics."""
    shares, logs = ctx.services.shares, ctx.services.logs
    if not ctx.allowed(Operation.DELETE, ResourceType.GROUP, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "responses": []}
    had_state = bool(shares.offsets_of(request.group_id))
    answers: list[delete_offsets.DeleteShareGroupOffsetsResponseTopic] = []
    topic_ids: list[uuid.UUID] = []
    for t in request.topics:
        topic = logs.topic(t.topic_name)
        code = ErrorCode.none
        if not ctx.allowed(Operation.READ, ResourceType.TOPIC, t.topic_name):
            code = ErrorCode.topic_authorization_failed
        elif topic is None:
            code = ErrorCode.unknown_topic_or_partition
        else:
            topic_ids.append(topic.topic_id)
        answers.append({"topic_name": t.topic_name, "topic_id": topic.topic_id if topic else None, "error_code": code,
                        "error_message": _NOT_HOSTED if code is ErrorCode.unknown_topic_or_partition else None})
    try:
        shares.delete_offsets(request.group_id, topic_ids)
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "responses": []}
    if not had_state:
        answers = []  # Kafka answers no topic at all for a group without share-partitions
    return {"error_code": ErrorCode.none, "responses": answers}
