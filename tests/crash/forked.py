"""Ottla started on a crash state without paying for its imports each time.

`ottla serve` spends most of its start importing itself (about 0.4 s of CPU of the 0.5 s
a start on a crash state takes), and the harness starts it thousands of times. A fork
server (a process that has imported the broker and does nothing else) forks a child per
crash state instead: the child runs `ottla serve` with the arguments BrokerProcess would
give it (cli.main), on the state's data directory, with nothing of a previous broker in
it (the server never runs one), and is killed with SIGKILL like any other.

The server reads one request a line on its stdin (JSON: argv, the files for the child's
stdout and stderr, its working directory) and answers the child's pid; it reaps its
children as they end, so a child killed is gone once `os.kill(pid, 0)` fails. When the
harness exits (stdin closed), it kills the brokers still running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from ottla.testing import KILL_WAIT_SECONDS, BrokerProcess
from ottla.tools.ready_lines import LOADED_LINE, READY_PREFIX

_SERVER = r"""
import json, os, random, signal, sys, traceback
import ottla.tools.cli, ottla.broker.server  # everything `ottla serve` imports before serving

children = set()

def reap(signum, frame):
    try:
        while True:
            pid = os.waitpid(-1, os.WNOHANG)[0]
            if not pid:
                break
            children.discard(pid)
    except ChildProcessError:
        pass

signal.signal(signal.SIGCHLD, reap)
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), fd)
        os.chdir(request["cwd"])
        random.seed()
        code = 1
        try:
            code = ottla.tools.cli.main(request["argv"]) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()  # into the broker's log, as an exec'd broker's would be
        finally:
            sys.stdout.flush()
            os._exit(code)
    children.add(pid)
    sys.stdout.write(f"{pid}\n")
    sys.stdout.flush()
# The harness is gone (its end of stdin closed): so are the brokers it left running.
for pid in list(children):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended before it was added to children
        pass
"""


class ForkServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def fork(self, argv: list[str], stdout: str, stderr: str, cwd: str) -> int:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                                 stdout=subprocess.PIPE, text=True)
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(json.dumps({"argv": argv, "stdout": stdout, "stderr": stderr, "cwd": cwd})
                                      + "\n")
            self._process.stdin.flush()
            return int(self._process.stdout.readline())


_server = ForkServer()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class ForkedBroker(BrokerProcess):
    """A BrokerProcess forked from the fork server: start, log and kill as the other."""

    def __init__(self, data_dir: str, properties: dict[str, str], log_path: str) -> None:
        super().__init__(data_dir, properties, log_path=log_path)
        self.pid: int | None = None
        self._stdout_path = log_path + ".stdout"

    def start(self, timeout: float = 30, wait_for_coordinators: bool = True) -> ForkedBroker:
        argv = self.command()[3:]  # [python, -m, ottla.tools.cli, serve, ...]
        assert argv[0] == "serve", argv
        self.pid = pid = _server.fork(argv, self._stdout_path, self.log_path, os.path.dirname(self.data_dir))
        deadline = time.monotonic() + timeout
        while True:
            lines = self._stdout()
            for line in lines:
                if line.startswith(READY_PREFIX):
                    self.bootstrap = line[len(READY_PREFIX):].strip()
            if self.bootstrap and (not wait_for_coordinators or any(line.startswith(LOADED_LINE) for line in lines)):
                break
            if not _alive(pid) or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"broker did not start; log:\n{self.log()}")
            time.sleep(0.01)
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def _stdout(self) -> list[str]:
        try:
            with open(self._stdout_path) as f:
                return [line.rstrip("\n") for line in f]
        except FileNotFoundError:
            return []

    def _signal(self, sig: int, timeout: float) -> int:
        """Signal the child and wait until it is gone (reaped by the server); its exit
        code is the server's to see, so this returns 0."""
        if self.pid is None:
            return 0
        if _alive(self.pid):
            os.kill(self.pid, sig)
        deadline = time.monotonic() + max(timeout, KILL_WAIT_SECONDS)
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        self.pid = None
        if os.path.exists(self._stdout_path):
            os.unlink(self._stdout_path)
        return 0
