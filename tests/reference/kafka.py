"""Apache Kafka 4.3.1 itself, run beside Ottla as the reference every behaviour is judged by.

    with KafkaBroker() as kafka:            # a single-node KRaft broker on free ports
        Producer({"bootstrap.servers": kafka.bootstrap}) ...
        run_java("org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", kafka.bootstrap, "--list"])

The jars come from Maven Central once, through tests/reference/pom.xml and `make kafka`,
into .cache/kafka-4.3.1/libs (the layout of libs/ in Kafka's own distribution). Nothing here
downloads: when the jars or Java are missing, `ReferenceUnavailable` says what to run, and
the test suite fails with that message rather than skipping what it cannot compare.

The broker runs the way Kafka's config/server.properties and bin/kafka-server-start.sh set
it up: combined broker and controller (node 1), a random cluster id formatted with
`--standalone`, replication factors 1, `group.initial.rebalance.delay.ms=0`, and the JVM
options of kafka-run-class.sh with KAFKA_HEAP_OPTS' default of -Xmx1G -Xms1G.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable

from tests.system_tools import find, missing_message

KAFKA_VERSION = "4.3.1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_LIBS = os.path.join(ROOT, ".cache", f"kafka-{KAFKA_VERSION}", "libs")
# `make kafka` writes this file last, so a half-finished copy is never taken for the jars.
COMPLETE_MARKER = ".complete"

# bin/kafka-server-start.sh's KAFKA_HEAP_OPTS default and kafka-run-class.sh's performance
# and headless options: the JVM as Kafka's own scripts start it.
HEAP_OPTS = ["-Xmx1G", "-Xms1G"]
JVM_PERFORMANCE_OPTS = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                        "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                        "-Djava.awt.headless=true"]
# Kafka's tools are short-lived JVMs: a small heap (kafka-run-class.sh's -Xmx256M) and the
# tiered compiler's first tier only, which is what makes them start in about a second.
TOOL_OPTS = ["-Xmx256M", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]

START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0


class ReferenceUnavailable(RuntimeError):
    """Apache Kafka cannot be run here; the message says why and what to run."""


def libs_dir() -> str:
    """The folder of Kafka's jars (OTTLA_KAFKA_LIBS overrides the default)."""
    libs = os.environ.get("OTTLA_KAFKA_LIBS", DEFAULT_LIBS)
    if not os.path.exists(os.path.join(libs, COMPLETE_MARKER)):
        raise ReferenceUnavailable(
            f"Apache Kafka {KAFKA_VERSION}'s jars are not in {libs}: run `make kafka` "
            "(Maven copies them from Maven Central once; `make test` does it first)")
    return libs


def java() -> str:
    """The `java` to run Kafka with: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(home, "bin", "java") if home else find("java")
    if not candidate or not os.access(candidate, os.X_OK):
        raise ReferenceUnavailable(f"no `java` on PATH (Apache Kafka 4.3 needs Java 17 or newer): "
                                   f"{missing_message('java')}")
    return candidate


def java_command(main_class: str, args: Iterable[str], jvm_options: Iterable[str] = TOOL_OPTS) -> list[str]:
    return [java(), *jvm_options, "-cp", os.path.join(libs_dir(), "*"), main_class, *args]


def run_java(main_class: str, args: Iterable[str], *, timeout: float = 120, input: str | None = None,
             jvm_options: Iterable[str] = TOOL_OPTS, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's Java programs (a tool's main class) to completion, output captured."""
    return subprocess.run(java_command(main_class, args, jvm_options), capture_output=True, text=True,
                          timeout=timeout, input=input, check=check)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers_api_versions(host: str, port: int, timeout: float = 1.0) -> bool:
    """True once a broker on host:port answers an ApiVersions v0 request with error NONE."""
    request = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", -1)  # api key, version, correlation, null client id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            header = _read_exactly(sock, 4)
            (size,) = struct.unpack(">i", header)
            body = _read_exactly(sock, size)
    except OSError:
        return False
    correlation_id, error_code = struct.unpack_from(">ih", body)
    return correlation_id == 1 and error_code == 0


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return bytes(chunks)


