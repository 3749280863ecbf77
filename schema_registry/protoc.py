"""protoc, the compiler `grpcio-tools` carries, in a process of its own.

protoc is C++ and recursive: some inputs a client may send (an aggregate option value
nested a hundred thousand levels deep) overflow its stack and kill the process that
runs it. So it never runs in the broker: one worker process (`python -m
ottla.schema_registry.protoc`, started on the first PROTOBUF schema) compiles
one request at a time; if it dies on an input, or spends more than COMPILE_CPU_SECONDS of
CPU on it (or waits COMPILE_WALL_SECONDS), that schema is invalid (42201) and the next
request starts a new worker. The worker
ends when the broker does (its stdin closes).

Frames on the pipes: a 4-byte big-endian length, then a JSON request
{"main": TEXT, "files": [[IMPORT_PATH, TEXT], ...]}; the answer is a 4-byte length, then
b"D" and a serialized FileDescriptorSet (`--include_imports`, the main file last), or
b"E" and protoc's messages.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO

MAIN_FILE = "schema.proto"
# The worker's own CPU time is what a schema is allowed, not the clock's: on a loaded
# machine (a CI runner, tests in parallel) a schema protoc compiles in a second can take
# ten on the clock, and the same schema must not be valid on a quiet machine only. The
# clock's limit is for a worker that stops using CPU without answering.
COMPILE_CPU_SECONDS = 10.0
COMPILE_WALL_SECONDS = 120.0
# What the worker may allocate: a 4 MiB schema compiles in far less.
WORKER_MEMORY = 2 * 1024**3


class CompileFailed(Exception):
    """protoc refused the schema, or died or hung on it: the reason, for a 42201."""


class ProtocProcess:
    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def compile(self, main: str, files: list[tuple[str, str]]) -> bytes:
        """The FileDescriptorSet protoc makes of `main` with `files` beside it."""
        request = json.dumps({"main": main, "files": files}).encode()
        with self._lock:
            process = self._running()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(len(request).to_bytes(4, "big") + request)
                process.stdin.flush()
                deadline = _Deadline(process.pid, COMPILE_CPU_SECONDS, COMPILE_WALL_SECONDS)
                size = int.from_bytes(_read(process.stdout, 4, deadline), "big")
                answer = _read(process.stdout, size, deadline)
            except (OSError, EOFError, TimeoutError) as exc:
                self._stop()
                reason = "took too long" if isinstance(exc, TimeoutError) else "stopped"
                raise CompileFailed(f"protoc {reason} on this schema") from None
        if answer[:1] == b"D":
            return answer[1:]
        raise CompileFailed(answer[1:].decode("utf-8", "replace"))

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        return self._process

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None


class _Deadline:
    """When the worker `pid` has spent `cpu_seconds` of CPU since now, or `wall_seconds`
    have passed. Where /proc cannot say (not Linux), the CPU budget is counted on the clock."""

    # How often the worker's CPU time is read while its answer is awaited.
    CHECK_EVERY = 0.25

    def __init__(self, pid: int, cpu_seconds: float, wall_seconds: float) -> None:
        self._stat = f"/proc/{pid}/stat"
        self._started = time.monotonic()
        self._cpu_at = _cpu_seconds(self._stat)
        self._cpu_seconds = cpu_seconds
        self._wall_at = self._started + (wall_seconds if self._cpu_at is not None else cpu_seconds)

    def passed(self) -> bool:
        if time.monotonic() >= self._wall_at:
            return True
        if self._cpu_at is None:
            return False
        used = _cpu_seconds(self._stat)
        return used is not None and used - self._cpu_at >= self._cpu_seconds

    def next_wait(self) -> float:
        """Seconds to wait for the answer before looking at the budget again."""
        return max(0.0, min(self.CHECK_EVERY, self._wall_at - time.monotonic()))


def _cpu_seconds(stat_path: str) -> float | None:
    """User and system CPU a process has used, from /proc/PID/stat (None: cannot say)."""
    try:
        with open(stat_path, "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _read(stream: IO[bytes], size: int, deadline: _Deadline) -> bytes:
    found = bytearray()
    descriptor = stream.fileno()
    # poll, not select: a broker holding over 1,024 descriptors (connections, segments)
    # gets pipe numbers select() cannot wait on.
    waiting = select.poll()
    waiting.register(descriptor, select.POLLIN)
    while len(found) < size:
        if not waiting.poll(deadline.next_wait() * 1000):
            if deadline.passed():
                raise TimeoutError
            continue
        chunk = os.read(descriptor, size - len(found))
        if not chunk:
            raise EOFError
        found += chunk
    return bytes(found)


# --- the worker ----------------------------------------------------------------------------

def _compile(main: str, files: list[list[str]]) -> bytes:
    import grpc_tools
    from grpc_tools import _protoc_compiler

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="ottla-proto-") as folder:
        for name, text in [(MAIN_FILE, main), *files]:
            path = os.path.join(folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
        include = [folder.encode(), well_known.encode()]
        out_path = os.path.join(folder, "out.pb")
        status = _protoc_compiler.run_main([b"protoc", b"-I" + include[0], b"-I" + include[1],
                                            b"--include_imports", b"--descriptor_set_out=" + out_path.encode(),
                                            MAIN_FILE.encode()])
        if status != 0:
            # run_main only prints a refusal's messages; get_protos raises them, but it also
            # generates and runs the Python module of every file, several times protoc's
            # own work on a large schema: so it runs only for a schema already refused.
            try:
                _protoc_compiler.get_protos(MAIN_FILE.encode(), include)
            except _protoc_compiler.ProtocErrors as exc:
                lines = [line for line in str(exc).splitlines() if line.strip()]
                raise CompileFailed("; ".join(lines[:5]) + ("; ..." if len(lines) > 5 else "")) from None
            raise CompileFailed("protoc refused it")
        with open(out_path, "rb") as source:
            return source.read()


def _serve() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # whatever protoc prints stays off the frames
    while True:
        header = requests.read(4)
        if len(header) < 4:
            return
        request = json.loads(requests.read(int.from_bytes(header, "big")))
        try:
            answer = b"D" + _compile(request["main"], request["files"])
        except CompileFailed as exc:
            answer = b"E" + str(exc).encode("utf-8", "replace")
        except Exception as exc:  # an odd request (a name the file system refuses...) is still only that request
            answer = b"E" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
        answers.write(len(answer).to_bytes(4, "big") + answer)
        answers.flush()


if __name__ == "__main__":
    _serve()
