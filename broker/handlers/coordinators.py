"""FindCoordinator: this broker coordinates every transactional id (and, once the
group coordinator runs here, every group)."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode

from .context import RequestContext

GROUP, TRANSACTION = 0, 1


async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    keys = list(request.coordinator_keys) if ctx.version >= 4 else [request.key]
    key_type = getattr(request, "key_type", GROUP)
    answers = []
    for key in keys:
        if key_type == TRANSACTION or (key_type == GROUP and broker.groups_enabled):
            answers.append({"key": key, "error_code": ErrorCode.none, "node_id": broker.node_id,
                            "host": broker.config.advertised, "port": broker.port})
        else:
            code = ErrorCode.coordinator_not_available if key_type == GROUP else ErrorCode.invalid_request
            answers.append({"key": key, "error_code": code, "node_id": -1, "host": "", "port": -1})
    if ctx.version >= 4:
        return ctx.respond(coordinators=answers)
    answer = answers[0]
    return ctx.respond(error_code=answer["error_code"], node_id=answer["node_id"], host=answer["host"],
                       port=answer["port"])
