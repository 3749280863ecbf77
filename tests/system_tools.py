"""The programs the tests run that pip does not install, each with the Debian package
that provides it: one list, read by the Makefile and by the tests.

`make test` (and `make kafka`, `make conformance`) first run
`python3 tests/system_tools.py install NAME...`, which installs the packages of the
missing programs with apt-get when run as root, and otherwise stops naming them. A test
that needs a program asks `require(NAME)`: a missing one fails the test with the package
to install, never skips it (a skipped test would hide a missing piece).

Only the standard library at import: the Makefile runs this before any virtual
environment exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

# name: (the program, or an absolute path where one build is required; the Debian package).
PROGRAMS: dict[str, tuple[tuple[str, ...], str]] = {
    # kcat: Debian's librdkafka client (kafkacat on older releases).
    "kcat": (("kcat", "kafkacat"), "kcat"),
    # The web console's browser tests drive Debian's chromium with Playwright.
    "chromium": (("/usr/bin/chromium",), "chromium"),
    # PySpark's JVM, Apache Kafka (the reference), and the source launcher of tests/java:
    # Debian's default JDK (17 on bookworm, 21 on trixie, which has no 17), Java 17 or newer.
    "javac": (("javac",), "default-jdk-headless"),
    "java": (("java",), "default-jdk-headless"),
    # `make kafka` copies Kafka's jars (and the other JVM programs') from Maven Central.
    "mvn": (("mvn",), "maven"),
    # The kafkajs client (tests/js).
    "node": (("node",), "nodejs"),
    "npm": (("npm",), "npm"),
    # The --fsync test traces the broker's writes and fsyncs.
    "strace": (("strace",), "strace"),
}


def find(name: str) -> str | None:
    """The path of program `name`, or None if it is not installed."""
    for candidate in PROGRAMS[name][0]:
        if os.path.isabs(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
        elif (found := shutil.which(candidate)) is not None:
            return found
    return None


def missing_message(name: str) -> str:
    package = PROGRAMS[name][1]
    return (f"{name} is not installed: it comes with Debian's package {package} "
            f"(`apt-get install {package}` as root; `make test` run as root installs it)")


def require(name: str) -> str:
    """The path of program `name`; the calling test fails, naming the package, if it is missing."""
    path = find(name)
    if path is None:
        import pytest

        pytest.fail(missing_message(name), pytrace=False)
    return path


def install(names: list[str]) -> int:
    """Install the packages of the missing programs among `names` (as root, with
    apt-get); 0 when every program is there afterwards, 1 with their packages named."""
    missing = [name for name in names if find(name) is None]
    packages = sorted({PROGRAMS[name][1] for name in missing})
    if packages and os.geteuid() == 0 and shutil.which("apt-get") is not None:
        print(f"installing Debian's {' '.join(packages)} (for {' '.join(missing)})", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        missing = [name for name in missing if find(name) is None]
    for name in missing:
        print(missing_message(name), file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "install" or any(name not in PROGRAMS for name in sys.argv[2:]):
        sys.exit(f"usage: {sys.argv[0]} install {{{','.join(PROGRAMS)}}}...")
    sys.exit(install(sys.argv[2:]))
