"""CreateAcls, DescribeAcls and DeleteAcls (broker/security/authorizer.py keeps the ACLs).

Without an authorizer (authorizer.class.name unset) each answers SECURITY_DISABLED, as
Kafka does: tools read that as "this cluster has no ACLs". Changing ACLs needs ALTER on
the cluster, listing them DESCRIBE.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, TypeVar

from ottla.protocol.errors import ErrorCode, KafkaError

from ..logging import get_logger
from ..security.authorizer import CLUSTER_NAME, AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.create_acls import AclCreation, AclCreationResult, CreateAclsRequest, CreateAclsResponse
    from ottla.protocol.views.delete_acls import (
        DeleteAclsFilter,
        DeleteAclsFilterResult,
        DeleteAclsRequest,
        DeleteAclsResponse,
    )
    from ottla.protocol.views.describe_acls import AclDescription, DescribeAclsRequest, DescribeAclsResponse

log = get_logger("ottla.acls")
_DISABLED = "No Authorizer is configured on the broker"


EnumT = TypeVar("EnumT", bound=IntEnum)


def _enum(kind: type[EnumT], value: int, what: str) -> EnumT:
    try:
        return kind(value)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"unknown {what} {value}") from None


def _binding(c: AclCreation) -> AclBinding:
    resource_type = _enum(ResourceType, c.resource_type, "resource type")
    pattern_type = _enum(PatternType, c.resource_pattern_type, "pattern type")
    operation = _enum(Operation, c.operation, "operation")
    permission = _enum(Permission, c.permission_type, "permission type")
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or pattern_type not in (PatternType.LITERAL,
                                                                                         PatternType.PREFIXED):
        raise KafkaError(ErrorCode.invalid_request, "Invalid resource pattern: a type and a LITERAL or PREFIXED "
                                                    "name are needed")
    if operation in (Operation.ANY, Operation.UNKNOWN) or permission in (Permission.ANY, Permission.UNKNOWN):
        raise KafkaError(ErrorCode.invalid_request, "Invalid ACL: an operation and ALLOW or DENY are needed")
    if not c.resource_name:
        raise KafkaError(ErrorCode.invalid_request, "Invalid resource pattern: the resource name is empty")
    if resource_type == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        raise KafkaError(ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, name = c.principal.partition(":")
    if not sep or not kind or not name:
        raise KafkaError(ErrorCode.invalid_request, f"Could not parse principal from `{c.principal}` (no colon is "
                                                    "present separating the principal type from the principal name)")
    return AclBinding(resource_type, c.resource_name, pattern_type, c.principal, c.host, operation, permission)


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(_enum(ResourceType, f.resource_type_filter, "resource type"), f.resource_name_filter,
                     _enum(PatternType, f.pattern_type_filter, "pattern type"),
                     f.principal_filter, f.host_filter, _enum(Operation, f.operation, "operation"),
                     _enum(Permission, f.permission_type, "permission type"))


def handle_create(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return {"results": [{"error_code": ErrorCode.security_disabled, "error_message": _DISABLED}
                            for _ in request.creations]}
    if not ctx.allowed_on_cluster(Operation.ALTER):
        return {"results": [{"error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
                            for _ in request.creations]}
    results: list[AclCreationResult] = []
    created: list[AclBinding] = []
    for creation in request.creations:
        try:
            created.append(_binding(creation))
            results.append({"error_code": ErrorCode.none, "error_message": None})
        except KafkaError as exc:
            results.append({"error_code": exc.code, "error_message": exc.message})
    if created:
        authorizer.add(created)
        log.info("acls created", acls=len(created), principal=ctx.session.principal, peer=ctx.peer)
    return {"results": results}


def handle_describe(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return {"error_code": ErrorCode.security_disabled, "error_message": _DISABLED, "resources": []}
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        return {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "resources": []}
    try:
        acls = authorizer.describe(_filter(request))
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "resources": []}
    by_resource: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in acls:
        by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
             "permission_type": acl.permission})
    return {"error_code": ErrorCode.none, "error_message": None, "resources": [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": entries}
        for (t, n, p), entries in by_resource.items()
    ]}


def handle_delete(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return {"filter_results": [{"error_code": ErrorCode.security_disabled, "error_message": _DISABLED,
                                    "matching_acls": []} for _ in request.filters]}
    if not ctx.allowed_on_cluster(Operation.ALTER):
        return {"filter_results": [{"error_code": ErrorCode.cluster_authorization_failed,
                                    "error_message": None, "matching_acls": []} for _ in request.filters]}
    filters: list[AclFilter] = []
    results: list[DeleteAclsFilterResult | None] = []
    for f in request.filters:
        try:
            filters.append(_filter(f))
            results.append(None)
        except KafkaError as exc:
            results.append({"error_code": exc.code, "error_message": exc.message, "matching_acls": []})
    deleted = iter(authorizer.delete(filters))
    answers: list[DeleteAclsFilterResult] = []
    for result in results:
        if result is not None:
            answers.append(result)
            continue
        answers.append({"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": acl.resource_type,
             "resource_name": acl.resource_name, "pattern_type": acl.pattern_type, "principal": acl.principal,
             "host": acl.host, "operation": acl.operation, "permission_type": acl.permission}
            for acl in next(deleted)
        ]})
    log.info("acls deleted", filters=len(filters), principal=ctx.session.principal, peer=ctx.peer)
    return {"filter_results": answers}
