"""The group APIs of the classic protocol and those every group type shares: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete. Each translates to and from the group
coordinator (KIP-848's own APIs: consumer_groups.py), which raises its errors
(KafkaError, a write to `__consumer_offsets` that failed included): here they become
the response's error codes, so a client always gets an answer."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ottla.coordinator.classic_group import GroupState, JoinRequest, JoinResult, SyncResult
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.offsets_log import CommittedOffset
from ottla.coordinator.share_group import ShareGroup
from ottla.protocol.codec import Encoded
from ottla.protocol.errors import ErrorCode, KafkaError

from ..security.authorizer import Operation, ResourceType
from .authorized_operations import OMITTED as AUTHORIZED_OPERATIONS_OMITTED
from .authorized_operations import authorized_operations
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
    from ottla.protocol.views.describe_groups import DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse
    from ottla.protocol.views.heartbeat import HeartbeatRequest, HeartbeatResponse
    from ottla.protocol.views.join_group import JoinGroupRequest, JoinGroupResponse
    from ottla.protocol.views.leave_group import LeaveGroupRequest, LeaveGroupResponse
    from ottla.protocol.views.list_groups import ListGroupsRequest, ListGroupsResponse
    from ottla.protocol.views.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestTopic,
        OffsetCommitResponse,
        OffsetCommitResponsePartition,
        OffsetCommitResponseTopic,
    )
    from ottla.protocol.views.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
    from ottla.protocol.views.offset_fetch import (
        OffsetFetchRequest,
        OffsetFetchRequestTopic,
        OffsetFetchRequestTopics,
        OffsetFetchResponse,
        OffsetFetchResponseGroup,
        OffsetFetchResponsePartition,
        OffsetFetchResponseTopic,
    )
    from ottla.protocol.views.sync_group import SyncGroupRequest, SyncGroupResponse
    from ottla.protocol.views.txn_offset_commit import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestTopic,
        TxnOffsetCommitResponse,
    )


# The offsets' calls read these once (Python 3.11: a member read off its enum class is
# a slot call of about 1k instructions).
_WRITE, _TRANSACTIONAL_ID = Operation.WRITE, ResourceType.TRANSACTIONAL_ID
_NONE, _UNKNOWN_PARTITION = ErrorCode.none, ErrorCode.unknown_topic_or_partition


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def _group_refused(ctx: RequestContext, group_id: str, operation: Operation = Operation.READ) -> bool:
    return not ctx.allowed(operation, ResourceType.GROUP, group_id)


async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if _group_refused(ctx, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "generation_id": -1, "protocol_type": None,
                "protocol_name": "" if ctx.version < 7 else None, "leader": "", "member_id": request.member_id,
                "members": []}
    session_ms = _ms(request.session_timeout)
    rebalance_ms = _ms(request.rebalance_timeout) if ctx.version >= 1 else session_ms
    try:
        result = await ctx.services.groups.join(JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            client_id=ctx.header.client_id or "",
            client_host=_client_host(ctx.peer.rsplit(":", 1)[0]),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name, p.metadata) for p in request.protocols],
            require_known_member_id=ctx.version >= 4,
        ))
    except KafkaError as exc:
        result = JoinResult(exc.code, request.member_id)
    return {
        "error_code": result.error, "generation_id": result.generation, "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if ctx.version >= 7 or result.protocol_name else "",
        "leader": result.leader, "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in result.members],
    }


async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if _group_refused(ctx, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "assignment": b""}
    try:
        result = await ctx.services.groups.sync(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id,
            request.protocol_type, request.protocol_name,
            {a.member_id: a.assignment for a in request.assignments},
        )
    except KafkaError as exc:
        result = SyncResult(exc.code)
    return {"error_code": result.error, "assignment": result.assignment, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name}


# The enum members Heartbeat, the pipeline's floor, names, read once: on Python 3.11 a
# member read off its class goes through EnumType.__getattr__'s slot, about 860
# instructions each in its profile (as produce.py's).
_READ, _GROUP, _NO_ERROR = Operation.READ, ResourceType.GROUP, ErrorCode.none
# Heartbeat's answer when all is well, built and encoded once per version (as Metadata's
# kept answers): a dict, its build and its encoding at every heartbeat otherwise (the
# encoding about 1.5k instructions of the floor). Entities are immutable: one serves
# every member; no quota's throttle time goes into it (none is set on Heartbeat's answer).
_BEATING: dict[int, Encoded] = {}


def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse | Encoded:
    group_id = request.group_id
    services = ctx.services
    # _group_refused's check, with no call where no authorizer is configured.
    if services.authorizer is not None and not ctx.allowed(_READ, _GROUP, group_id):
        return {"error_code": ErrorCode.group_authorization_failed}
    try:
        services.groups.heartbeat(group_id, request.member_id, request.group_instance_id, request.generation_id)
    except KafkaError as exc:
        return {"error_code": exc.code}
    version = ctx.header.api_version
    answer = _BEATING.get(version)
    if answer is None:
        answer = _BEATING[version] = Encoded(ctx.entity({"error_code": _NO_ERROR}))
    return answer


def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if _group_refused(ctx, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "members": []}
    members: list[tuple[str, str | None]] = [(request.member_id, None)] if ctx.version <= 2 else \
        [(m.member_id, m.group_instance_id) for m in request.members]
    try:
        codes = ctx.services.groups.leave(request.group_id, members)
    except KafkaError as exc:
        if ctx.version <= 2 or exc.code != ErrorCode.unknown_member_id:
            return {"error_code": exc.code, "members": []}
        # No such group: as Kafka, each member is answered UNKNOWN_MEMBER_ID.
        codes = [exc.code for _ in members]
    if ctx.version <= 2:
        return {"error_code": codes[0]}
    return {"error_code": ErrorCode.none, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": c} for (m, i), c in zip(members, codes, strict=True)
    ]}


def _offsets(topics: Iterable[OffsetCommitRequestTopic | TxnOffsetCommitRequestTopic]
             ) -> dict[tuple[str, int], CommittedOffset]:
    now = int(time.time() * 1000)
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    # Loops, not comprehensions (each a call of its own on Python 3.11), and each offset
    # made without the named tuple's own __new__ (a Python call): at every commit.
    for t in topics:
        name = t.name
        for p in t.partitions:
            offsets[(name, p.partition_index)] = tuple.__new__(CommittedOffset, (
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now))
    return offsets


def _commit_response(topics: Iterable[OffsetCommitRequestTopic | TxnOffsetCommitRequestTopic],
                     codes: dict[tuple[str, int], ErrorCode]) -> OffsetCommitResponse:
    answered: list[OffsetCommitResponseTopic] = []
    for t in topics:
        name = t.name
        partitions: list[OffsetCommitResponsePartition] = []
        for p in t.partitions:
            partitions.append({"partition_index": p.partition_index, "error_code": codes[(name, p.partition_index)]})
        answered.append({"name": name, "partitions": partitions})
    return {"topics": answered}


def _unreadable_topics(ctx: RequestContext, offsets: dict) -> dict[tuple[str, int], ErrorCode]:
    """TOPIC_AUTHORIZATION_FAILED for the partitions of topics the client may not READ
    (none, and nothing asked of each partition, when no authorizer is configured)."""
    if ctx.services.authorizer is None:
        return {}
    return {tp: ErrorCode.topic_authorization_failed for tp in offsets
            if not ctx.allowed(Operation.READ, ResourceType.TOPIC, tp[0])}


def _client_host(address: str) -> str:
    """The member's address as Kafka reports it: Java's InetAddress.toString(), "/" first."""
    return "/" + address.strip("[]")


def _unknown_partitions(ctx: RequestContext, offsets: dict) -> dict[tuple[str, int], ErrorCode]:
    """UNKNOWN_TOPIC_OR_PARTITION for partitions no topic has: Kafka stores no offsets for them."""
    partition = ctx.services.logs.partition
    unknown: dict[tuple[str, int], ErrorCode] = {}
    for tp in offsets:  # a loop: no call of its own, at every commit
        if partition(*tp) is None:
            unknown[tp] = _UNKNOWN_PARTITION
    return unknown


def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    services = ctx.services
    offsets = _offsets(request.topics)
    if services.authorizer is not None and _group_refused(ctx, request.group_id):
        return _commit_response(request.topics, dict.fromkeys(offsets, ErrorCode.group_authorization_failed))
    refused = _unknown_partitions(ctx, offsets)
    if services.authorizer is not None:
        refused.update(_unreadable_topics(ctx, offsets))
    allowed = {tp: o for tp, o in offsets.items() if tp not in refused} if refused else offsets
    try:
        codes = services.groups.commit_offsets(request.group_id, request.member_id,
                                             request.group_instance_id,
                                             request.generation_id_or_member_epoch, allowed,
                                             ctx.header.api_version) if allowed else {}
    except KafkaError as exc:
        codes = dict.fromkeys(allowed, exc.code)
    if refused:
        codes.update(refused)
    return _commit_response(request.topics, codes)


def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    services = ctx.services
    offsets = _offsets(request.topics)
    if services.authorizer is not None:  # allowed's own first test: its calls spared without one
        if not ctx.allowed(_WRITE, _TRANSACTIONAL_ID, request.transactional_id):
            return _commit_response(request.topics,
                                    dict.fromkeys(offsets, ErrorCode.transactional_id_authorization_failed))
        if _group_refused(ctx, request.group_id):
            return _commit_response(request.topics, dict.fromkeys(offsets, ErrorCode.group_authorization_failed))
        refused = _unreadable_topics(ctx, offsets)
        if refused:
            return _commit_response(request.topics, {tp: refused.get(tp, ErrorCode.operation_not_attempted)
                                                          for tp in offsets})
    unknown = _unknown_partitions(ctx, offsets)
    if unknown:
        offsets = {tp: o for tp, o in offsets.items() if tp not in unknown}
    try:
        partition = services.groups.partition_for(request.group_id)
        if ctx.header.api_version >= 5:
            # Transaction version 2: the client sends no AddOffsetsToTxn; the broker adds
            # the group's __consumer_offsets partition to the transaction itself.
            services.transactions.add_partitions_implicitly(request.transactional_id, request.producer_id,
                                                              request.producer_epoch, [(OFFSETS_TOPIC, partition)])
        services.transactions.verify(request.transactional_id, request.producer_id, request.producer_epoch,
                                   OFFSETS_TOPIC, partition)
        codes = services.groups.commit_txn_offsets(
            request.group_id, request.producer_id, request.producer_epoch, request.member_id,
            request.group_instance_id, request.generation_id,
            offsets) if offsets else {}
    except KafkaError as exc:
        code = ErrorCode.producer_fenced if exc.code == ErrorCode.invalid_producer_epoch else exc.code
        codes = dict.fromkeys(offsets, code)
    if unknown:
        codes.update(unknown)
    return _commit_response(request.topics, codes)


def _fetched_topics(result: dict) -> list[OffsetFetchResponseTopic]:
    by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
    for (topic, partition), (committed, code) in result.items():
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": committed.offset if committed else -1,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else "",
            "error_code": code,
        })
    topics: list[OffsetFetchResponseTopic] = []
    for t, ps in by_topic.items():
        topics.append({"name": t, "partitions": ps})
    return topics


def _fetched(ctx: RequestContext, group_id: str,
             topics: Iterable[OffsetFetchRequestTopic | OffsetFetchRequestTopics] | None, require_stable: bool,
             member_id: str | None, member_epoch: int) -> tuple[ErrorCode, list[OffsetFetchResponseTopic]]:
    """One group's answer to an OffsetFetch: its error code and its topics."""
    authorizer = ctx.services.authorizer
    if authorizer is not None and _group_refused(ctx, group_id, Operation.DESCRIBE):
        return ErrorCode.group_authorization_failed, []
    wanted: list[tuple[str, int]] | None = None
    if topics is not None:
        wanted = []
        for t in topics:  # a loop: no call of its own, at every fetch
            name = t.name
            for p in t.partition_indexes:
                wanted.append((name, p))
    try:
        result = ctx.services.groups.fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
    except KafkaError as exc:  # its partition of __consumer_offsets is loading; a stale member epoch
        return exc.code, []
    if authorizer is not None:
        if wanted is None:  # all the group's topics: only those the client may describe
            result = {tp: r for tp, r in result.items()
                      if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, tp[0])}
        else:
            result = {tp: (None, ErrorCode.topic_authorization_failed)
                      if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, tp[0]) else r
                      for tp, r in result.items()}
    return _NONE, _fetched_topics(result)


