"""The brokers compared, each started fresh on 127.0.0.1 with a temporary data directory.

    peer = Ottla()            # or Noida()
    try:
        peer.start()          # then peer.bootstrap is "127.0.0.1:PORT"
        ...
    finally:
        peer.stop()           # always safe; stops the broker and removes its files
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO

from confluent_kafka.admin import AdminClient

from broker.testing import BrokerProcess

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


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

    def log_tail(self) -> str:
        return _tail(self._broker.log_path)

    def stop(self) -> None:
        try:
            self._broker.stop(timeout=STOP_TIMEOUT)  # SIGTERM, then SIGKILL after the timeout
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


def noida_command() -> str | None:
    """The noida-db console script of this interpreter's environment, else one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "noida-db")
    return beside if os.access(beside, os.X_OK) else shutil.which("noida-db")


def _free_port() -> int:
    # The port is free when asked; noida-db binds it a moment later. Nothing else on this
    # machine races for ports, and if something did, start() would report the failure.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running (zombies do not count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        state, _ppid, pgrp = stat[stat.rindex(")") + 2:].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            return True
    return False


class Noida:
    """noida-db, a native Kafka-compatible broker from PyPI, with only its Kafka service on.

    Its console script is a Python wrapper that runs the native binary with
    subprocess.call and does not pass signals on: a SIGTERM to the wrapper alone leaves
    the binary running. So it runs in a session of its own and stop() signals the whole
    process group, and waits until no process of the group is left."""

    name = "noida-db"

    def __init__(self, command: str) -> None:
        self.bootstrap = ""
        self._command = command
        self._dir = tempfile.mkdtemp(prefix="bench-noida-")
        self._log_path = os.path.join(self._dir, "noida.log")
        self._log: IO[str] | None = None
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        port = _free_port()
        self._log = open(self._log_path, "w")
        # It prints a warning about the GLIBC version to stderr and runs all the same.
        self._process = subprocess.Popen(
            [self._command, "start", "--data-dir", os.path.join(self._dir, "data"), "--host", "127.0.0.1",
             "--only", "kafka", "--kafka-port", str(port)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.bootstrap = f"127.0.0.1:{port}"
        self._wait_ready(port)

    def _wait_ready(self, port: int) -> None:
        """Until the port accepts connections and a Metadata request gets an answer."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"noida-db exited with code {self._process.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
                return
            except Exception as exc:  # refused, or no Metadata answer yet
                if time.monotonic() > deadline:
                    raise RuntimeError(f"noida-db not ready after {START_TIMEOUT:.0f} s ({exc}):\n"
                                       f"{self.log_tail()}") from exc
            time.sleep(0.1)

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
