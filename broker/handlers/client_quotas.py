"""DescribeClientQuotas and AlterClientQuotas (broker/client_quotas.py keeps them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..client_quotas import QuotaError
from ..security.authorizer import Operation
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.alter_client_quotas import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        EntityDataResponse,
    )
    from ottla.protocol.views.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse


def handle_describe(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not ctx.allowed_on_cluster(Operation.DESCRIBE_CONFIGS):
        return {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "entries": None}
    try:
        found = ctx.services.quotas.describe([(c.entity_type, c.match_type, c.match) for c in request.components],
                                             request.strict)
    except QuotaError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "entries": None}
    return {"error_code": ErrorCode.none, "error_message": None, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
        for entity, values in found
    ]}


def handle_alter(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    entities: list[list[EntityDataResponse]] = [
        [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        for entry in request.entries]
    if not ctx.allowed_on_cluster(Operation.ALTER_CONFIGS):
        return {"entries": [{"error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
                             "entity": entity} for entity in entities]}
    results = ctx.services.quotas.alter(
        [([(e.entity_type, e.entity_name) for e in entry.entity], [(op.key, op.value, op.remove) for op in entry.ops])
         for entry in request.entries],
        request.validate_only)
    return {"entries": [{"error_code": code, "error_message": message, "entity": entity}
                        for (code, message), entity in zip(results, entities, strict=True)]}
