"""Kafka Connect 4.3.1 (connect-runtime, connect-file, connect-mirror from `make kafka`) run
as its own scripts run it, against any broker: a distributed worker
(org.apache.kafka.connect.cli.ConnectDistributed with a worker properties file) driven over
its REST API with urllib, and MirrorMaker 2 in dedicated mode
(org.apache.kafka.connect.mirror.MirrorMaker with an mm2.properties).

    worker = ConnectWorker(work_dir, "w1", bootstrap, group="g").start()
    worker.put_connector("src", {"connector.class": "...FileStreamSourceConnector", ...})
    worker.wait(lambda: worker.status("src")["tasks"])
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from .kafka import ReferenceUnavailable, free_port, java_command

# connect-distributed.sh's heap (KAFKA_HEAP_OPTS=-Xms256M -Xmx2G), kept small for a shared
# machine; the tiered compiler's first tier makes the JVM start faster.
WORKER_JVM_OPTS = ["-Xms128M", "-Xmx512M", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
START_TIMEOUT = 180.0

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout: float, what: str,
               describe: Callable[[], str] = lambda: "") -> T:
    """Poll `condition` until it returns something truthy; fail with `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{describe()}")
        time.sleep(0.5)


def write_properties(path: str, properties: dict[str, str]) -> None:
    with open(path, "w") as f:
        f.writelines(f"{key}={value}\n" for key, value in properties.items())


class _PropertiesJvm:
    """A JVM program of Kafka's started on a properties file, in a session of its own so
    that kill() (kill -9) and stop() (SIGTERM, then kill -9) reach every process it has,
    its output in a log beside the file."""

    def __init__(self, work_dir: str, name: str, main_class: str, what: str) -> None:
        self.config_path = os.path.join(work_dir, f"{name}.properties")
        self.log_path = os.path.join(work_dir, f"{name}.log")
        self.main_class, self.what = main_class, what
        self.properties: dict[str, str] = {}
        self.process: subprocess.Popen[bytes] | None = None

    def _launch(self) -> None:
        write_properties(self.config_path, self.properties)
        try:
            command = java_command(self.main_class, [self.config_path], WORKER_JVM_OPTS)
        except ReferenceUnavailable as exc:
            raise AssertionError(f"{self.what} cannot run: {exc}") from None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9: no LeaveGroup, no last offset flush, no transaction ended."""
        if self.alive():
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.alive():
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 60) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""


class ConnectWorker(_PropertiesJvm):
    """One distributed-mode Connect worker in a JVM of its own (kill() is kill -9)."""

    def __init__(self, work_dir: str, name: str, bootstrap: str, group: str,
                 extra: dict[str, str] | None = None) -> None:
        super().__init__(work_dir, name, "org.apache.kafka.connect.cli.ConnectDistributed", "Kafka Connect")
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker_id = f"127.0.0.1:{self.port}"
        self.properties = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            # The worker creates these three itself, compacted, with its own partition counts.
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.flush.interval.ms": "1000",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "plugin.discovery": "only_scan",
            # Incremental cooperative rebalancing holds a departed worker's tasks this long
            # before giving them to the others (default 5 min).
            "scheduled.rebalance.max.delay.ms": "2000",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
        }
        self.properties.update(extra or {})

    def start(self) -> ConnectWorker:
        self._launch()
        wait_until(self._serving, START_TIMEOUT, f"Connect worker {self.name} to serve its REST API",
                   self.log_tail)
        return self

    def _serving(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"Connect worker {self.name} exited with {self.process.returncode}:\n"
                                 f"{self.log_tail()}")
        try:
            self.request("GET", "/connectors")
            return True
        except (OSError, RestError):
            return False

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise RestError(exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(payload) if payload else None

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        """Create or update a connector; retried while the group rebalances (409) or the
        request cannot be forwarded to the leader yet."""
        def attempt() -> bool:
            try:
                self.request("PUT", f"/connectors/{name}/config", config)
                return True
            except RestError as exc:
                if exc.code in (409, 500, 503):
                    return False
                raise
        wait_until(attempt, 90, f"connector {name} to be accepted", self.log_tail)

    def status(self, name: str) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = self.request("GET", f"/connectors/{name}/status")
            return answer
        except (RestError, OSError):
            return None

    def running_tasks(self, name: str) -> dict[int, str]:
        """{task id: worker id} of the connector's RUNNING tasks."""
        status = self.status(name)
        if status is None or status["connector"]["state"] != "RUNNING":
            return {}
        return {task["id"]: task["worker_id"] for task in status["tasks"] if task["state"] == "RUNNING"}

class RestError(Exception):
    def __init__(self, code: int, body: str) -> None:
        super().__init__(f"{code}: {body}")
        self.code = code


class MirrorMaker(_PropertiesJvm):
    """MirrorMaker 2 in dedicated mode (connect-mirror-maker.sh): one JVM running the
    source, checkpoint and heartbeat connectors for every enabled flow of mm2.properties."""

    def __init__(self, work_dir: str, properties: dict[str, str], name: str = "mm2") -> None:
        super().__init__(work_dir, name, "org.apache.kafka.connect.mirror.MirrorMaker", "MirrorMaker 2")
        self.properties = dict(properties)

    def start(self) -> MirrorMaker:
        self._launch()
        return self

    def check_alive(self) -> None:
        if not self.alive():
            raise AssertionError(f"MirrorMaker 2 is not running:\n{self.log_tail()}")


def mirror_properties(source_alias: str, source: str, target_alias: str, target: str, topics: str,
                      groups: str, **extra: str) -> dict[str, str]:
    """The mm2.properties the tests run (and docs/moving-to-a-kafka-cluster.md shows): one
    flow, topic names kept (IdentityReplicationPolicy), read_committed on the source,
    replication factor 1, intervals of a second or two instead of MirrorMaker 2's minutes."""
    flow = f"{source_alias}->{target_alias}"
    props = {
        "clusters": f"{source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers": source,
        f"{target_alias}.bootstrap.servers": target,
        f"{flow}.enabled": "true",
        f"{target_alias}->{source_alias}.enabled": "false",
        f"{flow}.topics": topics,
        f"{flow}.groups": groups,
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        # Aborted transactions stay behind: the source consumers read committed records only.
        f"{source_alias}.consumer.isolation.level": "read_committed",
        "sync.topic.configs.enabled": "true",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "sync.topic.configs.interval.seconds": "2",
        "offset.flush.interval.ms": "1000",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "plugin.discovery": "only_scan",
    }
    props.update(extra)
    return props
