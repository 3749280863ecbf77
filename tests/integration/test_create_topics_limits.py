"""A CreateTopics asking for more partitions than a request may create is refused whole,
before anything is created (issue 12 point 6, its first half). Before, num_partitions =
1,000,000 blocked the broker 1.4 s, left 6,611 partition directories and used up its
descriptors, so that no restart could succeed."""

from __future__ import annotations

import os

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.errors import ErrorCode
from tests.clients import idempotent_producer, produce_all
from tests.wire import WireClient, request

CREATE_TOPICS = 19


def _errors(admin: AdminClient, topics: list[NewTopic]) -> dict[str, str]:
    out = {}
    for name, future in admin.create_topics(topics, operation_timeout=30).items():
        try:
            future.result(30)
            out[name] = "created"
        except KafkaException as exc:
            out[name] = f"{exc.args[0].name()}: {exc.args[0].str()}"
    return out


def test_a_request_for_a_million_partitions_creates_nothing(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = set(os.listdir(broker.data_dir))
    # The million, over the wire (confluent-kafka checks for at most 100,000).
    with WireClient(broker.bootstrap) as client:
        answer = client.call(request(CREATE_TOPICS, 7, timeout=30000, validate_only=False, topics=[
            {"name": topic_name, "num_partitions": 1_000_000, "replication_factor": 1, "assignments": [],
             "configs": []}]))
    assert answer.topics[0].error_code == ErrorCode.policy_violation
    assert answer.topics[0].error_message == "Excessively large number of partitions per request."
    errors = _errors(admin, [NewTopic(topic_name, 100_000, 1)])
    assert errors == {topic_name: "POLICY_VIOLATION: Excessively large number of partitions per request."}
    # Kafka counts the whole request: two topics of 6,000 are refused together.
    pair = [NewTopic(f"{topic_name}-a", 6000, 1), NewTopic(f"{topic_name}-b", 6000, 1)]
    assert set(_errors(admin, pair).values()) == {
        "POLICY_VIOLATION: Excessively large number of partitions per request."}
    assert set(os.listdir(broker.data_dir)) == before, "a refused request left partitions behind"
    # The broker goes on as before.
    assert _errors(admin, [NewTopic(f"{topic_name}-ok", 3, 1)]) == {f"{topic_name}-ok": "created"}
    produce_all(idempotent_producer(broker.bootstrap), [(f"{topic_name}-ok", p, None, b"v") for p in range(3)])
