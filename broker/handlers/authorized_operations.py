"""Authorized operations (KIP-430): the bit field of what the client's principal may do
with a resource, which Metadata, DescribeCluster, DescribeGroups, ConsumerGroupDescribe
and DescribeTopicPartitions give when asked. Without an authorizer every operation of
the resource type is allowed, as Kafka answers (a topic: 3576)."""

from __future__ import annotations

from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

# Kafka's value for "authorized operations not requested".
OMITTED = -(2**31)

# The operations Kafka's AclEntry supports on each resource type: the bits it can set.
_SUPPORTED = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    # Groups have configs since KIP-848 (Kafka 4): DESCRIBE_CONFIGS and ALTER_CONFIGS.
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str, wanted: bool = True) -> int:
    if not wanted:
        return OMITTED
    bits = 0
    for operation in _SUPPORTED[resource_type]:
        allowed = (ctx.allowed_on_cluster(operation) if resource_type == ResourceType.CLUSTER
                   else ctx.allowed(operation, resource_type, name))
        if allowed:
            bits |= 1 << operation
    return bits
