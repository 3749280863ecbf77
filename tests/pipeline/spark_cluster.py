"""A Spark standalone cluster on this machine, started from the installed PySpark: a
master and two workers of one core each, through PySpark's own `bin/spark-class`
launcher (no Spark download), for the pipeline tests that must meet real executors.

Every daemon binds a loopback address and free ports, and keeps its work directory
(executors' stderr, their Python workers' scratch space) and its own log under a
directory of the test session's. The two workers bind different loopback addresses,
127.0.0.1 and 127.0.0.2: to Spark they are two hosts, as on a real cluster, which
matters to the scheduler (a speculative copy of a task is never placed on a host
where the task already runs).

Each daemon runs in a process group of its own, and the executors a worker launches
(and their Python workers) are its descendants, so `kill_worker` can take a whole
"machine" down at once, and `stop` leaves no JVM behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKER_HOSTS = ("127.0.0.1", "127.0.0.2")
# The daemons' own heaps (they only schedule); executors get theirs from the app.
DAEMON_MEMORY = "256m"
WORKER_MEMORY = "1g"
START_TIMEOUT_S = 90.0
# What a driver on the cluster asks for: one executor of one core on each worker, with
# small heaps (four JVMs share the machine with the broker and the test).
APP_CONF = {
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.executor.memory": "512m",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Daemon:
    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "a") as log:
            # A session of its own, out of reach of the terminal's signals: the
            # fixture decides when it ends (`kill`, which finds the processes below
            # through /proc: see `descendants`).
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=self.env, start_new_session=True)

    def kill(self) -> list[int]:
        """SIGKILL the daemon and every process below it at the same moment, as when
        the machine it runs on dies. Returns the pids killed."""
        if self.process is None:
            return []
        pids = [self.process.pid, *descendants(self.process.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(30)
        self.process = None
        return pids


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...), from /proc: the
    Python daemon of an executor puts itself in a process group of its own, so a
    process group does not hold a worker's whole tree."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # The command name (field 2) may hold spaces: the parent is the second
                # field after its closing parenthesis.
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class StandaloneCluster:
    def __init__(self, base: Path, python: str = sys.executable) -> None:
        self.base = base
        self.master_port = free_port()
        self.master_ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.master_port}"
        conf_dir = base / "conf"  # empty: no spark-defaults.conf or log settings from elsewhere
        conf_dir.mkdir(parents=True, exist_ok=True)
        common = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_CONF_DIR": str(conf_dir),
                  "SPARK_DAEMON_MEMORY": DAEMON_MEMORY, "PYSPARK_PYTHON": python,
                  "SPARK_NO_DAEMONIZE": "1"}
        self.master = Daemon("master", [str(SPARK_CLASS), MASTER_CLASS, "--host", "127.0.0.1",
                                        "--port", str(self.master_port), "--webui-port", str(self.master_ui_port)],
                             {**common, "SPARK_LOCAL_IP": "127.0.0.1"}, base / "master.log")
        self.workers: list[Daemon] = []
        for number, host in enumerate(WORKER_HOSTS):
            work_dir = base / f"worker{number}"
            (work_dir / "local").mkdir(parents=True, exist_ok=True)
            self.workers.append(Daemon(
                f"worker{number}",
                [str(SPARK_CLASS), WORKER_CLASS, "--host", host, "--port", str(free_port(host)),
                 "--webui-port", str(free_port(host)), "--cores", "1", "--memory", WORKER_MEMORY,
                 "--work-dir", str(work_dir), self.master_url],
                {**common, "SPARK_LOCAL_IP": host, "SPARK_LOCAL_DIRS": str(work_dir / "local")},
                base / f"worker{number}.log"))

    def start(self) -> StandaloneCluster:
        try:
            self.master.start()
            self._wait(lambda state: state is not None, "the master's status page")
            for worker in self.workers:
                worker.start()
            self.wait_for_workers()
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict | None:
        """The master's status (its web UI's /json): workers, applications; None while
        it does not answer, or answers its HTML page (the UI serves a page before its
        /json handler is attached, which a busy machine makes likely to be seen)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json", timeout=5) as answer:
                return json.load(answer)
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> set[str]:
        state = self.state() or {}
        return {w["host"] for w in state.get("workers", []) if w["state"] == "ALIVE"}

    def wait_for_workers(self) -> None:
        """Until every running worker is registered with the master and alive."""
        wanted = {host for host, worker in zip(WORKER_HOSTS, self.workers, strict=True) if worker.process is not None}
        self._wait(lambda state: state is not None and self.alive_workers() == wanted,
                   f"workers {sorted(wanted)} to register")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready(self.state()):
            for daemon in (self.master, *self.workers):
                if daemon.process is not None and daemon.process.poll() is not None:
                    raise RuntimeError(f"{daemon.name} exited waiting for {what}:\n{daemon.log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {START_TIMEOUT_S:g} s for {what}")
            time.sleep(0.2)

    def worker_of(self, pid: int) -> int | None:
        """Which worker (0 or 1) runs process `pid` below it (an executor JVM, or a
        Python worker of one), if any."""
        for number, worker in enumerate(self.workers):
            if worker.process is not None and pid in descendants(worker.process.pid):
                return number
        return None

    def kill_worker(self, number: int) -> list[int]:
        return self.workers[number].kill()

    def restart_worker(self, number: int) -> None:
        self.workers[number].start()
        self.wait_for_workers()

    def driver_args(self, **conf: str) -> list[str]:
        """The arguments of tests/pipeline/streaming_copy.py for a driver on this
        cluster, with more Spark settings."""
        settings = {**APP_CONF, "spark.driver.memory": "512m", **conf}
        return ["--master", self.master_url, *(f"--conf={k}={v}" for k, v in settings.items())]

    def stop(self) -> None:
        # Workers first (each kills its executors' trees with it), then the master.
        for daemon in (*self.workers, self.master):
            daemon.kill()
