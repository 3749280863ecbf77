"""The transactional APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, and the admin views DescribeTransactions, ListTransactions,
DescribeProducers. Each is a translation to and from the transaction coordinator."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import partial
from typing import TYPE_CHECKING

import re2

from ottla.coordinator.transaction_completion import COORDINATOR_EPOCH
from ottla.coordinator.transaction_log import TxnState
from ottla.protocol.errors import ErrorCode, KafkaError

from ..logging import get_logger
from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
    from ottla.protocol.views.add_partitions_to_txn import (
        AddPartitionsToTxnPartitionResult,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        AddPartitionsToTxnResult,
        AddPartitionsToTxnTopic,
        AddPartitionsToTxnTopicResult,
    )
    from ottla.protocol.views.describe_producers import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        PartitionResponse,
        TopicResponse,
    )
    from ottla.protocol.views.describe_transactions import (
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        TransactionState,
    )
    from ottla.protocol.views.end_txn import EndTxnRequest, EndTxnResponse
    from ottla.protocol.views.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
    from ottla.protocol.views.list_transactions import ListTransactionsRequest, ListTransactionsResponse
    from ottla.protocol.views.write_txn_markers import (
        WritableTxnMarkerResult,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    )

log = get_logger("ottla.transactions")

_ALL_STATES = {state.kafka_name for state in TxnState}
# Read once: on Python 3.11 each read of a member off its enum class goes through
# EnumType.__getattr__'s slot (about 1k instructions), several at every request here.
_WRITE, _READ = Operation.WRITE, Operation.READ
_TRANSACTIONAL_ID, _TOPIC, _GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
_NONE = ErrorCode.none


def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    services = ctx.services
    if (request.transactional_id is not None and services.authorizer is not None
            and not ctx.allowed(_WRITE, _TRANSACTIONAL_ID, request.transactional_id)):
        return {"error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1,
                "producer_epoch": -1}
    if (request.producer_id == -1) != (request.producer_epoch == -1):
        # Kafka: a producer id and an epoch come together or not at all.
        return {"error_code": ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1}
    if request.transactional_id == "":
        return {"error_code": ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1}
    if request.transactional_id is None and not _may_write_idempotently(ctx):
        return {"error_code": ErrorCode.cluster_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    try:
        if request.transactional_id is None:
            # An idempotent producer gets a fresh id with epoch 0 every time it asks, also
            # when it asks to bump the epoch of the id it has (KIP-360): Kafka does the same.
            return {"error_code": ErrorCode.none, "producer_id": services.producer_ids.allocate(),
                    "producer_epoch": 0}
        producer_id, epoch = services.transactions.init_producer_id(
            request.transactional_id,
            int(request.transaction_timeout.total_seconds() * 1000),
            request.producer_id,
            request.producer_epoch,
        )
    except KafkaError as exc:
        return {"error_code": exc.code, "producer_id": -1, "producer_epoch": -1}
    return {"error_code": _NONE, "producer_id": producer_id, "producer_epoch": epoch}


def _may_write_idempotently(ctx: RequestContext) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 3.0+)."""
    authorizer = ctx.services.authorizer
    if authorizer is None or ctx.allowed_on_cluster(Operation.IDEMPOTENT_WRITE):
        return True
    return authorizer.authorize_any(ctx.session.principal, ctx.host, Operation.WRITE, ResourceType.TOPIC)


def _add_partitions(ctx: RequestContext, txn_id: str, producer_id: int, epoch: int,
                    topics: Iterable[AddPartitionsToTxnTopic], verify_only: bool
                    ) -> list[AddPartitionsToTxnTopicResult]:
    """Per-topic results for one transaction. As Kafka: if any partition is unknown or
    not writable by the client, nothing is added and the others get
    OPERATION_NOT_ATTEMPTED."""
    services = ctx.services
    authorizer = services.authorizer
    if authorizer is not None and not ctx.allowed(_WRITE, _TRANSACTIONAL_ID, txn_id):
        return _by_topic(topics, {}, ErrorCode.transactional_id_authorization_failed)
    # WRITE asked once a topic, and only of an authorizer there is.
    refused_topics: Collection[str] = () if authorizer is None else {
        t.name for t in topics if not ctx.allowed(_WRITE, _TOPIC, t.name)}
    partition = services.logs.partition
    # One pass (loops, not comprehensions: each of those is a call of its own on Python
    # 3.11): the partitions asked for, those of refused topics, and the unknown others.
    wanted: list[tuple[str, int]] = []
    refused: list[tuple[str, int]] = []
    unknown: list[tuple[str, int]] = []
    for t in topics:
        name = t.name
        for p in t.partitions:
            wanted.append((name, p))
            if name in refused_topics:
                refused.append((name, p))
            elif partition(name, p) is None:
                unknown.append((name, p))
    if refused:
        return _by_topic(topics, dict.fromkeys(refused, ErrorCode.topic_authorization_failed),
                         ErrorCode.operation_not_attempted)
    if unknown:
        return _by_topic(topics, dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition),
                         ErrorCode.operation_not_attempted)
    if verify_only:
        codes: dict[tuple[str, int], ErrorCode] = {}
        for tp in wanted:
            try:
                services.transactions.verify(txn_id, producer_id, epoch, *tp)
                codes[tp] = _NONE
            except KafkaError as exc:
                codes[tp] = exc.code
        return _by_topic(topics, codes, _NONE)
    try:
        services.transactions.add_partitions(txn_id, producer_id, epoch, wanted)
        code = _NONE
    except KafkaError as exc:
        code = exc.code
    return _by_topic(topics, {}, code)


