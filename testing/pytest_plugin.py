"""The pytest plugin installed with Ottla (entry point `pytest11`): a real broker for a
test session, a fresh topic per test, and faults on demand.

    def test_orders(ottla_broker, ottla_topic):
        Producer({"bootstrap.servers": ottla_broker.bootstrap}).produce(ottla_topic, b"x")

- `ottla_broker` (session): a broker subprocess on a free port with a temporary data
  directory and its admin endpoint on, with `ottla serve`'s development defaults
  (docs/configuration.md: a new consumer group is assigned at once); `.bootstrap` (or
  `.bootstrap_servers`, the name clients use) is its address. Stopped (SIGTERM) and its
  directory removed when the session ends.
- `ottla_schema_registry`: the URL of `ottla_broker`'s built-in schema registry
  (Confluent's REST API: `SchemaRegistryClient({"url": ottla_schema_registry})`).
- `ottla_topic`: a topic of its own for each test, one partition unless the test is
  marked `@pytest.mark.ottla_topic(partitions=3, configs={...})`.
- `ottla_secure_broker` (session): a broker whose listener speaks SASL_SSL with SCRAM
  (`ottla serve --dev-security`), and the client config to reach it:
  `broker, config = ottla_secure_broker; Producer(config)`.
- `ottla_faults`: the broker's fault injection (`.add_fault(kind=..., ...)`,
  `.metric(...)`); every fault a test set is cleared when it ends, so one test's faults
  never reach the next.

Outside pytest, `ottla.testing.running_broker()` gives the same broker.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from . import AdminEndpoint, BrokerProcess


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ottla_topic(partitions=1, configs=None): how ottla_topic creates the topic")


@pytest.fixture(scope="session")
def ottla_broker() -> Iterator[BrokerProcess]:
    broker = BrokerProcess(properties={"admin.port": "0",
                                       "schema.registry.listeners": "http://127.0.0.1:0"}).start()
    try:
        yield broker
    finally:
        broker.stop()
        broker.cleanup()


@pytest.fixture(scope="session")
def ottla_secure_broker() -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    broker = BrokerProcess(args=["--dev-security"]).start()
    try:
        yield broker, broker.dev_security_config()
    finally:
        broker.stop()
        broker.cleanup()


@pytest.fixture(scope="session")
def ottla_schema_registry(ottla_broker: BrokerProcess) -> str:
    assert ottla_broker.schema_registry_url is not None, "the broker printed no schema registry URL"
    return ottla_broker.schema_registry_url


@pytest.fixture
def ottla_topic(ottla_broker: BrokerProcess, request: pytest.FixtureRequest) -> str:
    marker = request.node.get_closest_marker("ottla_topic")
    options = marker.kwargs if marker is not None else {}
    # Named after the test, so a topic seen in a log or in `ottla topics list` says
    # which test made it; the suffix keeps reruns and parametrized tests apart.
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:180]
    return ottla_broker.create_topic(f"{stem}-{uuid.uuid4().hex[:8]}", options.get("partitions", 1),
                                     options.get("configs"))


@pytest.fixture
def ottla_faults(ottla_broker: BrokerProcess) -> Iterator[AdminEndpoint]:
    admin = ottla_broker.admin
    yield admin
    admin.clear_faults()