def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    require_stable = request.require_stable
    if ctx.header.api_version >= 8:
        # v9 names the member of a consumer group asking (KIP-848), checked as Kafka does.
        answered: list[OffsetFetchResponseGroup] = []
        for g in request.groups:
            code, topics = _fetched(ctx, g.group_id, g.topics, require_stable, g.member_id, g.member_epoch)
            answered.append({"group_id": g.group_id, "error_code": code, "topics": topics})
        return {"groups": answered}
    code, topics = _fetched(ctx, request.group_id, request.topics, require_stable, None, -1)
    return {"topics": topics, "error_code": code}


def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    try:
        listed = ctx.services.groups.list_groups(set(request.states_filter), set(request.types_filter))
    except KafkaError as exc:  # __consumer_offsets is loading
        return {"error_code": exc.code, "groups": []}
    # Kafka lists every group to a client with DESCRIBE on the cluster, else those it may describe.
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        listed = [g for g in listed if not _group_refused(ctx, g.group_id, Operation.DESCRIBE)]
    return {"error_code": ErrorCode.none, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state_name,
         "group_type": g.type.value} for g in listed
    ]}


def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    described: list[DescribedGroup] = []
    for group_id in request.groups:
        if _group_refused(ctx, group_id, Operation.DESCRIBE):
            described.append({"error_code": ErrorCode.group_authorization_failed, "group_id": group_id,
                              "group_state": "", "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        try:
            group = ctx.services.groups.describe(group_id)
        except KafkaError as exc:  # its partition of __consumer_offsets is loading
            described.append({"error_code": exc.code, "group_id": group_id, "group_state": "",
                              "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        # Kafka gives the authorized operations (when asked) of every group it answers
        # without an error, a dead one too.
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id, request.include_authorized_operations)
        if group is None:
            dead: DescribedGroup = {"error_code": ErrorCode.none, "group_id": group_id,
                                    "group_state": GroupState.DEAD.value,
                                    "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
            if ctx.version >= 6:  # KIP-1043: v6 says why, as Kafka 4 does
                dead.update({"error_code": ErrorCode.group_id_not_found,
                             "error_message": f"Group {group_id} is not a classic group."
                             if ctx.services.groups.group(group_id) is not None else f"Group {group_id} not found."})
            else:
                dead["authorized_operations"] = operations
            described.append(dead)
            continue
        stable = group.state is GroupState.STABLE
        described.append({
            "error_code": ErrorCode.none,
            "group_id": group_id,
            "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                         "member_assignment": m.assignment if stable else b""}
                        for m in group.members.values()],
            "authorized_operations": operations,
        })
    return {"groups": described}


def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    def delete(group_id: str) -> ErrorCode:
        if _group_refused(ctx, group_id, Operation.DELETE):
            return ErrorCode.group_authorization_failed
        try:
            if isinstance(ctx.services.groups.group(group_id), ShareGroup):
                ctx.services.shares.delete_group(group_id)  # its share-partitions go too
            else:
                ctx.services.groups.delete_group(group_id)
        except KafkaError as exc:
            return exc.code
        return ErrorCode.none

    return {"results": [{"group_id": g, "error_code": delete(g)} for g in request.groups_names]}


def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if _group_refused(ctx, request.group_id, Operation.DELETE):
        return {"error_code": ErrorCode.group_authorization_failed, "topics": []}
    refused = {**_unknown_partitions(ctx, dict.fromkeys(wanted)), **_unreadable_topics(ctx, dict.fromkeys(wanted))}
    try:
        allowed = [tp for tp in wanted if tp not in refused]
        codes = {**(ctx.services.groups.delete_offsets(request.group_id, allowed) if allowed else {}), **refused}
    except KafkaError as exc:
        return {"error_code": exc.code, "topics": []}
    return {"error_code": ErrorCode.none, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": codes[(t.name, p.partition_index)]} for p in t.partitions]}
        for t in request.topics
    ]}
