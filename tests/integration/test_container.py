"""docker/Dockerfile, proven without a Docker engine (none runs where these tests run).

The test reads the Dockerfile and performs its steps on this machine: the build
context is copied as `COPY . /src` would copy it (through Dockerfile.dockerignore),
installed into a fresh virtual environment with the Dockerfile's own `RUN pip install`
command, then the ENTRYPOINT and CMD run with the image's ENV, the way `docker run -p`
would run them (only the published ports and the volume's host path differ). The
HEALTHCHECK command must pass, and confluent-kafka must produce and consume through the
advertised listener. What cannot run without an engine (the base image, `useradd`) is
checked by reading: a non-root USER, the data directory as a VOLUME, port 9092 exposed.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from ottla.tools.ready_lines import READY_PREFIX
from tests.clients import idempotent_producer, produce_all, read_all

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def env_of(args: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(args))


def copy_context(destination: Path) -> None:
    """The build context as `COPY . /src` sees it: the repository minus the patterns of
    Dockerfile.dockerignore (`**/name` at any depth, others from the root)."""
    patterns = [p.strip() for p in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]

    def ignored(directory: str, names: list[str]) -> set[str]:
        relative = Path(directory).relative_to(ROOT)
        skip = set()
        for name in names:
            path = str(relative / name) if str(relative) != "." else name
            for pattern in patterns:
                if pattern.startswith("**/") and fnmatch.fnmatch(name, pattern[3:]):
                    skip.add(name)
                elif fnmatch.fnmatch(path, pattern):
                    skip.add(name)
        return skip

    shutil.copytree(ROOT, destination, ignore=ignored)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_image_steps_install_start_pass_the_healthcheck_and_serve_clients(tmp_path, topic_name):
    steps = instructions(DOCKER / "Dockerfile")
    by_keyword: dict[str, list[str]] = {}
    for keyword, args in steps:
        by_keyword.setdefault(keyword, []).append(args)

    # What needs an engine, read rather than run.
    assert by_keyword["FROM"][0].startswith("python:3.")
    assert by_keyword["USER"][-1] not in ("root", "0")
    image_env: dict[str, str] = {}
    for args in by_keyword["ENV"]:
        image_env.update(env_of(args))
    assert json.loads(by_keyword["VOLUME"][0]) == [image_env["OTTLA_LOG_DIRS"]]
    assert "9092" in by_keyword["EXPOSE"][0].split()
    assert ". /src" in by_keyword["COPY"]
    # The build stage has a C compiler (this machine has one too); the image gets the wheel.
    assert any("gcc" in args.split() for args in by_keyword["RUN"] if args.startswith("apt-get"))
    assert "--from=build /wheels /wheels" in by_keyword["COPY"]

    # RUN pip wheel ... /src, from the build context; then RUN pip install /wheels/*.whl
    # into a fresh virtual environment.
    context = tmp_path / "src"
    copy_context(context)
    wheels = tmp_path / "wheels"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    build = next(args for args in by_keyword["RUN"] if args.startswith("pip wheel"))
    build_argv = [{"/src": str(context), "/wheels": str(wheels)}.get(a, a) for a in shlex.split(build)]
    built = subprocess.run([str(venv / "bin" / "python"), "-m", *build_argv], capture_output=True, text=True,
                           timeout=480, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    install = next(args for args in by_keyword["RUN"] if args.startswith("pip install"))
    install_argv = shlex.split(install.split("&&")[0])
    assert install_argv[-1] == "/wheels/*.whl"
    pip_argv = [str(venv / "bin" / "python"), "-m", *install_argv[:-1], *map(str, wheels.glob("*.whl"))]
    installed = subprocess.run(pip_argv, capture_output=True, text=True, timeout=480, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # The image runs the compiled request path and record walk: its build stage has gcc.
    # This machine builds the same wheel only if it has a C compiler too; without one the
    # wheel falls back to Python, which the broker's ready line must then say.
    has_compiler = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is not None
    compiled = subprocess.run([str(venv / "bin" / "python"), "-c", "import ottla.protocol._codec, "
                               "ottla.protocol._records"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (compiled.returncode == 0) == has_compiler, compiled.stderr

    # docker run -p PORT:9092 -p ADMIN:9644 -v DATA:/var/lib/ottla/data: the image's ENV,
    # with the published ports and the volume's host path in place of the container's.
    port, admin_port = free_port(), free_port()
    data = tmp_path / "data"
    data.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for key, value in image_env.items():
        env[key] = value.replace(":9092", f":{port}").replace(image_env["OTTLA_LOG_DIRS"], str(data))
    env["OTTLA_ADMIN_PORT"] = str(admin_port)
    command = json.loads(by_keyword["ENTRYPOINT"][-1]) + json.loads(by_keyword["CMD"][-1])
    log_path = tmp_path / "broker.log"
    with open(log_path, "w") as log:
        broker = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        bootstrap = ""
        deadline = time.monotonic() + 60
        while not bootstrap and time.monotonic() < deadline:
            line = broker.stdout.readline()
            if not line and broker.poll() is not None:
                break
            if line.startswith(READY_PREFIX):
                bootstrap = line[len(READY_PREFIX):].strip()
        assert bootstrap == f"localhost:{port}", log_path.read_text()

        healthcheck = by_keyword["HEALTHCHECK"][0].split(" CMD ", 1)[1]
        check = subprocess.run(json.loads(healthcheck), env=env, timeout=30, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr

        producer = idempotent_producer(bootstrap)
        produce_all(producer, [(topic_name, 0, b"k%d" % i, b"v%d" % i) for i in range(10)])
        got = read_all(bootstrap, topic_name, [0], isolation="read_committed")
        assert got[0] == [b"v%d" % i for i in range(10)]
        assert any(data.iterdir()), "partitions belong in the volume"
    finally:
        broker.send_signal(signal.SIGTERM)
        code = broker.wait(60)
    assert code == 0, log_path.read_text()
    assert "stopped" in log_path.read_text()
    assert f"request_path={'compiled' if has_compiler else 'python'}" in log_path.read_text()
    assert os.path.exists(data / "producer-id-block")
