"""The admin endpoint through a real broker: /healthz, /metrics after real traffic, and
each kind of fault met by a real client (confluent-kafka): a lost acknowledgement, an
injected error on one partition and on EndTxn, a delay, a closed connection."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Consumer

from ottla.testing import BrokerProcess
from ottla.tools.client import Cluster
from tests.clients import create_topic, idempotent_producer, produce_all, read_all, transactional_producer


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory: pytest.TempPathFactory):
    process = BrokerProcess(str(tmp_path_factory.mktemp("admin-broker")), {"admin.port": "0"}).start()
    yield process
    process.cleanup()


@pytest.fixture
def admin(admin_broker: BrokerProcess):
    endpoint = admin_broker.admin
    yield endpoint
    endpoint.clear_faults()


def _values(messages: dict[int, list[bytes]]) -> list[bytes]:
    return [value for partition in sorted(messages) for value in messages[partition]]


def test_healthz_and_metrics_in_prometheus_format(admin_broker, admin, topic_name):
    with urllib.request.urlopen(admin.url + "/healthz", timeout=5) as response:
        assert response.status == 200 and response.read() == b"ok\n"
    create_topic(admin_broker.bootstrap, topic_name, partitions=2)
    producer = idempotent_producer(admin_broker.bootstrap)
    produce_all(producer, [(topic_name, i % 2, None, b"m%d" % i) for i in range(10)])
    with urllib.request.urlopen(admin.url + "/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    assert "# TYPE ottla_request_duration_seconds histogram" in text
    assert admin.metric("ottla_requests_total", api="Produce") >= 2
    assert admin.metric("ottla_request_duration_seconds_count", api="Produce") >= 2
    assert admin.metric("ottla_request_duration_seconds_bucket", api="Produce", le="+Inf") >= 2
    assert admin.metric("ottla_log_end_offset", topic=topic_name, partition=0) == 5
    assert admin.metric("ottla_last_stable_offset", topic=topic_name, partition=1) == 5
    assert admin.metric("ottla_bytes_in_total") > 0 and admin.metric("ottla_bytes_out_total") > 0
    assert admin.metric("ottla_partitions") >= 2
    assert admin.metric("ottla_producer_ids") >= 1
    assert admin.metric("ottla_connections") >= 1
    assert admin.metric("ottla_connections_total") >= 1


def test_metrics_count_error_codes_open_transactions_and_groups(admin_broker, admin, topic_name):
    create_topic(admin_broker.bootstrap, topic_name)
    # A Metadata request for a topic that does not exist, without creating it.
    with Cluster(admin_broker.bootstrap) as cluster:
        cluster.metadata([f"{topic_name}-missing"])
    assert admin.metric("ottla_request_errors_total", api="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION") >= 1

    producer = transactional_producer(admin_broker.bootstrap, f"txn-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, b"open", partition=0)
    producer.flush(10)
    assert admin.metric("ottla_open_transactions") >= 1
    assert admin.metric("ottla_last_stable_offset", topic=topic_name, partition=0) == 0
    assert admin.metric("ottla_log_end_offset", topic=topic_name, partition=0) == 1
    producer.commit_transaction(10)
    assert admin.metric("ottla_last_stable_offset", topic=topic_name, partition=0) == 2  # record + marker

    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": f"g-{topic_name}",
                         "session.timeout.ms": 6000, "log_level": 3})
    consumer.subscribe([topic_name])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not consumer.assignment():
        consumer.poll(0.2)
    try:
        assert admin.metric("ottla_consumer_groups", state="Stable") >= 1
    finally:
        consumer.close()


def test_a_dropped_acknowledgement_is_retried_and_deduplicated(admin_broker, admin, topic_name):
    """Seed 002's missing ACK: the batch is appended, its response never sent; the
    idempotent producer times the request out, sends the same sequence again, and the
    broker answers it from its sequence cache instead of appending it twice."""
    create_topic(admin_broker.bootstrap, topic_name)
    fault = admin.add_fault(kind="drop", api="Produce", topic=topic_name, count=1)
    assert fault["kind"] == "drop" and fault["remaining"] == 1
    # librdkafka gives up on a Produce request after socket.timeout.ms (its
    # request.timeout.ms is the broker's ack timeout), then retries the same sequence.
    producer = idempotent_producer(admin_broker.bootstrap, **{"socket.timeout.ms": 2000, "linger.ms": 0,
                                                                "message.timeout.ms": 60000, "log_level": 3})
    started = time.monotonic()
    produce_all(producer, [(topic_name, 0, None, b"exactly-once")])
    assert time.monotonic() - started >= 1.5, "the first acknowledgement should have been lost"
    produce_all(producer, [(topic_name, 0, None, b"m%d" % i) for i in range(20)])
    assert _values(read_all(admin_broker.bootstrap, topic_name, [0], isolation="read_uncommitted")) == \
        [b"exactly-once"] + [b"m%d" % i for i in range(20)]
    assert admin.faults() == []
    assert admin.metric("ottla_faults_injected_total", kind="drop", api="Produce") == 1
    assert "fault injected" in admin_broker.log() and "kind=drop" in admin_broker.log()


def test_a_transactional_producer_recovers_from_a_retriable_error_on_end_txn(admin_broker, admin, topic_name):
    create_topic(admin_broker.bootstrap, topic_name)
    producer = transactional_producer(admin_broker.bootstrap, f"eos-{topic_name}")
    admin.add_fault(kind="error", api="EndTxn", error="COORDINATOR_LOAD_IN_PROGRESS", count=2)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic_name, b"t%d" % i, partition=0)
    producer.commit_transaction(30)
    assert admin.metric("ottla_faults_injected_total", kind="error", api="EndTxn") == 2
    assert admin.metric("ottla_request_errors_total", api="EndTxn", error="COORDINATOR_LOAD_IN_PROGRESS") == 2
    # The next transaction, after the injected errors are spent, commits at once.
    producer.begin_transaction()
    producer.produce(topic_name, b"t5", partition=0)
    producer.commit_transaction(30)
    assert _values(read_all(admin_broker.bootstrap, topic_name, [0], isolation="read_committed")) == \
        [b"t%d" % i for i in range(6)]


def test_an_error_aimed_at_one_partition_leaves_the_others_alone(admin_broker, admin, topic_name):
    create_topic(admin_broker.bootstrap, topic_name, partitions=2)
    admin.add_fault(kind="error", api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic_name, partition=1,
                    count=2)
    producer = idempotent_producer(admin_broker.bootstrap, **{"linger.ms": 0, "log_level": 3})
    produce_all(producer, [(topic_name, 0, None, b"p0")])
    assert admin.faults()[0]["remaining"] == 2, "a request for partition 0 must not use the fault up"
    produce_all(producer, [(topic_name, 1, None, b"p1")])
    assert admin.faults() == []
    got = read_all(admin_broker.bootstrap, topic_name, [0, 1], isolation="read_uncommitted")
    assert got == {0: [b"p0"], 1: [b"p1"]}
    assert admin.metric("ottla_request_errors_total", api="Produce", error="NOT_LEADER_OR_FOLLOWER") >= 2


def test_a_delayed_response_arrives_late(admin_broker, admin, topic_name):
    create_topic(admin_broker.bootstrap, topic_name)
    producer = idempotent_producer(admin_broker.bootstrap, **{"linger.ms": 0})
    produce_all(producer, [(topic_name, 0, None, b"warm-up")])
    admin.add_fault(kind="delay", api="Produce", delay_ms=1500)
    started = time.monotonic()
    produce_all(producer, [(topic_name, 0, None, b"late")])
    assert time.monotonic() - started >= 1.4
    assert admin.metric("ottla_request_duration_seconds_bucket", api="Produce", le="1.0") < \
        admin.metric("ottla_request_duration_seconds_bucket", api="Produce", le="2.5")


def test_a_connection_closed_after_the_append_is_retried_without_duplicate(admin_broker, admin, topic_name):
    create_topic(admin_broker.bootstrap, topic_name)
    producer = idempotent_producer(admin_broker.bootstrap, **{"linger.ms": 0, "log_level": 3})
    produce_all(producer, [(topic_name, 0, None, b"before")])
    admin.add_fault(kind="close", api="Produce", count=1)
    produce_all(producer, [(topic_name, 0, None, b"after-reconnect")])
    assert _values(read_all(admin_broker.bootstrap, topic_name, [0], isolation="read_uncommitted")) == \
        [b"before", b"after-reconnect"]
    assert admin.metric("ottla_faults_injected_total", kind="close", api="Produce") == 1


def test_bad_fault_specs_are_refused_with_the_reason(admin):
    with pytest.raises(ValueError, match="400.*kind must be one of"):
        admin.add_fault(kind="explode")
    with pytest.raises(ValueError, match="400.*unknown error code"):
        admin.add_fault(kind="error", api="EndTxn", error="NOT_AN_ERROR")
    with pytest.raises(ValueError, match="400.*cannot be aimed at a topic"):
        admin.add_fault(kind="error", api="EndTxn", error="NOT_COORDINATOR", topic="t")
    with pytest.raises(ValueError, match="400.*delay_ms"):
        admin.add_fault(kind="delay", api="Fetch")
    assert admin.faults() == []
    # A fault can be removed before it fires.
    fault = admin.add_fault(kind="delay", api="Fetch", delay_ms=10, count=3)
    request = urllib.request.Request(f"{admin.url}/faults/{fault['id']}", method="DELETE")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
    assert admin.faults() == []


def test_an_error_fault_reaches_the_client_when_it_is_not_retriable(admin_broker, admin, topic_name):
    create_topic(admin_broker.bootstrap, topic_name)
    admin.add_fault(kind="error", api="Produce", error="TOPIC_AUTHORIZATION_FAILED", topic=topic_name)
    producer = idempotent_producer(admin_broker.bootstrap, **{"linger.ms": 0, "log_level": 0})
    errors = []
    producer.produce(topic_name, b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    assert errors and errors[0] is not None and "AUTHORIZATION" in errors[0].name()
