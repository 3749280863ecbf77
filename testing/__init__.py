"""Run a real Ottla broker in a subprocess, for tests and scripts.

    with running_broker() as broker:
        Producer({"bootstrap.servers": broker.bootstrap}) ...

The broker listens on a free port (it binds port 0 and reports the port it got) and
keeps its data in a temporary directory unless one is given. `kill()` sends SIGKILL,
`stop()` SIGTERM (a clean shutdown), `start()` starts it again on the same data
directory and port.

With the property `admin.port` (0 for any free port) the broker serves its admin
endpoint, and `broker.admin` reads its metrics and sets faults:

    with running_broker(admin_port=0) as broker:
        broker.admin.add_fault(kind="drop", api="Produce", count=1)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO, Any

from ottla.protocol.apis import CREATE_TOPICS
from ottla.tools.client import REQUEST_TIMEOUT_MS, Cluster, check
from ottla.tools.ready_lines import ADMIN_PREFIX, LISTENER_PREFIX, LOADED_LINE, READY_PREFIX, SCHEMA_REGISTRY_PREFIX

# How long a call to the admin endpoint may take before it counts as failed.
ADMIN_TIMEOUT_SECONDS = 10
# How often start() looks whether the broker died while it waits for the ready line.
START_POLL_SECONDS = 0.05
# How long kill() waits for a SIGKILLed broker to be reaped.
KILL_WAIT_SECONDS = 10


class AdminEndpoint:
    """The broker's admin HTTP endpoint: metrics and faults (see console/admin_http.py)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.token = token  # admin.token, if the broker has one

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT_SECONDS) as response:
                payload = response.read()
                is_json = response.headers.get_content_type() == "application/json"
        except urllib.error.HTTPError as exc:
            raise ValueError(f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None
        return json.loads(payload) if is_json else payload.decode()

    def healthy(self) -> bool:
        try:
            return self._request("GET", "/healthz") == "ok\n"
        except (OSError, ValueError):
            return False

    def metrics(self) -> str:
        """/metrics in Prometheus text format."""
        return self._request("GET", "/metrics")

    def metric(self, name: str, **labels: object) -> float:
        """One sample of /metrics (0 if absent): metric("ottla_requests_total", api="Produce")."""
        wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
        series = f"{name}{{{wanted}}}" if labels else name
        for line in self.metrics().splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def add_fault(self, **spec: Any) -> dict[str, Any]:
        """Set a fault: add_fault(kind="error", api="EndTxn", error="COORDINATOR_LOAD_IN_PROGRESS")."""
        return self._request("POST", "/faults", spec)

    def faults(self) -> list[dict[str, Any]]:
        return self._request("GET", "/faults")["faults"]

    def clear_faults(self) -> None:
        self._request("DELETE", "/faults")


class BrokerProcess:
    def __init__(self, data_dir: str | None = None, properties: dict[str, str] | None = None,
                 log_path: str | None = None, env: dict[str, str] | None = None,
                 launcher: str | None = None, args: list[str] | None = None) -> None:
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="ottla-")
        os.makedirs(self.data_dir, exist_ok=True)
        self.properties = dict(properties or {})
        self.env = dict(env or {})
        # A Python script run in place of `-m ottla.tools.cli`, with the same arguments:
        # a test's way to change the broker (a crash at a chosen point) before it starts,
        # without a hook in the product. None: the broker as shipped.
        self.launcher = launcher
        # More `ottla serve` flags: --dev-security, --add-scram ...
        self.args = list(args or [])
        self.log_path = log_path or os.path.join(os.path.dirname(os.path.abspath(self.data_dir)),
                                                 f"{os.path.basename(self.data_dir)}.broker.log")
        self.port = 0
        self.bootstrap = ""  # host:port of the first listener, as clients take it
        # Every listener's advertised host:port by name (the first is `bootstrap`).
        self.listeners: dict[str, str] = {}
        self.admin_url: str | None = None
        # With the property schema.registry.listeners: the registry's URL (a client's `url`).
        self.schema_registry_url: str | None = None
        self.process: subprocess.Popen[str] | None = None
        # Set once the broker prints that its coordinators are loaded (see `start`).
        self.coordinators_loaded = threading.Event()
        self._log_file: IO[str] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """`bootstrap`, under the name clients give it (confluent-kafka's
        `bootstrap.servers`, kafka-python's and aiokafka's `bootstrap_servers`)."""
        return self.bootstrap

    def command(self) -> list[str]:
        entry = [self.launcher] if self.launcher is not None else ["-m", "ottla.tools.cli"]
        cmd = [sys.executable, *entry, "serve", "--host", "127.0.0.1", "--port", str(self.port),
               "--data-dir", self.data_dir, "--log-level", "info"]
        for key, value in self.properties.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + self.args

    def start(self, timeout: float = 30, wait_for_coordinators: bool = True) -> BrokerProcess:
        """Start the broker; return once it serves and, with `wait_for_coordinators`,
        once transactions and groups are served too (their coordinators load after the
        ready line, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
        self._log_file = open(self.log_path, "a")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=self._log_file, text=True,
                                        env=env, cwd=os.path.dirname(os.path.abspath(self.data_dir)))
        ready = threading.Event()
        self.coordinators_loaded = threading.Event()
        lines: list[str] = []

        def read_stdout() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                lines.append(line)
                if line.startswith(ADMIN_PREFIX):
                    self.admin_url = line[len(ADMIN_PREFIX):].strip()
                if line.startswith(SCHEMA_REGISTRY_PREFIX):
                    self.schema_registry_url = line[len(SCHEMA_REGISTRY_PREFIX):].strip()
                if line.startswith(LISTENER_PREFIX):
                    name, _, address = line[len(LISTENER_PREFIX):].partition(" ")
                    self.listeners[name] = address.rsplit(" ", 1)[-1].strip()
                if line.startswith(READY_PREFIX):
                    self.bootstrap = line[len(READY_PREFIX):].strip()
                    if not wait_for_coordinators:
                        ready.set()
                if line.startswith(LOADED_LINE):
                    self.coordinators_loaded.set()
                    ready.set()

        threading.Thread(target=read_stdout, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(START_POLL_SECONDS):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"broker did not start; log:\n{self.log()}")
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def dev_security_config(self) -> dict[str, str]:
        """The librdkafka client config `--dev-security` wrote (confluent-kafka takes it as is)."""
        config = {}
        with open(os.path.join(self.data_dir, "dev-security", "librdkafka.config"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("=")
                config[key] = value
        return config

    @property
    def admin(self) -> AdminEndpoint:
        if self.admin_url is None:
            raise RuntimeError("this broker has no admin endpoint: start it with the property admin.port")
        return AdminEndpoint(self.admin_url, self.properties.get("admin.token"))

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """Create a topic over the wire (CreateTopics); returns its name."""
        with Cluster(self.bootstrap, client_id="ottla-testing") as cluster:
            answer = cluster.call(CREATE_TOPICS, timeout=REQUEST_TIMEOUT_MS, validate_only=False, topics=[{
                "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }])
            (result,) = answer.topics
            check(result.error_code, f"creating {name}", result.error_message)
        return name

    def log(self) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        return self._signal(signal.SIGKILL, KILL_WAIT_SECONDS)

    def wait_exit(self, timeout: float = 30) -> int:
        """Wait for the broker to exit by itself (a crash hook); returns its exit code."""
        assert self.process is not None
        code = self.process.wait(timeout)
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def _signal(self, sig: int, timeout: float) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.kill()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.log_path)


@contextlib.contextmanager
def running_broker(data_dir: str | None = None, **properties: str) -> Iterator[BrokerProcess]:
    """A broker subprocess for the duration of the block. Properties use Kafka's names
    with dots replaced by underscores: running_broker(log_segment_bytes="5242880")."""
    props = {key.replace("_", "."): str(value) for key, value in properties.items()}
    broker = BrokerProcess(data_dir, props)
    broker.start()
    try:
        yield broker
    finally:
        broker.cleanup()
