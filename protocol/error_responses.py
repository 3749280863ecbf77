"""The answer to a request that fails as a whole, and the partitions a request names.

This is Kafka's `AbstractRequest.getErrorResponse`: the response a broker sends when it
refuses a request before doing any of it, with the error in every place the client
looks (the top-level error code, each topic's, each partition's). Fault injection
answers with it, so an injected error means what the same error from Kafka means:
nothing was done, and a retry is safe.

`named_partitions` says which topics and partitions a request is about, so a fault can
be aimed at one of them.

Both are tables keyed by API: an API missing from them cannot be given an injected
error or be aimed at a topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from . import apis
from .kio_schema import field_names_of_any_version

Topic = str | uuid.UUID  # Fetch names topics by id from v13 on
Named = dict[Topic, list[int] | None]  # topic -> partitions named (None: the topic as a whole)


# --- the partitions a request names ------------------------------------------------------


def _by_partition(topics_field: str, name_field: str, partitions_field: str,
                  index_field: str | None) -> Callable[[Any], Named]:
    """Topics in `request.<topics_field>`, each with a list of partition entries (or
    of plain indexes when `index_field` is None)."""

    def named(request: Any) -> Named:
        out: Named = {}
        for topic in getattr(request, topics_field) or ():
            # A topic named by neither name nor id answers under the empty name: a null
            # would not encode in a response's non-nullable name.
            name = getattr(topic, name_field, None) or getattr(topic, "topic_id", None) or ""
            entries = getattr(topic, partitions_field)
            indexes = list(entries) if index_field is None else [getattr(p, index_field) for p in entries]
            out[name] = [*(out.get(name) or ()), *indexes]  # a topic may be named twice
        return out

    return named


def _named_topics(request: Any) -> Named:
    if request.__api_key__ == apis.DELETE_TOPICS.key and request.__version__ <= 5:
        return {name: None for name in request.topic_names}  # DeleteTopics up to v5
    return {t.name: None for t in request.topics or ()}


def _named_add_partitions_to_txn(request: Any) -> Named:
    # v4+ (broker to broker) batches transactions; v3 and below carry one.
    if request.__version__ <= 3:
        topics = request.v3_and_below_topics
    else:
        topics = [t for txn in request.transactions for t in txn.topics]
    out: Named = {}
    for topic in topics:
        out.setdefault(topic.name, []).extend(topic.partitions)  # type: ignore[union-attr]
    return out


def _named_write_txn_markers(request: Any) -> Named:
    out: Named = {}
    for marker in request.markers:
        for topic in marker.topics:
            out.setdefault(topic.name, []).extend(topic.partition_indexes)  # type: ignore[union-attr]
    return out


def _named_offset_fetch(request: Any) -> Named:
    topic_lists = [g.topics for g in request.groups] if request.__version__ >= 8 else [request.topics]
    out: Named = {}
    for topics in topic_lists:
        for topic in topics or ():
            out.setdefault(topic.name, []).extend(topic.partition_indexes)  # type: ignore[union-attr]
    return out


_NAMED: dict[int, Callable[[Any], Named]] = {
    apis.PRODUCE.key: _by_partition("topic_data", "name", "partition_data", "index"),
    apis.FETCH.key: _by_partition("topics", "topic", "partitions", "partition"),
    apis.LIST_OFFSETS.key: _by_partition("topics", "name", "partitions", "partition_index"),
    apis.METADATA.key: lambda request: {t.name or t.topic_id: None for t in request.topics or ()},
    apis.CREATE_TOPICS.key: _named_topics,
    apis.DELETE_TOPICS.key: _named_topics,
    apis.ADD_PARTITIONS_TO_TXN.key: _named_add_partitions_to_txn,
    apis.WRITE_TXN_MARKERS.key: _named_write_txn_markers,
    apis.TXN_OFFSET_COMMIT.key: _by_partition("topics", "name", "partitions", "partition_index"),
    apis.OFFSET_COMMIT.key: _by_partition("topics", "name", "partitions", "partition_index"),
    apis.OFFSET_DELETE.key: _by_partition("topics", "name", "partitions", "partition_index"),
    apis.OFFSET_FETCH.key: _named_offset_fetch,
    apis.DESCRIBE_PRODUCERS.key: _by_partition("topics", "name", "partition_indexes", None),
}


def names_topics(api_key: int) -> bool:
    return api_key in _NAMED


def named_partitions(api_key: int, request: Any) -> Named:
    """The topics (and partitions) a request is about; empty for an API that names none."""
    named = _NAMED.get(api_key)
    return named(request) if named is not None else {}


# --- error responses ---------------------------------------------------------------------
# Each builder returns version-agnostic values for protocol.entities.make: a field the
# client's version lacks is dropped there, so one builder serves every version.


def _per_partition(named: Named, code: ErrorCode, name_field: str, partitions_field: str, index_field: str,
                   error_field: str = "error_code", **extra: Any) -> list[dict[str, Any]]:
    return [
        {name_field: topic, partitions_field: [{index_field: p, error_field: code, **extra} for p in parts or ()]}
        for topic, parts in named.items()
    ]


def _produce(request: Any, code: ErrorCode) -> dict[str, Any]:
    named = named_partitions(apis.PRODUCE.key, request)
    return {"responses": _per_partition(named, code, "name", "partition_responses", "index", base_offset=-1,
                                        log_append_time=None, log_start_offset=-1)}


def _fetch(request: Any, code: ErrorCode) -> dict[str, Any]:
    named = named_partitions(apis.FETCH.key, request)
    topics = _per_partition(named, code, "topic", "partitions", "partition_index", high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, preferred_read_replica=-1, records=b"")
    for topic in topics:
        # Up to v12 the topic is named, from v13 it is an id: the field this version
        # lacks is dropped by make().
        topic["topic_id"] = topic["topic"]
    return {"error_code": code, "session_id": 0, "responses": topics}


def _list_offsets(request: Any, code: ErrorCode) -> dict[str, Any]:
    named = named_partitions(apis.LIST_OFFSETS.key, request)
    return {"topics": _per_partition(named, code, "name", "partitions", "partition_index", timestamp=-1, offset=-1,
                                     leader_epoch=-1)}


def _metadata(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"topics": [{"name": t.name, "topic_id": getattr(t, "topic_id", None), "error_code": code}
                       for t in request.topics or ()]}


def _create_topics(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"topics": [{"name": t.name, "error_code": code, "error_message": "injected fault",
                        "num_partitions": -1, "replication_factor": -1} for t in request.topics]}


def _delete_topics(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"responses": [{"name": name, "error_code": code} for name in _named_topics(request)]}


def _find_coordinator(request: Any, code: ErrorCode) -> dict[str, Any]:
    keys = getattr(request, "coordinator_keys", None) or ()
    return {"error_code": code, "node_id": -1, "host": "", "port": -1,
            "coordinators": [{"key": key, "error_code": code, "node_id": -1, "host": "", "port": -1} for key in keys]}


def _add_partitions_to_txn(request: Any, code: ErrorCode) -> dict[str, Any]:
    named = _named_add_partitions_to_txn(request)
    # v4+ answers a failed request with its top-level error alone, as Kafka does.
    return {"error_code": code, "results_by_topic_v3_and_below": _per_partition(
        named, code, "name", "results_by_partition", "partition_index", "partition_error_code")}


def _write_txn_markers(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"markers": [
        {"producer_id": m.producer_id,
         "topics": [{"name": t.name, "partitions": [{"partition_index": p, "error_code": code}
                                                    for p in t.partition_indexes]} for t in m.topics]}
        for m in request.markers
    ]}


def _by_partition_error(api: apis.Api) -> Callable[[Any, ErrorCode], dict[str, Any]]:
    """OffsetCommit, TxnOffsetCommit, OffsetDelete, DescribeProducers: topics[name,
    partitions[partition_index, error_code]] (and a top-level error where there is one)."""

    def build(request: Any, code: ErrorCode) -> dict[str, Any]:
        named = named_partitions(api.key, request)
        return {"error_code": code,
                "topics": _per_partition(named, code, "name", "partitions", "partition_index")}

    return build


def _offset_fetch(request: Any, code: ErrorCode) -> dict[str, Any]:
    if request.__version__ >= 8:  # one answer per group
        return {"groups": [{"group_id": g.group_id, "error_code": code} for g in request.groups]}
    named = _named_offset_fetch(request)
    return {"error_code": code, "topics": _per_partition(named, code, "name", "partitions", "partition_index",
                                                         committed_offset=-1)}


def _top_level(api: apis.Api) -> Callable[[Any, ErrorCode], dict[str, Any]]:
    """For the APIs whose answer is one error code (InitProducerId, EndTxn, JoinGroup...).
    The ids and epochs the API's response has (in some version) say "none", as Kafka's
    error answers do."""
    none = {"producer_id": -1, "producer_epoch": -1, "generation_id": -1}

    def build(request: Any, code: ErrorCode) -> dict[str, Any]:
        names = field_names_of_any_version(load_response_schema(api.key, api.max_version))
        values: dict[str, Any] = {"error_code": code, **{name: value for name, value in none.items() if name in names}}
        if "member_id" in names:
            values["member_id"] = getattr(request, "member_id", "") or ""
        return values

    return build


_ERROR_RESPONSES: dict[int, Callable[[Any, ErrorCode], dict[str, Any]]] = {
    apis.PRODUCE.key: _produce,
    apis.FETCH.key: _fetch,
    apis.LIST_OFFSETS.key: _list_offsets,
    apis.METADATA.key: _metadata,
    apis.API_VERSIONS.key: _top_level(apis.API_VERSIONS),
    apis.CREATE_TOPICS.key: _create_topics,
    apis.DELETE_TOPICS.key: _delete_topics,
    apis.INIT_PRODUCER_ID.key: _top_level(apis.INIT_PRODUCER_ID),
    apis.FIND_COORDINATOR.key: _find_coordinator,
    apis.ADD_PARTITIONS_TO_TXN.key: _add_partitions_to_txn,
    apis.ADD_OFFSETS_TO_TXN.key: _top_level(apis.ADD_OFFSETS_TO_TXN),
    apis.END_TXN.key: _top_level(apis.END_TXN),
    apis.WRITE_TXN_MARKERS.key: _write_txn_markers,
    apis.DESCRIBE_PRODUCERS.key: _by_partition_error(apis.DESCRIBE_PRODUCERS),
    apis.DESCRIBE_TRANSACTIONS.key: lambda request, code: {"transaction_states": [
        {"transactional_id": txn_id, "error_code": code} for txn_id in request.transactional_ids]},
    apis.LIST_TRANSACTIONS.key: _top_level(apis.LIST_TRANSACTIONS),
    apis.OFFSET_COMMIT.key: _by_partition_error(apis.OFFSET_COMMIT),
    apis.OFFSET_FETCH.key: _offset_fetch,
    apis.JOIN_GROUP.key: _top_level(apis.JOIN_GROUP),
    apis.HEARTBEAT.key: _top_level(apis.HEARTBEAT),
    apis.LEAVE_GROUP.key: _top_level(apis.LEAVE_GROUP),
    apis.SYNC_GROUP.key: _top_level(apis.SYNC_GROUP),
    apis.DESCRIBE_GROUPS.key: lambda request, code: {"groups": [
        {"group_id": group_id, "error_code": code} for group_id in request.groups]},
    apis.LIST_GROUPS.key: _top_level(apis.LIST_GROUPS),
    apis.TXN_OFFSET_COMMIT.key: _by_partition_error(apis.TXN_OFFSET_COMMIT),
    apis.DELETE_GROUPS.key: lambda request, code: {"results": [
        {"group_id": group_id, "error_code": code} for group_id in request.groups_names]},
    apis.OFFSET_DELETE.key: _by_partition_error(apis.OFFSET_DELETE),
}


def has_error_response(api_key: int) -> bool:
    return api_key in _ERROR_RESPONSES


def error_response(api_key: int, request: Any, code: ErrorCode) -> dict[str, Any]:
    """Values for make(response class, ...) answering `request` with `code` throughout."""
    return _ERROR_RESPONSES[api_key](request, code)
