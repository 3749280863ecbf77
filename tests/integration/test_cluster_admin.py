"""CreatePartitions and DescribeCluster, through the admin clients that call them
(issue 14: admin APIs the tools call)."""

from __future__ import annotations

import glob
import os

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka.admin import KafkaAdminClient

from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic, read_all
from tests.wire import WireClient, request


def test_create_partitions_adds_empty_partitions_that_take_records_and_survive_a_restart(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_partitions([NewPartitions(topic_name, 5)]).values():
        future.result(10)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 5
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for partition in range(5):
        producer.produce(topic_name, b"p%d" % partition, partition=partition)
    assert producer.flush(10) == 0
    broker.stop()
    broker.start()
    got = read_all(broker.bootstrap, topic_name, list(range(5)), isolation="read_committed")
    assert got == {p: [b"p%d" % p] for p in range(5)}


@pytest.mark.parametrize("count,code,message", [
    (1, KafkaError.INVALID_PARTITIONS, "which is higher than the requested 1"),
    (2, KafkaError.INVALID_PARTITIONS, "already has 2 partitions"),
])
def test_create_partitions_refuses_what_kafka_refuses(broker, topic_name, count, code, message):
    create_topic(broker.bootstrap, topic_name, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_partitions([NewPartitions(topic_name, count)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == code and message in refused.value.args[0].str()


def test_create_partitions_of_unknown_and_internal_topics_are_refused(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_partitions([NewPartitions(f"{topic_name}-missing", 3)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    create_topic(broker.bootstrap, topic_name, 1)  # makes sure __consumer_offsets can exist
    with WireClient(broker.bootstrap) as client:  # __transaction_state is made at the first transactional request
        client.call(request(10, 4, key_type=1, coordinator_keys=[f"txn-{topic_name}"]))
    (future,) = admin.create_partitions([NewPartitions("__transaction_state", 60)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    # The coordinators map ids to partitions by the count: it may not change.
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS, refused.value.args[0]
    # validate_only answers without changing anything.
    (future,) = admin.create_partitions([NewPartitions(topic_name, 4)], validate_only=True).values()
    future.result(10)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 1


def test_describe_cluster_names_this_broker_as_the_controller(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster().result(10)
    (node,) = cluster.nodes
    assert cluster.controller.id == node.id and cluster.cluster_id
    assert f"{node.host}:{node.port}" == broker.bootstrap
    python_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = python_admin.describe_cluster()
        assert described["controller_id"] == node.id and described["cluster_id"] == cluster.cluster_id
    finally:
        python_admin.close()


def test_describe_log_dirs_gives_each_partitions_size_on_disk(broker, topic_name):
    DESCRIBE_LOG_DIRS = 35
    create_topic(broker.bootstrap, topic_name, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(100):
        producer.produce(topic_name, b"x" * 1000, partition=1)
    assert producer.flush(10) == 0
    with WireClient(broker.bootstrap) as client:
        answer = client.call(request(DESCRIBE_LOG_DIRS, 4, topics=[{"topic": topic_name, "partitions": [0, 1]}]))
    (result,) = answer.results
    assert result.error_code == ErrorCode.none and result.log_dir == broker.data_dir
    assert 0 < result.usable_bytes <= result.total_bytes
    sizes = {p.partition_index: p.partition_size for t in result.topics for p in t.partitions}
    on_disk = sum(os.path.getsize(path)
                  for path in glob.glob(os.path.join(broker.data_dir, f"{topic_name}-1", "*.log")))
    assert sizes == {0: 0, 1: on_disk} and on_disk > 100_000


def test_offset_for_leader_epoch_ends_the_only_epoch_at_the_log_end(broker, topic_name):
    OFFSET_FOR_LEADER_EPOCH = 23
    create_topic(broker.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(7):
        producer.produce(topic_name, b"x")
    assert producer.flush(10) == 0

    def ask(leader_epoch: int, current: int = -1):  # type: ignore[no-untyped-def]
        with WireClient(broker.bootstrap) as client:
            answer = client.call(request(OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=[
                {"topic": topic_name, "partitions": [{"partition": 0, "current_leader_epoch": current,
                                                      "leader_epoch": leader_epoch}]}]))
        return answer.topics[0].partitions[0]

    result = ask(0, 0)
    assert (result.error_code, result.leader_epoch, result.end_offset) == (ErrorCode.none, 0, 7)
    assert (ask(5).leader_epoch, ask(5).end_offset) == (-1, -1)  # an epoch this log never had
    assert ask(0, current=3).error_code == ErrorCode.unknown_leader_epoch


def test_leader_elections_and_reassignments_are_answered_as_a_one_broker_cluster(broker, topic_name):
    ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
    create_topic(broker.bootstrap, topic_name, 2)
    with WireClient(broker.bootstrap) as client:
        elected = client.call(request(ELECT_LEADERS, 2, election_type=0, timeout=5000, topic_partitions=[
            {"topic": topic_name, "partitions": [0, 5]}]))
        codes = {p.partition_id: p.error_code for p in elected.replica_election_results[0].partition_result}
        assert codes == {0: ErrorCode.election_not_needed, 5: ErrorCode.unknown_topic_or_partition}
        moved = client.call(request(ALTER_REASSIGNMENTS, 0, timeout=5000, topics=[{"name": topic_name, "partitions": [
            {"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": [1, 2]},
            {"partition_index": 1, "replicas": None}]}]))
        codes = [p.error_code for p in moved.responses[0].partitions]
        assert codes == [ErrorCode.none, ErrorCode.invalid_replica_assignment, ErrorCode.no_reassignment_in_progress]
        listed = client.call(request(LIST_REASSIGNMENTS, 0, timeout=5000, topics=None))
        assert listed.error_code == ErrorCode.none and listed.topics == ()
    # confluent-kafka's elect_leaders says the same.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic_name, 0)]).result(10)
    (error,) = result.values()
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED
