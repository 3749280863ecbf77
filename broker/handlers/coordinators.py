"""FindCoordinator: this broker coordinates every group and every transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

GROUP, TRANSACTION = 0, 1
# The enum members read at every FindCoordinator, read once: on Python 3.11 a member
# read off its class goes through EnumType.__getattr__'s slot, about 1k instructions each
# (as groups.py's for Heartbeat).
_DESCRIBE, _GROUP_RESOURCE, _TXN_RESOURCE = Operation.DESCRIBE, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
_NO_ERROR, _NOT_AVAILABLE = ErrorCode.none, ErrorCode.coordinator_not_available


def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    services = ctx.services
    version = ctx.header.api_version
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    key_type = request.key_type
    host, port = ctx.advertised_address
    # ctx.allowed's answer without its call where no authorizer is configured.
    checked = services.authorizer is not None
    answers: list[Coordinator] = []
    for key in keys:
        resource = _GROUP_RESOURCE if key_type == GROUP else _TXN_RESOURCE
        if key_type in (GROUP, TRANSACTION) and checked and not ctx.allowed(_DESCRIBE, resource, key):
            code = ErrorCode.group_authorization_failed if key_type == GROUP \
                else ErrorCode.transactional_id_authorization_failed
            answers.append({"key": key, "error_code": code, "node_id": -1, "host": "", "port": -1})
        elif key_type == TRANSACTION and not services.transactions.ensure_topic():
            # As Kafka while its __transaction_state cannot be made: ask again later.
            answers.append({"key": key, "error_code": _NOT_AVAILABLE, "node_id": -1, "host": "", "port": -1})
        elif key_type in (GROUP, TRANSACTION):
            answers.append({"key": key, "error_code": _NO_ERROR, "node_id": services.node_id, "host": host,
                            "port": port})
        else:
            answers.append({"key": key, "error_code": ErrorCode.invalid_request, "node_id": -1, "host": "",
                            "port": -1, "error_message": f"unknown coordinator key type {key_type}"})
    if version >= 4:
        return {"coordinators": answers}
    answer = answers[0]
    return {"error_code": answer["error_code"], "node_id": answer["node_id"], "host": answer["host"],
            "port": answer["port"]}
