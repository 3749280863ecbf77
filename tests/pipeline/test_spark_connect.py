"""The connector from a Spark Connect client: PySpark 4.3's pip package ships the
Connect server (jars/spark-connect_2.13-4.3.0.jar), and a Python data source
registered by a Connect client is shipped (pickled) to the server, whose Python
workers run it. The server runs `local[2]` (the cluster's cores belong to the other
tests' sessions); its Python workers are this venv's interpreter (PYSPARK_PYTHON)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.clients import create_topic, read_all
from tests.pipeline.exactly_once import PROJECT_ROOT
from tests.pipeline.spark_cluster import SPARK_HOME, free_port

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@pytest.fixture
def connect_server(tmp_path):
    port = free_port()
    log = tmp_path / "connect-server.log"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_CONF_DIR": str(tmp_path)}
    with open(log, "w") as out:
        # spark-submit runs the Connect server's class straight from Spark's jars, as
        # sbin/start-connect-server.sh does (without its daemon wrapper).
        server = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS, "--master", "local[2]",
             "--driver-memory", "512m", "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
             "--conf", "spark.sql.shuffle.partitions=2"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "the Connect server did not listen"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)


def test_python_data_source_from_a_spark_connect_client(connect_server, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    create_topic(broker.bootstrap, f"{topic_name}-copy", partitions=2)
    client = subprocess.run(
        [sys.executable, "-m", "tests.pipeline.connect_client", connect_server, broker.bootstrap, topic_name,
         str(tmp_path / "checkpoint"), "20"],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)
    assert client.returncode == 0, client.stderr[-5000:]
    answer = json.loads(client.stdout.strip().splitlines()[-1])
    # The session really was a Connect client, and the read went through the server.
    assert answer["session"] == "pyspark.sql.connect.session"
    values = sorted(f"connect-{i}" for i in range(20))
    assert answer["read"] == values
    copied = read_all(broker.bootstrap, f"{topic_name}-copy", [0, 1], isolation="read_committed")
    assert sorted(v.decode() for p in copied.values() for v in p) == values
