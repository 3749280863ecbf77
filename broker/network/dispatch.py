"""From a decoded request to its response: the handler, and what the broker wraps
around every request besides it (the faults a test has set, the fsync wait of
`--fsync`, the metrics).

The connection decides *when* a request is served; this decides *how*. A request is
either served at once, synchronously, straight from the bytes just read (`handle_now`:
its handler never waits, no fault is set, no fsync to wait for), or through the
connection's worker task (`handle`), which can wait on all of those.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from time import perf_counter
from types import CoroutineType
from typing import Any

from ..durability import GroupCommit
from ..faults import FaultKind, Faults
from ..handlers import HANDLERS, MAY_WAIT, RequestContext
from ..metrics import Metrics


class Dispatcher:
    def __init__(self, faults: Faults, metrics: Metrics, group_commit: GroupCommit | None) -> None:
        self.faults = faults
        self.metrics = metrics
        # With --fsync, responses wait for an fsync shared by all recent writes.
        self.group_commit = group_commit

    def can_handle_now(self, api_key: int) -> bool:
        """Whether a request of this API can be answered without giving the event loop a
        turn. Not when a fault is set (it may delay the answer) nor with --fsync (the
        answer waits for the disk)."""
        return api_key not in MAY_WAIT and not self.faults.armed and self.group_commit is None

    def handle_now(self, ctx: RequestContext, request: Any) -> Any:
        """Serve a request `can_handle_now` allowed. Exceptions are the handler's bugs:
        the caller logs them and closes the connection. A handler with work for a
        worker thread (a large Produce) answers with an awaitable of its response: the
        caller awaits it before serving anything else of that connection."""
        started = perf_counter()
        api_key = ctx.header.api_key
        response = HANDLERS[api_key](ctx, request)
        if isinstance(response, CoroutineType):
            return self.served_later(ctx, started, response)
        if response.__class__ is dict:
            response = ctx.entity(response)
        self.metrics.request_served(api_key, perf_counter() - started, response)
        return response

    async def served_later(self, ctx: RequestContext, started: float, pending: Awaitable[Any]) -> Any:
        response = await pending
        if response.__class__ is dict:
            response = ctx.entity(response)
        self.metrics.request_served(ctx.header.api_key, perf_counter() - started, response)
        return response

    async def handle(self, ctx: RequestContext, request: Any, close: Callable[[], None]) -> Any:
        """Serve any request; the response to send, or None to send nothing (acks=0, or
        a fault that drops the answer or closes the connection, calling `close`)."""
        started = perf_counter()
        api_key = ctx.header.api_key
        faults = self.faults
        fault = faults.take(ctx, request) if faults.armed else None
        if fault is not None and fault.kind is FaultKind.ERROR:
            # The request is not handled: the error means what it means from Kafka.
            response = faults.error_response(fault, ctx, request)
        else:
            group_commit = self.group_commit
            appends_before = group_commit.generation if group_commit is not None else 0
            response = HANDLERS[api_key](ctx, request)
            if isinstance(response, CoroutineType):
                response = await response
            if response.__class__ is dict:
                response = ctx.entity(response)
            if group_commit is not None and group_commit.generation != appends_before:
                await group_commit.sync()  # --fsync: what we acknowledge is on disk
        send = fault is None or await faults.before_response(fault, close)
        self.metrics.request_served(api_key, perf_counter() - started, response)
        return response if send else None
