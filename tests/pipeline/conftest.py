"""Spark for the pipeline tests: `local[2]`, and a standalone cluster of a master and
two one-core workers (tests/pipeline/spark_cluster.py). Brokers come from
tests/conftest.py.

A Python process holds one SparkContext at a time, so the test process keeps one
session, local or on the cluster, and switches only when a test asks for the other
kind; the cluster tests run after the local ones (see `pytest_collection_modifyitems`)
so that the switch happens once. A test asks for the cluster with
`@pytest.mark.parametrize("spark", ["local", "cluster"], indirect=True)`. A session
on the cluster takes both cores, so a test that runs a driver process of its own on
the cluster first hands the cluster back (`spark_sessions.release()`).

The cost stays visible: the closing summary of every pytest run that includes these
tests prints the time spent in them, in starting sessions and in the cluster.
"""

from __future__ import annotations

import glob
import os
import time

import pytest
from pyspark.sql import SparkSession

from ottla.pipeline.session import spark_session
from tests.pipeline.spark_cluster import APP_CONF, StandaloneCluster

# Spark's own Kafka connector, format("kafka") (`make spark-kafka` copies its jars here;
# tests/reference/spark-kafka-pom.xml lists them): the local session always has it, so
# that one session serves every test of this directory.
SPARK_KAFKA_LIBS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                ".cache", "spark-kafka", "libs")


def spark_kafka_jars() -> list[str]:
    """The connector's jars, or [] before `make spark-kafka` has copied them all."""
    if not os.path.exists(os.path.join(SPARK_KAFKA_LIBS, ".complete")):
        return []
    return sorted(glob.glob(os.path.join(SPARK_KAFKA_LIBS, "*.jar")))


def spark_kafka_conf() -> dict[str, str]:
    jars = spark_kafka_jars()
    return {"spark.jars": ",".join(jars)} if jars else {}


_cost = {"session starts": 0.0, "cluster start": 0.0, "tests": 0.0, "count": 0}


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory):
    started = time.monotonic()
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    _cost["cluster start"] = time.monotonic() - started
    yield cluster
    cluster.stop()


class SparkSessions:
    """The test process's one SparkSession, of the kind the current test wants."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.kind: str | None = None
        self.session: SparkSession | None = None

    def get(self, kind: str) -> SparkSession:
        if kind != self.kind:
            self.release()
            started = time.monotonic()
            if kind == "local":
                self.session = spark_session("ottla-pipeline-tests", "local[2]", conf=spark_kafka_conf())
            else:
                cluster: StandaloneCluster = self.request.getfixturevalue("spark_cluster")
                self.session = spark_session("ottla-pipeline-tests", cluster.master_url, conf=APP_CONF)
            self.kind = kind
            _cost["session starts"] += time.monotonic() - started
        assert self.session is not None
        return self.session

    def release(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session, self.kind = None, None


@pytest.fixture(scope="session")
def spark_sessions(request: pytest.FixtureRequest):
    sessions = SparkSessions(request)
    yield sessions
    sessions.release()


@pytest.fixture
def spark(spark_sessions: SparkSessions, request: pytest.FixtureRequest) -> SparkSession:
    """`local` unless parametrized (indirectly) with "cluster"."""
    return spark_sessions.get(getattr(request, "param", "local"))


def _wants_cluster(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return "spark_cluster" in getattr(item, "fixturenames", ()) or (
        callspec is not None and "cluster" in callspec.params.values())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The cluster's tests after everything else of this directory, in their order.
    pipeline = [i for i, item in enumerate(items) if item.nodeid.startswith("tests/pipeline/")]
    ordered = sorted((items[i] for i in pipeline), key=_wants_cluster)
    for i, item in zip(pipeline, ordered, strict=True):
        items[i] = item


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid.startswith("tests/pipeline/"):
        _cost["tests"] += report.duration
        _cost["count"] += report.when == "call"


def pytest_terminal_summary(terminalreporter) -> None:
    if _cost["count"]:
        terminalreporter.write_line(
            f"Spark pipeline tests: {_cost['count']} tests in {_cost['tests']:.1f} s, of which "
            f"{_cost['session starts']:.1f} s starting SparkSessions and {_cost['cluster start']:.1f} s "
            "starting the standalone cluster")
