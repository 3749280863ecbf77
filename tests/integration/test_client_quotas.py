"""Client quotas over the wire: AlterClientQuotas and DescribeClientQuotas as Kafka
answers them, kept over a restart, and byte-rate quotas enforced the KIP-219 way: the
answer carries throttle_time_ms at once and the connection's next request waits it out
(issue 14 point 2)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic
from tests.restarts import RESTARTS, restart
from tests.wire import WireClient, request

PRODUCE, FETCH, API_VERSIONS, DESCRIBE_QUOTAS, ALTER_QUOTAS = 0, 1, 18, 48, 49
CLIENT_ID = "wire-test"  # what tests.wire's client calls itself


def _alter(client: WireClient, entity: list[tuple[str, str | None]], key: str, value: float,
           remove: bool = False, validate_only: bool = False):  # type: ignore[no-untyped-def]
    return client.call(request(ALTER_QUOTAS, 1, validate_only=validate_only, entries=[{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [{"key": key, "value": value, "remove": remove}]}])).entries[0]


def _describe(client: WireClient, components: list[tuple[str, int, str | None]], strict: bool = False):  # type: ignore[no-untyped-def]
    answer = client.call(request(DESCRIBE_QUOTAS, 1, strict=strict, components=[
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]))
    assert answer.error_code == ErrorCode.none, answer
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in answer.entries}


def _produce(client: WireClient, topic: str, size: int):  # type: ignore[no-untyped-def]
    batch = build_batch([encode_record(None, b"q" * size)], timestamp=int(time.time() * 1000))
    return client.call(request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))


@pytest.mark.parametrize("how", RESTARTS)
def test_quotas_are_set_described_refused_and_kept_over_a_restart(fresh_broker, how):
    broker = fresh_broker()
    with WireClient(broker.bootstrap) as client:
        assert _alter(client, [("user", "alice")], "producer_byte_rate", 1_048_576).error_code == ErrorCode.none
        assert _alter(client, [("client-id", None)], "consumer_byte_rate", 2_097_152).error_code == ErrorCode.none
        assert _alter(client, [("ip", "10.1.2.3")], "connection_creation_rate", 5).error_code == ErrorCode.none
        refused = _alter(client, [("user", "alice")], "producer_byte_rate", 1.5)
        assert refused.error_code == ErrorCode.invalid_request and "whole number" in refused.error_message
        assert _alter(client, [("user", "bob")], "bogus_rate", 1).error_code == ErrorCode.invalid_request
        assert _alter(client, [("user", "carol")], "producer_byte_rate", 5, validate_only=True).error_code == 0
        assert _describe(client, [("user", 2, None)]) == {(("user", "alice"),): {"producer_byte_rate": 1_048_576.0}}
        bad = client.call(request(DESCRIBE_QUOTAS, 1, strict=False, components=[
            {"entity_type": "user", "match_type": 0, "match": None}]))
        assert bad.error_code == ErrorCode.invalid_request
    restart(broker, how)
    with WireClient(broker.bootstrap) as client:
        assert _describe(client, []) == {
            (("client-id", None),): {"consumer_byte_rate": 2_097_152.0},
            (("ip", "10.1.2.3"),): {"connection_creation_rate": 5.0},
            (("user", "alice"),): {"producer_byte_rate": 1_048_576.0},
        }
        assert _alter(client, [("user", "alice")], "producer_byte_rate", 0, remove=True).error_code == 0
        assert (("user", "alice"),) not in _describe(client, [])


def test_a_producer_over_its_quota_is_answered_at_once_then_made_to_wait(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap, timeout=30) as client:
        # 600 KB measured over the 10 s window: 60 KB/s, 1.2 x a quota of 50 KB/s.
        assert _alter(client, [("client-id", CLIENT_ID)], "producer_byte_rate", 50_000).error_code == 0
        answer = _produce(client, topic_name, 600_000)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none  # written all the same
        throttle_ms = answer.throttle_time.total_seconds() * 1000
        assert 1500 <= throttle_ms <= 2500  # (60 - 50) / 50 x 10 s = 2 s
        answered = time.monotonic()
        # The next request on this connection is served only once the time is over.
        client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
        assert time.monotonic() - answered >= throttle_ms / 1000 * 0.9
        # Another client is not held back.
        with WireClient(broker.bootstrap) as other:
            started = time.monotonic()
            other.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
            assert time.monotonic() - started < throttle_ms / 1000 / 2


def test_a_consumer_over_its_quota_gets_an_empty_answer_and_its_fetches_fit_the_window(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap, timeout=30) as client:
        for _ in range(3):
            _produce(client, topic_name, 300_000)
        assert _alter(client, [("client-id", CLIENT_ID)], "consumer_byte_rate", 40_000).error_code == 0

        def fetch(offset: int):  # type: ignore[no-untyped-def]
            return client.call(request(FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=50 << 20,
                                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                           {"topic": topic_name, "partitions": [
                                               {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 50 << 20,
                                                "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                                "log_start_offset": -1}]}],
                                       forgotten_topics_data=[], rack_id=""))

        # 400 KB fit the quota's window (40 KB/s x 10 s): one 300 KB batch, not all three.
        first = fetch(0)
        records = first.responses[0].partitions[0].records
        assert first.throttle_time.total_seconds() == 0 and 300_000 < len(records) < 400_000
        # The next batch takes the rate over: answered empty, with the time to wait.
        second = fetch(1)
        assert second.throttle_time.total_seconds() > 0 and not second.responses


def test_librdkafka_reports_the_throttle(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        assert _alter(client, [("client-id", "quota-producer")], "producer_byte_rate", 20_000).error_code == 0
    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-producer", "linger.ms": 5,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    for _ in range(300):
        producer.produce(topic_name, b"t" * 1000, partition=0)
    assert producer.flush(30) == 0
    producer.poll(1)
    assert throttles and max(throttles) > 0

