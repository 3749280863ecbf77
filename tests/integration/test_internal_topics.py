"""No client can truncate, delete, reconfigure, create or append to the coordinators'
topics (issue 12 point 2): each attempt gets Kafka's error, and after a kill -9 and a
restart every transactional id, the open transaction and the group's offsets are still
there."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidTopicError
from kafka.structs import TopicPartition as KafkaPythonTopicPartition

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import commit_offset, create_topic, transactional_producer
from tests.wire import WireClient, request

TXN_STATE, OFFSETS = "__transaction_state", "__consumer_offsets"
PARTITIONS = {TXN_STATE: 50, OFFSETS: 50}  # Kafka's defaults, which the broker uses


def _error_code(future) -> int:
    """The Kafka error code a confluent-kafka admin future failed with."""
    with pytest.raises(KafkaException) as failed:
        future.result(30)
    return failed.value.args[0].code()


def _coordinators_state(bootstrap: str, txn_ids: list[str], group: str, topic: str) -> tuple[dict, dict, dict]:
    """(transaction state by id, the group's committed offsets, partition count of each
    internal topic), as clients see them."""
    with WireClient(bootstrap) as client:
        described = client.call(request(65, 0, transactional_ids=txn_ids))
    states = {s.transactional_id: s.transaction_state for s in described.transaction_states}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, 0)], timeout=30)}
    finally:
        consumer.close()
    metadata = admin.list_topics(timeout=30)
    counts = {name: len(metadata.topics[name].partitions) for name in PARTITIONS}
    return states, committed, counts


# AlterConfigs (the whole set) is deprecated in the client, but older tools still send it.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_no_client_can_wipe_the_coordinators_state_and_a_restart_keeps_it(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    committed_id, open_id, group = f"done-{topic_name}", f"open-{topic_name}", f"group-{topic_name}"
    producer = transactional_producer(broker.bootstrap, committed_id)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"committed", partition=0)
    producer.commit_transaction(30)
    left_open = transactional_producer(broker.bootstrap, open_id, **{"transaction.timeout.ms": 600000})
    left_open.begin_transaction()
    left_open.produce(topic_name, value=b"open", partition=0)
    left_open.flush(30)
    commit_offset(broker.bootstrap, group, topic_name, 0, 1)
    before = _coordinators_state(broker.bootstrap, [committed_id, open_id], group, topic_name)
    assert before == ({committed_id: "CompleteCommit", open_id: "Ongoing"}, {0: 1}, PARTITIONS)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # DeleteRecords up to the high watermark of every partition of both topics.
    truncations = admin.delete_records([TopicPartition(name, p, -1) for name, n in PARTITIONS.items()
                                        for p in range(n)], request_timeout=30)
    assert {_error_code(f) for f in truncations.values()} == {ErrorCode.invalid_topic_exception}
    deletions = admin.delete_topics([TXN_STATE, OFFSETS], operation_timeout=30)
    assert {name: _error_code(f) for name, f in deletions.items()} == {
        TXN_STATE: ErrorCode.invalid_topic_exception, OFFSETS: ErrorCode.invalid_topic_exception}
    # Settings under which retention would delete the state: refused, whole or incremental.
    doomed = {"cleanup.policy": "delete", "retention.ms": "1"}
    replaced = admin.alter_configs([ConfigResource(ResourceType.TOPIC, name, set_config=doomed)
                                    for name in PARTITIONS])
    assert {_error_code(f) for f in replaced.values()} == {ErrorCode.policy_violation}
    changed = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in doomed.items()
    ]) for name in PARTITIONS])
    assert {_error_code(f) for f in changed.values()} == {ErrorCode.policy_violation}

    # The same through kafka-python's admin client.
    python_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        with pytest.raises(InvalidTopicError):
            python_admin.delete_topics([TXN_STATE])
        with pytest.raises(InvalidTopicError):
            python_admin.delete_records({KafkaPythonTopicPartition(OFFSETS, 0): -1})
    finally:
        python_admin.close()

    # A Produce straight into the transaction log, as only its coordinator may write it.
    forged = build_batch([encode_record(b"\x00\x00\x00\x01x", None)], timestamp=int(time.time() * 1000))
    with WireClient(broker.bootstrap) as client:
        response = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
            {"name": name, "partition_data": [{"index": 0, "records": forged}]} for name in PARTITIONS]))
    answers = {t.name: t.partition_responses[0] for t in response.responses}
    assert {name: a.error_code for name, a in answers.items()} == {
        TXN_STATE: ErrorCode.invalid_topic_exception, OFFSETS: ErrorCode.invalid_topic_exception}
    assert answers[TXN_STATE].error_message == f"Cannot append to internal topic {TXN_STATE}"

    assert _coordinators_state(broker.bootstrap, [committed_id, open_id], group, topic_name) == before
    broker.kill()
    broker.start()
    assert _coordinators_state(broker.bootstrap, [committed_id, open_id], group, topic_name) == before
    assert "records not deleted" in broker.log() and "topic not deleted" in broker.log()


def test_clients_cannot_create_the_offsets_topic_the_group_coordinator_creates(fresh_broker, topic_name):
    broker = fresh_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # With one partition and deletion, it would lose offsets and break the group's
    # partition mapping (Kafka's hash of the group id modulo 50).
    created = admin.create_topics([NewTopic(OFFSETS, 1, 1, config={"cleanup.policy": "delete"})])
    assert _error_code(created[OFFSETS]) == ErrorCode.invalid_request
    # Nor does asking for its metadata auto-create it with the default partition count.
    with WireClient(broker.bootstrap) as client:
        answer = client.call(request(3, 9, topics=[{"name": OFFSETS}], allow_auto_topic_creation=True,
                                     include_cluster_authorized_operations=False,
                                     include_topic_authorized_operations=False))
    assert answer.topics[0].error_code == ErrorCode.unknown_topic_or_partition

    create_topic(broker.bootstrap, topic_name, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic_name}",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 7)], asynchronous=False)
    assert consumer.committed([TopicPartition(topic_name, 0)], timeout=30)[0].offset == 7
    consumer.close()
    metadata = admin.list_topics(timeout=30)
    assert len(metadata.topics[OFFSETS].partitions) == PARTITIONS[OFFSETS]


def test_the_transaction_state_topic_is_created_at_the_first_transactional_request(fresh_broker, topic_name):
    """As Kafka: an empty start has no __transaction_state (its 50 partitions were a good
    part of an empty broker's start), the first FindCoordinator of a transactional id
    creates it, and it is there after a restart."""
    broker = fresh_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert TXN_STATE not in admin.list_topics(timeout=30).topics
    assert not any(name.startswith(f"{TXN_STATE}-") for name in os.listdir(broker.data_dir))
    with WireClient(broker.bootstrap) as client:
        found = client.call(request(10, 4, key_type=1, coordinator_keys=[f"txn-{topic_name}"])).coordinators[0]
    assert found.error_code == ErrorCode.none
    assert len(admin.list_topics(timeout=30).topics[TXN_STATE].partitions) == PARTITIONS[TXN_STATE]
    create_topic(broker.bootstrap, topic_name, 1)
    producer = transactional_producer(broker.bootstrap, f"txn-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"committed", partition=0)
    producer.commit_transaction(30)
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        described = client.call(request(65, 0, transactional_ids=[f"txn-{topic_name}"])).transaction_states[0]
    assert described.transaction_state == "CompleteCommit"
