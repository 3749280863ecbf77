"""Request handlers, one module per API family, and the table that routes to them.

A handler is `handle(ctx, request: XRequest) -> XResponse`: a thin translation between
a request and calls into storage and the coordinators. `request` is the kio entity of
the version the client spoke, read through its API's request view; the answer is the
response view's values (a plain dict, typed by a TypedDict: protocol/views), which the
dispatcher builds into the kio class of that version (protocol.entities). The table
pairs each API's views with its handler, so mypy checks both sides of every handler.
A handler may also answer with the entity itself (`ctx.entity(...)`, built ahead), or
None to send nothing (acks=0 Produce).

Most handlers run to their end without waiting on anything and are plain functions.
The few that always wait (a group's JoinGroup and SyncGroup, and SaslAuthenticate, which
holds a failed authentication's answer back) are coroutine functions;
which is which is read off the table once, here, so the connection knows which
requests it may serve on the spot. A plain handler that finds it has to wait after all
(a Fetch with nothing to return yet, a Produce whose records are checked in a thread)
returns an awaitable of its response instead of the response.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ottla.protocol.codec import Encoded
from ottla.protocol.views import View, apis

from . import (
               acls,
               api_versions,
               client_quotas,
               configs,
               consumer_groups,
               coordinators,
               fetch,
               groups,
               list_offsets,
               log_dirs,
               metadata,
               produce,
               reassignments,
               sasl,
               scram_credentials,
               share_groups,
               streams_groups,
               topics,
               transactions,
)
from .context import Built, RequestContext

# What the connection calls: a handler of any API (which one is known only at run time).
Handler = Callable[[RequestContext, Any], object]
RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


def route(view: View[RequestT, ResponseT],
          handler: Callable[[RequestContext, RequestT],
                            ResponseT | Built[ResponseT] | Encoded | Awaitable[ResponseT | None] | None],
          ) -> tuple[int, Handler]:
    """A row of the table: mypy checks that `handler` takes the API's request view and
    answers its response view (protocol/views), or one encoded ahead of time (Metadata's
    kept answers), or None to send nothing (a handler says so in its return type: only
    acks=0 Produce's does)."""
    return view.api.key, handler


HANDLERS: dict[int, Handler] = dict([
    route(apis.PRODUCE, produce.handle),
    route(apis.FETCH, fetch.handle),
    route(apis.LIST_OFFSETS, list_offsets.handle),
    route(apis.METADATA, metadata.handle),
    route(apis.API_VERSIONS, api_versions.handle),
    route(apis.CREATE_TOPICS, topics.handle_create),
    route(apis.DELETE_TOPICS, topics.handle_delete),
    route(apis.INIT_PRODUCER_ID, transactions.handle_init_producer_id),
    route(apis.FIND_COORDINATOR, coordinators.handle_find_coordinator),
    route(apis.ADD_PARTITIONS_TO_TXN, transactions.handle_add_partitions_to_txn),
    route(apis.ADD_OFFSETS_TO_TXN, transactions.handle_add_offsets_to_txn),
    route(apis.END_TXN, transactions.handle_end_txn),
    route(apis.WRITE_TXN_MARKERS, transactions.handle_write_txn_markers),
    route(apis.DESCRIBE_PRODUCERS, transactions.handle_describe_producers),
    route(apis.DESCRIBE_TRANSACTIONS, transactions.handle_describe_transactions),
    route(apis.LIST_TRANSACTIONS, transactions.handle_list_transactions),
    route(apis.OFFSET_COMMIT, groups.handle_offset_commit),
    route(apis.OFFSET_FETCH, groups.handle_offset_fetch),
    route(apis.JOIN_GROUP, groups.handle_join_group),
    route(apis.HEARTBEAT, groups.handle_heartbeat),
    route(apis.LEAVE_GROUP, groups.handle_leave_group),
    route(apis.SYNC_GROUP, groups.handle_sync_group),
    route(apis.DESCRIBE_GROUPS, groups.handle_describe_groups),
    route(apis.LIST_GROUPS, groups.handle_list_groups),
    route(apis.TXN_OFFSET_COMMIT, groups.handle_txn_offset_commit),
    route(apis.DELETE_GROUPS, groups.handle_delete_groups),
    route(apis.OFFSET_DELETE, groups.handle_offset_delete),
    route(apis.DELETE_RECORDS, topics.handle_delete_records),
    route(apis.DESCRIBE_CONFIGS, configs.handle_describe_configs),
    route(apis.ALTER_CONFIGS, configs.handle_alter_configs),
    route(apis.INCREMENTAL_ALTER_CONFIGS, configs.handle_incremental_alter_configs),
    route(apis.SASL_HANDSHAKE, sasl.handle_handshake),
    route(apis.SASL_AUTHENTICATE, sasl.handle_authenticate),
    route(apis.DESCRIBE_USER_SCRAM_CREDENTIALS, scram_credentials.handle_describe),
    route(apis.ALTER_USER_SCRAM_CREDENTIALS, scram_credentials.handle_alter),
    route(apis.DESCRIBE_ACLS, acls.handle_describe),
    route(apis.CREATE_ACLS, acls.handle_create),
    route(apis.DELETE_ACLS, acls.handle_delete),
    route(apis.DESCRIBE_TOPIC_PARTITIONS, metadata.handle_describe_topic_partitions),
    route(apis.CREATE_PARTITIONS, topics.handle_create_partitions),
    route(apis.DESCRIBE_CLUSTER, metadata.handle_describe_cluster),
    route(apis.DESCRIBE_LOG_DIRS, log_dirs.handle_describe_log_dirs),
    route(apis.OFFSET_FOR_LEADER_EPOCH, log_dirs.handle_offset_for_leader_epoch),
    route(apis.ELECT_LEADERS, reassignments.handle_elect_leaders),
    route(apis.ALTER_PARTITION_REASSIGNMENTS, reassignments.handle_alter_partition_reassignments),
    route(apis.LIST_PARTITION_REASSIGNMENTS, reassignments.handle_list_partition_reassignments),
    route(apis.DESCRIBE_CLIENT_QUOTAS, client_quotas.handle_describe),
    route(apis.ALTER_CLIENT_QUOTAS, client_quotas.handle_alter),
    route(apis.CONSUMER_GROUP_HEARTBEAT, consumer_groups.handle_heartbeat),
    route(apis.CONSUMER_GROUP_DESCRIBE, consumer_groups.handle_describe),
    route(apis.SHARE_GROUP_HEARTBEAT, share_groups.handle_heartbeat),
    route(apis.SHARE_GROUP_DESCRIBE, share_groups.handle_describe),
    route(apis.SHARE_FETCH, share_groups.handle_share_fetch),
    route(apis.SHARE_ACKNOWLEDGE, share_groups.handle_share_acknowledge),
    route(apis.DESCRIBE_SHARE_GROUP_OFFSETS, share_groups.handle_describe_offsets),
    route(apis.ALTER_SHARE_GROUP_OFFSETS, share_groups.handle_alter_offsets),
    route(apis.DELETE_SHARE_GROUP_OFFSETS, share_groups.handle_delete_offsets),
    route(apis.STREAMS_GROUP_HEARTBEAT, streams_groups.handle_heartbeat),
    route(apis.STREAMS_GROUP_DESCRIBE, streams_groups.handle_describe),
])

# The APIs whose handlers may wait. Every other handler runs to its end without giving
# the event loop a turn, so the connection serves it as soon as it is read.
MAY_WAIT: frozenset[int] = frozenset(key for key, handler in HANDLERS.items()
                                     if inspect.iscoroutinefunction(handler))

api_versions_fallback = api_versions.unsupported_version_response

__all__ = ("HANDLERS", "MAY_WAIT", "RequestContext", "api_versions_fallback")
