"""The handler table: which requests a connection may serve at once is read off it."""

from __future__ import annotations

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
