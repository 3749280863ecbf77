"""InitProducerId (and, with the transaction coordinator, the transactional APIs)."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode

from .context import RequestContext


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        # Transactional producers are served by the transaction coordinator, which this
        # broker does not run yet: tell the client so, as a Kafka broker without one would.
        return ctx.respond(error_code=ErrorCode.coordinator_not_available, producer_id=-1, producer_epoch=-1)
    # An idempotent producer gets a fresh id with epoch 0 every time it asks, including
    # when it asks to bump the epoch of the id it has (KIP-360): Kafka does the same.
    producer_id = ctx.broker.producer_ids.allocate()
    return ctx.respond(error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=0)