def _by_topic(topics: Iterable[AddPartitionsToTxnTopic], codes: dict[tuple[str, int], ErrorCode],
              otherwise: ErrorCode) -> list[AddPartitionsToTxnTopicResult]:
    """The results by topic: each partition's code in `codes`, else `otherwise`."""
    results: list[AddPartitionsToTxnTopicResult] = []
    code = codes.get
    for t in topics:
        name = t.name
        by_partition: list[AddPartitionsToTxnPartitionResult] = []
        for p in t.partitions:
            by_partition.append({"partition_index": p, "partition_error_code": code((name, p), otherwise)})
        results.append({"name": name, "results_by_partition": by_partition})
    return results


def handle_add_partitions_to_txn(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.header.api_version <= 3:
        results = _add_partitions(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                  request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        return {"results_by_topic_v3_and_below": results}
    if not ctx.allowed_on_cluster(Operation.CLUSTER_ACTION):
        # v4 and later are the brokers' own verification requests (KIP-890): Kafka
        # answers a client with one top-level error.
        return {"error_code": ErrorCode.cluster_authorization_failed, "results_by_transaction": []}
    by_transaction: list[AddPartitionsToTxnResult] = [
        {"transactional_id": txn.transactional_id,
         "topic_results": _add_partitions(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                          txn.topics, txn.verify_only)}
        for txn in request.transactions
    ]
    return {"error_code": ErrorCode.none, "results_by_transaction": by_transaction}


def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    services = ctx.services
    if services.authorizer is not None:  # allowed's own first test: two calls less without one
        if not ctx.allowed(_WRITE, _TRANSACTIONAL_ID, request.transactional_id):
            return {"error_code": ErrorCode.transactional_id_authorization_failed}
        if not ctx.allowed(_READ, _GROUP, request.group_id):
            return {"error_code": ErrorCode.group_authorization_failed}
    try:
        partition = services.offsets_partition_for(request.group_id)
        services.transactions.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                           [partition])
    except KafkaError as exc:
        return {"error_code": exc.code}
    return {"error_code": _NONE}


def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    services = ctx.services
    coordinator = services.transactions
    txn_id = request.transactional_id
    if services.authorizer is not None and not ctx.allowed(_WRITE, _TRANSACTIONAL_ID, txn_id):
        return {"error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1,
                "producer_epoch": -1}
    version = ctx.header.api_version
    try:
        # As Kafka: the answer goes out once PrepareCommit/PrepareAbort is in the log (the
        # outcome is decided and survives a crash); the markers and CompleteCommit/
        # CompleteAbort are written right after it leaves, before this connection's next
        # request, so the producer's next AddPartitionsToTxn finds the transaction done.
        # bump_epoch (v5 on) and complete=False given by position: a keyword costs a call
        # about 1.4k instructions on Python 3.11.
        producer_id, epoch = coordinator.end_txn(txn_id, request.producer_id, request.producer_epoch,
                                                 request.committed, version >= 5, False)
    except KafkaError as exc:
        return {"error_code": exc.code, "producer_id": -1, "producer_epoch": -1}
    # A partial runs without a frame of its own; the completion's own `complete`, which
    # the coordinator's only passes on: a call less at every end.
    ctx.after_response(partial(coordinator.completion.complete, txn_id))
    if version < 5:
        # The producer id and epoch are v5's: named before it, they send the response's
        # builder through a check of every version's names at every request.
        return {"error_code": _NONE}
    return {"error_code": _NONE, "producer_id": producer_id, "producer_epoch": epoch}


def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    markers = ctx.services.markers
    results: list[WritableTxnMarkerResult] = []
    # Only brokers write markers: a client needs CLUSTER_ACTION.
    may = ctx.allowed_on_cluster(Operation.CLUSTER_ACTION)
    for marker in request.markers:
        partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        if not may:
            codes = dict.fromkeys(partitions, ErrorCode.cluster_authorization_failed)
        elif marker.coordinator_epoch > COORDINATOR_EPOCH:
            # This broker is the only transaction coordinator there is. A marker claiming
            # a later coordinator epoch would raise the epoch the partitions record for
            # the producer, and then refuse the real coordinator's markers for good.
            log.warning("transaction markers refused", producer_id=marker.producer_id,
                        coordinator_epoch=marker.coordinator_epoch, client_id=ctx.header.client_id)
            codes = dict.fromkeys(partitions, ErrorCode.transaction_coordinator_fenced)
        else:
            codes = markers.write(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                  marker.coordinator_epoch, partitions)
        results.append({"producer_id": marker.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "error_code": codes[(t.name, p)]} for p in t.partition_indexes
            ]} for t in marker.topics
        ]})
    return {"markers": results}


