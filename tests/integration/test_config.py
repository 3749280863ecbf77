"""`ottla serve` configured the Kafka way, through real broker processes: a
server.properties file, OTTLA_<KEY> variables and flags (flag > env > file > default),
unknown keys warned about, invalid values stopping start-up with the key named, and
listeners advertising the address clients must use."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from ottla.testing import BrokerProcess
from ottla.tools.client import Cluster
from tests.clients import idempotent_producer, produce_all, read_all
from tests.wire import WireClient, request


class Serve(BrokerProcess):
    """`ottla serve` with exactly the given arguments (no --host/--port of its own)."""

    def __init__(self, tmp_path, args: list[str], env: dict[str, str] | None = None) -> None:
        super().__init__(str(tmp_path / "unused"), env=env, log_path=str(tmp_path / f"serve-{len(args)}.log"))
        self.args = args

    def command(self) -> list[str]:
        return [sys.executable, "-m", "ottla.tools.cli", "serve", *self.args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def partitions_of_new_topic(bootstrap: str, name: str) -> int:
    with Cluster(bootstrap) as cluster:
        return len(cluster.partitions(name, allow_create=True))


def test_flags_override_environment_which_overrides_the_file(tmp_path):
    data = tmp_path / "data"
    properties = tmp_path / "server.properties"
    properties.write_text(
        "# a Kafka server.properties\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={data}\n"
        "num.partitions = 2\n"
        "log.segment.bytes: 1048576\n"
        "auto.create.topics.enable=true\n"
    )
    args = ["--config", str(properties)]
    steps = [({}, [], 2), ({"OTTLA_NUM_PARTITIONS": "3"}, [], 3),
             ({"OTTLA_NUM_PARTITIONS": "3"}, ["--override", "num.partitions=4"], 4),
             ({"OTTLA_NUM_PARTITIONS": "3"}, ["--num.partitions", "5"], 5)]
    for i, (env, flags, expected) in enumerate(steps):
        broker = Serve(tmp_path, args + flags, env).start()
        try:
            assert partitions_of_new_topic(broker.bootstrap, f"auto-{i}") == expected
        finally:
            broker.stop()
    assert (data / "auto-0-0").is_dir(), "log.dirs from the file holds the partitions"


def test_unknown_keys_are_warned_about_and_start_up_goes_on(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("broker.id=0\nprocess.roles=broker,controller\nnum.partitions=1\n")
    broker = Serve(tmp_path, ["--config", str(properties), "--data-dir", str(tmp_path / "d"),
                              "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-format", "json"],
                   {"OTTLA_NOT_A_SETTING": "1"}).start()
    try:
        log = broker.log()
    finally:
        broker.stop()
    assert '"key": "broker.id"' in log and f'"source": "{properties}"' in log
    assert '"key": "process.roles"' in log
    assert '"key": "not.a.setting"' in log and '"source": "OTTLA_NOT_A_SETTING"' in log
    assert log.count("unknown setting ignored") == 3


def _refused(tmp_path, args: list[str], env: dict[str, str] | None = None) -> str:
    command = [sys.executable, "-m", "ottla.tools.cli", "serve", "--data-dir", str(tmp_path / "d"), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})})
    assert result.returncode == 2, result.stderr
    return result.stderr


def test_invalid_values_stop_start_up_naming_the_key_and_where_it_came_from(tmp_path):
    message = _refused(tmp_path, [], {"OTTLA_NUM_PARTITIONS": "many"})
    assert "invalid value for num.partitions" in message and "OTTLA_NUM_PARTITIONS" in message
    properties = tmp_path / "server.properties"
    properties.write_text("listeners=SSL://0.0.0.0:9093\nlistener.security.protocol.map=SSL:TLS\n")
    message = _refused(tmp_path, ["--config", str(properties)])
    assert "invalid value for listener.security.protocol.map" in message and "TLS" in message
    assert str(properties) in message
    properties.write_text("listeners=SSL://0.0.0.0:9093\n")  # TLS with no keystore
    message = _refused(tmp_path, ["--config", str(properties)])
    assert "ssl.keystore.location" in message and "not set" in message
    message = _refused(tmp_path, ["--override", "log.segment.bytes=10"])
    assert "invalid value for log.segment.bytes" in message and "command line" in message
    message = _refused(tmp_path, ["--advertised.listeners", "OTHER://h:1"])
    assert "OTHER is not one of the listeners" in message


def test_each_listener_advertises_its_own_address(tmp_path):
    outside, inside = free_port(), free_port()
    broker = Serve(tmp_path, ["--data-dir", str(tmp_path / "d")], {
        "OTTLA_LISTENERS": f"PLAINTEXT://127.0.0.1:{outside},INTERNAL://127.0.0.1:{inside}",
        "OTTLA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{outside},INTERNAL://localhost:{inside}",
        "OTTLA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    }).start()
    try:
        assert broker.bootstrap == f"127.0.0.1:{outside}"
        for port, advertised in ((outside, ("127.0.0.1", outside)), (inside, ("localhost", inside))):
            with Cluster(f"127.0.0.1:{port}") as cluster:
                (node,) = cluster.metadata([]).brokers
                assert (node.host, node.port) == advertised
        # FindCoordinator too, whose answers are kept encoded (broker/handlers/coordinators.py):
        # the same key asked on both listeners, interleaved, gets each listener's address.
        for _ in range(2):
            for port, advertised in ((outside, ("127.0.0.1", outside)), (inside, ("localhost", inside))):
                with WireClient(f"127.0.0.1:{port}") as client:
                    old = client.call(request(10, 3, key="g", key_type=0))
                    assert (old.host, old.port, old.error_message) == (*advertised, "NONE")
                    (new,) = client.call(request(10, 4, key_type=0, coordinator_keys=["g"])).coordinators
                    assert (new.host, new.port) == advertised
        producer = idempotent_producer(f"localhost:{inside}")
        produce_all(producer, [("via-internal", 0, None, b"hello")])
        assert read_all(f"127.0.0.1:{outside}", "via-internal", [0], isolation="read_committed")[0] == [b"hello"]
    finally:
        broker.stop()


def test_a_listener_on_every_interface_advertises_the_configured_host(tmp_path):
    port = free_port()
    broker = Serve(tmp_path, ["--data-dir", str(tmp_path / "d"),
                              "--listeners", f"PLAINTEXT://0.0.0.0:{port}",
                              "--advertised.listeners", f"PLAINTEXT://localhost:{port}"]).start()
    try:
        assert broker.bootstrap == f"localhost:{port}"
        with Cluster(f"127.0.0.1:{port}") as cluster:
            (node,) = cluster.metadata([]).brokers
            assert (node.host, node.port) == ("localhost", port)
        producer = idempotent_producer(f"127.0.0.1:{port}")
        produce_all(producer, [("everywhere", 0, None, b"x")])
        assert "listening=PLAINTEXT://0.0.0.0:" in broker.log()
    finally:
        broker.stop()


def test_schema_registry_listener_from_the_environment_and_refused_when_invalid(tmp_path):
    """schema.registry.listeners as OTTLA_SCHEMA_REGISTRY_LISTENERS turns the registry on;
    a value that is not one http://host:port stops start-up naming the key."""
    port = free_port()
    broker = Serve(tmp_path, ["--port", "0", "--data-dir", str(tmp_path / "data")],
                   env={"OTTLA_SCHEMA_REGISTRY_LISTENERS": f"http://127.0.0.1:{port}"}).start()
    try:
        assert broker.schema_registry_url == f"http://127.0.0.1:{port}"
    finally:
        broker.stop()
    for value in ("https://127.0.0.1:8081", "127.0.0.1:8081", "http://a:1,http://b:2", "http://h:99999"):
        message = _refused(tmp_path, ["--override", f"schema.registry.listeners={value}"])
        assert "invalid value for schema.registry.listeners" in message, value
