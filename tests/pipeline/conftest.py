"""Spark for the pipeline tests: one SparkSession for the whole test session, since each
start costs a JVM (seconds, and hundreds of MB). Brokers come from tests/conftest.py.

The cost stays visible: the closing summary of every pytest run that includes these
tests prints the session's start time and the time spent in them.
"""

from __future__ import annotations

import time

import pytest

from ottla.pipeline.session import local_session

_cost = {"session start": 0.0, "tests": 0.0, "count": 0}


@pytest.fixture(scope="session")
def spark():
    started = time.monotonic()
    session = local_session("ottla-pipeline-tests")
    _cost["session start"] = time.monotonic() - started
    yield session
    session.stop()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid.startswith("tests/pipeline/"):
        _cost["tests"] += report.duration
        _cost["count"] += report.when == "call"


def pytest_terminal_summary(terminalreporter) -> None:
    if _cost["count"]:
        started = (f", of which {_cost['session start']:.1f} s starting the shared SparkSession"
                   if _cost["session start"] else "")
        terminalreporter.write_line(f"Spark pipeline tests: {_cost['count']} tests in {_cost['tests']:.1f} s{started}")
