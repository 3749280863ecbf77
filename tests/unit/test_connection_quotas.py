"""max.connections, max.connections.per.ip and its overrides, as Kafka's ConnectionQuotas
count them (the wire behaviour: tests/integration/test_half_sent_frames.py)."""

from __future__ import annotations

import pytest

from ottla.broker.config import BrokerConfig, ConfigError
from ottla.broker.network.connection_quotas import ConnectionQuotas


class Arrival:
    def __init__(self) -> None:
        self.state = "waiting"

    def admitted(self) -> None:
        self.state = "admitted"

    def refused(self) -> None:
        self.state = "refused"


def _quotas(**properties: str) -> ConnectionQuotas:
    return ConnectionQuotas(BrokerConfig().with_kafka_properties(properties))


def test_per_ip_bound_and_overrides():
    quotas = _quotas(**{"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "10.0.0.2:2,localhost:0"})
    first, second = Arrival(), Arrival()
    quotas.arrived(first, "10.0.0.1")
    quotas.arrived(second, "10.0.0.1")
    assert (first.state, second.state) == ("admitted", "refused")
    overridden = [Arrival() for _ in range(3)]
    for arrival in overridden:
        quotas.arrived(arrival, "10.0.0.2")
    assert [a.state for a in overridden] == ["admitted", "admitted", "refused"]
    loopback = Arrival()
    quotas.arrived(loopback, "::ffff:127.0.0.1")  # localhost, resolved at start: none allowed
    assert loopback.state == "refused"
    quotas.left(first, "10.0.0.1", admitted=True)
    again = Arrival()
    quotas.arrived(again, "10.0.0.1")
    assert again.state == "admitted"


def test_max_connections_makes_new_ones_wait_in_order():
    quotas = _quotas(**{"max.connections": "2"})
    arrivals = [Arrival() for _ in range(4)]
    for arrival in arrivals:
        quotas.arrived(arrival, "10.0.0.1")
    assert [a.state for a in arrivals] == ["admitted", "admitted", "waiting", "waiting"]
    quotas.left(arrivals[3], "10.0.0.1", admitted=False)  # gave up waiting
    quotas.left(arrivals[0], "10.0.0.1", admitted=True)
    assert arrivals[2].state == "admitted" and quotas.total == 2


def test_a_zero_per_ip_bound_needs_overrides():
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        BrokerConfig().with_kafka_properties({"max.connections.per.ip": "0"})
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        BrokerConfig().with_kafka_properties({"max.connections.per.ip.overrides": "10.0.0.1"})
    _quotas(**{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:5"})
