"""The handler table: which requests a connection may serve at once is read off it."""

from __future__ import annotations

import inspect

from ottla.broker.handlers import HANDLERS, MAY_WAIT
from ottla.protocol import apis


def test_only_the_group_rebalance_and_sasl_authentication_wait() -> None:
    # Everything else is a plain function, served straight from the bytes just read;
    # a handler made `async` by mistake would only lose that, not break ordering.
    # (SaslAuthenticate waits before answering a failed attempt, as Kafka does. A
    # Fetch that has to long-poll returns an awaitable: tests/integration cover it.)
    assert MAY_WAIT == {apis.JOIN_GROUP.key, apis.SYNC_GROUP.key, apis.SASL_AUTHENTICATE.key}


def test_every_supported_api_has_a_handler() -> None:
    assert set(HANDLERS) == set(apis.SUPPORTED)


def test_every_handler_takes_its_request_view_and_answers_its_response_view() -> None:
    # What mypy checks a handler against is its annotations (protocol/views): a handler
    # taking Any or answering Any would be checked against nothing.
    for handler in HANDLERS.values():
        signature = inspect.signature(handler)
        request, answer = signature.parameters["request"].annotation, signature.return_annotation
        assert request.endswith("Request") and answer.split(" | ")[0].endswith("Response"), (handler, request, answer)
