"""Request handlers, one module per API family, and the table that routes to them.

A handler is `handle(ctx, request) -> response | None`: a thin translation between kio
request/response entities and calls into storage and the coordinators. It builds its
response with `ctx.respond(...)`, which picks the kio class of the version the client
spoke (see protocol.entities.make). None means "send nothing" (acks=0 Produce).

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
from typing import Any

from ottla.protocol import apis

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
from .context import RequestContext

Handler = Callable[[RequestContext, Any], Any | Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    apis.PRODUCE.key: produce.handle,
    apis.FETCH.key: fetch.handle,
    apis.LIST_OFFSETS.key: list_offsets.handle,
    apis.METADATA.key: metadata.handle,
    apis.API_VERSIONS.key: api_versions.handle,
    apis.CREATE_TOPICS.key: topics.handle_create,
    apis.DELETE_TOPICS.key: topics.handle_delete,
    apis.INIT_PRODUCER_ID.key: transactions.handle_init_producer_id,
    apis.FIND_COORDINATOR.key: coordinators.handle_find_coordinator,
    apis.ADD_PARTITIONS_TO_TXN.key: transactions.handle_add_partitions_to_txn,
    apis.ADD_OFFSETS_TO_TXN.key: transactions.handle_add_offsets_to_txn,
    apis.END_TXN.key: transactions.handle_end_txn,
    apis.WRITE_TXN_MARKERS.key: transactions.handle_write_txn_markers,
    apis.DESCRIBE_PRODUCERS.key: transactions.handle_describe_producers,
    apis.DESCRIBE_TRANSACTIONS.key: transactions.handle_describe_transactions,
    apis.LIST_TRANSACTIONS.key: transactions.handle_list_transactions,
    apis.OFFSET_COMMIT.key: groups.handle_offset_commit,
    apis.OFFSET_FETCH.key: groups.handle_offset_fetch,
    apis.JOIN_GROUP.key: groups.handle_join_group,
    apis.HEARTBEAT.key: groups.handle_heartbeat,
    apis.LEAVE_GROUP.key: groups.handle_leave_group,
    apis.SYNC_GROUP.key: groups.handle_sync_group,
    apis.DESCRIBE_GROUPS.key: groups.handle_describe_groups,
    apis.LIST_GROUPS.key: groups.handle_list_groups,
    apis.TXN_OFFSET_COMMIT.key: groups.handle_txn_offset_commit,
    apis.DELETE_GROUPS.key: groups.handle_delete_groups,
    apis.OFFSET_DELETE.key: groups.handle_offset_delete,
    apis.DELETE_RECORDS.key: topics.handle_delete_records,
    apis.DESCRIBE_CONFIGS.key: configs.handle_describe_configs,
    apis.ALTER_CONFIGS.key: configs.handle_alter_configs,
    apis.INCREMENTAL_ALTER_CONFIGS.key: configs.handle_incremental_alter_configs,
    apis.SASL_HANDSHAKE.key: sasl.handle_handshake,
    apis.SASL_AUTHENTICATE.key: sasl.handle_authenticate,
    apis.DESCRIBE_USER_SCRAM_CREDENTIALS.key: scram_credentials.handle_describe,
    apis.ALTER_USER_SCRAM_CREDENTIALS.key: scram_credentials.handle_alter,
    apis.DESCRIBE_ACLS.key: acls.handle_describe,
    apis.CREATE_ACLS.key: acls.handle_create,
    apis.DELETE_ACLS.key: acls.handle_delete,
    apis.DESCRIBE_TOPIC_PARTITIONS.key: metadata.handle_describe_topic_partitions,
    apis.CREATE_PARTITIONS.key: topics.handle_create_partitions,
    apis.DESCRIBE_CLUSTER.key: metadata.handle_describe_cluster,
    apis.DESCRIBE_LOG_DIRS.key: log_dirs.handle_describe_log_dirs,
    apis.OFFSET_FOR_LEADER_EPOCH.key: log_dirs.handle_offset_for_leader_epoch,
    apis.ELECT_LEADERS.key: reassignments.handle_elect_leaders,
    apis.ALTER_PARTITION_REASSIGNMENTS.key: reassignments.handle_alter_partition_reassignments,
    apis.LIST_PARTITION_REASSIGNMENTS.key: reassignments.handle_list_partition_reassignments,
    apis.DESCRIBE_CLIENT_QUOTAS.key: client_quotas.handle_describe,
    apis.ALTER_CLIENT_QUOTAS.key: client_quotas.handle_alter,
    apis.CONSUMER_GROUP_HEARTBEAT.key: consumer_groups.handle_heartbeat,
    apis.CONSUMER_GROUP_DESCRIBE.key: consumer_groups.handle_describe,
    apis.SHARE_GROUP_HEARTBEAT.key: share_groups.handle_heartbeat,
    apis.SHARE_GROUP_DESCRIBE.key: share_groups.handle_describe,
    apis.SHARE_FETCH.key: share_groups.handle_share_fetch,
    apis.SHARE_ACKNOWLEDGE.key: share_groups.handle_share_acknowledge,
    apis.DESCRIBE_SHARE_GROUP_OFFSETS.key: share_groups.handle_describe_offsets,
    apis.ALTER_SHARE_GROUP_OFFSETS.key: share_groups.handle_alter_offsets,
    apis.DELETE_SHARE_GROUP_OFFSETS.key: share_groups.handle_delete_offsets,
    apis.STREAMS_GROUP_HEARTBEAT.key: streams_groups.handle_heartbeat,
    apis.STREAMS_GROUP_DESCRIBE.key: streams_groups.handle_describe,
}

# The APIs whose handlers may wait. Every other handler runs to its end without giving
# the event loop a turn, so the connection serves it as soon as it is read.
MAY_WAIT: frozenset[int] = frozenset(key for key, handler in HANDLERS.items()
                                     if inspect.iscoroutinefunction(handler))

api_versions_fallback = api_versions.unsupported_version_response

__all__ = ("HANDLERS", "MAY_WAIT", "RequestContext", "api_versions_fallback")