def handle_describe_transactions(ctx: RequestContext, request: DescribeTransactionsRequest
                                 ) -> DescribeTransactionsResponse:
    coordinator = ctx.services.transactions
    states: list[TransactionState] = []
    for txn_id in request.transactional_ids:
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            states.append({"error_code": ErrorCode.transactional_id_authorization_failed, "transactional_id": txn_id,
                           "transaction_state": "", "producer_id": 0, "producer_epoch": 0})
            continue
        try:
            txn = coordinator.describe(txn_id)
        except KafkaError as exc:  # its partition of __transaction_state is loading
            states.append({"error_code": exc.code, "transactional_id": txn_id,
                           "transaction_state": "", "producer_id": 0, "producer_epoch": 0})
            continue
        if txn is None:
            # The schema's defaults (producer id and epoch 0, a start time of 0), as Kafka answers.
            states.append({"error_code": ErrorCode.transactional_id_not_found, "transactional_id": txn_id,
                           "transaction_state": "", "producer_id": 0, "producer_epoch": 0})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        # Only the topics the principal may describe, as Kafka lists them.
        by_topic = {t: ps for t, ps in by_topic.items() if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t)}
        states.append({
            "error_code": ErrorCode.none,
            "transactional_id": txn_id,
            "transaction_state": txn.state.kafka_name,
            "transaction_timeout": txn.timeout_ms,
            "transaction_start_time": txn.start_ms if txn.start_ms >= 0 else -1,
            "producer_id": txn.producer_id,
            "producer_epoch": txn.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        })
    return {"transaction_states": states}


_PATTERN_OPTIONS = re2.Options()
_PATTERN_OPTIONS.log_errors = False


def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    wanted_states = set(request.state_filters)
    unknown = sorted(wanted_states - _ALL_STATES)
    pattern = None
    if request.transactional_id_pattern:  # v2 (KIP-1152): ids matching it whole
        try:
            # RE2: a client's pattern runs in linear time over every transactional id.
            pattern = re2.compile(request.transactional_id_pattern, _PATTERN_OPTIONS)
        except re2.error:
            return {"error_code": ErrorCode.invalid_regular_expression, "unknown_state_filters": unknown,
                    "transaction_states": []}
    try:
        listed = ctx.services.transactions.list(wanted_states & _ALL_STATES if wanted_states else set(),
                                              set(request.producer_id_filters),
                                              request.duration_filter)
    except KafkaError as exc:  # __transaction_state is loading
        return {"error_code": exc.code, "unknown_state_filters": unknown, "transaction_states": []}
    if wanted_states and not wanted_states & _ALL_STATES:
        listed = []
    # Only the transactions the client may describe (Kafka filters them the same way).
    listed = [(txn_id, txn) for txn_id, txn in listed
              if ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id)
              and (pattern is None or pattern.fullmatch(txn_id))]
    return {"error_code": ErrorCode.none, "unknown_state_filters": unknown, "transaction_states": [
        {"transactional_id": txn_id, "producer_id": txn.producer_id, "transaction_state": txn.state.kafka_name}
        for txn_id, txn in listed
    ]}


def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    logs = ctx.services.logs
    topics: list[TopicResponse] = []
    for t in request.topics:
        partitions: list[PartitionResponse] = []
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name)
        for index in t.partition_indexes:
            log = logs.partition(t.name, index)
            if not readable:
                partitions.append({"partition_index": index, "error_code": ErrorCode.topic_authorization_failed})
                continue
            if log is None:
                partitions.append({"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            partitions.append({"partition_index": index, "error_code": ErrorCode.none, "active_producers": [
                {"producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                 "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                 "current_txn_start_offset": e.current_txn_first_offset}
                for e in log.producer_state.producers.values()
            ]})
        topics.append({"name": t.name, "partitions": partitions})
    return {"topics": topics}


