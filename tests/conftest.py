"""Shared fixtures: a real broker subprocess per test module (or per test when a test
needs its own data directory), and unique topic names."""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid

import pytest

from ottla.testing import BrokerProcess

from .reference.kafka import KafkaBroker, ReferenceUnavailable
from .schema_registry_http import RegistryHttp
from .system_tools import require


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that runs Apache Kafka beside Ottla (it uses the kafka_reference fixture,
    directly or through another) is marked `kafka`: `make conformance` runs those,
    `make test` the rest, so that each fits its time on CI."""
    for item in items:
        if "kafka_reference" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """One broker for a whole test module, on a free port with a temp data dir."""
    data_dir = tmp_path_factory.mktemp("broker-data")
    process = BrokerProcess(str(data_dir)).start()
    yield process
    process.cleanup()


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of this test's own, for tests that restart, kill or configure it."""
    processes: list[BrokerProcess] = []

    def start(env: dict[str, str] | None = None, launcher: str | None = None, **properties: object) -> BrokerProcess:
        props = {key.replace("_", "."): str(value) for key, value in properties.items()}
        process = BrokerProcess(str(tmp_path / f"data{len(processes)}"), props, env=env, launcher=launcher).start()
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.cleanup()


@pytest.fixture(scope="session")
def kafka_reference(tmp_path_factory: pytest.TempPathFactory):
    """Apache Kafka 4.3.1 on free ports, one for the whole session: the reference the
    conformance tests compare Ottla with. Its absence fails the test, never skips it."""
    try:
        kafka = KafkaBroker(str(tmp_path_factory.mktemp("kafka-reference"))).start()
    except ReferenceUnavailable as exc:
        pytest.fail(f"Apache Kafka, the reference, is not available: {exc}", pytrace=False)
    yield kafka
    kafka.cleanup()


@pytest.fixture
def registry_http(ottla_schema_registry: str) -> RegistryHttp:
    """Raw HTTP to the schema registry of the pytest plugin's module broker."""
    return RegistryHttp(ottla_schema_registry)


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def kafkajs() -> str:
    """tests/js/roundtrip.js, its kafkajs installed: `node <it> <bootstrap> [security JSON]`."""
    npm = require("npm")
    require("node")
    js_dir = os.path.join(os.path.dirname(__file__), "js")
    # Installed once per package-lock.json: the stamp holds the lock file's hash.
    with open(os.path.join(js_dir, "package-lock.json"), "rb") as f:
        lock_hash = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(js_dir, "node_modules", ".ottla-installed-lock")
    if not os.path.exists(stamp) or open(stamp).read() != lock_hash:
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent"], cwd=js_dir, check=True, timeout=300)
        with open(stamp, "w") as f:
            f.write(lock_hash)
    return os.path.join(js_dir, "roundtrip.js")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """make test's workers (pytest-xdist): a module's tests run in one worker, where they
    share its module-scoped broker, and every Spark test in the same one: a process
    holds one SparkSession, and two standalone clusters would fight over the cores.
    (xdist's own loadgroup marks do not reach its scheduler under pytest 9: the group
    is added to a node id pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleAndSparkScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/pipeline/" if nodeid.startswith("tests/pipeline/") else nodeid.split("::", 1)[0]

    return ModuleAndSparkScheduling(config, log)
