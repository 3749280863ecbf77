"""What a client may make the broker keep (issue 40, point 8), asked with real clients:
Kafka's defaults bound neither the partitions nor the transactional ids a client may
create, and each costs the broker a directory and files, or a state kept for a week.
Ottla bounds them (max.broker.partitions, max.transactional.ids; docs/security.md) and
refuses past the bound with POLICY_VIOLATION, as a create.topic.policy refuses; the
internal topics, created by their coordinators, are never refused."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.clients import commit_offset


def _error(future) -> KafkaError | None:
    try:
        future.result(30)
    except KafkaException as exc:
        return exc.args[0]
    return None


def test_partitions_past_max_broker_partitions_are_refused(fresh_broker, topic_name):
    """max.broker.partitions=5: a topic of 3, then one of 3 is refused and one of 2 is
    not; raising the first to 4 is refused. A group commit still creates the 50
    partitions of __consumer_offsets. Before: every topic was created."""
    broker = fresh_broker(max_broker_partitions=5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _error(admin.create_topics([NewTopic(topic_name, 3)])[topic_name]) is None
    refused = _error(admin.create_topics([NewTopic(f"{topic_name}-b", 3)])[f"{topic_name}-b"])
    assert refused is not None and refused.code() == KafkaError.POLICY_VIOLATION, refused
    assert "max.broker.partitions (5)" in refused.str()
    assert _error(admin.create_topics([NewTopic(f"{topic_name}-c", 2)])[f"{topic_name}-c"]) is None
    more = _error(admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name])
    assert more is not None and more.code() == KafkaError.POLICY_VIOLATION, more
    commit_offset(broker.bootstrap, "limits-group", topic_name, 0, 1)  # __consumer_offsets: not refused
    assert f"{topic_name}-b" not in admin.list_topics(timeout=30).topics


def _init(bootstrap: str, transactional_id: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)


def test_transactional_ids_past_max_transactional_ids_are_refused(fresh_broker):
    """max.transactional.ids=2: two ids are kept (and may initialize again); a third is
    refused. Before: every id was kept, for transactional.id.expiration.ms (7 days)."""
    broker = fresh_broker(max_transactional_ids=2)
    _init(broker.bootstrap, "tx-1")
    _init(broker.bootstrap, "tx-2")
    _init(broker.bootstrap, "tx-1")  # one kept already: not a new id
    with pytest.raises(KafkaException) as refused:
        _init(broker.bootstrap, "tx-3")
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION, refused.value
