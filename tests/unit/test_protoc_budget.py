"""The protoc worker's budget is its own CPU time, not the clock's (schema_registry/protoc.py):
a schema must not be refused because the machine is busy with other work. These tests
watch real processes: one that sleeps and one that spins."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ottla.schema_registry.protoc import _cpu_seconds, _Deadline


@contextmanager
def _process(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A Python process running `code`, killed when the test is done with it."""
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_worker_that_waits_spends_none_of_its_budget() -> None:
    """Break-and-see-it-fail: with passed() counting the clock against cpu_seconds, this
    fails (the sleeping worker's 0.3 s of CPU budget is gone after 0.3 s of sleep)."""
    with _process("import time; time.sleep(30)") as sleeper:
        time.sleep(0.5)  # its interpreter's start-up is spent before the budget is set
        deadline = _Deadline(sleeper.pid, cpu_seconds=0.3, wall_seconds=60)
        time.sleep(1.0)
        assert not deadline.passed()


def test_a_worker_that_spins_spends_it_and_is_given_up() -> None:
    with _process("while True: pass") as spinner:
        deadline = _Deadline(spinner.pid, cpu_seconds=0.3, wall_seconds=60)
        started = time.monotonic()
        while not deadline.passed():
            assert time.monotonic() - started < 60, "0.3 s of CPU never counted in a minute"
            time.sleep(deadline.next_wait())
        used = _cpu_seconds(f"/proc/{spinner.pid}/stat")
        assert used is not None and used >= 0.3


def test_a_worker_silent_past_the_clocks_limit_is_given_up() -> None:
    with _process("import time; time.sleep(30)") as sleeper:
        deadline = _Deadline(sleeper.pid, cpu_seconds=10, wall_seconds=0.2)
        time.sleep(0.3)
        assert deadline.passed() and deadline.next_wait() == 0.0