class KafkaBroker:
    """One Apache Kafka KRaft node (broker and controller) in a directory of its own."""

    name = "Kafka"

    def __init__(self, work_dir: str | None = None, properties: dict[str, str] | None = None) -> None:
        self._own_dir = work_dir is None
        self.work_dir = work_dir or tempfile.mkdtemp(prefix="kafka-reference-")
        os.makedirs(self.work_dir, exist_ok=True)
        self.data_dir = os.path.join(self.work_dir, "data")
        self.config_path = os.path.join(self.work_dir, "server.properties")
        self.log_path = os.path.join(self.work_dir, "kafka.log")
        self.extra_properties = dict(properties or {})
        self.port = 0
        self.controller_port = 0
        self.bootstrap = ""
        self.cluster_id = ""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.data_dir,
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # A streams group's assignment comes in the heartbeat that calls for it, as
            # Ottla's does (and the classic group's at its first join): no initial
            # delay, no batching of assignments by interval.
            "group.streams.initial.rebalance.delay.ms": "0",
            "group.streams.assignment.interval.ms": "0",
        }
        props.update(self.extra_properties)
        return props

    def _format(self) -> None:
        made = run_java("kafka.tools.StorageTool", ["random-uuid"], timeout=60)
        self.cluster_id = made.stdout.strip()
        if made.returncode != 0 or not self.cluster_id:
            raise ReferenceUnavailable(f"kafka-storage random-uuid failed: {made.stderr[-2000:]}")
        formatted = run_java("kafka.tools.StorageTool",
                             ["format", "--standalone", "--cluster-id", self.cluster_id, "--config", self.config_path],
                             timeout=60)
        if formatted.returncode != 0:
            raise ReferenceUnavailable(
                f"kafka-storage format failed: {formatted.stdout[-1000:]}{formatted.stderr[-2000:]}")

    def start(self, timeout: float = START_TIMEOUT) -> KafkaBroker:
        """Format (the first time) and start the node; return once it answers ApiVersions
        and knows itself as a broker (Metadata lists it), or raise ReferenceUnavailable."""
        first_start = self.port == 0
        if first_start:
            self.port, self.controller_port = free_port(), free_port()
            self.bootstrap = f"127.0.0.1:{self.port}"
            with open(self.config_path, "w") as config:
                config.writelines(f"{key}={value}\n" for key, value in self.properties().items())
            self._format()
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                java_command("kafka.Kafka", [self.config_path], [*HEAP_OPTS, *JVM_PERFORMANCE_OPTS]),
                stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir, start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReferenceUnavailable(f"Apache Kafka exited with {self.process.returncode} while starting:\n"
                                           f"{self.log_tail()}")
            if answers_api_versions("127.0.0.1", self.port) and self._knows_itself():
                return self
            time.sleep(0.2)
        self.kill()
        raise ReferenceUnavailable(f"Apache Kafka did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def _knows_itself(self) -> bool:
        # ApiVersions answers before the broker has caught up with the metadata log; a
        # Metadata request that lists the broker means topics can be created.
        from confluent_kafka.admin import AdminClient  # a test dependency, not needed to import this module

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000})
        try:
            return bool(admin.list_topics(timeout=2).brokers)
        except Exception:  # KafkaException while the broker is still starting
            return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""

    def _signal(self, sig: int, wait: float) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, sig)
        try:
            self.process.wait(wait)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM, as kafka-server-stop.sh sends)."""
        self._signal(signal.SIGTERM, STOP_TIMEOUT)

    def kill(self) -> None:
        """kill -9: the page cache keeps what was written, nothing else is flushed."""
        self._signal(signal.SIGKILL, 10)

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
